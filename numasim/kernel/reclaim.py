"""Reclaim of clean page cache: the one routine that direct reclaim, node_reclaim and kswapd all call.

Re-implements what ``mm/vmscan.c`` ``shrink_node`` → ``shrink_folio_list`` does to *clean, unmapped* file pages:
each one is dropped from the page cache and goes back to its zone's free list. numasim keeps no LRU, so a zone's
clean cache is a count (:attr:`~numasim.kernel.zones.Zone.reclaimable_pages`) and reclaiming ``n`` pages moves
``n`` from that count to the zone's free pages.

Who reclaims, and how much, is the caller's business: the allocator's direct reclaim and node_reclaim
(:mod:`numasim.kernel.allocator`) reclaim one zone at a time, just what lifts it above the watermark they need;
kswapd (:mod:`numasim.kernel.kswapd`) reclaims across a node's zones at its own rate. Both go through
:func:`shrink_zone_cache`, so "reclaim never frees more than the cache and conserves pages" holds in one place.

Examples
--------
>>> free, cache = [10, 100], [5, 40]
>>> shrink_zone_cache(free, cache, 1, 50)  # only 40 pages of cache in zone 1
40
>>> free, cache
([10, 140], [5, 0])
>>> shrink_node_cache(free, cache, [0, 1], 3)  # node-wide: in proportion to each zone's cache
[3, 0]
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["shrink_zone_cache", "shrink_node_cache", "split_by_cache"]


def shrink_zone_cache(free: list[int], cache: list[int], zone: int, nr_pages: int) -> int:
    """Reclaim up to ``nr_pages`` clean cache pages of one zone; returns the pages reclaimed.

    Parameters
    ----------
    free, cache : list of int
        Free pages and clean page cache per zone (indexed like the kernel's zone list), changed in place.
    zone : int
        Index of the zone.
    nr_pages : int
        Pages wanted (``sc->nr_to_reclaim``); negative or zero reclaims nothing.
    """
    n = min(max(0, int(nr_pages)), cache[zone])
    cache[zone] -= n
    free[zone] += n
    return n


def split_by_cache(cache: Sequence[int], zones: Sequence[int], nr_pages: int) -> list[int]:
    """Split ``nr_pages`` over ``zones`` in proportion to their clean cache (floors; the remainder one page
    each to the zones with the most cache, lowest index first on ties), never more than a zone holds.

    The kernel's LRU lists are per node since 4.8 (``shrink_node`` scans one node-wide lruvec, skipping zones
    above ``reclaim_idx``): pages of every zone age together, so the expected share of a zone in what reclaim
    frees is its share of the node's cache.
    """
    have = [cache[z] for z in zones]
    total = sum(have)
    want = min(max(0, int(nr_pages)), total)
    if want == 0:
        return [0] * len(zones)
    parts = [want * h // total for h in have]
    rest = want - sum(parts)
    for i in sorted(range(len(zones)), key=lambda i: (-have[i], i)):
        if rest == 0:
            break
        add = min(rest, have[i] - parts[i])
        parts[i] += add
        rest -= add
    return parts


def shrink_node_cache(free: list[int], cache: list[int], zones: Sequence[int], nr_pages: int) -> list[int]:
    """Reclaim up to ``nr_pages`` clean cache pages across ``zones`` (one node's eligible zones), in proportion
    to each zone's cache (:func:`split_by_cache`); returns the pages reclaimed per zone."""
    parts = split_by_cache(cache, zones, nr_pages)
    return [shrink_zone_cache(free, cache, z, n) for z, n in zip(zones, parts, strict=True)]
