"""Transfer check for ``numasim topo reconfigure`` on the kerncraft machine files (likwid-bench, local memory).

Each clustered machine (SNC2/SNC4, CoD, NPS4) is built with one cluster's measured load-bandwidth plateau per
node, then moved to one node per socket: the merged controller's bandwidth is a prediction of the bandwidth
the whole socket reaches with all its cores, which the same files measured. The other direction splits a
machine built from the all-core socket bandwidth and predicts one cluster's plateau.

    .venv/bin/python experiments/reconfigure-kerncraft/run.py

Writes ``result.json`` beside this file and prints the table of the README. No fit is involved: every number
on the predicted side is one measured number of the other side, moved by the transfer rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from numasim.errors import TopologyError
from numasim.fileio import atomic_write_text
from numasim.timing.model import nominal_calibration
from numasim.timing.transfer import transfer_calibration
from numasim.topology.builders import multi_die
from numasim.topology.cluster_mode import ClusterMode

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / ".." / "shared" / "data" / "kerncraft"
FILES = [
    "SkylakeSP_Gold-6148_SNC.yml", "CascadelakeSP_Gold-6248_SNC.yml", "IcelakeSP_Platinum-8360Y.yml",
    "SapphireRapids_Platinum-8470.yml", "HaswellEP_E5-2695v3_CoD.yml", "BroadwellEP_E5-2697v4_CoD.yml",
    "Zen_EPYC-7451.yml", "Zen2_EPYC-7452.yml",
]
TARGET_PCT = 15.0
ON_DIE_PRIOR = (10.0, 100.0)  # only shapes latency; bandwidth per cluster does not depend on it


def check(file: str) -> dict[str, object]:
    data = yaml.safe_load((DATA / file).read_text(encoding="utf-8"))
    load = [float(x.split()[0]) for x in data["benchmarks"]["measurements"]["MEM"][1]["results"]["load"]]
    k, cores = data["NUMA domains per socket"], data["cores per NUMA domain"]
    cluster_gb_s, socket_gb_s = max(load[:cores]), load[-1]
    amd = "EPYC" in data["model name"]
    family = "nps" if amd else ("cod" if " v3 " in data["model name"] or " v4 " in data["model name"] else "snc")
    mode = f"NPS{k}" if amd else f"SNC{k}"

    def build(mode_name: str, bandwidth_gb_s: float):  # type: ignore[no-untyped-def]
        m = multi_die(data["sockets"], mode_name, cores_per_socket=k * cores,
                      threads_per_core=data["threads per core"], socket_bandwidth_gb_s=bandwidth_gb_s)
        return m.model_copy(update={"cpu_model": data["model name"]})

    clustered = build(mode, cluster_gb_s * k)
    merged = transfer_calibration(clustered, nominal_calibration(clustered), ClusterMode(family, 1))
    merged_gb_s = merged.calibration.controllers[0].read_bandwidth_gb_s
    whole = build("SNC1" if not amd else "NPS1", socket_gb_s)
    split = transfer_calibration(whole, nominal_calibration(whole), ClusterMode(family, k),
                                 die_latency_ns=ON_DIE_PRIOR[0], die_bandwidth_gb_s=ON_DIE_PRIOR[1],
                                 threads_per_core=data["threads per core"])
    split_gb_s = split.calibration.controllers[0].read_bandwidth_gb_s
    return {
        "file": file,
        "cpu": data["model name"],
        "mode": ClusterMode(family, k).label,
        "cluster_measured_gb_s": cluster_gb_s,
        "socket_measured_gb_s": socket_gb_s,
        "merge_predicted_socket_gb_s": round(merged_gb_s, 2),
        "merge_error_pct": round(100 * (merged_gb_s / socket_gb_s - 1), 1),
        "split_predicted_cluster_gb_s": round(split_gb_s, 2),
        "split_error_pct": round(100 * (split_gb_s / cluster_gb_s - 1), 1),
    }


def main() -> None:
    rows, refused = [], []
    for f in FILES:
        try:
            rows.append(check(f))
        except TopologyError as exc:  # a platform whose nodes per socket are fixed has no mode to move to
            refused.append({"file": f, "refused": str(exc)})
    worst = max(max(abs(r["merge_error_pct"]), abs(r["split_error_pct"])) for r in rows)  # type: ignore[arg-type]
    atomic_write_text(HERE / "result.json", json.dumps({"rows": rows, "refused": refused, "worst_abs_pct": worst,
                                                          "target_pct": TARGET_PCT}, indent=2) + "\n")
    print("| cpu | mode | cluster GB/s | socket GB/s | merge: socket predicted | error % | split: cluster predicted | error % |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cpu']} | {r['mode']} | {r['cluster_measured_gb_s']} | {r['socket_measured_gb_s']} | "
              f"{r['merge_predicted_socket_gb_s']} | {r['merge_error_pct']:+} | {r['split_predicted_cluster_gb_s']} | "
              f"{r['split_error_pct']:+} |")
    print(f"\nworst |error| {worst} % (target {TARGET_PCT} %)")
    for r in refused:
        print(f"not transferred: {r['file']}: {r['refused']}")


if __name__ == "__main__":
    main()
