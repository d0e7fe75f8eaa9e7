"""Compiled passes of the :class:`~numasim.engine.stream.Feeder` over one chunk (see :mod:`stream` for the rules).

Each is one pass over the chunk where numpy needs several (a gather, a sort by agent, a comparison per lag of
the prefetch rule): the feeder runs on its own thread, and these release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "PREFETCH_STREAMS", "compute_by_agent", "first_lines", "node_targets", "gather_by_agent", "group_by_agent", "lookup_nodes", "lookup_pages",
    "merge_known", "new_in_line_order", "prefetch_flags", "reuse_candidates", "reuse_keys", "reuse_keys_at", "reuse_pairs", "sort_reuse_keys", "thread_agents",
    "window_arrays", "set_counts", "asks_fit", "reuse_times", "level_hits", "interpolate_distance", "c2c_holders", "write_backs",
]

PREFETCH_STREAMS = 8
"""Requests of an agent the prefetch rule looks back over (see :mod:`stream`); a compile-time constant."""


@njit(cache=True, nogil=True)
def lookup_nodes(
    addresses: np.ndarray,
    run_starts: np.ndarray,
    run_ends: np.ndarray,
    run_offsets: np.ndarray,
    flat: np.ndarray,
    shift: int,
) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    """``PageMap.lookup`` over its built arrays: (node of each address, index of the first unmapped address
    or -1)."""
    n = len(addresses)
    out = np.empty(n, dtype=flat.dtype)
    n_runs = len(run_starts)
    if n_runs == 0:
        return out, 0 if n else -1
    lo0 = run_starts[0]
    hi0 = run_ends[0]
    for i in range(n):
        page = addresses[i] >> np.uint64(shift)
        if n_runs == 1:
            if page < lo0 or page >= hi0:
                return out, i
            out[i] = flat[np.int64(page - lo0)]
            continue
        # the last run starting at or before the page (a bisection written out: a call per access would cost
        # reference counts on its array argument)
        lo, hi = 0, n_runs
        while lo < hi:
            mid = (lo + hi) >> 1
            if run_starts[mid] <= page:
                lo = mid + 1
            else:
                hi = mid
        r = lo - 1
        if r < 0 or page >= run_ends[r]:
            return out, i
        out[i] = flat[run_offsets[r] + np.int64(page - run_starts[r])]
    return out, -1


@njit(cache=True, nogil=True)
def lookup_pages(
    addresses: np.ndarray,
    run_starts: np.ndarray,
    run_ends: np.ndarray,
    run_offsets: np.ndarray,
    shift: int,
) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    """Like :func:`lookup_nodes`, but each address's *flat page index* (its page's position in the flat node
    array), for a run-time kernel that moves pages while the run goes on: (indices, first unmapped or -1).

    The bisection is written out here as in :func:`lookup_nodes` on purpose: a shared helper called per access
    costs reference counts on its array arguments in this hot loop."""
    n = len(addresses)
    out = np.empty(n, dtype=np.int64)
    n_runs = len(run_starts)
    if n_runs == 0:
        return out, 0 if n else -1
    for i in range(n):
        page = addresses[i] >> np.uint64(shift)
        lo, hi = 0, n_runs
        while lo < hi:
            mid = (lo + hi) >> 1
            if run_starts[mid] <= page:
                lo = mid + 1
            else:
                hi = mid
        r = lo - 1
        if r < 0 or page >= run_ends[r]:
            return out, i
        out[i] = run_offsets[r] + np.int64(page - run_starts[r])
    return out, -1


@njit(cache=True, nogil=True)
def group_by_agent(agent: np.ndarray, n_agents: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A stable counting sort by agent: (order, each access's rank among its agent's accesses, group bounds)."""
    n = len(agent)
    bounds = np.zeros(n_agents + 1, dtype=np.int64)
    # indices read from arrays are cast to unsigned: numba then indexes by them without its negative-index
    # wraparound (a shift, a mask and an add per access)
    for i in range(n):
        bounds[np.uint64(agent[i] + 1)] += 1
    for a in range(n_agents):
        bounds[a + 1] += bounds[a]
    fill = bounds[:n_agents].copy()
    order = np.empty(n, dtype=np.int64)
    rank = np.empty(n, dtype=np.int32)
    for i in range(n):
        ag = np.uint64(agent[i])
        j = fill[ag]
        order[np.uint64(j)] = i
        rank[i] = j - bounds[ag]
        fill[ag] = j + 1
    return order, rank, bounds


@njit(cache=True, nogil=True)
def prefetch_flags(
    lines: np.ndarray, bounds: np.ndarray, history: np.ndarray, history_n: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """The prefetch rule over requests grouped by agent (``bounds``): a request is prefetched when the line just
    before or after it is among its agent's last ``history.shape[1]`` requests (``history``: each agent's last
    lines, oldest first, ``history_n`` of them valid; both updated in place)."""
    streams = PREFETCH_STREAMS
    out = np.zeros(len(lines), dtype=np.bool_)
    for a in range(len(bounds) - 1):
        lo, hi = bounds[a], bounds[a + 1]
        if hi == lo:
            continue
        hn = min(history_n[a], streams)
        # the first requests of the group look back into the history
        head = min(hi, lo + streams)
        for j in range(lo, head):
            x = np.int64(lines[j])
            pf = False
            for s in range(1, streams + 1):
                k = j - s
                if k >= lo:
                    d = x - np.int64(lines[k])
                elif k - lo + hn >= 0:
                    d = x - history[a, streams + (k - lo)]
                else:
                    continue
                if d == 1 or d == -1:
                    pf = True
            out[j] = pf
        # the rest only within the group: a fixed trip count, branch-free, so the compiler vectorises it
        # (unsigned indices: no negative-index wraparound)
        for j in range(head, hi):
            ju = np.uint64(j)
            x = np.int64(lines[ju])
            pf = False
            for s in range(1, PREFETCH_STREAMS + 1):
                d = x - np.int64(lines[np.uint64(j - s)])
                pf |= (d == 1) | (d == -1)
            out[ju] = pf
        # the history keeps the last ``streams`` lines, oldest first
        n = hi - lo
        if n >= streams:
            for s in range(streams):
                history[a, s] = np.int64(lines[hi - streams + s])
        else:
            for s in range(streams - n):
                history[a, s] = history[a, s + n]
            for s in range(n):
                history[a, streams - n + s] = np.int64(lines[lo + s])
        history_n[a] = history_n[a] + n
    return out


@njit(cache=True, nogil=True)
def reuse_keys(lines: np.ndarray, shift: int) -> np.ndarray:  # pragma: no cover - compiled
    """``line << shift | index`` for each access: sorted, equal lines become neighbours in stream order."""
    key = np.empty(len(lines), dtype=np.uint64)
    s = np.uint64(shift)
    for i in range(len(lines)):
        key[i] = (np.uint64(lines[i]) << s) | np.uint64(i)
    return key


SORT_DIGIT_BITS = 11
"""Widest digit of :func:`sort_reuse_keys`' passes. Each pass scatters the keys to as many places as a digit has
values: on a million keys of 24 line bits two passes of 12 bits took 40 % longer than three of 8."""


@njit(cache=True, nogil=True)
def sort_reuse_keys(key: np.ndarray, shift: int, scratch: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Sort :func:`reuse_keys` (or :func:`reuse_keys_at`) in place; ``scratch``: room for ``len(key)`` keys.

    The low ``shift`` bits of each key are its index, increasing in the array's order, so a stable sort by the
    line bits alone gives what a sort of the whole keys gives. An LSD radix sort over the lines' span (the largest
    less the smallest) does that in as few passes of :data:`SORT_DIGIT_BITS` bits as the span needs, after one
    pass that counts every digit: 4-8 ns a key where numpy's sort took 42-69 on 0.2-2 M keys of 20-24 line bits."""
    n = len(key)
    if n < 2:
        return key
    s = np.uint64(shift)
    lo = key[0] >> s
    hi = lo
    for i in range(1, n):
        v = key[i] >> s
        lo = min(lo, v)
        hi = max(hi, v)
    span = hi - lo
    bits = 0
    while span >> np.uint64(bits):
        bits += 1
    if bits == 0:  # one line: already in order
        return key
    passes = (bits + SORT_DIGIT_BITS - 1) // SORT_DIGIT_BITS
    width = (bits + passes - 1) // passes
    mask = np.uint64((1 << width) - 1)
    counts = np.zeros((passes, 1 << width), dtype=np.int64)
    for i in range(n):
        v = (key[i] >> s) - lo
        for p in range(passes):
            counts[p, (v >> np.uint64(p * width)) & mask] += 1
    src = key
    dst = scratch[:n]
    for p in range(passes):
        total = 0
        for d in range(1 << width):
            c = counts[p, d]
            counts[p, d] = total
            total += c
        at = np.uint64(p * width)
        for i in range(n):
            k = src[i]
            d = (((k >> s) - lo) >> at) & mask
            dst[counts[p, d]] = k
            counts[p, d] += 1
        src, dst = dst, src
    if passes % 2 == 1:
        key[:] = src
    return key


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def reuse_candidates(
    lines: np.ndarray, log2_buckets: int, limit: int, flags: np.ndarray, hits: np.ndarray
) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """Positions of the accesses whose line may occur more than once in ``lines``, in order: every access of
    every line that does (and some others, whose line's hash collides with such a line's), from ``2**log2_buckets``
    buckets over a multiplicative hash of the line: those met at least twice. (empty, False) when more than
    ``limit`` accesses meet a bucket seen before: then most of them are reuses and a filter saves nothing.
    ``flags``: room for two bitmaps of a bit per bucket (cleared here; a fresh array if it is too short),
    ``hits``: for a bucket per access (likewise), so that a caller filtering window after window reuses the same
    pages.

    One pass marks the buckets seen in one bitmap and lists the buckets met again; a second bitmap, of the
    buckets listed, then picks the accesses. Two bits per bucket in one word (seen, seen again) took twice as
    long: a bit a bucket keeps each pass's bitmap half the size, and only the repeats (a tenth of a stream that
    misses the caches) write the second."""
    words = max(1, (1 << log2_buckets) >> 6)
    if len(flags) < 2 * words:
        flags = np.zeros(2 * words, dtype=np.uint64)
    if len(hits) < len(lines):
        hits = np.empty(len(lines), dtype=np.uint32)
    seen = flags[:words]
    again = flags[words : 2 * words]
    seen[:] = 0
    down = np.uint64(64 - log2_buckets)
    one = np.uint64(1)
    n_again = 0
    for i in range(len(lines)):
        h = (np.uint64(lines[i]) * _GOLDEN) >> down
        w = h >> np.uint64(6)
        b = one << (h & np.uint64(63))
        f = seen[w]
        hits[n_again] = np.uint32(h)  # kept only where the bucket was seen before (branch-free)
        n_again += (f & b) != 0
        seen[w] = f | b
    if n_again > limit:
        return np.empty(0, dtype=np.int64), False
    again[:] = 0
    for k in range(n_again):
        h = np.uint64(hits[k])
        again[h >> np.uint64(6)] |= one << (h & np.uint64(63))
    out = np.empty(len(lines), dtype=np.int64)
    n = 0
    for i in range(len(lines)):
        h = (np.uint64(lines[i]) * _GOLDEN) >> down
        out[n] = i
        n += (again[h >> np.uint64(6)] >> (h & np.uint64(63))) & one
    return out[:n].copy(), True


@njit(cache=True, nogil=True)
def reuse_keys_at(
    lines: np.ndarray, agent: np.ndarray, rank: np.ndarray, at: np.ndarray, shift: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`reuse_keys` of the accesses at positions ``at`` only, with the access's index *in* ``at`` as the
    low bits (``line << shift | k``: the same order as by position, ``at`` being increasing), and their agents
    and ranks gathered in that order: :func:`reuse_pairs` then reads a pair's agents and ranks from these short
    arrays instead of jumping about the whole window's."""
    n = len(at)
    key = np.empty(n, dtype=np.uint64)
    agent_at = np.empty(n, dtype=agent.dtype)
    rank_at = np.empty(n, dtype=rank.dtype)
    s = np.uint64(shift)
    for k in range(n):
        i = np.uint64(at[k])
        key[k] = (np.uint64(lines[i]) << s) | np.uint64(k)
        agent_at[k] = agent[i]
        rank_at[k] = rank[i]
    return key, agent_at, rank_at


@njit(cache=True, nogil=True)
def reuse_pairs(
    key: np.ndarray, shift: int, at: np.ndarray, agent: np.ndarray, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """From sorted :func:`reuse_keys` (``at`` empty: the low bits are window positions, ``agent`` and ``rank``
    the window's) or :func:`reuse_keys_at` (the low bits index ``at`` and its gathered ``agent`` and ``rank``):
    each access whose line occurred before (``cur``) and that previous occurrence (``prv``), in key order, with
    their agents, the gap between them in the stream and in their ranks (as float64), and whether each pair
    continues the one before (its ``prv`` is that pair's ``cur``: the same line)."""
    low = np.uint64((1 << shift) - 1)
    n = 0
    for i in range(1, len(key)):
        if (key[i] ^ key[i - 1]) <= low:
            n += 1
    cur = np.empty(n, dtype=np.int64)
    prv = np.empty(n, dtype=np.int64)
    a_cur = np.empty(n, dtype=agent.dtype)
    a_prv = np.empty(n, dtype=agent.dtype)
    gap = np.empty(n, dtype=np.float64)
    own_gap = np.empty(n, dtype=np.float64)
    cont = np.empty(n, dtype=np.bool_)
    compact = len(at) > 0
    n = 0
    last = -2  # the key index of the last pair's ``cur``
    for i in range(1, len(key)):
        if (key[i] ^ key[i - 1]) <= low:
            cont[n] = last == i - 1
            last = i
            kc = key[i] & low
            kp = key[i - 1] & low
            c = np.int64(at[kc]) if compact else np.int64(kc)
            p = np.int64(at[kp]) if compact else np.int64(kp)
            cur[n] = c
            prv[n] = p
            a_cur[n] = agent[kc]
            a_prv[n] = agent[kp]
            gap[n] = np.float64(c - p)
            own_gap[n] = np.float64(np.int64(rank[kc]) - np.int64(rank[kp]))
            n += 1
    return cur, prv, a_cur, a_prv, gap, own_gap, cont


@njit(cache=True, nogil=True)
def window_arrays(
    tail_lines: np.ndarray,
    tail_agent: np.ndarray,
    tail_rank: np.ndarray,
    lines: np.ndarray,
    agent: np.ndarray,
    rank: np.ndarray,
    offset: np.ndarray,
    all_lines: np.ndarray,
    out_agent: np.ndarray,
    all_rank: np.ndarray,
    keep: int,
    total: np.ndarray,
) -> tuple[np.uint64, np.ndarray]:  # pragma: no cover - compiled
    """The estimate's window: the carried tail followed by the chunk, written into ``all_lines``, ``out_agent``
    (its dtype: narrower where there are few agents) and ``all_rank`` (the chunk's ``rank`` plus its agent's
    ``offset``, the tail's accesses of it), in one pass over the chunk where numpy concatenates three times and
    gathers once. Returns the largest line and the accesses per agent among the window's last ``keep`` (the
    next tail; ``total``: the window's accesses per agent)."""
    h = len(tail_lines)
    m = h + len(lines)
    kept = np.zeros(len(total), dtype=np.int64)
    top = np.uint64(0)
    for i in range(h):
        x = np.uint64(tail_lines[i])
        all_lines[i] = x
        top = max(top, x)
        out_agent[i] = tail_agent[i]
        all_rank[i] = tail_rank[i]
    for i in range(len(lines)):
        a = agent[i]
        j = np.uint64(h + i)
        x = np.uint64(lines[i])
        all_lines[j] = x
        top = max(top, x)
        out_agent[j] = a
        all_rank[j] = rank[i] + offset[np.uint64(a)]
    # the next tail's accesses per agent: the window's (``total``) less those before it, or counted in it,
    # whichever is shorter (a count per access is a chain through memory: about 1.5 ns each)
    if keep > m // 2:
        kept[:] = total
        for i in range(m - keep):
            kept[np.uint64(out_agent[i])] -= 1
    else:
        for i in range(m - keep, m):
            kept[np.uint64(out_agent[i])] += 1
    return top, kept


@njit(cache=True, nogil=True)
def asks_fit(
    lines: np.ndarray, at: np.ndarray, at_instance: np.ndarray, instance: int, extra: np.ndarray, sets: int, ways: int
) -> bool:  # pragma: no cover - compiled
    """Whether no set of a cache of ``sets`` x ``ways`` is asked for more than ``ways`` lines by ``instance``:
    the lines at the positions ``at`` whose ``at_instance`` it is, and those at ``extra`` (counted as often as
    they come). One pass that stops at the first set over its ways, where the alternative gathers the lines
    and counts every set."""
    count = np.zeros(max(sets, 1), dtype=np.int32)
    s = np.uint64(max(sets, 1))
    for k in range(len(at)):
        if at_instance[k] == instance:
            j = np.uint64(lines[at[k]]) % s
            count[j] += 1
            if count[j] > ways:
                return False
    for k in range(len(extra)):
        j = np.uint64(lines[extra[k]]) % s
        count[j] += 1
        if count[j] > ways:
            return False
    return True


@njit(cache=True, nogil=True)
def set_counts(
    lines: np.ndarray, instance: np.ndarray, n_inst: int, sets: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per instance, how many of ``lines`` it has (``instance``: each line's) and the sum over its sets of the
    square of each set's count, as float64 (integers: any order of summing gives the same), and the table of
    counts itself (``instance * sets + set``, int32): one pass, where numpy builds, converts and squares a
    float64 table of every set."""
    per_set = np.zeros(n_inst * sets, dtype=np.int32)
    s = np.uint64(sets)
    for i in range(len(lines)):
        per_set[np.uint64(instance[i]) * s + np.uint64(lines[i]) % s] += 1
    total = np.zeros(n_inst)
    square = np.zeros(n_inst)
    for i in range(n_inst):
        t = np.int64(0)
        q = np.int64(0)
        for k in range(i * sets, (i + 1) * sets):
            c = np.int64(per_set[k])
            t += c
            q += c * c
        total[i] = t
        square[i] = q
    return total, square, per_set


@njit(cache=True, nogil=True)
def reuse_times(
    a_cur: np.ndarray,
    a_prv: np.ndarray,
    gap: np.ndarray,
    own_gap: np.ndarray,
    inst_of: np.ndarray,
    ratio: np.ndarray,
    share: np.ndarray,
    cur_slot: np.ndarray,
    cur_picked: np.ndarray,
    pick_rank: np.ndarray,
    pick_agent: np.ndarray,
    n_inst: int,
    cur: np.ndarray,
    prv: np.ndarray,
    cont: np.ndarray,
    rank: np.ndarray,
    write: np.ndarray,
    head: int,
    long_from: int,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
    np.ndarray, np.ndarray, np.ndarray,
]:  # pragma: no cover
    """One cache level's reuse times (see :func:`~numasim.engine.caches.estimate_levels`), in one pass over the
    reuses: which find their line in their own instance (``own``), their reuse times in the instance's own
    accesses (at least 1; the agent's own gap times its ``ratio`` for a reuse by the same agent, else the stream
    gap times the instance's ``share``) and instances, the instances' own reuses; the reuse-time sample (a picked
    access's own reuse time, else the censored ``rank x ratio`` since the window began), its censored flags and
    instances; the window positions of the accesses whose line another instance's write invalidated, and for each
    whether the instance had the line in the window (the write *took* it; else it is its first access), and for
    those taken the reuse time and instance they would have had without the write; those of
    the chunk's (from ``head``) own reuses whose own previous access is before ``long_from`` while the line's
    previous access is not (a long reuse the caller's count by the line's previous access misses).

    The pairs come in line order, each line's accesses in stream order (``cur`` / ``prv``: window positions;
    ``cont``: the pair continues the line of the one before; ``rank`` and ``write``: the window's, ``write``
    empty for none). While a line's accesses are all by
    one instance, a reuse is its immediate predecessor's. Once another instance touches the line, the reuse is
    the previous access *by the same instance* (lines read by several cores stay in each core's caches), unless
    an agent of another instance wrote the line since: a write invalidates every other instance's copy. The
    line's accesses so far are replayed into per-instance state then (most lines never need it)."""
    n = len(a_cur)
    own = np.empty(n, dtype=np.bool_)
    g = np.empty(n)
    inst = np.empty(n, dtype=np.int64)
    own_reuses = np.zeros(n_inst, dtype=np.int64)
    n_pick = len(pick_rank)
    sample = np.empty(n_pick)
    censored = np.ones(n_pick, dtype=np.bool_)
    invalid = np.empty(n, dtype=np.int64)
    n_invalid = 0
    long_cur = np.empty(n, dtype=np.int64)
    n_long = 0
    taken = np.empty(n, dtype=np.bool_)
    taken_gap = np.zeros(n)
    taken_inst = np.zeros(n, dtype=np.int64)
    has_write = len(write) > 0
    # per-instance state of the current line, valid where ``run_of[i] == run`` (no clearing between lines)
    run_of = np.full(n_inst, -1, dtype=np.int64)
    last_pos = np.zeros(n_inst, dtype=np.int64)
    last_agent = np.zeros(n_inst, dtype=np.int64)
    run = -1
    start = 0
    shared = False
    w_pos = np.int64(-1)  # the line's latest write, its instance, and the latest write by any other instance
    w_inst = np.int64(-1)
    w_other = np.int64(-1)
    k = 0
    for j in range(n):
        ac = np.uint64(a_cur[j])
        ap = np.uint64(a_prv[j])
        ic = inst_of[ac]
        x = 0.0
        if not cont[j]:
            shared = False  # a new line: its pairs start here
            start = j
        if not shared and ic == inst_of[ap]:
            own[j] = True
            x = own_gap[j] * ratio[ac] if ac == ap else gap[j] * share[np.uint64(ic)]
        else:
            c = np.int64(cur[j])
            if not shared and j == start and (j + 1 == n or not cont[j + 1]):
                # the line's two accesses, by two instances (most shared pairs of a random walk): no state needed
                own[j] = False
                if has_write and write[prv[j]]:
                    invalid[n_invalid] = c
                    taken[n_invalid] = False  # (its first access to the line in the window)
                    n_invalid += 1
                continue
            if not shared:  # another instance's first access to this line: replay the line's accesses so far
                shared = True
                run = j
                w_pos = np.int64(-1)
                w_inst = np.int64(-1)
                w_other = np.int64(-1)
                q = start
                for r in range(q - 1, j):  # (agents from the pairs' own arrays: no gather from the window's)
                    p = np.int64(prv[q]) if r < q else np.int64(cur[r])
                    ar = np.int64(a_prv[q]) if r < q else np.int64(a_cur[r])
                    i = inst_of[np.uint64(ar)]
                    run_of[i] = run
                    last_pos[i] = p
                    last_agent[i] = ar
                    if has_write and write[p]:
                        if i != w_inst:
                            w_other = w_pos
                            w_inst = i
                        w_pos = p
            foreign = w_pos if w_inst != ic else w_other
            o = False
            if run_of[ic] == run:
                pi = last_pos[ic]
                o = foreign < pi
                if o and c >= head and pi < long_from <= np.int64(prv[j]):
                    long_cur[n_long] = c
                    n_long += 1
                if o:
                    if np.uint64(last_agent[ic]) == ac:
                        x = np.float64(np.int64(rank[c]) - np.int64(rank[pi])) * ratio[ac]
                    else:
                        x = np.float64(c - pi) * share[np.uint64(ic)]
            if not o and foreign >= 0:
                invalid[n_invalid] = c
                taken[n_invalid] = run_of[ic] == run  # it had the line in the window: the write took it
                if taken[n_invalid]:  # the reuse time it would have had, had the write not taken the line
                    pi = last_pos[ic]
                    if np.uint64(last_agent[ic]) == ac:
                        y = np.float64(np.int64(rank[c]) - np.int64(rank[pi])) * ratio[ac]
                    else:
                        y = np.float64(c - pi) * share[np.uint64(ic)]
                    taken_gap[n_invalid] = max(y, 1.0)
                    taken_inst[n_invalid] = ic
                    if cur_picked[j]:  # the line's distance in the instance's stack is as long as if it were there
                        sl = np.uint64(cur_slot[j])
                        sample[sl] = max(y, 1.0)
                        censored[sl] = False
                n_invalid += 1
            own[j] = o
            run_of[ic] = run
            last_pos[ic] = c
            last_agent[ic] = np.int64(ac)
            if has_write and write[c]:
                if ic != w_inst:
                    w_other = w_pos
                    w_inst = ic
                w_pos = c
            if not o:
                continue
        x = max(x, 1.0)
        g[k] = x
        inst[k] = ic
        own_reuses[np.uint64(ic)] += 1
        if cur_picked[j]:
            sl = np.uint64(cur_slot[j])
            sample[sl] = x
            censored[sl] = False
        k += 1
    sample_inst = np.empty(n_pick, dtype=np.int64)
    for i in range(n_pick):
        a = np.uint64(pick_agent[i])
        sample_inst[i] = inst_of[a]
        if censored[i]:
            sample[i] = pick_rank[i] * ratio[a]
    t = taken[:n_invalid].copy()
    return (own, g[:k].copy(), inst[:k].copy(), own_reuses, sample, censored, sample_inst, invalid[:n_invalid].copy(),
            t, taken_gap[:n_invalid][t], taken_inst[:n_invalid][t], long_cur[:n_long].copy())


@njit(cache=True, nogil=True)
def interpolate_distance(
    x: np.ndarray,
    log2_x: np.ndarray,
    instance: np.ndarray,
    edges: np.ndarray,
    width: np.ndarray,
    d_lo: np.ndarray,
    surv: np.ndarray,
    bins_per_octave: int,
) -> np.ndarray:  # pragma: no cover - compiled
    """The per-reuse end of :func:`~numasim.engine.caches._stack_distance`: each ``x`` (a reuse time less one;
    ``log2_x`` its ``log2(max(x, 1))``) in its histogram bin, the distance at the bin's start ``d_lo`` plus the
    survival ``surv`` over the part of the bin below ``x`` (``x`` itself below 1), in one pass where numpy makes a
    temporary per operation and gathers twice from the (instance, bin) tables."""
    nb = len(width)
    out = np.empty(len(x))
    for i in range(len(x)):
        xi = x[i]
        if xi < 1.0:
            out[i] = max(xi, 0.0)
            continue
        b = np.int64(log2_x[i] * bins_per_octave)
        b = np.int64(0) if b < 0 else np.int64(nb - 1) if b > nb - 1 else b
        inside = min(max(xi - edges[b], 0.0), width[b])
        k = np.int64(instance[i])
        out[i] = d_lo[k, b] + inside * surv[k, b]
    return out


@njit(cache=True, nogil=True)
def level_hits(
    stack: np.ndarray,
    own: np.ndarray,
    a_cur: np.ndarray,
    cur: np.ndarray,
    inst_of: np.ndarray,
    bound: np.ndarray,
    cap: np.ndarray,
    level: np.ndarray,
    lv: int,
    lines: np.ndarray,
    per_set: np.ndarray,
    totals: np.ndarray,
    first_inst: int,
    sets: int,
    ways: int,
) -> None:  # pragma: no cover - compiled
    """Each own reuse's stack distance (``stack``, one per ``own`` reuse) capped at its instance's ``bound``
    (in place), and the reuses that hit set to level ``lv``: below their instance's capacity ``cap``, or, where
    every distinct line of the window was counted in its set (``per_set``, from :func:`set_counts`, not empty;
    ``totals``: each instance's lines), against their own set's occupancy: a reuse of a line whose set holds
    ``n`` of its instance's ``N`` lines, after ``d`` other distinct lines (at most ``N - 1``), hits while
    ``d n / N < ways``, the set's share of the lines in between, its own line counted as the level-wide
    estimate counts it (``(sum n)^2 / sum n^2`` sets: a line's set weighted by its lines). A cyclic walk of the
    ``N`` lines (``d = N - 1``) then hits in exactly the sets holding at most ``ways`` of them, as exact mode's
    sets do; a working set whose sets hold at most their ways hits always, as LRU does; an even spread of lines
    (``n = N / sets``) gives the level's capacity. (``d (n - 1) / (N - 1)``, the expected count of its set's other
    lines, hit random loads 3-11 % more often than LRU at 1.25x an L1 or L2: a threshold on the mean ignores the
    count's spread, which counting the line itself offsets.)"""
    by_set = len(per_set) > 0
    k = 0
    s = np.uint64(max(sets, 1))
    for j in range(len(own)):
        if own[j]:
            ic = np.uint64(inst_of[np.uint64(a_cur[j])])
            d = min(stack[k], bound[ic])
            stack[k] = d
            if by_set:
                p = np.uint64(ic - first_inst)
                n = per_set[p * s + np.uint64(lines[np.uint64(cur[j])]) % s]
                hit = n > 0 and min(d, totals[p] - 1.0) * n < ways * totals[p]
            else:
                hit = d < cap[ic]
            if hit:
                level[np.uint64(cur[j])] = lv
            k += 1


@njit(cache=True, nogil=True)
def new_in_line_order(key: np.ndarray, shift: int, head: int) -> np.ndarray:  # pragma: no cover - compiled
    """From sorted :func:`reuse_keys`: the positions ``>= head`` that are their line's first access in the
    window, in line order (the first of each run of equal lines, where it lies at or after ``head``)."""
    low = np.uint64((1 << shift) - 1)
    out = np.empty(max(len(key) - head, 0), dtype=np.int64)
    n = 0
    for i in range(len(key)):
        k = key[i]
        if i == 0 or (k ^ key[i - 1]) > low:
            at = np.int64(k & low)
            if at >= head:
                out[n] = at
                n += 1
    return out[:n]


@njit(cache=True, nogil=True)
def merge_known(known: np.ndarray, asked: np.ndarray, cap: float) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover
    """Two sorted arrays of distinct lines: which of ``asked`` are in ``known``, the size of their union, and
    the sorted union itself when that size is at most ``cap`` (else an empty array): two linear merges where
    a binary search per line and a sort of the concatenation jump about memory."""
    again = np.zeros(len(asked), dtype=np.bool_)
    j = 0
    nk = len(known)
    n_new = 0
    for i in range(len(asked)):
        x = asked[i]
        while j < nk and known[j] < x:
            j += 1
        if j < nk and known[j] == x:
            again[i] = True
        else:
            n_new += 1
    size = nk + n_new
    if size > cap:
        return again, known[:0].copy(), size
    union = np.empty(size, dtype=known.dtype)
    i = j = k = 0
    while i < len(asked) or j < nk:
        if i < len(asked) and again[i]:
            i += 1
        elif j >= nk or (i < len(asked) and asked[i] < known[j]):
            union[k] = asked[i]
            i += 1
            k += 1
        else:
            union[k] = known[j]
            j += 1
            k += 1
    return again, union, size


@njit(cache=True, nogil=True)
def thread_agents(tid: np.ndarray, dense: np.ndarray) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """The agent of each access's thread id through the table ``dense`` (id -> agent, -1: none), in one pass
    (a check pass and a gather in numpy): (agents, False at the first id outside the table or without one)."""
    n = len(tid)
    out = np.empty(n, dtype=np.int64)
    m = len(dense)
    for i in range(n):
        t = np.int64(tid[i])
        if t < 0 or t >= m or dense[t] < 0:
            return out, False
        out[i] = dense[np.uint64(t)]
    return out, True


@njit(cache=True, nogil=True)
def first_lines(addresses: np.ndarray, size_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover
    """Each access's first line and its size as int32, at least 1 byte, and whether any access crosses into a
    second line: one pass where numpy makes a temporary per operation."""
    n = len(addresses)
    line = np.empty(n, dtype=np.uint64)
    size = np.empty(n, dtype=np.int32)
    crosses = False
    for i in range(n):
        a = addresses[i]
        s = max(np.int32(size_bytes[i]), np.int32(1))
        size[i] = s
        line[i] = a >> np.uint64(6)
        if np.int64(a & np.uint64(63)) + s > 64:
            crosses = True
    return line, size, crosses


_GATHER_BLOCK = 1 << 14
"""Stream positions :func:`gather_by_agent` takes at a time: the block's inputs (about 24 bytes a request) stay in
a 1 MiB second-level cache while every agent gathers from it (16 k and 32 k were fastest; 64 k slower)."""


@njit(cache=True, nogil=True)
def gather_by_agent(
    order: np.ndarray,
    bounds: np.ndarray,
    class_base: np.ndarray,
    lines: np.ndarray,
    target: np.ndarray,
    is_write: np.ndarray,
    size: np.ndarray,
    compute: np.ndarray,
    level: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """The requests grouped by agent (``order``, ``bounds`` from :func:`group_by_agent`): lines, targets,
    writes, sizes, compute times and levels gathered in one pass over ``order`` (numpy reads it once per array),
    and each request's route class ``class_base[agent] + 2 * target + is_write``. ``level`` and ``class_base``
    may be empty (none wanted): their outputs are empty too.

    The gather goes a block of :data:`_GATHER_BLOCK` stream positions at a time, every agent taking its requests
    from the block in turn: agent by agent over the whole chunk, threads interleaved in the stream made each agent
    read a cache line of every input for each of its requests, and the inputs were read from memory once per agent
    (9.3 -> 4.6 ms per million requests of 8 interleaved threads, on a host with 2 MiB of second-level cache)."""
    n = len(order)
    ln = np.empty(n, dtype=lines.dtype)
    tg = np.empty(n, dtype=target.dtype)
    wr = np.empty(n, dtype=np.bool_)
    sz = np.empty(n, dtype=size.dtype)
    cp = np.empty(n, dtype=compute.dtype)
    has_level = len(level) > 0
    lv = np.empty(n if has_level else 0, dtype=level.dtype)
    has_rc = len(class_base) > 0
    rc = np.empty(n if has_rc else 0, dtype=np.int32)  # (int32: a window reads it three times over)
    n_agents = len(bounds) - 1
    at = bounds[:n_agents].copy()  # each agent's next request (its requests' stream positions increase)
    for block_end in range(_GATHER_BLOCK, n + _GATHER_BLOCK, _GATHER_BLOCK):
        for a in range(n_agents):
            base = class_base[a] if has_rc else 0
            jj, end = at[a], bounds[a + 1]
            while jj < end and order[np.uint64(jj)] < block_end:
                j = np.uint64(jj)  # unsigned indices: no negative-index wraparound
                i = np.uint64(order[j])
                ln[j] = lines[i]
                t = target[i]
                tg[j] = t
                w = is_write[i]
                wr[j] = w
                sz[j] = size[i]
                cp[j] = compute[i]
                if has_level:
                    lv[j] = level[i]
                if has_rc:
                    rc[j] = np.int32(base + np.int64(t) + np.int64(t) + np.int64(w))
                jj += 1
            at[a] = jj
    return ln, tg, wr, sz, cp, lv, rc


@njit(cache=True, nogil=True)
def compute_by_agent(agent: np.ndarray, compute: np.ndarray, n_agents: int) -> tuple[np.ndarray, int]:  # pragma: no cover
    """Each agent's compute time in the chunk (float64 sums in stream order, as ``np.bincount`` adds its
    weights) and the first access whose compute time is not a time >= 0 (NaN or negative; -1: none): one pass
    where numpy makes three."""
    total = np.zeros(n_agents)
    for i in range(len(agent)):
        x = np.float64(compute[i])
        if not x >= 0:
            return total, i
        total[np.uint64(agent[i])] += x
    return total, -1


@njit(cache=True, nogil=True)
def node_targets(node_index: np.ndarray, node: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``node_index[node]`` (negative node ids wrap around as in numpy): compiled, where numpy first casts the
    int16 node ids to a fresh intp array."""
    out = np.empty(len(node), dtype=node_index.dtype)
    for i in range(len(node)):
        out[i] = node_index[node[i]]
    return out


@njit(cache=True, nogil=True)
def c2c_holders(
    cur: np.ndarray,
    prv: np.ndarray,
    cont: np.ndarray,
    a_cur: np.ndarray,
    a_prv: np.ndarray,
    core_inst: np.ndarray,
    llc_inst: np.ndarray,
    write: np.ndarray,
    head: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The chunk's accesses (window positions from ``head``) to a line another cache holds *modified*: its last
    write was by another core (``core_inst``: each agent's first-level instance) and no other core touched it
    since; or, after a core of the writer's last-level instance (``llc_inst``) read it there, that instance still
    holds it modified and the access comes from another. Returns their positions, the holding agent and its (or
    its instance's) last touch of the line (whether the line is still there is the caller's to decide). Pairs as
    :func:`reuse_times` takes them; ``write``: the window's write flags."""
    n = len(cur)
    pos_out = np.empty(n, dtype=np.int64)
    holder_out = np.empty(n, dtype=np.int64)
    last_out = np.empty(n, dtype=np.int64)
    found = 0
    d_inst = np.int64(-1)  # the core instance holding the current line modified, its agent, its last touch
    d_agent = np.int64(-1)
    d_pos = np.int64(-1)
    l_inst = np.int64(-1)  # the last-level instance holding it modified, an agent of it, its last touch there
    l_agent = np.int64(-1)
    l_pos = np.int64(-1)
    for j in range(n):
        for step in range(2):
            if step == 0:
                if cont[j]:
                    continue
                d_inst = np.int64(-1)  # a new line: its first access in the window
                l_inst = np.int64(-1)
                pos = np.int64(prv[j])
                ag = np.int64(a_prv[j])
            else:
                pos = np.int64(cur[j])
                ag = np.int64(a_cur[j])
            i = core_inst[ag]
            llc = llc_inst[ag]
            holder = np.int64(-1)
            if d_inst >= 0 and d_inst != i:
                holder = d_agent
                last = d_pos
                d_inst = np.int64(-1)  # read: now shared; written: the new writer's below
                if llc_inst[d_agent] != llc:
                    l_inst = np.int64(-1)  # across last-level instances: written back, shared by both
            elif d_inst < 0 and l_inst >= 0 and l_inst != llc:
                holder = l_agent
                last = l_pos
                l_inst = np.int64(-1)
            if holder >= 0 and pos >= head:
                pos_out[found] = pos
                holder_out[found] = holder
                last_out[found] = last
                found += 1
            if write[pos]:
                d_inst = i
                d_agent = ag
                d_pos = pos
                l_inst = llc
            elif d_inst == i:
                d_pos = pos
            if l_inst == llc:
                l_agent = ag
                l_pos = pos
    return pos_out[:found].copy(), holder_out[:found].copy(), last_out[:found].copy()


@njit(cache=True, nogil=True)
def write_backs(
    cur: np.ndarray, prv: np.ndarray, owner: np.ndarray, write: np.ndarray, level: np.ndarray, n_levels: int, head: int
) -> np.ndarray:  # pragma: no cover - compiled
    """Which of the window's accesses from ``head`` on are writes that hit a line clean in their caches (its
    write-back is then owed; a write miss pays for its own). ``owner``: each window access's last-level cache
    instance. A line is dirty in an instance's caches after a write of one of its cores (or threads), until an
    access of it misses (it came back from memory: dirty only if that access writes); an access whose previous
    access of the line (``prv`` of the reuse pair ending at it) was another instance's, or that has none in the
    window, finds it clean. Accesses of the same instance keep it dirty: threads of one cpu share its caches, and
    a core that reads a line another core of its last-level instance wrote leaves it dirty there (exact mode's
    dirty ways do the same). ``level``: each window access's level (``n_levels``: memory)."""
    m = len(level)
    prev = np.full(m, -1, dtype=np.int64)
    for k in range(len(cur)):
        prev[np.uint64(cur[k])] = prv[k]
    dirty = np.zeros(m, dtype=np.bool_)
    owed = np.zeros(m - head, dtype=np.bool_)
    for i in range(m):
        w = write[i]
        if level[i] >= n_levels:
            dirty[i] = w
            continue
        p = prev[i]
        was = p >= 0 and owner[p] == owner[i] and dirty[p]
        if w and not was and i >= head:
            owed[i - head] = True
        dirty[i] = was or w
    return owed
