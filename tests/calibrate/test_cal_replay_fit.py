"""The fit's controllers replay, in the engine's virtual mlc, the bandwidth figure they were fitted on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.calibrate.replay_fit import _scaled, replay_consistent_bandwidth
from numasim.calibrate.validate import validate
from numasim.timing.catalog import catalog_calibration
from numasim.timing.model import LoadedLatencyCurve

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "measurements" / "public_mlc"


def _case(key: str):  # type: ignore[no-untyped-def]
    case = next(c for c in PUBLIC_MLC_CASES if key in c.label)
    machine = public_machine(case)
    return machine, load_measurements([PUBLIC / case.file]), catalog_calibration(machine, turbo=case.turbo)


def _fit_and_replay(key: str, table: str):  # type: ignore[no-untyped-def]
    machine, ms, priors = _case(key)
    rep = calibrate(machine, ms, fit_on=["latency", "peak_bandwidth"], priors=priors)
    return rep, priors, validate(machine, rep.calibration, ms, [table], method="engine").tables[0]


def test_cores_that_bound_the_peak_keep_the_priors_controllers_and_say_so() -> None:
    """2x Silver 4410Y, 12 cores a socket: at the all-reads figure as capacity the engine replayed its own bandwidth
    matrix's local cells 24 % low; the cores bind before the catalog's channels, so the controllers keep those."""
    rep, priors, bw = _fit_and_replay("4410Y", "bandwidth_matrix")
    local = [c for c in bw.cells if c.row == c.col]
    assert all(abs(c.error_pct) < 6.0 for c in local), [(c.row, c.model, c.measured) for c in local]
    for c in rep.calibration.controllers:
        assert c.read_bandwidth_gb_s == pytest.approx(priors.controller(c.node).read_bandwidth_gb_s)
    assert any("cores' misses in flight bound it" in w for w in rep.result.warnings), rep.result.warnings
    assert "replays the figure they were fitted on" in rep.calibration.provenance.notes


def test_a_controller_between_the_figure_and_the_priors_is_solved_for() -> None:
    """2x Silver 4114: the replay at the closed form's capacity was 3.6 % low; solved, it is within 1 %, and the
    capacity lies between the measured figure and the catalog's."""
    rep, priors, peak = _fit_and_replay("4114", "peak_bandwidth")
    all_reads = next(c for c in peak.cells if c.row == "all_reads")
    assert abs(all_reads.error_pct) < 1.0
    measured_gb_s = all_reads.measured / 1000.0
    total = sum(c.read_bandwidth_gb_s for c in rep.calibration.controllers)
    assert measured_gb_s < total <= sum(c.read_bandwidth_gb_s for c in priors.controllers) + 1e-9
    p = rep.result.parameter("controllers[0].read_bandwidth_gb_s")
    assert "replays the measured figure" in p.note


def test_local_cells_set_the_controllers_when_there_is_no_peak() -> None:
    machine, ms, priors = _case("4410Y")
    rep = calibrate(machine, ms, fit_on=["bandwidth_matrix"], priors=priors)
    bw = validate(machine, rep.calibration, ms, ["bandwidth_matrix"], method="engine").tables[0]
    assert max(abs(c.error_pct) for c in bw.cells if c.row == c.col) < 6.0
    # no mix measured the writes: the write bandwidth keeps the priors' ratio to the (scaled) read bandwidth
    for c in rep.calibration.controllers:
        p = priors.controller(c.node)
        assert c.write_bandwidth_gb_s / c.read_bandwidth_gb_s == pytest.approx(
            p.write_bandwidth_gb_s / p.read_bandwidth_gb_s)


def test_a_calibration_that_replays_its_figure_is_left_alone() -> None:
    from numasim.timing import resolve_calibration
    from numasim.topology.io import load_machine

    m = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(m)
    out, scale = replay_consistent_bandwidth(m, cal, prior_read_gb_s={0: 1000.0, 1: 1000.0},
                                             peak_all_reads_mb_s=110395.9, peak_nodes=[0, 1])
    assert scale.factor == {} and not scale.warnings
    assert out == cal


def test_no_faster_prior_leaves_the_fit_and_warns() -> None:
    machine, ms, priors = _case("4410Y")
    rep = calibrate(machine, ms, fit_on=["latency", "peak_bandwidth"], priors=priors)
    slow = {c.node: 1.0 for c in priors.controllers}  # priors no faster than the fit: nothing to solve in
    cal = rep.calibration.model_copy(update={"controllers": [
        c.model_copy(update={"read_bandwidth_gb_s": 143.0}) for c in rep.calibration.controllers]})
    out, scale = replay_consistent_bandwidth(machine, cal, prior_read_gb_s=slow, peak_all_reads_mb_s=286145.2,
                                             peak_nodes=[0, 1])
    assert scale.factor == {}
    assert out.controllers == cal.controllers
    assert any("priors give no faster ones" in w for w in scale.warnings)


def test_a_fitted_curve_keeps_its_latency_at_each_bandwidth() -> None:
    from numasim.timing import resolve_calibration
    from numasim.topology.io import load_machine

    m = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(m)
    curve = LoadedLatencyCurve(utilisation=[0.0, 0.5, 0.9, 1.0], added_latency_ns=[0.0, 10.0, 60.0, 140.0])
    cal = cal.model_copy(update={"controllers": [c.model_copy(update={"curve": curve}) for c in cal.controllers]})
    out = _scaled(cal, {0: 1.25}, {0})
    before, after = cal.controller(0), out.controller(0)
    assert after.read_bandwidth_gb_s == pytest.approx(1.25 * before.read_bandwidth_gb_s)
    assert after.write_bandwidth_gb_s == before.write_bandwidth_gb_s  # writes are not what the figure measured
    bw = np.linspace(0.0, 1.1 * before.read_bandwidth_gb_s, 23)
    assert np.allclose(after.curve.added_ns(bw / after.read_bandwidth_gb_s),  # type: ignore[union-attr]
                       before.curve.added_ns(bw / before.read_bandwidth_gb_s))  # type: ignore[union-attr]
    assert out.controller(1) == cal.controller(1)  # a node without a factor is untouched


def test_a_loaded_latency_table_alone_sets_the_capacity_and_the_misses_it_replays() -> None:
    """1x EPYC 9354P (NPS1): a latency matrix and a loaded-latency table, no bandwidth table, mlc unable to turn
    the prefetchers off. Its delay-0 row (mlc's all-reads traffic) now sets the controllers, and the misses in
    flight are what the replay needs with the load threads' streams prefetched: the saturated row replays within
    2 % (its bandwidth was +21 % on the catalog's controllers, its latency +25 % with the closed form's misses)."""
    machine, ms, priors = _case("NPS1")
    rep = calibrate(machine, ms, priors=priors)
    assert any("loaded-latency table's top bandwidth" in a for a in rep.result.assumptions)
    assert any("streams prefetched as mlc's were" in a for a in rep.result.assumptions)
    ll = validate(machine, rep.calibration, ms, ["loaded_latency"], method="engine").tables[0]
    top = [c for c in ll.cells if c.row == "00000"]
    assert {c.col for c in top} == {"latency", "bandwidth"}
    assert all(abs(c.error_pct) < 2.0 for c in top), [(c.col, c.model, c.measured) for c in top]
    p = rep.result.parameter("core.max_outstanding_misses")
    assert p.value == rep.calibration.core.max_outstanding_misses and "replayed" in p.note


def test_a_thread_s_misses_are_fitted_where_the_core_queue_cannot_move_the_replay() -> None:
    """Where the per-core queue does not bind (one thread a core, its own misses fewer), no value of it moves the
    replay: it stays, and the thread's own misses are what the table's lines in flight set (2x E5-2697 v4, HT
    off: 14 a core at mlc's saturated row)."""
    from numasim.calibrate.parsers.mlc import LoadedLatencyTable
    from numasim.calibrate.replay_fit import replay_consistent_misses

    machine, ms, priors = _case("E5-2697 v4, HT off")
    cal = calibrate(machine, ms, fit_on=["bandwidth_matrix"], priors=priors).calibration
    core = cal.core.model_copy(update={"outstanding_misses_per_core": 30, "max_outstanding_misses": 10})
    cal = cal.model_copy(update={"core": core})
    table = LoadedLatencyTable(np.array([0]), np.array([219.8]), np.array([142400.0]))
    out, notes = replay_consistent_misses(machine, cal, table, prefetchers_on=False)
    assert out.core.outstanding_misses_per_core == 30
    assert 12 <= out.core.max_outstanding_misses <= 16
    assert len(notes) == 1 and notes[0].startswith("core.max_outstanding_misses = ")


def test_a_replay_the_virtual_mlc_cannot_run_leaves_the_closed_form_and_says_why(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import numasim.calibrate.replay_fit as rf
    from numasim.errors import WorkloadError

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise WorkloadError("ThreadSpec.cpu = 99: no such cpu")

    monkeypatch.setattr(rf, "replay_consistent_bandwidth", refuse)
    monkeypatch.setattr(rf, "replay_consistent_misses", refuse)
    machine, ms, priors = _case("4114")
    rep = calibrate(machine, ms, priors=priors)
    assert any(w.startswith("controllers' bandwidth not checked by replay") and "no such cpu" in w
               for w in rep.result.warnings)
    assert any(w.startswith("misses in flight not checked by replay") for w in rep.result.warnings)
    assert "warning: controllers' bandwidth not checked by replay" in rep.calibration.provenance.notes
    # the closed form's capacity: the peak's all-reads figure split over the nodes
    total = sum(c.read_bandwidth_gb_s for c in rep.calibration.controllers)
    assert total == pytest.approx(97.5507, rel=1e-4)


def test_an_hmat_bandwidth_sets_the_controller_as_it_reads(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The firmware's HMAT bandwidth is the memory's figure, not what cores moved: it is not replayed."""
    import numasim.calibrate.replay_fit as rf
    from numasim.calibrate.measurements import load_measurements as load
    from numasim.topology.io import load_machine

    calls = []
    monkeypatch.setattr(rf, "replay_consistent_bandwidth", lambda *a, **k: calls.append(k) or (a[1], rf.ReplayScale()))

    for target, lat, bw in ((0, 62, 30000), (1, 115, 20000)):
        init = tmp_path / f"node{target}" / "access0" / "initiators"
        (init / "node0").mkdir(parents=True)
        (init / "read_latency").write_text(f"{lat}\n")
        (init / "read_bandwidth").write_text(f"{bw}\n")
    m = load_machine("seed-001-e5-2680v2")
    rep = calibrate(m, load([tmp_path]), fit_on=["bandwidth_matrix"], priors=catalog_calibration(m))
    assert rep.calibration.controller(0).read_bandwidth_gb_s == pytest.approx(30.0)
    assert calls == []


@pytest.mark.parametrize(("key", "within_pct"), [("NPS1", 1.0), ("NPS4", 3.0), ("4114", 4.0)])
def test_the_loaded_latency_idle_end_sets_the_local_latency_when_no_latency_table_is_fitted(
    key: str, within_pct: float
) -> None:
    """mlc's latency thread at delay 20000 is an idle-latency measurement of its own node: fitted on the
    loaded-latency table alone, the held-out latency matrix comes within a few percent (EPYC 9354P NPS1 8.0 % ->
    0.3, NPS4 7.6 -> 1.4, Silver 4114 11.0 -> 2.7 by leave-one-out; the catalog borrows Rome's and Skylake-SP's
    Platinum figures)."""
    machine, ms, priors = _case(key)
    rep = calibrate(machine, ms, fit_on=["loaded_latency"], priors=priors)
    assert any(a.startswith("no latency table fitted: the loaded-latency table's least loaded row")
               for a in rep.result.assumptions)
    lat = validate(machine, rep.calibration, ms, ["latency_matrix"], method="analytic").tables[0]
    assert lat.mape_pct < within_pct, [(c.row, c.col, c.model, c.measured) for c in lat.cells]
    table = ms[0].data.loaded_latency[0]
    first = machine.cpu_to_node[machine.cpus[0]]
    assert rep.calibration.controller(first).latency_ns == pytest.approx(float(table.latency_ns[-1]))


def test_the_thread_misses_a_calibrate_fits_are_reported_as_such() -> None:
    """2x E5-2697 v4 with HT off: the per-core queue cannot move the plateau, so the fit moves a thread's misses
    and reports that parameter (not the queue's)."""
    machine, ms, priors = _case("E5-2697 v4, HT off")
    rep = calibrate(machine, ms, priors=priors)
    p = rep.result.parameter("core.max_outstanding_misses")
    assert p.value == rep.calibration.core.max_outstanding_misses > priors.core.max_outstanding_misses
    assert "replayed" in p.note
    assert "core.max_outstanding_misses = " in rep.calibration.provenance.notes
