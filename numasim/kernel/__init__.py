"""Kernel layer: Linux's NUMA memory placement re-implemented (mm/page_alloc.c, mm/mempolicy.c, mm/vmstat.c).

* physical memory: zones, watermarks, ``build_zonelists``, the allocator walk and numastat counters
  (:class:`PhysicalMemory`);
* memory policies: every ``MPOL_*`` mode and flag with the syscalls' validation and errnos, per-task and
  per-VMA policies, interleave and weighted interleave, cpusets (:class:`Kernel` is the facade);
* pluggable placement: :class:`PlacementPolicy` plug-ins, the kernel's modes being the built-in ones
  (:func:`load_policy`, entry-point group ``numasim.policies``);
* what user space reads: /proc (:mod:`numasim.kernel.procfs`) and /sys (:mod:`numasim.kernel.sysfs`).

The programs (numactl, numastat, memhog, stress, the measurement tools) are user space, :mod:`numasim.tools`,
which calls this layer's syscalls; this layer never imports it (``tests/test_layers.py``).
"""

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel, OomKill, Placed
from numasim.kernel.physmem import AllocRequest, AllocResult, PhysicalMemory
from numasim.kernel.protocol import PlacementContext, PlacementDecision, PlacementPolicy
from numasim.kernel.registry import available_policies, load_policy, register_policy
from numasim.kernel.syscalls import SyscallResult

__all__ = [
    "KernelConfig",
    "Kernel",
    "OomKill",
    "Placed",
    "PhysicalMemory",
    "AllocRequest",
    "AllocResult",
    "SyscallResult",
    "PlacementPolicy",
    "PlacementContext",
    "PlacementDecision",
    "load_policy",
    "available_policies",
    "register_policy",
]
