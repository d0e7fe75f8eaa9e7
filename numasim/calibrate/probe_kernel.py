"""The measuring kernels of ``numasim probe``: a pointer chase (latency) and a streaming read (bandwidth).

Pure numpy and the standard library, so the probe runs on any host with numasim installed. The chase walks a
random single-cycle permutation (Sattolo's algorithm) through a ``memoryview`` of an int64 array: one
dependent load per step. The interpreter adds a fixed cost per step, so latency is the per-step time over the
large working set minus the per-step time over a cache-resident one (16 KiB) measured the same way.

Run as ``python -m numasim.calibrate.probe_kernel --working-set BYTES --repeats R`` (what the probe does
under ``numactl --cpunodebind=I --membind=J``); prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

__all__ = ["chase_ns_per_step", "read_bandwidth_gb_s", "measure"]

_SMALL_BYTES = 16 * 1024


def _cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    # Sattolo: a uniformly random permutation that is one single cycle (the chase visits every slot).
    order = rng.permutation(n)
    nxt = np.empty(n, dtype=np.int64)
    nxt[order[:-1]] = order[1:]
    nxt[order[-1]] = order[0]
    return nxt


def chase_ns_per_step(size_bytes: int, steps: int, seed: int = 0) -> float:
    n = max(size_bytes // 8, 16)
    rng = np.random.default_rng(seed)
    # spread the slots one cache line apart so every step is a different line
    stride = 8
    nxt_small = _cycle(max(n // stride, 2), rng) * stride
    arr = np.zeros(max(n // stride, 2) * stride, dtype=np.int64)
    arr[::stride] = nxt_small
    mv = arr.data  # a memoryview: indexing it yields Python ints without numpy scalar overhead
    i = 0
    for _ in range(min(steps, 1000)):  # warm up
        i = mv[i]
    t0 = time.perf_counter()
    for _ in range(steps):
        i = mv[i]
    return (time.perf_counter() - t0) / steps * 1e9


def read_bandwidth_gb_s(size_bytes: int, repeats: int) -> float:
    a = np.ones(max(size_bytes // 8, 1), dtype=np.float64)
    best = float("inf")
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t0)
    return a.nbytes / best / 1e9


def measure(size_bytes: int, repeats: int = 3, steps: int = 200_000, seed: int = 0) -> dict[str, float]:
    """Latency (ns, interpreter cost subtracted) and read bandwidth (GB/s) of memory where this process runs."""
    big = min(chase_ns_per_step(size_bytes, steps, seed) for _ in range(repeats))
    small = min(chase_ns_per_step(_SMALL_BYTES, steps, seed) for _ in range(repeats))
    return {
        "latency_ns": max(big - small, 0.1),
        "overhead_ns": small,
        "bandwidth_gb_s": read_bandwidth_gb_s(size_bytes, repeats),
    }


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - exercised through the probe subprocess
    ap = argparse.ArgumentParser(prog="numasim.calibrate.probe_kernel")
    ap.add_argument("--working-set", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200_000)
    ns = ap.parse_args(argv)
    sys.stdout.write(json.dumps(measure(ns.working_set, ns.repeats, ns.steps)) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
