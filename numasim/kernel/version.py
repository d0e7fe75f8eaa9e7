"""Kernel versions: one parser and one modelled range for the whole project.

Every behaviour the spec marks **[VER]** compares a ``(major, minor)`` pair. A version is written as ``uname -r``
gives it or shorter: ``"6.12"``, ``"6.1.0-13-amd64"``. numasim models the rules of 6.1 to 6.12 (each [VER] switch
lies in that range); golden tests pin 6.1 and 6.12.

>>> parse_version("6.1.0-13-amd64"), parse_version((6, 12))
((6, 1), (6, 12))
>>> check_modelled("5.15")
Traceback (most recent call last):
...
numasim.errors.KernelConfigError: kernel version 5.15: only kernels 6.1 .. 6.12 are modelled
"""

from __future__ import annotations

import re

from numasim.errors import KernelConfigError

__all__ = ["KernelVersion", "MODELLED", "GOLDEN", "parse_version", "check_modelled"]

KernelVersion = tuple[int, int]

MODELLED: tuple[KernelVersion, KernelVersion] = ((6, 1), (6, 12))
"""The first and last kernel whose rules are modelled (inclusive)."""
GOLDEN = ("6.1", "6.12")
"""The kernels whose behaviour golden tests pin."""

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?(?:[-+~]\S*)?")


def parse_version(version: str | KernelVersion) -> KernelVersion:
    """``"6.12"`` or ``"6.1.0-13-amd64"`` -> ``(6, 12)``; a tuple is returned as is. Anything else is a
    :class:`~numasim.errors.KernelConfigError` naming the value."""
    if isinstance(version, tuple):
        return version
    m = _VERSION.fullmatch(str(version).strip())
    if m is None:
        raise KernelConfigError(f"kernel version {version!r}: expected MAJOR.MINOR such as 6.12")
    return int(m.group(1)), int(m.group(2))


def check_modelled(version: str | KernelVersion) -> KernelVersion:
    """The parsed version if numasim models it (6.1 .. 6.12), else a :class:`KernelConfigError` saying so."""
    lo, hi = MODELLED
    try:
        v = parse_version(version)
    except KernelConfigError as exc:
        raise KernelConfigError(f"{exc} (modelled: {lo[0]}.{lo[1]} .. {hi[0]}.{hi[1]})") from None
    if not lo <= v <= hi:
        raise KernelConfigError(
            f"kernel version {version if isinstance(version, str) else '.'.join(map(str, version))}: "
            f"only kernels {lo[0]}.{lo[1]} .. {hi[0]}.{hi[1]} are modelled"
        )
    return v
