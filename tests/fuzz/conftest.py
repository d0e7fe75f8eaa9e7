"""Warm-up for the fuzz suite: the first simulation in a fresh tree compiles the engine's numba loops (15-30 s),
which is not a hang; do it once, outside the per-call alarm."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def _compiled_engine() -> None:
    from numasim.engine import simulate
    from numasim.engine.pagemap import PageMap
    from numasim.engine.spec import ThreadSpec
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.builders import glueless
    from numasim.workload.access import AccessChunk

    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    chunk = AccessChunk.build(np.arange(64, dtype=np.uint64) * 64)
    pages = PageMap.from_arrays(np.array([0], dtype=np.uint64), np.zeros(1, dtype=np.int16))
    for mode in ("epoch", "exact"):
        simulate(machine, resolve_calibration(machine, nominal=True), [ThreadSpec(id=0, cpu=0)], [chunk], pages, mode=mode)
