"""Virtual lmbench lat_mem_rd: lmbench's sizes and layout, cache plateaus, the route latency at huge sets."""

from __future__ import annotations

import pytest

from numasim.calibrate.parsers.lmbench import parse_lat_mem_rd_text
from numasim.engine import build_memory_system
from numasim.errors import WorkloadError
from numasim.tools.context import tool_context
from numasim.tools.lat_mem_rd import format_lat_mem_rd, lat_mem_rd, lmbench_sizes


def test_lmbench_sizes() -> None:
    sizes = lmbench_sizes(1 << 20)
    assert sizes[:8] == [512, 1024, 2048, 3072, 4096, 6144, 8192, 10240]
    assert sizes[-1] == 1 << 20 and sizes == sorted(set(sizes))
    # 8 steps per octave from 32 KiB on (k += s / 16, s the power of two above k)
    assert sum(1 for s in sizes if (1 << 16) <= s < (1 << 17)) == 8


def test_format_parses_back_and_looks_like_lmbench(seed003) -> None:
    m, cal = seed003
    r = lat_mem_rd(tool_context(m, cal, cpunodebind=[0], membind=[1]), "1M", [64, 128])
    text = format_lat_mem_rd(r)
    lines = text.splitlines()
    assert lines[0] == '"stride=64' and lines[1].startswith("0.00049 ") and lines[1].split()[1].count(".") == 1
    assert len(lines[1].split()[1].split(".")[1]) == 3
    parsed = parse_lat_mem_rd_text(text)
    assert [c.stride_bytes for c in parsed.curves] == [64, 128]
    back = parsed.curves[0].size_bytes  # sizes in MB with 5 decimals: within half a unit (5.3 bytes)
    assert all(abs(b - s) <= 6 for b, s in zip(back.tolist(), r.size_bytes, strict=True))
    # in L1 the chase costs the L1 latency; past L2 (256 KiB) it costs more
    l1 = {c.name: c.latency_ns for c in cal.caches}["L1d"]
    assert r.latency_ns[64][0] == pytest.approx(l1, rel=0.05)
    assert r.latency_ns[128][-1] > 2 * l1


@pytest.mark.parametrize("mem", [0, 1])
def test_huge_working_set_approaches_the_route_latency(seed003, mem: int) -> None:
    m, cal = seed003
    r = lat_mem_rd(tool_context(m, cal, cpunodebind=[0], membind=[mem]), "64M", [256])
    route = build_memory_system(m, cal).base_latency_ns[0, mem]
    assert r.latency_ns[256][-1] == pytest.approx(route, rel=0.02)
    assert r.pages_per_node == {mem: 16384}


def test_bad_arguments(seed003) -> None:
    m, cal = seed003
    ctx = tool_context(m, cal)
    with pytest.raises(WorkloadError, match="stride 4"):
        lat_mem_rd(ctx, "1M", [4])
    with pytest.raises(WorkloadError, match="smallest"):
        lat_mem_rd(ctx, 100, [8])
