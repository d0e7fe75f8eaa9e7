"""The kernel's memory-policy modes written as placement plug-ins (``policy_nodemask`` + ``alloc_pages_mpol``).

Each built-in turns the :class:`~numasim.kernel.mempolicy.MemPolicy` in force (or one it was built with) into
a :class:`~numasim.kernel.protocol.PlacementDecision`, vectorised over the faulting pages:

========================  ==================================================================================
``default`` / ``local``   the faulting CPU's node, fallback along its zonelist
``preferred``             the policy's node, fallback along *that node's* zonelist
``bind``                  the CPU node's zonelist restricted to the mask (home node if set); never spills
``preferred_many``        the mask first without direct reclaim, then every node (two allocator passes)
``interleave``            node ``ilx % weight`` of the mask per page; fallback along the target's zonelist
``weighted_interleave``   the same with the sysfs weights
========================  ==================================================================================

Source: mm/mempolicy.c (``policy_nodemask``, ``alloc_pages_mpol``, ``interleave_nid``,
``weighted_interleave_nid``).
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.errors import PolicyError
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
    NUMA_NO_NODE,
    MemPolicy,
    interleave_nid_array,
    weighted_interleave_nid_array,
)
from numasim.kernel.policy_names import MODES
from numasim.kernel.protocol import PlacementContext, PlacementDecision

__all__ = ["KernelMode", "BUILTIN_MODES", "decide"]

BUILTIN_MODES: dict[str, int] = {name: (-1 if name == "default" else mode) for name, mode in MODES.items()}
"""Built-in plug-in names -> MPOL mode (``default`` = no policy: the per-node preferred policy)."""


def decide(pol: MemPolicy | None, ctx: PlacementContext) -> PlacementDecision:
    """The allocator request the kernel makes for ``ctx``'s pages under ``pol`` (None = default policy)."""
    if pol is None or pol.mode == MPOL_LOCAL:
        return PlacementDecision(preferred=ctx.cpu_node)
    if pol.mode == MPOL_PREFERRED:
        # A user PREFERRED policy and the per-node default policy both start at their node's zonelist.
        return PlacementDecision(preferred=min(pol.nodes))
    home = pol.home_node if pol.home_node != NUMA_NO_NODE else ctx.cpu_node
    if pol.mode == MPOL_PREFERRED_MANY:
        return PlacementDecision(preferred=home, nodemask=pol.nodes, soft_mask=True)
    if pol.mode == MPOL_BIND:
        # policy_nodemask: the mask applies for user pages (gfp_zone MOVABLE >= policy_zone) unless it no
        # longer intersects the cpuset (cpuset_nodemask_valid_mems_allowed).
        mask = pol.nodes if pol.nodes & ctx.mems_allowed else None
        return PlacementDecision(preferred=home, nodemask=mask)
    if pol.mode == MPOL_INTERLEAVE:
        return PlacementDecision(preferred=interleave_nid_array(pol, ctx.ilx, ctx.version), interleave=True)
    if pol.mode == MPOL_WEIGHTED_INTERLEAVE:
        return PlacementDecision(preferred=weighted_interleave_nid_array(pol, ctx.ilx, ctx.weights), interleave=True)
    raise PolicyError(f"policy mode {pol.mode} has no placement rule")


@dataclass(frozen=True)
class KernelMode:
    """A built-in plug-in for one kernel mode.

    Parameters
    ----------
    name : str
        One of :data:`BUILTIN_MODES`.
    policy : MemPolicy, optional
        A fixed policy (e.g. ``interleave`` over nodes 0-1) to apply whatever the task's policy is. Without it
        the plug-in applies the kernel policy in force (``ctx.policy``) and checks it has this mode.

    Examples
    --------
    >>> KernelMode("interleave").name
    'interleave'
    """

    name: str
    policy: MemPolicy | None = None

    def __post_init__(self) -> None:
        if self.name not in BUILTIN_MODES:
            raise PolicyError(f"no built-in policy {self.name!r} (built-ins: {', '.join(BUILTIN_MODES)})")
        if self.policy is not None and self.name != "default" and self.policy.mode != BUILTIN_MODES[self.name]:
            raise PolicyError(f"built-in {self.name!r} given a policy of mode {self.policy.name!r}")

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        if self.name == "default":
            return decide(None, ctx)
        pol = self.policy if self.policy is not None else ctx.policy
        if pol is None or pol.mode != BUILTIN_MODES[self.name]:
            if self.name == "local":
                return decide(None, ctx)
            raise PolicyError(f"built-in {self.name!r} needs a {self.name} policy with nodes (got {pol})")
        return decide(pol, ctx)
