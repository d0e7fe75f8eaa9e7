"""Exact mode: every request is timed one by one in strict time order; controllers and links are FIFO servers.

Every agent (thread or device transfer) walks its requests in program order with the rules of :mod:`timing`:
it waits until the request may issue, looks the line up in its LRU caches (an instance shared by several cpus
is shared state, touched in simulated-time order), and sends a miss through the resources of its route class.
Agents run in strict time order (ties by the order they were last scheduled in) from a heap; an agent runs on
until another agent is due first or an epoch ends.

That per-request loop and the dispatch between agents are one compiled kernel
(:func:`~numasim.engine._exact_kernel.run_kernel`, numba) over flat numpy state: the agents' current blocks of
requests, their in-flight completion times, the caches as tag/use-stamp arrays, the FIFO servers' next free
times and the busy time of the open epoch buckets. The kernel returns to this module only at an epoch boundary,
at the end of an agent's block and when its ring of open buckets must grow. SimPy is still the clock: the
engine is one SimPy process, which advances the clock to every epoch boundary before the kernel runs past it,
so other SimPy processes interleave with the agents at epoch resolution. (The naive design, one SimPy event and
one ``simpy.Resource`` request per resource per access, is the baseline in ``benchmarks/bench_engine.py``.)

Each resource is a FIFO server that starts one line every ``busy_ns`` (64 B / bandwidth, times
``write_cost_factor`` for writes): a request that finds it busy waits. Because the wait is known at issue time,
the completion needs no event of its own; only the issue does.

Latency of a miss = idle route latency + FIFO waits + the loaded-latency curve of each resource at its
utilisation over the previous epoch (a hardware counter's view: ``busy / epoch_ns``), times the prefetch factor.
The curve delays are updated here, in numpy, at every epoch boundary (:meth:`ExactEngine._roll`).
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
import simpy

from numasim.timing.model import LoadedLatencyCurve

from . import _exact_kernel as K
from ._runtime_kernel import protected_rows
from .caches import LRUCache
from .protocol import EngineInput, grow_bucket_ring
from .runtime import bulk_class_tables, evasion_tables
from .stream import Block
from .timing import UTILISATION_EMA_WEIGHT

__all__ = ["ExactEngine"]

_RING_ROWS = 64  # initial open epoch buckets held (a power of two; grown on demand)
_RUNTIME_BLOCK = 2048
"""With a run-time kernel, requests installed at once per agent: its faults are handled and its routes read when
the block is installed, so the kernel's changes reach an agent within this many of its requests."""


class ExactEngine:
    """Runs the exact fidelity (see module docstring); an :class:`~numasim.engine.protocol.Engine`.

    Each agent's caches come from the input's cache instances (:func:`_agent_caches`); the run keeps the cache
    state in its own arrays.
    """

    def __init__(self, inp: EngineInput) -> None:
        ms, agents = inp.ms, list(inp.agents)
        self.ms, self.agents, self.feeder, self.stats = ms, agents, inp.feeder, inp.stats
        caches = _agent_caches(inp)
        level_latency_ns = inp.level_latency_ns.tolist()
        prefetch_distance_lines = inp.prefetch_distance_lines
        self.n_levels = len(level_latency_ns)
        self.E = float(inp.epoch_ns)
        n_res = len(ms.resources)
        n_agents = len(agents)
        self.free = np.full(n_res, -np.inf)  # idle since ever: a thread may start at a negative time
        # Per route class: idle latency and the (resource, busy_ns) pairs in the order the data crosses them.
        self.class_base = np.asarray(ms.class_base_latency_ns(), dtype=np.float64).copy()
        paths = [list(ms.class_resources[c]) for c in range(ms.n_classes)]
        lens = np.array([len(p) for p in paths], dtype=np.int64)
        self.path_start, self.path_res, self.path_busy = ms.class_paths()
        self.path_wb_share = ms.path_wb_share
        self.bridge = inp.bridge
        if self.bridge is not None:  # and the kernel's copies, in requests of several lines (runtime.py)
            self.class_base, self.path_start, self.path_res, self.path_busy, self.path_wb_share = bulk_class_tables(
                self.class_base, self.path_start, self.path_res, self.path_busy, self.path_wb_share
            )
            paths = paths + paths
        # The paths padded to one width (-1 = none): class curve delays summed column by column, in path order.
        width = int(lens.max()) if len(lens) else 0
        self._path_pad = np.full((len(paths), width), -1, dtype=np.int64)
        for c, p in enumerate(paths):
            self._path_pad[c, : len(p)] = p
        self.n_nodes = ms.n_nodes
        self.own_busy = ms.own_line_busy_ns()
        self._ema = np.zeros(n_res)
        self._ema_bucket = -10
        # the curves as tables, for a dependent agent's miss (``_epoch_kernel.self_paced_curve_ns`` reads them
        # with ``_ema``, the last roll's smoothed utilisation)
        self.curve_n, self.curve_x, self.curve_y = ms.curve_tables()
        self.curve_now = np.zeros(n_res)
        self._curve_key = b""  # the utilisation ``curve_now`` was computed at
        groups: dict[tuple[tuple[float, ...], tuple[float, ...]], tuple[LoadedLatencyCurve, list[int]]] = {}
        for r, res in enumerate(ms.resources):
            if res.curve is not None:
                shape = (tuple(res.curve.utilisation), tuple(res.curve.added_latency_ns))
                groups.setdefault(shape, (res.curve, []))[1].append(r)
        self._curves = [(curve, np.array(idx)) for curve, idx in groups.values()]
        self._zeros = np.zeros(n_res)
        # Per route class, the sum of the curve delays of its resources (in path order, as a miss adds them).
        self.class_curve = np.zeros(len(paths))
        # Write-allocate evasion: per class its controller and evadable share, the ramp (empty tables: none)
        self.class_ctrl, self.class_evadable, self.evade_ramp = evasion_tables(ms, self.bridge is not None)
        # Write-backs owed by write hits on clean lines: their share of a write's cost, and a count per class
        self.wb_count = np.zeros(len(self.class_base), dtype=np.int64)
        self.bucket = 0
        self.next_roll = self.E
        self.completed = 0

        # --- agents -------------------------------------------------------------------------------------
        mlp = [1 if a.dependent else a.mlp for a in agents]
        self.mlp = np.array(mlp, dtype=np.int64)
        self.pff = np.array([a.prefetch_factor(m, prefetch_distance_lines) for m, a in zip(mlp, agents, strict=True)],
                            dtype=np.float64)
        self.dependent = np.array([a.dependent for a in agents], dtype=np.bool_)
        # a thread with 1/k of a cpu holds each miss slot k times the miss (see EpochEngine.stretch)
        self.stretch = np.array([float(a.cpu_share) for a in agents])
        self.shares = inp.shares  # when a thread ends, those it shared cpus with take its time (_share_out)
        self.last_issue = np.array([a.start_ns for a in agents], dtype=np.float64)
        self.last_done = self.last_issue.copy()
        self.infl_off = np.r_[0, np.cumsum(self.mlp)[:-1]].astype(np.int64) if n_agents else np.zeros(0, np.int64)
        self.infl = np.zeros(int(self.mlp.sum()))
        self.infl_n = np.zeros(n_agents, dtype=np.int64)
        self.acc_bk = np.zeros(n_agents, dtype=np.int64)
        self.acc_lo = np.zeros(n_agents)
        self.acc_hi = np.full(n_agents, -1.0)  # no bucket cached yet
        self.init_off = np.array([a.initiator * self.n_nodes for a in agents], dtype=np.int64)

        # --- caches: one global index per distinct LRUCache object ------------------------------------------
        index: dict[int, int] = {}
        objects: list[LRUCache] = []
        self.instance = np.zeros((n_agents, max(self.n_levels, 1)), dtype=np.int64)
        self.n_cache = np.array([len(c) for c in caches], dtype=np.int64)
        for a, per_level in enumerate(caches):
            for lv, cache in enumerate(per_level):
                g = index.setdefault(id(cache), len(objects))
                if g == len(objects):
                    objects.append(cache)
                self.instance[a, lv] = g
        self.c_sets = np.array([c.sets for c in objects], dtype=np.int64)
        self.c_ways = np.array([c.ways for c in objects], dtype=np.int64)
        size = self.c_sets * self.c_ways
        self.c_off = np.r_[0, np.cumsum(size)[:-1]].astype(np.int64) if len(objects) else np.zeros(0, np.int64)
        # (line, stamp) per way; zeros: the pages of sets never touched cost no memory
        self.ways_data = np.zeros(2 * int(size.sum()), dtype=np.int64)
        if any(any(cache._data) for cache in objects):
            raise ValueError("ExactEngine: the caches must start empty")
        self.level_lat = np.array(level_latency_ns, dtype=np.float64)
        # Per level, the instances in use (``inv_inst[inv_start[lv]:inv_start[lv + 1]]``): a write takes its line
        # from those of them its agent does not use (coherence; epoch mode's estimate does the same).
        in_use = [
            sorted({int(self.instance[a, lv]) for a in range(n_agents) if self.n_cache[a] > lv})
            for lv in range(self.n_levels)
        ]
        self.inv_start = np.r_[0, np.cumsum([len(x) for x in in_use], dtype=np.int64)].astype(np.int64)
        self.inv_inst = np.array([g for x in in_use for g in x], dtype=np.int64)
        self.coherence_misses = np.zeros(n_agents, dtype=np.int64)
        """Per agent, the accesses that missed their first level and would have hit it had no other core written
        the line (the first level's shadow without invalidations held it)."""
        first = sorted({int(self.instance[a, 0]) for a in range(n_agents) if self.n_cache[a] > 0})
        self.sh_off = np.full(len(objects), -1, dtype=np.int64)
        off = 0
        for g in first:
            self.sh_off[g] = off
            off += int(size[g])
        self.shadow = np.zeros(2 * off, dtype=np.int64)
        self.sh_on = np.array([0 if len(first) > 1 else -1], dtype=np.int64)
        self.dirty = np.zeros(len(self.ways_data) // 2, dtype=np.bool_)
        self.n_dirty = np.zeros(1, dtype=np.int64)
        # each instance's coherence domain (the reader's and the holder's tell a local transfer from a remote one):
        # its agent's last-level instance, or the socket where that is a cluster's or a core's share, as epoch
        # mode's estimate has it (``CacheToCache.llc_instance``; dense ids here, -1 being the kernel's "none")
        self.c2c = inp.c2c
        domain = self.c2c.llc_instance if self.c2c is not None else None
        agent_socket = self.c2c.agent_socket if self.c2c is not None else None
        dense: dict[int, int] = {}
        self.inst_llc = np.full(len(objects), -1, dtype=np.int64)
        socket: list[int] = []  # per domain: a transfer between two of one socket takes the request's c2c_sock
        for a in range(n_agents):
            for lv in range(int(self.n_cache[a])):
                llc = int(self.instance[a, self.n_cache[a] - 1]) if domain is None else int(domain[a])
                if llc not in dense:
                    dense[llc] = len(dense)
                    socket.append(int(agent_socket[a]) if agent_socket is not None else -1 - dense[llc])
                self.inst_llc[self.instance[a, lv]] = dense[llc]
        self.llc_socket = np.array(socket, dtype=np.int64)
        self.transfers = np.zeros(2 * n_agents, dtype=np.int64)
        """Per agent, its cache-to-cache transfers from a core of its own last-level instance, then from another."""

        # --- kernel state -----------------------------------------------------------------------------------
        self.st_i = np.zeros(K.N_STATE, dtype=np.int64)
        self.st_f = np.zeros(K.N_STATE, dtype=np.float64)
        first = [int(a.start_ns // self.E) for a in agents if a.start_ns < 0]
        self.st_i[K.I_RING_LO] = min([0, *first])
        rows = _RING_ROWS
        while rows <= -self.st_i[K.I_RING_LO]:
            rows *= 2
        self.ring = np.zeros((rows, n_res))
        self.touched = np.zeros(rows, dtype=np.bool_)
        self.heap_t = np.zeros(n_agents)
        self.heap_o = np.zeros(n_agents, dtype=np.int64)
        self.heap_a = np.zeros(n_agents, dtype=np.int64)
        # Request buffers: a slot per agent holding its current block.
        self.pos = np.zeros(n_agents, dtype=np.int64)
        self.end = np.zeros(n_agents, dtype=np.int64)
        self._slot = np.zeros(n_agents, dtype=np.int64)
        self._cap = np.zeros(n_agents, dtype=np.int64)
        self._blocks: list[Block | None] = [None] * n_agents
        self._seen_protected: np.ndarray | None = None  # the pages protected at the last check (_recheck_protected)
        self._deferred: set[int] = set()  # agents whose next request faults, due after the next epoch boundary
        self._used = 0  # request buffer entries given to slots
        self.line = np.zeros(0, dtype=np.int64)
        self.cls = np.zeros(0, dtype=np.int64)
        self.compute = np.zeros(0, dtype=np.float64)
        self.prefetched = np.zeros(0, dtype=np.bool_)
        self.write = np.zeros(0, dtype=np.bool_)
        self.full = np.zeros(0, dtype=np.bool_)  # a write of its whole line (Block.full_line)
        self.c2c_far = np.zeros(0, dtype=np.float64)
        self.c2c_sock = np.zeros(0, dtype=np.float64)
        self.lat_out = np.zeros(0, dtype=np.float64)
        self.req_out = np.zeros(0, dtype=np.float64)
        self.lvl_out = np.zeros(0, dtype=np.int64)
        self._copies: dict[int, list[Block]] = {}  # kernel agent -> copy blocks not installed yet
        self._idle: set[int] = set()  # kernel agents out of the heap for want of copies
        if self.bridge is not None:  # a scheduler tick sees a thread run as it issues, not when its block completes
            self.bridge.issued_in_blocks = self._issued_in_blocks

    # --- epochs -------------------------------------------------------------------------------------------
    def _close(self, below: int) -> np.ndarray:
        """Report the charged buckets ``< below`` to the time series in ascending order; return the row of
        bucket ``below - 1`` (zeros if it was not charged)."""
        lo = int(self.st_i[K.I_RING_LO])
        rows = len(self.ring)
        mask = rows - 1
        hi = min(below, lo + rows)
        if hi - lo <= 4:  # the usual case: one epoch ends
            ks = [k for k in range(lo, hi) if self.touched[k & mask]]
        else:
            ring_rows = np.flatnonzero(self.touched)
            charged = lo + ((ring_rows - lo) & mask)  # the bucket each charged row holds
            ks = np.sort(charged[charged < below]).tolist()
        last = self._zeros
        for k in ks:
            j = k & mask
            row = self.ring[j].copy()
            self.stats.series.add(np.array([k]), row[None, :])
            self.ring[j] = 0.0
            self.touched[j] = False
            if k == below - 1:
                last = row
        return last

    def _roll(self, now: float) -> None:
        """Close the epoch buckets before ``now``: record their busy time, update the curve delays."""
        b = int(now // self.E)
        if b <= self.bucket:
            return
        last = self._close(b)
        self.st_i[K.I_RING_LO] = b
        u_seen = np.clip((last - self.own_busy) / self.E, 0.0, 1.0)  # a request does not queue behind itself
        # Smoothed over epochs: a one-epoch-late counter would otherwise make load and delay chase each other.
        if b == self._ema_bucket + 1:
            u_seen = UTILISATION_EMA_WEIGHT * self._ema + (1.0 - UTILISATION_EMA_WEIGHT) * u_seen
        self._ema, self._ema_bucket = u_seen, b
        key = u_seen.tobytes()
        if key != self._curve_key:  # (often the same: an idle or steady machine)
            self._curve_key = key
            # MemorySystem.curve_delay_ns, one (elementwise) evaluation per distinct curve
            for curve, idx in self._curves:
                self.curve_now[idx] = curve.added_ns(u_seen[idx])
            extra = np.zeros(len(self.class_curve))
            for j in range(self._path_pad.shape[1]):  # in path order, as a miss adds them (+ 0.0 is exact)
                col = self._path_pad[:, j]
                extra += np.where(col >= 0, self.curve_now[col], 0.0)
            self.class_curve[:] = extra
        self.bucket = b
        self.next_roll = (b + 1) * self.E

    def _grow(self, need: int) -> None:
        """Hold open buckets up to ``need`` in the ring."""
        lo = int(self.st_i[K.I_RING_LO])
        self.ring, self.touched = grow_bucket_ring(self.ring, self.touched, lo, need - lo + 1)

    def diagnostics(self) -> dict[str, float]:
        return {}

    def flush(self) -> None:
        lo = int(self.st_i[K.I_RING_LO])
        self._close(lo + len(self.ring))

    def _issued_in_blocks(self) -> np.ndarray:
        """Per agent: requests issued from its installed block (counted by the bridge when the block completes)."""
        installed = np.array([b is not None for b in self._blocks], dtype=bool)
        return np.where(installed, np.maximum(0, np.minimum(self.pos, self.end) - self._slot), 0)

    # --- blocks -------------------------------------------------------------------------------------------
    def _take(self, a: int) -> Block | None:
        """Agent ``a``'s next block: a kernel agent's next copies (None: idle for now), or the stream's next
        requests of a program agent -- with a run-time kernel in pieces of at most ``_RUNTIME_BLOCK`` requests,
        whose hinting faults the kernel handles, and routed by their pages' nodes, when they are installed."""
        bridge = self.bridge
        if bridge is not None and bridge.is_kernel[a]:
            queue = self._copies.get(a)
            return queue.pop(0) if queue else None
        block = self.feeder.take(a)
        while block is not None and len(block) == 0:
            block = self.feeder.take(a)
        if block is None or bridge is None:
            return block
        if len(block) > _RUNTIME_BLOCK:  # the rest goes back to the front of the agent's buffer
            self.feeder.buffers[a].insert(0, block.slice(_RUNTIME_BLOCK, len(block)))
            self.feeder.buffered[a] += len(block) - _RUNTIME_BLOCK
            block = block.slice(0, _RUNTIME_BLOCK)
        assert block.page is not None
        # a block holds at most one hinting fault, on its first request: the kernel handles it when the thread is
        # about to issue that request, not up to a block of requests early (other threads race for the same pages)
        prot = protected_rows(block.page, bridge.page_protected)
        if len(prot):
            first = int(prot[0])
            other = prot[block.page[prot] != block.page[first]]
            cut = first if first > 0 else (int(other[0]) if len(other) else len(block))
            if cut < len(block):
                self.feeder.buffers[a].insert(0, block.slice(cut, len(block)))
                self.feeder.buffered[a] += len(block) - cut
                block = block.slice(0, cut)
        page = block.page
        assert page is not None
        ids, lens = np.array([a]), np.array([len(block)])
        rc0 = (self.init_off[a] + block.target.astype(np.int64)) * 2 + block.is_write
        rows, cost = bridge.faults_before_window(ids, lens, page, rc0, float(self.last_issue[a]), 100.0)
        if len(rows):
            block.compute_ns = block.compute_ns.astype(np.float64)
            block.compute_ns[rows] += cost
        prog = page >= 0
        target = bridge.node_index[bridge.page_node[np.where(prog, page, 0)]]
        block.target = np.where(prog, target, block.target).astype(np.int16)
        return block

    def _next_block(self, a: int) -> None:
        """Install agent ``a``'s next block, or record its finish if its stream has ended."""
        block = self._take(a)
        self._blocks[a] = block
        if block is None and self.bridge is not None and self.bridge.is_kernel[a]:
            self._idle.add(a)  # no copies now: out of the heap until some come (``_wake_kernel_agents``)
            self.pos[a] = self.end[a]
            return
        if block is None:
            lo, n = int(self.infl_off[a]), int(self.infl_n[a])
            busy = max(self.infl[lo : lo + n].tolist()) if n else 0.0
            finish = max(float(self.last_done[a]), busy)
            self.stats.finish(a, finish)
            self.pos[a] = self.end[a]
            self._share_out(a, finish)
            return
        n = len(block)
        if n > self._cap[a]:  # a new, larger slot after the used part of the buffers (the old one is left)
            cap = max(n, 2 * int(self._cap[a]))
            self._slot[a], self._cap[a] = self._used, cap
            self._used += cap
            if self._used > len(self.line):
                size = max(self._used, 2 * len(self.line))

                def grow(x: np.ndarray) -> np.ndarray:
                    y = np.zeros(size, dtype=x.dtype)
                    y[: len(x)] = x
                    return y

                self.line, self.cls, self.compute = grow(self.line), grow(self.cls), grow(self.compute)
                self.prefetched, self.lat_out = grow(self.prefetched), grow(self.lat_out)
                self.write, self.full = grow(self.write), grow(self.full)
                self.c2c_far, self.c2c_sock = grow(self.c2c_far), grow(self.c2c_sock)
                self.req_out = grow(self.req_out)
                self.lvl_out = grow(self.lvl_out)
        s = int(self._slot[a])
        self.line[s : s + n] = block.line
        # route class of each request, should it miss: (initiator * n_nodes + target) * 2 + is_write
        if self.bridge is not None:  # the agent's route as the kernel left it (a thread may have moved)
            if block.route_class is not None and self.bridge.is_kernel[a]:
                self.cls[s : s + n] = block.route_class  # copy classes (several lines per request)
            else:
                self.cls[s : s + n] = self.bridge.agent_class_base[a] + block.target.astype(np.int64) * 2 + block.is_write
        else:
            self.cls[s : s + n] = (self.init_off[a] + block.target.astype(np.int64)) * 2 + block.is_write
        self.compute[s : s + n] = block.compute_ns
        self.prefetched[s : s + n] = block.prefetched
        self.write[s : s + n] = block.is_write
        self.full[s : s + n] = False if block.full_line is None else block.full_line
        if self.c2c is not None:  # a transfer from another last-level instance: its figure by the line's home
            c2c = self.c2c
            far, near = c2c.far_ns(np.full(n, a, dtype=np.int64), block.target.astype(np.int64))
            self.c2c_far[s : s + n], self.c2c_sock[s : s + n] = far, near
        self.pos[a], self.end[a] = s, s + n

    def _share_out(self, a: int, t_ns: float) -> None:
        """Thread ``a`` ended at ``t_ns``: the threads it shared cpus with take its time (:class:`CpuShares`), from
        their installed requests after the next one (whose ready time the heap holds) and in every block the feeder
        hands on."""
        shares = self.shares
        if shares is None or a >= len(shares.sharers):
            return
        for b, old, new in shares.finish(a, t_ns):
            self.feeder.set_share(b, new)
            self.stretch[b] = new
            block = self._blocks[b]
            if block is None:
                continue
            p, e, s0 = int(self.pos[b]) + 1, int(self.end[b]), int(self._slot[b])
            if p < e:
                self.compute[p:e] *= new / old
                c = np.array(block.compute_ns, dtype=np.float64)
                c[p - s0 :] *= new / old
                block.compute_ns = c
            block.share = new

    def _count_block(self, a: int) -> None:
        block = self._blocks[a]
        assert block is not None
        n, s = len(block), int(self._slot[a])
        bridge = self.bridge
        if bridge is not None:
            if bridge.is_kernel[a]:  # the kernel's copies: traffic on the links, not the program's requests
                bridge.count_copies(self.cls[s : s + n])
                self.completed += n
                return
            bridge.count_requests(a, n, block.page, float(self.last_issue[a]))
            mem = self.lvl_out[s : s + n] >= self.n_levels
            bridge.note_latency(float(self.req_out[s : s + n][mem].sum()), int(mem.sum()))
        self.stats.add(
            np.full(n, a, dtype=np.int64),
            # the initiator the block was routed from (a thread the kernel moved counts from its new node)
            np.full(n, self.agents[a].initiator if bridge is None else int(bridge.agent_initiator[a]), dtype=np.int64),
            block.target,
            block.is_write,
            self.lvl_out[s : s + n].copy(),
            self.lat_out[s : s + n].copy(),
            block.size_bytes,
            block.compute_ns,
            request_ns=self.req_out[s : s + n].copy(),
        )
        self.completed += n

    # --- the process --------------------------------------------------------------------------------------
    def _step(self) -> int:
        """Run the kernel until it needs Python (see :mod:`_exact_kernel`)."""
        self.st_f[K.F_NEXT_ROLL] = self.next_roll
        return int(
            K.run_kernel(
                self.st_i, self.st_f, self.heap_t, self.heap_o, self.heap_a,
                self.pos, self.end, self.last_issue, self.last_done, self.dependent, self.stretch, self.mlp,
                self.pff,
                self.n_cache, self.instance, self.infl, self.infl_off, self.infl_n,
                self.acc_bk, self.acc_lo, self.acc_hi,
                self.line, self.cls, self.compute, self.prefetched, self.lat_out, self.req_out, self.lvl_out,
                self.c_sets, self.c_ways, self.c_off, self.ways_data, self.level_lat, self.n_levels,
                self.write, self.inv_start, self.inv_inst, self.coherence_misses, self.sh_off, self.shadow, self.sh_on,
                self.dirty, self.n_dirty, self.inst_llc, 0.0 if self.c2c is None else self.c2c.local_ns,
                self.llc_socket, self.c2c_far, self.c2c_sock, self.transfers,
                self.path_start, self.path_res, self.path_busy, self.class_base, self.class_curve, self.free,
                self.full, self.class_ctrl, self.class_evadable, self.evade_ramp, self.own_busy,
                self.path_wb_share, self.wb_count,
                self.ring, self.touched, self.E,
                self._ema, self.curve_n, self.curve_x, self.curve_y, self._ema_bucket != -10,
            )
        )  # fmt: skip

    def now_ns(self) -> float:
        return float(self.st_f[K.F_T])

    def _runtime_step(self, t: float) -> None:
        """At an epoch boundary: delays the kernel charged threads, new copies for the kernel agents."""
        bridge = self.bridge
        assert bridge is not None
        bridge.sample(t)
        bridge.record_activity(t)
        stall = bridge.take_stalls()
        for a in np.flatnonzero(stall).tolist():
            self._heap_delay(a, float(stall[a]))
        for a, block in bridge.copy_blocks(max(1, _RUNTIME_BLOCK // (2 * bridge.requests_per_page)), self.n_levels):
            self._copies.setdefault(a, []).append(block)
            if a in self._idle:
                self._idle.discard(a)
                self.last_issue[a] = max(float(self.last_issue[a]), t)
                self.last_done[a] = max(float(self.last_done[a]), t)
                self._next_block(a)
                self._heap_push(a)

    def _recheck_protected(self) -> None:
        """The scanner protected pages since the agents' blocks were installed: each program agent's installed
        requests end before its first request to a protected page, so that the fault is taken when it issues.

        A fault on the very next request is handled at the last epoch boundary before the thread issues it, not
        earlier: a thread the kernel held back (the scan's own PTE updates, a migration) reaches the page later,
        and the other threads, which race for the same pages, may fault it first (``_deferred``)."""
        bridge = self.bridge
        assert bridge is not None
        # any page protected since the last check (a scan that protected fewer pages than faults unprotected in
        # between still has new ones)
        prot = bridge.page_protected
        if self._seen_protected is None or len(self._seen_protected) != len(prot):
            self._seen_protected = np.zeros(len(prot), dtype=bool)
        fresh = bool((prot & ~self._seen_protected).any())
        np.copyto(self._seen_protected, prot)
        if not fresh and not self._deferred:
            return
        agents = range(len(self._blocks)) if fresh else sorted(self._deferred)
        for a in agents:
            if self._cut_at_protected(a):
                self._deferred.add(a)
            else:
                self._deferred.discard(a)

    def _due_ns(self, a: int) -> float:
        """When agent ``a``'s next request is due (its dispatch heap key; inf when it is not in the heap)."""
        n = int(self.st_i[K.I_HEAP_N])
        where = np.flatnonzero(self.heap_a[:n] == a)
        return float(self.heap_t[int(where[0])]) if len(where) else np.inf

    def _cut_at_protected(self, a: int) -> bool:
        """End agent ``a``'s installed requests before its first one to a protected page (see
        :meth:`_recheck_protected`); True when that is its very next request, due after the next epoch boundary
        (left for a later boundary)."""
        bridge = self.bridge
        assert bridge is not None
        block = self._blocks[a]
        if block is None or bridge.is_kernel[a] or block.page is None or self.pos[a] >= self.end[a]:
            return False
        s = int(self._slot[a])
        j = int(self.pos[a]) - s
        rows = protected_rows(block.page[j:], bridge.page_protected)
        if not len(rows):
            return False
        q = j + int(rows[0])
        if q == j and self._due_ns(a) >= self.next_roll:
            return True
        self.feeder.buffers[a].insert(0, block.slice(q, len(block)))
        self.feeder.buffered[a] += len(block) - q
        if q > j:  # the requests before it stay installed; the faulting one starts the next block
            self._blocks[a] = block.slice(0, q)
            self.end[a] = s + q
            return False
        # the very next request faults: count what the block issued, install the rest now (the fault is
        # handled), and delay the agent's pending request by the kernel's time on it
        if j:
            self._blocks[a] = block.slice(0, j)
            self._count_block(a)
        old = float(block.compute_ns[j])
        self._next_block(a)
        new = self._blocks[a]
        if new is not None and len(new):
            extra = float(new.compute_ns[0]) - old
            if extra > 0:
                self._heap_delay(a, extra)
        return False

    def _heap_push(self, a: int) -> None:
        """Put agent ``a`` back into the dispatch heap at its next request's ready time (between kernel calls, the
        heap is consistent and no agent is being processed).

        The ready time is the kernel's own (its ``P_NEXT`` step): after the previous issue (completion, when
        dependent) and the request's compute time, and not before a miss slot is free. A kernel copy agent goes
        idle with its slots still busy; woken without freeing one, its next issue was one more than its in-flight
        heap holds, written past it (past the end of the buffer for the last agent)."""
        n = int(self.st_i[K.I_HEAP_N])
        p = int(self.pos[a])
        t = float(self.last_done[a] if self.dependent[a] else self.last_issue[a]) + float(self.compute[p])
        t, n_fly = K.free_slot(self.infl, int(self.infl_off[a]), int(self.infl_n[a]), int(self.mlp[a]), t)
        self.infl_n[a] = n_fly
        order = int(self.st_i[K.I_ORDER])
        i = n
        while i > 0:
            parent = (i - 1) // 2
            if self.heap_t[parent] > t:
                self.heap_t[i], self.heap_o[i], self.heap_a[i] = self.heap_t[parent], self.heap_o[parent], self.heap_a[parent]
                i = parent
            else:
                break
        self.heap_t[i], self.heap_o[i], self.heap_a[i] = t, order, a
        self.st_i[K.I_HEAP_N] = n + 1
        self.st_i[K.I_ORDER] = order + 1

    def _heap_delay(self, a: int, delay_ns: float) -> None:
        """Delay agent ``a``'s pending request by ``delay_ns`` (kernel time on its thread): its heap key grows."""
        self.last_issue[a] += delay_ns
        self.last_done[a] += delay_ns
        n = int(self.st_i[K.I_HEAP_N])
        where = np.flatnonzero(self.heap_a[:n] == a)
        if not len(where):
            return
        i = int(where[0])
        self.heap_t[i] += delay_ns
        K._agent_sift_down(self.heap_t, self.heap_o, self.heap_a, n, i)

    def process(self, env: simpy.Environment) -> Generator[simpy.Event, None, None]:
        """The SimPy process: run the kernel, advance the SimPy clock at every epoch boundary."""
        for agent in self.agents:
            self._next_block(agent.index)
        self.st_i[K.I_PHASE] = K.P_PRIME
        while True:
            status = self._step()
            if status == K.DONE:
                return
            if status == K.ROLL:
                t = float(self.st_f[K.F_T])
                if t > env.now:
                    yield env.timeout(t - env.now)
                self._roll(t)
                if self.bridge is not None:
                    self._runtime_step(t)
                    self._recheck_protected()
            elif status == K.BLOCK_DONE:
                a = int(self.st_i[K.I_AGENT])
                self._count_block(a)
                self._next_block(a)
            elif status == K.GROW:
                self._grow(int(self.st_i[K.I_NEED]))
            else:
                raise RuntimeError(f"exact engine: bucket {int(self.st_i[K.I_NEED])} outside the open epochs")


def _agent_caches(inp: EngineInput) -> list[list[LRUCache]]:
    """Each agent's cache per level: one object per cache instance, shared by the agents that share it (devices,
    whose DMA bypasses the cpu caches, get none). The objects, empty, give each instance's geometry."""
    objects: dict[int, LRUCache] = {}
    for lv, spec in enumerate(inp.levels):
        for a in inp.agents:
            if a.cpu is not None:
                gid = int(inp.instances[lv, a.index])
                if gid not in objects:
                    objects[gid] = LRUCache(spec.sets, spec.associativity)
    return [
        [objects[int(inp.instances[lv, a.index])] for lv in range(len(inp.levels))] if a.cpu is not None else []
        for a in inp.agents
    ]
