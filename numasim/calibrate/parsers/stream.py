"""STREAM benchmark output: the ``Copy: / Scale: / Add: / Triad:`` best-rate lines (MB/s, 10**6 bytes/s)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["StreamResult", "parse_stream", "parse_stream_text", "looks_like_stream", "STREAM_KERNELS"]

STREAM_KERNELS = ("copy", "scale", "add", "triad")
_LINE_RE = re.compile(r"^\s*(Copy|Scale|Add|Triad)\s*:\s*(.*)$")
_VERSION_RE = re.compile(r"STREAM version \$Revision:\s*([\d.]+)")


@dataclass(frozen=True)
class StreamResult:
    """Best rate per kernel (MB/s) and the bytes each kernel moves per element (2, 2, 3, 3 arrays x 8 bytes)."""

    source: str
    best_rate_mb_s: dict[str, float]
    tool_version: str | None = None


def looks_like_stream(text: str) -> bool:
    return "Best Rate MB/s" in text or bool(re.search(r"^\s*Triad:\s+[\d.]+", text, re.MULTILINE))


def parse_stream_text(text: str, source: str = "<text>") -> StreamResult:
    """Parse STREAM output.

    Examples
    --------
    >>> parse_stream_text("Triad:      12916.7     0.019028     0.018581     0.019508").best_rate_mb_s
    {'triad': 12916.7}
    """
    rates: dict[str, float] = {}
    version = None
    for ln in numbered_lines(text):
        v = _VERSION_RE.search(ln.text)
        if v:
            version = v.group(1)
        m = _LINE_RE.match(ln.text)
        if not m:
            continue
        cells = m.group(2).split()
        if len(cells) not in (1, 4):
            raise FormatError(source, f"{m.group(1)}: expected 'rate avg min max', got {len(cells)} fields", ln.number)
        rates[m.group(1).lower()] = to_float(cells[0], source, ln.number, f"{m.group(1)} best rate MB/s")
    if not rates:
        raise FormatError(source, "no STREAM 'Copy:/Scale:/Add:/Triad:' lines found")
    return StreamResult(source=source, best_rate_mb_s=rates, tool_version=version)


def parse_stream(path: str | Path) -> StreamResult:
    source, text = read_source(path)
    return parse_stream_text(text, source)
