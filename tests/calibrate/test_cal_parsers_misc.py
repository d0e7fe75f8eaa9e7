"""Every other measurement parser on real text (the seed articles' tables) and on broken variants."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers import FORMATS, detect_measurement_format, parse_measurement
from numasim.calibrate.parsers.dd import parse_dd, parse_dd_text
from numasim.calibrate.parsers.hmat import parse_hmat
from numasim.calibrate.parsers.hop_ratios import parse_hop_ratios, parse_hop_ratios_text
from numasim.calibrate.parsers.lmbench import parse_lat_mem_rd_text
from numasim.calibrate.parsers.numa_maps import parse_numa_maps_text
from numasim.calibrate.parsers.numastat import parse_numastat, parse_numastat_text
from numasim.calibrate.parsers.perftest import parse_perftest
from numasim.calibrate.parsers.probe import parse_probe_text
from numasim.calibrate.parsers.stream import parse_stream_text
from numasim.calibrate.parsers.stride_table import parse_stride_table, parse_stride_table_text
from numasim.errors import FormatError

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def test_stride_table_of_article_003() -> None:
    r = parse_stride_table(DATA / "seed-003-stride-tables.txt")
    local, remote = r.table(0, 0), r.table(0, 1)
    assert local.value("s64", 8 << 20) == 3.15 and remote.value("s64", 8 << 20) == 3.96
    assert local.value("s32", 128 << 20) == 10.37 and remote.value("s32", 128 << 20) == 13.77
    assert set(local.latency_ns) == {"s1", "s32", "s64", "random"}  # the article's "andom"


def test_stride_table_broken() -> None:
    with pytest.raises(FormatError, match="has 2 cells"):
        parse_stride_table_text("Delay  (ns)\n  2k 8k 32k\ns1 1.0 2.0\n")
    with pytest.raises(FormatError, match="is not a number"):
        parse_stride_table_text("Delay  (ns)\n  2k 8k\ns1 1.0 x\n")
    with pytest.raises(FormatError, match="size row"):
        parse_stride_table_text("Delay  (ns)\n  2k eight\ns1 1.0 2\n")


def test_dd_article_001_old_format_and_bindings() -> None:
    r = parse_dd(DATA / "seed-001-dd.txt")
    assert len(r.records) == 6
    first = r.records[0]
    assert (first.direction, first.cpu_node, first.mem_node) == ("write", 0, 0)
    assert round(first.bandwidth_gb_s, 2) == 2.35 and first.printed_rate_bytes_s == 2.3e9
    remote_read = r.records[3]
    assert (remote_read.direction, remote_read.mem_node) == ("read", 1)
    assert round(remote_read.bandwidth_gb_s, 2) == 2.94


@pytest.mark.parametrize(
    ("line", "gb_s", "printed"),
    [
        ("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.4 s, 2.7 GB/s", 2.684, 2.7e9),
        ("1073741824 bytes (1,1 GB, 1,0 GiB) copied, 0,4 s, 2,7 GB/s", 2.684, 2.7e9),
        ("1048576 bytes (1.0 MB, 1.0 MiB) copied, 0.00123 s, 852 MB/s", 0.8525, 852e6),
        ("512 bytes copied, 0.0001 s, 5.1 MB/s", 0.00512, 5.1e6),
        ("10240 bytes (10 kB, 10 KiB) copied, 0.5 s, 20.5 kB/s", 2.048e-5, 20.5e3),
        ("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.5 s, 2.0 GiB/s", 2.147, 2.0 * 1024**3),
        ("1073741824 bytes transferred in 0.400000 secs (2684354560 bytes/sec)", 2.684, 2684354560.0),
    ],
)
def test_dd_variants(line: str, gb_s: float, printed: float) -> None:
    rec = parse_dd_text(line).records[0]
    assert rec.bandwidth_gb_s == pytest.approx(gb_s, rel=1e-3)
    assert rec.printed_rate_bytes_s == pytest.approx(printed)


def test_dd_broken() -> None:
    with pytest.raises(FormatError, match="malformed dd summary") as e:
        parse_dd_text("ok\n1073741824 bytes (1.1 GB) copied, fast, 2.3 GB/s\n")
    assert e.value.line == 2
    with pytest.raises(FormatError, match="unknown dd rate unit"):
        parse_dd_text("1 bytes (1 B) copied, 1 s, 1 PB/s")
    with pytest.raises(FormatError, match="no dd summary"):
        parse_dd_text("1024+0 records in\n")


def test_numastat_process_layout_of_article_001() -> None:
    t = parse_numastat(DATA / "seed-001-numastat-p.txt").tables[0]
    assert (t.layout, t.unit, t.pid, t.command, t.nodes) == ("process", "MB", 23652, "stress", [0, 1])
    assert t.rows["Private"].tolist() == [44313.61, 21222.64]
    assert t.totals["Total"] == 65536.27


COMPAT = """                           node0           node1
numa_hit                 1184234          998331
numa_miss                      0           12000
numa_foreign               12000               0
interleave_hit             26063           26160
local_node               1170389          957436
other_node                 13845           52895
"""
MEMINFO = """
Per-node system memory usage (in MBs):
                          Node 0          Node 1           Total
                 --------------- --------------- ---------------
MemTotal                64141.00        64509.00       128650.00
MemFree                 42625.00        43405.00        86030.00
"""
NUMASTAT_N = """
Per-node numastat info (in MBs):
                          Node 0          Node 1           Total
                 --------------- --------------- ---------------
Numa_Hit                 4626.35         3899.73         8526.08
Numa_Miss                   0.00           46.88           46.88
"""


def test_numastat_compat_meminfo_and_n_layouts() -> None:
    c = parse_numastat_text(COMPAT).tables[0]
    assert c.layout == "compat" and c.unit == "pages" and c.rows["numa_miss"].tolist() == [0, 12000]
    m = parse_numastat_text(MEMINFO).tables[0]
    assert m.layout == "meminfo" and m.totals["MemFree"] == 86030.0
    n = parse_numastat_text(NUMASTAT_N).tables[0]
    assert n.layout == "numastat" and n.rows["Numa_Miss"].tolist() == [0.0, 46.88]


def test_numastat_broken() -> None:
    with pytest.raises(FormatError, match="has 1 values, expected 2"):
        parse_numastat_text(COMPAT.replace("           12000\n", "\n"))
    with pytest.raises(FormatError, match="not a number"):
        parse_numastat_text(COMPAT.replace("998331", "99x331"))


def test_numa_maps() -> None:
    text = (
        "00400000 default file=/bin/cat mapped=3 N3=3\n"
        "00506000 default heap anon=3 dirty=3 active=0 N3=3 kernelpagesize_kB=4\n"
        "7f0000000000 interleave:0-3 anon=8 dirty=8 N0=2 N1=2 N2=2 N3=2 kernelpagesize_kB=4\n"
        "7fffedcc7000 bind:1 stack anon=2 dirty=2 N1=2 kernelpagesize_kB=4\n"
    )
    r = parse_numa_maps_text(text)
    assert [e.kind for e in r.entries] == ["file", "heap", "anon", "stack"]
    assert r.entries[0].file == "/bin/cat"
    assert r.pages_per_node() == {0: 2, 1: 4, 2: 2, 3: 8}
    with pytest.raises(FormatError, match="hex address") as e:
        parse_numa_maps_text(text + "zzz default\n")
    assert e.value.line == 5
    with pytest.raises(FormatError, match="not a count"):
        parse_numa_maps_text("00400000 default anon=x N0=1\n")
    with pytest.raises(FormatError, match="unknown memory policy"):
        parse_numa_maps_text("00400000 sometimes anon=1 N0=1\n")


def test_lat_mem_rd_blocks() -> None:
    text = '"stride=64\n0.00049 1.181\n0.00098 1.181\n64.00000 92.310\n\n"stride=128\n0.00049 1.2\n64.0 95.0\n'
    r = parse_lat_mem_rd_text(text)
    assert [c.stride_bytes for c in r.curves] == [64, 128]
    assert r.curve(64).latency_ns.tolist() == [1.181, 1.181, 92.31]
    assert r.curve().stride_bytes == 128
    with pytest.raises(FormatError, match="size_MB latency_ns") as e:
        parse_lat_mem_rd_text('"stride=64\n0.00049 1.181 7\n')
    assert e.value.line == 2
    with pytest.raises(FormatError, match="has no"):
        parse_lat_mem_rd_text('"stride=64\n\n"stride=128\n1 2\n')


def test_stream_output() -> None:
    text = """STREAM version $Revision: 5.10 $
Function    Best Rate MB/s  Avg time     Min time     Max time
Copy:           11586.8     0.014261     0.013809     0.015072
Scale:          11393.8     0.014483     0.014043     0.015326
Add:            12786.1     0.019298     0.018771     0.020003
Triad:          12916.7     0.019028     0.018581     0.019508
"""
    r = parse_stream_text(text)
    assert r.tool_version == "5.10" and r.best_rate_mb_s["triad"] == 12916.7 and len(r.best_rate_mb_s) == 4
    with pytest.raises(FormatError, match="Triad best rate"):
        parse_stream_text(text.replace("12916.7", "lots"))


def test_hmat_tree(tmp_path: Path) -> None:
    for target, lat, bw in ((0, 80, 90000), (2, 250, 30000)):
        init = tmp_path / f"node{target}" / "access0" / "initiators"
        (init / "node0").mkdir(parents=True)
        (init / "read_latency").write_text(f"{lat}\n")
        (init / "read_bandwidth").write_text(f"{bw}\n")
    r = parse_hmat(tmp_path)
    assert [(t.node, t.initiators, t.values["read_latency_ns"]) for t in r.targets] == [(0, [0], 80.0), (2, [0], 250.0)]
    assert detect_measurement_format(tmp_path) == "hmat"
    (tmp_path / "node2" / "access0" / "initiators" / "read_latency").write_text("fast\n")
    with pytest.raises(FormatError, match="expected an integer"):
        parse_hmat(tmp_path)


def test_perftest_article_000() -> None:
    r = parse_perftest(DATA / "seed-000-perftest.txt")
    assert [(t.test, t.mem_node) for t in r.tables] == [
        ("ib_send_lat", None),
        ("ib_send_bw", None),
        ("ib_send_lat", 1),
        ("ib_send_bw", 1),
    ]
    assert r.tables[0].column("t_typical")[-1] == 331.43 and r.tables[2].column("t_typical")[-1] == 493.88
    assert r.tables[1].column("BW_average")[-1] == 204.03 and r.tables[3].column("BW_average")[-1] == 133.29


def test_hop_ratios_of_article_002() -> None:
    r = parse_hop_ratios(DATA / "seed-002-drepper-hop-ratios.txt")
    assert r.ratios["read"] == {0: 1.0, 1: 1.09, 2: 1.30}
    assert r.ratios["write"][2] == 1.49 and r.ratios["read_bandwidth"] == {1: 0.80}
    with pytest.raises(FormatError, match="quantity 'latency'"):
        parse_hop_ratios_text("latency 1 1.2\n")
    with pytest.raises(FormatError, match="hops '-1'"):
        parse_hop_ratios_text("read -1 1.2\n")


def test_probe_json() -> None:
    good = {
        "format": "numasim-probe",
        "host": "h",
        "nodes": [0, 1],
        "placement": "numactl",
        "latency_ns": [[80.0, 130.0], [131.0, None]],
        "bandwidth_gb_s": [[10.0, 8.0], [8.0, 10.0]],
        "working_set_bytes": 1 << 28,
    }
    r = parse_probe_text(json.dumps(good))
    assert np.isnan(r.latency_matrix.cell(1, 1)) and r.bandwidth_matrix.cell(0, 1) == 8000.0
    with pytest.raises(FormatError, match="must be 2 x 2"):
        parse_probe_text(json.dumps(good | {"latency_ns": [[1.0, 2.0]]}))
    with pytest.raises(FormatError, match="placement"):
        parse_probe_text(json.dumps(good | {"placement": "magic"}))
    with pytest.raises(FormatError, match="not JSON"):
        parse_probe_text("{")


def test_detection_of_every_seed_file_and_unknown(tmp_path: Path) -> None:
    expected = {
        "seed-000-perftest.txt": "perftest",
        "seed-001-dd.txt": "dd",
        "seed-001-numastat-p.txt": "numastat",
        "seed-002-drepper-hop-ratios.txt": "hop_ratios",
        "seed-003-stride-tables.txt": "stride_table",
    }
    for name, fmt in expected.items():
        assert detect_measurement_format(DATA / name) == fmt
    junk = tmp_path / "junk.txt"
    junk.write_text("nothing to see here\n")
    with pytest.raises(FormatError, match="unknown measurement format; numasim reads: mlc"):
        detect_measurement_format(junk)
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FormatError, match="not UTF-8"):
        detect_measurement_format(binary)
    with pytest.raises(FormatError, match="unknown format 'xls'"):
        parse_measurement(junk, "xls")
    assert "numactl" in FORMATS and "hwloc" in FORMATS


def test_numactl_and_hwloc_go_through_the_topology_readers(tmp_path: Path) -> None:
    text = (
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 1024 MB\nnode 0 free: 512 MB\n"
        "node 1 cpus: 2 3\nnode 1 size: 1024 MB\nnode 1 free: 512 MB\nnode distances:\nnode   0   1\n"
        "  0:  10  21\n  1:  21  10\n"
    )
    p = tmp_path / "hw.txt"
    p.write_text(text)
    assert detect_measurement_format(p) == "numactl"
    m = parse_measurement(p)
    assert m.node_ids == [0, 1]
    xml = SHARED / "hwloc" / "synthetic-knl-like-heteromem.xml"
    if xml.exists():
        assert detect_measurement_format(xml) == "hwloc"
        assert len(parse_measurement(xml).nodes) >= 1
