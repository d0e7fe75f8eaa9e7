"""numactl's node/cpu list grammar (kernel_spec.md section 8.2; libnuma __numa_parse_nodestring)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numasim.kernel.nodestring import (
    NodeStringError,
    ParseContext,
    parse_cpustring,
    parse_nodestring,
    strtoul,
)

FOUR = ParseContext.of({0, 1, 2, 3}, configured=4)


def nodes(text: str, ctx: ParseContext = FOUR) -> list[int]:
    return sorted(parse_nodestring(text, ctx))


def warning(text: str, ctx: ParseContext = FOUR) -> str | None:
    with pytest.raises(NodeStringError) as info:
        parse_nodestring(text, ctx)
    return info.value.warning


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("0", [0]),
        ("0,2", [0, 2]),
        ("1-3", [1, 2, 3]),
        ("0-1,3", [0, 1, 3]),
        ("all", [0, 1, 2, 3]),
        ("1,all", [0, 1, 2, 3]),  # "all" after a comma copies the allowed set
        ("!0", [1, 2, 3]),
        ("!0-1", [2, 3]),
        ("!all", []),
        ("+1", [1]),
        ("0x2", [2]),
        ("03", [3]),  # octal
        (" 1", [1]),  # strtoul skips blanks
        ("3-1", [3]),  # B < A sets only A
    ],
)
def test_valid_strings(text: str, expected: list[int]) -> None:
    assert nodes(text) == expected


def test_out_of_range_wording_matches_libnuma() -> None:
    assert warning("4") == "node argument 4 is out of range\n"
    assert warning("0-4") == "node argument 4 out of range\n"  # the range end has no "is"
    assert warning("-1") == "node argument -1 is out of range\n"


def test_invalid_forms() -> None:
    assert warning("all,1") == "unparseable node description `all,1'\n"
    assert warning("1,") == "unparseable node description `'\n"  # trailing comma
    assert warning("1x") is None  # trailing garbage fails silently
    assert warning("0-") == "missing node argument \n"
    assert warning("010") == "node argument 8 is out of range\n"  # octal
    assert warning("!") == "unparseable node description `'\n"
    assert warning("09") is None  # octal stops at 9: trailing garbage


def test_octal_010_is_eight_and_out_of_range() -> None:
    ctx = ParseContext.of(range(16), configured=16)
    assert nodes("010", ctx) == [8]


def test_cpuset_restriction_and_relative_numbers() -> None:
    # a task confined to nodes 2 and 3 (cpuset): absolute numbers must be inside, "+N" counts inside it
    ctx = ParseContext.of({2, 3}, configured=4)
    assert nodes("+0", ctx) == [2]
    assert nodes("+0-1", ctx) == [2, 3]
    assert nodes("all", ctx) == [2, 3]
    assert warning("0", ctx) == "node argument 0 is out of range\n"
    assert (
        warning("+2", ctx) == "node argument 1024 is out of range\n"
    )  # past the set: libnuma lands on the mask size
    # inside a range only allowed nodes are set
    assert nodes("2-3", ParseContext.of({0, 2, 3}, configured=4)) == [2, 3]
    assert nodes("0-3", ParseContext.of({0, 3}, configured=4)) == [0, 3]
    # '!' inverts over the configured count, not the allowed set
    assert nodes("!2", ctx) == [0, 1, 3]


def test_memoryless_node_is_not_allowed() -> None:
    ctx = ParseContext.of({0, 1}, configured=3)  # node 2 has cpus but no memory
    assert warning("2", ctx) == "node argument 2 is out of range\n"
    assert nodes("!0", ctx) == [1, 2]  # inversion still covers node 2


def test_device_prefix() -> None:
    ctx = ParseContext(
        frozenset({0, 1}), 2, devices=lambda kind, name: 1 if (kind, name) == ("netdev", "eth0") else None
    )
    assert nodes("netdev:eth0", ctx) == [1]
    with pytest.raises(NodeStringError) as info:
        parse_nodestring("netdev:eth9", ctx)
    assert info.value.warning == "Cannot read node mask for net device `eth9'"


def test_cpu_strings() -> None:
    ctx = ParseContext.of(range(8), configured=8, mask_bits=64)
    assert sorted(parse_cpustring("0-2,7", ctx)) == [0, 1, 2, 7]
    assert sorted(parse_cpustring("!0-5", ctx)) == [6, 7]
    assert sorted(parse_cpustring("all", ctx)) == list(range(8))
    with pytest.raises(NodeStringError) as info:
        parse_cpustring("9", ctx)
    assert info.value.warning == "cpu argument 9 is out of range\n"
    with pytest.raises(NodeStringError) as info:
        parse_cpustring("netdev:eth0", ctx)  # no device prefixes for cpus
    assert info.value.warning == "unparseable cpu description `netdev:eth0'\n"


def test_strtoul_like_c() -> None:
    assert strtoul("0x1f") == (31, 4)
    assert strtoul("0x") == (0, 1)  # "0" converted, end at 'x'
    assert strtoul("12abc") == (12, 2)
    assert strtoul("") == (0, 0)


@given(st.sets(st.integers(0, 15), min_size=1), st.sets(st.integers(0, 15)))
def test_list_round_trip(allowed: set[int], chosen: set[int]) -> None:
    ctx = ParseContext.of(allowed, configured=16)
    subset = chosen & allowed
    text = ",".join(str(n) for n in sorted(subset))
    assert parse_nodestring(text, ctx) == frozenset(subset)
    assert parse_nodestring("!" + text, ctx) == frozenset(set(range(16)) - subset) if text else True
    outside = chosen - allowed
    for n in outside:
        with pytest.raises(NodeStringError):
            parse_nodestring(str(n), ctx)
