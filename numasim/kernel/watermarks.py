"""min_free_kbytes, zone watermarks and lowmem_reserve.

Re-implements, from ``mm/page_alloc.c``: ``nr_free_buffer_pages``, ``calculate_min_free_kbytes``,
``__setup_per_zone_wmarks`` and ``setup_per_zone_lowmem_reserve``; from ``mm/khugepaged.c``:
``set_recommended_min_free_kbytes``. Functions take and mutate plain :class:`~numasim.kernel.zones.Zone`
objects; :class:`~numasim.kernel.physmem.PhysicalMemory` calls them in the kernel's order (boot:
``init_per_zone_wmark_min`` then khugepaged; hot-add: ``init_per_zone_wmark_min`` again).

**[VER]** Since "mm: cap zone movable's min wmark to small value" (Ma Wupeng, posted for 6.1 in Sept 2022;
present in mainline) ZONE_MOVABLE is left out of ``lowmem_pages`` and its min watermark is
``clamp(managed/1024, 32, 128)`` like highmem — for every zone of that type, so an *empty* Movable zone shows
``min 32`` in zoneinfo. numasim applies it from 6.1 on; older versions share ``min_free_kbytes`` with Movable too
(the merge release is inferred from the patch dates, not checked against a 6.1 tree).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from numasim.kernel.zones import MAX_NR_ZONES, Zone, ZoneType

__all__ = [
    "PAGEBLOCK_ORDER",
    "MIGRATE_PCPTYPES",
    "SWAP_CLUSTER_MAX",
    "MIN_FREE_KBYTES_MIN",
    "MIN_FREE_KBYTES_MAX",
    "nr_free_buffer_pages",
    "calculate_min_free_kbytes",
    "set_recommended_min_free_kbytes",
    "setup_per_zone_wmarks",
    "setup_per_zone_lowmem_reserve",
]

PAGEBLOCK_ORDER = 9
"""x86_64 with 4 KiB pages: pageblock = a 2 MiB huge page."""
MIGRATE_PCPTYPES = 3
SWAP_CLUSTER_MAX = 32
MIN_FREE_KBYTES_MIN = 128
MIN_FREE_KBYTES_MAX = 262144


def nr_free_buffer_pages(zones: Sequence[Zone]) -> int:
    """Σ ``managed - high`` over populated zones up to ZONE_NORMAL (the GFP_USER zonelist covers all of them).

    At boot the watermarks are still zero, so this is the lowmem managed total.
    """
    return sum(
        max(0, z.managed_pages - z.wmark_high) for z in zones if z.populated and z.type <= ZoneType.NORMAL
    )


def calculate_min_free_kbytes(
    zones: Sequence[Zone], current_kbytes: int, user_min_free_kbytes: int | None, page_size_bytes: int = 4096
) -> int:
    """The new ``min_free_kbytes``: ``int_sqrt(lowmem_kbytes * 16)`` clamped to 128..262144 kB.

    A user-written value (``user_min_free_kbytes``) wins while it is at least the computed one (the kernel
    then only warns), so ``current_kbytes`` is returned unchanged.

    Examples
    --------
    A single 16 GiB lowmem zone: ``isqrt(16 GiB in kB * 16) = 16384``.

    >>> z = Zone(node=0, type=ZoneType.NORMAL, present_pages=1, managed_pages=4 << 20)
    >>> calculate_min_free_kbytes([z], 0, None)
    16384
    """
    lowmem_kbytes = nr_free_buffer_pages(zones) * (page_size_bytes >> 10)
    new = math.isqrt(lowmem_kbytes * 16)
    if user_min_free_kbytes is None or new > user_min_free_kbytes:
        return min(max(new, MIN_FREE_KBYTES_MIN), MIN_FREE_KBYTES_MAX)
    return current_kbytes


def set_recommended_min_free_kbytes(
    zones: Sequence[Zone], current_kbytes: int, page_size_bytes: int = 4096
) -> int:
    """khugepaged's floor for ``min_free_kbytes`` when THP is enabled.

    ``pageblock_nr_pages * nr_zones * (2 + MIGRATE_PCPTYPES**2)`` pages over the populated zones up to
    ZONE_NORMAL, at most 5 % of ``nr_free_buffer_pages()``; returned only when larger than the current value.

    Examples
    --------
    Four populated lowmem zones (DMA, DMA32, two Normal): ``4 * 512 * 11`` pages = 90112 kB.
    """
    nr_zones = sum(1 for z in zones if z.populated and z.type <= ZoneType.NORMAL)
    pageblock_nr_pages = 1 << PAGEBLOCK_ORDER
    recommended = pageblock_nr_pages * nr_zones * 2
    recommended += pageblock_nr_pages * nr_zones * MIGRATE_PCPTYPES * MIGRATE_PCPTYPES
    recommended = min(recommended, nr_free_buffer_pages(zones) // 20)
    recommended_kbytes = recommended * (page_size_bytes >> 10)
    return recommended_kbytes if recommended_kbytes > current_kbytes else current_kbytes


def setup_per_zone_wmarks(
    zones: Sequence[Zone],
    min_free_kbytes: int,
    watermark_scale_factor: int = 10,
    *,
    page_size_bytes: int = 4096,
    movable_like_highmem: bool = True,
) -> None:
    """``__setup_per_zone_wmarks``: share ``min_free_kbytes`` among zones by managed size; set low/high/promo.

    ``min = pages_min * managed // lowmem_pages``; ``delta = max(min >> 2, managed * wsf // 10000)``;
    ``low = min + delta``, ``high = low + delta``, ``promo = high + delta``. Watermark boost is not modelled
    (it is 0 right after this function in the kernel too).
    """
    page_shift = page_size_bytes.bit_length() - 1
    pages_min = min_free_kbytes >> (page_shift - 10)
    lowmem_pages = sum(
        z.managed_pages for z in zones if not (movable_like_highmem and z.type == ZoneType.MOVABLE)
    )
    for z in zones:
        tmp = pages_min * z.managed_pages // lowmem_pages if lowmem_pages else 0
        if movable_like_highmem and z.type == ZoneType.MOVABLE:
            z.wmark_min = min(max(z.managed_pages // 1024, SWAP_CLUSTER_MAX), 128)
        else:
            z.wmark_min = tmp
        delta = max(tmp >> 2, z.managed_pages * watermark_scale_factor // 10000)
        z.wmark_low = z.wmark_min + delta
        z.wmark_high = z.wmark_low + delta
        z.wmark_promo = z.wmark_high + delta


def setup_per_zone_lowmem_reserve(node_zones: Sequence[Zone], ratios: Sequence[int]) -> None:
    """``setup_per_zone_lowmem_reserve`` for one node's ``MAX_NR_ZONES`` zones (indexed by zone type).

    ``zones[i].lowmem_reserve[j] = Σ managed(zones[i+1..j]) // ratio[i]`` for ``j > i``; 0 when the ratio is
    0 or zone ``i`` has no managed pages.

    Examples
    --------
    >>> zs = [Zone(node=0, type=ZoneType(t)) for t in range(5)]
    >>> zs[0].managed_pages, zs[1].managed_pages, zs[2].managed_pages = 3840, 700000, 4000000
    >>> setup_per_zone_lowmem_reserve(zs, (256, 256, 32, 0))
    >>> zs[0].lowmem_reserve, zs[1].lowmem_reserve
    ([0, 2734, 18359, 18359, 18359], [0, 0, 15625, 15625, 15625])
    """
    if len(node_zones) != MAX_NR_ZONES:
        raise ValueError(f"node_zones: expected {MAX_NR_ZONES} zones, got {len(node_zones)}")
    for i in range(MAX_NR_ZONES):
        node_zones[i].lowmem_reserve = [0] * MAX_NR_ZONES
    for i in range(MAX_NR_ZONES - 1):
        ratio = ratios[i] if i < len(ratios) else 0
        zone = node_zones[i]
        clear = ratio == 0 or zone.managed_pages == 0
        acc = 0
        for j in range(i + 1, MAX_NR_ZONES):
            acc += node_zones[j].managed_pages
            zone.lowmem_reserve[j] = 0 if clear else acc // ratio
