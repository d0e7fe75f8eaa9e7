"""GFP flags (``include/linux/gfp_types.h``) and ``gfp_zone()`` (``include/linux/gfp.h``) for x86_64.

Only the bits that change placement are modelled; values follow the 6.1 layout (the numbers themselves never
matter to the simulation, only which bits are set). ``__GFP_ATOMIC`` exists up to 6.2 only; it is kept so that a
6.1 kernel can be simulated and is ignored on 6.3+ kernels (whose ``GFP_ATOMIC`` is recognised by the missing
``__GFP_DIRECT_RECLAIM`` instead).
"""

from __future__ import annotations

from enum import IntFlag

from numasim.kernel.zones import ZoneType

__all__ = [
    "Gfp",
    "GFP_KERNEL",
    "GFP_ATOMIC",
    "GFP_NOWAIT",
    "GFP_NOIO",
    "GFP_NOFS",
    "GFP_USER",
    "GFP_DMA",
    "GFP_DMA32",
    "GFP_HIGHUSER",
    "GFP_HIGHUSER_MOVABLE",
    "GFP_TRANSHUGE_LIGHT",
    "GFP_TRANSHUGE",
    "gfp_zone",
    "gfpflags_allow_blocking",
]


class Gfp(IntFlag):
    """The ``__GFP_*`` bits (names without the leading underscores)."""

    DMA = 0x01
    HIGHMEM = 0x02
    DMA32 = 0x04
    MOVABLE = 0x08
    RECLAIMABLE = 0x10
    HIGH = 0x20
    IO = 0x40
    FS = 0x80
    ZERO = 0x100
    ATOMIC = 0x200  # <= 6.2 only
    DIRECT_RECLAIM = 0x400
    KSWAPD_RECLAIM = 0x800
    WRITE = 0x1000
    NOWARN = 0x2000
    RETRY_MAYFAIL = 0x4000
    NOFAIL = 0x8000
    NORETRY = 0x10000
    MEMALLOC = 0x20000
    COMP = 0x40000
    NOMEMALLOC = 0x80000
    HARDWALL = 0x100000
    THISNODE = 0x200000
    ACCOUNT = 0x400000

    RECLAIM = DIRECT_RECLAIM | KSWAPD_RECLAIM


GFP_KERNEL = Gfp.RECLAIM | Gfp.IO | Gfp.FS
GFP_ATOMIC = Gfp.HIGH | Gfp.ATOMIC | Gfp.KSWAPD_RECLAIM
GFP_NOWAIT = Gfp.KSWAPD_RECLAIM
GFP_NOIO = Gfp.RECLAIM
GFP_NOFS = Gfp.RECLAIM | Gfp.IO
GFP_USER = GFP_KERNEL | Gfp.HARDWALL
GFP_DMA = Gfp.DMA
GFP_DMA32 = Gfp.DMA32
GFP_HIGHUSER = GFP_USER | Gfp.HIGHMEM
GFP_HIGHUSER_MOVABLE = GFP_HIGHUSER | Gfp.MOVABLE
GFP_TRANSHUGE_LIGHT = (GFP_HIGHUSER_MOVABLE | Gfp.COMP | Gfp.NOMEMALLOC | Gfp.NOWARN) & ~Gfp.RECLAIM
GFP_TRANSHUGE = GFP_TRANSHUGE_LIGHT | Gfp.DIRECT_RECLAIM

_ZONE_BITS = Gfp.DMA | Gfp.HIGHMEM | Gfp.DMA32 | Gfp.MOVABLE

# GFP_ZONE_TABLE on x86_64 (no ZONE_HIGHMEM: OPT_ZONE_HIGHMEM is ZONE_NORMAL). Combinations missing here are
# GFP_ZONE_BAD (two zone modifiers at once) and trip VM_BUG_ON in the kernel.
_GFP_ZONE_TABLE: dict[int, ZoneType] = {
    0: ZoneType.NORMAL,
    Gfp.DMA: ZoneType.DMA,
    Gfp.HIGHMEM: ZoneType.NORMAL,
    Gfp.DMA32: ZoneType.DMA32,
    Gfp.MOVABLE: ZoneType.NORMAL,
    Gfp.MOVABLE | Gfp.DMA: ZoneType.DMA,
    Gfp.MOVABLE | Gfp.HIGHMEM: ZoneType.MOVABLE,
    Gfp.MOVABLE | Gfp.DMA32: ZoneType.DMA32,
}


def gfp_zone(gfp: Gfp | int) -> ZoneType:
    """The highest zone an allocation with these flags may use (``highest_zoneidx``).

    Examples
    --------
    >>> gfp_zone(GFP_HIGHUSER_MOVABLE).name, gfp_zone(GFP_KERNEL).name, gfp_zone(GFP_DMA32).name
    ('MOVABLE', 'NORMAL', 'DMA32')
    """
    bits = int(gfp) & int(_ZONE_BITS)
    try:
        return _GFP_ZONE_TABLE[bits]
    except KeyError:
        raise ValueError(f"gfp = {Gfp(int(gfp))!r}: conflicting zone modifiers (GFP_ZONE_BAD)") from None


def gfpflags_allow_blocking(gfp: Gfp | int) -> bool:
    """Whether the allocation may sleep (direct reclaim, compaction, OOM)."""
    return bool(int(gfp) & Gfp.DIRECT_RECLAIM)
