"""Memory tiering (``kernel.numa_balancing`` bit 2): which nodes are the fast tier, where a node demotes to, and
the promotion throttle of kernel/sched/fair.c (spec section 7.4).

- **Tiers** (mm/memory-tiers.c with default abstract distances): nodes with cpus are the top tier (DRAM);
  memory-only nodes (CXL expanders, PMEM) are a lower tier. ``node_is_toptier``.
- **Demotion target** (``establish_demotion_targets``): the nearest lower-tier node by SLIT distance.
- **Promotion** of a page faulted on a lower-tier node to the faulting cpu's (top-tier) node: at once while the
  target has plenty of free memory (``pgdat_free_space_enough``), else only if the page is *hot* (faulted within
  the hot threshold of its scan: ``hint_fault_latency``) and the promotion rate limit allows it
  (``numa_promotion_rate_limit``); the threshold adapts so that candidates match the rate limit
  (``numa_promotion_adjust_threshold``).
- **Demotion on reclaim** (mm/vmscan.c ``demote_folio_list`` from kswapd): when a promotion finds the top-tier node
  short of free memory, kswapd on that node demotes its coldest pages to the demotion target until the node is
  above its promotion watermark (tiering mode balances kswapd to ``wmark_promo``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numasim.kernel.physmem import PhysicalMemory
    from numasim.topology.model import Machine

__all__ = ["toptier_nodes", "demotion_targets", "pgdat_free_space_enough", "pages_to_promo_wmark", "PromotionThrottle"]

_GIB_PAGES = 1 << 18  # 1 GiB in 4 KiB pages


def toptier_nodes(machine: Machine) -> frozenset[int]:
    """Nodes in the top memory tier: those with cpus (memory-only nodes are a slower tier).

    >>> from numasim.topology.io import load_machine
    >>> sorted(toptier_nodes(load_machine("xeon-2s-cxl")))
    [0, 1]
    """
    return frozenset(n.id for n in machine.nodes if n.cpus)


def demotion_targets(machine: Machine) -> dict[int, int]:
    """Per top-tier node, the nearest lower-tier node with memory (none if the machine has one tier).

    >>> from numasim.topology.io import load_machine
    >>> demotion_targets(load_machine("xeon-2s-cxl"))
    {0: 2, 1: 2}
    """
    top = toptier_nodes(machine)
    lower = [n.id for n in machine.nodes if n.id not in top and n.memory_bytes > 0]
    if not lower:
        return {}
    slit = machine.slit()
    out = {}
    for n in sorted(top):
        row = slit[machine.index_of(n)]
        out[n] = min(lower, key=lambda m: (row[machine.index_of(m)], m))
    return out


def pgdat_free_space_enough(pm: PhysicalMemory, nid: int) -> bool:
    """``pgdat_free_space_enough``: some populated zone keeps more than its promotion watermark plus
    ``max(1 GiB, node present pages / 16)`` free."""
    zones = [z for z in pm.node_zones(nid) if z.managed_pages > 0]
    present = sum(z.managed_pages for z in zones)
    enough = max(_GIB_PAGES, present >> 4)
    return any(z.free_pages > z.wmark_promo + enough for z in zones)


def pages_to_promo_wmark(pm: PhysicalMemory, nid: int, extra_pages: int = 0) -> int:
    """Pages the node must free for its largest zone to be above its promotion watermark (plus ``extra_pages``)."""
    zones = [z for z in pm.node_zones(nid) if z.managed_pages > 0]
    if not zones:
        return 0
    z = max(zones, key=lambda z: z.managed_pages)
    return max(0, z.wmark_promo + extra_pages - z.free_pages)


@dataclass
class PromotionThrottle:
    """The promotion rate limit and adaptive hot threshold of one top-tier node (``pgdat->nbp_*``).

    Parameters
    ----------
    rate_limit_pages_per_s : float
        ``numa_balancing_promote_rate_limit_MBps`` in 4 KiB pages per second.
    hot_threshold_ms : float
        The default hot threshold.
    adjust_period_ms : float
        How often the threshold adapts (``scan_period_max_ms``).
    """

    rate_limit_pages_per_s: float
    hot_threshold_ms: float
    adjust_period_ms: float
    threshold_ms: float = 0.0  # 0: use the default
    window_start_ms: float = field(default=-np.inf)
    window_candidates: int = 0
    adjust_start_ms: float = field(default=-np.inf)
    adjust_candidates: int = 0

    def threshold(self) -> float:
        return self.threshold_ms or self.hot_threshold_ms

    def adjust(self, now_ms: float) -> None:
        """``numa_promotion_adjust_threshold``: once per period, move the threshold by 1/8 of the default
        towards making the candidates match the rate limit."""
        if self.adjust_start_ms == -np.inf:
            self.adjust_start_ms = now_ms
            return
        if now_ms - self.adjust_start_ms <= self.adjust_period_ms:
            return
        ref = self.rate_limit_pages_per_s * self.adjust_period_ms / 1000.0
        unit = 2 * self.hot_threshold_ms / 16
        th = self.threshold()
        if self.adjust_candidates > ref * 1.1:
            th = max(th - unit, unit)
        elif self.adjust_candidates < ref * 0.9:
            th = min(th + unit, self.hot_threshold_ms * 2)
        self.threshold_ms = th
        self.adjust_start_ms, self.adjust_candidates = now_ms, 0

    def allow(self, now_ms: np.ndarray) -> np.ndarray:
        """``numa_promotion_rate_limit`` for candidates in time order: each counts, and is refused once the
        1-second window's candidates reach the limit."""
        ok = np.zeros(len(now_ms), dtype=bool)
        k = 0
        while k < len(now_ms):
            if now_ms[k] - self.window_start_ms > 1000.0:  # a new 1-second window
                self.window_start_ms, self.window_candidates = float(now_ms[k]), 0
            # the candidates up to the window's end, counted at once
            end = k + int(np.searchsorted(now_ms[k:], self.window_start_ms + 1000.0, side="right"))
            count = self.window_candidates + np.arange(1, end - k + 1)
            ok[k:end] = count <= self.rate_limit_pages_per_s
            self.window_candidates += end - k
            self.adjust_candidates += end - k
            k = end
        return ok
