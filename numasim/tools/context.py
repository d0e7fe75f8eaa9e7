"""What every virtual tool runs in: a simulated kernel, the task the tool runs as, and the calibration.

A virtual tool behaves like the real binary started by a shell (possibly under ``numactl``): its buffers are
``mmap``-ed in its task and faulted in under the task's memory policy, from the cpu the task runs on, by the
simulated kernel (:mod:`numasim.kernel`); their pages become the engine's :class:`~numasim.engine.PageMap`;
the engine (:func:`numasim.engine.simulate`) times the tool's accesses.

Calibration rule (never silently nominal): the calibration the tool's process was started with
(``run_numactl(..., calibration=)``, what ``numasim numactl --calibration F|--nominal`` does), else
:func:`numasim.timing.resolve.resolve_calibration`, the one set of rules every timing result depends on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from numasim.engine.pagemap import PageMap
from numasim.errors import CalibrationError, PolicyError, WorkloadError
from numasim.kernel import mempolicy as mp
from numasim.kernel.kernel import Kernel
from numasim.kernel.task import VMA, Task
from numasim.timing.model import Calibration
from numasim.topology.model import Machine
from numasim.units import PAGE_SIZE_BYTES

__all__ = [
    "ToolContext",
    "tool_context",
    "map_buffer",
    "page_map",
]

@dataclass
class ToolContext:
    """A tool process: the kernel it runs on, its task (policy, affinity, cpu), the calibration and the seed."""

    kernel: Kernel
    task: Task
    calibration: Calibration
    seed: int = 0

    @property
    def machine(self) -> Machine:
        return self.kernel.machine

    @property
    def cpu(self) -> int:
        return self.task.cpu

    @property
    def node(self) -> int:
        return self.kernel.cpu_to_node[self.task.cpu]

    def cpus(self, count: int | None = None) -> list[int]:
        """The first ``count`` allowed cpus in OpenMP order (``OMP_PROC_BIND=close``: ascending ids)."""
        allowed = sorted(self.task.cpus_allowed)
        if count is None:
            return allowed
        if count < 1:
            raise WorkloadError(f"thread count = {count}: must be at least 1")
        return [allowed[k % len(allowed)] for k in range(count)]


def tool_context(
    machine: Machine,
    calibration: Calibration,
    *,
    comm: str = "tool",
    cpunodebind: Iterable[int] | None = None,
    physcpubind: Iterable[int] | None = None,
    membind: Iterable[int] | None = None,
    interleave: Iterable[int] | None = None,
    preferred: int | None = None,
    kernel: Kernel | None = None,
    seed: int = 0,
) -> ToolContext:
    """A fresh task on ``machine`` as ``numactl --cpunodebind=.. --membind=.. TOOL`` would start it.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing.resolve import resolve_calibration
    >>> m = load_machine("seed-003-2node")
    >>> ctx = tool_context(m, resolve_calibration(m), cpunodebind=[0], membind=[1])
    >>> ctx.node, ctx.task.mempolicy.mode
    (0, 2)
    """
    if calibration.machine != machine.name:
        raise CalibrationError(f"calibration {calibration.id} is for {calibration.machine!r}, not {machine.name!r}")
    k = kernel if kernel is not None else Kernel(machine)
    cpus: set[int] | None = None
    if cpunodebind is not None:
        cpus = {c for n in cpunodebind for c in machine.node(n).cpus}
    if physcpubind is not None:
        chosen = set(physcpubind)
        cpus = chosen if cpus is None else cpus & chosen
    task = k.spawn(comm, cpus=sorted(cpus) if cpus is not None else None)
    given = [x is not None for x in (membind, interleave, preferred)]
    if sum(given) > 1:
        raise PolicyError("membind, interleave and preferred are exclusive (numactl: Conflicting policies)")
    res = None
    if membind is not None:
        res = k.set_mempolicy(task, mp.MPOL_BIND, set(membind))
    elif interleave is not None:
        res = k.set_mempolicy(task, mp.MPOL_INTERLEAVE, set(interleave))
    elif preferred is not None:
        res = k.set_mempolicy(task, mp.MPOL_PREFERRED, {preferred})
    if res is not None and not res.ok:
        raise PolicyError(f"set_mempolicy for {comm}: {res.errno} ({res.why})")
    return ToolContext(k, task, calibration, seed)


def map_buffer(ctx: ToolContext, length: int, *, cpu: int | None = None, kind: str = "anon") -> VMA:
    """``mmap`` + first touch of ``length`` bytes in the tool's task (from ``cpu``, default its cpu).

    Raises :class:`WorkloadError` if the kernel could not place every page (OOM).
    """
    vma = ctx.kernel.mmap(ctx.task, length, kind=kind)  # type: ignore[arg-type]
    res = ctx.kernel.touch(ctx.task, vma.start, vma.end - vma.start, cpu=cpu)
    if getattr(res, "oom_killed", False) or not ctx.task.alive or (vma.nodes < 0).any():
        raise WorkloadError(
            f"{ctx.task.comm}: the kernel could not place a {length}-byte buffer (out of memory under its policy)"
        )
    return vma


def page_map(vmas: Iterable[VMA]) -> PageMap:
    """The engine's page map of the given (fully placed) mappings."""
    pm = PageMap(PAGE_SIZE_BYTES)
    for v in vmas:
        nodes = np.asarray(v.nodes)
        if (nodes < 0).any():
            raise WorkloadError(f"mapping at {v.start:#x} has pages that were never placed")
        pm.assign(v.start, nodes)
    return pm
