"""Fitted numbers the engine needs to replay what was measured: the controllers' bandwidth, the cores' misses.

The closed-form fit (:func:`numasim.calibrate.fit.fit_bandwidth`) takes mlc's all-reads figure, or a bandwidth
matrix's local cell, for the controllers' capacity. That is right where the controllers alone bound it. But
mlc's threads are a closed loop: each keeps no more than its core's misses in flight, so what they move is set by
both what the cores issue (misses in flight x 64 B / latency) and what the controllers serve, and near the knee
both bind. With the measured figure as their capacity, the engine's replay of the very measurement comes out
below it: on a 2x Xeon Silver 4410Y (12 cores a socket) 216 against 286 GB/s, -24 %, and every prediction that
rests on those controllers with it.

So after the closed form, the fit replays the measurement in the engine (the very virtual mlc users run,
:func:`numasim.tools.mlc.peak_mix_mb_s`, :func:`numasim.tools.mlc.bandwidth_cell_mb_s`) and solves for the
factor on the controllers' read bandwidth at which the replay matches (:func:`replay_consistent_bandwidth`; a
write bandwidth set from the read at the priors' ratio follows it, one fitted to mlc's mixes stays). The factor
is at least 1 (the closed form's capacity is the least the measurement implies) and at most what brings the
controllers to the priors' figure (the catalog's channels x transfer rate x efficiency): beyond it the
measurement cannot tell a faster controller from faster cores, and the fit keeps the priors' and says that the
cores bound the figure.

Likewise the misses in flight that Little's law gives at mlc's saturated loaded-latency row are corrected until
the replayed row keeps as many lines in flight (:func:`replay_consistent_misses`): where mlc could not turn the
prefetchers off, a load thread's prefetched lines are in flight too, by an amount the engine's prefetch rule
decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from numasim.calibrate.parsers.mlc import LoadedLatencyTable
from numasim.timing.model import Calibration, ControllerTiming, CoreTiming
from numasim.topology.model import Machine

__all__ = ["ReplayScale", "replay_consistent_bandwidth", "replay_consistent_misses", "REPLAY_TOLERANCE"]

REPLAY_TOLERANCE = 0.005
"""Relative gap between the replay and the measurement below which the closed form's capacity is kept."""


@dataclass
class ReplayScale:
    """What the step did: the factor on each controller's bandwidth, and what it says of it."""

    factor: dict[int, float] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _scaled(
    calibration: Calibration, factor: dict[int, float], curve_nodes: set[int], writes_too: bool = False
) -> Calibration:
    """``calibration`` with each controller of ``factor`` that much faster to read (and to write, with
    ``writes_too``); a fitted loaded-latency curve of ``curve_nodes`` keeps its latency at each bandwidth (its
    utilisation axis shrinks by the same factor)."""
    out: list[ControllerTiming] = []
    for c in calibration.controllers:
        s = factor.get(c.node, 1.0)
        if s == 1.0:
            out.append(c)
            continue
        update: dict[str, object] = {"read_bandwidth_gb_s": c.read_bandwidth_gb_s * s}
        if writes_too:
            update["write_bandwidth_gb_s"] = c.write_bandwidth_gb_s * s
        if c.node in curve_nodes and c.curve is not None:
            update["curve"] = c.curve.model_copy(update={"utilisation": [u / s for u in c.curve.utilisation]})
        out.append(c.model_copy(update=update))
    return calibration.model_copy(update={"controllers": out})


def _solve(
    run: Callable[[float], float], measured: float, upper: float, what: str, scale: ReplayScale
) -> float:
    """The factor in [1, ``upper``] at which ``run(factor)`` (the replayed MB/s) equals ``measured``."""
    seen: dict[float, float] = {}

    def replay(s: float) -> float:  # Brent's method asks again for the ends checked below: run each once
        if s not in seen:
            seen[s] = run(s)
        return seen[s]

    gap = math.log(replay(1.0) / measured)
    if abs(gap) <= REPLAY_TOLERANCE or gap > 0:
        return 1.0
    if upper <= 1.0 + 1e-9:
        scale.warnings.append(
            f"{what}: the engine replays {100 * math.expm1(gap):+.1f} % of the measured {measured / 1000:.1f} GB/s "
            "at the fitted controllers, and the priors give no faster ones: the cores' misses in flight bound it "
            "(check core.outstanding_misses_per_core and the idle latency)"
        )
        return 1.0
    top = math.log(replay(upper) / measured)
    if top < 0:
        scale.warnings.append(
            f"{what}: even at the priors' controller bandwidth (x{upper:.3f}) the engine replays "
            f"{100 * math.expm1(top):+.1f} % of the measured {measured / 1000:.1f} GB/s: the cores' misses in flight "
            "bound it; the controllers keep the priors' figure"
        )
        return upper
    return float(brentq(lambda s: math.log(replay(s) / measured), 1.0, upper, xtol=1e-4, rtol=1e-4))


def replay_consistent_bandwidth(
    machine: Machine,
    calibration: Calibration,
    *,
    prior_read_gb_s: dict[int, float],
    peak_all_reads_mb_s: float | None = None,
    peak_nodes: list[int] | None = None,
    local_cells_mb_s: dict[int, float] | None = None,
    curve_nodes: set[int] | None = None,
    writes_follow: bool = False,
    seed: int = 0,
) -> tuple[Calibration, ReplayScale]:
    """``calibration`` with its controllers' bandwidth scaled so the engine replays the measurement it was fitted on.

    Parameters
    ----------
    prior_read_gb_s : dict
        Each controller's read bandwidth in the priors: the most the factor may bring it to.
    peak_all_reads_mb_s, peak_nodes : float, list of int
        mlc's all-reads peak (system) and the nodes whose controllers it set: one common factor.
    local_cells_mb_s : dict
        Otherwise, each node's local bandwidth-matrix cell that set its controller: a factor each.
    curve_nodes : set of int
        Nodes whose loaded-latency curve was fitted: it keeps its latency at each bandwidth.
    writes_follow : bool
        The write bandwidth was not measured but set from the read bandwidth at the priors' ratio: it follows
        the factor (else it is what mlc's read/write mixes fitted, and stays).

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> cal = resolve_calibration(m)
    >>> _, s = replay_consistent_bandwidth(m, cal, prior_read_gb_s={0: 80.0, 1: 80.0},
    ...                                    peak_all_reads_mb_s=110395.9, peak_nodes=[0, 1])
    >>> s.factor  # the shipped calibration replays its own peak: nothing to change
    {}
    """
    from numasim.tools.context import tool_context
    from numasim.tools.mlc import bandwidth_cell_mb_s, peak_mix_mb_s

    scale = ReplayScale()
    curves = curve_nodes or set()
    fitted = {c.node: c.read_bandwidth_gb_s for c in calibration.controllers}

    def upper(nodes: list[int]) -> float:
        have = sum(fitted[j] for j in nodes)
        return max(1.0, sum(prior_read_gb_s.get(j, 0.0) for j in nodes) / have) if have > 0 else 1.0

    def replayer(nodes: list[int], run: Callable[..., float], *args: object) -> Callable[[float], float]:
        def replay(s: float) -> float:
            cal = _scaled(calibration, dict.fromkeys(nodes, s), curves, writes_follow)
            return run(tool_context(machine, cal, comm="mlc", seed=seed), *args)
        return replay

    if peak_all_reads_mb_s is not None and peak_nodes:
        s = _solve(replayer(peak_nodes, peak_mix_mb_s, "ALL Reads"), peak_all_reads_mb_s, upper(peak_nodes),
                   "peak bandwidth, ALL Reads", scale)
        if s != 1.0:
            scale.factor.update(dict.fromkeys(peak_nodes, s))
    for j, measured in sorted((local_cells_mb_s or {}).items()):
        s = _solve(replayer([j], bandwidth_cell_mb_s, j, j), measured, upper([j]),
                   f"bandwidth_matrix, local cell of node {j}", scale)
        if s != 1.0:
            scale.factor[j] = s
    if scale.factor:
        shown = ", ".join(f"node {j} x{s:.3f}" for j, s in sorted(scale.factor.items()))
        scale.assumptions.append(
            "controllers' bandwidth scaled so that the engine's virtual mlc replays the figure they were fitted on "
            f"({shown}): with the figure itself as capacity, the cores' misses in flight and the controllers' queue "
            "together moved less than measured (numasim.calibrate.replay_fit)"
        )
    return _scaled(calibration, scale.factor, curves, writes_follow), scale


def replay_consistent_misses(
    machine: Machine,
    calibration: Calibration,
    table: LoadedLatencyTable,
    *,
    prefetchers_on: bool,
    seed: int = 0,
    rounds: int = 3,
) -> tuple[Calibration, list[str]]:
    """``calibration`` with the core's misses in flight set so that the engine's virtual mlc replays the lines
    in flight (Little's law: bandwidth x latency / 64 B) of the loaded-latency table's most loaded row.

    The closed form divides those lines among the cpus; what a replayed thread keeps in flight is more than its
    misses where its stream is prefetched too (``prefetchers_on``: mlc could not turn them off), by an amount the
    prefetch rule, the pace and the queue decide together. So the misses (per core where the calibration has a
    per-core queue, per thread otherwise) are corrected by the replay's shortfall, a few rounds, keeping the
    closest. Where no value of the per-core queue moves the replay (one busy thread a core, its own misses
    fewer than the queue), a thread's misses bind, and they are corrected the same way: on a 2x E5-2697 v4 with
    hyper-threading off, mlc kept 14 lines in flight a core where Broadwell's 10 fill buffers would allow 10.
    Returns the calibration and what was done, for the report's assumptions.

    Examples
    --------
    >>> import numpy as np
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> t = LoadedLatencyTable(np.array([0]), np.array([189.18]), np.array([110655.5]))
    >>> shipped = resolve_calibration(m)
    >>> # 8 misses a thread: Little's law at mlc's saturated row (327 lines in flight) over its 40 threads
    >>> closed = shipped.model_copy(update={"core": shipped.core.model_copy(update={"max_outstanding_misses": 8})})
    >>> cal, notes = replay_consistent_misses(m, closed, t, prefetchers_on=False)
    >>> cal.core.max_outstanding_misses  # 9 replay 344 lines, 8 fewer (the shipped calibration's 9)
    9
    """
    from numasim.calibrate.replay import virtual_mlc

    row = int(np.argmax(table.bandwidth_mb_s * table.latency_ns))
    delay = int(table.inject_delay[row])
    target = float(table.bandwidth_mb_s[row] * 1e6 * table.latency_ns[row] * 1e-9 / 64.0)
    argv = ["--loaded_latency"] + (["-e"] if prefetchers_on else [])

    def search(core: CoreTiming, field_name: str, units: int) -> tuple[int, dict[int, float]]:
        """The value of ``field_name`` whose replay comes closest to the target, and every replay tried."""

        def in_flight(value: int) -> float:
            cal = calibration.model_copy(update={"core": core.model_copy(update={field_name: value})})
            r = virtual_mlc(machine, cal, argv, delays=[delay], seed=seed).loaded_latency[0]
            return float(r.bandwidth_mb_s[0] * 1e6 * r.latency_ns[0] * 1e-9 / 64.0)

        value = int(getattr(core, field_name))
        tried: dict[int, float] = {value: in_flight(value)}
        for _ in range(rounds):
            step = int(round((target - tried[value]) / units))
            if step == 0 or max(1, value + step) in tried:
                break
            value = max(1, value + step)
            tried[value] = in_flight(value)
        return min(tried, key=lambda v: (abs(tried[v] - target), v != int(getattr(core, field_name)))), tried

    core = calibration.core
    n_cpus = max(1, len(machine.cpus))
    notes: list[str] = []
    fields = [("max_outstanding_misses", n_cpus)]
    if core.outstanding_misses_per_core is not None:
        # the per-core queue first; where no value of it moves the replay (one busy thread a core below it),
        # a thread's own misses bind: those next
        fields.insert(0, ("outstanding_misses_per_core", max(1, n_cpus // (core.threads_per_core or 1))))
    for field_name, units in fields:
        start = int(getattr(core, field_name))
        best, tried = search(core, field_name, units)
        moved = max(tried.values()) - min(tried.values()) > 0.005 * target
        if best != start:
            core = core.model_copy(update={field_name: best})
            notes.append(
                f"core.{field_name} = {best} (the closed form's {start}): the engine's virtual mlc then keeps "
                f"{tried[best]:.0f} lines in flight at the loaded-latency table's most loaded row (delay {delay}) "
                f"where the table shows {target:.0f}"
                + (", its load threads' streams prefetched as mlc's were" if prefetchers_on else "")
            )
        if moved or len(tried) == 1:
            break
    if not notes:
        return calibration, []
    return calibration.model_copy(update={"core": core}), notes
