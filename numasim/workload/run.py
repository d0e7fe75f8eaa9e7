"""Run a workload or a trace on a machine: place its memory through the kernel, then time it with the engine.

``run_workload(machine, workload, calibration, policy="interleave:0-3")`` and ``run_trace(...)`` return a
:class:`RunOutcome` (the engine's :class:`~numasim.engine.result.SimulationResult` plus the placement and the
inputs that produced it). :func:`compare_policies` runs one workload under several policies and tabulates run
time, per-node bandwidth and the remote share. A timing result always names its calibration: these functions
take one explicitly (:func:`numasim.timing.resolve.resolve_calibration` finds the machine's own, or builds the nominal one only when
asked to).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numasim.engine import SimulationResult, simulate
from numasim.engine.runtime import CompositeRuntime, KernelRuntime
from numasim.engine.spec import ThreadSpec
from numasim.engine.tlb import TlbSpec
from numasim.errors import WorkloadError
from numasim.kernel.balancing import NumaBalancing
from numasim.kernel.config import KernelConfig, reclaim_inputs
from numasim.kernel.first_touch import FirstTouchFaults
from numasim.kernel.kernel import Kernel
from numasim.kernel.khugepaged import Khugepaged
from numasim.kernel.reclaim_stalls import DirectReclaimStalls
from numasim.kernel.sysctl import apply_sysctls, sysctl_values
from numasim.timing.model import Calibration
from numasim.timing.resolve import resolve_calibration
from numasim.topology.model import Machine
from numasim.workload.access import AccessChunk
from numasim.workload.generate import generate, total_accesses
from numasim.workload.placement import Placement, place_trace, place_workload, thread_affinity, thread_specs
from numasim.workload.spec import Workload
from numasim.workload.trace import read_trace, trace_format
from numasim.workload.trace.npz import read_npz_header

__all__ = [
    "RunOutcome", "run_workload", "run_trace", "compare_policies", "trace_threads", "trace_census", "run_kernel_config",
]

SysctlWrites = Mapping[str, object] | Sequence[tuple[str, object]]


def run_kernel_config(
    kernel_config: KernelConfig | None, workload_sysctls: SysctlWrites = (), sysctls: SysctlWrites = ()
) -> KernelConfig:
    """The kernel a run boots: ``kernel_config`` (default ``KernelConfig()``), then the workload file's
    ``[sysctl]`` writes, then ``sysctls`` (the caller's, e.g. ``--sysctl``: they win over the file's).

    Examples
    --------
    >>> run_kernel_config(None, {"kernel.numa_balancing": 1}, [("kernel.numa_balancing", "0")]).sysctl_writes
    (('kernel.numa_balancing', '1'), ('kernel.numa_balancing', '0'))
    """
    cfg = kernel_config if kernel_config is not None else KernelConfig()
    return apply_sysctls(apply_sysctls(cfg, workload_sysctls), sysctls)


def balancing_runtime(
    cfg: KernelConfig, placement: Placement, allowed: Mapping[int, frozenset[int]], daemons: Sequence[str] = ()
) -> KernelRuntime | None:
    """The run-time kernel a timed run gets: automatic NUMA balancing when ``kernel.numa_balancing`` is set, and
    each of ``daemons`` (``NAME|FILE.py[:NAME=VALUE,...]``: a module with ``make_daemon(kernel, task, **params)``)."""
    parts: list[KernelRuntime] = []
    if len(placement.deferred_pages) and placement.task is not None:
        # first: the pages a run faults on the clock must be present before any other kernel sees them
        parts.append(FirstTouchFaults(placement.kernel, placement.task, placement.deferred_pages,
                                      placement.deferred_cpus))  # fmt: skip
    if cfg.numa_balancing.mode and placement.task is not None:
        parts.append(NumaBalancing(placement.kernel, placement.task, cfg.numa_balancing, allowed_cpus=allowed))
    if placement.task is not None:
        khugepaged = Khugepaged(placement.kernel, placement.task)
        if khugepaged.wanted(movers=bool(daemons)):  # ranges to collapse, or migrations that may split huge pages
            parts.append(khugepaged)
    for spec in daemons:
        if placement.task is None:
            raise WorkloadError(f"--daemon {spec}: the run has no process to act on")
        parts.append(load_daemon(spec, placement.kernel, placement.task))
    if placement.reclaim_stalls or placement.compaction_stalls:
        # faults of the run that stalled in direct reclaim or compaction pay it at first access
        ns_per_page = cfg.page_size_bytes / cfg.direct_reclaim_bytes_per_s * 1e9
        parts.append(DirectReclaimStalls(placement.reclaim_stalls, ns_per_page, placement.compaction_stalls,
                                         cfg.compact_migrate_page_ns, placement.lazily_touched))  # fmt: skip
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else CompositeRuntime(parts)


def load_daemon(spec: str, kernel: Kernel, task: Any) -> KernelRuntime:
    """A user-space daemon from ``NAME|FILE.py[:NAME=VALUE,...]``: a shipped daemon's name (``numad``) or a file
    (numbers are read as numbers).

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> k = Kernel(load_machine("seed-003-2node"))
    >>> load_daemon("numad:interval_ms=100", k, k.spawn("app")).interval_ns
    100000000.0
    >>> load_daemon("numad:interval=100", k, k.spawn("app"))
    Traceback (most recent call last):
    ...
    numasim.errors.WorkloadError: --daemon numad:interval=100: Numad.__init__() got an unexpected keyword argument 'interval'
    """
    import importlib.util

    from numasim.errors import PolicyError
    from numasim.kernel.registry import shipped_daemons, split_params

    path_text = spec.partition(":")[0]
    shipped = shipped_daemons()
    path = shipped[path_text] if path_text in shipped else Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise WorkloadError(
            f"--daemon {spec}: {path_text} is neither a shipped daemon ({', '.join(sorted(shipped)) or 'none'}) "
            "nor a Python file (NAME|FILE.py[:NAME=VALUE,...])"
        )
    try:
        _, params = split_params(spec, "--daemon")
    except PolicyError as exc:
        raise WorkloadError(str(exc)) from None
    module_spec = importlib.util.spec_from_file_location(f"numasim_daemon_{path.stem}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    make = getattr(module, "make_daemon", None)
    if make is None:
        raise WorkloadError(f"--daemon {spec}: {path_text} has no make_daemon(kernel, task, **params)")
    try:
        return make(kernel, task, **params)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"--daemon {spec}: {exc}") from None


def workload_allowed_cpus(machine: Machine, workload: Workload) -> dict[int, frozenset[int]]:
    """Per thread id, the cpus the scheduler may move it to: its ``cpu``, its ``node``'s cpus, its ``cpus``, or
    (unpinned) every cpu."""
    out: dict[int, frozenset[int]] = {}
    for t, cpus in zip(workload.threads, thread_affinity(machine, workload), strict=True):
        out[t.id] = frozenset(cpus) if cpus is not None else frozenset({t.cpu} if t.cpu is not None else ())
    return out


def _tlb_input(tlb: TlbSpec | None) -> dict[str, Any]:
    return {} if tlb is None else {"tlb": tlb.describe()}


def _with_kernel(inputs: dict[str, Any], runtime: KernelRuntime | None, daemons: Sequence[str] = ()) -> dict[str, Any]:
    """The run's inputs plus what its run-time kernel assumed (costs; each daemon's parameters)."""
    parts = runtime.parts if isinstance(runtime, CompositeRuntime) else [] if runtime is None else [runtime]
    for p in parts:
        if isinstance(p, NumaBalancing):
            inputs["kernel"]["numa_balancing_runtime"] = p.assumptions()
        if isinstance(p, DirectReclaimStalls):
            inputs["kernel"]["direct_reclaim_stalls"] = p.assumptions()
        if isinstance(p, FirstTouchFaults):
            inputs["kernel"]["first_touch_faults"] = p.assumptions()
    if daemons:
        kernel_parts = NumaBalancing | Khugepaged | DirectReclaimStalls | FirstTouchFaults
        inputs["kernel"]["daemons"] = [
            {"spec": spec, **(getattr(p, "assumptions", dict)())}
            for spec, p in zip(daemons, [p for p in parts if not isinstance(p, kernel_parts)], strict=True)
        ]
    return inputs


def kernel_inputs(cfg: KernelConfig) -> dict[str, Any]:
    """What a result records of its kernel: the version, the sysctl writes in order and every knob's value."""
    return {
        "version": cfg.version,
        "sysctl_writes": [[name, value] for name, value in cfg.sysctl_writes],
        "sysctl": sysctl_values(cfg),
        **reclaim_inputs(cfg),
    }


@dataclass
class RunOutcome:
    """One run: the engine's result and everything needed to say where it came from.

    ``wall_s`` (how long the run took on this computer) is kept here but is not part of the result:
    :meth:`to_dict` leaves it out, so one seed gives byte-identical result files (the CLI prints it on stderr).
    """

    result: SimulationResult
    placement: Placement
    machine: Machine
    calibration: Calibration
    workload: str
    policy: str
    mode: str
    seed: int
    threads: list[ThreadSpec]
    wall_s: float
    inputs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the engine's result plus provenance and the kernel's placement view (no wall time: the same
        inputs and seed give the same dict). A machine whose nodes sit behind memory-side caches, which the engine
        does not time, says so under ``not_modelled``."""
        behind = {str(n.id): n.memory_side_cache_bytes for n in self.machine.nodes
                  if n.memory_side_cache_bytes is not None}
        return {
            "numasim_run": 1,
            "machine": self.machine.name,
            **({"not_modelled": {"memory_side_cache_bytes": behind}} if behind else {}),
            "workload": self.workload,
            "policy": self.policy,
            "mode": self.mode,
            "seed": self.seed,
            "calibration": {
                "id": self.calibration.id,
                "method": self.calibration.provenance.method,
            },
            "threads": [{"id": t.id, "cpu": t.cpu, "dependent": t.dependent,
                         **({"cpus": list(t.cpus)} if t.cpus is not None else {})} for t in self.threads],
            "placement": {
                "pages_per_node": {str(k): v for k, v in self.placement.pages_per_node().items()},
                "pages_by_allocation": {
                    a: {str(k): v for k, v in d.items()} for a, d in self.placement.pages_by_allocation.items()
                },
                "failed_pages": self.placement.failed_pages,
                "numastat": {str(k): v for k, v in self.placement.numastat().items()},
            },
            "inputs": self.inputs,
            "result": self.result.to_dict(),
        }


def run_workload(
    machine: Machine,
    workload: Workload,
    calibration: Calibration,
    *,
    policy: str | None = None,
    mode: str = "epoch",
    seed: int = 0,
    progress: Callable[[int, int | None], None] | None = None,
    epoch_ns: float = 1000.0,
    kernel_config: KernelConfig | None = None,
    sysctls: SysctlWrites = (),
    daemons: Sequence[str] = (),
    tlb: TlbSpec | None = None,
) -> RunOutcome:
    """Place ``workload`` under ``policy`` and time its generated accesses (seeded by ``seed``).

    ``kernel_config``: the kernel placement boots (version, THP, sysctls); default ``KernelConfig()``. The
    workload's ``[sysctl]`` table is written to it, then ``sysctls`` (``NAME -> VALUE`` or pairs, in order;
    see :mod:`numasim.kernel.sysctl`). The result's ``inputs["kernel"]`` records every knob."""
    started = time.perf_counter()
    cfg = run_kernel_config(kernel_config, workload.sysctl, sysctls)
    threads = thread_specs(machine, workload)
    # with kswapd, lazily faulted pages fault on the simulation clock, where kswapd runs (numasim.kernel.first_touch)
    placement = place_workload(machine, workload, policy=policy, seed=seed, kernel=Kernel(machine, cfg),
                               defer_first_touch=cfg.kswapd_enabled)  # fmt: skip
    total = total_accesses(workload)
    runtime = balancing_runtime(cfg, placement, workload_allowed_cpus(machine, workload), daemons)
    result = simulate(
        machine, calibration, threads, generate(workload, seed), placement.pages, mode=mode, seed=seed,
        epoch_ns=epoch_ns, progress=(lambda n: progress(n, total)) if progress else None, runtime=runtime,
        request_accesses=workload.request_accesses or 0, tlb=tlb,
    )
    placement.refresh_after_run()
    return RunOutcome(
        result, placement, machine, calibration, workload.name, placement.policy, str(mode), seed, threads,
        time.perf_counter() - started,
        _with_kernel({"accesses": total, "kernel": {**kernel_inputs(cfg), **_untimed(placement)}, **_tlb_input(tlb)},
                     runtime, daemons),
    )


def _untimed(placement: Placement) -> dict[str, Any]:
    # direct reclaim of prefaulted allocations happened outside the timed accesses: said, not charged
    out: dict[str, Any] = {}
    if placement.untimed_reclaim_pages:
        out["untimed_reclaim_pages"] = placement.untimed_reclaim_pages
    if placement.untimed_compaction_pages:
        out["untimed_compaction_pages"] = placement.untimed_compaction_pages
    if placement.placed_before_timing:  # lazily faulted, but placed before timing: why
        out["faulted_before_timing"] = dict(placement.placed_before_timing)
    return out


def trace_census(chunks: Iterable[AccessChunk]) -> tuple[list[int], int]:
    """The distinct thread ids of a trace in increasing order, and its number of accesses (one streaming pass).

    Examples
    --------
    >>> import numpy as np
    >>> trace_census([AccessChunk.build(np.arange(3, dtype=np.uint64), thread=np.array([7, 2**31 - 1, 7]))])
    ([7, 2147483647], 3)
    """
    seen = np.zeros(0, dtype=np.int64)
    accesses = 0
    for c in chunks:
        if len(c):
            accesses += len(c)
            seen = np.union1d(seen, np.unique(c.thread))
    return [int(t) for t in seen], accesses


def trace_threads(machine: Machine, count: int, cpus: Sequence[int] | None = None) -> list[int]:
    """The cpu of each of a trace's ``count`` threads: ``cpus`` in order (cycled), or the machine's cpus in order."""
    pool = list(cpus) if cpus else sorted(machine.cpu_to_node)
    bad = [c for c in pool if c not in machine.cpu_to_node]
    if bad:
        raise WorkloadError(f"--cpus: machine {machine.name} has no cpu {bad[0]}")
    if not pool:
        raise WorkloadError(f"machine {machine.name} has no cpus")
    return [pool[i % len(pool)] for i in range(count)]


def run_trace(
    machine: Machine,
    trace: str | Path,
    calibration: Calibration,
    *,
    policy: str | None = None,
    mode: str = "epoch",
    seed: int = 0,
    cpus: Sequence[int] | None = None,
    format: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    epoch_ns: float = 1000.0,
    kernel_config: KernelConfig | None = None,
    sysctls: SysctlWrites = (),
    daemons: Sequence[str] = (),
    tlb: TlbSpec | None = None,
    **reader_options: Any,
) -> RunOutcome:
    """Replay a trace file: its pages first-touched by the first thread touching each (under ``policy``), then
    every access timed. The file is read three times (thread ids, placement, timing), streaming each time.
    ``sysctls`` are written to ``kernel_config`` (default ``KernelConfig()``) in order before placement."""
    started = time.perf_counter()
    cfg = run_kernel_config(kernel_config, (), sysctls)
    path = Path(trace)
    # Threads: one per distinct thread id, numbered in increasing id order (ids are labels up to 2**31-1, so
    # nothing is sized by the largest id). One streaming pass over the trace finds them before placement.
    total: int | None = read_npz_header(path)["accesses"] if path.suffix == ".npz" else None
    recorded: dict[int, int] = {}
    recording = cpus is None and trace_format(path, format) in ("perf", "csv")
    census_options = {**reader_options, "recorded_cpus": recorded} if recording else reader_options
    ids, accesses = trace_census(read_trace(path, format, **census_options))
    if recording and ids and all(t in recorded for t in ids):
        # replay where perf saw each thread run (its first sample), if this machine has those cpus
        missing = [(t, recorded[t]) for t in ids if recorded[t] not in machine.cpu_to_node]
        if missing:
            t, c = missing[0]
            raise WorkloadError(f"{path}: the trace ran thread {t} on cpu {c}, which {machine.name} does not have; "
                                "give the cpus to replay on with --cpus")  # fmt: skip
        cpu_of = [recorded[t] for t in ids]
        cpu_source = "recorded in the trace (each thread's first access: perf's [cpu] field, a CSV's cpu column)"
    else:
        cpu_of = trace_threads(machine, max(1, len(ids)), cpus)
        cpu_source = "--cpus" if cpus else "the machine's cpus in order (the trace records none; --cpus chooses)"
    # --cpus pins each thread to its cpu (the kernel's view below too); else a thread may run on any cpu, as the
    # scheduler balances it (a trace records where a thread ran, not its affinity)
    pool = None if cpus else tuple(sorted(machine.cpu_to_node))
    threads = [ThreadSpec(id=tid, cpu=cpu, cpus=pool) for tid, cpu in zip(ids or [0], cpu_of, strict=True)]
    try:
        placement = place_trace(machine, read_trace(path, format, **reader_options),
                                {t.id: t.cpu for t in threads}, policy=policy,
                                kernel=Kernel(machine, cfg), defer_first_touch=cfg.kswapd_enabled)
    except WorkloadError as exc:
        raise WorkloadError(f"{path}: {exc}") from None  # which input the placement could not take
    every = frozenset(machine.cpus)
    runtime = balancing_runtime(cfg, placement, {t.id: frozenset({t.cpu}) if cpus else every for t in threads}, daemons)
    result = simulate(
        machine, calibration, threads, read_trace(path, format, **reader_options), placement.pages, mode=mode,
        seed=seed, epoch_ns=epoch_ns, progress=(lambda n: progress(n, total)) if progress else None, runtime=runtime,
        tlb=tlb,
    )
    placement.refresh_after_run()
    return RunOutcome(
        result, placement, machine, calibration, path.name, placement.policy, str(mode), seed, threads,
        time.perf_counter() - started,
        _with_kernel({"trace": str(path), "accesses": accesses, "kernel": kernel_inputs(cfg), **_tlb_input(tlb),
                      "trace_cpus": {"source": cpu_source, "cpus": {str(t.id): t.cpu for t in threads}}},
                     runtime, daemons),
    )


def compare_policies(
    machine: Machine,
    workload: Workload | str | Path,
    policies: Sequence[str],
    calibration: Calibration | None = None,
    *,
    nominal: bool = False,
    mode: str = "epoch",
    seed: int = 0,
    kernel_config: KernelConfig | None = None,
    sysctls: SysctlWrites = (),
    progress: Callable[[int, int, str], None] | None = None,
    outcomes: list[RunOutcome] | None = None,
    **trace_options: Any,
) -> list[dict[str, Any]]:
    """Run ``workload`` (a :class:`Workload`, or a trace file's path) once per policy and tabulate the outcome,
    one row per policy.

    Each row: ``policy``, ``run_time_ns``, ``speedup`` (versus the first policy), ``remote_pct`` (share of
    memory requests served by a node other than the requester's), ``bandwidth_gb_s`` (the program's bytes over
    the run time), ``node<N>_gb_s`` (bytes served by node N over the run time), ``node<N>_pages``, and the
    calibration's id and method. ``calibration=None`` uses the calibration the machine names, or with
    ``nominal=True`` the machine file's nominal numbers (see :func:`resolve_calibration`). ``progress(k, n,
    policy)`` is called before each run; ``outcomes``, when given, receives each run's :class:`RunOutcome`;
    ``trace_options`` (``cpus``, ``format``) go to :func:`run_trace`.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> from numasim.workload.quick import quick_workload
    >>> rows = compare_policies(glueless(2), quick_workload("sequential", size="256K", accesses=2000),
    ...                         ["local", "bind:1"], nominal=True)
    >>> [r["policy"] for r in rows], rows[0]["remote_pct"], rows[1]["remote_pct"]
    (['local', 'bind:1'], 0.0, 100.0)
    """
    cal = calibration if calibration is not None else resolve_calibration(machine, nominal=nominal)
    rows: list[dict[str, Any]] = []
    for k, pol in enumerate(policies):
        if progress is not None:
            progress(k, len(policies), pol)
        if isinstance(workload, Workload):
            out = run_workload(machine, workload, cal, policy=pol, mode=mode, seed=seed, kernel_config=kernel_config,
                               sysctls=sysctls)  # fmt: skip
        else:
            out = run_trace(machine, workload, cal, policy=pol, mode=mode, seed=seed, kernel_config=kernel_config,
                            sysctls=sysctls, **trace_options)  # fmt: skip
        if outcomes is not None:
            outcomes.append(out)
        r = out.result
        local = sum(n.local_accesses for n in r.nodes)
        remote = sum(n.remote_accesses for n in r.nodes)
        seconds = r.run_time_ns * 1e-9
        row: dict[str, Any] = {
            "policy": pol,
            "run_time_ns": r.run_time_ns,
            "remote_pct": round(100.0 * remote / (local + remote), 3) if local + remote else 0.0,
            "bandwidth_gb_s": (sum(n.bytes_read + n.bytes_written for n in r.nodes) / seconds / 1e9) if seconds else 0.0,
        }
        for n in r.nodes:
            row[f"node{n.node}_gb_s"] = ((n.bytes_read + n.bytes_written) / seconds / 1e9) if seconds else 0.0
            row[f"node{n.node}_pages"] = n.pages_resident
        row["calibration"] = cal.id
        row["calibration_method"] = cal.provenance.method
        rows.append(row)
    base = rows[0]["run_time_ns"] if rows else 0.0
    for row in rows:
        row["speedup"] = base / row["run_time_ns"] if row["run_time_ns"] else float("nan")
    return rows
