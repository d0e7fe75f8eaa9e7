"""Compiled passes of the :class:`~numasim.engine.stream.Feeder` over one chunk (see :mod:`stream` for the rules).

Each is one pass over the chunk where numpy needs several (a gather, a sort by agent, a comparison per lag of
the prefetch rule): the feeder runs on its own thread, and these release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["gather_blocks", "group_by_agent", "lookup_nodes"]


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
        r = np.searchsorted(run_starts, page, side="right") - 1
        if r < 0 or page >= run_ends[r]:
            return out, i
        out[i] = flat[run_offsets[r] + np.int64(page - run_starts[r])]
    return out, -1


@njit(cache=True, nogil=True)
def group_by_agent(agent: np.ndarray, n_agents: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A stable counting sort by agent: (order, each access's rank among its agent's accesses, group bounds)."""
    n = len(agent)
    bounds = np.zeros(n_agents + 1, dtype=np.int64)
    for i in range(n):
        bounds[agent[i] + 1] += 1
    for a in range(n_agents):
        bounds[a + 1] += bounds[a]
    fill = bounds[:n_agents].copy()
    order = np.empty(n, dtype=np.int64)
    rank = np.empty(n, dtype=np.int32)
    for i in range(n):
        a = agent[i]
        j = fill[a]
        order[j] = i
        rank[i] = j - bounds[a]
        fill[a] = j + 1
    return order, rank, bounds


@njit(cache=True, nogil=True)
def gather_blocks(
    order: np.ndarray,
    bounds: np.ndarray,
    lines: np.ndarray,
    target: np.ndarray,
    is_write: np.ndarray,
    size: np.ndarray,
    compute: np.ndarray,
    level: np.ndarray,
    class_base: np.ndarray,
    history: np.ndarray,
    history_n: np.ndarray,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:  # pragma: no cover - compiled
    """The chunk's requests grouped by agent (``order``, ``bounds`` from :func:`group_by_agent`), with the
    prefetch rule applied against each agent's last ``history.shape[1]`` lines (updated in place), and route
    classes when ``class_base`` is given (empty: not wanted). ``level`` empty: no levels."""
    n = len(order)
    streams = history.shape[1]
    line_o = np.empty(n, dtype=lines.dtype)
    target_o = np.empty(n, dtype=target.dtype)
    write_o = np.empty(n, dtype=is_write.dtype)
    size_o = np.empty(n, dtype=size.dtype)
    compute_o = np.empty(n, dtype=compute.dtype)
    pf_o = np.zeros(n, dtype=np.bool_)
    has_level = len(level) > 0
    has_rc = len(class_base) > 0
    level_o = np.empty(n if has_level else 0, dtype=level.dtype)
    rc_o = np.empty(n if has_rc else 0, dtype=np.int64)
    for a in range(len(bounds) - 1):
        h = history[a]
        hn = history_n[a]  # lines seen so far (the ring holds the last ``streams`` of them)
        base = class_base[a] if has_rc else 0
        for j in range(bounds[a], bounds[a + 1]):
            i = order[j]
            ln = lines[i]
            line_o[j] = ln
            target_o[j] = target[i]
            write_o[j] = is_write[i]
            size_o[j] = size[i]
            compute_o[j] = compute[i]
            if has_level:
                level_o[j] = level[i]
            if has_rc:
                rc_o[j] = base + np.int64(target[i]) * 2 + np.int64(is_write[i])
            # prefetched: the line just before or after it among the agent's last ``streams`` requests
            x = np.int64(ln)
            seen = hn if hn < streams else streams
            pf = False
            for s in range(seen):
                d = x - h[s]
                if d == 1 or d == -1:
                    pf = True
            pf_o[j] = pf
            h[hn % streams] = x
            hn += 1
        history_n[a] = hn
    return line_o, target_o, write_o, size_o, compute_o, pf_o, level_o, rc_o
