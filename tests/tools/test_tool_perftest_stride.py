"""Virtual ib_send_lat / ib_send_bw (article 000) and article 003's stride test."""

from __future__ import annotations

import pytest

from numasim.calibrate.parsers.perftest import parse_perftest_text
from numasim.calibrate.parsers.stride_table import parse_stride_table_text
from numasim.tools.context import tool_context
from numasim.tools.perftest import PerftestUsageError, format_perftest, ib_send
from numasim.tools.stride_table import format_stride_table, stride_table


def test_perftest_membind_slows_big_sends(seed000) -> None:
    m, cal = seed000
    args = ["-s", "8M", "-d", "mlx5_2", "--report_gbits"]
    out = {}
    for mem in (0, 1):
        ctx = tool_context(m, cal, membind=[mem])
        lat = ib_send(ctx, "ib_send_lat", args)
        bw = ib_send(ctx, "ib_send_bw", args)
        assert lat.buffer_pages_per_node == {mem: 2 * 2048}
        out[mem] = (lat.latency_us[0], bw.bandwidth_gbit_s[0])
        text = f"$ numactl --membind={mem} ib_send_lat\n" + format_perftest(lat)
        (table,) = parse_perftest_text(text).tables
        assert table.mem_node == mem and table.size_bytes.tolist() == [8 << 20]
        assert table.column("t_typical")[0] == pytest.approx(lat.latency_us[0], abs=0.01)
    assert out[1][0] > 1.3 * out[0][0] and out[0][1] > 1.3 * out[1][1]
    # the article's 8 MiB cells: 331 vs 494 us, 204 vs 133 Gb/s
    assert out[0][0] == pytest.approx(331.43, rel=0.05) and out[1][0] == pytest.approx(493.88, rel=0.05)
    assert out[0][1] == pytest.approx(204.03, rel=0.06) and out[1][1] == pytest.approx(133.29, rel=0.06)


def test_perftest_small_messages_and_errors(seed000) -> None:
    m, cal = seed000
    r = ib_send(tool_context(m, cal), "ib_send_bw", ["-s", "2", "--report_gbits"])
    text = format_perftest(r)
    assert " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]" in text
    assert "0.065600" in text  # 2 B x 4.1 Mpps, printed with 6 decimals below 0.1 like perftest
    with pytest.raises(PerftestUsageError, match="mlx5_9 not found"):
        ib_send(tool_context(m, cal), "ib_send_lat", ["-d", "mlx5_9"])


def test_stride_table_layout_and_tail(seed003) -> None:
    m, cal = seed003
    sizes, pats = ("2k", "128m"), ("s1", "s64")
    rows = {}
    for mem in (0, 1):
        r = stride_table(tool_context(m, cal, cpunodebind=[0], membind=[mem]), sizes, pats)
        text = f"# numactl --cpubind=0 --membind={mem} ./main\n" + format_stride_table(r)
        (t,) = parse_stride_table_text(text).tables
        assert (t.cpu_node, t.mem_node) == (0, mem) and t.size_bytes.tolist() == [2048, 128 << 20]
        rows[mem] = t.latency_ns
    assert rows[0]["s64"][0] == pytest.approx(1.25, abs=0.05)  # in L1: the loop itself
    assert rows[1]["s64"][1] > 1.3 * rows[0]["s64"][1]  # remote misses cost the longer route
    assert rows[0]["s1"][1] < 2.0  # one miss per 16 ints, prefetched


def test_perftest_default_sizes_are_perftests(seed000) -> None:
    m, cal = seed000
    lat = ib_send(tool_context(m, cal), "ib_send_lat", ["-d", "mlx5_2"])
    assert lat.size_bytes == [2]
    bw = {mem: ib_send(tool_context(m, cal, membind=[mem]), "ib_send_bw", ["-d", "mlx5_2", "--report_gbits"])
          for mem in (0, 1)}
    assert bw[0].size_bytes == bw[1].size_bytes == [65536]
    (table,) = parse_perftest_text("$ ib_send_bw\n" + format_perftest(bw[0])).tables
    assert table.size_bytes.tolist() == [65536]
    # 64 KiB is past the NIC's message-rate limit: the DMA read from node 1 is slower than from the NIC's node
    assert bw[0].bandwidth_gbit_s[0] > 1.2 * bw[1].bandwidth_gbit_s[0]
    assert ib_send(tool_context(m, cal), "ib_send_bw", ["-s", "2"]).size_bytes == [2]
