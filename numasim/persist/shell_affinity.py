"""The affinity a real shell gave itself on a persistent machine (``taskset -p -c LIST $$``).

A script that pins its own shell (numactl's ``test/bind_range`` does) expects every command it starts to
inherit that affinity. The shell is a real process, not a simulated one, so the machine records it by real
PID in ``ROOT/NAME/shells.json``, with the process's start time (field 22 of ``/proc/PID/stat``) so that a
recycled PID does not inherit a dead shell's affinity. A later command finds the nearest recorded ancestor
by walking its real parent chain (``os.getppid()``, then ``/proc/PID/stat``'s ppid) and starts its simulated
task with that affinity. Read and written while the machine's lock is held (:meth:`MachineStore.session`).

Examples
--------
>>> import os, tempfile
>>> from pathlib import Path
>>> d = Path(tempfile.mkdtemp())
>>> record(d, os.getpid(), {0, 1})
>>> inherited(d, os.getpid())
frozenset({0, 1})
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from numasim.fileio import atomic_write_text

__all__ = ["record", "recorded", "inherited", "process_start", "parent_pid", "FILE_NAME"]

FILE_NAME = "shells.json"
_MAX_DEPTH = 64
"""Ancestors looked at: a deeper process tree than this is not a shell script's."""


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` split after the command name (which may hold spaces and parentheses): field 3 (state)
    is index 0; None when the process does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """The start time of real process ``pid`` in clock ticks since boot (field 22), None if it is gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def parent_pid(pid: int) -> int | None:
    """The real parent of ``pid`` (field 4), None if it is gone."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 else None


def _load(directory: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads((directory / FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded(directory: Path, pid: int) -> frozenset[int] | None:
    """The affinity recorded for real process ``pid`` itself (if it is still the same process)."""
    entry = _load(directory).get(str(pid))
    if not isinstance(entry, dict) or entry.get("start") != process_start(pid):
        return None
    cpus = entry.get("cpus")
    return frozenset(int(c) for c in cpus) if isinstance(cpus, list) else None


def record(directory: Path, pid: int, cpus: set[int] | frozenset[int]) -> None:
    """Record ``cpus`` as real process ``pid``'s affinity; entries of processes that are gone are dropped."""
    entries = {
        key: entry for key, entry in _load(directory).items()
        if isinstance(entry, dict) and key.isdigit() and entry.get("start") == process_start(int(key))
    }  # fmt: skip
    entries[str(pid)] = {"start": process_start(pid), "cpus": sorted(cpus)}
    atomic_write_text(directory / FILE_NAME, json.dumps(entries, indent=1) + "\n")


def inherited(directory: Path, pid: int | None = None) -> frozenset[int] | None:
    """The affinity real process ``pid`` (default: this process's parent) inherits: that of the nearest
    recorded process among it and its ancestors, or None."""
    current: int | None = os.getppid() if pid is None else pid
    for _ in range(_MAX_DEPTH):
        if current is None or current <= 1:
            return None
        cpus = recorded(directory, current)
        if cpus is not None:
            return cpus
        current = parent_pid(current)
    return None
