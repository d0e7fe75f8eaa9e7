"""Tasks, VMAs and first-touch faults: address layout, split/merge, spill behaviour per mode (kernel_spec 2.3
"observed" notes), OOM kills, memoryless cpu nodes, conservation and determinism."""

from __future__ import annotations

import numpy as np
import pytest
from _mpol_machines import MiB, kernel, two_nodes
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import WorkloadError
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_INTERLEAVE,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
)
from numasim.kernel.task import MMAP_BASE, PAGE_SIZE, VMA
from numasim.kernel.zones import ZoneType


def _zone(k, nid: int, zt: ZoneType):  # type: ignore[no-untyped-def]
    return k.pm.zone(nid, zt)


def test_mmap_is_top_down_and_lazy() -> None:
    k = two_nodes()
    t = k.spawn("a")
    free0 = k.pm.free_pages(0)
    a = k.mmap(t, 3 * PAGE_SIZE + 1)
    b = k.mmap(t, PAGE_SIZE)
    assert a.end == MMAP_BASE and a.npages == 4
    assert b.end == a.start
    assert a.pgoff == a.start >> 12
    assert a.present == 0 and k.pm.free_pages(0) == free0
    heap = k.mmap(t, PAGE_SIZE, tag="heap")
    assert heap.start < b.start and heap.tag == "heap"


def test_munmap_reuses_the_highest_gap_and_frees_pages() -> None:
    k = two_nodes()
    t = k.spawn("a")
    a = k.mmap(t, 4 * PAGE_SIZE)
    free0 = k.pm.free_pages(0)
    k.touch(t, a.start, 4 * PAGE_SIZE)
    assert k.pm.free_pages(0) == free0 - 4
    assert k.munmap(t, a.start + PAGE_SIZE, PAGE_SIZE).ok
    assert [(v.start, v.npages) for v in t.mm.vmas] == [(a.start, 1), (a.start + 2 * PAGE_SIZE, 2)]
    assert k.pm.free_pages(0) == free0 - 3
    again = k.mmap(t, PAGE_SIZE)
    assert again.start == a.start + PAGE_SIZE
    assert k.munmap(t, a.start + 1, PAGE_SIZE).errno == "EINVAL"


def test_touch_unmapped_is_a_segfault() -> None:
    k = two_nodes()
    t = k.spawn("a")
    with pytest.raises(WorkloadError, match="SIGSEGV"):
        k.touch(t, 0x1000, PAGE_SIZE)


def test_vma_split_and_merge_keep_contents() -> None:
    vma = VMA(0x10000, 0x10000 + 8 * PAGE_SIZE, 0x10)
    vma.nodes[:] = np.arange(8)
    left, right = vma.split(0x10000 + 3 * PAGE_SIZE)
    assert (left.npages, right.npages, right.pgoff) == (3, 5, 0x13)
    assert left.can_merge_with(right)
    assert left.merged(right).nodes.tolist() == list(range(8))


def test_first_touch_is_local_to_the_touching_cpu() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 16 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    k.touch(t, vma.start, 16 * PAGE_SIZE, cpu=2)  # second half first touched from node 1
    assert vma.nodes.tolist() == [0] * 8 + [1] * 8
    assert k.numastat(1)["local_node"] == 8 and k.numastat(0)["local_node"] == 8


@pytest.mark.parametrize("mode", [MPOL_DEFAULT, MPOL_PREFERRED])
def test_default_and_preferred_spill_at_low_watermark(mode: int) -> None:
    k = two_nodes(256)
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, mode, {0} if mode else set()).ok
    vma = k.mmap(t, 300 * MiB)
    res = k.touch(t, vma.start, 300 * MiB)
    assert res.failed == 0 and not res.oom_killed
    z = _zone(k, 0, ZoneType.DMA32)
    assert z.free_pages == z.wmark_low  # fast path stops at "free > low"
    assert vma.pages_per_node()[1] > 0
    assert k.numastat(1)["numa_miss"] == vma.pages_per_node()[1]


def test_preferred_many_drains_to_min_then_spills() -> None:
    k = two_nodes(256)
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_PREFERRED_MANY, {0}).ok
    vma = k.mmap(t, 300 * MiB)
    res = k.touch(t, vma.start, 300 * MiB)
    assert res.failed == 0 and not res.oom_killed
    z = _zone(k, 0, ZoneType.DMA32)
    assert z.free_pages == z.wmark_min
    spilled = vma.pages_per_node()[1]
    # pass 2 uses the CPU node's zonelist with no mask: preferred zone is node 0, so node 1 counts misses
    assert k.numastat(1)["numa_miss"] == spilled


def test_bind_never_spills_and_is_oom_killed() -> None:
    k = two_nodes(256)
    t = k.spawn("hog", cpu=0)
    free1 = k.pm.free_pages(1)
    assert k.set_mempolicy(t, MPOL_BIND, {0}).ok
    vma = k.mmap(t, 300 * MiB)
    res = k.touch(t, vma.start, 300 * MiB)
    assert res.oom_killed and res.failed > 0
    assert k.pm.free_pages(1) == free1
    assert [(o.pid, o.comm) for o in k.oom_kills] == [(t.pid, "hog")]
    assert not t.alive and t.pid not in k.tasks
    assert k.numastat(1)["numa_hit"] + k.numastat(1)["numa_miss"] == 0
    # the OOM-killed task's memory was reaped
    assert k.touch(t, 0, 0).faulted == 0


def test_bind_to_remote_node_counts_hit_and_other() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_BIND, {1}).ok
    vma = k.mmap(t, 10 * PAGE_SIZE)
    k.touch(t, vma.start, 10 * PAGE_SIZE)
    assert k.numastat(1)["numa_hit"] == 10 and k.numastat(1)["other_node"] == 10


def test_memoryless_cpu_node_never_receives_pages() -> None:
    # node 1 has cpus but no memory; its nearest memory node is 2
    slit = [[10, 20, 30], [20, 10, 15], [30, 15, 10]]
    k = kernel([([0], 64), ([1], 0), ([2], 64)], slit=slit)
    assert k.memory_nodes == {0, 2}
    t = k.spawn("a", cpu=1)
    vma = k.mmap(t, 8 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    assert vma.pages_per_node() == {2: 8}
    assert k.numastat(2)["other_node"] == 8 and k.numastat(2)["numa_hit"] == 8
    assert k.set_mempolicy(t, MPOL_PREFERRED, {1}).errno == "EINVAL"
    assert k.set_mempolicy(t, MPOL_BIND, {1}).errno == "EINVAL"
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1, 2}).ok
    assert t.mempolicy is not None and t.mempolicy.nodes == {0, 2}


def test_exit_frees_everything() -> None:
    k = two_nodes()
    before = [k.pm.free_pages(n) for n in (0, 1)]
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 100 * PAGE_SIZE)
    k.touch(t, vma.start, 100 * PAGE_SIZE)
    k.exit(t)
    assert [k.pm.free_pages(n) for n in (0, 1)] == before
    assert k.exited == [t]


def test_fork_inherits_task_policy() -> None:
    k = two_nodes()
    parent = k.spawn("numactl")
    assert k.set_mempolicy(parent, MPOL_BIND, {1}).ok
    child = k.spawn("memhog", parent=parent)
    assert child.mempolicy == parent.mempolicy


# --- invariants ----------------------------------------------------------------------------------------------
_MODES = st.sampled_from([(MPOL_DEFAULT, set()), (MPOL_BIND, {0}), (MPOL_BIND, {1}), (MPOL_INTERLEAVE, {0, 1}),
                          (MPOL_PREFERRED, {1}), (MPOL_PREFERRED_MANY, {0})])


@settings(max_examples=25)
@given(_MODES, st.lists(st.integers(1, 40_000), min_size=1, max_size=3), st.sampled_from([0, 2]))
def test_pages_conserved_bind_inside_mask_and_deterministic(mode_nodes, sizes: list[int], cpu: int) -> None:  # type: ignore[no-untyped-def]
    mode, nodes = mode_nodes
    outcomes = []
    for _ in range(2):
        k = two_nodes(128)
        total_free = sum(k.pm.free_pages(n) for n in (0, 1))
        t = k.spawn("a", cpu=cpu)
        assert k.set_mempolicy(t, mode, nodes).ok
        placed = []
        for pages in sizes:
            vma = k.mmap(t, pages * PAGE_SIZE)
            k.touch(t, vma.start, pages * PAGE_SIZE)
            if not t.alive:
                break
            placed.append(vma.nodes.copy())
            if mode == MPOL_BIND:
                assert set(vma.pages_per_node()) <= nodes
        present = sum(v.present for v in t.mm.vmas)
        assert total_free - sum(k.pm.free_pages(n) for n in (0, 1)) == present
        outcomes.append(([p.tolist() for p in placed], t.alive, [k.numastat(n) for n in (0, 1)]))
    assert outcomes[0] == outcomes[1]


def test_policy_string_and_misplaced() -> None:
    from numasim.kernel.mempolicy import NUMA_NO_NODE

    k = two_nodes()
    t = k.spawn("a", cpu=2)
    vma = k.mmap(t, 2 * PAGE_SIZE)
    k.touch(t, vma.start, 2 * PAGE_SIZE)  # on node 1
    assert k.policy_string(t, vma) == "default"
    # default policy (MOF|MORON): a reference from node 0 pulls the page towards node 0
    assert k.mpol_misplaced(t, vma.start, cpu=0) == 0
    assert k.mpol_misplaced(t, vma.start, cpu=2) == NUMA_NO_NODE
    assert k.mpol_misplaced(t, vma.start, cpu=0, should_numa_migrate_memory=lambda: False) == NUMA_NO_NODE
    assert k.mbind(t, vma.start, PAGE_SIZE, MPOL_BIND, {1}).ok
    first = t.mm.find_vma(vma.start)
    assert first is not None and k.policy_string(t, first) == "bind:1"
    assert k.mpol_misplaced(t, vma.start, cpu=0) == NUMA_NO_NODE  # explicit policy without MOF
    k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1})
    assert k.policy_string(t, None) == "interleave:0-1"


def test_preferred_many_pass_two_counts_hit_on_cpu_node() -> None:
    """Pass 1 prefers the mask (hits on node 1); pass 2 uses the CPU node's own zonelist without mask, so its
    pages on node 0 are numa_hit and node 1 is charged no numa_foreign (kernel_spec 5.9)."""
    k = two_nodes(64)
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_PREFERRED_MANY, {1}).ok
    vma = k.mmap(t, 80 * MiB)
    k.touch(t, vma.start, 80 * MiB)
    counts = vma.pages_per_node()
    assert k.numastat(1)["numa_hit"] == counts[1] and k.numastat(1)["other_node"] == counts[1]
    assert k.numastat(0)["numa_hit"] == counts[0] and k.numastat(0)["local_node"] == counts[0]
    assert k.numastat(1)["numa_foreign"] == 0 and k.numastat(0)["numa_miss"] == 0


def test_relative_mask_skips_memoryless_node() -> None:
    from numasim.kernel.mempolicy import MPOL_F_RELATIVE_NODES

    k = kernel([([0], 64), ([1], 0), ([2], 64), ([3], 64)])
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE | MPOL_F_RELATIVE_NODES, {0, 1}).ok
    assert t.mempolicy is not None and t.mempolicy.nodes == {0, 2}  # 0th and 1st memory node


def test_oom_victim_is_the_biggest_task_in_the_policy_domain() -> None:
    """A BIND OOM may kill a bigger task with no policy first (it is in the domain), which frees nothing on
    the bound node, so the faulting task is killed next (oom_badness, mempolicy_in_oom_domain)."""
    k = kernel([([0, 1], 256), ([2, 3], 1024)])
    big = k.spawn("big", cpu=2)
    vb = k.mmap(big, 800 * MiB)
    k.touch(big, vb.start, 800 * MiB)
    bound = k.spawn("bound", cpu=0)
    assert k.set_mempolicy(bound, MPOL_BIND, {0}).ok
    va = k.mmap(bound, 300 * MiB)
    res = k.touch(bound, va.start, 300 * MiB)
    assert res.oom_killed
    assert [o.comm for o in k.oom_kills] == ["big", "bound"]


def test_oom_skips_tasks_bound_elsewhere() -> None:
    k = kernel([([0, 1], 256), ([2, 3], 1024)])
    other = k.spawn("other", cpu=2)
    assert k.set_mempolicy(other, MPOL_BIND, {1}).ok
    vo = k.mmap(other, 800 * MiB)
    k.touch(other, vo.start, 800 * MiB)
    bound = k.spawn("bound", cpu=0)
    assert k.set_mempolicy(bound, MPOL_BIND, {0}).ok
    va = k.mmap(bound, 300 * MiB)
    assert k.touch(bound, va.start, 300 * MiB).oom_killed
    assert [o.comm for o in k.oom_kills] == ["bound"] and other.alive


def test_numa_balancing_helpers() -> None:
    from numasim.kernel.mempolicy import MPOL_F_NUMA_BALANCING

    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 8 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    assert k.numa_balancing_allowed(t, vma)  # default policy carries MPOL_F_MOF
    assert k.get_vma_policy(t, vma, cpu=2).nodes == {1}
    moved, failed = k.migrate_vma_pages(t, vma, np.array([0, 1, 1, 2]), 1)
    assert (moved, failed) == (3, 0) and vma.nodes[:4].tolist() == [1, 1, 1, 0]
    assert k.migrate_vma_pages(t, vma, np.array([0]), 1) == (0, 0)
    assert k.mbind(t, vma.start, 8 * PAGE_SIZE, MPOL_BIND, {0, 1}).ok
    assert not k.numa_balancing_allowed(t, t.mm.vmas[0])
    assert k.mbind(t, vma.start, 8 * PAGE_SIZE, MPOL_BIND | MPOL_F_NUMA_BALANCING, {0, 1}).ok
    assert k.numa_balancing_allowed(t, t.mm.vmas[0])


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 4)), max_size=15),
       st.integers(0, 70), st.integers(1, 10))
def test_mm_lookups_match_brute_force(maps: list[tuple[int, int]], page: int, n: int) -> None:
    from numasim.kernel.task import MM

    mm = MM()
    for start, length in maps:
        a, b = start * PAGE_SIZE, (start + length) * PAGE_SIZE
        if not mm.overlaps(a, b):
            mm.insert(VMA(a, b, start))
    lo, hi = page * PAGE_SIZE, (page + n) * PAGE_SIZE
    brute = [v for v in mm.vmas if v.start < hi and v.end > lo]
    assert mm.vmas_in(lo, hi) == brute
    hit = [v for v in mm.vmas if v.start <= lo < v.end]
    assert mm.find_vma(lo) is (hit[0] if hit else None)
    assert [v.start for v in mm.vmas] == sorted(v.start for v in mm.vmas)
    inside = mm.isolate(lo, hi)
    assert all(lo <= v.start and v.end <= hi for v in inside)
    total = sum(v.npages for v in mm.vmas)
    mm.merge_around(lo, hi)
    assert sum(v.npages for v in mm.vmas) == total


def test_threads_share_mm_but_not_policy() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64), ([3], 64)])
    main = k.spawn("omp", cpu=0)
    vma = k.mmap(main, 8 * PAGE_SIZE)
    workers = [k.spawn_thread(main, cpu=c) for c in (1, 2, 3)]
    assert all(w.mm is main.mm and w.tgid == main.pid for w in workers)
    # each thread first-touches its own quarter: OpenMP-style local placement
    for i, t in enumerate([main, *workers]):
        k.touch(t, vma.start + 2 * i * PAGE_SIZE, 2 * PAGE_SIZE)
    assert vma.nodes.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    # set_mempolicy is per thread
    assert k.set_mempolicy(workers[0], MPOL_BIND, {3}).ok
    assert main.mempolicy is None and workers[1].mempolicy is None
    other = k.mmap(main, 2 * PAGE_SIZE)
    k.touch(workers[0], other.start, PAGE_SIZE)
    k.touch(main, other.start + PAGE_SIZE, PAGE_SIZE)
    assert other.nodes.tolist() == [3, 0]
    # a thread's exit keeps the memory; the last one frees it
    free = [k.pm.free_pages(n) for n in range(4)]
    for w in workers:
        k.exit(w)
    assert [k.pm.free_pages(n) for n in range(4)] == free
    k.exit(main)
    assert sum(k.pm.free_pages(n) for n in range(4)) == sum(free) + 10


def test_oom_kills_the_whole_process() -> None:
    k = two_nodes(256)
    main = k.spawn("hog", cpu=0)
    helper = k.spawn_thread(main, cpu=1)
    assert k.set_mempolicy(helper, MPOL_BIND, {0}).ok
    vma = k.mmap(main, 300 * MiB)
    assert k.touch(helper, vma.start, 300 * MiB).oom_killed
    assert not main.alive and not helper.alive
    assert [(o.pid, o.comm) for o in k.oom_kills] == [(main.pid, "hog")]
