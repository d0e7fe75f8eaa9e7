"""Which timing parameters the tables of a fit constrain, read off the model's Jacobian.

For a fitted calibration and the tables it was fitted on, every parameter is moved a little
(:func:`numasim.calibrate.priors.with_parameter`) and each table is predicted again with validation's analytic
model (:func:`numasim.calibrate.validate.validate`, ``method="analytic"``). The relative change of every cell per
relative change of the parameter is one column of the Jacobian. A parameter is constrained by the tables whose
cells it moves, unless the Jacobian's null space touches it (it trades off against another parameter: the
latency tables alone cannot split a two-socket idle-latency matrix's remote cells into controller and link
shares without an assumption). The null space is taken over the parameters the fit estimated: the others are
held at their priors, so the fit is judged given them.

The Jacobian is local: in the bottleneck model a link whose every crossing cell is controller-bound does not
move any cell, which is right (only a lower bound on it is known), and is reported unconstrained.
Step functions (cache sizes, integer core limits) are probed with whole steps both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numasim.calibrate.fit import _null_atoms
from numasim.calibrate.measurements import Measurement
from numasim.calibrate.priors import timing_parameters, with_parameter
from numasim.errors import CalibrationError
from numasim.timing.model import Calibration
from numasim.topology.model import Machine

__all__ = ["Identifiability", "identifiability", "REL_STEP"]

REL_STEP = 1e-3
"""Relative step of the finite differences (the analytic model is piecewise linear, so any small step works)."""

_TOL = 1e-9


@dataclass
class Identifiability:
    """Per parameter key, the tables whose cells it moves; and the keys the null space touches."""

    tables_by_parameter: dict[str, list[str]] = field(default_factory=dict)
    confounded: set[str] = field(default_factory=set)
    tables: list[str] = field(default_factory=list)
    """The tables the Jacobian was taken over (validation table names)."""

    def constrained(self, key: str) -> bool:
        """Some table moves it and no other parameter can make up for it."""
        return bool(self.tables_by_parameter.get(key)) and key not in self.confounded


def _cells(
    machine: Machine, cal: Calibration, measurements: list[Measurement], tables: list[str]
) -> dict[tuple[str, str, str, str], float]:
    """Predicted cells keyed by (table, source, row, col): a parameter may change which cells a table predicts
    (a stride table only compares working sets beyond the last cache level)."""
    from numasim.calibrate.validate import validate

    try:
        rep = validate(machine, cal, measurements, tables, method="analytic")
    except CalibrationError:
        return {}
    return {(t.table, t.source, c.row, c.col): float(c.model) for t in rep.tables for c in t.cells}


def _steps(key: str, value: float) -> list[float]:
    """Values to probe ``key`` at: a small relative step, or whole steps for step-function parameters."""
    if key.endswith("size_bytes"):
        return [value * 2.0, value / 2.0]
    if key.endswith(("max_outstanding_misses", "prefetch_distance_lines", "outstanding_misses_per_core",
                     "threads_per_core")):
        return [value + 1.0] + ([value - 1.0] if value > 1.0 else [])
    return [value * (1.0 + REL_STEP)]


def identifiability(
    machine: Machine,
    calibration: Calibration,
    measurements: list[Measurement],
    tables: list[str],
    fitted: set[str] | None = None,
) -> Identifiability:
    """Which parameters of ``calibration`` the given validation tables of ``measurements`` constrain.

    Parameters
    ----------
    tables : list of str
        Validation table names (:data:`numasim.calibrate.validate.VALIDATION_TABLES`) the fit used.
    fitted : set of str, optional
        The keys the fit estimated. The null space is taken over these only: the others are held at their
        priors, and the fit is identifiable *given* them (a stride table pins latencies given the misses in
        flight). Default: every parameter.

    Examples
    --------
    >>> from numasim.calibrate.parsers import MlcResult, NodeMatrix
    >>> from numasim.calibrate.measurements import Measurement
    >>> from numasim.calibrate.priors import nominal_priors
    >>> from numasim.topology.builders import glueless
    >>> import numpy as np
    >>> m = glueless(2)
    >>> lat = NodeMatrix([0, 1], [0, 1], np.array([[61.7, 115.1], [114.6, 61.2]]), "ns")
    >>> meas = [Measurement("mlc.txt", "mlc", MlcResult("mlc.txt", latency_matrices=[lat]), "0")]
    >>> ident = identifiability(m, nominal_priors(m), meas, ["latency_matrix"])
    >>> ident.constrained("links[0->1].latency_ns"), ident.constrained("links[0->1].bandwidth_gb_s")
    (True, False)
    """
    params = timing_parameters(calibration)
    base_cells = _cells(machine, calibration, measurements, tables)
    keys_c = list(base_cells)
    labels = [k[0] for k in keys_c]
    base = np.array([base_cells[k] for k in keys_c])
    out = Identifiability(tables=list(dict.fromkeys(labels)))
    if base.size == 0:
        out.tables_by_parameter = {k: [] for k in params}
        return out
    keys = list(params)
    cols = []
    scale = np.where(np.abs(base) > 0, np.abs(base), 1.0)
    for key in keys:
        value = params[key][0]
        col = np.zeros(base.size)
        changed: set[str] = set()
        for probe in _steps(key, value):
            moved_cells = _cells(machine, with_parameter(calibration, key, probe), measurements, tables)
            # a cell that appears or disappears is moved by the parameter too (counted for its table)
            changed |= {k[0] for k in set(moved_cells) ^ set(base_cells)}
            moved = np.array([moved_cells.get(k, np.nan) for k in keys_c])
            rel = abs(probe - value) / max(abs(value), 1e-12)
            diff = np.nan_to_num((moved - base) / scale / max(rel, 1e-12), nan=0.0)
            col = np.where(np.abs(diff) > np.abs(col), diff, col)
        cols.append(col)
        moved_tables = {labels[i] for i in np.flatnonzero(np.abs(col) > _TOL)} | changed
        out.tables_by_parameter[key] = sorted(moved_tables)
    jac = np.column_stack(cols)
    live = [k for k, c in enumerate(cols) if np.any(np.abs(c) > _TOL) and (fitted is None or keys[k] in fitted)]
    if live:
        null = _null_atoms(jac[:, live], tol=1e-7)
        out.confounded = {keys[live[k]] for k in null}
    return out
