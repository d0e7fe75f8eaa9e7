"""Figures of a :class:`SimulationResult`: access heatmap, utilisation over time, latency histograms.

Each function returns a matplotlib ``Figure`` (the Agg backend is selected inside, never at import) and
draws nothing on screen; save it with ``fig.savefig(path)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .result import SimulationResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["access_heatmap", "utilisation_over_time", "smooth_utilisation", "latency_histograms", "UTILISATION_WINDOWS"]


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def access_heatmap(result: SimulationResult, what: str = "accesses") -> Figure:
    """Initiator (rows) x target node (columns) of ``what`` (``accesses``, ``bytes`` or ``memory_accesses``)."""
    data = result.access_matrix(what)
    fig = _figure(1.2 + 0.7 * len(result.node_ids), 1.0 + 0.45 * len(result.initiator_names))
    ax = fig.add_subplot()
    im = ax.imshow(data, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(result.node_ids)), [str(n) for n in result.node_ids])
    ax.set_yticks(range(len(result.initiator_names)), result.initiator_names)
    ax.set_xlabel("target node (memory)")
    ax.set_ylabel("initiator")
    peak = data.max() if data.size else 0
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if data[i, j]:
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.3g}",
                    ha="center",
                    va="center",
                    color="black" if data[i, j] > 0.6 * peak else "white",
                    fontsize=8,
                )
    fig.colorbar(im, ax=ax, label=what)
    ax.set_title(f"{what}: initiator x target ({result.mode}, {result.calibration_id})", fontsize=9)
    return fig


UTILISATION_WINDOWS = 120
"""At most this many time windows across a utilisation heatmap: enough to show phases, few enough that each
window averages several buckets (a bucket-by-bucket series of a busy resource oscillates between near 0 and its
peak as requests come in bursts)."""


def smooth_utilisation(
    utilisation: np.ndarray, bucket_ns: float, max_windows: int = UTILISATION_WINDOWS
) -> tuple[np.ndarray, float]:
    """Mean utilisation over consecutive, non-overlapping windows of whole buckets.

    Returns ``(windows, window_ns)``: ``windows[w, r]`` is the mean of resource ``r`` over window ``w``, which
    spans ``window_ns`` (``k`` buckets, ``k`` the least that gives at most ``max_windows`` windows); the last
    window averages the buckets it has.

    Examples
    --------
    >>> u = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.5], [1.0, 0.5], [0.5, 0.0]])
    >>> windows, window_ns = smooth_utilisation(u, 1000.0, max_windows=3)
    >>> windows.tolist(), window_ns
    ([[0.5, 1.0], [0.5, 0.5], [0.5, 0.0]], 2000.0)
    """
    n, r = utilisation.shape
    if n == 0:
        return np.zeros((0, r)), float(bucket_ns)
    k = max(1, -(-n // max(1, max_windows)))  # ceil(n / max_windows) buckets per window
    if r == 0:  # no resource selected: the windows, with nothing in them
        return np.zeros((-(-n // k), 0)), k * float(bucket_ns)
    padded = np.full((-(-n // k) * k, r), np.nan)
    padded[:n] = utilisation
    windows = np.nanmean(padded.reshape(-1, k, r), axis=1)
    return windows, k * float(bucket_ns)


def utilisation_over_time(result: SimulationResult, min_mean: float = 0.01) -> Figure:
    """Utilisation of controllers and links over simulated time, as a heatmap: one row per resource
    (controllers first, then links), one column per time window, the colour its mean utilisation over the
    window (:func:`smooth_utilisation`; the window is stated in the title). Resources used less than
    ``min_mean`` on average are left out (their number is stated under the axis)."""
    util = np.asarray(result.utilisation, dtype=float)
    n = util.shape[0] if util.ndim == 2 else 0
    used = [
        r for r, rec in enumerate(result.resources)
        if rec.utilisation_mean >= min_mean and util.ndim == 2 and r < util.shape[1]
    ]
    used.sort(key=lambda r: (result.resources[r].kind != "controller", r))
    fig = _figure(8, 1.6 + 0.26 * max(len(used), 1))
    ax = fig.add_subplot()
    windows, window_ns = smooth_utilisation(util[:, used] if used else np.zeros((n, 0)), result.utilisation_bucket_ns)
    end_us = n * result.utilisation_bucket_ns / 1000.0
    if used and n:
        peak = float(np.nanmax(windows)) if windows.size else 0.0
        im = ax.imshow(
            windows.T, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0.0, vmax=max(1.0, peak),
            extent=(0.0, end_us, len(used) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(used)), [result.resources[r].name for r in used], fontsize=7)
        n_controllers = sum(1 for r in used if result.resources[r].kind == "controller")
        if 0 < n_controllers < len(used):
            ax.axhline(n_controllers - 0.5, color="white", lw=1.5)  # controllers above, links below
        fig.colorbar(im, ax=ax, label="utilisation (window mean)", pad=0.01)
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no resource used", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("time (us)")
    left_out = len(result.resources) - len(used)
    if left_out:
        ax.set_xlabel(f"time (us)   [{left_out} resources below {min_mean:.0%} mean utilisation not shown]")
    window = f"{window_ns / 1000.0:.3g} us" if window_ns >= 1000.0 else f"{window_ns:g} ns"
    ax.set_title(f"utilisation of controllers and links, mean over {window} windows ({result.mode})", fontsize=9)
    return fig


def latency_histograms(result: SimulationResult) -> Figure:
    """Memory request latency distribution per target node (log-spaced bins; requests that went to memory)."""
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    edges = result.hist_edges_ns
    centres = np.sqrt(edges[:-1] * edges[1:])
    for j, node in enumerate(result.node_ids):
        h = result.latency_hist_by_node[j] if result.latency_hist_by_node.size else np.zeros(0)
        if h.sum():
            ax.step(centres, h / h.sum(), where="mid", label=f"node {node}")
    ax.set_xscale("log")
    ax.set_xlabel("memory request latency (ns)")
    ax.set_ylabel("fraction of accesses")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.set_title(f"memory request latency by memory node ({result.mode})", fontsize=9)
    return fig
