"""Workload generation against the thread count: linear, 10,000 threads and 10^6 accesses in seconds.

``examples/workloads/stream.toml`` with ``threads = [{count = N, node = 0}]`` and every phase cut to a fixed total
of 10^6 accesses (so only the thread count changes), generated as ``numasim trace generate`` and ``numasim run``
do. Issue 13 measured the old generator at 4.4 s for N = 125, 24.6 s at 500 and over 90 s at 1000 (quadratic:
every thread re-sized every member of every phase and spawned every thread's seed sequence). Prints one row per
N with the time per thread, which stays flat when growth is linear. Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_generate.py --run-benchmarks -s
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from numasim.workload.generate import generate
from numasim.workload.spec import Workload, loads_workload

ROOT = Path(__file__).resolve().parents[1]
TOTAL_ACCESSES = 1_000_000
THREAD_COUNTS = (125, 500, 1000, 2500, 10_000)


def stream_workload(threads: int, total_accesses: int = TOTAL_ACCESSES) -> Workload:
    """The shipped STREAM workload run by ``threads`` threads, ``total_accesses`` accesses in all."""
    text = (ROOT / "examples" / "workloads" / "stream.toml").read_text()
    text = text.replace("threads = [{count = 4, node = 0}]", f"threads = [{{count = {threads}, node = 0}}]")
    phases = text.count('pattern = "stream_')
    per_thread_phase = total_accesses // (phases * threads)
    return loads_workload(text.replace('pattern = "stream_', f'accesses = {per_thread_phase}\npattern = "stream_'))


@pytest.mark.benchmark
def test_generation_is_linear_in_threads() -> None:
    rows = []
    for n in THREAD_COUNTS:
        w = stream_workload(n)
        t0 = time.perf_counter()
        accesses = sum(len(c) for c in generate(w, seed=0))
        rows.append((n, accesses, time.perf_counter() - t0))
    lines = ["| threads | accesses | seconds | ms per thread |", "|---:|---:|---:|---:|"]
    lines += [f"| {n:,} | {a:,} | {s:.2f} | {1e3 * s / n:.3f} |" for n, a, s in rows]
    print("\n" + "\n".join(lines))
    assert all(a == rows[0][1] for _, a, _ in rows)  # the same work at every N
