"""Virtual tools replayed through the engine (:func:`numasim.engine.simulate`), for validation by simulation
rather than by closed-form evaluation.

* idle-latency matrix, like ``mlc --latency_matrix``: one dependent pointer chase from the first cpu of node
  ``i`` over distinct random cache lines of a buffer on node ``j`` (each step misses); latency = run time /
  steps;
* bandwidth matrix, like ``mlc --bandwidth_matrix``: one independent sequential reader per cpu of node ``i``,
  each over its own buffer on node ``j``; bandwidth = bytes read / run time.
"""

from __future__ import annotations

import numpy as np

from numasim.calibrate.model import Calibration
from numasim.calibrate.parsers import NodeMatrix
from numasim.errors import CalibrationError
from numasim.topology.model import Machine

__all__ = ["replay_latency_matrix", "replay_bandwidth_matrix", "engine_available"]

_LINE = 64
_PAGE = 4096


def engine_available() -> bool:
    try:
        from numasim.engine.simulate import simulate  # noqa: F401
    except ImportError:
        return False
    return True


def replay_latency_matrix(
    machine: Machine,
    calibration: Calibration,
    like: NodeMatrix,
    *,
    steps: int = 256,
    buffer_bytes: int = 1 << 30,
    mode: str = "epoch",
    seed: int = 0,
) -> NodeMatrix:
    """The latency matrix a virtual mlc measures on the calibrated machine (ns), cell by cell."""
    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.workload.access import AccessChunk

    rng = np.random.default_rng(seed)
    lines = rng.choice(buffer_bytes // _LINE, size=steps, replace=False).astype(np.uint64) * _LINE
    out = np.full((len(like.rows), len(like.cols)), np.nan)
    for a, i in enumerate(like.rows):
        cpus = machine.node(i).cpus
        if not cpus:
            raise CalibrationError(f"replay: node {i} has no cpu to run the pointer chase on")
        for b, j in enumerate(like.cols):
            if not np.isfinite(like.values[a, b]):
                continue
            pages = PageMap(_PAGE)
            pages.assign(0, np.full(buffer_bytes // _PAGE, j, dtype=np.int16))
            res = simulate(
                machine,
                calibration,
                [ThreadSpec(0, cpu=cpus[0], dependent=True)],
                [AccessChunk.build(lines)],
                pages,
                mode=mode,
                seed=seed,
                record_latencies=False,
            )
            out[a, b] = res.run_time_ns / steps
    return NodeMatrix(list(like.rows), list(like.cols), out, "ns")


def replay_bandwidth_matrix(
    machine: Machine,
    calibration: Calibration,
    like: NodeMatrix,
    *,
    lines_per_thread: int = 2048,
    mode: str = "epoch",
    seed: int = 0,
) -> NodeMatrix:
    """The read bandwidth matrix (MB/s) a virtual mlc measures on the calibrated machine, cell by cell."""
    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.workload.access import AccessChunk, concat_chunks

    out = np.full((len(like.rows), len(like.cols)), np.nan)
    per = lines_per_thread * _LINE
    for a, i in enumerate(like.rows):
        cpus = machine.node(i).cpus
        if not cpus:
            raise CalibrationError(f"replay: node {i} has no cpu to run the readers on")
        threads = [ThreadSpec(t, cpu=c) for t, c in enumerate(cpus)]
        chunk = concat_chunks(
            AccessChunk.build(np.arange(t * per, (t + 1) * per, _LINE, dtype=np.uint64), thread=t)
            for t in range(len(cpus))
        )
        for b, j in enumerate(like.cols):
            if not np.isfinite(like.values[a, b]):
                continue
            pages = PageMap(_PAGE)
            pages.assign(0, np.full(len(cpus) * per // _PAGE, j, dtype=np.int16))
            res = simulate(machine, calibration, threads, [chunk], pages, mode=mode, seed=seed, record_latencies=False)
            out[a, b] = len(chunk) * _LINE / res.run_time_ns * 1000.0
    return NodeMatrix(list(like.rows), list(like.cols), out, "MB/s")
