"""First-touch page faults: lazily allocate the untouched pages of a range under the policy in force.

``do_anonymous_page`` -> ``vma_alloc_folio`` -> ``get_vma_policy`` + ``alloc_pages_mpol`` (mm/memory.c,
mm/mempolicy.c), for a whole range at once: the untouched pages are found with numpy, the policy (a plug-in
attached to the VMA or task, else the VMA policy, else the task policy, else the per-node default) decides a
preferred node per page from the interleave indices, and the allocator places them in one call (two for
``MPOL_PREFERRED_MANY``). When the allocator gives up, the OOM killer picks a victim (see
:meth:`numasim.kernel.kernel.Kernel.out_of_memory`); if that is another task, the fault retries the pages still
missing. BIND never spills.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.folio_alloc import HPAGE_PMD_NR, HPAGE_PMD_ORDER
from numasim.kernel.mempolicy import MemPolicy
from numasim.kernel.placer import allocate, is_kernel_placement, placement_context, placement_for
from numasim.kernel.task import PAGE_SHIFT, PAGE_SIZE, VMA, Task
from numasim.kernel.thp import fault_huge, thp_allowed

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numasim.kernel.kernel import Kernel

__all__ = ["FaultResult", "fault_range", "fault_pages_at"]


@dataclass(frozen=True)
class FaultResult:
    """Outcome of faulting a range: pages newly allocated, pages that could not be, and whether OOM killed."""

    faulted: int = 0
    failed: int = 0
    oom_killed: bool = False

    def __add__(self, other: FaultResult) -> FaultResult:
        return FaultResult(self.faulted + other.faulted, self.failed + other.failed,
                           self.oom_killed or other.oom_killed)


def fault_range(
    kernel: Kernel,
    task: Task,
    vma: VMA,
    start: int,
    end: int,
    cpu: int | None = None,
    hints: Mapping[str, np.ndarray] | None = None,
) -> FaultResult:
    """Fault in every not-present page of ``vma`` within ``[start, end)`` as if ``cpu`` touched it first.

    Parameters
    ----------
    hints : mapping of str to array, optional
        Per-page data for plug-in policies, one value per page of ``[start, end)`` (present pages included),
        e.g. ``{"hotness": scores}``; the plug-in sees the values of the pages actually faulted.
    """
    if not task.alive:
        return FaultResult()
    lo = max(start, vma.start)
    hi = min(end, vma.end)
    if hi <= lo:
        return FaultResult()
    i0 = (lo - vma.start) >> PAGE_SHIFT
    i1 = (hi - vma.start + PAGE_SIZE - 1) >> PAGE_SHIFT
    page_hints: dict[str, np.ndarray] = {}
    for key, values in (hints or {}).items():
        arr = np.asarray(values)
        if arr.shape[0] != i1 - i0:
            raise ValueError(f"hint {key!r} has {arr.shape[0]} values for {i1 - i0} pages")
        page_hints[key] = arr
    return fault_pages_at(kernel, task, vma, np.arange(i0, i1), cpu, page_hints)


def fault_pages_at(
    kernel: Kernel,
    task: Task,
    vma: VMA,
    idx: np.ndarray,
    cpu: int | None = None,
    hints: Mapping[str, np.ndarray] | None = None,
) -> FaultResult:
    """Fault in the not-present pages among page indices ``idx`` of ``vma`` (ascending), touched first by ``cpu``.

    ``hints`` hold one value per entry of ``idx``. This is the batch form every touch goes through: a set of
    scattered pages first touched from one cpu is one allocator request, not one per page.
    """
    if not task.alive or idx.size == 0:
        return FaultResult()
    missing = np.flatnonzero(vma.nodes[idx] < 0)
    if missing.size == 0:
        return FaultResult()
    idx = idx[missing]
    cpu = task.cpu if cpu is None else cpu
    if vma.hugetlb:
        return _fault_hugetlb(kernel, task, vma, idx, cpu)
    page_hints = {key: np.asarray(arr)[missing] for key, arr in (hints or {}).items()}
    if vma.shm is not None and vma.placement is None:
        # shmem: the shared policy is looked up per page offset (mpol_shared_policy_lookup)
        ids = vma.shm.policy_id[vma.pgoff + idx]
        groups = [(np.flatnonzero(ids == u), vma.shm.policies[u] if u >= 0 else None) for u in np.unique(ids)]
    else:
        groups = [(np.arange(idx.size), vma.policy)]
    result = FaultResult()
    for pos, own in groups:
        sub_hints = {key: arr[pos] for key, arr in page_hints.items()}
        result = result + _fault_pages(kernel, task, vma, idx[pos], cpu, sub_hints, own)
        if not task.alive:
            break
    return result


def _fault_pages(
    kernel: Kernel,
    task: Task,
    vma: VMA,
    idx: np.ndarray,
    cpu: int,
    hints: dict[str, np.ndarray],
    own: MemPolicy | None,
) -> FaultResult:
    """Allocate pages ``idx`` of ``vma`` (all missing, all under the mapping's own policy ``own``)."""
    policy = own if own is not None else task.mempolicy
    plugin = placement_for(task, vma, own)
    huge_pages = 0
    if thp_allowed(kernel.config, vma) and is_kernel_placement(plugin) and not hints:
        # do_huge_pmd_anonymous_page first: whole 2 MiB blocks; what it cannot place falls back to base pages
        before, stolen = idx, kernel.pm.vmstat["pgsteal_direct"]
        idx, huge_pages = fault_huge(kernel, task, vma, idx, cpu, policy, plugin)
        reclaimed = kernel.pm.vmstat["pgsteal_direct"] - stolen
        if reclaimed:  # a huge-page fault that reclaimed (defrag allows direct reclaim): its faults stall too
            huge = np.setdiff1d(before, idx, assume_unique=True)
            kernel.reclaim_stalls.append((task.tgid, vma.addresses(huge).astype(np.uint64), int(reclaimed)))
        if idx.size == 0:
            return FaultResult(huge_pages, 0, False)
    ctx = placement_context(kernel, task, vma, idx, cpu, hints, policy=policy)
    decision = plugin.place(ctx, int(idx.size))
    preferred = decision.preferred_array(int(idx.size))
    faulted = huge_pages
    while True:
        out = allocate(kernel, decision, int(idx.size), ctx.cpu_node, task.mems_allowed)
        if out.reclaimed and out.first_reclaim >= 0:
            after = idx[out.first_reclaim :][out.nodes[out.first_reclaim :] >= 0]
            kernel.reclaim_stalls.append((task.tgid, vma.addresses(after).astype(np.uint64), out.reclaimed))
        ok = out.nodes >= 0
        vma.nodes[idx[ok]] = out.nodes[ok]
        vma.zones[idx[ok]] = out.zones[ok]
        faulted += int(np.count_nonzero(ok))
        failed = int(idx.size - np.count_nonzero(ok))
        if not out.oom:
            return FaultResult(faulted, failed, False)
        # out_of_memory(): kill the worst task in the allocation's domain; if that was someone else, the
        # faulting task retries the pages still missing.
        where = int(vma.addresses(idx[~ok][:1])[0])
        domain = None if decision.soft_mask else decision.nodemask
        victim = kernel.out_of_memory(task, domain, f"page fault at {where:#x} by pid {task.pid}")
        if victim is None or victim is task or not task.alive:
            return FaultResult(faulted, failed, True)
        idx = idx[~ok]
        preferred = preferred[~ok]
        decision = replace(decision, preferred=preferred)


def _fault_hugetlb(kernel: Kernel, task: Task, vma: VMA, idx: np.ndarray, cpu: int) -> FaultResult:
    """``hugetlb_fault`` -> ``alloc_hugetlb_folio`` -> ``dequeue_hugetlb_folio_vma`` for the 2 MiB blocks of
    ``idx`` (a MAP_HUGETLB mapping is 2 MiB aligned): one free pool folio per block, under the VMA's policy."""
    blocks = np.unique(idx // HPAGE_PMD_NR) * HPAGE_PMD_NR
    own = vma.policy
    policy = own if own is not None else task.mempolicy
    plugin = placement_for(task, vma, own)
    ctx = placement_context(kernel, task, vma, blocks, cpu, policy=policy)
    # huge_node(): the interleave index of a huge page counts huge pages
    ctx = replace(ctx, ilx=(vma.pgoff >> HPAGE_PMD_ORDER) + blocks // HPAGE_PMD_NR)
    decision = plugin.place(ctx, int(blocks.size))
    preferred = decision.preferred_array(int(blocks.size))
    mems = task.mems_allowed if kernel.cpusets_enabled else None
    if decision.soft_mask and decision.nodemask is not None:
        nodes, zones = kernel.hugetlb.dequeue(preferred, decision.nodemask, mems)
        miss = np.flatnonzero(nodes < 0)
        if miss.size:
            nodes[miss], zones[miss] = kernel.hugetlb.dequeue(preferred[miss], None, mems)
    else:
        nodes, zones = kernel.hugetlb.dequeue(preferred, decision.nodemask, mems)
    ok = nodes >= 0
    kernel.hugetlb.unreserve(int(np.count_nonzero(ok)))  # a reserved folio is now in use
    pages = (blocks[ok][:, None] + np.arange(HPAGE_PMD_NR)).ravel()
    vma.nodes[pages] = np.repeat(nodes[ok], HPAGE_PMD_NR)
    vma.zones[pages] = np.repeat(zones[ok], HPAGE_PMD_NR)
    failed = int(np.count_nonzero(np.isin(idx // HPAGE_PMD_NR, blocks[~ok] // HPAGE_PMD_NR)))
    return FaultResult(int(pages.size), failed, False)
