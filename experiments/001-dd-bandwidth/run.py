"""Experiment 001-dd-bandwidth: article 001's ``dd`` to and from /dev/shm, local, remote and interleaved.

The article (shared/seeds/001_fa2b5bbd904fce34.txt, 2 x Xeon E5-2680 v2) measured with
``numactl --cpubind=0 --membind=M dd if=/dev/zero of=/dev/shm/F bs=20M count=1024`` and the reverse
``dd if=/dev/shm/F of=/dev/null bs=20M``: local write 2.3 GB/s (9.14673 s), local read 4.1 GB/s (5.22966 s),
remote write 1.8 GB/s (12.2229 s), remote read 2.9 GB/s (7.31183 s); with NUMA off in the BIOS (memory
interleaved across the sockets; ``bs=20MB``) write 1.9 GB/s (10.8606 s), read 3.8 GB/s (5.41376 s).

Here the same command lines run under the virtual numactl on the shipped ``seed-001-e5-2680v2`` machine and
its shipped calibration; the dd output is parsed back with numasim's own dd parser. "NUMA off" is modelled as
``numactl --interleave=0,1`` (page interleaving; the BIOS interleaves cache lines, see README).

The per-page software cost of dd's syscalls (``DdCosts``) is fitted on the two local runs (:func:`fit_costs`);
the four other numbers are predictions.

Run ``python experiments/001-dd-bandwidth/run.py [--out DIR] [--count N]``: prints the dd outputs and the
comparison, writes ``result.json`` and ``figure.png`` into DIR (default: this folder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from numasim.calibrate.parsers.dd import parse_dd_text
from numasim.fileio import save_figure
from numasim.kernel.kernel import Kernel
from numasim.timing import resolve_calibration
from numasim.tools.context import tool_context
from numasim.tools.dd import DEFAULT_DD_COSTS, DdCosts, dd, tmpfs_file
from numasim.tools.numactl import run_numactl
from numasim.topology.io import load_machine

HERE = Path(__file__).resolve().parent
MACHINE = "seed-001-e5-2680v2"
ARTICLE_SECONDS = {
    "local_write": (21474836480, 9.14673),
    "local_read": (21474836480, 5.22966),
    "remote_write": (21474836480, 12.2229),
    "remote_read": (21474836480, 7.31183),
    "interleaved_write": (20480000000, 10.8606),
    "interleaved_read": (20480000000, 5.41376),
}
ARTICLE_GB_S = {k: b / s / 1e9 for k, (b, s) in ARTICLE_SECONDS.items()}
CASES = {
    # name: (numactl policy options, file, bs)
    "local": (["--cpubind=0", "--membind=0"], "/dev/shm/local", "20M"),
    "remote": (["--cpubind=0", "--membind=1"], "/dev/shm/remote", "20M"),
    "interleaved": (["--cpubind=0", "--interleave=0,1"], "/dev/shm/A", "20MB"),
}


def fit_costs(count: int = 1024, iterations: int = 3) -> DdCosts:
    """Per-page dd costs that make the two *local* runs take the article's times (fixed-point iteration)."""
    m = load_machine(MACHINE)
    cal = resolve_calibration(m)
    target_w = ARTICLE_SECONDS["local_write"][1] / (ARTICLE_SECONDS["local_write"][0] / 4096) * 1e9
    target_r = ARTICLE_SECONDS["local_read"][1] / (ARTICLE_SECONDS["local_read"][0] / 4096) * 1e9
    costs = DdCosts(1200.0, 600.0)
    for _ in range(iterations):
        k = Kernel(m)
        w = dd(tool_context(m, cal, cpunodebind=[0], membind=[0], kernel=k),
               ["if=/dev/zero", "of=/dev/shm/fit", "bs=20M", f"count={count}"], costs)
        r = dd(tool_context(m, cal, cpunodebind=[0], membind=[0], kernel=k),
               ["if=/dev/shm/fit", "of=/dev/null", "bs=20M"], costs)
        costs = DdCosts(costs.write_page_ns + target_w - w.window_ns_per_page,
                        costs.read_page_ns + target_r - r.window_ns_per_page)
    return costs


def reproduce(count: int = 1024) -> dict[str, Any]:
    """Run the six dd commands under the virtual numactl (default dd costs); GB/s and the texts."""
    m = load_machine(MACHINE)
    kernel = Kernel(m)
    calibration = resolve_calibration(m)
    out: dict[str, Any] = {"gb_s": {}, "text": {}, "file_pages_per_node": {}}
    for case, (opts, path, bs) in CASES.items():
        for direction, operands in (
            ("write", ["if=/dev/zero", f"of={path}", f"bs={bs}", f"count={count}"]),
            ("read", [f"if={path}", "of=/dev/null", f"bs={bs}"]),
        ):
            run = run_numactl(kernel, [*opts, "dd", *operands], calibration=calibration)
            if run.exit_code != 0:
                raise RuntimeError(f"dd {operands} failed: {run.stderr}")
            command = f"# numactl {' '.join(opts)} dd {' '.join(operands)}"
            text = command + "\n" + run.stderr
            rec = parse_dd_text(text).records[0]
            out["gb_s"][f"{case}_{direction}"] = rec.bandwidth_gb_s
            out["text"][f"{case}_{direction}"] = text
        vma = tmpfs_file(kernel, path)
        out["file_pages_per_node"][case] = vma.pages_per_node() if vma is not None else {}
    return out


def figure(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(ARTICLE_GB_S)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.2, [ARTICLE_GB_S[n] for n in names], 0.4, label="article 001 (measured)")
    ax.bar(x + 0.2, [result["gb_s"][n] for n in names], 0.4, label="numasim (virtual dd)")
    ax.set_xticks(x, [n.replace("_", "\n") for n in names])
    ax.set_ylabel("GB/s")
    ax.set_title("dd to/from /dev/shm on 2 x E5-2680 v2: cpu node 0 (local fitted, others predicted)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--count", type=int, default=1024, help="dd count= (the article: 1024)")
    ap.add_argument("--fit", action="store_true", help="refit the per-page dd costs on the local runs first")
    args = ap.parse_args(argv)
    if args.fit:
        print("fitted:", fit_costs(args.count), "shipped default:", DEFAULT_DD_COSTS)
    res = reproduce(args.count)
    for text in res["text"].values():
        print(text)
    print(f"{'case':<20}{'article GB/s':>14}{'numasim GB/s':>14}{'error %':>10}")
    for name, gb in res["gb_s"].items():
        a = ARTICLE_GB_S[name]
        print(f"{name:<20}{a:>14.2f}{gb:>14.2f}{100 * (gb - a) / a:>10.1f}")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"machine": MACHINE, "count": args.count, "gb_s": res["gb_s"], "article_gb_s": ARTICLE_GB_S,
              "file_pages_per_node": res["file_pages_per_node"]}
    tmp = args.out / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out / "result.json")
    figure(res, args.out / "figure.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
