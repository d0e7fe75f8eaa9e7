"""Experiment 004 scenario 3: latency spikes of a containerised service under automatic NUMA balancing.

Article 004 (shared/seeds/004_13833b5aceaa5a6c.txt): on a Kubernetes node, a microservice showed unpredictable
latency spikes, ``perf top`` showed ``migrate_pages`` at 5 % of the cpu, and turning NUMA balancing off brought the
99th percentile latency from 12 ms down to 3.2 ms. The article names neither the service nor the machine; this
script's stand-in (README.md) runs on the shipped, calibrated 2 x E5-2680 v2 (``seed-001-e5-2680v2``):

* the service: ``--workers`` threads, half on each node (the container's cpus span both sockets), each handling
  requests of ``--request-accesses`` dependent lookups (a pointer chase) with ``--compute-ns`` of work each;
* its data: ``--data-mb`` MiB shared by all workers, first-touched by worker 0 (node 0) when the service starts;
* balancing on (the kernel's defaults, time knobs scaled by ``--scale``) against off.

A request's latency is the time from its first lookup to the next request's first lookup (numasim's
``request_accesses``); the script reports the percentiles and where the kernel's time went.

Run ``python experiments/004-autonuma-container/run.py [--out DIR] [--scale S]``: prints the table, writes
``result.json`` and ``figure.png``. By default it runs twice: 3 s of the service with the kernel's knobs
(scale 1), and 0.3 s with every time knob divided by ten (scale 0.1: the scanner meets ten times as many requests
per pass); the figure shows the latter.
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
MACHINE = "seed-001-e5-2680v2"
ARTICLE = {"p99_ms_balancing_on": 12.0, "p99_ms_balancing_off": 3.2}
KNOBS = {"kernel.numa_balancing_scan_delay_ms": 1000, "kernel.numa_balancing_scan_period_min_ms": 1000,
         "kernel.numa_balancing_scan_period_max_ms": 60000}


def workload(workers: int, data_mb: int, requests: int, request_accesses: int, compute_ns: float) -> Workload:
    half = workers // 2
    return Workload.model_validate({
        "name": "service",
        "description": f"{workers} workers over 2 nodes, requests of {request_accesses} lookups in {data_mb} MiB",
        "threads": [{"id": k, "node": 0 if k < half else 1} for k in range(workers)],
        "request_accesses": request_accesses,
        "allocations": [{"name": "data", "size_bytes": data_mb << 20, "first_touch": 0}],
        "phases": [{"name": "serve", "pattern": "pointer_chase", "allocation": "data",
                    "accesses": requests * request_accesses, "compute_ns": compute_ns}],
    })  # fmt: skip


def reproduce(*, scale: float = 1.0, workers: int = 4, data_mb: int = 128, seconds: float = 3.0,
              request_accesses: int = 500, compute_ns: float = 200.0) -> dict[str, Any]:
    machine = load_machine(MACHINE)
    cal = resolve_calibration(machine)
    per_request_ns = request_accesses * (compute_ns + 130.0)
    requests = max(1, int(seconds * scale * 1e9 / per_request_ns))
    w = workload(workers, data_mb, requests, request_accesses, compute_ns)
    knobs = [(k, max(1, round(v * scale))) for k, v in KNOBS.items()]
    rows: dict[str, Any] = {}
    for name, sysctls in (("balancing_off", [("kernel.numa_balancing", 0)]),
                          ("balancing_on", [("kernel.numa_balancing", 1), *knobs])):  # fmt: skip
        r = run_workload(machine, w, cal, sysctls=sysctls).result
        rq = r.requests or {}
        row: dict[str, Any] = {k: rq.get(k) for k in ("count", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")}
        row["run_time_ms"] = r.run_time_ns / 1e6
        row["sysctls"] = sysctls
        if r.kernel is not None:
            row["vmstat"] = r.kernel["vmstat"]
            row["fault_ms_by_thread"] = {k: v / 1e6 for k, v in r.kernel["fault_ns_by_agent"].items()}
        rows[name] = row
    on, off = rows["balancing_on"], rows["balancing_off"]
    return {"machine": MACHINE, "calibration": cal.id, "scale": scale, "workers": workers, "data_mb": data_mb,
            "request_accesses": request_accesses, "compute_ns": compute_ns, "requests_per_worker": requests,
            "article": ARTICLE, "article_p99_ratio": ARTICLE["p99_ms_balancing_on"] / ARTICLE["p99_ms_balancing_off"],
            "p99_ratio": on["p99_ns"] / off["p99_ns"], "runs": rows}  # fmt: skip


def table(res: dict[str, Any]) -> str:
    lines = [f"{'config':<14} {'requests':>9} {'mean_us':>8} {'p50_us':>8} {'p99_us':>8} {'p99.9_us':>9} {'max_us':>8}"]
    for name, r in res["runs"].items():
        lines.append(f"{name:<14} {r['count']:>9} {r['mean_ns'] / 1e3:>8.1f} {r['p50_ns'] / 1e3:>8.1f} "
                     f"{r['p99_ns'] / 1e3:>8.1f} {r['p999_ns'] / 1e3:>9.1f} {r['max_ns'] / 1e3:>8.1f}")
    lines.append(f"p99 on / off: numasim {res['p99_ratio']:.2f}, article {res['article_p99_ratio']:.2f} (12 ms / 3.2 ms)")
    return "\n".join(lines)


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 3.5), layout="constrained")
    ax = fig.add_subplot()
    qs = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
    x = range(len(qs))
    for k, (name, r) in enumerate(res["runs"].items()):
        ax.bar([i + (k - 0.5) * 0.4 for i in x], [r[q] / 1e3 for q in qs], 0.4, label=name)
    ax.set_xticks(list(x), ["p50", "p90", "p99", "p99.9", "max"])
    ax.set_yscale("log")
    ax.set_ylabel("request latency (us)")
    ax.set_title(f"service on {res['machine']}: request latency, balancing off vs on", fontsize=9)
    ax.legend(fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


def reproduce_scales(scale: float = 1.0) -> dict[str, Any]:
    """The run at ``scale``; at 1 also at 0.1 (the scanner ten times as frequent for the same requests)."""
    return {f"scale_{s:g}": reproduce(scale=s) for s in ([1.0, 0.1] if scale == 1.0 else [scale])}


def tables(results: dict[str, Any]) -> str:
    return "\n".join(
        f"{name}: time knobs x {r['scale']:g}, {r['requests_per_worker']} requests per worker\n{table(r)}"
        for name, r in results.items()
    )


def main(argv: list[str] | None = None) -> int:
    return experiment_main(
        argv, doc=__doc__ or "", default_out=HERE, reproduce=reproduce_scales, table=tables,
        figure=lambda results, path: figure(list(results.values())[-1], path), scale=1.0,
    )


if __name__ == "__main__":
    sys.exit(main())
