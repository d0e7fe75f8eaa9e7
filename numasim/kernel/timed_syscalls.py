"""Memory syscalls made at a given simulated time of a timed run: ``migrate_pages(2)``, ``mbind(2)`` with
``MPOL_MF_MOVE``, by a daemon beside the program (``numasim run --daemon migratepages|mbind_move``).

:class:`TimedSyscall` is the part they share: at ``at_ms`` (and every ``every_ms``, if given) it calls the
simulated kernel's syscall with the real syscall's semantics, then tells the engine what moved -- every page whose
node changed changes node for the program's next accesses, and its copy (read on the old node, written on the new
one) is issued by the target node's kernel agent over the links and controllers. Pages it moved are base pages
afterwards (a moved huge page is split, coverage row H7). The caller's own cpu time is not the program's and is
not charged; a page is on its new node from the call on while its copy is still in flight (row M1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from numasim.engine.runtime import Daemon
from numasim.kernel.errno import SyscallResult

__all__ = ["TimedSyscall", "node_list"]


def node_list(text: Any, what: str) -> list[int]:
    """Node ids from ``0``, ``0;1`` (``;`` for ``,``: a comma separates daemon parameters) or an int.

    >>> node_list("0;2", "to_nodes")
    [0, 2]
    """
    try:
        return [int(p) for p in str(text).replace(";", ",").split(",") if p.strip() != ""]
    except ValueError:
        raise ValueError(f"{what} = {text!r}: expected node ids such as 0 or 0;1") from None


class TimedSyscall(Daemon):
    """A daemon that makes one memory syscall at ``at_ms`` (again every ``every_ms``); subclasses define
    :meth:`syscall` and ``name``."""

    name = "syscall"

    def __init__(self, kernel: Any, task: Any, *, at_ms: float = 10.0, every_ms: float = 0.0) -> None:
        if not at_ms >= 0:
            raise ValueError(f"{self.name}: at_ms = {at_ms}: must be >= 0")
        if not every_ms >= 0:
            raise ValueError(f"{self.name}: every_ms = {every_ms}: must be >= 0")
        self.kernel, self.task = kernel, task
        self.at_ns, self.every_ns = float(at_ms) * 1e6, float(every_ms) * 1e6
        self.vmstat = {f"{self.name}_calls": 0, "pgmigrate_success": 0, "pgmigrate_fail": 0}
        self.results: list[tuple[float, int, str | None]] = []  # (time, return value, errno)

    def check_nodes(self, nodes: list[int]) -> None:
        known = set(self.kernel.machine.node_ids)
        bad = [n for n in nodes if n not in known]
        if bad:
            raise ValueError(f"{self.name}: node {bad[0]}: no such node (nodes: {sorted(known)})")

    def syscall(self) -> SyscallResult:
        raise NotImplementedError

    def run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        yield env.timeout(self.at_ns)
        while True:
            self.call()
            if not self.every_ns:
                return
            yield env.timeout(self.every_ns)

    def _flat_ranges(self) -> list[tuple[Any, int, np.ndarray]]:
        """Each mapping of the process with its first flat page and its pages' indices in the mapping."""
        out = []
        for vma in self.task.mm.vmas_in(0, 1 << 62):
            lo = int(np.searchsorted(self.flat_vpn, np.uint64(vma.start >> 12)))
            hi = int(np.searchsorted(self.flat_vpn, np.uint64(vma.end >> 12)))
            if hi > lo:
                out.append((vma, lo, (self.flat_vpn[lo:hi] - np.uint64(vma.start >> 12)).astype(np.int64)))
        return out

    def call(self) -> None:
        """Make the syscall; what moved changes node for the engine and is copied over the links."""
        ranges = self._flat_ranges()  # (mbind may split mappings: taken before, the pages stay the same)
        before = [vma.nodes[index].copy() for vma, _, index in ranges]
        addrs = [vma.start + (index << 12) for vma, _, index in ranges]
        res = self.syscall()
        self.vmstat[f"{self.name}_calls"] += 1
        self.results.append((float(self.env.now), int(res.ret), res.errno))
        if self.name == "migratepages" and res.ret > 0:
            self.vmstat["pgmigrate_fail"] += int(res.ret)
        for (_, lo, _), old, addr in zip(ranges, before, addrs, strict=True):
            new = self._nodes_at(addr)
            moved = np.flatnonzero((new != old) & (old >= 0) & (new >= 0))
            if not len(moved):
                continue
            self.ctl.page_node[lo + moved] = new[moved]
            self.ctl.split_huge(lo + moved)
            for dst in np.unique(new[moved]).tolist():
                sel = moved[new[moved] == dst]
                self.ctl.copy_pages(self.ctl.kernel_agent(int(dst)), old[sel].astype(np.int16),
                                    np.full(len(sel), dst, dtype=np.int16))
            self.vmstat["pgmigrate_success"] += len(moved)

    def _nodes_at(self, addrs: np.ndarray) -> np.ndarray:
        """The node of the page at each address now (the mappings may have been split by the syscall)."""
        out = np.full(len(addrs), -1, dtype=np.int16)
        for vma in self.task.mm.vmas_in(int(addrs.min()), int(addrs.max()) + 1):
            sel = (addrs >= vma.start) & (addrs < vma.end)
            out[sel] = vma.nodes[(addrs[sel] - vma.start) >> 12]
        return out
