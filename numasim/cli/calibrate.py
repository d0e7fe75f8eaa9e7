"""``numasim calibrate``, ``numasim validate`` and ``numasim probe``: measurements in, calibrations and reports out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from numasim.errors import CalibrationError
from numasim.fileio import atomic_write_text

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("calibrate", help="Fit a calibration (controller/link timing) of a machine to measurement files.")(
        calibrate_cmd
    )
    app.command("validate", help="Predict held-out measured tables from a calibrated machine; report MAPE per table.")(
        validate_cmd
    )
    app.command("probe", help="Measure this Linux host (sysfs node tree, numactl, latency/bandwidth per node pair).")(
        probe_cmd
    )


def _split(value: str | None) -> list[str] | None:
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


def _load_machine(spec: str):  # type: ignore[no-untyped-def]
    from numasim.topology.io import load_machine

    return load_machine(spec)


def _write_json(path: Path, data: object) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _load_priors(machine, path: Path | None):  # type: ignore[no-untyped-def]
    """``--priors``: a calibration file, ``catalog`` for the platform catalog's priors of the machine's cpu, or
    ``nominal`` for the machine file's numbers with numasim's default core.

    Without it, a machine the catalog wrote (``topo import --cpu``: its numbers are the catalog's priors) starts
    from the catalog's priors, which are its numbers and its processor's core limits and clock too (a machine file
    has no place for those: numasim's defaults, 10 misses in flight and no clock, would stand in silently); any
    other machine from its file's numbers. Said on stderr."""
    from numasim.timing.catalog.machine import catalog_timed_by
    from numasim.timing.resolve import resolve_calibration

    if path is None:
        timed_by = catalog_timed_by(machine)
        if timed_by is None:
            return None
        typer.echo(f"priors: the platform catalog's for {timed_by}, whose numbers the machine file holds, with its "
                   "core limits and clock (--priors nominal: the file's numbers and numasim's default core)", err=True)
        return resolve_calibration(machine, catalog=True)
    if str(path) == "nominal" and not path.exists():
        return None
    if str(path) == "catalog" and not path.exists():
        return resolve_calibration(machine, catalog=True)
    return resolve_calibration(machine, path)


def calibrate_cmd(
    files: Annotated[list[Path], typer.Argument(help="Measurement files or directories (mlc, lat_mem_rd, probe, ...).")],
    machine: Annotated[str, typer.Option("--machine", "-m", help="Shipped machine name or machine file.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the calibration JSON.")],
    format: Annotated[str | None, typer.Option("--format", help="Force the measurement format (default: detect).")] = None,
    fit_on: Annotated[
        str | None, typer.Option("--fit-on", help=(
            "Comma-separated tables to fit, any of: latency, peak_bandwidth, bandwidth_matrix, loaded_latency, "
            "caches, device, c2c (mlc --c2c_latency: cache-to-cache transfer latencies, taken as measured) "
            "(e.g. latency,caches)."
        ))
    ] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for latency uncertainty (0: covariance).")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    created: Annotated[str | None, typer.Option(help="Provenance date (ISO), for reproducible files.")] = None,
    assume_local_latency_ns: Annotated[
        float | None,
        typer.Option(help="Local read latency that scales hop-ratio tables (default: the machine file's)."),
    ] = None,
    priors: Annotated[
        Path | None,
        typer.Option(help="Calibration JSON whose values (and listed sources) are the priors, 'catalog' for the platform catalog's priors of the machine's cpu, or 'nominal' for the machine file's numbers (default: 'catalog' for a machine `topo import --cpu` wrote, else the file's numbers)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit report as JSON.")] = False,
) -> None:
    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.pipeline import calibrate
    from numasim.calibrate.text import fit_report_json, format_fit_report
    from numasim.timing.model import save_calibration

    for name, value in (("--bootstrap", bootstrap), ("--seed", seed)):
        if value < 0:  # checked here, not with min=0: that widens every option's label in --help
            raise typer.BadParameter(f"{value} is below 0", param_hint=f"'{name}'")
    m = _load_machine(machine)
    ms = load_measurements(list(files), format)
    report = calibrate(
        m,
        ms,
        fit_on=_split(fit_on),
        bootstrap=bootstrap,
        seed=seed,
        created=created,
        assume_local_latency_ns=assume_local_latency_ns,
        priors=_load_priors(m, priors),
    )
    save_calibration(report.calibration, output)
    replay = _loaded_latency_replay(m, report, ms)
    if as_json:
        extra = {"output": str(output)} | ({"loaded_latency_replay": replay[1]} if replay else {})
        typer.echo(json.dumps(fit_report_json(report) | extra, indent=2, default=str))
    else:
        typer.echo(format_fit_report(report))
        if replay:
            typer.echo("\n" + replay[0])
        typer.echo(f"\nwrote {output}")


def _loaded_latency_replay(m, report, ms) -> tuple[str, dict[str, object]] | None:  # type: ignore[no-untyped-def]
    """What ``numasim validate`` will say of a fitted loaded-latency table: the virtual mlc replayed at each
    injection delay with the new calibration. The fit's residuals above compare another quantity (the latency at
    each row's *measured* bandwidth); near the knee the two differ by tens of per cent, and a report that gave only
    the first contradicted validate on the same file."""
    from numasim.calibrate.validate import validate
    from numasim.errors import NumasimError

    if not any(r.table == "loaded_latency" for r in report.result.residuals):
        return None
    try:
        rep = validate(m, report.calibration, ms, ["loaded_latency"], method="engine")
        t = rep.table("loaded_latency")
    except (NumasimError, KeyError) as exc:
        return f"loaded_latency replay by the virtual mlc: not run ({exc})", {"error": str(exc)}
    w = t.worst
    worst = "" if w is None else f", worst {w.row} -> {w.col}: measured {w.measured:g}, simulated {w.model:.4g} ({w.error_pct:+.2f} %)"
    text = (f"loaded_latency replayed by the virtual mlc at each injection delay (what `numasim validate` compares; "
            f"the residuals above are the latency at each row's measured bandwidth): {len(t.cells)} cells, MAPE "
            f"{t.mape_pct:.2f} %{worst}")
    return text, rep.summary()[0]


def validate_cmd(
    files: Annotated[list[Path], typer.Argument(help="Held-out measurement files or directories.")],
    machine: Annotated[str, typer.Option("--machine", "-m", help="Shipped machine name or machine file.")],
    calibration: Annotated[
        Path | None, typer.Option("--calibration", "-c", help="Calibration JSON (default: the one the machine names).")
    ] = None,
    catalog: Annotated[
        bool, typer.Option("--catalog", help="Predict from the platform catalog's priors for the machine's processor "
                           "(no measurement), instead of a calibration file.")
    ] = False,
    tables: Annotated[str | None, typer.Option("--tables", help="Comma-separated tables to validate (default: all present).")] = None,
    format: Annotated[str | None, typer.Option("--format", help="Force the measurement format.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Report directory (report.json, report.txt, PNGs).")] = None,
    plots: Annotated[bool, typer.Option("--plots", help="Write figures (needs -o).")] = False,
    method: Annotated[
        str, typer.Option("--method", help="auto (engine replay where possible), engine, or analytic.")
    ] = "auto",
    holdout: Annotated[
        bool,
        typer.Option(
            "--holdout",
            help="Leave each table out in turn: fit on the others (from the priors), predict it; no calibration needed.",
        ),
    ] = False,
    priors: Annotated[
        Path | None,
        typer.Option(help="With --holdout: calibration JSON used as priors, 'catalog' or 'nominal' (default: 'catalog' for a machine `topo import --cpu` wrote, else the file's numbers)."),
    ] = None,
    created: Annotated[str | None, typer.Option(help="With --holdout: provenance date of the fold calibrations.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.text import format_validation, validation_json
    from numasim.calibrate.validate import validate
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import machine_source

    m = _load_machine(machine)
    machine_path = machine_source(machine)
    if holdout:
        if calibration is not None or catalog:
            raise CalibrationError("--holdout fits its own calibration per table; do not give --calibration or "
                                   "--catalog (--priors catalog starts each fit from the catalog)")
        if plots:
            raise CalibrationError("--plots is not available with --holdout")
        _holdout(m, files, format, _split(tables), method, _load_priors(m, priors), created, output, as_json)
        return
    if priors is not None:
        raise CalibrationError("--priors only applies with --holdout (or to `numasim calibrate`)")
    cal = resolve_calibration(m, calibration, catalog=catalog, machine_path=machine_path)
    ms = load_measurements(list(files), format)
    report = validate(m, cal, ms, _split(tables), method=method)
    text = format_validation(report)
    data = validation_json(report)
    if plots and output is None:
        raise CalibrationError("--plots needs -o DIR to write the figures into")
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        _write_json(output / "report.json", data)
        atomic_write_text(output / "report.txt", text + "\n")
        if plots:
            from numasim.calibrate.plots import plot_report

            for p in plot_report(report, output):
                text += f"\nfigure: {p}"
    typer.echo(json.dumps(data, indent=2, default=str) if as_json else text)


def _holdout(m, files, format, tables, method, priors, created, output, as_json) -> None:  # type: ignore[no-untyped-def]
    from numasim.calibrate.holdout import holdout
    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.text import format_holdout
    from numasim.fileio import atomic_write_text

    ms = load_measurements(list(files), format)
    report = holdout(m, ms, priors=priors, method=method, tables=tables, created=created)
    data = report.to_dict()
    text = format_holdout(report)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        atomic_write_text(output / "holdout.json", json.dumps(data, indent=2, default=str) + "\n")
        atomic_write_text(output / "holdout.txt", text + "\n")
    typer.echo(json.dumps(data, indent=2, default=str) if as_json else text)


def probe_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory for probe.json and the copied node tree.")],
    working_set: Annotated[str, typer.Option(help="Working set per measurement (e.g. 256M).")] = "256M",
    repeats: Annotated[int, typer.Option(help="Repeats per cell (the best is kept).")] = 3,
    steps: Annotated[int, typer.Option(help="Pointer-chase steps per repeat.")] = 200_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print probe.json.")] = False,
) -> None:
    from numasim.calibrate.probe import probe
    from numasim.units import parse_size

    try:
        size = parse_size(working_set)
    except ValueError as exc:
        raise CalibrationError(f"--working-set: {exc}") from None
    res = probe(output, working_set_bytes=size, repeats=repeats, steps=steps)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
        return
    typer.echo(f"probed {res.host} ({len(res.nodes)} node(s), placement {res.placement}) -> {output / 'probe.json'}")
    for i, row in zip(res.nodes, res.latency_ns, strict=True):
        cells = " ".join("    -   " if v is None else f"{v:8.1f}" for v in row)
        typer.echo(f"  latency_ns from node {i}: {cells}")
    for i, row in zip(res.nodes, res.bandwidth_gb_s, strict=True):
        cells = " ".join("    -   " if v is None else f"{v:8.2f}" for v in row)
        typer.echo(f"  read GB/s  from node {i}: {cells}")
    for n in res.notes:
        typer.echo(f"  note: {n}")
