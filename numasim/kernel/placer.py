"""Placement, written once: which policy code places a mapping's new pages, the context it decides from, and
the allocator requests its decision becomes.

Every path that places pages goes through these: first-touch faults (fault.py), transparent huge pages (thp.py),
``mbind``'s moves (syscalls.py) and every migration (migrate.py, which NUMA balancing, tiering and the daemons use).
They take the kernel as their first argument; the kernel itself keeps only its syscalls and state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from numasim.kernel.mempolicy import MemPolicy
from numasim.kernel.modes import KernelMode, decide
from numasim.kernel.protocol import PlacementContext, PlacementDecision, PlacementPolicy

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import VMA, Task

__all__ = [
    "Placed",
    "placement_for",
    "effective_placement",
    "is_kernel_placement",
    "placement_context",
    "allocate",
]


@dataclass(frozen=True)
class Placed:
    """Pages the allocator placed for one request: node and zone per page (-1 = not allocated), OOM flag."""

    nodes: np.ndarray
    zones: np.ndarray
    oom: bool = False
    reclaimed: int = 0
    """Pages direct reclaim (or node_reclaim) freed for this request."""
    first_reclaim: int = -1
    """Index of the first page whose allocation reclaimed (-1: none): where the faulting thread stalls."""


_DEFAULT = KernelMode("default")


def effective_placement(kernel: Kernel, task: Task, vma: VMA | None) -> PlacementPolicy:
    """The plug-in that places ``vma``'s new pages: attached plug-in, else the kernel mode in force."""
    return placement_for(task, vma, kernel.vma_own_policy(vma) if vma is not None else None)


def placement_for(task: Task, vma: VMA | None, own: MemPolicy | None) -> PlacementPolicy:
    """As :func:`effective_placement`, given the mapping's own policy ``own`` for the pages at hand."""
    if vma is not None and vma.placement is not None:
        return vma.placement
    if own is not None:
        return _KERNEL_POLICY
    if task.placement is not None:
        return task.placement
    return _KERNEL_POLICY if task.mempolicy is not None else _DEFAULT


def is_kernel_placement(plugin: PlacementPolicy) -> bool:
    """Whether ``plugin`` is the kernel's own policy code (a mode or the policy in force), not a plug-in."""
    return plugin is _KERNEL_POLICY or isinstance(plugin, KernelMode)


def placement_context(
    kernel: Kernel,
    task: Task,
    vma: VMA,
    idx: np.ndarray,
    cpu: int,
    hints: Mapping[str, np.ndarray] | None = None,
    policy: MemPolicy | None | object = None,
) -> PlacementContext:
    """The :class:`PlacementContext` of faulting pages ``idx`` of ``vma`` from ``cpu``.

    ``policy``: the mapping's own policy for these pages if already looked up (else looked up at the
    first page); the task policy applies when it is None.
    """
    if not isinstance(policy, MemPolicy):
        policy = kernel.effective_policy(task, vma, int(idx[0]) if len(idx) else 0)
    return PlacementContext(
        machine=kernel.machine,
        cpu=cpu,
        cpu_node=kernel.cpu_to_node[cpu],
        ilx=vma.ilx(idx, kernel.version),
        addresses=vma.addresses(idx),
        free_pages_source=kernel.free_pages_per_node,
        total_pages_source=kernel.total_pages_per_node,
        memory_nodes=kernel.memory_nodes,
        mems_allowed=task.mems_allowed,
        policy=policy,
        weights=kernel.weighted_interleave_weights,
        version=kernel.version,
        hints=dict(hints or {}),
        pid=task.pid,
    )


def allocate(
    kernel: Kernel,
    decision: PlacementDecision,
    count: int,
    cpu_node: int,
    mems_allowed: frozenset[int],
    *,
    migrating: bool = False,
    thisnode: bool = False,
) -> Placed:
    """Turn a placement decision into allocator requests (``alloc_pages_mpol``).

    ``migrating`` allocations (migration targets) never trigger the OOM killer; ``thisnode`` is
    ``__GFP_THISNODE`` (migrate_pages / move_pages targets).
    """
    from numasim.kernel.gfp import GFP_HIGHUSER_MOVABLE, Gfp
    from numasim.kernel.physmem import AllocRequest

    gfp = GFP_HIGHUSER_MOVABLE
    if migrating:
        gfp = gfp | Gfp.RETRY_MAYFAIL
    if thisnode:
        gfp = gfp | Gfp.THISNODE
    preferred = decision.preferred_array(count)
    mems = mems_allowed if kernel.cpusets_enabled else None

    def run(pref: np.ndarray, mask: frozenset[int] | None, no_reclaim: bool) -> Any:
        scalar = bool(pref.size) and bool(np.all(pref == pref[0]))
        return kernel.pm.alloc(
            AllocRequest(
                count=int(pref.size),
                preferred_nid=int(pref[0]) if scalar else pref,
                nodemask=mask,
                cpu_node=cpu_node,
                gfp=gfp,
                interleave=decision.interleave,
                no_direct_reclaim=no_reclaim,
                mems_allowed=mems,
            )
        )

    if count == 0:
        return Placed(np.empty(0, np.int16), np.empty(0, np.int16))
    reclaimed, first_reclaim = 0, -1
    if decision.soft_mask and decision.nodemask is not None:
        first = run(preferred, decision.nodemask, True)
        nodes, zones = _padded(first, count)
        missing = np.flatnonzero(nodes < 0)
        oom = False
        if missing.size:
            second = run(preferred[missing], None, False)
            nodes[missing], zones[missing] = _padded(second, int(missing.size))
            oom = bool(second.oom)
            reclaimed = int(second.reclaimed)
            first_reclaim = int(missing[second.first_reclaim]) if second.first_reclaim >= 0 else -1
    else:
        res = run(preferred, decision.nodemask, False)
        nodes, zones = _padded(res, count)
        oom = bool(res.oom)
        reclaimed, first_reclaim = int(res.reclaimed), int(res.first_reclaim)
    return Placed(nodes, zones, oom and not migrating and not thisnode, reclaimed, first_reclaim)


def _padded(res: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    # The allocator returns the pages it placed, in request order, stopping at the first failure.
    nodes = np.full(count, -1, dtype=np.int16)
    zones = np.full(count, -1, dtype=np.int16)
    got = np.asarray(res.nodes)
    nodes[: got.size] = got
    zones[: got.size] = np.asarray(res.zones)
    return nodes, zones


class _KernelPolicy:
    """Applies whatever kernel ``MemPolicy`` is in force (the VMA's or task's)."""

    name = "kernel"

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        return decide(ctx.policy, ctx)


_KERNEL_POLICY = _KernelPolicy()
