"""Cpusets: attaching a task or changing mems rebinds task and VMA policies (kernel_spec 5.12), and the
allocator honours mems_allowed."""

from __future__ import annotations

import pytest
from _mpol_machines import four_nodes

from numasim.errors import WorkloadError
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_PREFERRED,
)
from numasim.kernel.task import PAGE_SIZE


def test_attach_rebinds_task_and_vma_policies() -> None:
    k = four_nodes()
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    vma = k.mmap(t, 4 * PAGE_SIZE)
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_BIND, {1}).ok
    k.cpuset_create("right", cpus=[4, 5, 6, 7], mems=[2, 3])
    k.cpuset_attach(t, "right")
    assert t.mems_allowed == {2, 3}
    assert t.mempolicy is not None and t.mempolicy.nodes == {2, 3}  # remapped by ordinal
    assert t.mm.vmas[0].policy is not None and t.mm.vmas[0].policy.nodes == {3}
    assert t.cpu in {4, 5, 6, 7}
    k.touch(t, vma.start, 4 * PAGE_SIZE)
    assert t.mm.vmas[0].pages_per_node() == {3: 4}


def test_static_relative_preferred_on_mems_change() -> None:
    k = four_nodes()
    k.cpuset_create("job", cpus=[0, 1, 2, 3, 4, 5, 6, 7], mems=[0, 1, 2, 3])
    a = k.spawn("static", cpuset="job")
    b = k.spawn("relative", cpuset="job")
    c = k.spawn("preferred", cpuset="job")
    assert k.set_mempolicy(a, MPOL_BIND | MPOL_F_STATIC_NODES, {1, 2}).ok
    assert k.set_mempolicy(b, MPOL_INTERLEAVE | MPOL_F_RELATIVE_NODES, {0, 1}).ok
    assert k.set_mempolicy(c, MPOL_PREFERRED, {1}).ok
    k.cpuset_set("job", mems=[2, 3])
    assert a.mempolicy is not None and a.mempolicy.nodes == {2}
    assert b.mempolicy is not None and b.mempolicy.nodes == {2, 3}
    assert c.mempolicy is not None and c.mempolicy.nodes == {1}  # PREFERRED keeps its node
    k.cpuset_set("job", mems=[0])
    assert a.mempolicy.nodes == {0}  # type: ignore[union-attr]  # static mask left empty -> the new mems


def test_allocation_is_filtered_by_mems_allowed() -> None:
    k = four_nodes()
    k.cpuset_create("far", cpus=[0, 1], mems=[3])
    t = k.spawn("a", cpuset="far", cpu=0)
    vma = k.mmap(t, 8 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    assert vma.pages_per_node() == {3: 8}
    # a preferred node outside the cpuset is not used either
    assert k.set_mempolicy(t, MPOL_PREFERRED, {0}).errno == "EINVAL"


def test_cpuset_errors() -> None:
    k = four_nodes()
    with pytest.raises(WorkloadError):
        k.cpuset_create("bad", cpus=[99], mems=[0])
    with pytest.raises(WorkloadError):
        k.cpuset_create("bad", cpus=[0], mems=[])
    assert "bad" not in k.cpusets
    with pytest.raises(WorkloadError):
        k.spawn("a", cpuset="nope")
    t = k.spawn("a")
    assert k.sched_setaffinity(t, [99]).errno == "EINVAL"
    assert k.sched_setaffinity(t, [3]).ok and t.cpu == 3


def test_hotadded_node_joins_mems_allowed() -> None:
    from _mpol_machines import kernel

    from numasim.kernel.config import KernelConfig
    from numasim.kernel.kernel import Kernel

    m = kernel([([0], 64), ([1], 64), ([], 64)]).machine
    k = Kernel(m, KernelConfig(hotplug_nodes=frozenset({2})))
    t = k.spawn("a", cpu=0)
    assert k.memory_nodes == {0, 1} and t.mems_allowed == {0, 1}
    assert k.set_mempolicy(t, MPOL_BIND, {2}).errno == "EINVAL"
    k.hotadd_memory(2, 64 << 20)
    assert k.memory_nodes == {0, 1, 2} and t.mems_allowed == {0, 1, 2}
    assert k.set_mempolicy(t, MPOL_BIND, {2}).ok
    vma = k.mmap(t, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 4 * PAGE_SIZE)
    assert vma.pages_per_node() == {2: 4}
