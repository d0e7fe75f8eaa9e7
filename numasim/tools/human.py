"""gnulib ``human_readable`` as GNU dd calls it, and dd's number suffixes.

dd prints sizes and rates with ``human_autoscale | human_round_to_nearest | human_space_before_unit |
human_SI | human_B`` (gnulib lib/human.c): the amount is divided by 1000 (or 1024 for the ``GiB`` figure)
until it is below the base; below 10 it keeps one decimal (``2.3 GB/s``, ``1.0 kB``), from 10 on none
(``21 GB``); rounding is to nearest, and an amount that rounds up to the base moves to the next prefix.
Prefixes: ``k M G T P E Z Y`` (``kB`` lower-case with base 1000; ``KiB`` with base 1024).
"""

from __future__ import annotations

import re

__all__ = ["human_readable", "parse_dd_number", "format_g"]

_PREFIX = "kMGTPEZY"


def human_readable(amount: float, base: int = 1000) -> str:
    """``amount`` (bytes, or bytes per second) as dd prints it.

    Examples
    --------
    >>> human_readable(21474836480), human_readable(21474836480, 1024)
    ('21 GB', '20 GiB')
    >>> human_readable(2.3e9), human_readable(999.97), human_readable(1000), human_readable(512)
    ('2.3 GB', '1.0 kB', '1.0 kB', '512 B')
    """
    value = float(amount)
    exponent = 0
    while value >= base and exponent < len(_PREFIX):
        value /= base
        exponent += 1
    if exponent == 0:
        # below the base: an integer number of bytes, rounded (rates can be fractional)
        text = f"{value:.0f}"
        if int(text) >= base:
            return f"1.0 {_unit(1, base)}"
        return f"{text} B"
    text = f"{value:.1f}"
    if float(text) >= 10:
        text = f"{value:.0f}"
        if int(text) >= base and exponent < len(_PREFIX):
            return f"1.0 {_unit(exponent + 1, base)}"
    return f"{text} {_unit(exponent, base)}"


def _unit(exponent: int, base: int) -> str:
    p = _PREFIX[exponent - 1]
    if base == 1024:
        return f"{p.upper()}iB"
    return f"{p}B"


_DD_SUFFIX = {
    "": 1,
    "c": 1,
    "w": 2,
    "b": 512,
    "kB": 1000,
    "K": 1024,
    "KiB": 1024,
    "k": 1024,
    "MB": 1000**2,
    "M": 1024**2,
    "MiB": 1024**2,
    "xM": 1024**2,
    "GB": 1000**3,
    "G": 1024**3,
    "GiB": 1024**3,
    "TB": 1000**4,
    "T": 1024**4,
    "TiB": 1024**4,
}
_NUM_RE = re.compile(r"^(\d+)([A-Za-z]*)$")


def parse_dd_number(text: str) -> int:
    """A dd operand number: ``20M`` = 20 MiB, ``20MB`` = 20 * 10**6, ``1K``, ``2w``, ``1b``; products ``2x512``.

    Raises ``ValueError`` with dd's wording (``invalid number: '20Q'``).

    Examples
    --------
    >>> parse_dd_number("20M"), parse_dd_number("20MB"), parse_dd_number("2x4k")
    (20971520, 20000000, 8192)
    """
    total = 1
    for part in text.split("x"):
        m = _NUM_RE.match(part)
        if not m or m.group(2) not in _DD_SUFFIX:
            raise ValueError(f"invalid number: {text!r}")
        total *= int(m.group(1)) * _DD_SUFFIX[m.group(2)]
    return total


def format_g(value: float) -> str:
    """C's ``%g`` (6 significant digits, no trailing zeros), as dd prints the elapsed seconds.

    Examples
    --------
    >>> format_g(9.146731), format_g(12.2229), format_g(0.000123456)
    ('9.14673', '12.2229', '0.000123456')
    """
    return f"{value:g}"
