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

__all__ = ["access_heatmap", "utilisation_over_time", "latency_histograms"]


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


def utilisation_over_time(result: SimulationResult, min_mean: float = 0.01) -> Figure:
    """Utilisation of controllers and links over simulated time (resources used less than ``min_mean`` left out)."""
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    n = len(result.utilisation)
    t_us = (np.arange(n) + 0.5) * result.utilisation_bucket_ns / 1000.0
    for r, rec in enumerate(result.resources):
        if rec.utilisation_mean >= min_mean:
            style = "-" if rec.kind == "controller" else "--"
            ax.plot(t_us, result.utilisation[:, r], style, label=rec.name)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("utilisation")
    ax.set_ylim(0, max(1.1, float(result.utilisation.max()) * 1.05 if n else 1.1))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"utilisation per {result.utilisation_bucket_ns:g} ns ({result.mode})", fontsize=9)
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
