"""Fill the local node up to a threshold, then spread the rest over the other nodes by their free memory.

What-if question: *if an allocator kept first-touch locality only while the local node is below, say, 80 %
used, and then spread the overflow over the other nodes in proportion to their free memory, would a job that
outgrows its node do better than the kernel's default (spill along the zonelist to the nearest node, which
then fills up in turn)?*

For one fault batch of ``count`` pages: the local node (the faulting CPU's node, or the nearest memory node
for a memoryless CPU node) takes ``max(0, free - (1 - threshold) * total)`` pages; the rest are split over the
other usable nodes proportionally to their free pages (largest remainders first, ties to the lower node), laid
out round-robin in page order so neighbouring pages do not all land on one node. The allocator still applies
watermarks and falls back along each target's zonelist.

Parameters: ``threshold`` (fraction of the local node that may be used, default 0.8).
"""

from __future__ import annotations

import numpy as np

from numasim.kernel.protocol import PlacementContext, PlacementDecision


class FillLocalThenSpread:
    """Local until ``threshold`` of the local node is used, then proportional to free memory."""

    name = "fill_local_then_spread"

    def __init__(self, threshold: float = 0.8) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within 0..1, got {threshold}")
        self.threshold = float(threshold)

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        usable = ctx.usable_nodes()
        local = ctx.cpu_node if ctx.cpu_node in usable else (usable[0] if usable else ctx.cpu_node)
        free = ctx.free_pages.astype(np.int64)
        room = int(free[local] - (1.0 - self.threshold) * ctx.total_pages[local]) if local in usable else 0
        n_local = min(count, max(0, room))
        others = [n for n in usable if n != local]
        rest = count - n_local
        if rest == 0 or not others:
            return PlacementDecision(preferred=local)
        share = np.array([max(int(free[n]), 0) for n in others], dtype=float)
        if share.sum() <= 0:
            share[:] = 1.0
        exact = share / share.sum() * rest
        counts = np.floor(exact).astype(np.int64)
        remainder = rest - int(counts.sum())
        order = np.lexsort((np.arange(len(others)), -(exact - counts)))
        counts[order[:remainder]] += 1
        # Round-robin layout: page j of node k gets key j / counts[k]; sorting by key interleaves the nodes.
        node_ids = np.repeat(np.array(others, dtype=np.int64), counts)
        keys = np.concatenate([np.arange(c) / c for c in counts if c > 0]) if rest else np.empty(0)
        spread = node_ids[np.argsort(keys, kind="stable")]
        preferred = np.concatenate([np.full(n_local, local, dtype=np.int64), spread])
        return PlacementDecision(preferred=preferred)


def make_policy(threshold: float = 0.8) -> FillLocalThenSpread:
    return FillLocalThenSpread(threshold)
