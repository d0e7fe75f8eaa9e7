"""Shared memory segments: one shared policy for every mapping (mpol_shared_policy_lookup), pages owned by
the segment, IPC_RMID, and MPOL_MF_MOVE leaving pages other processes map."""

from __future__ import annotations

from _mpol_machines import kernel, two_nodes

from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_F_ADDR,
    MPOL_INTERLEAVE,
    MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL,
    MPOL_MF_STRICT,
    MPOL_PREFERRED,
)
from numasim.kernel.task import PAGE_SIZE


def test_mbind_by_one_process_applies_to_faults_of_another() -> None:
    k = two_nodes()
    seg = k.shmget(8 * PAGE_SIZE)
    a = k.spawn("numactl", cpu=0)
    va = k.shmat(a, seg)
    assert k.mbind(a, va.start, 8 * PAGE_SIZE, MPOL_BIND, {1}).ok
    k.exit(a)  # the segment and its policy outlive the process
    b = k.spawn("user", cpu=0)
    vb = k.shmat(b, seg)
    r = k.get_mempolicy(b, MPOL_F_ADDR, vb.start)
    assert (r["mode"], r["nodemask"]) == (MPOL_BIND, {1})
    assert k.policy_string(b, vb) == "bind:1"
    k.touch(b, vb.start, 8 * PAGE_SIZE)
    assert vb.pages_per_node() == {1: 8}
    c = k.spawn("other", cpu=2)
    vc = k.shmat(c, seg)
    assert vc.pages_per_node() == {1: 8}  # same pages, seen through another mapping


def test_shared_policy_is_per_range_and_falls_back_to_task_policy() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)])
    seg = k.shmget(6 * PAGE_SIZE)
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_PREFERRED, {2}).ok
    v = k.shmat(t, seg)
    assert k.mbind(t, v.start, 2 * PAGE_SIZE, MPOL_BIND, {1}).ok
    k.touch(t, v.start, 6 * PAGE_SIZE)
    assert seg.nodes.tolist() == [1, 1, 2, 2, 2, 2]


def test_segment_pages_freed_at_last_detach_after_rmid() -> None:
    k = two_nodes()
    free0 = k.pm.free_pages(0)
    seg = k.shmget(4 * PAGE_SIZE)
    t = k.spawn("a", cpu=0)
    v = k.shmat(t, seg)
    k.touch(t, v.start, 4 * PAGE_SIZE)
    assert k.shmdt(t, v.start + PAGE_SIZE).errno == "EINVAL"
    assert k.shmdt(t, v.start).ok
    assert k.pm.free_pages(0) == free0 - 4  # still owned by the segment
    u = k.spawn("b", cpu=0)
    k.shmat(u, seg)
    k.shm_remove(seg)
    assert k.pm.free_pages(0) == free0 - 4 and seg.shmid in k.shm_segments
    k.exit(u)
    assert k.pm.free_pages(0) == free0 and seg.shmid not in k.shm_segments


def test_move_skips_pages_mapped_by_others_unless_move_all() -> None:
    k = two_nodes()
    seg = k.shmget(4 * PAGE_SIZE)
    a = k.spawn("a", cpu=0, cap_sys_nice=True)
    b = k.spawn("b", cpu=0)
    va = k.shmat(a, seg)
    k.shmat(b, seg)
    k.touch(a, va.start, 4 * PAGE_SIZE)
    r = k.mbind(a, va.start, 4 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_MOVE | MPOL_MF_STRICT)
    assert r.errno == "EIO" and seg.nodes.tolist() == [0] * 4
    r = k.mbind(a, va.start, 4 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_MOVE_ALL)
    assert r.ok and r["migrated"] == 4 and seg.nodes.tolist() == [1] * 4


def test_shm_interleave_uses_segment_offsets() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)], version="6.1")
    seg = k.shmget(6 * PAGE_SIZE)
    t = k.spawn("a", cpu=0)
    v = k.shmat(t, seg)
    assert k.mbind(t, v.start, 6 * PAGE_SIZE, MPOL_INTERLEAVE, {0, 1, 2}).ok
    k.touch(t, v.start + 3 * PAGE_SIZE, 3 * PAGE_SIZE)
    k.touch(t, v.start, 3 * PAGE_SIZE)
    assert seg.nodes.tolist() == [0, 1, 2, 0, 1, 2]  # by page offset, whatever the touch order


def test_anonymous_shared_mapping_frees_on_unmap() -> None:
    k = two_nodes()
    free0 = k.pm.free_pages(0)
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * PAGE_SIZE, kind="shmem")
    assert v.shm is not None and v.pgoff == 0
    k.touch(t, v.start, 4 * PAGE_SIZE)
    assert k.pm.free_pages(0) == free0 - 4
    assert k.munmap(t, v.start, 4 * PAGE_SIZE).ok
    assert k.pm.free_pages(0) == free0 and not k.shm_segments


def test_migrate_pages_leaves_shared_pages_without_cap() -> None:
    k = two_nodes()
    seg = k.shmget(4 * PAGE_SIZE)
    a = k.spawn("a", cpu=0)
    b = k.spawn("b", cpu=0)
    va = k.shmat(a, seg)
    k.shmat(b, seg)
    k.touch(a, va.start, 4 * PAGE_SIZE)
    assert k.migrate_pages(a, {0}, {1}).ok and seg.nodes.tolist() == [0] * 4
    root = k.spawn("root", cap_sys_nice=True)
    assert k.migrate_pages(a, {0}, {1}, caller=root).ok and seg.nodes.tolist() == [1] * 4


def test_move_pages_shared_page_is_eacces_without_move_all() -> None:
    from numasim.kernel.errno import ERRNO

    k = two_nodes()
    seg = k.shmget(2 * PAGE_SIZE)
    a = k.spawn("a", cpu=0, cap_sys_nice=True)
    b = k.spawn("b", cpu=0)
    va = k.shmat(a, seg)
    k.shmat(b, seg)
    k.touch(a, va.start, 2 * PAGE_SIZE)
    pages = [va.start, va.start + PAGE_SIZE]
    r = k.move_pages(a, pages, [1, 0])
    assert r["status"].tolist() == [-ERRNO["EACCES"], 0] and seg.nodes.tolist() == [0, 0]
    r = k.move_pages(a, pages, [1, 0], flags=MPOL_MF_MOVE_ALL)
    assert r["status"].tolist() == [1, 0] and seg.nodes.tolist() == [1, 0]
