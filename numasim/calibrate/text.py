"""Plain-text and JSON views of fit and validation reports (the CLI prints these; the library never prints)."""

from __future__ import annotations

import math
from typing import Any

from numasim.calibrate.holdout import HoldoutReport
from numasim.calibrate.pipeline import CalibrationReport
from numasim.calibrate.result import FitResult
from numasim.calibrate.validate import ValidationReport
from numasim.timing.model import PriorParameter

__all__ = ["format_fit_report", "fit_report_json", "format_validation", "validation_json", "prior_lines", "priors_json",
           "format_holdout"]


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.4g}"


def _residual_lines(result: FitResult) -> list[str]:
    lines = []
    for t in result.tables():
        cells = [c for c in result.residuals if c.table == t]
        lines.append(f"  {t}: {len(cells)} cells, MAPE {_fmt(result.mape_pct(t))} %")
        for c in cells:
            lines.append(
                f"    {c.row:>14} -> {c.col:<14} measured {c.measured:>10.4g}  model {c.model:>10.4g} {c.unit:<5} "
                f"{c.error_pct:+7.2f} %"
            )
    return lines


def format_fit_report(report: CalibrationReport) -> str:
    cal = report.calibration
    res = report.result
    lines = [f"calibration {cal.id} for machine {cal.machine}", f"fitted on: {', '.join(report.tables_used)}", ""]
    lines.append("parameters (value +- standard error):")
    for p in res.parameters:
        flag = "" if p.identifiable else "  [not identifiable: assumed]"
        note = f"  ({p.note})" if p.note else ""
        lines.append(f"  {p.name:<44} {p.value:>10.4g} {p.unit:<6} +- {_fmt(p.stderr):<8}{flag}{note}")
    lines += ["", "residual per measured cell:"] + _residual_lines(res)
    worst = res.worst()
    if worst is not None:
        lines.append(
            f"worst cell: {worst.table} {worst.row} -> {worst.col}: measured {worst.measured:.4g}, "
            f"model {worst.model:.4g} ({worst.error_pct:+.2f} %)"
        )
    if res.assumptions:
        lines += ["", "assumptions:"] + [f"  - {a}" for a in dict.fromkeys(res.assumptions)]
    if res.warnings:
        lines += ["", "warnings:"] + [f"  - {w}" for w in dict.fromkeys(res.warnings)]
    lines += prior_lines(cal.provenance.priors)
    return "\n".join(lines)


def prior_lines(priors: list[PriorParameter]) -> list[str]:
    """The warning block of parameters no measurement constrained: each kept at its prior, with its source."""
    if not priors:
        return []
    lines = [
        "",
        f"warning: {len(priors)} parameter(s) not constrained by the measurements alone (a prior or an assumption "
        "decides them):",
    ]
    for p in priors:
        value = f"{int(p.value)}" if p.unit in ("bytes", "lines") else f"{p.value:.4g}"
        unit = "" if p.unit in ("", "1") else f" {p.unit}"
        lines.append(f"  - {p.parameter}: {p.why}; kept at {value}{unit} ({p.source})")
    return lines


def priors_json(priors: list[PriorParameter]) -> list[dict[str, Any]]:
    return [p.model_dump(mode="json") for p in priors]


def fit_report_json(report: CalibrationReport) -> dict[str, Any]:
    res = report.result
    worst = res.worst()
    return {
        "calibration_id": report.calibration.id,
        "machine": report.calibration.machine,
        "fitted_on": report.tables_used,
        "parameters": [
            {"name": p.name, "value": p.value, "unit": p.unit, "stderr": p.stderr if math.isfinite(p.stderr) else None,
             "identifiable": p.identifiable, "note": p.note}
            for p in res.parameters
        ],
        "residuals": [
            {"table": c.table, "row": c.row, "col": c.col, "measured": c.measured, "model": c.model, "unit": c.unit,
             "error_pct": c.error_pct}
            for c in res.residuals
        ],
        "mape_pct": {t: res.mape_pct(t) for t in res.tables()},
        "worst": None if worst is None else {"table": worst.table, "row": worst.row, "col": worst.col, "error_pct": worst.error_pct},
        "assumptions": list(dict.fromkeys(res.assumptions)),
        "warnings": list(dict.fromkeys(res.warnings)),
        "unconstrained": priors_json(report.calibration.provenance.priors),
    }


def format_validation(report: ValidationReport) -> str:
    lines = [
        f"validation of calibration {report.calibration_id} on machine {report.machine}",
        f"prediction: {report.method}",
        "",
        f"{'table':<18} {'method':<9} {'cells':>5} {'MAPE %':>8}  worst cell (measured vs simulated)",
    ]
    for row in report.summary():
        w = row["worst"]
        ws = "" if not isinstance(w, dict) else (
            f"{w['row']} -> {w['col']}: {_cell(w['measured'])} vs {_cell(w['simulated'])} ({w['error_pct']:+.2f} %)"
        )
        lines.append(f"{row['table']!s:<18} {row['method']!s:<9} {row['cells']!s:>5} {row['mape_pct']!s:>8}  {ws}")
    lines += [f"note: {n}" for n in report.notes if not n.startswith("method:")]
    return "\n".join(lines)


def validation_json(report: ValidationReport) -> dict[str, Any]:
    return {
        "machine": report.machine,
        "calibration_id": report.calibration_id,
        "method": report.method,
        "tables": report.summary(),
        "cells": [
            {"table": t.table, "source": t.source, "row": c.row, "col": c.col, "measured": c.measured,
             "simulated": c.model, "unit": c.unit, "error_pct": c.error_pct}
            for t in report.tables
            for c in t.cells
        ],
        "notes": report.notes,
    }


def _cell(value: float) -> str:
    # Measured cells are printed as the tools print them (MB/s in thousands, ns to 0.1), never in e-notation.
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def format_holdout(report: HoldoutReport) -> str:
    """One line per held-out table (MAPE, worst cell, what was fitted instead), then each fold's priors."""
    lines = [
        f"leave-one-table-out validation on machine {report.machine}",
        f"prediction: {report.method}",
        "",
        f"{'held-out table':<18} {'cells':>5} {'MAPE %':>8}  {'worst cell (measured vs predicted)':<44} fitted on",
    ]
    for f in report.folds:
        d = f.to_dict()
        w = d["worst"]
        ws = "" if not isinstance(w, dict) else (
            f"{w['row']} -> {w['col']}: {_cell(w['measured'])} vs {_cell(w['predicted'])} ({w['error_pct']:+.2f} %)"
        )
        fitted = ", ".join(f.fitted_on) or "nothing (priors only)"
        lines.append(f"{f.table:<18} {f.cells:>5} {_fmt(f.mape_pct):>8}  {ws:<44} {fitted}")
    for f in report.folds:
        lines += ["", f"{f.table} fold: {len(f.priors)} parameter(s) not constrained by {', '.join(f.fitted_on) or 'any table'}:"]
        for p in f.priors:
            value = f"{int(p.value)}" if p.unit in ("bytes", "lines") else f"{p.value:.4g}"
            unit = "" if p.unit in ("", "1") else f" {p.unit}"
            lines.append(f"  - {p.parameter} = {value}{unit} ({p.source})")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
