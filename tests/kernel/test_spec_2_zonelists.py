"""kernel_spec.md section 2 (zonelists), checked against an independent re-implementation of the spec text.

The reference below is written from the spec's pseudo-code only (2.2 ``__build_all_zonelists``, 2.3
``build_zonelists``, 2.4 ``find_next_best_node``), not from numasim's code; hypothesis compares the two on
random SLITs with cpu-less and memoryless nodes, for both [VER] rule sets and for the boot build (no cpu
penalty, "Observed on a real kernel") and the cpus-known build.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import small_machines

from numasim.kernel.config import KernelConfig
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.zones import ZoneType
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30
MAX_NUMNODES = 1024


def spec_build_all_zonelists(
    ids: list[int],
    dist: dict[int, dict[int, int]],
    memory: set[int],
    cpus: set[int],
    skip_memoryless_local: bool,
) -> dict[int, list[int]]:
    """Spec 2.2-2.4 verbatim: shared node_load, nodes built in ascending id, sort key val*MAX_NUMNODES+load."""
    node_load = dict.fromkeys(ids, 0)
    orders: dict[int, list[int]] = {}
    for local in sorted(ids):
        used: set[int] = set()
        order: list[int] = []
        prev = local
        while True:
            # find_next_best_node(local, used)
            if local not in used and (local in memory or not skip_memoryless_local):
                used.add(local)
                node = local
            else:
                best, min_val = -1, None
                for n in sorted(memory):
                    if n in used:
                        continue
                    val = dist[local][n]
                    val += 1 if n < local else 0  # penalise nodes below us
                    val += 1 if n in cpus else 0  # PENALTY_FOR_NODE_WITH_CPUS
                    val = val * MAX_NUMNODES + node_load[n]
                    if min_val is None or val < min_val:  # strict '<': ties to the lowest id
                        min_val, best = val, n
                if best < 0:
                    break
                used.add(best)
                node = best
            if dist[local][node] != dist[local][prev]:
                node_load[node] += 1
            order.append(node)
            prev = node
        orders[local] = order
    return orders


@settings(max_examples=60, deadline=None)
@given(machine=small_machines(max_nodes=6, max_pages=2048, with_free=False))
@pytest.mark.parametrize("version", ["6.1", "6.12"])
@pytest.mark.parametrize("cpus_known", [False, True])
def test_fallback_order_equals_spec_reference(machine: Machine, version: str, cpus_known: bool) -> None:
    """2.2/2.3/2.4: every node's "Fallback order" equals the spec algorithm (ties, penalties, node_load)."""
    pm = PhysicalMemory(machine, KernelConfig(version=version, cpus_known_at_boot=cpus_known))
    ids = list(pm.node_ids)
    dist = {a: {b: pm.node_distance(a, b) for b in ids} for a in ids}
    cpus = {n.id for n in machine.nodes if n.cpus} if cpus_known else set()
    want = spec_build_all_zonelists(ids, dist, set(pm.memory_nodes), cpus, skip_memoryless_local=version != "6.1")
    for nid in ids:
        assert pm.fallback_order(nid) == want[nid], nid
        # printk: "Fallback order for Node %d: " + "%d " per node
    assert pm.boot_log() == [f"Fallback order for Node {n}: " + "".join(f"{x} " for x in want[n]) for n in ids]
    for nid in ids:
        # FALLBACK = concat of build_zonerefs_node over node_order: populated zones, highest type first
        expected = [
            (n, t) for n in want[nid] for t in reversed(range(5)) if pm.zone(n, ZoneType(t)).populated
        ]
        assert [(z.node, int(z.type)) for z in pm.zonelist(nid)] == expected
        # NOFALLBACK = this node's zones only
        assert [(z.node, int(z.type)) for z in pm.zonelist(nid, thisnode=True)] == [
            e for e in expected if e[0] == nid
        ]


def test_movable_zone_comes_first_inside_a_node() -> None:
    """2.1: build_zonerefs_node walks zone types downwards: Movable, Normal, DMA32, DMA (populated only)."""
    machine = Machine(
        name="movable",
        nodes=[Node(id=0, cpus=[0, 1], memory_bytes=8 * GiB), Node(id=1, cpus=[2, 3], memory_bytes=8 * GiB)],
        links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
        firmware_slit=[[10, 20], [20, 10]],
    )
    pm = PhysicalMemory(machine, KernelConfig(movable_bytes={0: 2 * GiB, 1: 2 * GiB}))
    assert [(z.node, z.type) for z in pm.zonelist(0)] == [
        (0, ZoneType.MOVABLE),
        (0, ZoneType.NORMAL),
        (0, ZoneType.DMA32),
        (0, ZoneType.DMA),
        (1, ZoneType.MOVABLE),
        (1, ZoneType.NORMAL),
    ]
    # ZONE_DEVICE is never populated, so never listed
    assert all(z.type != ZoneType.DEVICE for n in (0, 1) for z in pm.zonelist(n))


def test_distance_one_cancelled_by_below_and_cpu_penalties() -> None:
    """2.4 consequences: distance differences of 1 are cancelled by the below/cpu penalties, ties go to
    node_load and then to the lowest id, and node_load carries over from one node's build to the next."""
    slit = [
        [10, 21, 20, 20],
        [21, 10, 21, 21],
        [20, 21, 10, 20],
        [20, 21, 20, 10],
    ]
    nodes = [
        Node(id=0, cpus=[0], memory_bytes=GiB),
        Node(id=1, cpus=[], memory_bytes=GiB),
        Node(id=2, cpus=[1], memory_bytes=GiB),
        Node(id=3, cpus=[2], memory_bytes=GiB),
    ]
    links = [Link(a=i, b=j, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(4) for j in range(i + 1, 4)]
    pm = PhysicalMemory(Machine(name="tie", nodes=nodes, links=links, firmware_slit=slit),
                        KernelConfig(cpus_known_at_boot=True))
    # Node 0's build (local 0): 0 first; then 1: 21+0+0=21, 2: 20+0+1=21, 3: 20+0+1=21 -> tie at 21, all
    # loads 0 -> lowest id 1; node_load[1] += 1 (distance 21 != 10). Next: 2 (21, load 0) vs 3 (21, load 0)
    # -> 2; distance 20 != 21 -> node_load[2] += 1. Then 3; 20 == 20 -> no load. Order 0 1 2 3.
    assert pm.fallback_order(0) == [0, 1, 2, 3]
    # Node 1's build: 1 first; 0: 21+1+1=23, 2: 21+0+1=22, 3: 21+0+1=22 -> 2 vs 3 by load (1 vs 0) -> 3;
    # node_load[3] += 1 (21 != 10). Then 2 (22); 21 == 21 -> no load. Then 0. Order 1 3 2 0.
    assert pm.fallback_order(1) == [1, 3, 2, 0]
    # Node 2's build: 2 first; 0: 20+1+1=22, 1: 21+1+0=22, 3: 20+0+1=21 -> 3; node_load[3] += 1 (=2).
    # Then 0 (22, load 0) vs 1 (22, load 1) -> 0; 20 == 20 -> no load. Then 1. Order 2 3 0 1.
    assert pm.fallback_order(2) == [2, 3, 0, 1]
