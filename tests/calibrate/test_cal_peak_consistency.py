"""A fitted peak-injection table replays in the engine at what the fit says (writes charged alike in both)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from numasim.calibrate.fit import READ_FRACTION, fit_peak_mix, peak_mix_gb_s
from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.validate import validate
from numasim.timing.catalog import catalog_calibration
from numasim.topology.io import load_machine

MLC = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"


def test_mix_model_reduces_to_the_harmonic_rule_without_write_allocate() -> None:
    f = np.array([1.0, 2 / 3, 0.5, 0.0])
    assert np.allclose(peak_mix_gb_s(f, 100.0, 50.0, 1.0), 1.0 / (f / 100.0 + (1 - f) / 50.0))
    # With write-allocate a store moves two lines and mlc counts both: at W = R a mix costs what reads cost.
    assert np.allclose(peak_mix_gb_s(f, 100.0, 100.0, 2.0), 100.0)
    # ... its read for ownership at the read bandwidth, its write-back at the write bandwidth: mlc's 1:1 (stores
    # only) moves 2 lines in 1/R + 1/W
    assert np.isclose(float(peak_mix_gb_s(np.array(0.0), 100.0, 50.0, 2.0)), 2.0 / (1 / 100.0 + 1 / 50.0))
    r, w, _ = fit_peak_mix({"all_reads": 100_000.0, "1:1": 90_000.0}, write_cost_factor=2.0)
    assert r == 100.0  # the read bandwidth is the all-reads figure
    assert abs(float(peak_mix_gb_s(np.array(READ_FRACTION["1:1"]), r, w, 2.0)) - 90.0) < 1e-6


def test_mlc_names_a_mix_by_what_reaches_memory() -> None:
    """3:1 is two loads and a store (its read for ownership the third read), 2:1 one of each, 1:1 stores only:
    the shares of loads the mix model uses, and the bus ratio they give at a write cost of two lines."""
    for key, ratio in (("3:1", 3.0), ("2:1", 2.0), ("1:1", 1.0)):
        f = READ_FRACTION[key]
        reads, writes = f + (1 - f) * 1.0, (1 - f) * 1.0
        assert np.isclose(reads / writes, ratio)


def test_a_fitted_peak_table_replays_in_the_engine() -> None:
    machine = load_machine("seed-001-e5-2680v2")
    ms = load_measurements([MLC])
    priors = catalog_calibration(machine)
    assert priors.core.write_cost_factor == 2.0  # the case that used to break: write-allocate priors
    fit = calibrate(machine, ms, fit_on=["peak_bandwidth"], priors=priors).calibration
    engine = next(t for t in validate(machine, fit, ms, ["peak_bandwidth"], method="engine").tables)
    # Before mlc's accounting and the fit's mix model agreed, the 1:1 mix replayed 38 % low (MAPE 25.7 %).
    assert engine.mape_pct < 6.0, [(c.row, c.model, c.measured) for c in engine.cells]
