"""Page migration, written once: allocate the new pages, free the old ones, commit the move.

Every path that moves pages goes through :func:`migrate_vma_pages`: ``mbind(MPOL_MF_MOVE)`` (targets from the new
policy, ``alloc_migration_target_by_mpol``), ``migrate_pages(2)`` and ``move_pages(2)`` (one target node,
``__GFP_THISNODE``), and NUMA balancing's misplaced-page migration (``migrate_misplaced_folio``, one node, no OOM).
The kernel's ``migrate_pages()`` core does the same three steps per folio (mm/migrate.c: allocate the target with
the caller's ``new_folio`` callback, move the contents, free the source); numasim does them per batch, vectorised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.placer import allocate
from numasim.kernel.protocol import PlacementDecision

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import VMA, Task

__all__ = ["migrate_vma_pages", "to_node"]


def to_node(node: int) -> PlacementDecision:
    """The target of a migration to one node (``__GFP_THISNODE`` semantics come with ``thisnode=True``)."""
    return PlacementDecision(preferred=node, nodemask=frozenset({node}))


def migrate_vma_pages(
    k: Kernel, task: Task, vma: VMA, idx: np.ndarray, decision: PlacementDecision, *, cpu_node: int | None = None,
    thisnode: bool = False,
) -> np.ndarray:
    """Move pages ``idx`` of ``vma`` to where ``decision`` places them; return the boolean mask of moved pages.

    The new pages are allocated first (as a migration: ``migrating=True``, never the OOM killer); where that
    fails the page stays where it is. Moved pages free their old frames. ``idx`` must hold present pages.
    """
    idx = np.asarray(idx, dtype=np.int64)
    if vma.hugetlb:
        return np.zeros(idx.size, dtype=bool)  # hugetlb migration is not modelled: the pages stay (row H9)
    node = k.cpu_to_node[task.cpu] if cpu_node is None else cpu_node
    placed = allocate(k, decision, int(idx.size), node, task.mems_allowed, migrating=True, thisnode=thisnode)
    ok = placed.nodes >= 0
    moved = idx[ok]
    if moved.size:
        k.pm.free(vma.nodes[moved].copy(), vma.zones[moved].copy())
        vma.nodes[moved] = placed.nodes[ok]
        vma.zones[moved] = placed.zones[ok]
        # moved as base pages: each huge folio they were part of is split, all of its 512 pages (coverage row H7)
        huge = moved[vma.thp[moved]]  # (a THP block is huge in all of its pages: the others need nothing)
        if huge.size:
            first = (vma.start >> 12) & 511
            blocks = np.unique((huge + first) >> 9)
            pages = ((blocks[:, None] << 9) + np.arange(512) - first).ravel()
            pages = pages[(pages >= 0) & (pages < vma.npages)]
            vma.thp[pages] = False
    return ok
