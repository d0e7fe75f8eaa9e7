"""Exact mode: every request is an event on a SimPy clock; controllers and links are FIFO servers.

Every agent (thread or device transfer) walks its requests in program order with the rules of :mod:`timing`:
it waits until the request may issue, looks the line up in its LRU caches (shared caches are shared objects,
touched in simulated-time order), and sends a miss through the resources of its route class. Agents are
coroutines run by one SimPy process in strict time order (ties by agent order) from a heap; the SimPy clock
is advanced at every epoch boundary, so other SimPy processes interleave with the agents at epoch resolution
and a request costs a heap operation rather than a SimPy event (the naive design, one SimPy event and one
``simpy.Resource`` request per resource per access, is the baseline in ``benchmarks/bench_engine.py``).

Each resource is a FIFO server that starts one line every ``busy_ns`` (64 B / bandwidth, times
``write_cost_factor`` for writes): a request that finds it busy waits. Because the wait is known at issue time,
the completion needs no event of its own; only the issue does.

Latency of a miss = idle route latency + FIFO waits + the loaded-latency curve of each resource at its
utilisation over the previous epoch (a hardware counter's view: ``busy / epoch_ns``), times the prefetch factor.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator

import numpy as np
import simpy

from .caches import LRUCache
from .memsys import MemorySystem
from .stats import Stats
from .stream import Agent, Feeder
from .timing import prefetch_factor

__all__ = ["ExactEngine"]

_EMA = 0.5


class ExactEngine:
    """Runs the exact fidelity (see module docstring)."""

    def __init__(
        self,
        ms: MemorySystem,
        agents: list[Agent],
        feeder: Feeder,
        stats: Stats,
        caches: list[list[LRUCache]],
        level_latency_ns: list[float],
        prefetch_distance_lines: int,
        epoch_ns: float,
    ) -> None:
        self.ms, self.agents, self.feeder, self.stats = ms, agents, feeder, stats
        self.caches = caches  # per agent: its cache instance per level (empty for devices)
        self.level_lat = list(level_latency_ns)
        self.n_levels = len(level_latency_ns)
        self.d = prefetch_distance_lines
        self.E = float(epoch_ns)
        self.free = [0.0] * len(ms.resources)
        base = ms.class_base_latency_ns()
        # Per route class: idle latency and the (resource, busy_ns) pairs in the order the data crosses them.
        self.class_base = [float(x) for x in base]
        self.class_path = [
            [(r, float(ms.busy_ns[c, r])) for r in ms.class_resources[c]] for c in range(ms.n_classes)
        ]
        self.n_nodes = ms.n_nodes
        line_busy = np.where(ms.busy_ns > 0, ms.busy_ns, np.inf).min(axis=0)
        self.own_busy = np.where(np.isfinite(line_busy), line_busy, 0.0)
        self._ema = np.zeros(len(ms.resources))
        self._ema_bucket = -10
        # Busy time per epoch bucket, charged to the bucket where the line is served (which may lie ahead).
        self.busy_by_bucket: dict[int, list[float]] = {}
        self.curve_now = [0.0] * len(ms.resources)
        # Per route class, the sum of the curve delays of its resources (in path order, as a miss adds them).
        self.class_curve = [0.0] * ms.n_classes
        self.bucket = 0
        self.next_roll = self.E
        self.horizon = np.inf
        self.stop_at = np.inf
        self.completed = 0

    def _roll(self, now: float) -> None:
        """Close the epoch buckets before ``now``: record their busy time, update the curve delays."""
        b = int(now // self.E)
        if b <= self.bucket:
            return
        last = np.zeros(len(self.ms.resources))
        for k in sorted(k for k in self.busy_by_bucket if k < b):
            row = np.array(self.busy_by_bucket.pop(k))
            self.stats.series.add(np.array([k]), row[None, :])
            if k == b - 1:
                last = row
        # In place: every agent process holds this list.
        u_seen = np.clip((last - self.own_busy) / self.E, 0.0, 1.0)  # a request does not queue behind itself
        # Smoothed over epochs: a one-epoch-late counter would otherwise make load and delay chase each other.
        if b == self._ema_bucket + 1:
            u_seen = _EMA * self._ema + (1.0 - _EMA) * u_seen
        self._ema, self._ema_bucket = u_seen, b
        curve_now = self.curve_now
        curve_now[:] = [float(x) for x in self.ms.curve_delay_ns(u_seen)]
        for c, path in enumerate(self.class_path):
            extra = 0.0
            for r, _ in path:
                extra += curve_now[r]
            self.class_curve[c] = extra
        self.bucket = b
        self.next_roll = (b + 1) * self.E

    def flush(self) -> None:
        for k in sorted(self.busy_by_bucket):
            self.stats.series.add(np.array([k]), np.array(self.busy_by_bucket.pop(k))[None, :])

    def run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        """The SimPy process: dispatch agents in time order, advance the SimPy clock at every epoch boundary."""
        heap: list[tuple[float, int, Generator[float, float, None]]] = []
        order = 0
        for agent in self.agents:
            gen = self._agent(agent)
            self.horizon = -np.inf  # make every agent stop at its first request
            self.stop_at = -np.inf
            t = next(gen, None)
            if t is not None:
                heap.append((t, order, gen))
                order += 1
        heapq.heapify(heap)
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        inf = float("inf")
        while heap:
            # The earliest agent stays on the heap while it runs and is replaced by its next time afterwards
            # (one sift instead of a pop and a push); the others' earliest time is a child of the root.
            t, _, gen = heap[0]
            n = len(heap)
            if n > 2:
                horizon = heap[1][0]
                if heap[2][0] < horizon:
                    horizon = heap[2][0]
            else:
                horizon = heap[1][0] if n == 2 else inf
            self.horizon = horizon
            # an agent runs on until another agent is due or the epoch ends (ties go to the other agent)
            next_roll = self.next_roll
            self.stop_at = horizon if horizon < next_roll else next_roll
            if t >= next_roll:
                if t > env.now:
                    yield env.timeout(t - env.now)
                self._roll(t)
            try:
                t_next = gen.send(t)
            except StopIteration:
                heappop(heap)
                continue
            heapreplace(heap, (t_next, order, gen))
            order += 1

    def _agent(self, agent: Agent) -> Generator[float, float, None]:
        """One agent's requests in program order. Yields the time of its next request whenever another agent
        (or an epoch boundary) comes first, and is resumed at that time; otherwise runs on without a stop."""
        a = agent.index
        mlp = 1 if agent.dependent else agent.mlp
        pff = prefetch_factor(mlp, self.d)
        cache_sets = [(lv, c.sets, c.ways, c._data) for lv, c in enumerate(self.caches[a])]
        level_lat = self.level_lat
        n_levels = self.n_levels
        init_off = agent.initiator * self.n_nodes
        free, class_path, class_base = self.free, self.class_path, self.class_base
        class_curve = self.class_curve
        by_bucket = self.busy_by_bucket
        n_res = len(self.ms.resources)
        epoch_ns = self.E
        inflight: list[float] = []
        last_issue = agent.start_ns
        last_done = agent.start_ns
        dependent = agent.dependent
        heappop, heappush = heapq.heappop, heapq.heappush
        acc: list[float] = []
        acc_lo, acc_hi = 0.0, -1.0  # the bucket ``acc`` belongs to (none yet)
        # The dispatcher's stop rule, as locals: it only changes while this generator is suspended.
        stop_at, horizon, next_roll = self.stop_at, self.horizon, self.next_roll
        while True:
            block = self.feeder.take(a)
            if block is None:
                break
            n = len(block)
            # route class of each request, should it miss: (initiator * n_nodes + target) * 2 + is_write
            classes = ((init_off + block.target.astype(np.int64)) * 2 + block.is_write).tolist()
            lat_out: list[float] = []
            lvl_out: list[int] = []
            lat_append, lvl_append = lat_out.append, lvl_out.append
            for line, c, compute, pf in zip(
                block.line.tolist(),
                classes,
                block.compute_ns.tolist(),
                block.prefetched.tolist(),
                strict=True,
            ):
                ready = (last_done if dependent else last_issue) + compute
                if len(inflight) >= mlp:
                    t_free = heappop(inflight)
                    if t_free > ready:
                        ready = t_free
                while inflight and inflight[0] <= ready:
                    heappop(inflight)
                if ready >= stop_at and (ready > horizon or ready >= next_roll):
                    yield ready
                    stop_at, horizon, next_roll = self.stop_at, self.horizon, self.next_roll
                level = n_levels
                # LRUCache.access inlined (the hot loop): each set a dict of its lines, least recent first.
                for lv, sets, ways, data in cache_sets:
                    key = line % sets
                    ways_set = data[key]
                    if ways_set is None:
                        data[key] = {line: None}
                    elif line in ways_set:
                        del ways_set[line]  # most recently used goes last
                        ways_set[line] = None
                        level = lv
                        break
                    elif len(ways_set) < ways:
                        ways_set[line] = None
                    else:
                        del ways_set[next(iter(ways_set))]  # evict the least recently used
                        ways_set[line] = None
                if level < n_levels:
                    lat = level_lat[level]
                else:
                    t = ready
                    for r, b in class_path[c]:
                        f = free[r]
                        if f > t:
                            t = f
                        free[r] = t + b
                        if not acc_lo <= t < acc_hi:
                            bk = int(t // epoch_ns)
                            if bk not in by_bucket:
                                by_bucket[bk] = [0.0] * n_res
                            acc = by_bucket[bk]
                            acc_lo, acc_hi = bk * epoch_ns, (bk + 1) * epoch_ns
                        acc[r] += b
                    lat = class_base[c] + (t - ready) + class_curve[c]
                    if pf:
                        lat *= pff
                done = ready + lat
                heappush(inflight, done)
                last_issue = ready
                if done > last_done:
                    last_done = done
                lat_append(lat)
                lvl_append(level)
            self.stats.add(
                np.full(n, a, dtype=np.int64),
                np.full(n, agent.initiator, dtype=np.int64),
                block.target,
                block.is_write,
                np.array(lvl_out, dtype=np.int64),
                np.array(lat_out),
                block.size_bytes,
                block.compute_ns,
            )
            self.completed += n
        self.stats.finish(a, max(last_done, max(inflight) if inflight else 0.0))
