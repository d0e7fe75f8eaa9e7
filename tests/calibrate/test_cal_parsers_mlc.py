"""The mlc parser on the two real runs (markdown pages), the old layout, and broken variants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers import detect_measurement_format, parse_measurement
from numasim.calibrate.parsers.mlc import parse_mlc, parse_mlc_text
from numasim.errors import FormatError

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
IVY = DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
SKX = DATA / "mlc" / "fdio-csit-2s-skylake-plat8180.md"


def test_ivy_bridge_default_run_every_section() -> None:
    r = parse_mlc(IVY)
    assert r.tool_version == "v3.1a"
    assert r.latency_matrix is not None and r.latency_matrix.values.tolist() == [[61.7, 115.1], [114.6, 61.2]]
    assert r.bandwidth_matrix is not None and r.bandwidth_matrix.cell(0, 1) == 25501.2
    assert r.peak_injection_mb_s == {
        "all_reads": 110395.9,
        "3:1": 93339.7,
        "2:1": 88859.9,
        "1:1": 81146.3,
        "stream_triad": 93082.4,
    }
    t = r.loaded_latency[0]
    assert len(t.inject_delay) == 19 and t.inject_delay[0] == 0 and t.inject_delay[-1] == 20000
    assert t.latency_ns[0] == 189.18 and t.bandwidth_mb_s[-1] == 1706.5
    assert r.c2c_local_ns == {"Local Socket L2->L2 HIT": 24.8, "Local Socket L2->L2 HITM": 28.3}
    writer = r.c2c_remote_ns["Remote Socket LLC->LLC HITM (writer homed)"]
    assert np.isnan(writer.cell(0, 0)) and writer.cell(0, 1) == 70.4


def test_skylake_separate_runs_are_merged() -> None:
    r = parse_mlc(SKX)
    assert r.tool_version == "v3.5"
    assert r.sections == [
        "latency_matrix",
        "idle_latency",
        "bandwidth_matrix",
        "peak_bandwidth",
        "max_bandwidth",
        "loaded_latency",
        "c2c_latency",
    ]
    assert r.idle_latency_ns == [80.8] and r.idle_latency_core_clocks == [202.0]
    assert r.core_clock_ghz == pytest.approx(2.5)  # 202.0 core clocks in 80.8 ns
    assert parse_mlc(IVY).core_clock_ghz is None  # a default run prints no core clocks
    assert r.max_bandwidth_mb_s["stream_triad"] == 180057.87
    assert r.latency_matrix is not None and r.latency_matrix.cell(1, 1) == 81.3
    assert r.c2c_remote_ns["Remote Socket L2->L2 HITM (reader homed)"].cell(1, 0) == 177.6


def test_a_core_clocks_line_that_is_no_clock_is_an_error_naming_its_line() -> None:
    with pytest.raises(FormatError, match=r"<text>:2: idle latency: 0.0 core clocks"):
        parse_mlc_text("Intel(R) Memory Latency Checker - v3.5\nEach iteration took 0.0 core clocks ( 80.8\tns)\n")


def test_detected_as_mlc() -> None:
    assert detect_measurement_format(IVY) == "mlc"
    assert detect_measurement_format(SKX) == "mlc"


OLD_LAYOUT = """Intel(R) Memory Latency Checker - v2.1
Measuring idle latencies (in ns)...
\t\tMemory node
Socket\t     0\t     1\t
     0\t  67.2\t 122.0\t
     1\t 122.6\t  67.1\t
"""


def test_old_memory_node_socket_layout() -> None:
    r = parse_mlc_text(OLD_LAYOUT)
    assert r.tool_version == "v2.1"
    assert r.latency_matrix is not None and r.latency_matrix.values.tolist() == [[67.2, 122.0], [122.6, 67.1]]


def test_error_names_the_line_of_the_markdown_page(tmp_path: Path) -> None:
    text = IVY.read_text().replace(" 114.6\t", " 11x.6\t")
    bad = tmp_path / "bad.md"
    bad.write_text(text)
    with pytest.raises(FormatError) as e:
        parse_mlc(bad)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "11x.6" in t)
    assert e.value.line == line and "'11x.6' is not a number" in str(e.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (OLD_LAYOUT.replace(" 122.0\t\n", "\n"), "has 1 cells, the header has 2 columns"),
        (OLD_LAYOUT.rsplit("\n", 3)[0] + "\n", "has no rows"),
        ("Intel(R) Memory Latency Checker - v3.5\nMeasuring idle latencies (in ns)...\n", "no matrix header"),
        (OLD_LAYOUT.replace("     1\t 122.6", "     0\t 122.6"), "node 0 has two rows"),
        (
            "Measuring Loaded Latencies for the system\nInject\tLatency\tBandwidth\n=====\n 00000\t189.18\n",
            "expected 3 columns",
        ),
        ("Measuring Loaded Latencies for the system\nInject\n=====\n\n", "no table rows"),
        ("Measuring Peak Injection Memory Bandwidths for the system\nALL Reads        :\tabc\n", "not a number"),
        ("Measuring Peak Injection Memory Bandwidths for the system\n", "no 'ALL Reads"),
        ("hello\nworld\n", "no Intel mlc output"),
    ],
)
def test_broken_variants_are_format_errors(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_mlc_text(text, "x.txt")


def test_truncated_real_file_fails_cleanly(tmp_path: Path) -> None:
    text = IVY.read_text()
    cut = text[: text.index("Numa node\t     0\t     1\t")]
    p = tmp_path / "cut.txt"
    p.write_text(cut)
    with pytest.raises(FormatError, match="no matrix header"):
        parse_measurement(p)


def test_the_prefetchers_state_is_read_off_what_mlc_says() -> None:
    """mlc turns the prefetchers off where it can; where it says it could not, its load threads ran with them
    on (the virtual mlc then replays with ``-e``)."""
    public = DATA / "public_mlc"
    assert parse_mlc(public / "cloudlab-2s-skylake-silver4114.md").prefetchers_controlled is False  # no msr module
    assert parse_mlc(public / "dramhit-1s-genoa-epyc9354P-nps1.md").prefetchers_controlled is False  # AMD: random
    assert parse_mlc(public / "cxl-2s-spr-silver4410Y.md").prefetchers_controlled is None  # random by its -r
    assert parse_mlc(IVY).prefetchers_controlled is None
    chosen = "Intel(R) Memory Latency Checker - v3.10\nCommand line parameters: --latency_matrix -r\n\n" \
             "Measuring idle latencies for random access (in ns)...\n        Numa node\nNuma node    0\n    0  80.0\n"
    assert parse_mlc_text(chosen).prefetchers_controlled is None
    forced = chosen.replace(" -r\n", "\n")
    assert parse_mlc_text(forced).prefetchers_controlled is False
    read_only = chosen.replace(" -r\n", " -R\n")  # -R is read-only traffic, not random access
    assert parse_mlc_text(read_only).prefetchers_controlled is False



@pytest.mark.parametrize(
    ("whole", "cut", "message"),
    [
        # a latency matrix cut inside its second cell ("11" for "115.1"): fitted, it put the controllers at
        # 12.6 ns (below the L3) and the link at the fit's 0.001 ns bound
        ("\t  61.7\t 115.1", "\t  61.7\t 11", "node 0 -> 1 = 11 ns is less than half of node 0's local 61.7 ns"),
        ("55263.8\t25501.2", "55263.8\t25", "node 0 -> 1 = 25 MB/s is below 1/100 of the row's largest"),
        ("ALL Reads        :\t110395.9", "ALL Reads        :\t11", "all_reads = 11 MB/s against"),
        (" 00200\t 85.10\t  54041.9", " 00200\t 8\t  54041.9", "delay 200: 8 ns is below half of the longer delay 300's"),
        (" 00300\t 79.93\t  39605.1", " 00300\t 79.93\t  39", "delay 300: 39 MB/s is below half of the longer delay 400's"),
    ],
)
def test_a_number_cut_off_in_the_middle_of_a_file_is_an_error(whole: str, cut: str, message: str) -> None:
    """Every table of the real run, one at a time, with one number cut to its first digits (as a file truncated
    or edited by hand leaves it): an error naming the cell, not a calibration timed by it."""
    text = IVY.read_text()
    assert whole in text
    with pytest.raises(FormatError, match=message):
        parse_mlc_text(text.replace(whole, cut, 1), "cut.md")


def test_a_table_cut_between_rows_still_parses_the_rows_it_has() -> None:
    """A loaded-latency table cut after its delay-200 row is real data, fewer rows: no plausibility rule fires
    (the knee's steepest drop between two real rows, 468 -> 207 ns on an EPYC 9354P, is 0.44)."""
    text = IVY.read_text()
    cut = text[: text.index(" 00300\t 79.93")]
    t = parse_mlc_text(cut, "cut.md").loaded_latency[0]
    assert t.inject_delay.tolist()[-1] == 200 and t.latency_ns[-1] == 85.10
    runs = [f for f in sorted((DATA / "public_mlc").glob("*.md")) + sorted((DATA / "mlc").glob("*.md"))
            if f.name != "README.md"]
    assert len(runs) >= 15
    for f in runs:
        parse_mlc(f)  # every real run the project holds passes the rules
