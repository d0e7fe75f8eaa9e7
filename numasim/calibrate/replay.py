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

from numasim.calibrate.parsers import NodeMatrix
from numasim.errors import CalibrationError
from numasim.timing.model import Calibration
from numasim.topology.model import Machine

__all__ = ["replay_latency_matrix", "replay_bandwidth_matrix", "replay_loaded_latency", "engine_available"]

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


def replay_loaded_latency(
    machine: Machine,
    calibration: Calibration,
    bandwidth_gb_s: np.ndarray,
    *,
    steps: int = 200,
    mode: str = "epoch",
    seed: int = 0,
) -> np.ndarray:
    """Latency (ns) a virtual ``mlc --loaded_latency`` measures at each offered system bandwidth.

    As mlc does: a dependent pointer chase on the first cpu of the first node over that node's memory, while
    every other cpu streams its own node's memory. mlc throttles its load threads with an injection delay in
    cycles; here each load thread's compute time per line is set so that together they offer the measured
    bandwidth, which is what the row reports.
    """
    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.workload.access import AccessChunk, concat_chunks

    home = next(n for n in machine.nodes if n.has_cpus and n.has_memory)
    chase_cpu = home.cpus[0]
    loaders = [(c, n.id) for n in machine.nodes if n.has_memory for c in n.cpus if c != chase_cpu]
    if not loaders:
        raise CalibrationError("replay: loaded latency needs cpus besides the one running the chase")
    rng = np.random.default_rng(seed)
    chase_region = 1 << 30
    chase_lines = rng.choice(chase_region // _LINE, size=steps, replace=False).astype(np.uint64) * _LINE
    idle = calibration.controller(home.id).latency_ns
    out = []
    for bw in np.asarray(bandwidth_gb_s, dtype=float):
        # long enough for the chase even at 4x idle latency; loaders keep offering load all that time
        duration_ns = steps * idle * 4.0
        per_thread_gb_s = bw / len(loaders)
        gap_ns = _LINE / per_thread_gb_s if per_thread_gb_s > 0 else duration_ns
        lines = max(int(duration_ns / gap_ns) + 1, 1)
        pages = PageMap(_PAGE)
        pages.assign(0, np.full(chase_region // _PAGE, home.id, dtype=np.int16))
        chunks = [AccessChunk.build(chase_lines, thread=0)]
        threads = [ThreadSpec(0, cpu=chase_cpu, dependent=True)]
        base = chase_region
        region = -(-lines * _LINE // _PAGE) * _PAGE
        for t, (cpu, node) in enumerate(loaders, start=1):
            pages.assign(base, np.full(region // _PAGE, node, dtype=np.int16))
            addrs = np.arange(base, base + lines * _LINE, _LINE, dtype=np.uint64)
            chunks.append(AccessChunk.build(addrs, thread=t, compute_ns=gap_ns))
            # Phases spread over one gap, as independent loaders drift apart: started together, every loader
            # would hit the controller in the same instant each gap, a burst the chase queues behind.
            threads.append(ThreadSpec(t, cpu=cpu, start_ns=gap_ns * (t - 1) / len(loaders)))
            base += region
        res = simulate(
            machine, calibration, threads, [concat_chunks(chunks)], pages, mode=mode, seed=seed, record_latencies=False
        )
        chase = next(r for r in res.threads if r.thread_id == 0)
        out.append(chase.memory_latency_mean_ns)  # issue to data, as mlc's loaded latency
    return np.array(out)
