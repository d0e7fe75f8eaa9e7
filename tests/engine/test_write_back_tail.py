"""What a resource did during the run is never negative, even when posted write-backs reach it after the end.

One thread on an EPYC 9354P (NPS4, catalog-timed) walks a buffer homed on another node, inside its L2, writing
10 % of its accesses: each write hit on a clean line owes a write-back, posted, which queues behind the core
die's port and reaches the links downstream after the program's last access. The whole tail used to be taken off
every resource's busy time, so those links, idle meanwhile, read -792 ns busy and -7.66 GB/s.
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.timing.catalog import catalog_calibration
from numasim.workload.access import AccessChunk


@pytest.mark.parametrize("mode", ["exact", "epoch"])
def test_resources_report_no_negative_work_when_write_backs_outlast_the_run(mode: str) -> None:
    m = public_machine(next(c for c in PUBLIC_MLC_CASES if "9354P NPS4" in c.label))
    cal = catalog_calibration(m)
    ws, n = 857_920, 26_143
    addr = ((np.arange(n) % (ws // 64)) * 64).astype(np.uint64)
    write = np.random.default_rng(0).random(n) < 0.1
    pm = PageMap(4096)
    pm.assign(0, np.full(ws // 4096 + 1, 1, dtype=np.int16))  # every page on node 1
    r = simulate(m, cal, [ThreadSpec(0, cpu=m.node(2).cpus[0])], [AccessChunk.build(addr, is_write=write)], pm,
                 mode=mode)
    moved = [x for x in r.resources if x.bytes]
    assert any(x.name.startswith("die") for x in moved)  # the case still has its core die's port
    for x in moved:
        assert 0.0 <= x.busy_ns <= r.run_time_ns, (x.name, x.busy_ns)
        assert 0.0 <= x.utilisation_mean <= 1.0 and 0.0 <= x.bandwidth_used_gb_s <= x.bandwidth_available_gb_s, x
