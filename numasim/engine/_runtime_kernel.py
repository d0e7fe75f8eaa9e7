"""Compiled passes of the run-time kernel interface over a window (see :mod:`runtime`): one pass each where numpy
needs several, since they run on every window of a run with a kernel on the clock."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["protected_rows", "reroute", "commit_window"]


@njit(cache=True, nogil=True)
def protected_rows(page: np.ndarray, protected: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Rows whose request is to a program page (``page >= 0``) whose protection bit is set."""
    n = 0
    for i in range(len(page)):
        p = page[i]
        if p >= 0 and protected[p]:
            n += 1
    out = np.empty(n, dtype=np.int64)
    n = 0
    for i in range(len(page)):
        p = page[i]
        if p >= 0 and protected[p]:
            out[n] = i
            n += 1
    return out


@njit(cache=True, nogil=True)
def reroute(
    ids: np.ndarray,
    lens: np.ndarray,
    page: np.ndarray,
    rc: np.ndarray,
    page_node: np.ndarray,
    node_index: np.ndarray,
    class_base: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """Each request's route class from its page's node now and its agent's initiator now
    (``class_base[agent] + 2 * node index + write``); requests without a program page keep theirs."""
    out = np.empty(len(rc), dtype=np.int64)
    row = 0
    for k in range(len(ids)):
        base = class_base[ids[k]]
        for _ in range(lens[k]):
            p = page[row]
            if p >= 0:
                out[row] = base + 2 * np.int64(node_index[page_node[p]]) + (rc[row] & 1)
            else:
                out[row] = rc[row]
            row += 1
    return out


@njit(cache=True, nogil=True)
def commit_window(
    lens: np.ndarray,
    n_commit: np.ndarray,
    seg_is_kernel: np.ndarray,
    rc: np.ndarray,
    page: np.ndarray,
    issue_ns: np.ndarray,
    last_access_ns: np.ndarray,
    copy_requests_rc: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """After a window: which rows were committed (the first ``n_commit[s]`` of each agent segment ``s``); each
    committed kernel row counted in ``copy_requests_rc`` by route class; each committed program page's last
    access time set (in row order: the last row of a page wins). Returns the committed mask."""
    n = len(rc)
    committed = np.zeros(n, dtype=np.bool_)
    row = 0
    for s in range(len(lens)):
        k = n_commit[s]
        kern = seg_is_kernel[s]
        for j in range(lens[s]):
            if j < k:
                committed[row] = True
                if kern:
                    copy_requests_rc[rc[row]] += 1
                p = page[row]
                if p >= 0:
                    last_access_ns[p] = issue_ns[row]
            row += 1
    return committed
