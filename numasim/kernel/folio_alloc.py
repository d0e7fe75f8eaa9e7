"""Order-9 (2 MiB) allocations from the zones: the page allocator walk for one huge folio at a time.

``__alloc_pages(gfp, order=9, nid, nodemask)`` (``mm/page_alloc.c``) walks the same zonelist as an order-0
allocation (:meth:`~numasim.kernel.physmem.PhysicalMemory._plan` builds it: fast path at the LOW watermark, slow
path at MIN, ``__GFP_THISNODE`` keeps it on one node), but a zone passes ``__zone_watermark_ok`` for order 9 only
if ``free - (1 << 9) + 1 > watermark + lowmem_reserve``, i.e. it keeps at least the watermark after giving the
512 pages, and only if its free area has a block of order >= 9.

Fragmentation (:mod:`numasim.kernel.buddy`): a zone passes only while it has a free block of order >= 9, and
every folio taken uses one up. When no zone of the walk has one and the request may reclaim
(``__GFP_DIRECT_RECLAIM``), direct compaction (:mod:`numasim.kernel.compaction`) makes one in the first suitable
zone of the zonelist; the pages it migrated are in :attr:`PhysicalMemory.folio_compaction` per folio of the last
call, for the caller to charge.

Model limits (documented in docs/kernel-spec-coverage.md, rows H*):

* no reclaim for huge pages: a candidate that would reclaim (node_reclaim, direct reclaim) is skipped, so an
  order-9 request gets what is free above the watermarks (and what compaction makes of it);
* a huge allocation never calls the OOM killer (THP faults fall back to base pages; hugetlb pools stop).

A folio's 512 pages land in one zone of one node. numastat counts one event per folio (``zone_statistics(...,
1)`` in ``rmqueue``), ``pgalloc_<zone>`` counts 512 pages (``1 << order``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.compaction import compact_zone, compaction_suitable
from numasim.kernel.gfp import Gfp, gfp_zone

if TYPE_CHECKING:
    from numasim.kernel.allocator import AllocRequest, Candidate
    from numasim.kernel.physmem import PhysicalMemory

__all__ = ["HPAGE_PMD_ORDER", "HPAGE_PMD_NR", "alloc_folios", "folio_capacity"]

HPAGE_PMD_ORDER = 9
"""``HPAGE_PMD_ORDER`` on x86_64 with 4 KiB pages: a PMD maps 2 MiB."""

HPAGE_PMD_NR = 1 << HPAGE_PMD_ORDER
"""Base pages per 2 MiB folio (512)."""


def _gfp(req: AllocRequest) -> Gfp:
    gfp = Gfp(int(req.gfp))
    if req.no_direct_reclaim:
        gfp &= ~Gfp.DIRECT_RECLAIM
    return gfp


def _candidates(pm: PhysicalMemory, target: int, req: AllocRequest) -> list[Candidate]:
    # Huge allocations never reclaim here (module docstring): drop the reclaiming candidates.
    return [c for c in pm._plan(target, req, _gfp(req)).candidates if not c.reclaim]


def folio_capacity(pm: PhysicalMemory, target: int, req: AllocRequest, order: int = HPAGE_PMD_ORDER) -> int:
    """How many order-``order`` folios ``req`` (preferred node ``target``) could get now, without taking them."""
    nr = 1 << order
    cands = _candidates(pm, target, req)
    free = {c.zone: pm.zones[c.zone].free_pages for c in cands}
    blocks = {c.zone: pm.zones[c.zone].buddy().blocks_of(order) for c in cands}
    total = 0
    for c in cands:
        k = max(0, min((free[c.zone] - c.thr) // nr, blocks[c.zone]))
        free[c.zone] -= k * nr
        blocks[c.zone] -= k
        total += k
    return total


def alloc_folios(pm: PhysicalMemory, req: AllocRequest, order: int = HPAGE_PMD_ORDER) -> tuple[np.ndarray, np.ndarray]:
    """Allocate ``req.count`` folios of ``1 << order`` pages; returns (node, zone type) per folio, -1 if none.

    ``req.preferred_nid`` is one node or one per folio (interleave). Unlike order-0 :meth:`PhysicalMemory.alloc`,
    a failed folio does not stop the walk: each folio is its own allocation call, and the caller falls back
    (to base pages, or stops growing a pool) per folio.
    """
    nr = 1 << order
    count = int(req.count)
    nodes = np.full(count, -1, dtype=np.int16)
    zones = np.full(count, -1, dtype=np.int16)
    pm.folio_compaction = np.zeros(count, dtype=np.int64)
    if count == 0:
        return nodes, zones
    targets = np.asarray(req.preferred_nid, dtype=np.int64)
    if targets.ndim == 0:
        targets = np.full(count, int(targets), dtype=np.int64)
    order_of = {int(t): _candidates(pm, int(t), req) for t in np.unique(targets)}
    free = [z.free_pages for z in pm.zones]
    taken = np.zeros(len(pm.zones), dtype=np.int64)
    first_of = {t: cands[0] if cands else None for t, cands in order_of.items()}
    # Common case in closed form: every target's first candidate has room for all of that target's folios
    # (first candidates of different nodes are different zones, so targets do not interact).
    wanted = {t: int(np.count_nonzero(targets == t)) for t in order_of}
    firsts = [first_of[t] for t in order_of]
    easy = all(c is not None for c in firsts) and len({c.zone for c in firsts if c is not None}) == len(firsts) and all(
        min((free[c.zone] - c.thr) // nr, pm.zones[c.zone].buddy().blocks_of(order)) >= wanted[t]
        for t, c in first_of.items() if c is not None
    )
    if easy:
        for t, c in first_of.items():
            assert c is not None
            sel = targets == t
            nodes[sel] = pm.zones[c.zone].node
            zones[sel] = int(pm.zones[c.zone].type)
            taken[c.zone] += wanted[t]
            pm.count_allocation(req, c, t, events=wanted[t], pages=wanted[t] * nr)  # one event per folio
        for zi in np.flatnonzero(taken):
            pm.zones[int(zi)].buddy().take_blocks(int(taken[zi]), order)
            pm.zones[int(zi)].free_pages -= int(taken[zi]) * nr
        return nodes, zones
    # A zone runs dry or has no free block left: one allocation call per 2 MiB folio (512 times fewer steps than
    # per page), the zones updated as each folio is taken.
    gfp = _gfp(req)
    may_compact = bool(gfp & Gfp.DIRECT_RECLAIM)
    highest = int(gfp_zone(gfp))
    for i in range(count):
        t = int(targets[i])
        got = _take(pm, req, order_of[t], t, order)
        if got is None and may_compact:
            got = _compact_and_take(pm, req, order_of[t], t, order, highest, i)
        if got is not None:
            nodes[i], zones[i] = pm.zones[got].node, int(pm.zones[got].type)
    return nodes, zones


def _take(pm: PhysicalMemory, req: AllocRequest, cands: list[Candidate], target: int, order: int) -> int | None:
    """The first candidate zone with room above its watermark and a free block gives one folio; its index."""
    nr = 1 << order
    for c in cands:
        z = pm.zones[c.zone]
        if z.free_pages - nr >= c.thr and z.buddy().blocks_of(order):
            z.buddy().take_blocks(1, order)
            z.free_pages -= nr
            pm.count_allocation(req, c, target, events=1, pages=nr)
            return c.zone
    return None


def _compact_and_take(
    pm: PhysicalMemory, req: AllocRequest, cands: list[Candidate], target: int, order: int, highest: int, i: int
) -> int | None:
    """``try_to_compact_pages``: the zonelist's zones in order, the first suitable one compacted, then the folio
    taken from it (``pm.folio_compaction[i]``: the pages migrated)."""
    seen: list[int] = []
    for c in cands:
        if c.zone in seen:
            continue
        seen.append(c.zone)
        z = pm.zones[c.zone]
        if not compaction_suitable(z, order, highest, pm.config.extfrag_threshold):
            continue
        pm.folio_compaction[i] += compact_zone(pm, c.zone)
        got = _take(pm, req, [k for k in cands if k.zone == c.zone], target, order)
        if got is not None:
            return got
    return None


