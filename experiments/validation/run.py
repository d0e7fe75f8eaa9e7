"""The validation suite's report: every real measurement the project holds, predicted where it was not fitted.

Run from the repository root (``make validate`` runs it, then the suite's assertions)::

    .venv/bin/python experiments/validation/run.py [--quick]

Writes ``experiments/validation/README.md`` (the table, between the markers) and ``summary.json``. ``--quick``
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
KERNCRAFT = ROOT.parent / "shared" / "data" / "kerncraft"
START, END = "<!-- suite table: start -->", "<!-- suite table: end -->"


def main(argv: list[str]) -> int:
    method = "analytic" if "--quick" in argv else "engine"
    report = run_suite(
        MLC, KERNCRAFT, public_dir=PUBLIC_MLC, method=method, progress=lambda what: print(f"... {what}", file=sys.stderr)
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
    print(summary)
    for n in report.notes:
        print("note:", n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
