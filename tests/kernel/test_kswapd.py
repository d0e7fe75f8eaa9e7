"""kswapd's background reclaim while a program faults memory in (numasim.kernel.kswapd)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.physmem import PhysicalMemory
from numasim.topology.model import Link, Machine, Node

MB = 1 << 20
PAGES_PER_MB = 256


def _two(free_mb: int = 2048, cache_mb: int = 0, ratio: float = 1.0, mem_mb: int = 8192) -> PhysicalMemory:
    nodes = [Node(id=i, cpus=[2 * i, 2 * i + 1], memory_bytes=mem_mb * MB, free_bytes=free_mb * MB) for i in (0, 1)]
    m = Machine(name="t", nodes=nodes, links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
                firmware_slit=[[10, 20], [20, 10]])
    cache = {0: cache_mb * MB} if cache_mb else None
    return PhysicalMemory(m, KernelConfig(reclaimable_page_cache_bytes=cache, kswapd_reclaim_ratio=ratio))


def _node_pages(pm: PhysicalMemory, nid: int) -> tuple[int, int, int]:
    zones = pm.node_zones(nid)
    return sum(z.free_pages for z in zones), sum(z.reclaimable_pages for z in zones), sum(z.managed_pages for z in zones)


def test_without_cache_kswapd_changes_nothing() -> None:
    req = AllocRequest(count=3000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0)
    plain = _two(ratio=0.0).alloc(req)
    with_kswapd = _two(ratio=1.0)
    r = with_kswapd.alloc(req)
    assert r.per_node_pages == plain.per_node_pages
    assert with_kswapd.vmstat["pgsteal_kswapd"] == 0


def test_allocation_returns_to_the_local_node_as_kswapd_frees_cache() -> None:
    pm = _two(cache_mb=500)
    r = pm.alloc(AllocRequest(count=3000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    base = _two(cache_mb=500, ratio=0.0).alloc(AllocRequest(count=3000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    gained = r.per_node_pages[0] - base.per_node_pages[0]
    stolen = pm.vmstat["pgsteal_kswapd"]
    assert stolen == 500 * PAGES_PER_MB  # all of node 0's cache
    # every reclaimed page went to node 0, but what kswapd freed after the request to reach the high watermark
    assert 0 <= stolen - gained <= sum(z.wmark_high for z in pm.node_zones(0))
    assert r.per_node_pages[0] + r.per_node_pages[1] == 3000 * PAGES_PER_MB and r.reclaimed == 0  # no direct reclaim
    assert pm.vmstat["pageoutrun"] >= 1


def test_a_slow_kswapd_reclaims_in_proportion() -> None:
    pm = _two(cache_mb=4000, free_mb=4000)
    # 6000 MB: node 0 drains after about 4000 MB, kswapd then runs for the last ~2000 MB at 1 page per 10
    pm.config = KernelConfig(reclaimable_page_cache_bytes={0: 4000 * MB}, kswapd_reclaim_ratio=0.1)
    r = pm.alloc(AllocRequest(count=6000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    stolen_mb = pm.vmstat["pgsteal_kswapd"] / PAGES_PER_MB
    # at most a tenth of what was faulted while kswapd was awake (it wakes when node 0's first zone drains),
    # plus the top-up to the high watermark; far from the 4000 MB of cache a fast kswapd takes
    assert 100 < stolen_mb <= 0.1 * 6000 + 50
    assert r.per_node_pages[1] > 0
    fast = _two(cache_mb=4000, free_mb=4000, ratio=10.0)
    fast.alloc(AllocRequest(count=6000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    assert fast.vmstat["pgsteal_kswapd"] / PAGES_PER_MB > 3 * stolen_mb


def test_kswapd_stops_at_the_high_watermark_once_the_request_ends() -> None:
    pm = _two(cache_mb=1000)
    pm.alloc(AllocRequest(count=2500 * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    for z in pm.node_zones(0):
        if z.managed_pages and z.reclaimable_pages:  # cache left: the zone was balanced, not emptied
            assert z.free_pages >= z.wmark_high


@settings(max_examples=25, deadline=None)
@given(free_mb=st.integers(300, 4000), cache_mb=st.integers(0, 3000), want_mb=st.integers(100, 9000),
       ratio=st.floats(0.0, 3.0))
def test_pages_are_conserved_and_cache_never_overdrawn(free_mb, cache_mb, want_mb, ratio) -> None:  # type: ignore[no-untyped-def]
    cache_mb = min(cache_mb, 8192 - free_mb - 100)
    pm = _two(free_mb=free_mb, cache_mb=cache_mb, ratio=ratio)
    before = [_node_pages(pm, n) for n in (0, 1)]
    r = pm.alloc(AllocRequest(count=want_mb * PAGES_PER_MB, preferred_nid=0, cpu_node=0))
    after = [_node_pages(pm, n) for n in (0, 1)]
    for n in (0, 1):
        (f0, c0, m0), (f1, c1, m1) = before[n], after[n]
        assert m0 == m1
        assert 0 <= c1 <= c0 and f1 >= 0
        # what left free and cache is what the request took from the node
        assert (f0 + c0) - (f1 + c1) == r.per_node_pages.get(n, 0)
    assert pm.vmstat["pgsteal_kswapd"] <= cache_mb * PAGES_PER_MB


def test_ratio_is_validated() -> None:
    with pytest.raises(ValueError, match="kswapd_reclaim_ratio = -1"):
        KernelConfig(kswapd_reclaim_ratio=-1)
