"""Epoch mode: the memory system's queues run epoch by epoch over per-chunk cache estimates, compiled.

Epoch mode is built for big traces and sweeps. What makes it cheaper than exact mode is the caches: instead of
simulating every LRU set, each chunk of the stream gets its cache levels from the reuse-distance estimate of
:mod:`caches` (StatStack, vectorised with numpy, before any timing). Timing then runs in a compiled loop
(:mod:`_epoch_kernel`), one epoch of ``epoch_ns`` at a time:

1. every agent issues by the rules of :mod:`timing` (``compute`` after its previous issue, or after its
   previous completion when dependent, and a free slot among its MLP in flight); requests go in time order over
   all agents, in exact mode's dispatch order (the agent issuing goes on while no other is due first; ties go
   to it, then to the agent that stopped first);
2. a hit costs its level's latency and uses no resource; a miss goes through the FIFO servers of its route
   class (controller and links: each starts one line every ``busy_ns``), waits where one is busy, and costs the
   idle route latency plus that wait plus the resources' loaded-latency curve delays (times the prefetch factor
   when the prefetcher covers it). Busy time goes to the epoch bucket its service starts in;
3. when the first request of a new epoch issues, every resource's utilisation in the bucket before (its own line
   left out) is smoothed with the previous one and sets its curve delay: a hardware counter read once per epoch.

These are exact mode's rules, to the order of floating-point operations, so the two fidelities differ only in
the cache model: where no access hits a cache their results are identical. An aggregated form (fluid queues per
epoch or per short step, solved by a fixed point or causally) was this module's first design; it parted from
exact mode by 25 % to 1.9x when threads move in convoys (source 002's interleaved STREAM: a fluid queue gives a whole
burst one wait, so the burst's completions stay in step) and bought no speed once the loop was compiled. Idle
stretches (nobody issuing) are jumped over.

Requests come in *windows* (up to ``window_accesses`` buffered requests of every agent). When an agent whose
stream goes on beyond the window runs out inside an epoch, that epoch is undone, the window committed up to its
start, and the next window resumes there: every committed epoch saw every agent's requests. The window loop is
a SimPy process: SimPy stays the clock, advanced after every window.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import simpy

from ._epoch_kernel import (
    EPOCH,
    GROW,
    LOW,
    NEED,
    REFILL,
    SERIES_FULL,
    accumulate_stats,
    memory_latency,
    run_epochs,
)
from .protocol import EngineInput, grow_bucket_ring
from .requests import RequestLatencies
from .runtime import bulk_class_tables, evasion_tables
from .stats import bin_table
from .timing import UTILISATION_EMA_WEIGHT

__all__ = ["EpochEngine"]

_NO_C2C = np.zeros(0)
_NO_FULL = np.zeros(0, dtype=bool)
_NO_ISSUE = np.zeros(0)


FAULT_WINDOW_NS = 1e6
"""With a run-time kernel and protected pages, a window lasts about this long at most: the kernel handles a
hinting fault at most this late (and the faulting thread's other accesses to the page until then go to its old
node)."""

_SERIES_ROWS = 4096
_RING_ROWS = 256


class EpochEngine:
    """Runs the epoch fidelity over a :class:`Feeder` (see module docstring)."""

    def __init__(self, inp: EngineInput) -> None:
        ms, agents = inp.ms, list(inp.agents)
        self.ms, self.agents, self.feeder, self.stats = ms, agents, inp.feeder, inp.stats
        level_latency_ns = inp.level_latency_ns
        prefetch_distance_lines = inp.prefetch_distance_lines
        self.level_lat = np.r_[level_latency_ns, 0.0]
        self.n_levels = len(level_latency_ns)
        self.E = float(inp.epoch_ns)
        self.window_accesses = inp.window_accesses
        n_res = len(ms.resources)
        mlp = np.array([1 if a.dependent else a.mlp for a in agents], dtype=np.int64)
        self.mlp = mlp
        # Per agent: its last issue and completion, and the completion times of its requests in flight.
        self.last_issue = np.array([a.start_ns for a in agents], dtype=float)
        self.last_done = self.last_issue.copy()
        # (a slot per outstanding miss, each the completion time of the miss that took it last; -inf, free from
        # the start, as a thread may start at a negative time; ``run_epochs`` reads an agent's first ``mlp`` slots)
        self.inflight = np.full((len(agents), max([1, *mlp.tolist()])), -np.inf)
        self.dep = np.array([a.dependent for a in agents], dtype=bool)
        # A thread with 1/k of a cpu (taking turns on it, or balanced with others over several: cores.cpu_sharers)
        # holds each miss slot k times the miss, as its compute counts k times (the feeder): it issues at 1/k of its
        # pace alone. 1.0 for all others.
        self.stretch = np.array([float(a.cpu_share) for a in agents])
        # When a thread ends, those it shared cpus with take its time (cores.CpuShares): the feeder reads on until
        # every running thread has requests or the stream ends, so that an end is seen at the window it happens in.
        self.shares = inp.shares
        self._watch: list[int] = [] if self.shares is None else list(range(len(self.shares.sharers)))
        self.pff = np.array([a.prefetch_factor(int(m), prefetch_distance_lines)
                             for m, a in zip(mlp, agents, strict=True)])
        self.class_base = np.ascontiguousarray(ms.class_base_latency_ns(), dtype=float)
        # Route class paths as CSR: the resources a miss of each class crosses and its work at each.
        self.path_ptr, self.path_res, self.path_busy = ms.class_paths()
        self.path_wb_share = ms.path_wb_share
        if inp.bridge is not None:  # and the kernel's copies, in requests of several lines (runtime.py)
            self.class_base, self.path_ptr, self.path_res, self.path_busy, self.path_wb_share = bulk_class_tables(
                self.class_base, self.path_ptr, self.path_res, self.path_busy, self.path_wb_share
            )
        # Write-allocate evasion: per class its controller and evadable share, the ramp (empty tables: none)
        self.evasion = evasion_tables(ms, inp.bridge is not None)
        # Write-backs owed by write hits on clean lines (the feeder marks them): their share of a write's cost
        self.wb_count = np.zeros(len(self.class_base), dtype=np.int64)
        # Loaded-latency curves as padded tables.
        self.curve_n, self.curve_x, self.curve_y = ms.curve_tables()
        self.own_busy = ms.own_line_busy_ns()
        # The queues' state, carried from window to window: when each resource is next free, and its busy time
        # per epoch bucket not yet recorded (a ring of buckets, grown when a line is served beyond it).
        self.free = np.full(n_res, -np.inf)  # idle since ever: a thread may start at a negative time
        self.ring = np.zeros((_RING_ROWS, n_res))
        self.ring_touched = np.zeros(_RING_ROWS, dtype=bool)
        self.ema = np.zeros(n_res)
        self.curve_now = np.zeros(n_res)  # no delay before the first roll, as in exact mode
        # epoch, bucket of the last roll, bucket rolled to, current agent, next turn stamp, first bucket not
        # recorded (``_epoch_kernel``); buckets start at 0 as in exact mode, or earlier for negative start times
        first = int(self.last_issue.min() // self.E) if len(agents) else 0
        self.istate = np.array([first, -10, 0, -1, len(agents), min(first, 0), 0], np.int64)
        # Agents whose buffer a window took all of while the stream went on (the feeder's buffer was full): they
        # counted as finished, and resume, if the stream has more of them, at the epoch reached by then.
        self.stalled = np.zeros(len(agents), dtype=bool)
        self.turn = np.arange(len(agents), dtype=np.int64)  # agents first queue in their order, as in exact mode
        # per agent, the epoch bucket of its last busy charge and that bucket's bounds (none yet)
        self.bucket_of = np.zeros(len(agents), dtype=np.int64)
        self.bucket_lo = np.zeros(len(agents))
        self.bucket_hi = np.full(len(agents), -1.0)
        self.ser_idx = np.zeros(_SERIES_ROWS, dtype=np.int64)
        self.ser_rows = np.zeros((_SERIES_ROWS, n_res))
        self.windows = 0
        self.bridge = inp.bridge
        self.requests = RequestLatencies(len(agents), inp.request_accesses) if inp.request_accesses else None
        self._ns_per_request = 0.0  # with a run-time kernel: the last window's pace (its busiest program agent)
        # ... and each agent's own (0: none yet), the kernel's time at its faults taken out: the order in which
        # threads reach the pages they race for (a hinting fault's migration goes to the first) depends on it
        self._agent_pace_ns = np.zeros(len(agents))
        self._agent_gross_pace_ns = np.zeros(len(agents))  # ... with the kernel's time in it (how fast it advances)
        self._min_take = 64  # ... and the fewest requests per agent a window takes (doubled while none commit)
        self._program = np.array([not (self.bridge is not None and self.bridge.is_kernel[a.index]) for a in agents])
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []

    # --- the SimPy process ---------------------------------------------------------------------------------
    def process(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        per_agent = max(256, self.window_accesses // max(1, len(self.agents)))
        from .simulate import engine_threads

        # the window's statistics are counted on a helper thread while the next window is timed (unless asked not to)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numasim-stats") if engine_threads() > 1 else None
        try:
            while True:
                self.feeder.fill(per_agent, max_buffered=8 * self.window_accesses + (1 << 20),
                                 until_found=self._watch or None)
                if self._watch:
                    self._shares_out()
                take: int | np.ndarray = per_agent
                if self.bridge is not None:
                    if self.feeder.exhausted and not self.feeder.buffered[self._program].any():
                        # the program is done: what the kernel still had to do is not part of the run, but a thread
                        # charged kernel time while it still ran (a scan's PTE updates in the last window, which ran
                        # past the scan) pays it before its last requests, as in exact mode
                        self._settle_last_stalls()
                        break
                    take = self._until_next_event(env, per_agent)
                    self._kernel_work(int(np.max(take)))
                progressed = self._window(take)
                if progressed is None:
                    break
                if not progressed:
                    per_agent *= 2  # an agent runs out within one epoch: give every agent more per window
                    self._min_take = min(2 * self._min_take, per_agent)
                elif self._min_take > 64:
                    self._min_take = 64
                now = float(self.istate[EPOCH]) * self.E
                if self.bridge is not None:
                    self.bridge.sample(now)
                    self.bridge.record_activity(now)
                    # how late the kernel's next event runs: it sees the window's end, not its own time
                    self.bridge.late_ns_max = max(self.bridge.late_ns_max, now - env.peek())
                if now > env.now:
                    yield env.timeout(now - env.now)
            self._wait(0)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def now_ns(self) -> float:
        """The start of the epoch being dispatched: nothing the kernel adds may issue before it."""
        return float(self.istate[EPOCH]) * self.E

    def _until_next_event(self, env: simpy.Environment, per_agent: int) -> int | np.ndarray:
        """Requests of each agent that reach about the environment's next event (a kernel daemon's), at its own
        pace in the last windows: so that the kernel acts at its time, not a whole window late."""
        assert self.bridge is not None
        # the delays the kernel owes threads come first: they use up part of the gap
        gap = env.peek() - self.now_ns() - float(self.bridge.pending_stall_ns.max(initial=0.0))
        if self.bridge.absent_pages or self.bridge.page_protected.any():  # faults to come: within FAULT_WINDOW_NS
            gap = min(gap, FAULT_WINDOW_NS)
        if not np.isfinite(gap):
            return per_agent
        if self._ns_per_request <= 0:
            # a short first window measures the pace: short enough not to run past a scan at scan_delay (4,096
            # requests at 500 ns each ran 2 ms, past a 1 ms scan whose pages then faulted a window late)
            # (more where a window of them made no progress: _min_take doubles then)
            return min(per_agent, max(256, self._min_take))
        # each agent at its own pace (the last window's busiest agent's where it has none yet): sized by one pace,
        # a slow agent whose faster peers had finished ran its whole rest in one window, past the event (a scan it
        # never saw: no hinting faults at all, found by fuzzing)
        pace = np.where(self._agent_gross_pace_ns > 0, self._agent_gross_pace_ns, self._ns_per_request)
        take = np.minimum(per_agent, np.maximum(self._min_take, gap / pace)).astype(np.int64)
        # A kernel agent with no pace of its own yet (its first copies) takes a full part, not the program's pace:
        # it issues a copy request every few ns where the faulting threads took 1.1 us a request, so its part ran
        # out after 7 us and ended the window (its stream went on); the threads committed 7 us of the 1 ms whose
        # hinting faults the kernel had already handled, and the next window raced for the other pages with
        # estimates blind to the fault time charged to the requests it carried over (three threads sweeping
        # pages in step: 643 pages migrated against exact mode's 520; found by fuzzing). Its copies race for no
        # page: a longer part leaves the window's end to the program's threads.
        take[~self._program & (self._agent_gross_pace_ns <= 0)] = per_agent
        return take

    def _note_agent_pace(
        self, ids: np.ndarray, seg_start: np.ndarray, n_commit: np.ndarray, issue: np.ndarray, rows: np.ndarray,
        cost: np.ndarray,
    ) -> None:
        """Each agent's time between two requests in the window just timed, with and without the kernel's time at
        its faults."""
        many = n_commit >= 2
        if not many.any():
            return
        charged = np.zeros(len(issue) + 1)
        np.add.at(charged, rows + 1, cost)
        charged = np.cumsum(charged)  # charged[k]: the kernel time charged before row k
        first = seg_start[many]
        last = first + n_commit[many] - 1
        gross = (issue[last] - issue[first]) / (n_commit[many] - 1)
        pace = gross - (charged[last + 1] - charged[first + 1]) / (n_commit[many] - 1)
        ok = pace > 0
        self._agent_pace_ns[ids[many][ok]] = pace[ok]
        self._agent_gross_pace_ns[ids[many][ok]] = gross[ok]

    def _shares_out(self) -> None:
        """The watched threads the feeder found nothing more of have ended (at their last completion): those
        they shared cpus with take their time from the next window on."""
        assert self.shares is not None
        for a in [a for a in self._watch if self.feeder.buffered[a] == 0]:
            self._watch.remove(a)
            t = float(self.stats.agent_finish_ns[a]) or float(self.agents[a].start_ns)
            for b, _, new in self.shares.finish(a, t):
                self.feeder.set_share(b, new)
                self.stretch[b] = new

    def _settle_last_stalls(self) -> None:
        """At the program's end: each thread's kernel time still owed, charged while the thread had requests
        left (its last one completed after the charge), delays its finish."""
        bridge = self.bridge
        assert bridge is not None
        since = bridge.pending_stall_since_ns.copy()
        stall = bridge.take_stalls()
        finish = self.stats.agent_finish_ns
        for a in np.flatnonzero((stall > 0) & self._program).tolist():
            if finish[a] > since[a]:
                self.stats.finish(a, float(finish[a] + stall[a]))

    def _kernel_work(self, per_agent: int) -> None:
        """Apply what the run-time kernel did since the last window: delays owed by threads (fault handling)
        and the page copies its kernel agents are to issue (as many as a window takes)."""
        bridge = self.bridge
        assert bridge is not None
        stall = bridge.take_stalls()
        if stall.any():
            self.last_issue += stall
            self.last_done += stall
        now = self.now_ns()
        pages = max(1, per_agent // (2 * bridge.requests_per_page))
        for a, block in bridge.copy_blocks(pages, self.n_levels):
            if self.feeder.buffered[a] == 0:  # idle since its last copy: it starts now, not in the past
                self.last_issue[a] = max(self.last_issue[a], now)
                self.last_done[a] = max(self.last_done[a], now)
                self.stalled[a] = False
            self.feeder.add_block(a, block)

    @staticmethod
    def _charge(blocks: list, rows: np.ndarray, cost: np.ndarray) -> None:
        """Add ``cost`` to the compute time of the window's ``rows`` in the buffered blocks themselves: a request
        the window does not commit comes back in the next one with its fault's cost still before it."""
        starts = np.cumsum([0] + [len(b) for b in blocks])
        which = np.searchsorted(starts, rows, side="right") - 1
        for bi in np.unique(which).tolist():
            sel = which == bi
            blocks[bi].compute_ns[rows[sel] - starts[bi]] += cost[sel]

    def _submit(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        self._wait(2)  # at most two windows behind: bounded memory
        if self._pool is None:  # outside ``process`` (a test driving windows by hand): run it here
            fn(*args)
            return
        self._pending.append(self._pool.submit(fn, *args))

    def _wait(self, keep: int) -> None:
        while len(self._pending) > keep:
            self._pending.pop(0).result()  # raises what the job raised

    # --- one window ------------------------------------------------------------------------------------------
    def _window(self, per_agent: int | np.ndarray) -> bool | None:
        """Time one window; None when no agent has anything left, else whether any request was committed."""
        # Each agent's next requests as the slices of its buffered blocks they lie in (no joining: the window's
        # arrays below are the only copy).
        blocks, ids, counts = [], [], []
        for a in range(len(self.agents)):
            if self.feeder.buffered[a] > 0:
                pieces = self.feeder.peek_pieces(a, per_agent if isinstance(per_agent, int) else int(per_agent[a]))
                blocks += pieces
                ids.append(a)
                counts.append(sum(len(b) for b in pieces))
        if not blocks:
            return None
        lens = np.array(counts, dtype=np.int64)
        seg_start = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
        seg_end = seg_start + lens
        ids_arr = np.array(ids, dtype=np.int64)
        truncated = self.feeder.buffered[ids_arr] > lens
        back = ids_arr[self.stalled[ids_arr]]
        if len(back):
            now = float(self.istate[EPOCH]) * self.E
            self.last_issue[back] = np.maximum(self.last_issue[back], now)
            self.last_done[back] = np.maximum(self.last_done[back], now)
            self.stalled[back] = False
        level = np.concatenate([b.level for b in blocks])  # type: ignore[misc]
        rc = np.concatenate([b.route_class for b in blocks])  # type: ignore[misc]
        prefetched = np.concatenate([b.prefetched for b in blocks])
        compute = np.concatenate([b.compute_ns for b in blocks], dtype=np.float64)
        # cache-to-cache transfers' latencies, where the window has any (0: none)
        c2c = (
            np.concatenate([np.zeros(len(b)) if b.c2c_ns is None else b.c2c_ns for b in blocks])
            if any(b.c2c_ns is not None for b in blocks)
            else _NO_C2C
        )
        size = np.concatenate([b.size_bytes for b in blocks])  # once, for the request latencies and the stats
        # writes of whole lines, where write-allocate evasion may apply (empty: none)
        full = (
            np.concatenate([np.zeros(len(b), dtype=bool) if b.full_line is None else b.full_line for b in blocks])
            if len(self.evasion[1]) and any(b.full_line is not None for b in blocks)
            else _NO_FULL
        )
        bridge = self.bridge
        if bridge is not None:
            # the window's hinting faults first (the kernel may move pages and charges the faulting threads),
            # then every request routed to its page's node as the kernel left it
            page = np.concatenate([b.page for b in blocks])  # type: ignore[misc]
            t0 = self.now_ns()
            own = self._agent_pace_ns[ids_arr]
            pace = np.where(own > 0, own, self._ns_per_request or 100.0)
            gross = self._agent_gross_pace_ns[ids_arr]
            expected_ns = lens * np.where(gross > 0, gross, np.maximum(pace, self._ns_per_request))
            rows, cost = bridge.faults_before_window(ids_arr, lens, page, rc, t0, pace,
                                                     np.maximum(t0, self.last_issue[ids_arr]), expected_ns)
            if len(rows):
                compute[rows] += cost
                self._charge(blocks, rows, cost)
            cut = bridge.window_limit < lens  # a fault the kernel left to a later window: commit only before it
            if cut.any():
                seg_end = seg_start + np.minimum(lens, bridge.window_limit)
                truncated = truncated | cut
            rc = bridge.route_classes(ids_arr, lens, page, rc)
        pos = seg_start.copy()
        done_max = np.zeros(len(ids))
        lat = np.empty(len(rc))  # written by the kernel for every request it commits
        req = np.empty(len(rc))
        # Issue times only where something reads them (the recorded requests, the run-time kernel): a third
        # stream of stores over the window's requests cost the kernel 10 of its 65 ns a request.
        issue = np.empty(len(rc)) if self.requests is not None or bridge is not None else _NO_ISSUE
        owed = (
            np.concatenate([np.zeros(len(b), dtype=bool) if b.write_back is None else b.write_back for b in blocks])
            if len(self.path_wb_share) > 0 and any(b.write_back is not None for b in blocks)
            else _NO_FULL
        )
        # the kernel's view: 1 ends the window before the agent runs out (its stream goes on), 2 after the epoch
        # in which it issued its last request (a running thread that others share cpus with: _shares_out)
        stops = truncated.astype(np.int8)
        if self._watch:
            stops[~truncated & np.isin(ids_arr, self._watch)] = 2
        status = self._run(
            (ids_arr, seg_end, stops, level, prefetched, rc, compute, c2c), pos, done_max, lat, req, issue, full,
            owed,
        )
        self.windows += 1
        n_commit = pos - seg_start
        if self.requests is not None:
            self.requests.add_window(ids_arr, seg_start, n_commit, issue, self._program, size > 0)
        if bridge is not None:
            span = self.now_ns() - t0
            bridge.window_done(ids_arr, lens, n_commit, rc, page, issue)
            mem = (level == self.n_levels) & (page >= 0)  # the program's memory requests (committed ones)
            mem &= (np.arange(len(rc)) - np.repeat(seg_start, lens)) < np.repeat(n_commit, lens)
            bridge.note_latency(float(memory_latency(lat[mem], req[mem], prefetched[mem]).sum()), int(mem.sum()))
            most = int(n_commit[self._program[ids_arr]].max(initial=0))
            if most and span > 0:
                self._ns_per_request = span / most
            self._note_agent_pace(ids_arr, seg_start, n_commit, issue, rows, cost)
        if not self.feeder.exhausted:
            self.stalled[ids_arr[~truncated & (pos == seg_end)]] = True
        if not n_commit.any():
            assert status == REFILL
            return False
        st = self.stats
        hist = st.hist if st.hist is not None else np.zeros((1, 1), dtype=np.int64)
        # Counting the window's requests needs nothing the next window changes (its arrays are its own, the
        # counters are touched by nothing else until the end), so it runs on the stats thread meanwhile.
        counted = n_commit if bridge is None else np.where(bridge.is_kernel[ids_arr], 0, n_commit)
        self._submit(
            accumulate_stats,
            ids_arr, seg_start, counted, rc, level, lat, req, prefetched, size,
            compute, self.n_levels, self.ms.n_nodes,
            st.accesses.reshape(-1), st.memory_lines.reshape(-1), st.bytes.reshape(-1),
            st.load_to_use_sum_ns.reshape(-1), st.memory_latency_sum_ns.reshape(-1), st.level_hits.reshape(-1),
            hist.reshape(-1, hist.shape[-1]), st.hist is not None, *bin_table(),
            st.agent_accesses, st.agent_load_to_use_ns, st.agent_compute_ns,
            st.agent_memory_lines, st.agent_memory_latency_ns,
        )  # fmt: skip
        for k, a in enumerate(ids):
            n = int(n_commit[k])
            if n:
                if self._program[a]:  # kernel agents' copies are not the program's run time
                    self.stats.finish(a, float(done_max[k]))
                self.feeder.consume(a, n)
        return True

    def _run(self, window: tuple, pos, done_max, lat, req, issue, full, owed):  # type: ignore[no-untyped-def]
        """Call the compiled loop on ``window`` (agents, segment ends, truncated, level, prefetched, route class,
        compute, cache-to-cache latencies) until it stops for another reason than a full series buffer or a ring to grow."""
        while True:
            status, n_ser = run_epochs(  # type: ignore[call-arg]
                *window,
                self.dep,
                self.stretch,
                self.mlp,
                self.pff,
                self.level_lat,
                self.class_base,
                self.path_ptr,
                self.path_res,
                self.path_busy,
                self.curve_n,
                self.curve_x,
                self.curve_y,
                self.own_busy,
                self.E,
                UTILISATION_EMA_WEIGHT,
                self.last_issue,
                self.last_done,
                self.inflight,
                pos,
                done_max,
                self.turn,
                self.bucket_of,
                self.bucket_lo,
                self.bucket_hi,
                self.free,
                self.ring,
                self.ring_touched,
                self.ema,
                self.curve_now,
                self.istate,
                lat,
                req,
                issue,
                self.ser_idx,
                self.ser_rows,
                full,
                *self.evasion,
                owed,
                self.path_wb_share,
                self.wb_count,
            )
            if n_ser:
                self.stats.series.add(self.ser_idx[:n_ser], self.ser_rows[:n_ser])  # (added, not kept)
            if status == GROW:
                self._grow_ring(int(self.istate[NEED]))
            elif status != SERIES_FULL:
                return status

    def _grow_ring(self, rows: int) -> None:
        """At least ``rows`` ring rows (a power of two), each bucket moved to its row in the larger ring."""
        self.ring, self.ring_touched = grow_bucket_ring(self.ring, self.ring_touched, int(self.istate[LOW]), rows)
        size = len(self.ring)
        self.ser_idx = np.zeros(max(len(self.ser_idx), 2 * size), dtype=np.int64)
        self.ser_rows = np.zeros((len(self.ser_idx), self.ring.shape[1]))

    def diagnostics(self) -> dict[str, float]:
        out = {"windows": float(self.windows), "last_epoch": float(self.istate[0])}
        if self.bridge is not None:
            out["runtime_late_ns_max"] = self.bridge.late_ns_max
        return out

    def flush(self) -> None:
        """Record the buckets not recorded yet (the queues' last work) in the time series."""
        low, n = int(self.istate[LOW]), len(self.ring)
        buckets = [k for k in range(low, low + n) if self.ring_touched[k % n]]
        if buckets:
            rows = np.array([k % n for k in buckets])
            self.stats.series.add(np.array(buckets), self.ring[rows].copy())
            self.ring[rows] = 0.0
            self.ring_touched[rows] = False
