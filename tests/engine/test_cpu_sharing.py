"""Threads pinned to one cpu take turns on it: the cpu issues no faster than one thread; threads outnumbering the
cpus they may run on share them evenly (engine.cores.cpu_sharers).

Before, each of k threads on one cpu ran at a lone thread's pace, compute and misses in flight alike: 16 threads
on a node of 12 cpus finished in the time of one, and three pointer chases on one cpu overlapped their misses.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _node_run(n: int, mode: str, affinity: dict) -> float:
    m = load_machine("seed-003-2node")
    w = Workload.model_validate({
        "name": "over", "threads": [{"id": i, **affinity} for i in range(n)],
        "allocations": [{"name": "d", "size_bytes": "64M", "first_touch": 0}],
        "phases": [{"pattern": "random", "allocation": "d", "threads": list(range(n)), "accesses": 10_000,
                    "compute_ns": 500}],
    })  # fmt: skip
    return run_workload(m, w, resolve_calibration(m, nominal=True), mode=mode).result.run_time_ns


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_threads_outnumbering_their_cpus_share_them_evenly(mode: str) -> None:
    # 16 threads on node 0's 12 cpus: the scheduler's load balancing gives each 12/16 of a cpu, so they take 16/12
    # as long as 12 (before: four cpus ran two threads each, which took twice as long); 24 take twice as long.
    # The same for a cpuset (``cpus``) of the node's 12 cpus.
    base = _node_run(12, mode, {"node": 0})
    assert _node_run(16, mode, {"node": 0}) == pytest.approx(16 / 12 * base, rel=0.01)
    assert _node_run(24, mode, {"node": 0}) == pytest.approx(2 * base, rel=0.01)
    node0 = load_machine("seed-003-2node").node(0).cpus
    assert _node_run(16, mode, {"cpus": list(node0)}) == pytest.approx(16 / 12 * base, rel=0.01)


def test_fair_shares_serve_the_most_crowded_cpus_first() -> None:
    # 4 threads balanced over 3 cpus: 3/4 of a cpu each
    assert cpu_sharers([0, 1, 2, 0], [(0, 1, 2)] * 4) == pytest.approx([4 / 3] * 4)
    # two pinned to cpu 0 take turns there; the node's other threads keep off it and have a cpu each
    assert cpu_sharers([0, 0, 1, 2], [None, None, (0, 1, 2, 3), (0, 1, 2, 3)]) == [2, 2, 1, 1]
    # three pinned to cpu 0 and three to cpu 1, and one that may run on either: 7 threads on 2 cpus, 2/7 each
    assert cpu_sharers([0] * 3 + [1] * 3 + [0], [None] * 6 + [(0, 1)]) == pytest.approx([3.5] * 7)
    # overlapping affinities {0, 1} and {1, 2}: 6 threads on 3 cpus, half a cpu each
    assert cpu_sharers([0, 0, 0, 2, 2, 2], [(0, 1)] * 3 + [(1, 2)] * 3) == pytest.approx([2.0] * 6)
    # fewer threads than cpus: a cpu each, whichever cpu each starts on
    assert cpu_sharers([0, 0], [(0, 1, 2)] * 2) == [1, 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sets(st.integers(0, 5), max_size=4)), min_size=1, max_size=12))
def test_fair_shares_never_give_a_set_of_cpus_more_than_they_have(threads: list) -> None:
    # Whatever the affinities: no thread gets more than a cpu, and the threads confined to any set of cpus get no
    # more than that many cpus between them (checked on every union of affinities)
    start = [c for c, _ in threads]
    allowed = [tuple(sorted(mask | {c})) if mask else None for c, mask in threads]
    sharers = cpu_sharers(start, allowed)
    assert all(k >= 1.0 for k in sharers)
    masks = [frozenset(a or (c,)) for c, a in zip(start, allowed, strict=True)]
    unions = {frozenset().union(*(masks[i] for i in range(len(masks)) if (pick >> i) & 1))
              for pick in range(1, 1 << min(len(masks), 10))}  # fmt: skip
    for cpus in unions:
        inside = [1 / k for k, mk in zip(sharers, masks, strict=True) if mk <= cpus]
        assert sum(inside) <= len(cpus) + 1e-9
    # a thread the others do not crowd has its cpu to itself
    for i, mk in enumerate(masks):
        if sum(1 for other in masks if other & mk) <= len(mk):
            assert sharers[i] == 1.0


def test_a_thread_spec_starts_on_one_of_its_cpus() -> None:
    from numasim.engine import PageMap, ThreadSpec, simulate
    from numasim.errors import WorkloadError
    from numasim.workload.access import AccessChunk

    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m, nominal=True)
    chunk = [AccessChunk.build(np.array([0], dtype=np.uint64))]
    pm = PageMap()
    pm.assign(0, np.zeros(1, dtype=np.int16))
    with pytest.raises(WorkloadError, match=r"ThreadSpec\(id=0\).cpu = 0: not among its cpus \[1, 2\]"):
        simulate(m, cal, [ThreadSpec(0, cpu=0, cpus=(1, 2))], chunk, pm)
    with pytest.raises(WorkloadError, match=r"ThreadSpec\(id=0\).cpus: .* has no cpu 9999"):
        simulate(m, cal, [ThreadSpec(0, cpu=0, cpus=(0, 9999))], chunk, pm)


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


def test_the_run_report_says_which_threads_shared_cpus() -> None:
    from numasim.report.run_report import format_run_report

    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m, nominal=True)

    def report(n: int) -> str:
        w = Workload.model_validate({
            "name": "over", "threads": [{"count": n, "node": 0}],
            "allocations": [{"name": "d", "size_bytes": "16M", "first_touch": 0}],
            "phases": [{"pattern": "random", "allocation": "d", "threads": "all", "accesses": 2_000, "compute_ns": 100}],
        })  # fmt: skip
        outcome = run_workload(m, w, cal)
        # (time-weighted: the threads that end last had a little more once the first ended)
        assert [t.cpu_share for t in outcome.result.threads] == pytest.approx([min(1.0, 12 / n)] * n, rel=1e-3)
        return format_run_report(outcome)

    assert "cpu sharing: 16 threads (thread0, thread1, ..., thread15) had 75.0 % of a cpu each" in report(16)
    assert "cpu sharing" not in report(12)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 7), st.sampled_from([{"node": 0}, {"cpus": [0, 1, 2]}, "pinned"]), st.sampled_from([50.0, 400.0]),
       st.sampled_from(["epoch", "exact"]))
def test_threads_never_finish_their_compute_faster_than_their_cpus_allow(
    n: int, affinity: dict | str, compute_ns: float, mode: str
) -> None:
    # Physical bound: threads confined to C cpus need at least their total compute / C, and each at least its own
    m = load_machine("seed-002-opteron-4s")
    threads = ([{"id": i, "cpu": i % 2} for i in range(n)] if affinity == "pinned"
               else [{"id": i, **affinity} for i in range(n)])  # type: ignore[dict-item]
    cpus = 2 if affinity == "pinned" or affinity == {"node": 0} else 3
    accesses = 1_500
    w = Workload.model_validate({
        "name": "bound", "threads": threads,
        "allocations": [{"name": "d", "size_bytes": "16M", "first_touch": 0}],
        "phases": [{"pattern": "random", "allocation": "d", "threads": "all", "accesses": accesses,
                    "compute_ns": compute_ns}],
    })  # fmt: skip
    r = run_workload(m, w, resolve_calibration(m, nominal=True), mode=mode).result
    per_cpu = max(n, cpus) / cpus if affinity != "pinned" else (n + 1) // 2  # the busiest cpu's threads
    assert r.run_time_ns >= accesses * compute_ns * max(1.0, per_cpu) * (1 - 1e-9)
    assert all(t.finish_ns - t.start_ns >= accesses * compute_ns * (1 - 1e-9) for t in r.threads)


def _serial_after_parallel(mode: str, parallel: int, affinity: dict) -> tuple[float, list[float]]:
    m = load_machine("seed-003-2node")
    w = Workload.model_validate({
        "name": "serial", "threads": [{"id": i, **affinity} for i in range(parallel)],
        "allocations": [{"name": "d", "size_bytes": "1M", "first_touch": 0}],
        "phases": [
            {"pattern": "random", "allocation": "d", "threads": list(range(parallel)), "accesses": 6_000,
             "compute_ns": 500},
            {"pattern": "random", "allocation": "d", "threads": [0], "accesses": 6_000, "compute_ns": 500},
        ],
    })  # fmt: skip
    r = run_workload(m, w, resolve_calibration(m, nominal=True), mode=mode).result
    return r.run_time_ns, [t.cpu_share for t in r.threads]


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_when_a_thread_ends_the_threads_it_shared_cpus_with_take_its_time(mode: str) -> None:
    # Three threads take turns on cpu 0 for 3 ms of compute each (a 1 MiB working set: cache hits), then thread 0
    # computes 3 ms more alone: 9 ms shared, then 3 at a whole cpu (12 ms), not 3 x 6 ms (18: its third kept).
    each_ms = 6_000 * 500 / 1e6
    run_ns, shares = _serial_after_parallel(mode, 3, {"cpu": 0})
    assert run_ns / 1e6 == pytest.approx(3 * each_ms + each_ms, rel=0.01)
    assert shares[0] == pytest.approx((3 * each_ms / 3 + each_ms) / (4 * each_ms), rel=0.01)  # 1/3 then 1
    assert shares[1:] == pytest.approx([1 / 3, 1 / 3], rel=0.01)
    # three threads balanced over two cpus (2/3 of a cpu each), then thread 0 alone on one of them
    run_ns, shares = _serial_after_parallel(mode, 3, {"cpus": [0, 1]})
    assert run_ns / 1e6 == pytest.approx(3 * each_ms / 2 + each_ms, rel=0.01)
    assert shares[1:] == pytest.approx([2 / 3, 2 / 3], rel=0.01)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, (0, 1), (0, 1, 2, 3), (2, 3)])),
                min_size=1, max_size=8),
       st.permutations(range(8)))
def test_cpu_shares_never_give_running_threads_more_cpus_than_they_have(threads: list, order: list[int]) -> None:
    # Whatever the order threads end in, the running threads of every set of cpus hold no more than those cpus,
    # each at most one cpu, and a thread's time-weighted share lies between its least and its most.
    from numasim.engine.cores import CpuShares

    cpus = [c if aff is None or c in aff else aff[0] for c, aff in threads]
    allowed = [aff for _, aff in threads]
    shares = CpuShares(cpus, allowed)
    running = set(range(len(threads)))
    seen: list[list[float]] = [[1 / k] for k in shares.sharers]
    for t, who in enumerate([i for i in order if i < len(threads)]):
        shares.finish(who, float(t + 1))
        running.discard(who)
        for i in running:
            seen[i].append(1 / shares.sharers[i])
        for subset in ({0}, {1}, {0, 1}, {2, 3}, {0, 1, 2, 3}):
            inside = [i for i in running if set(allowed[i] or (cpus[i],)) <= subset]
            assert sum(1 / shares.sharers[i] for i in inside) <= len(subset) + 1e-9
        assert all(1 / shares.sharers[i] <= 1.0 + 1e-12 for i in running)
    for i in range(len(threads)):
        mean = shares.mean_share(i, float(len(threads) + 1))
        assert min(seen[i]) - 1e-12 <= mean <= max(seen[i]) + 1e-12
