"""Tasks, their address spaces (``mm_struct``) and mappings (``vm_area_struct``).

A re-implementation of the parts of ``include/linux/mm_types.h``, ``mm/mmap.c`` (top-down
``get_unmapped_area``, ``munmap`` splitting) and ``mm/mempolicy.c`` (``mbind_range``: split the VMAs at the
range ends, set the policy, merge neighbours with equal policies) that memory placement depends on.

Each VMA keeps the node (and zone) of every faulted page in numpy arrays, ``-1`` meaning "not present", so
first-touch faults, migration and numa_maps-style counts are array operations, never a loop per page.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from numasim.errors import WorkloadError
from numasim.kernel.mempolicy import MAX_NUMNODES, KernelVersion, MemPolicy, parse_version

if TYPE_CHECKING:
    from numasim.kernel.protocol import PlacementPolicy

__all__ = [
    "PAGE_SHIFT",
    "PAGE_SIZE",
    "MMAP_BASE",
    "HEAP_BASE",
    "STACK_TOP",
    "VmaKind",
    "VMA",
    "MM",
    "ShmSegment",
    "Task",
    "mpol_equal",
]

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
HPAGE_NR = 512
"""Base pages per 2 MiB huge page (``HPAGE_PMD_NR``)."""
MMAP_BASE = 0x7F00_0000_0000
"""Top of the top-down mmap area (x86_64, no randomisation: deterministic addresses)."""
HEAP_BASE = 0x5555_5556_0000
"""Start of the brk heap (after a PIE executable)."""
STACK_TOP = 0x7FFF_F000_0000

VmaKind = Literal["anon", "shmem", "file"]


def mpol_equal(a: MemPolicy | None, b: MemPolicy | None) -> bool:
    """``mpol_equal``: same mode, flags, home node and nodes (the user nodes for STATIC/RELATIVE)."""
    if a is None or b is None:
        return a is b
    if (a.mode, a.flags, a.home_node) != (b.mode, b.flags, b.home_node):
        return False
    if a.stores_user_nodemask and a.user_nodemask != b.user_nodemask:
        return False
    return a.nodes == b.nodes


class ShmSegment:
    """A shared memory object (SysV shm / tmpfs file): its pages and its *shared* policy, seen by every mapping.

    The kernel keeps a shmem object's policy in the object (``shared_policy``, keyed by page offset), not in
    the VMAs, so an ``mbind`` by one process applies to faults by every process that maps it. Pages belong to
    the segment: they outlive the mappings until the segment is removed.

    Attributes
    ----------
    shmid, inode : int
    nodes, zones : numpy.ndarray of int16
        Node and zone of each page (-1 = not present); mappings hold views of these arrays.
    policy_id : numpy.ndarray of int32
        Index into :attr:`policies` of each page's shared policy (-1 = none: the faulting task's policy).
    """

    def __init__(self, shmid: int, size_bytes: int, inode: int, *, hugetlb: bool = False, key: object = None,
                 mode: int = 0o600) -> None:  # fmt: skip
        if size_bytes <= 0:
            raise WorkloadError(f"shm segment size must be positive, got {size_bytes}")
        self.shmid = shmid
        self.inode = inode
        self.hugetlb = hugetlb
        """SHM_HUGETLB: 2 MiB pages from the hugetlb pool, and no shared policy (hugetlbfs has no
        ``set_policy``: a policy lives in each attaching mapping)."""
        self.key = key
        """The IPC key (``ftok`` of a key file and a project id), a tmpfs path, or None (IPC_PRIVATE)."""
        self.mode = mode
        huge = 512 << PAGE_SHIFT
        size = -(-size_bytes // huge) * huge if hugetlb else size_bytes
        self.size_requested = size_bytes
        self.npages = (size + PAGE_SIZE - 1) >> PAGE_SHIFT
        self.nodes = np.full(self.npages, -1, dtype=np.int16)
        self.zones = np.full(self.npages, -1, dtype=np.int16)
        self.policy_id = np.full(self.npages, -1, dtype=np.int32)
        self.policies: list[MemPolicy] = []
        self.removed = False

    def grow(self, size_bytes: int) -> None:
        """Extend the object to ``size_bytes`` (``ftruncate`` of a tmpfs file; never shrinks). Callers make sure
        no mapping holds views of the old arrays."""
        npages = (size_bytes + PAGE_SIZE - 1) >> PAGE_SHIFT
        if npages <= self.npages:
            return
        extra = npages - self.npages
        self.nodes = np.concatenate([self.nodes, np.full(extra, -1, dtype=np.int16)])
        self.zones = np.concatenate([self.zones, np.full(extra, -1, dtype=np.int16)])
        self.policy_id = np.concatenate([self.policy_id, np.full(extra, -1, dtype=np.int32)])
        self.npages = npages

    @property
    def size_bytes(self) -> int:
        return self.npages << PAGE_SHIFT

    def set_policy(self, first: int, last: int, pol: MemPolicy | None) -> None:
        """``shared_policy_replace`` for pages ``[first, last)``."""
        if pol is None:
            self.policy_id[first:last] = -1
            return
        self.policies.append(pol)
        self.policy_id[first:last] = len(self.policies) - 1

    def policy_at(self, page: int) -> MemPolicy | None:
        """``mpol_shared_policy_lookup``: the shared policy of one page (None = none)."""
        i = int(self.policy_id[page])
        return self.policies[i] if i >= 0 else None


@dataclass(eq=False)
class VMA:
    """A mapping ``[start, end)`` with its policy and the node of each faulted page.

    Attributes
    ----------
    start, end : int
        Page-aligned virtual addresses.
    pgoff : int
        ``vm_pgoff``: ``start >> 12`` for private anonymous memory, the file page offset otherwise (0 for
        MAP_SHARED anonymous = shmem), which makes the interleave index of private anon pages their absolute
        virtual page number.
    kind : {"anon", "shmem", "file"}
    tag : str or None
        ``"heap"`` or ``"stack"`` (numa_maps labels), or None.
    policy : MemPolicy or None
        ``vm_policy``; None falls back to the task policy.
    placement : PlacementPolicy or None
        A plug-in placement policy attached to this range (overrides ``policy`` for new faults).
    inode : int
        Inode number of a shmem/file mapping (the interleave bias of shmem since 6.7).
    path : str or None
        File name of a file mapping.
    nodes : numpy.ndarray of int16
        Node of each page, -1 if not present.
    zones : numpy.ndarray of int16
        Zone index of each present page (-1 if not present).
    shm : ShmSegment or None
        The shared object mapped (its pages from ``pgoff`` on); ``nodes``/``zones`` are views into it.
    thp : numpy.ndarray of bool
        Per page: part of a 2 MiB transparent huge folio (``AnonHugePages``).
    hugepage_advice : int
        ``madvise``: 1 = MADV_HUGEPAGE (``VM_HUGEPAGE``), -1 = MADV_NOHUGEPAGE (``VM_NOHUGEPAGE``), 0 = none.
    hugetlb : bool
        A ``MAP_HUGETLB`` mapping: its pages come from the hugetlb pool, 512 at a time.
    """

    start: int
    end: int
    pgoff: int
    kind: VmaKind = "anon"
    tag: str | None = None
    policy: MemPolicy | None = None
    placement: PlacementPolicy | None = None
    inode: int = 0
    path: str | None = None
    nodes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int16))
    zones: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int16))
    shm: ShmSegment | None = None
    thp: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    hugepage_advice: int = 0
    hugetlb: bool = False

    def __post_init__(self) -> None:
        if self.start % PAGE_SIZE or self.end % PAGE_SIZE or self.end <= self.start:
            raise WorkloadError(f"VMA [{self.start:#x}, {self.end:#x}) is not a page-aligned non-empty range")
        if self.shm is not None:
            if self.pgoff + self.npages > self.shm.npages:
                raise WorkloadError(f"mapping of {self.npages} pages at offset {self.pgoff} exceeds shm segment "
                                    f"{self.shm.shmid} ({self.shm.npages} pages)")
            self.nodes = self.shm.nodes[self.pgoff : self.pgoff + self.npages]
            self.zones = self.shm.zones[self.pgoff : self.pgoff + self.npages]
        elif self.nodes.size != self.npages:
            self.nodes = np.full(self.npages, -1, dtype=np.int16)
            self.zones = np.full(self.npages, -1, dtype=np.int16)
        if self.thp.size != self.npages:
            self.thp = np.zeros(self.npages, dtype=bool)

    @property
    def npages(self) -> int:
        return (self.end - self.start) >> PAGE_SHIFT

    @property
    def present(self) -> int:
        """Number of faulted pages."""
        return int(np.count_nonzero(self.nodes >= 0))

    def contains(self, addr: int) -> bool:
        return self.start <= addr < self.end

    def page_index(self, addr: int) -> int:
        return (addr - self.start) >> PAGE_SHIFT

    def addresses(self, idx: np.ndarray) -> np.ndarray:
        """Virtual address of the pages at indices ``idx``."""
        return self.start + (np.asarray(idx, dtype=np.int64) << PAGE_SHIFT)

    def ilx(self, idx: np.ndarray, version: str | KernelVersion = "6.12") -> np.ndarray:
        """Interleave index of the pages at ``idx`` (``get_vma_policy``, order 0).

        ``vm_pgoff + page offset in the VMA``, plus the inode number for shmem from 6.7 on.
        """
        base = self.inode if self.kind == "shmem" and parse_version(version) >= (6, 7) else 0
        return base + self.pgoff + np.asarray(idx, dtype=np.int64)

    def pages_per_node(self) -> dict[int, int]:
        """``{node: pages}`` of the present pages (what numa_maps prints as ``N<node>=<pages>``)."""
        present = self.nodes[self.nodes >= 0]
        if present.size == 0:
            return {}
        counts = np.bincount(present.astype(np.int64))
        return {int(n): int(c) for n, c in enumerate(counts) if c}

    def split(self, addr: int) -> tuple[VMA, VMA]:
        """``split_vma``: two VMAs ``[start, addr)`` and ``[addr, end)`` sharing policy and contents."""
        if not self.start < addr < self.end or addr % PAGE_SIZE:
            raise ValueError(f"cannot split [{self.start:#x}, {self.end:#x}) at {addr:#x}")
        k = self.page_index(addr)
        # A huge folio cut by the split is split into base pages (split_huge_pmd): its pages stay where they are.
        thp = self.thp.copy()
        into = (addr >> PAGE_SHIFT) % HPAGE_NR  # pages of the 2 MiB block before the cut
        if into and thp[k]:
            thp[max(0, k - into) : k - into + HPAGE_NR] = False
        left = VMA(self.start, addr, self.pgoff, self.kind, self.tag, self.policy, self.placement,
                   self.inode, self.path, self.nodes[:k].copy(), self.zones[:k].copy(), self.shm,
                   thp[:k].copy(), self.hugepage_advice, self.hugetlb)
        right = VMA(addr, self.end, self.pgoff + k, self.kind, self.tag, self.policy, self.placement,
                    self.inode, self.path, self.nodes[k:].copy(), self.zones[k:].copy(), self.shm,
                    thp[k:].copy(), self.hugepage_advice, self.hugetlb)
        return left, right

    def can_merge_with(self, nxt: VMA) -> bool:
        """``vma_merge`` conditions we model: adjacent, same backing and offsets in sequence, equal policy."""
        return (
            self.end == nxt.start
            and self.kind == nxt.kind
            and self.tag == nxt.tag
            and self.inode == nxt.inode
            and self.path == nxt.path
            and nxt.pgoff == self.pgoff + self.npages
            and mpol_equal(self.policy, nxt.policy)
            and self.placement is nxt.placement
            and self.shm is nxt.shm
            and self.hugepage_advice == nxt.hugepage_advice
            and self.hugetlb == nxt.hugetlb
        )

    def merged(self, nxt: VMA) -> VMA:
        return VMA(self.start, nxt.end, self.pgoff, self.kind, self.tag, self.policy, self.placement,
                   self.inode, self.path, np.concatenate([self.nodes, nxt.nodes]),
                   np.concatenate([self.zones, nxt.zones]), self.shm, np.concatenate([self.thp, nxt.thp]),
                   self.hugepage_advice, self.hugetlb)


class MM:
    """An address space: the VMAs of a task, sorted by address, and where new mappings go.

    Lookups bisect a cached array of VMA starts, so a task with thousands of mappings stays cheap; every
    change assigns a new list to :attr:`vmas`, which drops the cache.
    """

    def __init__(self) -> None:
        self._vmas: list[VMA] = []
        self._starts: list[int] | None = None
        self.brk = HEAP_BASE
        self._next_inode = 1

    @property
    def vmas(self) -> list[VMA]:
        """The mappings in address order (treat as read-only; assign a new list to change it)."""
        return self._vmas

    @vmas.setter
    def vmas(self, value: list[VMA]) -> None:
        self._vmas = list(value)
        self._starts = None

    def _start_list(self) -> list[int]:
        if self._starts is None:
            self._starts = [v.start for v in self._vmas]
        return self._starts

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._vmas)

    def new_inode(self) -> int:
        ino = self._next_inode
        self._next_inode += 1
        return ino

    def find_vma(self, addr: int) -> VMA | None:
        """The VMA containing ``addr`` (``vma_lookup``), or None."""
        i = bisect_right(self._start_list(), addr) - 1
        if i >= 0 and addr < self._vmas[i].end:
            return self._vmas[i]
        return None

    def _range_slice(self, start: int, end: int) -> tuple[int, int]:
        starts = self._start_list()
        lo = max(bisect_right(starts, start) - 1, 0)
        if lo < len(self._vmas) and self._vmas[lo].end <= start:
            lo += 1
        hi = bisect_left(starts, end)
        return lo, hi

    def vmas_in(self, start: int, end: int) -> list[VMA]:
        """VMAs intersecting ``[start, end)``, in address order."""
        if end <= start:
            return []
        lo, hi = self._range_slice(start, end)
        return self._vmas[lo:hi]

    def overlaps(self, start: int, end: int) -> bool:
        return bool(self.vmas_in(start, end))

    def covered(self, start: int, end: int) -> bool:
        """True if ``[start, end)`` has no hole (every byte is in some VMA)."""
        pos = start
        for v in self.vmas_in(start, end):
            if v.start > pos:
                return False
            pos = max(pos, v.end)
        return pos >= end

    def get_unmapped_area(self, length: int) -> int:
        """Top-down search below :data:`MMAP_BASE` for the highest gap that fits (``vm_unmapped_area``)."""
        gap_end = MMAP_BASE
        below = [v for v in self._vmas if v.start < MMAP_BASE]
        for v in reversed(below):
            if v.end <= gap_end and gap_end - v.end >= length:
                return gap_end - length
            gap_end = min(gap_end, v.start)
        if gap_end - length < HEAP_BASE:
            raise WorkloadError(f"mmap: no room for {length} bytes in the simulated address space")
        return gap_end - length

    def insert(self, vma: VMA) -> VMA:
        if self.overlaps(vma.start, vma.end):
            raise WorkloadError(f"mapping [{vma.start:#x}, {vma.end:#x}) overlaps an existing mapping")
        i = bisect_left(self._start_list(), vma.start)
        self.vmas = [*self._vmas[:i], vma, *self._vmas[i:]]
        return vma

    def split_at(self, addr: int) -> None:
        """Split the VMA that strictly contains ``addr`` so that a VMA boundary falls on ``addr``."""
        v = self.find_vma(addr)
        if v is not None and v.start < addr:
            i = bisect_right(self._start_list(), addr) - 1
            self.vmas = [*self._vmas[:i], *v.split(addr), *self._vmas[i + 1 :]]

    def isolate(self, start: int, end: int) -> list[VMA]:
        """Split at ``start`` and ``end``; return the VMAs that now lie inside ``[start, end)``."""
        self.split_at(start)
        self.split_at(end)
        return [v for v in self.vmas_in(start, end) if v.start >= start and v.end <= end]

    def remove(self, start: int, end: int) -> list[VMA]:
        """``munmap``: remove ``[start, end)``; return the removed pieces (their pages still need freeing)."""
        inside = self.isolate(start, end)
        ids = {id(v) for v in inside}
        self.vmas = [v for v in self._vmas if id(v) not in ids]
        return inside

    def merge_around(self, start: int, end: int) -> None:
        """Merge neighbours with equal policies in and around ``[start, end)`` (``vma_merge`` after mbind)."""
        lo, hi = self._range_slice(start, end)
        lo, hi = max(lo - 1, 0), min(hi + 1, len(self._vmas))
        out: list[VMA] = []
        for v in self._vmas[lo:hi]:
            if out and start <= v.start <= end and out[-1].can_merge_with(v):
                out[-1] = out[-1].merged(v)
            else:
                out.append(v)
        if len(out) != hi - lo:
            self.vmas = [*self._vmas[:lo], *out, *self._vmas[hi:]]


@dataclass(eq=False)
class Task:
    """A thread (``task_struct`` fields that placement reads); threads of one process share ``mm``.

    Attributes
    ----------
    pid, comm : int, str
    cpus_allowed : frozenset of int
        CPU affinity (``sched_setaffinity``), already restricted to the cpuset's cpus.
    cpu : int
        CPU the task runs on now (its node is ``numa_node_id()`` for local allocation and numastat).
    mempolicy : MemPolicy or None
        Task policy (``current->mempolicy``); None = the per-node default.
    placement : PlacementPolicy or None
        A plug-in placement policy for the whole task (overrides ``mempolicy`` for new faults).
    il_prev, il_weight : int
        Per-task interleave state (``current->il_prev``, ``current->il_weight``).
    mems_allowed : frozenset of int
        The cpuset's memory nodes.
    cpuset : str
        Name of the cpuset the task is attached to.
    cap_sys_nice : bool
        Has ``CAP_SYS_NICE`` (needed for MPOL_MF_MOVE_ALL and for migrate_pages outside the cpuset).
    mm : MM
        The address space, shared by the threads of a process (each thread has its own policy and cpu).
    """

    pid: int
    comm: str
    cpus_allowed: frozenset[int]
    cpu: int
    mems_allowed: frozenset[int]
    cpuset: str = "/"
    mempolicy: MemPolicy | None = None
    placement: PlacementPolicy | None = None
    il_prev: int = MAX_NUMNODES - 1
    il_weight: int = 0
    cap_sys_nice: bool = False
    mm: MM = field(default_factory=MM)
    tgid: int = -1
    """Thread group (process) id; the pid of the thread that started the process (-1: same as ``pid``)."""
    alive: bool = True
    exit_reason: str | None = None

    def __post_init__(self) -> None:
        if self.tgid < 0:
            self.tgid = self.pid

    def find_vma(self, addr: int) -> VMA | None:
        return self.mm.find_vma(addr)

    @property
    def rss_pages(self) -> int:
        return sum(v.present for v in self.mm.vmas)

    def pages_per_node(self) -> dict[int, int]:
        total: dict[int, int] = {}
        for v in self.mm.vmas:
            for n, c in v.pages_per_node().items():
                total[n] = total.get(n, 0) + c
        return total
