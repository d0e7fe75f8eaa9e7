"""Fits start from priors and list what the tables used do not constrain (provenance.priors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.identify import identifiability
from numasim.calibrate.measurements import Measurement, load_measurements
from numasim.calibrate.parsers import MlcResult, NodeMatrix
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.priors import NOMINAL_SOURCE, nominal_priors, timing_parameters, with_parameter
from numasim.cli import main
from numasim.errors import CalibrationError
from numasim.timing.model import PriorParameter
from numasim.topology.builders import glueless
from numasim.topology.io import load_machine

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
IVY = DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
SKX = DATA / "mlc" / "fdio-csit-2s-skylake-plat8180.md"


def _priors(cal) -> dict[str, PriorParameter]:  # type: ignore[no-untyped-def]
    return {p.parameter: p for p in cal.provenance.priors}


def test_latency_and_peak_leave_link_bandwidth_at_its_nominal_prior() -> None:
    # The issue: fitted on the idle latency matrix and peak injection only, link bandwidth silently stayed nominal.
    m = glueless(2)
    rep = calibrate(m, load_measurements([IVY]), fit_on=["latency", "peak_bandwidth"], created="2026-11-24")
    kept = _priors(rep.calibration)
    for e in ("0->1", "1->0"):
        p = kept[f"links[{e}].bandwidth_gb_s"]
        assert (p.value, p.unit, p.source) == (20.0, "GB/s", NOMINAL_SOURCE)
        assert p.why == "not constrained by the latency matrix and peak bandwidth tables"
        assert f"links[{e}].latency_ns" not in kept
    assert "controllers[0].latency_ns" not in kept and "controllers[1].latency_ns" not in kept
    # write bandwidth is constrained by the mixes only as a sum over controllers: listed, saying so
    assert "null space" in kept["controllers[0].write_bandwidth_gb_s"].why
    assert kept["core.max_outstanding_misses"].value == 10.0


def test_every_table_pins_links_curve_and_misses_in_flight() -> None:
    rep = calibrate(load_machine("skylake-8180-2s"), load_measurements([SKX]), created="2026-11-24")
    kept = _priors(rep.calibration)
    assert not any(k.startswith("links[") for k in kept)
    assert "controllers[0].curve" not in kept and "core.max_outstanding_misses" not in kept
    # the loaded-latency table measures node 0's view; node 1's curve is the fitted one by assumption
    assert kept["controllers[1].curve"].source.startswith("assumption: the system curve")
    assert set(kept) >= {"core.prefetch_distance_lines", "core.write_cost_factor", "caches[L2].size_bytes"}


def test_priors_supply_values_and_sources() -> None:
    m = glueless(2)
    base = nominal_priors(m)
    cat = with_parameter(base, "links[0->1].bandwidth_gb_s", 41.6)
    cat = with_parameter(cat, "links[1->0].bandwidth_gb_s", 41.6)
    listed = [
        PriorParameter(parameter=k, value=v, unit=u, source="catalog: 2 x UPI 10.4 GT/s", why="prior")
        for k, (v, u) in timing_parameters(cat).items()
    ]
    cat = cat.model_copy(update={"provenance": cat.provenance.model_copy(update={"priors": listed})})
    rep = calibrate(m, load_measurements([IVY]), fit_on=["latency", "peak_bandwidth"], priors=cat)
    p = _priors(rep.calibration)["links[0->1].bandwidth_gb_s"]
    assert (p.value, p.source) == (41.6, "catalog: 2 x UPI 10.4 GT/s")
    assert {lt.bandwidth_gb_s for lt in rep.calibration.links} == {41.6}
    with pytest.raises(CalibrationError, match="priors: calibration"):
        calibrate(m, load_measurements([IVY]), priors=nominal_priors(glueless(3)))


def test_a_link_slower_than_a_cell_moved_across_it_is_raised_to_that() -> None:
    # Remote cells equal to the local ones look controller-bound to the fitter, so it pins no link; the nominal
    # 20 GB/s link would then cap the predicted remote cells at half what was measured across it.
    m = glueless(2)
    bw = NodeMatrix([0, 1], [0, 1], np.array([[40000.0, 40000.0], [40000.0, 40000.0]]), "MB/s")
    meas = [Measurement(Path("bw.txt"), "mlc", MlcResult("bw.txt", bandwidth_matrices=[bw]), "0")]
    rep = calibrate(m, meas, fit_on=["bandwidth_matrix"])
    assert {lt.bandwidth_gb_s for lt in rep.calibration.links} == {40.0}
    assert any(a.startswith("link 0->1: no cell is bound by it; raised") for a in rep.result.assumptions)
    assert rep.result.mape_pct("bandwidth_matrix") < 1e-9


def test_a_parameter_that_moves_cells_but_no_fitter_estimates_is_listed() -> None:
    # The same fit, had no fitter touched the link: the nominal 20 GB/s caps the remote cells, the Jacobian sees
    # it, and the listing says the tables moved it with nothing to estimate it.
    from numasim.calibrate.pipeline import unconstrained_priors

    m = glueless(2)
    bw = NodeMatrix([0, 1], [0, 1], np.array([[40000.0, 40000.0], [40000.0, 40000.0]]), "MB/s")
    meas = [Measurement(Path("bw.txt"), "mlc", MlcResult("bw.txt", bandwidth_matrices=[bw]), "0")]
    rep = calibrate(m, meas, fit_on=["bandwidth_matrix"])
    rep.result.parameters = [p for p in rep.result.parameters if not p.name.startswith("links[")]
    cal = rep.calibration.model_copy(update={"links": [
        lt.model_copy(update={"bandwidth_gb_s": 20.0}) for lt in rep.calibration.links]})
    kept = {p.parameter: p for p in unconstrained_priors(m, cal, meas, ["bandwidth_matrix"], nominal_priors(m),
                                                          rep.result, {})}
    assert kept["links[0->1].bandwidth_gb_s"].why.startswith("moves the bandwidth_matrix cells, but no fitter")
    assert "controllers[0].read_bandwidth_gb_s" not in kept


def test_jacobian_sees_only_what_a_table_depends_on() -> None:
    m = glueless(2)
    lat = NodeMatrix([0], [0], np.array([[70.0]]), "ns")  # one local cell: the link is never crossed
    meas = [Measurement(Path("l.txt"), "mlc", MlcResult("l.txt", latency_matrices=[lat]), "0")]
    ident = identifiability(m, nominal_priors(m), meas, ["latency_matrix"])
    assert ident.tables_by_parameter["controllers[0].latency_ns"] == ["latency_matrix"]
    assert ident.tables_by_parameter["links[0->1].latency_ns"] == []
    assert ident.constrained("controllers[0].latency_ns") and not ident.constrained("controllers[1].latency_ns")


def test_calibrate_cli_warns_and_json_lists_unconstrained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    args = ["calibrate", "-m", "skylake-8180-2s", str(SKX), "-o", str(out), "--fit-on", "latency,peak_bandwidth"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "not constrained by the measurements alone" in text
    assert (
        "links[0->1].bandwidth_gb_s: not constrained by the latency matrix and peak bandwidth tables; kept at "
        "50.83 GB/s (machine file (nominal))" in text
    )
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    keys = {p["parameter"] for p in data["unconstrained"]}
    assert "links[1->0].bandwidth_gb_s" in keys and "links[1->0].latency_ns" not in keys


def test_a_device_dma_read_limit_is_a_timing_parameter() -> None:
    from numasim.calibrate.priors import timing_parameters, with_parameter
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine

    cal = resolve_calibration(load_machine("seed-000-4node"))
    key = "devices[mlx5_2].dma_read_bandwidth_gb_s[1]"
    value, unit = timing_parameters(cal)[key]
    assert unit == "GB/s" and value == cal.devices[0].dma_read_bandwidth_gb_s[1]
    moved = with_parameter(cal, key, value / 2)
    assert timing_parameters(moved)[key] == (value / 2, "GB/s")
    assert moved.devices[0].attach_bandwidth_gb_s == cal.devices[0].attach_bandwidth_gb_s


def test_a_catalog_timed_machine_file_labels_its_priors_as_the_catalogs() -> None:
    """`topo import --cpu` writes the catalog's numbers into the machine file; calibrating it on its default priors
    said they were numasim's nominal numbers."""
    from numasim.calibrate.priors import prior_source
    from numasim.timing.catalog import catalog_machine
    from numasim.topology.builders import glueless

    cal = nominal_priors(catalog_machine(glueless(2), "Xeon Gold 6240"))
    src = prior_source(cal, "links[0->1].bandwidth_gb_s")
    assert src == "machine file: the platform catalog's priors for intel-cascade-lake-sp / Xeon Gold 6240"
    assert prior_source(nominal_priors(glueless(2)), "links[0->1].bandwidth_gb_s") == NOMINAL_SOURCE
