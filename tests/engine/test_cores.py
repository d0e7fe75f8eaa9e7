"""A core's misses in flight are shared by its busy hardware threads (numasim.engine.cores)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine.cores import core_of_cpus, cpu_sharers, thread_mlp, thread_prefetch_lines
from numasim.timing.model import CoreTiming

LAYOUTS = {
    "per_thread": st.integers(1, 32),
    "per_core": st.integers(1, 64),
    "tpc": st.integers(1, 4),
    "cores": st.integers(1, 16),
    "picks": st.lists(st.tuples(st.integers(0, 63), st.booleans()), min_size=1, max_size=24),
}
"""Cores: fill buffers per thread, queue per core, threads per core, cores, and threads on cpus (some chasing)."""


@settings(max_examples=200, deadline=None)
@given(**LAYOUTS)
def test_no_core_beyond_its_queue_and_no_thread_beyond_its_buffers(
    per_thread: int, per_core: int, tpc: int, cores: int, picks: list[tuple[int, bool]]
) -> None:
    cpus = list(range(cores * tpc))
    chosen = [(cpus[c % len(cpus)], dep) for c, dep in picks]
    core = CoreTiming(max_outstanding_misses=per_thread, outstanding_misses_per_core=per_core, threads_per_core=tpc)
    mlp = thread_mlp(core, cpus, [c for c, _ in chosen], [d for _, d in chosen])
    assert all(m == 1 for m, (_, dep) in zip(mlp, chosen, strict=True) if dep)
    assert all(1 <= m <= per_thread for m in mlp)
    of = core_of_cpus(cpus, tpc)
    load: Counter[int] = Counter()
    busy: Counter[int] = Counter()
    # threads taking turns on one cpu hold their slots k times as long as they use them (engine.cores.cpu_sharers):
    # a k-th of their misses each is in flight on average, and they count as one thread between them
    for m, (c, _), k in zip(mlp, chosen, cpu_sharers([c for c, _ in chosen]), strict=True):
        load[of[c]] += m / k
        busy[of[c]] += 1 / k
    for k, lines in load.items():
        # A core never exceeds its queue, unless it has more threads than entries (each keeps one).
        assert lines <= max(per_core, busy[k]) + 1e-9


def test_without_a_per_core_figure_every_thread_keeps_its_own() -> None:
    core = CoreTiming(max_outstanding_misses=9)
    assert thread_mlp(core, range(4), [0, 2, 0, 1], [False, False, False, True]) == [9, 9, 9, 1]


def test_siblings_follow_linux_numbering_and_share_the_queue() -> None:
    assert core_of_cpus(range(6), 2) == {0: 0, 1: 1, 2: 2, 3: 0, 4: 1, 5: 2}
    assert core_of_cpus(range(5), 2) == {c: c for c in range(5)}  # uneven: every cpu its own core
    core = CoreTiming(max_outstanding_misses=10, outstanding_misses_per_core=16, threads_per_core=2)
    # One busy thread per core: the fill buffers bound it; both threads of a core: the queue's half each.
    assert thread_mlp(core, range(8), [0, 1, 2, 3], [False] * 4) == [10, 10, 10, 10]
    assert thread_mlp(core, range(8), [0, 4, 1, 5], [False] * 4) == [8, 8, 8, 8]


def _stream_bandwidth(core: dict[str, object], cpus: list[int], stride_bytes: int) -> tuple[float, int]:
    """Bytes per ns when a thread on each of ``cpus`` reads 20,000 lines ``stride_bytes`` apart from its own
    buffer on node 0 (the 2x Platinum 8180's shipped calibration with ``core``'s fields), and the machine's cpus."""
    import numpy as np

    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine
    from numasim.workload.access import AccessChunk, concat_chunks

    machine = load_machine("skylake-8180-2s")
    base = resolve_calibration(machine)
    cal = base.model_copy(update={"core": base.core.model_copy(update=core)})
    lines = 20_000
    chunks = []
    for k in range(len(cpus)):
        addr = (np.uint64(1 << 30) * np.uint64(k + 1)) + np.arange(lines, dtype=np.uint64) * np.uint64(stride_bytes)
        chunks.append(AccessChunk.build(addr, thread=k))
    specs = [ThreadSpec(k, cpu=c) for k, c in enumerate(cpus)]
    pages = PageMap(4096)
    for k in range(len(cpus)):
        # each thread's buffer on node 0 (cpu 0, its sibling and cpu 1 are on node 0)
        pages.assign(int((1 << 30) * (k + 1)), np.zeros(lines * stride_bytes // 4096 + 1, dtype=np.int64))
    r = simulate(machine, cal, specs, [concat_chunks(chunks)], pages, seed=0, record_latencies=False)
    return sum(t.accesses for t in r.threads) * 64 / max(t.finish_ns for t in r.threads), len(machine.cpus)


def test_a_core_shared_by_two_threads_streams_less_than_two_cores() -> None:
    core = {"max_outstanding_misses": 10, "outstanding_misses_per_core": 10, "threads_per_core": 2,
            "prefetch_distance_lines": 0}
    # every other line: no stream for the prefetcher, so only the misses in flight set the pace
    apart, n_cpus = _stream_bandwidth(core, [0, 1], 128)              # two cores
    together, _ = _stream_bandwidth(core, [0, n_cpus // 2], 128)      # siblings: one core's 10 misses, 5 each
    assert together < 0.7 * apart


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(0, 40), **LAYOUTS)
def test_busy_siblings_reach_no_further_than_one_thread_alone(
    per_thread: int, per_core: int, depth: int, tpc: int, cores: int, picks: list[tuple[int, bool]]
) -> None:
    cpus = list(range(cores * tpc))
    chosen = [(cpus[c % len(cpus)], dep) for c, dep in picks]
    core = CoreTiming(max_outstanding_misses=per_thread, outstanding_misses_per_core=per_core, threads_per_core=tpc,
                      prefetch_distance_lines=depth)
    dep = [d for _, d in chosen]
    mlp = thread_mlp(core, cpus, [c for c, _ in chosen], dep)
    ahead = thread_prefetch_lines(core, cpus, [c for c, _ in chosen], dep, mlp)
    assert all(0.0 <= a <= depth for a in ahead)
    of = core_of_cpus(cpus, tpc)
    reach = max(per_core, min(per_thread, per_core) + depth)
    lines: Counter[int] = Counter()
    busy: Counter[int] = Counter()
    share = [1 / k for k in cpu_sharers([c for c, _ in chosen])]  # (threads taking turns on a cpu: see above)
    for m, a, (c, d), w in zip(mlp, ahead, chosen, share, strict=True):
        if not d:
            lines[of[c]] += (m + a) * w
            busy[of[c]] += w
    for k, n in lines.items():
        # what its busy threads keep in flight, prefetched lines included: one thread's reach, unless their own
        # demand slots (at least one each) already pass it
        own = sum(m * w for m, (c, d), w in zip(mlp, chosen, share, strict=True) if of[c] == k and not d)
        assert n <= max(reach, own) + 1e-9
        if busy[k] == 1:  # one busy thread (or several taking turns on one cpu) is never cut
            assert all(a == depth for a, (c, d) in zip(ahead, chosen, strict=True) if of[c] == k and not d)


def test_without_a_per_core_figure_every_thread_keeps_the_depth() -> None:
    core = CoreTiming(max_outstanding_misses=24, prefetch_distance_lines=16)
    assert thread_prefetch_lines(core, range(4), [0, 2, 0], [False] * 3, [24, 24, 24]) == [16.0, 16.0, 16.0]


def test_two_busy_siblings_stream_what_one_thread_of_the_core_streams() -> None:
    """mlc's all-thread load keeps about 19 lines a core in flight on Skylake/Cascade Lake, prefetchers on or off,
    and one core streaming alone about 18: a second hardware thread adds no prefetched lines of its own."""
    core = {"max_outstanding_misses": 10, "outstanding_misses_per_core": 16, "threads_per_core": 2,
            "prefetch_distance_lines": 11}
    # consecutive lines: a stream the prefetcher runs ahead of
    alone, n_cpus = _stream_bandwidth(core, [0], 64)
    siblings, _ = _stream_bandwidth(core, [0, n_cpus // 2], 64)
    apart, _ = _stream_bandwidth(core, [0, 1], 64)
    assert abs(siblings / alone - 1.0) < 0.1  # one core's reach, however many of its threads stream
    assert apart > 1.6 * alone
