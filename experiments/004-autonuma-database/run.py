"""Experiment 004 scenario 1: a database whose working set starts on the wrong node, under automatic NUMA balancing.

Article 004 (shared/seeds/004_13833b5aceaa5a6c.txt) reports for a MySQL/PostgreSQL server whose memory sat on the
wrong node: default balancing 3200 TPS at 12.5 ms mean latency; "aggressive" scanning (scan_delay_ms 100,
scan_period_min_ms 2000, scan_size_mb 512) plus binding (``numactl --physcpubind=... --membind=0``) 4480 TPS at
8.9 ms. It gives neither the machine nor the database, so this script builds a stand-in (README.md says what stands
for what) on the shipped, calibrated 2 x E5-2680 v2 (``seed-001-e5-2680v2``):

* the buffer pool: ``--pool-mb`` MiB, loaded (first-touched) by a thread on node 1;
* the workers: ``--workers`` threads allowed on node 0's cpus, each running transactions of ``--tx-accesses``
  dependent lookups (a pointer chase through the pool: index walks) with ``--compute-ns`` of work per lookup;
* four configurations: balancing off; balancing on with the kernel's default knobs; the article's aggressive
  knobs; binding (``--membind=0``: the pool is allocated on node 0 and never scanned).

A transaction's latency is its share of a worker's run time; TPS = transactions / run time. ``--scale`` shortens
the run and every time knob by the same factor (0.1: a tenth of the simulated time, scan delay and periods).

Run ``python experiments/004-autonuma-database/run.py [--out DIR] [--scale S]``: prints the table, writes
``result.json`` and ``figure.png`` (pages on node 0 over time, and TPS per configuration).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from numasim.fileio import atomic_path
from numasim.report.experiment import experiment_main
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import RunOutcome, run_workload
from numasim.workload.spec import Workload

HERE = Path(__file__).resolve().parent
MACHINE = "seed-001-e5-2680v2"
ARTICLE = {"default": {"tps": 3200, "latency_ms": 12.5}, "tuned": {"tps": 4480, "latency_ms": 8.9}}
DEFAULT_KNOBS = {"kernel.numa_balancing_scan_delay_ms": 1000, "kernel.numa_balancing_scan_period_min_ms": 1000,
                 "kernel.numa_balancing_scan_size_mb": 256}
AGGRESSIVE_KNOBS = {"kernel.numa_balancing_scan_delay_ms": 100, "kernel.numa_balancing_scan_period_min_ms": 2000,
                    "kernel.numa_balancing_scan_size_mb": 512}


def workload(pool_mb: int, workers: int, tx_per_worker: int, tx_accesses: int, compute_ns: float) -> Workload:
    """The stand-in: ``workers`` threads on node 0 chase pointers through a pool a node-1 thread loaded."""
    loader = workers
    return Workload.model_validate({
        "name": "database",
        "description": f"{pool_mb} MiB buffer pool loaded on node 1, {workers} workers on node 0",
        "threads": [{"id": k, "node": 0} for k in range(workers)] + [{"id": loader, "node": 1}],
        "allocations": [{"name": "pool", "size_bytes": pool_mb << 20, "first_touch": loader}],
        "phases": [{"name": "transactions", "pattern": "pointer_chase", "allocation": "pool",
                    "threads": list(range(workers)), "accesses": tx_per_worker * tx_accesses,
                    "compute_ns": compute_ns}],
    })  # fmt: skip


def scaled(knobs: dict[str, int], scale: float) -> list[tuple[str, int]]:
    out = []
    for name, value in knobs.items():
        out.append((name, value if name.endswith("size_mb") else max(1, round(value * scale))))
    return out


def summarise(out: RunOutcome, workers: int, tx_accesses: int) -> dict[str, Any]:
    r = out.result
    run_s = r.run_time_ns * 1e-9
    tx = sum(t.accesses for t in r.threads[:workers]) / tx_accesses
    row: dict[str, Any] = {
        "run_time_s": run_s,
        "tps": tx / run_s,
        "latency_ms": run_s * workers / tx * 1e3,
        "remote_share": r.node(1).accesses / max(1, r.accesses),
    }
    if r.kernel is not None:
        k = r.kernel
        row |= {"vmstat": k["vmstat"], "series": k["pages_per_node_series"]}
    return row


def reproduce(*, scale: float = 1.0, pool_mb: int = 256, workers: int = 4, seconds: float = 3.0,
              tx_accesses: int = 100, compute_ns: float = 100.0) -> dict[str, Any]:
    machine = load_machine(MACHINE)
    cal = resolve_calibration(machine)
    # about ``seconds`` of simulated time for the slowest (remote) configuration: ~230 ns per lookup
    tx_per_worker = max(1, int(seconds * scale * 1e9 / (230.0 + compute_ns) / tx_accesses))
    w = workload(pool_mb, workers, tx_per_worker, tx_accesses, compute_ns)
    configs: dict[str, tuple[str | None, list[tuple[str, int]]]] = {
        "off": (None, [("kernel.numa_balancing", 0)]),
        "default": (None, [("kernel.numa_balancing", 1), *scaled(DEFAULT_KNOBS, scale)]),
        "aggressive": (None, [("kernel.numa_balancing", 1), *scaled(AGGRESSIVE_KNOBS, scale)]),
        "bind": ("bind:0", [("kernel.numa_balancing", 1), *scaled(AGGRESSIVE_KNOBS, scale)]),
    }
    rows: dict[str, Any] = {}
    for name, (policy, sysctls) in configs.items():
        started = time.perf_counter()
        out = run_workload(machine, w, cal, policy=policy, sysctls=sysctls)
        rows[name] = summarise(out, workers, tx_accesses) | {"wall_s": time.perf_counter() - started,
                                                             "sysctls": sysctls, "policy": policy or "default"}
    base = rows["default"]
    for row in rows.values():
        row["tps_vs_default"] = row["tps"] / base["tps"]
        row["latency_vs_default"] = row["latency_ms"] / base["latency_ms"]
    return {
        "machine": MACHINE, "calibration": cal.id, "scale": scale, "pool_mb": pool_mb, "workers": workers,
        "tx_accesses": tx_accesses, "compute_ns": compute_ns, "tx_per_worker": tx_per_worker,
        "article": ARTICLE, "article_tps_ratio": ARTICLE["tuned"]["tps"] / ARTICLE["default"]["tps"],
        "article_latency_ratio": ARTICLE["tuned"]["latency_ms"] / ARTICLE["default"]["latency_ms"],
        "configs": rows,
    }  # fmt: skip


def table(res: dict[str, Any]) -> str:
    lines = [f"{'config':<11} {'TPS':>9} {'lat_ms':>8} {'vs default':>10} {'remote %':>9} {'migrated':>9} {'faults':>9}"]
    for name, row in res["configs"].items():
        vm = row.get("vmstat", {})
        lines.append(
            f"{name:<11} {row['tps']:>9.0f} {row['latency_ms']:>8.3f} {row['tps_vs_default']:>10.2f} "
            f"{100 * row['remote_share']:>9.1f} {vm.get('numa_pages_migrated', 0):>9} {vm.get('numa_hint_faults', 0):>9}"
        )
    lines.append(f"article: tuned/default TPS {res['article_tps_ratio']:.2f}, latency {res['article_latency_ratio']:.2f}")
    return "\n".join(lines)


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    for name, row in res["configs"].items():
        if "series" in row:
            s = row["series"]
            t = [x / 1e9 for x in s["time_ns"]]
            ax.step(t, [p[0] * 4096 / 2**20 for p in s["pages"]], where="post", label=name)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("buffer pool on node 0 (MiB)")
    ax.legend(fontsize=8)
    names = list(res["configs"])
    bx.bar(names, [res["configs"][n]["tps_vs_default"] for n in names], label="numasim")
    bx.axhline(res["article_tps_ratio"], color="k", ls="--", lw=1, label="article: tuned / default")
    bx.set_ylabel("TPS relative to default balancing")
    bx.legend(fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


def main(argv: list[str] | None = None) -> int:
    return experiment_main(argv, doc=__doc__ or "", default_out=HERE, reproduce=reproduce, table=table, figure=figure,
                           scale=1.0)


if __name__ == "__main__":
    sys.exit(main())
