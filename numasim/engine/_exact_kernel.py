"""The compiled core of exact mode: agent dispatch and the per-request loop over flat numpy state (numba).

:func:`run_kernel` does everything of :mod:`exact` that happens per request: it dispatches agents from a heap in
``(time, order)`` order, walks the running agent's requests in program order (MLP-limited issue, LRU caches,
FIFO servers, busy time per epoch bucket) until its next request is due after another agent's or at an epoch
boundary, and repeats. It returns to Python, with its whole state in the arrays it was given, whenever Python
must act; calling it again resumes exactly where it stopped:

* ``ROLL``: the next dispatch time (``st_f[F_T]``) reached ``next_roll``; Python advances the SimPy clock, closes
  epochs (``_roll``), stores the new ``next_roll`` and ``class_curve``, and resumes (the dispatch then runs);
* ``BLOCK_DONE``: agent ``st_i[I_AGENT]`` finished its block; Python counts it, installs the next block (or,
  at the end of the agent's stream, leaves ``pos == end``: the kernel then drops the agent from the heap);
* ``GROW``: the busy ring must hold bucket ``st_i[I_NEED]``; Python enlarges it (nothing was changed for the
  pending request yet);
* ``DONE``: no agent is left; ``BAD_BUCKET`` is an internal error (a charge outside the ring).

All times are float64 and every formula is evaluated in the same order as the pure-Python engine it replaced,
so results are bit-identical to it (``tests/engine/test_exact_kernel.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._epoch_kernel import self_paced_curve_ns
from ._evasion_rule import evaded_share
from ._prefetch_rules import prefetched_hit_ns, prefetched_miss_ns

__all__ = [
    "run_kernel",
    "DONE",
    "ROLL",
    "BLOCK_DONE",
    "GROW",
    "BAD_BUCKET",
    "P_PRIME",
    "N_STATE",
    "I_PHASE",
    "I_AGENT",
    "I_HEAP_N",
    "I_ORDER",
    "I_RING_LO",
    "I_CLOCK",
    "I_NEED",
    "I_ROLLED",
    "F_NEXT_ROLL",
    "F_READY",
    "F_HORIZON",
    "F_T",
]

# return status
DONE, ROLL, BLOCK_DONE, GROW, BAD_BUCKET = 0, 1, 2, 3, 4
# phases (where a resumed call continues)
P_PRIME, P_DISPATCH, P_PROCESS, P_NEXT = 0, 1, 2, 3
# slots of the int64 state vector ``st_i``
I_PHASE, I_AGENT, I_HEAP_N, I_ORDER, I_RING_LO, I_CLOCK, I_NEED, I_ROLLED = range(8)
# slots of the float64 state vector ``st_f``
F_NEXT_ROLL, F_READY, F_HORIZON, F_T = range(4)
N_STATE = 8


@njit(cache=True, inline="always")
def _pop_min(h: np.ndarray, lo: int, n: int) -> float:
    """Pop the least of the binary min-heap ``h[lo:lo+n]`` (the caller decrements its count)."""
    top = h[lo]
    n -= 1
    x = h[lo + n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and h[lo + c + 1] < h[lo + c]:
            c += 1
        if h[lo + c] < x:
            h[lo + i] = h[lo + c]
            i = c
        else:
            break
    if n > 0:
        h[lo + i] = x
    return top


@njit(cache=True, inline="always")
def free_slot(infl: np.ndarray, lo: int, n: int, mlp: int, ready: float) -> tuple[float, int]:
    """An agent's next issue time and in-flight count (its heap ``infl[lo:lo+n]``): not before one of its ``mlp``
    slots is free (the earliest completion leaves when all are busy), and what completed by then has left. The
    kernel's next-request step and a woken agent's return to the dispatch heap (:mod:`exact`) both use it."""
    if n >= mlp:
        t_free = _pop_min(infl, lo, n)
        n -= 1
        if t_free > ready:
            ready = t_free
    while n > 0 and infl[lo] <= ready:
        _pop_min(infl, lo, n)
        n -= 1
    return ready, n


@njit(cache=True, inline="always")
def _push(h: np.ndarray, lo: int, n: int, x: float) -> None:
    """Push ``x`` onto the binary min-heap ``h[lo:lo+n]`` (the caller increments its count)."""
    i = n
    while i > 0:
        p = (i - 1) // 2
        if h[lo + p] > x:
            h[lo + i] = h[lo + p]
            i = p
        else:
            break
    h[lo + i] = x


@njit(cache=True)
def _agent_sift_down(ht: np.ndarray, ho: np.ndarray, ha: np.ndarray, n: int, i: int) -> None:
    """Restore the agent heap (ordered by (time, order)) below ``i``."""
    t, o, a = ht[i], ho[i], ha[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and ho[c + 1] < ho[c])):
            c += 1
        if ht[c] < t or (ht[c] == t and ho[c] < o):
            ht[i], ho[i], ha[i] = ht[c], ho[c], ha[c]
            i = c
        else:
            break
    ht[i], ho[i], ha[i] = t, o, a


@njit(cache=True, inline="always")
def _way_of(ways_data: np.ndarray, c_off: np.ndarray, c_sets: np.ndarray, c_ways: np.ndarray, g: int, ln: int) -> int:
    """The way of cache instance ``g`` that holds line ``ln`` (-1: none)."""
    ways = c_ways[g]
    base = c_off[g] + (ln % c_sets[g]) * ways
    for w in range(base, base + ways):
        if ways_data[2 * w + 1] > 0 and ways_data[2 * w] == ln:
            return w
    return -1


@njit(cache=True)
def run_kernel(
    st_i: np.ndarray,
    st_f: np.ndarray,
    heap_t: np.ndarray,
    heap_o: np.ndarray,
    heap_a: np.ndarray,
    pos: np.ndarray,
    end: np.ndarray,
    last_issue: np.ndarray,
    last_done: np.ndarray,
    dependent: np.ndarray,
    stretch: np.ndarray,
    mlp: np.ndarray,
    pff: np.ndarray,
    n_cache: np.ndarray,
    instance: np.ndarray,
    infl: np.ndarray,
    infl_off: np.ndarray,
    infl_n: np.ndarray,
    acc_bk: np.ndarray,
    acc_lo: np.ndarray,
    acc_hi: np.ndarray,
    line: np.ndarray,
    cls: np.ndarray,
    compute: np.ndarray,
    prefetched: np.ndarray,
    lat_out: np.ndarray,
    req_out: np.ndarray,
    lvl_out: np.ndarray,
    c_sets: np.ndarray,
    c_ways: np.ndarray,
    c_off: np.ndarray,
    ways_data: np.ndarray,
    level_lat: np.ndarray,
    n_levels: int,
    write: np.ndarray,
    inv_start: np.ndarray,
    inv_inst: np.ndarray,
    coherence: np.ndarray,
    sh_off: np.ndarray,
    shadow: np.ndarray,
    sh_on: np.ndarray,
    dirty: np.ndarray,
    n_dirty: np.ndarray,
    inst_llc: np.ndarray,
    c2c_local_ns: float,
    llc_socket: np.ndarray,
    c2c_far_ns: np.ndarray,
    c2c_sock_ns: np.ndarray,
    transfers: np.ndarray,
    path_start: np.ndarray,
    path_res: np.ndarray,
    path_busy: np.ndarray,
    class_base: np.ndarray,
    class_curve: np.ndarray,
    free: np.ndarray,
    full: np.ndarray,
    class_ctrl: np.ndarray,
    class_evadable: np.ndarray,
    evade_ramp: np.ndarray,
    line_busy: np.ndarray,
    path_wb_share: np.ndarray,
    wb_count: np.ndarray,
    ring: np.ndarray,
    touched: np.ndarray,
    epoch_ns: float,
    u_now: np.ndarray,
    curve_n: np.ndarray,
    curve_x: np.ndarray,
    curve_y: np.ndarray,
    u_rolled: bool,
) -> int:
    """Run until Python must act (see module docstring); returns the status.

    Per agent ``a``: its requests are ``line/cls/compute/prefetched[pos[a]:end[a]]`` (its load-to-use latency,
    memory request latency (0 for a cache hit) and level go to ``lat_out/req_out/lvl_out`` at the same index); its in-flight completion times are the binary min-heap
    ``infl[infl_off[a] : infl_off[a] + infl_n[a]]`` (capacity ``mlp[a]``); ``instance[a, lv]`` is its cache
    instance at level ``lv < n_cache[a]``, whose set ``s`` holds ways ``w = c_off[g] + s * c_ways[g] + (0 ..
    c_ways[g] - 1)``: ``ways_data[2 w]`` is the way's line and ``ways_data[2 w + 1]`` its stamp (0 or -1 = empty, else
    the global use counter at its last use: the least stamp is the LRU way; line and stamp side by side, so a
    set is a few consecutive host cache lines).
    A write (``write[p]``) then takes its line from every other instance in use at each level
    (``inv_inst[inv_start[lv]:inv_start[lv + 1]]``): the caches are coherent, so another core's copy is invalid.
    The way keeps the line with stamp -1 (empty, like 0) until it is used again: a miss of that line refills
    its own way. ``coherence[a]`` counts the accesses that missed their first level and would have hit it had no
    other core written: those a *shadow* of each first-level instance holds (``shadow``, laid out as
    ``ways_data`` from ``sh_off[g]``, -1 for an instance of no first level), the same cache fed the same
    accesses without invalidations. The two are one until the first invalidation, when the shadows are copied
    from the caches (``sh_on[0]``: 0 before, 1 after, -1 where no two first-level instances are in use): a run
    without one pays nothing for them.
    ``dirty[w]``: way ``w`` holds its line modified by its instance's core (``n_dirty[0]`` such ways in all). An
    access that misses its first level while another instance holds its line modified is a cache-to-cache
    transfer, counted in ``transfers[2 a]`` (from a core of its own coherence domain, ``inst_llc`` of each
    instance: its last-level instance, or its socket where that is a cluster's share) or ``transfers[2 a + 1]``
    (from another), and timed at ``c2c_local_ns``, or the request's ``c2c_sock_ns`` where the two domains are on
    one socket (``llc_socket`` of each) and its ``c2c_far_ns`` where not, as a hit in the last level where they
    are positive (the calibration's coherence figures).
    ``acc_bk/acc_lo/acc_hi[a]``: the epoch bucket the agent last charged and its time range.
    Route class ``c`` crosses ``path_res[path_start[c]:path_start[c+1]]`` at ``path_busy`` ns each; a write of
    its whole line (``full[p]``) on a calibration with write-allocate evasion (``class_evadable`` not empty) at
    that times ``1 - class_evadable[c] * (1 - path_wb_share[k]) * ramp(q)`` at entry ``k``, ``q`` the lines
    queued at its controller ``class_ctrl[c]`` when it issues (``free`` ahead of it over ``line_busy``;
    ``timing.model.write_allocate_evaded``).
    A write that hits a line clean in all its core's caches makes it dirty: its eventual write-back is charged
    then, its share of its class's busy time at each entry of the route (``path_wb_share``: the write-back's
    share of a write's cost, which a write miss pays in full; empty when no write-back is modelled), without
    the core waiting; ``wb_count[c]`` counts them per class.
    ``ring[k & (R-1)]``: busy time per resource of open bucket ``k`` (``ring_lo <= k < ring_lo + R``);
    ``touched`` marks the buckets that were charged.
    """
    inf = np.inf
    phase = st_i[I_PHASE]
    a = st_i[I_AGENT]
    hn = st_i[I_HEAP_N]
    order = st_i[I_ORDER]
    ring_lo = st_i[I_RING_LO]
    clock = st_i[I_CLOCK]
    rolled = st_i[I_ROLLED]
    next_roll = st_f[F_NEXT_ROLL]
    ready = st_f[F_READY]
    horizon = st_f[F_HORIZON]
    n_ring = ring.shape[0]
    ring_mask = n_ring - 1
    status = DONE

    if phase == P_PRIME:
        # Every live agent computes its first request's ready time and enters the heap in agent order.
        for q in range(len(pos)):
            if pos[q] < end[q]:
                r0 = (last_done[q] if dependent[q] else last_issue[q]) + compute[pos[q]]
                i = hn
                hn += 1
                while i > 0:  # sift up by (time, order)
                    p = (i - 1) // 2
                    if heap_t[p] > r0:  # orders increase: a tie keeps the parent above
                        heap_t[i], heap_o[i], heap_a[i] = heap_t[p], heap_o[p], heap_a[p]
                        i = p
                    else:
                        break
                heap_t[i], heap_o[i], heap_a[i] = r0, order, q
                order += 1
        phase = P_DISPATCH

    while True:
        if phase == P_DISPATCH:
            if hn == 0:
                status = DONE
                break
            t = heap_t[0]
            # the earliest other agent is a child of the root
            if hn > 2:
                horizon = heap_t[1]
                if heap_t[2] < horizon:
                    horizon = heap_t[2]
            elif hn == 2:
                horizon = heap_t[1]
            else:
                horizon = inf
            if rolled == 0 and t >= next_roll:
                rolled = 1
                st_f[F_T] = t
                status = ROLL
                break
            rolled = 0
            a = heap_a[0]
            ready = t
            phase = P_PROCESS

        if phase == P_PROCESS:
            p = pos[a]
            c = cls[p]
            k0 = path_start[c]
            k1 = path_start[c + 1]
            # Would a miss charge a bucket beyond the ring? Ask for a larger ring before changing anything.
            t_ub = ready
            for k in range(k0, k1):
                f = free[path_res[k]]
                if f > t_ub:
                    t_ub = f
            bk_ub = int(t_ub // epoch_ns)
            if bk_ub >= ring_lo + n_ring:
                st_i[I_NEED] = bk_ub
                status = GROW
                break
            ln = line[p]
            level = n_levels
            shadow_hit = False
            if sh_on[0] == 1 and n_cache[a] > 0 and sh_off[instance[a, 0]] >= 0:
                # the first level as it would be without invalidations: LRU over the same accesses
                g = instance[a, 0]
                ways = c_ways[g]
                base = sh_off[g] + (ln % c_sets[g]) * ways
                lru = base
                for w in range(base, base + ways):
                    if shadow[2 * w + 1] > 0 and shadow[2 * w] == ln:
                        shadow_hit = True
                        lru = w
                        break
                    if shadow[2 * w + 1] < shadow[2 * lru + 1]:
                        lru = w
                clock += 1
                shadow[2 * lru] = ln
                shadow[2 * lru + 1] = clock
            for lv in range(n_cache[a]):
                g = instance[a, lv]
                ways = c_ways[g]
                base = c_off[g] + (ln % c_sets[g]) * ways
                empty = -1
                marked = -1  # a way another core's write emptied (its line's mark kept while another is free)
                lost = -1  # ... of this very line
                lru = base
                hit = False
                for w in range(base, base + ways):
                    s = ways_data[2 * w + 1]
                    if s == 0:
                        if empty < 0:
                            empty = w
                    elif s < 0:
                        if ways_data[2 * w] == ln:
                            lost = w  # another core's write took it from here
                        elif marked < 0:
                            marked = w
                    elif ways_data[2 * w] == ln:
                        clock += 1
                        ways_data[2 * w + 1] = clock
                        hit = True
                        break
                    elif s < ways_data[2 * lru + 1]:  # (an empty way, if any, is used instead)
                        lru = w
                if hit:
                    level = lv
                    break
                if shadow_hit and lv == 0:
                    coherence[a] += 1
                # a miss fills this level: the way its line was taken from, an empty way, else the least recently
                # used one
                w = lost if lost >= 0 else empty if empty >= 0 else marked if marked >= 0 else lru
                clock += 1
                ways_data[2 * w] = ln
                ways_data[2 * w + 1] = clock
                if dirty[w]:  # its modified line leaves (written back)
                    dirty[w] = False
                    n_dirty[0] -= 1
            transfer_ns = 0.0
            if n_dirty[0] > 0 and level > 0 and n_cache[a] > 0:
                # missed its first level: another core may hold the line modified (a cache-to-cache transfer);
                # the transfer leaves it shared (or, for a write, the write below takes it)
                my_llc = inst_llc[instance[a, n_cache[a] - 1]]
                holder_llc = -1
                for lv in range(n_cache[a]):
                    mine = instance[a, lv]
                    for k in range(inv_start[lv], inv_start[lv + 1]):
                        g = inv_inst[k]
                        w = _way_of(ways_data, c_off, c_sets, c_ways, g, ln) if g != mine else -1
                        if w >= 0 and dirty[w]:
                            dirty[w] = False
                            n_dirty[0] -= 1
                            if holder_llc < 0:
                                holder_llc = inst_llc[g]
                if holder_llc >= 0:
                    if holder_llc == my_llc:
                        transfers[2 * a] += 1
                        transfer_ns = c2c_local_ns
                    else:
                        transfers[2 * a + 1] += 1
                        same_socket = llc_socket[holder_llc] == llc_socket[my_llc]
                        transfer_ns = c2c_sock_ns[p] if same_socket else c2c_far_ns[p]
                    if transfer_ns > 0.0:
                        level = n_levels - 1  # served from a cache, at the transfer's latency
            was_dirty = False
            if write[p]:
                if sh_on[0] == 0:
                    for lv in range(n_cache[a]):
                        mine = instance[a, lv]
                        for k in range(inv_start[lv], inv_start[lv + 1]):
                            g = inv_inst[k]
                            if g != mine and _way_of(ways_data, c_off, c_sets, c_ways, g, ln) >= 0:
                                sh_on[0] = 1  # the first invalidation: from here the shadows differ
                    if sh_on[0] == 1:
                        for g in range(len(sh_off)):
                            if sh_off[g] >= 0:
                                n_w = c_sets[g] * c_ways[g]
                                shadow[2 * sh_off[g] : 2 * (sh_off[g] + n_w)] = ways_data[2 * c_off[g] : 2 * (c_off[g] + n_w)]
                for lv in range(n_cache[a]):
                    mine = instance[a, lv]
                    for k in range(inv_start[lv], inv_start[lv + 1]):
                        g = inv_inst[k]
                        w = _way_of(ways_data, c_off, c_sets, c_ways, g, ln) if g != mine else -1
                        if w >= 0:
                            ways_data[2 * w + 1] = -1  # empty, marked: the next access misses here
                            if dirty[w]:
                                dirty[w] = False
                                n_dirty[0] -= 1
                    # the writer's own copy is now the only one, modified
                    w = _way_of(ways_data, c_off, c_sets, c_ways, mine, ln)
                    if w >= 0:
                        if dirty[w]:
                            was_dirty = True
                        else:
                            dirty[w] = True
                            n_dirty[0] += 1
            req = 0.0
            if write[p] and len(path_wb_share) > 0 and level < n_levels and transfer_ns == 0.0 and not was_dirty:
                # a write hit on a clean line: its write-back is owed (posted: the core does not wait)
                wb_count[c] += 1
                tw = ready
                for k in range(k0, k1):
                    r = path_res[k]
                    b = path_busy[k] * path_wb_share[k]
                    if free[r] > tw:
                        tw = free[r]
                    free[r] = tw + b
                    bk = int(tw // epoch_ns)
                    if bk < ring_lo or bk >= ring_lo + n_ring:
                        st_i[I_NEED] = bk
                        status = BAD_BUCKET
                        break
                    touched[bk & ring_mask] = True
                    ring[bk & ring_mask, r] += b
                if status == BAD_BUCKET:
                    break
            if level < n_levels:
                lat = level_lat[level]
                if transfer_ns > 0.0:
                    lat = transfer_ns  # a snoop: no prefetcher hides it
                elif prefetched[p] and level > 0:
                    lat = prefetched_hit_ns(lat, pff[a], level_lat, level)  # see _prefetch_rules
            else:
                tt = ready
                evaded = 0.0
                if len(class_evadable) > 0 and full[p] and class_evadable[c] > 0.0:
                    evaded = class_evadable[c] * evaded_share(free[class_ctrl[c]], ready,
                                                              line_busy[class_ctrl[c]], evade_ramp)
                served = 0.0  # when the slowest server of the route is done with the line
                for k in range(k0, k1):
                    r = path_res[k]
                    b = path_busy[k]
                    if evaded > 0.0:
                        # the read for ownership it skipped: the entry's share of the write that is not write-back
                        b *= 1.0 - evaded * (1.0 - path_wb_share[k])
                    f = free[r]
                    if f > tt:
                        tt = f
                    free[r] = tt + b
                    if tt + b > served:
                        served = tt + b
                    if not (acc_lo[a] <= tt < acc_hi[a]):
                        bk = int(tt // epoch_ns)
                        if bk < ring_lo or bk >= ring_lo + n_ring:
                            st_i[I_NEED] = bk
                            status = BAD_BUCKET
                            break
                        acc_bk[a] = bk
                        acc_lo[a] = bk * epoch_ns
                        acc_hi[a] = (bk + 1) * epoch_ns
                        touched[bk & ring_mask] = True
                    bk = acc_bk[a]
                    # a bucket closed since the agent cached it no longer counts (it was already reported)
                    if bk >= ring_lo:
                        ring[bk & ring_mask, r] += b
                if status == BAD_BUCKET:
                    break
                # the memory request latency (issue to data): idle route + FIFO waits + curve delays, never
                # below the idle route latency; what the core waits for is that, shortened by prefetching
                curve_ns = class_curve[c]
                if dependent[a] and u_rolled and ready > last_issue[a]:
                    # a dependent chain never queues behind its own earlier misses (``self_paced_curve_ns``)
                    curve_ns = self_paced_curve_ns(
                        k0, k1, path_res, path_busy, u_now, curve_n, curve_x, curve_y, ready - last_issue[a]
                    )
                req = class_base[c] + (tt - ready) + curve_ns
                lat = req
                if prefetched[p]:
                    lat = prefetched_miss_ns(req, pff[a], served - ready, level_lat, n_levels)
            done = ready + lat * stretch[a]  # (a thread taking turns on its cpu holds the slot k times as long)
            lo = infl_off[a]
            _push(infl, lo, infl_n[a], done)
            infl_n[a] += 1
            last_issue[a] = ready
            if done > last_done[a]:
                last_done[a] = done
            lat_out[p] = lat
            req_out[p] = req
            lvl_out[p] = level
            pos[a] = p + 1
            phase = P_NEXT
            if p + 1 >= end[a]:
                status = BLOCK_DONE
                break

        if phase == P_NEXT:
            p = pos[a]
            if p >= end[a]:
                # the agent's stream ended: drop it from the heap
                hn -= 1
                if hn > 0:
                    heap_t[0], heap_o[0], heap_a[0] = heap_t[hn], heap_o[hn], heap_a[hn]
                    _agent_sift_down(heap_t, heap_o, heap_a, hn, 0)
                phase = P_DISPATCH
                continue
            ready = (last_done[a] if dependent[a] else last_issue[a]) + compute[p]
            ready, infl_n[a] = free_slot(infl, infl_off[a], infl_n[a], mlp[a], ready)
            if ready > horizon or ready >= next_roll:
                # another agent is due first (ties go to it) or the epoch ends: back to the heap, re-ordered
                heap_t[0], heap_o[0], heap_a[0] = ready, order, a
                order += 1
                _agent_sift_down(heap_t, heap_o, heap_a, hn, 0)
                phase = P_DISPATCH
            else:
                phase = P_PROCESS

    st_i[I_PHASE] = phase
    st_i[I_AGENT] = a
    st_i[I_HEAP_N] = hn
    st_i[I_ORDER] = order
    st_i[I_CLOCK] = clock
    st_i[I_ROLLED] = rolled
    st_f[F_READY] = ready
    st_f[F_HORIZON] = horizon
    return status
