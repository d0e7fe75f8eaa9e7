"""A persistent machine's /sys and /proc views as a real file tree, replaced whole after every change.

``ROOT/NAME/fs`` is a symlink to the current generation ``ROOT/NAME/fs.N``, a directory laid out as Linux's
``/``::

    fs/sys/devices/system/node/{online,possible,has_cpu,...}, nodeN/{cpulist,cpumap,distance,meminfo,...},
                              nodeN/cpuK -> ../../cpu/cpuK
    fs/sys/devices/system/cpu/{online,possible,present,...}, cpuN/topology/..., cpuN/nodeM -> ../../node/nodeM
    fs/sys/bus/cpu/devices/cpuN -> ../../../devices/system/cpu/cpuN
    fs/proc/{meminfo,vmstat,zoneinfo,buddyinfo}, fs/proc/PID/{numa_maps,status}

(:mod:`numasim.kernel.sysfs`, :func:`numasim.kernel.procfs.proc_files`). :func:`write_views` runs, under the
machine's lock, whenever the store saves the kernel: it writes generation N+1 in full beside the old one, then
renames a new symlink over ``fs`` (one atomic ``rename``), so a reader that opens paths under ``fs/`` sees one
whole generation, never a mix; the generation before stays until the next write, for readers still inside it.
The cpu subtrees never change (no cpu hotplug is simulated) and are thousands of files on a large machine, so
they are written once, into ``ROOT/NAME/fs.static.DIGEST``, and each generation's ``sys/devices/system/cpu`` and
``sys/bus/cpu/devices`` are symlinks to them: the one place where the tree is not Linux's layout (and a reader
that goes from a cpu to its node through ``cpuN/nodeM`` reaches the current generation's node). Inside
``numasim machine exec`` the bind mounts resolve them, and /sys there is laid out exactly as Linux lays it out.
Symlinks are relative, so they resolve inside the machine's directory (and, bind-mounted, inside ``/sys``).

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from numasim.kernel.kernel import Kernel
>>> from numasim.topology.builders import glueless
>>> d = Path(tempfile.mkdtemp())
>>> tree = write_views(d, Kernel(glueless(2)))
>>> (d / "fs/sys/devices/system/node/online").read_text(), tree.name
('0-1\\n', 'fs.1')
>>> (d / "fs/sys/devices/system/node/node1/cpu8/topology/core_id").read_text()
'0\\n'
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from numasim.fileio import output_error

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["VIEWS_LINK", "write_views", "views_root"]

VIEWS_LINK = "fs"
"""The name of the symlink to the current generation in a machine's directory."""
_GENERATION = re.compile(r"^fs\.(\d+)$")
_PARTIAL = re.compile(r"^\.fs\.(\d+|static\.[0-9a-f]+)\.partial$")


def views_root(directory: Path) -> Path:
    """The current generation of machine directory ``directory``'s views (the resolved ``fs`` symlink)."""
    return (directory / VIEWS_LINK).resolve()


def _generations(directory: Path) -> list[int]:
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _GENERATION.match(p.name)))


_STATIC = ("sys/devices/system/cpu", "sys/bus/cpu/devices")
"""Subtrees that depend only on the machine's cpus (no cpu hotplug is simulated)."""
_STATIC_DIR = re.compile(r"^fs\.static\.([0-9a-f]{16})$")


def _write_files(root: Path, files: dict[str, str], links: dict[str, str]) -> None:
    made: set[str] = set()
    for rel in [*files, *links]:
        parent = os.path.dirname(rel)
        if parent not in made:
            os.makedirs(root / parent, exist_ok=True)
            made.add(parent)
    # thousands of small files on a large machine: three system calls each (open() adds fstat, ioctl, lseek)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for rel, text in files.items():
        fd = os.open(root / rel, flags, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    for rel, target in links.items():
        os.symlink(target, root / rel)


def _static_tree(directory: Path, files: dict[str, str], links: dict[str, str]) -> str:
    """The shared directory holding the cpu subtrees with this content (written once, named by a digest of
    the content); returns its name."""
    digest = hashlib.sha256(repr((sorted(files.items()), sorted(links.items()))).encode()).hexdigest()[:16]
    name = f"fs.static.{digest}"
    if not (directory / name).is_dir():
        partial = directory / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        _write_files(partial, files, links)
        # cpuN/nodeM -> ../../node/nodeM resolves from here: to the current generation's nodes (inside
        # `machine exec`, where only the cpu subtrees are mounted, to the mounted ones)
        os.symlink(f"../../../../{VIEWS_LINK}/sys/devices/system/node", partial / "sys/devices/system/node")
        os.rename(partial, directory / name)
    return name


def _fill(directory: Path, root: Path, kernel: Kernel) -> str:
    """Write generation ``root``: the node and /proc files, and symlinks to the shared cpu subtrees; returns the
    name of the shared directory it links to."""
    from numasim.kernel.procfs import proc_files
    from numasim.kernel.sysfs import sysfs_entries

    entries = sysfs_entries(kernel)
    files = {**entries.files, **proc_files(kernel)}
    static_files = {k: v for k, v in files.items() if k.startswith(_STATIC)}
    static_links = {k: v for k, v in entries.links.items() if k.startswith(_STATIC)}
    static = _static_tree(directory, static_files, static_links)
    _write_files(root, {k: v for k, v in files.items() if k not in static_files},
                 {k: v for k, v in entries.links.items() if k not in static_links})  # fmt: skip
    for rel in _STATIC:  # e.g. fs.N/sys/devices/system/cpu -> ../../../../fs.static.D/sys/devices/system/cpu
        os.makedirs(root / os.path.dirname(rel), exist_ok=True)
        os.symlink("../" * (rel.count("/") + 1) + f"{static}/{rel}", root / rel)
    return static


def write_views(directory: str | Path, kernel: Kernel) -> Path:
    """Write ``kernel``'s views as the next generation under ``directory`` and make it current (module
    docstring); returns the new generation's directory. The caller holds the machine's lock."""
    d = Path(directory)
    try:
        for p in d.iterdir():  # a write killed half way left its partial tree: nobody reads it
            if _PARTIAL.match(p.name):
                shutil.rmtree(p, ignore_errors=True)
        old = _generations(d)
        n = (old[-1] + 1) if old else 1
        partial = d / f".fs.{n}.partial"
        partial.mkdir()
        static = _fill(d, partial, kernel)
        tree = d / f"fs.{n}"
        os.rename(partial, tree)
        link = d / f".{VIEWS_LINK}.{n}.link"
        link.unlink(missing_ok=True)
        os.symlink(tree.name, link)
        os.replace(link, d / VIEWS_LINK)  # the switch: atomic, readers see the old tree or the new one
    except OSError as exc:
        raise output_error(d / VIEWS_LINK, exc, is_dir=True) from None
    from numasim.persist.namespace import pinned_generations

    pinned = pinned_generations(d)  # mounted by a running `machine exec`: emptying it would empty its /sys
    for g in old[:-1]:  # keep the previous generation for readers still walking it
        if f"fs.{g}" not in pinned:
            shutil.rmtree(d / f"fs.{g}", ignore_errors=True)
    used = {static} | {os.readlink(p).split("/")[-5] for p in d.glob(f"fs.*/{_STATIC[0]}") if p.is_symlink()}
    for p in d.iterdir():  # shared cpu subtrees no generation links to (the machine's cpus changed)
        if _STATIC_DIR.match(p.name) and p.name not in used:
            shutil.rmtree(p, ignore_errors=True)
    _remount_inside_exec(d, tree)
    return tree


def _remount_inside_exec(directory: Path, tree: Path) -> None:
    """Inside ``numasim machine exec`` of this machine, mount the new generation over the old one, so the
    script sees what this command changed (:mod:`numasim.persist.namespace`)."""
    from numasim.persist.namespace import remount_if_inside

    remount_if_inside(directory, tree)
