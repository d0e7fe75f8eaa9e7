"""The epoch design's floor: a minimal numba kernel doing only what epoch mode cannot avoid (issue 14).

Per access: page -> node lookup, route class, a FIFO update at each resource of the route (the controller and
every link, from the same :class:`~numasim.engine.memsys.MemorySystem` the engine builds), issue limited by the
thread's outstanding-miss slots, and time-ordered dispatch across threads (the thread with the earliest next
issue goes next). No caches, no prefetching, no loaded-latency curve, no statistics beyond a latency sum.

It is a yardstick for cpu time, not a model: its mean latency is compared with the engine's only as a sanity
check that it does comparable work on the same queues (see ``benchmarks/README.md``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from numasim.engine.memsys import MemorySystem

__all__ = ["floor_run", "cache_floor_run"]


@nb.njit(cache=True, inline="always")
def _by_thread(thread: np.ndarray, n_thr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each thread's accesses in program order, as CSR by a counting sort (O(n), stable; int32 positions: half
    the memory traffic of int64 on a 16 M stream): bounds ``ptr``, positions ``order``, cursors ``pos``."""
    n = thread.shape[0]
    ptr = np.zeros(n_thr + 1, np.int64)
    for i in range(n):
        ptr[thread[i] + 1] += 1
    for t in range(n_thr):
        ptr[t + 1] += ptr[t]
    order = np.empty(n, np.int32)
    fill = ptr[:-1].copy()
    for i in range(n):
        order[fill[thread[i]]] = i
        fill[thread[i]] += 1
    return ptr, order, ptr[:-1].copy()


@nb.njit(cache=True, inline="always")
def _slots(mlp: np.ndarray, ptr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Completion times of each thread's in-flight misses (slots beyond a thread's MLP never free), their width,
    and each thread's earliest next issue (infinity: its accesses are done)."""
    n_thr = mlp.shape[0]
    max_mlp = 1
    for t in range(n_thr):
        max_mlp = max(max_mlp, mlp[t])
    ring = np.full((n_thr, max_mlp), np.inf)
    for t in range(n_thr):
        ring[t, : mlp[t]] = 0.0
    nxt = np.zeros(n_thr)
    for t in range(n_thr):
        if pos[t] == ptr[t + 1]:
            nxt[t] = np.inf
    return ring, max_mlp, nxt


@nb.njit(cache=True, inline="always")
def _earliest(values: np.ndarray) -> tuple[int, float]:
    """Index and value of the smallest entry (branch-free: which one is data)."""
    a = 0
    best = np.inf
    for t in range(values.shape[0]):
        x = values[t]
        a = t if x < best else a
        best = min(x, best)
    return a, best


@nb.njit(cache=True, inline="always")
def _through_route(
    issue: float, c: int, path_ptr: np.ndarray, path_res: np.ndarray, path_busy: np.ndarray, free_at: np.ndarray,
    base_ns: np.ndarray,
) -> float:
    """A miss of route class ``c`` issued at ``issue``: FIFO at each resource of its route, then its base
    latency; when it completes."""
    t_now = issue
    for e in range(path_ptr[c], path_ptr[c + 1]):
        r = path_res[e]
        t_now = max(t_now, free_at[r])
        free_at[r] = t_now + path_busy[e]
    return t_now + base_ns[c]


@nb.njit(cache=True)
def _floor(
    thread: np.ndarray,
    page_node: np.ndarray,
    address: np.ndarray,
    thread_init: np.ndarray,
    mlp: np.ndarray,
    n_nodes: int,
    base_ns: np.ndarray,
    path_ptr: np.ndarray,
    path_res: np.ndarray,
    path_busy: np.ndarray,
    n_res: int,
) -> tuple[float, float]:
    n = thread.shape[0]
    n_thr = thread_init.shape[0]
    ptr, order, pos = _by_thread(thread, n_thr)
    ring, max_mlp, nxt = _slots(mlp, ptr, pos)
    free_at = np.zeros(n_res)
    lat_sum = 0.0
    end = 0.0
    for _ in range(n):
        # time-ordered dispatch: the thread with the earliest next issue
        a, best = _earliest(nxt)
        i = order[pos[a]]
        pos[a] += 1
        # issue needs a free slot: the earliest-completing in-flight miss must be done (as the engine's sorted
        # in-flight set; freeing the oldest-issued instead slows remote-heavy threads by ~1.5x)
        h, hv = _earliest(ring[a])
        issue = max(best, hv)
        node = page_node[address[i] >> np.uint64(12)]
        c = (thread_init[a] * n_nodes + node) * 2
        # _through_route written out: called here it cost the yardstick ~12 ns per access (49 -> 62 ns)
        t_now = issue
        for e in range(path_ptr[c], path_ptr[c + 1]):
            r = path_res[e]
            t_now = max(t_now, free_at[r])
            free_at[r] = t_now + path_busy[e]
        done = t_now + base_ns[c]
        lat_sum += done - issue
        ring[a, h] = done
        nxt[a] = issue if pos[a] < ptr[a + 1] else np.inf
        end = max(end, done)
    return lat_sum / max(n, 1), end


def floor_run(
    ms: MemorySystem,
    thread: np.ndarray,
    address: np.ndarray,
    page_node: np.ndarray,
    thread_init: np.ndarray,
    mlp: np.ndarray,
) -> tuple[float, float]:
    """Mean memory latency (ns) and run time (ns) of loads through the floor kernel.

    Parameters
    ----------
    ms : MemorySystem
        From :func:`numasim.engine.memsys.build_memory_system` (the engine's queues).
    thread, address : ndarray
        Thread index (0..k-1) and byte address (uint64) of each access, in program order per thread.
    page_node : ndarray
        Node index of every 4 KiB page (narrowed to int8 here: the table then stays in the L2 cache).
    thread_init, mlp : ndarray
        Initiator (node index) and outstanding-miss slots of each thread (int64).
    """
    return _floor(*_memory_floor_args(ms, thread, address, page_node, thread_init, mlp))


def _memory_floor_args(
    ms: MemorySystem, thread: np.ndarray, address: np.ndarray, page_node: np.ndarray, thread_init: np.ndarray,
    mlp: np.ndarray,
) -> tuple:  # type: ignore[type-arg]
    """The memory floor's arguments in the kernels' dtypes (the page table narrowed to int8: it stays in L2)."""
    path_ptr, path_res, path_busy = ms.class_paths()
    return (
        np.asarray(thread, dtype=np.int32),
        np.asarray(page_node, dtype=np.int8),
        np.asarray(address, dtype=np.uint64),
        np.asarray(thread_init, dtype=np.int64),
        np.asarray(mlp, dtype=np.int64),
        ms.n_nodes,
        np.asarray(ms.class_base_latency_ns(), dtype=np.float64),
        np.asarray(path_ptr, dtype=np.int64),
        np.asarray(path_res, dtype=np.int64),
        np.asarray(path_busy, dtype=np.float64),
        len(ms.resources),
    )


@nb.njit(cache=True)
def _cache_floor(
    thread: np.ndarray,
    page_node: np.ndarray,
    address: np.ndarray,
    thread_init: np.ndarray,
    mlp: np.ndarray,
    n_nodes: int,
    base_ns: np.ndarray,
    path_ptr: np.ndarray,
    path_res: np.ndarray,
    path_busy: np.ndarray,
    n_res: int,
    inst: np.ndarray,
    level_sets: np.ndarray,
    level_ways: np.ndarray,
    level_off: np.ndarray,
    level_ns: np.ndarray,
    n_ways_total: int,
) -> tuple[float, float, int]:
    n = thread.shape[0]
    n_thr = thread_init.shape[0]
    n_lv = level_sets.shape[0]
    ptr, order, pos = _by_thread(thread, n_thr)
    ring, max_mlp, nxt = _slots(mlp, ptr, pos)
    free_at = np.zeros(n_res)
    # every cache instance's ways: the line held (-1 empty) and its last use (the LRU stamp)
    way_line = np.full(n_ways_total, -1, np.int64)
    way_used = np.zeros(n_ways_total, np.int64)
    lat_sum = 0.0
    end = 0.0
    misses = 0
    for step in range(n):
        a, best = _earliest(nxt)
        i = order[pos[a]]
        pos[a] += 1
        h, hv = _earliest(ring[a])
        issue = max(best, hv)
        line = np.int64(address[i] >> np.uint64(6))
        # set-associative LRU lookup, fastest level first; a miss fills the line in every level it missed
        hit_ns = -1.0
        for lv in range(n_lv):
            base = level_off[inst[lv, a]] + (line % level_sets[lv]) * level_ways[lv]
            victim = base
            oldest = way_used[base]
            found = -1
            for w in range(base, base + level_ways[lv]):
                if way_line[w] == line:
                    found = w
                u = way_used[w]
                victim = w if u < oldest else victim
                oldest = min(u, oldest)
            if found >= 0:
                way_used[found] = step + 1
                hit_ns = level_ns[lv]
                break
            way_line[victim] = line
            way_used[victim] = step + 1
        if hit_ns >= 0.0:
            done = issue + hit_ns
        else:
            misses += 1
            node = page_node[address[i] >> np.uint64(12)]
            c = (thread_init[a] * n_nodes + node) * 2
            done = _through_route(issue, c, path_ptr, path_res, path_busy, free_at, base_ns)
        lat_sum += done - issue
        ring[a, h] = done
        nxt[a] = issue if pos[a] < ptr[a + 1] else np.inf
        end = max(end, done)
    return lat_sum / max(n, 1), end, misses


def cache_floor_run(
    ms: MemorySystem,
    levels: list,  # type: ignore[type-arg]
    instance_of: list[list[int]],
    thread: np.ndarray,
    address: np.ndarray,
    page_node: np.ndarray,
    thread_init: np.ndarray,
    mlp: np.ndarray,
) -> tuple[float, float, int]:
    """The floor with caches: per access a set-associative LRU lookup at each level until one hits (the
    engine's :func:`~numasim.engine.caches.cache_levels` geometry), a miss going down the memory floor's path.
    Mean access latency (ns), run time (ns) and the count of memory misses.

    ``levels`` are :class:`~numasim.engine.caches.CacheLevelSpec` (fastest first); ``instance_of[lv][t]`` the
    cache instance (0..k-1 at that level) thread ``t`` uses. The rest as :func:`floor_run`.
    """
    n_thr = len(thread_init)
    inst = np.zeros((len(levels), n_thr), np.int64)
    offsets: list[int] = []
    total = 0
    for lv, level in enumerate(levels):
        first = len(offsets)
        for _ in range(max(instance_of[lv]) + 1):
            offsets.append(total)
            total += level.sets * level.associativity
        for t in range(n_thr):
            inst[lv, t] = first + instance_of[lv][t]
    return _cache_floor(
        *_memory_floor_args(ms, thread, address, page_node, thread_init, mlp),
        inst,
        np.array([lv.sets for lv in levels], np.int64),
        np.array([lv.associativity for lv in levels], np.int64),
        np.array(offsets, np.int64),
        np.array([lv.latency_ns for lv in levels], np.float64),
        total,
    )
