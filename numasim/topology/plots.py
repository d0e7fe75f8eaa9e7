"""Figures of a machine: the link graph (:func:`draw_topology`) and its distance table (:func:`slit_heatmap`).

Both return a :class:`matplotlib.figure.Figure` drawn on an Agg canvas created inside the function, so they
work headless, never change the caller's pyplot backend and never open a window; ``fig.savefig("x.png")``
(or ``.svg``) writes them. Positions come from networkx (Kamada-Kawai, which is deterministic, or a spring
layout seeded with ``seed``), so the same machine always gives the same picture.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from numasim.topology.distances import slit, timing_distances
from numasim.topology.model import Link, LinkKind, Machine, MemoryKind, Vertex
from numasim.units import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_topology", "slit_heatmap", "layout"]

_MEMORY_COLOURS = {
    MemoryKind.DRAM: "#9ecae1",
    MemoryKind.HBM: "#a1d99b",
    MemoryKind.CXL: "#fdae6b",
    MemoryKind.PMEM: "#bcbddc",
    MemoryKind.GPU: "#fc9272",
}
_LINK_COLOURS = {
    LinkKind.QPI: "#08519c",
    LinkKind.UPI: "#3182bd",
    LinkKind.HYPERTRANSPORT: "#006d2c",
    LinkKind.INFINITY_FABRIC: "#a63603",
    LinkKind.ON_DIE: "#756bb1",
    LinkKind.CXL: "#e6550d",
    LinkKind.CROSSBAR: "#636363",
    LinkKind.NUMALINK: "#252525",
    LinkKind.NVLINK: "#31a354",
    LinkKind.PCIE: "#de2d26",
    LinkKind.OTHER: "#969696",
}


def _new_figure(width: float, height: float) -> Figure:
    # An explicit Agg canvas: the figure never touches pyplot's global state or the caller's backend.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def layout(machine: Machine, *, kind: str = "kamada-kawai", seed: int = 0) -> dict[Vertex, tuple[float, float]]:
    """Deterministic 2-D positions of every vertex (node ids and switch names), scaled to [-1, 1].

    Parameters
    ----------
    kind : {"kamada-kawai", "spring"}
        Kamada-Kawai needs no randomness; the spring layout uses ``seed``.
    seed : int
        Seed of the spring layout.
    """
    g = nx.Graph()
    g.add_nodes_from(machine.node_ids)
    g.add_nodes_from(s.name for s in machine.switches)
    g.add_edges_from((link.a, link.b) for link in machine.links)
    if g.number_of_nodes() == 1:
        return {next(iter(g.nodes)): (0.0, 0.0)}
    if kind == "kamada-kawai":
        # Start from the spectral embedding, not the default circle in id order: on a hypercube the circle
        # puts 0,1,2,3 round a ring and Kamada-Kawai stalls in a crossed "bow-tie" of the square 0-1-3-2.
        start = nx.spectral_layout(g) if g.number_of_nodes() > 2 else None
        if start is not None:
            pts = np.array(list(start.values()))
            gaps = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1) + np.eye(len(pts))
            if gaps.min() < 1e-6:
                start = None  # symmetric graphs (complete, star) collapse spectrally: use the circle
        raw = nx.kamada_kawai_layout(g, pos=start)
    elif kind == "spring":
        raw = nx.spring_layout(g, seed=seed)
    else:
        raise ValueError(f"kind = {kind!r}: expected 'kamada-kawai' or 'spring'")
    return {v: (float(p[0]), float(p[1])) for v, p in raw.items()}


def _edge_label(link: Link) -> str:
    (_, _, lat, bw), (_, _, back_lat, back_bw) = link.directed()
    lat_text = f"{lat:g} ns" if lat == back_lat else f"{lat:g}/{back_lat:g} ns"
    bw_text = f"{bw:g} GB/s" if bw == back_bw else f"{bw:g}/{back_bw:g} GB/s"
    return f"{lat_text}\n{bw_text}"


_MAX_LABELLED_LINKS = 24


def draw_topology(
    machine: Machine,
    *,
    kind: str = "kamada-kawai",
    seed: int = 0,
    edge_labels: bool | None = None,
    timing_source: str | None = None,
) -> Figure:
    """Draw the link graph: NUMA nodes as circles (colour = memory kind), switches as grey squares.

    Each node is labelled with its id, memory size and cpu count, and the devices attached to it; each link
    with its latency (ns) and bandwidth (GB/s), ``a/b`` when the two directions differ; the line width grows
    with bandwidth and the colour says the link kind (legend). ``edge_labels=None`` labels links only when
    there are at most 24 of them (a fully meshed 24-node machine would be unreadable; the title says so).
    ``timing_source`` says where the link and controller numbers come from (a calibration, or the machine
    file's nominal numbers); it goes under the title.

    Examples
    --------
    >>> from numasim.topology.builders import hypercube
    >>> fig = draw_topology(hypercube(2))
    >>> fig.axes[0].get_title()
    'hypercube-2: 4 nodes, 16 cpus, 64.0 GiB'
    """
    pos = layout(machine, kind=kind, seed=seed)
    count = len(pos)
    side = min(14.0, 5.0 + 1.1 * math.sqrt(count) * 1.6)
    fig = _new_figure(side, side * 0.85)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_aspect("equal")
    ax.set_title(
        f"{machine.name}: {len(machine.nodes)} nodes, {len(machine.cpus)} cpus, {format_size(machine.memory_bytes)}"
    )

    if timing_source:
        ax.set_title(ax.get_title() + f"\ntiming: {timing_source}", fontsize=10)
    label_links = len(machine.links) <= _MAX_LABELLED_LINKS if edge_labels is None else edge_labels
    if not label_links and machine.links:
        ax.set_title(ax.get_title() + f"\n({len(machine.links)} links: labels omitted; see 'numasim topo show')",
                     fontsize=10)
    bandwidths = [max(bw for _, _, _, bw in link.directed()) for link in machine.links]
    top_bw = max(bandwidths, default=1.0)
    kinds_seen: dict[LinkKind, None] = {}
    for link, bw in zip(machine.links, bandwidths, strict=True):
        (xa, ya), (xb, yb) = pos[link.a], pos[link.b]
        colour = _LINK_COLOURS.get(link.kind, "#969696")
        width = 1.0 + 4.0 * math.log1p(bw) / math.log1p(top_bw)
        alpha = 0.8 if label_links else max(0.15, min(0.8, 12.0 / len(machine.links)))
        ax.plot([xa, xb], [ya, yb], color=colour, linewidth=width, alpha=alpha, zorder=1, solid_capstyle="round")
        kinds_seen[link.kind] = None
        if not label_links:
            continue
        ax.text(
            (xa + xb) / 2, (ya + yb) / 2, _edge_label(link), fontsize=7, ha="center", va="center", zorder=3,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": colour, "alpha": 0.9},
        )

    devices: dict[int, list[str]] = {}
    for d in machine.devices:
        devices.setdefault(d.node, []).append(f"{d.name} ({d.kind.value})")
    for n in machine.nodes:
        x, y = pos[n.id]
        ax.scatter([x], [y], s=2600, c=_MEMORY_COLOURS.get(n.memory_kind, "#d9d9d9"), edgecolors="#252525",
                   linewidths=1.2, zorder=4)
        cpus = f"{len(n.cpus)} cpus" if n.cpus else "no cpus"
        memory = format_size(n.memory_bytes) if n.has_memory else "no memory"
        ax.text(x, y, f"node {n.id}\n{memory}\n{cpus}", fontsize=8, ha="center", va="center", zorder=5)
        if n.id in devices:
            ax.text(x, y - 0.17, "\n".join(devices[n.id]), fontsize=7, ha="center", va="top", zorder=5,
                    style="italic", color="#a50f15")
    for s in machine.switches:
        x, y = pos[s.name]
        ax.scatter([x], [y], s=1800, marker="s", c="#d9d9d9", edgecolors="#525252", linewidths=1.2, zorder=4)
        ax.text(x, y, s.name.replace("-", "\n", 1), fontsize=7, ha="center", va="center", zorder=5)

    if kinds_seen:
        from matplotlib.lines import Line2D

        handles = [Line2D([0], [0], color=_LINK_COLOURS.get(k, "#969696"), linewidth=3, label=k.value) for k in kinds_seen]
        ax.legend(handles=handles, loc="lower left", fontsize=8, frameon=False, title="links", title_fontsize=8)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.35, max(xs) + 0.35)
    ax.set_ylim(min(ys) - 0.4, max(ys) + 0.35)
    return fig


def slit_heatmap(machine: Machine, which: str = "firmware") -> Figure:
    """The node distance table as an annotated heatmap.

    Parameters
    ----------
    which : {"firmware", "timing"}
        ``"firmware"``: what the kernel sees (the machine's ``firmware_slit``, or the timing-derived table
        when it has none, which the title then says); ``"timing"``: always derived from links and controllers.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> slit_heatmap(glueless(2), which="timing").axes[0].get_title()
    'glueless-2s-full: SLIT derived from link timing'
    """
    if which == "firmware":
        table = np.array(slit(machine))
        what = "firmware SLIT" if machine.firmware_slit is not None else "SLIT (no firmware table: derived from timing)"
    elif which == "timing":
        table = np.array(timing_distances(machine))
        what = "SLIT derived from link timing"
    else:
        raise ValueError(f"which = {which!r}: expected 'firmware' or 'timing'")
    ids = machine.node_ids
    side = min(12.0, 2.5 + 0.55 * len(ids))
    fig = _new_figure(side + 1.0, side)
    ax = fig.add_subplot()
    image = ax.imshow(table, cmap="YlOrRd", vmin=10, vmax=max(int(table.max()), 11))
    ax.set_xticks(range(len(ids)), [str(i) for i in ids])
    ax.set_yticks(range(len(ids)), [str(i) for i in ids])
    ax.set_xlabel("target node (memory)")
    ax.set_ylabel("initiator node")
    ax.set_title(f"{machine.name}: {what}")
    if len(ids) <= 32:
        threshold = 10 + 0.6 * (table.max() - 10)
        for i in range(len(ids)):
            for j in range(len(ids)):
                value = int(table[i, j])
                ax.text(j, i, str(value), ha="center", va="center", fontsize=9 if len(ids) <= 12 else 6,
                        color="white" if value > threshold else "black")
    fig.colorbar(image, ax=ax, shrink=0.8, label="distance (10 = local)")
    return fig
