"""``move_pages(2)`` in the middle of a run: move a share of a process's pages to one node.

What-if question: *a runtime (a JVM's GC, a database's buffer manager) knows which pages a thread will use and
moves them with ``move_pages`` while the job runs: what does the move cost, and what does it gain?*

At ``at_ms`` of simulated time this daemon calls the simulated kernel's ``move_pages(pid, pages, nodes,
MPOL_MF_MOVE)`` for the first ``fraction`` of the present pages of every mapping of the process, all to
``to_node``, with the real syscall's semantics (per-page status, pages already there or shared stay;
numasim/kernel/syscalls.py); what moved, and what that costs on the links, follows
:mod:`numasim.kernel.timed_syscalls`.

Use: ``numasim run ... --daemon move_pages:at_ms=50,to_node=0,fraction=0.5``. Counters in the result's
``kernel.vmstat``: ``move_pages_calls``, ``pgmigrate_success``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numasim.kernel.errno import SyscallResult
from numasim.kernel.timed_syscalls import TimedSyscall


class MovePages(TimedSyscall):
    """``move_pages`` of the first ``fraction`` of each mapping's present pages to ``to_node`` at ``at_ms``."""

    name = "move_pages"

    def __init__(self, kernel: Any, task: Any, *, at_ms: float = 10.0, to_node: int = 0, fraction: float = 1.0,
                 every_ms: float = 0.0) -> None:  # fmt: skip
        super().__init__(kernel, task, at_ms=at_ms, every_ms=every_ms)
        if not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"move_pages: fraction = {fraction}: must be in [0, 1]")
        self.to_node, self.fraction = int(to_node), float(fraction)
        self.check_nodes([self.to_node])

    def syscall(self) -> SyscallResult:
        addrs: list[int] = []
        for vma in self.task.mm.vmas_in(0, 1 << 62):
            present = np.flatnonzero(vma.nodes >= 0)
            take = present[: int(round(self.fraction * len(present)))]
            addrs += (vma.start + (take << 12)).tolist()
        if not addrs:
            return SyscallResult(0)
        return self.kernel.move_pages(self.task, addrs, [self.to_node] * len(addrs))  # type: ignore[no-any-return]

    def assumptions(self) -> dict[str, Any]:
        return {"at_ms": self.at_ns / 1e6, "to_node": self.to_node, "fraction": self.fraction}


def make_daemon(kernel: Any, task: Any, **params: Any) -> MovePages:
    """The daemon for ``task`` of ``kernel`` (what ``numasim run --daemon move_pages`` calls)."""
    return MovePages(kernel, task, **params)
