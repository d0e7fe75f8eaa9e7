"""The page allocator walk, vectorised: ``__alloc_pages`` → ``get_page_from_freelist`` → slow path.

Re-implements (``mm/page_alloc.c``, ``mm/vmscan.c``): ``prepare_alloc_pages`` (zonelist, nodemask, cpuset
substitution, preferred zoneref), the fast path at the LOW watermark over every eligible zone, the slow path at
MIN (with the ``__GFP_HIGH``/atomic reserves), ``node_reclaim`` under ``vm.zone_reclaim_mode``, direct reclaim
of clean page cache, the OOM decision of ``__alloc_pages_may_oom``, and ``zone_statistics``.

How one order-0 allocation walks is a fixed sequence of *candidates* for its preferred node: first
``(zone, free above low)`` and, where node_reclaim applies, ``(zone, reclaim to above low)`` for each eligible
zone in zonelist order; then the same at the MIN watermark; then ``(zone, direct reclaim)``. A page goes to the
first candidate with room. Along one list, room only shrinks, so:

* with one preferred node, N pages fill the candidates in order — a few integer steps and ``np.repeat``;
* with one target per page (interleave), pages are processed in rounds: each target's pages go to its current
  candidate until the first candidate runs dry (found by binary search over the targets' page positions), and
  the round is assigned with array slicing. Two things couple targets: node_reclaim lifting a zone above a
  threshold another target had already found full (the round ends after that page), and different kinds of
  candidate drawing on one zone, which :func:`_mixed_walk` solves in closed form (a running maximum).

The result is identical to walking page by page (``tests/kernel/test_allocator.py`` checks that against a naive
reference with hypothesis).

Model limits (deterministic, documented): no per-cpu page lists, no watermark boost, no highatomic or CMA
reserves, no migratetypes (so ``ALLOC_NOFRAGMENT`` has no effect on order-0 placement), no dirty-limit spreading
(``__GFP_WRITE``). node_reclaim frees exactly what lifts the zone above the watermark if the zone holds that
much clean page cache above ``min_unmapped_ratio`` (else it frees nothing); direct reclaim frees clean page cache
zone by zone in zonelist order (the kernel scans every eligible node in proportion to its LRU size, so it spreads
reclaim more evenly). Both free pages through :func:`numasim.kernel.reclaim.shrink_zone_cache`, the routine
kswapd uses too; kswapd itself runs between batches of a request (:mod:`numasim.kernel.kswapd`, when
``KernelConfig.kswapd_enabled``). Anonymous memory is never swapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from numasim.kernel.config import KernelConfig
from numasim.kernel.gfp import GFP_HIGHUSER_MOVABLE, Gfp
from numasim.kernel.reclaim import shrink_zone_cache
from numasim.kernel.zones import Zone

__all__ = [
    "AllocRequest",
    "AllocResult",
    "NumaCounters",
    "NUMA_STAT_ITEMS",
    "Candidate",
    "AllocPlan",
    "ZoneState",
    "Segment",
    "min_watermark_for",
    "nofail_watermark_for",
    "walk_scalar",
    "pages_of",
    "run_scalar",
    "run_per_page",
]

NUMA_STAT_ITEMS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")
"""The six lines of ``/sys/devices/system/node/nodeN/numastat``, in file order."""


@dataclass
class NumaCounters:
    """numastat counters (``zone_statistics``), one int64 entry per node id (or per zone)."""

    numa_hit: np.ndarray
    numa_miss: np.ndarray
    numa_foreign: np.ndarray
    interleave_hit: np.ndarray
    local_node: np.ndarray
    other_node: np.ndarray

    @classmethod
    def zeros(cls, size: int) -> NumaCounters:
        return cls(*(np.zeros(size, dtype=np.int64) for _ in NUMA_STAT_ITEMS))

    def item(self, index: int) -> dict[str, int]:
        """The six counters of one node (or zone) as a dict in file order."""
        return {name: int(getattr(self, name)[index]) for name in NUMA_STAT_ITEMS}

    def copy(self) -> NumaCounters:
        return NumaCounters(*(getattr(self, name).copy() for name in NUMA_STAT_ITEMS))


@dataclass
class AllocRequest:
    """``count`` order-0 allocations, each one allocation call (one numastat event each).

    ``preferred_nid`` is a node id, or one target node per page (interleave). ``nodemask`` is the policy
    nodemask (None = no restriction); ``mems_allowed`` the task's cpuset (None = cpusets not in use).
    ``no_direct_reclaim`` clears ``__GFP_DIRECT_RECLAIM`` (MPOL_PREFERRED_MANY's first pass).
    """

    count: int
    preferred_nid: int | np.ndarray
    nodemask: frozenset[int] | None = None
    cpu_node: int = 0
    gfp: Gfp = GFP_HIGHUSER_MOVABLE
    interleave: bool = False
    no_direct_reclaim: bool = False
    mems_allowed: frozenset[int] | None = None


@dataclass
class AllocResult:
    """Where the pages went: ``nodes``/``zones`` per allocated page in request order."""

    nodes: np.ndarray
    zones: np.ndarray
    allocated: int
    failed: bool
    oom: bool
    reclaimed: int
    per_node_pages: dict[int, int] = field(default_factory=dict)
    """Allocated pages per node id (only nodes that received pages)."""
    first_reclaim: int = -1
    """Index (in request order) of the first page whose allocation went through direct reclaim or node_reclaim
    (the fault that stalls in reclaim); -1 when ``reclaimed`` is 0."""
    stuck: bool = False
    """A ``__GFP_NOFAIL`` request that even its reserve fallback cannot satisfy: a real kernel would loop
    forever here (``goto retry`` in ``__alloc_pages_slowpath``), so the task is stuck in the allocator with
    ``allocated < count``. ``failed`` is then false: NOFAIL never returns failure to its caller."""


@dataclass(frozen=True)
class Candidate:
    """One step of the walk: take from ``zone`` while ``free > thr`` (reclaiming page cache above ``floor``
    first when ``reclaim``); ``pzone``/``pnode`` are the preferred zone (index) and its node, for numastat.
    ``slow``: the step belongs to ``__alloc_pages_slowpath`` (MIN watermark, direct reclaim, NOFAIL fallback),
    which wakes kswapd on every node of the zonelist (``wake_all_kswapds``) before its first attempt."""

    zone: int
    reclaim: bool
    thr: int
    floor: int
    pnode: int
    pzone: int
    slow: bool = False

    @property
    def key(self) -> tuple[int, bool, int, int]:
        # candidates that act identically on the zone state (numastat's pnode aside) share capacity
        return (self.zone, self.reclaim, self.thr, self.floor)


@dataclass(frozen=True)
class AllocPlan:
    """The candidate sequence of one preferred node and what a failure at its end means."""

    candidates: tuple[Candidate, ...]
    oom: bool


def min_watermark_for(wmark_min: int, gfp: Gfp, config: KernelConfig) -> int:
    """The slow path's MIN mark after the reserve cuts of ``__zone_watermark_ok``.

    6.3+: ``__GFP_HIGH`` (ALLOC_MIN_RESERVE) takes half; non-blocking ``__GFP_HIGH`` callers (GFP_ATOMIC:
    ALLOC_NON_BLOCK) a further quarter. 6.1/6.2: ``__GFP_HIGH`` half, ``__GFP_ATOMIC`` (ALLOC_HARDER) a quarter.

    Examples
    --------
    >>> from numasim.kernel.gfp import GFP_ATOMIC, GFP_KERNEL
    >>> min_watermark_for(1000, GFP_KERNEL, KernelConfig()), min_watermark_for(1000, GFP_ATOMIC, KernelConfig())
    (1000, 375)
    """
    m = wmark_min
    if config.at_least(6, 3):
        if gfp & Gfp.HIGH:
            m -= m // 2
            if not gfp & Gfp.DIRECT_RECLAIM and not gfp & Gfp.NOMEMALLOC:
                m -= m // 4
    else:
        if gfp & Gfp.HIGH:
            m -= m // 2
        if gfp & Gfp.ATOMIC and not gfp & Gfp.NOMEMALLOC:
            m -= m // 4
    return m


def nofail_watermark_for(wmark_min: int, config: KernelConfig) -> int:
    """The mark of ``__GFP_NOFAIL``'s last-resort pass (``__alloc_pages_cpuset_fallback`` from ``nopage``).

    Its ``alloc_flags`` are only ALLOC_MIN_RESERVE (6.3+: ``min -= min/2``) or, up to 6.2, ALLOC_HARDER
    (``min -= min/4``); the request's own ``__GFP_HIGH`` does not add to it.

    Examples
    --------
    >>> nofail_watermark_for(8192, KernelConfig()), nofail_watermark_for(8192, KernelConfig(version="6.1"))
    (4096, 6144)
    """
    if config.at_least(6, 3):
        return wmark_min - wmark_min // 2
    return wmark_min - wmark_min // 4


class ZoneState:
    """Mutable free/page-cache counts of all zones during one request; ``reclaimed`` counts direct reclaim
    (and node_reclaim) only, kswapd counts its own."""

    def __init__(self, zones: Sequence[Zone]) -> None:
        self.free = [z.free_pages for z in zones]
        self.cache = [z.reclaimable_pages for z in zones]
        self.reclaimed = 0

    def copy(self) -> ZoneState:
        """An independent copy (a walk tried on it leaves this state as it was)."""
        new = ZoneState(())
        new.free, new.cache, new.reclaimed = list(self.free), list(self.cache), self.reclaimed
        return new

    def cap(self, c: Candidate) -> int:
        if c.reclaim:
            return max(0, self.free[c.zone] + max(0, self.cache[c.zone] - c.floor) - c.thr)
        return max(0, self.free[c.zone] - c.thr)

    def take(self, c: Candidate, n: int) -> None:
        if n <= 0:
            return
        if c.reclaim:
            # reclaim what lifts the zone to thr + n free, then take the n pages
            self.reclaimed += shrink_zone_cache(self.free, self.cache, c.zone, n + c.thr - self.free[c.zone])
        self.free[c.zone] -= n

    def write_back(self, zones: Sequence[Zone]) -> None:
        """Store the counts in the zones; their buddy blocks follow: page cache reclaimed since the zones' last
        counts returns as reclaimed cache does, then the pages allocated are taken smallest block first."""
        for z, f, c in zip(zones, self.free, self.cache, strict=True):
            if f != z.free_pages or c != z.reclaimable_pages:
                area = z.buddy()
                reclaimed = max(0, z.reclaimable_pages - c)
                allocated = z.free_pages + reclaimed - f
                area.add_reclaimed(reclaimed)
                if allocated >= 0:
                    area.take_base(allocated)
                else:
                    area.add_freed(-allocated)
            z.free_pages = f
            z.reclaimable_pages = c


Segment = tuple[int, Candidate, int]
"""(target node, candidate, pages) — one bulk numastat event."""


def _zone_tables(zones: Sequence[Zone]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([z.node for z in zones], dtype=np.int16),
        np.array([int(z.type) for z in zones], dtype=np.int8),
    )


def walk_scalar(plan: AllocPlan, count: int, state: ZoneState, target: int) -> list[Segment]:
    """Take ``count`` pages along one plan from ``state`` (changed in place); returns the bulk segments.

    The walk stops at the first page no candidate has room for (fewer pages than ``count`` in the segments).
    """
    segments: list[Segment] = []
    remaining = count
    for c in plan.candidates:
        if remaining == 0:
            break
        n = min(state.cap(c), remaining)
        if n:
            state.take(c, n)
            segments.append((target, c, n))
            remaining -= n
    return segments


def pages_of(segments: Sequence[Segment], zones: Sequence[Zone]) -> tuple[np.ndarray, np.ndarray]:
    """The node (int16) and zone type (int8) of every page of ``segments``, in order (one ``np.repeat``)."""
    node_of, type_of = _zone_tables(zones)
    seg_zone = np.array([c.zone for _, c, _ in segments], dtype=np.int64)
    seg_len = np.array([n for _, _, n in segments], dtype=np.int64)
    return np.repeat(node_of[seg_zone], seg_len), np.repeat(type_of[seg_zone], seg_len)


def run_scalar(
    plan: AllocPlan, count: int, zones: Sequence[Zone], target: int
) -> tuple[np.ndarray, np.ndarray, list[Segment], ZoneState]:
    """Fill ``count`` pages along one plan.

    Returns the node (int16) and zone type (int8) of each allocated page, the bulk segments and the final
    state; the walk stops at the first page no candidate has room for.
    """
    state = ZoneState(zones)
    segments = walk_scalar(plan, count, state, target)
    nodes, types = pages_of(segments, zones)
    return nodes, types, segments, state


def _kth_position(positions: list[np.ndarray], starts: list[int], k: int, lo: int, hi: int) -> int:
    """Smallest page index x in [lo, hi] such that the targets have >= k pages in [lo, x]; hi + 1 if none."""
    total = sum(len(p) - s for p, s in zip(positions, starts, strict=True))
    if total < k:
        return hi + 1
    if len(positions) == 1:
        return int(positions[0][starts[0] + k - 1])
    while lo < hi:
        mid = (lo + hi) // 2
        cnt = sum(
            int(np.searchsorted(p, mid, side="right")) - s for p, s in zip(positions, starts, strict=True)
        )
        if cnt >= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


_MIXED_WINDOW = 1 << 21
"""Pages per round when several kinds of candidate share a zone (bounds the temporary arrays)."""
_NEG = np.iinfo(np.int64).min // 4


def _mixed_walk(
    free: int, cache: int, spec: list[tuple[Candidate, list[np.ndarray]]], limit: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Pages of several candidate kinds taking from one zone, merged in page order, in closed form.

    Every page leaves ``free + cache`` one lower. A plain page leaves ``free - 1``; a reclaiming page leaves
    ``max(free - 1, thr)`` (it reclaims up to ``thr + 1`` first), so after page ``i`` (1-based)
    ``free_i = max(free_0, max_{j<=i} (thr_j + j)) - i`` with ``thr_j`` = -inf for plain pages: a running
    maximum. Returns the merged page indices below ``limit``, ``free`` after each, and the first page index
    whose own candidate has no room (``limit`` if none).
    """
    parts, labels = [], []
    for g, (_, arrays) in enumerate(spec):
        for a in arrays:
            a = a[: int(np.searchsorted(a, limit, side="left"))]
            parts.append(a)
            labels.append(np.full(len(a), g, dtype=np.int64))
    allpos = np.concatenate(parts)
    order = np.argsort(allpos, kind="stable")
    merged = allpos[order]
    lab = np.concatenate(labels)[order]
    n = len(merged)
    if n == 0:
        return merged, np.empty(0, dtype=np.int64), limit
    thr = np.array([c.thr for c, _ in spec], dtype=np.int64)[lab]
    floor = np.array([c.floor for c, _ in spec], dtype=np.int64)[lab]
    rec = np.array([c.reclaim for c, _ in spec], dtype=bool)[lab]
    i = np.arange(1, n + 1, dtype=np.int64)
    f_after = np.maximum.accumulate(np.maximum(np.where(rec, thr + i, _NEG), free)) - i
    f_before = np.concatenate(([free], f_after[:-1]))
    c_before = free + cache - (i - 1) - f_before
    cap = np.where(rec, f_before + np.maximum(0, c_before - floor) - thr, f_before - thr)
    bad = np.flatnonzero(cap <= 0)
    stop = int(merged[bad[0]]) if bad.size else limit
    return merged, f_after, stop


def run_per_page(
    plans: dict[int, AllocPlan], positions: dict[int, np.ndarray], n_pages: int, zones: Sequence[Zone]
) -> tuple[np.ndarray, np.ndarray, list[Segment], ZoneState, int]:
    """Allocate ``n_pages`` pages in page order, page ``i`` along the plan of its target node.

    ``positions[t]`` holds the (increasing) page indices whose target is node ``t``. Returns the node and
    zone type of each allocated page, the bulk segments, the final state and the number of pages allocated
    (the walk stops at the first page that cannot be allocated).
    """
    state = ZoneState(zones)
    segments: list[Segment] = []
    node_of, type_of = _zone_tables(zones)
    out_nodes = np.empty(n_pages, dtype=np.int16)
    out_zones = np.empty(n_pages, dtype=np.int8)
    uniq = [t for t in sorted(positions) if len(positions[t])]
    pos = positions
    k = dict.fromkeys(uniq, 0)  # pages of t already assigned
    p = dict.fromkeys(uniq, 0)  # current candidate of t (this round)
    s = 0
    while s < n_pages:
        # A page takes the first candidate with room, from the start of its list: reclaim can lift a zone's
        # free count and reopen a candidate a target had skipped, so nothing is remembered across rounds.
        groups: dict[tuple[int, bool, int, int], list[int]] = {}
        active = [t for t in uniq if k[t] < len(pos[t])]
        end = n_pages  # exclusive
        for t in active:
            cands = plans[t].candidates
            j = 0
            while j < len(cands) and state.cap(cands[j]) == 0:
                j += 1
            p[t] = j
            if j == len(cands):
                end = min(end, int(pos[t][k[t]]))  # fails unless a reclaim before it reopens a candidate
                continue
            groups.setdefault(cands[j].key, []).append(t)
        if end <= s:
            break
        by_zone: dict[int, list[list[int]]] = {}
        for key, ts in groups.items():
            by_zone.setdefault(key[0], []).append(ts)
        for z, gs in by_zone.items():
            # A reclaiming candidate lifts free up to its threshold on its first page; another target with a
            # lower threshold on this zone may then take from it: end the round after that first page.
            members = {t for ts in gs for t in ts}
            for ts in gs:
                cand = plans[ts[0]].candidates[p[ts[0]]]
                if not cand.reclaim or state.free[z] >= cand.thr:
                    continue
                if any(
                    c.zone == z and c.thr < cand.thr
                    for t in active
                    if t not in members
                    for c in plans[t].candidates
                ):
                    end = min(end, min(int(pos[t][k[t]]) for t in ts) + 1)
        for ts in groups.values():
            cand = plans[ts[0]].candidates[p[ts[0]]]
            if len(by_zone[cand.zone]) == 1:
                x = _kth_position([pos[t] for t in ts], [k[t] for t in ts], state.cap(cand), s, n_pages - 1)
                end = min(end, x + 1)
        # Different kinds of candidate on one zone (node_reclaim allowed for some targets only) interact page
        # by page: walk their merged pages with the closed form of _mixed_walk, a window at a time.
        mixed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for z, gs in by_zone.items():
            if len(gs) > 1:
                limit = min(end, s + _MIXED_WINDOW)
                spec = [(plans[ts[0]].candidates[p[ts[0]]], [pos[t][k[t] :] for t in ts]) for ts in gs]
                merged, f_after, stop = _mixed_walk(state.free[z], state.cache[z], spec, limit)
                mixed[z] = (merged, f_after)
                end = min(end, stop)
        for ts in groups.values():
            taken = 0
            for t in ts:
                cand = plans[t].candidates[p[t]]
                hi = int(np.searchsorted(pos[t], end, side="left"))
                n = hi - k[t]
                if n:
                    sel = pos[t][k[t] : hi]
                    out_nodes[sel] = node_of[cand.zone]
                    out_zones[sel] = type_of[cand.zone]
                    segments.append((t, cand, n))
                    k[t] = hi
                    taken += n
            cand = plans[ts[0]].candidates[p[ts[0]]]
            if cand.zone not in mixed:
                state.take(cand, taken)
        for z, (merged, f_after) in mixed.items():
            m = int(np.searchsorted(merged, end, side="left"))
            if m:
                # the closed form gives free after the m pages; what reclaim freed is free + cache lost less m
                total = state.free[z] + state.cache[z] - m
                cache_new = total - int(f_after[m - 1])
                state.reclaimed += shrink_zone_cache(state.free, state.cache, z, state.cache[z] - cache_new)
                state.free[z] -= m
        s = end
    return out_nodes[:s], out_zones[:s], segments, state, s
