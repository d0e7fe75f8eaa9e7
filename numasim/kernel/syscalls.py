"""The memory-policy system calls, with the kernel's validation order and errnos (mm/mempolicy.c, mm/migrate.c).

``set_mempolicy``, ``get_mempolicy``, ``mbind``, ``migrate_pages``, ``move_pages`` and
``set_mempolicy_home_node`` as functions of a :class:`~numasim.kernel.kernel.Kernel` and a task. Each returns a
:class:`~numasim.kernel.errno.SyscallResult` (``ret``, ``errno``, out-values) and never raises for bad input.
Nodemasks are Python sets read through ``maxnode`` exactly like a user bitmap (bits ``0 .. maxnode-2``);
``maxnode=None`` stands for "big enough".

Simplifications (documented, not hidden): one thread per task; only shared memory segments are shared
between processes (every page of a segment mapped by two tasks counts as shared for MPOL_MF_MOVE);
``PTRACE_MODE_READ`` always passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from numasim.kernel.errno import ERRNO, KernelErrno, SyscallResult
from numasim.kernel.mempolicy import (
    MAX_NUMNODES,
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_ADDR,
    MPOL_F_MEMS_ALLOWED,
    MPOL_F_NODE,
    MPOL_INTERLEAVE,
    MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL,
    MPOL_MF_STRICT,
    MPOL_MF_VALID,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
    NUMA_NO_NODE,
    MemPolicy,
    get_nodes,
    mpol_new,
    next_node_in,
    node_remap,
    policy_report,
    sanitize_mpol_flags,
)
from numasim.kernel.migrate import migrate_vma_pages, to_node
from numasim.kernel.modes import decide
from numasim.kernel.placer import placement_context
from numasim.kernel.task import PAGE_SHIFT, PAGE_SIZE, VMA, Task

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = [
    "set_mempolicy",
    "get_mempolicy",
    "mbind",
    "migrate_pages",
    "do_migrate_pages",
    "move_pages",
    "set_mempolicy_home_node",
]

_BIG_MAXNODE = MAX_NUMNODES + 1


def _maxnode(maxnode: int | None) -> int:
    return _BIG_MAXNODE if maxnode is None else int(maxnode)


_ULONG = (1 << 64) - 1


def _page_align(length: int) -> int:
    # len is an unsigned long: a negative length wraps to a huge one, and PAGE_ALIGN may wrap to 0.
    return ((length & _ULONG) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1) & _ULONG


def _range_end(start: int, length: int) -> int:
    return (start + _page_align(length)) & _ULONG


# --- set_mempolicy -------------------------------------------------------------------------------------------
def set_mempolicy(
    k: Kernel, task: Task, mode: int, nodemask: Iterable[int] | None, maxnode: int | None = None
) -> SyscallResult:
    """``set_mempolicy(2)``: ``sanitize_mpol_flags`` -> ``get_nodes`` -> ``mpol_new`` -> install.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.kernel.mempolicy import MPOL_BIND
    >>> k = Kernel(glueless(2)); t = k.spawn("a")
    >>> set_mempolicy(k, t, MPOL_BIND, set()).errno
    'EINVAL'
    """
    try:
        m, flags = sanitize_mpol_flags(mode, k.version)
        nodes = get_nodes(nodemask, _maxnode(maxnode))
        pol = mpol_new(m, flags, nodes, mems_allowed=task.mems_allowed, memory_nodes=k.memory_nodes)
    except KernelErrno as err:
        return SyscallResult.from_error(err)
    task.mempolicy = pol
    if pol is not None and pol.mode in (MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE):
        task.il_prev = MAX_NUMNODES - 1
        task.il_weight = 0
    return SyscallResult.success()


# --- get_mempolicy -------------------------------------------------------------------------------------------
def get_mempolicy(
    k: Kernel,
    task: Task,
    flags: int = 0,
    addr: int = 0,
    maxnode: int | None = None,
    *,
    want_nodemask: bool = True,
) -> SyscallResult:
    """``get_mempolicy(2)`` (kernel_spec 5.11): ``value["mode"]`` (or the node with MPOL_F_NODE), ``value["nodemask"]``.

    With ``MPOL_F_NODE | MPOL_F_ADDR`` a page that is not present is faulted in first.
    """
    if want_nodemask and _maxnode(maxnode) < k.nr_node_ids:
        return SyscallResult.fail("EINVAL", f"maxnode {maxnode} < nr_node_ids {k.nr_node_ids}")
    if flags & ~(MPOL_F_NODE | MPOL_F_ADDR | MPOL_F_MEMS_ALLOWED):
        return SyscallResult.fail("EINVAL", f"unknown get_mempolicy flags {flags:#x}")
    if flags & MPOL_F_MEMS_ALLOWED:
        if flags & (MPOL_F_NODE | MPOL_F_ADDR):
            return SyscallResult.fail("EINVAL", "MPOL_F_MEMS_ALLOWED with MPOL_F_NODE or MPOL_F_ADDR")
        return SyscallResult.success(mode=0, nodemask=task.mems_allowed if want_nodemask else None)
    pol: MemPolicy | None
    vma: VMA | None = None
    if flags & MPOL_F_ADDR:
        vma = task.mm.find_vma(addr)
        if vma is None:
            return SyscallResult.fail("EFAULT", f"no mapping at {addr:#x}")
        pol = k.vma_own_policy(vma, vma.page_index(addr))
    elif addr:
        return SyscallResult.fail("EINVAL", "addr given without MPOL_F_ADDR")
    else:
        pol = task.mempolicy
    report = policy_report(pol)
    if flags & MPOL_F_NODE:
        if flags & MPOL_F_ADDR:
            assert vma is not None
            i = vma.page_index(addr)
            if vma.nodes[i] < 0:
                page = addr & ~(PAGE_SIZE - 1)
                k.touch(task, page, PAGE_SIZE)
                if vma.nodes[i] < 0:
                    return SyscallResult.fail("EFAULT", f"page at {addr:#x} could not be faulted in")
            value = int(vma.nodes[i])
        elif pol is not None and pol is task.mempolicy and pol.mode == MPOL_INTERLEAVE:
            value = next_node_in(task.il_prev, pol.nodes)
        elif pol is not None and pol is task.mempolicy and pol.mode == MPOL_WEIGHTED_INTERLEAVE:
            value = task.il_prev if task.il_weight else next_node_in(task.il_prev, pol.nodes)
        else:
            return SyscallResult.fail("EINVAL", "MPOL_F_NODE without MPOL_F_ADDR needs a task interleave policy")
    else:
        value = report.mode
    return SyscallResult.success(mode=value, nodemask=report.nodemask if want_nodemask else None)


# --- mbind ---------------------------------------------------------------------------------------------------
def mbind(
    k: Kernel,
    task: Task,
    start: int,
    length: int,
    mode: int,
    nodemask: Iterable[int] | None,
    maxnode: int | None = None,
    flags: int = 0,
) -> SyscallResult:
    """``mbind(2)`` (kernel_spec 5.10): validate, apply the policy to the range, check/migrate existing pages.

    A page is misplaced when its node is not in the *user's* nodemask. ``MPOL_MF_STRICT`` alone fails with
    EIO on the first misplaced page before anything changes; with ``MPOL_MF_MOVE`` the policy is applied,
    misplaced pages migrate to where the new policy puts them, and STRICT turns failed moves into EIO.
    ``value["migrated"]`` and ``value["failed"]`` count pages moved and pages that could not be moved.
    """
    try:
        m, mode_flags = sanitize_mpol_flags(mode, k.version)
        nodes = get_nodes(nodemask, _maxnode(maxnode))
    except KernelErrno as err:
        return SyscallResult.from_error(err)
    if flags & ~MPOL_MF_VALID:
        return SyscallResult.fail("EINVAL", f"mbind flags {flags:#x} outside MPOL_MF_VALID")
    if flags & MPOL_MF_MOVE_ALL and not task.cap_sys_nice:
        return SyscallResult.fail("EPERM", "MPOL_MF_MOVE_ALL needs CAP_SYS_NICE")
    if start % PAGE_SIZE:
        return SyscallResult.fail("EINVAL", f"start {start:#x} is not page aligned")
    if m == MPOL_DEFAULT:
        flags &= ~MPOL_MF_STRICT
    end = _range_end(start, length)
    if end < start:
        return SyscallResult.fail("EINVAL", "end < start")
    if end == start:
        return SyscallResult.success()
    try:
        new = mpol_new(m, mode_flags, nodes, mems_allowed=task.mems_allowed, memory_nodes=k.memory_nodes)
    except KernelErrno as err:
        return SyscallResult.from_error(err)
    mm = task.mm
    if not mm.vmas_in(start, end):
        return SyscallResult.fail("EFAULT", f"no mapping in [{start:#x}, {end:#x})")
    if new is not None and not mm.covered(start, end):
        return SyscallResult.fail("EFAULT", f"[{start:#x}, {end:#x}) has a hole")

    # queue_pages_range: pages whose node is not in the user's nodes are "misplaced" (MPOL_MF_INVERT).
    # STRICT without MOVE stops the walk with EIO before any VMA is split or given the policy.
    check = bool(flags & (MPOL_MF_STRICT | MPOL_MF_MOVE | MPOL_MF_MOVE_ALL))
    move = bool(flags & (MPOL_MF_MOVE | MPOL_MF_MOVE_ALL))
    user_nodes = np.array(sorted(nodes), dtype=np.int16)
    if check and not move:
        for vma in mm.vmas_in(start, end):
            lo = (max(start, vma.start) - vma.start) >> PAGE_SHIFT
            hi = (min(end, vma.end) - vma.start) >> PAGE_SHIFT
            part = vma.nodes[lo:hi]
            if np.any((part >= 0) & ~np.isin(part, user_nodes)):
                return SyscallResult.fail("EIO", f"a page in [{start:#x}, {end:#x}) lies outside {sorted(nodes)}")
    vmas = mm.isolate(start, end)
    misplaced: list[np.ndarray] = []
    nr_failed = 0
    for vma in vmas:
        if not move:
            misplaced.append(np.empty(0, np.int64))
            continue
        present = vma.nodes >= 0
        if vma.shm is not None and not flags & MPOL_MF_MOVE_ALL and k.shm_attach_count(vma.shm) > 1:
            # MPOL_MF_MOVE leaves pages that other processes map (a mapped segment's pages count as such);
            # they are failures for STRICT (migrate_folio_add refuses them)
            nr_failed += int(np.count_nonzero(present & ~np.isin(vma.nodes, user_nodes)))
            misplaced.append(np.empty(0, np.int64))
            continue
        misplaced.append(np.flatnonzero(present & ~np.isin(vma.nodes, user_nodes)))
    for vma in vmas:  # mbind_range: install the policy (shmem: also in the shared object, for every mapping)
        vma.policy = new
        vma.placement = None
        if vma.shm is not None and not vma.shm.hugetlb:  # hugetlbfs has no set_policy: the mapping keeps it
            vma.shm.set_policy(vma.pgoff, vma.pgoff + vma.npages, new)
    migrated = failed_moves = 0
    if move:
        # "Convert MPOL_DEFAULT's NULL to task or default policy" for the migration targets.
        target_pol = new if new is not None else task.mempolicy
        for vma, bad in zip(vmas, misplaced, strict=True):
            if bad.size:
                moved, failed = _migrate_vma_pages(k, task, vma, bad, target_pol)
                migrated += moved
                failed_moves += failed
        nr_failed += failed_moves
    mm.merge_around(start, end)
    if nr_failed and flags & MPOL_MF_STRICT:
        return SyscallResult.fail("EIO", f"{nr_failed} page(s) could not be moved into the policy's nodes",
                                  migrated=migrated, failed=nr_failed)
    return SyscallResult.success(migrated=migrated, failed=nr_failed)


def _migrate_vma_pages(k: Kernel, task: Task, vma: VMA, idx: np.ndarray, pol: MemPolicy | None) -> tuple[int, int]:
    """Move pages ``idx`` of ``vma`` to where ``pol`` puts them (``alloc_migration_target_by_mpol``)."""
    ctx = placement_context(k, task, vma, idx, task.cpu)
    ok = migrate_vma_pages(k, task, vma, idx, decide(pol, ctx), cpu_node=ctx.cpu_node)
    moved = int(np.count_nonzero(ok))
    return moved, int(idx.size) - moved


# --- migrate_pages -------------------------------------------------------------------------------------------
def migrate_pages(
    k: Kernel,
    task: Task,
    old_nodes: Iterable[int] | None,
    new_nodes: Iterable[int] | None,
    maxnode: int | None = None,
    *,
    caller: Task | None = None,
) -> SyscallResult:
    """``migrate_pages(2)``: move ``task``'s pages from ``old_nodes`` to ``new_nodes`` (kernel_spec 5.14).

    ``ret`` is the number of pages that could not be moved; ``value["moves"]`` lists the ``(source, dest)``
    node pairs in the order they were done.
    """
    caller = caller if caller is not None else task
    try:
        old = get_nodes(old_nodes, _maxnode(maxnode))
        new = get_nodes(new_nodes, _maxnode(maxnode))
    except KernelErrno as err:
        return SyscallResult.from_error(err)
    if not task.alive or k.tasks.get(task.pid) is not task:
        return SyscallResult.fail("ESRCH", f"no task {task.pid}")
    if not new <= task.mems_allowed and not caller.cap_sys_nice:
        return SyscallResult.fail("EPERM", "target nodes outside the task's cpuset need CAP_SYS_NICE")
    new = new & caller.mems_allowed  # (the old N_MEMORY subset test is gone since 4.15: just intersect)
    if not new:
        return SyscallResult.fail("EINVAL", "no target node left inside the caller's cpuset")
    busy, moves = do_migrate_pages(k, task, old, new, move_all=caller.cap_sys_nice)
    return SyscallResult.success(busy, moves=moves)


def do_migrate_pages(
    k: Kernel, task: Task, old: frozenset[int], new: frozenset[int], *, move_all: bool = False
) -> tuple[int, list[tuple[int, int]]]:
    """``do_migrate_pages``: pick (source, dest) pairs so a destination is emptied before it is filled."""
    tmp = set(old)
    busy = 0
    moves: list[tuple[int, int]] = []
    while tmp:
        source = dest = NUMA_NO_NODE
        for s in sorted(tmp):
            # With |old| != |new|, a node that is also a target is not a source ([0-7] -> [3,4,5]).
            if len(old) != len(new) and s in new:
                continue
            d = node_remap(s, old, new)
            if s == d:
                continue
            source, dest = s, d
            if dest not in tmp:
                break
        if source == NUMA_NO_NODE:
            break
        tmp.discard(source)
        moves.append((source, dest))
        busy += migrate_to_node(k, task, source, dest, move_all=move_all)
    return busy, moves


def migrate_to_node(k: Kernel, task: Task, source: int, dest: int, *, move_all: bool = False) -> int:
    """Move every page of ``task`` on ``source`` to ``dest`` (``__GFP_THISNODE``); return pages left behind.

    Without ``move_all`` (MPOL_MF_MOVE) pages that other processes map are left alone (not counted)."""
    left = 0
    for vma in task.mm.vmas:
        idx = np.flatnonzero(vma.nodes == source)
        if idx.size == 0:
            continue
        if vma.shm is not None and not move_all and k.shm_attach_count(vma.shm) > 1:
            continue
        ok = migrate_vma_pages(k, task, vma, idx, to_node(dest), thisnode=True)
        left += int(idx.size - np.count_nonzero(ok))
    return left


# --- move_pages ----------------------------------------------------------------------------------------------
def move_pages(
    k: Kernel,
    task: Task,
    pages: Iterable[int],
    nodes: Iterable[int] | None = None,
    flags: int = MPOL_MF_MOVE,
    *,
    caller: Task | None = None,
) -> SyscallResult:
    """``move_pages(2)``: with ``nodes=None`` report each page's node, else move each page to its node.

    ``value["status"]`` (int64 array): the node of each page, or ``-errno`` (``-ENOENT`` not present,
    ``-EFAULT`` not mapped, ``-ENOMEM`` target node full). An invalid target node stops the call like the
    kernel: ``ENODEV`` (no such node or no memory) or ``EACCES`` (outside the cpuset); entries from the failing
    one on are left 0. ``ret`` is the number of pages that could not be moved.
    """
    caller = caller if caller is not None else task
    if flags & ~(MPOL_MF_MOVE | MPOL_MF_MOVE_ALL):
        return SyscallResult.fail("EINVAL", f"move_pages flags {flags:#x}")
    if flags & MPOL_MF_MOVE_ALL and not caller.cap_sys_nice:
        return SyscallResult.fail("EPERM", "MPOL_MF_MOVE_ALL needs CAP_SYS_NICE")
    if not task.alive or k.tasks.get(task.pid) is not task:
        return SyscallResult.fail("ESRCH", f"no task {task.pid}")
    # The syscall takes `void *pages[]`: every address is an unsigned 64-bit value (a negative Python int is the
    # caller's two's-complement bit pattern), so anything >= 2**63 is simply unmapped, never an overflow.
    addrs = np.array([int(a) & 0xFFFF_FFFF_FFFF_FFFF for a in pages], dtype=np.uint64)
    status = np.zeros(addrs.size, dtype=np.int64)
    vma_of, idx_of = _lookup_pages(task, addrs)
    if nodes is None:
        for j, vma in enumerate(task.mm.vmas):
            sel = np.flatnonzero(vma_of == j)
            page_nodes = vma.nodes[idx_of[sel]].astype(np.int64)
            status[sel] = np.where(page_nodes >= 0, page_nodes, -ERRNO["ENOENT"])
        status[vma_of < 0] = -ERRNO["EFAULT"]
        return SyscallResult.success(status=status)

    targets = np.asarray(list(nodes), dtype=np.int64)
    if targets.size != addrs.size:
        return SyscallResult.fail("EINVAL", f"{addrs.size} pages but {targets.size} nodes")
    stop = addrs.size
    error: tuple[str, str] | None = None
    for i, node in enumerate(targets.tolist()):
        if node < 0 or node >= MAX_NUMNODES or node not in k.memory_nodes:
            stop, error = i, ("ENODEV", f"node {node} does not exist or has no memory")
            break
        if node not in task.mems_allowed:
            stop, error = i, ("EACCES", f"node {node} is outside the task's cpuset")
            break
    not_moved = 0
    for j, vma in enumerate(task.mm.vmas):
        sel = np.flatnonzero(vma_of[:stop] == j)
        if sel.size == 0:
            continue
        idx = idx_of[sel]
        cur = vma.nodes[idx].astype(np.int64)
        status[sel] = np.where(cur >= 0, targets[sel], -ERRNO["ENOENT"])
        if vma.shm is not None and not flags & MPOL_MF_MOVE_ALL and k.shm_attach_count(vma.shm) > 1:
            # a page other processes map moves only with MPOL_MF_MOVE_ALL
            shared = (cur >= 0) & (cur != targets[sel])
            status[sel[shared]] = -ERRNO["EACCES"]
            continue
        for dest in np.unique(targets[sel][(cur >= 0) & (cur != targets[sel])]).tolist():
            want = sel[(cur >= 0) & (targets[sel] == dest) & (cur != dest)]
            pidx = np.unique(idx_of[want])
            ok = migrate_vma_pages(k, task, vma, pidx, to_node(dest), thisnode=True)
            failed_pages = pidx[~ok]
            if failed_pages.size:
                hit = want[np.isin(idx_of[want], failed_pages)]
                status[hit] = -ERRNO["ENOMEM"]
                not_moved += int(hit.size)
    status[:stop][vma_of[:stop] < 0] = -ERRNO["EFAULT"]
    if error is not None:
        return SyscallResult.fail(error[0], error[1], status=status)
    return SyscallResult.success(not_moved, status=status)


def _lookup_pages(task: Task, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """VMA number (-1 if unmapped) and page index of each address, vectorised."""
    vmas = task.mm.vmas
    vma_of = np.full(addrs.size, -1, dtype=np.int64)
    idx_of = np.zeros(addrs.size, dtype=np.int64)
    if not vmas or addrs.size == 0:
        return vma_of, idx_of
    addrs = addrs.astype(np.uint64)
    starts = np.array([v.start for v in vmas], dtype=np.uint64)
    ends = np.array([v.end for v in vmas], dtype=np.uint64)
    pos = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
    inside = (pos >= 0) & (addrs < ends[np.clip(pos, 0, None)])
    vma_of[inside] = pos[inside]
    idx_of[inside] = ((addrs[inside] - starts[pos[inside]]) >> np.uint64(PAGE_SHIFT)).astype(np.int64)
    return vma_of, idx_of


# --- set_mempolicy_home_node ---------------------------------------------------------------------------------
def set_mempolicy_home_node(
    k: Kernel, task: Task, start: int, length: int, home_node: int, flags: int = 0
) -> SyscallResult:
    """``set_mempolicy_home_node(2)``: set the home node of the BIND / PREFERRED_MANY VMA policies in a range."""
    if start % PAGE_SIZE:
        return SyscallResult.fail("EINVAL", f"start {start:#x} is not page aligned")
    if home_node < 0 or home_node >= MAX_NUMNODES or home_node not in k.possible_nodes:
        return SyscallResult.fail("EINVAL", f"home node {home_node} is not online")
    if flags:
        return SyscallResult.fail("EINVAL", "flags must be 0")
    end = _range_end(start, length)
    if end < start:
        return SyscallResult.fail("EINVAL", "end < start")
    if end == start:
        return SyscallResult.success()
    mm = task.mm
    result = SyscallResult.success()
    for vma in mm.isolate(start, end):
        old = vma.policy
        if old is None:
            continue
        if old.mode not in (MPOL_BIND, MPOL_PREFERRED_MANY):
            result = SyscallResult.fail("EOPNOTSUPP", f"VMA at {vma.start:#x} has a {old.name!r} policy")
            break
        vma.policy = replace(old, home_node=home_node)
    mm.merge_around(start, end)
    return result
