"""Which hardware threads share a physical core, and how many misses each may keep in flight.

A core's L1 fill buffers bound one thread's demand misses, but what a core as a whole keeps in flight is its L2
miss queue (Intel's superqueue, AMD's L2 miss buffers), shared by its hardware threads. Two busy threads on one
core split it: on both real mlc runs the project holds, the saturated point has 16-17 lines in flight per core
(20 cores of 2x E5-2680 v2, 56 of 2x Platinum 8180), not 10 per hardware thread.

Which cpus are siblings: Linux numbers the first hardware thread of every core before any second one (x86
firmware enumerates them so, and ``/sys/devices/system/cpu/cpuN/topology/thread_siblings_list`` shows cpu ``c``
and ``c + cpus / threads_per_core`` together on the machines in ``shared/data``). So with the machine's cpus
sorted, position ``p`` is on core ``p mod (cpus / threads_per_core)``: an ASSUMPTION about the numbering, stated
in :func:`thread_mlp`'s docstring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from numasim.timing.model import CoreTiming

__all__ = ["core_of_cpus", "thread_mlp"]


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


def thread_mlp(
    core: CoreTiming, machine_cpus: Sequence[int], thread_cpus: Sequence[int], dependent: Sequence[bool]
) -> list[int]:
    """Misses each thread may keep in flight: ``min(max_outstanding_misses, its share of its core's)``.

    A dependent thread (pointer chase) has one miss in flight; the independent threads on a core split what is
    left of ``outstanding_misses_per_core`` evenly (at least one each). Without a per-core limit every thread
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
    core_of = core_of_cpus(machine_cpus, core.threads_per_core)
    keys = [core_of.get(c, -1 - k) for k, c in enumerate(thread_cpus)]
    busy = Counter(k for k, dep in zip(keys, dependent, strict=True) if not dep)
    chasers = Counter(k for k, dep in zip(keys, dependent, strict=True) if dep)
    out = []
    for key, dep in zip(keys, dependent, strict=True):
        if dep:
            out.append(1)
            continue
        share = max(1, (per_core - chasers[key]) // busy[key])
        out.append(min(m, share))
    return out
