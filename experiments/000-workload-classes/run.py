"""Experiment 000 (study): article 000's four process classes under the kernel's four policies, run as a sweep.

Article 000 (shared/seeds/000_80688a6eb6b4e916.txt, "NUMA架构内存使用优化") sorts processes into four classes and
recommends a policy for each: a static large-memory process (a database buffer pool) -> ``--membind`` to one node;
a dynamically growing process (a JVM) -> ``MPOL_PREFERRED``, local first and then the nearest nodes; a
memory-intensive computation (AI training) -> ``--interleave=all``; a latency-sensitive process (trading) ->
``--cpunodebind`` + ``--membind`` on one node. It measures none of this. This script runs the four stand-ins
(``workloads/*.toml``, README.md says what stands for what) under ``default``, ``bind:0``, ``preferred:0`` and
``interleave:all`` on the article's machine (``seed-000-4node``, its calibration) through the sweep in
``sweep.toml`` (``numasim sweep`` runs the same file), and asks whether the article's recommendation wins.

Run ``python experiments/000-workload-classes/run.py [--out DIR]``: prints the table, writes ``result.json`` (the
sweep's table) and ``figure.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from numasim.fileio import save_figure
from numasim.report.experiment import experiment_main

HERE = Path(__file__).resolve().parent
RECOMMENDED = {"static-large": "bind:0", "dynamic-growth": "preferred:0", "bandwidth-bound": "interleave:all",
               "latency-sensitive": "bind:0"}  # fmt: skip
# what each class is judged by (the article's own words: latency, growth without failure, bandwidth, determinism)
METRIC = {"static-large": ("run_time_ms", "run time (ms)", False),
          "dynamic-growth": ("run_time_ms", "run time (ms)", False),
          "bandwidth-bound": ("accesses_per_us", "line accesses per µs", True),
          "latency-sensitive": ("request_p99_ns", "request p99 latency (ns)", False)}  # fmt: skip
POLICIES = ("default", "bind:0", "preferred:0", "interleave:all")


def reproduce() -> dict[str, Any]:
    from numasim.sweep import run

    table = run(HERE / "sweep.toml", progress=True)
    rows = []
    for r in table.to_dict("records"):
        cls = Path(str(r["workload"])).stem
        metric = METRIC[cls][0]
        rows.append({"class": cls, "policy": r["policy"], "status": r["status"], "error": r["error"] or "",
                     "metric": metric, "value": None if r["status"] != "ok" else float(r[metric]),
                     "run_time_ms": None if r["status"] != "ok" else float(r["run_time_ms"]),
                     "local_fraction": None if r["status"] != "ok" else float(r["local_fraction"])})  # fmt: skip
    verdict = {}
    for cls, (_, _, higher) in METRIC.items():
        ok = [r for r in rows if r["class"] == cls and r["value"] is not None]
        best = max(r["value"] for r in ok) if higher else min(r["value"] for r in ok)
        winners = sorted({r["policy"] for r in ok if r["value"] == best})
        verdict[cls] = {"recommended": RECOMMENDED[cls], "best": winners,
                        "recommended_is_best": RECOMMENDED[cls] in winners}  # fmt: skip
    return {"machine": "seed-000-4node", "rows": rows, "verdict": verdict}


def table(result: dict[str, Any]) -> str:
    lines = ["| class | policy | judged by | value | vs default | local share |", "|---|---|---|---:|---:|---:|"]
    for cls, (_, label, _higher) in METRIC.items():
        base = next(r["value"] for r in result["rows"] if r["class"] == cls and r["policy"] == "default")
        for r in (r for r in result["rows"] if r["class"] == cls):
            if r["value"] is None:
                lines.append(f"| {cls} | {r['policy']} | {label} | {r['status']}: {r['error'].split('.toml: ', 1)[-1]} | | |")
                continue
            rel = r["value"] / base
            lines.append(f"| {cls} | {r['policy']} | {label} | {r['value']:,.1f} | {rel:.2f}x | "
                         f"{100 * r['local_fraction']:.0f} % |")  # fmt: skip
    lines.append("")
    for cls, v in result["verdict"].items():
        lines.append(f"{cls}: article recommends {v['recommended']}; best here: {', '.join(v['best'])} "
                     f"({'agrees' if v['recommended_is_best'] else 'DISAGREES'})")  # fmt: skip
    return "\n".join(lines)


def figure(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
    for ax, (cls, (_, label, higher)) in zip(axes, METRIC.items(), strict=True):
        rows = {r["policy"]: r for r in result["rows"] if r["class"] == cls}
        values = [rows[p]["value"] or 0.0 for p in POLICIES]
        colors = ["tab:green" if p == RECOMMENDED[cls] else "tab:gray" for p in POLICIES]
        ax.bar(range(len(POLICIES)), values, color=colors)
        for k, p in enumerate(POLICIES):
            if rows[p]["value"] is None:
                ax.text(k, 0, "OOM-\nkilled", ha="center", va="bottom", color="tab:red", fontsize=9)
        ax.set_xticks(range(len(POLICIES)), POLICIES, rotation=25, ha="right")
        ax.set_title(f"{cls}\n({'higher' if higher else 'lower'} is better)", fontsize=10)
        ax.set_ylabel(label)
    fig.suptitle("Article 000's classes x policies on seed-000-4node (green: the article's recommendation)")
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(experiment_main(sys.argv[1:], doc=__doc__ or "", default_out=HERE, reproduce=reproduce, table=table,
                             figure=figure))  # fmt: skip
