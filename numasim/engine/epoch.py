"""Epoch mode: accesses aggregated per time window with numpy, queueing from the loaded-latency curves.

Time is cut into epochs of ``epoch_ns``. The engine advances in *windows* of many epochs: it takes up to
``window_accesses`` buffered requests of every agent, times them with the fluid rules of :mod:`timing`, and
solves a fixed point over the window:

1. per-request latency = idle route latency + delay of its route class in the epoch it issues in;
2. per agent, issue times from the cumulative cost; each request lands in an epoch;
3. per epoch and resource, busy time = sum over route classes of requests x busy time per line
   (``bincount`` then one matrix product), utilisation = busy / epoch length;
4. per resource, delay = ``curve(u)`` of its epoch (the request's own line left out of ``u``: it does not
   queue behind itself) + a capacity wait for the whole window: the multiplier of the constraint "utilisation
   over the window (and in its busiest tenth of epochs) <= 1", raised where demand exceeds capacity by the mean latency through the resource times
   the excess (a Newton step, since an MLP-limited agent's demand falls as 1/latency) and lowered the same way
   to zero when below; so throughput never exceeds capacity over a window (it may within one epoch: a burst);
5. repeat (the curve part under-relaxed when the residual grows) until no resource is more than 1 % above
   capacity and either the delays change by < 0.1 ns on average or no agent's time moves by more than 0.02 %
   of the window.

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
_TOL_LAT = 5e-3
_TOL_REL = 2e-4
_MAX_WINDOW_EPOCHS = 1 << 14


def _quantile_90(x: np.ndarray) -> np.ndarray:
    """``np.quantile(x, 0.9, axis=0)`` (its linear method, the same arithmetic) without its Python overhead."""
    v = (len(x) - 1) * 0.9
    lo = int(np.floor(v))
    g = v - lo
    part = np.partition(x, (lo, lo + 1), axis=0)
    a, b = part[lo], part[lo + 1]
    d = b - a
    out = b - d * (1 - g) if g >= 0.5 else a + d * g
    nan = np.isnan(part[-1])
    return np.where(nan, np.nan, out) if nan.any() else out


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
    start_rep: np.ndarray
    any_dep: bool
    any_compute: bool
    miss_idx: np.ndarray


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
        # Converged delays of the last epoch: the next window's first guess.
        self.curve_row = np.zeros(self.n_res)
        self.wait_row = np.zeros(self.n_res)
        self.carry_epoch = -1
        self.carry_busy = np.zeros(self.n_res)
        self.iterations = 0
        self.windows = 0

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
    def _gather(
        self, per_agent: int
    ) -> tuple[_Window, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[int]] | None:
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
        compute = np.concatenate([b.compute_ns for b in blocks])
        # route class (initiator * n_nodes + target) * 2 + is_write, the initiator's part once per agent
        init_part = self.initiator[ids] * (self.ms.n_nodes * 2)
        rc = target.astype(np.int64)
        rc *= 2
        rc += is_write
        rc += np.repeat(init_part, lens)

        # Per-agent constants spread over the agent's segment by np.repeat (the same values as indexing by
        # ``agent``, at a fraction of the cost: no gather, and one division per agent, not per request).
        def per_request(v: np.ndarray) -> np.ndarray:
            return np.repeat(v[ids], lens)

        w = _Window(
            agent=agent,
            seg_start=np.r_[0, np.cumsum(lens)[:-1]],
            seg_len=lens,
            hit=hit,
            hit_lat=self.level_lat[level],
            rc=rc,
            base=self.class_base[rc],
            pff=np.where(pf & ~hit, per_request(self.pff), 1.0),
            compute=compute,
            dep=per_request(self.dep),
            inv_mlp=per_request(1.0 / self.mlp),
            start_rep=per_request(self.t_next),
            any_dep=bool(self.dep[ids].any()),
            any_compute=bool(compute.any()),
            miss_idx=np.flatnonzero(~hit),
        )
        extra = (level, target, is_write, np.concatenate([b.size_bytes for b in blocks]))
        return w, extra, ids

    def _times(self, w: _Window, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if w.any_dep:
            cost = np.where(w.dep, w.compute + lat, np.maximum(w.compute, lat * w.inv_mlp))
        elif w.any_compute:
            cost = np.maximum(w.compute, lat * w.inv_mlp)
        else:
            cost = lat * w.inv_mlp
        cs = np.cumsum(cost)
        before = np.r_[0.0, cs[w.seg_start[1:] - 1]]
        # issue = start of the agent + cost of its earlier requests + this request's compute
        issue = cs - cost
        issue += w.start_rep - np.repeat(before, w.seg_len)
        if w.any_compute:
            issue += w.compute
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
        curve_d = self.curve_row[None, :].copy()  # per epoch x resource: loaded-latency curve delay
        wait = self.wait_row.copy()  # per resource: capacity wait over the window (zero unless saturated)
        grid = (curve_d + wait[None, :]) @ self.crossT
        alpha, last_resid = 1.0, np.inf
        prev_ends = np.full(len(seg_end), np.inf)
        lat = w.hit_lat.copy()
        mi = w.miss_idx
        all_miss = len(mi) == len(lat)
        base_m, pff_m = w.base[mi], w.pff[mi]
        lat_m = (base_m + grid[0, rc_m]) * pff_m
        if all_miss:
            lat = lat_m
        else:
            lat[mi] = lat_m
        crosses = self.crossT.T
        inv_e = 1.0 / E
        for _it in range(_MAX_ITER):
            self.iterations += 1
            # 2: issue times under the current latencies; the window ends where the first agent runs out.
            issue, cost = self._times(w, lat)
            end = np.inf
            if truncated.any():
                end = float(issue[seg_end[truncated]].min())
            first_issue = float(issue[w.seg_start].min())
            end = min(end, max((e0 + _MAX_WINDOW_EPOCHS) * E, first_issue + 1e-9))
            end = max(end, first_issue + 1e-9)
            last = float(np.where(issue < end, issue, -np.inf).max())
            n_ep = max(int(last // E) - e0 + 1, 1)
            # 3: busy time per epoch and resource, over the misses (hits use no resource); requests past the
            # window's end weigh nothing. Each request's work is shared between two epochs in proportion to
            # where it falls (cloud-in-cell: at fractional epoch position p, 1 - f in floor(p - 1/2) and f in the
            # next, f = p - 1/2 - floor(p - 1/2)), so utilisation moves continuously with issue times and the
            # fixed point converges instead of flickering at epoch edges.
            iss_m = issue if all_miss else issue[mi]
            weight = (iss_m < end).astype(np.float64)
            pos = iss_m * inv_e - e0
            half = pos - 0.5
            lo_f = np.floor(half)
            w_hi = (half - lo_f) * weight
            lo_bin = lo_f.astype(np.int64)
            size = n_ep * self.n_rc
            idx = np.clip(lo_bin, 0, n_ep - 1) * self.n_rc + rc_m
            demand = np.bincount(idx, weights=weight - w_hi, minlength=size)
            idx = np.clip(lo_bin + 1, 0, n_ep - 1) * self.n_rc + rc_m
            demand += np.bincount(idx, weights=w_hi, minlength=size)
            per_class = demand.reshape(n_ep, self.n_rc)
            busy = per_class @ self.busy
            window_busy = busy.sum(axis=0)
            if carry:
                busy[0] += self.carry_busy
            # 4a: loaded-latency curve per epoch (the request's own line left out: it does not queue behind
            # itself). The window's last, partly filled epoch is carried into the next window and recomputed.
            u = busy / E
            u_seen = np.clip(u - self.own_busy[None, :] / E, 0.0, 1.0)
            rows = np.minimum(np.arange(n_ep), len(curve_d) - 1)
            old_curve = curve_d[rows]
            new_curve = ms.curve_delay_ns(u_seen)
            # 4b: capacity wait per resource: the multiplier of the constraint "utilisation over the window <= 1",
            # raised by the mean latency of the requests crossing it times the excess (a Newton step, since an
            # MLP-limited agent's demand falls as 1/latency) and lowered the same way to zero when below.
            span = max(last - t_start, E)
            u_win = window_busy / span
            # Not only on average: the wait must hold the busy epochs at capacity, not let a quiet tail of the
            # window hide an overload (the 90th percentile of the epochs' utilisation, when there are enough).
            inner = u[(1 if carry else 0) : n_ep - 1]
            if len(inner) >= 4:
                u_win = np.maximum(u_win, _quantile_90(inner))
            cls_n = per_class.sum(axis=0)
            cls_lat = np.bincount(rc_m, weights=lat_m * weight, minlength=self.n_rc)
            res_n = cls_n @ crosses
            res_lat = np.divide(cls_lat @ crosses, res_n, out=np.zeros(self.n_res), where=res_n > 0)
            new_wait = np.maximum(wait + res_lat * (u_win - 1.0), 0.0)
            old = (old_curve + wait[None, :]) @ self.crossT
            new = (new_curve + new_wait[None, :]) @ self.crossT
            resid = float(np.abs(new - old).mean()) if new.size else 0.0
            over = float(u_win.max()) if u_win.size else 0.0
            ends = issue[seg_end]
            moved = float(np.abs(ends - prev_ends).max()) / span
            prev_ends = ends
            tol = max(_TOL_NS, _TOL_LAT * (float(lat_m.mean()) if len(mi) else 0.0))
            # complementary slackness: a resource holding a capacity wait must be at capacity
            waiting = wait > 1e-9
            under = float((1.0 - u_win[waiting]).max()) if waiting.any() else 0.0
            if (resid < tol or moved < _TOL_REL) and over < 1.0 + 1e-2 and under < 1e-2:
                break
            if resid > last_resid:
                alpha = max(alpha * 0.5, 1.0 / 64)
            last_resid = resid
            curve_d = old_curve + alpha * (new_curve - old_curve)
            wait = new_wait
            grid = (curve_d + wait[None, :]) @ self.crossT
            ep = np.clip(pos.astype(np.int64), 0, n_ep - 1)
            lat_m = (base_m + grid.ravel()[ep * self.n_rc + rc_m]) * pff_m
            if all_miss:
                lat = lat_m
            else:
                lat[mi] = lat_m
        # Commit.
        commit = issue < end
        n_commit = np.add.reduceat(commit.astype(np.int64), w.seg_start)
        completion = issue + lat
        st = self.stats
        level, target, is_write, size_b = extra
        agent, compute, rc = w.agent, w.compute, w.rc
        if not commit.all():
            c = np.flatnonzero(commit)
            agent, compute, level, target, rc = agent[c], compute[c], level[c], target[c], rc[c]
            is_write, size_b, lat = is_write[c], size_b[c], lat[c]
        st.add(
            agent,
            None,
            target,
            is_write,
            level,
            lat,
            size_b,
            compute,
            route_class=rc,
            agent_runs=(ids_arr, n_commit),
        )
        for k, a in enumerate(ids):
            n = int(n_commit[k])
            if n == 0:
                continue
            last = w.seg_start[k] + n - 1
            self.t_next[a] = issue[last] - w.compute[last] + cost[last]
            st.finish(a, float(completion[w.seg_start[k] : last + 1].max()))
            self.feeder.consume(a, n)
        # Series and carry: the last (partial) epoch is revisited by the next window.
        if n_ep > 1:
            st.series.add(e0 + np.arange(n_ep - 1), busy[:-1])
        self.carry_busy = busy[-1].copy()
        self.carry_epoch = e0 + n_ep - 1
        self.curve_row = curve_d[-1].copy()
        self.wait_row = wait.copy()
        self.windows += 1
        return float(np.min(self.t_next[ids_arr]))

    def flush(self) -> None:
        """Record the last carried epoch in the time series."""
        if self.carry_epoch >= 0:
            self.stats.series.add(np.array([self.carry_epoch]), self.carry_busy[None, :])
            self.carry_epoch = -1
