"""kernel_spec.md section 8 (numactl / libnuma): exact ``--hardware`` layouts from the spec's printf formats,
``--show`` corner cases, option rules, and the node-string grammar as a hypothesis invariant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.kernel.nodestring import NodeStringError, ParseContext, parse_cpustring, parse_nodestring
from numasim.tools.numactl import NumaProcess, format_hardware, run_numactl
from numasim.topology.builders import glueless

MiB = 1 << 20


@dataclass
class _Sysfs:
    """Just the sysfs facts ``numactl --hardware`` reads (a stand-in NumaProcess)."""

    cpus: dict[int, list[int]]
    meminfo_mib: dict[int, tuple[int, int]]
    slit: dict[int, dict[int, int]] = field(default_factory=dict)

    def configured_nodes(self) -> list[int]:
        return sorted(self.cpus)

    def node_cpus(self, nid: int) -> list[int]:
        return self.cpus[nid]

    def node_meminfo_bytes(self, nid: int) -> tuple[int, int]:
        total, free = self.meminfo_mib[nid]
        return total * MiB, free * MiB

    def distance(self, a: int, b: int) -> int:
        return self.slit.get(a, {}).get(b, 0)


SYS = _Sysfs(
    cpus={0: [0, 1], 1: [], 3: [2, 3, 4, 5, 8]},
    meminfo_mib={0: (2048, 1500), 1: (1024, 1000), 3: (512, 3)},
    slit={0: {0: 10, 1: 21, 3: 20}, 1: {0: 21, 1: 10, 3: 31}, 3: {0: 20, 1: 31, 3: 10}},
)
HEAD = [
    "available: 3 nodes (0-1,3)",  # runs of consecutive ids as a-b, joined by ','
    "node 0 cpus: 0 1",  # each cpu as " %d"
    "node 0 size: 2048 MB",
    "node 0 free: 1500 MB",
    "node 1 cpus:",  # a cpu-less node: nothing after the colon
    "node 1 size: 1024 MB",
    "node 1 free: 1000 MB",
    "node 3 cpus: 2 3 4 5 8",
    "node 3 size: 512 MB",
    "node 3 free: 3 MB",
    "node distances:",
]


def test_hardware_layout_2_0_19() -> None:
    """8.4 v2.0.19+: header "node  " + "% 4d " per node; rows "% 4d: " + "% 4d " (trailing space)."""
    assert format_hardware(cast(NumaProcess, SYS), style="2.0.19").split("\n") == [
        *HEAD,
        "node     0    1    3 ",
        "   0:   10   21   20 ",
        "   1:   21   10   31 ",
        "   3:   20   31   10 ",
        "",
    ]


def test_hardware_layout_2_0_18() -> None:
    """8.4 <= v2.0.18: header "node " + "% 3d "; rows "% 3d: " + "% 3d "."""
    assert format_hardware(cast(NumaProcess, SYS), style="2.0.18").split("\n") == [
        *HEAD,
        "node   0   1   3 ",
        "  0:  10  21  20 ",
        "  1:  21  10  31 ",
        "  3:  20  31  10 ",
        "",
    ]


def test_hardware_cpu_compress_and_missing_distances() -> None:
    """8.4: --cpu-compress prints runs " a-b, c (count)"; distance(maxnode, first) == 0 ->
    "No distance information available."."""
    text = format_hardware(cast(NumaProcess, SYS), cpu_compress=True).split("\n")
    assert text[1] == "node 0 cpus: 0-1 (2)"
    assert text[7] == "node 3 cpus: 2-5, 8 (5)"
    no_slit = _Sysfs(cpus=SYS.cpus, meminfo_mib=SYS.meminfo_mib)
    assert format_hardware(cast(NumaProcess, no_slit)).split("\n")[-2:] == ["No distance information available.", ""]


def test_empty_interleave_mask_sets_default() -> None:
    """8.1: --interleave with an empty node string -> numa_set_interleave_mask(empty) -> MPOL_DEFAULT."""
    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30))
    run = run_numactl(k, ["--interleave=", "--show"])
    assert run.exit_code == 0
    assert run.stdout.split("\n")[:2] == ["policy: default", "preferred node: current"]


def test_preferred_many_needs_kernel_support() -> None:
    """8.1: on a kernel without MPOL_PREFERRED_MANY (< 5.15) -P fails with the probe's message."""
    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), KernelConfig(version="5.10"))
    run = run_numactl(k, ["-P", "0,1", "true"])
    assert run.exit_code == 1
    assert run.stderr == "numactl: preferred-many requested without kernel support\n"


def test_show_preferred_many_node_is_always_zero() -> None:
    """8.5: "preferred node: <n> (preferred-many)" with n = numa_get_interleave_node() = 0 (the
    get_mempolicy(MPOL_F_NODE) call fails for that policy), whatever the mask."""
    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30))
    lines = run_numactl(k, ["-P", "1", "--show"]).stdout.split("\n")
    assert lines[:2] == ["policy: preferred-many", "preferred node: 0 (preferred-many)"]
    assert lines[-2] == "preferred: 1 "


def test_usage_goes_to_stderr_with_status_1() -> None:
    """8.1: unparsable list -> stdout "<ARG> is invalid", usage on stderr, exit 1; no command -> usage."""
    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30))
    run = run_numactl(k, ["--membind=7", "true"])
    assert (run.exit_code, run.stdout) == (1, "<7> is invalid\n")
    assert run.stderr.startswith("libnuma: Warning: node argument 7 is out of range\n")
    assert "usage: numactl" in run.stderr
    run = run_numactl(k, ["--membind=0"])
    assert run.exit_code == 1 and "usage: numactl" in run.stderr and run.stdout == ""


# --- 8.2 grammar as an invariant ----------------------------------------------------------------------------
_TOKENS = st.sampled_from(
    ["0", "1", "2", "3", "7", "15", "16", "+0", "+1", "+3", "0x3", "010", "all", "same", "!", "+", "-", ",", " ",
     "x", "netdev:eth0", "a", "1-3", "3-1", "0-15", "0-16"]
)


@settings(max_examples=300)
@given(
    tokens=st.lists(_TOKENS, max_size=6),
    raw=st.text(max_size=8),
    allowed=st.sets(st.integers(0, 15), min_size=1),
)
def test_nodestring_never_escapes_and_stays_in_range(tokens: list[str], raw: str, allowed: set[int]) -> None:
    """8.2: any string gives a node set or NodeStringError (never another exception). A result without '!'
    lies inside the allowed set; with a leading '!' inside 0..configured-1."""
    ctx = ParseContext.of(allowed, configured=16)
    for text in ("".join(tokens), raw, ",".join(tokens)):
        for parse in (parse_nodestring, parse_cpustring):
            try:
                got = parse(text, ctx)
            except NodeStringError:
                continue
            assert isinstance(got, frozenset)
            if text.lstrip().startswith("!"):
                assert got <= frozenset(range(16))
            else:
                assert got <= frozenset(allowed)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("+0,+2", [1, 5]),  # "+N": N-th (0-based) set bit of the allowed set {1, 3, 5}
        ("!+0", [0, 2, 3, 4, 5, 6, 7]),  # '!' first, then '+'; inverted over 0..configured-1
        ("1-5", [1, 3, 5]),  # inside a range only allowed nodes are set
        ("0x5", [5]),  # strtoul base 0
    ],
)
def test_relative_and_inverted_forms(text: str, expected: list[int]) -> None:
    ctx = ParseContext.of({1, 3, 5}, configured=8)
    assert sorted(parse_nodestring(text, ctx)) == expected


@pytest.mark.parametrize("text", ["+!0", "all,1", "1,", "2", "0-"])
def test_invalid_forms_are_rejected(text: str) -> None:
    """8.2: '!' must precede '+', "all" must be the whole string, no trailing ',', endpoints must be allowed."""
    with pytest.raises(NodeStringError):
        parse_nodestring(text, ParseContext.of({1, 3, 5}, configured=8))


def test_io_affinity_numa_node_minus_one() -> None:
    """8.2: an I/O item whose device/numa_node reads -1 fails with "Kernel does not know node"."""
    ctx = ParseContext(frozenset({0, 1}), 2, devices=lambda kind, name: -1 if name == "eth1" else 0)
    assert sorted(parse_nodestring("netdev:eth0", ctx)) == [0]
    with pytest.raises(NodeStringError) as info:
        parse_nodestring("netdev:eth1", ctx)
    assert info.value.warning is not None and info.value.warning.startswith("Kernel does not know node")
