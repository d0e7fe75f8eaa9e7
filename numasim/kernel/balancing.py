"""Automatic NUMA balancing on the simulation clock: the scanner, hinting faults, misplaced-page migration and
task placement (``kernel.numa_balancing = 1``).

:class:`NumaBalancing` is a :class:`~numasim.engine.runtime.KernelRuntime`: ``simulate(..., runtime=...)`` runs
it beside the program. It follows kernel/sched/fair.c and mm/ (spec section 7):

- **the scanner** (``task_numa_work``): ``scan_delay_ms`` after the process starts, then every scan period, it
  makes up to ``scan_size_mb`` of the address space PROT_NONE from where the last pass stopped, in 2 MiB chunks
  (a chunk uses the budget only if it changed a PTE; at most 8x the budget of virtual space per pass); after the
  last VMA it starts over and the scan sequence advances. VMAs whose policy lacks ``MPOL_F_MOF`` (any explicit
  policy without ``MPOL_F_NUMA_BALANCING``), plug-in placed ranges and hugetlb mappings are skipped; for a
  single-threaded process, so are pages already on its cpu's node. One numpy pass per VMA, not per page.
- **hinting faults** (``do_numa_page``): the engine reports the first access to a protected page; the handler
  counts ``numa_hint_faults`` (and ``_local``), asks ``mpol_misplaced`` -- for the default policy the faulting
  cpu's node, through the two-stage ``should_numa_migrate_memory`` filter over each page's last cpupid -- and
  migrates misplaced pages (``migrate_misplaced_folio``: only if the target node keeps more than its high
  watermark free, else ``TNF_MIGRATE_FAIL``), with the kernel's allocator, so the nodes' free memory and the
  numastat counters follow. The copy goes over the links and controllers (the node's kernel agent issues it);
  the faulting thread pays the fault and the migration (:class:`BalancingCosts`).
- **fault statistics and placement** (``task_numa_fault``, ``task_numa_placement``, ``update_task_scan_period``):
  per thread, faults per node, private or shared (by the page's last pid), local or remote; once per scan
  sequence the decayed counts pick the preferred node and adapt the scan period between ``task_scan_min`` and
  ``task_scan_max``; ``numa_migrate_preferred`` moves the thread to an idle allowed cpu of its preferred node
  or swaps it with a thread there that does not prefer that node.

What is simplified is listed in docs/kernel-spec-coverage.md (rows B1-B12): among others the numa group is the
process's threads that took shared faults, a batch of faults (one engine window) sees the thread and group
statistics as they were at its start, and the scheduler's load balancer (which would pull threads back) is not
modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from numasim.engine.runtime import EngineControl, FaultBatch, huge_block_keys
from numasim.kernel.allocator import AllocRequest
from numasim.kernel.balancing_config import (
    NUMA_BALANCING_MEMORY_TIERING,
    NUMA_BALANCING_NORMAL,
    NumaBalancingConfig,
)
from numasim.kernel.folio_alloc import HPAGE_PMD_NR, alloc_folios
from numasim.kernel.gfp import GFP_TRANSHUGE_LIGHT, Gfp
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_F_MORON, MPOL_PREFERRED_MANY, NUMA_NO_NODE
from numasim.kernel.tiering import (
    PromotionThrottle,
    demotion_targets,
    pages_to_promo_wmark,
    pgdat_free_space_enough,
    toptier_nodes,
)
from numasim.kernel.vma_table import VmaTable

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import VMA, Task

__all__ = ["BalancingCosts", "NumaBalancing", "task_scan_min_ms", "task_scan_max_ms", "next_scan_period_ms"]

_PAGE_SHIFT = 12
_HPAGE_PAGES = 512
NUMA_PERIOD_SLOTS = 10
NUMA_PERIOD_THRESHOLD = 7
MAX_SCAN_WINDOW_MBPS = 2560
ACTIVE_NODE_FRACTION = 3


@dataclass(frozen=True)
class BalancingCosts:
    """What the kernel's work costs the thread doing it (nominal values, not fitted; each result lists them).

    Attributes
    ----------
    hint_fault_ns : float
        A NUMA hinting fault without migration: trap, ``do_numa_page``, PTE restored (about 1 us on
        Skylake-class servers in published fault-latency measurements).
    migrate_page_ns : float
        Added per migrated 4 KiB page on the faulting thread: isolate, unmap with TLB shootdown, copy, remap
        (``migrate_misplaced_folio`` is synchronous). The copy's memory traffic is simulated separately, on
        the links and controllers, by the node's kernel agent.
    migrate_huge_page_ns : float
        A migrated 2 MiB transparent huge page, moved whole (``do_huge_pmd_numa_page``): its copy at about
        15 GB/s plus the same fixed costs.
    pte_update_ns : float
        Per PTE made PROT_NONE by ``change_prot_numa``, on the thread running the scan (task work).
    kswapd_wake_ns : float
        Tiering: how long after a promotion found the fast node full (``numamigrate_isolate_folio`` wakes kswapd
        and fails) kswapd has demoted pages and promotions succeed again: its wake-up on another cpu and its first
        batch. kswapd runs beside the program, so this is a time on the faulting threads' clock, the same in both
        engine modes (it was the engine's batch: up to a 1 ms window in epoch mode, a 1 us epoch in exact mode).
    """

    hint_fault_ns: float = 1_000.0
    migrate_page_ns: float = 5_000.0
    migrate_huge_page_ns: float = 150_000.0
    pte_update_ns: float = 15.0
    kswapd_wake_ns: float = 10_000.0


def task_nr_scan_windows(rss_pages: int, scan_size_mb: int) -> int:
    """``task_nr_scan_windows``: the address space's resident size in scan-size windows (at least 1)."""
    per_window = scan_size_mb << (20 - _PAGE_SHIFT)
    return max(1, -(-max(rss_pages, per_window) // per_window))


def task_scan_min_ms(cfg: NumaBalancingConfig, rss_pages: int) -> int:
    """``task_scan_min``: never scan faster than ``MAX_SCAN_WINDOW`` (2560 MB/s) nor than ``scan_period_min``
    spread over the windows.

    >>> task_scan_min_ms(NumaBalancingConfig(), 1 << 18)  # 1 GiB: 4 windows of 256 MB
    250
    """
    windows = MAX_SCAN_WINDOW_MBPS // cfg.scan_size_mb if cfg.scan_size_mb < MAX_SCAN_WINDOW_MBPS else 1
    floor = 1000 // windows
    return max(floor, cfg.scan_period_min_ms // task_nr_scan_windows(rss_pages, cfg.scan_size_mb))


def task_scan_max_ms(cfg: NumaBalancingConfig, rss_pages: int) -> int:
    """``task_scan_max`` without the numa-group sharing term."""
    smin = task_scan_min_ms(cfg, rss_pages)
    return max(smin, cfg.scan_period_max_ms // task_nr_scan_windows(rss_pages, cfg.scan_size_mb))


def next_scan_period_ms(
    period_ms: int, local: int, remote: int, failed: int, private: int, shared: int, smin: int, smax: int
) -> tuple[int, bool]:
    """``update_task_scan_period``: the next scan period and whether the fault-locality counts are cleared.

    >>> next_scan_period_ms(1000, local=10, remote=90, failed=0, private=100, shared=0, smin=100, smax=60000)
    (1300, True)
    >>> next_scan_period_ms(1000, local=10, remote=90, failed=0, private=50, shared=50, smin=100, smax=60000)
    (800, True)
    """
    if local + shared == 0 or failed:
        return min(smax, period_ms << 1), False
    slot = -(-period_ms // NUMA_PERIOD_SLOTS)
    lr = local * NUMA_PERIOD_SLOTS // (local + remote) if local + remote else 0
    ps = private * NUMA_PERIOD_SLOTS // (private + shared) if private + shared else 0
    if ps >= NUMA_PERIOD_THRESHOLD:
        diff = max(ps - NUMA_PERIOD_THRESHOLD, 1) * slot
    elif lr >= NUMA_PERIOD_THRESHOLD:
        diff = max(lr - NUMA_PERIOD_THRESHOLD, 1) * slot
    else:
        diff = -(NUMA_PERIOD_THRESHOLD - max(lr, ps)) * slot
    return int(min(max(period_ms + diff, smin), smax)), True


@dataclass
class _Thread:
    """``task_struct``'s NUMA fields for one thread (an agent of the engine)."""

    agent: int
    tid: int
    allowed_cpus: frozenset[int]
    faults_mem: np.ndarray  # (nodes, 2) decayed, [.., priv]
    faults_cpu: np.ndarray
    buf_mem: np.ndarray
    buf_cpu: np.ndarray
    locality: np.ndarray  # remote, local, failed
    preferred: int = NUMA_NO_NODE
    scan_period_ms: int = 0
    scan_seq: int = 0
    migrate_retry_ns: float = 0.0
    in_group: bool = False


@dataclass
class _Vma:
    vma: VMA
    flat_lo: int
    flat_hi: int
    index: np.ndarray  # page index within the VMA of each flat page in [flat_lo, flat_hi)
    moron: bool  # the policy is MOF|MORON (default, or BIND/PREFERRED_MANY with MPOL_F_NUMA_BALANCING)
    bind_nodes: frozenset[int] | None  # MORON with a node mask: the cpu node must be in it


class NumaBalancing:
    """``kernel.numa_balancing = 1`` for one process of a simulated kernel (see the module docstring).

    Parameters
    ----------
    kernel : Kernel
        The kernel that placed the process's memory (its free memory and counters follow migrations).
    task : Task
        The process.
    config : NumaBalancingConfig
        The sysctls (``mode`` must have the NORMAL bit).
    allowed_cpus : mapping of int to frozenset of int, optional
        Per workload thread id, the cpus it may run on (default: the task's affinity).
    costs : BalancingCosts
        What the kernel's work costs the threads.
    """

    def __init__(
        self,
        kernel: Kernel,
        task: Task,
        config: NumaBalancingConfig,
        *,
        allowed_cpus: Mapping[int, frozenset[int]] | None = None,
        costs: BalancingCosts | None = None,
    ) -> None:
        if not config.mode & (NUMA_BALANCING_NORMAL | NUMA_BALANCING_MEMORY_TIERING):
            raise ValueError(f"kernel.numa_balancing = {config.mode}: nothing to run (1 NORMAL, 2 MEMORY_TIERING)")
        self.normal = bool(config.mode & NUMA_BALANCING_NORMAL)
        self.tiering = bool(config.mode & NUMA_BALANCING_MEMORY_TIERING)
        self.kernel, self.task, self.cfg = kernel, task, config
        self.costs = costs or BalancingCosts()
        self._allowed = dict(allowed_cpus or {})
        self.vmstat: dict[str, int] = dict.fromkeys(
            ("numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
             "numa_pages_migrated", "pgmigrate_success", "pgmigrate_fail", "numa_task_migrated", "numa_task_swapped",
             "pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd"),
            0,
        )  # fmt: skip
        self.scans: list[tuple[float, int, int]] = []  # (time, PTEs updated, scan period after)
        self._env: simpy.Environment | None = None

    # --- KernelRuntime -----------------------------------------------------------------------------------------
    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        self._env, self.ctl = env, ctl
        nodes = self.kernel.machine.node_ids
        self._nid = {n: k for k, n in enumerate(nodes)}
        self._node_ids = np.array(nodes, dtype=np.int64)
        self.cpu_node = np.full(max(self.kernel.machine.cpus, default=0) + 1, -1, dtype=np.int64)
        for c, n in self.kernel.machine.cpu_to_node.items():
            self.cpu_node[c] = n
        # Flat page -> virtual page number (runs are in address order, so this is sorted), and the VMAs scanned.
        n_flat = len(ctl.page_node)
        self.flat_vpn = ctl.page_vpn()
        top = max(nodes) + 1
        self._index_of = np.zeros(top, dtype=np.int64)
        self._index_of[self._node_ids] = np.arange(len(nodes))
        self._has_memory = np.zeros(top, dtype=bool)
        for n in nodes:
            self._has_memory[n] = any(z.managed_pages > 0 for z in self.kernel.pm.node_zones(n))
        # the VMAs scanned, kept current as mbind/set_mempolicy change them mid-run (a daemon of the same run)
        self.table = VmaTable(
            self.task, self.flat_vpn,
            keep=lambda v: not v.hugetlb and self.kernel.numa_balancing_allowed(self.task, v),
        )  # fmt: skip
        self._table_generation = -1
        self._sync_vmas()
        # each page's last cpupid: -1 = unset (never faulted)
        self.last_cpu = np.full(n_flat, -1, dtype=np.int64)
        self.last_tid = np.full(n_flat, -1, dtype=np.int64)
        n_nodes = len(nodes)
        tids = ctl.agent_thread_id()
        every = frozenset(self.task.cpus_allowed) or frozenset(self.kernel.machine.cpus)
        self.threads: dict[int, _Thread] = {}
        for a in np.flatnonzero(tids >= 0).tolist():
            z = np.zeros((n_nodes, 2))
            tid = int(tids[a])
            self.threads[a] = _Thread(
                a, tid, self._allowed.get(tid, every), z.copy(), z.copy(), z.copy(), z.copy(), np.zeros(3)
            )
        # memory tiering: the top tier, where each top-tier node demotes to, the promotion throttles, each
        # lower-tier page's last scan time (the kernel keeps it in the folio's last_cpupid field), kswapd
        top_tier = toptier_nodes(self.kernel.machine)
        self._toptier = np.zeros(max(nodes) + 1, dtype=bool)
        self._toptier[sorted(top_tier)] = True
        self.demote_to = demotion_targets(self.kernel.machine)
        self.throttle = {
            n: PromotionThrottle(self.cfg.promote_rate_limit_mbps * 256.0, float(self.cfg.hot_threshold_ms),
                                 float(self.cfg.scan_period_max_ms))
            for n in sorted(top_tier)
        }  # fmt: skip
        self.page_scan_ns = np.full(n_flat, -np.inf)
        self._kswapd_wake: dict[int, simpy.Event] = {}
        # per top-tier node with kswapd woken and not run yet: [due on the faults' clock, due on the environment's
        # clock, promotions refused meanwhile]
        self._kswapd_pending: dict[int, list[float]] = {}
        if self.tiering:
            for n in self.demote_to:
                self._kswapd_wake[n] = env.event()
                env.process(self._kswapd(env, n))
        self.scan_offset = 0  # position in the scanned pages, as the flat index of the next chunk's start
        self.scan_seq = 0
        env.process(self._scanner(env))

    def _sync_vmas(self) -> None:
        """Rebuild the per-VMA tables (MORON, the mask's cpu nodes) if the address space or a policy changed."""
        spans = self.table.spans()
        if self.table.generation == self._table_generation:
            return
        self._table_generation = self.table.generation
        self.flat_vma = self.table.flat_vma
        self.vmas = []
        for s in spans:
            pol = self.kernel.get_vma_policy(self.task, s.vma)
            moron = bool(pol.flags & MPOL_F_MORON)
            mask = frozenset(pol.nodes) if moron and pol.mode in (MPOL_BIND, MPOL_PREFERRED_MANY) else None
            self.vmas.append(_Vma(s.vma, s.flat_lo, s.flat_hi, s.index, moron, mask))
        self.rss_pages = int(sum(v.flat_hi - v.flat_lo for v in self.vmas))
        nodes = self.kernel.machine.node_ids
        self._vma_moron = np.array([v.moron for v in self.vmas] + [False], dtype=bool)
        self._vma_allows = np.ones((len(self.vmas) + 1, len(nodes)), dtype=bool)
        for k, v in enumerate(self.vmas):
            if v.bind_nodes is not None:
                self._vma_allows[k] = [n in v.bind_nodes for n in nodes]

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        if not len(faults):
            return None
        self._sync_vmas()
        # A huge page faults once (do_huge_pmd_numa_page): the fault restores the PMD, so the block's other
        # pages are not protected any more and their accesses in the same batch are no faults.
        huge = self.ctl.page_huge[faults.page]
        if not huge.any():
            return self._handle(faults)
        key, keep = huge_block_keys(huge, self.flat_vpn[faults.page])
        for k in np.unique(key[huge]).tolist():
            lo, hi = np.searchsorted(self.flat_vpn, [np.uint64(k << 9), np.uint64((k + 1) << 9)])
            self.ctl.page_protected[lo:hi] = False
        sub = FaultBatch(faults.agent[keep], faults.page[keep], faults.time_ns[keep], faults.write[keep],
                         faults.node[keep])  # fmt: skip
        cost = np.zeros(len(faults))
        cost[keep] = self._handle(sub)
        return cost

    def counters(self) -> dict[str, int]:
        return dict(self.vmstat)

    def assumptions(self) -> dict[str, Any]:
        """What the run assumed about the kernel's costs (nominal, not fitted)."""
        return {"costs": asdict(self.costs), "status": "nominal"}

    # --- the scanner -------------------------------------------------------------------------------------------
    def _smin_smax(self) -> tuple[int, int]:
        return task_scan_min_ms(self.cfg, self.rss_pages), task_scan_max_ms(self.cfg, self.rss_pages)

    def _scanner(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        """``task_tick_numa`` + ``task_numa_work`` for the process: the thread with the shortest period scans."""
        # init_numa_balancing: the first scan scan_delay after the start, with that as the period until the
        # first placement adapts it (p->numa_scan_period = sysctl_numa_balancing_scan_delay)
        seen = self.ctl.agent_requests()
        yield env.timeout(self.cfg.scan_delay_ms * 1e6)
        for t in self.threads.values():
            t.scan_period_ms = self.cfg.scan_delay_ms
        while True:
            # task_tick_numa comes to a thread that ran since the last scan; the shortest period fires first
            now_seen = self.ctl.agent_requests()
            running = [t for t in self.threads.values() if now_seen[t.agent] > seen[t.agent]]
            seen = now_seen
            runner = min(running, key=lambda t: (t.scan_period_ms, t.agent), default=None)
            if runner is not None:
                self._scan(runner)
            # task_numa_work moves mm->numa_next_scan on only when it runs: with no thread running, the first that
            # runs again scans at its next tick (a jiffy here), not a scan_period_min (1 s) later
            period = runner.scan_period_ms if runner is not None else 1
            self._next_scan_ns = env.now + max(period, 1) * 1e6  # a 0 ms period is a jiffy, not a spin
            while env.now < self._next_scan_ns:
                yield env.timeout(self._next_scan_ns - env.now)

    def _scan(self, runner: _Thread) -> None:
        """One ``task_numa_work`` pass from ``scan_offset``: protect present pages chunk by chunk."""
        self._sync_vmas()
        budget = self.cfg.scan_size_mb << (20 - _PAGE_SHIFT)
        virt = 8 * budget
        updated_total = 0
        single = len(self.threads) == 1
        own_node = self.cpu_node[int(self.ctl.agent_cpu()[runner.agent])] if single else -1
        wrapped = False
        for k, v in enumerate(self.vmas):
            if v.flat_hi <= self.scan_offset:
                continue
            lo = max(v.flat_lo, self.scan_offset)
            idx = v.index[lo - v.flat_lo :]
            chunk = idx // _HPAGE_PAGES  # 2 MiB-aligned chunks of the VMA's virtual pages
            starts = np.r_[0, np.flatnonzero(np.diff(chunk)) + 1]
            page_node = self.ctl.page_node[lo : v.flat_hi]
            prot = self.ctl.page_protected[lo : v.flat_hi]
            # a page not faulted in yet (node -1) has no PTE to protect
            eligible = ~prot & (page_node >= 0) & ((page_node != own_node) if single else True)
            if not self.normal:  # tiering only: top-tier pages are not scanned
                eligible &= ~self._toptier[np.maximum(page_node, 0)]
            per_chunk = np.add.reduceat(eligible.astype(np.int64), starts)
            # a chunk's virtual span: from its first page (or the VMA's start) to the chunk's end
            span = np.minimum((chunk[starts] + 1) * _HPAGE_PAGES, v.vma.npages) - np.maximum(
                chunk[starts] * _HPAGE_PAGES, idx[0] if len(idx) else 0
            )
            used = np.where(per_chunk > 0, span, 0)
            stop = np.flatnonzero((np.cumsum(used) >= budget) | (np.cumsum(span) >= virt))
            last = int(stop[0]) if len(stop) else len(starts) - 1
            end = int(starts[last + 1]) if last + 1 < len(starts) else len(idx)
            take = np.flatnonzero(eligible[:end]) + lo
            self.ctl.page_protected[take] = True
            huge = take[self.ctl.page_huge[take]]
            if len(huge):  # a PMD-mapped huge page is one update of numa_huge_pte_updates
                self.vmstat["numa_huge_pte_updates"] += len(np.unique(self.flat_vpn[huge] >> np.uint64(9)))
            if self.tiering:  # a lower-tier page remembers when it was scanned: how hot its fault is
                slow = take[~self._toptier[self.ctl.page_node[take]]]
                assert self._env is not None
                self.page_scan_ns[slow] = self._env.now
            updated_total += len(take)
            budget -= int(used[: last + 1].sum())
            virt -= int(span[: last + 1].sum())
            self.scan_offset = lo + end
            if budget <= 0 or virt <= 0:
                if self.scan_offset >= self.vmas[-1].flat_hi:
                    wrapped = True
                break
            if k == len(self.vmas) - 1:
                wrapped = True
        else:
            wrapped = True
        if wrapped:  # reset_ptenuma_scan
            self.scan_seq += 1
            self.scan_offset = 0
        self.vmstat["numa_pte_updates"] += updated_total
        if updated_total:
            self.ctl.stall(np.array([runner.agent]), np.array([updated_total * self.costs.pte_update_ns]))
        assert self._env is not None
        self.scans.append((float(self._env.now), updated_total, runner.scan_period_ms))

    # --- hinting faults ----------------------------------------------------------------------------------------
    def _handle(self, f: FaultBatch) -> np.ndarray:
        assert self._env is not None
        now = float(f.time_ns[-1])
        cpus = self.ctl.agent_cpu()
        cpu = cpus[f.agent]
        cpu_node = self.cpu_node[cpu]
        src = f.node.astype(np.int64)
        self.vmstat["numa_hint_faults"] += len(f)
        self.vmstat["numa_hint_faults_local"] += int(np.count_nonzero(src == cpu_node))
        vma_of = self.flat_vma[f.page]
        # should_numa_migrate_memory's cpupid exchange (every page of a batch faults once)
        last_cpu, last_tid = self.last_cpu[f.page], self.last_tid[f.page]
        # the threads' state as the batch starts, per agent (a handful of threads: one pass, then gathers)
        n_agents = len(cpus)
        tid_of = np.full(n_agents, -1, dtype=np.int64)
        early_of = np.zeros(n_agents, dtype=bool)
        grouped_of = np.zeros(n_agents, dtype=bool)
        for a, t in self.threads.items():
            tid_of[a] = t.tid
            early_of[a] = t.preferred == NUMA_NO_NODE or t.scan_seq <= 4
            grouped_of[a] = t.in_group
        tid = tid_of[f.agent]
        slow = ~self._toptier[src]
        tier = slow & self.tiering  # the tiering branch of should_numa_migrate_memory: no cpupid exchange
        last_cpu, last_tid = np.where(tier, -1, last_cpu), np.where(tier, -1, last_tid)
        self.last_cpu[f.page[~tier]], self.last_tid[f.page[~tier]] = cpu[~tier], tid[~tier]
        unset = last_tid < 0
        same_pid = last_tid == tid
        last_node = np.where(unset, -1, self.cpu_node[np.maximum(last_cpu, 0)])
        early, grouped = early_of[f.agent], grouped_of[f.agent]
        first = early & (unset | same_pid)  # first faults and private faults early in the task's life
        stage1_fail = ~unset & (last_node != cpu_node)  # the same node must be seen twice in a row
        rest = ~first & ~stage1_fail & ~same_pid  # shared faults
        ok = first | (~stage1_fail & same_pid) | (rest & ~grouped)
        if (rest & grouped).any():
            ok |= rest & grouped & self._group_allows(src, cpu_node, f.agent)
        if tier.any():
            ok = np.where(tier, self._promotion_allowed(f, cpu_node, tier), ok)
        # mpol_misplaced: MORON policies target the cpu's node (if in a BIND mask); others ask the kernel
        target = np.full(len(f), NUMA_NO_NODE, dtype=np.int64)
        moron = self._vma_moron[vma_of]
        allowed = self._vma_allows[vma_of, self._index_of[cpu_node]]
        pick = moron & allowed & ok & self._has_memory[cpu_node]
        target[pick] = cpu_node[pick]
        for i in np.flatnonzero(~moron).tolist():  # MOF without MORON (MPOL_MF_LAZY): the policy's node
            v = self.vmas[int(vma_of[i])]
            addr = v.vma.start + (int(v.index[int(f.page[i]) - v.flat_lo]) << _PAGE_SHIFT)
            target[i] = self.kernel.mpol_misplaced(self.task, addr, cpu=int(cpu[i]))
        target[target == src] = NUMA_NO_NODE
        mem_node = src.copy()
        failed = np.zeros(len(f), dtype=bool)
        migrated = np.zeros(len(f), dtype=bool)
        pages_moved = np.ones(len(f), dtype=np.int64)  # a huge page moves HPAGE_PMD_NR at once
        want = np.flatnonzero(target != NUMA_NO_NODE)
        for dst, go, no in self._admit(target, want, f.time_ns):
            failed[no] = True
            huge_go = go[self.ctl.page_huge[f.page[go]]]
            if len(huge_go):
                ok_huge = self._migrate_huge(f.page[huge_go], int(dst))
                migrated[huge_go[ok_huge]] = True
                mem_node[huge_go[ok_huge]] = dst
                pages_moved[huge_go[ok_huge]] = HPAGE_PMD_NR  # (the others fall back to a base page below)
            go = go[~self.ctl.page_huge[f.page[go]] | np.isin(go, huge_go[~ok_huge] if len(huge_go) else [])]
            go = go[~migrated[go]]
            for v in np.unique(vma_of[go]).tolist():
                r = go[vma_of[go] == v]
                vv = self.vmas[v]
                idx = vv.index[f.page[r] - vv.flat_lo]
                moved_before = vv.vma.nodes[idx].copy()
                self.kernel.migrate_vma_pages(self.task, vv.vma, idx, int(dst))
                ok_rows = vv.vma.nodes[idx] == dst
                moved = r[ok_rows & (moved_before != dst)]
                failed[r[~ok_rows]] = True
                migrated[moved] = True
                self.ctl.page_node[f.page[moved]] = dst
                self.ctl.split_huge(f.page[moved])  # migrated as a base page: its huge page is split (H7)
                mem_node[moved] = dst
                self.ctl.copy_pages(self.ctl.kernel_agent(int(dst)), src[moved].astype(np.int16),
                                    np.full(len(moved), dst, dtype=np.int16))
        n_mig = int(pages_moved[migrated].sum())
        if self.tiering:
            self.vmstat["pgpromote_success"] += int(pages_moved[migrated & slow & self._toptier[mem_node]].sum())
        self.vmstat["numa_pages_migrated"] += n_mig
        self.vmstat["pgmigrate_success"] += n_mig
        self.vmstat["pgmigrate_fail"] += int(failed.sum())
        cost = self.costs.hint_fault_ns + migrated * np.where(
            pages_moved > 1, self.costs.migrate_huge_page_ns, self.costs.migrate_page_ns
        )
        # task_numa_fault: per-thread buffers (private: first fault or the same pid)
        priv = (unset | same_pid).astype(np.int64)
        local = (cpu_node == mem_node).astype(np.int64)
        n_idx, c_idx = self._index_of[mem_node], self._index_of[cpu_node]
        # task_numa_fault ignores faults whose memory stays on a lower tier in tiering mode
        counted = ~(self.tiering & ~self._toptier[mem_node])
        for a in np.unique(f.agent).tolist():
            t = self.threads[a]
            r = (f.agent == a) & counted
            if not r.any():
                continue
            w = np.where(self.ctl.page_huge[f.page[r]], HPAGE_PMD_NR, 1)  # task_numa_fault counts the folio's pages
            np.add.at(t.buf_mem, (n_idx[r], priv[r]), w)
            np.add.at(t.buf_cpu, (c_idx[r], priv[r]), w)
            if (priv[r] == 0).any():
                t.in_group = True
            shared_local = self._shared_local(n_idx[r], c_idx[r], priv[r]) if t.in_group else 0
            t.locality[0] += int(np.count_nonzero(local[r] == 0)) - shared_local
            t.locality[1] += int(np.count_nonzero(local[r] == 1)) + shared_local
            t.locality[2] += int(np.count_nonzero(failed[r]))
            if now > t.migrate_retry_ns:
                self._placement(t)
                self._migrate_preferred(t, now)
        return np.asarray(cost, dtype=float)

    # --- memory tiering ----------------------------------------------------------------------------------------
    def _promotion_allowed(self, f: FaultBatch, dst: np.ndarray, tier: np.ndarray) -> np.ndarray:
        """The tiering branch of ``should_numa_migrate_memory`` for the faults ``tier`` (lower-tier pages):
        promote at once while the target has plenty of free memory, else only hot pages within the rate limit."""
        ok = np.zeros(len(f), dtype=bool)
        now_ms = f.time_ns / 1e6
        for d in np.unique(dst[tier]).tolist():
            rows = np.flatnonzero(tier & (dst == d))
            th = self.throttle.get(int(d))
            if th is None:  # the target is not in the top tier: no promotion
                continue
            if pgdat_free_space_enough(self.kernel.pm, int(d)):
                th.threshold_ms = 0.0
                ok[rows] = True
                continue
            th.adjust(float(now_ms[rows[0]]))
            latency_ms = now_ms[rows] - self.page_scan_ns[f.page[rows]] / 1e6
            hot = rows[latency_ms < th.threshold()]
            self.vmstat["pgpromote_candidate"] += len(hot)
            ok[hot] = th.allow(now_ms[hot])
        return ok

    def _admit(self, target: np.ndarray, want: np.ndarray, t_ns: np.ndarray):  # type: ignore[no-untyped-def]
        """``migrate_balanced_pgdat`` for the rows ``want`` (in time order) by target node: yields (node, rows to
        migrate, rows refused). Each part is migrated before the next is admitted. In tiering mode a refusal wakes
        the node's kswapd (``numamigrate_isolate_folio``), which demotes ``kswapd_wake_ns`` later on the faults'
        clock: the batch's faults from then on find the room it made (a whole window's faults failed, in epoch
        mode, while kswapd waited for the window's end)."""
        for dst in np.unique(target[want]).tolist():
            rows = want[target[want] == dst]
            kswapd = self.tiering and int(dst) in self._kswapd_wake
            while len(rows):
                if kswapd:
                    self._kswapd_catch_up(int(dst), float(t_ns[rows[0]]))
                room = self._balanced_room(int(dst))
                go, no = rows[:room], rows[room:]
                rows = no[:0]
                if len(no) and kswapd:  # promotion found the fast tier full: kswapd demotes to make room
                    due = self._wake_kswapd(int(dst), float(t_ns[no[0]]))
                    later = max(1, int(np.searchsorted(t_ns[no], due, side="left")))  # (the waking fault fails)
                    no, rows = no[:later], no[later:]
                    self._kswapd_pending[int(dst)][2] += len(no)
                yield dst, go, no

    def _wake_kswapd(self, nid: int, t_ns: float) -> float:
        """``wakeup_kswapd`` at a fault at ``t_ns`` (a no-op while it is awake): when it will have run, on the
        faults' clock."""
        if nid not in self._kswapd_pending:
            assert self._env is not None
            wake = self.costs.kswapd_wake_ns
            self._kswapd_pending[nid] = [t_ns + wake, float(self._env.now) + wake, 0]
            ev = self._kswapd_wake[nid]
            if not ev.triggered:
                ev.succeed()
        return self._kswapd_pending[nid][0]

    def _kswapd_catch_up(self, nid: int, t_ns: float) -> None:
        """A fault at ``t_ns`` comes after the woken kswapd's time: it has run (the engine's clock may not have
        reached it yet: in epoch mode the environment stands at the window's start while its faults are handled)."""
        p = self._kswapd_pending.get(nid)
        if p is not None and t_ns >= p[0]:
            self._kswapd_run(nid)

    def _kswapd_run(self, nid: int) -> None:
        p = self._kswapd_pending.pop(nid, None)
        if p is None:
            return
        need = pages_to_promo_wmark(self.kernel.pm, nid, int(p[2]))
        if need > 0:
            self._demote(nid, self.demote_to[nid], need)

    def _kswapd(self, env: simpy.Environment, nid: int):  # type: ignore[no-untyped-def]
        """kswapd of a top-tier node in tiering mode: woken when a promotion found the node full, it demotes the
        process's least recently used pages on the node to the demotion target until the node is above its
        promotion watermark with room for the promotions that were refused, ``kswapd_wake_ns`` after its wake-up
        (or earlier, on the faults' clock: :meth:`_kswapd_catch_up`)."""
        while True:
            yield self._kswapd_wake[nid]
            self._kswapd_wake[nid] = env.event()
            while nid in self._kswapd_pending and env.now < self._kswapd_pending[nid][1]:
                yield env.timeout(self._kswapd_pending[nid][1] - env.now)
            self._kswapd_run(nid)

    def _demote(self, nid: int, target: int, count: int) -> None:
        """``demote_folio_list``: the ``count`` least recently accessed pages of the process on ``nid`` move to
        ``target`` (``__GFP_THISNODE``: what the target cannot take stays)."""
        self._sync_vmas()
        on_node = np.flatnonzero((self.ctl.page_node == nid) & (self.flat_vma >= 0))
        if not len(on_node):
            return
        last = self.ctl.page_last_access_ns[on_node]
        victims = on_node[np.argsort(last, kind="stable")[:count]]
        moved_total = 0
        for v in np.unique(self.flat_vma[victims]).tolist():
            pages = victims[self.flat_vma[victims] == v]
            vv = self.vmas[v]
            idx = vv.index[pages - vv.flat_lo]
            self.kernel.migrate_vma_pages(self.task, vv.vma, idx, target)
            moved = pages[vv.vma.nodes[idx] == target]
            self.ctl.page_node[moved] = target
            self.ctl.split_huge(moved)
            self.ctl.copy_pages(self.ctl.kernel_agent(nid), np.full(len(moved), nid, dtype=np.int16),
                                np.full(len(moved), target, dtype=np.int16))
            moved_total += len(moved)
        self.vmstat["pgdemote_kswapd"] += moved_total
        self.vmstat["pgmigrate_success"] += moved_total

    def _migrate_huge(self, pages: np.ndarray, dst: int) -> np.ndarray:
        """``migrate_misplaced_folio`` of whole huge pages: for each faulting flat page, its 2 MiB block moves as
        one folio to ``dst`` (``__GFP_THISNODE``, no reclaim; above the high watermark); False where it cannot
        (the caller then migrates the faulting page alone, splitting the huge page)."""
        ok = np.zeros(len(pages), dtype=bool)
        for k, page in enumerate(pages.tolist()):
            v = self.vmas[int(self.flat_vma[page])]
            vma = v.vma
            vstart = vma.start >> 12
            b0 = ((vstart + int(v.index[page - v.flat_lo])) & ~(HPAGE_PMD_NR - 1)) - vstart
            if b0 < 0 or b0 + HPAGE_PMD_NR > vma.npages:
                continue
            block = np.arange(b0, b0 + HPAGE_PMD_NR)
            if not (vma.thp[block].all() and (vma.nodes[block] >= 0).all()):
                continue
            if self._balanced_room(dst) < HPAGE_PMD_NR:
                continue
            req = AllocRequest(count=1, preferred_nid=dst, cpu_node=dst, gfp=GFP_TRANSHUGE_LIGHT | Gfp.THISNODE)
            nodes, zones = alloc_folios(self.kernel.pm, req)
            if nodes[0] < 0:
                continue
            old_nodes, old_zones = vma.nodes[block].copy(), vma.zones[block].copy()
            self.kernel.pm.free(old_nodes, old_zones)
            vma.nodes[block] = nodes[0]
            vma.zones[block] = zones[0]
            lo, hi = np.searchsorted(self.flat_vpn, [np.uint64(vstart + b0), np.uint64(vstart + b0 + HPAGE_PMD_NR)])
            self.ctl.page_node[lo:hi] = dst
            self.ctl.copy_pages(self.ctl.kernel_agent(dst), old_nodes, np.full(HPAGE_PMD_NR, dst, dtype=np.int16))
            ok[k] = True
        return ok

    def _balanced_room(self, nid: int) -> int:
        """``migrate_balanced_pgdat``: pages node ``nid`` can take and stay above a zone's high watermark."""
        movable = 3
        room = [
            z.free_pages - z.wmark_high - z.lowmem_reserve[movable]
            for z in self.kernel.pm.node_zones(nid)
            if z.managed_pages > 0
        ]
        return max(0, max(room, default=0))

    def _group(self) -> list[_Thread]:
        return [t for t in self.threads.values() if t.in_group]

    def _group_allows(self, src: np.ndarray, dst: np.ndarray, agents: np.ndarray) -> np.ndarray:
        """The shared-fault tail of ``should_numa_migrate_memory`` (group CPU faults decide)."""
        members = self._group()
        if not members:
            return np.ones(len(src), dtype=bool)
        gcpu = np.sum([t.faults_cpu.sum(axis=1) for t in members], axis=0)
        si, di = self._index_of[src], self._index_of[dst]
        per_agent = np.zeros((int(agents.max()) + 1, len(gcpu)))
        for a, t in self.threads.items():
            if a < len(per_agent):
                per_agent[a] = t.faults_mem.sum(axis=1)
        own_src, own_dst = per_agent[agents, si], per_agent[agents, di]
        allow = gcpu[di] > gcpu[si] * ACTIVE_NODE_FRACTION
        allow |= gcpu[di] * own_src * 3 > gcpu[si] * own_dst * 4
        return np.asarray(allow, dtype=bool)

    def _shared_local(self, mem: np.ndarray, cpu: np.ndarray, priv: np.ndarray) -> int:
        """Shared faults between two of the group's active nodes count as local."""
        members = self._group()
        if not members:
            return 0
        gcpu = np.sum([t.faults_cpu.sum(axis=1) for t in members], axis=0)
        if gcpu.max() <= 0:
            return 0
        active = gcpu * ACTIVE_NODE_FRACTION > gcpu.max()
        if active.sum() <= 1:
            return 0
        return int(np.count_nonzero((priv == 0) & (mem != cpu) & active[mem] & active[cpu]))

    def _placement(self, t: _Thread) -> None:
        """``task_numa_placement``: once per completed scan sequence."""
        if t.scan_seq == self.scan_seq:
            return
        t.scan_seq = self.scan_seq
        fault_types = t.buf_mem.sum(axis=0)  # shared, private
        t.faults_mem = t.faults_mem / 2 + t.buf_mem
        t.faults_cpu = t.faults_cpu / 2 + t.buf_cpu
        t.buf_mem[:] = 0
        t.buf_cpu[:] = 0
        members = self._group() if t.in_group else [t]
        faults = np.sum([m.faults_mem for m in members], axis=0).sum(axis=1)
        if faults.max() > 0:
            best = int(self._node_ids[int(np.argmax(faults))])
            t.preferred = self._nearest_cpu_node(best)
        smin, smax = self._smin_smax()
        period, clear = next_scan_period_ms(
            t.scan_period_ms, int(t.locality[1]), int(t.locality[0]), int(t.locality[2]),
            int(fault_types[1]), int(fault_types[0]), smin, smax,
        )  # fmt: skip
        t.scan_period_ms = period
        if clear:
            t.locality[:] = 0

    def _nearest_cpu_node(self, nid: int) -> int:
        m = self.kernel.machine
        if m.node(nid).cpus:
            return nid
        row = m.slit()[m.index_of(nid)]
        return min((n.id for n in m.nodes if n.cpus), key=lambda n: (row[m.index_of(n)], n))

    def _migrate_preferred(self, t: _Thread, now: float) -> None:
        """``numa_migrate_preferred`` -> ``task_numa_migrate``: an idle allowed cpu on the preferred node, else
        a swap with a thread there that prefers another node (no load-balance checks)."""
        t.migrate_retry_ns = now + min(1e9, t.scan_period_ms * 1e6 / 16)
        if t.preferred == NUMA_NO_NODE:
            return
        cpus = self.ctl.agent_cpu()
        if self.cpu_node[cpus[t.agent]] == t.preferred:
            return
        node_cpus = sorted(self.kernel.machine.node(t.preferred).cpus)
        busy = set(cpus.tolist())
        idle = [c for c in node_cpus if c in t.allowed_cpus and c not in busy]
        if idle:
            self.ctl.move_thread(t.agent, idle[0])
            self.vmstat["numa_task_migrated"] += 1
            return
        here = int(cpus[t.agent])
        for other in self.threads.values():
            oc = int(cpus[other.agent])
            if (
                other is not t and self.cpu_node[oc] == t.preferred and other.preferred != t.preferred
                and oc in t.allowed_cpus and here in other.allowed_cpus
            ):  # fmt: skip
                self.ctl.move_thread(t.agent, oc)
                self.ctl.move_thread(other.agent, here)
                self.vmstat["numa_task_swapped"] += 1
                return
