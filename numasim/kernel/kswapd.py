"""kswapd: one background reclaim thread per node, on the allocation's clock or the simulation's.

Re-implements, from ``mm/vmscan.c``: ``wakeup_kswapd`` (its filters: a managed zone, the cpuset, a hopeless node
after ``MAX_RECLAIM_RETRIES`` failed runs, a node already balanced), ``pgdat_balanced`` (balanced as soon as *one*
eligible zone is above its high watermark plus its ``lowmem_reserve`` for the request's highest zone),
``balance_pgdat`` / ``kswapd_shrink_node`` (reclaim across the node's zones up to ``highest_zoneidx`` until
balanced, ``kswapd_failures`` on a run without progress); from ``mm/page_alloc.c``: ``wake_all_kswapds`` (every
node of the zonelist, once each, when the allocation enters ``__alloc_pages_slowpath``). The pages go through
:func:`numasim.kernel.reclaim.shrink_node_cache`, the routine direct reclaim and node_reclaim use.

**The clock.** numasim places memory before timing, so kswapd runs on the clock of the faulting program: a
request is allocated in batches, each batch of ``n`` pages takes ``n / KernelConfig.fault_pages_per_s`` seconds,
and after it every awake kswapd reclaims ``elapsed * kswapd_reclaim_bytes_per_s / page_size`` pages (fractions
of a page carried to the next batch). What kswapd freed is on the free lists when the next batch starts, so the
fast path takes it as soon as a zone is back above its low watermark; it arrives one batch late, which costs a
kswapd faster than the faults a few percent of the pages it could have given its node. A batch is
cut at the first page whose path wakes a sleeping kswapd, so a wake-up happens at the right page; while a kswapd
is awake, batches are at most a sixteenth of its node's widest low-to-high gap, so kswapd's stop at the high
watermark is resolved finely. Between requests no time passes; :meth:`Kswapd.idle` lets it pass. In a timed run
the simulation's clock replaces this one (:mod:`numasim.kernel.first_touch`: pages fault at their first access
in the simulation, kswapd reclaims as simulated time passes, :attr:`Kswapd.allocation_clock` is off).

**When kswapd wakes** (``KernelConfig.kswapd_enabled``, and a gfp with ``__GFP_KSWAPD_RECLAIM``):

* ``wake_all_kswapds``: the first page of a request that reaches the slow path (every zone of the zonelist at
  its low watermark) wakes every node of the slow path's zonelist, as the kernel does.
* ``kswapd_wake_on_fallback`` (default on): a page that the fast path places on a later node of the zonelist
  wakes the kswapd of every node it passed over (below their low watermark). The kernel's order-0 fast path
  does not call ``wakeup_kswapd`` itself; two real paths do this as a node fills while the next node still has
  room: since 5.0 a fragmenting fallback on the full node boosts its watermark and ``rmqueue`` wakes its kswapd
  (``boost_watermark``, ``ZONE_BOOSTED_WATERMARK``), and on 4.x kernels a transparent huge page fault tries the
  local node with ``__GFP_THISNODE`` first, whose slow path wakes the local kswapd before the fault falls back.
  numasim has no migratetypes and places order-0 pages, so one rule stands for both
  (docs/kernel-spec-coverage.md K1). Turn it off for the strict order-0 rule.

Simplified (docs/kernel-spec-coverage.md K1-K5): only the clean page cache given to the kernel is reclaimed
(no anonymous memory, no swap, no writeback, no slab); reclaim is split over a node's zones in proportion to
their cache (the node-wide LRU); no watermark boost (numasim models ``watermark_boost_factor = 0``); kswapd's
failure count is reset by its own progress only. Requests with one target per page (interleave) run the same
way (:meth:`Kswapd.allocate_per_page`).

Examples
--------
>>> from numasim.kernel.allocator import AllocRequest
>>> from numasim.kernel.config import KernelConfig
>>> from numasim.kernel.physmem import PhysicalMemory
>>> from numasim.topology.model import Link, Machine, Node
>>> nodes = [Node(id=i, cpus=[i], memory_bytes=4 << 30, free_bytes=2 << 30) for i in (0, 1)]
>>> m = Machine(name="two", nodes=nodes, links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
...             firmware_slit=[[10, 20], [20, 10]])
>>> pm = PhysicalMemory(m, KernelConfig(kswapd_enabled=True, reclaimable_page_cache_bytes={0: 256 << 20}))
>>> r = pm.alloc(AllocRequest(count=(3 << 30) // 4096, preferred_nid=0))
>>> pm.vmstat["pgsteal_kswapd"] * 4096 >> 20  # kswapd reclaimed node 0's 256 MB of clean cache
256
>>> r.per_node_pages[0] * 4096 >> 20  # and node 0 took it: more than the 2 GB it had free
2236
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.allocator import AllocPlan, AllocRequest, Segment, ZoneState, run_per_page, walk_scalar
from numasim.kernel.reclaim import shrink_node_cache
from numasim.kernel.zones import Zone

if TYPE_CHECKING:
    from numasim.kernel.physmem import PhysicalMemory

__all__ = ["KSWAPD_BATCH_PAGES", "MAX_RECLAIM_RETRIES", "Kswapd", "pgdat_balanced"]

KSWAPD_BATCH_PAGES = 1 << 14
"""Largest batch (64 MiB of 4 KiB pages) the allocator places between two kswapd steps."""
MAX_RECLAIM_RETRIES = 16
"""``include/linux/mmzone.h``: after this many kswapd runs without progress a node is hopeless (not woken)."""
SWAP_CLUSTER_MAX = 32
"""Smallest batch while a kswapd is awake (kswapd reclaims at least this many pages per zone and pass)."""
_GAP_FRACTION = 16
"""While a kswapd is awake, a batch is at most 1/16 of its node's widest low-to-high watermark gap."""


def pgdat_balanced(zones: Sequence[Zone], free: Sequence[int], highest_zoneidx: int) -> bool:
    """``pgdat_balanced(pgdat, 0, highest_zoneidx)``: some managed zone up to ``highest_zoneidx`` is above its
    high watermark plus its reserve for that zone (``zone_watermark_ok_safe``, order 0, strict ``>``).

    ``zones`` are one node's zones in type order, ``free`` their free pages. A node with no managed zone in
    range is balanced "by definition" (a zone-restricted allocation waking a remote kswapd).
    """
    any_managed = False
    for z, f in zip(zones, free, strict=True):
        if z.type > highest_zoneidx or z.managed_pages == 0:
            continue
        any_managed = True
        if f > z.wmark_high + z.lowmem_reserve[highest_zoneidx]:
            return True
    return not any_managed


class Kswapd:
    """The kswapd threads of one :class:`~numasim.kernel.physmem.PhysicalMemory` and their clock.

    Attributes
    ----------
    awake : dict of int to int
        Node id -> ``kswapd_highest_zoneidx`` for every kswapd that is running.
    failures : dict of int to int
        ``kswapd_failures`` per node id: runs in a row that reclaimed nothing.
    clock_s : float
        Seconds of faulting (and idle time) kswapd has seen so far.
    allocation_clock : bool
        Time passes while pages are allocated (``1 / fault_pages_per_s`` per page; the default). False when
        the simulation's clock drives kswapd instead (:mod:`numasim.kernel.first_touch`): allocation then takes
        no time of its own and kswapd reclaims through :meth:`idle`.
    """

    def __init__(self, pm: PhysicalMemory) -> None:
        self.pm = pm
        self.awake: dict[int, int] = {}
        self.failures: dict[int, int] = {nid: 0 for nid in pm.node_ids}
        self.clock_s = 0.0
        self.allocation_clock = True
        self._carry: dict[int, float] = {}
        self._zone_idx = {nid: [i for i, z in enumerate(pm.zones) if z.node == nid] for nid in pm.node_ids}

    # --- rates ------------------------------------------------------------------------------------------
    @property
    def reclaim_pages_per_s(self) -> float:
        """kswapd's reclaim rate in pages per second (``kswapd_reclaim_bytes_per_s / page_size_bytes``)."""
        cfg = self.pm.config
        return cfg.kswapd_reclaim_bytes_per_s / cfg.page_size_bytes

    # --- wake-ups ---------------------------------------------------------------------------------------
    def wakeable(self, state: ZoneState, nid: int, highest_zoneidx: int, req: AllocRequest | None = None) -> bool:
        """Whether ``wakeup_kswapd`` would wake node ``nid``'s kswapd now (it sleeps and the filters pass)."""
        if nid in self.awake or self.failures[nid] >= MAX_RECLAIM_RETRIES:
            return False
        if req is not None and req.mems_allowed is not None and nid not in req.mems_allowed:
            return False  # cpuset_zone_allowed
        idx = self._zone_idx[nid]
        zones = [self.pm.zones[i] for i in idx]
        if not any(z.managed_pages and z.type <= highest_zoneidx for z in zones):
            return False  # managed_zone(): nothing to balance
        return not pgdat_balanced(zones, [state.free[i] for i in idx], highest_zoneidx)

    def wakeup_kswapd(self, state: ZoneState, nid: int, highest_zoneidx: int, req: AllocRequest | None = None) -> bool:
        """``wakeup_kswapd``: wake node ``nid``'s kswapd unless a filter says no; returns whether it woke.

        An awake kswapd only raises its ``highest_zoneidx``. Each wake starts a ``balance_pgdat`` run
        (``pageoutrun``).
        """
        if nid in self.awake:
            self.awake[nid] = max(self.awake[nid], highest_zoneidx)
            return False
        if not self.wakeable(state, nid, highest_zoneidx, req):
            return False
        self.awake[nid] = highest_zoneidx
        self._carry[nid] = 0.0
        self.pm.vmstat["pageoutrun"] += 1
        return True

    # --- reclaim ----------------------------------------------------------------------------------------
    def _to_balance(self, state: ZoneState, zs: list[int], highest_zoneidx: int) -> int:
        """Pages to reclaim, split over ``zs`` by cache, before one zone passes its high mark (all the cache
        if no zone can get there)."""
        total = sum(state.cache[i] for i in zs)
        best = total
        for i in zs:
            z = self.pm.zones[i]
            short = z.wmark_high + z.lowmem_reserve[highest_zoneidx] + 1 - state.free[i]
            if short <= 0:
                return 0
            c = state.cache[i]
            if 0 < short <= c:
                # this zone gets c/total of what is reclaimed: ceil so that its floor share reaches `short`
                best = min(best, -(-short * total // c))
        return best

    def balance(self, state: ZoneState, nid: int, budget_pages: int | None) -> int:
        """One ``balance_pgdat`` stretch of node ``nid``'s kswapd with ``budget_pages`` of reclaim time
        (None: as long as it takes); returns the pages reclaimed. The kswapd goes back to sleep once the node
        is balanced or, after ``MAX_RECLAIM_RETRIES`` runs without progress, hopeless."""
        hz = self.awake[nid]
        zs = [i for i in self._zone_idx[nid] if self.pm.zones[i].managed_pages and self.pm.zones[i].type <= hz]
        zones = [self.pm.zones[i] for i in zs]
        freed = 0
        while True:
            if pgdat_balanced(zones, [state.free[i] for i in zs], hz):
                del self.awake[nid]
                return freed
            if budget_pages is not None and budget_pages - freed <= 0:
                return freed
            want = self._to_balance(state, zs, hz)
            if budget_pages is not None:
                want = min(want, budget_pages - freed)
            got = sum(shrink_node_cache(state.free, state.cache, zs, want))
            self.pm.vmstat["pgscan_kswapd"] += got
            self.pm.vmstat["pgsteal_kswapd"] += got
            freed += got
            if got:
                self.failures[nid] = 0
                continue
            # a run that reclaimed nothing: kswapd_failures++, and balance_pgdat runs again until hopeless
            self.failures[nid] += 1
            if self.failures[nid] >= MAX_RECLAIM_RETRIES:
                del self.awake[nid]
                return freed
            self.pm.vmstat["pageoutrun"] += 1
            if budget_pages is not None:
                return freed  # the retry waits for the next stretch of time

    def run(self, state: ZoneState, elapsed_s: float) -> int:
        """Let ``elapsed_s`` seconds pass for every awake kswapd; returns the pages reclaimed."""
        self.clock_s += elapsed_s
        rate = self.reclaim_pages_per_s
        freed = 0
        for nid in sorted(self.awake):
            carry = self._carry.get(nid, 0.0) + elapsed_s * rate
            budget = int(math.floor(carry))
            self._carry[nid] = carry - budget
            freed += self.balance(state, nid, budget)
        return freed

    def idle(self, seconds: float | None = None) -> int:
        """Time passes without allocations (the program sleeps, or has finished faulting): every awake kswapd
        reclaims for ``seconds`` (None: until it sleeps). Returns the pages reclaimed.

        Examples
        --------
        >>> from numasim.topology.builders import glueless
        >>> from numasim.kernel.physmem import PhysicalMemory
        >>> PhysicalMemory(glueless(2)).kswapd.idle()  # nobody awake
        0
        """
        if seconds is not None and not (0.0 <= seconds < math.inf):
            raise ValueError(f"Kswapd.idle: seconds = {seconds}: must be a finite number >= 0")
        state = ZoneState(self.pm.zones)
        if seconds is None:
            freed = sum(self.balance(state, nid, None) for nid in sorted(self.awake))
        else:
            freed = self.run(state, seconds)
        state.write_back(self.pm.zones)
        return freed

    # --- allocation -------------------------------------------------------------------------------------
    def _batch_pages(self) -> int:
        if not self.awake:
            return KSWAPD_BATCH_PAGES
        gap = min(
            max((self.pm.zones[i].wmark_high - self.pm.zones[i].wmark_low) for i in self._zone_idx[nid])
            for nid in self.awake
        )
        return max(SWAP_CLUSTER_MAX, min(KSWAPD_BATCH_PAGES, gap // _GAP_FRACTION))

    def _first_wake(
        self,
        plan: AllocPlan,
        segs: list[Segment],
        asked: int,
        state: ZoneState,
        target: int,
        hz: int,
        req: AllocRequest,
    ) -> tuple[int, list[int]] | None:
        """The first page of a trial batch (``segs``, from ``state``) whose path wakes a sleeping kswapd:
        (pages before it, nodes to wake), judged on the zones as they are when that page is allocated."""
        fast_nodes, slow_nodes = _node_orders(self.pm, plan)
        events: list[tuple[int, list[int]]] = []
        done = 0
        for _, c, n in segs:
            if c.slow:
                events.append((done, slow_nodes))
            elif self.pm.config.kswapd_wake_on_fallback:
                events.append((done, fast_nodes[: fast_nodes.index(self.pm.zones[c.zone].node)]))
            done += n
        if done < asked:
            events.append((done, slow_nodes))  # the page that fails goes through the slow path first
        for at, wake in events:
            # cheap filters first; the balance test needs the zones as they are at that page
            if not any(w not in self.awake and self.failures[w] < MAX_RECLAIM_RETRIES for w in wake):
                continue
            then = state.copy()
            walk_scalar(plan, at, then, target)
            if any(self.wakeable(then, w, hz, req) for w in wake):
                return at, wake
        return None

    def allocate(
        self,
        plan: AllocPlan,
        count: int,
        target: int,
        highest_zoneidx: int,
        req: AllocRequest,
        may_wake: bool = True,
    ) -> tuple[list[Segment], ZoneState]:
        """:func:`~numasim.kernel.allocator.walk_scalar` of ``count`` pages in batches, kswapd running between
        them (module docstring). ``may_wake``: the gfp has ``__GFP_KSWAPD_RECLAIM`` (``ALLOC_KSWAPD``); without
        it the request wakes nobody, but kswapds already awake go on. Returns the segments (consecutive ones of
        one candidate merged) and the final state; fewer pages than ``count`` when the walk failed."""
        state = ZoneState(self.pm.zones)
        fault_s = 1.0 / self.pm.config.fault_pages_per_s if self.allocation_clock else 0.0
        segments: list[Segment] = []
        remaining = count
        while remaining > 0:
            n = min(self._batch_pages(), remaining)
            trial = state.copy()
            segs = walk_scalar(plan, n, trial, target)
            got = sum(k for _, _, k in segs)
            first = self._first_wake(plan, segs, n, state, target, highest_zoneidx, req) if may_wake else None
            if first is not None:
                got, wake = first
                segs = walk_scalar(plan, got, state, target) if got else []
            else:
                state = trial
            _merge(segments, segs)
            remaining -= got
            self.run(state, got * fault_s)  # kswapd reclaimed while these pages were faulted
            if first is not None:
                for nid in wake:
                    self.wakeup_kswapd(state, nid, highest_zoneidx, req)
            elif got < n:
                break  # nothing more fits: the caller reports the failure
        return segments, state

    def allocate_per_page(
        self,
        plans: dict[int, AllocPlan],
        positions: dict[int, np.ndarray],
        count: int,
        highest_zoneidx: int,
        req: AllocRequest,
        may_wake: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, list[Segment], ZoneState, int]:
        """:func:`~numasim.kernel.allocator.run_per_page` (one target node per page: interleave) in batches of
        consecutive pages, kswapd running between them as in :meth:`allocate`.

        A batch is cut at the first page whose path wakes a sleeping kswapd (found by bisection over the
        batch's length: the page that reaches the slow path, or that the fast path places past a node below its
        low watermark); that page wakes them, judged on the zones as they are when it is allocated. Committed
        batches are written to the zones as they go (the caller writes the final state back again). Returns
        the node and zone type of each allocated page, the segments, the final state (``reclaimed``: direct
        reclaim over all batches) and the number of pages allocated.
        """
        zones = self.pm.zones
        fault_s = 1.0 / self.pm.config.fault_pages_per_s if self.allocation_clock else 0.0
        out_nodes = np.empty(count, dtype=np.int16)
        out_zones = np.empty(count, dtype=np.int8)
        segments: list[Segment] = []
        reclaimed = 0
        order = {t: _node_orders(self.pm, plan) for t, plan in plans.items()}
        s = 0
        while s < count:
            n = min(self._batch_pages(), count - s)

            def trial(length: int, s: int = s) -> tuple[np.ndarray, np.ndarray, list[Segment], ZoneState, int]:
                sub = {t: p[lo:hi] - s for t, p in positions.items()
                       if (lo := int(np.searchsorted(p, s))) < (hi := int(np.searchsorted(p, s + length)))}  # fmt: skip
                return run_per_page(plans, sub, length, zones)

            def wakes(
                result: tuple[np.ndarray, np.ndarray, list[Segment], ZoneState, int], length: int, s: int = s
            ) -> list[int]:
                _, _, segs, then, got = result
                nodes: list[int] = []
                for t, c, k in segs:
                    fast, slow = order[t]
                    if not k:
                        continue
                    if c.slow:
                        passed = slow
                    elif self.pm.config.kswapd_wake_on_fallback:
                        passed = fast[: fast.index(zones[c.zone].node)]
                    else:
                        passed = []
                    nodes += [w for w in passed if w not in nodes]
                if got < length:  # the page that fails goes through the slow path first
                    nodes += [w for w in order[_target_at(positions, s + got)][1] if w not in nodes]
                return [w for w in nodes if self.wakeable(then, w, highest_zoneidx, req)]

            full = trial(n)
            wake = wakes(full, n) if may_wake else []
            commit = full
            then = full[3]
            if wake:
                # the shortest prefix whose pages wake someone: its last page is the waking one
                lo, hi = 1, n
                while lo < hi:
                    mid = (lo + hi) // 2
                    r = trial(mid)
                    w = wakes(r, mid)
                    if w:
                        hi, then, wake = mid, r[3], w
                    else:
                        lo = mid + 1
                if hi == n:
                    then = full[3]
                commit = trial(hi - 1)
            nodes_b, zones_b, segs_b, state, got = commit
            out_nodes[s : s + got] = nodes_b
            out_zones[s : s + got] = zones_b
            segments += [(t, c, k) for t, c, k in segs_b if k]
            reclaimed += state.reclaimed
            s += got
            self.run(state, got * fault_s)
            state.write_back(zones)
            if wake:
                for nid in wake:
                    self.wakeup_kswapd(then, nid, highest_zoneidx, req)
            elif got < n:
                break
        final = ZoneState(zones)
        final.reclaimed = reclaimed
        return out_nodes[:s], out_zones[:s], segments, final, s


def _node_orders(pm: PhysicalMemory, plan: AllocPlan) -> tuple[list[int], list[int]]:
    """A plan's fast-path and slow-path node orders (each node once, in zonelist order)."""
    fast: list[int] = []
    slow: list[int] = []
    for c in plan.candidates:
        nid = pm.zones[c.zone].node
        into = slow if c.slow else fast
        if nid not in into:
            into.append(nid)
    return fast, slow


def _target_at(positions: dict[int, np.ndarray], page: int) -> int:
    for t, p in positions.items():
        i = int(np.searchsorted(p, page))
        if i < len(p) and int(p[i]) == page:
            return t
    raise ValueError(f"no target for page {page}")


def _merge(into: list[Segment], segs: list[Segment]) -> None:
    for seg in segs:
        if into and into[-1][0] == seg[0] and into[-1][1] == seg[1]:
            into[-1] = (seg[0], seg[1], into[-1][2] + seg[2])
        else:
            into.append(seg)

