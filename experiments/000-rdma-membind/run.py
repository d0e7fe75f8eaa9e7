"""Experiment 000-rdma-membind: RDMA send latency and bandwidth from a NIC on node 0, local vs ``--membind=1``.

Source article 000 ran perftest on a 4-node machine (2 sockets x 2 dies) whose 200 Gb/s mlx5_2 NIC sits on node 0:
``ib_send_lat -a -d mlx5_2 -F --report_gbits 10.10.2.11`` and ``ib_send_bw`` with the same options, plain and
under ``numactl --membind=1``. 8 MiB sends: t_typical 331.43 us local vs 493.88 us with the buffers on node 1;
bandwidth 204.03 vs 133.29 Gb/s.

Here the same command lines run under the virtual numactl on the shipped ``seed-000-4node`` machine and its shipped
calibration; the buffers are faulted in by the simulated kernel under the policy, the NIC's DMA reads and writes
are :class:`~numasim.engine.DeviceTransfer` s timed by the engine; the output is parsed back with numasim's perftest
parser and compared with the article's tables (``tests/data/measurements/seed-000-perftest.txt``).

Run ``python experiments/000-rdma-membind/run.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from numasim.calibrate.parsers.perftest import parse_perftest, parse_perftest_text
from numasim.fileio import save_figure
from numasim.kernel.kernel import Kernel
from numasim.timing import resolve_calibration
from numasim.tools.numactl import run_numactl
from numasim.topology.io import load_machine

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ARTICLE_FILE = REPO / "tests" / "data" / "measurements" / "seed-000-perftest.txt"
MACHINE = "seed-000-4node"
PERFTEST_ARGS = ["-a", "-d", "mlx5_2", "-F", "--report_gbits", "10.10.2.11"]
CASES = {"local": [], "membind1": ["--membind=1"]}


def _key(test: str, mem: int | None) -> str:
    return f"{test}/{'membind1' if mem == 1 else 'local'}"


def article() -> dict[str, dict[str, list[float]]]:
    """The article's tables: ``{"ib_send_lat/local": {"size": [...], "value": [...]}, ...}``."""
    out = {}
    for t in parse_perftest(ARTICLE_FILE).tables:
        col = "t_typical" if t.kind == "lat" else "BW_average"
        out[_key(t.test, t.mem_node)] = {"size": t.size_bytes.tolist(), "value": t.column(col).tolist()}
    return out


def reproduce() -> dict[str, Any]:
    m = load_machine(MACHINE)
    out: dict[str, Any] = {"tables": {}, "text": {}}
    for opts in CASES.values():
        for test in ("ib_send_lat", "ib_send_bw"):
            kernel = Kernel(m)
            run = run_numactl(kernel, [*opts, test, *PERFTEST_ARGS], calibration=resolve_calibration(m))
            if run.exit_code:
                raise RuntimeError(run.stderr)
            command = f"$ {'numactl ' + ' '.join(opts) + ' ' if opts else ''}{test} {' '.join(PERFTEST_ARGS)}"
            text = command + "\n" + run.stdout
            (t,) = parse_perftest_text(text).tables
            col = "t_typical" if t.kind == "lat" else "BW_average"
            out["tables"][_key(test, t.mem_node)] = {"size": t.size_bytes.tolist(), "value": t.column(col).tolist()}
            out["text"][_key(test, t.mem_node)] = text
    return out


def headline(tables: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """The article's headline cells: 8 MiB send latency (us) and bandwidth (Gb/s), local and --membind=1."""
    def at(key: str, size: int) -> float:
        t = tables[key]
        return float(t["value"][t["size"].index(size)])

    return {
        "lat_8MiB_local_us": at("ib_send_lat/local", 1 << 23),
        "lat_8MiB_membind1_us": at("ib_send_lat/membind1", 1 << 23),
        "bw_8MiB_local_gbit_s": at("ib_send_bw/local", 1 << 23),
        "bw_8MiB_membind1_gbit_s": at("ib_send_bw/membind1", 1 << 23),
        "lat_2B_local_us": at("ib_send_lat/local", 2),
        "lat_2B_membind1_us": at("ib_send_lat/membind1", 2),
    }


def figure(res: dict[str, Any], art: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, test, ylabel in ((axes[0], "ib_send_lat", "t_typical (us)"), (axes[1], "ib_send_bw", "BW average (Gb/s)")):
        for case, color in (("local", "C0"), ("membind1", "C3")):
            key = f"{test}/{case}"
            a, s = art[key], res["tables"][key]
            ax.plot(a["size"], a["value"], "o", color=color, alpha=0.5, ms=4, label=f"article {case}")
            ax.plot(s["size"], s["value"], "-", color=color, label=f"numasim {case}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{test}, mlx5_2 on node 0")
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    res = reproduce()
    art = article()
    for text in res["text"].values():
        print(text)
    a, s = headline(art), headline(res["tables"])
    print(f"{'cell':<26}{'article':>10}{'numasim':>10}{'error %':>9}")
    for k in a:
        print(f"{k:<26}{a[k]:>10.2f}{s[k]:>10.2f}{100 * (s[k] - a[k]) / a[k]:>9.1f}")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"machine": MACHINE, "article_headline": a, "model_headline": s, "model_tables": res["tables"]}
    tmp = args.out / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out / "result.json")
    figure(res, art, args.out / "figure.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
