"""Core-to-core ping-pong latencies of 27 public machines (tests/data/measurements/core_to_core), predicted
from the platform catalog alone: every tier replayed through the engine, physically ordered, within generous
bounds; the rows whose platform took its figures from that very machine flagged circular."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from numasim.calibrate.core_to_core import (
    core_to_core_machine,
    load_core_to_core,
    predict_tiers,
)
from numasim.calibrate.suite import SuiteRow, core_to_core_rows
from numasim.errors import CalibrationError
from numasim.timing.catalog import catalog_calibration

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements" / "core_to_core"
FILE = DATA / "nviennot-core-to-core-latency.toml"


@pytest.fixture(scope="module")
def rows() -> list[SuiteRow]:
    out, notes = core_to_core_rows(DATA)
    assert notes == []
    return out


def test_every_machine_and_tier_is_predicted(rows: list[SuiteRow]) -> None:
    machines = [m for p in sorted(DATA.glob("*.toml")) for m in load_core_to_core(p).machine]
    assert len(machines) == 27 and [r.machine for r in rows] == [m.label for m in machines]
    for r, m in zip(rows, machines, strict=True):
        assert r.cells == len(m.tiers()) and math.isfinite(r.mape_pct), r
        assert r.mape_pct < 60.0, r  # generous: a regression would cross it, not a goal


def test_rows_whose_platform_took_its_figures_from_them_are_circular(rows: list[SuiteRow]) -> None:
    circular = {r.machine for r in rows if r.circular}
    assert circular == {
        "2x EPYC 7742 (core-to-core-latency)",
        "2x EPYC 7R13, AWS c6a.metal (core-to-core-latency)",
        "2x Xeon Platinum 8375C, AWS c6i.metal (core-to-core-latency)",
        "2x Xeon X5650 (core-to-core-latency)",
        "2x Xeon E5-2690 (core-to-core-latency)",
        "2x EPYC 9454 (core-to-core-latency-plus)",
        "2x EPYC 9754 (core-to-core-latency-plus)",
    }
    assert all(r.mape_pct < 1.0 for r in rows if r.circular)  # the engine replays the figures it was given


@pytest.mark.parametrize("label", ["2x EPYC 7R13, AWS c6a.metal (core-to-core-latency)", "1x EPYC 7773X (core-to-core-latency)"])
def test_tiers_are_ordered_as_a_transfer_travels(label: str) -> None:
    """Within a complex < between complexes of the line's home socket < via another socket."""
    entry = next(m for m in load_core_to_core(FILE).machine if m.label == label)
    machine = core_to_core_machine(entry)
    p = predict_tiers(machine, catalog_calibration(machine))
    assert p["local"] < p["socket"]
    if "remote" in p:
        assert p["socket"] < p["socket_home_away"] and p["socket"] < p["remote"]


def test_a_malformed_file_names_the_field_and_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    text = FILE.read_text().replace("median_ns = 48.0", "median_ns = -48.0", 1)
    bad.write_text(text)
    with pytest.raises(CalibrationError, match=r"machine\.0\.local\.median_ns = -48\.0"):
        load_core_to_core(bad)
    bad.write_text("source = \"x\"\n[[machine]\n")
    with pytest.raises(CalibrationError, match="not a readable TOML"):
        load_core_to_core(bad)
