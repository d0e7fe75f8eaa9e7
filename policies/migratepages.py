"""``migratepages PID FROM TO`` in the middle of a run: the kernel's ``migrate_pages(2)``, timed.

What-if question: *a job runs with its memory on the wrong node; an operator (or a tool) runs ``migratepages``
after a while. What does the move cost the job while it happens, and what does it gain afterwards?*

At ``at_ms`` of simulated time (and, with ``every_ms``, again every so often) this daemon calls the simulated
kernel's ``migrate_pages(pid, from, to)`` with the semantics of the real syscall (node mapping of ``from`` onto
``to``, ``__GFP_THISNODE`` allocation, pages that do not fit stay; numasim/kernel/syscalls.py); what moved, and
what that costs on the links, follows :mod:`numasim.kernel.timed_syscalls`.

Parameters: ``at_ms`` (default 10), ``from_nodes`` and ``to_nodes`` (node lists as ``0`` or ``0;1``, the
numactl syntax with ``;`` for ``,``, since ``,`` separates daemon parameters), ``every_ms`` (0: once).
Use: ``numasim run ... --daemon migratepages:at_ms=50,from_nodes=1,to_nodes=0``. Counters in the result's
``kernel.vmstat``: ``migratepages_calls``, ``pgmigrate_success``, ``pgmigrate_fail``.
"""

from __future__ import annotations

from typing import Any

from numasim.kernel.errno import SyscallResult
from numasim.kernel.timed_syscalls import TimedSyscall, node_list


class MigratePages(TimedSyscall):
    """``migrate_pages(pid, from_nodes, to_nodes)`` at ``at_ms`` (see the module docstring)."""

    name = "migratepages"

    def __init__(self, kernel: Any, task: Any, *, at_ms: float = 10.0, from_nodes: Any = 1, to_nodes: Any = 0,
                 every_ms: float = 0.0) -> None:  # fmt: skip
        super().__init__(kernel, task, at_ms=at_ms, every_ms=every_ms)
        self.from_nodes, self.to_nodes = node_list(from_nodes, "from_nodes"), node_list(to_nodes, "to_nodes")
        self.check_nodes(self.from_nodes + self.to_nodes)

    def syscall(self) -> SyscallResult:
        return self.kernel.migrate_pages(self.task, self.from_nodes, self.to_nodes)  # type: ignore[no-any-return]

    def assumptions(self) -> dict[str, Any]:
        return {"at_ms": self.at_ns / 1e6, "every_ms": self.every_ns / 1e6, "from_nodes": self.from_nodes,
                "to_nodes": self.to_nodes}  # fmt: skip


def make_daemon(kernel: Any, task: Any, **params: Any) -> MigratePages:
    """The daemon for ``task`` of ``kernel`` (what ``numasim run --daemon migratepages`` calls)."""
    return MigratePages(kernel, task, **params)
