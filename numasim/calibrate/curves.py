"""Fits of curves: the loaded-latency curve of a controller (mlc ``--loaded_latency``), and cache levels from a
latency-versus-working-set curve (lmbench ``lat_mem_rd``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from numasim.calibrate.result import CellResidual, FitResult, FittedParameter
from numasim.errors import CalibrationError
from numasim.timing.model import CacheTiming, LoadedLatencyCurve
from numasim.topology.model import CacheScope

__all__ = ["fit_loaded_latency_curve", "fit_curve_shape", "fit_cache_levels", "isotonic_increasing"]


def isotonic_increasing(y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Least-squares non-decreasing fit (pool adjacent violators)."""
    y = np.asarray(y, dtype=float)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=float)
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, wt in zip(y, w, strict=True):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return np.concatenate([np.full(int(c), m) for m, _, c in blocks])


def fit_loaded_latency_curve(
    bandwidth_gb_s: np.ndarray,
    latency_ns: np.ndarray,
    *,
    idle_latency_ns: float,
    peak_gb_s: float,
    merge_within: float = 0.01,
    anchor_lowest: bool = True,
) -> tuple[LoadedLatencyCurve, FitResult]:
    """The :class:`LoadedLatencyCurve` through mlc loaded-latency points.

    Utilisation is ``bandwidth / peak``; added latency is ``latency - idle``. Points past saturation (mlc's
    smallest injection delays, where bandwidth stops growing but latency keeps rising) crowd near
    utilisation 1: points closer than ``merge_within`` in utilisation are merged (mean utilisation, largest
    latency, because the curve must show the latency a saturated controller reaches). The added latency is
    then made non-decreasing by isotonic regression and the curve starts at (0, 0).

    With ``anchor_lowest`` (default) the added latency is measured from the table's own lowest-load point,
    not from ``idle_latency_ns``: mlc's loaded-latency run reads a different buffer than its idle-latency
    matrix and its lightest load (~1 % utilisation) already reads a few ns above the idle matrix. That offset
    is not queueing; charging it as load would make every lightly loaded access (a replayed pointer chase)
    slower than the idle matrix the calibration was fitted on. The offset is reported as a warning.

    Examples
    --------
    >>> c, _ = fit_loaded_latency_curve(np.array([2.0, 50.0, 100.0]), np.array([62.0, 80.0, 180.0]),
    ...                                 idle_latency_ns=61.7, peak_gb_s=110.0)
    >>> [round(u, 2) for u in c.utilisation], [round(a, 1) for a in c.added_latency_ns]
    ([0.0, 0.02, 0.45, 0.91], [0.0, 0.0, 18.0, 118.0])
    """
    bw = np.asarray(bandwidth_gb_s, dtype=float)
    lat = np.asarray(latency_ns, dtype=float)
    if bw.size < 2:
        raise CalibrationError("loaded latency: need at least 2 points")
    if peak_gb_s <= 0 or idle_latency_ns <= 0:
        raise CalibrationError(f"loaded latency: peak {peak_gb_s} GB/s and idle {idle_latency_ns} ns must be positive")
    res = FitResult()
    u = bw / peak_gb_s
    base = idle_latency_ns
    if anchor_lowest:
        base = float(lat[int(np.argmin(u))])
        if abs(base - idle_latency_ns) > 0.01 * idle_latency_ns:
            res.warnings.append(
                f"loaded latency: the lightest load reads {base:.1f} ns, the idle latency is {idle_latency_ns:.1f} ns; "
                f"the {base - idle_latency_ns:+.1f} ns offset is treated as a difference between mlc runs, not as load"
            )
    added = np.maximum(lat - base, 0.0)
    order = np.argsort(u, kind="stable")
    u, added = u[order], added[order]
    groups: list[tuple[list[float], list[float]]] = []
    for uu, aa in zip(u, added, strict=True):
        if groups and uu - groups[-1][0][0] < merge_within:
            groups[-1][0].append(uu)
            groups[-1][1].append(aa)
        else:
            groups.append(([uu], [aa]))
    gu = np.array([np.mean(g[0]) for g in groups])
    ga = np.array([max(g[1]) for g in groups])
    ga = isotonic_increasing(ga)
    if gu[0] > 1e-9:
        gu = np.concatenate([[0.0], gu])
        ga = np.concatenate([[0.0], ga])
    # LoadedLatencyCurve needs strictly increasing utilisation.
    keep = np.concatenate([[True], np.diff(gu) > 1e-9])
    curve = LoadedLatencyCurve(utilisation=[float(x) for x in gu[keep]], added_latency_ns=[float(x) for x in ga[keep]])
    model = idle_latency_ns + curve.added_ns(bw / peak_gb_s)
    for b, m_lat, mdl in zip(bw, lat, model, strict=True):
        res.residuals.append(CellResidual("loaded_latency", f"{b:.1f} GB/s", "latency", float(m_lat), float(mdl), "ns"))
    if u.max() > 1.02:
        res.warnings.append(
            f"loaded latency: measured bandwidth reaches {u.max():.2f} x the peak used for utilisation "
            f"({peak_gb_s:.1f} GB/s)"
        )
    res.parameters.append(FittedParameter("curve.points", float(len(curve.utilisation)), "count"))
    res.assumptions.append(
        "loaded latency: utilisation = measured system bandwidth / system peak read bandwidth, applied to every "
        "controller (mlc's load threads read their local memory, so the load is balanced over controllers)"
    )
    return curve, res


def fit_cache_levels(
    size_bytes: Sequence[int] | np.ndarray,
    latency_ns: Sequence[float] | np.ndarray,
    *,
    step_ratio: float = 1.3,
    names: Sequence[str] | None = None,
    table: str = "lat_mem_rd",
) -> tuple[list[CacheTiming], float, FitResult]:
    """Cache levels from a latency-versus-working-set curve: plateaus are levels, steps are their sizes.

    A plateau is a run of working sets whose latency stays within ``step_ratio`` of the run's first point.
    Each plateau but the last is a cache level: its latency is the plateau's median, its size the largest
    working set on the plateau (a lower bound of the capacity). The last plateau is memory; its median is
    returned as the memory latency. Single-point plateaus between two others are transitions, not levels.

    Examples
    --------
    >>> caches, mem, _ = fit_cache_levels([16384, 32768, 262144, 524288, 2**26, 2**27], [1.2, 1.2, 4, 4.1, 90, 92])
    >>> [(c.size_bytes, c.latency_ns) for c in caches], mem
    ([(32768, 1.2), (524288, 4.05)], 91.0)
    """
    s = np.asarray(size_bytes, dtype=float)
    lat = np.asarray(latency_ns, dtype=float)
    if s.size != lat.size or s.size < 2:
        raise CalibrationError(f"{table}: need matching size and latency arrays of at least 2 points")
    order = np.argsort(s)
    s, lat = s[order], lat[order]
    res = FitResult()
    runs: list[list[int]] = [[0]]
    for k in range(1, len(s)):
        if lat[k] > step_ratio * lat[runs[-1][0]]:
            runs.append([k])
        else:
            runs[-1].append(k)
    levels = [run for k, run in enumerate(runs) if len(run) > 1 or k in (0, len(runs) - 1)]
    for run in runs:
        if run not in levels:
            res.warnings.append(
                f"{table}: working set {int(s[run[0]])} B ({lat[run[0]]:.2f} ns) is a single point between "
                "plateaus; taken as a transition, not a cache level"
            )
    memory_ns = float(np.median(lat[levels[-1]]))
    caches: list[CacheTiming] = []
    for k, run in enumerate(levels[:-1]):
        name = names[k] if names is not None and k < len(names) else f"L{k + 1}"
        scope = CacheScope.SOCKET if k == len(levels) - 2 and k > 0 else CacheScope.CORE
        caches.append(
            CacheTiming(name=name, size_bytes=int(s[run[-1]]), latency_ns=float(np.median(lat[run])), scope=scope)
        )
        res.parameters.append(FittedParameter(f"caches[{name}].latency_ns", caches[-1].latency_ns, "ns"))
        res.parameters.append(FittedParameter(f"caches[{name}].size_bytes", float(caches[-1].size_bytes), "B"))
    res.parameters.append(FittedParameter("memory.latency_ns", memory_ns, "ns"))
    # residual: each measured point against its plateau value (transition points against the next plateau)
    level_of = {}
    for k, run in enumerate(levels):
        for idx in run:
            level_of[idx] = k
    plateau = [float(np.median(lat[run])) for run in levels]
    for idx in range(len(s)):
        found = level_of.get(idx)
        k = found if found is not None else next(n for n, run in enumerate(levels) if run[0] > idx)
        res.residuals.append(CellResidual(table, f"{int(s[idx])} B", "latency", float(lat[idx]), plateau[k], "ns"))
    if not caches:
        res.warnings.append(f"{table}: no plateau before memory; no cache level fitted")
    if math.isnan(memory_ns):
        raise CalibrationError(f"{table}: no memory plateau")
    return caches, memory_ns, res


def fit_curve_shape(
    bandwidth_gb_s: np.ndarray, latency_ns: np.ndarray, *, idle_latency_ns: float, peak_gb_s: float
) -> tuple[tuple[float, float, float], FitResult]:
    """Fit ``(a, b, cap)`` of :func:`numasim.timing.model.shaped_curve` to one loaded-latency table.

    The shape is machine-independent once latency is divided by idle latency and bandwidth by peak, so a
    shape fitted on one machine can predict another's table (that is how :data:`DEFAULT_CURVE_SHAPE` was made).
    """
    from scipy.optimize import least_squares

    u = np.minimum(np.asarray(bandwidth_gb_s, dtype=float) / peak_gb_s, 1.0)
    lat = np.asarray(latency_ns, dtype=float)

    def model(p: np.ndarray) -> np.ndarray:
        a, b, cap = p
        return idle_latency_ns * (1.0 + np.minimum(a * u + b * u / np.maximum(1.0 - u, 1e-6), cap))

    sol = least_squares(lambda p: (model(p) - lat) / lat, [0.3, 0.1, 2.0], bounds=([0, 0, 0.1], [10, 10, 20]))
    res = FitResult()
    for name, value in zip(("a", "b", "cap"), sol.x, strict=True):
        res.parameters.append(FittedParameter(f"curve_shape.{name}", float(value), "1"))
    for b, m, p in zip(bandwidth_gb_s, lat, model(sol.x), strict=True):
        res.residuals.append(CellResidual("loaded_latency", f"{b:.1f} GB/s", "latency", float(m), float(p), "ns"))
    a, b, cap = (float(v) for v in sol.x)
    return (a, b, cap), res
