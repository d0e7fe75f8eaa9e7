"""Interleave and weighted interleave (kernel_spec 5.7, 5.8): per-task and offset-based node choice, the
32-bit index truncation of pre-6.7 kernels, sysfs weights, fallback of a full target, interleave_hit."""

from __future__ import annotations

import numpy as np
import pytest
from _mpol_machines import MiB, kernel
from hypothesis import given
from hypothesis import strategies as st

from numasim.kernel.errno import KernelErrno
from numasim.kernel.mempolicy import (
    MAX_NUMNODES,
    MPOL_F_NODE,
    MPOL_INTERLEAVE,
    MPOL_WEIGHTED_INTERLEAVE,
    MemPolicy,
    WeightedInterleaveWeights,
    interleave_nid,
    interleave_nid_array,
    interleave_nodes,
    interleave_nodes_bulk,
    weighted_interleave_nid,
    weighted_interleave_nid_array,
    weighted_interleave_nodes,
    weighted_interleave_nodes_bulk,
)

IL3 = MemPolicy(MPOL_INTERLEAVE, 0, frozenset({0, 2, 5}))


def test_interleave_nid_walks_the_mask() -> None:
    assert [interleave_nid(IL3, i) for i in range(7)] == [0, 2, 5, 0, 2, 5, 0]


def test_interleave_u32_truncation_only_before_6_7() -> None:
    ilx = 1 << 32  # 2**32 % 3 == 1
    assert interleave_nid(IL3, ilx, "6.1") == 0
    assert interleave_nid(IL3, ilx, "6.12") == 2
    # power-of-two masks are unaffected
    pol = MemPolicy(MPOL_INTERLEAVE, 0, frozenset({0, 1}))
    idx = np.arange(1 << 32, (1 << 32) + 64)
    assert np.array_equal(interleave_nid_array(pol, idx, "6.1"), interleave_nid_array(pol, idx, "6.12"))


def test_interleave_nodes_per_task_round_robin() -> None:
    prev = MAX_NUMNODES - 1
    seq = []
    for _ in range(5):
        prev = interleave_nodes(IL3, prev)
        seq.append(prev)
    assert seq == [0, 2, 5, 0, 2]
    bulk, last = interleave_nodes_bulk(IL3, MAX_NUMNODES - 1, 5)
    assert bulk.tolist() == seq and last == 2


def test_weights_sysfs_rules() -> None:
    w = WeightedInterleaveWeights([0, 1, 2])
    assert w.read(0) == "1\n"
    w.write(0, "5\n")
    assert w.read(0) == "5\n"
    w.write(0, "0")
    assert w.read(0) == "1\n" and w.raw(0) == 0
    w.write(1, "0x10")
    assert w.get_il_weight(1) == 16
    w.write(1, "")
    assert w.get_il_weight(1) == 1
    for bad in ("256", "-1", "abc", " 3", "1.5"):
        with pytest.raises(KernelErrno) as exc:
            w.write(2, bad)
        assert exc.value.errno == "EINVAL"
    with pytest.raises(KernelErrno) as exc:
        w.write(9, "1")
    assert exc.value.errno == "ENOENT"


def test_weighted_sequences() -> None:
    w = WeightedInterleaveWeights([0, 1], {0: 3, 1: 1})
    pol = MemPolicy(MPOL_WEIGHTED_INTERLEAVE, 0, frozenset({0, 1}))
    assert [weighted_interleave_nid(pol, i, w) for i in range(8)] == [0, 0, 0, 1, 0, 0, 0, 1]
    prev, weight, seq = MAX_NUMNODES - 1, 0, []
    for _ in range(9):
        node, prev, weight = weighted_interleave_nodes(pol, prev, weight, w)
        seq.append(node)
    assert seq == [0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert (prev, weight) == (0, 2)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 40), st.integers(0, 40))
def test_weighted_bulk_equals_page_by_page(weights: list[int], first: int, second: int) -> None:
    nodes = list(range(len(weights)))
    w = WeightedInterleaveWeights(nodes, dict(zip(nodes, weights, strict=True)))
    pol = MemPolicy(MPOL_WEIGHTED_INTERLEAVE, 0, frozenset(nodes))
    prev, weight, seq = MAX_NUMNODES - 1, 0, []
    for _ in range(first + second):
        node, prev, weight = weighted_interleave_nodes(pol, prev, weight, w)
        seq.append(node)
    a, p1, w1 = weighted_interleave_nodes_bulk(pol, MAX_NUMNODES - 1, 0, w, first)
    b, p2, w2 = weighted_interleave_nodes_bulk(pol, p1, w1, w, second)
    assert np.concatenate([a, b]).tolist() == seq
    if first + second:
        assert (p2, w2) == (prev, weight)


@given(st.lists(st.integers(1, 9), min_size=1, max_size=5), st.lists(st.integers(0, 10**12), max_size=30))
def test_weighted_nid_array_matches_scalar_walk(weights: list[int], ilx: list[int]) -> None:
    nodes = [2 * i for i in range(len(weights))]
    w = WeightedInterleaveWeights(nodes, dict(zip(nodes, weights, strict=True)))
    pol = MemPolicy(MPOL_WEIGHTED_INTERLEAVE, 0, frozenset(nodes))
    total = sum(weights)
    expected = []
    for x in ilx:
        t, k = x % total, 0
        while t >= weights[k]:
            t -= weights[k]
            k += 1
        expected.append(nodes[k])
    assert weighted_interleave_nid_array(pol, np.array(ilx, dtype=np.int64), w).tolist() == expected


# --- through the kernel ------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["6.1", "6.12"])
def test_fault_interleave_by_address(version: str) -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)], version=version)
    t = k.spawn("il", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1, 2}).ok
    vma = k.mmap(t, 30 * 4096)
    k.touch(t, vma.start, 30 * 4096)
    vpn = (vma.start >> 12) + np.arange(30)
    if version == "6.1":
        vpn = vpn & 0xFFFFFFFF
    assert vma.nodes.tolist() == (vpn % 3).tolist()
    assert sum(k.numastat(n)["interleave_hit"] for n in range(3)) == 30


def test_interleave_target_full_falls_back_outside_the_set() -> None:
    # node 0's nearest other node is 2 (distance 20), not interleave partner 1 (distance 30)
    slit = [[10, 30, 20], [30, 10, 20], [20, 20, 10]]
    k = kernel([([0], 64), ([1], 256), ([2], 256)], slit=slit)
    t = k.spawn("il", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 160 * MiB)
    res = k.touch(t, vma.start, 160 * MiB)
    assert res.failed == 0 and not res.oom_killed
    counts = vma.pages_per_node()
    assert counts.get(2, 0) > 0  # outside the interleave set
    assert counts[1] == vma.npages // 2  # node 1's share all landed on node 1
    assert k.numastat(2)["interleave_hit"] == 0
    assert k.numastat(2)["numa_miss"] == counts[2]
    assert k.numastat(0)["numa_foreign"] == counts[2]


def test_weighted_interleave_fault_and_get_mempolicy_node() -> None:
    k = kernel([([0], 64), ([1], 64)])
    k.weighted_interleave_weights.write(0, "3")
    t = k.spawn("wil", cpu=0)
    assert k.set_mempolicy(t, MPOL_WEIGHTED_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 400 * 4096)
    k.touch(t, vma.start, 400 * 4096)
    t_idx = ((vma.start >> 12) + np.arange(400)) % 4
    assert vma.nodes.tolist() == np.where(t_idx < 3, 0, 1).tolist()
    assert vma.pages_per_node() == {0: 300, 1: 100}
    assert k.get_mempolicy(t, MPOL_F_NODE).value["mode"] == 0  # il_prev untouched by VMA faults


def test_weighted_interleave_unknown_on_6_1() -> None:
    k = kernel([([0], 64), ([1], 64)], version="6.1")
    t = k.spawn("wil", cpu=0)
    assert k.set_mempolicy(t, MPOL_WEIGHTED_INTERLEAVE, {0, 1}).errno == "EINVAL"


def test_shmem_interleave_index_starts_at_file_offset() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)], version="6.1")
    t = k.spawn("shm", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1, 2}).ok
    vma = k.mmap(t, 6 * 4096, kind="shmem")
    k.touch(t, vma.start, 6 * 4096)
    assert vma.nodes.tolist() == [0, 1, 2, 0, 1, 2]  # pgoff 0, no inode bias before 6.7


def test_task_interleave_without_vma_uses_il_prev() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)])
    t = k.spawn("cache", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 2}).ok
    first = k.alloc_task_pages(t, 3)
    assert first.nodes.tolist() == [0, 2, 0] and t.il_prev == 0
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 2
    second = k.alloc_task_pages(t, 2)
    assert second.nodes.tolist() == [2, 0]
    free = [k.pm.free_pages(n) for n in range(3)]
    k.free_task_pages(first)
    k.free_task_pages(second)
    assert [k.pm.free_pages(n) for n in range(3)] == [free[0] + 3, free[1], free[2] + 2]


def test_task_weighted_interleave_without_vma() -> None:
    k = kernel([([0], 64), ([1], 64)])
    k.weighted_interleave_weights.set(1, 2)
    t = k.spawn("cache", cpu=0)
    assert k.set_mempolicy(t, MPOL_WEIGHTED_INTERLEAVE, {0, 1}).ok
    assert k.alloc_task_pages(t, 4).nodes.tolist() == [0, 1, 1, 0]
    assert (t.il_prev, t.il_weight) == (0, 0)
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 1
    assert k.alloc_task_pages(t, 1).nodes.tolist() == [1]
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 1  # node 1 still has weight left


def test_bulk_interleave_split() -> None:
    from numasim.kernel.mempolicy import bulk_interleave_split

    pol = MemPolicy(MPOL_INTERLEAVE, 0, frozenset({1, 3, 4}))
    split, prev = bulk_interleave_split(pol, MAX_NUMNODES - 1, 11)
    assert split == {1: 4, 3: 4, 4: 3} and prev == 4
    split, prev = bulk_interleave_split(pol, 1, 5)
    assert split == {3: 2, 4: 2, 1: 1} and prev == 1  # a full cycle brings il_prev back
