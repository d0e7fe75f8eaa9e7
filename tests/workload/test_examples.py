"""The example workload files parse, generate, and place on a shipped machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.topology.io import load_machine
from numasim.workload.generate import total_accesses
from numasim.workload.placement import place_workload
from numasim.workload.spec import load_workload

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "workloads").glob("*.toml"))


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_parses_and_places(path: Path) -> None:
    w = load_workload(path)
    assert total_accesses(w) > 0
    p = place_workload(load_machine("seed-003-2node"), w)
    assert p.failed_pages == 0
    assert set(p.pages_by_allocation) == {a.name for a in w.allocations}
