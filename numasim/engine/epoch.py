"""Epoch mode: accesses aggregated per time window with numpy, queueing from the loaded-latency curves.

Time is cut into epochs of ``epoch_ns``. The engine advances in *windows* of many epochs: it takes up to
``window_accesses`` buffered requests of every agent, times them with the fluid rules of :mod:`timing`, and
solves a fixed point over the window:

1. per-request latency = idle route latency + delay of its route class in the epoch it issues in;
2. per agent, issue times from the cumulative cost; each request lands in an epoch;
3. per epoch and resource, busy time = sum over route classes of requests x busy time per line
   (``bincount`` then one matrix product), utilisation = busy / epoch length;
4. per resource, delay = ``curve(min(u, 1))`` + the mean backlog of a fluid queue (Lindley's recursion over the
   epochs, solved with a cumulative minimum): work beyond capacity waits, so throughput never exceeds capacity;
5. repeat with the new delays (under-relaxed when the residual grows) until they change by < 0.1 ns.

Only requests issued before the earliest point where some agent's taken requests run out are committed, so
every committed epoch saw the demand of all agents. The window is a SimPy process: SimPy stays the clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from .memsys import MemorySystem
from .stats import Stats
from .stream import Agent, Feeder
from .timing import prefetch_factor

__all__ = ["EpochEngine"]

_MAX_ITER = 60
_TOL_NS = 0.1
_MAX_WINDOW_EPOCHS = 1 << 14


@dataclass
class _Window:
    agent: np.ndarray
    seg_start: np.ndarray
    seg_len: np.ndarray
    hit: np.ndarray
    hit_lat: np.ndarray
    rc: np.ndarray
    base: np.ndarray
    pff: np.ndarray
    compute: np.ndarray
    dep: np.ndarray
    inv_mlp: np.ndarray


class EpochEngine:
    """Runs the epoch fidelity over a :class:`Feeder` (see module docstring)."""

    def __init__(
        self,
        ms: MemorySystem,
        agents: list[Agent],
        feeder: Feeder,
        stats: Stats,
        level_latency_ns: np.ndarray,
        prefetch_distance_lines: int,
        epoch_ns: float,
        window_accesses: int = 1 << 17,
    ) -> None:
        self.ms, self.agents, self.feeder, self.stats = ms, agents, feeder, stats
        self.level_lat = np.r_[np.asarray(level_latency_ns, dtype=float), 0.0]
        self.n_levels = len(level_latency_ns)
        self.d = prefetch_distance_lines
        self.E = float(epoch_ns)
        self.window_accesses = window_accesses
        n = len(agents)
        self.t_next = np.array([a.start_ns for a in agents], dtype=float)
        self.initiator = np.array([a.initiator for a in agents], dtype=np.int64)
        self.mlp = np.array([1 if a.dependent else a.mlp for a in agents], dtype=float)
        self.dep = np.array([a.dependent for a in agents], dtype=bool)
        self.pff = np.array([prefetch_factor(int(m), self.d) for m in self.mlp])
        self.class_base = ms.class_base_latency_ns()
        self.n_rc = ms.n_classes
        self.n_res = len(ms.resources)
        self.busy = ms.busy_ns
        self.crossT = ms.crosses.T.astype(float)
        # A request does not queue behind itself: the curve sees the utilisation minus one line's busy time.
        line_busy = np.where(ms.busy_ns > 0, ms.busy_ns, np.inf).min(axis=0)
        self.own_busy = np.where(np.isfinite(line_busy), line_busy, 0.0)
        self.delay_row = np.zeros(self.n_rc)  # converged delay of the last epoch, the next window's guess
        self.backlog = np.zeros(self.n_res)  # fluid backlog (ns of work) at the start of carry_epoch
        self.carry_epoch = -1
        self.carry_busy = np.zeros(self.n_res)
        self.iterations = 0
        self.windows = 0
        _ = n

    # --- the SimPy process ---------------------------------------------------------------------------------
    def process(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        while True:
            per_agent = max(256, self.window_accesses // max(1, len(self.agents)))
            self.feeder.fill(per_agent, max_buffered=8 * self.window_accesses + (1 << 20))
            advanced = self._window(per_agent)
            if advanced is None:
                return
            if advanced > env.now:
                yield env.timeout(advanced - env.now)

    # --- one window ------------------------------------------------------------------------------------------
    def _gather(self, per_agent: int) -> tuple[_Window, np.ndarray, list[int]] | None:
        blocks, ids = [], []
        for a in range(len(self.agents)):
            if self.feeder.buffered[a] > 0:
                blocks.append(self.feeder.peek(a, per_agent))
                ids.append(a)
        if not blocks:
            return None
        lens = np.array([len(b) for b in blocks], dtype=np.int64)
        agent = np.repeat(np.array(ids, dtype=np.int64), lens)
        level = np.concatenate([b.level for b in blocks]).astype(np.int64)  # type: ignore[misc]
        target = np.concatenate([b.target for b in blocks])
        is_write = np.concatenate([b.is_write for b in blocks])
        pf = np.concatenate([b.prefetched for b in blocks])
        hit = level < self.n_levels
        rc = self.ms.route_class(self.initiator[agent], target, is_write)
        w = _Window(
            agent=agent,
            seg_start=np.r_[0, np.cumsum(lens)[:-1]],
            seg_len=lens,
            hit=hit,
            hit_lat=self.level_lat[level],
            rc=rc,
            base=self.class_base[rc],
            pff=np.where(pf & ~hit, self.pff[agent], 1.0),
            compute=np.concatenate([b.compute_ns for b in blocks]),
            dep=self.dep[agent],
            inv_mlp=1.0 / self.mlp[agent],
        )
        extra = np.column_stack([level, target, is_write, np.concatenate([b.size_bytes for b in blocks])])
        return w, extra, ids

    def _times(self, w: _Window, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cost = np.where(w.dep, w.compute + lat, np.maximum(w.compute, lat * w.inv_mlp))
        cs = np.cumsum(cost)
        seg_end = w.seg_start + w.seg_len - 1
        before = np.r_[0.0, cs[seg_end[:-1]]]
        excl = cs - cost - np.repeat(before, w.seg_len)
        issue = self.t_next[w.agent] + excl + w.compute
        return issue, cost

    def _window(self, per_agent: int) -> float | None:
        got = self._gather(per_agent)
        if got is None:
            return None
        w, extra, ids = got
        ms, E = self.ms, self.E
        ids_arr = np.array(ids, dtype=np.int64)
        truncated = np.array([self.feeder.buffered[a] > per_agent for a in ids])
        t_start = float(self.t_next[ids_arr].min())
        e0 = int(t_start // E)
        miss = ~w.hit
        rc_m = w.rc[miss]
        seg_end = w.seg_start + w.seg_len - 1

        # The carried epoch (partly filled by the last window) is recomputed here; after a gap it is final.
        carry = self.carry_epoch == e0
        if self.carry_epoch >= 0 and not carry:
            self.stats.series.add(np.array([self.carry_epoch]), self.carry_busy[None, :])
            gap = max(e0 - self.carry_epoch, 0)
            x0 = np.maximum(self.backlog + self.carry_busy - E * gap, 0.0)
        else:
            x0 = self.backlog.copy()
        grid = self.delay_row[None, :].copy()
        alpha, last_resid = 1.0, np.inf
        lat = w.hit_lat.copy()
        for it in range(_MAX_ITER):
            self.iterations += 1
            # 1-2: latencies and issue times under the current delay guess (epochs from the last pass).
            if it == 0:
                lat[miss] = (w.base[miss] + grid[0, rc_m]) * w.pff[miss]
            issue, _cost = self._times(w, lat)
            end = np.inf
            if truncated.any():
                end = float(issue[seg_end[truncated]].min())
            first_issue = float(issue[w.seg_start].min())
            end = min(end, max((e0 + _MAX_WINDOW_EPOCHS) * E, first_issue + 1e-9))
            end = max(end, first_issue + 1e-9)
            commit = issue < end
            rel = np.maximum((issue // E).astype(np.int64) - e0, 0)
            cm = commit & miss
            n_ep = int(rel[commit].max()) + 1 if commit.any() else 1
            # 3: busy time per epoch and resource.
            demand = np.bincount(rel[cm] * self.n_rc + w.rc[cm], minlength=n_ep * self.n_rc)
            busy = demand.reshape(n_ep, self.n_rc) @ self.busy
            if carry:
                busy[0] += self.carry_busy
            length = np.full(n_ep, E)
            if np.isfinite(end):
                length[-1] = max(min(end - (e0 + n_ep - 1) * E, E), 1e-9)
            # 4: delay per resource: loaded-latency curve + fluid backlog (Lindley).
            u = busy / length[:, None]
            q = np.cumsum(busy - length[:, None], axis=0)
            backlog = q - np.minimum(-x0[None, :], np.minimum.accumulate(q, axis=0))
            prev = np.vstack([x0[None, :], backlog[:-1]])
            u_seen = np.clip(u - self.own_busy[None, :] / length[:, None], 0.0, 1.0)
            delay_res = ms.curve_delay_ns(u_seen) + 0.5 * (prev + backlog)
            new = delay_res @ self.crossT
            old = grid[np.minimum(np.arange(n_ep), len(grid) - 1)]
            resid = float(np.abs(new - old).max()) if new.size else 0.0
            if resid < _TOL_NS:
                grid = new
                lat[miss] = (w.base[miss] + grid[np.minimum(rel[miss], n_ep - 1), rc_m]) * w.pff[miss]
                issue, _cost = self._times(w, lat)
                break
            if resid > last_resid:
                alpha = max(alpha * 0.5, 1.0 / 64)
            last_resid = resid
            grid = old + alpha * (new - old)
            lat[miss] = (w.base[miss] + grid[np.minimum(rel[miss], n_ep - 1), rc_m]) * w.pff[miss]
        # Commit.
        commit = issue < end
        n_commit = np.add.reduceat(commit.astype(np.int64), w.seg_start)
        completion = issue + lat
        st = self.stats
        c = commit
        st.add(
            w.agent[c],
            self.initiator[w.agent[c]],
            extra[c, 1],
            extra[c, 2],
            extra[c, 0],
            lat[c],
            extra[c, 3],
            w.compute[c],
        )
        for k, a in enumerate(ids):
            n = int(n_commit[k])
            if n == 0:
                continue
            last = w.seg_start[k] + n - 1
            self.t_next[a] = issue[last] - w.compute[last] + _cost[last]
            st.finish(a, float(completion[w.seg_start[k] : last + 1].max()))
            self.feeder.consume(a, n)
        # Series and carry: the last (partial) epoch is revisited by the next window.
        if n_ep > 1:
            st.series.add(e0 + np.arange(n_ep - 1), busy[:-1])
            self.backlog = backlog[-2].copy()
            self.carry_busy = busy[-1].copy()
        else:
            self.backlog = x0.copy()
            self.carry_busy = busy[-1].copy()
        self.carry_epoch = e0 + n_ep - 1
        self.delay_row = grid[-1].copy()
        self.windows += 1
        return float(np.min(self.t_next[ids_arr]))

    def flush(self) -> None:
        """Record the last carried epoch in the time series."""
        if self.carry_epoch >= 0:
            self.stats.series.add(np.array([self.carry_epoch]), self.carry_busy[None, :])
            self.carry_epoch = -1
