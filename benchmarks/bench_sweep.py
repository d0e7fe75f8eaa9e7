"""Benchmark: a 32-run sweep on a Dask LocalCluster of 2 workers against 1 worker (issue 12's target: at least
1.8x faster on 2). Each run is a STREAM triad of about 1 s on seed-003-2node (4 policies x 8 seeds).

Run by hand: ``python -m pytest benchmarks/bench_sweep.py -s --run-benchmarks`` (``make bench``). On a 2-core box
the speed-up can reach 2 only when nothing else runs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from numasim.sweep import loads_sweep, run

ROOT = Path(__file__).resolve().parents[1]

SPEC = """
name = "bench-sweep"
repeats = 8
[defaults]
machine = "seed-003-2node"
workload = "triad.toml"
"workload.threads" = [{count = 2, node = 0}, {count = 2, node = 1}]
"workload.allocations" = [
  {name = "a", size_bytes = "64M", first_touch = 0},
  {name = "b", size_bytes = "64M", first_touch = 0},
  {name = "c", size_bytes = "64M", first_touch = 0},
]
[grid]
policy = ["local", "interleave:all", "bind:0", "preferred:1"]
"""


@pytest.mark.benchmark
def test_sweep_scales_with_workers(tmp_path: Path) -> None:
    spec = loads_sweep(SPEC, "bench", ROOT / "examples" / "sweeps")
    assert len(spec.expand()) == 32
    print("\n| engine | workers | sweep wall s (start included) | runs per s | mean run s |\n|---|---:|---:|---:|---:|")
    for engine in ("dask", "pool"):
        walls, per_run = {}, {}
        for n in (1, 2):
            t0 = time.perf_counter()
            opts = {"workers": n} if engine == "dask" else {"processes": n}
            table = run(spec, tmp_path / f"{engine}{n}", figures=False, **opts)
            walls[n] = time.perf_counter() - t0
            assert (table["status"] == "ok").all()
            per_run[n] = table["wall_s"].mean()
        for n in (1, 2):
            print(f"| {engine} | {n} | {walls[n]:.1f} | {32 / walls[n]:.2f} | {per_run[n]:.2f} |")
        speedup = walls[1] / walls[2]
        print(f"{engine}: speed-up {speedup:.2f}x (target >= 1.8x: {'met' if speedup >= 1.8 else 'missed'})")
