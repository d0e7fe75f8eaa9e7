"""lmbench ``lat_mem_rd`` output: one block per stride, each a list of ``size_MB latency_ns`` pairs.

``lat_mem_rd`` writes to stderr, blocks headed by ``"stride=64`` (with the leading quote, for xgraph) and
separated by blank lines::

    "stride=64
    0.00049 1.181
    0.00098 1.181
    ...
    64.00000 92.310
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["LatMemRdCurve", "LatMemRdResult", "parse_lat_mem_rd", "parse_lat_mem_rd_text", "looks_like_lat_mem_rd"]

_STRIDE_RE = re.compile(r'^\s*"?\s*stride\s*=\s*(\d+)\s*$', re.IGNORECASE)


@dataclass(frozen=True)
class LatMemRdCurve:
    """Load latency against working-set size, for one stride."""

    stride_bytes: int
    size_bytes: np.ndarray
    latency_ns: np.ndarray


@dataclass(frozen=True)
class LatMemRdResult:
    source: str
    curves: list[LatMemRdCurve]
    tool_version: str | None = None

    def curve(self, stride_bytes: int | None = None) -> LatMemRdCurve:
        """The curve of ``stride_bytes`` (default: the largest stride, the one that defeats prefetching best)."""
        if stride_bytes is None:
            return max(self.curves, key=lambda c: c.stride_bytes)
        for c in self.curves:
            if c.stride_bytes == stride_bytes:
                return c
        raise FormatError(self.source, f"no stride={stride_bytes} block (have {[c.stride_bytes for c in self.curves]})")


def looks_like_lat_mem_rd(text: str) -> bool:
    return any(_STRIDE_RE.match(line) for line in text.splitlines()[:50])


def parse_lat_mem_rd_text(text: str, source: str = "<text>") -> LatMemRdResult:
    """Parse ``lat_mem_rd`` output.

    Examples
    --------
    >>> r = parse_lat_mem_rd_text('"stride=64\\n0.00049 1.2\\n1.00000 9.5\\n')
    >>> r.curves[0].stride_bytes, r.curves[0].size_bytes.tolist()
    (64, [514, 1048576])
    """
    curves: list[LatMemRdCurve] = []
    stride: int | None = None
    pairs: list[tuple[float, float]] = []
    start_line = 0

    def close() -> None:
        if stride is None:
            return
        if not pairs:
            raise FormatError(source, f"stride={stride} block has no 'size_MB latency_ns' lines", start_line)
        arr = np.array(pairs)
        curves.append(
            LatMemRdCurve(
                stride_bytes=stride,
                size_bytes=np.round(arr[:, 0] * (1 << 20)).astype(np.int64),
                latency_ns=arr[:, 1],
            )
        )

    for ln in numbered_lines(text):
        t = ln.text.strip()
        m = _STRIDE_RE.match(t)
        if m:
            close()
            stride, pairs, start_line = int(m.group(1)), [], ln.number
            continue
        if not t:
            continue
        if stride is None:
            raise FormatError(source, f"expected a '\"stride=N' line before data, got {t!r}", ln.number)
        cells = t.split()
        if len(cells) != 2:
            raise FormatError(source, f"expected 'size_MB latency_ns', got {len(cells)} fields: {t!r}", ln.number)
        size_mb = to_float(cells[0], source, ln.number, "size_MB")
        lat = to_float(cells[1], source, ln.number, "latency_ns")
        if size_mb <= 0 or lat <= 0:
            raise FormatError(source, f"size and latency must be positive, got {t!r}", ln.number)
        pairs.append((size_mb, lat))
    close()
    if not curves:
        raise FormatError(source, "no lat_mem_rd '\"stride=N' block found")
    return LatMemRdResult(source=source, curves=curves, tool_version="lmbench lat_mem_rd")


def parse_lat_mem_rd(path: str | Path) -> LatMemRdResult:
    source, text = read_source(path)
    return parse_lat_mem_rd_text(text, source)
