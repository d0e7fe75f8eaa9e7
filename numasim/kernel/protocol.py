"""The placement-policy plug-in protocol: one method that says where a batch of faulting pages should go.

A policy sees a :class:`PlacementContext` (the machine, the faulting CPU and its node, the interleave index and
address of every page, free memory per node, the kernel policy in force, optional per-page hints such as a
hotness score) and returns a :class:`PlacementDecision`: a preferred node per page plus an optional nodemask.
The kernel then feeds that decision to the page allocator, so zonelist fallback, watermarks, cpusets, OOM and
the numastat counters stay the kernel's. The kernel's own modes (``MPOL_BIND``, ``MPOL_INTERLEAVE``, ...) are
written against the same protocol (:mod:`numasim.kernel.modes`).

Writing a plug-in
-----------------
>>> import numpy as np
>>> class AllOnNodeZero:
...     name = "all_on_zero"
...     def place(self, ctx, count):
...         return PlacementDecision(preferred=0)
>>> isinstance(AllOnNodeZero(), PlacementPolicy)
True

Attach it with ``kernel.set_placement(task, AllOnNodeZero())`` or load one from a file or an entry point
with :func:`numasim.kernel.registry.load_policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from numasim.kernel.mempolicy import KernelVersion, MemPolicy, WeightedInterleaveWeights

if TYPE_CHECKING:
    from numasim.topology.model import Machine

__all__ = ["PlacementContext", "PlacementDecision", "PlacementPolicy"]


@dataclass(frozen=True)
class PlacementContext:
    """Everything a placement policy may look at for one batch of faulting pages.

    Attributes
    ----------
    machine : Machine
    cpu, cpu_node : int
        The faulting CPU and its node (``numa_node_id()``).
    ilx : numpy.ndarray of int64
        Interleave index of each page (absolute virtual page number for private anonymous memory).
    addresses : numpy.ndarray of int64
        Virtual address of each page.
    free_pages, total_pages : numpy.ndarray of int64
        Free and managed pages per node, indexed by node id (0 for memoryless nodes). Computed on first use
        from ``free_pages_source`` / ``total_pages_source`` (an array or a function returning one), so
        policies that never look at them cost nothing.
    memory_nodes : frozenset of int
        Nodes with memory (``N_MEMORY``).
    mems_allowed : frozenset of int
        The task's cpuset memory nodes.
    policy : MemPolicy or None
        The kernel memory policy in force for these pages (VMA's, else task's; None = default).
    weights : WeightedInterleaveWeights
        The sysfs weighted-interleave table.
    version : tuple of int
        Kernel version, e.g. ``(6, 12)``.
    hints : Mapping[str, numpy.ndarray]
        Optional per-page data passed to ``Kernel.touch(..., hints=...)``, e.g. ``{"hotness": ...}``.
    pid : int
    """

    machine: Machine
    cpu: int
    cpu_node: int
    ilx: np.ndarray
    addresses: np.ndarray
    free_pages_source: np.ndarray | Callable[[], np.ndarray]
    total_pages_source: np.ndarray | Callable[[], np.ndarray]
    memory_nodes: frozenset[int]
    mems_allowed: frozenset[int]
    policy: MemPolicy | None
    weights: WeightedInterleaveWeights
    version: KernelVersion = (6, 12)
    hints: Mapping[str, np.ndarray] = field(default_factory=dict)
    pid: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def free_pages(self) -> np.ndarray:
        src = self.free_pages_source
        return np.asarray(src() if callable(src) else src, dtype=np.int64)

    @cached_property
    def total_pages(self) -> np.ndarray:
        src = self.total_pages_source
        return np.asarray(src() if callable(src) else src, dtype=np.int64)

    @property
    def count(self) -> int:
        return int(self.ilx.size)

    def usable_nodes(self) -> list[int]:
        """Memory nodes the task may allocate from, ascending."""
        return sorted(self.memory_nodes & self.mems_allowed)


@dataclass(frozen=True)
class PlacementDecision:
    """Where a batch of pages should go; the allocator does the rest.

    Attributes
    ----------
    preferred : int or numpy.ndarray
        Preferred node for every page (one int), or one per page. The allocator starts at that node's zonelist
        and falls back along it.
    nodemask : frozenset of int or None
        Nodes the pages may use at all (``MPOL_BIND``): never left, OOM when exhausted.
    soft_mask : bool
        ``MPOL_PREFERRED_MANY`` semantics: try ``nodemask`` first without direct reclaim, then any node.
    interleave : bool
        Count ``interleave_hit`` on pages that land on their preferred node.
    """

    preferred: int | np.ndarray
    nodemask: frozenset[int] | None = None
    soft_mask: bool = False
    interleave: bool = False

    def preferred_array(self, count: int) -> np.ndarray:
        """The preferred node of each of ``count`` pages as an int64 array."""
        if isinstance(self.preferred, np.ndarray):
            arr = self.preferred.astype(np.int64, copy=False)
            if arr.shape != (count,):
                raise ValueError(f"placement gave {arr.shape} preferred nodes for {count} pages")
            return arr
        return np.full(count, int(self.preferred), dtype=np.int64)


@runtime_checkable
class PlacementPolicy(Protocol):
    """A placement policy plug-in: a ``name`` and a vectorised ``place``."""

    @property
    def name(self) -> str:
        """Short name shown in reports (a plain class attribute is fine)."""
        ...

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        """Decide where the ``count`` pages described by ``ctx`` go (one call per fault batch)."""
        ...
