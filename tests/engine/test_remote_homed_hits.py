"""A cache hit costs the level's latency wherever the line's home is.

On the platforms numasim models, a read hit on a clean line homed on another node is served by the local cache
with no coherence message: Intel's L3 (inclusive through Broadwell, a snoop filter after) and AMD's CCX L3 hold
remote-homed lines like local ones, and a line in E or S state needs no snoop to be read. Only the first touch of
each line goes to its home. What is not modelled is the dirty case (a line modified in another socket's cache,
read here: a cache-to-cache transfer), see docs/design-rationale.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.engine.pagemap import PageMap
from numasim.engine.simulate import simulate
from numasim.engine.spec import ThreadSpec
from numasim.timing.model import apply_calibration
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.topology.routing import latency_table_ns
from numasim.workload.access import AccessChunk

LINES = 64  # every other line of 8 KiB (no stream for the prefetcher): fits in the first level
ROUNDS = 200


@pytest.mark.parametrize("mode", ["exact", "epoch"])
def test_only_the_cold_misses_see_the_home_node(mode: str) -> None:
    machine = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(machine)
    lat = latency_table_ns(apply_calibration(machine, cal))
    addr = np.tile(np.arange(LINES, dtype=np.uint64) * np.uint64(128), ROUNDS) + np.uint64(1 << 30)

    def run(home: int) -> float:
        pages = PageMap(4096)
        pages.assign(1 << 30, np.array([home, home], dtype=np.int64))
        r = simulate(machine, cal, [ThreadSpec(0, cpu=0, dependent=True)], [AccessChunk.build(addr, thread=0)],
                     pages, mode=mode, record_latencies=False)
        return r.threads[0].finish_ns - r.threads[0].start_ns

    local, remote = run(0), run(1)
    extra = remote - local
    cold = LINES * (lat[0, 1] - lat[0, 0])
    # every one of the 12,800 hits costs the same: the difference is the 64 cold misses' (queueing aside)
    assert extra == pytest.approx(cold, rel=0.05)
