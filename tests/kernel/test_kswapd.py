"""kswapd: per-node background reclaim on the allocation's clock (numasim.kernel.kswapd, numasim.kernel.reclaim)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.allocator import AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.kswapd import MAX_RECLAIM_RETRIES, pgdat_balanced
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.reclaim import shrink_node_cache, split_by_cache
from numasim.topology.io import load_machine
from numasim.topology.model import Link, Machine, Node

MB = 1 << 20
PAGES_PER_MB = 256
FAULT_PAGES_PER_S = 500_000.0


def _rate_for(ratio: float) -> float:
    """kswapd_reclaim_bytes_per_s that frees ``ratio`` pages per page faulted at the default fault rate."""
    return ratio * FAULT_PAGES_PER_S * 4096


def _two(free_mb: int = 2048, cache_mb: int = 0, ratio: float = 0.5, mem_mb: int = 8192, **kw: object) -> PhysicalMemory:
    nodes = [Node(id=i, cpus=[2 * i, 2 * i + 1], memory_bytes=mem_mb * MB, free_bytes=free_mb * MB) for i in (0, 1)]
    m = Machine(name="t", nodes=nodes, links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
                firmware_slit=[[10, 20], [20, 10]])
    cache = {0: cache_mb * MB} if cache_mb else None
    kw = {"kswapd_enabled": True, **kw}
    cfg = KernelConfig(reclaimable_page_cache_bytes=cache, kswapd_reclaim_bytes_per_s=_rate_for(ratio), **kw)  # type: ignore[arg-type]
    return PhysicalMemory(m, cfg)


def _node_pages(pm: PhysicalMemory, nid: int) -> tuple[int, int, int]:
    zones = pm.node_zones(nid)
    return sum(z.free_pages for z in zones), sum(z.reclaimable_pages for z in zones), sum(z.managed_pages for z in zones)


def _balanced(pm: PhysicalMemory, nid: int) -> bool:
    zones = pm.node_zones(nid)
    return pgdat_balanced(zones, [z.free_pages for z in zones], 3)


def _req(mb: int, nid: int = 0) -> AllocRequest:
    return AllocRequest(count=mb * PAGES_PER_MB, preferred_nid=nid, cpu_node=nid)


# --- the shared reclaim routine -----------------------------------------------------------------------------
def test_reclaim_splits_by_cache_and_never_overdraws() -> None:
    assert split_by_cache([0, 30, 10], [0, 1, 2], 8) == [0, 6, 2]
    assert split_by_cache([0, 30, 10], [1, 2], 1000) == [30, 10]
    free, cache = [5, 5, 5], [0, 30, 10]
    assert shrink_node_cache(free, cache, [0, 1, 2], 1000) == [0, 30, 10]
    assert free == [5, 35, 15] and cache == [0, 0, 0]


# --- waking and sleeping ------------------------------------------------------------------------------------
def test_kswapd_sleeps_while_the_node_stays_above_its_low_watermark() -> None:
    pm = _two(cache_mb=500)
    pm.alloc(_req(1500))  # 2048 MB free: node 0 never reaches its low watermark
    assert pm.vmstat["pageoutrun"] == 0 and pm.vmstat["pgsteal_kswapd"] == 0 and not pm.kswapd.awake
    assert pm.alloc(_req(1000)).per_node_pages.get(1, 0) > 0  # now it spills ...
    assert pm.vmstat["pageoutrun"] >= 1 and pm.vmstat["pgsteal_kswapd"] > 0  # ... and kswapd woke


def test_wake_happens_at_the_page_that_passes_the_node_over() -> None:
    plain = _two(cache_mb=500, ratio=0.5, kswapd_enabled=False)
    base = plain.alloc(_req(3000)).per_node_pages[0]  # node 0's pages when nothing is reclaimed
    pm = _two(cache_mb=500, ratio=0.5)
    r = pm.alloc(_req(3000))
    # from the first spilled page on, half of every batch's pages come back to node 0 (ratio 0.5), minus the
    # pages of the one batch faulted before kswapd had any time
    after_wake = 3000 * PAGES_PER_MB - base
    gained = r.per_node_pages[0] - base
    assert abs(gained - 0.5 * after_wake) <= pm.kswapd._batch_pages() + 1


def test_strict_rule_wakes_only_in_the_slow_path() -> None:
    pm = _two(cache_mb=500, kswapd_wake_on_fallback=False)
    pm.alloc(_req(3000))  # node 1 still has room above its low watermark: the slow path is never entered
    assert pm.vmstat["pageoutrun"] == 0 and pm.vmstat["pgsteal_kswapd"] == 0
    pm.alloc(_req(1000, nid=0))  # now both nodes are at their low watermarks: wake_all_kswapds
    assert pm.vmstat["pageoutrun"] >= 1 and pm.vmstat["pgsteal_kswapd"] > 0


def test_no_wake_without_gfp_kswapd_reclaim() -> None:
    from numasim.kernel.gfp import GFP_HIGHUSER_MOVABLE, Gfp

    pm = _two(cache_mb=500)
    gfp = GFP_HIGHUSER_MOVABLE & ~Gfp.KSWAPD_RECLAIM
    pm.alloc(AllocRequest(count=3000 * PAGES_PER_MB, preferred_nid=0, cpu_node=0, gfp=gfp))
    assert pm.vmstat["pageoutrun"] == 0 and pm.vmstat["pgsteal_kswapd"] == 0


def test_kswapd_stops_at_the_high_watermark() -> None:
    pm = _two(cache_mb=1000, ratio=0.0)  # woken, but no time to reclaim during the request
    pm.alloc(_req(2500))
    assert 0 in pm.kswapd.awake and pm.vmstat["pgsteal_kswapd"] == 0
    freed = pm.kswapd.idle()  # the program is done: kswapd runs until node 0 is balanced
    assert not pm.kswapd.awake and _balanced(pm, 0)
    assert 0 < freed < 1000 * PAGES_PER_MB  # balanced long before the cache is gone
    # one page less and no zone would be above its high mark + reserve (pgdat_balanced is "any zone")
    zones = [z for z in pm.node_zones(0) if z.managed_pages]
    margin = [z.free_pages - (z.wmark_high + z.lowmem_reserve[3]) for z in zones]
    assert max(margin) >= 1 and freed <= sum(z.managed_pages for z in zones)
    assert pm.kswapd.idle() == 0  # asleep: nothing more


def test_idle_for_a_time_reclaims_at_the_rate() -> None:
    pm = _two(cache_mb=1000, ratio=0.0)
    pm.alloc(_req(2500))
    pm.config = KernelConfig(reclaimable_page_cache_bytes={0: 1000 * MB}, kswapd_enabled=True,
                             kswapd_reclaim_bytes_per_s=100e6)
    assert pm.kswapd.idle(0.01) == int(0.01 * 100e6 / 4096)  # 244 pages in 10 ms at 100 MB/s
    with pytest.raises(ValueError, match="seconds = -1"):
        pm.kswapd.idle(-1)


def test_a_node_without_cache_becomes_hopeless() -> None:
    pm = _two(cache_mb=0)
    pm.alloc(_req(3000))
    assert pm.kswapd.failures[0] == MAX_RECLAIM_RETRIES and not pm.kswapd.awake
    assert pm.vmstat["pageoutrun"] == MAX_RECLAIM_RETRIES  # one wake, then one rerun per failed run
    pm.alloc(_req(100))
    assert pm.vmstat["pageoutrun"] == MAX_RECLAIM_RETRIES  # hopeless nodes are not woken again


# --- what it frees ------------------------------------------------------------------------------------------
def test_kswapd_never_frees_more_than_the_cache() -> None:
    pm = _two(cache_mb=300, ratio=5.0)
    r = pm.alloc(_req(5000))
    assert pm.vmstat["pgsteal_kswapd"] == pm.vmstat["pgscan_kswapd"] <= 300 * PAGES_PER_MB
    assert pm.reclaimable_pages(0) == 300 * PAGES_PER_MB - pm.vmstat["pgsteal_kswapd"] - r.reclaimed


def test_without_page_cache_the_placement_is_bit_identical() -> None:
    """Source 001's stress without page cache: kswapd wakes, finds nothing, and the split is today's."""
    machine = load_machine("seed-001-e5-2680v2")
    req = AllocRequest(count=(64 << 30) // 4096, preferred_nid=0, cpu_node=0)
    off = PhysicalMemory(machine, KernelConfig())
    on = PhysicalMemory(machine, KernelConfig(kswapd_enabled=True))
    a, b = off.alloc(req), on.alloc(req)
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.zones, b.zones)
    assert a.per_node_pages == b.per_node_pages
    assert round(a.per_node_pages[0] * 4096 / MB) == 42268 and round(a.per_node_pages[1] * 4096 / MB) == 23268
    assert [(z.free_pages, z.reclaimable_pages) for z in off.zones] == [
        (z.free_pages, z.reclaimable_pages) for z in on.zones
    ]
    for nid in (0, 1):
        assert off.counters.item(nid) == on.counters.item(nid)
    assert on.vmstat["pgsteal_kswapd"] == 0


def test_article_001_split_within_2_percent() -> None:
    """Source 001 with the experiment's inferred cache on node 0 and the nominal rates (defaults)."""
    machine = load_machine("seed-001-e5-2680v2")
    cfg = KernelConfig(kswapd_enabled=True, reclaimable_page_cache_bytes={0: 2045 * MB})
    pm = PhysicalMemory(machine, cfg)
    r = pm.alloc(AllocRequest(count=(64 << 30) // 4096, preferred_nid=0, cpu_node=0))
    node0, node1 = (r.per_node_pages[n] * 4096 / MB for n in (0, 1))
    assert abs(node0 - 44313.61) / 44313.61 < 0.02 and abs(node1 - 21222.64) / 21222.64 < 0.02
    assert r.reclaimed == 0 and pm.vmstat["pgsteal_kswapd"] == 2045 * PAGES_PER_MB


def test_rates_are_validated() -> None:
    with pytest.raises(ValueError, match="kswapd_reclaim_bytes_per_s = -1"):
        KernelConfig(kswapd_reclaim_bytes_per_s=-1)
    with pytest.raises(ValueError, match="fault_pages_per_s = 0"):
        KernelConfig(fault_pages_per_s=0)
    with pytest.raises(ValueError, match="kswapd_reclaim_bytes_per_s = inf"):
        KernelConfig(kswapd_reclaim_bytes_per_s=float("inf"))


@settings(max_examples=30, deadline=None)
@given(free_mb=st.integers(300, 4000), cache_mb=st.integers(0, 3000), sizes=st.lists(st.integers(1, 4000), min_size=1, max_size=3),
       ratio=st.floats(0.0, 3.0), fallback=st.booleans())
def test_invariants(free_mb, cache_mb, sizes, ratio, fallback) -> None:  # type: ignore[no-untyped-def]
    cache_mb = min(cache_mb, 8192 - free_mb - 100)
    pm = _two(free_mb=free_mb, cache_mb=cache_mb, ratio=ratio, kswapd_wake_on_fallback=fallback)
    before = [_node_pages(pm, n) for n in (0, 1)]
    got = {0: 0, 1: 0}
    for mb in sizes:
        r = pm.alloc(_req(mb))
        for n, p in r.per_node_pages.items():
            got[n] += p
        if r.failed:
            break
    for n in (0, 1):
        (f0, c0, m0), (f1, c1, m1) = before[n], _node_pages(pm, n)
        assert m0 == m1 and f1 >= 0 and 0 <= c1 <= c0
        # pages conserved: free + cache + what the requests took is constant per node
        assert f0 + c0 == f1 + c1 + got[n]
        for z in pm.node_zones(n):
            assert 0 <= z.free_pages + z.reclaimable_pages <= z.managed_pages
    assert pm.vmstat["pgsteal_kswapd"] <= cache_mb * PAGES_PER_MB
    assert set(pm.kswapd.awake) <= {0, 1}
    for nid in pm.kswapd.awake:  # an awake kswapd is on a node that is not balanced
        assert not _balanced(pm, nid)


def test_the_command_line_gives_page_cache_and_kswapd(capsys) -> None:  # type: ignore[no-untyped-def]
    """`numasim numactl --page-cache 0=2045M --kswapd` is the Python run above; bad values name the option."""
    import json

    from numasim.cli import main

    code = main(["numactl", "--machine", "seed-001-e5-2680v2", "--page-cache", "0=2045M", "--kswapd", "--json",
                 "--cpunodebind=0", "--", "stress", "-m", "1", "--vm-bytes", "64G", "--vm-keep"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["page_cache_bytes"] == {"0": 2045 * MB} and report["kswapd"]["status"] == "nominal"
    node0 = report["pages_per_node"]["0"] * 4096 / MB
    assert abs(node0 - 44313.61) / 44313.61 < 0.02
    for bad, says in (("0=80G", "more than the node's memory in use"), ("5=1G", "node 5: no such node"),
                      ("zero=1G", "expected NODE=SIZE")):  # fmt: skip
        assert main(["numactl", "--machine", "seed-001-e5-2680v2", "--page-cache", bad, "--", "stress"]) == 2
        assert says in capsys.readouterr().err


# --- requests with one target per page (interleave) ---------------------------------------------------------
def _interleave(mb: int) -> AllocRequest:
    n = mb * PAGES_PER_MB
    return AllocRequest(count=n, preferred_nid=np.arange(n, dtype=np.int64) % 2, cpu_node=0, interleave=True)


def test_interleaved_faults_let_kswapd_reclaim_instead_of_direct_reclaim() -> None:
    """Coverage K5: an interleaved request runs in batches with kswapd between them, as a one-target one does."""
    cache = {0: 1000 * MB, 1: 1000 * MB}
    machine = _two().machine
    plain = PhysicalMemory(machine, KernelConfig(reclaimable_page_cache_bytes=cache))
    on = PhysicalMemory(machine, KernelConfig(reclaimable_page_cache_bytes=cache, kswapd_enabled=True,
                                                    kswapd_reclaim_bytes_per_s=_rate_for(0.5)))
    a, b = plain.alloc(_interleave(5000)), on.alloc(_interleave(5000))
    assert a.reclaimed > 0 and plain.vmstat["pgsteal_kswapd"] == 0  # without kswapd: the faults reclaim
    assert b.reclaimed == 0 and on.vmstat["pgsteal_kswapd"] > 0 and on.vmstat["pageoutrun"] >= 2  # both nodes woke
    # with kswapd freeing cache ahead of the faults, each node keeps its interleave share
    assert b.allocated == a.allocated == 5000 * PAGES_PER_MB
    assert abs(b.per_node_pages[0] - b.per_node_pages[1]) < abs(a.per_node_pages[0] - a.per_node_pages[1])
    assert abs(b.per_node_pages[0] - 2500 * PAGES_PER_MB) <= on.kswapd._batch_pages()
    for pm, r in ((plain, a), (on, b)):  # pages conserved on each node
        for nid in (0, 1):
            f, c, _ = _node_pages(pm, nid)
            assert f + c + r.per_node_pages[nid] == 3048 * PAGES_PER_MB


def test_interleaved_request_without_page_cache_is_bit_identical() -> None:
    off = _two(kswapd_enabled=False)
    on = _two()
    a, b = off.alloc(_interleave(3000)), on.alloc(_interleave(3000))
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.zones, b.zones)
    assert [(z.free_pages, z.reclaimable_pages) for z in off.zones] == [(z.free_pages, z.reclaimable_pages) for z in on.zones]
    for nid in (0, 1):
        assert off.counters.item(nid) == on.counters.item(nid)


@settings(max_examples=25, deadline=None)
@given(free_mb=st.integers(300, 3000), cache_mb=st.integers(0, 3000), mb=st.integers(1, 9000), ratio=st.floats(0.0, 3.0),
       fallback=st.booleans())
def test_interleaved_invariants(free_mb, cache_mb, mb, ratio, fallback) -> None:  # type: ignore[no-untyped-def]
    cache_mb = min(cache_mb, 8192 - free_mb - 100)
    pm = _two(free_mb=free_mb, cache_mb=cache_mb, ratio=ratio, kswapd_wake_on_fallback=fallback)
    before = [_node_pages(pm, n) for n in (0, 1)]
    r = pm.alloc(_interleave(mb))
    assert len(r.nodes) == r.allocated and sum(r.per_node_pages.values()) == r.allocated
    for n in (0, 1):
        (f0, c0, m0), (f1, c1, m1) = before[n], _node_pages(pm, n)
        assert m0 == m1 and f1 >= 0 and 0 <= c1 <= c0
        assert f0 + c0 == f1 + c1 + r.per_node_pages.get(n, 0)
        assert int(np.count_nonzero(r.nodes == n)) == r.per_node_pages.get(n, 0)
    assert pm.vmstat["pgsteal_kswapd"] <= cache_mb * PAGES_PER_MB
    for nid in pm.kswapd.awake:
        assert not _balanced(pm, nid)
