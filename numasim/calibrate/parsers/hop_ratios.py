"""Relative access costs by hop count, as articles quote them (``2-hop reads are 30 % slower than local``).

A small text format, so such numbers can be calibration inputs with provenance::

    # numasim hop-ratio table
    # source: Drepper, What every programmer should know about memory, part 4, section 5.4
    read 0 1.00
    read 1 1.09
    read 2 1.30
    write 2 1.49
    read_bandwidth 1 0.80

Each line is ``<quantity> <hops> <ratio>``: ``read``/``write`` latency (cost) relative to a local read,
``read_bandwidth`` relative to local read bandwidth. Comments start with ``#``. Ratios carry no absolute
scale: the fitter must be told (and says) what local latency it assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["HopRatioResult", "parse_hop_ratios", "parse_hop_ratios_text", "looks_like_hop_ratios", "QUANTITIES"]

QUANTITIES = ("read", "write", "read_bandwidth")
_HEADER = "numasim hop-ratio table"


@dataclass(frozen=True)
class HopRatioResult:
    source: str
    ratios: dict[str, dict[int, float]] = field(default_factory=dict)
    """``ratios["read"][2] == 1.30``."""
    tool_version: str | None = "hop-ratio table"


def looks_like_hop_ratios(text: str) -> bool:
    return _HEADER in text[:500]


def parse_hop_ratios_text(text: str, source: str = "<text>") -> HopRatioResult:
    """Parse a hop-ratio table.

    Examples
    --------
    >>> parse_hop_ratios_text("read 0 1.0\\nread 2 1.30  # AMD").ratios
    {'read': {0: 1.0, 2: 1.3}}
    """
    ratios: dict[str, dict[int, float]] = {}
    for ln in numbered_lines(text):
        t = ln.text.split("#", 1)[0].strip()
        if not t:
            continue
        cells = t.split()
        if len(cells) != 3:
            raise FormatError(source, f"expected '<quantity> <hops> <ratio>', got {t!r}", ln.number)
        q, hops, ratio = cells
        if q not in QUANTITIES:
            raise FormatError(source, f"quantity {q!r} is not one of {QUANTITIES}", ln.number)
        if not re.fullmatch(r"\d+", hops):
            raise FormatError(source, f"hops {hops!r} is not a non-negative integer", ln.number)
        value = to_float(ratio, source, ln.number, f"{q} ratio")
        if value <= 0:
            raise FormatError(source, f"{q} ratio must be positive, got {value}", ln.number)
        ratios.setdefault(q, {})[int(hops)] = value
    if not ratios:
        raise FormatError(source, "no '<quantity> <hops> <ratio>' lines")
    return HopRatioResult(source=source, ratios=ratios)


def parse_hop_ratios(path: str | Path) -> HopRatioResult:
    source, text = read_source(path)
    return parse_hop_ratios_text(text, source)
