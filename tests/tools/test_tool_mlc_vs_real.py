"""A real mlc run and the virtual one are read by the same parser and can be compared cell by cell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers.mlc import parse_mlc, parse_mlc_text
from numasim.timing import resolve_calibration
from numasim.tools.context import tool_context
from numasim.tools.mlc import format_mlc, mlc
from numasim.topology.io import load_machine

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc"


@pytest.mark.parametrize(
    ("machine", "page", "rel"),
    [
        ("skylake-8180-2s", "fdio-csit-2s-skylake-plat8180.md", 0.05),
        ("seed-001-e5-2680v2", "kuleuven-thinking-2s-ivybridge-E5-2680v2.md", 0.05),
    ],
)
def test_virtual_mlc_matches_the_real_run_it_was_calibrated_on(machine: str, page: str, rel: float) -> None:
    real = parse_mlc(DATA / page)
    m = load_machine(machine)
    sim = parse_mlc_text(format_mlc(mlc(tool_context(m, resolve_calibration(m)), ["--latency_matrix",
                                                                              "--bandwidth_matrix"])))
    for a, b in ((real.latency_matrix, sim.latency_matrix), (real.bandwidth_matrix, sim.bandwidth_matrix)):
        assert a is not None and b is not None
        assert a.rows == b.rows and a.cols == b.cols
        assert np.allclose(b.values, a.values, rtol=rel), (a.values, b.values)
