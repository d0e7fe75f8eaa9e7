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
whole generation, never a mix; the generation before stays until the next write, for readers still inside it
(its cpu subtrees, which never change, move into the new generation rather than being written again).
Symlinks are relative, so they resolve inside the tree (and, bind-mounted by ``numasim machine exec``, inside
``/sys``).

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
_PARTIAL = re.compile(r"^\.fs\.(\d+)\.partial$")


def views_root(directory: Path) -> Path:
    """The current generation of machine directory ``directory``'s views (the resolved ``fs`` symlink)."""
    return (directory / VIEWS_LINK).resolve()


def _generations(directory: Path) -> list[int]:
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _GENERATION.match(p.name)))


_STATIC = ("sys/devices/system/cpu", "sys/bus/cpu/devices")
"""Subtrees that depend only on the machine (cpus and their topology; no cpu hotplug is simulated): a new
generation takes them over from the one before by renaming, instead of writing thousands of files again."""


def _fill(root: Path, kernel: Kernel, previous: Path | None) -> None:
    from numasim.kernel.procfs import proc_files
    from numasim.kernel.sysfs import CPU_DIR, sysfs_entries

    entries = sysfs_entries(kernel)
    files = {**entries.files, **proc_files(kernel)}
    links = entries.links
    if previous is not None and _static_matches(previous, files[f"{CPU_DIR}/present"]):
        for rel in _STATIC:
            os.makedirs(root / os.path.dirname(rel), exist_ok=True)
            os.rename(previous / rel, root / rel)
        files = {k: v for k, v in files.items() if not k.startswith(_STATIC)}
        links = {k: v for k, v in links.items() if not k.startswith(_STATIC)}
    made: set[str] = set()
    for rel in [*files, *links]:
        parent = os.path.dirname(rel)
        if parent not in made:
            os.makedirs(root / parent, exist_ok=True)
            made.add(parent)
    for rel, text in files.items():
        with open(root / rel, "w", encoding="utf-8") as f:
            f.write(text)
    for rel, target in links.items():
        os.symlink(target, root / rel)


def _static_matches(previous: Path, present: str) -> bool:
    """The previous generation holds the static subtrees of the same cpus."""
    try:
        same = (previous / "sys/devices/system/cpu/present").read_text(encoding="utf-8") == present
    except OSError:
        return False
    return same and all((previous / rel).is_dir() for rel in _STATIC)


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
        _fill(partial, kernel, d / f"fs.{old[-1]}" if old else None)
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
    _remount_inside_exec(d, tree)
    return tree


def _remount_inside_exec(directory: Path, tree: Path) -> None:
    """Inside ``numasim machine exec`` of this machine, mount the new generation over the old one, so the
    script sees what this command changed (:mod:`numasim.persist.namespace`)."""
    from numasim.persist.namespace import remount_if_inside

    remount_if_inside(directory, tree)
