"""Closed forms the timing model must reproduce exactly or within 2 %, in both fidelities."""

from __future__ import annotations

import numpy as np
import pytest
from _engine_machines import LINE, PAGE, calibration, seed000_machine, spread_pages, stream

from numasim.engine import ThreadSpec, simulate
from numasim.timing.model import apply_calibration
from numasim.topology.routing import latency_table_ns
from numasim.workload.access import AccessChunk

MODES = ["epoch", "exact"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("is_write", [False, True])
def test_idle_access_costs_exactly_the_route_latency(mode: str, is_write: bool) -> None:
    m = seed000_machine()
    cal = calibration(m)
    table = latency_table_ns(apply_calibration(m, cal))
    for i in range(4):
        for j in range(4):
            pm = spread_pages([j], 1)
            chunk = AccessChunk.build(np.array([128], dtype=np.uint64), is_write=is_write)
            r = simulate(m, cal, [ThreadSpec(0, cpu=24 * i)], [chunk], pm, mode=mode)
            assert r.run_time_ns == pytest.approx(table[i, j], rel=1e-12, abs=1e-9)
            assert r.node(j).load_to_use_mean_ns == pytest.approx(table[i, j], rel=1e-12)
            assert r.node(j).accesses == 1 and r.node(j).memory_accesses == 1
    # Controller 80 ns; die link 8 ns; socket link 80 ns (source 000's 10/11/20 shape).
    assert table[0].tolist() == [80.0, 88.0, 160.0, 160.0]


def _bandwidth_gb_s(mode: str, cpu_node: int, mem_node: int, threads: int, n: int, **core: float) -> float:
    m = seed000_machine(caches=False)
    cal = calibration(m, **core)
    pm = spread_pages([mem_node], 1 << 14)
    specs = [ThreadSpec(t, cpu=24 * cpu_node + t) for t in range(threads)]
    r = simulate(m, cal, specs, stream("rand", n, threads, (1 << 14) * PAGE), pm, mode=mode)
    return n * LINE / r.run_time_ns


@pytest.mark.parametrize("mode", MODES)
def test_saturated_controller_delivers_its_bandwidth(mode: str) -> None:
    bw = _bandwidth_gb_s(mode, 0, 0, 16, 80_000, max_outstanding_misses=64, prefetch_distance_lines=0)
    assert bw == pytest.approx(40.0, rel=0.02)


@pytest.mark.parametrize("mode", MODES)
def test_saturated_link_delivers_its_bandwidth(mode: str) -> None:
    # Reads of node 2's memory by node 0 cross the socket link 2 -> 0 (20 GB/s) before anything else saturates.
    bw = _bandwidth_gb_s(mode, 0, 2, 16, 60_000, max_outstanding_misses=64, prefetch_distance_lines=0)
    assert bw == pytest.approx(20.0, rel=0.02)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mlp", [1, 4, 10])
def test_littles_law_one_core(mode: str, mlp: int) -> None:
    """Requests in flight = throughput x latency = MLP; so bandwidth = MLP * 64 B / latency when unsaturated."""
    m = seed000_machine(caches=False)
    cal = calibration(m, max_outstanding_misses=mlp, prefetch_distance_lines=0)
    pm = spread_pages([1], 1 << 14)
    n = 20_000
    r = simulate(m, cal, [ThreadSpec(0, cpu=0)], stream("rand", n, 1, (1 << 14) * PAGE), pm, mode=mode)
    throughput = n / r.run_time_ns
    latency = r.node(1).load_to_use_mean_ns
    assert throughput * latency == pytest.approx(mlp, rel=0.02)
    # So one core's bandwidth is MLP * 64 B / latency, the latency being the idle 88 ns plus a little load.
    assert n * LINE / r.run_time_ns == pytest.approx(mlp * LINE / latency, rel=0.02)
    assert 88.0 <= latency < 88.0 * 1.15


@pytest.mark.parametrize("mode", MODES)
def test_streaming_core_bandwidth_with_and_without_prefetch(mode: str) -> None:
    """A sequential stream: bandwidth = MLP * 64 / latency; the prefetcher cuts the latency to M / (M + d)."""
    m = seed000_machine(caches=False)
    pm = spread_pages([0], 1 << 12)
    n = 30_000
    bw = {}
    for d in (0, 16):
        cal = calibration(m, prefetch_distance_lines=d)
        r = simulate(m, cal, [ThreadSpec(0, cpu=0)], stream("seq", n, 1, (1 << 12) * PAGE), pm, mode=mode)
        bw[d] = n * LINE / r.run_time_ns
        latency = r.node(0).load_to_use_mean_ns
        assert bw[d] == pytest.approx(10 * LINE / latency, rel=0.02)
        loaded = latency * (10 + d) / 10  # the latency the prefetcher hides part of
        assert 80.0 <= loaded < 80.0 * 1.6
    assert bw[16] > 2.0 * bw[0]


@pytest.mark.parametrize("mode", MODES)
def test_dependent_chase_pays_every_latency(mode: str) -> None:
    m = seed000_machine(caches=False)
    cal = calibration(m)
    pm = spread_pages([2], 1 << 12)
    n = 2000
    r = simulate(
        m,
        cal,
        [ThreadSpec(0, cpu=0, dependent=True)],
        stream("rand", n, 1, (1 << 12) * PAGE, compute_ns=5.0),
        pm,
        mode=mode,
    )
    # A lone thread barely loads anything: its own earlier lines add < 0.5 % through the loaded-latency curve.
    t = r.threads[0]
    assert n * (160.0 + 5.0) <= r.run_time_ns < n * (160.0 + 5.0) * 1.005
    assert t.compute_ns == pytest.approx(n * 5.0)
    assert t.stall_ns == pytest.approx(r.run_time_ns - n * 5.0)
    assert r.run_time_ns == pytest.approx(n * 5.0 + n * r.node(2).load_to_use_mean_ns, rel=1e-9)
