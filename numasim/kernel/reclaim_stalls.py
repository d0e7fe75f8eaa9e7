"""Direct reclaim stalls on the simulation clock: the page faults that had to reclaim memory pay for it.

numasim places a run's memory before timing it, page fault by page fault in the order the program first touches
its pages. A fault whose allocation finds every allowed node at its min watermark reclaims clean page cache itself
(``__alloc_pages_direct_reclaim``: the thread stalls in ``try_to_free_pages`` until enough is freed), and the
kernel records it (:attr:`numasim.kernel.kernel.Kernel.reclaim_stalls`). This run-time part hands that time to the
engine: ``pages reclaimed x page size / direct_reclaim_bytes_per_s`` of kernel time, spread evenly over the
allocation's pages from the first one that reclaimed on (the kernel reclaims ``SWAP_CLUSTER_MAX`` pages at a time
as those faults go), each share spent by the thread that first accesses that page, right before the access
(:meth:`EngineControl.set_first_access_ns`).

Only faults the run takes lazily are charged (allocations with ``prefault = false`` and every page of a trace):
a prefaulted allocation is touched when it is created, outside the timed accesses, and its stalls are counted
(``untimed_reclaim_pages``) but not timed. The rate is a nominal prior (``KernelConfig.direct_reclaim_bytes_per_s``,
the same order as kswapd's), not a measurement; the even spread stands for the kernel's batches of 32 pages
(coverage row K6).

Examples
--------
>>> import numpy as np
>>> stalls = DirectReclaimStalls([(np.arange(0x200000, 0x240000, 4096, dtype=np.uint64), 1024)], ns_per_page=2048.0)
>>> stalls.counters()  # 64 faulting pages share 1024 pages of reclaim: 32 us each, 32 reclaim calls
{'allocstall_movable': 32, 'pgsteal_direct_timed': 1024, 'direct_reclaim_stall_ns': 2097152}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from numasim.engine.runtime import EngineControl, FaultBatch

__all__ = ["DirectReclaimStalls"]

_PAGE_SHIFT = 12
SWAP_CLUSTER_MAX = 32
"""``include/linux/swap.h``: pages one direct reclaim call tries to free."""


class DirectReclaimStalls:
    """A :class:`~numasim.engine.runtime.KernelRuntime` part that charges direct reclaim at first access.

    Parameters
    ----------
    stalls : sequence of (ndarray, int)
        Per allocation that reclaimed: the virtual addresses (uint64) of its pages from the first that reclaimed
        on, and the pages it reclaimed.
    ns_per_page : float
        Kernel time per reclaimed page.
    """

    def __init__(
        self,
        stalls: Sequence[tuple[np.ndarray, int]],
        ns_per_page: float,
        compaction: Sequence[tuple[np.ndarray, np.ndarray]] = (),
        compact_ns_per_page: float = 0.0,
        touched_vpn: np.ndarray | None = None,
    ) -> None:
        if not (0.0 <= ns_per_page < float("inf")):
            raise ValueError(f"DirectReclaimStalls: ns_per_page = {ns_per_page}: must be a finite number >= 0")
        if not (0.0 <= compact_ns_per_page < float("inf")):
            raise ValueError(f"DirectReclaimStalls: compact_ns_per_page = {compact_ns_per_page}: must be finite, >= 0")
        self.stalls = [(np.asarray(a, dtype=np.uint64), int(n)) for a, n in stalls if len(a)]
        self.ns_per_page = float(ns_per_page)
        # direct compaction of huge-page faults: (2 MiB folio addresses, pages migrated for each)
        self.compaction = [(np.asarray(a, dtype=np.uint64), np.asarray(m, dtype=np.int64)) for a, m in compaction
                           if len(a)]  # fmt: skip
        self.compact_ns_per_page = float(compact_ns_per_page)
        # the pages the run accesses (sorted virtual page numbers): a 2 MiB fault maps pages nobody touches, and
        # its time must land on pages whose first access comes
        self.touched_vpn = None if touched_vpn is None else np.unique(np.asarray(touched_vpn, dtype=np.uint64))

    def _accessed(self, vpns: np.ndarray) -> np.ndarray:
        if self.touched_vpn is None:
            return vpns
        return vpns[np.isin(vpns, self.touched_vpn, assume_unique=False)]

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        if not self.stalls and not self.compaction:
            return
        vpn = ctl.page_vpn()
        for addrs, n in self.stalls:
            self._charge(ctl, vpn, self._accessed(addrs >> np.uint64(_PAGE_SHIFT))[None, :],
                         np.array([n * self.ns_per_page]))  # fmt: skip
        for addrs, migrated in self.compaction:
            # a compacting 2 MiB fault: its stall spread over the pages of its block the run accesses (all of a
            # call's folios at once: a 64 GiB THP allocation has 32,768)
            blocks = (addrs >> np.uint64(_PAGE_SHIFT))[:, None] + np.arange(512, dtype=np.uint64)
            self._charge(ctl, vpn, blocks, migrated * self.compact_ns_per_page, self.touched_vpn)

    @staticmethod
    def _charge(ctl: EngineControl, vpn: np.ndarray, pages: np.ndarray, total_ns: np.ndarray,
                touched: np.ndarray | None = None) -> None:  # fmt: skip
        """Row ``k`` of ``pages`` (virtual page numbers) shares ``total_ns[k]``, each page's part charged at its
        first access; pages the run does not access (``touched``) or no longer maps get none."""
        flat = np.searchsorted(vpn, pages)
        found = flat < len(vpn)
        found[found] = vpn[flat[found]] == pages[found]
        if touched is not None:
            found &= np.isin(pages, touched)
        per_row = found.sum(axis=1)
        share = np.divide(total_ns, per_row, out=np.zeros(len(per_row)), where=per_row > 0)
        cost = np.broadcast_to(share[:, None], pages.shape)[found]
        if len(cost):
            ctl.set_first_access_ns(flat[found], cost)

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        return None

    def counters(self) -> dict[str, int]:
        pages = sum(n for _, n in self.stalls)
        # one direct reclaim (allocstall) per SWAP_CLUSTER_MAX pages reclaimed
        out = {"allocstall_movable": sum(-(-n // SWAP_CLUSTER_MAX) for _, n in self.stalls), "pgsteal_direct_timed": pages,
               "direct_reclaim_stall_ns": int(round(pages * self.ns_per_page))}  # fmt: skip
        if self.compaction:
            migrated = sum(int(m.sum()) for _, m in self.compaction)
            out.update(compact_stall_timed=sum(len(a) for a, _ in self.compaction), compact_migrated_timed=migrated,
                       compact_stall_ns=int(round(migrated * self.compact_ns_per_page)))  # fmt: skip
        return out

    def assumptions(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ns_per_page": self.ns_per_page, "status": "nominal"}
        if self.compaction:
            out["compact_migrate_page_ns"] = self.compact_ns_per_page
        return out
