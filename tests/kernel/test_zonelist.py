"""Zonelists: golden fallback orders (spec §2 and the source articles), [VER] printk, boot vs hot-add."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import kernel_configs, small_machines

from numasim.kernel.config import KernelConfig
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.zonelist import NodeFacts, build_all_zonelists, find_next_best_node
from numasim.kernel.zones import ZoneType
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30


def _machine(slit: list[list[int]], cpus: list[bool], mem_gib: list[int], name: str = "golden") -> Machine:
    nodes = []
    c = 0
    for i, (has_cpu, mem) in enumerate(zip(cpus, mem_gib, strict=True)):
        cl = [c, c + 1] if has_cpu else []
        c += len(cl)
        nodes.append(Node(id=i, cpus=cl, memory_bytes=mem * GiB))
    links = [Link(a=i, b=i + 1, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(len(nodes) - 1)]
    return Machine(name=name, nodes=nodes, links=links, firmware_slit=slit)


SLIT_000 = [[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]]
"""Source article 000: 2 sockets x 2 dies, 96 cpus."""


@pytest.mark.parametrize("cpus_known", [False, True])
def test_article_000_four_nodes(cpus_known: bool) -> None:
    # node_load round-robin: node 0's build loads nodes 1 and 2, so node 1 prefers 3 over 2, and so on.
    pm = PhysicalMemory(_machine(SLIT_000, [True] * 4, [4] * 4), KernelConfig(cpus_known_at_boot=cpus_known))
    assert pm.boot_log() == [
        "Fallback order for Node 0: 0 1 2 3 ",
        "Fallback order for Node 1: 1 0 3 2 ",
        "Fallback order for Node 2: 2 3 0 1 ",
        "Fallback order for Node 3: 3 2 1 0 ",
    ]
    # the article: "preferred 2: 2, then 3, then 0 or 1"
    assert [z.node for z in pm.zonelist(2)][:2] == [2, 3]


def test_zone_order_inside_node_highest_first() -> None:
    pm = PhysicalMemory(_machine([[10, 20], [20, 10]], [True, True], [8, 8]))
    assert [(z.node, z.type) for z in pm.zonelist(0)] == [
        (0, ZoneType.NORMAL),
        (0, ZoneType.DMA32),
        (0, ZoneType.DMA),
        (1, ZoneType.NORMAL),
    ]
    assert [(z.node, z.type) for z in pm.zonelist(1, thisnode=True)] == [(1, ZoneType.NORMAL)]
    assert [(z.node, z.type) for z in pm.zonelist(1)][0] == (1, ZoneType.NORMAL)


# A cpu-less (CXL) node 1 at distance 21 and a cpu node 2 at distance 20 from node 0: with the cpu penalty
# they tie at 21 and the lower id wins; without it (the boot build) node 2 is strictly closer.
SLIT_TIE = [[10, 21, 20], [21, 10, 31], [20, 31, 10]]


def test_cpu_penalty_absent_at_boot() -> None:
    pm = PhysicalMemory(_machine(SLIT_TIE, [True, False, True], [4, 2, 4]))
    assert pm.fallback_order(0) == [0, 2, 1]
    assert pm.boot_log()[0] == "Fallback order for Node 0: 0 2 1 "


def test_cpu_penalty_at_boot_when_cpus_known() -> None:
    pm = PhysicalMemory(
        _machine(SLIT_TIE, [True, False, True], [4, 2, 4]), KernelConfig(cpus_known_at_boot=True)
    )
    assert pm.fallback_order(0) == [0, 1, 2]


@pytest.mark.parametrize("version", ["6.1", "6.12"])
def test_hotadd_cxl_rebuilds_with_cpu_penalty(version: str) -> None:
    cfg = KernelConfig(version=version, hotplug_nodes=frozenset({1}))
    pm = PhysicalMemory(_machine(SLIT_TIE, [True, False, True], [4, 2, 4]), cfg)
    assert 1 not in pm.memory_nodes
    own = "1 " if version == "6.1" else ""
    assert pm.boot_log() == [
        "Fallback order for Node 0: 0 2 ",
        f"Fallback order for Node 1: {own}0 2 ",
        "Fallback order for Node 2: 2 0 ",
    ]
    pm.hotadd_memory(1, 2 * GiB)
    assert 1 in pm.memory_nodes
    assert pm.boot_log()[3:] == [
        "Fallback order for Node 0: 0 1 2 ",
        "Fallback order for Node 1: 1 0 2 ",
        "Fallback order for Node 2: 2 0 1 ",
    ]
    assert [z.node for z in pm.zonelist(0)] == [0, 0, 0, 1, 2]
    # more memory into an already populated zone: online_pages does not rebuild
    pm.hotadd_memory(1, 1 * GiB)
    assert len(pm.boot_log()) == 6
    assert pm.zone(1, ZoneType.NORMAL).managed_pages == 3 * GiB // 4096


@pytest.mark.parametrize(
    ("version", "line"),
    [("6.1", "Fallback order for Node 1: 1 2 0 "), ("6.12", "Fallback order for Node 1: 2 0 ")],
)
def test_memoryless_cpu_node_printk_differs_by_version(version: str, line: str) -> None:
    slit = [[10, 20, 30], [20, 10, 20], [30, 20, 10]]
    pm = PhysicalMemory(_machine(slit, [True, True, True], [4, 0, 4]), KernelConfig(version=version))
    assert pm.boot_log()[1] == line
    # the zonelist itself is the same in both versions: no zones of the memoryless node
    assert [z.node for z in pm.zonelist(1)] == [2, 0, 0, 0]
    assert pm.numa_mem_id(1) == 2
    assert pm.zonelist(1, thisnode=True) == []


def test_memory_only_node_never_first_for_others_when_farther() -> None:
    slit = [[10, 20, 17], [20, 10, 28], [17, 28, 10]]
    pm = PhysicalMemory(_machine(slit, [True, True, False], [4, 4, 8]))
    assert pm.fallback_order(0) == [0, 2, 1]
    assert pm.fallback_order(1) == [1, 0, 2]
    assert pm.fallback_order(2) == [2, 0, 1]


def test_find_next_best_node_below_penalty_prefers_next_node() -> None:
    # equal distances: the node above wins over the node below ("prefer the next node")
    d = {1: {0: 20, 1: 10, 2: 20}}
    facts = NodeFacts((0, 1, 2), d, frozenset({0, 1, 2}), frozenset())
    used: set[int] = {1}
    assert find_next_best_node(1, used, facts, {0: 0, 1: 0, 2: 0}) == 2


def test_node_load_is_shared_across_builds() -> None:
    # all remote distances equal: every node's second entry rotates thanks to node_load
    n = 4
    d = {a: {b: (10 if a == b else 20) for b in range(n)} for a in range(n)}
    build = build_all_zonelists(NodeFacts(tuple(range(n)), d, frozenset(range(n)), frozenset()))
    assert build.node_order == {0: [0, 1, 2, 3], 1: [1, 2, 3, 0], 2: [2, 3, 0, 1], 3: [3, 0, 1, 2]}


@settings(max_examples=40)
@given(machine=small_machines(max_nodes=5), cfg=kernel_configs())
def test_zonelist_invariants(machine: Machine, cfg: dict[str, object]) -> None:
    pm = PhysicalMemory(machine, KernelConfig(**cfg))  # type: ignore[arg-type]
    mem = pm.memory_nodes
    for nid in pm.node_ids:
        order = pm.fallback_order(nid)
        listed = [n for n in order if n in mem]
        assert sorted(listed) == sorted(mem)  # every memory node exactly once
        assert len(set(order)) == len(order)
        if nid in mem:
            assert order[0] == nid
        zl = pm.zonelist(nid)
        assert all(z.populated for z in zl)
        assert [z.node for z in zl] == [z.node for z in zl if z.node in mem]
        assert pm.zonelist(nid, thisnode=True) == [z for z in zl if z.node == nid]
