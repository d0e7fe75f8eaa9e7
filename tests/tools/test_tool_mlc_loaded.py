"""Virtual ``mlc --loaded_latency`` against the real run the shipped calibration was fitted on, and against
``numasim validate``'s engine replay of the same rows (QA: the two used to disagree by 2.6x at delay 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers.mlc import parse_mlc
from numasim.calibrate.replay import replay_loaded_latency
from numasim.timing import resolve_calibration
from numasim.tools.context import tool_context
from numasim.tools.mlc import mlc
from numasim.topology.io import load_machine

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc"
DELAYS = (0, 100, 1000, 20000)


@pytest.fixture(scope="module")
def e5_run():
    m = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(m)
    real = parse_mlc(DATA / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md").loaded_latency[0]
    sim = mlc(tool_context(m, cal), ["--loaded_latency"], delays=DELAYS)
    return m, cal, real, sim


def _real_row(real, delay: int) -> tuple[float, float]:
    i = list(real.inject_delay).index(delay)
    return float(real.latency_ns[i]), float(real.bandwidth_mb_s[i])


def test_delay_zero_row_is_within_15_percent_of_the_real_run(e5_run) -> None:
    _, _, real, sim = e5_run
    d, lat_ns, bw_mb_s = sim.loaded[0]
    real_lat, real_bw = _real_row(real, 0)
    assert d == 0
    assert abs(lat_ns - real_lat) / real_lat < 0.15, (lat_ns, real_lat)
    assert abs(bw_mb_s - real_bw) / real_bw < 0.05, (bw_mb_s, real_bw)


def test_unsaturated_rows_follow_the_real_run(e5_run) -> None:
    _, _, real, sim = e5_run
    for d, lat_ns, bw_mb_s in sim.loaded[1:]:
        real_lat, real_bw = _real_row(real, d)
        assert abs(lat_ns - real_lat) / real_lat < 0.10, (d, lat_ns, real_lat)
        assert abs(bw_mb_s - real_bw) / real_bw < 0.15, (d, bw_mb_s, real_bw)


def test_tool_agrees_with_validates_replay_at_its_own_bandwidth(e5_run) -> None:
    m, cal, _, sim = e5_run
    rows = sim.loaded[1:]  # below saturation, where latency is not a cliff in the bandwidth
    replay = replay_loaded_latency(m, cal, np.array([bw for _, _, bw in rows]) / 1000.0)
    for (d, lat_ns, _), want in zip(rows, replay, strict=True):
        assert abs(lat_ns - want) / want < 0.05, (d, lat_ns, want)


def test_load_bandwidth_falls_with_the_delay_and_saturates_at_the_controllers(e5_run) -> None:
    _, cal, _, sim = e5_run
    bws = [bw for _, _, bw in sim.loaded]
    assert bws == sorted(bws, reverse=True)
    peak_mb_s = sum(c.read_bandwidth_gb_s for c in cal.controllers) * 1000.0
    assert bws[0] <= peak_mb_s * 1.02  # back-pressure: never more than the controllers deliver


def test_skylake_table_is_followed_at_saturation_and_at_large_delays() -> None:
    # the other shipped mlc table: 111 load threads at 2.5 GHz (the injection-delay model was fitted on both)
    m = load_machine("skylake-8180-2s")
    real = parse_mlc(DATA / "fdio-csit-2s-skylake-plat8180.md").loaded_latency[0]
    sim = mlc(tool_context(m, resolve_calibration(m)), ["--loaded_latency"], delays=(0, 300, 1000, 20000))
    for d, lat_ns, bw_mb_s in sim.loaded:
        real_lat, real_bw = _real_row(real, d)
        assert abs(lat_ns - real_lat) / real_lat < 0.15, (d, lat_ns, real_lat)
        assert abs(bw_mb_s - real_bw) / real_bw < 0.15, (d, bw_mb_s, real_bw)
