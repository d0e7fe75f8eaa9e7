"""The 2 MiB hugetlb pool: per-node pools sized by ``vm.nr_hugepages``, reservations and policy-driven dequeue.

Follows ``mm/hugetlb.c``:

* ``vm.nr_hugepages = N`` (``hugetlb_sysctl_handler`` -> ``set_max_huge_pages(h, N, NUMA_NO_NODE,
  N_MEMORY)``): the pool grows one fresh folio at a time, each from the next node of the round robin
  ``hstate_next_node_to_alloc`` (a node that cannot give one is skipped for that folio), allocated with
  ``htlb_alloc_mask | __GFP_THISNODE | __GFP_RETRY_MAYFAIL`` (2 MiB pages are migratable, so ``GFP_HIGHUSER_MOVABLE``).
  It shrinks by freeing free folios round robin (``hstate_next_node_to_free``), never below the pages in use
  or reserved (``min_count``);
* ``/sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages = M`` (``nr_hugepages_store_common``
  with a node): the global target becomes ``M + (total - total on N)`` and only node N grows or shrinks;
* ``mmap(MAP_HUGETLB)`` reserves its folios up front (``hugetlb_reserve_pages``, counted globally, not per node:
  ENOMEM when the pool's free folios minus reservations are too few);
* a fault dequeues a free folio (``dequeue_hugetlb_folio_vma`` -> ``huge_node`` ->
  ``dequeue_hugetlb_folio_nodemask``): the node order of the preferred node's zonelist, restricted to the policy
  nodemask and the cpuset, first node with a free folio. Interleave picks the preferred node per huge page with
  the huge-page interleave index; ``MPOL_PREFERRED_MANY`` tries its nodes first, then every node. A fault that
  finds none within its nodemask fails (SIGBUS in a real program; surplus pages are not modelled since
  ``nr_overcommit_hugepages`` is 0).

The growth is computed per node in closed form (round-robin water filling over each node's capacity) instead of
one folio at a time; the round robin's starting node is kept between writes as the kernel keeps it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.folio_alloc import HPAGE_PMD_NR, alloc_folios, folio_capacity
from numasim.kernel.gfp import GFP_HIGHUSER_MOVABLE, Gfp
from numasim.kernel.zones import MAX_NR_ZONES

if TYPE_CHECKING:
    from numasim.kernel.physmem import PhysicalMemory

__all__ = ["HugetlbPool", "round_robin_fill"]

_POOL_GFP = GFP_HIGHUSER_MOVABLE | Gfp.COMP | Gfp.RETRY_MAYFAIL | Gfp.NOWARN | Gfp.THISNODE


def round_robin_fill(capacity: list[int], want: int, start: int = 0) -> tuple[list[int], int]:
    """Give ``want`` items one at a time round robin from position ``start``, skipping full positions.

    Returns the count per position and the position after the last one served (the next start).

    Examples
    --------
    >>> round_robin_fill([10, 1, 10], 7)
    ([3, 1, 3], 1)
    >>> round_robin_fill([2, 2], 9, start=1)
    ([2, 2], 1)
    """
    n = len(capacity)
    if n == 0 or want <= 0:
        return [0] * n, start
    total = sum(capacity)
    if want >= total:
        return list(capacity), start
    # Largest number of full rounds r with sum(min(cap, r)) <= want, then the rest one each in order.
    lo, hi = 0, max(capacity)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(c, mid) for c in capacity) <= want:
            lo = mid
        else:
            hi = mid - 1
    got = [min(c, lo) for c in capacity]
    rest = want - sum(got)
    pos = start % n
    last = start % n
    # The round robin serves positions in order from `start`; after `lo` full rounds it is back there.
    while rest > 0:
        if capacity[pos] > got[pos]:
            got[pos] += 1
            rest -= 1
            last = pos
        pos = (pos + 1) % n
    return got, (last + 1) % n if want else start


class HugetlbPool:
    """The default hstate's (2 MiB) pool on each node, and the global reservation count.

    Attributes
    ----------
    free_by_zone, used_by_zone : numpy.ndarray of int64, shape (nr_node_ids, MAX_NR_ZONES)
        Free and in-use folios per node and zone type (a folio's zone matters when it goes back to the buddy).
    reserved : int
        ``resv_huge_pages``: folios promised to mappings and not yet faulted.
    """

    def __init__(self, pm: PhysicalMemory) -> None:
        self.pm = pm
        size = max(pm.node_ids) + 1
        self.free_by_zone = np.zeros((size, MAX_NR_ZONES), dtype=np.int64)
        self.used_by_zone = np.zeros((size, MAX_NR_ZONES), dtype=np.int64)
        self.reserved = 0
        self._next_alloc = 0
        self._next_free = 0

    # --- sizes --------------------------------------------------------------------------------------------
    def total(self, nid: int | None = None) -> int:
        """``HugePages_Total`` (of node ``nid``, or of the whole pool)."""
        both = self.free_by_zone + self.used_by_zone
        return int(both.sum() if nid is None else both[nid].sum())

    def free(self, nid: int | None = None) -> int:
        """``HugePages_Free``."""
        return int(self.free_by_zone.sum() if nid is None else self.free_by_zone[nid].sum())

    # --- vm.nr_hugepages -----------------------------------------------------------------------------------
    def set_nr_hugepages(self, count: int, nid: int | None = None) -> None:
        """A write of ``count`` to ``vm.nr_hugepages`` (``nid=None``) or to node ``nid``'s ``nr_hugepages``."""
        nodes = sorted(self.pm.memory_nodes) if nid is None else [nid]
        if nid is not None:
            if nid not in self.pm.memory_nodes:
                return  # a node without memory: nothing can be allocated there
            count += self.total() - self.total(nid)
        in_use = int(self.used_by_zone.sum()) + self.reserved
        count = max(count, in_use)  # min_count: pages in use or reserved stay
        have = self.total()
        if count > have:
            self._grow(count - have, nodes)
        elif count < have:
            self._shrink(have - count, nodes)

    def _grow(self, want: int, nodes: list[int]) -> None:
        req = AllocRequest(count=0, preferred_nid=nodes[0], gfp=_POOL_GFP, cpu_node=self._cpu_node(nodes[0]))
        capacity = [folio_capacity(self.pm, n, _with(req, n)) for n in nodes]
        got, self._next_alloc = round_robin_fill(capacity, want, self._next_alloc % max(1, len(nodes)))
        for n, k in zip(nodes, got, strict=True):
            if k:
                placed_nodes, placed_zones = alloc_folios(self.pm, _with(req, n, k))
                ok = placed_nodes >= 0
                np.add.at(self.free_by_zone, (placed_nodes[ok].astype(np.int64), placed_zones[ok].astype(np.int64)), 1)

    def _shrink(self, want: int, nodes: list[int]) -> None:
        free = [int(self.free_by_zone[n].sum()) for n in nodes]
        got, self._next_free = round_robin_fill(free, want, self._next_free % max(1, len(nodes)))
        for n, k in zip(nodes, got, strict=True):
            # update_and_free_hugetlb_folio: the folio's 512 pages go back to the buddy allocator
            for z in range(MAX_NR_ZONES - 1, -1, -1):
                take = min(k, int(self.free_by_zone[n, z]))
                if take:
                    self.free_by_zone[n, z] -= take
                    pages = take * HPAGE_PMD_NR
                    self.pm.free(np.full(pages, n, dtype=np.int16), np.full(pages, z, dtype=np.int16))
                    k -= take

    def _cpu_node(self, nid: int) -> int:
        return nid if nid in self.pm.cpu_nodes else next(iter(sorted(self.pm.cpu_nodes)), nid)

    # --- mappings -------------------------------------------------------------------------------------------
    def reserve(self, folios: int) -> bool:
        """``hugetlb_reserve_pages``: promise ``folios`` to a new mapping; False (ENOMEM) if the pool lacks them."""
        if folios > self.free() - self.reserved:
            return False
        self.reserved += folios
        return True

    def unreserve(self, folios: int) -> None:
        self.reserved = max(0, self.reserved - folios)

    def dequeue(self, preferred: np.ndarray, nodemask: frozenset[int] | None,
                mems_allowed: frozenset[int] | None) -> tuple[np.ndarray, np.ndarray]:
        """Take one free folio per entry of ``preferred`` (its preferred node), walking that node's zonelist
        order within ``nodemask`` and the cpuset; returns (node, zone) per folio, -1 where none was free."""
        count = int(preferred.size)
        nodes = np.full(count, -1, dtype=np.int16)
        zones = np.full(count, -1, dtype=np.int16)
        for target in np.unique(preferred):
            sel = np.flatnonzero(preferred == target)
            pos = 0
            for n in self.pm.fallback_order(int(target)):
                if pos >= sel.size:
                    break
                if (nodemask is not None and n not in nodemask) or (mems_allowed is not None and n not in mems_allowed):
                    continue
                for z in range(MAX_NR_ZONES - 1, -1, -1):
                    take = min(int(sel.size) - pos, int(self.free_by_zone[n, z]))
                    if take:
                        nodes[sel[pos : pos + take]] = n
                        zones[sel[pos : pos + take]] = z
                        self.free_by_zone[n, z] -= take
                        self.used_by_zone[n, z] += take
                        pos += take
        return nodes, zones

    def release(self, page_nodes: np.ndarray, page_zones: np.ndarray) -> None:
        """Give the folios of an unmapped hugetlb range back to the pool (node and zone of each base page)."""
        page_nodes = np.asarray(page_nodes, dtype=np.int64)
        if page_nodes.size == 0:
            return
        zones = np.asarray(page_zones, dtype=np.int64)
        folios = np.zeros_like(self.used_by_zone)
        np.add.at(folios, (page_nodes, zones), 1)
        folios //= HPAGE_PMD_NR
        self.used_by_zone -= folios
        self.free_by_zone += folios


def _with(req: AllocRequest, node: int, count: int = 0) -> AllocRequest:
    return replace(req, preferred_nid=node, count=count)
