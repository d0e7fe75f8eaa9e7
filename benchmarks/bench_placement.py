"""Placement speed: the vectorised page allocator vs a per-page Python loop.

Allocates 64 GiB (16,777,216 order-0 pages) on a 2-node and a 4-node machine, with one preferred node (spilling
to the next node at the low watermark) and with per-page interleave targets one of which is nearly full (its
pages fall back along its own zonelist). The per-page loop walks the same candidate list page by page; it runs
on a smaller count and its rate is extrapolated. Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_placement.py --run-benchmarks -s
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.gfp import Gfp
from numasim.kernel.physmem import PhysicalMemory
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30
PAGES_64G = (64 * GiB) // 4096
LOOP_PAGES = 200_000


def _machine(nodes: int) -> Machine:
    # node 0 has less free memory than its share of 64 GiB: the preferred node spills, and interleave
    # overflows from node 0 along node 0's zonelist
    per_node = 256 * GiB // nodes
    free = [16 * GiB // (nodes // 2)] + [per_node - 4 * GiB] * (nodes - 1)
    slit = [[10 if a == b else 20 for b in range(nodes)] for a in range(nodes)]
    return Machine(
        name=f"bench-{nodes}",
        nodes=[
            Node(id=i, cpus=[2 * i, 2 * i + 1], memory_bytes=per_node, free_bytes=free[i])
            for i in range(nodes)
        ],
        links=[Link(a=i, b=i + 1, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(nodes - 1)],
        firmware_slit=slit,
    )


def _request(nodes: int, count: int, interleave: bool) -> AllocRequest:
    if interleave:
        targets = np.resize(np.arange(nodes, dtype=np.int16), count)
        return AllocRequest(count=count, preferred_nid=targets, interleave=True)
    return AllocRequest(count=count, preferred_nid=0)


def _per_page_loop(pm: PhysicalMemory, req: AllocRequest) -> np.ndarray:
    """The obvious implementation: every page walks its candidate list until one has room, then counts."""
    gfp = Gfp(int(req.gfp))
    targets = (
        req.preferred_nid
        if isinstance(req.preferred_nid, np.ndarray)
        else np.full(req.count, req.preferred_nid)
    )
    plans = {int(t): pm._plan(int(t), req, gfp) for t in np.unique(targets)}
    free = [z.free_pages for z in pm.zones]
    cache = [z.reclaimable_pages for z in pm.zones]
    out = np.empty(req.count, dtype=np.int16)
    hit = np.zeros(max(pm.node_ids) + 1, dtype=np.int64)
    miss, foreign, local, other = hit.copy(), hit.copy(), hit.copy(), hit.copy()
    for i, t in enumerate(targets.tolist()):
        for c in plans[t].candidates:
            room = free[c.zone] + (max(0, cache[c.zone] - c.floor) if c.reclaim else 0) - c.thr
            if room > 0:
                if c.reclaim and free[c.zone] <= c.thr:
                    need = c.thr + 1 - free[c.zone]
                    cache[c.zone] -= need
                    free[c.zone] += need
                free[c.zone] -= 1
                node = pm.zones[c.zone].node
                out[i] = node
                if node == c.pnode:  # zone_statistics, one event per page
                    hit[node] += 1
                else:
                    miss[node] += 1
                    foreign[c.pnode] += 1
                if node == req.cpu_node:
                    local[node] += 1
                else:
                    other[node] += 1
                break
        else:
            return out[:i]
    return out


@pytest.mark.benchmark
@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("interleave", [False, True], ids=["scalar", "interleave-overflow"])
def test_bench_placement(nodes: int, interleave: bool) -> None:
    machine = _machine(nodes)
    pm = PhysicalMemory(machine)
    req = _request(nodes, PAGES_64G, interleave)
    t0 = time.perf_counter()
    res = pm.alloc(req)
    vec_s = time.perf_counter() - t0
    assert res.allocated == PAGES_64G and len(res.per_node_pages) > 1

    small = _request(nodes, LOOP_PAGES, interleave)
    pm_loop = PhysicalMemory(machine)
    t0 = time.perf_counter()
    loop_nodes = _per_page_loop(pm_loop, small)
    loop_s = time.perf_counter() - t0
    check = PhysicalMemory(machine).alloc(small)
    assert np.array_equal(loop_nodes, check.nodes)

    vec_rate = PAGES_64G / vec_s
    loop_rate = LOOP_PAGES / loop_s
    per_node_gib = {n: round(p * 4096 / GiB, 2) for n, p in res.per_node_pages.items()}
    print(
        f"\n{nodes} nodes, {'interleave+overflow' if interleave else 'scalar preferred'}: "
        f"vectorised {PAGES_64G:,} pages in {vec_s:.3f} s = {vec_rate / 1e6:.1f} M pages/s; "
        f"per-page loop {loop_rate / 1e6:.3f} M pages/s (64 GiB extrapolated: {PAGES_64G / loop_rate:.0f} s); "
        f"ratio {vec_rate / loop_rate:.0f}x; placement GiB {per_node_gib}"
    )
