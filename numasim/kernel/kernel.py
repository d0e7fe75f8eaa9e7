"""The simulated kernel: tasks, address spaces, memory policies, cpusets and the page allocator behind one facade.

``Kernel(machine)`` owns the :class:`~numasim.kernel.physmem.PhysicalMemory` (zones, watermarks, zonelists,
numastat counters) and the tasks. Memory is placed lazily, on first touch, by the policy in force; the memory
policy syscalls (``set_mempolicy``, ``mbind``, ``get_mempolicy``, ``migrate_pages``, ``move_pages``,
``set_mempolicy_home_node``) are methods that return a :class:`~numasim.kernel.errno.SyscallResult` and never
raise for bad arguments. Everything is deterministic.

Which placement applies to a new page: a plug-in attached to its VMA (:meth:`Kernel.set_placement` with a
range), else the VMA's kernel policy (``mbind``), else a plug-in attached to the task, else the task policy
(``set_mempolicy``), else the per-node default (local allocation with NUMA-balancing flags).

Threads (:meth:`Kernel.spawn_thread`) share the address space but each has its own policy and cpu. Shared
memory (``shmget``/``shmat``, ``mmap(kind="shmem")``) keeps its policy in the object, as the kernel does.

``mmap`` applies the default overcommit heuristic (``vm.overcommit_memory = 0``, ``__vm_enough_memory`` in
``mm/util.c``): a single mapping larger than total RAM + swap fails with ENOMEM, raised as
:class:`MmapError` (a :class:`~numasim.errors.WorkloadError` carrying ``errno = "ENOMEM"`` and the sizes), so
callers that do not handle it still end in one clear error line. Smaller mappings always succeed; running out
of memory is then the OOM killer's business at fault time, as in Linux.

Not modelled (documented simplifications): transparent huge pages (every fault is order 0, so THP's
``__GFP_THISNODE`` first try and 2 MiB interleave granularity are absent), THP alignment of large anonymous
mappings, per-page map counts (every page of a segment mapped by several processes counts as shared), swap
and ``oom_score_adj``.

Examples
--------
>>> from numasim.topology.builders import glueless
>>> from numasim.kernel.mempolicy import MPOL_INTERLEAVE
>>> k = Kernel(glueless(2))
>>> t = k.spawn("demo", cpu=0)
>>> k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
True
>>> vma = k.mmap(t, 8 * 4096)
>>> _ = k.touch(t, vma.start, 8 * 4096)
>>> vma.pages_per_node()
{0: 4, 1: 4}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from numasim.errors import PolicyError, WorkloadError
from numasim.kernel import syscalls
from numasim.kernel.cpuset import ROOT_CPUSET, Cpuset, rebind_task
from numasim.kernel.errno import SyscallResult
from numasim.kernel.fault import FaultResult, fault_pages_at, fault_range
from numasim.kernel.folio_alloc import HPAGE_PMD_NR
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_F_MOF,
    MPOL_INTERLEAVE,
    MPOL_MF_MOVE,
    MPOL_WEIGHTED_INTERLEAVE,
    NUMA_NO_NODE,
    MemPolicy,
    WeightedInterleaveWeights,
    default_task_policy,
    interleave_nodes_bulk,
    mpol_misplaced,
    mpol_to_str,
    parse_version,
    weighted_interleave_nodes_bulk,
)
from numasim.kernel.migrate import migrate_vma_pages, to_node
from numasim.kernel.modes import decide
from numasim.kernel.placer import Placed, allocate
from numasim.kernel.protocol import PlacementContext, PlacementDecision, PlacementPolicy
from numasim.kernel.task import HEAP_BASE, PAGE_SHIFT, PAGE_SIZE, STACK_TOP, VMA, ShmSegment, Task, VmaKind

if TYPE_CHECKING:
    from numasim.kernel.config import KernelConfig
    from numasim.topology.model import Machine

__all__ = ["Kernel", "Placed", "OomKill", "MmapError"]


class MmapError(WorkloadError):
    """``mmap`` failed (ENOMEM: the mapping is larger than the overcommit heuristic allows).

    Attributes
    ----------
    errno : str
        The errno name (``"ENOMEM"``).
    length_bytes, limit_bytes : int
        The requested length and the most the heuristic allows (total RAM + swap; no swap is modelled).
    """

    def __init__(self, message: str, *, errno: str, length_bytes: int, limit_bytes: int) -> None:
        super().__init__(message)
        self.errno = errno
        self.length_bytes = length_bytes
        self.limit_bytes = limit_bytes


@dataclass(frozen=True)
class OomKill:
    """A task the OOM killer killed, with what ``dump_header``/``__oom_kill_process`` log about it."""

    pid: int
    comm: str
    reason: str
    constraint: str = "CONSTRAINT_NONE"
    """``CONSTRAINT_NONE``, ``CONSTRAINT_MEMORY_POLICY`` or ``CONSTRAINT_CPUSET`` (``constrained_alloc``)."""
    nodemask: frozenset[int] | None = None
    """The policy nodemask of a ``CONSTRAINT_MEMORY_POLICY`` OOM (the kernel logs ``(null)`` otherwise)."""
    total_vm_kb: int = 0
    rss_kb: int = 0
    """The victim's mapped size and resident memory when it was chosen."""

    def log_line(self) -> str:
        """A short kernel-log line, as ``dmesg`` shows the kill (numasim has no uid, memcg or swap)."""
        from numasim.topology.cpulist import format_cpulist

        mask = format_cpulist(sorted(self.nodemask)) if self.nodemask is not None else "(null)"
        return (
            f"Out of memory: Killed process {self.pid} ({self.comm}) total-vm:{self.total_vm_kb}kB, "
            f"rss:{self.rss_kb}kB, constraint={self.constraint}, nodemask={mask}"
        )



SHMMAX = (1 << 64) - 1 - (1 << 24)
"""``SHMMAX`` on 64-bit kernels (``ULONG_MAX - (1UL << 24)``, include/uapi/linux/shm.h)."""


class Kernel:
    """A simulated Linux kernel on ``machine``.

    Parameters
    ----------
    machine : Machine
    config : KernelConfig, optional
        Kernel version, sysctls (watermarks, numa_stat, ...). Default: ``KernelConfig()`` (6.12).
    allocator : object, optional
        Page allocator with the :class:`~numasim.kernel.physmem.PhysicalMemory` interface (for tests).
    """

    def __init__(self, machine: Machine, config: KernelConfig | None = None, *, allocator: Any = None) -> None:
        if config is None:
            from numasim.kernel.config import KernelConfig

            config = KernelConfig()
        self.machine = machine
        self.config = config
        self.version = parse_version(str(getattr(config, "version", "6.12")))
        if allocator is None:
            from numasim.kernel.physmem import PhysicalMemory

            allocator = PhysicalMemory(machine, config)
        self.pm = allocator
        self.possible_nodes: frozenset[int] = frozenset(machine.node_ids)
        self.nr_node_ids = max(machine.node_ids) + 1
        self.cpu_to_node: dict[int, int] = machine.cpu_to_node
        self.weighted_interleave_weights = WeightedInterleaveWeights(machine.node_ids)
        self.cpusets: dict[str, Cpuset] = {  # the root cpuset's mems are N_MEMORY
            ROOT_CPUSET: Cpuset(ROOT_CPUSET, frozenset(machine.cpus), self.memory_nodes)
        }
        self.tasks: dict[int, Task] = {}
        self.exited: list[Task] = []
        self.oom_kills: list[OomKill] = []
        self.reclaim_stalls: list[tuple[int, np.ndarray, int]] = []
        """Allocations whose faults stalled in direct reclaim, in fault order: ``(tgid, virtual addresses of the
        pages allocated from the first one that reclaimed on, pages reclaimed)``; the kernel reclaims a batch at a
        time as those faults go, so a timed run spreads the time evenly over their first accesses."""
        self.compaction_stalls: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        """Huge-page faults that stalled in direct compaction, in fault order: ``(tgid, virtual address of each
        2 MiB folio that compacted, pages migrated for it, its node)``."""
        self._next_pid = 1000
        self.shm_segments: dict[int, ShmSegment] = {}
        self._next_shmid = 0
        self.shm_key_files: set[str] = set()
        """Key files created for ``ftok`` (numactl ``--shm``): they live in the simulated machine, not on disk."""
        self.tmpfs_files: dict[str, ShmSegment] = {}
        self._next_file_inode = 0x20000
        """tmpfs files (``/dev/shm/NAME``, numactl ``--file``): shmem objects that outlive their mappings."""
        from numasim.kernel.hugetlb import HugetlbPool

        self.hugetlb = HugetlbPool(self.pm)
        for nid, count in self.config.hugetlb_pool_writes:
            self.hugetlb.set_nr_hugepages(count, nid)  # the vm.nr_hugepages writes, in order, right after boot

    @property
    def memory_nodes(self) -> frozenset[int]:
        """``node_states[N_MEMORY]``: nodes with memory online."""
        return frozenset(self.pm.memory_nodes)

    # --- tasks ------------------------------------------------------------------------------------------
    def spawn(
        self,
        comm: str,
        *,
        cpus: Iterable[int] | None = None,
        cpu: int | None = None,
        cpuset: str = ROOT_CPUSET,
        cap_sys_nice: bool = False,
        parent: Task | None = None,
        pid: int | None = None,
    ) -> Task:
        """Start a task (like fork+exec) pinned to ``cpus`` (default: all cpus of its cpuset).

        A ``parent``'s task policy is inherited (``mpol_dup`` at fork), as numactl's children inherit it.
        ``pid``: the PID it gets, when it stands for a process that has one outside the simulation (a shell's
        child on the host, started through a shim); it must be positive and free. Else the next free PID.
        """
        if pid is not None and (pid <= 0 or pid in self.tasks):
            raise WorkloadError(f"spawn {comm!r}: pid {pid} is {'in use' if pid in self.tasks else 'not positive'}")
        cs = self._cpuset(cpuset)
        allowed = frozenset(cpus) if cpus is not None else cs.cpus
        unknown = allowed - frozenset(self.cpu_to_node)
        if unknown:
            raise WorkloadError(f"spawn {comm!r}: cpus {sorted(unknown)} do not exist")
        allowed &= cs.cpus
        if not allowed:
            raise WorkloadError(f"spawn {comm!r}: no allowed cpu left in cpuset {cpuset!r}")
        if cpu is None:
            cpu = min(allowed)
        elif cpu not in allowed:
            raise WorkloadError(f"spawn {comm!r}: cpu {cpu} is not among the allowed cpus {sorted(allowed)}")
        task = Task(self._alloc_pid() if pid is None else pid, comm, allowed, cpu, cs.mems, cpuset=cpuset,
                    cap_sys_nice=cap_sys_nice)  # fmt: skip
        if parent is not None:
            task.mempolicy = parent.mempolicy
            task.placement = parent.placement
        self.tasks[task.pid] = task
        return task

    def _alloc_pid(self) -> int:
        # alloc_pid(): the next number not in use (a task given its own PID may sit ahead of the counter)
        while self._next_pid in self.tasks:
            self._next_pid += 1
        self._next_pid += 1
        return self._next_pid - 1

    def spawn_thread(
        self, task: Task, *, cpu: int | None = None, cpus: Iterable[int] | None = None, comm: str | None = None
    ) -> Task:
        """``clone(CLONE_VM | CLONE_THREAD)``: a new thread of ``task``'s process.

        It shares the address space (and so VMA policies and pages) but has its own task policy (a copy of the
        creator's, as ``clone`` duplicates it), interleave state, cpu and affinity; ``set_mempolicy`` in one
        thread does not change the others, exactly as in Linux.
        """
        if not task.alive:
            raise WorkloadError(f"spawn_thread: task {task.pid} has exited")
        allowed = frozenset(cpus) & self._cpuset(task.cpuset).cpus if cpus is not None else task.cpus_allowed
        if not allowed:
            raise WorkloadError(f"spawn_thread: no allowed cpu in {sorted(cpus or [])}")
        if cpu is None:
            cpu = min(allowed)
        elif cpu not in allowed:
            raise WorkloadError(f"spawn_thread: cpu {cpu} is not among the allowed cpus {sorted(allowed)}")
        thread = Task(self._alloc_pid(), comm or task.comm, allowed, cpu, task.mems_allowed, cpuset=task.cpuset,
                      mempolicy=task.mempolicy, placement=task.placement, cap_sys_nice=task.cap_sys_nice,
                      mm=task.mm, tgid=task.tgid)
        self.tasks[thread.pid] = thread
        return thread

    def threads_of(self, task: Task) -> list[Task]:
        """The live threads of ``task``'s process, by pid."""
        return sorted((t for t in self.tasks.values() if t.tgid == task.tgid), key=lambda t: t.pid)

    def task(self, pid: int) -> Task:
        try:
            return self.tasks[pid]
        except KeyError:
            raise WorkloadError(f"no running task with pid {pid}") from None

    def exit(self, task: Task, reason: str = "exit") -> None:
        """Thread exit; the last thread of a process frees the address space and all its pages."""
        if not any(t is not task and t.mm is task.mm for t in self.tasks.values()):
            vmas, task.mm.vmas = task.mm.vmas, []
            for vma in vmas:
                self._free_vma_pages(vma)
        task.alive = False
        task.exit_reason = reason
        if self.tasks.get(task.pid) is task:
            del self.tasks[task.pid]
            self.exited.append(task)

    def oom_kill(
        self, task: Task, reason: str, constraint: str = "CONSTRAINT_NONE", nodemask: frozenset[int] | None = None
    ) -> None:
        """Record an OOM kill of ``task``'s process, kill all its threads and reap its memory."""
        total_vm_kb = sum(v.end - v.start for v in task.mm.vmas) // 1024
        rss_kb = task.rss_pages * (PAGE_SIZE // 1024)
        self.oom_kills.append(OomKill(task.tgid, task.comm, reason, constraint, nodemask, total_vm_kb, rss_kb))
        for t in [*self.threads_of(task), task]:
            if t.alive:
                self.exit(t, "oom-kill")

    @staticmethod
    def oom_badness(task: Task) -> int:
        """``oom_badness`` without swap or oom_score_adj: RSS plus (approximately) its page-table pages."""
        rss = task.rss_pages
        return rss + (rss + 511) // 512

    def out_of_memory(self, trigger: Task, nodemask: frozenset[int] | None, reason: str) -> Task | None:
        """``out_of_memory``: choose and kill the task with the highest badness in the OOM domain.

        A policy nodemask that leaves out some memory node makes the OOM ``CONSTRAINT_MEMORY_POLICY``: every
        task is eligible except those whose MPOL_BIND mask does not intersect it (``mempolicy_in_oom_domain``).
        A restricted cpuset makes it ``CONSTRAINT_CPUSET``: tasks whose mems intersect the trigger's. Ties go to
        the task found last (``select_bad_process`` replaces on equal points); tasks are scanned by pid.
        """
        memory = self.memory_nodes
        constraint = "CONSTRAINT_NONE"
        if nodemask is not None and not memory <= nodemask:
            constraint = "CONSTRAINT_MEMORY_POLICY"
        elif self.cpusets_enabled and not memory <= trigger.mems_allowed:
            constraint = "CONSTRAINT_CPUSET"
        candidates = []
        processes: dict[int, Task] = {}
        for t in sorted(self.tasks.values(), key=lambda x: x.pid):
            processes.setdefault(t.tgid, t)  # for_each_process: one (the oldest live) thread per process
        for t in processes.values():
            if nodemask is not None and not memory <= nodemask:
                pol = t.mempolicy
                if pol is not None and pol.mode == MPOL_BIND and not pol.nodes & nodemask:
                    continue
            elif self.cpusets_enabled and not memory <= trigger.mems_allowed:
                if not t.mems_allowed & trigger.mems_allowed:
                    continue
            candidates.append(t)
        victim: Task | None = None
        best = -1
        for t in candidates:
            points = self.oom_badness(t)
            if points >= best:
                victim, best = t, points
        if victim is not None:
            policy_mask = nodemask if constraint == "CONSTRAINT_MEMORY_POLICY" else None
            self.oom_kill(victim, reason, constraint, policy_mask)
        return victim

    def sched_setaffinity(self, task: Task, cpus: Iterable[int]) -> SyscallResult:
        """Pin ``task`` to ``cpus`` (EINVAL if none of them is in its cpuset); moves it off a forbidden cpu."""
        wanted = frozenset(cpus) & self._cpuset(task.cpuset).cpus
        if not wanted:
            return SyscallResult.fail("EINVAL", "no cpu of the mask is allowed")
        task.cpus_allowed = wanted
        if task.cpu not in wanted:
            task.cpu = min(wanted)
        return SyscallResult.success()

    def run_on(self, task: Task, cpu: int) -> None:
        """Move ``task`` to ``cpu`` (which must be in its affinity mask): later faults are local to it."""
        if cpu not in task.cpus_allowed:
            raise WorkloadError(f"task {task.pid}: cpu {cpu} is not in its affinity {sorted(task.cpus_allowed)}")
        task.cpu = cpu

    # --- address space ------------------------------------------------------------------------------------
    def mmap(
        self,
        task: Task,
        length: int,
        addr: int | None = None,
        kind: VmaKind = "anon",
        tag: str | None = None,
        path: str | None = None,
        offset: int = 0,
        hugetlb: bool = False,
    ) -> VMA:
        """Map ``length`` bytes (rounded up to pages); nothing is allocated until touched.

        ``hugetlb=True`` is ``MAP_HUGETLB``: the length is rounded up to 2 MiB, the address is 2 MiB aligned, and
        the folios are reserved from the hugetlb pool now (ENOMEM if it has too few free).

        ``addr=None`` picks an address top-down like the kernel (``tag="heap"`` grows the brk heap instead,
        ``tag="stack"`` goes below the stack top). ``kind="shmem"`` is MAP_SHARED|MAP_ANONYMOUS.

        Raises
        ------
        MmapError
            ENOMEM when ``length`` exceeds total RAM + swap (the ``vm.overcommit_memory = 0`` heuristic; every
            simulated mapping is treated as accounted, i.e. writable private or shared anonymous).
        """
        if length <= 0:
            raise WorkloadError(f"mmap length must be positive, got {length}")
        size = (length + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        limit_bytes = self.totalram_pages() * PAGE_SIZE  # + total_swap_pages, which is 0: swap is not modelled
        if size > limit_bytes:
            raise MmapError(
                f"mmap of {length} bytes: Cannot allocate memory (ENOMEM): larger than total RAM + swap "
                f"({limit_bytes} bytes), which vm.overcommit_memory = 0 refuses",
                errno="ENOMEM", length_bytes=length, limit_bytes=limit_bytes,
            )
        mm = task.mm
        if hugetlb:
            return self._mmap_hugetlb(task, size, addr)
        if addr is None:
            if tag == "heap":
                addr = mm.brk
                mm.brk += size
            elif tag == "stack":
                addr = STACK_TOP - size
                while mm.overlaps(addr, addr + size):
                    addr -= size
            else:
                addr = mm.get_unmapped_area(size)
        if addr % PAGE_SIZE or addr < 0:
            raise WorkloadError(f"mmap address {addr:#x} is not page aligned")
        if kind == "anon":
            pgoff, inode = addr >> PAGE_SHIFT, 0
        elif kind == "shmem":
            # MAP_SHARED|MAP_ANONYMOUS: an unnamed shmem object, gone with its last mapping
            if mm.overlaps(addr, addr + size):
                raise WorkloadError(f"mapping [{addr:#x}, {addr + size:#x}) overlaps an existing mapping")
            seg = self.shmget(size)
            seg.removed = True
            return mm.insert(VMA(addr, addr + size, 0, "shmem", tag, inode=seg.inode, shm=seg))
        elif kind == "file":
            pgoff, inode = offset >> PAGE_SHIFT, mm.new_inode()
        else:
            raise WorkloadError(f"mmap kind must be 'anon', 'shmem' or 'file', got {kind!r}")
        if tag == "heap" and addr >= HEAP_BASE and addr + size > mm.brk:
            mm.brk = addr + size
        return mm.insert(VMA(addr, addr + size, pgoff, kind, tag, inode=inode, path=path))

    def _mmap_hugetlb(self, task: Task, size: int, addr: int | None) -> VMA:
        huge = HPAGE_PMD_NR * PAGE_SIZE
        size = -(-size // huge) * huge
        if addr is None:
            addr = task.mm.get_unmapped_area(size + huge)
            addr = -(-addr // huge) * huge
        if addr % huge:
            raise WorkloadError(f"mmap(MAP_HUGETLB) address {addr:#x} is not 2 MiB aligned")
        folios = size // huge
        if not self.hugetlb.reserve(folios):
            raise MmapError(
                f"mmap(MAP_HUGETLB) of {size} bytes: Cannot allocate memory (ENOMEM): the hugetlb pool has "
                f"{self.hugetlb.free() - self.hugetlb.reserved} free unreserved 2 MiB pages, {folios} needed "
                "(vm.nr_hugepages)",
                errno="ENOMEM", length_bytes=size,
                limit_bytes=(self.hugetlb.free() - self.hugetlb.reserved) * huge,
            )
        return task.mm.insert(VMA(addr, addr + size, addr >> PAGE_SHIFT, "anon", None, hugetlb=True))

    def madvise_hugepage(self, task: Task, addr: int, length: int, enable: bool) -> SyscallResult:
        """``madvise(addr, length, MADV_HUGEPAGE)`` (``enable``) or ``MADV_NOHUGEPAGE``: sets ``VM_HUGEPAGE`` /
        ``VM_NOHUGEPAGE`` on the range (splitting mappings); pages already present stay as they are."""
        if addr % PAGE_SIZE or length <= 0:
            return SyscallResult.fail("EINVAL", "madvise needs a page-aligned address and a positive length")
        end = addr + ((length + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1))
        if not task.mm.covered(addr, end):
            return SyscallResult.fail("ENOMEM", "madvise range is not fully mapped")
        for vma in task.mm.isolate(addr, end):
            vma.hugepage_advice = 1 if enable else -1
        task.mm.merge_around(addr, end)
        return SyscallResult.success()

    def munmap(self, task: Task, addr: int, length: int) -> SyscallResult:
        """Unmap ``[addr, addr+length)``; the pages are freed."""
        if addr % PAGE_SIZE or length <= 0:
            return SyscallResult.fail("EINVAL", "munmap needs a page-aligned address and a positive length")
        end = addr + ((length + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1))
        if (addr | end) & ((HPAGE_PMD_NR << PAGE_SHIFT) - 1) and any(v.hugetlb for v in task.mm.vmas_in(addr, end)):
            return SyscallResult.fail("EINVAL", "munmap of a MAP_HUGETLB mapping must be 2 MiB aligned")
        for vma in task.mm.remove(addr, end):
            self._free_vma_pages(vma)
        return SyscallResult.success()

    def touch(
        self,
        task: Task,
        addr: int,
        length: int,
        cpu: int | None = None,
        hints: Mapping[str, np.ndarray] | None = None,
    ) -> FaultResult:
        """Touch ``[addr, addr+length)`` from ``cpu`` (default: the task's cpu): first-touch faults.

        Raises ``WorkloadError`` if part of the range is not mapped (a SIGSEGV in reality).
        """
        end = addr + length
        if not task.mm.covered(addr, end):
            raise WorkloadError(f"task {task.pid}: touch of [{addr:#x}, {end:#x}) hits unmapped memory (SIGSEGV)")
        if cpu is not None and cpu not in self.cpu_to_node:
            raise WorkloadError(f"touch: no cpu {cpu}")
        result = FaultResult()
        first_page = addr & ~(PAGE_SIZE - 1)
        for vma in task.mm.vmas_in(addr, end):
            vma_hints = None
            if hints:
                lo = (max(first_page, vma.start) - first_page) >> PAGE_SHIFT
                n = (min(end, vma.end) - max(first_page, vma.start) + PAGE_SIZE - 1) >> PAGE_SHIFT
                vma_hints = {k: np.asarray(v)[lo : lo + n] for k, v in hints.items()}
            result = result + fault_range(self, task, vma, addr, end, cpu, vma_hints)
            if not task.alive:
                break
        return result

    def touch_pages(self, task: Task, addresses: np.ndarray, cpus: np.ndarray) -> FaultResult:
        """First-touch faults for scattered pages: page ``addresses[i]`` touched first from ``cpus[i]``.

        The batch form of :meth:`touch` for traces and generated workloads: one allocator request per
        (mapping, cpu) instead of one per run of pages. Mappings are faulted in address order; within a
        mapping, each cpu's pages as one batch, cpus in the order of their lowest page. A repeated address
        keeps its first cpu. Raises ``WorkloadError`` for an unmapped address (a SIGSEGV in reality).
        """
        result = FaultResult()
        addrs = np.asarray(addresses, dtype=np.uint64) & ~np.uint64(PAGE_SIZE - 1)
        cpu_arr = np.asarray(cpus, dtype=np.int64)
        if addrs.shape != cpu_arr.shape:
            raise ValueError(f"touch_pages: {addrs.size} addresses but {cpu_arr.size} cpus")
        if addrs.size == 0:
            return result
        addrs, first = np.unique(addrs, return_index=True)
        cpu_arr = cpu_arr[first]
        unknown = sorted(set(np.unique(cpu_arr).tolist()) - set(self.cpu_to_node))
        if unknown:
            raise WorkloadError(f"touch: no cpu {unknown[0]}")
        vmas = task.mm.vmas
        starts = np.array([v.start for v in vmas], dtype=np.uint64)
        ends = np.array([v.end for v in vmas], dtype=np.uint64)
        pos = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        inside = (pos >= 0) & (addrs < ends[np.clip(pos, 0, None)]) if vmas else np.zeros(addrs.size, bool)
        if not inside.all():
            bad = int(addrs[np.flatnonzero(~inside)[0]])
            raise WorkloadError(f"task {task.pid}: touch of {bad:#x} hits unmapped memory (SIGSEGV)")
        cuts = np.flatnonzero(np.diff(pos)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, addrs.size], strict=True):
            vma = vmas[int(np.asarray(pos)[lo])]
            idx = ((addrs[lo:hi] - np.uint64(vma.start)) >> np.uint64(PAGE_SHIFT)).astype(np.int64)
            seg_cpus = cpu_arr[lo:hi]
            found, first_pos = np.unique(seg_cpus, return_index=True)
            for cpu in found[np.argsort(first_pos)]:
                result = result + fault_pages_at(self, task, vma, idx[seg_cpus == cpu], int(cpu))
                if not task.alive:
                    return result
        return result

    # --- placement ------------------------------------------------------------------------------------
    @staticmethod
    def vma_own_policy(vma: VMA, page: int = 0) -> MemPolicy | None:
        """``__get_vma_policy``: a shared object's policy for that page (shmem ``get_policy``), else
        ``vm_policy``; None when the mapping has none."""
        if vma.shm is not None and not vma.shm.hugetlb:
            return vma.shm.policy_at(vma.pgoff + page)
        return vma.policy

    def effective_policy(self, task: Task, vma: VMA | None, page: int = 0) -> MemPolicy | None:
        """``get_vma_policy``: the mapping's policy for ``page``, else the task policy (None = default)."""
        if vma is not None:
            own = self.vma_own_policy(vma, page)
            if own is not None:
                return own
        return task.mempolicy

    def set_placement(
        self, task: Task, policy: PlacementPolicy | None, addr: int | None = None, length: int | None = None
    ) -> None:
        """Attach a plug-in placement policy to the task, or to the mappings of ``[addr, addr+length)``."""
        if policy is not None and not isinstance(policy, PlacementPolicy):
            raise PolicyError(f"{policy!r} is not a placement policy (needs a 'name' and a 'place' method)")
        if addr is None:
            task.placement = policy
            return
        end = addr + (length or 0)
        if addr % PAGE_SIZE or end <= addr or not task.mm.covered(addr, end):
            raise WorkloadError(f"set_placement: [{addr:#x}, {end:#x}) is not a mapped page-aligned range")
        for vma in task.mm.isolate(addr, end):
            vma.placement = policy
        task.mm.merge_around(addr, end)

    def free_pages_per_node(self) -> np.ndarray:
        """Free pages per node id (index = node id)."""
        out = np.zeros(self.nr_node_ids, dtype=np.int64)
        for nid in self.machine.node_ids:
            out[nid] = int(self.pm.free_pages(nid))
        return out

    def totalram_pages(self) -> int:
        """``totalram_pages()``: pages the allocator manages on all nodes (the overcommit heuristic's RAM)."""
        return int(sum(int(self.pm.managed_pages(nid)) for nid in self.machine.node_ids))

    def total_pages_per_node(self) -> np.ndarray:
        out = np.zeros(self.nr_node_ids, dtype=np.int64)
        for nid in self.machine.node_ids:
            out[nid] = int(self.pm.managed_pages(nid))
        return out

    @property
    def cpusets_enabled(self) -> bool:
        """``cpusets_enabled()``: true once a cpuset other than the root exists."""
        return len(self.cpusets) > 1

    def alloc_task_pages(self, task: Task, count: int, cpu: int | None = None) -> Placed:
        """``alloc_pages()`` outside any mapping (page cache, kernel buffers) under the task policy.

        Interleave here uses the per-task counter (``interleave_nodes``, ``weighted_interleave_nodes``: the
        ``il_prev``/``il_weight`` state advances as page-by-page allocation would), not the address. Plug-in
        placements do not apply (they need page offsets). Give the pages back with :meth:`free_task_pages`.
        """
        if count < 0:
            raise WorkloadError(f"alloc_task_pages: count must be >= 0, got {count}")
        cpu = task.cpu if cpu is None else cpu
        cpu_node = self.cpu_to_node[cpu]
        pol = task.mempolicy
        decision: PlacementDecision
        if pol is not None and pol.mode == MPOL_INTERLEAVE:
            targets, task.il_prev = interleave_nodes_bulk(pol, task.il_prev, count)
            decision = PlacementDecision(preferred=targets, interleave=True)
        elif pol is not None and pol.mode == MPOL_WEIGHTED_INTERLEAVE:
            targets, task.il_prev, task.il_weight = weighted_interleave_nodes_bulk(
                pol, task.il_prev, task.il_weight, self.weighted_interleave_weights, count
            )
            decision = PlacementDecision(preferred=targets, interleave=True)
        else:
            ctx = PlacementContext(
                machine=self.machine, cpu=cpu, cpu_node=cpu_node, ilx=np.zeros(count, dtype=np.int64),
                addresses=np.zeros(count, dtype=np.int64), free_pages_source=self.free_pages_per_node,
                total_pages_source=self.total_pages_per_node, memory_nodes=self.memory_nodes,
                mems_allowed=task.mems_allowed, policy=pol, weights=self.weighted_interleave_weights,
                version=self.version, pid=task.pid,
            )
            decision = decide(pol, ctx)
        return allocate(self, decision, count, cpu_node, task.mems_allowed)

    def free_task_pages(self, placed: Placed) -> None:
        """Free pages returned by :meth:`alloc_task_pages`."""
        ok = placed.nodes >= 0
        if ok.any():
            self.pm.free(placed.nodes[ok], placed.zones[ok])

    def _free_vma_pages(self, vma: VMA) -> None:
        if vma.shm is not None:
            # shm pages belong to the segment: unmapping only drops an attachment
            if vma.shm.removed and self.shm_attach_count(vma.shm) == 0:
                self._destroy_shm(vma.shm)
            return
        present = vma.nodes >= 0
        if vma.hugetlb:
            # back to the pool, not to the buddy allocator; folios never faulted give back their reservation
            self.hugetlb.release(vma.nodes[present], vma.zones[present])
            self.hugetlb.unreserve((vma.npages - int(np.count_nonzero(present))) // HPAGE_PMD_NR)
        elif present.any():
            self.pm.free(vma.nodes[present], vma.zones[present])
        vma.nodes[:] = -1
        vma.zones[:] = -1
        vma.thp[:] = False

    def hotadd_memory(self, nid: int, size_bytes: int, movable: bool = False) -> None:
        """Online ``size_bytes`` of new memory on node ``nid`` (e.g. a CXL expander via dax/kmem).

        The allocator adds the pages and rebuilds zonelists; a node that gains memory joins N_MEMORY, so the
        root cpuset's mems grow and its tasks' ``mems_allowed`` with them (``cpuset_hotplug_workfn``), which
        rebinds their policies like any cpuset change.
        """
        from numasim.kernel.zones import ZoneType

        before = self.memory_nodes
        self.pm.hotadd_memory(nid, size_bytes, ZoneType.MOVABLE if movable else ZoneType.NORMAL)
        if self.memory_nodes != before:
            root = self.cpusets[ROOT_CPUSET]
            root.mems = self.memory_nodes
            for task in self.tasks.values():
                if task.cpuset == ROOT_CPUSET:
                    rebind_task(task, root.mems)

    # --- shared memory --------------------------------------------------------------------------------------
    def shmget(self, size_bytes: int) -> ShmSegment:
        """Create a shared memory segment (``shmget(IPC_PRIVATE, size)``); no page is allocated yet."""
        seg = ShmSegment(self._next_shmid, size_bytes, inode=0x10000 + self._next_shmid)
        self.shm_segments[seg.shmid] = seg
        self._next_shmid += 1
        return seg

    def shmget_key(self, key: tuple[str, int], size_bytes: int, *, create: bool, huge: bool = False,
                   mode: int = 0o600) -> SyscallResult:  # fmt: skip
        """``shmget(key, size, flags)``: the segment of ``key`` (``value["shmid"]``), created when ``create``
        (``IPC_CREAT``) and missing. ``huge`` is ``SHM_HUGETLB``: the segment's 2 MiB pages are reserved from the
        hugetlb pool now (ENOMEM if it lacks them). Errors as the kernel's: ENOENT (no segment, no IPC_CREAT),
        EINVAL (size 0 at creation, or larger than the existing segment)."""
        for seg in self.shm_segments.values():
            if seg.key == key and not seg.removed:
                if size_bytes > seg.size_requested:
                    return SyscallResult.fail("EINVAL", f"segment {seg.shmid} is smaller than {size_bytes} bytes")
                return SyscallResult.success(shmid=seg.shmid)
        if not create:
            return SyscallResult.fail("ENOENT", f"no shared memory segment for key {key}")
        if size_bytes <= 0 or size_bytes > SHMMAX:
            return SyscallResult.fail("EINVAL", f"a new segment needs 0 < size <= SHMMAX ({SHMMAX}), not {size_bytes}")
        if -(-size_bytes // PAGE_SIZE) > int(self.total_pages_per_node().sum()):
            # newseg's shmem_acct_size: __vm_enough_memory with overcommit_memory = 0 (no swap modelled)
            return SyscallResult.fail("ENOMEM", f"{size_bytes} bytes is more than the machine's memory")
        seg = ShmSegment(self._next_shmid, size_bytes, inode=0x10000 + self._next_shmid, hugetlb=huge, key=key,
                         mode=mode)  # fmt: skip
        if huge and not self.hugetlb.reserve(seg.npages // HPAGE_PMD_NR):
            return SyscallResult.fail("ENOMEM", f"the hugetlb pool lacks {seg.npages // HPAGE_PMD_NR} free 2 MiB pages")
        self.shm_segments[seg.shmid] = seg
        self._next_shmid += 1
        return SyscallResult.success(shmid=seg.shmid)

    def tmpfs_file(self, path: str, size_bytes: int, *, create: bool) -> ShmSegment | None:
        """A tmpfs file (``open`` + ``ftruncate`` to at least ``size_bytes``); None when it does not exist and
        ``create`` is false. Growing a file that a mapping holds is refused (ValueError)."""
        if -(-size_bytes // PAGE_SIZE) > int(self.total_pages_per_node().sum()):
            # tmpfs allows sparse files beyond its size; numasim keeps a node per page and refuses them
            raise ValueError(f"{path}: {size_bytes} bytes is more than the machine's memory (numasim keeps every "
                             "page of a tmpfs file)")  # fmt: skip
        seg = self.tmpfs_files.get(path)
        if seg is None:
            if not create:
                return None
            self._next_file_inode += 1
            seg = ShmSegment(-1, size_bytes, inode=self._next_file_inode, key=path)  # size 0 is refused there
            self.tmpfs_files[path] = seg
        if size_bytes > seg.size_bytes:
            if self.shm_attach_count(seg):
                raise ValueError(f"ftruncate {path}: mapped while it grows")
            seg.grow(size_bytes)
        return seg

    def shmat(self, task: Task, seg: ShmSegment, addr: int | None = None, *, offset: int = 0,
              length: int | None = None) -> VMA:  # fmt: skip
        """Map the segment into ``task`` (``shmat``, or ``mmap(MAP_SHARED)`` of a tmpfs file from page ``offset``
        for ``length`` bytes); faults by any task use the segment's shared policy (a hugetlb segment's policy
        is the mapping's own)."""
        if seg.removed or (seg.shmid >= 0 and self.shm_segments.get(seg.shmid) is not seg):
            raise WorkloadError(f"shmat: segment {seg.shmid} has been removed")
        size = seg.size_bytes - offset if length is None else length
        size = -(-size // PAGE_SIZE) * PAGE_SIZE
        if seg.hugetlb:
            huge = HPAGE_PMD_NR * PAGE_SIZE
            if addr is None:
                addr = -(-task.mm.get_unmapped_area(size + huge) // huge) * huge
        elif addr is None:
            addr = task.mm.get_unmapped_area(size)
        if addr % PAGE_SIZE:
            raise WorkloadError(f"shmat address {addr:#x} is not page aligned")
        return task.mm.insert(VMA(addr, addr + size, offset >> PAGE_SHIFT, "shmem", inode=seg.inode, shm=seg,
                                  hugetlb=seg.hugetlb))  # fmt: skip

    def shm_attach_count(self, seg: ShmSegment) -> int:
        """Number of live tasks that map (part of) the segment (``shm_nattch``, by process)."""
        return sum(any(v.shm is seg for v in t.mm.vmas) for t in self.tasks.values())

    def shmdt(self, task: Task, addr: int) -> SyscallResult:
        """Detach the segment mapped at ``addr`` (``shmdt``)."""
        vma = task.mm.find_vma(addr)
        if vma is None or vma.shm is None or vma.start != addr or vma.pgoff != 0:
            return SyscallResult.fail("EINVAL", f"no shm segment attached at {addr:#x}")
        seg = vma.shm
        start = addr
        end = addr + seg.size_bytes
        for piece in task.mm.remove(start, end):
            self._free_vma_pages(piece)
        return SyscallResult.success()

    def shm_remove(self, seg: ShmSegment) -> None:
        """``shmctl(IPC_RMID)``: the segment goes away (and its pages are freed) at the last detach."""
        seg.removed = True
        if self.shm_attach_count(seg) == 0:
            self._destroy_shm(seg)

    def _destroy_shm(self, seg: ShmSegment) -> None:
        present = seg.nodes >= 0
        if seg.hugetlb:  # back to the pool; folios never faulted give back their reservation
            self.hugetlb.release(seg.nodes[present], seg.zones[present])
            self.hugetlb.unreserve((seg.npages - int(np.count_nonzero(present))) // HPAGE_PMD_NR)
        elif present.any():
            self.pm.free(seg.nodes[present], seg.zones[present])
        seg.nodes[:] = -1
        seg.zones[:] = -1
        self.shm_segments.pop(seg.shmid, None)

    # --- cpusets ----------------------------------------------------------------------------------------
    def _cpuset(self, name: str) -> Cpuset:
        try:
            return self.cpusets[name]
        except KeyError:
            raise WorkloadError(f"no cpuset {name!r} (cpusets: {sorted(self.cpusets)})") from None

    def cpuset_create(self, name: str, cpus: Iterable[int], mems: Iterable[int]) -> Cpuset:
        """Create a cpuset (its cpus and mems must exist; mems are restricted to memory nodes)."""
        if name in self.cpusets:
            raise WorkloadError(f"cpuset {name!r} exists already")
        cs = Cpuset(name, frozenset(), frozenset())
        self.cpusets[name] = cs
        try:
            self.cpuset_set(name, cpus=cpus, mems=mems)
        except WorkloadError:
            del self.cpusets[name]
            raise
        return cs

    def cpuset_set(self, name: str, *, cpus: Iterable[int] | None = None, mems: Iterable[int] | None = None) -> None:
        """Change a cpuset's cpus and/or mems; its tasks are rebound (``cpuset_update_nodemask``)."""
        cs = self._cpuset(name)
        if cpus is not None:
            new_cpus = frozenset(cpus)
            if not new_cpus or not new_cpus <= frozenset(self.cpu_to_node):
                raise WorkloadError(f"cpuset {name!r}: cpus {sorted(new_cpus)} must be non-empty existing cpus")
            cs.cpus = new_cpus
        if mems is not None:
            new_mems = frozenset(mems)
            if not new_mems or not new_mems <= self.memory_nodes:
                # cpuset.mems must be a subset of the root's, which is N_MEMORY (write fails with EINVAL)
                raise WorkloadError(
                    f"cpuset {name!r}: mems {sorted(new_mems)} must be non-empty nodes with memory "
                    f"(memory nodes: {sorted(self.memory_nodes)})"
                )
            cs.mems = new_mems
        for task in self.tasks.values():
            if task.cpuset == name:
                self._apply_cpuset(task, cs)

    def cpuset_attach(self, task: Task, name: str) -> None:
        """Move ``task`` into cpuset ``name``: new mems_allowed, policies rebound, affinity restricted."""
        cs = self._cpuset(name)
        task.cpuset = name
        self._apply_cpuset(task, cs)

    def _apply_cpuset(self, task: Task, cs: Cpuset) -> None:
        rebind_task(task, cs.mems)
        allowed = task.cpus_allowed & cs.cpus
        task.cpus_allowed = allowed if allowed else cs.cpus
        if task.cpu not in task.cpus_allowed:
            task.cpu = min(task.cpus_allowed)

    # --- syscalls ------------------------------------------------------------------------------------------
    def set_mempolicy(
        self, task: Task, mode: int, nodemask: Iterable[int] | None = None, maxnode: int | None = None
    ) -> SyscallResult:
        """``set_mempolicy(2)``; ``maxnode=None`` means "large enough for every node"."""
        return syscalls.set_mempolicy(self, task, mode, nodemask, maxnode)

    def get_mempolicy(
        self, task: Task, flags: int = 0, addr: int = 0, maxnode: int | None = None, *, want_nodemask: bool = True
    ) -> SyscallResult:
        """``get_mempolicy(2)``: ``value["mode"]`` and ``value["nodemask"]`` (or the node with MPOL_F_NODE)."""
        return syscalls.get_mempolicy(self, task, flags, addr, maxnode, want_nodemask=want_nodemask)

    def mbind(
        self,
        task: Task,
        addr: int,
        length: int,
        mode: int,
        nodemask: Iterable[int] | None = None,
        maxnode: int | None = None,
        flags: int = 0,
    ) -> SyscallResult:
        """``mbind(2)`` on ``[addr, addr+length)``."""
        return syscalls.mbind(self, task, addr, length, mode, nodemask, maxnode, flags)

    def migrate_pages(
        self,
        task: Task,
        old_nodes: Iterable[int] | None,
        new_nodes: Iterable[int] | None,
        maxnode: int | None = None,
        *,
        caller: Task | None = None,
    ) -> SyscallResult:
        """``migrate_pages(2)``: ``ret`` = number of pages that could not be moved."""
        return syscalls.migrate_pages(self, task, old_nodes, new_nodes, maxnode, caller=caller)

    def move_pages(
        self,
        task: Task,
        pages: Iterable[int],
        nodes: Iterable[int] | None = None,
        flags: int = MPOL_MF_MOVE,
        *,
        caller: Task | None = None,
    ) -> SyscallResult:
        """``move_pages(2)``: ``value["status"]`` holds the node or ``-errno`` of every page."""
        return syscalls.move_pages(self, task, pages, nodes, flags, caller=caller)

    def set_mempolicy_home_node(
        self, task: Task, addr: int, length: int, home_node: int, flags: int = 0
    ) -> SyscallResult:
        """``set_mempolicy_home_node(2)`` (5.17+)."""
        return syscalls.set_mempolicy_home_node(self, task, addr, length, home_node, flags)

    def policy_string(self, task: Task, vma: VMA | None = None) -> str:
        """The policy column of ``/proc/PID/numa_maps``: ``mpol_to_str`` of the VMA's policy, else the task's.

        A plug-in placement attached to the VMA or task is shown by its name.
        """
        if vma is not None and vma.placement is not None:
            return str(vma.placement.name)
        if vma is not None and self.vma_own_policy(vma) is not None:
            return mpol_to_str(self.vma_own_policy(vma))
        if task.placement is not None:
            return str(task.placement.name)
        return mpol_to_str(task.mempolicy)

    def get_vma_policy(self, task: Task, vma: VMA | None, cpu: int | None = None, page: int = 0) -> MemPolicy:
        """The policy really in force (``get_vma_policy``): VMA's, else task's, else the CPU node's default."""
        pol = self.effective_policy(task, vma, page)
        if pol is not None:
            return pol
        return default_task_policy(self.cpu_to_node[task.cpu if cpu is None else cpu])

    def numa_balancing_allowed(self, task: Task, vma: VMA) -> bool:
        """``task_numa_work`` skips VMAs whose policy lacks ``MPOL_F_MOF`` (any explicit policy without
        MPOL_F_NUMA_BALANCING) and plug-in placed ranges."""
        if vma.placement is not None or (self.vma_own_policy(vma) is None and task.placement is not None):
            return False
        return bool(self.get_vma_policy(task, vma).flags & MPOL_F_MOF)

    def migrate_vma_pages(self, task: Task, vma: VMA, idx: np.ndarray, dest: int) -> tuple[int, int]:
        """Move pages ``idx`` of ``vma`` to node ``dest`` (``migrate_misplaced_folio``: ``__GFP_THISNODE``, no
        OOM). Pages already on ``dest`` or not present are skipped. Returns ``(moved, failed)``."""
        idx = np.asarray(idx, dtype=np.int64)
        cur = vma.nodes[idx]
        idx = np.unique(idx[(cur >= 0) & (cur != dest)])
        if idx.size == 0:
            return 0, 0
        moved = int(np.count_nonzero(migrate_vma_pages(self, task, vma, idx, to_node(dest), thisnode=True)))
        return moved, int(idx.size) - moved

    def first_node_in_zonelist(self, nid: int, mask: Iterable[int]) -> int:
        """``first_zones_zonelist(node_zonelist(nid), ..., mask)``: first node of ``nid``'s fallback order in ``mask``."""
        allowed = frozenset(mask)
        for zone in self.pm.zonelist(nid):
            if zone.node in allowed:
                return int(zone.node)
        return NUMA_NO_NODE

    def mpol_misplaced(
        self, task: Task, addr: int, cpu: int | None = None, should_numa_migrate_memory: Any = None
    ) -> int:
        """``mpol_misplaced`` for the page at ``addr``: the node a NUMA hinting fault from ``cpu`` would move
        it to, or ``NUMA_NO_NODE`` (also for a page that is not present or a plug-in placed range)."""
        vma = task.mm.find_vma(addr)
        if vma is None:
            return NUMA_NO_NODE
        i = vma.page_index(addr)
        page_nid = int(vma.nodes[i])
        if page_nid < 0 or vma.placement is not None:
            return NUMA_NO_NODE
        cpu = task.cpu if cpu is None else cpu
        cpu_node = self.cpu_to_node[cpu]
        pol = self.effective_policy(task, vma, i) or default_task_policy(cpu_node)
        return mpol_misplaced(
            pol,
            page_nid,
            cpu_node,
            ilx=int(vma.ilx(np.array([i]), self.version)[0]),
            first_in_zonelist=self.first_node_in_zonelist,
            should_numa_migrate_memory=should_numa_migrate_memory,
            weights=self.weighted_interleave_weights,
            version=self.version,
        )

    # --- counters ---------------------------------------------------------------------------------------
    def numastat(self, node: int) -> dict[str, int]:
        """The six counters of ``/sys/devices/system/node/node<node>/numastat``."""
        return self.pm.counters.item(node)


