"""Epoch mode against its design's floor (issue 14): cpu ns per access of each, and their ratio, in one run.

Workload: the engine benchmark's (:mod:`bench_engine`: seed-000-4node, 8 threads, random 64-byte loads over
1 GiB interleaved). The floor is :mod:`floor_kernel` on the same accesses and the same
:class:`~numasim.engine.memsys.MemorySystem`. Both are timed per *cpu* second (``time.process_time``, all
threads), the fastest of ``REPEATS`` runs, in the same process, so host load affects both alike. See
``benchmarks/README.md`` for how to read the table.

Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_floor.py --run-benchmarks -s
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import bench_engine as b  # noqa: E402
from floor_kernel import floor_run  # noqa: E402

from numasim.engine import simulate  # noqa: E402
from numasim.engine.cores import thread_mlp  # noqa: E402
from numasim.engine.memsys import build_memory_system  # noqa: E402

N = 16_000_000
REPEATS = 3
LATENCY_TOLERANCE = 0.10  # floor vs engine mean memory latency and run time, relative (measured ~6 %, README)


def _floor_inputs(m, cal, n):  # type: ignore[no-untyped-def]
    ms = build_memory_system(m, cal)
    chunks = list(b.accesses(n))
    thread = np.concatenate([c.thread for c in chunks]).astype(np.int64)
    address = np.concatenate([c.address for c in chunks])
    page_node = np.resize(np.arange(4, dtype=np.int64), b.PAGES)  # the bench's interleave (node k = index k)
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


def _best_cpu(fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    best, out = float("inf"), None
    for _ in range(REPEATS):
        c0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - c0)
    return best, out


@pytest.mark.benchmark
def test_engine_against_floor() -> None:
    m, cal = b.machine_and_calibration()
    specs, pm = b.threads(m), b.pages()
    ms, chunks, args = _floor_inputs(m, cal, N)
    simulate(m, cal, specs, b.accesses(10_000), pm, mode="epoch")  # compile first
    floor_run(ms, *(a[:1000] for a in args[:2]), *args[2:])
    eng_cpu, r = _best_cpu(lambda: simulate(m, cal, specs, iter(chunks), pm, mode="epoch"))
    eng_lat = mean_memory_latency_ns(r)
    flo_cpu, (flo_lat, flo_end) = _best_cpu(lambda: floor_run(ms, *args))
    eng_ns, flo_ns = eng_cpu / N * 1e9, flo_cpu / N * 1e9
    lines = [
        f"machine {m.name}, calibration {cal.id}, {b.THREADS} threads, {N:,} random loads over 1 GiB, "
        f"fastest of {REPEATS} (cpu time, all threads)",
        "",
        "| | cpu ns / access | M accesses / cpu s | mean memory latency ns | run time ms |",
        "|---|---:|---:|---:|---:|",
        f"| epoch engine | {eng_ns:.1f} | {1e3 / eng_ns:.1f} | {eng_lat:.1f} | "
        f"{r.run_time_ns / 1e6:.3f} |",
        f"| floor kernel | {flo_ns:.1f} | {1e3 / flo_ns:.1f} | {flo_lat:.1f} | {flo_end / 1e6:.3f} |",
        f"| engine / floor | {eng_ns / flo_ns:.2f} | | {eng_lat / flo_lat:.3f} | "
        f"{r.run_time_ns / flo_end:.3f} |",
    ]
    print("\n" + "\n".join(lines))
    # sanity: the floor models the same queues, so it lands near the engine (not equal: see README)
    assert abs(flo_lat / eng_lat - 1) < LATENCY_TOLERANCE
    assert abs(flo_end / r.run_time_ns - 1) < LATENCY_TOLERANCE
    assert flo_ns < eng_ns
