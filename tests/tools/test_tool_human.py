"""dd's number printing (gnulib human_readable) and operand parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.calibrate.parsers.dd import parse_dd_text
from numasim.tools.dd import DdResult, format_dd
from numasim.tools.human import format_g, human_readable, parse_dd_number


@pytest.mark.parametrize(
    ("amount", "base", "text"),
    [
        (21474836480, 1000, "21 GB"),
        (21474836480, 1024, "20 GiB"),
        (20480000000, 1000, "20 GB"),
        (20480000000, 1024, "19 GiB"),
        (2.3478e9, 1000, "2.3 GB"),
        (4.1064e9, 1000, "4.1 GB"),
        (999, 1000, "999 B"),
        (999.6, 1000, "1.0 kB"),
        (1000, 1000, "1.0 kB"),
        (1024, 1024, "1.0 KiB"),
        (9.96e6, 1000, "10 MB"),
        (999.7e6, 1000, "1.0 GB"),
        (67108864, 1024, "64 MiB"),
    ],
)
def test_human_readable(amount: float, base: int, text: str) -> None:
    assert human_readable(amount, base) == text


@given(st.floats(min_value=1000, max_value=1e18, allow_nan=False))
@settings(max_examples=200)
def test_human_readable_rounds_within_five_percent(amount: float) -> None:
    number, unit = human_readable(amount).split()
    scale = 1000 ** (" kMGTPE".index(unit[0]) if unit[0] != "B" else 0)
    assert abs(float(number) * scale - amount) <= 0.05 * amount + 0.5 * scale / 10


def test_dd_numbers_and_errors() -> None:
    assert parse_dd_number("20M") == 20 * 2**20
    assert parse_dd_number("20MB") == 20_000_000
    assert parse_dd_number("1K") == parse_dd_number("1k") == 1024
    assert parse_dd_number("1kB") == 1000
    assert parse_dd_number("2x512") == 1024
    assert parse_dd_number("3b") == 1536
    with pytest.raises(ValueError, match="invalid number"):
        parse_dd_number("20Q")
    assert format_g(9.146731) == "9.14673"


def _result(size: int, seconds: float) -> DdResult:
    return DdResult(1, 0, 1, 0, size, seconds, "write", {}, {}, 0, "cal", 0)


def test_dd_summary_matches_article_001_and_parses_back() -> None:
    text = format_dd(_result(21474836480, 9.14673))
    assert text.splitlines() == [
        "1+0 records in",
        "1+0 records out",
        "21474836480 bytes (21 GB, 20 GiB) copied, 9.14673 s, 2.3 GB/s",
    ]
    rec = parse_dd_text(text).records[0]
    assert rec.size_bytes == 21474836480 and rec.seconds == pytest.approx(9.14673)
    assert rec.printed_rate_bytes_s == pytest.approx(2.3e9)


def test_dd_summary_old_coreutils_is_the_articles_line() -> None:
    line = format_dd(_result(21474836480, 9.14673), coreutils="8.23").splitlines()[-1]
    assert line == "21474836480 bytes (21 GB) copied, 9.14673 s, 2.3 GB/s"  # article 001, verbatim


def test_dd_status_levels() -> None:
    r = _result(4096, 1.0)
    r.status = "none"
    assert format_dd(r) == ""
    r.status = "noxfer"
    assert format_dd(r) == "1+0 records in\n1+0 records out\n"


def test_dd_summary_small_transfers() -> None:
    assert format_dd(_result(512, 0.001)).splitlines()[-1] == "512 bytes copied, 0.001 s, 512 kB/s"
    assert format_dd(_result(1, 0.5)).splitlines()[-1] == "1 byte copied, 0.5 s, 2 B/s"
    assert format_dd(_result(1000, 1.0)).splitlines()[-1] == "1000 bytes (1.0 kB) copied, 1 s, 1.0 kB/s"
