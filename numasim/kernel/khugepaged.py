"""khugepaged on the simulation clock: collapse 2 MiB ranges of base pages into transparent huge pages.

mm/khugepaged.c: every ``scan_sleep_millisecs`` khugepaged scans ``pages_to_scan`` pages of the mappings THP
applies to (``enabled`` = always, or madvise with ``MADV_HUGEPAGE``), from where its last pass stopped. An aligned
2 MiB range inside the mapping that is not a huge page yet, with at most ``max_ptes_none`` pages absent, is
collapsed (``collapse_huge_page``): a huge page is allocated on the node most of the range's pages are on
(``hpage_collapse_find_target_node``), the present pages are copied into it and freed, and the range is mapped
by one PMD. Ranges fall back to base pages where THP faults failed, and the huge pages ``migrate_pages``,
``mbind`` or a balancing migration that could not get a huge page on the target move as base pages, so in a long
run khugepaged puts them back.

What the engine sees: the range's pages move to the new node at once (and count as one TLB entry when the TLB
is modelled), the copies of the present pages go over the links from the target node's kernel agent, and the
counters ``thp_collapse_alloc``, ``thp_collapse_alloc_failed`` and ``khugepaged_pages_collapsed`` count them.
Simplified (docs/kernel-spec-coverage.md, row H15): the collapse is instantaneous for the program (the real one
takes the mmap lock and makes the range's faults wait), the cursor is over this process only, and a range with
pages on several nodes is collapsed onto the majority node in one step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from numasim.engine.runtime import Daemon
from numasim.kernel.allocator import AllocRequest
from numasim.kernel.folio_alloc import HPAGE_PMD_NR, alloc_folios
from numasim.kernel.gfp import GFP_TRANSHUGE, Gfp
from numasim.kernel.thp import thp_allowed

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = ["Khugepaged", "aligned_ranges", "collapsible", "collapsible_ranges"]


def aligned_ranges(vma: Any) -> np.ndarray:
    """First page index (in ``vma``) of every aligned 2 MiB range that lies inside ``vma``."""
    huge_bytes = HPAGE_PMD_NR << 12
    first_addr = -(-vma.start // huge_bytes) * huge_bytes
    starts = np.arange(first_addr, vma.end - huge_bytes + 1, huge_bytes, dtype=np.int64)
    return (starts - vma.start) >> 12


def collapsible(vma: Any, ranges: np.ndarray, max_ptes_none: int) -> np.ndarray:
    """Which of ``ranges`` khugepaged would collapse: not a huge page yet, at most ``max_ptes_none`` pages absent."""
    if not len(ranges):
        return np.zeros(0, dtype=bool)
    pages = ranges[:, None] + np.arange(HPAGE_PMD_NR)
    present = (vma.nodes[pages] >= 0).sum(axis=1)
    return ~vma.thp[pages].all(axis=1) & (present > 0) & (HPAGE_PMD_NR - present <= max_ptes_none)


def collapsible_ranges(vma: Any, max_ptes_none: int) -> np.ndarray:
    """First page index of each range of ``vma`` khugepaged would collapse now.

    >>> from numasim.kernel.task import VMA
    >>> vma = VMA(0x200000, 0x600000, 0x200)
    >>> vma.nodes[:10] = 0
    >>> collapsible_ranges(vma, 511).tolist(), collapsible_ranges(vma, 100).tolist()
    ([0], [])
    """
    ranges = aligned_ranges(vma)
    return ranges[collapsible(vma, ranges, max_ptes_none)]


class Khugepaged(Daemon):
    """khugepaged for one process (see the module docstring); a :class:`~numasim.engine.runtime.KernelRuntime`."""

    def __init__(self, kernel: Kernel, task: Task) -> None:
        self.kernel, self.task = kernel, task
        self.cfg = kernel.config.khugepaged
        self.vmstat = {"thp_collapse_alloc": 0, "thp_collapse_alloc_failed": 0, "khugepaged_pages_collapsed": 0,
                       "khugepaged_full_scans": 0}  # fmt: skip
        self._cursor = 0  # virtual page number where the next pass starts

    def wanted(self, movers: bool = False) -> bool:
        """Is there anything to collapse now, or may there be (``movers``: something will migrate pages during
        the run, and a huge page migrated as base pages is split)?"""
        if self.kernel.config.thp_mode == "never":
            return False
        if movers or self.kernel.config.numa_balancing.mode:
            return any(thp_allowed(self.kernel.config, v) for v in self._vmas())
        return any(len(collapsible_ranges(v, self.cfg.max_ptes_none)) for v in self._vmas())

    def _vmas(self) -> list[Any]:
        return [v for v in self.task.mm.vmas_in(0, 1 << 62) if thp_allowed(self.kernel.config, v)]

    def run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        while True:
            yield env.timeout(max(self.cfg.scan_sleep_ms, 1) * 1e6)
            self.scan()

    def scan(self) -> None:
        """One pass: ``pages_to_scan`` pages (2 MiB ranges of 512) of the eligible mappings from the cursor on,
        collapsing the ranges that qualify; after the last mapping the cursor starts over (a full scan)."""
        budget = self.cfg.pages_to_scan
        vmas = sorted(self._vmas(), key=lambda v: v.start)
        for v in vmas:
            if (v.end >> 12) <= self._cursor:
                continue
            ranges = aligned_ranges(v)
            ranges = ranges[(v.start >> 12) + ranges >= self._cursor]
            examine = ranges[: max(1, budget // HPAGE_PMD_NR)]
            budget -= len(examine) * HPAGE_PMD_NR
            take = examine[collapsible(v, examine, self.cfg.max_ptes_none)]
            if len(take):
                self._collapse(v, take)
            if len(examine) < len(ranges):
                self._cursor = (v.start >> 12) + int(examine[-1]) + HPAGE_PMD_NR
                return
            self._cursor = v.end >> 12
            if budget <= 0:
                return
        self._cursor = 0
        self.vmstat["khugepaged_full_scans"] += 1

    def _collapse(self, vma: Any, ranges: np.ndarray) -> None:
        pages = ranges[:, None] + np.arange(HPAGE_PMD_NR)
        nodes = vma.nodes[pages]
        present = nodes >= 0
        # hpage_collapse_find_target_node: the node most of the range's pages are on (lowest id on a tie)
        ids = np.array(self.kernel.machine.node_ids)
        counts = np.stack([((nodes == n) & present).sum(axis=1) for n in ids], axis=1)
        target = ids[np.argmax(counts, axis=1)].astype(np.int16)
        gfp = GFP_TRANSHUGE | Gfp.THISNODE  # khugepaged/defrag = 1: it may reclaim and compact
        req = AllocRequest(count=len(ranges), preferred_nid=target, cpu_node=int(target[0]), gfp=gfp)
        new_nodes, new_zones = alloc_folios(self.kernel.pm, req)
        ok = new_nodes >= 0
        self.vmstat["thp_collapse_alloc"] += int(ok.sum())
        self.vmstat["thp_collapse_alloc_failed"] += int((~ok).sum())
        if not ok.any():
            return
        pg, pr = pages[ok], present[ok]
        old_nodes, old_zones = vma.nodes[pg][pr], vma.zones[pg][pr]
        self.kernel.pm.free(old_nodes.copy(), old_zones.copy())
        vma.nodes[pg] = np.repeat(new_nodes[ok], HPAGE_PMD_NR).reshape(pg.shape)
        vma.zones[pg] = np.repeat(new_zones[ok], HPAGE_PMD_NR).reshape(pg.shape)
        vma.thp[pg] = True
        self.vmstat["khugepaged_pages_collapsed"] += int(ok.sum())  # one per huge page, as collapse_huge_page counts
        # what the engine sees: the present pages the program uses move (and are one TLB entry per range)
        vpn = (np.uint64(vma.start >> 12) + pg.ravel().astype(np.uint64))
        flat = np.searchsorted(self.flat_vpn, vpn)
        inside = (flat < len(self.flat_vpn)) & (self.flat_vpn[np.minimum(flat, len(self.flat_vpn) - 1)] == vpn)
        flat = flat[inside]
        old = self.ctl.page_node[flat].copy()
        new = vma.nodes[pg].ravel()[inside]
        self.ctl.page_node[flat] = new
        self.ctl.page_huge[flat] = True
        for dst in np.unique(new).tolist():
            sel = new == dst  # every present page is copied into the new huge page
            self.ctl.copy_pages(self.ctl.kernel_agent(int(dst)), old[sel].astype(np.int16),
                                np.full(int(sel.sum()), dst, dtype=np.int16))
