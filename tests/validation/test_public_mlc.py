"""The public mlc runs (tests/data/measurements/public_mlc): every file is a case, every case builds its catalog
machine and is predicted, nothing in the catalog was taken from them, and the predictions stay within generous
bounds. Replayed analytically here (seconds); experiments/validation/run.py replays them through the engine for
the report. No bound here is the issue's goal: those are reported, met or not."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.calibrate.suite import SuiteRow, _tables_of, public_mlc_rows
from numasim.timing.catalog import catalog_calibration, match_cpu
from numasim.tools.mlc_load import PACE_SHARING_SOURCES

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "measurements" / "public_mlc"


@pytest.fixture(scope="module")
def public_report() -> tuple[list[SuiteRow], list[str]]:
    return public_mlc_rows(PUBLIC, method="analytic")


def test_every_file_is_a_case_and_is_listed() -> None:
    files = {p.name for p in PUBLIC.glob("*.md")} - {"README.md"}
    cases = {c.file for c in PUBLIC_MLC_CASES}
    assert files == cases
    readme = (PUBLIC / "README.md").read_text(encoding="utf-8")
    assert all(f in readme for f in files)
    assert len(PUBLIC_MLC_CASES) >= 8 and len({c.cpu for c in PUBLIC_MLC_CASES}) >= 7


@pytest.mark.parametrize("case", PUBLIC_MLC_CASES, ids=lambda c: c.file)
def test_each_file_states_its_source_and_its_machine(case) -> None:  # type: ignore[no-untyped-def]
    head = (PUBLIC / case.file).read_text(encoding="utf-8").split("```")[0]
    for field in ("**Machine:**", "**Source:**", "**Transcribed:**", "**Doubtful:**", "**Tool:**"):
        assert field in head, (case.file, field)
    # the catalog knows the SKU itself (its cores and clock), not just the platform by pattern
    assert match_cpu(case.cpu).how == "sku"
    assert match_cpu(case.cpu).sku.cores == case.cores_per_socket  # type: ignore[union-attr]


@pytest.mark.parametrize("case", PUBLIC_MLC_CASES, ids=lambda c: c.file)
def test_the_machine_has_the_idle_matrix_layout(case) -> None:  # type: ignore[no-untyped-def]
    machine = public_machine(case)
    ms = load_measurements([PUBLIC / case.file])
    lat = ms[0].data.latency_matrices
    cxl = [n.id for n in machine.nodes if n.memory_kind.value == "cxl"]
    cpu_nodes = [n.id for n in machine.nodes if n.cpus]
    if lat:
        assert lat[0].rows == cpu_nodes and lat[0].cols == machine.node_ids
    assert len(cpu_nodes) == case.sockets * case.nodes_per_socket
    assert len(cxl) == (case.cxl_socket is not None)
    assert len(machine.cpus) == case.sockets * case.cores_per_socket * case.threads_per_core


CATALOG_SOURCE_FILES = {"spr-2s-silver-4416plus.md", "cloudlab-2s-haswell-E5-2630v3.md", "cloudlab-2s-icelake-8360Y.md",
                        "cxl-2s-genoa-epyc9224-nps2.md"}
"""Public runs the catalog took numbers from: Sapphire Rapids' idle latency and UPI 2.0 read efficiency come from
the Silver 4416+ run (the only SPR latency found), checked on the other SPR run (Silver 4410Y); Haswell-EP's and
Ice Lake-SP's idle latencies (and nothing else) from the two CloudLab runs, whose bandwidth matrices stay held out.
The EPYC 9224 run's remote latency showed that the EPYCs need their remote - local from their own cache-to-cache
tiers, not Intel's (``coherence_remote_delta``, which cites it): its latency rows are circular, the rest held out."""
LATENCY_ONLY_SOURCES = {"cloudlab-2s-haswell-E5-2630v3.md", "cloudlab-2s-icelake-8360Y.md", "cxl-2s-genoa-epyc9224-nps2.md"}
COHERENCE_ONLY_SOURCES = {"plantegg-2s-broadwell-E5-2682v4.md"}
"""Public runs whose cache-to-cache figures (and nothing else) the catalog took: Broadwell-EP's, from the only
Broadwell c2c run found; Haswell-EP borrows them. Only their c2c rows are circular."""


def test_no_catalog_prior_comes_from_a_held_out_public_file() -> None:
    """Held-out data: a catalog number taken from one of these files would make its rows circular; only
    :data:`CATALOG_SOURCE_FILES` are sources (and their rows are flagged circular).

    (Two off-list SKUs take cores, clock and L3 size from the lscpu printed beside the runs: configuration, cited
    as such; no latency or bandwidth figure.)"""
    files = [c.file for c in PUBLIC_MLC_CASES if c.file not in CATALOG_SOURCE_FILES | COHERENCE_ONLY_SOURCES]
    for case in PUBLIC_MLC_CASES:
        cal = catalog_calibration(public_machine(case))
        for p in cal.provenance.priors:
            assert not any(f in p.source for f in files), (case.file, p.parameter, p.source)
            if any(f in p.source for f in COHERENCE_ONLY_SOURCES):
                assert p.parameter.startswith("coherence."), (case.file, p.parameter, p.source)
            if any(f in p.source for f in LATENCY_ONLY_SOURCES):
                assert p.parameter.endswith("latency_ns"), (case.file, p.parameter, p.source)
            if p.parameter.endswith(("latency_ns", "bandwidth_gb_s")) and not p.parameter.startswith("caches"):
                assert "lscpu-public-mlc" not in p.source and "public mlc run" not in p.source, (p.parameter, p.source)


def test_every_case_is_predicted_in_the_scenarios_its_tables_allow(
    public_report: tuple[list[SuiteRow], list[str]],
) -> None:
    rows, notes = public_report
    assert notes == []
    for case in PUBLIC_MLC_CASES:
        mine = [r for r in rows if r.machine == case.label]
        held = _tables_of(load_measurements([PUBLIC / case.file]))
        assert {r.table for r in mine if r.scenario == "catalog only"} == held
        fit = {r.table for r in mine if r.scenario.startswith("fit")}
        assert fit == (held - {"latency_matrix", "peak_bandwidth"} if {"latency_matrix", "peak_bandwidth"} <= held
                       else set())
        loo = {r.table for r in mine if r.scenario == "leave one table out"}
        assert loo == (held if len(held) >= 2 else set())
    sources = {c.label for c in PUBLIC_MLC_CASES if c.file in CATALOG_SOURCE_FILES}
    for r in rows:
        assert r.cells > 0 and math.isfinite(r.mape_pct), r
        latency_only = {c.label for c in PUBLIC_MLC_CASES if c.file in LATENCY_ONLY_SOURCES}
        coherence_only = {c.label for c in PUBLIC_MLC_CASES if c.file in COHERENCE_ONLY_SOURCES}
        pace_source = {c.label for c in PUBLIC_MLC_CASES if c.file in PACE_SHARING_SOURCES}
        if r.machine in pace_source:  # its loaded latency taught the virtual mlc how SMT threads pace
            assert r.circular == (r.table == "loaded_latency"), r
        elif r.machine in coherence_only:  # only its c2c table predicts the catalog's own source
            assert r.circular == (r.table == "c2c_latency"), r
        elif r.machine in latency_only:  # only its latency predicts the catalog's own source
            assert r.circular == (r.table == "latency_matrix"), r
        elif r.machine in sources:  # its latency and remote bandwidth predict the catalog's own source
            assert r.circular == (r.table in ("latency_matrix", "bandwidth_matrix")) or (
                r.scenario == "catalog only" and r.table == "loaded_latency"), r
        else:
            assert not r.circular, r


def test_public_predictions_within_generous_bounds(public_report: tuple[list[SuiteRow], list[str]]) -> None:
    # Generous: bounds a regression would cross. Catalog-only is allowed far off (measured up to ~145 % on a
    # Sapphire Rapids Silver whose DIMM population is unknown); a fit on the machine's own idle latency and peak
    # stays within 60 %.
    rows, _ = public_report
    for r in rows:
        bound = 60.0 if r.scenario.startswith("fit") else 250.0
        assert r.mape_pct < bound, r


@pytest.mark.parametrize("case", [c for c in PUBLIC_MLC_CASES if {"latency_matrix", "peak_bandwidth"} <= _tables_of(
    load_measurements([PUBLIC / c.file]))], ids=lambda c: c.file)
def test_the_one_minute_fit_gives_back_the_latency_matrix_it_was_fitted_on(case) -> None:  # type: ignore[no-untyped-def]
    # The report skips the tables a scenario fitted; a fit that cannot reproduce them is broken, not a prediction.
    # (The 9224's came back at 97 ns in every cell: switch latencies fitted, then dropped.)
    from numasim.calibrate.pipeline import calibrate
    from numasim.calibrate.validate import validate

    machine = public_machine(case)
    ms = load_measurements([PUBLIC / case.file])
    result = calibrate(machine, ms, fit_on=["latency", "peak_bandwidth"],
                       priors=catalog_calibration(machine, turbo=case.turbo))
    report = validate(machine, result.calibration, ms, method="analytic")
    # A CXL node read from across sockets is left out of the fit, and says so (the 4410Y's costs 171 ns more
    # than from its own socket where DRAM's costs 67: no term of the model holds it); every other cell comes back.
    cxl = {n.id: n.socket for n in machine.nodes if n.memory_kind.value == "cxl"}
    socket = {n.id: n.socket for n in machine.nodes}
    across = [c for c in report.table("latency_matrix").cells
              if int(c.col) in cxl and socket[int(c.row)] != cxl[int(c.col)]]
    fitted = [c for c in report.table("latency_matrix").cells if c not in across]
    assert 100 * np.mean([abs(c.model / c.measured - 1) for c in fitted]) < 1.0
    said = " ".join(result.result.assumptions)
    assert all(f"({c.row}, {c.col})" in said for c in across), said
    assert bool(across) == (case.cxl_socket is not None and case.sockets > 1)
