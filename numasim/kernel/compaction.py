"""Direct compaction: a 2 MiB allocation that finds free memory but no free 2 MiB block makes one.

Follows ``mm/compaction.c`` for what decides and what it costs, in bulk (numasim has block counts per order,
:mod:`numasim.kernel.buddy`, not page frames):

* ``__alloc_pages_slowpath`` compacts when the allocation may reclaim (``__GFP_DIRECT_RECLAIM``) and no zone of
  its zonelist had a free block: ``try_to_compact_pages`` takes the zonelist's zones in order and stops at the
  first whose compaction succeeds. THP faults may (``transparent_hugepage/defrag``: ``always``, or ``madvise``
  for ``MADV_HUGEPAGE`` mappings); with ``never``, ``defer`` or an un-madvised ``madvise`` they fall back to base
  pages instead;
* ``compaction_suitable``: the zone must keep its low watermark plus ``compact_gap`` (``2 << order`` pages) and
  its ``lowmem_reserve`` free after order-0 accounting (else compaction could not even find free pages to
  migrate into: reclaim is the answer, not compaction), and for a costly order the fragmentation index must be
  above ``vm.extfrag_threshold`` (500 by default): an index towards 0 means the allocation fails for lack of
  memory, towards 1000 for fragmentation (``fragmentation_index``);
* ``compact_zone``: the migrate scanner empties one pageblock by migrating its pages into free pages the free
  scanner isolates elsewhere; :meth:`~numasim.kernel.buddy.FreeArea.compact_one` says how many pages that is
  (512 less the pageblock's own free pages, taken as the zone's average fragment). Each migrated page costs the
  allocating thread ``KernelConfig.compact_migrate_page_ns`` (isolate, unmap with TLB flush, copy, remap; a
  nominal 5 us, the figure numasim uses for a NUMA-balancing migration) -- the stall the kernel's
  ``compact_stall`` counts.

Counters (``/proc/vmstat`` names): ``compact_stall`` per direct compaction, ``compact_success`` and
``compact_fail``, ``compact_migrate_scanned`` (512 per pageblock scanned), ``compact_isolated`` (pages isolated
for migration and free pages isolated as their targets), ``pgmigrate_success`` (pages migrated).

Not modelled (docs/kernel-spec-coverage.md H17): kcompactd and proactive compaction, ``defer_compaction``'s
back-off after failures, async versus sync priorities, unmovable pageblocks (every page is taken to be movable),
compaction of order-0 and other orders, the skip bits and scanners' positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numasim.kernel.buddy import HUGE_ORDER, fragmentation_index

if TYPE_CHECKING:
    from numasim.kernel.physmem import PhysicalMemory
    from numasim.kernel.zones import Zone

__all__ = ["COSTLY_ORDER", "compact_gap", "compaction_suitable", "compact_zone"]

COSTLY_ORDER = 3
"""``PAGE_ALLOC_COSTLY_ORDER``: above it the fragmentation index decides whether to compact."""


def compact_gap(order: int) -> int:
    """``compact_gap``: free pages compaction needs beyond the watermark (``2 << order``: room to migrate into)."""
    return 2 << order


def compaction_suitable(zone: Zone, order: int, highest_zoneidx: int, extfrag_threshold: int) -> bool:
    """``compaction_suitable`` for a direct compaction of ``order`` in ``zone`` (module docstring).

    Examples
    --------
    >>> from numasim.kernel.buddy import FreeArea
    >>> from numasim.kernel.zones import Zone, ZoneType
    >>> z = Zone(node=0, type=ZoneType.NORMAL, managed_pages=1 << 20, free_pages=4096, wmark_low=1000)
    >>> z.free_area = FreeArea(0, [4096] + [0] * 8)      # 4096 single pages: badly fragmented
    >>> compaction_suitable(z, 9, 2, 500)
    True
    >>> z.free_area = FreeArea(0, [0] * 8 + [16])        # 16 order-8 blocks: too little memory, not fragmentation
    >>> compaction_suitable(z, 9, 2, 500)
    False
    """
    watermark = zone.wmark_low + compact_gap(order) + zone.lowmem_reserve[highest_zoneidx]
    if zone.free_pages <= watermark:
        return False
    if order > COSTLY_ORDER:
        index = fragmentation_index(zone.buddy().counts, order)
        if 0 <= index <= extfrag_threshold:
            return False
    return zone.buddy().fragment_pages >= (1 << order)


def compact_zone(pm: PhysicalMemory, zone_index: int) -> int:
    """Compact one 2 MiB block in ``pm.zones[zone_index]`` (the caller checked :func:`compaction_suitable`);
    returns the pages migrated. Counts the ``compact_*`` counters."""
    area = pm.zones[zone_index].buddy()
    migrated = area.compact_one()
    v = pm.vmstat
    for key, n in (("compact_stall", 1), ("compact_success", 1), ("compact_migrate_scanned", 1 << HUGE_ORDER),
                   ("compact_isolated", 2 * migrated), ("pgmigrate_success", migrated)):  # fmt: skip
        v[key] = v.get(key, 0) + n
    return migrated
