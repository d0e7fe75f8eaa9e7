"""``simulate``: build the timed memory system, run one fidelity on the SimPy clock, collect the result.

The lifecycle follows desmod's build -> run -> collect: :func:`build_memory_system` and the agents (build), an
engine process on a SimPy ``Environment`` (run), :func:`_collect` turning counters into records (collect).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import simpy

from numasim.errors import WorkloadError
from numasim.timing.model import Calibration
from numasim.topology.model import CacheScope, Machine
from numasim.workload.access import AccessChunk

from .caches import CacheLevelSpec, CacheToCache, cache_levels, instance_keys
from .cores import CpuShares, cpu_sharers, thread_mlp, thread_prefetch_lines
from .epoch import EpochEngine
from .exact import ExactEngine
from .memsys import LINE_BYTES, MemorySystem, build_memory_system
from .pagemap import PageMap
from .protocol import Engine, EngineInput
from .result import (
    CacheLevelRecord,
    DeviceRecord,
    InitiatorRecord,
    NodeRecord,
    PairRecord,
    ResourceRecord,
    SimulationResult,
    ThreadRecord,
)
from .runtime import COPY_LINES_PER_REQUEST, KERNEL_AGENT_MLP, EngineBridge, KernelRuntime
from .spec import DeviceTransfer, EngineMode, ThreadSpec
from .stats import Stats, hist_edges_ns, percentile_from_hist
from .stream import Agent, Feeder
from .tlb import TlbSpec

__all__ = ["simulate", "ENGINES"]

ENGINES: dict[EngineMode, Callable[[EngineInput], Engine]] = {EngineMode.EPOCH: EpochEngine, EngineMode.EXACT: ExactEngine}
"""The class that runs each fidelity (an :class:`~numasim.engine.protocol.Engine` built from an input record)."""


def _agents(
    ms: MemorySystem,
    calibration: Calibration,
    threads: Sequence[ThreadSpec],
    devices: Sequence[DeviceTransfer],
) -> list[Agent]:
    cpu_node = ms.machine.cpu_to_node
    seen: set[int] = set()
    agents: list[Agent] = []
    for t in threads:
        bad = [c for c in t.cpus or () if c not in cpu_node]
        if bad:
            raise WorkloadError(f"ThreadSpec(id={t.id}).cpus: {ms.machine.name} has no cpu {bad[0]}")
        if t.cpus and t.cpu not in t.cpus:
            raise WorkloadError(f"ThreadSpec(id={t.id}).cpu = {t.cpu}: not among its cpus {list(t.cpus)}")
    known = [t.cpu for t in threads if t.cpu in cpu_node]
    chasing = [t.dependent for t in threads if t.cpu in cpu_node]
    allowed = [t.cpus for t in threads if t.cpu in cpu_node]
    mlp_of = thread_mlp(calibration.core, ms.machine.cpus, known, chasing, allowed)
    mlp_iter = iter(mlp_of)
    ahead_iter = iter(thread_prefetch_lines(calibration.core, ms.machine.cpus, known, chasing, mlp_of, allowed))
    share_iter = iter(cpu_sharers(known, allowed))
    for t in threads:
        if t.id in seen:
            raise WorkloadError(f"ThreadSpec.id = {t.id}: two threads have this id")
        seen.add(t.id)
        if t.cpu not in cpu_node:
            raise WorkloadError(f"ThreadSpec(id={t.id}).cpu = {t.cpu}: {ms.machine.name} has no such cpu")
        agents.append(
            Agent(
                len(agents),
                f"thread{t.id}",
                ms.initiator_of_cpu(t.cpu),
                next(mlp_iter),
                t.dependent,
                float(t.start_ns),
                thread_id=t.id,
                cpu=t.cpu,
                prefetch_lines=next(ahead_iter),
                cpu_share=next(share_iter),
                cpus=tuple(t.cpus) if t.cpus else None,
            )
        )
    for k, d in enumerate(devices):
        if d.direction not in ("read", "write"):
            raise WorkloadError(
                f"DeviceTransfer[{k}].direction = {d.direction!r}: expected 'read' or 'write'"
            )
        if d.outstanding_lines < 1:
            raise WorkloadError(
                f"DeviceTransfer[{k}].outstanding_lines = {d.outstanding_lines}: must be >= 1"
            )
        init = ms.initiator_names.index(d.device)
        agents.append(
            Agent(
                len(agents),
                f"{d.device}#{k}",
                init,
                d.outstanding_lines,
                False,
                float(d.start_ns),
                device=d.device,
            )
        )
    return agents


def _c2c_domains(
    machine: Machine, levels: list[CacheLevelSpec], instances: np.ndarray, thread_agents: Sequence[Agent], n_agents: int
) -> np.ndarray:
    """Per agent, the domain within which a modified line moves core to core at the coherence's local cost: its
    last-level instance, or its socket where that instance is an SNC or Cluster-on-Die cluster's share of the
    socket's L3 (``CacheScope.CLUSTER``) or a core's own (no cache is shared: the Atoms' per-core L2 shares): the
    transfer then crosses the socket's own mesh, ring or fabric, as the ``local_hitm_ns`` a socket's mlc
    measures (the 2x 8269CY in SNC2: 45.1 ns between its clusters)."""
    if not levels:
        return np.zeros(n_agents, dtype=np.int64)
    llc = instances[-1].copy()
    if levels[-1].scope in (CacheScope.CLUSTER, CacheScope.CORE):
        node_of = machine.cpu_to_node
        n_nodes = max(node_of.values(), default=0) + 1
        for a in thread_agents:
            if a.cpu is None:
                continue
            node = machine.node(node_of[a.cpu])
            # (instance indices are >= 0: sockets below -1, nodes of no known socket below those)
            llc[a.index] = -1 - node.socket if node.socket is not None else -2 - n_nodes - node.id
    return llc


def simulate(
    machine: Machine,
    calibration: Calibration | None,
    threads: Sequence[ThreadSpec],
    accesses: Iterable[AccessChunk],
    pages: PageMap,
    mode: str | EngineMode = "epoch",
    seed: int = 0,
    epoch_ns: float = 1000.0,
    devices: Sequence[DeviceTransfer] = (),
    progress: Callable[[int], None] | None = None,
    record_latencies: bool = True,
    *,
    window_accesses: int = 1 << 19,
    runtime: KernelRuntime | None = None,
    request_accesses: int = 0,
    tlb: TlbSpec | None = None,
) -> SimulationResult:
    """Time a stream of memory accesses on ``machine`` under ``calibration``.

    Parameters
    ----------
    machine : Machine
        Structure (nodes, cpus, links, caches, devices).
    calibration : Calibration
        Every timing parameter; required (``nominal_calibration(machine)`` uses the machine's own numbers).
    threads : list of ThreadSpec
        The threads that issue ``accesses`` (by ``AccessChunk.thread`` = ``ThreadSpec.id``).
    accesses : iterable of AccessChunk
        Streamed chunk by chunk; each thread's accesses are in program order.
    pages : PageMap
        Node of every page the accesses touch.
    mode : {"epoch", "exact"}
        Fidelity (see :mod:`numasim.engine.epoch` and :mod:`numasim.engine.exact`).
    seed : int
        Recorded in the result. The timing model itself is deterministic, so equal inputs give equal results.
    epoch_ns : float
        Epoch length: how often the loaded-latency curves read utilisation, and the resolution of
        utilisation over time (both modes).
    devices : list of DeviceTransfer
        DMA transfers by devices (e.g. a NIC's send reads host memory across its attach link).
    progress : callable, optional
        Called with the number of accesses read so far, after each chunk.
    record_latencies : bool
        Keep latency histograms (percentiles); False keeps only means.
    window_accesses : int
        Epoch mode: buffered requests of all agents timed per call of the compiled loop (speed/memory
        trade-off: timing does not depend on it; sums of latencies may differ in their last bits).
    request_accesses : int
        A request is this many consecutive accesses of a thread: the result's ``requests`` gives their latency
        distribution (epoch mode; 0: none).
    tlb : TlbSpec, optional
        Model each thread's STLB and page walks (:mod:`numasim.engine.tlb`; 2 MiB pages per the page map's huge
        flags); the result's ``tlb`` counts misses and walk time. Epoch mode only; None: no TLB.
    runtime : KernelRuntime, optional
        A kernel whose daemons and fault handlers run on the simulation clock (automatic NUMA balancing, see
        :mod:`numasim.engine.runtime`); it may move pages and threads while the run goes on (both fidelities).
        The result's ``kernel`` then holds its counters and pages per node over time; ``resources`` count the
        kernel's copies too, while ``nodes``, ``initiators`` and ``threads`` count the program's requests only.

    Notes
    -----
    A program that simulates millions of accesses should call :func:`numasim.tune_allocator` once, as the
    ``numasim`` command does: epoch mode's windows are millions of accesses, and with glibc's default malloc
    their temporaries are returned to the kernel and page-faulted in again on every window (a cache-resident
    working set's estimate, replayed alone: 436 ns per access untuned, 172 tuned). It is process-wide, so
    ``simulate`` does not call it itself; results do not depend on it.

    Examples
    --------
    >>> import numpy as np
    >>> from numasim.topology.builders import glueless
    >>> from numasim.timing.model import nominal_calibration
    >>> from numasim.workload.access import AccessChunk
    >>> m = glueless(2)
    >>> pm = PageMap(); pm.assign(0, np.array([1], dtype=np.int16))
    >>> r = simulate(m, nominal_calibration(m), [ThreadSpec(0, cpu=0)], [AccessChunk.build(np.array([0]))], pm)
    >>> r.run_time_ns  # one idle miss from node 0 to node 1: controller 80 + link 50
    130.0
    """
    try:
        engine_mode = EngineMode(mode)
    except ValueError:
        raise WorkloadError(f"mode = {mode!r}: expected 'epoch' or 'exact'") from None
    if not epoch_ns > 0:
        raise WorkloadError(f"epoch_ns = {epoch_ns}: must be positive")
    if tlb is not None and engine_mode != EngineMode.EPOCH:
        raise WorkloadError("tlb: the TLB is modelled in epoch mode only; use mode 'epoch'")
    if request_accesses and engine_mode != EngineMode.EPOCH:
        raise WorkloadError("request_accesses: request latencies are measured in epoch mode only; use mode 'epoch'")
    if request_accesses < 0:
        raise WorkloadError(f"request_accesses = {request_accesses}: must be >= 0")
    ms = build_memory_system(machine, calibration, list(threads), list(devices))
    assert calibration is not None
    agents = _agents(ms, calibration, threads, devices)
    kernel_agents: dict[int, int] = {}
    if runtime is not None:  # one kernel thread (kworker) per node with cpus issues the kernel's page copies
        for k, node in enumerate(ms.machine.nodes):
            if node.cpus:
                kernel_agents[node.id] = len(agents)
                agents.append(Agent(len(agents), f"kworker/{node.id}", k, KERNEL_AGENT_MLP, False, 0.0,
                                    lines_per_request=COPY_LINES_PER_REQUEST))
    levels = cache_levels(ms.machine, calibration)
    n_levels = len(levels)
    top = max(ms.node_ids) + 1
    node_index = np.full(max(top, 1) + 1, -1, dtype=np.int64)
    for k, nid in enumerate(ms.node_ids):
        if ms.machine.nodes[k].controller is not None:
            node_index[nid] = k
    node_index_lookup = np.concatenate([node_index, np.full(1 << 15, -1, dtype=np.int64)])

    # Cache instances: per level, a global index per thread agent (devices use none).
    thread_agents = [a for a in agents if a.cpu is not None]
    instances = np.zeros((n_levels, len(agents)), dtype=np.int64)
    next_id = 0
    for lv, spec in enumerate(levels):
        keys = instance_keys(ms.machine, spec, [a.cpu for a in thread_agents if a.cpu is not None])
        uniq: dict[tuple[object, ...], int] = {}
        for a, key in zip(thread_agents, keys, strict=True):
            if key not in uniq:
                uniq[key] = next_id
                next_id += 1
            instances[lv, a.index] = uniq[key]

    epoch = engine_mode == EngineMode.EPOCH
    # what a cache-to-cache transfer costs: each agent's last-level instance, own node's target index and socket,
    # and each target's socket (a node of no socket: a socket of its own)
    def socket_of(node_id: int) -> int:
        socket = ms.machine.node(int(node_id)).socket
        return socket if socket is not None else -1 - node_id

    c2c = CacheToCache.from_calibration(
        calibration,
        _c2c_domains(ms.machine, levels, instances, thread_agents, len(agents)),
        np.array([node_index[ms.initiator_node[a.initiator]] for a in agents], dtype=np.int64),
        np.array([socket_of(ms.initiator_node[a.initiator]) for a in agents], dtype=np.int64),
        np.array([socket_of(nid) for nid in ms.node_ids], dtype=np.int64),
    )
    feeder = Feeder(
        accesses,
        agents,
        pages,
        node_index_lookup,
        cache_instances=instances if epoch else None,
        # exact mode's geometry: ``sets`` sets of ``associativity`` ways per instance
        cache_capacity_lines=np.array([s.sets * s.associativity for s in levels], dtype=float) if epoch else None,
        cache_sets=np.array([s.sets for s in levels], dtype=np.int64) if epoch else None,
        progress=progress,
        background=engine_threads() > 1,
        class_base=np.array([a.initiator for a in agents], dtype=np.int64) * (ms.n_nodes * 2) if epoch else None,
        track_pages=runtime is not None,
        tlb=tlb,
        c2c=c2c if epoch else None,
        full_line_writes=ms.write_allocate_evasion > 0.0,
        write_backs=epoch and ms.models_write_backs,
    )
    try:
        return _run_engine(
            ms, calibration, agents, devices, pages, feeder, levels, instances, engine_mode, seed, epoch_ns,
            window_accesses, record_latencies, runtime, kernel_agents, request_accesses, c2c,
        )  # fmt: skip
    finally:
        feeder.close()


def _run_engine(
    ms: MemorySystem,
    calibration: Calibration,
    agents: list[Agent],
    devices: Sequence[DeviceTransfer],
    pages: PageMap,
    feeder: Feeder,
    levels: list[CacheLevelSpec],
    instances: np.ndarray,
    engine_mode: EngineMode,
    seed: int,
    epoch_ns: float,
    window_accesses: int,
    record_latencies: bool,
    runtime: KernelRuntime | None = None,
    kernel_agents: dict[int, int] | None = None,
    request_accesses: int = 0,
    c2c: CacheToCache | None = None,
) -> SimulationResult:
    n_levels = len(levels)
    n_program = len(agents) - len(kernel_agents or {})
    for a, d in zip(agents[n_program - len(devices) : n_program], devices, strict=True):
        feeder.add_block(
            a.index, feeder.device_block(d.address, d.size_bytes, d.direction == "write", n_levels, a.index)
        )
    stats = Stats(
        ms.n_initiators, ms.n_nodes, len(agents), n_levels, len(ms.resources), epoch_ns, record_latencies
    )
    # the threads' cpu shares while they run: when one ends, those left share its time (engine.cores.CpuShares)
    threads = [a for a in agents if a.thread_id is not None]  # (the first agents: _agents makes them so)
    shares: CpuShares | None = CpuShares([a.cpu if a.cpu is not None else -1 for a in threads],
                                         [a.cpus for a in threads], [a.start_ns for a in threads])
    if shares is not None and not shares.active:
        shares = None
    env = simpy.Environment()
    bridge: EngineBridge | None = None
    engine: Engine
    if runtime is not None:
        holder: list[Engine] = []
        bridge = EngineBridge(
            ms, pages, agents, kernel_agents or {}, lambda: holder[0].now_ns() if holder else 0.0,  # type: ignore[attr-defined]
            pages.page_bytes,
        )
    inp = EngineInput(
        ms=ms, agents=agents, feeder=feeder, stats=stats, levels=levels, instances=instances,
        prefetch_distance_lines=calibration.core.prefetch_distance_lines, epoch_ns=epoch_ns,
        window_accesses=window_accesses, bridge=bridge, request_accesses=request_accesses, c2c=c2c, shares=shares,
    )
    engine = ENGINES[engine_mode](inp)
    if bridge is not None:
        assert runtime is not None
        holder.append(engine)
        bridge.attach(runtime, env)
    done = env.process(engine.process(env))
    env.run(until=done)  # kernel daemons would run forever: the run ends with the program
    engine.flush()
    if not feeder.exhausted:
        feeder.pull()
    result = _collect(
        ms, calibration, agents[:n_program], devices, pages, stats, engine_mode, seed, epoch_ns, levels,
        engine.diagnostics(), None if bridge is None else bridge.kernel_lines_rc,
        None if bridge is None else bridge.kernel_ns, getattr(engine, "wb_count", None), getattr(engine, "free", None),
        shares,
    )
    if bridge is not None:
        result.kernel = _kernel_record(ms, bridge, result.run_time_ns)
    if feeder.tlb is not None:
        result.tlb = _tlb_record(feeder, agents[:n_program], feeder.tlb)
    requests = getattr(engine, "requests", None)
    if requests is not None:
        result.requests = requests.summary([a.name for a in agents[:n_program]])
    # exact mode's own counts; epoch mode's are the estimate's
    lost = getattr(engine, "coherence_misses", None)
    transfers = getattr(engine, "transfers", None)
    if transfers is None:
        transfers = np.stack([feeder.c2c_local, feeder.c2c_remote], axis=1).reshape(-1)
    result.coherence = _coherence_record(
        agents[:n_program], feeder.coherence_misses if lost is None else lost, transfers.reshape(-1, 2), calibration,
        engine_mode,
    )
    if ms.write_allocate_evasion > 0.0:
        result.write_allocate = _write_allocate_record(ms, stats, None if bridge is None else bridge.kernel_lines_rc,
                                                       getattr(engine, "wb_count", None))
    return result


def _write_allocate_record(
    ms: MemorySystem, stats: Stats, kernel_lines_rc: np.ndarray | None, write_backs_rc: np.ndarray | None
) -> dict:
    """What write-allocate evasion skipped: per memory node, the reads for ownership its controller did not serve
    (the busy time the writes would have cost with them, less what the engine charged, over one read for
    ownership's time there: ``w - 1`` lines at its read bandwidth), and the calibration's figure."""
    lines_rc = stats.memory_lines.reshape(-1).astype(float)
    if kernel_lines_rc is not None:
        lines_rc = lines_rc + kernel_lines_rc
    charged = stats.series.busy.sum(axis=0)
    full, _ = ms.resource_totals(lines_rc)
    if write_backs_rc is not None and write_backs_rc.any():  # (the write-backs write hits owed were charged too)
        full = full + ms.write_back_totals(write_backs_rc[: ms.n_classes])[0]
    per_node: dict[int, int] = {}
    for r, res in enumerate(ms.resources):
        if res.kind != "controller" or res.node is None:
            continue
        rfo_ns = max(ms.write_cost_factor - 1.0, 0.0) * LINE_BYTES / res.capacity_bytes_per_ns
        per_node[res.node] = max(0, int(round((full[r] - charged[r]) / rfo_ns))) if rfo_ns > 0 else 0
    return {
        "evasion": ms.write_allocate_evasion,
        "reads_for_ownership_skipped": per_node,
        "total": sum(per_node.values()),
        "rule": ("a write of a whole line skips its read for ownership in proportion to the lines queued at its "
                 "controller when it issues (timing.model.write_allocate_evaded); partial-line writes never do"),
    }


def _coherence_record(
    agents: list[Agent], lost: np.ndarray, transfers: np.ndarray, calibration: Calibration, mode: EngineMode
) -> dict | None:
    """What the caches' coherence did (None when nothing: no thread wrote a line another core held): the accesses
    that missed their first cache level and would have hit it had no other core written the line (coherence
    misses: exact mode keeps a shadow of each first level without invalidations, epoch mode takes the lines'
    stack distances without them), and the cache-to-cache
    transfers (an access to a line another core held modified; from a core of the same last-level cache, or from
    another), in all and per thread, and what each was charged."""
    rows = {
        a.name: {"misses": int(lost[a.index]), "transfers_local": int(transfers[a.index, 0]),
                 "transfers_remote": int(transfers[a.index, 1])}
        for a in agents
        if a.cpu is not None
    }  # fmt: skip
    total = {k: sum(r[k] for r in rows.values()) for k in ("misses", "transfers_local", "transfers_remote")}
    if not any(total.values()):
        return None
    c = calibration.coherence
    if c is None:
        cost = ("transfers not calibrated (the calibration has no cache-to-cache latencies): each was timed as the "
                "cache level or memory access that served it")  # fmt: skip
    else:
        remote = (f"{c.remote_hitm_ns:g} ns (line homed away from the reader), "
                  f"{c.remote_hitm_home_reader_ns or c.remote_hitm_ns:g} ns (homed at the reader)"
                  if c.remote_hitm_ns else "not calibrated (timed as the memory access)")  # fmt: skip
        socket = (f"another core complex of the socket {c.socket_hitm_ns:g} ns (line homed on the socket; elsewhere "
                  "as remote), " if c.socket_hitm_ns else "")  # fmt: skip
        cost = f"transfers at the calibration's latencies: local {c.local_hitm_ns:g} ns, {socket}remote {remote}"
        if c.source:
            cost += f"; source: {c.source}"
    out = {**total, "threads": rows,
           "cost": cost + "; a miss for a taken line is served by the level the writer shares, else memory"}  # fmt: skip
    if mode == EngineMode.EPOCH:
        # Epoch mode finds them in the order the stream gives the accesses, not in simulated time: where threads
        # take turns in long blocks, a written line changes hands once a block (a generated workload's
        # ``block_accesses``, 4096: 47x fewer transfers than exact mode for four threads updating one 4 KiB array)
        out["order"] = ("epoch mode: in the access stream's order, not simulated time (a generated workload's "
                        "threads take turns every block_accesses accesses, 4096 by default: where threads write "
                        "shared lines set it to about 16, or time with --mode exact)")  # fmt: skip
    return out


def _tlb_record(feeder: Feeder, agents: list[Agent], tlb: TlbSpec) -> dict:
    """STLB misses and page-walk time, in all and per thread, and the TLB assumed."""
    rows = {
        a.name: {"accesses": int(feeder.tlb_accesses[a.index]), "misses": int(feeder.tlb_misses[a.index]),
                 "misses_2m": int(feeder.tlb_misses_2m[a.index]), "walk_ns": float(feeder.tlb_walk_ns[a.index])}
        for a in agents
        if a.cpu is not None
    }  # fmt: skip
    total = {k: sum(r[k] for r in rows.values()) for k in ("accesses", "misses", "misses_2m", "walk_ns")}
    return {**total, "miss_rate": total["misses"] / total["accesses"] if total["accesses"] else 0.0,
            "threads": rows, "spec": tlb.describe()}  # fmt: skip


def _kernel_record(ms: MemorySystem, bridge: EngineBridge, run_time_ns: float) -> dict:
    """What the run-time kernel did: its /proc/vmstat counters, pages per node over time, its copy traffic."""
    bridge.sample(run_time_ns, force=True)
    bridge.record_activity(run_time_ns, force=True)
    act = np.array([a[:3] for a in bridge.activity], dtype=float).reshape(-1, 3)
    lat = [a[3] / a[4] if a[4] else None for a in bridge.activity]
    lines = bridge.kernel_lines_rc.reshape(ms.n_initiators, ms.n_nodes, 2)
    return {
        "vmstat": dict(bridge.counters()),
        "pages_per_node_series": {
            "node_ids": list(ms.node_ids),
            "time_ns": list(bridge.series_ns),
            "pages": [c.tolist() for c in bridge.series_pages],
        },
        "copy_bytes_read_by_node": {
            str(n): int(lines[:, j, 0].sum()) * LINE_BYTES for j, n in enumerate(ms.node_ids)
        },
        "copy_bytes_written_by_node": {
            str(n): int(lines[:, j, 1].sum()) * LINE_BYTES for j, n in enumerate(ms.node_ids)
        },
        "pages_copied": bridge.pages_copied,
        "activity_series": {
            "time_ns": act[:, 0].tolist(),
            "numa_hint_faults": act[:, 1].astype(int).tolist(),
            "pages_migrated": act[:, 2].astype(int).tolist(),
            "memory_latency_mean_ns": lat,
        },
        "thread_moves": [
            {"time_ns": t, "agent": a, "from_cpu": c0, "to_cpu": c1} for t, a, c0, c1 in bridge.thread_moves
        ],
        "late_ns_max": bridge.late_ns_max,
        "fault_ns_by_agent": {a.name: float(bridge.kernel_ns[a.index]) for a in bridge.agents[: bridge.n_program]},
    }


def _mean(total: float, count: int) -> float:
    return total / count if count else float("nan")


def _memory_stats(
    hist: np.ndarray | None, lines: int, latency_ns: float, idle_ns: float, floor_ns: float
) -> tuple[float, float, float, float]:
    """Memory request latency of ``lines`` requests: mean, p50, p99, and the mean idle latency of their routes.

    Percentiles interpolate within a 7.5 % histogram bin, which can land below every request in it: they are
    held at ``floor_ns``, the least idle route latency among the requests (no request is faster than that).
    """
    mean, idle = _mean(latency_ns, lines), _mean(idle_ns, lines)
    if hist is None or lines == 0:
        return mean, float("nan"), float("nan"), idle
    return mean, max(percentile_from_hist(hist, 50), floor_ns), max(percentile_from_hist(hist, 99), floor_ns), idle


def _collect(
    ms: MemorySystem,
    calibration: Calibration,
    agents: list[Agent],
    devices: Sequence[DeviceTransfer],
    pages: PageMap,
    st: Stats,
    mode: EngineMode,
    seed: int,
    epoch_ns: float,
    levels: list,
    diagnostics: dict[str, float],
    kernel_lines_rc: np.ndarray | None = None,
    kernel_ns: np.ndarray | None = None,
    write_backs_rc: np.ndarray | None = None,
    free_ns: np.ndarray | None = None,
    shares: CpuShares | None = None,
) -> SimulationResult:
    ids = ms.node_ids
    n_nodes = len(ids)
    init_node_idx = np.array([ids.index(int(x)) if int(x) in ids else -1 for x in ms.initiator_node])
    local = init_node_idx[:, None] == np.arange(n_nodes)[None, :]
    acc = st.accesses  # (init, node, rw)
    tot = acc.sum(axis=2)
    hist = st.hist
    # Idle route latency summed over the memory requests of each (initiator, node): the floor of their latency.
    idle_sum = (st.memory_lines.reshape(-1) * ms.class_base_latency_ns()).reshape(st.memory_lines.shape).sum(axis=2)
    idle_sum = np.nan_to_num(idle_sum)  # no requests to a memoryless node's nan route
    mem_lines = st.memory_lines.sum(axis=2)
    # Least idle route latency among each (initiator, node)'s memory requests (reads' or writes'): the floor.
    class_idle = ms.class_base_latency_ns().reshape(st.memory_lines.shape)
    floor = np.where(st.memory_lines > 0, class_idle, np.inf).min(axis=2)
    mem_sum = st.memory_latency_sum_ns
    ltu_sum = st.load_to_use_sum_ns
    resident = (
        pages.pages_per_node(max(ids) + 1)[ids] if pages.page_count else np.zeros(n_nodes, dtype=np.int64)
    )
    nodes = []
    for j, nid in enumerate(ids):
        h = hist[:, j, :].sum(axis=0) if hist is not None else None
        mean, p50, p99, idle = _memory_stats(
            h, int(mem_lines[:, j].sum()), float(mem_sum[:, j].sum()), float(idle_sum[:, j].sum()),
            float(floor[:, j].min()),
        )
        nodes.append(
            NodeRecord(
                node=nid,
                pages_resident=int(resident[j]),
                accesses=int(tot[:, j].sum()),
                reads=int(acc[:, j, 0].sum()),
                writes=int(acc[:, j, 1].sum()),
                bytes_read=int(st.bytes[:, j, 0].sum()),
                bytes_written=int(st.bytes[:, j, 1].sum()),
                local_accesses=int(tot[:, j][local[:, j]].sum()),
                remote_accesses=int(tot[:, j][~local[:, j]].sum()),
                memory_accesses=int(st.memory_lines[:, j].sum()),
                load_to_use_mean_ns=_mean(float(ltu_sum[:, j].sum()), int(tot[:, j].sum())),
                memory_latency_mean_ns=mean,
                memory_latency_p50_ns=p50,
                memory_latency_p99_ns=p99,
                memory_idle_latency_ns=idle,
            )
        )
    initiators, matrix, level_rows = [], [], []
    level_names = [s.name for s in levels] + ["memory"]
    for i, name in enumerate(ms.initiator_names):
        h = hist[i].sum(axis=0) if hist is not None else None
        mean, p50, p99, idle = _memory_stats(
            h, int(mem_lines[i].sum()), float(mem_sum[i].sum()), float(idle_sum[i].sum()), float(floor[i].min())
        )
        initiators.append(
            InitiatorRecord(
                initiator=name,
                node=int(ms.initiator_node[i]),
                accesses=int(tot[i].sum()),
                reads=int(acc[i, :, 0].sum()),
                writes=int(acc[i, :, 1].sum()),
                bytes_read=int(st.bytes[i, :, 0].sum()),
                bytes_written=int(st.bytes[i, :, 1].sum()),
                local_accesses=int(tot[i][local[i]].sum()),
                remote_accesses=int(tot[i][~local[i]].sum()),
                memory_accesses=int(st.memory_lines[i].sum()),
                load_to_use_mean_ns=_mean(float(ltu_sum[i].sum()), int(tot[i].sum())),
                memory_latency_mean_ns=mean,
                memory_latency_p50_ns=p50,
                memory_latency_p99_ns=p99,
                memory_idle_latency_ns=idle,
            )
        )
        for j, nid in enumerate(ids):
            n = int(tot[i, j])
            matrix.append(
                PairRecord(
                    name,
                    nid,
                    n,
                    int(st.bytes[i, j].sum()),
                    int(mem_lines[i, j]),
                    _mean(float(ltu_sum[i, j]), n),
                    _mean(float(mem_sum[i, j]), int(mem_lines[i, j])),
                    _mean(float(idle_sum[i, j]), int(mem_lines[i, j])),
                )
            )
        for lv, lname in enumerate(level_names):
            level_rows.append(CacheLevelRecord(name, lname, int(st.level_hits[i, lv])))

    run_time = float(st.agent_finish_ns[: len(agents)].max()) if len(agents) else 0.0
    lines_rc = st.memory_lines.reshape(-1).astype(float)
    if kernel_lines_rc is not None:  # the links and controllers carried the kernel's copies too
        lines_rc = lines_rc + kernel_lines_rc
    busy_total, lines_total = ms.resource_totals(lines_rc)
    if write_backs_rc is not None and write_backs_rc.any():
        # write hits on clean lines owed their lines' write-backs: a share of a write's busy time, and a line each
        wb_busy, wb_lines = ms.write_back_totals(write_backs_rc[: ms.n_classes])
        busy_total = busy_total + wb_busy
        lines_total = lines_total + wb_lines
    if ms.write_allocate_evasion > 0.0:
        # full-line writes skipped reads for ownership: each resource was busy for what the engine charged it
        busy_total = st.series.busy.sum(axis=0)
    bytes_total = lines_total * LINE_BYTES
    # Posted write-backs can keep a resource busy after the program's last access: what it did during the run (its
    # busy time, utilisation, bandwidth) is its work less what was still queued at the end (nothing else outlasts
    # the run; bytes count every line moved). That is at most the time it stayed busy past the end, and at most
    # the work that started in or after the run's last series bucket: a link downstream of a backlog (a core
    # die's port) gets its write-backs late but was idle meanwhile, and taking the whole tail off it read a
    # negative busy time.
    in_run = busy_total
    if write_backs_rc is not None and write_backs_rc.any() and free_ns is not None:
        series = st.series
        last = int(run_time // series.bucket_ns)
        late = series.busy[last:].sum(axis=0) if last < len(series.busy) else np.zeros_like(busy_total)
        in_run = np.clip(busy_total - np.minimum(np.clip(free_ns - run_time, 0.0, None), late), 0.0, None)
    util = st.series.utilisation(run_time)
    resources = []
    for r, res in enumerate(ms.resources):
        resources.append(
            ResourceRecord(
                name=res.name,
                kind=res.kind,
                bytes=int(round(bytes_total[r])),
                busy_ns=float(in_run[r]),
                utilisation_mean=float(in_run[r] / run_time) if run_time > 0 else 0.0,
                utilisation_peak=float(util[:, r].max()) if len(util) else 0.0,
                bandwidth_used_gb_s=(float(bytes_total[r] * (in_run[r] / busy_total[r] if busy_total[r] > 0 else 1.0)
                                           / run_time) if run_time > 0 else 0.0),
                bandwidth_available_gb_s=float(res.capacity_bytes_per_ns),
            )
        )
    threads, dev_rows = [], []
    for a in agents:
        k = a.index
        n = int(st.agent_accesses[k])
        finish = float(st.agent_finish_ns[k]) if n else a.start_ns
        # the kernel's time at the thread's hinting faults was spent as compute before them: it is not the program's
        compute_ns = float(st.agent_compute_ns[k]) - (float(kernel_ns[k]) if kernel_ns is not None else 0.0)
        threads.append(
            ThreadRecord(
                agent=a.name,
                thread_id=a.thread_id,
                cpu=a.cpu,
                node=int(ms.initiator_node[a.initiator]),
                accesses=n,
                compute_ns=compute_ns,
                stall_ns=max(finish - a.start_ns - compute_ns, 0.0),
                start_ns=a.start_ns,
                finish_ns=finish,
                load_to_use_mean_ns=_mean(float(st.agent_load_to_use_ns[k]), n),
                memory_accesses=int(st.agent_memory_lines[k]),
                memory_latency_mean_ns=_mean(float(st.agent_memory_latency_ns[k]), int(st.agent_memory_lines[k])),
                cpu_share=(shares.mean_share(k, finish) if shares is not None and a.thread_id is not None
                           else 1.0 / a.cpu_share),
            )
        )
    n_threads = len(agents) - len(devices)
    for d, a in zip(devices, agents[n_threads:], strict=True):
        finish = float(st.agent_finish_ns[a.index])
        dur = finish - d.start_ns
        dev_rows.append(
            DeviceRecord(
                d.device,
                d.direction,
                d.size_bytes,
                d.start_ns,
                finish,
                dur,
                d.size_bytes / dur if dur > 0 else float("nan"),
            )
        )
    return SimulationResult(
        mode=mode.value,
        seed=seed,
        calibration_id=calibration.id,
        machine=ms.machine.name,
        epoch_ns=epoch_ns,
        run_time_ns=run_time,
        accesses=int(tot.sum()),
        nodes=nodes,
        initiators=initiators,
        matrix=matrix,
        resources=resources,
        threads=threads,
        devices=dev_rows,
        cache_levels=level_rows,
        utilisation_bucket_ns=st.series.bucket_ns,
        utilisation=util,
        hist_edges_ns=hist_edges_ns(),
        latency_hist_by_node=hist.sum(axis=0) if hist is not None else np.zeros((n_nodes, 0), dtype=np.int64),
        latency_hist_by_initiator=hist.sum(axis=1)
        if hist is not None
        else np.zeros((len(ms.initiator_names), 0)),
        node_ids=list(ids),
        initiator_names=list(ms.initiator_names),
        diagnostics=diagnostics,
    )


ENGINE_THREADS_VARIABLE = "NUMASIM_ENGINE_THREADS"


def engine_threads() -> int:
    """Threads one simulation may use: 2 (the default: the access stream is prepared and statistics are counted on
    helper threads while the engine times, about 1.2 cores busy), or 1 when the environment variable
    ``NUMASIM_ENGINE_THREADS=1`` says so (everything on the calling thread: for many simulations side by side,
    as a sweep's workers run them). Results are the same either way."""
    value = os.environ.get(ENGINE_THREADS_VARIABLE, "").strip()
    if value in ("", "2"):
        return 2
    if value == "1":
        return 1
    raise WorkloadError(f"{ENGINE_THREADS_VARIABLE} = {value!r}: expected 1 or 2")
