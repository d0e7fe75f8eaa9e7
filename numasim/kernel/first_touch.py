"""First-touch page faults on the simulation clock, and kswapd on the same clock.

In a timed run with kswapd (``KernelConfig.kswapd_enabled``), the pages a program faults in lazily (workload
allocations with ``prefault = false``, every page of a trace) are not placed before timing: the page map starts
with them absent, and the engine hands each one's first request to :class:`FirstTouchFaults` before timing it
(:attr:`numasim.engine.runtime.EngineControl.page_absent`). The fault allocates the page through the kernel's
own fault path (:meth:`numasim.kernel.kernel.Kernel.touch_pages`: the policy, THP, the zonelist walk, direct
reclaim) at that simulated time, from the faulting thread's cpu. kswapd runs as a SimPy process beside the
program: once a fault wakes a node's kswapd, it reclaims ``kswapd_reclaim_bytes_per_s`` of clean page cache per
simulated second until the node is balanced, so whether a later fault finds local memory depends on how fast the
program faults in simulated time, not on a nominal fault rate.

What the faulting thread pays, right before its request (both nominal priors, recorded in the result's inputs):

* the fault itself: ``1 / KernelConfig.fault_pages_per_s`` per base page it maps (a 2 MiB page maps 512), the
  rate the allocation clock of placement-only commands uses (:mod:`numasim.kernel.kswapd`);
* direct reclaim, when the allocation found every allowed node at its min watermark: ``pages reclaimed x page size
  / direct_reclaim_bytes_per_s``, on the fault that reclaimed;
* direct compaction, when a 2 MiB fault found free memory but no free 2 MiB block (:mod:`numasim.kernel.compaction`):
  ``compact_migrate_page_ns`` per page migrated, on the fault; the copies go over the node's controller, issued by
  its kernel agent.

Within one engine window (at most about 1 ms of simulated time while pages are absent), faults are allocated in
:meth:`~numasim.kernel.kernel.Kernel.touch_pages`' order (per mapping in address order, each cpu's pages as one
batch), not strictly in time order; kswapd reclaims between windows. A fault that cannot be served (the OOM
killer, an empty hugetlb pool) ends the run with an error naming the time and the address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from numasim.errors import WorkloadError
from numasim.kernel.folio_alloc import HPAGE_PMD_NR, HPAGE_PMD_ORDER

if TYPE_CHECKING:
    from numasim.engine.runtime import EngineControl, FaultBatch
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = ["FirstTouchFaults", "KSWAPD_TICK_NS"]

_KERNEL_COUNTERS = ("pgsteal_kswapd", "pgscan_kswapd", "pageoutrun", "pgsteal_direct", "pgscan_direct",
                    "thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_success",
                    "compact_migrate_scanned", "compact_isolated", "pgmigrate_success")  # fmt: skip
"""/proc/vmstat counters the kernel keeps itself that first-touch faults and kswapd change during the run."""

_PAGE_SHIFT = 12
SWAP_CLUSTER_MAX = 32
KSWAPD_TICK_NS = 50_000.0
"""How often an awake kswapd's reclaim is applied on the simulation clock (50 us: 25 pages at the nominal
2 GB/s). A sleeping kswapd costs no events: the fault that wakes it starts it."""


class FirstTouchFaults:
    """A run-time kernel (:class:`~numasim.engine.runtime.KernelRuntime`) that faults absent pages in at their
    first request and runs every node's kswapd on the simulation clock.

    Parameters
    ----------
    kernel, task : Kernel, Task
        The kernel that placed the run and the process whose pages fault.
    pages : ndarray of uint64
        Virtual page numbers to fault on the clock (absent when the run starts).
    planned_cpu : ndarray of int64
        Per page of ``pages``: the cpu of the thread that first accesses it in the access stream, used when the
        engine's first request comes from an agent without a cpu.
    """

    def __init__(self, kernel: Kernel, task: Task, pages: np.ndarray, planned_cpu: np.ndarray) -> None:
        self.kernel, self.task = kernel, task
        order = np.argsort(np.asarray(pages, dtype=np.uint64), kind="stable")
        self.pages = np.asarray(pages, dtype=np.uint64)[order]
        self.planned_cpu = np.asarray(planned_cpu, dtype=np.int64)[order]
        cfg = kernel.config
        self.fault_ns_per_page = 1e9 / cfg.fault_pages_per_s
        self.reclaim_ns_per_page = cfg.page_size_bytes / cfg.direct_reclaim_bytes_per_s * 1e9
        self.compact_ns_per_page = cfg.compact_migrate_page_ns
        self.vmstat = {"first_touch_faults": 0, "first_touch_pages": 0, "first_touch_fault_ns": 0,
                       "allocstall_movable": 0, "pgsteal_direct_timed": 0, "direct_reclaim_stall_ns": 0,
                       "compact_stall_ns": 0, "kswapd_ticks": 0}  # fmt: skip
        self._kswapd_sleeping: simpy.Event | None = None

    # --- KernelRuntime --------------------------------------------------------------------------------------
    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        self.env, self.ctl = env, ctl
        self.vpn = ctl.page_vpn()
        flat = np.searchsorted(self.vpn, self.pages)
        ok = flat < len(self.vpn)
        ok[ok] = self.vpn[flat[ok]] == self.pages[ok]
        if not ok.all():
            raise ValueError(f"FirstTouchFaults: page {int(self.pages[~ok][0]):#x} is not in the run's page map")
        self.cpu_of_flat = np.full(len(self.vpn), -1, dtype=np.int64)
        self.cpu_of_flat[flat] = self.planned_cpu
        ctl.page_absent[flat] = True  # (the engine sets their node to -1)
        ctl.page_huge[flat] = False
        # kswapd now runs on this clock: the allocator's own clock (placement without timing) stops
        self.kernel.pm.kswapd.allocation_clock = False
        self._vmstat_at_start = {k: self.kernel.pm.vmstat.get(k, 0) for k in _KERNEL_COUNTERS}
        env.process(self._kswapd(env))

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        return None

    def on_first_touch(self, faults: FaultBatch) -> np.ndarray:
        """Fault the pages in through :meth:`Kernel.touch_pages` from the faulting threads' cpus; returns each
        fault's time on its thread (module docstring)."""
        ctl = self.ctl
        cpu = ctl.agent_cpu()[faults.agent]
        cpu = np.where(cpu >= 0, cpu, self.cpu_of_flat[faults.page])
        addrs = self.vpn[faults.page] << np.uint64(_PAGE_SHIFT)
        kernel, task = self.kernel, self.task
        seen, seen_c = len(kernel.reclaim_stalls), len(kernel.compaction_stalls)
        kernel.touch_pages(task, addrs, cpu)
        if not task.alive:
            raise WorkloadError(
                f"at {faults.time_ns[0] / 1e6:.3f} ms of the run the OOM killer killed the workload: a first-touch "
                f"fault at {int(addrs[0]):#x} found no memory its policy allows"
            )
        mapped = self._refresh(faults.page)
        missing = np.flatnonzero(ctl.page_node[faults.page] < 0)
        if len(missing):  # SIGBUS: a hugetlb fault with no pool page its policy allows
            k = int(missing[0])
            raise WorkloadError(
                f"at {faults.time_ns[k] / 1e6:.3f} ms of the run a first-touch fault at {int(addrs[k]):#x} could not "
                "be served (SIGBUS: no free huge page the mapping's policy allows; vm.nr_hugepages)"
            )
        cost = mapped * self.fault_ns_per_page
        for pid, raddrs, n in kernel.reclaim_stalls[seen:]:
            if pid != task.tgid or n <= 0:
                continue
            cost += self._reclaim_share(faults.page, raddrs, n)
            self.vmstat["allocstall_movable"] += -(-n // SWAP_CLUSTER_MAX)
            self.vmstat["pgsteal_direct_timed"] += n
            self.vmstat["direct_reclaim_stall_ns"] += int(round(n * self.reclaim_ns_per_page))
        for pid, folios, migrated, nodes in kernel.compaction_stalls[seen_c:]:
            if pid != task.tgid:
                continue
            cost += self._compaction_share(faults.page, folios, migrated)
            for node in np.unique(nodes[nodes >= 0]).tolist():  # the copies, within the node, on its controller
                n = int(migrated[nodes == node].sum())
                ctl.copy_pages(ctl.kernel_agent(node), np.full(n, node, np.int16), np.full(n, node, np.int16))
            self.vmstat["compact_stall_ns"] += int(round(float(migrated.sum()) * self.compact_ns_per_page))
        # a request into a 2 MiB page another fault of the batch mapped took no fault of its own
        self.vmstat["first_touch_faults"] += int(np.count_nonzero(mapped))
        self.vmstat["first_touch_pages"] += int(mapped.sum())
        self.vmstat["first_touch_fault_ns"] += int(round(float((mapped * self.fault_ns_per_page).sum())))
        if self.kernel.pm.kswapd.awake and self._kswapd_sleeping is not None and not self._kswapd_sleeping.triggered:
            self._kswapd_sleeping.succeed()
        return cost

    def counters(self) -> dict[str, int]:
        """This part's counters, and the kernel's reclaim and THP-fault counters over the timed run."""
        pm_vmstat = self.kernel.pm.vmstat
        start = getattr(self, "_vmstat_at_start", {})
        return {**self.vmstat, **{k: int(pm_vmstat.get(k, 0) - start.get(k, 0)) for k in _KERNEL_COUNTERS}}

    def assumptions(self) -> dict[str, Any]:
        """What the timing of first-touch faults and kswapd assumed (for the result's inputs)."""
        cfg = self.kernel.config
        return {
            "clock": "simulation: lazily faulted pages fault at their first request in the timed run, kswapd "
                     "reclaims on the same clock",
            "pages": int(len(self.pages)),
            "fault_ns_per_page": self.fault_ns_per_page,
            "direct_reclaim_ns_per_page": self.reclaim_ns_per_page,
            "kswapd_reclaim_bytes_per_s": cfg.kswapd_reclaim_bytes_per_s,
            "kswapd_tick_ns": KSWAPD_TICK_NS,
            "status": "nominal",
            "source": "KernelConfig.fault_pages_per_s, direct_reclaim_bytes_per_s and kswapd_reclaim_bytes_per_s "
                      "(nominal priors, not measured)",
        }  # fmt: skip

    # --- internals ------------------------------------------------------------------------------------------
    def _refresh(self, faulted: np.ndarray) -> np.ndarray:
        """Copy the kernel's nodes of the faulted pages (and of the 2 MiB pages they faulted whole) into the
        engine's page map; return the base pages each fault mapped."""
        ctl, vpn = self.ctl, self.vpn
        mapped = np.ones(len(faulted), dtype=np.float64)
        vmas = self.task.mm.vmas
        starts = np.array([v.start >> _PAGE_SHIFT for v in vmas], dtype=np.uint64)
        fv = vpn[faulted]
        which = np.searchsorted(starts, fv, side="right").astype(np.int64) - 1
        for k in np.unique(which).tolist():
            vma = vmas[k]
            sel = np.flatnonzero(which == k)
            idx = (fv[sel] - np.uint64(vma.start >> _PAGE_SHIFT)).astype(np.int64)
            huge = vma.thp[idx] | vma.hugetlb
            flat = faulted[sel]
            if huge.any():
                # a 2 MiB page faulted whole: every page of its block the run maps is now present
                blocks = np.unique(fv[sel][huge] >> np.uint64(HPAGE_PMD_ORDER))
                lo = np.searchsorted(vpn, blocks << np.uint64(HPAGE_PMD_ORDER))
                hi = np.searchsorted(vpn, (blocks + np.uint64(1)) << np.uint64(HPAGE_PMD_ORDER))
                span = [np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
                flat = np.unique(np.concatenate([flat, *span]))
                mapped[sel[huge]] = HPAGE_PMD_NR
                # one fault per block: a second request into a block faulted in this batch mapped nothing
                first_of_block = np.unique(fv[sel][huge] >> np.uint64(HPAGE_PMD_ORDER), return_index=True)[1]
                repeat = np.ones(int(huge.sum()), dtype=bool)
                repeat[first_of_block] = False
                mapped[sel[huge][repeat]] = 0.0
            inside = (vpn[flat] >= np.uint64(vma.start >> _PAGE_SHIFT)) & (vpn[flat] < np.uint64(vma.end >> _PAGE_SHIFT))
            flat = flat[inside]
            page_idx = (vpn[flat] - np.uint64(vma.start >> _PAGE_SHIFT)).astype(np.int64)
            nodes = vma.nodes[page_idx]
            newly = nodes >= 0
            ctl.page_node[flat[newly]] = nodes[newly]
            ctl.page_huge[flat[newly]] = (vma.thp[page_idx] | vma.hugetlb)[newly]
        return mapped

    def _reclaim_share(self, faulted: np.ndarray, raddrs: np.ndarray, n_pages: int) -> np.ndarray:
        """Direct reclaim of ``n_pages`` pages by the faults whose pages are ``raddrs``: its time spread over them
        (a page of a 2 MiB fault counts for that fault)."""
        out = np.zeros(len(faulted))
        fv = self.vpn[faulted]
        rv = np.unique(np.asarray(raddrs, dtype=np.uint64) >> np.uint64(_PAGE_SHIFT))
        hit = np.isin(fv, rv) | np.isin(fv >> np.uint64(HPAGE_PMD_ORDER), rv >> np.uint64(HPAGE_PMD_ORDER))
        if not hit.any():
            hit[:] = True
        out[hit] = n_pages * self.reclaim_ns_per_page / int(hit.sum())
        return out

    def _compaction_share(self, faulted: np.ndarray, folios: np.ndarray, migrated: np.ndarray) -> np.ndarray:
        """Each compacting folio's time on the fault that mapped its 2 MiB block."""
        out = np.zeros(len(faulted))
        block = self.vpn[faulted] >> np.uint64(HPAGE_PMD_ORDER)
        want = (np.asarray(folios, dtype=np.uint64) >> np.uint64(_PAGE_SHIFT)) >> np.uint64(HPAGE_PMD_ORDER)
        for b, m in zip(want.tolist(), migrated.tolist(), strict=True):
            rows = np.flatnonzero(block == np.uint64(b))
            out[rows[0] if len(rows) else 0] += m * self.compact_ns_per_page
        return out

    def _kswapd(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        """kswapd on the simulation clock: while a node's kswapd is awake, it reclaims every tick; asleep, it
        waits for the fault that wakes it."""
        kswapd = self.kernel.pm.kswapd
        tick_s = KSWAPD_TICK_NS * 1e-9
        while True:
            if not kswapd.awake:
                self._kswapd_sleeping = env.event()
                yield self._kswapd_sleeping
                self._kswapd_sleeping = None
            yield env.timeout(KSWAPD_TICK_NS)
            kswapd.idle(tick_s)
            self.vmstat["kswapd_ticks"] += 1
