"""The compiled inner loop of epoch mode (the model is described in :mod:`epoch`).

One call advances simulated time epoch by epoch over one window of buffered requests, until the window is used
up, or an agent whose stream goes on beyond the window runs out inside an epoch (that epoch is undone: the caller
refills and calls again), or the series buffer is nearly full. All state lives in the arrays passed in, so a call
resumes exactly where the last one stopped.

Busy time goes to the epoch bucket in which each line's service starts (a ring of buckets from the first one not
recorded yet on, grown by the caller when a line is served beyond it), and the loaded-latency curves are updated when the first request of a new epoch is dispatched ("a
roll"), from the bucket before it: exact mode's rules, so that without caches the two modes agree exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._evasion_rule import evaded_share
from ._prefetch_rules import prefetched_hit_ns, prefetched_miss_ns

__all__ = [
    "DONE", "EPOCH", "GROW", "LOW", "REFILL", "SERIES_FULL", "accumulate_stats", "add_rows_at", "curve_delay",
    "memory_latency", "run_epochs", "self_paced_curve_ns",
]

DONE = 0
REFILL = 1
SERIES_FULL = 2
GROW = 3  # a line is served beyond the ring: the caller grows it (``istate[NEED]`` buckets) and calls again


# Integer state slots (``istate``).
EPOCH = 0  # the epoch being dispatched
EMA_EPOCH = 1  # the bucket of the last roll (exact mode's ``_ema_bucket``; -10: none)
ROLLED = 2  # the bucket rolls have reached (exact mode's ``bucket``, from 0)
CURRENT = 3  # the agent issuing now (-1: none), as exact mode's dispatcher runs one agent until another is due
TURN = 4  # the next turn stamp: an agent that stops being current queues behind those that stopped before
LOW = 5  # the first bucket not yet recorded (the ring's rows hold buckets LOW .. LOW + rows - 1)
NEED = 6  # with GROW: the ring rows needed


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
def self_paced_curve_ns(
    q0: int,
    q1: int,
    path_res: np.ndarray,
    path_busy: np.ndarray,
    u: np.ndarray,
    curve_n: np.ndarray,
    curve_x: np.ndarray,
    curve_y: np.ndarray,
    period_ns: float,
) -> float:  # pragma: no cover - compiled
    """The curve delays a dependent agent's miss adds along route entries ``q0 .. q1 - 1``: at each resource the
    utilisation of the last epoch (``u``, smoothed) less the agent's own share, a line per ``period_ns`` (the
    time since its last issue). A dependent chain has one miss in flight: its earlier misses had completed
    before this one issued, so it never queues behind them (a lone pointer chase measures the idle latency)."""
    total = 0.0
    for q in range(q0, q1):
        r = path_res[q]
        seen = u[r] - path_busy[q] / period_ns
        total += curve_delay(seen if seen > 0.0 else 0.0, curve_n[r], curve_x[r], curve_y[r])
    return total


@njit(cache=True)
def _roll(
    now: float,
    epoch_ns: float,
    ring: np.ndarray,
    ring_touched: np.ndarray,
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
    last: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Exact mode's ``_roll`` at a dispatch at ``now``: record the buckets before ``now``'s, and set each
    resource's curve delay from the bucket just before it (a hardware counter read once per epoch), smoothed with
    the last roll's when the two are consecutive."""
    b = int(now // epoch_ns)
    if b <= istate[ROLLED]:
        return n_ser
    n_rows, n_res = ring.shape
    last[:] = 0.0  # the bucket just before ``now``'s (scratch of the caller's: no allocation per roll)
    for k in range(istate[LOW], b):
        if k - istate[LOW] >= n_rows:
            break  # the rest of the jump holds no charges
        row = k % n_rows
        if ring_touched[row]:
            ser_idx[n_ser] = k
            ser_rows[n_ser, :] = ring[row, :]
            n_ser += 1
            if k == b - 1:
                last[:] = ring[row, :]
            ring[row, :] = 0.0
            ring_touched[row] = False
    istate[LOW] = max(istate[LOW], b)
    smooth = b == istate[EMA_EPOCH] + 1
    for r in range(n_res):
        u = (last[r] - own_busy[r]) / epoch_ns  # a request does not queue behind itself
        u = min(max(u, 0.0), 1.0)
        if smooth:
            u = ema_weight * ema[r] + (1.0 - ema_weight) * u
        ema[r] = u
        curve_now[r] = curve_delay(u, curve_n[r], curve_x[r], curve_y[r])
    istate[EMA_EPOCH] = b
    istate[ROLLED] = b
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
) -> float:  # pragma: no cover - compiled
    """When agent ``a`` may issue its request ``p`` (infinity when its window segment is used up): ``compute``
    after its previous issue (after its previous completion when dependent), once one of its ``mlp`` slots is
    free (the earliest completion among them)."""
    if p >= end:
        return np.inf
    ready = (last_done[a] if dep[a] else last_issue[a]) + compute[p]
    earliest = inflight[a, 0]
    for s in range(1, mlp[a]):
        earliest = min(earliest, inflight[a, s])
    return max(ready, earliest)


@njit(cache=True, nogil=True)
def run_epochs(
    agent_ids: np.ndarray,
    seg_end: np.ndarray,
    truncated: np.ndarray,
    level: np.ndarray,
    prefetched: np.ndarray,
    rc: np.ndarray,
    compute: np.ndarray,
    c2c: np.ndarray,
    dep: np.ndarray,
    stretch: np.ndarray,
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
    pos: np.ndarray,
    done_max: np.ndarray,
    turn: np.ndarray,
    bucket_of: np.ndarray,
    bucket_lo: np.ndarray,
    bucket_hi: np.ndarray,
    free: np.ndarray,
    ring: np.ndarray,
    ring_touched: np.ndarray,
    ema: np.ndarray,
    curve_now: np.ndarray,
    istate: np.ndarray,
    lat_out: np.ndarray,
    req_out: np.ndarray,
    issue_out: np.ndarray,
    ser_idx: np.ndarray,
    ser_rows: np.ndarray,
    full: np.ndarray,
    class_ctrl: np.ndarray,
    class_evadable: np.ndarray,
    evade_ramp: np.ndarray,
    owed: np.ndarray,
    path_wb_share: np.ndarray,
    wb_count: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Advance over one window; returns (status, number of series rows written). ``truncated`` (int8) per
    agent: 1, its stream goes on past the window (the epoch in which it runs out is undone and the window ends,
    ``REFILL``); 2, its end ends the window after the epoch it falls in, committed (``REFILL``); 0, neither. ``c2c``: each request's
    cache-to-cache transfer latency where it is one (empty: none in the window). ``full``: each request is a write
    of its whole line (empty: none), whose busy time write-allocate evasion scales as in exact mode
    (``class_ctrl``, ``class_evadable``, ``evade_ramp``: ``_exact_kernel.run_kernel``). ``owed``: each request is
    a write hit on a clean line (empty: none), whose write-back costs its share of its class's busy time at each
    entry of the route (``path_wb_share``), posted (the core does not wait), counted per class in ``wb_count``
    when the epoch commits. ``lat_out``, ``req_out``, ``issue_out``: each committed request's latency, memory
    request latency and issue time. ``req_out`` is written for prefetched memory requests only: a memory request
    the prefetcher did not run ahead of has ``lat_out`` for it (:func:`memory_latency`); ``issue_out`` may be
    empty (nothing reads the issue times)."""
    has_evasion = len(full) > 0 and len(class_evadable) > 0
    has_wb = len(owed) > 0
    scaled = has_evasion or has_wb
    n_levels = len(level_lat) - 1
    has_c2c = len(c2c) > 0
    has_issue = len(issue_out) > 0  # (empty: nothing reads the issue times)
    n_res = len(free)
    nw = len(agent_ids)
    m_max = inflight.shape[1]
    snap_pos = np.empty(nw, dtype=np.int64)
    snap_issue = np.empty(nw)
    snap_last = np.empty(nw)
    snap_done = np.empty(nw)
    snap_in = np.empty((nw, m_max))
    snap_turn = np.empty(nw, dtype=np.int64)
    snap_bucket = np.empty(nw, dtype=np.int64)
    snap_lo = np.empty(nw)
    snap_hi = np.empty(nw)
    snap_free = np.empty(n_res)
    last_busy = np.empty(n_res)  # _roll's scratch
    ready_at = np.empty(nw)
    turn_w = turn[agent_ids]  # each window agent's turn stamp (written back when the call returns)
    path_len = 1
    for c in range(len(path_ptr) - 1):
        path_len = max(path_len, path_ptr[c + 1] - path_ptr[c])
    # The epoch's busy charges (bucket, resource, ns), added to the ring when the epoch is committed: nothing
    # during the epoch reads them (a roll reads the buckets before the epoch's own).
    # Sized once for every request the window has left (no epoch needs more): an array variable assigned inside
    # the loop costs reference counting on every access of it.
    need = 0
    for k in range(nw):
        need += seg_end[k] - pos[k]
    need *= path_len
    log_bucket = np.empty(need, dtype=np.int64)
    log_hop = np.empty(need, dtype=np.int64)  # the route entry (its resource and busy time are path_res/path_busy)
    log_scale = np.empty(need if scaled else 0)  # a charge's busy time scale (evasion, write-backs)
    log_wb = np.empty(need // path_len if has_wb else 0, dtype=np.uint64)  # the epoch's write-backs' classes
    n_ser = 0
    while True:
        if n_ser + len(ring) + 1 > len(ser_idx):
            turn[agent_ids] = turn_w
            return SERIES_FULL, n_ser  # a roll may record a row per ring bucket
        epoch = istate[EPOCH]
        s1 = (epoch + 1) * epoch_ns
        # What the epoch changes, kept so that it can be undone (the log: a charge per resource of each request).
        n_log = 0
        n_wb = 0
        snap_free[:] = free
        snap_current, snap_turn_next = istate[CURRENT], istate[TURN]
        snap_pos[:] = pos
        snap_done[:] = done_max
        snap_turn[:] = turn_w
        for k in range(nw):  # a loop, not ``x[agent_ids]``: fancy indexing allocates a temporary per epoch
            a = agent_ids[k]
            snap_issue[k] = last_issue[a]
            snap_last[k] = last_done[a]
            snap_bucket[k] = bucket_of[a]
            snap_lo[k] = bucket_lo[a]
            snap_hi[k] = bucket_hi[a]
            snap_in[k, :] = inflight[a, :]
            ready_at[k] = _next_ready(
                a, pos[k], seg_end[k], compute, dep, mlp, last_issue, last_done, inflight
            )
        # Exact mode rolls at the first dispatch at or after the next epoch boundary: here, before the epoch's
        # first request (the epoch visited is the one of the earliest request due, so one is dispatched in it).
        due = np.inf
        for k in range(nw):
            due = min(due, ready_at[k])
        if due < s1 and due >= (istate[ROLLED] + 1) * epoch_ns:
            n_ser = _roll(
                due, epoch_ns, ring, ring_touched, own_busy, ema, curve_now, curve_n, curve_x, curve_y,
                istate, ser_idx, ser_rows, n_ser, ema_weight, last_busy,
            )  # fmt: skip
        # Exact mode's dispatch: the current agent goes on while no other is due before it (a tie goes to it);
        # otherwise it stops and queues for a turn, and the agent due first (the first queued, on a tie) goes on.
        # The current agent holds turn -1 (it wins every tie); stopping, it takes the next turn stamp.
        kc = -1
        for j in range(nw):
            if agent_ids[j] == istate[CURRENT]:
                kc = j
                turn_w[j] = -1
        refill = False
        ended = False  # an agent whose end ends the window issued its last request (truncated == 2)
        while True:
            k = 0
            ready = np.inf
            ties = 0
            for j in range(nw):  # branch-free: which agent is due first is data, not a pattern
                x = ready_at[j]
                # agents due at the earliest time so far, counted in the same pass (not a second one)
                ties = 1 if x < ready else ties + (x == ready)
                k = j if x < ready else k
                ready = min(x, ready)
            if ties > 1 and ready < np.inf:
                # agents due at the same time (rare but for identical agents): the current, else the first queued
                first_turn = turn_w[k]
                for j in range(nw):
                    if ready_at[j] == ready and turn_w[j] < first_turn:
                        k, first_turn = j, turn_w[j]
            if k != kc or ready >= s1:
                if kc >= 0:  # the current agent stops
                    turn_w[kc] = istate[TURN]
                    istate[TURN] += 1
                    kc = -1
                    istate[CURRENT] = -1
                if ready >= s1:
                    break
                kc = k
                turn_w[k] = -1
                istate[CURRENT] = agent_ids[k]
            # Indices loaded from arrays are cast to unsigned: numba then indexes without the negative-index
            # wraparound it adds for a signed one (a shift, a mask and an add on every access, on the critical path)
            ku = np.uint64(k)
            a = np.uint64(agent_ids[ku])
            p = pos[ku]
            pu = np.uint64(p)
            # Its miss slots (``inflight[a, :mlp[a]]``, each the completion time of the miss that took it last):
            # this request takes the one that frees first (``ready`` is at or after it, as ``ready_at`` waited for
            # it), and the next one can issue once the next earliest (or this one) completes. A branch-free scan:
            # the sorted set it replaced (pop what completed, insert by shifting) mispredicted its loops' exits
            # (6 ns a request on the engine benchmark).
            s0 = 0
            v0 = inflight[a, 0]
            v1 = np.inf
            for s in range(1, mlp[a]):
                x = inflight[a, s]
                v1 = min(v1, max(x, v0))
                s0 = s if x < v0 else s0
                v0 = min(x, v0)
            lv = level[pu]
            if lv < n_levels:
                if has_c2c and c2c[pu] > 0.0:
                    lat = c2c[pu]  # a cache-to-cache transfer (a snoop: no prefetcher hides it)
                else:
                    lat = level_lat[lv]
                    if prefetched[pu] and lv > 0:
                        lat = prefetched_hit_ns(lat, pff[a], level_lat, lv)
                if has_wb and owed[pu]:
                    # a write hit on a clean line: its write-back is owed, posted (the core does not wait)
                    cls = np.uint64(rc[pu])
                    tw = ready
                    for q in range(path_ptr[cls], path_ptr[cls + np.uint64(1)]):
                        r = np.uint64(path_res[np.uint64(q)])
                        tw = max(tw, free[r])
                        wb = path_wb_share[np.uint64(q)]
                        free[r] = tw + path_busy[np.uint64(q)] * wb
                        if not (bucket_lo[a] <= tw < bucket_hi[a]):
                            bk = int(tw // epoch_ns)
                            bucket_of[a] = bk
                            bucket_lo[a] = bk * epoch_ns
                            bucket_hi[a] = (bk + 1) * epoch_ns
                        log_bucket[n_log] = bucket_of[a]
                        log_hop[n_log] = q
                        log_scale[n_log] = wb
                        n_log += 1
                    log_wb[n_wb] = cls
                    n_wb += 1
            else:
                # FIFO servers along the route: the miss starts at each resource once the one before started
                # it and the resource is free, and holds it for its line's busy time.
                cls = np.uint64(rc[pu])
                q_end = path_ptr[cls + np.uint64(1)]
                t = ready
                extra = 0.0
                evaded = 0.0
                if has_evasion and full[pu] and class_evadable[cls] > 0.0:
                    cr = class_ctrl[cls]
                    evaded = class_evadable[cls] * evaded_share(free[cr], ready, own_busy[cr], evade_ramp)
                b = 0.0
                served = 0.0  # when the slowest server of the route is done with the line
                if evaded > 0.0:
                    # A full-line write that skips part of its read for ownership: each entry scaled by its own
                    # read-for-ownership share. A loop of its own: that per-entry load in the common loop cost
                    # 3 ns an access on the engine benchmark, which has no writes at all.
                    for q in range(path_ptr[cls], q_end):
                        r = np.uint64(path_res[np.uint64(q)])
                        t = max(t, free[r])
                        scale = 1.0 - evaded * (1.0 - path_wb_share[np.uint64(q)])
                        b = path_busy[np.uint64(q)] * scale
                        log_scale[n_log] = scale
                        free[r] = t + b
                        served = max(served, t + b)
                        extra += curve_now[r]
                        if not (bucket_lo[a] <= t < bucket_hi[a]):
                            bk = int(t // epoch_ns)
                            bucket_of[a] = bk
                            bucket_lo[a] = bk * epoch_ns
                            bucket_hi[a] = (bk + 1) * epoch_ns
                        log_bucket[n_log] = bucket_of[a]
                        log_hop[n_log] = q
                        n_log += 1
                else:
                    for q in range(path_ptr[cls], q_end):
                        r = np.uint64(path_res[np.uint64(q)])
                        t = max(t, free[r])
                        b = path_busy[np.uint64(q)]
                        if scaled:
                            log_scale[n_log] = 1.0
                        free[r] = t + b
                        served = max(served, t + b)
                        extra += curve_now[r]
                        # busy time to the bucket the service starts in; as in exact mode, each agent keeps the
                        # bucket of its last charge and its bounds, and divides only when the time falls outside
                        if not (bucket_lo[a] <= t < bucket_hi[a]):
                            bk = int(t // epoch_ns)
                            bucket_of[a] = bk
                            bucket_lo[a] = bk * epoch_ns
                            bucket_hi[a] = (bk + 1) * epoch_ns
                        log_bucket[n_log] = bucket_of[a]
                        log_hop[n_log] = q
                        n_log += 1
                if dep[a] and istate[EMA_EPOCH] != -10 and ready > last_issue[a]:  # (-10: no roll yet)
                    extra = self_paced_curve_ns(
                        path_ptr[cls], q_end, path_res, path_busy, ema, curve_n, curve_x, curve_y, ready - last_issue[a]
                    )
                # memory request latency (issue to data, >= the idle route latency); the core waits less for a
                # prefetched line
                req = class_base[cls] + (t - ready) + extra
                lat = req
                if prefetched[pu]:
                    # stored only where it differs from the latency (the readers take ``lat_out`` elsewhere): a
                    # store per request to a stream of its own cost the loop about a tenth of its time
                    req_out[pu] = req
                    lat = prefetched_miss_ns(req, pff[a], served - ready, level_lat, n_levels)
            done = ready + lat * stretch[a]  # (a thread taking turns on its cpu holds the slot k times as long)
            inflight[a, np.uint64(s0)] = done
            last_issue[a] = ready
            if has_issue:
                issue_out[pu] = ready  # when it issued (a run-time kernel times hinting faults by it)
            if done > last_done[a]:
                last_done[a] = done
            if done > done_max[ku]:
                done_max[ku] = done
            lat_out[pu] = lat
            pos[ku] = p + 1
            if p + 1 == seg_end[ku] and truncated[ku] != 0:
                if truncated[ku] == 1:
                    refill = True  # its stream goes on beyond the window
                    break
                ended = True  # a thread others share cpus with ended: the window ends with this epoch
            # the agent's next issue time: ``_next_ready`` written out (a call in this loop, even inlined, costs
            # a reference count per array argument: a third of the loop's time)
            if p + 1 >= seg_end[ku]:
                nr = np.inf
            else:
                nr = (last_done[a] if dep[a] else last_issue[a]) + compute[pu + np.uint64(1)]
                nr = max(nr, min(v1, done))  # (a slot still free holds a time at or before ``ready``)
            ready_at[ku] = nr
        # Commit the epoch's busy charges, unless one lies beyond the ring: then undo the epoch and let the
        # caller grow the ring (exact mode's ring grows the same way).
        grow = False
        if not refill:
            top = istate[LOW]
            for i in range(n_log):
                top = max(top, log_bucket[i])
            grow = top - istate[LOW] >= len(ring)
            istate[NEED] = top - istate[LOW] + 1
        if not refill and not grow:
            for i in range(n_wb):
                wb_count[log_wb[i]] += 1
            n_rows = len(ring)
            if n_rows & (n_rows - 1) == 0:  # a power of two (as the engine sizes it): a mask, not a division
                mask = n_rows - 1
                for i in range(n_log):
                    row = np.uint64(log_bucket[i] & mask)
                    hop = np.uint64(log_hop[i])
                    ring[row, np.uint64(path_res[hop])] += path_busy[hop] * log_scale[i] if scaled else path_busy[hop]
                    ring_touched[row] = True
            else:
                for i in range(n_log):
                    row = log_bucket[i] % n_rows
                    q = log_hop[i]
                    ring[row, path_res[q]] += path_busy[q] * log_scale[i] if scaled else path_busy[q]
                    ring_touched[row] = True
        if refill or grow:
            # Undo the epoch: every committed epoch must have seen all agents' requests (and all its charges
            # must fit the ring). A roll at the epoch's start stays: the retry starts with the same request.
            free[:] = snap_free
            istate[CURRENT], istate[TURN] = snap_current, snap_turn_next
            pos[:] = snap_pos
            done_max[:] = snap_done
            last_issue[agent_ids] = snap_issue
            last_done[agent_ids] = snap_last
            turn_w[:] = snap_turn
            turn[agent_ids] = turn_w
            bucket_of[agent_ids] = snap_bucket
            bucket_lo[agent_ids] = snap_lo
            bucket_hi[agent_ids] = snap_hi
            for k in range(nw):
                inflight[agent_ids[k], :] = snap_in[k, :]
            return (GROW if grow else REFILL), n_ser
        next_issue = np.inf
        for k in range(nw):
            if ready_at[k] < next_issue:
                next_issue = ready_at[k]
        if next_issue == np.inf:
            turn[agent_ids] = turn_w
            return DONE, n_ser  # every agent of the window is done; the epoch stays open for the next window
        istate[EPOCH] = max(epoch + 1, int(next_issue // epoch_ns))  # idle epochs are skipped
        if ended:
            turn[agent_ids] = turn_w
            return REFILL, n_ser  # committed: the caller changes the cpu shares before the next window


def memory_latency(lat: np.ndarray, req: np.ndarray, prefetched: np.ndarray) -> np.ndarray:
    """The memory request latency of each request from :func:`run_epochs`' outputs (meaningful at memory
    requests): ``req`` where the request was prefetched, else its latency ``lat``, which equals it there.

    Examples
    --------
    >>> memory_latency(np.array([90.0, 40.0]), np.array([0.0, 95.0]), np.array([False, True])).tolist()
    [90.0, 95.0]
    """
    return np.where(prefetched, req, lat)


@njit(cache=True, nogil=True)
def add_rows_at(busy: np.ndarray, at: np.ndarray, rows: np.ndarray) -> None:  # pragma: no cover - compiled
    """``busy[at[k]] += rows[k]`` for each ``k`` in order: ``np.add.at(busy, at, rows)`` to the bit (the same adds
    in the same order), without its per-element dispatch: 10 ns an element alone and up to 40 in a run, on the
    utilisation series' rows (a window's few hundred buckets x resources, on the timing thread)."""
    width = rows.shape[1]
    for k in range(len(at)):
        r = at[k]
        for j in range(width):
            busy[r, j] += rows[k, j]


@njit(cache=True, nogil=True)
def accumulate_stats(
    agent_ids: np.ndarray,
    seg_start: np.ndarray,
    n_commit: np.ndarray,
    rc: np.ndarray,
    level: np.ndarray,
    lat: np.ndarray,
    req: np.ndarray,
    prefetched: np.ndarray,
    size_bytes: np.ndarray,
    compute: np.ndarray,
    n_levels: int,
    n_nodes: int,
    accesses: np.ndarray,
    memory_lines: np.ndarray,
    bytes_: np.ndarray,
    latency_sum: np.ndarray,
    memory_latency_sum: np.ndarray,
    level_hits: np.ndarray,
    hist: np.ndarray,
    record: bool,
    bin_lo: np.ndarray,
    bin_edge: np.ndarray,
    agent_accesses: np.ndarray,
    agent_latency: np.ndarray,
    agent_compute: np.ndarray,
    agent_memory_lines: np.ndarray,
    agent_memory_latency: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``Stats.add`` over the committed requests of a window (each agent's first ``n_commit``), in one pass.
    The count arrays are the flat views of the :class:`Stats` arrays (route class = flat index)."""
    as32 = np.empty(1, dtype=np.float32)  # a float32 and its bits
    bits32 = as32.view(np.uint32)
    lv_w = n_levels + 1
    # each route class's row in ``level_hits`` (its initiator's), once: not a division per request
    hit_row = np.empty(len(accesses), dtype=np.int64)
    for c in range(len(accesses)):
        hit_row[c] = ((c >> 1) // n_nodes) * lv_w
    for k in range(len(agent_ids)):
        a = agent_ids[k]
        lat_sum = 0.0
        comp_sum = 0.0
        mem_sum = 0.0
        mem_n = 0
        for p in range(seg_start[k], seg_start[k] + n_commit[k]):
            # unsigned indices: no negative-index wraparound on each access (as in ``run_epochs``)
            pu = np.uint64(p)
            cls = np.uint64(rc[pu])
            pair = cls >> np.uint64(1)
            lv = level[pu]
            x = lat[pu]
            accesses[cls] += 1
            level_hits[np.uint64(hit_row[cls] + lv)] += 1
            bytes_[cls] += size_bytes[pu]
            latency_sum[pair] += x
            if lv == n_levels:
                memory_lines[cls] += 1
                y = req[pu] if prefetched[pu] else x  # (``run_epochs`` stores the prefetched ones only)
                memory_latency_sum[pair] += y
                mem_sum += y
                mem_n += 1
                if record:
                    # the bin by the float32's top 16 bits (``stats.bin_table``)
                    as32[0] = y
                    v = as32[0]
                    key = np.uint64(bits32[0] >> np.uint32(16))
                    b = bin_lo[key] + (1 if v >= bin_edge[key] else 0)
                    hist[pair, np.uint64(b)] += 1
            lat_sum += x
            comp_sum += compute[pu]
        agent_accesses[a] += n_commit[k]
        agent_latency[a] += lat_sum
        agent_compute[a] += comp_sum
        agent_memory_lines[a] += mem_n
        agent_memory_latency[a] += mem_sum
