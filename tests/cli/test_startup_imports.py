"""Kernel-only commands start without the engine, numba, scipy, matplotlib, simpy, networkx or the fitting code.

Issue 11: scripts call numactl, numastat and memhog through the shims many times, so their start-up matters
(``benchmarks/bench_startup.py`` times it; a timing is never asserted). What is asserted is deterministic: which
heavy packages a fresh process has imported after running the command.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numba", "scipy", "matplotlib", "simpy", "networkx", "numasim.engine", "numasim.calibrate", "numasim.sweep")

_PROBE = """
import sys
from numasim.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted({m for m in sys.modules for h in HEAVY if m == h or m.startswith(h + ".")})
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY), 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["numactl", "--machine", "seed-001-e5-2680v2", "--hardware"],
        ["numactl", "--machine", "seed-001-e5-2680v2", "-m", "0", "memhog", "1m"],
        ["numastat", "--machine", "seed-001-e5-2680v2"],
        ["numastat", "--help"],
        ["numactl", "--help"],
        ["kernel", "zonelists", "seed-001-e5-2680v2"],
    ],
    ids=lambda a: " ".join(a[:2]) if a[0] != "numactl" or len(a) < 5 else "numactl memhog",
)
def test_a_kernel_only_command_imports_nothing_heavy(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120)
    line = next((x for x in done.stderr.splitlines() if x.startswith("HEAVY:")), None)
    assert line is not None, done.stderr[-2000:]
    heavy = [m for m in line[6:].split(",") if m]
    assert heavy == [], f"numasim {' '.join(argv)} imported {heavy}"


@pytest.mark.parametrize("argv", [["numactl", "--machine", "seed-001-e5-2680v2", "--hardware"], ["numastat", "--help"],
                                  ["taskset", "--help"]])  # fmt: skip
def test_numactl_numastat_and_taskset_start_without_typer(argv: list[str]) -> None:
    probe = _PROBE.replace("HEAVY:", "TYPER:").replace(repr(HEAVY), repr(("typer", "click")))
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    line = next((x for x in done.stderr.splitlines() if x.startswith("TYPER:")), None)
    assert line == "TYPER:", done.stderr[-2000:]
