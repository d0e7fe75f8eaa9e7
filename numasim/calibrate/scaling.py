"""Bandwidth scaling with active cores: kerncraft's likwid-bench measurements replayed with the virtual STREAM.

A kerncraft machine file (:mod:`numasim.calibrate.parsers.kerncraft`) says how local memory bandwidth grows as
cores of one socket are added, the first NUMA domain filled first. Two things a timing model must get right
show in it: one core alone is limited by the misses it can keep in flight (Little's law: outstanding lines x
64 B / latency), and a domain or socket saturates at its channels' bandwidth. Neither is in an mlc latency
matrix, so this is a prediction test for calibrations made without it (catalog priors, or a fit on mlc).

The replay runs the very tool a user runs: the virtual STREAM (:func:`numasim.tools.stream.stream`), its
``Copy`` kernel (one read and one write stream, 16 B counted per element, as likwid-bench's ``copy`` counts),
OpenMP threads pinned to the first ``n`` cores of socket 0 (one thread per core, as the measurements'
one-thread-per-core series), arrays first touched by their threads, so each domain's threads use its memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numasim.calibrate.parsers.kerncraft import BandwidthScaling, KerncraftResult, KernelStreams
from numasim.errors import CalibrationError
from numasim.timing.model import Calibration
from numasim.topology.model import Machine
from numasim.units import GiB

__all__ = [
    "ScalingComparison", "kerncraft_machine", "replay_bandwidth_scaling", "replay_kernel_scaling", "compare_scaling",
    "solve_stream_depth",
]


@dataclass(frozen=True)
class ScalingComparison:
    """Measured and simulated bandwidth (GB/s) at each active-core count, with the errors that matter."""

    kernel: str
    cores: np.ndarray
    measured_gb_s: np.ndarray
    simulated_gb_s: np.ndarray
    calibration_id: str

    @property
    def error_pct(self) -> np.ndarray:
        return 100.0 * (self.simulated_gb_s - self.measured_gb_s) / self.measured_gb_s

    @property
    def mape_pct(self) -> float:
        return float(np.mean(np.abs(self.error_pct)))

    def to_dict(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "calibration": self.calibration_id,
            "cores": self.cores.tolist(),
            "measured_gb_s": [round(float(x), 3) for x in self.measured_gb_s],
            "simulated_gb_s": [round(float(x), 3) for x in self.simulated_gb_s],
            "mape_pct": round(self.mape_pct, 2),
        }


def kerncraft_machine(result: KerncraftResult, *, memory_bytes_per_node: int = 48 * GiB) -> Machine:
    """The machine a kerncraft file describes: its sockets split into its NUMA domains, its cpu model named.

    Memory sizes are not in the file: ``memory_bytes_per_node`` only has to hold the benchmark's arrays. Link and
    controller numbers are the builder's nominal ones: time it with a calibration (a catalog one for a
    prediction).

    The layout is :mod:`numasim.topology.io.kerncraft`'s (``numasim topo import`` builds the same machine from
    the file); see :func:`~numasim.topology.io.kerncraft.machine_from_kerncraft` for an example.
    """
    from numasim.topology.io.kerncraft import machine_from_kerncraft

    return machine_from_kerncraft(result.layout, memory_bytes_per_node=memory_bytes_per_node)


def kerncraft_calibration(result: KerncraftResult, machine: Machine | None = None) -> Calibration:
    """The platform catalog's priors for a kerncraft file's machine, its cores at the file's fixed clock.

    A kerncraft machine file records the clock its likwid-bench runs were made at (``clock:``, every file the
    project holds at its SKU's base), and kerncraft benchmarks with the frequency fixed there, so the catalog's
    all-core turbo (where it has one, as for the E5-2697 v4) does not apply: turbo off.
    """
    from numasim.timing.catalog import catalog_calibration

    return catalog_calibration(machine if machine is not None else kerncraft_machine(result), turbo=False)


def _socket0_cores(machine: Machine, threads_per_core: int) -> list[int]:
    """Socket 0's cores in fill order: node by node, the first hardware thread of each core. Linux numbers
    every core's first thread before any second one, so a node's lowest ``1 / threads_per_core`` of cpus."""
    nodes = [n for n in machine.nodes if n.socket in (0, None) and n.cpus]
    if not nodes:
        raise CalibrationError(f"{machine.name}: socket 0 has no cpus")
    return [c for n in nodes for c in n.cpus[: max(len(n.cpus) // threads_per_core, 1)]]


def replay_bandwidth_scaling(
    machine: Machine,
    calibration: Calibration,
    core_counts: Sequence[int],
    *,
    threads_per_core: int = 1,
    kernel: str = "Copy",
    array_elements_per_thread: int = 200_000,
    seed: int = 0,
) -> np.ndarray:
    """Virtual STREAM ``kernel`` bandwidth (GB/s) on the first ``n`` cores of socket 0, for each ``n``.

    ``threads_per_core`` is how many cpus Linux shows per core (the machine file does not say), so that one
    thread runs per core.
    """
    from numasim.tools.context import tool_context
    from numasim.tools.stream import stream

    cores = _socket0_cores(machine, threads_per_core)
    out = []
    for n in core_counts:
        if not 1 <= n <= len(cores):
            raise CalibrationError(f"core count {n}: socket 0 of {machine.name} has {len(cores)} cores")
        ctx = tool_context(machine, calibration, physcpubind=cores[:n], seed=seed)
        r = stream(ctx, threads=n, array_elements=array_elements_per_thread * n, kernels=(kernel,))
        out.append(r.best_rate_mb_s[kernel] / 1000.0)
    return np.array(out)


def replay_kernel_scaling(
    machine: Machine,
    calibration: Calibration,
    core_counts: Sequence[int],
    streams: KernelStreams,
    *,
    threads_per_core: int = 1,
    array_elements_per_thread: int = 200_000,
    seed: int = 0,
) -> np.ndarray:
    """A likwid-bench streaming kernel's bandwidth (GB/s, the bytes it counts) on the first ``n`` cores of
    socket 0, for each ``n``: its arrays first touched by their threads (one a core, as kerncraft's series), each
    cache line of them loaded from every read stream, then stored to every write stream (a stream both read and
    written, ``a[i] = s * a[i]``, is loaded, then stored)."""
    from numasim.tools.context import tool_context
    from numasim.tools.stream import first_touched_arrays, streaming_pass_ns

    cores = _socket0_cores(machine, threads_per_core)
    read_only = [f"r{k}" for k in range(streams.read_only)]
    both = [f"a{k}" for k in range(streams.read_write)]
    write_only = [f"w{k}" for k in range(streams.write_only)]
    out = []
    for n in core_counts:
        if not 1 <= n <= len(cores):
            raise CalibrationError(f"core count {n}: socket 0 of {machine.name} has {len(cores)} cores")
        ctx = tool_context(machine, calibration, physcpubind=cores[:n], seed=seed)
        elements = array_elements_per_thread * n
        bounds = np.linspace(0, elements, n + 1).astype(np.int64)
        arrays = first_touched_arrays(ctx, read_only + both + write_only, elements, cores[:n], bounds, "likwid-bench")
        pass_ns = streaming_pass_ns(ctx, cores[:n], arrays, bounds, read_only + both, both + write_only)
        out.append(streams.counted_bytes * elements / pass_ns)
    return np.array(out)


def compare_scaling(
    machine: Machine,
    calibration: Calibration,
    scaling: BandwidthScaling,
    *,
    threads_per_core: int = 1,
    core_counts: Sequence[int] | None = None,
    seed: int = 0,
    streams: KernelStreams | None = None,
) -> ScalingComparison:
    """Replay ``scaling``'s kernel at the measured core counts (or a subset): ``copy`` with the virtual STREAM's
    Copy (the tool a user runs; the same accesses and bytes), any other with its ``streams``
    (:func:`replay_kernel_scaling`; from :attr:`KerncraftResult.kernels`)."""
    measured_cores = scaling.cores.tolist()
    wanted = list(core_counts) if core_counts is not None else measured_cores
    missing = [n for n in wanted if n not in measured_cores]
    if missing:
        raise CalibrationError(f"core counts {missing} were not measured (measured: {measured_cores})")
    idx = [measured_cores.index(n) for n in wanted]
    if scaling.kernel == "copy":
        sim = replay_bandwidth_scaling(
            machine, calibration, wanted, threads_per_core=threads_per_core, kernel="Copy", seed=seed
        )
    elif streams is not None:
        sim = replay_kernel_scaling(machine, calibration, wanted, streams, threads_per_core=threads_per_core, seed=seed)
    else:
        raise CalibrationError(
            f"kernel {scaling.kernel!r}: its streams are needed (the file's benchmarks: kernels: section); only "
            "copy has a STREAM counterpart"
        )
    return ScalingComparison(
        kernel=scaling.kernel,
        cores=np.array(wanted),
        measured_gb_s=scaling.bandwidth_gb_s[idx],
        simulated_gb_s=sim,
        calibration_id=calibration.id,
    )


def solve_stream_depth(
    result: KerncraftResult, calibration: Calibration, *, depths: Sequence[int] = range(40)
) -> tuple[int, float, float]:
    """The prefetch depth (``core.prefetch_distance_lines``) at which one core's replayed likwid-bench load comes
    closest to ``result``'s measured one: ``(depth, measured GB/s, replayed GB/s at it)``.

    How the catalog's ``[stream]`` entries were solved (docs/design-rationale.md); deeper only goes faster, so the
    search stops 10 % past the measurement.

    Raises
    ------
    CalibrationError
        If the file has no one-core ``load`` measurement (or no ``load`` kernel to replay).
    """
    series = result.scaling.get("MEM", {}).get("load")
    if series is None or "load" not in result.kernels or 1 not in series.cores.tolist():
        raise CalibrationError(f"{result.model_name or 'kerncraft file'}: no one-core MEM load measurement to solve on")
    machine = kerncraft_machine(result)
    best: tuple[float, int, float, float] | None = None
    for depth in depths:
        trial = calibration.model_copy(update={"core": calibration.core.model_copy(
            update={"prefetch_distance_lines": depth})})
        c = compare_scaling(machine, trial, series, threads_per_core=result.threads_per_core, core_counts=[1],
                            streams=result.kernels["load"])
        measured, replayed = float(c.measured_gb_s[0]), float(c.simulated_gb_s[0])
        if best is None or abs(replayed / measured - 1.0) < best[0]:
            best = (abs(replayed / measured - 1.0), depth, measured, replayed)
        if replayed > 1.1 * measured:
            break
    assert best is not None
    return best[1], best[2], best[3]
