"""Epoch mode against its design's floor (issue 14): cpu ns per access of each, their ratio, and where the
engine's cpu goes, stage by stage, in one run.

Workload: the engine benchmark's (:mod:`bench_engine`: seed-000-4node, 8 threads, random 64-byte loads over
1 GiB interleaved). The floor is :mod:`floor_kernel` on the same accesses and the same
:class:`~numasim.engine.memsys.MemorySystem`. Both are timed per *cpu* second (``time.process_time``, all
threads), ``REPEATS`` runs each, alternating, in the same process, so host load affects both alike; the table
gives the median and the fastest. The stages come from one more engine run with every stage's function wrapped
in a timer of its own thread's cpu time (``time.thread_time``: the feeder and the statistics run on threads of
their own); that run is not one of the timed ones. See ``benchmarks/README.md`` for how to read the tables.
Nothing here asserts a time: the host is shared.

The process's allocator is tuned as the ``numasim`` command tunes it (:func:`numasim.allocator.tune_allocator`);
``BENCH_FLOOR_ALLOCATOR=default`` leaves glibc's defaults, to measure what the tuning saves (system time from
page faults, which cpu time includes).

Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_floor.py --run-benchmarks -s
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import bench_engine as b  # noqa: E402
from floor_kernel import floor_run  # noqa: E402

from numasim.engine import epoch, simulate, stream  # noqa: E402
from numasim.engine.cores import thread_mlp  # noqa: E402
from numasim.engine.memsys import build_memory_system  # noqa: E402

N = int(os.environ.get("BENCH_FLOOR_ACCESSES", 16_000_000))  # fewer for a quick look
REPEATS = int(os.environ.get("BENCH_FLOOR_REPEATS", 5))
LATENCY_TOLERANCE = 0.10  # floor vs engine mean memory latency and run time, relative (measured ~6 %, README)

# Stages: (label, module, attribute, the stage it lies inside or None). A stage's own time is its wrapped
# function's thread cpu time less that of the stages inside it.
STAGES = [
    ("feeder: distribute a chunk (rest: thread -> agent, casts, line split, node -> index, gathers, "
     "route class, blocks)", stream.Feeder, "_distribute", None),
    ("feeder: page -> node lookup", stream.Feeder, "_lookup", "_distribute"),
    ("feeder: group by agent", stream, "group_by_agent", "_distribute"),
    ("feeder: cache estimate", stream, "estimate_levels", "_distribute"),
    ("feeder: prefetch rule", stream, "prefetch_flags", "_distribute"),
    ("engine: window assembly (rest of a window)", epoch.EpochEngine, "_window", None),
    ("engine: timing loop (run_epochs)", epoch, "run_epochs", "_window"),
    ("statistics (accumulate_stats)", epoch, "accumulate_stats", None),
]  # fmt: skip


def _floor_inputs(m, cal, n):  # type: ignore[no-untyped-def]
    ms = build_memory_system(m, cal)
    chunks = list(b.accesses(n))
    thread = np.concatenate([c.thread for c in chunks])
    address = np.concatenate([c.address for c in chunks])
    page_node = np.resize(np.arange(4, dtype=np.int8), b.PAGES)  # the bench's interleave (node k = index k)
    specs = b.threads(m)
    index = {nid: k for k, nid in enumerate(ms.node_ids)}
    init = np.array([index[m.cpu_to_node[t.cpu]] for t in specs], dtype=np.int64)
    mlp = np.array(thread_mlp(cal.core, m.cpus, [t.cpu for t in specs], [False] * len(specs)), dtype=np.int64)
    return ms, chunks, (thread, address, page_node, init, mlp)


def mean_memory_latency_ns(r) -> float:  # type: ignore[no-untyped-def]
    """The engine's mean memory latency over all initiators, weighted by their memory accesses."""
    w = np.array([i.memory_accesses for i in r.initiators], dtype=float)
    v = np.array([i.memory_latency_mean_ns for i in r.initiators], dtype=float)
    return float((w * v).sum() / w.sum())


def _cpu(fn: Callable[[], object]) -> tuple[float, int, object]:
    """(cpu seconds of all threads, minor page faults, result) of one call."""
    t, f, _, out = _timed(fn)
    return t, f, out


def _timed(fn: Callable[[], object]) -> tuple[float, int, float, object]:
    """(cpu seconds of all threads, minor page faults, wall seconds, result) of one call."""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    wall = time.perf_counter() - w0
    return time.process_time() - c0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, wall, out


@contextlib.contextmanager
def stage_timers() -> Iterator[dict[str, float]]:
    """Wrap every stage's function in a timer of the calling thread's cpu time; yields the totals (s) by
    attribute name, ``_inner`` keys holding the time of stages nested in each outer one."""
    totals: dict[str, float] = defaultdict(float)
    local = threading.local()
    saved = []
    for _, owner, name, outer in STAGES:
        fn = getattr(owner, name)
        saved.append((owner, name, fn))

        def timed(*args, _fn=fn, _name=name, _outer=outer, **kwargs):  # type: ignore[no-untyped-def]
            t0 = time.thread_time()
            try:
                return _fn(*args, **kwargs)
            finally:
                dt = time.thread_time() - t0
                totals[_name] += dt
                if _outer is not None and getattr(local, _outer, 0):
                    totals[_outer + "_inner"] += dt

        def entered(*args, _timed=timed, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            setattr(local, _name, getattr(local, _name, 0) + 1)  # stages nested in this one subtract
            try:
                return _timed(*args, **kwargs)
            finally:
                setattr(local, _name, getattr(local, _name) - 1)

        setattr(owner, name, functools.wraps(fn)(entered))
    try:
        yield totals
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


@pytest.mark.benchmark
def test_engine_against_floor() -> None:
    tuned = b.allocator_from_env("BENCH_FLOOR_ALLOCATOR")
    m, cal = b.machine_and_calibration()
    specs, pm = b.threads(m), b.pages()
    ms, chunks, args = _floor_inputs(m, cal, N)
    # Warm up with one whole run: a short one compiles the kernels but leaves the specialisations only a long run
    # meets (the estimate's window of a carried tail, its long carry) to load from numba's cache, and the
    # allocator's mmap threshold to settle, inside the first timed runs (measured: 170, 131, then 85 ns per access)
    simulate(m, cal, specs, iter(chunks), pm, mode="epoch")
    simulate(m, cal, specs, iter(chunks), pm, mode="epoch")
    floor_run(ms, *(a[:1000] for a in args[:2]), *args[2:])
    eng, flo, faults, wall = [], [], [], []
    r = flo_lat = flo_end = None
    for _ in range(REPEATS):  # alternating, so that a change of host load hits both
        t, f, w, r = _timed(lambda: simulate(m, cal, specs, iter(chunks), pm, mode="epoch"))
        eng.append(t / N * 1e9)
        wall.append(w / N * 1e9)
        faults.append(f)
        t, _, (flo_lat, flo_end) = _cpu(lambda: floor_run(ms, *args))  # type: ignore[misc]
        flo.append(t / N * 1e9)
    with stage_timers() as totals:
        prof_cpu, _, _ = _cpu(lambda: simulate(m, cal, specs, iter(chunks), pm, mode="epoch"))
    eng_lat = mean_memory_latency_ns(r)
    e_med, f_med = statistics.median(eng), statistics.median(flo)
    lines = [
        f"machine {m.name}, calibration {cal.id}, {b.THREADS} threads, {N:,} random loads over 1 GiB, "
        f"{REPEATS} runs each (cpu time, all threads); allocator "
        f"{'tuned (numasim.allocator, as the numasim command)' if tuned else 'glibc defaults'}",
        "",
        "| | cpu ns / access (median) | fastest | M accesses / cpu s (median) | mean memory latency ns | "
        "run time ms |",
        "|---|---:|---:|---:|---:|---:|",
        f"| epoch engine | {e_med:.1f} | {min(eng):.1f} | {1e3 / e_med:.1f} | {eng_lat:.1f} | "
        f"{r.run_time_ns / 1e6:.3f} |",  # type: ignore[union-attr]
        f"| floor kernel | {f_med:.1f} | {min(flo):.1f} | {1e3 / f_med:.1f} | {flo_lat:.1f} | "
        f"{flo_end / 1e6:.3f} |",  # type: ignore[operator]
        f"| engine / floor | {e_med / f_med:.2f} | {min(eng) / min(flo):.2f} | | {eng_lat / flo_lat:.3f} | "  # type: ignore[operator]
        f"{r.run_time_ns / flo_end:.3f} |",  # type: ignore[union-attr, operator]
        "",
        f"engine runs: {', '.join(f'{x:.1f}' for x in eng)} ns; floor runs: {', '.join(f'{x:.1f}' for x in flo)} "
        f"ns; minor page faults per engine run: {', '.join(f'{x:,}' for x in faults)}",
        f"engine wall time: median {statistics.median(wall):.1f} ns an access, "
        f"{1e3 / statistics.median(wall):.1f} M accesses per wall second (issue 14: >= 25 with 2 free cores; the "
        f"host's other load counts here); runs {', '.join(f'{x:.1f}' for x in wall)} ns",
        "",
        f"Where the engine's cpu goes (one instrumented run, {prof_cpu / N * 1e9:.1f} ns per access in all):",
        "",
        "| stage | cpu ns / access |",
        "|---|---:|",
    ]
    counted = 0.0
    for label, _, name, _outer in STAGES:
        own = totals[name] - totals[name + "_inner"]
        counted += own
        lines.append(f"| {label} | {own / N * 1e9:.1f} |")
    lines.append(f"| other (SimPy, feeder hand-over, setup, collect) | {(prof_cpu - counted) / N * 1e9:.1f} |")
    print("\n" + "\n".join(lines))
    # sanity: the floor models the same queues, so it lands near the engine (not equal: see README); simulated
    # results, not times
    assert abs(flo_lat / eng_lat - 1) < LATENCY_TOLERANCE  # type: ignore[operator]
    assert abs(flo_end / r.run_time_ns - 1) < LATENCY_TOLERANCE  # type: ignore[operator, union-attr]
