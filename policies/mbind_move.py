"""``mbind(..., MPOL_MF_MOVE)`` on all of a process's memory in the middle of a run: re-place what is there.

What-if question: *a job started with its memory where first touch put it; at some point it (or a library
it loads) calls ``mbind`` with ``MPOL_MF_MOVE`` to interleave or bind its memory. What does moving the
existing pages cost while the job runs, and what does the new placement gain?*

At ``at_ms`` of simulated time this daemon calls the simulated kernel's ``mbind(2)`` over every mapping of the
process with ``policy`` (``MODE[:NODES]`` as ``--policy`` takes it, ``;`` for ``,`` in node lists) and
``MPOL_MF_MOVE`` (``move_all=1``: ``MPOL_MF_MOVE_ALL``), with the real syscall's semantics (numasim/kernel/
syscalls.py: pages that do not comply with the new policy move to where it places them); what moved, and what
that costs on the links, follows :mod:`numasim.kernel.timed_syscalls`.

Use: ``numasim run ... --daemon mbind_move:at_ms=50,policy=interleave:0;1``. Counters in the result's
``kernel.vmstat``: ``mbind_move_calls``, ``pgmigrate_success``.
"""

from __future__ import annotations

from typing import Any

from numasim.kernel.errno import SyscallResult
from numasim.kernel.mempolicy import MPOL_MF_MOVE, MPOL_MF_MOVE_ALL
from numasim.kernel.timed_syscalls import TimedSyscall
from numasim.workload.placement import mode_args
from numasim.workload.policy_text import parse_policy


class MbindMove(TimedSyscall):
    """``mbind(every mapping, policy, MPOL_MF_MOVE)`` at ``at_ms`` (see the module docstring)."""

    name = "mbind_move"

    def __init__(self, kernel: Any, task: Any, *, at_ms: float = 10.0, policy: str = "interleave:all",
                 move_all: int = 0, every_ms: float = 0.0) -> None:  # fmt: skip
        super().__init__(kernel, task, at_ms=at_ms, every_ms=every_ms)
        self.policy = str(policy).replace(";", ",")
        self.mode, self.nodes = mode_args(parse_policy(self.policy), kernel.machine, "mbind_move: policy")
        self.flags = MPOL_MF_MOVE_ALL if int(move_all) else MPOL_MF_MOVE

    def syscall(self) -> SyscallResult:
        res = SyscallResult(0)
        for vma in list(self.task.mm.vmas_in(0, 1 << 62)):
            res = self.kernel.mbind(self.task, vma.start, vma.end - vma.start, self.mode, self.nodes, flags=self.flags)
            if res.ret < 0:
                return res
        return res

    def assumptions(self) -> dict[str, Any]:
        return {"at_ms": self.at_ns / 1e6, "policy": self.policy, "flags": self.flags}


def make_daemon(kernel: Any, task: Any, **params: Any) -> MbindMove:
    """The daemon for ``task`` of ``kernel`` (what ``numasim run --daemon mbind_move`` calls)."""
    return MbindMove(kernel, task, **params)
