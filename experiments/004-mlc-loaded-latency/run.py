"""The virtual ``mlc --loaded_latency`` against the two real tables, in-sample and predicted across machines.

For each machine (``seed-001-e5-2680v2``: E5-2680 v2, mlc v3.1a; ``skylake-8180-2s``: Platinum 8180, mlc v3.5):

* **in-sample**: the shipped calibration (its loaded-latency curve and ``max_outstanding_misses`` were fitted on
  this very table) and the load loop's constants fitted on this table. A fit, not evidence of prediction.
* **cross**: a calibration fitted on the latency matrix, bandwidth matrix and peak bandwidths only; the
  loaded-latency curve shape, ``max_outstanding_misses`` and the load loop's constants all come from the *other*
  machine's table; the core clock is the measured one where mlc printed it (8180), else the tool's assumed clock.

Printed: MAPE of the latency and bandwidth columns over all rows, the saturated rows (delay <= 50) and the others.
Run from the repository root (about 30 s)::

    .venv/bin/python experiments/004-mlc-loaded-latency/run.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from numasim.calibrate.curves import fit_curve_shape
from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.pipeline import calibrate
from numasim.timing import resolve_calibration
from numasim.timing.model import Calibration, shaped_curve
from numasim.tools.context import tool_context
from numasim.tools.mlc import mlc
from numasim.topology.io import load_machine

DATA = Path("tests/data/measurements/mlc")
MACHINES = {
    "seed-001-e5-2680v2": ("kuleuven-thinking-2s-ivybridge-E5-2680v2.md", "skylake-8180-2s"),
    "skylake-8180-2s": ("fdio-csit-2s-skylake-plat8180.md", "seed-001-e5-2680v2"),
}
NOMINAL_GHZ = {"seed-001-e5-2680v2": 2.8, "skylake-8180-2s": 2.5}
"""Nominal clocks from the processor names (only to fit each table's own load-loop constants; the 8180's
equals the 2.5 GHz mlc measured)."""


def _table(name: str):  # type: ignore[no-untyped-def]
    return load_measurements([DATA / MACHINES[name][0]])[0].data


def fit_pace(name: str) -> tuple[float, float]:
    """(lines per delay, loop cycles per line) from the rows with delay >= 300, the latency thread's lines out."""
    d = _table(name)
    t = d.loaded_latency[0]
    threads = len(load_machine(name).cpus) - 1
    load_mb_s = t.bandwidth_mb_s - 64e3 / t.latency_ns
    gap_cycles = NOMINAL_GHZ[name] * 1e9 / (load_mb_s * 1e6 / threads / 64)
    sel = t.inject_delay >= 300
    slope, icpt = np.polyfit(t.inject_delay[sel].astype(float), gap_cycles[sel], 1)
    return 1.0 / slope, icpt


def _with(cal: Calibration, *, shape=None, mlp=None, clock=None) -> Calibration:  # type: ignore[no-untyped-def]
    body = cal.model_dump(exclude={"id"})
    if shape is not None:
        for c in body["controllers"]:
            c["curve"] = shaped_curve(c["latency_ns"], *shape).model_dump()
    if mlp is not None:
        body["core"]["max_outstanding_misses"] = mlp
    if clock is not None:
        body["core"]["core_clock_ghz"] = clock
    return Calibration.model_validate(body)


def cross_calibration(name: str) -> Calibration:
    other = MACHINES[name][1]
    m = load_machine(name)
    cal = calibrate(m, load_measurements([DATA / MACHINES[name][0]]),
                    fit_on=["latency", "peak_bandwidth", "bandwidth_matrix"], created="2026-11-24").calibration
    od = _table(other)
    ot = od.loaded_latency[0]
    o_idle = float(np.mean([od.latency_matrix.cell(i, i) for i in od.latency_matrix.rows]))
    shape, _ = fit_curve_shape(ot.bandwidth_gb_s, ot.latency_ns, idle_latency_ns=o_idle,
                               peak_gb_s=od.peak_injection_mb_s["all_reads"] / 1000.0)
    o_mlp = resolve_calibration(load_machine(other)).core.max_outstanding_misses
    return _with(cal, shape=shape, mlp=o_mlp)


def errors(name: str, cal: Calibration, pace) -> dict[str, object]:  # type: ignore[no-untyped-def]
    t = _table(name).loaded_latency[0]
    m = load_machine(name)
    kw = {"pace": pace} if pace is not None else {}
    res = mlc(tool_context(m, cal), ["--loaded_latency"], delays=tuple(int(x) for x in t.inject_delay), **kw)
    lat = np.array([r[1] for r in res.loaded])
    bw = np.array([r[2] for r in res.loaded])
    el = np.abs(lat - t.latency_ns) / t.latency_ns * 100
    eb = np.abs(bw - t.bandwidth_mb_s) / t.bandwidth_mb_s * 100
    sat = t.inject_delay <= 50
    out: dict[str, object] = {}
    for col, e in (("latency", el), ("bandwidth", eb)):
        out[col] = {"all": round(float(e.mean()), 1), "sat": round(float(e[sat].mean()), 1),
                    "unsat": round(float(e[~sat].mean()), 1)}
    out["rows"] = [[int(d), float(a), round(float(b), 2), float(c), round(float(e), 1)]
                   for d, a, b, c, e in zip(t.inject_delay, t.latency_ns, lat, t.bandwidth_mb_s, bw, strict=True)]
    clock = getattr(res, "clock", None)
    out["clock"] = clock.describe() if clock is not None else "2.5 GHz (CORE_GHZ, before)"
    return out


def main() -> None:
    try:
        from numasim.tools.mlc_load import LoadPace
    except ImportError:  # the tool before its load model (commit abbf928): no pace to pass
        LoadPace = None  # noqa: N806
    summary = {}
    for name in MACHINES:
        other = MACHINES[name][1]
        own_l, own_c = fit_pace(name)
        oth_l, oth_c = fit_pace(other)
        shipped = resolve_calibration(load_machine(name))
        own = _with(shipped, clock=NOMINAL_GHZ[name])
        runs = {
            "in-sample": errors(name, own, LoadPace(own_l, own_c) if LoadPace else None),
            "cross": errors(name, cross_calibration(name), LoadPace(oth_l, oth_c) if LoadPace else None),
        }
        cross = cross_calibration(name)
        if cross.core.core_clock_ghz is None and LoadPace:
            # what the assumed clock costs: the same prediction told the nominal clock of the processor name
            runs["cross, nominal clock"] = errors(name, _with(cross, clock=NOMINAL_GHZ[name]), LoadPace(oth_l, oth_c))
        runs["pace"] = {"own": [round(own_l, 3), round(own_c, 1)], "other": [round(oth_l, 3), round(oth_c, 1)]}
        summary[name] = runs
        for k in [k for k in runs if k != "pace"]:
            r = runs[k]
            print(f"{name:20s} {k:20s} latency MAPE {r['latency']}  bandwidth MAPE {r['bandwidth']}  [{r['clock']}]")
    if "--json" in sys.argv:
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
