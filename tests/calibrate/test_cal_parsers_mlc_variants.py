"""mlc outputs as public pages show them, beyond the default run: old mlc's socket-numbered cache-to-cache tables,
``--idle_latency`` in base-frequency clocks and with small buffers, ``--latency_matrix -a``, pages with a blank line
after every line, repeated bandwidth runs, mixed-traffic matrices, mixes numasim does not replay, runs pasted
without mlc's banner, internal builds' banners. (Numbers made up; layouts as mlc prints them.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.parsers import detect_measurement_format
from numasim.calibrate.parsers.mlc import node_latency_matrices, parse_mlc_text
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.validate import _socket_table_by_node
from numasim.errors import FormatError
from numasim.topology.io import load_machine

OLD_DEFAULT_RUN = """\
Measuring idle latencies (in ns)...
        Memory node
Socket       0       1
     0    90.1   140.2
     1   141.0    90.5

Measuring cache-to-cache transfer latency (in ns)...
Local Socket L2->L2 HIT  latency        35.0
Local Socket L2->L2 HITM latency        40.0
Remote Socket L2->L2 HITM latency (data address homed in writer socket)
                Reader Socket
Writer Socket        0       1
            0        -   101.5
            1    102.5       -
Remote Socket L2->L2 HITM latency (data address homed in reader socket)
                Reader Socket
Writer Socket        0       1
            0        -   160.0
            1    161.0       -

Measuring Peak Injection Memory Bandwidths for the system
Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)
Using all the threads from each core if Hyper-threading is enabled
Using traffic with the following read-write ratios
ALL Reads        :      90000.0
3:1 Reads-Writes :      85000.0
2:1 Reads-Writes :      84000.0
1:1 Reads-Writes :      80000.0
Stream-triad like:      81000.0
"""


def test_old_mlc_socket_numbered_c2c_tables_parse_and_the_rest_of_the_file_too() -> None:
    r = parse_mlc_text(OLD_DEFAULT_RUN)
    writer = r.c2c_remote_ns["Remote Socket L2->L2 HITM (writer homed)"]
    reader = r.c2c_remote_ns["Remote Socket L2->L2 HITM (reader homed)"]
    assert writer.row_axis == "socket" and writer.cell(1, 0) == 102.5 and reader.cell(0, 1) == 160.0
    assert r.latency_matrix is not None and r.latency_matrix.row_axis == "node" and r.latency_matrix.cell(1, 0) == 141.0
    assert r.peak_injection_mb_s["1:1"] == 80000.0  # after the c2c tables: no longer lost


def test_socket_numbered_c2c_cells_go_to_each_socket_s_first_node() -> None:
    m = load_machine("seed-000-4node")  # 2 sockets x 2 dies: socket 1's first cpu is on node 2
    r = parse_mlc_text(OLD_DEFAULT_RUN)
    t = _socket_table_by_node(m, r.c2c_remote_ns["Remote Socket L2->L2 HITM (writer homed)"])
    assert t.rows == [0, 2] and t.cols == [0, 2] and t.cell(2, 0) == 102.5


def test_idle_latency_in_base_frequency_clocks_gives_the_ns_not_a_clock() -> None:
    text = """Intel(R) Memory Latency Checker - v3.11b
Command line parameters: --idle_latency

Using buffer size of 200.000MiB
Each iteration took 209.9 base frequency clocks (       110.7   ns)

Intel(R) Memory Latency Checker - v3.5
Command line parameters: --idle_latency

Using buffer size of 200.000MiB
Each iteration took 250.0 core clocks (       100.0   ns)
"""
    r = parse_mlc_text(text)
    assert r.idle_latency_ns == [110.7, 100.0] and r.idle_latency_buffer_mib == [200.0, 200.0]
    assert np.isnan(r.idle_latency_core_clocks[0])
    assert r.core_clock_ghz == pytest.approx(2.5)  # from the core-clocks line only: base clocks are no running clock
    assert parse_mlc_text(text.split("\n\nIntel")[0]).core_clock_ghz is None
    assert detect_measurement_format_of(text.split("Command")[1]) == "mlc"  # a pasted line alone is recognised


def detect_measurement_format_of(text: str) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "run.txt"
        p.write_text(text)
        return detect_measurement_format(p)


def test_an_idle_latency_over_a_buffer_the_caches_hold_is_left_out_of_the_fit(tmp_path: Path) -> None:
    m = load_machine("seed-003-2node")
    largest_mib = max(c.size_bytes for c in m.caches) / 2**20
    text = f"""Intel(R) Memory Latency Checker - v3.11b
Command line parameters: --idle_latency -b30

Using buffer size of 0.029MiB
Each iteration took 3.2 base frequency clocks ( 1.7     ns)

Intel(R) Memory Latency Checker - v3.11b
Command line parameters: --idle_latency -b{int(20 * largest_mib * 1024)}

Using buffer size of {20 * largest_mib:.3f}MiB
Each iteration took 150.0 base frequency clocks (       77.0    ns)
"""
    path = tmp_path / "idle.txt"
    path.write_text(text)
    rep = calibrate(m, load_measurements([path]), fit_on=["latency"])
    node0 = next(c for c in rep.calibration.controllers if c.node == 0)
    assert node0.latency_ns == pytest.approx(77.0)  # the 1.7 ns (an L1 chase) is no memory latency
    assert any("1.7 ns over a 0.029 MiB buffer left out" in a for a in rep.result.assumptions)


def test_latency_matrix_per_cpu_is_kept_apart_and_averaged_per_node_for_a_fit(tmp_path: Path) -> None:
    m = load_machine("seed-003-2node")
    cpus = sorted(m.cpu_to_node)
    node_ns = {0: [80.0, 130.0], 1: [131.0, 81.0]}
    rows = "\n".join(f"{c:6d}   {node_ns[m.cpu_to_node[c]][0] + (c % 3) * 0.5:5.1f}   "
                     f"{node_ns[m.cpu_to_node[c]][1] + (c % 3) * 0.5:5.1f}" for c in cpus)
    text = (f"Intel(R) Memory Latency Checker - v3.9a\nCommand line parameters: --latency_matrix -a\n\n"
            f"Measuring idle latencies (in ns) for all cores...\n                Numa node\nCPU          0       1\n{rows}\n")
    r = parse_mlc_text(text)
    assert not r.latency_matrices and r.per_cpu_latency_matrices[0].row_axis == "cpu"
    assert r.sections == ["latency_matrix"]
    (by_node,) = node_latency_matrices(r, m.cpu_to_node)
    expect = [[np.mean([node_ns[n][j] + (c % 3) * 0.5 for c in cpus if m.cpu_to_node[c] == n]) for j in (0, 1)]
              for n in (0, 1)]
    assert by_node.rows == [0, 1] and np.allclose(by_node.values, expect)
    path = tmp_path / "per-cpu.txt"
    path.write_text(text)
    rep = calibrate(m, load_measurements([path]), fit_on=["latency"])
    assert "latency_matrix" in rep.tables_used  # the averaged matrix is what was fitted
    node1 = next(c for c in rep.calibration.controllers if c.node == 1)
    assert node1.latency_ns == pytest.approx(expect[1][1], abs=0.05)
    with pytest.raises(FormatError, match=r"cpus \[999\] are not the machine's"):
        node_latency_matrices(parse_mlc_text(text.replace(f"\n{cpus[-1]:6d} ", "\n   999 ")), m.cpu_to_node)


def test_a_page_with_a_blank_line_after_every_line_keeps_every_row() -> None:
    text = _peak("--peak_injection_bandwidth", 116000.0) + """
Measuring Loaded Latencies for the system
Using Read-only traffic type
Inject  Latency Bandwidth
Delay   (ns)    MB/sec
==========================
 00000  143.76   114000.5
 00002  140.90   113900.3
 00100  100.00    80000.0
 20000   85.00     1270.0
"""
    doubled = "".join(line + "\n\n" for line in text.splitlines())
    r = parse_mlc_text(doubled)
    assert r.peak_injection_mb_s == parse_mlc_text(text).peak_injection_mb_s and len(r.peak_injection_mb_s) == 2
    assert r.loaded_latency[0].inject_delay.tolist() == [0, 2, 100, 20000]
    assert parse_mlc_text(doubled.replace("\n\n", "\n \n")).loaded_latency[0].latency_ns[-1] == 85.0  # "blank": spaces


def _peak(options: str, all_reads: float) -> str:
    return f"""Intel(R) Memory Latency Checker - v3.8
Command line parameters: {options}

Measuring Peak Injection Memory Bandwidths for the system
Using traffic with the following read-write ratios
ALL Reads        :      {all_reads}
3:1 Reads-Writes :      {all_reads * 0.9:.1f}
"""


def test_repeated_bandwidth_runs_keep_the_whole_system_s_and_refuse_to_guess() -> None:
    one_cpu = parse_mlc_text(_peak("-m1 --peak_injection_bandwidth", 10600.0) + "\n" + _peak(
        "--peak_injection_bandwidth", 222000.0))
    assert one_cpu.peak_injection_mb_s["all_reads"] == 222000.0
    assert [k for k, *_ in one_cpu.bandwidth_runs] == ["peak", "peak"]
    assert any("options -m1 --peak_injection_bandwidth" in n and "left out" in n for n in one_cpu.notes)
    close = parse_mlc_text(_peak("--peak_injection_bandwidth", 280000.0) + "\n" + _peak(
        "--peak_injection_bandwidth", 286000.0))
    assert close.peak_injection_mb_s["all_reads"] == 280000.0 and any("2 runs within 10%" in n for n in close.notes)
    with pytest.raises(FormatError, match=r"runs of the same command disagree \(all_reads: 280000.0 MB/s at line 4, "
                                          r"18600.0 MB/s at line 11\)"):
        parse_mlc_text(_peak("--peak_injection_bandwidth", 280000.0) + _peak("--peak_injection_bandwidth", 18600.0))


def test_a_bandwidth_matrix_of_mixed_traffic_is_not_taken_for_reads() -> None:
    matrix = """                Numa node
Numa node            0       1
       0        126540.1  85279.5
       1        85158.3   126795.6
"""
    text = ("Intel(R) Memory Latency Checker - v3.11b\nCommand line parameters: --bandwidth_matrix -U\n\n"
            "Measuring Memory Bandwidths between nodes within system\nUsing Read-only traffic type\n" + matrix +
            "\nIntel(R) Memory Latency Checker - v3.11b\nCommand line parameters: --bandwidth_matrix -W5\n\n"
            "Measuring Memory Bandwidths between nodes within system\n" + matrix)
    r = parse_mlc_text(text)
    assert len(r.bandwidth_matrices) == 1
    assert any("mix -W5 traffic" in n and "left out" in n for n in r.notes)
    assert any("random reads (-U)" in n for n in r.notes)  # kept, and said


def test_mixes_numasim_does_not_replay_are_said_not_dropped_silently() -> None:
    r = parse_mlc_text(_peak("--peak_injection_bandwidth", 90000.0) + "4:1 Reads-Writes :      90523.6\n"
                       "All NT writes    :      47772.8\n")
    assert set(r.peak_injection_mb_s) == {"all_reads", "3:1"}
    assert sum("a mix numasim does not replay" in n for n in r.notes) == 2


def test_a_run_pasted_without_mlc_s_banner_is_recognised(tmp_path: Path) -> None:
    text = """Measuring Maximum Memory Bandwidths for the system
Will take several minutes to complete as multiple injection rates will be tried to get the best bandwidth
Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)
Using all the threads from each core if Hyper-threading is enabled
Using traffic with the following read-write ratios
ALL Reads        :      349670.42
"""
    path = tmp_path / "max.txt"
    path.write_text(text)
    (m,) = load_measurements([path])
    assert m.format == "mlc" and m.data.max_bandwidth_mb_s == {"all_reads": 349670.42}


def test_an_internal_build_s_banner_gives_its_version() -> None:
    r = parse_mlc_text("Intel(R) Memory Latency Checker (for Internal Use Only) - v3.12-rc01-private\n"
                       "Measuring idle latencies (in ns)...\n        Numa node\nNuma node    0\n    0   90.0\n")
    assert r.tool_version == "v3.12-rc01-private" and r.latency_matrix is not None


def test_a_loaded_latency_run_of_mixed_traffic_is_not_taken_for_reads() -> None:
    table = """Inject  Latency Bandwidth
Delay   (ns)    MB/sec
==========================
 00000  200.00   100000.0
 20000   85.00     1270.0
"""
    read_only = ("Intel(R) Memory Latency Checker - v3.11\nCommand line parameters: --loaded_latency\n\n"
                 "Measuring Loaded Latencies for the system\nUsing Read-only traffic type\n" + table)
    mixed = ("Intel(R) Memory Latency Checker - v3.11\nCommand line parameters: --loaded_latency -W2\n\n"
             "Measuring Loaded Latencies for the system\n" + table)
    r = parse_mlc_text(read_only + "\n" + mixed)
    assert len(r.loaded_latency) == 1 and r.loaded_latency[0].traffic == "Read-only"
    assert any("mix -W2 traffic, not read-only: left out" in n for n in r.notes)
