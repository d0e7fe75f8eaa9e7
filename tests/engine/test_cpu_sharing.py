"""Threads pinned to one cpu take turns on it: the cpu issues no faster than one thread (engine.cores.cpu_sharers).

Before, each of k threads on one cpu ran at a lone thread's pace, compute and misses in flight alike: 16 threads
on a node of 12 cpus finished in the time of one, and three pointer chases on one cpu overlapped their misses.
"""

from __future__ import annotations

import pytest

from numasim.engine.cores import cpu_sharers, thread_mlp, thread_prefetch_lines
from numasim.timing.model import CoreTiming
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload


def _run(cpus: list[int], pattern: str, compute_ns: float, mode: str) -> float:
    m = load_machine("seed-003-2node")
    w = Workload.model_validate({
        "name": "share", "threads": [{"id": i, "cpu": c} for i, c in enumerate(cpus)],
        "allocations": [{"name": "d", "size_bytes": "256M", "first_touch": 0}],
        "phases": [{"pattern": pattern, "allocation": "d", "threads": list(range(len(cpus))), "accesses": 40_000,
                    "compute_ns": compute_ns, "split": True}],
    })  # fmt: skip
    return run_workload(m, w, resolve_calibration(m, nominal=True), mode=mode).result.run_time_ns


@pytest.mark.parametrize("mode", ["epoch", "exact"])
@pytest.mark.parametrize(("pattern", "compute_ns"), [("random", 0.0), ("random", 300.0), ("sequential", 0.0),
                                                     ("pointer_chase", 0.0)])
def test_k_threads_on_one_cpu_take_k_times_as_long(mode: str, pattern: str, compute_ns: float) -> None:
    alone = _run([0], pattern, compute_ns, mode)
    for k in (2, 3):
        shared = _run([0] * k, pattern, compute_ns, mode)
        # each thread does what the lone one did, and the cpu runs one at a time: k times as long (each thread's
        # first misses go out together, a little ahead of its share: within 2 %; the controller's queue a few %)
        assert k * alone * 0.98 <= shared <= k * alone * 1.05
    # on two cpus of two cores they overlap, as before
    assert _run([0, 1], pattern, compute_ns, mode) < 1.2 * alone


def test_a_node_with_more_threads_than_cpus_takes_turns() -> None:
    # 16 threads on node 0's 12 cpus: four cpus run two threads each, which take twice as long (threads stay
    # where they start: Linux's load balancer would spread them, about 16/12 of the time)
    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m, nominal=True)
    times = {}
    for n in (12, 16):
        w = Workload.model_validate({
            "name": "over", "threads": [{"id": i, "node": 0} for i in range(n)],
            "allocations": [{"name": "d", "size_bytes": "64M", "first_touch": 0}],
            "phases": [{"pattern": "random", "allocation": "d", "threads": list(range(n)), "accesses": 10_000,
                        "compute_ns": 500}],
        })  # fmt: skip
        times[n] = run_workload(m, w, cal).result.run_time_ns
    assert times[16] == pytest.approx(2 * times[12], rel=0.02)


def test_threads_taking_turns_on_a_cpu_count_as_one_busy_thread_of_its_core() -> None:
    assert cpu_sharers([0, 1, 1, 1, 2]) == [1, 3, 3, 3, 1]
    # cpus 0 and 4 are one core's two threads: three taking turns on cpu 0 and one on cpu 4 split the core's
    # queue as two threads would (8 each); on cpus 0, 1, 2, 4 only core 0 has two busy threads
    per_core = CoreTiming(max_outstanding_misses=10, outstanding_misses_per_core=16, threads_per_core=2,
                          prefetch_distance_lines=11)
    assert thread_mlp(per_core, range(8), [0, 0, 0, 4], [False] * 4) == [8, 8, 8, 8]
    assert thread_mlp(per_core, range(8), [0, 1, 2, 4], [False] * 4) == [8, 10, 10, 8]
    mlp = [8, 8, 8, 8]
    assert thread_prefetch_lines(per_core, range(8), [0, 0, 0, 4], [False] * 4, mlp) == [2.5, 2.5, 2.5, 2.5]
