"""The policy string of a workload file: ``MODE[:NODES[:FLAGS]]``, e.g. ``"interleave:0-3"``, ``"bind:1"``.

Mode names follow ``numactl`` and the kernel's ``MPOL_*`` constants (``include/uapi/linux/mempolicy.h``):
``default``, ``local``, ``bind``, ``preferred``, ``preferred_many``, ``interleave``, ``weighted_interleave``.
Nodes use the kernel list format (``"0-3,8"``), or ``all`` as numactl takes it (every node with memory, resolved
on the machine the workload runs on). Flags are ``static`` (``MPOL_F_STATIC_NODES``), ``relative``
(``MPOL_F_RELATIVE_NODES``) and ``balancing`` (``MPOL_F_NUMA_BALANCING``), joined with ``,`` or ``+``.

This module only checks the *syntax* and the node/flag combinations that are errors whatever the machine is;
whether the nodes exist is the kernel's question (``mbind`` returns ``EINVAL``), asked when the workload runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.errors import PolicyError
from numasim.kernel.policy_names import MODES, split_policy
from numasim.topology.cpulist import format_cpulist, parse_cpulist

__all__ = ["PolicySpec", "parse_policy", "POLICY_MODES"]

POLICY_MODES: tuple[str, ...] = tuple(MODES)
"""Mode names a policy string takes (numasim.kernel.policy_names: the one table; aliases are accepted too)."""
_NEEDS_NODES = {"bind", "preferred_many", "interleave", "weighted_interleave"}
_NO_NODES = {"default", "local"}


@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy: mode name, node list and flag names (all validated for syntax)."""

    mode: str
    nodes: tuple[int, ...] = ()
    flags: tuple[str, ...] = ()
    all_nodes: bool = False
    """``all``: every node with memory of the machine (``nodes`` is then empty)."""

    def __str__(self) -> str:
        text = self.mode
        if self.nodes or self.flags or self.all_nodes:
            text += ":" + ("all" if self.all_nodes else format_cpulist(list(self.nodes)))
        if self.flags:
            text += ":" + ",".join(self.flags)
        return text


def parse_policy(text: str) -> PolicySpec:
    """Parse ``MODE[:NODES[:FLAGS]]``.

    Examples
    --------
    >>> parse_policy("interleave:0-3")
    PolicySpec(mode='interleave', nodes=(0, 1, 2, 3), flags=(), all_nodes=False)
    >>> str(parse_policy("bind:1:static"))
    'bind:1:static'
    >>> parse_policy("preferred:")   # an empty preferred mask means local allocation, as in the kernel
    PolicySpec(mode='local', nodes=(), flags=(), all_nodes=False)
    >>> str(parse_policy("interleave:all"))
    'interleave:all'
    """
    mode, nodes_text, flags = split_policy(text)
    nodes: list[int] = []
    all_nodes = nodes_text is not None and nodes_text.strip().lower() == "all"
    if nodes_text is not None and nodes_text.strip() and not all_nodes:
        try:
            nodes = parse_cpulist(nodes_text)
        except ValueError as exc:
            raise PolicyError(f"policy {text!r}: bad node list {nodes_text!r}: {exc}") from None
    if "static" in flags and "relative" in flags:
        # sanitize_mpol_flags: both mode flags together -> EINVAL
        raise PolicyError(f"policy {text!r}: flags static and relative exclude each other")
    if mode in _NO_NODES and (nodes or all_nodes):
        raise PolicyError(f"policy {text!r}: mode {mode} takes no nodes")
    if mode == "preferred" and not nodes and not all_nodes:
        if flags and set(flags) & {"static", "relative"}:
            raise PolicyError(f"policy {text!r}: preferred with an empty node list cannot take {flags}")
        mode = "local"
    if mode in _NEEDS_NODES and not nodes and not all_nodes:
        raise PolicyError(f"policy {text!r}: mode {mode} needs a node list, e.g. {mode}:0-1")
    if "balancing" in flags and mode not in ("bind", "preferred_many"):
        raise PolicyError(f"policy {text!r}: flag balancing only applies to bind and preferred_many")
    return PolicySpec(mode=mode, nodes=tuple(nodes), flags=tuple(flags), all_nodes=all_nodes)
