"""A numad-like user-space daemon: every interval, fit the process onto the one node that can hold it, and move it.

What-if question: *instead of the kernel's page-by-page NUMA balancing, what does a daemon that rebinds whole
processes (numad, or a scheduler's "NUMA-aware placement" sidecar) do to a job whose memory and threads are
spread over the machine: how soon does it converge, and what does moving everything at once cost?*

numad (the numad project, numad.c ``manage_loads``) wakes every ``interval`` (its ``-i``, 5 to 15 s), estimates
each large process's memory and cpu needs, picks the node(s) that can hold them -- preferring where the
process's memory already is -- and binds the process there: its cpuset's cpus and mems, then
``migrate_pages`` to move its memory. This daemon does the same for the simulated process, one node at a time:

- it acts when the process has at least ``min_rss_mb`` resident and is not already on one node;
- a node fits when its free memory plus the process's pages already there hold the whole process at no more
  than ``target_utilization`` of the node's memory, and it has a cpu for every thread;
- among the fitting nodes it takes the one with most of the process's pages (then the lowest id);
- it moves every thread to its own cpu of that node (``sched_setaffinity``), and migrates every page that is
  elsewhere (``migrate_pages``: the kernel's allocator with ``__GFP_THISNODE``, the copies over the links,
  issued from the target node; numad's own cpu time is not charged to the program).

A process that fits no single node is left alone (numad would spread it over several; not modelled).

Use it with ``numasim run ... --daemon numad`` (or the file's path; parameters: ``--daemon
numad:interval_ms=100``), or from Python with :func:`make_daemon`. Counters in the result's
``kernel.vmstat``: ``numad_rebinds``, ``numad_pages_migrated`` (also in ``pgmigrate_success``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from numasim.engine.runtime import Daemon, EngineControl
from numasim.kernel.vma_table import VmaTable


class Numad(Daemon):
    """The daemon (see the module docstring); a :class:`~numasim.engine.runtime.KernelRuntime`."""

    name = "numad"

    def __init__(
        self,
        kernel: Any,
        task: Any,
        *,
        interval_ms: float = 15_000.0,
        target_utilization: float = 0.85,
        min_rss_mb: float = 300.0,
    ) -> None:
        if not interval_ms > 0:
            raise ValueError(f"numad: interval_ms = {interval_ms}: must be positive")
        if not 0 < target_utilization <= 1:
            raise ValueError(f"numad: target_utilization = {target_utilization}: must be in (0, 1]")
        self.kernel, self.task = kernel, task
        self.interval_ns = float(interval_ms) * 1e6
        self.target_utilization = float(target_utilization)
        self.min_rss_pages = int(float(min_rss_mb) * 256)
        self.vmstat = {"numad_rebinds": 0, "numad_pages_migrated": 0, "pgmigrate_success": 0, "pgmigrate_fail": 0}
        self.log: list[tuple[float, int]] = []  # (time, node bound to)

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        super().attach(env, ctl)
        # the process's mappings as flat page ranges, kept current if another daemon changes them mid-run
        # (freed allocations have none: their pages are not its)
        self.table = VmaTable(self.task, self.flat_vpn)

    def assumptions(self) -> dict[str, Any]:
        return {"interval_ms": self.interval_ns / 1e6, "target_utilization": self.target_utilization,
                "min_rss_pages": self.min_rss_pages, "status": "nominal: numad's defaults"}  # fmt: skip

    def run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        while True:
            yield env.timeout(self.interval_ns)
            self.manage()

    def manage(self) -> None:
        """One numad pass over the process."""
        spans = self.table.spans()
        if not spans:
            return
        page_node = self.ctl.page_node
        mine = np.concatenate([page_node[s.flat_lo : s.flat_hi] for s in spans])
        mine = mine[mine >= 0]  # pages not faulted in yet are in no node's RSS
        rss = len(mine)
        if rss < self.min_rss_pages:
            return
        machine = self.kernel.machine
        ids = machine.node_ids
        on = {n: int(c) for n, c in zip(ids, np.bincount(mine, minlength=max(ids) + 1)[ids].tolist(), strict=True)}
        cpus = self.ctl.agent_cpu()
        threads = np.flatnonzero(self.ctl.agent_thread_id() >= 0)
        cpu_node = machine.cpu_to_node
        fits = []
        for n in machine.nodes:
            if len(n.cpus) < len(threads):
                continue
            capacity = self.target_utilization * n.memory_bytes / 4096
            if self.kernel.pm.free_pages(n.id) + on[n.id] >= rss and rss <= capacity:
                fits.append(n.id)
        if not fits:
            return
        best = max(fits, key=lambda n: (on[n], -n))
        if on[best] == rss and all(cpu_node[int(cpus[a])] == best for a in threads):
            return  # already bound there
        self.vmstat["numad_rebinds"] += 1
        self.log.append((float(self.env.now), best))
        free_cpus = [c for c in sorted(machine.node(best).cpus)]
        taken = {int(cpus[a]) for a in threads if cpu_node[int(cpus[a])] == best}
        spare = [c for c in free_cpus if c not in taken]
        for a in threads.tolist():
            if cpu_node[int(cpus[a])] != best:
                self.ctl.move_thread(a, spare.pop(0))
        for span in spans:
            vma, lo, hi, index = span.vma, span.flat_lo, span.flat_hi, span.index
            where = page_node[lo:hi]
            away = np.flatnonzero((where != best) & (where >= 0))
            if not len(away):
                continue
            src = where[away].copy()
            self.kernel.migrate_vma_pages(self.task, vma, index[away], best)
            ok = vma.nodes[index[away]] == best
            moved = away[ok]
            page_node[lo + moved] = best
            self.ctl.split_huge(lo + moved)  # moved as base pages (coverage row H7)
            self.ctl.copy_pages(self.ctl.kernel_agent(best), src[ok], np.full(len(moved), best, dtype=np.int16))
            self.vmstat["numad_pages_migrated"] += len(moved)
            self.vmstat["pgmigrate_success"] += len(moved)
            self.vmstat["pgmigrate_fail"] += int(np.count_nonzero(~ok))


def make_daemon(kernel: Any, task: Any, **params: Any) -> Numad:
    """The daemon for ``task`` of ``kernel`` (what ``numasim run --daemon policies/numad.py`` calls)."""
    return Numad(kernel, task, **params)
