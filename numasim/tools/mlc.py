"""Virtual Intel Memory Latency Checker: ``--latency_matrix``, ``--idle_latency``, ``--bandwidth_matrix``,
``--peak_injection_bandwidth``, ``--loaded_latency``, and the default run (matrices, peak, loaded latency).

What mlc does, and the simulated counterpart (buffers are allocated on a node with ``mbind(MPOL_BIND)``, as
``numa_alloc_onnode`` does, and faulted in by the simulated kernel; the engine times the accesses):

* idle latency matrix: one thread on a cpu of node *i* chases dependent pointers at random 64-byte lines of a
  buffer on node *j* (prefetchers defeated); the mean load-to-use time in ns. ``--idle_latency``: the same
  from the first allowed cpu to its own node, also in core clocks (of :func:`~numasim.tools.mlc_load.core_clock`).
* bandwidth matrix: every cpu of node *i* streams reads through its own buffer on node *j*; MB/s
  (10**6 bytes/s) summed over threads.
* peak injection bandwidth: every allowed cpu reads (and writes, by the mix) memory of its own node; the
  mixes ``ALL Reads``, ``3:1``, ``2:1``, ``1:1`` and ``Stream-triad like`` as mlc defines them (:data:`MIXES`:
  a store's read for ownership counts as a read, so 3:1 is two loads and a store; triad-like stores are
  non-temporal).
* loaded latency: one latency thread on the first cpu chases its node's memory while every other cpu runs mlc's
  load loop on its node's memory (read-only traffic, mlc's default): :mod:`numasim.tools.mlc_load` says how an
  injection delay in core cycles becomes a pace, and why nothing else limits the load but the cores' outstanding
  misses and the controllers' queues. The latency thread's mean latency and the system bandwidth (all threads)
  per delay. The clock the delays count is the calibration's ``core.core_clock_ghz``; without one an assumed
  clock, and the output says so. mlc turns the hardware prefetchers off for it where it can (root, the msr
  module, an Intel processor); with ``-e`` ("do not modify prefetchers") or where it cannot, they run, and the
  load threads' streams are prefetched.

Only a window of each thread's accesses is simulated (:data:`LATENCY_LOADS`, :data:`BANDWIDTH_LINES`); a
deterministic engine makes repeated samples pointless. Output layout: mlc 3.x as it writes it (tabs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from numasim.engine import SimulationResult, ThreadSpec, simulate
from numasim.engine.pagemap import PageMap
from numasim.errors import WorkloadError
from numasim.kernel import mempolicy as mp
from numasim.timing.model import Calibration
from numasim.tools.context import ToolContext
from numasim.tools.mlc_load import (
    ASSUMED_CORE_CLOCK_GHZ,
    CoreClock,
    LoadPace,
    core_clock,
    line_gap_ns,
    pace_threads_per_core,
    threads_on_core,
)
from numasim.topology.model import Machine
from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.access import AccessChunk, concat_chunks

__all__ = [
    "MlcResult",
    "c2c_local_pair",
    "c2c_transfer_ns",
    "mlc",
    "peak_mix_mb_s",
    "bandwidth_cell_mb_s",
    "format_mlc",
    "MLC_VERSION",
    "INJECT_DELAYS",
    "MIXES",
    "LOADED_CHASE_LOADS",
    "LOADED_WINDOW_GAPS",
    "LATENCY_LOADS",
    "BANDWIDTH_LINES",
    "LATENCY_BUFFER_BYTES",
]

MLC_VERSION = "v3.5"
INJECT_DELAYS = (0, 2, 8, 15, 50, 100, 200, 300, 400, 500, 700, 1000, 1300, 1700, 2500, 3500, 5000, 9000, 20000)
"""mlc's default ``--loaded_latency`` injection delays (core cycles)."""
MIXES: tuple[tuple[str, int | None], ...] = (
    ("ALL Reads", None), ("3:1 Reads-Writes", 2), ("2:1 Reads-Writes", 1), ("1:1 Reads-Writes", 0),
    ("Stream-triad like", 2),
)
"""Label and loads per store (``None``: loads only).

mlc names a mix by what reaches memory, a store's read for ownership counted as a read: its ``-W3`` ("3:1") loads
two lines and stores one, ``-W2`` ("2:1") loads one and stores one, ``-W5`` ("1:1") only stores, and it counts
their lines as 2 + 2, 1 + 2 and 2 (its source's per-mix line counts: ``n_lines * 2`` for ``-W3`` over the lines
read, ``* 3`` for ``-W2``, ``* 2`` over the lines written for ``-W5``).

Its "Stream-triad like" mix (``-W10``, :data:`NON_TEMPORAL_MIXES`) loads two lines and stores one with a
non-temporal store, which writes its line without reading it for ownership: the virtual mlc times that mix's
stores as writes of one line at the controllers' write bandwidth (the calibration's ``write_cost_factor`` 1, no
write-allocate evasion to apply) and counts them once, as mlc does."""
NON_TEMPORAL_MIXES = frozenset({"Stream-triad like"})
"""The mixes of :data:`MIXES` whose stores are non-temporal."""
LATENCY_LOADS = 2000
BANDWIDTH_LINES = 1024
PARTIAL_STORE_BYTES = 32
"""Bytes of each line a load thread's store writes on a processor with SpecItoM: part of the line, so that the
read for ownership happens (mlc's own rule; the exact part is not public, any part short of 64 bytes does)."""
LATENCY_BUFFER_BYTES = 200 * 1000 * 1000
"""The latency buffer (mlc 3.5 uses 2000 MB; 200 MB keeps small simulated nodes from running out)."""
_BW_BUFFER_MB = 100.0


@dataclass
class MlcResult:
    """What one mlc run measured (sections not asked for are ``None``/empty)."""

    sections: list[str]
    nodes: list[int]
    memory_nodes: list[int]
    latency_ns: np.ndarray | None = None
    idle_latency_ns: float | None = None
    bandwidth_mb_s: np.ndarray | None = None
    peak_mb_s: dict[str, float] = field(default_factory=dict)
    loaded: list[tuple[int, float, float]] = field(default_factory=list)
    """``(inject delay, latency ns, bandwidth MB/s)`` rows."""
    c2c_hit_ns: float | None = None
    c2c_hitm_ns: float | None = None
    c2c_remote_ns: dict[str, np.ndarray] = field(default_factory=dict)
    """``--c2c_latency``: a read of lines another core of the socket read (HIT) or wrote (HITM), and per writer
    x reader node the HITM with the lines homed at the writer's node (``"writer"``) or the reader's (``"reader"``;
    nan: the same node, or no memory there)."""
    clock: CoreClock | None = None
    """The core clock the injection delays and core clocks counted (``clock.assumed``: not the machine's own)."""
    pace_sharing_note: str = ""
    """``--loaded_latency`` without the calibration's ``threads_per_core``: where the threads a core that pace
    the load threads came from (the catalog's SKU, or ASSUMED: :func:`~numasim.tools.mlc_load.pace_threads_per_core`)."""
    command_line: str = ""
    calibration_id: str = ""
    seed: int = 0


@dataclass(frozen=True)
class _Buf:
    """A placed buffer: its address range and the node of each page (VMAs may merge after mbind)."""

    start: int
    end: int
    nodes: np.ndarray


def _bound_buffer(ctx: ToolContext, length: int, node: int) -> _Buf:
    vma = ctx.kernel.mmap(ctx.task, length)
    start, end = vma.start, vma.end
    res = ctx.kernel.mbind(ctx.task, start, end - start, mp.MPOL_BIND, {node})
    if not res.ok:
        raise WorkloadError(f"mlc: mbind to node {node} failed: {res.errno}")
    ctx.kernel.touch(ctx.task, start, end - start)
    nodes = np.concatenate(
        [v.nodes[max(start - v.start, 0) // PAGE_SIZE_BYTES : (min(end, v.end) - v.start) // PAGE_SIZE_BYTES]
         for v in ctx.task.mm.vmas_in(start, end)]
    )
    if (nodes < 0).any() or len(nodes) != (end - start) // PAGE_SIZE_BYTES:
        raise WorkloadError(f"mlc: node {node} cannot hold a {length}-byte buffer")
    return _Buf(start, end, nodes.copy())


def _pages(bufs: Sequence[_Buf]) -> PageMap:
    pm = PageMap(PAGE_SIZE_BYTES)
    for b in bufs:
        pm.assign(b.start, b.nodes)
    return pm


def _free(ctx: ToolContext, bufs: Sequence[_Buf]) -> None:
    for b in bufs:
        ctx.kernel.munmap(ctx.task, b.start, b.end - b.start)


def _chase(rng: np.random.Generator, vma: _Buf, loads: int) -> np.ndarray:
    lines = (vma.end - vma.start) // 64
    pick = rng.choice(lines, size=min(loads, lines), replace=False).astype(np.uint64)
    return np.uint64(vma.start) + pick * np.uint64(64)


def _latency_matrix(ctx: ToolContext, nodes: list[int], mems: list[int]) -> np.ndarray:
    rng = np.random.default_rng(ctx.seed)
    out = np.full((len(nodes), len(mems)), np.nan)
    for j, mem in enumerate(mems):
        vma = _bound_buffer(ctx, LATENCY_BUFFER_BYTES, mem)
        pm = _pages([vma])
        addr = _chase(rng, vma, LATENCY_LOADS)
        for i, node in enumerate(nodes):
            cpu = ctx.machine.node(node).cpus[0]
            r = simulate(ctx.machine, ctx.calibration, [ThreadSpec(0, cpu=cpu, dependent=True)],
                         [AccessChunk.build(addr)], pm, seed=ctx.seed, record_latencies=False)
            out[i, j] = r.run_time_ns / len(addr)
        _free(ctx, [vma])
    return out


def _stream_threads(
    ctx: ToolContext, cpus: Sequence[int], mem_of: Sequence[int], loads_per_store: int | None, lines: int
) -> float:
    """Each cpu streams ``lines`` lines of its own slice of a buffer on ``mem_of[k]``: loads only
    (``loads_per_store=None``), else ``loads_per_store`` loads of one buffer then a store to another, over and
    over (stores only at 0); the system bandwidth in MB/s: all bytes over the span from the first start to the last
    finish."""
    by_node: dict[int, list[int]] = {}
    for k, mem in enumerate(mem_of):
        by_node.setdefault(mem, []).append(k)
    writes = loads_per_store is not None
    per_thread = lines * 64
    slices: dict[int, tuple[int, int]] = {}
    vmas = []
    for mem, ks in by_node.items():
        rbuf = _bound_buffer(ctx, per_thread * len(ks), mem)
        wbuf = _bound_buffer(ctx, per_thread * len(ks), mem) if writes else None
        vmas += [rbuf] + ([wbuf] if wbuf is not None else [])
        for pos, k in enumerate(ks):
            slices[k] = (rbuf.start + pos * per_thread, (wbuf.start + pos * per_thread) if wbuf else 0)
    chunks = []
    specs = []
    step = np.arange(lines, dtype=np.uint64) * np.uint64(64)
    for k, cpu in enumerate(cpus):
        rstart, wstart = slices[k]
        reads = np.uint64(rstart) + step
        if loads_per_store is None:
            addr, wr = reads, np.zeros(len(reads), dtype=bool)
        elif loads_per_store == 0:
            addr, wr = np.uint64(wstart) + step, np.ones(lines, dtype=bool)
        else:
            # the loads then one store: the store stream advances once per ``loads_per_store`` loads
            per = loads_per_store
            n_groups = lines // per
            rd = reads[: n_groups * per].reshape(n_groups, per)
            w = (np.uint64(wstart) + np.arange(n_groups, dtype=np.uint64) * np.uint64(64))[:, None]
            addr = np.concatenate([rd, w], axis=1).ravel()
            wr = np.zeros((n_groups, per + 1), dtype=bool)
            wr[:, -1] = True
            wr = wr.ravel()
        specs.append(ThreadSpec(k, cpu=cpu))
        # On a processor with SpecItoM (write-allocate evasion) mlc stores to part of each line only, so that no
        # read for ownership is skipped and what it counts still moved (its source's supports_spec_itom rule).
        size = np.where(wr, PARTIAL_STORE_BYTES, 64) if ctx.calibration.core.write_allocate_evasion > 0 else 64
        chunks.append(AccessChunk.build(addr, thread=k, is_write=wr, size_bytes=size))
    r = simulate(ctx.machine, ctx.calibration, specs, [concat_chunks(chunks)], _pages(vmas), seed=ctx.seed,
                 record_latencies=False)
    span = max(t.finish_ns for t in r.threads) - min(t.start_ns for t in r.threads)
    # mlc reports what moves on the memory bus: a write's read for ownership counts too. On both real runs the
    # project holds, counting writes once would put the 1:1 mix above the channels' peak (E5-2680 v2: 81.1 GB/s
    # reported, 1.5 x 81.1 = 121.7 GB/s with uncounted reads for ownership against 119.4 GB/s of DDR3-1866 x 8
    # channels; 8269CY 199 x 1.5 = 299 GB/s against 281.6). So a write counts the write_cost_factor lines the
    # engine moved for it.
    wcf = ctx.calibration.core.write_cost_factor
    total = sum(len(c) + (wcf - 1.0) * int(np.count_nonzero(c.is_write)) for c in chunks) * 64
    _free(ctx, vmas)
    return total / span * 1e3  # bytes/ns = GB/s; x1000 = MB/s


def bandwidth_cell_mb_s(ctx: ToolContext, node: int, mem: int) -> float:
    """One cell of ``--bandwidth_matrix``: every cpu of ``node`` streams reads of memory on ``mem``; MB/s.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> from numasim.tools.context import tool_context
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> round(bandwidth_cell_mb_s(tool_context(m, resolve_calibration(m)), 0, 0) / 1000)  # measured: 55.3
    55
    """
    cpus = list(ctx.machine.node(node).cpus)
    return _stream_threads(ctx, cpus, [mem] * len(cpus), None, BANDWIDTH_LINES)


def _bandwidth_matrix(ctx: ToolContext, nodes: list[int], mems: list[int]) -> np.ndarray:
    out = np.full((len(nodes), len(mems)), np.nan)
    for i, node in enumerate(nodes):
        for j, mem in enumerate(mems):
            out[i, j] = bandwidth_cell_mb_s(ctx, node, mem)
    return out


def _local_mem(ctx: ToolContext, cpu: int) -> int:
    node = ctx.kernel.cpu_to_node[cpu]
    if ctx.machine.node(node).controller is not None:
        return node
    return min(n.id for n in ctx.machine.nodes if n.controller is not None)


def peak_mix_mb_s(ctx: ToolContext, label: str) -> float:
    """One mix of ``--peak_injection_bandwidth`` (a label of :data:`MIXES`): every allowed cpu reads (and writes,
    by the mix) memory of its own node; the system's MB/s as mlc counts it.

    Examples
    --------
    >>> from numasim import load_machine, resolve_calibration
    >>> from numasim.tools.context import tool_context
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> ctx = tool_context(m, resolve_calibration(m))  # the whole machine, as mlc's peak run takes it
    >>> round(peak_mix_mb_s(ctx, "ALL Reads") / 1000)  # measured: 110.4
    110
    """
    loads = dict(MIXES).get(label, -1)
    if loads == -1:
        raise MlcUsageError(f"peak mix {label!r}: mlc's mixes are {', '.join(k for k, _ in MIXES)}")
    cpus = ctx.cpus()
    mems = [_local_mem(ctx, c) for c in cpus]
    return _stream_threads(_non_temporal(ctx) if label in NON_TEMPORAL_MIXES else ctx, cpus, mems, loads,
                           BANDWIDTH_LINES)


def _peak(ctx: ToolContext) -> dict[str, float]:
    return {label: peak_mix_mb_s(ctx, label) for label, _ in MIXES}


def _non_temporal(ctx: ToolContext) -> ToolContext:
    """``ctx`` with stores that are non-temporal: a line written once, with no read for ownership (the
    calibration's write cost factor 1, nothing left for write-allocate evasion to skip)."""
    core = ctx.calibration.core.model_copy(update={"write_cost_factor": 1.0, "write_allocate_evasion": 0.0})
    return replace(ctx, calibration=ctx.calibration.model_copy(update={"core": core}))


LOADED_CHASE_LOADS = 500
"""Dependent loads the latency thread times per injection delay (after the load has reached steady state); more
where a load thread would issue fewer than :data:`LOADED_WINDOW_GAPS` lines during them."""
LOADED_WINDOW_GAPS = 32
"""Lines each load thread issues, at least, while the chase runs: the bandwidth column counts the traffic in that
window (:func:`served_mb_s`), and at large delays 500 loads span a few of a thread's lines only."""


def _load_threads(
    ctx: ToolContext, cpus: Sequence[int], mems: Sequence[int], lines_of: Sequence[int], gaps_ns: Sequence[float],
    prefetchers_on: bool = False,
) -> tuple[list[ThreadSpec], list[AccessChunk], list[_Buf]]:
    """mlc's load threads: thread ``k`` on ``cpus[k]`` reads ``lines_of[k]`` lines of its own buffer on
    ``mems[k]``, one every ``gaps_ns[k]`` while a miss slot is free (independent reads: up to the core's
    ``max_outstanding_misses`` in flight).

    The lines are every other line of the buffer: a thread's misses, demand or prefetch, all sit in its core's
    fill buffers, so its outstanding misses are the whole of what it has in flight (Little's law on both real
    tables: 16-17 lines per core at saturation), as when mlc has turned the prefetchers off. With them on
    (``prefetchers_on``: ``-e``, or a processor mlc cannot control), the lines are consecutive: a stream the
    engine's prefetch rule runs ahead of, up to the core's reach (:func:`~numasim.engine.cores.thread_prefetch_lines`).
    """
    by_node: dict[int, list[int]] = {}
    for k, mem in enumerate(mems):
        by_node.setdefault(mem, []).append(k)
    step = 64 if prefetchers_on else 2 * 64
    stride = np.uint64(step)
    per_thread = max(lines_of) * step
    bufs, start_of = [], {}
    for mem, ks in by_node.items():
        buf = _bound_buffer(ctx, per_thread * len(ks), mem)
        bufs.append(buf)
        for pos, k in enumerate(ks):
            start_of[k] = buf.start + pos * per_thread
    specs, chunks = [], []
    for k, cpu in enumerate(cpus):
        addr = np.uint64(start_of[k]) + np.arange(lines_of[k], dtype=np.uint64) * stride
        # Started spread over one gap, as independent threads drift apart: started together, they would all
        # reach the controller in the same instant each gap (a burst the latency thread queues behind).
        specs.append(ThreadSpec(k, cpu=cpu, start_ns=gaps_ns[k] * k / len(cpus)))
        chunks.append(AccessChunk.build(addr, thread=k, compute_ns=gaps_ns[k]))
    return specs, chunks, bufs


def _threads_on_core(ctx: ToolContext, cal: Calibration, cpus: Sequence[int]) -> dict[int, int]:
    """How many of ``cpus`` (the tool's threads) share each one's physical core: by the threads a core of
    :func:`~numasim.tools.mlc_load.pace_threads_per_core` (the calibration's, else the catalog's for the machine's
    cpu) and Linux's numbering (:func:`~numasim.engine.cores.core_of_cpus`); without either,
    :data:`~numasim.tools.mlc_load.PACE_MEASURED_THREADS_PER_CORE` each (the pace as measured)."""
    return threads_on_core(ctx.machine.cpus, pace_threads_per_core(ctx.machine, cal.core)[0], cpus)


def _loaded(
    ctx: ToolContext, delays: Sequence[int], pace: LoadPace = LoadPace(), prefetchers_on: bool = False
) -> list[tuple[int, float, float]]:
    """mlc's loaded-latency table: ``(delay, latency ns, bandwidth MB/s)`` per injection delay.

    The latency thread (first allowed cpu) chases dependent pointers through its node's memory while a load thread
    on every other allowed cpu reads its own node's memory at the pace of :mod:`numasim.tools.mlc_load`. Nothing
    caps the offered load: where the threads offer more than a controller serves, its FIFO queue grows until
    every thread has its ``max_outstanding_misses`` in flight (Little's law), which is the saturated plateau.
    The chase starts once every load thread runs and ends before any stops; the bandwidth column is what the
    controllers served during the chase (:func:`served_mb_s`), every thread's traffic, the latency thread's
    included.
    """
    clock = core_clock(ctx.calibration)
    cal = ctx.calibration
    cpus = ctx.cpus()
    lat_cpu, load_cpus = cpus[0], cpus[1:]
    rng = np.random.default_rng(ctx.seed)
    lat_node = _local_mem(ctx, lat_cpu)
    lat_buf = _bound_buffer(ctx, LATENCY_BUFFER_BYTES, lat_node)
    base_chase = _chase(rng, lat_buf, LOADED_CHASE_LOADS)
    lat_id = len(load_cpus)
    load_mems = [_local_mem(ctx, c) for c in load_cpus]
    per_node = {n: load_mems.count(n) for n in set(load_mems)}
    idle_ns = cal.controller(lat_node).latency_ns
    outstanding = cal.core.max_outstanding_misses
    # mlc's threads sharing each one's core (its delay loop shares the core's pipeline): from the calibration's
    # threads a core and Linux's numbering; without it, two a core, as the pace constants were measured
    sharing = _threads_on_core(ctx, cal, cpus)
    rows = []
    for d in delays:
        gaps_ns = [line_gap_ns(d, clock, pace, sharing[c]) for c in load_cpus]
        gap_ns = min(gaps_ns, default=line_gap_ns(d, clock, pace))
        # Run length only (no cap on the load): each node's threads share at most its controller's bandwidth,
        # so a thread reads at most one line per ``k x 64 B / bandwidth``; the chase's loads take at most the
        # time every line in flight needs to drain (Little's law) beyond the idle latency.
        served_gap = {n: max(gap_ns, k * 64.0 / cal.controller(n).read_bandwidth_gb_s) for n, k in per_node.items()}
        drain_ns = max([k * outstanding * 64.0 / cal.controller(n).read_bandwidth_gb_s for n, k in per_node.items()],
                       default=0.0)
        est_ns = 2.0 * idle_ns + drain_ns
        warmup_ns = max(gaps_ns, default=gap_ns) + 4.0 * est_ns
        # a chase long enough for every load thread to issue its window's lines even at the idle latency (fresh
        # lines: a longer chase, not the same one again, which its cache would serve)
        loads_needed = int(np.ceil(LOADED_WINDOW_GAPS * max(gaps_ns, default=0.0) / idle_ns))
        chase = base_chase if loads_needed <= len(base_chase) else _chase(
            np.random.default_rng((ctx.seed, d)), lat_buf, loads_needed)
        duration_ns = warmup_ns + len(chase) * est_ns
        for _ in range(6):
            spec = ThreadSpec(lat_id, cpu=lat_cpu, dependent=True, start_ns=warmup_ns if load_cpus else 0.0)
            chunk = AccessChunk.build(chase, thread=lat_id)
            lines_of = [int(duration_ns / served_gap[n]) + 16 for n in load_mems]
            specs, chunks, bufs = (
                _load_threads(ctx, load_cpus, load_mems, lines_of, gaps_ns, prefetchers_on) if load_cpus
                else ([], [], [])
            )
            r = simulate(ctx.machine, cal, [*specs, spec], [concat_chunks([*chunks, chunk])],
                         _pages([lat_buf, *bufs]), seed=ctx.seed, record_latencies=False)
            _free(ctx, bufs)
            lat_rec = next(t for t in r.threads if t.thread_id == lat_id)
            loads = [t for t in r.threads if t.thread_id is not None and t.thread_id < lat_id]
            if not loads or lat_rec.finish_ns <= min(t.finish_ns for t in loads):
                break
            duration_ns *= 2.0  # the chase outlasted a load thread: run the load longer
        else:
            raise WorkloadError(f"mlc --loaded_latency: the latency thread outlasts the load at delay {d}")
        chase_ns = lat_rec.finish_ns - lat_rec.start_ns
        rows.append((d, chase_ns / len(chase), served_mb_s(r, lat_rec.start_ns, lat_rec.finish_ns)))
    _free(ctx, [lat_buf])
    return rows


def served_mb_s(result: SimulationResult, start_ns: float, end_ns: float) -> float:
    """The memory bandwidth the controllers delivered between ``start_ns`` and ``end_ns`` (MB/s), from their busy
    time in that window (the run's utilisation series) at the bytes a busy nanosecond moved over the whole run.

    mlc's bandwidth column sums each thread's bytes over its own run time. Threads that end at different times
    each read faster in their last moments, when fewer compete, and that sum read up to 0.06 % above the
    controllers' peak at saturation (seed-001-e5-2680v2 at delay 0): a rate no machine delivers. Counted over the
    latency thread's chase, a window every load thread spans, the traffic is what the memory served while the
    latency was timed, and it cannot exceed the controllers' peak (their utilisation is at most 1).

    Examples
    --------
    >>> from numasim.engine import PageMap, ThreadSpec, simulate
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> from numasim.workload.access import AccessChunk
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> cal = resolve_calibration(m)
    >>> pm = PageMap(4096)
    >>> pm.assign(0, np.zeros(4096, dtype=np.int16))
    >>> addr = np.arange(100_000, dtype=np.uint64) * 128  # every other line: no prefetch
    >>> r = simulate(m, cal, [ThreadSpec(0, cpu=0)], [AccessChunk.build(addr)], pm)
    >>> served_mb_s(r, 0.0, r.run_time_ns) <= cal.controller(0).read_bandwidth_gb_s * 1e3
    True
    """
    width = result.utilisation_bucket_ns
    edges = np.arange(len(result.utilisation) + 1) * width
    overlap_ns = np.clip(np.minimum(edges[1:], end_ns) - np.maximum(edges[:-1], start_ns), 0.0, None)
    bytes_served = 0.0
    for k, res in enumerate(result.resources):
        if res.kind == "controller" and res.busy_ns > 0:
            bytes_served += float(result.utilisation[:, k] @ overlap_ns) * res.bytes / res.busy_ns
    return bytes_served / (end_ns - start_ns) * 1e3


C2C_LINES = 1024
"""Lines the ``--c2c_latency`` writer touches and the reader then reads (64 KiB: within every shipped core's L2,
so the writer still holds them; mlc's own buffer is sized to stay in the writer's caches too)."""
_C2C_READER_START_NS = 1e7
"""When the reader starts: well after the writer has touched every line."""


def c2c_transfer_ns(ctx: ToolContext, writer_cpu: int, reader_cpu: int, home: int, modified: bool = True) -> float:
    """mlc's cache-to-cache test: a core writes (``modified``) or reads :data:`C2C_LINES` lines homed on node
    ``home``, then another reads them in a random order, one load at a time; the reader's mean latency (what the
    machine's calibration makes of a transfer, or, without coherence figures, of the hit or memory access that
    serves it)."""
    buf = _bound_buffer(ctx, C2C_LINES * 64, home)
    lines = np.uint64(buf.start) + np.arange(C2C_LINES, dtype=np.uint64) * np.uint64(64)
    order = np.random.default_rng(ctx.seed).permutation(C2C_LINES)
    tid = np.r_[np.zeros(C2C_LINES, np.int32), np.ones(C2C_LINES, np.int32)]
    chunk = AccessChunk.build(np.r_[lines, lines[order]], thread=tid,
                              is_write=np.r_[np.full(C2C_LINES, modified), np.zeros(C2C_LINES, bool)])  # fmt: skip
    specs = [ThreadSpec(0, cpu=writer_cpu), ThreadSpec(1, cpu=reader_cpu, dependent=True, start_ns=_C2C_READER_START_NS)]
    r = simulate(ctx.machine, ctx.calibration, specs, [chunk], _pages([buf]), seed=ctx.seed, record_latencies=False)
    _free(ctx, [buf])
    return float(r.threads[1].load_to_use_mean_ns)


def c2c_local_pair(machine: Machine) -> tuple[int, int] | None:
    """The (reader, writer) cpus of mlc's local cache-to-cache test: the first two cpus of the first socket with
    cpus (its ``c2c_latency_main``; two cores of one core complex on an EPYC, of two on one with a core a
    complex), or None where that socket has one cpu."""
    first = next(n for n in machine.nodes if n.cpus)
    same = [n for n in machine.nodes if n.socket == first.socket] if first.socket is not None else [first]
    package = sorted(c for n in same for c in n.cpus)
    return (package[0], package[1]) if len(package) >= 2 else None


def _c2c_section(ctx: ToolContext, res: MlcResult) -> None:
    """``--c2c_latency``: the local HIT and HITM latencies, and the remote HITM per writer x reader node, homed at
    either. As mlc picks them (its ``c2c_latency_main``): locally the first two cpus of the first socket, the
    second writing and the first reading (two cores of one core complex on an EPYC, so its local figure is the
    complex's own); across nodes the writer node's first cpu and the reader node's second."""
    m = ctx.machine
    nodes = [n for n in m.nodes if n.cpus]
    pair = c2c_local_pair(m)
    if pair is None:
        raise MlcUsageError(f"--c2c_latency: socket of node {nodes[0].id} has one cpu; mlc needs two cores of a socket")
    reader, writer = pair
    home = _local_mem(ctx, reader)
    res.c2c_hit_ns = c2c_transfer_ns(ctx, writer, reader, home, modified=False)
    res.c2c_hitm_ns = c2c_transfer_ns(ctx, writer, reader, home, modified=True)
    mems = {n.id for n in m.nodes if n.controller is not None}
    for homed in ("writer", "reader"):
        table = np.full((len(nodes), len(nodes)), np.nan)
        for i, w in enumerate(nodes):
            for j, rd in enumerate(nodes):
                at = w.id if homed == "writer" else rd.id
                if i != j and at in mems:
                    second = sorted(rd.cpus)[min(1, len(rd.cpus) - 1)]
                    table[i, j] = c2c_transfer_ns(ctx, sorted(w.cpus)[0], second, at, modified=True)
        res.c2c_remote_ns[homed] = table


_SECTIONS = {
    "--latency_matrix": ["latency_matrix"],
    "--idle_latency": ["idle_latency"],
    "--bandwidth_matrix": ["bandwidth_matrix"],
    "--peak_injection_bandwidth": ["peak_injection_bandwidth"],
    "--loaded_latency": ["loaded_latency"],
    "--c2c_latency": ["c2c_latency"],
}


class MlcUsageError(ValueError):
    """An mlc option this virtual mlc does not know."""


def mlc(
    ctx: ToolContext, argv: Sequence[str] = (), delays: Sequence[int] = INJECT_DELAYS, pace: LoadPace = LoadPace()
) -> MlcResult:
    """Run the virtual ``mlc [OPTION]`` in ``ctx``; no option = the default run (all four sections).

    ``delays`` are the loaded-latency injection delays (core cycles; mlc's default list), ``pace`` the load loop's
    constants (:class:`~numasim.tools.mlc_load.LoadPace`; the default is mlc's, measured).

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> r = mlc(tool_context(m, resolve_calibration(m)), ["--latency_matrix"])
    >>> [round(float(x)) for x in r.latency_ns[0]]  # the measured matrix: 61.7 115.1
    [62, 115]
    """
    sections: list[str] = []
    prefetchers_on = False
    for a in argv:
        if a == "-e":  # "h/w prefetcher state will not be modified": they stay on
            prefetchers_on = True
            continue
        if a not in _SECTIONS:
            raise MlcUsageError(f"Invalid Argument: {a} (numasim's mlc knows {', '.join(_SECTIONS)} and -e)")
        sections += _SECTIONS[a]
    default = not sections
    if default:
        sections = ["latency_matrix", "peak_injection_bandwidth", "bandwidth_matrix", "loaded_latency"]
    m = ctx.machine
    nodes = [n.id for n in m.nodes if n.cpus]
    mems = [n.id for n in m.nodes if n.controller is not None]
    res = MlcResult(sections, nodes, mems, command_line=" ".join(argv), calibration_id=ctx.calibration.id,
                    seed=ctx.seed, clock=core_clock(ctx.calibration))
    if "latency_matrix" in sections:
        res.latency_ns = _latency_matrix(ctx, nodes, mems)
    if "idle_latency" in sections:
        cpu = ctx.cpus()[0]
        node = _local_mem(ctx, cpu)
        buf = _bound_buffer(ctx, LATENCY_BUFFER_BYTES, node)
        addr = _chase(np.random.default_rng(ctx.seed), buf, LATENCY_LOADS)
        r = simulate(ctx.machine, ctx.calibration, [ThreadSpec(0, cpu=cpu, dependent=True)],
                     [AccessChunk.build(addr)], _pages([buf]), seed=ctx.seed, record_latencies=False)
        res.idle_latency_ns = r.run_time_ns / len(addr)
        _free(ctx, [buf])
    if "bandwidth_matrix" in sections:
        res.bandwidth_mb_s = _bandwidth_matrix(ctx, nodes, mems)
    if "peak_injection_bandwidth" in sections:
        res.peak_mb_s = _peak(ctx)
    if "loaded_latency" in sections:
        res.loaded = _loaded(ctx, delays, pace, prefetchers_on)
        tpc, source = pace_threads_per_core(ctx.machine, ctx.calibration.core)
        res.pace_sharing_note = "" if ctx.calibration.core.threads_per_core is not None else (
            source if tpc is None else f"{tpc} thread(s) a core pace the load threads ({source})")
    if "c2c_latency" in sections:
        _c2c_section(ctx, res)
    return res


def _matrix(cols: list[int], rows: list[int], values: np.ndarray, fmt: str) -> list[str]:
    out = ["\t\tNuma node", "Numa node" + "".join(f"\t{c:6d}" for c in cols) + "\t"]
    for i, r in enumerate(rows):
        out.append(f"{r:8d}" + "".join(f"\t{v:{fmt}}" for v in values[i]) + "\t")
    return out


_BW_LINES = [
    "Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)",
    "Using all the threads from each core if Hyper-threading is enabled",
]


def _clock_note(result: MlcResult) -> list[str]:
    """numasim's line naming the clock that cycles were counted in, when it is an assumption (real mlc prints none;
    mlc's parser skips it)."""
    if result.clock is None or not result.clock.assumed:
        return []
    return [f"numasim: {result.clock.describe()}; cycles (injection delays, core clocks) count it"]


def format_mlc(result: MlcResult) -> str:
    """mlc's output for the sections run, in its 3.x layout."""
    out = [f"Intel(R) Memory Latency Checker - {MLC_VERSION}"]
    default = not result.command_line
    if not default:
        out += [f"Command line parameters: {result.command_line}", ""]
    for s in result.sections:
        if s == "latency_matrix" and result.latency_ns is not None:
            if not default:
                out.append(f"Using buffer size of {LATENCY_BUFFER_BYTES / 1e6:.3f}MB")
            out.append("Measuring idle latencies (in ns)...")
            out += _matrix(result.memory_nodes, result.nodes, result.latency_ns, "6.1f")
            out.append("")
        elif s == "idle_latency" and result.idle_latency_ns is not None:
            ns = result.idle_latency_ns
            out.append(f"Using buffer size of {LATENCY_BUFFER_BYTES / 1e6:.3f}MB")
            out += _clock_note(result)
            clock_ghz = result.clock.ghz if result.clock is not None else ASSUMED_CORE_CLOCK_GHZ
            out.append(f"Each iteration took {ns * clock_ghz:.1f} core clocks ( {ns:.1f}\tns)")
            out.append("")
        elif s == "peak_injection_bandwidth":
            if not default:
                out += [f"Using buffer size of {_BW_BUFFER_MB:.3f}MB/thread for reads and an additional "
                        f"{_BW_BUFFER_MB:.3f}MB/thread for writes", ""]
            out.append("Measuring Peak Injection Memory Bandwidths for the system")
            out += _BW_LINES
            out.append("Using traffic with the following read-write ratios")
            for label, _ in MIXES:
                out.append(f"{label:<17}:\t{result.peak_mb_s[label]:.1f}\t")
            out.append("")
        elif s == "bandwidth_matrix" and result.bandwidth_mb_s is not None:
            if not default:
                out.append(f"Using buffer size of {_BW_BUFFER_MB:.3f}MB/thread for reads and an additional "
                           f"{_BW_BUFFER_MB:.3f}MB/thread for writes")
            out.append("Measuring Memory Bandwidths between nodes within system ")
            out += _BW_LINES
            out.append("Using Read-only traffic type")
            out += _matrix(result.memory_nodes, result.nodes, result.bandwidth_mb_s, "6.1f")
            out.append("")
        elif s == "loaded_latency":
            if not default:
                out += [f"Using buffer size of {_BW_BUFFER_MB:.3f}MB/thread for reads and an additional "
                        f"{_BW_BUFFER_MB:.3f}MB/thread for writes", ""]
            out += _clock_note(result)
            if result.pace_sharing_note:
                out.append(f"numasim: {result.pace_sharing_note}")
            out += ["Measuring Loaded Latencies for the system", _BW_LINES[1], "Using Read-only traffic type",
                    "Inject\tLatency\tBandwidth", "Delay\t(ns)\tMB/sec", "=========================="]
            for d, lat, bw in result.loaded:
                out.append(f" {d:05d}\t{lat:6.2f}\t {bw:8.1f}")
            out.append("")
        elif s == "c2c_latency" and result.c2c_hitm_ns is not None:
            out.append("Measuring cache-to-cache transfer latency (in ns)...")
            out.append(f"Local Socket L2->L2 HIT  latency\t{result.c2c_hit_ns:.1f}")
            out.append(f"Local Socket L2->L2 HITM latency\t{result.c2c_hitm_ns:.1f}")
            ids = result.nodes
            for homed, table in result.c2c_remote_ns.items():
                out.append(f"Remote Socket L2->L2 HITM latency (data address homed in {homed} socket)")
                out.append("\t\t\tReader Numa Node")
                out.append("Writer Numa Node" + "".join(f"{c:6d}\t" for c in ids))
                for i, w in enumerate(ids):
                    cells = "".join(("     -" if np.isnan(v) else f"{v:6.1f}") + "\t" for v in table[i])
                    out.append(f"{w:13d}\t{cells}")
            out.append("")
    return "\n".join(out) + "\n"
