"""kernel_spec.md section 3 (the allocator walk) and 4.3 (lowmem_reserve in the watermark test).

Zone free counts and watermarks are set by hand on a booted :class:`PhysicalMemory`, so every expected page
count below is plain arithmetic on those hand-set numbers (shown in comments).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from strategies import small_machines

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.gfp import GFP_ATOMIC, GFP_HIGHUSER_MOVABLE, GFP_KERNEL, GFP_NOWAIT, Gfp, gfp_zone
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.zones import Zone, ZoneType
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30


def _machine(cpus: list[bool], slit: list[list[int]], mem_gib: int = 8) -> Machine:
    nodes, c = [], 0
    for i, has_cpu in enumerate(cpus):
        cl = [c, c + 1] if has_cpu else []
        c += len(cl)
        nodes.append(Node(id=i, cpus=cl, memory_bytes=mem_gib * GiB))
    n = len(nodes)
    links = [Link(a=i, b=j, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(n) for j in range(i + 1, n)]
    return Machine(name="spec3", nodes=nodes, links=links, firmware_slit=slit)


def _set(z: Zone, *, free: int, low: int, min_: int | None = None, reserve: list[int] | None = None,
         cache: int = 0) -> None:
    z.free_pages = free
    z.wmark_low = low
    z.wmark_min = low // 2 if min_ is None else min_
    z.wmark_high = low + 1
    z.lowmem_reserve = reserve if reserve is not None else [0] * 5
    z.reclaimable_pages = cache


def _zone_index(pm: PhysicalMemory, z: Zone) -> int:
    return next(i for i, x in enumerate(pm.zones) if x is z)


@pytest.mark.parametrize(("gfp", "highest"), [(GFP_HIGHUSER_MOVABLE, 3), (GFP_KERNEL, 2)])
def test_watermark_is_strict_and_adds_lowmem_reserve_of_highest_zoneidx(gfp: Gfp, highest: int) -> None:
    """3.3: a zone passes iff ``free > mark + lowmem_reserve[highest_zoneidx]`` (strict); 4.3: the reserve
    used is the one indexed by the request's highest zone (Movable = 3 for user pages, Normal = 2 for
    GFP_KERNEL). 3.3 consequence: every eligible zone is tried at LOW before any at MIN, so the spill to
    node 1 happens while node 0 is still above its min marks."""
    pm = PhysicalMemory(_machine([True, True], [[10, 20], [20, 10]]))
    normal, dma32, dma = (pm.zone(0, t) for t in (ZoneType.NORMAL, ZoneType.DMA32, ZoneType.DMA))
    # reserve[2] and reserve[3] differ so that the index matters: the used entry is `r` below
    r = {3: 100, 2: 40}[highest]
    _set(normal, free=1000, low=400, reserve=[0, 0, 40, 100, 100])
    # Normal: 1000 - (400 + r) pages pass (Movable: 500, GFP_KERNEL: 560)
    _set(dma32, free=700, low=200, reserve=[0, 0, 300, 500, 500])
    # DMA32: Movable: free 900 == 200 + 500 -> 0 pages (strict '>'); GFP_KERNEL: 700 - (200 + 300) = 200
    _set(dma, free=300, low=10, reserve=[0, 289, 289, 289, 289])
    # DMA: 300 - (10 + 289) = 1 page (free == mark + reserve + 1)
    want0 = (1000 - 400 - r) + (0 if highest == 3 else 200) + 1
    r_ = pm.alloc(AllocRequest(count=want0 + 99, preferred_nid=0, cpu_node=0, gfp=gfp))
    assert r_.per_node_pages == {0: want0, 1: 99}
    assert not r_.failed
    # zone order inside the node: Normal, DMA32, DMA (2.1), then node 1
    n_normal = 1000 - 400 - r
    assert (r_.zones[:n_normal] == ZoneType.NORMAL).all()
    assert r_.zones[want0 - 1] == ZoneType.DMA
    assert (normal.free_pages, dma.free_pages) == (400 + r, 299)
    # 6: the 99 spilled pages are numa_miss on node 1 and numa_foreign on node 0, charged to the preferred
    # zone (node 0's first eligible zone: Normal)
    c = pm.counters
    assert (int(c.numa_hit[0]), int(c.numa_miss[1]), int(c.numa_foreign[0])) == (want0, 99, 99)
    assert int(pm.zone_counters.numa_foreign[_zone_index(pm, normal)]) == 99


def test_slow_path_undoes_cpuset_substitution_for_the_preferred_zone() -> None:
    """3.1/3.2/3.4 + 6: a task in cpuset {1} on a node-0 cpu, no policy nodemask. The fast path uses
    mems_allowed as nodemask, so its preferred zone is node 1's (numa_hit). The slow path restores the NULL
    nodemask and recomputes the preferred zoneref: node 0's first zone; ALLOC_CPUSET still keeps the pages
    on node 1, so the MIN-watermark pages count numa_miss on node 1 and numa_foreign on node 0."""
    pm = PhysicalMemory(_machine([True, True], [[10, 20], [20, 10]]))
    n1 = pm.zone(1, ZoneType.NORMAL)
    _set(n1, free=1000, low=300, min_=200)
    # fast path: 1000 - 300 = 700 pages; slow path at MIN: 300 - 200 = 100 pages; total 800
    r = pm.alloc(AllocRequest(count=800, preferred_nid=0, cpu_node=0, mems_allowed=frozenset({1})))
    assert r.per_node_pages == {1: 800} and not r.failed
    c = pm.counters
    assert int(c.numa_hit[1]) == 700
    assert int(c.numa_miss[1]) == 100
    assert int(c.numa_foreign[0]) == 100 and int(c.numa_foreign[1]) == 0
    assert int(c.other_node[1]) == 800 and int(c.local_node.sum()) == 0  # cpu on node 0


@pytest.mark.parametrize(
    ("d01", "node1_has_cpus", "cache", "expected_node"),
    [
        (20, False, 100_000, 1),  # node_reclaim on node 1: distance 20 <= RECLAIM_DISTANCE 30
        (40, False, 100_000, 2),  # distance 40 > 30: node 1 is skipped without reclaim
        (20, True, 100_000, 2),  # node 1 has cpus and is not numa_node_id(): NODE_RECLAIM_NOSCAN
        # 1 GiB node = 262144 managed pages; min_unmapped_pages = 262144 * 1 // 100 = 2621
        (20, False, 2621, 2),  # page cache <= min_unmapped_pages: NODE_RECLAIM_FULL
        (20, False, 2631, 1),  # 10 pages above min_unmapped_pages: exactly enough for 10 pages
    ],
)
def test_node_reclaim_distance_and_noscan(d01: int, node1_has_cpus: bool, cache: int, expected_node: int) -> None:
    """3.3/3.5 with vm.zone_reclaim_mode = 1: a zone below LOW is reclaimed in the fast path only when
    ``node_distance(preferred, zone) <= node_reclaim_distance`` and node_reclaim does not return NOSCAN."""
    slit = [[10, d01, 50], [d01, 10, 20], [50, 20, 10]]  # node 0's order: 0, 1, 2
    pm = PhysicalMemory(_machine([True, node1_has_cpus, True], slit, mem_gib=1), KernelConfig(zone_reclaim_mode=1))
    assert pm.fallback_order(0) == [0, 1, 2]
    for z in pm.node_zones(0):
        if z.populated:
            _set(z, free=z.wmark_low + z.lowmem_reserve[3], low=z.wmark_low, min_=z.wmark_min,
                 reserve=z.lowmem_reserve)  # exactly at the mark: fails the strict test, nothing to reclaim
    n1 = pm.zone(1, ZoneType.NORMAL)
    assert n1.managed_pages == 262144
    _set(n1, free=n1.wmark_low, low=n1.wmark_low, min_=n1.wmark_min, cache=cache)
    r = pm.alloc(AllocRequest(count=10, preferred_nid=0, cpu_node=0))
    assert r.per_node_pages == {expected_node: 10}
    assert r.reclaimed == (10 if expected_node == 1 else 0)


@pytest.mark.parametrize(("gfp", "oom"), [(GFP_HIGHUSER_MOVABLE, True), (GFP_NOWAIT, False),
                                          (GFP_HIGHUSER_MOVABLE | Gfp.NORETRY, False),
                                          (GFP_HIGHUSER_MOVABLE | Gfp.THISNODE, False)])
def test_failure_without_direct_reclaim_never_ooms(gfp: Gfp, oom: bool) -> None:
    """3.4: ``!__GFP_DIRECT_RECLAIM`` fails before reclaim/OOM; NORETRY and THISNODE fail without OOM."""
    pm = PhysicalMemory(_machine([True], [[10]], mem_gib=1))
    free = sum(z.free_pages for z in pm.zones)
    r = pm.alloc(AllocRequest(count=free + 1, preferred_nid=0, cpu_node=0, gfp=gfp))
    assert r.failed and r.oom == oom


def test_thisnode_on_a_memoryless_node_fails_at_once() -> None:
    """3.6: the NOFALLBACK zonelist of a memoryless node is empty: immediate failure, no fallback, no OOM."""
    machine = Machine(
        name="memoryless",
        nodes=[Node(id=0, cpus=[0, 1], memory_bytes=GiB), Node(id=1, cpus=[2, 3], memory_bytes=0)],
        links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
        firmware_slit=[[10, 20], [20, 10]],
    )
    pm = PhysicalMemory(machine)
    assert pm.zonelist(1, thisnode=True) == []
    r = pm.alloc(AllocRequest(count=5, preferred_nid=1, cpu_node=1, gfp=GFP_HIGHUSER_MOVABLE | Gfp.THISNODE))
    assert (r.allocated, r.failed, r.oom) == (0, True, False)
    # without THISNODE the same request falls back to node 0 (the memoryless node's list starts there)
    r = pm.alloc(AllocRequest(count=5, preferred_nid=1, cpu_node=1))
    assert r.per_node_pages == {0: 5}


# --- an independent page-by-page walk written from the spec text (3.1-3.4, 4.3, 6) -------------------------
def _spec_walk(pm: PhysicalMemory, req: AllocRequest) -> tuple[list[int], list[int], bool, dict[str, list[int]]]:
    """Order-0 pages one at a time: fast path at LOW over every eligible zone, then slow path at MIN (with the
    6.3+ __GFP_HIGH / non-blocking cuts); no page cache, no cpuset. Returns nodes, zone types, oom, counters."""
    gfp = Gfp(int(req.gfp))
    highest = int(gfp_zone(gfp))
    free = {id(z): z.free_pages for z in pm.zones}
    n = max(pm.node_ids) + 1
    cnt = {k: [0] * n for k in ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node",
                                "other_node")}
    targets = list(req.preferred_nid) if not isinstance(req.preferred_nid, int) else [req.preferred_nid] * req.count
    nodes: list[int] = []
    types: list[int] = []
    for target in targets:
        zl = [z for z in pm.zonelist(int(target), thisnode=bool(gfp & Gfp.THISNODE))
              if int(z.type) <= highest and (req.nodemask is None or z.node in req.nodemask)]
        if not zl:
            break
        preferred = zl[0]
        got = None
        for z in zl:  # fast path: strict free > low + lowmem_reserve[highest]
            if free[id(z)] > z.wmark_low + z.lowmem_reserve[highest]:
                got = z
                break
        if got is None:
            for z in zl:  # slow path at MIN
                m = z.wmark_min
                if gfp & Gfp.HIGH:
                    m -= m // 2
                    if not gfp & Gfp.DIRECT_RECLAIM:
                        m -= m // 4
                if free[id(z)] > m + z.lowmem_reserve[highest]:
                    got = z
                    break
        if got is None:
            break
        free[id(got)] -= 1
        nodes.append(got.node)
        types.append(int(got.type))
        if got.node == preferred.node:
            cnt["numa_hit"][got.node] += 1
        else:
            cnt["numa_miss"][got.node] += 1
            cnt["numa_foreign"][preferred.node] += 1
        cnt["local_node" if got.node == req.cpu_node else "other_node"][got.node] += 1
        if req.interleave and got.node == int(target):
            cnt["interleave_hit"][got.node] += 1
    failed = len(nodes) < req.count
    oom = failed and bool(gfp & Gfp.DIRECT_RECLAIM) and not gfp & (Gfp.THISNODE | Gfp.RETRY_MAYFAIL | Gfp.NORETRY) \
        and highest >= int(ZoneType.NORMAL)
    return nodes, types, oom, cnt


@settings(max_examples=60, deadline=None)
@given(data=st.data(), machine=small_machines(max_nodes=4, max_pages=4000))
def test_walk_equals_spec_page_by_page(data: st.DataObject, machine: Machine) -> None:
    """3.1-3.4 + 4.3 + 6: the vectorised allocator gives the same pages, zones, OOM decision and counters as a
    page-by-page walk written from the spec (no page cache, zone_reclaim_mode 0, no cpusets)."""
    pm = PhysicalMemory(machine, KernelConfig(version="6.12"))
    mem = sorted(pm.memory_nodes)
    count = data.draw(st.integers(0, 9000))
    cpu = data.draw(st.sampled_from(pm.node_ids))
    gfp = data.draw(st.sampled_from([GFP_HIGHUSER_MOVABLE, GFP_KERNEL, GFP_ATOMIC, GFP_HIGHUSER_MOVABLE | Gfp.THISNODE]))
    if data.draw(st.booleans()):
        order = data.draw(st.lists(st.sampled_from(mem), min_size=1, max_size=3))
        req = AllocRequest(count=count, preferred_nid=np.resize(np.array(order, dtype=np.int64), count),
                           cpu_node=cpu, gfp=gfp, interleave=True)
    else:
        mask = frozenset(data.draw(st.sets(st.sampled_from(mem), min_size=1))) if data.draw(st.booleans()) else None
        req = AllocRequest(count=count, preferred_nid=data.draw(st.sampled_from(pm.node_ids)), nodemask=mask,
                           cpu_node=cpu, gfp=gfp)
    want_nodes, want_types, want_oom, want_cnt = _spec_walk(pm, req)
    event(f"failed={len(want_nodes) < count}, spilled={len(set(want_nodes)) > 1}")
    r = pm.alloc(req)
    assert r.nodes.tolist() == want_nodes
    assert r.zones.tolist() == want_types
    assert r.oom == want_oom
    for name, values in want_cnt.items():
        assert getattr(pm.counters, name).tolist()[: len(values)] == values, name
