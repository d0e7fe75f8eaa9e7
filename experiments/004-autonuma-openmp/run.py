"""Experiment 004 scenario 2: an OpenMP-like job on 4 nodes, balancing on vs off with ``--interleave=all``.

Article 004 (shared/seeds/004_13833b5aceaa5a6c.txt): an OpenMP program on a 4-node server reached 2.8x the
performance of one node with automatic NUMA balancing on, and 3.9x with balancing off and
``numactl --interleave=all`` (4x is the ideal). The article names neither the program nor the machine; this
script's stand-in (README.md) runs on the shipped, calibrated 4-socket ``seed-000-4node``:

* one array of ``--array-mb`` MiB, initialised by the master thread (node 0): first touch puts it all on node 0;
* ``--threads-per-node`` threads bound to each node (``OMP_PLACES=sockets``), each sweeping its own slice
  (``schedule(static)``) ``--passes`` times with ``--compute-ns`` of work per cache line;
* the baseline: the same total work by the threads of node 0 alone, memory local;
* configurations on all 4 nodes: balancing on (first touch), balancing off (first touch), balancing off with
  ``--interleave=all``.

The job lasts about 0.1-0.4 s of simulated time, so the scanner's time knobs are scaled by ``--scale`` (default
0.01: scan_delay_ms 10, scan_period_min_ms 10, scan_period_max_ms 600); the per-page costs of faults and
migration are not scaled (see README.md).

Run ``python experiments/004-autonuma-openmp/run.py [--out DIR]``: prints the table, writes ``result.json`` and
``figure.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from numasim.fileio import atomic_path
from numasim.report.experiment import experiment_main
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

HERE = Path(__file__).resolve().parent
MACHINE = "seed-000-4node"
ARTICLE = {"balancing_on": 2.8, "off_interleave": 3.9}
KNOBS = {"kernel.numa_balancing_scan_delay_ms": 1000, "kernel.numa_balancing_scan_period_min_ms": 1000,
         "kernel.numa_balancing_scan_period_max_ms": 60000}


def workload(nodes: list[int], threads_per_node: int, array_mb: int, passes: float, compute_ns: float) -> Workload:
    threads = [{"id": k, "node": n} for k, n in enumerate(n for n in nodes for _ in range(threads_per_node))]
    return Workload.model_validate({
        "name": "openmp",
        "description": f"{len(threads)} threads on nodes {nodes} sweep their slices of {array_mb} MiB",
        "threads": threads,
        "allocations": [{"name": "a", "size_bytes": array_mb << 20, "first_touch": 0}],
        "phases": [{"name": "sweep", "pattern": "sequential", "allocation": "a", "split": True, "passes": passes,
                    "compute_ns": compute_ns}],
    })  # fmt: skip


def reproduce(*, scale: float = 0.01, array_mb: int = 256, threads_per_node: int = 4, passes: float = 40.0,
              compute_ns: float = 10.0) -> dict[str, Any]:
    machine = load_machine(MACHINE)
    cal = resolve_calibration(machine)
    knobs = [(k, max(1, round(v * scale))) for k, v in KNOBS.items()]
    all_nodes = [n.id for n in machine.nodes]
    one = workload([all_nodes[0]], threads_per_node, array_mb, passes, compute_ns)
    four = workload(all_nodes, threads_per_node, array_mb, passes, compute_ns)
    runs = {
        "one_node": (one, None, [("kernel.numa_balancing", 0)]),
        "balancing_on": (four, None, [("kernel.numa_balancing", 1), *knobs]),
        "balancing_off": (four, None, [("kernel.numa_balancing", 0)]),
        "off_interleave": (four, "interleave:all", [("kernel.numa_balancing", 0)]),
    }
    rows: dict[str, Any] = {}
    for name, (w, policy, sysctls) in runs.items():
        out = run_workload(machine, w, cal, policy=policy, sysctls=sysctls)
        r = out.result
        row: dict[str, Any] = {"run_time_ms": r.run_time_ns / 1e6, "policy": policy or "default", "sysctls": sysctls,
                               "pages_end": {str(n.node): n.pages_resident for n in r.nodes}}
        if r.kernel is not None:
            row["vmstat"] = r.kernel["vmstat"]
            row["series"] = r.kernel["pages_per_node_series"]
        rows[name] = row
    base = rows["one_node"]["run_time_ms"]
    for row in rows.values():
        row["speedup"] = base / row["run_time_ms"]
    return {"machine": MACHINE, "calibration": cal.id, "scale": scale, "array_mb": array_mb,
            "threads_per_node": threads_per_node, "passes": passes, "compute_ns": compute_ns,
            "article_speedup": ARTICLE, "runs": rows}  # fmt: skip


def table(res: dict[str, Any]) -> str:
    lines = [f"{'config':<15} {'run_ms':>8} {'speedup':>8} {'article':>8} {'migrated':>9}"]
    for name, row in res["runs"].items():
        art = res["article_speedup"].get(name)
        lines.append(f"{name:<15} {row['run_time_ms']:>8.2f} {row['speedup']:>8.2f} "
                     f"{'' if art is None else f'{art:.1f}':>8} {row.get('vmstat', {}).get('numa_pages_migrated', ''):>9}")
    return "\n".join(lines)


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    names = [n for n in res["runs"] if n != "one_node"]
    x = range(len(names))
    bx.bar([i - 0.2 for i in x], [res["runs"][n]["speedup"] for n in names], 0.4, label="numasim")
    bx.bar([i + 0.2 for i in x], [res["article_speedup"].get(n, 0) for n in names], 0.4, label="article 004")
    bx.set_xticks(list(x), names, fontsize=8)
    bx.set_ylabel("speedup over one node")
    bx.legend(fontsize=8)
    s = res["runs"]["balancing_on"].get("series")
    if s:
        t = [v / 1e6 for v in s["time_ns"]]
        for j, nid in enumerate(s["node_ids"]):
            ax.step(t, [p[j] * 4096 / 2**20 for p in s["pages"]], where="post", label=f"node {nid}")
        ax.set_xlabel("simulated time (ms)")
        ax.set_ylabel("MiB of the array")
        ax.set_title("balancing on: where the array is", fontsize=9)
        ax.legend(fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


def main(argv: list[str] | None = None) -> int:
    return experiment_main(argv, doc=__doc__ or "", default_out=HERE, reproduce=reproduce, table=table, figure=figure,
                           scale=0.01)


if __name__ == "__main__":
    sys.exit(main())
