"""The compiled inner loop of epoch mode (the model is described in :mod:`epoch`).

One call advances simulated time epoch by epoch over one window of buffered requests, until the window is used
up, or an agent whose stream goes on beyond the window runs out inside an epoch (that epoch is undone: the caller
refills and calls again), or the series buffer is full. All state lives in the arrays passed in, so a call
resumes exactly where the last one stopped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["DONE", "REFILL", "SERIES_FULL", "accumulate_stats", "curve_delay", "run_epochs"]

DONE = 0
REFILL = 1
SERIES_FULL = 2

# Integer state slots (``istate``).
EPOCH = 0  # the current epoch
EMA_EPOCH = 1  # the epoch whose utilisation the smoothed value ``ema`` last took in (-10: none)
TOUCHED = 2  # 1 if the current epoch served any work


@njit(cache=True)
def curve_delay(u: float, n: int, xs: np.ndarray, ys: np.ndarray) -> float:  # pragma: no cover - compiled
    """``LoadedLatencyCurve.added_ns`` for one value: linear interpolation, flat below the first point, the
    last segment's slope beyond the last."""
    if n == 0:
        return 0.0
    if u <= xs[0]:
        return ys[0]
    if u > xs[n - 1]:
        return ys[n - 1] + (ys[n - 1] - ys[n - 2]) / (xs[n - 1] - xs[n - 2]) * (u - xs[n - 1])
    k = 1
    while xs[k] < u:
        k += 1
    x0, x1 = xs[k - 1], xs[k]
    if x1 == x0:
        return ys[k]
    return ys[k - 1] + (ys[k] - ys[k - 1]) * (u - x0) / (x1 - x0)


@njit(cache=True)
def _close_epoch(
    epoch: int,
    epoch_ns: float,
    epoch_busy: np.ndarray,
    later_busy: np.ndarray,
    own_busy: np.ndarray,
    ema: np.ndarray,
    curve_now: np.ndarray,
    curve_n: np.ndarray,
    curve_x: np.ndarray,
    curve_y: np.ndarray,
    istate: np.ndarray,
    ser_idx: np.ndarray,
    ser_rows: np.ndarray,
    n_ser: int,
    ema_weight: float,
) -> int:  # pragma: no cover - compiled
    """Record epoch ``epoch`` (if it served anything), take its utilisation into the curve delays (a hardware
    counter read once per epoch, smoothed with the previous epoch's when consecutive) and open the next epoch
    with the work queued into it."""
    n_res = len(epoch_busy)
    if istate[TOUCHED]:
        ser_idx[n_ser] = epoch
        for r in range(n_res):
            ser_rows[n_ser, r] = epoch_busy[r]
        n_ser += 1
    smooth = istate[EMA_EPOCH] == epoch - 1
    touched = 0
    for r in range(n_res):
        u = (epoch_busy[r] - own_busy[r]) / epoch_ns  # a request does not queue behind itself
        u = min(max(u, 0.0), 1.0)
        if smooth:
            u = ema_weight * ema[r] + (1.0 - ema_weight) * u
        ema[r] = u
        curve_now[r] = curve_delay(u, curve_n[r], curve_x[r], curve_y[r])
        # Work queued beyond this epoch is served from the next epoch's start on.
        take = later_busy[r] if later_busy[r] < epoch_ns else epoch_ns
        epoch_busy[r] = take
        later_busy[r] -= take
        if take > 0.0:
            touched = 1
    istate[EMA_EPOCH] = epoch
    istate[TOUCHED] = touched
    return n_ser


@njit(cache=True, inline="always")
def _next_ready(
    a: int,
    p: int,
    end: int,
    compute: np.ndarray,
    dep: np.ndarray,
    mlp: np.ndarray,
    last_issue: np.ndarray,
    last_done: np.ndarray,
    inflight: np.ndarray,
    n_inflight: np.ndarray,
) -> float:  # pragma: no cover - compiled
    """When agent ``a`` may issue its request ``p`` (infinity when its window segment is used up): ``compute``
    after its previous issue (after its previous completion when dependent), once one of its ``mlp`` slots is
    free."""
    if p >= end:
        return np.inf
    ready = (last_done[a] if dep[a] else last_issue[a]) + compute[p]
    if n_inflight[a] >= mlp[a] and inflight[a, 0] > ready:
        ready = inflight[a, 0]  # the earliest completion (the set is kept sorted)
    return ready


@njit(cache=True, nogil=True)
def run_epochs(
    agent_ids: np.ndarray,
    seg_start: np.ndarray,
    seg_end: np.ndarray,
    truncated: np.ndarray,
    level: np.ndarray,
    prefetched: np.ndarray,
    rc: np.ndarray,
    compute: np.ndarray,
    dep: np.ndarray,
    mlp: np.ndarray,
    pff: np.ndarray,
    level_lat: np.ndarray,
    class_base: np.ndarray,
    path_ptr: np.ndarray,
    path_res: np.ndarray,
    path_busy: np.ndarray,
    curve_n: np.ndarray,
    curve_x: np.ndarray,
    curve_y: np.ndarray,
    own_busy: np.ndarray,
    epoch_ns: float,
    ema_weight: float,
    last_issue: np.ndarray,
    last_done: np.ndarray,
    inflight: np.ndarray,
    n_inflight: np.ndarray,
    pos: np.ndarray,
    done_max: np.ndarray,
    free: np.ndarray,
    epoch_busy: np.ndarray,
    later_busy: np.ndarray,
    ema: np.ndarray,
    curve_now: np.ndarray,
    istate: np.ndarray,
    lat_out: np.ndarray,
    ser_idx: np.ndarray,
    ser_rows: np.ndarray,
    drain: bool,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Advance over one window; returns (status, number of series rows written)."""
    n_levels = len(level_lat) - 1
    n_res = len(free)
    nw = len(agent_ids)
    m_max = inflight.shape[1]
    snap_pos = np.empty(nw, dtype=np.int64)
    snap_issue = np.empty(nw)
    snap_last = np.empty(nw)
    snap_done = np.empty(nw)
    snap_n = np.empty(nw, dtype=np.int64)
    snap_in = np.empty((nw, m_max))
    snap_free = np.empty(n_res)
    snap_busy = np.empty(n_res)
    snap_later = np.empty(n_res)
    ready_at = np.empty(nw)
    n_ser = 0
    ser_cap = len(ser_idx) - 2  # room for the closes of one epoch (a jump closes two)
    while True:
        epoch = istate[EPOCH]
        s1 = (epoch + 1) * epoch_ns
        # What the epoch changes, kept so that it can be undone.
        snap_touched = istate[TOUCHED]
        snap_free[:] = free
        snap_busy[:] = epoch_busy
        snap_later[:] = later_busy
        snap_pos[:] = pos
        snap_done[:] = done_max
        snap_issue[:] = last_issue[agent_ids]
        snap_last[:] = last_done[agent_ids]
        snap_n[:] = n_inflight[agent_ids]
        for k in range(nw):
            a = agent_ids[k]
            snap_in[k, : n_inflight[a]] = inflight[a, : n_inflight[a]]
            ready_at[k] = _next_ready(
                a, pos[k], seg_end[k], compute, dep, mlp, last_issue, last_done, inflight, n_inflight
            )
        # The epoch's requests in time order over all agents (ties: the lower agent).
        refill = False
        touched = istate[TOUCHED]
        while True:
            k = 0
            ready = np.inf
            for j in range(nw):  # branch-free: which agent is first is data, not a pattern
                x = ready_at[j]
                k = j if x < ready else k
                ready = min(x, ready)
            if ready >= s1:
                break
            a = agent_ids[k]
            p = pos[k]
            n_fly = n_inflight[a]
            # The in-flight set is kept sorted: what completed by now is a prefix, and leaves it.
            gone = 0
            while gone < n_fly and inflight[a, gone] <= ready:
                gone += 1
            if gone:
                n_fly -= gone
                for j in range(n_fly):
                    inflight[a, j] = inflight[a, j + gone]
            lv = level[p]
            if lv < n_levels:
                lat = level_lat[lv]
            else:
                # FIFO servers along the route: the miss starts at each resource once the one before started
                # it and the resource is free, and holds it for its line's busy time.
                c = rc[p]
                t = ready
                extra = 0.0
                for q in range(path_ptr[c], path_ptr[c + 1]):
                    r = path_res[q]
                    t = max(t, free[r])
                    b = path_busy[q]
                    free[r] = t + b
                    extra += curve_now[r]
                    # busy time to the epoch it is served in (the part past this epoch: to later ones)
                    if t + b <= s1:
                        epoch_busy[r] += b
                    elif t >= s1:
                        later_busy[r] += b
                    else:
                        epoch_busy[r] += s1 - t
                        later_busy[r] += t + b - s1
                touched = 1
                lat = class_base[c] + (t - ready) + extra
                if prefetched[p]:
                    lat *= pff[a]
            done = ready + lat
            j = n_fly
            while j > 0 and inflight[a, j - 1] > done:
                inflight[a, j] = inflight[a, j - 1]
                j -= 1
            inflight[a, j] = done
            n_inflight[a] = n_fly + 1
            last_issue[a] = ready
            if done > last_done[a]:
                last_done[a] = done
            if done > done_max[k]:
                done_max[k] = done
            lat_out[p] = lat
            pos[k] = p + 1
            if p + 1 == seg_end[k] and truncated[k]:
                refill = True  # its stream goes on beyond the window
                break
            # the agent's next issue time: ``_next_ready`` written out (a call in this loop, even inlined, costs
            # a reference count per array argument: a third of the loop's time)
            if p + 1 >= seg_end[k]:
                nr = np.inf
            else:
                nr = (last_done[a] if dep[a] else last_issue[a]) + compute[p + 1]
                if n_fly + 1 >= mlp[a] and inflight[a, 0] > nr:
                    nr = inflight[a, 0]
            ready_at[k] = nr
        istate[TOUCHED] = touched
        if refill:
            # Undo the epoch: every committed epoch must have seen all agents' requests.
            istate[TOUCHED] = snap_touched
            free[:] = snap_free
            epoch_busy[:] = snap_busy
            later_busy[:] = snap_later
            pos[:] = snap_pos
            done_max[:] = snap_done
            last_issue[agent_ids] = snap_issue
            last_done[agent_ids] = snap_last
            n_inflight[agent_ids] = snap_n
            for k in range(nw):
                inflight[agent_ids[k], : snap_n[k]] = snap_in[k, : snap_n[k]]
            return REFILL, n_ser
        active = False
        next_issue = np.inf
        for k in range(nw):
            if pos[k] < seg_end[k]:
                active = True
                if ready_at[k] < next_issue:
                    next_issue = ready_at[k]
        queued = False
        for r in range(n_res):
            if later_busy[r] > 0.0:
                queued = True
        if not active and not (drain and queued):
            # Every agent of the window is done (when draining: every queue too). The epoch stays open for
            # the next window.
            return DONE, n_ser
        nxt = epoch + 1
        if active and not queued and next_issue >= s1 + epoch_ns:
            nxt = int(next_issue // epoch_ns)  # nothing queued, nobody issues before then: jump
        n_ser = _close_epoch(
            epoch, epoch_ns, epoch_busy, later_busy, own_busy, ema, curve_now, curve_n, curve_x, curve_y,
            istate, ser_idx, ser_rows, n_ser, ema_weight,
        )  # fmt: skip
        if nxt > epoch + 1:
            # Idle epochs jumped over: the counter reads zero in the one before ``nxt``.
            n_ser = _close_epoch(
                nxt - 1, epoch_ns, epoch_busy, later_busy, own_busy, ema, curve_now, curve_n, curve_x, curve_y,
                istate, ser_idx, ser_rows, n_ser, ema_weight,
            )  # fmt: skip
        istate[EPOCH] = nxt
        if n_ser >= ser_cap:
            return SERIES_FULL, n_ser


@njit(cache=True, nogil=True)
def accumulate_stats(
    agent_ids: np.ndarray,
    seg_start: np.ndarray,
    n_commit: np.ndarray,
    rc: np.ndarray,
    level: np.ndarray,
    lat: np.ndarray,
    size_bytes: np.ndarray,
    compute: np.ndarray,
    n_levels: int,
    n_nodes: int,
    accesses: np.ndarray,
    memory_lines: np.ndarray,
    bytes_: np.ndarray,
    latency_sum: np.ndarray,
    level_hits: np.ndarray,
    hist: np.ndarray,
    record: bool,
    bin_lo: np.ndarray,
    bin_edge: np.ndarray,
    agent_accesses: np.ndarray,
    agent_latency: np.ndarray,
    agent_compute: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``Stats.add`` over the committed requests of a window (each agent's first ``n_commit``), in one pass.
    The count arrays are the flat views of the :class:`Stats` arrays (route class = flat index)."""
    as32 = np.empty(1, dtype=np.float32)  # a float32 and its bits
    bits32 = as32.view(np.uint32)
    lv_w = n_levels + 1
    for k in range(len(agent_ids)):
        a = agent_ids[k]
        lat_sum = 0.0
        comp_sum = 0.0
        for p in range(seg_start[k], seg_start[k] + n_commit[k]):
            c = rc[p]
            pair = c >> 1
            lv = level[p]
            x = lat[p]
            accesses[c] += 1
            if lv == n_levels:
                memory_lines[c] += 1
            level_hits[(pair // n_nodes) * lv_w + lv] += 1
            bytes_[c] += size_bytes[p]
            latency_sum[pair] += x
            if record:
                # the bin by the float32's top 16 bits (``stats.bin_table``)
                as32[0] = x
                v = as32[0]
                key = np.int64(bits32[0] >> np.uint32(16))
                b = bin_lo[key] + (1 if v >= bin_edge[key] else 0)
                hist[pair, b] += 1
            lat_sum += x
            comp_sum += compute[p]
        agent_accesses[a] += n_commit[k]
        agent_latency[a] += lat_sum
        agent_compute[a] += comp_sum
