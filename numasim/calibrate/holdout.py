"""Leave-one-table-out validation: fit on every other table, predict the one left out.

A fit always reproduces the tables it was fitted on; whether the model *predicts* is only seen on a table it
never saw. For every table the measurement files hold, :func:`holdout` fits a calibration on the others
(:func:`numasim.calibrate.pipeline.calibrate`, starting from the priors), predicts the held-out table with
validation's own per-table replay (:func:`numasim.calibrate.validate.validate`), and reports the error together
with the parameters that fold left at their priors: a bad prediction there usually has its cause in that list.

Tables are left out by the group the fitter reads them as (``latency`` holds the latency matrices, stride and
hop-ratio tables together), so no fold sees the held-out numbers through another door.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numasim.calibrate.measurements import Measurement
from numasim.calibrate.parsers import KerncraftResult
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.priors import nominal_priors, prior_source, timing_parameters
from numasim.calibrate.result import CellResidual, mape_pct
from numasim.calibrate.validate import TableValidation, validate
from numasim.errors import CalibrationError
from numasim.timing.model import Calibration, PriorParameter
from numasim.topology.model import Machine

__all__ = ["PRIORS_MATCH_PCT", "FIT_GROUP", "HoldoutFold", "HoldoutReport", "holdout"]

FIT_GROUP = {
    "latency_matrix": "latency",
    "stride_latency": "latency",
    "hop_ratios": "latency",
    "bandwidth_matrix": "bandwidth_matrix",
    "peak_bandwidth": "peak_bandwidth",
    "loaded_latency": "loaded_latency",
    "lat_mem_rd": "caches",
    "device_bandwidth": "device",
    "device_latency": "device",
    "c2c_latency": "c2c",
}
"""The fit table (``numasim calibrate --fit-on``) each validation table is read as."""

PRIORS_MATCH_PCT = 1.0
"""A table the priors alone predict within this MAPE (%) is flagged: the priors likely come from it."""


@dataclass
class HoldoutFold:
    """One fold: the table left out, what was fitted instead, and how well the held-out table was predicted."""

    table: str
    held_out: str
    """The fit group left out (``latency`` for the latency matrix, stride and hop-ratio tables)."""
    fitted_on: list[str]
    calibration_id: str
    priors: list[PriorParameter]
    """Parameters this fold's calibration kept at a prior (or an assumption): what the other tables left open."""
    validations: list[TableValidation] = field(default_factory=list)

    @property
    def cells(self) -> int:
        return len(self.residuals)

    @property
    def residuals(self) -> list[CellResidual]:
        return [c for v in self.validations for c in v.cells]

    @property
    def mape_pct(self) -> float:
        return mape_pct(self.residuals)

    def to_dict(self) -> dict[str, Any]:
        cells = self.residuals
        w = max(cells, key=lambda c: abs(c.error_pct)) if cells else None
        return {
            "table": self.table,
            "held_out": self.held_out,
            "fitted_on": self.fitted_on,
            "calibration_id": self.calibration_id,
            "method": sorted({"engine" if v.method.startswith("engine") else "analytic" for v in self.validations}),
            "sources": sorted({v.source for v in self.validations}),
            "cells": self.cells,
            "mape_pct": round(self.mape_pct, 3),
            "worst": None
            if w is None
            else {"row": w.row, "col": w.col, "measured": w.measured, "predicted": round(w.model, 4), "unit": w.unit,
                  "error_pct": round(w.error_pct, 3)},
            "priors": [p.model_dump(mode="json") for p in self.priors],
        }


@dataclass
class HoldoutReport:
    """Every fold of a leave-one-table-out validation."""

    machine: str
    method: str
    folds: list[HoldoutFold] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fold(self, table: str) -> HoldoutFold:
        for f in self.folds:
            if f.table == table:
                return f
        raise KeyError(f"no fold for table {table!r} (have {[f.table for f in self.folds]})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "method": self.method,
            "folds": [f.to_dict() for f in self.folds],
            "notes": self.notes,
        }


def _all_priors(priors: Calibration, why: str) -> list[PriorParameter]:
    return [
        PriorParameter(parameter=k, value=v, unit=u, source=prior_source(priors, k), why=why)
        for k, (v, u) in timing_parameters(priors).items()
    ]


def _fold_fit(
    machine: Machine,
    measurements: list[Measurement],
    prior_cal: Calibration,
    priors: Calibration | None,
    held: str,
    groups: list[str],
    created: str | None,
) -> tuple[Calibration, list[str], list[PriorParameter]]:
    """The calibration fitted on every fit group but ``held``, the tables it used, and what it kept at priors."""
    others = [g for g in groups if g != held]
    if others:
        try:
            fit = calibrate(machine, measurements, fit_on=others, priors=priors, created=created)
        except CalibrationError as exc:
            if not str(exc).startswith("nothing to fit"):
                raise
        else:
            return fit.calibration, list(fit.tables_used), list(fit.calibration.provenance.priors)
    return prior_cal, [], _all_priors(prior_cal, f"no table left to fit once {held} is held out")


def holdout(
    machine: Machine,
    measurements: list[Measurement],
    *,
    priors: Calibration | None = None,
    method: str = "auto",
    tables: list[str] | tuple[str, ...] | None = None,
    created: str | None = None,
) -> HoldoutReport:
    """Leave each table of ``measurements`` out in turn: fit on the others, predict it.

    Parameters
    ----------
    priors : Calibration, optional
        Starting values and their sources for every fold (default: the machine file's nominal numbers). A fold
        with no other table to fit on predicts from the priors alone, and says so.
    method : str
        How the held-out table is predicted, as :func:`numasim.calibrate.validate.validate` takes it
        (``"auto"``, ``"engine"``, ``"analytic"``).
    tables : list of str, optional
        Only these validation tables get a fold (default: every table the measurements hold).

    Examples
    --------
    >>> from numasim.calibrate.parsers import MlcResult, NodeMatrix
    >>> from numasim.calibrate.measurements import Measurement
    >>> from numasim.topology.builders import glueless
    >>> import numpy as np
    >>> lat = NodeMatrix([0, 1], [0, 1], np.array([[61.7, 115.1], [114.6, 61.2]]), "ns")
    >>> bw = NodeMatrix([0, 1], [0, 1], np.array([[55263.8, 25501.2], [25279.7, 55268.5]]), "MB/s")
    >>> mlc = MlcResult("mlc.txt", latency_matrices=[lat], bandwidth_matrices=[bw])
    >>> rep = holdout(glueless(2), [Measurement("mlc.txt", "mlc", mlc, "0")], method="analytic")
    >>> [(f.table, f.fitted_on) for f in rep.folds]
    [('latency_matrix', ['bandwidth_matrix']), ('bandwidth_matrix', ['latency_matrix'])]
    """
    prior_cal = priors if priors is not None else nominal_priors(machine)
    # Which tables there are: validation's own enumeration, on the priors (cheap, analytic). A bandwidth-scaling
    # file has no analytic replay: its table is added by hand, and it is never fitted on, so its fold fits on
    # every other table.
    scaling = [m for m in measurements if isinstance(m.data, KerncraftResult)]
    if tables and "bandwidth_scaling" not in tables:
        scaling = []
    others = [m for m in measurements if not isinstance(m.data, KerncraftResult)]
    present_tables: list[TableValidation] = []
    wanted_others = [t for t in tables if t != "bandwidth_scaling"] if tables else None
    if others and wanted_others != []:
        try:
            present_tables = validate(machine, prior_cal, others, wanted_others, method="analytic").tables
        except CalibrationError as exc:
            if not (scaling and str(exc).startswith("none of the measurements")):
                raise
    names = list(dict.fromkeys(t.table for t in present_tables)) + (["bandwidth_scaling"] if scaling else [])
    if not names:
        raise CalibrationError(f"none of the measurements holds a table to validate ({', '.join(tables or ())})")
    groups = list(dict.fromkeys(FIT_GROUP[t] for t in names if t in FIT_GROUP))
    rep = HoldoutReport(machine=machine.name, method=method)
    # Priors copied from these very measurements (a machine file written from the same mlc run) predict them
    # by construction; no fold can then show a failure of the model. Say so where the priors alone fit a table.
    for t in present_tables:
        if len(t.cells) >= 2 and t.mape_pct < PRIORS_MATCH_PCT:
            rep.notes.append(
                f"the priors alone reproduce {t.table} of {Path(t.source).name} within {t.mape_pct:.2f} % MAPE: they "
                "are probably taken from these measurements, so a fold that keeps them predicts that table by "
                "construction; use priors independent of these files (--priors) for a fair test"
            )
    # Tables of one fit group (the latency matrix, stride and hop-ratio tables) share a fold's fit: fitted once.
    fits: dict[str, tuple[Calibration, list[str], list[PriorParameter]]] = {}
    for name in names:
        held = FIT_GROUP.get(name, name)
        if held not in fits:
            fits[held] = _fold_fit(machine, measurements, prior_cal, priors, held, groups, created)
        cal, fitted_on, kept = fits[held]
        if not fitted_on:
            rep.notes.append(f"{name}: no other table to fit on; predicted from the priors alone")
        val = validate(machine, cal, measurements, [name], method=method)
        rep.folds.append(
            HoldoutFold(
                table=name,
                held_out=held,
                fitted_on=fitted_on,
                calibration_id=cal.id,
                priors=kept,
                validations=[v for v in val.tables if v.table == name],
            )
        )
        if not rep.method.startswith(("engine", "mixed")) and any(v.method.startswith("engine") for v in val.tables):
            rep.method = "mixed: engine replay where validate replays the table, analytic elsewhere"
    return rep
