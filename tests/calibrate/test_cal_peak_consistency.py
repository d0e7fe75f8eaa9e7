"""A fitted peak-injection table replays in the engine at what the fit says (writes charged alike in both)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from numasim.calibrate.fit import fit_peak_mix, peak_mix_gb_s
from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.validate import validate
from numasim.timing.catalog import catalog_calibration
from numasim.topology.io import load_machine

MLC = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"


def test_mix_model_reduces_to_the_harmonic_rule_without_write_allocate() -> None:
    f = np.array([1.0, 0.75, 0.5])
    assert np.allclose(peak_mix_gb_s(f, 100.0, 50.0, 1.0), 1.0 / (f / 100.0 + (1 - f) / 50.0))
    # With write-allocate a write moves two lines and mlc counts both: at W = R a mix costs what reads cost.
    assert np.allclose(peak_mix_gb_s(f, 100.0, 100.0, 2.0), 100.0)
    r, w, _ = fit_peak_mix({"all_reads": 100_000.0, "1:1": 90_000.0}, write_cost_factor=2.0)
    assert abs(float(peak_mix_gb_s(np.array(0.5), r, w, 2.0)) - 90.0) < 1e-6


def test_a_fitted_peak_table_replays_in_the_engine() -> None:
    machine = load_machine("seed-001-e5-2680v2")
    ms = load_measurements([MLC])
    priors = catalog_calibration(machine)
    assert priors.core.write_cost_factor == 2.0  # the case that used to break: write-allocate priors
    fit = calibrate(machine, ms, fit_on=["peak_bandwidth"], priors=priors).calibration
    engine = next(t for t in validate(machine, fit, ms, ["peak_bandwidth"], method="engine").tables)
    # Before mlc's accounting and the fit's mix model agreed, the 1:1 mix replayed 38 % low (MAPE 25.7 %).
    assert engine.mape_pct < 6.0, [(c.row, c.model, c.measured) for c in engine.cells]
