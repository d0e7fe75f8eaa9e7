"""The kernel's list format for cpu and node sets (``%*pbl``): ``"0-3,8,10-11"``.

Used by sysfs (``cpulist``, ``has_memory``), ``/proc/PID/status`` (``Mems_allowed_list``), numa_maps policy
strings and our TOML files.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["parse_cpulist", "format_cpulist"]


def parse_cpulist(text: str) -> list[int]:
    """Parse ``"0-3,8"`` into ``[0, 1, 2, 3, 8]`` (sorted, duplicates removed; empty string -> ``[]``).

    Examples
    --------
    >>> parse_cpulist("0-2,8,10-11")
    [0, 1, 2, 8, 10, 11]
    """
    out: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for item in text.split(","):
        item = item.strip()
        if "-" in item:
            lo_s, hi_s = item.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise ValueError(f"bad range {item!r} in list {text!r}")
            out.update(range(lo, hi + 1))
        else:
            out.add(int(item))
    if any(v < 0 for v in out):
        raise ValueError(f"negative id in list {text!r}")
    return sorted(out)


def format_cpulist(ids: Iterable[int]) -> str:
    """Format ids as the kernel does: ascending runs joined by commas (``[0,1,2,8]`` -> ``"0-2,8"``).

    Examples
    --------
    >>> format_cpulist([8, 0, 1, 2])
    '0-2,8'
    """
    values = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)
