"""Experiment 003-lat-mem-rd: article 003's stride x working-set latency table, local vs remote.

The article (shared/seeds/003_1ca3f7b95543d737.txt, a 2-node machine, 24 cpus, SLIT 10/21) ran its test
program under ``numactl --cpubind=0 --membind=0 ./main`` and ``--membind=1``: time per access (ns) for strides
s1, s32, s64 and random over working sets 2k .. 128m; e.g. s64 at 8m 3.15 vs 3.96 ns, s32 at 128m 10.37 vs
13.77 ns.

Here the same command lines run under the virtual numactl on the shipped ``seed-003-2node`` machine and its
shipped calibration (which was fitted on this table's s64 / 128m cells), with the virtual ``./main``
(:mod:`numasim.tools.stride_table`); the output is parsed back with numasim's stride-table parser. Alongside,
lmbench's ``lat_mem_rd 128 64 256`` (a dependent pointer chase) shows the latency the route really has: at
working sets past the caches a stride of 256 bytes (no prefetch) reaches the idle route latency.

Run ``python experiments/003-lat-mem-rd/run.py [--out DIR] [--lat-size MB]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from numasim.calibrate.parsers.lmbench import parse_lat_mem_rd_text
from numasim.calibrate.parsers.stride_table import parse_stride_table_text
from numasim.fileio import save_figure
from numasim.kernel.kernel import Kernel
from numasim.timing import resolve_calibration
from numasim.tools.numactl import run_numactl
from numasim.topology.io import load_machine

HERE = Path(__file__).resolve().parent
MACHINE = "seed-003-2node"
SIZES = ["2k", "8k", "32k", "128k", "512k", "2m", "8m", "32m", "128m"]
ARTICLE = {
    "local": {
        "s1": [1.28, 1.28, 1.26, 1.25, 1.26, 1.26, 1.28, 1.43, 1.43],
        "s32": [1.27, 1.26, 1.32, 1.78, 2.67, 2.73, 3.27, 9.95, 10.37],
        "s64": [1.28, 1.26, 1.26, 1.82, 2.43, 2.48, 3.15, 8.82, 8.92],
        "random": [2.40, 2.40, 2.40, 2.40, 4.80, 4.80, 19.20, 28.80, 52.80],
    },
    "remote": {
        "s1": [1.29, 1.28, 1.26, 1.26, 1.26, 1.26, 1.31, 1.62, 1.63],
        "s32": [1.29, 1.26, 1.33, 1.77, 2.80, 2.92, 3.95, 13.69, 13.77],
        "s64": [1.30, 1.27, 1.26, 1.82, 2.47, 2.48, 3.96, 12.93, 12.90],
        "random": [2.40, 2.40, 2.40, 2.40, 4.80, 4.80, 19.20, 31.20, 52.80],
    },
}
MEMBIND = {"local": 0, "remote": 1}


def reproduce(lat_size_mb: int = 128, strides: tuple[int, ...] = (64, 256), with_table: bool = True) -> dict[str, Any]:
    """Run ``./main`` and ``lat_mem_rd`` local and remote; parsed tables and curves."""
    m = load_machine(MACHINE)
    out: dict[str, Any] = {"table": {}, "table_text": "", "lat_mem_rd": {}, "lat_text": {}}
    for case, mem in MEMBIND.items():
        kernel = Kernel(m)
        calibration = resolve_calibration(m)
        opts = ["--cpubind=0", f"--membind={mem}"]
        if with_table:
            run = run_numactl(kernel, [*opts, "./main"], calibration=calibration)
            if run.exit_code:
                raise RuntimeError(run.stderr)
            text = f"# numactl {' '.join(opts)} ./main\n" + run.stdout
            out["table_text"] += text + "\n"
            t = parse_stride_table_text(text).tables[0]
            out["table"][case] = {k: [float(x) for x in v] for k, v in t.latency_ns.items()}
        run = run_numactl(kernel, [*opts, "lat_mem_rd", str(lat_size_mb), *map(str, strides)], calibration=calibration)
        if run.exit_code:
            raise RuntimeError(run.stderr)
        out["lat_text"][case] = run.stderr
        curves = parse_lat_mem_rd_text(run.stderr).curves
        out["lat_mem_rd"][case] = {
            c.stride_bytes: {"size_bytes": c.size_bytes.tolist(), "latency_ns": c.latency_ns.tolist()} for c in curves
        }
    return out


def route_latency_ns() -> dict[str, float]:
    """Idle latency of a miss from node 0 to each node under the shipped calibration (controller + links)."""
    from numasim.engine import build_memory_system

    m = load_machine(MACHINE)
    ms = build_memory_system(m, resolve_calibration(m))
    return {case: float(ms.base_latency_ns[0, ms.node_ids.index(mem)]) for case, mem in MEMBIND.items()}


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(SIZES))
    ax = axes[0]
    for case, style in (("local", "-"), ("remote", "--")):
        for pat, color in (("s32", "C0"), ("s64", "C1"), ("random", "C2")):
            ax.plot(x, ARTICLE[case][pat], style, color=color, alpha=0.4, marker="o", ms=3)
            if case in res["table"]:
                ax.plot(x, res["table"][case][pat], style, color=color, marker="s", ms=4,
                        label=f"{pat} {case}")
    ax.set_xticks(x, SIZES)
    ax.set_yscale("log")
    ax.set_ylabel("ns per access")
    ax.set_title("./main: article (faint) vs numasim (squares)")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    routes = route_latency_ns()
    for case, style in (("local", "-"), ("remote", "--")):
        for stride, color in ((64, "C3"), (256, "C4")):
            c = res["lat_mem_rd"][case].get(stride)
            if c is None:
                continue
            ax.plot(np.array(c["size_bytes"]) / 2**20, c["latency_ns"], style, color=color,
                    label=f"stride={stride} {case}")
        ax.axhline(routes[case], color="grey", lw=0.8, ls=style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("working set (MB)")
    ax.set_ylabel("ns per load")
    ax.set_title("lat_mem_rd (grey: idle route latency)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--lat-size", type=int, default=128, help="lat_mem_rd size in MB (the article's table: 128m)")
    args = ap.parse_args(argv)
    res = reproduce(args.lat_size)
    print(res["table_text"])
    for case in MEMBIND:
        print(f"{case}: cell   article  numasim")
        for pat in ("s1", "s32", "s64", "random"):
            for k in (6, 8):
                print(f"  {pat:>6} {SIZES[k]:>5} {ARTICLE[case][pat][k]:8.2f} {res['table'][case][pat][k]:8.2f}")
    routes = route_latency_ns()
    for case in MEMBIND:
        tail = res["lat_mem_rd"][case][256]["latency_ns"][-1]
        print(f"lat_mem_rd stride 256 at {args.lat_size} MB, {case}: {tail:.2f} ns (route {routes[case]:.2f} ns)")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"machine": MACHINE, "sizes": SIZES, "table": res["table"], "article": ARTICLE,
              "route_latency_ns": routes,
              "lat_mem_rd_tail_ns": {c: {str(s): v["latency_ns"][-1] for s, v in res["lat_mem_rd"][c].items()}
                                     for c in MEMBIND}}
    tmp = args.out / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out / "result.json")
    figure(res, args.out / "figure.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
