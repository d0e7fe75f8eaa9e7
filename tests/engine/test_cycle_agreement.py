"""Epoch mode's cache estimate against exact LRU on a *cyclic* walk in random order just over an L2 (found by
fuzzing, 2026-12-06; the cache-agreement experiment sweeps uniformly random loads only).

Exact mode's sets each hold at most their ways of the cycle's lines: at 1.01x (4,136 consecutive lines visited in
a random order, 8.08 a set on average) the sets that got no more than 8 of them keep them, and 84 % of the reuses
hit the L2. The estimate used to see one reuse distance for every line, the whole cycle, above the level's
capacity, and sent every reuse to the L3 (27 % slower than exact mode at 1.01x, 10 % at 1.04x). Each reuse is now
held against its own set's occupancy where the window's distinct lines were all counted
(``_feed_kernel.level_hits``).
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.timing import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.access import AccessChunk


@pytest.mark.parametrize("ratio", [1.0, 1.01, 1.02, 1.04, 1.1, 1.5])
def test_a_random_cycle_near_the_l2_runs_as_long_in_both_modes(ratio: float) -> None:
    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m)
    l2 = next(c.size_bytes for c in cal.caches if c.name == "L2")
    lines = int(ratio * l2 / 64)
    order = np.random.default_rng(1).permutation(lines)
    addr = (np.resize(order, 4 * lines) * 64).astype(np.uint64)
    pm = PageMap(4096)
    pm.assign(0, np.zeros(lines * 64 // 4096 + 1, dtype=np.int16))
    run = {mode: simulate(m, cal, [ThreadSpec(0, cpu=0, dependent=True)], [AccessChunk.build(addr)], pm,
                          mode=mode).run_time_ns for mode in ("exact", "epoch")}
    assert run["epoch"] == pytest.approx(run["exact"], rel=0.02)
