"""A modified line's move between two cores, timed through the engine (the coherence tests' probe)."""

from __future__ import annotations

import numpy as np

from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.timing.model import Calibration
from numasim.topology.model import Machine
from numasim.workload.access import AccessChunk


def transfer_ns(m: Machine, cal: Calibration, writer: int, reader: int, home: int, mode: str) -> float:
    """The reader's mean latency over 256 lines the writer wrote, homed on node ``home``, one load at a time."""
    n = 256
    lines = np.arange(n, dtype=np.uint64) * np.uint64(64)
    pm = PageMap(4096)
    pm.assign(0, np.full(n * 64 // 4096, home, dtype=np.int16))
    chunk = AccessChunk.build(np.r_[lines, lines[::-1]], thread=np.r_[np.zeros(n, np.int32), np.ones(n, np.int32)],
                              is_write=np.r_[np.ones(n, bool), np.zeros(n, bool)])  # fmt: skip
    specs = [ThreadSpec(0, cpu=writer), ThreadSpec(1, cpu=reader, dependent=True, start_ns=1e6)]
    r = simulate(m, cal, specs, [chunk], pm, mode=mode, record_latencies=False)
    return float(r.threads[1].load_to_use_mean_ns)
