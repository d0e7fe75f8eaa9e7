"""Programs of a persistent machine that are still running on the host (``memhog 1g &``).

A program started through a shim is a real process (the shim's Python) standing for a simulated one: the
simulated process gets the shim's PID, so the shell's ``$!`` names it for ``numastat -p``, ``migratepages`` and
``/proc/PID/numa_maps``. While the program runs (its simulated duration: memhog's page faults, ``sleep N``,
``stress -t N``) the shim stays alive with the machine unlocked, and the simulated process keeps its memory;
when it ends, or a signal ends it, the shim takes the lock again and the process exits. The machine records each
such process in ``ROOT/NAME/live.json``: real PID, start time (field 22 of ``/proc/PID/stat``, so a recycled
PID is not taken for it) and the simulated PIDs it holds (stress's workers too). A shim killed with SIGKILL
cannot clean up: every command reaps the processes whose real process is gone (:func:`reap`) before it looks
at the machine, as the kernel reaps a killed process's memory. Read and written while the machine's lock is held.

Examples
--------
>>> import os, tempfile
>>> from pathlib import Path
>>> d = Path(tempfile.mkdtemp())
>>> register(d, os.getpid(), [os.getpid(), 1001])
>>> running(d)[os.getpid()] == sorted([os.getpid(), 1001])
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from numasim.errors import MachineStateError
from numasim.fileio import atomic_write_text
from numasim.persist.shell_affinity import process_start

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["register", "unregister", "end", "running", "reap", "FILE_NAME"]

FILE_NAME = "live.json"


def _load(directory: Path) -> dict[str, dict[str, object]]:
    path = directory / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise MachineStateError(f"{path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):  # written atomically, so only a hand-edited or damaged file gets here
        raise MachineStateError(f"{path}: not the machine's list of running programs (a JSON object); "
                                f"`numasim machine reset {directory.name}` boots it afresh")  # fmt: skip
    return data


def _save(directory: Path, entries: dict[str, dict[str, object]]) -> None:
    if entries or (directory / FILE_NAME).exists():
        atomic_write_text(directory / FILE_NAME, json.dumps(entries, indent=1, sort_keys=True) + "\n")


def _pids(entry: dict[str, object]) -> list[int]:
    pids = entry.get("pids")
    return sorted(int(p) for p in pids) if isinstance(pids, list) else []


def register(directory: Path, host_pid: int, pids: list[int]) -> None:
    """Record that real process ``host_pid`` runs the simulated processes ``pids`` until it ends."""
    entries = _load(directory)
    entries[str(host_pid)] = {"start": process_start(host_pid), "pids": sorted(set(pids))}
    _save(directory, entries)


def unregister(directory: Path, host_pid: int) -> list[int]:
    """Forget real process ``host_pid``; returns the simulated processes it held."""
    entries = _load(directory)
    entry = entries.pop(str(host_pid), None)
    _save(directory, entries)
    return _pids(entry) if isinstance(entry, dict) else []


def end(directory: Path, kernel: Kernel, host_pid: int) -> list[int]:
    """Real process ``host_pid``'s program has ended: forget it and exit its simulated processes (those still
    alive); returns their PIDs."""
    return _exit(kernel, unregister(directory, host_pid))


def _exit(kernel: Kernel, pids: list[int]) -> list[int]:
    exited = []
    for pid in pids:
        task = kernel.tasks.get(pid)
        if task is not None and task.alive:
            kernel.exit(task)
            exited.append(pid)
    return exited


def running(directory: Path) -> dict[int, list[int]]:
    """Real PID -> simulated PIDs, of every recorded process that is still the process it was."""
    return {
        int(key): _pids(entry) for key, entry in _load(directory).items()
        if key.isdigit() and isinstance(entry, dict) and entry.get("start") == process_start(int(key))
    }  # fmt: skip


def reap(directory: Path, kernel: Kernel) -> list[int]:
    """Exit the simulated processes of every recorded real process that is gone (a shim killed by SIGKILL, a
    host that rebooted); returns their PIDs. The kernel frees their memory as at any exit."""
    entries = _load(directory)
    alive = running(directory)
    gone = [key for key in entries if not key.isdigit() or int(key) not in alive]
    reaped = []
    for key in gone:
        entry = entries.pop(key)
        reaped += _exit(kernel, _pids(entry) if isinstance(entry, dict) else [])
    if gone:
        _save(directory, entries)
    return reaped
