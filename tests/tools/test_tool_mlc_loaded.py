"""Virtual ``mlc --loaded_latency``: load from first principles (a pace in core cycles, outstanding misses, FIFO
controllers), checked against Little's law, the core clock, and the two real runs; and ``numasim validate``
compares exactly what the tool prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.parsers.mlc import parse_mlc, parse_mlc_text
from numasim.calibrate.predict import predict_loaded_latency
from numasim.calibrate.validate import validate
from numasim.cli import main
from numasim.timing import resolve_calibration
from numasim.timing.model import Calibration
from numasim.tools.context import tool_context
from numasim.tools.mlc import format_mlc, mlc
from numasim.tools.mlc_load import (
    ASSUMED_CORE_CLOCK_GHZ,
    LoadPace,
    fit_core_clock,
    line_gap_ns,
    threads_on_core,
)
from numasim.topology.io import load_machine

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc"
E5 = DATA / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
SKX = DATA / "fdio-csit-2s-skylake-plat8180.md"
DELAYS = (0, 200, 1000, 20000)


def _core(cal: Calibration, **core: object) -> Calibration:
    body = cal.model_dump(exclude={"id"})
    body["core"].update(core)
    return Calibration.model_validate(body)


@pytest.fixture(scope="module")
def e5_run():
    m = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(m)
    real = parse_mlc(E5).loaded_latency[0]
    sim = mlc(tool_context(m, cal), ["--loaded_latency"], delays=DELAYS)
    return m, cal, real, sim


def _real_row(real, delay: int) -> tuple[float, float]:
    i = list(real.inject_delay).index(delay)
    return float(real.latency_ns[i]), float(real.bandwidth_mb_s[i])


def test_saturated_latency_is_littles_law_of_the_outstanding_misses(e5_run) -> None:
    # Nothing caps the load: at delay 0 every thread keeps its core's misses in flight, the controllers serve
    # their bandwidth, and latency = lines in flight x 64 B / bandwidth (threads x M + the chase's one line).
    m, cal, _, sim = e5_run
    _, lat_ns, bw_mb_s = sim.loaded[0]
    peak_mb_s = sum(c.read_bandwidth_gb_s for c in cal.controllers) * 1000.0
    assert 0.97 * peak_mb_s <= bw_mb_s <= 1.01 * peak_mb_s
    in_flight = (len(m.cpus) - 1) * cal.core.max_outstanding_misses + 1
    assert lat_ns == pytest.approx(in_flight * 64 / bw_mb_s * 1e3, rel=0.03)


def test_more_outstanding_misses_raise_the_plateau_not_the_bandwidth(e5_run) -> None:
    m, cal, _, sim = e5_run
    more = mlc(tool_context(m, _core(cal, max_outstanding_misses=2 * cal.core.max_outstanding_misses)),
               ["--loaded_latency"], delays=(0,)).loaded[0]
    assert more[1] == pytest.approx(2 * sim.loaded[0][1], rel=0.05)
    assert more[2] == pytest.approx(sim.loaded[0][2], rel=0.02)


def test_the_delay_counts_cycles_of_the_calibrations_clock(e5_run) -> None:
    m, cal, _, _ = e5_run
    assert cal.core.core_clock_ghz == pytest.approx(2.599, abs=1e-3)  # fitted off the loaded-latency table
    cal = _core(cal, core_clock_ghz=None)  # a calibration with no clock: the tool assumes one, and says so
    sim = mlc(tool_context(m, cal), ["--loaded_latency"], delays=(20000,))
    assert sim.clock is not None and sim.clock.assumed
    assert sim.clock.ghz == ASSUMED_CORE_CLOCK_GHZ
    assert "numasim: ASSUMED core clock 2.500 GHz" in format_mlc(sim)
    fast = mlc(tool_context(m, _core(cal, core_clock_ghz=2 * ASSUMED_CORE_CLOCK_GHZ)), ["--loaded_latency"],
               delays=(20000,))
    assert fast.clock is not None and not fast.clock.assumed and "ASSUMED core clock" not in format_mlc(fast)
    # the shipped calibration does not say how many threads a core runs: the catalog's SKU does, and it is said
    assert "numasim: 2 thread(s) a core pace the load threads (the calibration has no threads_per_core; Xeon " \
           "E5-2680 v2: 20 threads / 10 cores (platform catalog))" in format_mlc(fast)
    unnamed = m.model_copy(update={"cpu_model": None})  # a cpu the catalog cannot name: assumed, said so
    anon = mlc(tool_context(unnamed, _core(cal, core_clock_ghz=2.5)), ["--loaded_latency"], delays=(20000,))
    assert "numasim: ASSUMED 2 of mlc's threads a core" in format_mlc(anon)
    # at a large delay the load threads are paced by the delay alone: twice the clock, twice their lines
    chase_mb_s = 64 / np.array([sim.loaded[-1][1], fast.loaded[0][1]]) * 1e3
    load_mb_s = np.array([sim.loaded[-1][2], fast.loaded[0][2]]) - chase_mb_s
    assert load_mb_s[1] / load_mb_s[0] == pytest.approx(2.0, rel=0.02)
    pace = LoadPace()
    expect = (len(m.cpus) - 1) * 64 / line_gap_ns(20000, sim.clock, pace) * 1e3
    assert load_mb_s[0] == pytest.approx(expect, rel=0.02)


@pytest.mark.parametrize("threads_per_core", [None, 1, 2])
def test_the_clock_fitted_off_the_tools_own_table_is_the_clock_it_ran_at(threads_per_core: int | None) -> None:
    # the virtual mlc at a known clock, its light rows fitted back: the pace model inverted (HT on, off, unknown)
    m = load_machine("seed-001-e5-2680v2")
    cal = _core(resolve_calibration(m), core_clock_ghz=2.9, threads_per_core=threads_per_core)
    delays = (0, 300, 500, 1000, 2500, 9000, 20000)
    run = mlc(tool_context(m, cal), ["--loaded_latency"], delays=delays)
    d, lat, bw = (np.array(col, dtype=float) for col in zip(*run.loaded, strict=True))
    cpus = sorted(m.cpus)
    sharing = threads_on_core(cpus, threads_per_core, cpus)
    fit = fit_core_clock(d, lat, bw, [sharing[c] for c in cpus[1:]])
    assert fit is not None and fit.rows >= 4  # delay 0 (saturated) is never read
    assert fit.ghz == pytest.approx(2.9, rel=0.02) and fit.spread < 0.03


def test_a_clock_fit_needs_three_lightly_loaded_rows() -> None:
    # only the delays below 300 cycles, or rows far above the least latency: nothing to read the pace off
    assert fit_core_clock([0, 50, 100, 200], [250.0, 240.0, 150.0, 110.0], [1e5, 1e5, 9e4, 6e4], [2] * 39) is None
    assert fit_core_clock([300, 500, 1000], [200.0, 180.0, 90.0], [4e4, 3e4, 1.5e4], [2] * 39) is None
    assert fit_core_clock([300, 500], [100.0, 99.0], [4e4, 3e4], [2] * 39) is None
    with pytest.raises(ValueError, match="3 delays, 2 latencies"):
        fit_core_clock([300, 500, 1000], [100.0, 99.0], [4e4, 3e4, 2e4], [2] * 39)


def test_load_falls_with_the_delay_and_never_exceeds_the_controllers(e5_run) -> None:
    _, cal, _, sim = e5_run
    bws = [bw for _, _, bw in sim.loaded]
    lats = [lat for _, lat, _ in sim.loaded]
    assert bws == sorted(bws, reverse=True) and lats == sorted(lats, reverse=True)
    peak_mb_s = sum(c.read_bandwidth_gb_s for c in cal.controllers) * 1000.0
    # the column is what the controllers served during the chase: at most their peak, to rounding. Summing each
    # thread's own rate read 0.06 % over it at delay 0 (threads that end apart each read faster at their end)
    assert bws[0] <= peak_mb_s * (1 + 1e-9)
    assert bws[0] == pytest.approx(peak_mb_s, rel=0.01)


def test_below_saturation_latency_is_the_curve_at_the_tools_own_bandwidth(e5_run) -> None:
    # paced threads leave the FIFO queues almost empty: the loaded-latency curve is what they pay
    m, cal, _, sim = e5_run
    rows = sim.loaded[1:]
    closed = predict_loaded_latency(m, cal, np.array([bw for _, _, bw in rows]) / 1000.0)
    for (d, lat_ns, _), want in zip(rows, closed, strict=True):
        assert abs(lat_ns - want) / want < 0.05, (d, lat_ns, want)


@pytest.mark.parametrize(
    ("machine", "path", "lat_rel", "bw_rel"),
    [
        # The E5-2680 v2 is predicted with the load loop's cost fitted on the 8180 and an ASSUMED 2.5 GHz clock
        # (its nominal is 2.8): its bandwidth column is 3-7 % low at large delays.
        ("seed-001-e5-2680v2", E5, 0.07, 0.13),
        ("skylake-8180-2s", SKX, 0.10, 0.05),
    ],
)
def test_rows_at_saturation_and_beyond_the_knee_follow_the_real_run(machine, path, lat_rel, bw_rel) -> None:
    # the knee itself (E5: delays 50-100, 8180: 100-200) is where the model is weakest; see
    # experiments/004-mlc-loaded-latency
    m = load_machine(machine)
    real = parse_mlc(path).loaded_latency[0]
    sim = mlc(tool_context(m, resolve_calibration(m)), ["--loaded_latency"], delays=(0, 300, 1000, 20000))
    for d, lat_ns, bw_mb_s in sim.loaded:
        real_lat, real_bw = _real_row(real, d)
        assert abs(lat_ns - real_lat) / real_lat < lat_rel, (d, lat_ns, real_lat)
        assert abs(bw_mb_s - real_bw) / real_bw < bw_rel, (d, bw_mb_s, real_bw)


def test_validate_compares_exactly_what_the_tool_prints(capsys: pytest.CaptureFixture[str]) -> None:
    name = "seed-001-e5-2680v2"
    assert main(["numactl", "--machine", name, "--", "mlc", "--loaded_latency"]) == 0
    printed = parse_mlc_text(capsys.readouterr().out).loaded_latency[0]
    m = load_machine(name)
    rep = validate(m, resolve_calibration(m), load_measurements([E5]), ["loaded_latency"], method="engine")
    cells = rep.table("loaded_latency").cells
    lat = {c.row: c.model for c in cells if c.col == "latency"}
    bw = {c.row: c.model for c in cells if c.col == "bandwidth"}
    assert len(lat) == len(bw) == len(printed.inject_delay) == 19
    for d, want_lat, want_bw in zip(printed.inject_delay, printed.latency_ns, printed.bandwidth_mb_s, strict=True):
        assert lat[f"{d:05d}"] == want_lat and bw[f"{d:05d}"] == want_bw


def test_idle_latency_core_clocks_round_trip_through_the_parser() -> None:
    # the 8180's calibration holds the clock mlc measured (202.0 core clocks in 80.8 ns); the virtual mlc prints
    # its core clocks in it, and calibrate's parser reads the same clock back
    m = load_machine("skylake-8180-2s")
    cal = resolve_calibration(m)
    assert cal.core.core_clock_ghz == pytest.approx(2.5)
    text = format_mlc(mlc(tool_context(m, cal), ["--idle_latency"]))
    assert "ASSUMED" not in text
    assert parse_mlc_text(text).core_clock_ghz == pytest.approx(2.5, rel=2e-3)
    e5 = load_machine("seed-001-e5-2680v2")
    text = format_mlc(mlc(tool_context(e5, _core(resolve_calibration(e5), core_clock_ghz=None)), ["--idle_latency"]))
    assert "numasim: ASSUMED core clock 2.500 GHz" in text


def test_a_cores_threads_share_its_delay_loop() -> None:
    """mlc's delay loop runs on the core's pipeline: a load thread alone on its core paces twice as fast as one
    sharing it (measured on Intel's svr-info examples, E5-2697 v4 with hyper-threading off and on)."""
    from numasim.timing.catalog import catalog_calibration
    from numasim.tools.mlc import _threads_on_core
    from numasim.tools.mlc_load import PACE_MEASURED_THREADS_PER_CORE, CoreClock
    from numasim.topology.builders import multi_die

    clock = CoreClock(2.5, False, "test")
    assert line_gap_ns(700, clock, threads_on_core=1) == line_gap_ns(700, clock) / 2
    assert line_gap_ns(700, clock, threads_on_core=PACE_MEASURED_THREADS_PER_CORE) == line_gap_ns(700, clock)
    ht = multi_die(2, "SNC1", cores_per_socket=18, threads_per_core=2)
    cal = catalog_calibration(ht, sku="Xeon E5-2697 v4")
    assert cal.core.threads_per_core == 2
    everything = tool_context(ht, cal, cpunodebind=[0, 1])
    assert set(_threads_on_core(everything, cal, everything.cpus()).values()) == {2}
    first_threads = [c for n in ht.nodes for c in n.cpus[:18]]  # one cpu of each core
    assert set(_threads_on_core(everything, cal, first_threads).values()) == {1}
    # without hyper-threading the box shows one cpu a core: the catalog says so, and no cpus are paired
    off = multi_die(2, "SNC1", cores_per_socket=18, threads_per_core=1)
    cal_off = catalog_calibration(off, sku="Xeon E5-2697 v4")
    prior = next(p for p in cal_off.provenance.priors if p.parameter == "core.threads_per_core")
    assert cal_off.core.threads_per_core == 1 and "hyper-threading off" in prior.source
    ctx_off = tool_context(off, cal_off, cpunodebind=[0, 1])
    assert set(_threads_on_core(ctx_off, cal_off, ctx_off.cpus()).values()) == {1}
    # a calibration that does not say how many threads a core runs keeps the pace as measured
    cal_unknown = cal_off.model_copy(update={"core": cal_off.core.model_copy(update={"threads_per_core": None})})
    assert set(_threads_on_core(ctx_off, cal_unknown, ctx_off.cpus()).values()) == {PACE_MEASURED_THREADS_PER_CORE}


def test_with_the_prefetchers_on_the_load_threads_stream_ahead_as_far_as_their_cores_reach() -> None:
    """``-e`` (mlc leaves the prefetchers as they are: on): the load threads' consecutive lines are prefetched.
    By Little's law at the saturated plateau, a core then keeps what one of its threads reaches alone where its
    threads share a queue (Silver 4114: 10 fill buffers + 11 lines of stream, against the 16-entry queue with
    them off), and each thread its own misses plus the stream depth where they do not (EPYC 9354P: 2 x (24 +
    16), near the 85 a core its real runs, prefetchers on, imply)."""
    from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
    from numasim.timing.catalog import catalog_calibration

    for name, off_lines, on_lines in (("Silver 4114", 16, 21), ("9354P NPS1", 48, 80)):
        case = next(c for c in PUBLIC_MLC_CASES if name in c.label)
        m = public_machine(case)
        cal = catalog_calibration(m, turbo=case.turbo)
        cores = len(m.cpus) // (cal.core.threads_per_core or 2)
        for argv, lines in ((["--loaded_latency"], off_lines), (["--loaded_latency", "-e"], on_lines)):
            _, latency_ns, mb_s = mlc(tool_context(m, cal), argv, delays=(0,)).loaded[0]
            per_core = mb_s * 1e-3 * latency_ns / 64 / cores
            assert abs(per_core / lines - 1.0) < 0.1, (name, argv, per_core)


def test_e_alone_is_the_default_run_with_the_prefetchers_left_on() -> None:
    m = load_machine("seed-001-e5-2680v2")
    r = mlc(tool_context(m, resolve_calibration(m)), ["-e"], delays=(0, 20000))
    assert r.sections == ["latency_matrix", "peak_injection_bandwidth", "bandwidth_matrix", "loaded_latency"]
    assert r.command_line == "-e" and len(r.loaded) == 2


def test_the_closed_form_counts_prefetched_lines_where_the_run_had_them() -> None:
    """The closed form's saturated rows are Little's law over what the load threads keep in flight: with the
    prefetchers on, their prefetched lines too, as the engine replay with ``-e`` has them."""
    from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
    from numasim.timing.catalog import catalog_calibration

    case = next(c for c in PUBLIC_MLC_CASES if "9354P NPS1" in c.label)
    m = public_machine(case)
    cal = catalog_calibration(m, turbo=case.turbo)
    bw = np.array([352.6])
    off = predict_loaded_latency(m, cal, bw, saturated=np.array([True]))[0]
    on = predict_loaded_latency(m, cal, bw, saturated=np.array([True]), prefetchers_on=True)[0]
    # Zen 4 in the catalog: 24 misses and 16 prefetched lines a thread, no shared queue
    assert np.isclose(on / off, 40 / 24, rtol=0.02)
