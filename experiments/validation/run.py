"""The validation suite's report: every real measurement the project holds, predicted where it was not fitted.

Run from the repository root (``make validate`` runs it, then the suite's assertions)::

    .venv/bin/python experiments/validation/run.py [--quick]

Writes ``experiments/validation/README.md`` (the table, between the markers), ``summary.json`` and
``kerncraft.png`` (every measured core count of the kerncraft copy series against the catalog-only prediction). ``--quick``
uses the analytic predictions instead of the engine replay for the mlc tables (seconds instead of minutes).
See :mod:`numasim.calibrate.suite` for what each scenario means.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from numasim.calibrate.suite import run_suite
from numasim.fileio import atomic_write_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MLC = ROOT / "tests" / "data" / "measurements" / "mlc"
PUBLIC_MLC = ROOT / "tests" / "data" / "measurements" / "public_mlc"
CORE_TO_CORE = ROOT / "tests" / "data" / "measurements" / "core_to_core"
KERNCRAFT = ROOT.parent / "shared" / "data" / "kerncraft"
START, END = "<!-- suite table: start -->", "<!-- suite table: end -->"


def kerncraft_figure(path: Path) -> None:
    """Measured against predicted (catalog only) copy bandwidth at every measured core count, one panel per
    kerncraft processor: where the MAPE of four points hides the shape (a knee too early or too late)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from numasim.calibrate.parsers.kerncraft import parse_kerncraft
    from numasim.calibrate.scaling import compare_scaling, kerncraft_calibration, kerncraft_machine
    from numasim.errors import NumasimError
    from numasim.fileio import save_figure

    series = []
    for f in sorted(KERNCRAFT.glob("*.yml")):
        try:
            r = parse_kerncraft(f)
            machine = kerncraft_machine(r)
            cal = kerncraft_calibration(r, machine)
        except NumasimError:
            continue
        scaling = r.scaling.get("MEM", {}).get("copy")
        if scaling is None:
            continue
        c = compare_scaling(machine, cal, scaling, threads_per_core=r.threads_per_core)
        series.append((r.model_name.replace("Intel(R) Xeon(R) ", "").replace(" CPU", ""), c))
    cols = 4
    rows = -(-len(series) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, (name, c) in zip(axes.ravel(), series, strict=False):
        ax.plot(c.cores, c.measured_gb_s, "o-", ms=3, label="likwid-bench (measured)")
        ax.plot(c.cores, c.simulated_gb_s, "s--", ms=3, label="numasim, catalog only")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("cores")
        ax.set_ylabel("copy GB/s")
    for ax in axes.ravel()[len(series):]:
        ax.axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("STREAM-like copy bandwidth versus cores: kerncraft's measurements and numasim's catalog-only prediction")
    fig.tight_layout()
    save_figure(fig, path, dpi=90)


def main(argv: list[str]) -> int:
    method = "analytic" if "--quick" in argv else "engine"
    report = run_suite(
        MLC, KERNCRAFT, public_dir=PUBLIC_MLC, core_to_core=CORE_TO_CORE, method=method,
        progress=lambda what: print(f"... {what}", file=sys.stderr),
    )
    table = report.markdown()
    summary = report.summary_markdown()
    notes = "".join(f"- {n}\n" for n in report.notes)
    readme = HERE / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    body = (
        f"{START}\nMethod: {method}; {report.seconds:.0f} s on this machine.\n\n"
        f"Summary (MAPE %, goal met or not):\n\n{summary}\nEvery row, with its worst cell:\n\n{table}\n{notes}{END}"
    )
    atomic_write_text(readme, head + body + tail)
    atomic_write_text(HERE / "summary.json", json.dumps(report.to_dict() | {"method": method}, indent=1) + "\n")
    if KERNCRAFT.is_dir() and "--quick" not in argv:
        kerncraft_figure(HERE / "kerncraft.png")
    print(summary)
    for n in report.notes:
        print("note:", n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
