"""Bandwidth-weighted interleave: spread pages over nodes in proportion to each node's memory bandwidth.

What-if question: *would interleaving in proportion to each memory controller's bandwidth (say 3 pages on a
DDR5 node for every page on a CXL expander) serve a bandwidth-bound job better than plain round-robin
interleave?* It is what ``MPOL_WEIGHTED_INTERLEAVE`` does once the sysfs weights are set from bandwidth
(Linux 6.16 derives such "auto" weights from HMAT); here the weights come from the machine description.

Each page goes to node ``k`` of the set with ``t = ilx % sum(w)`` falling in node ``k``'s share, exactly like
``weighted_interleave_nid``; weights are the controllers' read bandwidths scaled to small integers (the largest
becomes ``resolution``). Nodes without a controller model count as the slowest one. Pages that do not fit fall
back along the target's zonelist like kernel interleave.

Parameters (``load_policy("bandwidth_interleave", nodes=[0, 2], resolution=8)``): ``nodes`` (default: every
memory node the task may use) and ``resolution`` (largest weight, default 10).
"""

from __future__ import annotations

from collections.abc import Iterable
from math import gcd

import numpy as np

from numasim.kernel.protocol import PlacementContext, PlacementDecision


class BandwidthInterleave:
    """Interleave weighted by controller read bandwidth (see the module docstring)."""

    name = "bandwidth_interleave"

    def __init__(self, nodes: Iterable[int] | None = None, resolution: int = 10) -> None:
        if resolution < 1:
            raise ValueError(f"resolution must be >= 1, got {resolution}")
        self.nodes = None if nodes is None else sorted(set(int(n) for n in nodes))
        self.resolution = int(resolution)

    def weights(self, ctx: PlacementContext) -> tuple[np.ndarray, np.ndarray]:
        """The interleave nodes and their integer weights."""
        usable = ctx.usable_nodes()
        nodes = usable if self.nodes is None else [n for n in self.nodes if n in usable]
        if not nodes:
            nodes = usable
        bw = []
        for n in nodes:
            ctrl = ctx.machine.node(n).controller
            bw.append(ctrl.read_bandwidth_gb_s if ctrl is not None else 0.0)
        bw_arr = np.array(bw, dtype=float)
        known = bw_arr[bw_arr > 0]
        floor = known.min() if known.size else 1.0
        bw_arr[bw_arr <= 0] = floor
        w = np.maximum(1, np.rint(bw_arr / bw_arr.max() * self.resolution)).astype(np.int64)
        g = 0
        for x in w.tolist():
            g = gcd(g, x)
        return np.array(nodes, dtype=np.int64), w // max(g, 1)

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        nodes, w = self.weights(ctx)
        cum = np.cumsum(w)
        t = ctx.ilx % int(cum[-1])
        return PlacementDecision(preferred=nodes[np.searchsorted(cum, t, side="right")], interleave=True)


def make_policy(nodes: Iterable[int] | None = None, resolution: int = 10) -> BandwidthInterleave:
    return BandwidthInterleave(nodes, resolution)
