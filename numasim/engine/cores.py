"""Which hardware threads share a physical core, and how many misses each may keep in flight.

A core's L1 fill buffers bound one thread's demand misses, but what a core as a whole keeps in flight is its L2
miss queue (Intel's superqueue, AMD's L2 miss buffers), shared by its hardware threads. Two busy threads on one
core split it: on both real mlc runs the project holds, the saturated point has 16-17 lines in flight per core
(20 cores of 2x E5-2680 v2, 56 of 2x Platinum 8180), not 10 per hardware thread.

What a core's prefetchers add is the core's too: busy hardware threads of one core reach no further together
than one of them alone with its prefetchers (:func:`thread_prefetch_lines`).

Which cpus are siblings: Linux numbers the first hardware thread of every core before any second one (x86
firmware enumerates them so, and ``/sys/devices/system/cpu/cpuN/topology/thread_siblings_list`` shows cpu ``c``
and ``c + cpus / threads_per_core`` together on the machines in ``shared/data``). So with the machine's cpus
sorted, position ``p`` is on core ``p mod (cpus / threads_per_core)``: an ASSUMPTION about the numbering, stated
in :func:`thread_mlp`'s docstring.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

from numasim.timing.model import CoreTiming

__all__ = ["CpuShares", "core_of_cpus", "cpu_sharers", "thread_mlp", "thread_prefetch_lines"]


def core_of_cpus(machine_cpus: Sequence[int], threads_per_core: int | None) -> dict[int, int]:
    """The physical core of each cpu under Linux's enumeration (first threads of all cores, then second ones).

    Without a ``threads_per_core`` above 1, or when the cpus do not divide evenly, every cpu is its own core.

    Examples
    --------
    >>> core_of_cpus(range(8), 2)
    {0: 0, 1: 1, 2: 2, 3: 3, 4: 0, 5: 1, 6: 2, 7: 3}
    """
    cpus = sorted(machine_cpus)
    tpc = threads_per_core or 1
    if tpc <= 1 or len(cpus) % tpc:
        return {c: p for p, c in enumerate(cpus)}
    cores = len(cpus) // tpc
    return {c: p % cores for p, c in enumerate(cpus)}


def _densest(groups: dict[frozenset[int], list[int]], free: set[int]) -> tuple[int, int, list[frozenset[int]]]:
    """The most crowded set of threads: (threads, cpus, their affinity groups) maximising threads per cpu among
    the groups (``groups``: each affinity, its free cpus only, and its threads), a set being crowded when its
    threads may run on no cpu outside it. Dinkelbach's iteration over minimum cuts: a flow from the groups to
    classes of interchangeable cpus, each class taking ``threads / cpus`` a cpu, leaves a group unserved exactly when
    a set of groups around it is denser (Hall's theorem); integer capacities (the ratio's terms)."""
    import networkx as nx

    classes: dict[frozenset[frozenset[int]], int] = Counter(
        frozenset(g for g in groups if c in g) for c in free
    )
    threads, cpus = sum(len(t) for t in groups.values()), len(free)
    chosen = list(groups)
    while True:
        net = nx.DiGraph()
        for g, members in groups.items():
            net.add_edge("s", ("g", g), capacity=len(members) * cpus)
        for cls, size in classes.items():
            net.add_edge(("c", cls), "t", capacity=threads * size)
            for g in cls:
                net.add_edge(("g", g), ("c", cls))  # no capacity: unbounded
        cut, (near, _) = nx.minimum_cut(net, "s", "t")
        if cut >= sum(len(m) for m in groups.values()) * cpus:
            return threads, cpus, chosen  # every group served: none is denser than ``threads / cpus``
        chosen = [node[1] for node in near if node != "s" and node[0] == "g"]
        threads = sum(len(groups[g]) for g in chosen)
        cpus = len(frozenset().union(*chosen))


def _fair_groups(
    thread_cpus: Sequence[int], allowed: Sequence[Sequence[int] | None] | None
) -> tuple[list[float], list[tuple[int, ...]]]:
    """Each thread's cpu sharers (:func:`cpu_sharers`) and the cpus its time is spread over: the cpus of its
    group where it shares them, else its own."""
    key = tuple(thread_cpus), None if allowed is None else tuple(tuple(a) if a else None for a in allowed)
    sharers, spread = _fair_groups_of(*key)  # (one engine input asks three times: shares, misses, prefetching)
    return list(sharers), list(spread)


@functools.lru_cache(maxsize=8)
def _fair_groups_of(
    thread_cpus: tuple[int, ...], allowed: tuple[tuple[int, ...] | None, ...] | None
) -> tuple[tuple[float, ...], tuple[tuple[int, ...], ...]]:
    n = len(thread_cpus)
    masks = [frozenset(allowed[k] or (c,)) if allowed is not None else frozenset((c,)) for k, c in enumerate(thread_cpus)]
    sharers = [1.0] * n
    spread: list[tuple[int, ...]] = [(c,) for c in thread_cpus]
    left = set(range(n))
    free: set[int] = set().union(*masks) if masks else set()
    while left:
        groups: dict[frozenset[int], list[int]] = {}
        for t in sorted(left):
            groups.setdefault(masks[t] & free, []).append(t)
        if all(len(g) == 1 and len(members) == 1 for g, members in groups.items()):
            break  # (the common case, each thread pinned alone on its cpu: no flow needed)
        threads, cpus, chosen = _densest(groups, free)
        if threads <= cpus:
            break  # every thread left finds a cpu of its own
        # each connected part of the set is as crowded as the whole (none can be denser), and its threads' time is
        # on its own cpus only (two cpus each crowded by its pinned threads stay apart)
        parts: list[list[frozenset[int]]] = []
        for g in chosen:
            touching = [p for p in parts if any(g & h for h in p)]
            parts = [p for p in parts if not any(g & h for h in p)] + [[g, *(h for p in touching for h in p)]]
        for part in parts:
            on = tuple(sorted(frozenset().union(*part)))
            for g in part:
                for t in groups[g]:
                    sharers[t] = threads / cpus
                    spread[t] = on
                    left.discard(t)
            free -= set(on)
    return tuple(sharers), tuple(spread)


def cpu_sharers(thread_cpus: Sequence[int], allowed: Sequence[Sequence[int] | None] | None = None) -> list[float]:
    """How many threads share each thread's cpu time: ``k`` for a thread that gets ``1 / k`` of a cpu (1: a cpu
    to itself).

    A cpu runs one thread at a time. Threads pinned to one cpu take turns on it (the scheduler's time slices),
    and over a run each progresses at ``1 / k`` of the pace it would have alone. Threads that may run on several
    cpus (``allowed``: each thread's affinity, None or empty for pinned to ``thread_cpus``) are spread over them by
    the scheduler's load balancing: over a run their cpus are shared max-min fairly, the most crowded group of
    threads first (``T`` threads whose cpus lie within ``C`` cpus, ``T > C``, each get ``C / T`` of a cpu; the
    cpus they use are then taken), whatever the affinities: nested, disjoint or overlapping (:func:`_densest`).

    The engines take that fluid share: each thread keeps the misses one thread of its cpu keeps in flight, but its
    compute time counts ``k`` times and each of its steps waits ``k`` times its miss before the slot is free again
    (the ``stretch`` of both timing loops), so that a cpu as a whole issues no faster than one thread; on a core's
    shared queue a group counts as one busy thread per cpu it shares (:func:`thread_mlp`,
    :func:`thread_prefetch_lines`). The misses each keeps are not divided: an integer share (10 misses over 3
    threads) would make them finish apart. (A thread's share stays what it was at the start after other threads
    finish; a thread's caches and node stay those of the cpu it starts on.)

    >>> cpu_sharers([0, 1, 1, 1, 2])
    [1.0, 3.0, 3.0, 3.0, 1.0]
    >>> cpu_sharers([0, 1, 2, 0], allowed=[(0, 1, 2)] * 4)   # 4 threads balanced over 3 cpus
    [1.3333333333333333, 1.3333333333333333, 1.3333333333333333, 1.3333333333333333]
    """
    return _fair_groups(thread_cpus, allowed)[0]


class CpuShares:
    """Each thread's cpu sharers (:func:`cpu_sharers`) while the threads run: when one ends, the threads still
    running share the cpus again among themselves, so a serial phase after an oversubscribed parallel one runs
    at a whole cpu, not at the share it had while the others ran.

    ``sharers[t]`` is thread ``t``'s current ``k`` (``1 / k`` of a cpu). :meth:`finish` says which threads' ``k``
    changed; :meth:`mean_share` is the share a thread had over its run, time-weighted.

    >>> s = CpuShares([0, 0, 0])          # three threads pinned to one cpu
    >>> s.sharers
    [3.0, 3.0, 3.0]
    >>> s.finish(0, 30.0)                 # the first ends at 30 ns: the two left take turns
    [(1, 3.0, 2.0), (2, 3.0, 2.0)]
    >>> s.finish(1, 50.0)
    [(2, 2.0, 1.0)]
    >>> round(s.mean_share(2, 60.0), 4)   # 1/3 for 30 ns, 1/2 for 20, 1 for 10
    0.5
    """

    def __init__(self, thread_cpus: Sequence[int], allowed: Sequence[Sequence[int] | None] | None = None,
                 start_ns: Sequence[float] | None = None) -> None:
        self._cpus = list(thread_cpus)
        self._allowed = list(allowed) if allowed is not None else [None] * len(self._cpus)
        self.sharers = cpu_sharers(self._cpus, self._allowed)
        self._running = set(range(len(self._cpus)))
        self._start = [float(t) for t in start_ns] if start_ns is not None else [0.0] * len(self._cpus)
        self._since = list(self._start)  # the share before this is in ``_area`` (time x share)
        self._area = [0.0] * len(self._cpus)

    @property
    def active(self) -> bool:
        """Whether any thread shares a cpu (else nothing ever changes)."""
        return any(k > 1.0 for k in self.sharers)

    def finish(self, thread: int, t_ns: float) -> list[tuple[int, float, float]]:
        """Thread ``thread`` ended at ``t_ns``: the threads whose share changed, with their old and new ``k``."""
        if thread not in self._running:
            return []
        self._running.discard(thread)
        if not self.active:
            return []
        alive = sorted(self._running)
        fresh = cpu_sharers([self._cpus[t] for t in alive], [self._allowed[t] for t in alive])
        changed = []
        for t, k in zip(alive, fresh, strict=True):
            if k != self.sharers[t]:
                if t_ns > self._since[t]:
                    self._area[t] += (t_ns - self._since[t]) / self.sharers[t]
                    self._since[t] = t_ns
                changed.append((t, self.sharers[t], k))
                self.sharers[t] = k
        return changed

    def mean_share(self, thread: int, finish_ns: float) -> float:
        """The share of a cpu ``thread`` had from its start to ``finish_ns``, weighted by time."""
        start = self._start[thread]
        if finish_ns <= start:
            return 1.0 / self.sharers[thread]
        area = self._area[thread] + max(finish_ns - self._since[thread], 0.0) / self.sharers[thread]
        return area / (finish_ns - start)


def _threads_by_core(
    core: CoreTiming, machine_cpus: Sequence[int], thread_cpus: Sequence[int], dependent: Sequence[bool],
    allowed: Sequence[Sequence[int] | None] | None = None,
) -> tuple[list[int], dict[int, float], Counter[int]]:
    """Each thread's core (a key of its own where its cpu is unknown), and per core its busy (independent) threads,
    threads sharing cpus counting as one per cpu between them (:func:`cpu_sharers`), and its pointer chasers."""
    core_of = core_of_cpus(machine_cpus, core.threads_per_core)
    sharers, spread = _fair_groups(thread_cpus, allowed)
    # a thread's core: its start cpu's, or, where the scheduler keeps it off that cpu (others crowd it), its group's
    keys = [core_of.get(c if c in spread[k] else spread[k][0], -1 - k) for k, c in enumerate(thread_cpus)]
    busy: dict[int, float] = {}
    for k, (key, dep) in enumerate(zip(keys, dependent, strict=True)):
        if not dep:
            # its time, on each cpu it runs on alike (a balanced group's: whichever cpu each thread starts on)
            cpus = spread[k]
            for c in cpus:
                at = core_of.get(c, key)
                busy[at] = busy.get(at, 0.0) + 1.0 / sharers[k] / len(cpus)
    chasers = Counter(k for k, dep in zip(keys, dependent, strict=True) if dep)
    return keys, busy, chasers


def thread_mlp(
    core: CoreTiming, machine_cpus: Sequence[int], thread_cpus: Sequence[int], dependent: Sequence[bool],
    allowed: Sequence[Sequence[int] | None] | None = None,
) -> list[int]:
    """Misses each thread may keep in flight: ``min(max_outstanding_misses, its share of its core's)``.

    A dependent thread (pointer chase) has one miss in flight; the independent threads on a core split what is
    left of ``outstanding_misses_per_core`` evenly (at least one each). ``allowed``: each thread's affinity, as
    :func:`cpu_sharers` takes it. Without a per-core limit every thread
    keeps ``max_outstanding_misses``. Siblings are found by :func:`core_of_cpus` (Linux's numbering, assumed).

    Examples
    --------
    >>> from numasim.timing.model import CoreTiming
    >>> c = CoreTiming(max_outstanding_misses=10, outstanding_misses_per_core=16, threads_per_core=2)
    >>> thread_mlp(c, range(8), [0, 4, 1], [False, False, False])   # cpus 0 and 4 share core 0
    [8, 8, 10]
    >>> thread_mlp(c, range(8), [0, 4], [True, False])              # a chaser leaves its sibling 15, capped at 10
    [1, 10]
    """
    m = core.max_outstanding_misses
    per_core = core.outstanding_misses_per_core
    if per_core is None:
        return [1 if dep else m for dep in dependent]
    keys, busy, chasers = _threads_by_core(core, machine_cpus, thread_cpus, dependent, allowed)
    return [1 if dep else int(min(m, max(1.0, (per_core - chasers[key]) / busy[key])))
            for key, dep in zip(keys, dependent, strict=True)]


def thread_prefetch_lines(
    core: CoreTiming, machine_cpus: Sequence[int], thread_cpus: Sequence[int], dependent: Sequence[bool],
    mlp: Sequence[int], allowed: Sequence[Sequence[int] | None] | None = None,
) -> list[float]:
    """How far ahead each thread's sequential stream is prefetched: the calibration's depth, cut down where busy
    sibling threads would together keep more lines in flight than one thread of the core reaches alone.

    One thread reaches its share of misses plus the stream depth, ``min(max_outstanding_misses,
    outstanding_misses_per_core) + prefetch_distance_lines`` (at least the core's queue); ``k`` busy threads on a
    core split that: each keeps ``min(d, reach / k - mlp)`` prefetched lines, at least none. Why: with its
    prefetchers on, mlc's all-thread load on a 2x Silver 4114 keeps about 19 lines in flight a core at
    saturation, as a 2x Platinum 8269CY's does with them off, and one Skylake-SP core streaming alone reaches
    about 18 (kerncraft's Gold 6148); two threads each adding their own depth put 38 a core in flight. Without a
    per-core limit every thread keeps the calibration's depth (Zen 4's 85 lines a core under mlc's load, its
    prefetchers on, fit no shared queue either). One busy thread a core is never cut.

    Examples
    --------
    >>> from numasim.timing.model import CoreTiming
    >>> c = CoreTiming(max_outstanding_misses=10, outstanding_misses_per_core=16, threads_per_core=2,
    ...                prefetch_distance_lines=11)
    >>> thread_prefetch_lines(c, range(8), [0, 4, 1], [False] * 3, [8, 8, 10])   # reach 21: 10.5 a thread on core 0
    [2.5, 2.5, 11.0]
    """
    d = float(core.prefetch_distance_lines)
    per_core = core.outstanding_misses_per_core
    if per_core is None:
        return [d] * len(thread_cpus)
    reach = max(float(per_core), min(core.max_outstanding_misses, per_core) + d)
    keys, busy, _ = _threads_by_core(core, machine_cpus, thread_cpus, dependent, allowed)
    return [d if dep else max(0.0, min(d, reach / busy[key] - m))
            for key, dep, m in zip(keys, dependent, mlp, strict=True)]
