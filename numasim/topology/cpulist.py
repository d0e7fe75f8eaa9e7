"""The kernel's list format for cpu and node sets (``%*pbl``): ``"0-3,8,10-11"``.

Used by sysfs (``cpulist``, ``has_memory``), ``/proc/PID/status`` (``Mems_allowed_list``), numa_maps policy
strings and our TOML files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["parse_cpulist", "format_cpulist", "MAX_LIST_ID"]

MAX_LIST_ID = 65535
"""Largest cpu or node id a list may name (Linux: NR_CPUS <= 8192, MAX_NUMNODES <= 1024)."""

_ITEM = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$", re.ASCII)


def parse_cpulist(text: str) -> list[int]:
    """Parse ``"0-3,8"`` into ``[0, 1, 2, 3, 8]`` (sorted, duplicates removed; empty string -> ``[]``).

    Raises ValueError with a short message naming the bad item (never Python's own ``int()`` text); ids above
    :data:`MAX_LIST_ID` are refused (Linux's ``NR_CPUS`` is at most 8192), so a list such as ``0-99999999999``
    cannot exhaust memory.

    Examples
    --------
    >>> parse_cpulist("0-2,8,10-11")
    [0, 1, 2, 8, 10, 11]
    >>> parse_cpulist("0-x")
    Traceback (most recent call last):
    ...
    ValueError: item '0-x' is not a number or a range a-b
    """
    out: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for item in text.split(","):
        m = _ITEM.match(item)
        if m is None:
            raise ValueError(f"item {item.strip()[:40]!r} is not a number or a range a-b")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"item {item.strip()!r} is a range that runs backwards")
        if hi > MAX_LIST_ID:
            raise ValueError(f"id {hi} is above {MAX_LIST_ID}")
        out.update(range(lo, hi + 1))
    return sorted(out)


def format_cpulist(ids: Iterable[int], *, shortest_range: int = 2) -> str:
    """Format ids as the kernel does: ascending runs joined by commas (``[0,1,2,8]`` -> ``"0-2,8"``).

    ``shortest_range``: the shortest run written ``a-b``; shorter runs are listed one by one (the kernel's
    ``%*pbl``: 2, ``0-1``; util-linux's ``cpulist_create``: 3, ``0,1``).

    Examples
    --------
    >>> format_cpulist([8, 0, 1, 2]), format_cpulist([0, 1, 5]), format_cpulist([0, 1, 5], shortest_range=3)
    ('0-2,8', '0-1,5', '0,1,5')
    """
    values = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i + 1 >= shortest_range:
            parts.append(f"{values[i]}-{values[j]}")
        else:
            parts += [str(v) for v in values[i : j + 1]]
        i = j + 1
    return ",".join(parts)
