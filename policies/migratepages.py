"""``migratepages PID FROM TO`` in the middle of a run: the kernel's ``migrate_pages(2)``, timed.

What-if question: *a job runs with its memory on the wrong node; an operator (or a tool) runs ``migratepages``
after a while. What does the move cost the job while it happens, and what does it gain afterwards?*

At ``at_ms`` of simulated time (and, with ``every_ms``, again every so often) this daemon calls the simulated
kernel's ``migrate_pages(pid, from, to)`` with the semantics of the real syscall (node mapping of ``from`` onto
``to``, ``__GFP_THISNODE`` allocation, pages that do not fit stay; numasim/kernel/syscalls.py). Every page the
syscall moved changes node at once for the engine, and its copy (4 KiB read on the old node, written on the new
one) is issued by the kernel thread of the target node over the links and controllers: the job's accesses
compete with it. The caller's own cpu time (the migratepages process) is not the job's and is not charged.

Parameters: ``at_ms`` (default 10), ``from_nodes`` and ``to_nodes`` (node lists as ``0`` or ``0;1``, the
numactl syntax with ``;`` for ``,``, since ``,`` separates daemon parameters), ``every_ms`` (0: once).
Use: ``numasim run ... --daemon migratepages:at_ms=50,from_nodes=1,to_nodes=0``. Counters in the result's
``kernel.vmstat``: ``migratepages_calls``, ``pgmigrate_success``, ``pgmigrate_fail``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from numasim.engine.runtime import EngineControl, FaultBatch


def _nodes(text: Any) -> list[int]:
    parts = str(text).replace(";", ",").split(",")
    try:
        return [int(p) for p in parts if p.strip() != ""]
    except ValueError:
        raise ValueError(f"migratepages: node list {text!r}: expected node ids such as 0 or 0;1") from None


class MigratePages:
    """The daemon (see the module docstring); a :class:`~numasim.engine.runtime.KernelRuntime`."""

    name = "migratepages"

    def __init__(self, kernel: Any, task: Any, *, at_ms: float = 10.0, from_nodes: Any = 1, to_nodes: Any = 0,
                 every_ms: float = 0.0) -> None:  # fmt: skip
        if not at_ms >= 0:
            raise ValueError(f"migratepages: at_ms = {at_ms}: must be >= 0")
        if not every_ms >= 0:
            raise ValueError(f"migratepages: every_ms = {every_ms}: must be >= 0")
        self.kernel, self.task = kernel, task
        self.at_ns, self.every_ns = float(at_ms) * 1e6, float(every_ms) * 1e6
        self.from_nodes, self.to_nodes = _nodes(from_nodes), _nodes(to_nodes)
        known = set(kernel.machine.node_ids)
        bad = [n for n in self.from_nodes + self.to_nodes if n not in known]
        if bad:
            raise ValueError(f"migratepages: node {bad[0]}: no such node (nodes: {sorted(known)})")
        self.vmstat = {"migratepages_calls": 0, "pgmigrate_success": 0, "pgmigrate_fail": 0}
        self.results: list[tuple[float, int]] = []  # (time, the syscall's return value)

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        self.env, self.ctl = env, ctl
        first, count, offset = ctl.page_runs()
        flat_vpn = np.zeros(len(ctl.page_node), dtype=np.uint64)
        for f, c, o in zip(first.tolist(), count.tolist(), offset.tolist(), strict=True):
            flat_vpn[o : o + c] = np.arange(f, f + c, dtype=np.uint64)
        self.vmas = []
        for vma in self.task.mm.vmas_in(0, 1 << 62):
            lo = int(np.searchsorted(flat_vpn, np.uint64(vma.start >> 12)))
            hi = int(np.searchsorted(flat_vpn, np.uint64(vma.end >> 12)))
            if hi > lo:
                self.vmas.append((vma, lo, hi, (flat_vpn[lo:hi] - np.uint64(vma.start >> 12)).astype(np.int64)))
        env.process(self._run(env))

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        return None

    def counters(self) -> dict[str, int]:
        return dict(self.vmstat)

    def assumptions(self) -> dict[str, Any]:
        return {"at_ms": self.at_ns / 1e6, "every_ms": self.every_ns / 1e6, "from_nodes": self.from_nodes,
                "to_nodes": self.to_nodes}  # fmt: skip

    def _run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        yield env.timeout(self.at_ns)
        while True:
            self.call()
            if not self.every_ns:
                return
            yield env.timeout(self.every_ns)

    def call(self) -> None:
        """One ``migrate_pages`` call; what moved changes node for the engine and is copied over the links."""
        before = [vma.nodes[index].copy() for vma, _, _, index in self.vmas]
        res = self.kernel.migrate_pages(self.task, self.from_nodes, self.to_nodes)
        self.vmstat["migratepages_calls"] += 1
        self.results.append((float(self.env.now), int(res.ret)))
        if res.ret > 0:
            self.vmstat["pgmigrate_fail"] += int(res.ret)
        for (vma, lo, _, index), old in zip(self.vmas, before, strict=True):
            new = vma.nodes[index]
            moved = np.flatnonzero((new != old) & (old >= 0) & (new >= 0))
            if not len(moved):
                continue
            self.ctl.page_node[lo + moved] = new[moved]
            self.ctl.page_huge[lo + moved] = False  # moved as base pages (coverage row H7)
            for dst in np.unique(new[moved]).tolist():
                sel = moved[new[moved] == dst]
                self.ctl.copy_pages(self.ctl.kernel_agent(int(dst)), old[sel].astype(np.int16),
                                    np.full(len(sel), dst, dtype=np.int16))
            self.vmstat["pgmigrate_success"] += len(moved)


def make_daemon(kernel: Any, task: Any, **params: Any) -> MigratePages:
    """The daemon for ``task`` of ``kernel`` (what ``numasim run --daemon migratepages`` calls)."""
    return MigratePages(kernel, task, **params)
