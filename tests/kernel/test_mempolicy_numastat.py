"""numastat under memory policies (kernel_spec section 6): hit/miss against the preferred zone's node,
local/other against the CPU's node, foreign on the preferred node, interleave_hit on the target, numa_stat=0."""

from __future__ import annotations

from _mpol_machines import kernel, two_nodes

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED
from numasim.kernel.task import PAGE_SIZE


def _stats(k: Kernel, nodes: range) -> list[dict[str, int]]:
    return [k.numastat(n) for n in nodes]


def test_preferred_remote_is_hit_and_other() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_PREFERRED, {1}).ok
    vma = k.mmap(t, 5 * PAGE_SIZE)
    k.touch(t, vma.start, 5 * PAGE_SIZE)
    s0, s1 = _stats(k, range(2))
    assert (s1["numa_hit"], s1["other_node"], s1["local_node"], s1["numa_miss"]) == (5, 5, 0, 0)
    assert s0 == dict.fromkeys(s0, 0)


def test_bind_preferred_zone_is_first_mask_node_in_cpu_zonelist() -> None:
    # cpu on node 2; node 1 is nearer to node 2 than node 0 is
    slit = [[10, 20, 30], [20, 10, 20], [30, 20, 10]]
    k = kernel([([0], 64), ([1], 64), ([2], 64)], slit=slit)
    t = k.spawn("a", cpu=2)
    assert k.set_mempolicy(t, MPOL_BIND, {0, 1}).ok
    vma = k.mmap(t, 6 * PAGE_SIZE)
    k.touch(t, vma.start, 6 * PAGE_SIZE)
    assert vma.pages_per_node() == {1: 6}
    assert k.numastat(1)["numa_hit"] == 6 and k.numastat(1)["other_node"] == 6


def test_interleave_counts_hit_on_target_and_local_other_by_cpu() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=2)  # node 1
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 10 * PAGE_SIZE)
    k.touch(t, vma.start, 10 * PAGE_SIZE)
    s0, s1 = _stats(k, range(2))
    assert s0["interleave_hit"] == s1["interleave_hit"] == 5
    assert s0["numa_hit"] == 5 and s0["other_node"] == 5 and s1["local_node"] == 5


def test_numa_stat_off_freezes_counters() -> None:
    m = two_nodes().machine
    k = Kernel(m, KernelConfig(numa_stat=False))
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 10 * PAGE_SIZE)
    k.touch(t, vma.start, 10 * PAGE_SIZE)
    assert vma.pages_per_node() == {0: 5, 1: 5}
    assert all(v == 0 for s in _stats(k, range(2)) for v in s.values())
