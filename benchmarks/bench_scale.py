"""``numasim run`` against the node count: time and peak memory of examples/workloads/kv-store.toml on crossbars.

The machine is ``numasim.topology.builders.crossbar(N)`` (every node on one router, as issue 13's 256-node
machine), saved as TOML; each run is ``numasim run -m MACHINE.toml -w kv-store.toml --nominal`` in a child
process of its own, so its peak RSS is its own (the interpreter and imports included, about 0.2 GiB). Issue 13
measured 67 s and 2.0 GiB at 256 nodes; the target is 20 s and 1 GiB. Work that grows with the node count:
routes (N^2 pairs), zonelists (N sorts of N), route classes (2 N^2 classes, stored sparse) and the per pair
statistics (N^2 rows). Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_scale.py --run-benchmarks -s
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_COUNTS = (16, 64, 128, 256)
TARGET_S, TARGET_GIB = 20.0, 1.0

_CHILD = textwrap.dedent(
    """
    import io, contextlib, resource, sys, time
    from numasim.cli import main
    from numasim.topology.builders import crossbar
    from numasim.topology.io import save_machine_toml

    path = sys.argv[2]
    save_machine_toml(crossbar(int(sys.argv[1])), path)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["run", "-m", path, "-w", "examples/workloads/kv-store.toml", "--nominal", "--no-progress"])
    wall = time.perf_counter() - t0
    print(code, wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def run_on_crossbar(nodes: int, directory: Path) -> tuple[float, float]:
    """Wall seconds of ``numasim run`` (loading the machine included) and the child's peak RSS in GiB."""
    machine = directory / f"crossbar-{nodes}.toml"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(nodes), str(machine)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    code, wall, peak_kib = out.stdout.split()
    assert code == "0", out.stderr
    return float(wall), int(peak_kib) / (1 << 20)


@pytest.mark.benchmark
def test_run_time_and_memory_against_node_count(tmp_path: Path) -> None:
    rows = [(n, *run_on_crossbar(n, tmp_path)) for n in NODE_COUNTS]
    lines = ["| nodes | run wall s | peak RSS GiB |", "|---:|---:|---:|"]
    lines += [f"| {n} | {wall:.1f} | {rss:.2f} |" for n, wall, rss in rows]
    n, wall, rss = rows[-1]
    lines.append(
        f"{n} nodes: target {TARGET_S:.0f} s and {TARGET_GIB:.0f} GiB: "
        f"{'met' if wall <= TARGET_S and rss <= TARGET_GIB else 'missed'}"
    )
    print("\n" + "\n".join(lines))
