"""Determinism, monotonicity, devices, results and errors of the engine."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _engine_machines import (
    PAGE,
    calibration,
    interleaved_pages,
    seed000_machine,
    spread_pages,
    stream,
    two_node,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine import DeviceTransfer, PageMap, ThreadSpec, simulate
from numasim.errors import CalibrationError, WorkloadError
from numasim.units import MiB
from numasim.workload.access import AccessChunk

MODES = ["epoch", "exact"]


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_result(mode: str) -> None:
    m = seed000_machine()
    cal = calibration(m)
    pm = interleaved_pages([0, 1, 2, 3], 1 << 12)
    specs = [ThreadSpec(t, cpu=t * 24) for t in range(4)]

    def run() -> dict:
        return simulate(
            m,
            cal,
            specs,
            stream("rand", 20_000, 4, (1 << 12) * PAGE, write_fraction=0.2),
            pm,
            mode=mode,
            seed=7,
        ).to_dict()

    a, b = run(), run()
    assert a == b
    assert a["seed"] == 7 and a["mode"] == mode and a["calibration_id"] == cal.id
    json.dumps(a)  # plain JSON


@settings(max_examples=8, deadline=None)
@given(
    st.integers(1, 7),
    st.integers(1, 8),
    st.sampled_from(["seq", "rand"]),
    st.sampled_from([[0], [1], [0, 1]]),
)
def test_more_threads_never_lower_latency(threads: int, extra: int, kind: str, nodes: list[int]) -> None:
    """More threads on node 0 (more contention) never make node 0's accesses faster on average.

    One target alone may get a little faster: with FIFO controllers and links, an added thread can shift
    where the threads queue (which requests meet in a burst), so the queues on one route grow while another's
    shrink. Over this whole space (1-15 threads, both patterns, all three page placements) the largest such
    drop is 3.4 %, so each target is held within 5 %, and the mean over all of node 0's accesses exactly. The
    threads may run on any of node 0's 8 cpus: beyond 8 they share them evenly (engine.cores.cpu_sharers) and add
    no load. (Pinned two to a cpu instead, the others finish first and the pinned pairs run on alone at half the
    load, which lowers the mean: 11 threads on 8 cpus, sequential loads of node 1, 255.6 -> 212.3 ns, as on a real
    machine; an example hypothesis found, 7 -> 10 threads, 2.7 % lower.)
    """
    m = two_node()
    cal = calibration(m)
    pm = interleaved_pages(nodes, 1 << 12)
    per_thread = 3000

    def latency_by_target(k: int) -> tuple[dict[int, float], float]:
        specs = [ThreadSpec(t, cpu=t % 8, cpus=tuple(range(8))) for t in range(k)]  # node 0's cpus
        r = simulate(m, cal, specs, stream(kind, per_thread * k, k, (1 << 12) * PAGE), pm)
        cells = [p for p in r.matrix if p.initiator == "node0" and p.accesses]
        mean = sum(p.load_to_use_mean_ns * p.accesses for p in cells) / sum(p.accesses for p in cells)
        return {p.target_node: p.load_to_use_mean_ns for p in cells}, mean

    (few, few_mean), (many, many_mean) = latency_by_target(threads), latency_by_target(threads + extra)
    assert few.keys() == many.keys()
    assert many_mean >= few_mean - 1e-6
    for node, latency in few.items():
        assert many[node] >= 0.95 * latency


@pytest.mark.parametrize("mode", MODES)
def test_nic_send_local_vs_membind_remote(mode: str) -> None:
    """Source 000: an 8 MiB RDMA send takes 331 us from node-0 memory and 494 us with --membind=1."""
    m = seed000_machine(caches=False)
    cal = calibration(m)
    size = 8 * MiB
    took = {}
    for node in (0, 1):
        pm = spread_pages([node], size // PAGE)
        r = simulate(m, cal, [], [], pm, mode=mode, devices=[DeviceTransfer("mlx5_2", "read", 0, size)])
        (dev,) = r.devices
        took[node] = dev.duration_ns / 1000.0
        assert dev.bandwidth_gb_s == pytest.approx(size / dev.duration_ns)
        assert r.node(node).accesses == size // 64
        nic = next(i for i in r.initiators if i.initiator == "mlx5_2")
        assert nic.bytes_read == size and nic.node == 0
    assert took[0] == pytest.approx(331.0, rel=0.03)
    assert took[1] == pytest.approx(494.0, rel=0.03)


def test_result_tables_and_records() -> None:
    m = two_node(caches=True)
    cal = calibration(m)
    pm = spread_pages([0, 1], 256)
    specs = [ThreadSpec(0, cpu=0), ThreadSpec(1, cpu=8)]
    r = simulate(m, cal, specs, stream("rand", 10_000, 2, 512 * PAGE, write_fraction=0.5), pm)
    tables = r.tables()
    assert set(tables) == {"nodes", "initiators", "matrix", "resources", "threads", "devices", "cache_levels"}
    assert sum(row["accesses"] for row in tables["nodes"]) == 10_000
    assert sum(row["accesses"] for row in tables["matrix"]) == 10_000
    assert r.node(0).pages_resident == 256 and r.node(1).pages_resident == 256
    for n in r.nodes:
        assert n.local_accesses + n.remote_accesses == n.accesses == n.reads + n.writes
        assert n.memory_latency_p50_ns <= n.memory_latency_p99_ns
    mat = r.access_matrix()
    assert mat.shape == (2, 2) and mat.sum() == 10_000
    assert r.utilisation.shape[1] == len(r.resources)
    # the histograms hold memory request latencies: one count per request that went to memory
    assert r.latency_hist_by_node.sum() == sum(n.memory_accesses for n in r.nodes) > 0
    assert sum(row["accesses"] for row in tables["cache_levels"]) == 10_000
    pytest.importorskip("pandas")
    frames = r.to_pandas()
    assert len(frames["threads"]) == 2


def test_multi_line_access_counts_each_line() -> None:
    m = two_node()
    pm = spread_pages([0, 1], 1)  # page 0 on node 0, page 1 on node 1
    chunk = AccessChunk.build(np.array([PAGE - 64], dtype=np.uint64), size_bytes=128, is_write=True)
    r = simulate(m, calibration(m), [ThreadSpec(0, cpu=0)], [chunk], pm)
    assert [n.accesses for n in r.nodes] == [1, 1]
    assert r.node(0).bytes_written == 128


def test_missing_calibration_names_the_fix() -> None:
    m = two_node()
    with pytest.raises(CalibrationError, match=r"numasim calibrate.*nominal_calibration\(machine\)"):
        simulate(m, None, [ThreadSpec(0, cpu=0)], [], PageMap())


def test_unmapped_page_names_the_address() -> None:
    m = two_node()
    pm = spread_pages([0], 1)
    chunk = AccessChunk.build(np.array([0, 0x5000], dtype=np.uint64))
    with pytest.raises(WorkloadError, match="0x5000"):
        simulate(m, calibration(m), [ThreadSpec(0, cpu=0)], [chunk], pm)


def test_bad_inputs_are_named() -> None:
    m = two_node()
    cal = calibration(m)
    pm = spread_pages([0], 1)
    one = [AccessChunk.build(np.array([0], dtype=np.uint64), thread=3)]
    with pytest.raises(WorkloadError, match="thread 3"):
        simulate(m, cal, [ThreadSpec(0, cpu=0)], one, pm)
    with pytest.raises(WorkloadError, match="cpu = 999"):
        simulate(m, cal, [ThreadSpec(0, cpu=999)], [], pm)
    with pytest.raises(WorkloadError, match="mode = 'fast'"):
        simulate(m, cal, [ThreadSpec(0, cpu=0)], [], pm, mode="fast")
    with pytest.raises(WorkloadError, match="no such device"):
        simulate(m, cal, [], [], pm, devices=[DeviceTransfer("eth9", "read", 0, 64)])
    with pytest.raises(WorkloadError, match="two threads"):
        simulate(m, cal, [ThreadSpec(0, cpu=0), ThreadSpec(0, cpu=1)], [], pm)


def test_figures(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from numasim.engine.plots import access_heatmap, latency_histograms, utilisation_over_time

    m = two_node(caches=True)
    pm = spread_pages([0, 1], 64)
    r = simulate(m, calibration(m), [ThreadSpec(0, cpu=0)], stream("rand", 5000, 1, 128 * PAGE), pm)
    for k, fig in enumerate((access_heatmap(r), utilisation_over_time(r), latency_histograms(r))):
        fig.savefig(tmp_path / f"{k}.png")
        assert (tmp_path / f"{k}.png").stat().st_size > 1000
