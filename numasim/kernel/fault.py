"""First-touch page faults: lazily allocate the untouched pages of a range under the policy in force.

``do_anonymous_page`` -> ``vma_alloc_folio`` -> ``get_vma_policy`` + ``alloc_pages_mpol`` (mm/memory.c,
mm/mempolicy.c), for a whole range at once: the untouched pages are found with numpy, the policy (a plug-in
attached to the VMA or task, else the VMA policy, else the task policy, else the per-node default) decides a
preferred node per page from the interleave indices, and the allocator places them in one call (two for
``MPOL_PREFERRED_MANY``). An OOM kills the faulting task (recorded by the kernel); BIND never spills.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.task import PAGE_SHIFT, PAGE_SIZE, VMA, Task

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numasim.kernel.kernel import Kernel

__all__ = ["FaultResult", "fault_range"]


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
    missing = np.flatnonzero(vma.nodes[i0:i1] < 0)
    if missing.size == 0:
        return FaultResult()
    idx = i0 + missing
    cpu = task.cpu if cpu is None else cpu
    page_hints: dict[str, np.ndarray] = {}
    for key, values in (hints or {}).items():
        arr = np.asarray(values)
        if arr.shape[0] != i1 - i0:
            raise ValueError(f"hint {key!r} has {arr.shape[0]} values for {i1 - i0} pages")
        page_hints[key] = arr[missing]
    ctx = kernel.placement_context(task, vma, idx, cpu, page_hints)
    plugin = kernel.effective_placement(task, vma)
    decision = plugin.place(ctx, int(idx.size))
    out = kernel.allocate(decision, int(idx.size), ctx.cpu_node, task.mems_allowed)
    ok = out.nodes >= 0
    vma.nodes[idx[ok]] = out.nodes[ok]
    vma.zones[idx[ok]] = out.zones[ok]
    failed = int(idx.size - np.count_nonzero(ok))
    if out.oom:
        kernel.oom_kill(task, f"page fault at {int(vma.addresses(idx[~ok][:1])[0]) if failed else lo:#x}")
        return FaultResult(int(np.count_nonzero(ok)), failed, True)
    return FaultResult(int(np.count_nonzero(ok)), failed, False)
