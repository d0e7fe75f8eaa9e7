"""Experiment 002-hop-ratios: Drepper's 0/1/2-hop read and write cost ratios on a 4-socket Opteron.

Source article 002 (Drepper, "What every programmer should know about memory", part 4, section 5.4) quotes
AMD's costs for a 4-socket Opteron (a 2-D hypercube: nodes 0-1-3-2-0, so 0 and 3 are two hops apart): 1-hop reads
+9 %, 2-hop reads +30 %, 2-hop writes +49 % relative to a 0-hop read; 2-hop writes +32 % relative to 0-hop writes
and +17 % relative to 1-hop writes; and his own measurement: a 1-hop remote read is 20 % slower (bandwidth).

Here, on the shipped ``seed-002-opteron-4s`` machine and its shipped calibration (fitted on AMD's read ratios):

* read cost by hops: the virtual ``mlc --latency_matrix`` (a dependent pointer chase per cell, engine-timed),
  row of node 0;
* write cost by hops: a dependent chain of stores to random lines (``ThreadSpec(dependent=True)``, all
  writes) from a cpu of node 0 to memory bound to each node, engine-timed;
* 1-hop read slowdown: the virtual ``mlc --bandwidth_matrix`` (read-only streams from the cpus of node 0),
  cell (0, 1) over cell (0, 0);
* 1-hop write slowdown: Drepper's write test beyond the caches (his section 3.5.1 kernel: stores streaming
  over a 32 MiB array, here from both cpus of node 0, engine-timed as the virtual STREAM times a pass). He
  found such writes "not measurably slower" on the remote node than on the local one: the article's 1.00.

Run ``python experiments/002-hop-ratios/run.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from numasim.calibrate.parsers.mlc import parse_mlc_text
from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.fileio import save_figure
from numasim.kernel.kernel import Kernel
from numasim.timing import resolve_calibration
from numasim.tools.context import tool_context
from numasim.tools.numactl import run_numactl
from numasim.tools.stream import first_touched_arrays, streaming_pass_ns
from numasim.topology.io import load_machine
from numasim.topology.routing import hop_table
from numasim.workload.access import AccessChunk

HERE = Path(__file__).resolve().parent
MACHINE = "seed-002-opteron-4s"
ARTICLE = {
    "read_1hop_vs_read_0hop": 1.09,
    "read_2hop_vs_read_0hop": 1.30,
    "write_2hop_vs_read_0hop": 1.49,
    "write_2hop_vs_write_0hop": 1.32,
    "write_2hop_vs_write_1hop": 1.17,
    "read_bandwidth_1hop_vs_0hop": 0.80,
    "write_bandwidth_1hop_vs_0hop": 1.00,
}
STORES = 2000
WRITE_ARRAY_ELEMENTS = 4_000_000  # 32 MiB of doubles: far beyond the 1 MiB L2s


def _store_cost_ns(machine: Any, cal: Any, mem: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    lines = rng.choice(1 << 20, size=STORES, replace=False).astype(np.uint64)
    pm = PageMap()
    pm.assign(0, np.full((1 << 20) * 64 // 4096, mem, dtype=np.int16))
    r = simulate(machine, cal, [ThreadSpec(0, cpu=machine.node(0).cpus[0], dependent=True)],
                 [AccessChunk.build(lines * np.uint64(64), is_write=True)], pm, seed=seed, record_latencies=False)
    return r.run_time_ns / STORES


def _write_mb_s(machine: Any, cal: Any, mem: int) -> float:
    """Stores streaming over one array bound to node ``mem``, from every cpu of node 0 (each its block)."""
    cpus = sorted(machine.node(0).cpus)
    ctx = tool_context(machine, cal, cpunodebind=[0], membind=[mem])
    bounds = np.linspace(0, WRITE_ARRAY_ELEMENTS, len(cpus) + 1).astype(np.int64)
    arrays = first_touched_arrays(ctx, ["c"], WRITE_ARRAY_ELEMENTS, cpus, bounds, "write test")
    pass_ns = streaming_pass_ns(ctx, cpus, arrays, bounds, (), ("c",))
    return WRITE_ARRAY_ELEMENTS * 8 / pass_ns * 1e3


def reproduce() -> dict[str, Any]:
    m = load_machine(MACHINE)
    cal = resolve_calibration(m)
    hops = hop_table(m)
    row0 = {n: int(hops[m.index_of(0)][m.index_of(n)]) for n in m.node_ids}
    by_hops = {h: min(n for n, k in row0.items() if k == h) for h in sorted(set(row0.values()))}
    kernel = Kernel(m)
    run = run_numactl(kernel, ["mlc", "--latency_matrix"], calibration=cal)
    mlc_text = run.stdout
    lat = parse_mlc_text(mlc_text).latency_matrix
    assert lat is not None
    read = {h: lat.cell(0, n) for h, n in by_hops.items()}
    write = {h: _store_cost_ns(m, cal, n) for h, n in by_hops.items()}
    bw_text = run_numactl(kernel, ["mlc", "--bandwidth_matrix"], calibration=cal).stdout
    bw = parse_mlc_text(bw_text).bandwidth_matrix
    assert bw is not None
    read_mb_s = {h: bw.cell(0, n) for h, n in by_hops.items()}
    write_mb_s = {h: _write_mb_s(m, cal, n) for h, n in by_hops.items() if h <= 1}
    model = {
        "read_1hop_vs_read_0hop": read[1] / read[0],
        "read_2hop_vs_read_0hop": read[2] / read[0],
        "write_2hop_vs_read_0hop": write[2] / read[0],
        "write_2hop_vs_write_0hop": write[2] / write[0],
        "write_2hop_vs_write_1hop": write[2] / write[1],
        "read_bandwidth_1hop_vs_0hop": read_mb_s[1] / read_mb_s[0],
        "write_bandwidth_1hop_vs_0hop": write_mb_s[1] / write_mb_s[0],
    }
    return {"model": model, "read_ns": read, "write_ns": write, "read_mb_s": read_mb_s, "write_mb_s": write_mb_s,
            "nodes_by_hops": by_hops, "mlc_text": mlc_text + bw_text}


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ARTICLE)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(x - 0.2, [ARTICLE[n] for n in names], 0.4, label="article 002 (AMD / Drepper)")
    ax.bar(x + 0.2, [res["model"][n] for n in names], 0.4, label="numasim")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(x, [n.replace("_vs_", "\nvs ").replace("_", " ") for n in names], fontsize=7)
    ax.set_ylabel("ratio")
    ax.set_title("Hop cost ratios, 4-socket Opteron (reads fitted, writes and bandwidth predicted)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    res = reproduce()
    print(res["mlc_text"])
    print(f"{'ratio':<30}{'article':>9}{'numasim':>9}")
    for k, a in ARTICLE.items():
        print(f"{k:<30}{a:>9.2f}{res['model'][k]:>9.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"machine": MACHINE, "article": ARTICLE, "model": res["model"],
              "read_ns": {str(k): v for k, v in res["read_ns"].items()},
              "write_ns": {str(k): v for k, v in res["write_ns"].items()},
              "read_mb_s": {str(k): v for k, v in res["read_mb_s"].items()},
              "write_mb_s": {str(k): round(v, 1) for k, v in res["write_mb_s"].items()}}
    tmp = args.out / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out / "result.json")
    figure(res, args.out / "figure.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
