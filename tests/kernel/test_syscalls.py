"""The memory-policy syscalls: validation order and errnos, get_mempolicy results, mbind STRICT/MOVE and VMA
split/merge, migrate_pages, move_pages, set_mempolicy_home_node (kernel_spec 5.4-5.14)."""

from __future__ import annotations

import numpy as np
import pytest
from _mpol_machines import MiB, four_nodes, kernel, two_nodes

from numasim.kernel.errno import ERRNO
from numasim.kernel.mempolicy import (
    MAX_NUMNODES,
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_ADDR,
    MPOL_F_MEMS_ALLOWED,
    MPOL_F_NODE,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_MF_LAZY,
    MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL,
    MPOL_MF_STRICT,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)
from numasim.kernel.task import PAGE_SIZE


# --- set_mempolicy ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "nodes", "maxnode"),
    [
        (MPOL_BIND, set(), None),  # empty mask
        (MPOL_BIND, None, None),  # NULL mask
        (MPOL_BIND, {0}, 1),  # maxnode 1 reads no bit
        (MPOL_BIND | MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES, {0}, None),
        (MPOL_INTERLEAVE | MPOL_F_NUMA_BALANCING, {0}, None),
        (MPOL_PREFERRED | MPOL_F_NUMA_BALANCING, {0}, None),
        (MPOL_DEFAULT, {0}, None),
        (MPOL_LOCAL, {1}, None),
        (MPOL_BIND, {7}, None),  # no usable node left
        (7, {0}, None),  # >= MPOL_MAX
        (MPOL_BIND, {0}, 0),  # maxnode 0 wraps
    ],
)
def test_set_mempolicy_einval(mode: int, nodes: set[int] | None, maxnode: int | None) -> None:
    k = two_nodes()
    t = k.spawn("a")
    r = k.set_mempolicy(t, mode, nodes, maxnode)
    assert (r.ret, r.errno) == (-1, "EINVAL")
    assert t.mempolicy is None


def test_set_mempolicy_maxnode_off_by_one() -> None:
    k = two_nodes()
    t = k.spawn("a")
    assert k.set_mempolicy(t, MPOL_BIND, {0, 1}, maxnode=2).ok  # only bit 0 is read
    assert t.mempolicy is not None and t.mempolicy.nodes == {0}


def test_set_mempolicy_resets_interleave_state_and_default_removes() -> None:
    k = two_nodes()
    t = k.spawn("a")
    t.il_prev, t.il_weight = 1, 3
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1}).ok
    assert (t.il_prev, t.il_weight) == (MAX_NUMNODES - 1, 0)
    assert k.set_mempolicy(t, MPOL_DEFAULT, None).ok
    assert t.mempolicy is None


# --- get_mempolicy ----------------------------------------------------------------------------------------
def test_get_mempolicy_modes_and_masks() -> None:
    k = four_nodes()
    t = k.spawn("a")
    r = k.get_mempolicy(t)
    assert (r["mode"], r["nodemask"]) == (MPOL_DEFAULT, frozenset())
    k.set_mempolicy(t, MPOL_PREFERRED, {3, 1})
    assert (k.get_mempolicy(t)["mode"], k.get_mempolicy(t)["nodemask"]) == (MPOL_PREFERRED, {1})
    k.set_mempolicy(t, MPOL_PREFERRED, set())
    assert (k.get_mempolicy(t)["mode"], k.get_mempolicy(t)["nodemask"]) == (MPOL_LOCAL, frozenset())
    k.set_mempolicy(t, MPOL_BIND | MPOL_F_STATIC_NODES, {1, 9})
    r = k.get_mempolicy(t)
    assert (r["mode"], r["nodemask"]) == (MPOL_BIND | MPOL_F_STATIC_NODES, {1, 9})
    k.set_mempolicy(t, MPOL_BIND | MPOL_F_NUMA_BALANCING, {0, 2})
    r = k.get_mempolicy(t)
    assert (r["mode"], r["nodemask"]) == (MPOL_BIND | MPOL_F_NUMA_BALANCING, {0, 2})
    k.set_mempolicy(t, MPOL_PREFERRED_MANY, {2, 3})
    assert k.get_mempolicy(t)["mode"] == MPOL_PREFERRED_MANY


def test_get_mempolicy_errors() -> None:
    k = four_nodes()
    t = k.spawn("a")
    assert k.get_mempolicy(t, flags=8).errno == "EINVAL"
    assert k.get_mempolicy(t, flags=MPOL_F_MEMS_ALLOWED | MPOL_F_NODE).errno == "EINVAL"
    assert k.get_mempolicy(t, flags=MPOL_F_MEMS_ALLOWED | MPOL_F_ADDR).errno == "EINVAL"
    assert k.get_mempolicy(t, addr=0x1000).errno == "EINVAL"
    assert k.get_mempolicy(t, flags=MPOL_F_ADDR, addr=0x1000).errno == "EFAULT"
    assert k.get_mempolicy(t, maxnode=3).errno == "EINVAL"  # < nr_node_ids (4)
    assert k.get_mempolicy(t, maxnode=3, want_nodemask=False).ok
    assert k.get_mempolicy(t, flags=MPOL_F_NODE).errno == "EINVAL"  # not an interleave task policy


def test_get_mempolicy_mems_allowed() -> None:
    k = four_nodes()
    k.cpuset_create("job", cpus=[0, 1, 2, 3], mems=[0, 1])
    t = k.spawn("a", cpuset="job")
    r = k.get_mempolicy(t, flags=MPOL_F_MEMS_ALLOWED)
    assert (r["mode"], r["nodemask"]) == (0, {0, 1})


def test_get_mempolicy_f_node_interleave_next() -> None:
    k = four_nodes()
    t = k.spawn("a")
    k.set_mempolicy(t, MPOL_INTERLEAVE, {1, 3})
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 1
    t.il_prev = 1
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 3
    k.set_mempolicy(t, MPOL_WEIGHTED_INTERLEAVE, {1, 3})
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 1
    t.il_prev, t.il_weight = 3, 2
    assert k.get_mempolicy(t, MPOL_F_NODE)["mode"] == 3  # still inside node 3's weight


def test_get_mempolicy_addr_reports_vma_policy_not_task_policy() -> None:
    k = four_nodes()
    t = k.spawn("a", cpu=0)
    k.set_mempolicy(t, MPOL_BIND, {2})
    vma = k.mmap(t, 4 * PAGE_SIZE)
    r = k.get_mempolicy(t, MPOL_F_ADDR, vma.start)
    assert (r["mode"], r["nodemask"]) == (MPOL_DEFAULT, frozenset())
    assert k.mbind(t, vma.start, PAGE_SIZE, MPOL_PREFERRED, {3}).ok
    r = k.get_mempolicy(t, MPOL_F_ADDR, vma.start)
    assert (r["mode"], r["nodemask"]) == (MPOL_PREFERRED, {3})
    # NODE|ADDR faults the page in under the VMA policy and reports its node
    r = k.get_mempolicy(t, MPOL_F_NODE | MPOL_F_ADDR, vma.start + 5)
    first = t.mm.find_vma(vma.start)
    assert r["mode"] == 3 and first is not None and first.nodes[0] == 3
    assert k.get_mempolicy(t, MPOL_F_NODE | MPOL_F_ADDR, vma.start + PAGE_SIZE)["mode"] == 2


# --- mbind ------------------------------------------------------------------------------------------------
def test_mbind_validation_order() -> None:
    k = two_nodes()
    t = k.spawn("a")
    vma = k.mmap(t, 8 * PAGE_SIZE)
    s = vma.start
    assert k.mbind(t, s, PAGE_SIZE, MPOL_BIND | MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES, {0}).errno == "EINVAL"
    assert k.mbind(t, s, PAGE_SIZE, MPOL_BIND, {0}, flags=MPOL_MF_LAZY).errno == "EINVAL"
    assert k.mbind(t, s, PAGE_SIZE, MPOL_BIND, {0}, flags=MPOL_MF_MOVE_ALL).errno == "EPERM"
    assert k.mbind(t, s + 1, PAGE_SIZE, MPOL_BIND, {0}).errno == "EINVAL"
    assert k.mbind(t, s, 0, MPOL_BIND, set()).ok  # end == start returns 0 before mpol_new looks at the mask
    assert k.mbind(t, s, PAGE_SIZE, MPOL_BIND, set()).errno == "EINVAL"
    assert k.mbind(t, 0x1000, PAGE_SIZE, MPOL_BIND, {0}).errno == "EFAULT"
    assert k.mbind(t, s, 9 * PAGE_SIZE, MPOL_BIND, {0}).errno == "EFAULT"  # runs past the mapping
    assert k.mbind(t, s, 9 * PAGE_SIZE, MPOL_DEFAULT, None).ok  # DEFAULT tolerates holes


def test_mbind_splits_and_merges_vmas() -> None:
    k = two_nodes()
    t = k.spawn("a")
    vma = k.mmap(t, 8 * PAGE_SIZE)
    s = vma.start
    assert k.mbind(t, s + 2 * PAGE_SIZE, 3 * PAGE_SIZE, MPOL_BIND, {1}).ok
    assert [(v.start - s) // PAGE_SIZE for v in t.mm.vmas] == [0, 2, 5]
    assert t.mm.vmas[1].policy is not None and t.mm.vmas[1].policy.nodes == {1}
    assert k.mbind(t, s + 5 * PAGE_SIZE, 3 * PAGE_SIZE, MPOL_BIND, {1}).ok  # same policy: merges with middle
    assert [(v.start - s) // PAGE_SIZE for v in t.mm.vmas] == [0, 2]
    assert k.mbind(t, s, 8 * PAGE_SIZE, MPOL_DEFAULT, None).ok
    assert len(t.mm.vmas) == 1 and t.mm.vmas[0].policy is None


def test_mbind_strict_eio_leaves_policy_unchanged() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 4 * PAGE_SIZE)  # all on node 0
    r = k.mbind(t, vma.start + PAGE_SIZE, 2 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_STRICT)
    assert r.errno == "EIO"
    # the walk stopped before mbind_range: no split, no policy
    assert len(t.mm.vmas) == 1 and t.mm.vmas[0].policy is None
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_BIND, {0}, flags=MPOL_MF_STRICT).ok
    assert t.mm.vmas[0].nodes.tolist() == [0, 0, 0, 0]  # STRICT alone never moves


def test_mbind_move_migrates_misplaced_pages() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 6 * PAGE_SIZE)
    k.touch(t, vma.start, 6 * PAGE_SIZE)
    free0, free1 = k.pm.free_pages(0), k.pm.free_pages(1)
    r = k.mbind(t, vma.start, 6 * PAGE_SIZE, MPOL_INTERLEAVE, {0, 1}, flags=MPOL_MF_MOVE | MPOL_MF_STRICT)
    assert r.ok
    # pages on node 0 are inside the new mask: not misplaced, not moved
    assert r["migrated"] == 0
    r = k.mbind(t, vma.start, 6 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_MOVE)
    assert r.ok and r["migrated"] == 6
    assert t.mm.vmas[0].nodes.tolist() == [1] * 6
    assert (k.pm.free_pages(0), k.pm.free_pages(1)) == (free0 + 6, free1 - 6)


def test_mbind_move_into_full_node_is_eio_with_strict() -> None:
    k = two_nodes(64)
    t = k.spawn("a", cpu=0)
    hog = k.spawn("hog", cpu=2)
    big = k.mmap(hog, 80 * MiB)
    k.set_mempolicy(hog, MPOL_PREFERRED_MANY, {1})
    k.touch(hog, big.start, 80 * MiB)  # node 1 drained to its min watermark, the rest on node 0
    assert k.pm.free_pages(1) == k.pm.zone(1, 2).wmark_min
    vma = k.mmap(t, 8 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    r = k.mbind(t, vma.start, 8 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_MOVE | MPOL_MF_STRICT)
    assert r.errno == "EIO" and r["failed"] > 0
    assert t.alive  # migration never OOM-kills


def test_mbind_preferred_routes_new_faults() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_PREFERRED, {1}).ok
    k.touch(t, vma.start, 4 * PAGE_SIZE)
    assert t.mm.vmas[0].pages_per_node() == {1: 4}
    assert k.numastat(1)["numa_hit"] == 4 and k.numastat(1)["other_node"] == 4


# --- migrate_pages ----------------------------------------------------------------------------------------
def test_migrate_pages_eight_to_three_example() -> None:
    k = kernel([([i], 16) for i in range(8)])
    t = k.spawn("a", cpu=0)
    k.set_mempolicy(t, MPOL_INTERLEAVE, set(range(8)))
    vma = k.mmap(t, 64 * PAGE_SIZE)
    k.touch(t, vma.start, 64 * PAGE_SIZE)
    before = vma.nodes.copy()
    r = k.migrate_pages(t, set(range(8)), {3, 4, 5})
    assert r.ok and r.ret == 0
    assert sorted(s for s, _ in r["moves"]) == [0, 1, 2, 6, 7]
    assert dict(r["moves"]) == {0: 3, 1: 4, 2: 5, 6: 3, 7: 4}
    expected = np.array([{0: 3, 1: 4, 2: 5, 6: 3, 7: 4}.get(int(n), int(n)) for n in before])
    assert t.mm.vmas[0].nodes.tolist() == expected.tolist()


def test_migrate_pages_swap_uses_a_free_destination_first() -> None:
    k = four_nodes()
    t = k.spawn("a", cpu=0)
    r = k.migrate_pages(t, {0, 1}, {1, 2})
    # 0->1 would fill node 1 before it is emptied; 1->2 goes first
    assert r["moves"] == [(1, 2), (0, 1)]


def test_migrate_pages_errors() -> None:
    k = four_nodes()
    k.cpuset_create("small", cpus=[0, 1], mems=[0, 1])
    t = k.spawn("a", cpuset="small")
    assert k.migrate_pages(t, {0}, {2}).errno == "EPERM"
    root = k.spawn("root", cap_sys_nice=True)
    assert k.migrate_pages(t, {0}, {2}, caller=root).ok
    assert k.migrate_pages(t, {0}, {0}, maxnode=0).errno == "EINVAL"
    k.exit(t)
    assert k.migrate_pages(t, {0}, {1}).errno == "ESRCH"


# --- move_pages -------------------------------------------------------------------------------------------
def test_move_pages_status_and_moves() -> None:
    slit = [[10, 20, 20], [20, 10, 20], [20, 20, 10]]
    k = kernel([([0], 64), ([1], 0), ([2], 64)], slit=slit)
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 2 * PAGE_SIZE)
    pages = [vma.start, vma.start + PAGE_SIZE, vma.start + 3 * PAGE_SIZE, 0x1000]
    r = k.move_pages(t, pages)
    assert r["status"].tolist() == [0, 0, -ERRNO["ENOENT"], -ERRNO["EFAULT"]]
    r = k.move_pages(t, pages, [2, 0, 2, 2])
    assert r.ok and r["status"].tolist() == [2, 0, -ERRNO["ENOENT"], -ERRNO["EFAULT"]]
    assert vma.nodes.tolist() == [2, 0, -1, -1]
    r = k.move_pages(t, pages[:2], [0, 1])  # node 1 has no memory
    assert r.errno == "ENODEV" and r["status"][0] == 0
    assert vma.nodes[0] == 0  # the pages before the bad entry were moved
    assert k.move_pages(t, pages[:1], [5]).errno == "ENODEV"
    assert k.move_pages(t, pages[:1], [0], flags=MPOL_MF_MOVE_ALL).errno == "EPERM"
    assert k.move_pages(t, pages[:1], [0], flags=MPOL_MF_STRICT).errno == "EINVAL"


def test_move_pages_outside_cpuset_is_eacces() -> None:
    k = four_nodes()
    k.cpuset_create("c", cpus=[0], mems=[0, 1])
    t = k.spawn("a", cpuset="c")
    vma = k.mmap(t, PAGE_SIZE)
    k.touch(t, vma.start, PAGE_SIZE)
    assert k.move_pages(t, [vma.start], [3]).errno == "EACCES"


# --- set_mempolicy_home_node ----------------------------------------------------------------------------
def test_home_node() -> None:
    k = four_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 8 * PAGE_SIZE)
    s = vma.start
    assert k.set_mempolicy_home_node(t, s + 1, PAGE_SIZE, 1).errno == "EINVAL"
    assert k.set_mempolicy_home_node(t, s, PAGE_SIZE, 9).errno == "EINVAL"
    assert k.set_mempolicy_home_node(t, s, PAGE_SIZE, -1).errno == "EINVAL"
    assert k.set_mempolicy_home_node(t, s, PAGE_SIZE, 1, flags=1).errno == "EINVAL"
    assert k.set_mempolicy_home_node(t, s, 8 * PAGE_SIZE, 1).ok  # no VMA policy: skipped
    assert k.mbind(t, s, 4 * PAGE_SIZE, MPOL_BIND, {1, 2, 3}).ok
    assert k.mbind(t, s + 4 * PAGE_SIZE, 4 * PAGE_SIZE, MPOL_INTERLEAVE, {1, 2}).ok
    assert k.set_mempolicy_home_node(t, s, 4 * PAGE_SIZE, 2).ok
    assert k.set_mempolicy_home_node(t, s, 8 * PAGE_SIZE, 2).errno == "EOPNOTSUPP"
    k.touch(t, s, 4 * PAGE_SIZE)
    assert t.mm.vmas[0].pages_per_node() == {2: 4}  # BIND starts at the home node, not the cpu's


def test_negative_length_wraps_to_einval() -> None:
    k = two_nodes()
    t = k.spawn("a")
    vma = k.mmap(t, PAGE_SIZE)
    assert k.mbind(t, vma.start, -PAGE_SIZE * 2, MPOL_BIND, {0}).errno == "EINVAL"
    assert k.set_mempolicy_home_node(t, vma.start, -PAGE_SIZE * 2, 0).errno == "EINVAL"


def test_mbind_default_move_follows_task_policy() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_BIND, {0}).ok
    k.touch(t, vma.start, 4 * PAGE_SIZE)
    assert k.set_mempolicy(t, MPOL_PREFERRED, {1}).ok
    r = k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_DEFAULT, None, flags=MPOL_MF_MOVE | MPOL_MF_STRICT)
    assert r.ok and r["migrated"] == 4
    assert t.mm.vmas[0].policy is None and t.mm.vmas[0].pages_per_node() == {1: 4}


def test_migrate_pages_memoryless_target() -> None:
    k = kernel([([0], 64), ([1], 0), ([2], 64)])
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 4 * PAGE_SIZE)
    assert k.migrate_pages(t, {0}, {1}).errno == "EPERM"  # node 1 is not in the task's mems_allowed
    root = k.spawn("root", cap_sys_nice=True)
    assert k.migrate_pages(t, {0}, {1}, caller=root).errno == "EINVAL"  # nothing left after & mems_allowed
    assert k.migrate_pages(t, {0}, {1, 2}, caller=root).ok
    assert vma.pages_per_node() == {2: 4}
