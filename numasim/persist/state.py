"""The saved state of a simulated kernel: a versioned header line, then the kernel object itself.

The state is the kernel's own state (zones and free areas, tasks and their mappings and policies, shared memory
segments, counters, the hugetlb pool), not a log of the commands that made it, so loading it costs the same
however long the machine has run. The payload is a :mod:`pickle` of the :class:`~numasim.kernel.kernel.Kernel`;
the header says which state format and which numasim wrote it, and a reader refuses a state written by another
format or numasim version (whose classes may differ) instead of guessing. Only load states you wrote yourself:
a pickle can run code when it is loaded.

Examples
--------
>>> from numasim.kernel.kernel import Kernel
>>> from numasim.topology.builders import glueless
>>> data = dump_kernel(Kernel(glueless(2)))
>>> data.split(b"\\n", 1)[0].decode()[:44]
'{"format": "numasim-kernel-state", "version"'
>>> load_kernel(data, "example").machine.node_ids
[0, 1]
"""

from __future__ import annotations

import json
import pickle
from typing import TYPE_CHECKING

from numasim.errors import MachineStateError

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["STATE_FORMAT", "dump_kernel", "load_kernel"]

STATE_FORMAT = 1
"""Bumped whenever what a saved kernel holds changes in a way an older reader would misread."""
_MAGIC = "numasim-kernel-state"


def _numasim_version() -> str:
    """numasim's version and a fingerprint of the code whose classes a saved kernel holds (the kernel and topology
    packages): a state written by other code is refused, even between two commits of one version."""
    global _VERSION
    if _VERSION is None:
        import hashlib
        from pathlib import Path

        from numasim import __version__

        root = Path(__file__).resolve().parents[1]
        digest = hashlib.sha256()
        for path in sorted([*root.glob("kernel/*.py"), *root.glob("topology/*.py")]):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _VERSION = f"{__version__}+{digest.hexdigest()[:12]}"
    return _VERSION


_VERSION: str | None = None


def dump_kernel(kernel: Kernel) -> bytes:
    """The kernel's state as bytes: one JSON header line, then the pickled kernel."""
    header = {"format": _MAGIC, "version": STATE_FORMAT, "numasim": _numasim_version(),
              "machine": kernel.machine.name}  # fmt: skip
    return json.dumps(header).encode() + b"\n" + pickle.dumps(kernel, protocol=pickle.HIGHEST_PROTOCOL)


def load_kernel(data: bytes, where: str, reset_hint: str = "") -> Kernel:
    """The kernel saved in ``data`` (read from ``where``, named in errors); a state that is not one, or was
    written by another state format or numasim version, raises :class:`MachineStateError` ending with
    ``reset_hint``."""
    from numasim.kernel.kernel import Kernel

    hint = f"; {reset_hint}" if reset_hint else ""
    head, newline, payload = data.partition(b"\n")
    try:
        header = json.loads(head.decode()) if newline else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("format") != _MAGIC:
        raise MachineStateError(f"{where}: not a saved numasim kernel state (no valid header){hint}")
    if header.get("version") != STATE_FORMAT or header.get("numasim") != _numasim_version():
        raise MachineStateError(
            f"{where}: written by numasim {header.get('numasim')} (state format {header.get('version')}); this is "
            f"numasim {_numasim_version()} (state format {STATE_FORMAT}), which does not read it{hint}"
        )
    try:
        kernel = pickle.loads(payload)
    except Exception as exc:  # a truncated or damaged payload: any unpickling error means the same
        raise MachineStateError(f"{where}: the saved kernel is damaged ({type(exc).__name__}: {exc}){hint}") from None
    if not isinstance(kernel, Kernel):
        raise MachineStateError(f"{where}: the saved state holds a {type(kernel).__name__}, not a kernel{hint}")
    _relink_shared_views(kernel)
    return kernel


def _relink_shared_views(kernel: Kernel) -> None:
    """A mapping of a shared memory object holds *views* of the object's page arrays (its faults are the
    object's); pickling copies them, so they are made views again."""
    for task in kernel.tasks.values():
        for vma in task.mm.vmas:
            if vma.shm is not None:
                vma.nodes = vma.shm.nodes[vma.pgoff : vma.pgoff + vma.npages]
                vma.zones = vma.shm.zones[vma.pgoff : vma.pgoff + vma.npages]
