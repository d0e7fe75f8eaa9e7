"""The command line every ``experiments/*/run.py`` script shares: ``--out DIR`` (and ``--scale``), the result as
JSON and a figure, both written atomically.

An experiment script defines ``reproduce(**options) -> dict``, ``table(result) -> str`` and
``figure(result, path)``, and ends with ``sys.exit(experiment_main(...))``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from numasim.fileio import atomic_path

__all__ = ["experiment_main"]


def experiment_main(
    argv: Sequence[str] | None,
    *,
    doc: str,
    default_out: Path,
    reproduce: Callable[..., dict[str, Any]],
    table: Callable[[dict[str, Any]], str],
    figure: Callable[[dict[str, Any], Path], None],
    scale: float | None = None,
) -> int:
    """Parse ``--out`` (and ``--scale`` when ``scale`` is its default), run, print the table, write
    ``result.json`` and ``figure.png`` into the output folder."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--out", type=Path, default=default_out, help="folder for result.json and figure.png")
    if scale is not None:
        ap.add_argument("--scale", type=float, default=scale, help="time scale of the run and the kernel's knobs")
    args = ap.parse_args(list(argv) if argv is not None else None)
    result = reproduce(**({"scale": args.scale} if scale is not None else {}))
    print(table(result))
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / "result.json") as tmp:
        tmp.write_text(json.dumps(result, indent=1) + "\n")
    figure(result, args.out / "figure.png")
    return 0
