"""Every text parser either parses or raises FormatError: no other exception escapes, whatever the input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.calibrate.parsers.dd import parse_dd_text
from numasim.calibrate.parsers.hop_ratios import parse_hop_ratios_text
from numasim.calibrate.parsers.lmbench import parse_lat_mem_rd_text
from numasim.calibrate.parsers.mlc import parse_mlc_text
from numasim.calibrate.parsers.numa_maps import parse_numa_maps_text
from numasim.calibrate.parsers.numastat import parse_numastat_text
from numasim.calibrate.parsers.perftest import parse_perftest_text
from numasim.calibrate.parsers.probe import parse_probe_text
from numasim.calibrate.parsers.stream import parse_stream_text
from numasim.calibrate.parsers.stride_table import parse_stride_table_text
from numasim.errors import FormatError

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
PARSERS = {
    "mlc": (parse_mlc_text, DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"),
    "dd": (parse_dd_text, DATA / "seed-001-dd.txt"),
    "numastat": (parse_numastat_text, DATA / "seed-001-numastat-p.txt"),
    "stride_table": (parse_stride_table_text, DATA / "seed-003-stride-tables.txt"),
    "perftest": (parse_perftest_text, DATA / "seed-000-perftest.txt"),
    "hop_ratios": (parse_hop_ratios_text, DATA / "seed-002-drepper-hop-ratios.txt"),
    "lat_mem_rd": (parse_lat_mem_rd_text, None),
    "stream": (parse_stream_text, None),
    "numa_maps": (parse_numa_maps_text, None),
    "probe": (parse_probe_text, None),
}


def _parse_or_format_error(fn, text: str) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(text, "fuzz.txt")
    except FormatError as exc:
        assert exc.source == "fuzz.txt"


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=15)
@given(data=st.data())
def test_damaged_real_text_gives_a_result_or_a_format_error(name: str, data: st.DataObject) -> None:
    fn, path = PARSERS[name]
    base = path.read_text() if path is not None else "Triad: 1.0 2 3 4\n\"stride=64\n1 2\n00400000 default N0=1\n"
    lines = base.splitlines()
    # damage: drop a line, cut the text, or replace a token by junk
    how = data.draw(st.sampled_from(["drop", "cut", "junk"]))
    if how == "drop" and lines:
        k = data.draw(st.integers(0, len(lines) - 1))
        text = "\n".join(lines[:k] + lines[k + 1 :])
    elif how == "cut":
        text = base[: data.draw(st.integers(0, len(base)))]
    else:
        tokens = base.split(" ")
        k = data.draw(st.integers(0, len(tokens) - 1))
        tokens[k] = data.draw(st.text(alphabet="x-.,:=\t0123456789", max_size=6))
        text = " ".join(tokens)
    _parse_or_format_error(fn, text)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=10)
@given(text=st.text(max_size=300))
def test_arbitrary_text_gives_a_result_or_a_format_error(name: str, text: str) -> None:
    _parse_or_format_error(PARSERS[name][0], text)
