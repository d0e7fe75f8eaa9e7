"""Spill to the node nearest by latency, not by the firmware's distance table.

What-if question: on a machine whose SLIT is wrong (Drepper's Opteron reports 20 for every remote node, see
docs/labs/01-slit-vs-hops.md), would pages that do not fit on the local node land closer if the fallback
followed the idle-latency table instead of the kernel's zonelist?

For one fault batch of ``count`` pages: order the usable nodes by idle latency from the faulting cpu's node
(ties to the lower node id), and fill them in that order, each up to its free pages minus ``reserve_pages``.
Pages that fit nowhere prefer the nearest node; the allocator then applies watermarks and the zonelist as usual.

Parameters: ``reserve_pages`` (pages to leave free on each node, default 0).
"""

from __future__ import annotations

import numpy as np

from numasim import latency_table_ns
from numasim.kernel import PlacementContext, PlacementDecision


class NearestByLatency:
    """Fill nodes in order of idle latency from the faulting cpu's node."""

    name = "nearest_by_latency"

    def __init__(self, reserve_pages: int = 0) -> None:
        if reserve_pages < 0:
            raise ValueError(f"reserve_pages must be >= 0, got {reserve_pages}")
        self.reserve_pages = int(reserve_pages)
        self._latency: dict[str, np.ndarray] = {}  # per machine: computed once, not per fault batch

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        machine = ctx.machine
        if machine.name not in self._latency:
            self._latency[machine.name] = latency_table_ns(machine)
        row = self._latency[machine.name][ctx.cpu_node]
        order = sorted(ctx.usable_nodes(), key=lambda n: (row[n], n))
        preferred = np.full(count, order[0], dtype=np.int64)
        start = 0
        for node in order:  # one step per node, not per page
            take = min(max(int(ctx.free_pages[node]) - self.reserve_pages, 0), count - start)
            preferred[start:start + take] = node
            start += take
        return PlacementDecision(preferred=preferred)


def make_policy(reserve_pages: int = 0) -> NearestByLatency:
    return NearestByLatency(reserve_pages)
