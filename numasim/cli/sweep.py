"""``numasim sweep SPEC.toml -o DIR`` and ``numasim sweep report DIR``: what-if experiments at scale."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command(
        "sweep",
        help="Run a sweep file's runs (process pool, or Dask with --workers/--scheduler) into DIR: one table "
        "(results.parquet, results.csv) and figures; `numasim sweep report DIR` writes report.html.",
    )(sweep)


def sweep(
    spec: str = typer.Argument(..., metavar="SPEC.toml|report", help="The sweep file, or `report` to report on DIR."),
    directory: Path | None = typer.Argument(None, metavar="[DIR]", help="With `report`: the results directory."),
    output: Path | None = typer.Option(None, "-o", "--output", help="The results directory (new or empty)."),
    workers: int | None = typer.Option(None, "--workers", help="Run on a local Dask cluster of N worker processes."),
    scheduler: str | None = typer.Option(None, "--scheduler", help="Run on the Dask cluster at this address (tcp://HOST:8786)."),
    processes: int | None = typer.Option(None, "--processes", help="Size of the default local process pool (default: one per cpu)."),
    resume: bool = typer.Option(False, "--resume", help="Finish the sweep in DIR: runs that finished are not run again."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Runs done / total and the time left, on stderr."),
    x: str | None = typer.Option(None, "--x", help="The parameter on the figures' x axis (default: the sweep file's `x`)."),
) -> None:
    """Run a sweep, or (``numasim sweep report DIR``) write its HTML report."""
    from numasim.sweep import SweepError, run, write_report

    if spec == "report":
        if directory is None:
            raise SweepError("sweep report: give the results directory (numasim sweep report DIR)")
        if output is not None or workers is not None or scheduler is not None or resume:
            raise SweepError("sweep report DIR takes --x only")
        path = write_report(directory, x=x)
        typer.echo(f"wrote {path} and its figures in {directory / 'figures'}")
        return
    if directory is not None:
        raise SweepError(f"sweep {spec}: unexpected argument {directory}; the results directory is -o DIR")
    if output is None:
        raise SweepError("sweep: give the results directory with -o DIR")
    t = run(spec, output, workers=workers, scheduler=scheduler, processes=processes, resume=resume,
            progress=progress)  # fmt: skip
    ok = int((t["status"] == "ok").sum())
    skipped = t.attrs["skipped"]
    typer.echo(f"{len(t)} runs in {output}: {ok} ok, {len(t) - ok} failed or missing"
               + (f" ({skipped} finished before, not run again)" if skipped else ""))  # fmt: skip
    figures = f"figures: {output / 'figures'}; " if (output / "figures").is_dir() else ""
    typer.echo(f"table: {output / 'results.parquet'}, {output / 'results.csv'}; "
               f"{figures}report: numasim sweep report {output}")  # fmt: skip
    failed = t[t["status"] != "ok"]
    for r in failed.head(10).itertuples():
        typer.echo(f"  failed {r.run_id}: {r.error}", err=True)
    if len(failed):
        sys.exit(1)
