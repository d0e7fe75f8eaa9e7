"""Start-up of kernel-only commands (issue 11 asks for 0.3 s): wall and user cpu seconds per call.

Scripts call ``numactl``, ``numastat`` and ``memhog`` through the shims many times, so each call's start is
what a suite of them waits for. Every command runs as its own process, as a script would start it, with
Python's bytecode cache enabled (this sandbox sets ``PYTHONDONTWRITEBYTECODE``: without a cache every call
recompiles numasim, 0.27 s more than a user pays), after one warm-up call; the median of ``RUNS`` is printed
beside the 0.3 s target. A timing is not asserted (the host is shared); which heavy modules the commands
import is, deterministically, in ``tests/cli/test_startup_imports.py``.

Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_startup.py --run-benchmarks -s
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

import pytest

RUNS = 7
TARGET_S = 0.3
MACHINE = "seed-001-e5-2680v2"
COMMANDS = (
    ["numactl", "--machine", MACHINE, "--hardware"],
    ["numactl", "--machine", MACHINE, "-m", "0", "memhog", "1m"],
    ["numastat", "--machine", MACHINE],
    ["numactl", "--help"],
    ["--help"],
)


NUMASIM = [sys.executable, "-c", "from numasim.cli import run; run()"]
"""What the installed ``numasim`` script runs (``numasim.cli:run``), started the same way."""


def _one(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([*NUMASIM, *argv], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime


@pytest.mark.benchmark
def test_kernel_only_start_up() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows = ["| command | median wall s | median user cpu s | target s |", "|---|---:|---:|---:|"]
    for argv in COMMANDS:
        _one(argv, env)  # warm-up: writes the bytecode cache, loads the shipped machine's files into the page cache
        runs = [_one(argv, env) for _ in range(RUNS)]
        wall = statistics.median(w for w, _ in runs)
        user = statistics.median(u for _, u in runs)
        rows.append(f"| numasim {' '.join(argv)} | {wall:.3f} | {user:.3f} | {TARGET_S} |")
    load = os.getloadavg()[0]
    print(f"\nkernel-only start-up, median of {RUNS} (load average {load:.2f} on {os.cpu_count()} cpus)\n"
          + "\n".join(rows))
