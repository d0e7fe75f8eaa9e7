"""Hot pages on DRAM, cold pages on a CXL memory expander, decided by a per-page hotness score.

What-if question: *if we knew which pages are hot (from a profile or a trace), how much DRAM could a job give
up to a CXL expander before its performance drops: what happens when the hottest X % stay in DRAM and the rest
live on CXL?* Compare with the kernel's reactive answer (NUMA balancing in memory-tiering mode, which promotes
pages only after hinting faults).

Pass the score with ``kernel.touch(task, addr, length, hints={"hotness": scores})`` (one value per page of
the range). Pages with ``hotness >= hot_threshold`` go to the DRAM node nearest (by SLIT distance) to the
faulting CPU, the others to the nearest CXL node; without a score every page counts as hot (plain local
placement). DRAM nodes are those whose ``memory_kind`` is DRAM or HBM, CXL nodes those of kind CXL (or
``dram_nodes`` / ``cxl_nodes`` given explicitly). The allocator falls back along the target's zonelist when
a tier is full.

Parameters: ``hot_threshold`` (default 0.5), ``dram_nodes``, ``cxl_nodes``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from numasim.kernel.protocol import PlacementContext, PlacementDecision
from numasim.topology.model import MemoryKind


class CxlTiering:
    """Static hot/cold tiering from a hotness score (see the module docstring)."""

    name = "cxl_tiering"

    def __init__(
        self,
        hot_threshold: float = 0.5,
        dram_nodes: Iterable[int] | None = None,
        cxl_nodes: Iterable[int] | None = None,
    ) -> None:
        self.hot_threshold = float(hot_threshold)
        self.dram_nodes = None if dram_nodes is None else sorted(set(int(n) for n in dram_nodes))
        self.cxl_nodes = None if cxl_nodes is None else sorted(set(int(n) for n in cxl_nodes))
        self._slit: dict[int, list[list[int]]] = {}

    def _nearest(self, ctx: PlacementContext, candidates: list[int]) -> int | None:
        usable = [n for n in candidates if n in ctx.memory_nodes and n in ctx.mems_allowed]
        if not usable:
            return None
        key = id(ctx.machine)
        if key not in self._slit:
            self._slit[key] = ctx.machine.slit()
        table = self._slit[key]
        row = table[ctx.machine.index_of(ctx.cpu_node)]
        return min(usable, key=lambda n: (row[ctx.machine.index_of(n)], n))

    def tiers(self, ctx: PlacementContext) -> tuple[int | None, int | None]:
        """The DRAM node and the CXL node this CPU would use."""
        fast = {MemoryKind.DRAM, MemoryKind.HBM}
        dram = self.dram_nodes or [n.id for n in ctx.machine.nodes if n.memory_kind in fast]
        cxl = self.cxl_nodes or [n.id for n in ctx.machine.nodes if n.memory_kind == MemoryKind.CXL]
        return self._nearest(ctx, dram), self._nearest(ctx, cxl)

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        dram, cxl = self.tiers(ctx)
        hot_node = dram if dram is not None else ctx.cpu_node
        hotness = ctx.hints.get("hotness")
        if hotness is None or cxl is None:
            return PlacementDecision(preferred=hot_node)
        hot = np.asarray(hotness, dtype=float) >= self.hot_threshold
        return PlacementDecision(preferred=np.where(hot, hot_node, cxl).astype(np.int64))


def make_policy(
    hot_threshold: float = 0.5, dram_nodes: Iterable[int] | None = None, cxl_nodes: Iterable[int] | None = None
) -> CxlTiering:
    return CxlTiering(hot_threshold, dram_nodes, cxl_nodes)
