"""``dd`` summary lines, old and new coreutils wording, any rate unit.

* new: ``1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.4 s, 2.3 GB/s``
* old: ``21474836480 bytes (21 GB) copied, 9.14673 s, 2.3 GB/s``
* BSD/macOS-like: ``1073741824 bytes transferred in 0.4 secs (2684354560 bytes/sec)``

Rates are recomputed from bytes and seconds (dd rounds its printed rate to two digits); the printed rate is
kept too. A ``numactl --cpubind=C --membind=M dd ...`` command line before a summary tags it with the nodes,
and ``if=/dev/zero`` / ``of=/dev/null`` say whether it measured a write or a read of the memory file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["DdRecord", "DdResult", "parse_dd", "parse_dd_text", "looks_like_dd", "RATE_UNITS"]

RATE_UNITS = {
    "B/s": 1.0,
    "kB/s": 1e3,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "KiB/s": 1024.0,
    "MiB/s": 1024.0**2,
    "GiB/s": 1024.0**3,
    "TiB/s": 1024.0**4,
    "bytes/sec": 1.0,
}
_GNU_RE = re.compile(
    r"^\s*(\d+)\s+bytes?\s*(?:\(([^)]*)\))?\s*copied,\s*([\d.,]+(?:e[-+]?\d+)?)\s*s,\s*([\d.,]+)\s*([A-Za-z]+/s)\s*$"
)
_BSD_RE = re.compile(r"^\s*(\d+)\s+bytes transferred in\s+([\d.]+)\s+secs\s+\((\d+)\s+bytes/sec\)\s*$")
_BIND_RE = re.compile(r"--cpu(?:node)?bind[= ](\d+)")
_MEM_RE = re.compile(r"--membind[= ](\d+)")


@dataclass(frozen=True)
class DdRecord:
    line: int
    size_bytes: int
    seconds: float
    bandwidth_gb_s: float
    """Recomputed as bytes / seconds / 1e9."""
    printed_rate_bytes_s: float
    direction: str | None = None
    """``"write"`` (``if=/dev/zero``), ``"read"`` (``of=/dev/null``) or ``None`` when no command line precedes."""
    cpu_node: int | None = None
    mem_node: int | None = None
    command: str | None = None


@dataclass(frozen=True)
class DdResult:
    source: str
    records: list[DdRecord]
    tool_version: str | None = None


def looks_like_dd(text: str) -> bool:
    return bool(re.search(r"bytes.*copied,.*/s", text) or "bytes transferred in" in text)


def _num(cell: str, source: str, line: int, what: str) -> float:
    # Some locales print a decimal comma ("0,4 s"); a thousands separator never appears in these fields.
    return to_float(cell.replace(",", "."), source, line, what)


def parse_dd_text(text: str, source: str = "<text>") -> DdResult:
    """Parse dd summary lines.

    Examples
    --------
    >>> r = parse_dd_text("21474836480 bytes (21 GB) copied, 9.14673 s, 2.3 GB/s")
    >>> round(r.records[0].bandwidth_gb_s, 3)
    2.348
    """
    records: list[DdRecord] = []
    command: str | None = None
    for ln in numbered_lines(text):
        t = ln.text.strip()
        if re.search(r"(^|\s|#\s*)dd\s", t) and ("if=" in t or "of=" in t):
            command = t
            continue
        m = _GNU_RE.match(t)
        b = _BSD_RE.match(t) if m is None else None
        if m is None and b is None:
            if "copied," in t and "bytes" in t:
                raise FormatError(source, f"malformed dd summary line: {t!r}", ln.number)
            continue
        if m is not None:
            size = int(m.group(1))
            seconds = _num(m.group(3), source, ln.number, "seconds")
            unit = m.group(5)
            if unit not in RATE_UNITS:
                raise FormatError(source, f"unknown dd rate unit {unit!r} (known: {sorted(RATE_UNITS)})", ln.number)
            printed = _num(m.group(4), source, ln.number, "rate") * RATE_UNITS[unit]
        else:
            assert b is not None
            size = int(b.group(1))
            seconds = _num(b.group(2), source, ln.number, "seconds")
            printed = float(b.group(3))
        if seconds <= 0:
            raise FormatError(source, f"dd elapsed time must be positive, got {seconds}", ln.number)
        direction = cpu = mem = None
        if command is not None:
            direction = "write" if "if=/dev/zero" in command else "read" if "of=/dev/null" in command else None
            cm, mm = _BIND_RE.search(command), _MEM_RE.search(command)
            cpu = int(cm.group(1)) if cm else None
            mem = int(mm.group(1)) if mm else None
        records.append(
            DdRecord(
                line=ln.number,
                size_bytes=size,
                seconds=seconds,
                bandwidth_gb_s=size / seconds / 1e9,
                printed_rate_bytes_s=printed,
                direction=direction,
                cpu_node=cpu,
                mem_node=mem,
                command=command,
            )
        )
        command = None
    if not records:
        raise FormatError(source, "no dd summary line ('N bytes (...) copied, T s, R GB/s') found")
    return DdResult(source=source, records=records, tool_version="dd")


def parse_dd(path: str | Path) -> DdResult:
    source, text = read_source(path)
    return parse_dd_text(text, source)
