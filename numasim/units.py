"""Parsing and printing of sizes with the suffixes real tools use.

``parse_size("64G") == 64 * 2**30``: like numactl, stress and dd, suffixes are binary (K = 1024) unless written
with a ``B`` after a decimal unit as dd does (``kB`` = 1000, ``KiB`` = 1024).
"""

from __future__ import annotations

import re

__all__ = ["parse_size", "format_size", "PAGE_SIZE_BYTES", "MiB", "GiB", "KiB"]

PAGE_SIZE_BYTES = 4096
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_BINARY = {"": 1, "b": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40, "p": 1 << 50}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Parse a size such as ``"64G"``, ``"20M"``, ``"4096"``, ``"1.5GiB"``, ``"100kB"`` into bytes.

    Examples
    --------
    >>> parse_size("64G")
    68719476736
    >>> parse_size("100kB")
    100000
    """
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (expected e.g. 4096, 64K, 20M, 64G)")
    number, unit, binary_i, byte_b = m.groups()
    unit = unit.lower()
    if unit and byte_b and not binary_i:
        # dd's convention: kB, MB, GB are powers of 1000
        factor = 1000 ** "kmgtp".index(unit) * 1000
    else:
        factor = _BINARY[unit]
    value = float(number) * factor
    return int(round(value))


def format_size(size_bytes: int) -> str:
    """Format bytes with the largest binary unit that divides it to one decimal (``"64.0 GiB"``)."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:.1f} {unit}"
    return f"{size_bytes} B"
