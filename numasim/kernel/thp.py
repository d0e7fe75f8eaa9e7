"""Transparent huge pages at fault time: which anonymous faults get a 2 MiB folio, and from which node.

Follows ``mm/memory.c`` ``__handle_mm_fault`` -> ``create_huge_pmd`` -> ``do_huge_pmd_anonymous_page``
(``mm/huge_memory.c``) and ``vma_alloc_folio`` / ``alloc_pages_mpol`` (``mm/mempolicy.c``), which 6.1 and
6.12 agree on for these cases:

* a fault gets a huge folio when THP is allowed for the VMA (``enabled`` = ``always``, or ``madvise`` with
  ``MADV_HUGEPAGE``; never with ``MADV_NOHUGEPAGE``; anonymous private memory only), the 2 MiB-aligned block
  around the address lies inside the VMA (``thp_vma_suitable_order``) and no page of it is present yet
  (``pmd_none``); the whole block is then faulted in at once, by whichever cpu touched it first;
* the gfp mask is ``vma_thp_gfp_mask`` (:func:`thp_gfp`): ``defrag`` decides whether the fault may reclaim
  (``__GFP_DIRECT_RECLAIM``), which decides whether it may go remote (below);
* interleave (and weighted interleave) pick the node per folio with the huge-page interleave index
  ``(vm_pgoff >> 9) + ((addr - vm_start) >> 21)`` and allocate the standard way: one folio per interleave step;
* ``MPOL_PREFERRED_MANY``: ``alloc_pages_preferred_many``, first within the nodes without reclaim, then anywhere;
* everything else (local, preferred, bind): if the preferred node (the local node, ``first_node`` of a
  preferred policy) is allowed by the policy nodemask, first ``__GFP_THISNODE | __GFP_NORETRY`` on that node
  only; if that fails, a mask with ``__GFP_DIRECT_RECLAIM`` retries the standard way (remote nodes allowed by
  the policy), a mask without it gives up. If the preferred node is not in the nodemask (bind elsewhere), the
  standard way directly;
* a block whose folio cannot be had falls back to base pages (``VM_FAULT_FALLBACK``, ``thp_fault_fallback``),
  which then fault one by one under the same policy.

Simplifications (docs/kernel-spec-coverage.md, rows H*): read faults allocate like writes (no huge zero page);
plug-in placement policies get base pages only; khugepaged collapses on the clock (:mod:`numasim.kernel.khugepaged`);
order-9 allocations see fragmentation (:mod:`numasim.kernel.buddy`) only where a measured /proc/buddyinfo was
given, and then compact
(:mod:`numasim.kernel.compaction`; the folios that did are recorded in ``Kernel.compaction_stalls``) but do not
reclaim (:mod:`numasim.kernel.folio_alloc`); mTHP sizes (6.8+) are not modelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.folio_alloc import HPAGE_PMD_NR, HPAGE_PMD_ORDER, alloc_folios
from numasim.kernel.gfp import GFP_TRANSHUGE, GFP_TRANSHUGE_LIGHT, Gfp
from numasim.kernel.placer import placement_context
from numasim.kernel.task import PAGE_SHIFT, VMA

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.mempolicy import MemPolicy
    from numasim.kernel.protocol import PlacementPolicy
    from numasim.kernel.task import Task

__all__ = ["thp_allowed", "thp_gfp", "huge_blocks", "fault_huge"]

_HPAGE_SHIFT = PAGE_SHIFT + HPAGE_PMD_ORDER


def thp_allowed(config: KernelConfig, vma: VMA) -> bool:
    """``thp_vma_allowable_order`` for a fault on private anonymous memory.

    Examples
    --------
    >>> vma = VMA(0x200000, 0x600000, 0x200)
    >>> thp_allowed(KernelConfig(thp_mode="always"), vma), thp_allowed(KernelConfig(thp_mode="madvise"), vma)
    (True, False)
    """
    if vma.kind != "anon" or vma.shm is not None or vma.hugetlb or vma.hugepage_advice < 0:
        return False
    return config.thp_mode == "always" or (config.thp_mode == "madvise" and vma.hugepage_advice > 0)


def thp_gfp(config: KernelConfig, vma: VMA) -> Gfp:
    """``vma_thp_gfp_mask``: the gfp of a huge-page fault under ``transparent_hugepage/defrag``.

    Examples
    --------
    >>> vma = VMA(0x200000, 0x600000, 0x200)
    >>> bool(thp_gfp(KernelConfig(), vma) & Gfp.DIRECT_RECLAIM)    # defrag=madvise, not madvised
    False
    >>> bool(thp_gfp(KernelConfig(thp_defrag="always"), vma) & Gfp.DIRECT_RECLAIM)
    True
    """
    madvised = vma.hugepage_advice > 0
    defrag = config.thp_defrag
    if defrag == "always":  # always synchronous compaction
        return GFP_TRANSHUGE | (Gfp(0) if madvised else Gfp.NORETRY)
    if defrag == "defer":  # kick kcompactd and fail quickly
        return GFP_TRANSHUGE_LIGHT | Gfp.KSWAPD_RECLAIM
    if defrag == "defer+madvise":
        return GFP_TRANSHUGE_LIGHT | (Gfp.DIRECT_RECLAIM if madvised else Gfp.KSWAPD_RECLAIM)
    if defrag == "madvise":
        return GFP_TRANSHUGE_LIGHT | (Gfp.DIRECT_RECLAIM if madvised else Gfp(0))
    return GFP_TRANSHUGE_LIGHT


def huge_blocks(vma: VMA, idx: np.ndarray) -> np.ndarray:
    """Page index (in ``vma``) of the first page of every 2 MiB block that faulting pages ``idx`` would map
    with one huge folio: aligned, inside the VMA, and with no page present yet. Ascending, unique.

    Examples
    --------
    >>> vma = VMA(0x100000, 0x700000, 0x100)          # 1 MiB .. 7 MiB: whole blocks at 2 and 4 MiB
    >>> huge_blocks(vma, np.arange(vma.npages)).tolist()
    [256, 768]
    """
    if idx.size == 0:
        return np.empty(0, dtype=np.int64)
    addrs = vma.start + (np.asarray(idx, dtype=np.int64) << PAGE_SHIFT)
    haddr = np.unique(addrs >> _HPAGE_SHIFT) << _HPAGE_SHIFT
    haddr = haddr[(haddr >= vma.start) & (haddr + (1 << _HPAGE_SHIFT) <= vma.end)]
    first = (haddr - vma.start) >> PAGE_SHIFT
    if first.size == 0:
        return first
    present = np.concatenate([[0], np.cumsum(vma.nodes >= 0)])
    return first[present[first + HPAGE_PMD_NR] == present[first]]


def fault_huge(
    kernel: Kernel, task: Task, vma: VMA, idx: np.ndarray, cpu: int, policy: MemPolicy | None,
    plugin: PlacementPolicy,
) -> tuple[np.ndarray, int]:
    """Fault the huge blocks among pages ``idx`` with ``plugin`` (a kernel mode) deciding per folio; return the
    pages still missing (to fault as base pages) and the number of pages mapped by huge folios."""
    blocks = huge_blocks(vma, idx)
    if blocks.size == 0:
        return idx, 0
    ctx = placement_context(kernel, task, vma, blocks, cpu, policy=policy)
    ilx = (vma.pgoff >> HPAGE_PMD_ORDER) + ((vma.addresses(blocks) - vma.start) >> _HPAGE_SHIFT)
    ctx = replace(ctx, ilx=np.asarray(ilx, dtype=np.int64))
    decision = plugin.place(ctx, int(blocks.size))
    count = int(blocks.size)
    preferred = decision.preferred_array(count)
    gfp = thp_gfp(kernel.config, vma)
    mems = task.mems_allowed if kernel.cpusets_enabled else None
    req = AllocRequest(count=count, preferred_nid=preferred, nodemask=decision.nodemask, cpu_node=ctx.cpu_node,
                       gfp=gfp, interleave=decision.interleave, mems_allowed=mems)
    pm = kernel.pm
    migrated = np.zeros(count, dtype=np.int64)  # pages direct compaction migrated for each folio

    def alloc(r: AllocRequest, sel: np.ndarray | slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        got = alloc_folios(pm, r)
        migrated[sel] += pm.folio_compaction
        return got

    if decision.interleave:
        nodes, zones = alloc(req)
    elif decision.soft_mask and decision.nodemask is not None:
        nodes, zones = alloc(replace(req, no_direct_reclaim=True))
        _retry(req, nodes, zones, alloc, nodemask=None)
    else:
        allowed = np.ones(count, dtype=bool) if decision.nodemask is None else np.isin(
            preferred, sorted(decision.nodemask))
        nodes = np.full(count, -1, dtype=np.int16)
        zones = np.full(count, -1, dtype=np.int16)
        if allowed.any():
            # First only on the preferred node, no nodemask, and never the reclaim a remote node would need.
            sel = np.flatnonzero(allowed)
            first = replace(req, count=int(sel.size), preferred_nid=preferred[sel], nodemask=None,
                            gfp=gfp | Gfp.THISNODE | Gfp.NORETRY)
            nodes[sel], zones[sel] = alloc(first, sel)
        retry = ~allowed | ((nodes < 0) & bool(gfp & Gfp.DIRECT_RECLAIM))
        if retry.any():
            sel = np.flatnonzero(retry)
            n2, z2 = alloc(replace(req, count=int(sel.size), preferred_nid=preferred[sel]), sel)
            nodes[sel], zones[sel] = n2, z2
    ok = nodes >= 0
    if migrated.any():  # the faults that compacted stall for it (a timed run charges it at their first access)
        m = np.flatnonzero(migrated)
        kernel.compaction_stalls.append((task.tgid, vma.addresses(blocks[m]).astype(np.uint64), migrated[m],
                                         nodes[m].copy()))  # fmt: skip
    pm.vmstat["thp_fault_alloc"] = pm.vmstat.get("thp_fault_alloc", 0) + int(np.count_nonzero(ok))
    pm.vmstat["thp_fault_fallback"] = pm.vmstat.get("thp_fault_fallback", 0) + int(np.count_nonzero(~ok))
    if not ok.any():
        return idx, 0
    pages = (blocks[ok][:, None] + np.arange(HPAGE_PMD_NR)).ravel()
    vma.nodes[pages] = np.repeat(nodes[ok], HPAGE_PMD_NR)
    vma.zones[pages] = np.repeat(zones[ok], HPAGE_PMD_NR)
    vma.thp[pages] = True
    return idx[vma.nodes[idx] < 0], int(pages.size)


def _retry(req: AllocRequest, nodes: np.ndarray, zones: np.ndarray,
           alloc: Callable[[AllocRequest, np.ndarray], tuple[np.ndarray, np.ndarray]], *,
           nodemask: frozenset[int] | None) -> None:
    miss = np.flatnonzero(nodes < 0)
    if miss.size:
        pref = np.asarray(req.preferred_nid, dtype=np.int64)
        pref = pref[miss] if pref.ndim else pref
        n2, z2 = alloc(replace(req, count=int(miss.size), preferred_nid=pref, nodemask=nodemask), miss)
        nodes[miss], zones[miss] = n2, z2
