"""From measurement files to a :class:`Calibration`: run each fitter on the tables asked for, fill the rest from
the machine file, record provenance (files with sha256, tools and versions, fit quality, assumptions).

Tables (``fit_on``):

``latency``
    idle latency matrices (mlc ``--latency_matrix`` / ``--idle_latency``, probe, HMAT ``read_latency``) and
    stride tables (stride 64 at the largest working set: per-access time x memory-level parallelism).
``peak_bandwidth``
    mlc peak injection (or ``--max_bandwidth``) mixes: system read and write bandwidth.
``bandwidth_matrix``
    mlc ``--bandwidth_matrix`` / probe / HMAT ``read_bandwidth``: controller split and link bandwidths.
``loaded_latency``
    mlc ``--loaded_latency``: the controllers' loaded-latency curve and the core's outstanding misses.
``caches``
    lat_mem_rd: cache level sizes and latencies.
``device``
    perftest bandwidth tables: a device's attach bandwidth and the link its remote DMA is bound by.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec

import numpy as np

from numasim.calibrate.curves import fit_cache_levels, fit_loaded_latency_curve
from numasim.calibrate.fit import READ_FRACTION, fit_bandwidth, fit_latency, slit_warnings
from numasim.calibrate.measurements import Measurement
from numasim.calibrate.parsers import (
    HmatResult,
    HopRatioResult,
    LatMemRdResult,
    LoadedLatencyTable,
    MlcResult,
    NodeMatrix,
    PerftestResult,
    ProbeResult,
    StrideTableResult,
)
from numasim.calibrate.parsers.mlc import node_latency_matrices
from numasim.calibrate.priors import nominal_priors, prior_source, scaled_curve, timing_parameters
from numasim.calibrate.result import FitResult, FittedParameter
from numasim.errors import CalibrationError, NumasimError
from numasim.timing.catalog.calibration import WRITE_ALLOCATE_FACTOR
from numasim.timing.model import (
    Calibration,
    CoherenceTiming,
    ControllerTiming,
    CoreTiming,
    LinkTiming,
    LoadedLatencyCurve,
    PriorParameter,
    Provenance,
    RelayTiming,
    SourceFile,
    apply_calibration,
    default_curve,
)
from numasim.tools.mlc_load import (
    FIT_MAX_LATENCY_RATIO,
    FIT_MIN_DELAY,
    LOAD_LINES_PER_DELAY,
    LOAD_LOOP_CYCLES_PER_LINE,
    ClockFit,
    fit_core_clock,
    pace_threads_per_core,
    threads_on_core,
)
from numasim.topology.builders import (
    DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    DEFAULT_CONTROLLER_LATENCY_NS,
)
from numasim.topology.model import Machine, Vertex
from numasim.topology.routing import routing

__all__ = [
    "FIT_TABLES",
    "CalibrationReport",
    "calibrate",
    "stride_latency_matrices",
    "hop_ratio_matrix",
    "DEFAULT_FIT_ON",
    "DERIVED",
    "unconstrained_priors",
    "SATURATED_ROW_SHARE",
]

FIT_TABLES = ("latency", "peak_bandwidth", "bandwidth_matrix", "loaded_latency", "caches", "device", "c2c")
DEFAULT_FIT_ON = FIT_TABLES
_FIT_ALIASES = {"latency_matrix": "latency", "idle_latency": "latency", "peak_injection": "peak_bandwidth",
                "c2c_latency": "c2c"}

LINE_BYTES = 64


@dataclass
class CalibrationReport:
    """A fitted calibration and how it was obtained."""

    calibration: Calibration
    result: FitResult
    tables_used: list[str] = field(default_factory=list)

    def quality(self) -> dict[str, float]:
        return dict(self.calibration.provenance.fit_quality)


def _hmat_matrix(h: HmatResult, key: str, unit: str) -> NodeMatrix | None:
    cells = [(i, t.node, t.values[key]) for t in h.targets if t.access_class == 0 and key in t.values for i in t.initiators]
    if not cells:
        return None
    rows = sorted({c[0] for c in cells})
    cols = sorted({c[1] for c in cells})
    arr = np.full((len(rows), len(cols)), np.nan)
    for i, j, v in cells:
        arr[rows.index(i), cols.index(j)] = v
    return NodeMatrix(rows, cols, arr, unit)


SATURATED_ROW_SHARE = 0.97
"""A loaded-latency row whose bandwidth is within 3 % of the table's top is saturated (mlc's smallest delays)."""


def stride_latency_matrices(tables: StrideTableResult, mlp: int, pattern: str = "s64") -> list[NodeMatrix]:
    """Idle-latency cells implied by stride tables: at the largest working set a stride-64 walk misses once per
    access and keeps ``mlp`` misses in flight, so by Little's law ``latency = per-access time x mlp``."""
    out = []
    for t in tables.tables:
        if t.cpu_node is None or t.mem_node is None or pattern not in t.latency_ns:
            continue
        k = int(np.argmax(t.size_bytes))
        value = float(t.latency_ns[pattern][k]) * mlp
        out.append(NodeMatrix([t.cpu_node], [t.mem_node], np.array([[value]]), "ns"))
    return out


def hop_ratio_matrix(machine: Machine, table: HopRatioResult, local_latency_ns: float) -> NodeMatrix | None:
    """Latency cells ``local x ratio(hops(i, j))`` for every node pair whose hop count the table covers."""
    reads = table.ratios.get("read", {})
    if not reads:
        return None
    r = routing(machine)
    ids = [n.id for n in machine.nodes if n.has_cpus or n.has_memory]
    cols = [n.id for n in machine.nodes if n.has_memory]
    arr = np.full((len(ids), len(cols)), np.nan)
    for a, i in enumerate(ids):
        for b, j in enumerate(cols):
            h = r.hops(i, j)
            if h in reads:
                arr[a, b] = local_latency_ns * reads[h]
    if not np.isfinite(arr).any():
        return None
    return NodeMatrix(ids, cols, arr, "ns")


def _source_file(m: Measurement, sections: list[str]) -> SourceFile:
    return SourceFile(path=str(m.path), sha256=m.sha256, tool=m.format, tool_version=m.tool_version, sections=sections)


_P = ParamSpec("_P")


def _naming_measurement_files(fit: Callable[_P, CalibrationReport]) -> Callable[_P, CalibrationReport]:
    """A table the fit cannot use raises :class:`~numasim.errors.CalibrationError` naming the measurement files
    (at most three) before what is wrong, unless the message names one already."""

    @functools.wraps(fit)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> CalibrationReport:
        try:
            return fit(*args, **kwargs)
        except CalibrationError as exc:
            measurements = kwargs["measurements"] if "measurements" in kwargs else args[1]
            files = [str(m.path) for m in measurements]  # type: ignore[attr-defined]
            if not files or any(f in str(exc) for f in files):
                raise
            shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            raise CalibrationError(f"{shown}: {exc}") from None

    return wrapped


CLOCK_ROW_SPREAD = 0.05
"""A clock fitted from a loaded-latency table whose rows alone differ by more than this share of it is flagged."""
CLOCK_PRIOR_GAP = 0.15
"""... and one this far from the priors' clock (an all-core turbo or a base clock: 15 % spans the gap between
them on most SKUs)."""


def _pace_sharing_words(machine: Machine, core: CoreTiming) -> str:
    """How many threads a core the load threads' pace counted, and from where (a thread alone on its core loops
    twice as fast: a clock fitted with the wrong count is off by that factor)."""
    tpc, source = pace_threads_per_core(machine, core)
    return source if tpc is None else f"{tpc} thread(s) a core ({source})"


def _clock_from_loaded_latency(machine: Machine, core: CoreTiming, mlc: MlcResult) -> ClockFit | None:
    """The clock a loaded-latency table's lightly loaded rows imply for the virtual mlc's load threads (laid out
    as it lays them: the latency thread on the first cpu, a load thread on each other)."""
    table = mlc.loaded_latency[0]
    cpus = sorted(machine.cpus)
    if len(cpus) < 2:
        return None
    sharing = threads_on_core(cpus, pace_threads_per_core(machine, core)[0], cpus)
    return fit_core_clock(table.inject_delay, table.latency_ns, table.bandwidth_mb_s, [sharing[c] for c in cpus[1:]])


@_naming_measurement_files
def calibrate(
    machine: Machine,
    measurements: list[Measurement],
    *,
    fit_on: tuple[str, ...] | list[str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    notes: str = "",
    created: str | None = None,
    assume_local_latency_ns: float | None = None,
    priors: Calibration | None = None,
) -> CalibrationReport:
    """Fit a :class:`Calibration` of ``machine`` to ``measurements``.

    Parameters
    ----------
    fit_on : list of str, optional
        Which tables to fit (:data:`FIT_TABLES`); the others keep the machine file's numbers. Default: all
        the measurements provide.
    bootstrap, seed : int
        Bootstrap resamples for latency uncertainties (0: linearised covariance), and their seed.
    created : str, optional
        ISO date for the provenance (default today); pass one for byte-identical reruns.
    assume_local_latency_ns : float, optional
        The absolute local read latency that scales hop-ratio tables (which have no scale of their own);
        default: the machine file's controller latency of the first memory node. Always named in the report.
    priors : Calibration, optional
        Where the fit starts and what it keeps where the tables say nothing: every value, and its source
        (``priors.provenance.priors``). Default :func:`numasim.calibrate.priors.nominal_priors`, the machine
        file's nominal numbers labelled so. Parameters the tables used do not constrain (see
        :mod:`numasim.calibrate.identify`) are listed in the result's ``provenance.priors``.
    """
    if priors is None:
        priors = nominal_priors(machine)
    elif priors.machine != machine.name:
        raise CalibrationError(f"priors: calibration {priors.id} is for machine {priors.machine!r}, not {machine.name!r}")
    nominal_machine = machine
    # The fitters start from (and fall back to) the machine's numbers: give them the priors'.
    machine = apply_calibration(machine, priors)
    # The report names sections after the measurement ("latency_matrix"); accept those names too.
    wanted = tuple(_FIT_ALIASES.get(t, t) for t in fit_on) if fit_on is not None else DEFAULT_FIT_ON
    unknown = [t for t in wanted if t not in FIT_TABLES]
    if unknown:
        raise CalibrationError(f"--fit-on {unknown}: unknown table; known: {', '.join(FIT_TABLES)}")
    report = FitResult()
    used: list[str] = []
    sections: dict[int, list[str]] = {k: [] for k in range(len(measurements))}
    core = priors.core
    core_dies = list(priors.core_dies)
    assumed: dict[str, str] = {}

    def mark(k: int, name: str) -> None:
        if name not in sections[k]:
            sections[k].append(name)
        if name not in used:
            used.append(name)

    # ---- gather tables
    lat_mats: list[tuple[int, NodeMatrix]] = []
    bw_mats: list[tuple[int, NodeMatrix]] = []
    peaks: list[tuple[int, dict[str, float]]] = []
    loaded: list[tuple[int, MlcResult]] = []
    c2c_runs: list[tuple[int, MlcResult]] = []
    lmbench: list[tuple[int, LatMemRdResult]] = []
    strides: list[tuple[int, StrideTableResult]] = []
    perftests: list[tuple[int, PerftestResult]] = []
    hop_tables: list[tuple[int, HopRatioResult]] = []
    probes: list[tuple[int, ProbeResult]] = []
    for k, m in enumerate(measurements):
        d = m.data
        if isinstance(d, MlcResult):
            lat_mats += [(k, x) for x in node_latency_matrices(d, machine.cpu_to_node)]
            lat_mats += [(k, NodeMatrix([0], [0], np.array([[v]]), "ns")) for v in _memory_idle_latencies(
                machine, d, m.path, report.assumptions)]
            bw_mats += [(k, x) for x in d.bandwidth_matrices]
            report.assumptions += [f"{m.path.name}: {note}" for note in d.notes]
            if d.peak_injection_mb_s or d.max_bandwidth_mb_s:
                peaks.append((k, d.peak_injection_mb_s or d.max_bandwidth_mb_s))
            if d.loaded_latency:
                loaded.append((k, d))
            if d.c2c_local_ns or d.c2c_remote_ns:
                c2c_runs.append((k, d))
        elif isinstance(d, ProbeResult):
            lat_mats.append((k, d.latency_matrix))
            probes.append((k, d))
        elif isinstance(d, HmatResult):
            lm = _hmat_matrix(d, "read_latency_ns", "ns")
            bm = _hmat_matrix(d, "read_bandwidth_mb_s", "MB/s")
            if lm is not None:
                lat_mats.append((k, lm))
            if bm is not None:
                bw_mats.append((k, bm))
        elif isinstance(d, LatMemRdResult):
            lmbench.append((k, d))
        elif isinstance(d, StrideTableResult):
            strides.append((k, d))
        elif isinstance(d, PerftestResult):
            perftests.append((k, d))
        elif isinstance(d, HopRatioResult):
            hop_tables.append((k, d))
    r = routing(machine)
    ctrl_lat = {n.id: (n.controller.latency_ns if n.controller else DEFAULT_CONTROLLER_LATENCY_NS) for n in machine.nodes if n.has_memory}
    ctrl_rd = {n.id: (n.controller.read_bandwidth_gb_s if n.controller else DEFAULT_CONTROLLER_BANDWIDTH_GB_S) for n in machine.nodes if n.has_memory}
    ctrl_wr = {n.id: (n.controller.effective_write_bandwidth_gb_s if n.controller else ctrl_rd[n.id]) for n in machine.nodes if n.has_memory}
    for n in machine.nodes:
        if n.has_memory and n.controller is None:
            report.assumptions.append(f"node {n.id}: the machine file has no controller timing; numasim defaults used")
    link_lat: dict[tuple[Vertex, Vertex], float] = {}
    link_bw: dict[tuple[Vertex, Vertex], float] = {}
    for link in machine.links:
        for src, dst, lat, bw in link.directed():
            link_lat[(src, dst)] = lat
            link_bw[(src, dst)] = bw
    relay_lat = {n.id: n.relay_latency_ns for n in machine.nodes if n.relay_latency_ns > 0}
    curves: dict[int, object] = {}
    # ---- latency
    if "latency" in wanted:
        mats = [x for _, x in lat_mats]
        for k, st in strides:
            sm = stride_latency_matrices(st, core.max_outstanding_misses)
            if sm:
                mats += sm
                mark(k, "stride_latency")
                report.assumptions.append(
                    f"stride table: idle latency = time per access of stride 64 at the largest working set x "
                    f"{core.max_outstanding_misses} misses in flight (CoreTiming.max_outstanding_misses, Little's law)"
                )
        for k, ht in hop_tables:
            base = assume_local_latency_ns
            if base is None:
                first = next(n for n in machine.nodes if n.has_memory)
                base = first.controller.latency_ns if first.controller else DEFAULT_CONTROLLER_LATENCY_NS
            hm = hop_ratio_matrix(machine, ht, base)
            if hm is not None:
                mats.append(hm)
                mark(k, "hop_ratios")
                report.assumptions.append(
                    f"hop-ratio table has no absolute scale: local read latency ASSUMED to be {base:g} ns "
                    "(every fitted latency scales with it)"
                )
            writes = ht.ratios.get("write", {})
            reads = ht.ratios.get("read", {})
            if 0 in writes and reads.get(0):
                # A hop table's write/read ratio is a time: how long a store miss takes against a load. What a
                # store costs the resources it crosses is another matter: a write-back, write-allocate cache
                # moves two lines per store miss (its read for ownership and its write-back), which a time
                # ratio of 1.1-1.5 does not say (AMD's Opteron guide: a store stream "generates twice the
                # memory traffic generated by a read").
                factor = writes[0] / reads[0]
                core = core.model_copy(
                    update={"write_latency_factor": factor, "write_cost_factor": WRITE_ALLOCATE_FACTOR}
                )
                report.parameters.append(FittedParameter("core.write_latency_factor", factor, "1"))
                report.assumptions.append(
                    f"core.write_cost_factor = {WRITE_ALLOCATE_FACTOR:g}: a store miss moves its read for ownership "
                    "and its write-back (write-back, write-allocate caches); the hop table's write/read ratio "
                    f"({factor:.3g}) is its latency, not its cost in bandwidth"
                )
                mark(k, "hop_ratios")
        if mats:
            # Per-hop ratios say nothing about individual links or controllers: fit one value per kind.
            only_ratios = bool(hop_tables) and len(mats) == sum(1 for _ in hop_tables) and not lat_mats and not strides
            tie = ("controllers", "links_by_kind", "relays") if only_ratios else ()
            lf = fit_latency(machine, mats, routes=r, bootstrap=bootstrap, seed=seed, tie=tie)
            report.extend(lf.result)
            report.warnings += slit_warnings(machine, mats)
            ctrl_lat.update(lf.controller_latency_ns)
            link_lat.update(lf.link_latency_ns)
            relay_lat.update(lf.relay_latency_ns)
            if "relays" in tie and lf.relay_latency_ns:
                # tied relays: a relaying node no measured route crosses takes the common value too
                common = float(np.mean(list(lf.relay_latency_ns.values())))
                relay_lat.update({n: common for n in relay_lat if n not in lf.relay_latency_ns})
            for k, _ in lat_mats:
                mark(k, "latency_matrix")
    # ---- bandwidth
    use_peak = "peak_bandwidth" in wanted and peaks
    use_mat = "bandwidth_matrix" in wanted and bw_mats
    replay_peak: tuple[float, list[int]] | None = None
    replay_cells: dict[int, float] = {}
    replay_mixes = False  # the write bandwidth was fitted to mlc's read/write mixes (else the priors' ratio)
    ll_peak: dict[str, float] = {}
    ll_replay: tuple[LoadedLatencyTable, bool] | None = None  # a saturated loaded-latency table, prefetchers on
    if "loaded_latency" in wanted and loaded and not (use_peak or use_mat):
        # mlc's loaded latency at delay 0 is its all-reads peak (every cpu reading its own node's memory; the
        # two agree within 0.3 % on the four runs that have both), so without a bandwidth table it sets the
        # capacity the way the peak does
        ll_peak = {"all_reads": float(np.max(loaded[0][1].loaded_latency[0].bandwidth_mb_s))}
        report.assumptions.append(
            f"no peak or bandwidth-matrix table: the loaded-latency table's top bandwidth "
            f"({ll_peak['all_reads'] / 1000:.1f} GB/s, delay 0: mlc's all-reads traffic) sets the capacity, as "
            "mlc's all-reads peak would"
        )
    if use_peak or use_mat or ll_peak:
        merged_peak: dict[str, float] = dict(ll_peak)
        for _, p in peaks if use_peak else []:
            merged_peak.update(p)
        try:
            bf = fit_bandwidth(machine, [x for _, x in bw_mats] if use_mat else [], merged_peak or None, routes=r,
                               write_cost_factor=core.write_cost_factor)
        except CalibrationError as exc:  # say which file's tables could not be fitted
            ks = [k for k, _ in peaks] if use_peak else []
            ks += [k for k, _ in bw_mats] if use_mat else []
            ks += [loaded[0][0]] if ll_peak else []
            files = sorted({str(measurements[k].path) for k in ks})
            raise CalibrationError(f"{', '.join(files)}: {exc}") from None
        report.extend(bf.result)
        if bf.core_die_read_gb_s is None:
            # what set the controllers' capacity, for the replay below (not where the die ports took the figure)
            all_reads = merged_peak.get("all_reads")
            replay_mixes = any(k in READ_FRACTION and k != "all_reads" for k in merged_peak)
            if all_reads is not None:
                replay_peak = (float(all_reads), [n.id for n in machine.nodes if n.has_memory and n.has_cpus])
            elif use_mat:
                # mlc's cells only: an HMAT bandwidth is the firmware's figure for the memory, not what cores moved
                replay_cells = _local_cells([x for k, x in bw_mats if isinstance(measurements[k].data, MlcResult)])
        if bf.core_die_read_gb_s is not None and bf.core_die_write_gb_s is not None:
            core_dies = [d.model_copy(update={"read_bandwidth_gb_s": bf.core_die_read_gb_s,
                                              "write_bandwidth_gb_s": bf.core_die_write_gb_s}) if d.has_port else d
                         for d in core_dies]
        ctrl_rd.update(bf.controller_read_gb_s)
        ctrl_wr.update(bf.controller_write_gb_s)
        link_bw.update(bf.link_bandwidth_gb_s)
        if use_peak:
            for k, _ in peaks:
                mark(k, "peak_bandwidth")
        if use_mat:
            for k, _ in bw_mats:
                mark(k, "bandwidth_matrix")
    # ---- loaded latency and core MLP
    system_read = sum(ctrl_rd[n.id] for n in machine.nodes if n.has_memory and n.has_cpus) or sum(ctrl_rd.values())
    if "loaded_latency" in wanted and loaded:
        k, mlc = loaded[0]
        table = mlc.loaded_latency[0]
        if not {"latency_matrix", "stride_latency", "hop_ratios"} & set(used):
            _latency_from_idle_end(machine, table, ctrl_lat, report)
        idle = float(np.mean([ctrl_lat[j] for j in ctrl_lat if machine.node(j).has_cpus] or list(ctrl_lat.values())))
        # Saturated rows (within SATURATED_ROW_SHARE of the table's top bandwidth) are not curve points: there
        # every load thread has its misses in flight and latency is Little's law over them, which the engine's
        # FIFO controllers produce from max_outstanding_misses (fitted from those rows below). Put in the curve
        # too, that queueing would be counted twice.
        below = table.bandwidth_mb_s < SATURATED_ROW_SHARE * float(np.max(table.bandwidth_mb_s))
        if below.sum() < 2:
            below = np.ones(len(table.bandwidth_mb_s), dtype=bool)
        curve, cres = fit_loaded_latency_curve(
            table.bandwidth_gb_s[below], table.latency_ns[below], idle_latency_ns=idle, peak_gb_s=system_read
        )
        report.extend(cres)
        if not below.all():
            report.assumptions.append(
                f"loaded latency: the {int((~below).sum())} saturated rows (bandwidth within "
                f"{(1 - SATURATED_ROW_SHARE) * 100:.0f} % of the table's top) set core.max_outstanding_misses, not the "
                "curve: their latency is the controllers' queue (Little's law), which the engine's FIFO controllers give"
            )
        for j in ctrl_lat:
            curves[j] = curve.model_copy(update={"added_latency_ns": [a for a in curve.added_latency_ns]})
            assumed[f"controllers[{j}].curve"] = "assumption: the system curve fitted on loaded_latency, for every controller"
        report.parameters += [
            FittedParameter(f"controllers[{j}].curve", float(curves[j].added_ns(1.0)), "ns")  # type: ignore[attr-defined]
            for j in ctrl_lat
        ]
        # Little's law at saturation: lines in flight = bandwidth x latency / line size, shared by every cpu.
        if not below.all():
            ll_replay = (table, mlc.prefetchers_controlled is False)
        in_flight = float(np.max(table.bandwidth_mb_s * 1e6 * table.latency_ns * 1e-9 / LINE_BYTES))
        ncpu = max(len(machine.cpus), 1)
        tpc = core.threads_per_core
        if core.outstanding_misses_per_core is not None and tpc is not None and ncpu % tpc == 0:
            # The priors say the misses are a per-core queue shared by hardware threads: fit that queue.
            ncores = ncpu // tpc
            per_core = max(1, int(round(in_flight / ncores)))
            core = core.model_copy(update={"outstanding_misses_per_core": per_core})
            report.parameters.append(FittedParameter(
                "core.outstanding_misses_per_core", float(per_core), "lines", note=DERIVED + "Little's law at saturation"
            ))
            report.assumptions.append(
                f"core.outstanding_misses_per_core = misses in flight at mlc's saturated point ({in_flight:.0f} "
                f"lines, Little's law) / {ncores} cores ({ncpu} cpus / {tpc} threads per core, from the priors; mlc "
                "loads every hardware thread)"
            )
        else:
            # Where mlc could not turn the prefetchers off, each load thread's stream is prefetched too: what it
            # has in flight is its misses and the prefetch depth (numasim.engine.cores.thread_prefetch_lines,
            # without a per-core queue), so the misses are the rest (EPYC 9354P: 42.5 lines a thread, 24 + 16 in
            # the priors; fitted as 43 misses its replayed plateau was 25 % slow).
            ahead = core.prefetch_distance_lines if mlc.prefetchers_controlled is False else 0
            mlp = max(1, int(round(in_flight / ncpu - ahead)))
            core = core.model_copy(update={"max_outstanding_misses": mlp})
            report.parameters.append(
                FittedParameter("core.max_outstanding_misses", float(mlp), "lines", note=DERIVED + "Little's law at saturation")
            )
            report.assumptions.append(
                f"core.max_outstanding_misses = misses in flight at mlc's saturated point ({in_flight:.0f} lines, "
                f"Little's law) / {ncpu} cpus (mlc loads every hardware thread)"
                + (f", less the {ahead} lines each thread's stream is prefetched ahead (mlc could not turn the "
                   "prefetchers off)" if ahead else "")
            )
        mark(k, "loaded_latency")
    # ---- the core clock (mlc's delays and "core clocks" count cycles of it)
    clocks = [(k, m.data.core_clock_ghz) for k, m in enumerate(measurements)
              if isinstance(m.data, MlcResult) and m.data.core_clock_ghz is not None]
    if clocks:
        k, ghz = clocks[0]
        ghz = round(float(ghz), 4)
        core = core.model_copy(update={"core_clock_ghz": ghz})
        report.parameters.append(
            FittedParameter("core.core_clock_ghz", ghz, "GHz", note=DERIVED + "mlc's core clocks / ns")
        )
        report.assumptions.append(
            f"core.core_clock_ghz = {ghz:.3f}: mlc --idle_latency's core clocks / ns (the clock its cores ran at)"
        )
        if "idle_latency" not in sections[k]:
            sections[k].append("idle_latency")  # a source of the calibration, not a fitted table
    elif "loaded_latency" in wanted and loaded and (fit := _clock_from_loaded_latency(machine, core, loaded[0][1])):
        # mlc's delay loop counts core cycles: its lightly loaded rows say how fast the cores ran
        prior_ghz = core.core_clock_ghz
        ghz = round(fit.ghz, 4)
        core = core.model_copy(update={"core_clock_ghz": ghz})
        report.parameters.append(FittedParameter(
            "core.core_clock_ghz", ghz, "GHz",
            note=DERIVED + "the loaded-latency table's lightly loaded rows (mlc's delay loop counts core cycles)",
        ))
        report.assumptions.append(
            f"core.core_clock_ghz = {ghz:.3f}: the clock at which the virtual mlc's load threads move what the "
            f"loaded-latency table's {fit.rows} lightly loaded rows moved (delays >= {FIT_MIN_DELAY} cycles, latency "
            f"within {FIT_MAX_LATENCY_RATIO:g}x of the least; each row alone: {fit.row_min_ghz:.3f}-"
            f"{fit.row_max_ghz:.3f} GHz), with the pace model's {LOAD_LINES_PER_DELAY:g} lines a delay and "
            f"{LOAD_LOOP_CYCLES_PER_LINE:g} loop cycles a line (numasim.tools.mlc_load), paced by "
            + _pace_sharing_words(machine, core)
            + (f"; the priors' clock was {prior_ghz:.3f} GHz" if prior_ghz is not None else "")
        )
        why = []
        if prior_ghz is not None and abs(ghz / prior_ghz - 1.0) > CLOCK_PRIOR_GAP:
            why.append(f"{100 * (ghz / prior_ghz - 1):+.0f} % from the priors' {prior_ghz:.3f} GHz")
        if fit.spread > CLOCK_ROW_SPREAD:
            why.append(f"its rows alone give {fit.row_min_ghz:.3f}-{fit.row_max_ghz:.3f} GHz")
        if why:
            report.warnings.append(
                f"core.core_clock_ghz = {ghz:.3f} from the loaded-latency table: {'; '.join(why)}. This mlc's load "
                f"loop may cost other than the pace model's {LOAD_LOOP_CYCLES_PER_LINE:g} cycles a line (mlc before "
                "3.5 loops more slowly), so it is the clock that replays the table, not surely the one the cores ran at"
            )
    else:
        report.assumptions.append(
            "core.core_clock_ghz: unconstrained (no mlc --idle_latency line gives core clocks and ns, no "
            "loaded-latency table fitted); "
            + (f"kept at the priors' {core.core_clock_ghz:.3f} GHz" if core.core_clock_ghz is not None else
               "left unset, so a virtual tool that counts core cycles (mlc's injection delay) assumes a clock and "
               "says so")
        )
    # ---- one core's streaming read (probe): the initiator-side limit, not the controller's
    if "bandwidth_matrix" in wanted and probes:
        k, pr = probes[0]
        lat_m, bw_m = pr.latency_matrix, pr.bandwidth_matrix
        pairs = [
            (bw_m.cell(i, i) / 1000.0, lat_m.cell(i, i))
            for i in pr.nodes
            if np.isfinite(bw_m.cell(i, i)) and np.isfinite(lat_m.cell(i, i))
        ]
        if pairs:
            # Little's law for a prefetched stream (the engine's rule): bw = (M + d) * 64 B / latency.
            in_flight = float(np.mean([bw * lat / LINE_BYTES for bw, lat in pairs]))
            distance = max(0, int(round(in_flight - core.max_outstanding_misses)))
            core = core.model_copy(update={"prefetch_distance_lines": distance})
            report.parameters.append(
                FittedParameter(
                    "core.prefetch_distance_lines", float(distance), "lines", note=DERIVED + "Little's law, one core's stream"
                )
            )
            report.assumptions.append(
                f"probe bandwidth is one core's streaming read (core-bound, not the controller's): "
                f"{in_flight:.1f} lines in flight = {core.max_outstanding_misses} misses + a prefetch distance of "
                f"{distance} lines; controller bandwidths keep the machine file's values"
            )
            mark(k, "core_stream")
    # ---- caches
    caches = list(priors.caches)
    if "caches" in wanted and lmbench:
        k, lmb = lmbench[0]
        curve_l = lmb.curve()
        fitted, mem_ns, cres = fit_cache_levels(curve_l.size_bytes, curve_l.latency_ns, names=[c.name for c in caches] or None)
        report.extend(cres)
        if caches and len(fitted) == len(caches):
            caches = [c.model_copy(update={"size_bytes": f.size_bytes, "latency_ns": f.latency_ns, "scope": c.scope}) for c, f in zip(caches, fitted, strict=True)]
        else:
            if caches:
                report.warnings.append(
                    f"lat_mem_rd shows {len(fitted)} cache levels, the priors {len(caches)}; using the fitted levels"
                )
            caches = fitted
        mark(k, "lat_mem_rd")
    # ---- devices
    devices = list(priors.devices)
    if "device" in wanted and perftests:
        devices, link_bw = _fit_devices(machine, perftests, devices, link_bw, report, mark)
    # ---- assemble
    controllers = []
    uncertainty = {p.name: p.stderr for p in report.parameters if math.isfinite(p.stderr)}
    for n in machine.nodes:
        if not n.has_memory:
            continue
        c = curves.get(n.id)
        controllers.append(
            ControllerTiming(
                node=n.id,
                latency_ns=ctrl_lat[n.id],
                read_bandwidth_gb_s=ctrl_rd[n.id],
                write_bandwidth_gb_s=ctrl_wr[n.id],
                curve=c if c is not None else _prior_curve(priors, n.id, ctrl_lat[n.id]),  # type: ignore[arg-type]
            )
        )
    if "loaded_latency" not in used:
        report.assumptions.append(
            "no loaded-latency table fitted: controllers keep the priors' curve shape, scaled to the fitted idle latency"
        )
    links = [LinkTiming(src=s, dst=d, latency_ns=link_lat[(s, d)], bandwidth_gb_s=link_bw[(s, d)]) for (s, d) in link_lat]
    quality: dict[str, float] = {}
    for t in report.tables():
        quality[f"{t}_mape_pct"] = round(report.mape_pct(t), 4)
        w = report.worst(t)
        if w is not None:
            quality[f"{t}_worst_pct"] = round(abs(w.error_pct), 4)
    text = "; ".join(
        [notes] if notes else []
    )
    prov = Provenance(
        method="fit",
        machine=machine.name,
        sources=[_source_file(m, sections[k]) for k, m in enumerate(measurements) if sections[k]],
        fit_quality=quality,
        notes="\n".join(
            ([text] if text else [])
            + [f"fitted on: {', '.join(used) or 'nothing'}"]
            + [f"assumption: {a}" for a in dict.fromkeys(report.assumptions)]
            + [f"warning: {w}" for w in dict.fromkeys(report.warnings)]
        ),
        **({"created": created} if created else {}),
    )
    coherence = priors.coherence
    if "c2c" in wanted and c2c_runs:
        k, run = c2c_runs[-1]
        coherence = _coherence_from_mlc(run, measurements[k].path, machine, priors)
        if coherence is not None:
            mark(k, "c2c_latency")
    cal = Calibration(
        machine=machine.name,
        coherence=coherence,
        controllers=controllers,
        links=links,
        caches=caches,
        devices=devices,
        relays=[RelayTiming(node=n, latency_ns=v) for n, v in sorted(relay_lat.items())],
        core=core,
        core_dies=core_dies,
        uncertainty={k: round(v, 6) for k, v in uncertainty.items()},
        provenance=prov,
    )
    if not used:
        raise CalibrationError(
            f"nothing to fit: the measurements provide none of the tables asked for ({', '.join(wanted)})"
        )
    if replay_peak is not None or replay_cells:
        cal = _replay_consistent(nominal_machine, cal, priors, replay_peak, replay_cells, set(curves),
                                 replay_mixes, report, seed)
    if ll_replay is not None:
        cal = _replay_consistent_misses(nominal_machine, cal, *ll_replay, report, seed)
    cal = cal.model_copy(update={"id": cal.content_id()})  # the replays changed parameters after it was made
    kept = unconstrained_priors(nominal_machine, cal, measurements, used, priors, report, assumed)
    cal = cal.model_copy(update={"provenance": cal.provenance.model_copy(update={"priors": kept})})
    return CalibrationReport(calibration=cal, result=report, tables_used=used)


def _latency_from_idle_end(
    machine: Machine, table: LoadedLatencyTable, ctrl_lat: dict[int, float], report: FitResult
) -> None:
    """No latency table fitted: the loaded-latency table's least loaded row is mlc's latency thread chasing its
    own node's memory all but idle (delay 20000: 1-3 GB/s in all), so it sets that node's local latency, and
    every node with cpus moves by as much (the priors' differences between nodes, and their routes, kept).

    On the runs that have both, that row is the latency matrix's local figure within 4 % (the 8180's 81.4
    against 81.3-81.4, the 8269CY's 78.9 against 77.9-78.4, the 9354P's 105.7 and 113.3 against 104.6-106.5 and
    113.0, the 4114's 92.6 against 91.2-96.1)."""
    row = int(np.argmin(table.bandwidth_mb_s))
    measured = float(table.latency_ns[row])
    first = machine.cpus[0]
    home = machine.cpu_to_node[first]
    if home not in ctrl_lat:  # mlc's latency thread reads the nearest memory when its node has none
        return
    shift = measured - ctrl_lat[home]
    if abs(shift) < 1e-9:
        return
    moved = [j for j in ctrl_lat if machine.node(j).has_cpus]
    for j in moved:
        ctrl_lat[j] += shift
        report.parameters.append(FittedParameter(
            f"controllers[{j}].latency_ns", ctrl_lat[j], "ns",
            note=f"{DERIVED}the loaded-latency table's least loaded row ({measured:.1f} ns) for node {home}, "
                 f"every node with cpus moved by {shift:+.1f} ns",
        ))  # fmt: skip
    report.assumptions.append(
        f"no latency table fitted: the loaded-latency table's least loaded row (delay {int(table.inject_delay[row])}, "
        f"{measured:.1f} ns) is node {home}'s local idle latency (mlc's latency thread on cpu {first}); the "
        f"controllers of the {len(moved)} nodes with cpus moved by {shift:+.1f} ns from the priors"
    )


def _local_cells(matrices: list[NodeMatrix]) -> dict[int, float]:
    """Each node's local bandwidth-matrix cell (MB/s; the mean over matrices that have it)."""
    cells: dict[int, list[float]] = defaultdict(list)
    for mat in matrices:
        for j in mat.rows:
            if j in mat.cols and np.isfinite(v := mat.cell(j, j)):
                cells[j].append(float(v))
    return {j: float(np.mean(v)) for j, v in cells.items()}


def _replay_consistent(
    machine: Machine,
    cal: Calibration,
    priors: Calibration,
    peak: tuple[float, list[int]] | None,
    cells: dict[int, float],
    curve_nodes: set[int],
    mixes: bool,
    report: FitResult,
    seed: int,
) -> Calibration:
    """``cal`` with the controllers the engine needs to replay the bandwidth figure that set them
    (:mod:`numasim.calibrate.replay_fit`); the report says what changed. The provenance's notes were written
    before: they gain its assumption and warnings here."""
    from numasim.calibrate.replay import engine_available
    from numasim.calibrate.replay_fit import replay_consistent_bandwidth
    from numasim.tools.mlc import MlcUsageError

    if not engine_available():
        report.warnings.append("controllers' bandwidth not checked by replay: the engine is not available")
        return cal
    try:
        out, scale = replay_consistent_bandwidth(
            machine, cal, prior_read_gb_s={c.node: c.read_bandwidth_gb_s for c in priors.controllers},
            peak_all_reads_mb_s=peak[0] if peak else None, peak_nodes=peak[1] if peak else None,
            local_cells_mb_s=None if peak else cells, curve_nodes=curve_nodes, writes_follow=not mixes, seed=seed,
        )  # fmt: skip
    except (NumasimError, MlcUsageError) as exc:  # the closed form stands; say why it was not checked
        why = f"controllers' bandwidth not checked by replay: the virtual mlc cannot run it ({exc})"
        report.warnings.append(why)
        return _noted(cal, [], [why])
    report.assumptions += scale.assumptions
    report.warnings += scale.warnings
    for j, s in sorted(scale.factor.items()):
        c = out.controller(j)
        name = f"controllers[{j}].read_bandwidth_gb_s"
        report.parameters = [p for p in report.parameters if p.name != name]
        report.parameters.append(FittedParameter(
            name, c.read_bandwidth_gb_s, "GB/s",
            note=f"{DERIVED}the closed form's x{s:.3f}, so that the engine replays the measured figure",
        ))  # fmt: skip
    return _noted(out, scale.assumptions, scale.warnings)


def _noted(cal: Calibration, assumptions: list[str], warnings: list[str]) -> Calibration:
    """``cal`` whose provenance notes (written before the replays) also carry these assumptions and warnings."""
    if not (assumptions or warnings):
        return cal
    notes = cal.provenance.notes + "".join(
        [f"\nassumption: {a}" for a in assumptions] + [f"\nwarning: {w}" for w in warnings]
    )
    return cal.model_copy(update={"provenance": cal.provenance.model_copy(update={"notes": notes})})


def _replay_consistent_misses(
    machine: Machine, cal: Calibration, table: LoadedLatencyTable, prefetchers_on: bool, report: FitResult, seed: int
) -> Calibration:
    """``cal`` with the core's misses in flight the engine needs to replay the loaded-latency table's saturated
    lines in flight (:func:`numasim.calibrate.replay_fit.replay_consistent_misses`); the report and the
    provenance's notes say what changed."""
    from numasim.calibrate.replay import engine_available
    from numasim.calibrate.replay_fit import replay_consistent_misses
    from numasim.tools.mlc import MlcUsageError

    if not engine_available():
        report.warnings.append("misses in flight not checked by replay: the engine is not available")
        return cal
    try:
        out, notes = replay_consistent_misses(machine, cal, table, prefetchers_on=prefetchers_on, seed=seed)
    except (NumasimError, MlcUsageError) as exc:
        why = f"misses in flight not checked by replay: the virtual mlc cannot run it ({exc})"
        report.warnings.append(why)
        return _noted(cal, [], [why])
    report.assumptions += notes
    for field_name in ("outstanding_misses_per_core", "max_outstanding_misses"):
        value = getattr(out.core, field_name)
        if value is None or value == getattr(cal.core, field_name):
            continue
        name = f"core.{field_name}"
        report.parameters = [p for p in report.parameters if p.name != name]
        report.parameters.append(
            FittedParameter(name, float(value), "lines", note=DERIVED + "replayed Little's law at saturation")
        )
    return _noted(out, notes, [])


MEMORY_BUFFER_CACHES = 4.0
"""An ``mlc --idle_latency`` buffer measures memory only when it is this many times the largest cache instance
(a random chase over twice an L3 still hits it half of the time); below, it measures the caches."""


def _memory_idle_latencies(machine: Machine, run: MlcResult, path: Path, assumptions: list[str]) -> list[float]:
    """The ``--idle_latency`` figures of ``run`` that measured memory: those whose buffer is at least
    :data:`MEMORY_BUFFER_CACHES` x the machine's largest cache (or printed none: mlc's default buffer is 200 MB);
    the others (``-b30``: a cache's latency) are left out and said so in ``assumptions``."""
    largest_mib = max((c.size_bytes for c in machine.caches), default=0) / 2**20
    out = []
    for ns, buffer_mib in zip(run.idle_latency_ns, run.idle_latency_buffer_mib or [float("nan")] * len(
            run.idle_latency_ns), strict=True):
        if np.isfinite(buffer_mib) and buffer_mib < MEMORY_BUFFER_CACHES * largest_mib:
            assumptions.append(f"{path.name}: mlc --idle_latency {ns:g} ns over a {buffer_mib:g} MiB buffer left out: "
                               f"under {MEMORY_BUFFER_CACHES:g} x the largest cache ({largest_mib:g} MiB), it timed "
                               "the caches, not memory")
            continue
        out.append(ns)
    return out


def _coherence_from_mlc(
    run: MlcResult, path: object, machine: Machine | None = None, priors: Calibration | None = None
) -> CoherenceTiming | None:
    """The cache-to-cache transfer latencies of an mlc ``--c2c_latency`` run, as measured (a read of a line another
    core wrote: the HITM rows; a remote table's figure is the mean of its cells between nodes of different
    sockets: two clusters of one socket, SNC or NPS, transfer at the socket's own cost, as validation replays
    them). Where a socket has several last-level instances (an EPYC's core complexes, by ``priors``' caches),
    the cells between two of its nodes are transfers between complexes, the line homed on the socket either way:
    their mean is the socket figure. None without a local HITM figure."""
    local = next((v for k, v in run.c2c_local_ns.items() if "HITM" in k), None)
    if local is None:
        return None
    socket = {n.id: n.socket for n in machine.nodes} if machine is not None else {}

    def across(a: int, b: int) -> bool:
        sa, sb = socket.get(a), socket.get(b)
        return a != b and (sa is None or sb is None or sa != sb)

    def remote(homed: str) -> float | None:
        for key, table in run.c2c_remote_ns.items():
            if "HITM" in key and f"({homed} homed)" in key:
                # cells between sockets (mlc prints the diagonal as "-": nan); an old mlc's table is by socket
                by_socket = table.row_axis == "socket"
                cells = [x for r, c, x in table.cells() if (r != c if by_socket else across(r, c))
                         and np.isfinite(x) and x > 0]
                if cells:
                    return float(np.mean(cells))
        return None

    domains: dict[int, tuple[object, ...]] = {}
    if machine is not None and priors is not None and priors.caches:
        from numasim.engine.caches import coherence_domains

        cpus = sorted(machine.cpu_to_node)
        domains = dict(zip(cpus, coherence_domains(machine, priors, cpus), strict=True))

    def between_complexes() -> float | None:
        if machine is None or not domains:
            return None
        cpus = {n.id: sorted(n.cpus) for n in machine.nodes if n.cpus}
        cells = []
        for key, table in run.c2c_remote_ns.items():
            if "HITM" not in key or table.row_axis != "node":
                continue
            for r, c, x in table.cells():
                if r == c or across(r, c) or r not in cpus or c not in cpus or not (np.isfinite(x) and x > 0):
                    continue
                # mlc's pair: the writer node's first cpu, the reader node's second
                if domains[cpus[r][0]] != domains[cpus[c][min(1, len(cpus[c]) - 1)]]:
                    cells.append(x)
        return float(np.mean(cells)) if cells else None

    def local_pair_spans_complexes() -> bool:
        from numasim.tools.mlc import c2c_local_pair

        pair = c2c_local_pair(machine) if machine is not None and domains else None
        return pair is not None and domains[pair[0]] != domains[pair[1]]

    writer, reader, either = remote("writer"), remote("reader"), remote("any")
    socket_ns = between_complexes()
    source = f"mlc --c2c_latency in {Path(str(path)).name} (measured, not fitted)"
    if local_pair_spans_complexes():
        # its local figure is a transfer between complexes; within one, the priors' figure (said so)
        socket_ns = socket_ns or local
        if priors is not None and priors.coherence is not None:
            local = priors.coherence.local_hitm_ns
            source += f"; within a core complex the priors' {local:g} ns (mlc's local pair lies in two complexes)"
        else:
            source += "; mlc's local pair lies in two core complexes and the priors have no figure within one: its"
            source += " figure stands in for both"
    return CoherenceTiming(
        local_hitm_ns=local,
        socket_hitm_ns=socket_ns,
        remote_hitm_ns=writer or either or reader,
        remote_hitm_home_reader_ns=reader or either or writer,
        source=source,
    )


DERIVED = "derived: "
"""Note prefix of a parameter a fitter computes from a table by a stated rule (Little's law) that validation's
model does not replay, so the Jacobian cannot see the table constrain it."""


def _prior_curve(priors: Calibration, node: int, latency_ns: float) -> LoadedLatencyCurve:
    """The priors' curve of ``node`` scaled to the fitted idle latency (curves are relative to idle latency)."""
    c = next((x for x in priors.controllers if x.node == node), None)
    if c is None or c.curve is None or c.curve == default_curve(c.latency_ns):
        # the default shape is built from the idle latency itself: rebuild it (bit-identical, ids stay stable)
        return default_curve(latency_ns)
    return scaled_curve(c.curve, latency_ns / c.latency_ns)


def _tables_phrase(tables: list[str]) -> str:
    names = [t.replace("_", " ") for t in tables]
    if not names:
        return "any table given"
    return "the " + (" and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]) + (
        " table" if len(names) == 1 else " tables"
    )


def unconstrained_priors(
    machine: Machine,
    cal: Calibration,
    measurements: list[Measurement],
    used: list[str],
    priors: Calibration,
    report: FitResult,
    assumed: dict[str, str] | None = None,
) -> list[PriorParameter]:
    """The parameters of ``cal`` that the ``used`` tables do not constrain, with value, source and why.

    Constrained means a fitter set it from the tables (it is among ``report.parameters``) *and* the Jacobian of
    the used tables moves it with no other parameter able to make up for it
    (:func:`numasim.calibrate.identify.identifiability`); or a fitter derived it by a stated rule
    (:data:`DERIVED`) that validation's model does not replay. Tied parameters (the fit's named assumptions)
    count as fitted. The source of a listed parameter is the priors' when its value is the prior's, else the
    assumption that set it.
    """
    from numasim.calibrate.identify import identifiability
    from numasim.calibrate.validate import VALIDATION_TABLES

    tables = [t for t in used if t in VALIDATION_TABLES]
    fitted = {p.name: p for p in report.parameters}
    ident = identifiability(machine, cal, measurements, tables, set(fitted))
    prior_values = timing_parameters(priors)
    phrase = _tables_phrase([t for t in used if t in VALIDATION_TABLES or t == "core_stream"])
    out = []
    for key, (value, unit) in timing_parameters(cal).items():
        p = fitted.get(key)
        if p is not None and ident.constrained(key):
            continue
        if p is not None and (p.note.startswith(DERIVED) or (key in ident.confounded and p.note.startswith("tied"))):
            continue
        moved = ident.tables_by_parameter.get(key, [])
        if moved and p is None:
            why = f"moves the {', '.join(moved)} cells, but no fitter estimates it from them"
        elif moved:
            why = (
                f"moves the {', '.join(moved)} cells but trades off against other parameters there (null space of "
                "the Jacobian)"
            )
        else:
            why = f"not constrained by {phrase}"
        prior = prior_values.get(key)
        if prior is not None and math.isclose(prior[0], value, rel_tol=1e-9):
            source = prior_source(priors, key)
        elif p is not None and moved:
            source = "fitted, but only jointly with other parameters: a stated assumption of the fit splits them"
        elif assumed and key in assumed:
            source = assumed[key]
        elif p is not None and p.note:
            source = f"assumption: {p.note}"
        elif prior is not None and key.endswith(".curve"):
            source = f"{prior_source(priors, key)}, at the fitted idle latency"
        elif prior is not None:
            source = f"{prior_source(priors, key)}, rescaled by the fit (prior {prior[0]:.4g} {unit})"
        else:
            source = "set by the fit's assumptions (see notes)"
        out.append(PriorParameter(parameter=key, value=float(value), unit=unit, source=source, why=why))
    return out


def _fit_devices(machine, perftests, devices, link_bw, report, mark):  # type: ignore[no-untyped-def]
    """Attach bandwidth from the device's local-memory bandwidth test; a remote test below it gives the device's
    own DMA path to that node (:attr:`DeviceTiming.dma_read_bandwidth_gb_s`), never a link cpu reads share."""
    r = routing(machine)
    by_name = {d.name: d for d in devices}
    dev_nodes = {d.name: d.node for d in machine.devices}
    if not devices:
        report.warnings.append("perftest tables given but the machine has no device; ignored")
        return devices, link_bw
    name = devices[0].name
    node = dev_nodes[name]
    if len(devices) > 1:
        report.assumptions.append(f"perftest tables attributed to the machine's first device {name!r}")
    for k, pt in perftests:
        for t in pt.tables:
            if t.kind != "bw":
                continue
            avg = t.column("BW_average")
            gb_s = float(np.max(avg)) / 8.0 if "Gb" in " ".join(t.columns) else float(np.max(avg)) / 1000.0
            if t.mem_node is None or t.mem_node == node:
                by_name[name] = by_name[name].model_copy(update={"attach_bandwidth_gb_s": gb_s})
                report.parameters.append(FittedParameter(f"devices[{name}].attach_bandwidth_gb_s", gb_s, "GB/s"))
                report.assumptions.append(
                    f"{t.test} with no --membind: buffers on the device's node {node} (the test ran there)"
                )
            else:
                if not r.edges(t.mem_node, node):
                    continue
                dev = by_name[name]
                by_name[name] = dev.model_copy(
                    update={"dma_read_bandwidth_gb_s": {**dev.dma_read_bandwidth_gb_s, int(t.mem_node): gb_s}}
                )
                report.parameters.append(
                    FittedParameter(f"devices[{name}].dma_read_bandwidth_gb_s[{t.mem_node}]", gb_s, "GB/s")
                )
                report.assumptions.append(
                    f"{t.test} --membind={t.mem_node}: DMA bound on the device's own path to node {t.mem_node}'s "
                    f"memory (root port, IIO, its requests' die crossing), which cpu traffic does not take; the "
                    f"links of the route {t.mem_node}->{node} keep their values"
                )
            mark(k, "device_bandwidth")
    report.warnings.append(
        f"device {name}: attach latency kept from the machine file ({by_name[name].attach_latency_ns} ns); "
        "perftest latency includes the network round trip and cannot isolate it"
    )
    return [by_name[d.name] for d in devices], link_bw
