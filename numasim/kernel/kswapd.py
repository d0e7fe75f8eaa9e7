"""kswapd: background reclaim of clean page cache while a program faults memory in, so allocation returns to a
node once kswapd has freed memory there (mm/vmscan.c ``kswapd``, ``balance_pgdat``, ``pgdat_balanced``).

numasim places memory before timing, so this kswapd runs on the *allocation's* clock: a large request is
allocated in batches of :data:`KSWAPD_BATCH_PAGES`, and after each batch the kswapd of every awake node frees
``KernelConfig.kswapd_reclaim_ratio`` clean page-cache pages per page the batch allocated (its reclaim rate over
the program's fault rate), never more than the node's reclaimable cache. A node's kswapd wakes when the allocator has drained one of
its zones to the low watermark (plus its reserve for movable allocations) with cache to reclaim -- in the kernel, the allocator's slow path
(``wake_all_kswapds``) and a boosted watermark after a fragmenting fallback (``boost_watermark``, then
``wakeup_kswapd`` from ``rmqueue``) both do this as a node fills up -- and sleeps once every zone is above its high
watermark (``pgdat_balanced``) or the cache is gone. Between batches the allocator takes what kswapd freed, as
the fast path does once a zone is back above its low watermark: the node gains about what kswapd reclaims while
the program runs. When the request ends, kswapd goes on until the node is balanced.

What is simplified (docs/kernel-spec-coverage.md, rows K1-K4): only the clean cache given to the kernel
(``reclaimable_page_cache_bytes``, ``page_cache_fraction_of_used``) is reclaimed, no anonymous memory and no
swap; the rate is a ratio, not a time; the wake-up condition stands for both wake paths; a request with one
preferred node only (interleave arrays are allocated without kswapd).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.allocator import AllocPlan, Segment, _State, run_scalar

if TYPE_CHECKING:
    from numasim.kernel.physmem import PhysicalMemory

__all__ = ["KSWAPD_BATCH_PAGES", "run_with_kswapd", "kswapd_reclaim"]

KSWAPD_BATCH_PAGES = 1 << 14
"""Pages (64 MiB) the allocator places between two kswapd steps: the resolution of the allocation clock."""


def kswapd_reclaim(pm: PhysicalMemory, awake: set[int], budget_pages: int | None) -> int:
    """One kswapd step on every node in ``awake`` (woken nodes are added, balanced ones removed): each frees up
    to ``budget_pages`` clean cache pages (None: until balanced), highest zone first. Returns the pages freed."""
    freed_total = 0
    for nid in pm.node_ids:
        zones = [z for z in pm.node_zones(nid) if z.managed_pages > 0]
        # a zone the allocator has drained to its low watermark (what a movable allocation may not go below)
        if any(z.free_pages <= z.wmark_low + z.lowmem_reserve[-1] and z.reclaimable_pages > 0 for z in zones):
            if nid not in awake:
                pm.vmstat["pageoutrun"] += 1
            awake.add(nid)
        if nid not in awake:
            continue
        budget = budget_pages
        for z in reversed(zones):  # ZONE_NORMAL (and Movable) before DMA32: where the cache is
            if budget is not None and budget <= 0:
                break
            want = z.reclaimable_pages if budget is not None else max(0, z.wmark_high - z.free_pages)
            n = min(z.reclaimable_pages, want if budget is None else min(want, budget))
            if n > 0:
                z.reclaimable_pages -= n
                z.free_pages += n
                freed_total += n
                if budget is not None:
                    budget -= n
                pm.vmstat["pgsteal_kswapd"] += n
                pm.vmstat["pgscan_kswapd"] += n
        balanced = all(z.free_pages >= z.wmark_high for z in zones)
        if balanced or not any(z.reclaimable_pages for z in zones):
            awake.discard(nid)
    return freed_total


def run_with_kswapd(
    pm: PhysicalMemory, plan: AllocPlan, count: int, target: int
) -> tuple[np.ndarray, np.ndarray, list[Segment], _State]:
    """:func:`~numasim.kernel.allocator.run_scalar` in batches with kswapd steps in between (module docstring)."""
    ratio = pm.config.kswapd_reclaim_ratio
    nodes: list[np.ndarray] = []
    zones: list[np.ndarray] = []
    segments: list[Segment] = []
    awake: set[int] = set()
    reclaimed_direct = 0
    remaining = count
    state = _State(pm.zones)
    while remaining > 0:
        n = min(KSWAPD_BATCH_PAGES, remaining)
        got_nodes, got_zones, segs, state = run_scalar(plan, n, pm.zones, target)
        state.write_back(pm.zones)
        reclaimed_direct += state.reclaimed
        nodes.append(got_nodes)
        zones.append(got_zones)
        segments += segs
        remaining -= len(got_nodes)
        kswapd_reclaim(pm, awake, int(round(ratio * len(got_nodes))))
        if len(got_nodes) < n:
            break  # nothing more fits: the caller reports the failure
    kswapd_reclaim(pm, awake, None)  # the request is over: kswapd balances the nodes it is awake on
    final = _State(pm.zones)
    final.reclaimed = reclaimed_direct
    return (
        np.concatenate(nodes) if nodes else np.zeros(0, dtype=np.int16),
        np.concatenate(zones) if zones else np.zeros(0, dtype=np.int8),
        segments,
        final,
    )
