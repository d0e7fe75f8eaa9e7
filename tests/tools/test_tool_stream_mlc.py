"""Virtual STREAM and mlc: layouts read by numasim's parsers, first touch, and the matrices' closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from numasim.calibrate.parsers.mlc import parse_mlc_text
from numasim.calibrate.parsers.stream import parse_stream_text
from numasim.engine import build_memory_system
from numasim.errors import WorkloadError
from numasim.tools.context import tool_context
from numasim.tools.mlc import MlcUsageError, format_mlc, mlc
from numasim.tools.stream import KERNELS, format_stream, stream

N = 200_000


def test_stream_layout_and_rates(seed001) -> None:
    m, cal = seed001
    r = stream(tool_context(m, cal, cpunodebind=[0]), threads=2, array_elements=N)
    text = format_stream(r)
    assert "Function    Best Rate MB/s  Avg time     Min time     Max time" in text
    assert "Array size = 200000 (elements), Offset = 0 (elements)" in text
    assert "Number of Threads requested = 2" in text
    parsed = parse_stream_text(text)
    assert set(parsed.best_rate_mb_s) == {k.lower() for k in KERNELS}
    for k, words in zip(KERNELS, (2, 2, 3, 3), strict=True):
        assert r.best_rate_mb_s[k] == pytest.approx(1e-6 * words * 8 * N / r.min_time_s[k])
        assert parsed.best_rate_mb_s[k.lower()] == pytest.approx(r.best_rate_mb_s[k], abs=0.05)
    row = next(line for line in text.splitlines() if line.startswith("Triad:"))
    assert len(row) == len("Triad:     ") + 12 + 2 + 11 + 2 + 11 + 2 + 11


def test_stream_first_touch_follows_the_threads(seed001) -> None:
    m, cal = seed001
    spread = stream(tool_context(m, cal, physcpubind=[0, 10]), threads=2, array_elements=N)
    assert set(spread.pages_per_node) == {0, 1}  # each thread's block on its own node
    bound = stream(tool_context(m, cal, physcpubind=[0, 10], membind=[1]), threads=2, array_elements=N)
    assert set(bound.pages_per_node) == {1}
    with pytest.raises(WorkloadError):
        stream(tool_context(m, cal), threads=0)


def test_mlc_latency_and_bandwidth_matrices(seed001) -> None:
    m, cal = seed001
    r = mlc(tool_context(m, cal), ["--latency_matrix", "--bandwidth_matrix"])
    text = format_mlc(r)
    assert text.startswith("Intel(R) Memory Latency Checker - v3.5\nCommand line parameters: --latency_matrix")
    p = parse_mlc_text(text)
    lat, bw = p.latency_matrix, p.bandwidth_matrix
    assert lat is not None and bw is not None and lat.rows == [0, 1] and bw.cols == [0, 1]
    route = build_memory_system(m, cal).base_latency_ns
    assert np.allclose(lat.values, route, rtol=0.02)  # an idle chase costs the route's idle latency
    assert lat.cell(0, 0) < lat.cell(0, 1) and bw.cell(0, 0) > bw.cell(0, 1)
    # the measured ThinKing matrix the calibration was fitted on (shared/data/mlc): within 5 %
    assert bw.cell(0, 0) == pytest.approx(55263.8, rel=0.05) and bw.cell(0, 1) == pytest.approx(25501.2, rel=0.05)


def test_mlc_peak_and_loaded_latency(seed001) -> None:
    m, cal = seed001
    r = mlc(tool_context(m, cal), ["--peak_injection_bandwidth", "--loaded_latency"], delays=(0, 1000, 20000))
    p = parse_mlc_text(format_mlc(r))
    assert set(p.peak_injection_mb_s) == {"all_reads", "3:1", "2:1", "1:1", "stream_triad"}
    assert p.peak_injection_mb_s["all_reads"] == pytest.approx(110395.9, rel=0.05)
    (table,) = p.loaded_latency
    assert table.inject_delay.tolist() == [0, 1000, 20000]
    assert table.latency_ns[0] > table.latency_ns[-1]  # loaded > idle
    assert table.bandwidth_mb_s[0] > table.bandwidth_mb_s[-1]
    idle = mlc(tool_context(m, cal, cpunodebind=[1]), ["--idle_latency"])
    parsed = parse_mlc_text(format_mlc(idle))
    assert parsed.idle_latency_ns == [pytest.approx(build_memory_system(m, cal).base_latency_ns[1, 1], rel=0.02)]
    with pytest.raises(MlcUsageError):
        mlc(tool_context(m, cal), ["--c2c_latenc"])


def test_mlc_c2c_latency_reports_what_the_calibration_makes_of_a_transfer(seed001) -> None:
    # A calibration with no cache-to-cache figures times a transfer as what serves it (an L3 hit on the socket, a
    # memory access at the line's home across it), far from the machine's own run (28.3 ns local HITM, ~70 ns
    # remote). Fitted on that run (its c2c table), as the shipped one is, the virtual mlc prints its figures.
    from pathlib import Path

    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.pipeline import calibrate
    from numasim.engine.caches import cache_levels

    m, shipped = seed001
    assert shipped.coherence is not None and shipped.coherence.local_hitm_ns == pytest.approx(28.3)
    cal = shipped.model_copy(update={"coherence": None})
    p = parse_mlc_text(format_mlc(mlc(tool_context(m, cal), ["--c2c_latency"])))
    l3 = cache_levels(m, cal)[-1].latency_ns
    assert p.c2c_local_ns["Local Socket L2->L2 HITM"] == pytest.approx(l3, rel=0.03)  # (a few loads look streamed)
    writer = p.c2c_remote_ns["Remote Socket L2->L2 HITM (writer homed)"]
    mem = build_memory_system(m, cal).base_latency_ns
    assert writer.cell(0, 1) == pytest.approx(mem[1, 0], rel=0.03)  # node 1 reads node 0's memory (as above)
    run = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
    fitted = calibrate(m, load_measurements([run]), created="2026-01-01").calibration
    p = parse_mlc_text(format_mlc(mlc(tool_context(m, fitted), ["--c2c_latency"])))
    assert p.c2c_local_ns["Local Socket L2->L2 HITM"] == pytest.approx(28.3, abs=0.05)
    assert p.c2c_remote_ns["Remote Socket L2->L2 HITM (writer homed)"].cell(1, 0) == pytest.approx(70.05, abs=0.1)
    assert p.c2c_remote_ns["Remote Socket L2->L2 HITM (reader homed)"].cell(0, 1) == pytest.approx(69.35, abs=0.1)


def test_mlc_writes_partial_lines_where_reads_for_ownership_may_be_skipped(seed001) -> None:
    # mlc's own rule (its supports_spec_itom): on a processor with SpecItoM its load threads store to part of each
    # line, so every write still reads its line and the traffic mlc counts moved. Granting the E5 an evasion it
    # does not have then changes none of mlc's peak figures, while STREAM's full-line copy speeds up.
    from numasim.timing.catalog import catalog_calibration
    from numasim.timing.model import Calibration

    m, _ = seed001
    cal = catalog_calibration(m)  # (a store miss moves two lines: a read for ownership and a write-back)
    assert cal.core.write_cost_factor == 2.0 and cal.core.write_allocate_evasion == 0.0
    evading = Calibration.model_validate(
        {**cal.model_dump(), "core": {**cal.core.model_dump(), "write_allocate_evasion": 1.0}, "id": ""}
    )
    peak = {c.id: parse_mlc_text(format_mlc(mlc(tool_context(m, c), ["--peak_injection_bandwidth"]))).peak_injection_mb_s
            for c in (cal, evading)}
    assert peak[evading.id] == peak[cal.id]
    copy = {c.id: stream(tool_context(m, c, cpunodebind=[0]), threads=10, array_elements=2_000_000).best_rate_mb_s["Copy"]
            for c in (cal, evading)}
    assert copy[evading.id] > copy[cal.id]


def test_no_bandwidth_matrix_cell_exceeds_its_routes_slowest_server() -> None:
    """A prefetched line is not at the core before every server of its route has served it. With only the last
    server (the controller) counted, a stream bound by a slower link finished a fraction of a line early: seed-000's
    cross-socket cells read 40001.0 MB/s over its 40 GB/s UPI link."""
    from numasim.timing import resolve_calibration
    from numasim.timing.model import apply_calibration
    from numasim.topology.io import load_machine
    from numasim.topology.routing import bandwidth_table_gb_s

    m = load_machine("seed-000-4node")
    cal = resolve_calibration(m)
    cap_mb_s = bandwidth_table_gb_s(apply_calibration(m, cal)) * 1000
    got = mlc(tool_context(m, cal), ["--bandwidth_matrix"]).bandwidth_mb_s
    assert got is not None
    assert np.all(got <= cap_mb_s * (1 + 1e-9)), (got, cap_mb_s)
    assert got[0, 2] > 0.99 * cap_mb_s[0, 2]  # the link-bound cells do reach the link's rate
