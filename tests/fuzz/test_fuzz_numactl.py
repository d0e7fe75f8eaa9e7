"""Fuzz: numactl command lines and node strings, and the virtual programs' arguments, on a small 4-node
machine; and, on runs that succeed, the invariants: pages conserved in the report, BIND never outside its mask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _fuzz import TRICKY, assert_clean, cli, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import save_machine_toml

NODE_STRINGS = st.one_of(
    st.sampled_from(["0", "1", "0-3", "all", "!0", "+0", "0,2", "3-1", "0-", "-1", "4", "99", "0x1", "", ",", "a"]),
    st.lists(st.sampled_from(["0", "1", "2", "3", "-", ",", "!", "+", "all", "x", "9", " "]), max_size=6).map("".join),
)
SIZES = st.sampled_from(["4K", "1M", "8M", "0", "1Q", "", "-1", "99999999999999999999G", "1e9", "0x100000"])
NUMBERS = st.sampled_from(["1", "2", "0", "-1", "x", "", "0x2", "1k", "99999999999"])

PROGRAMS = st.one_of(
    st.tuples(st.just("memhog"), st.lists(st.sampled_from(["-r2", "-rx", "-H", "-f", "-q"]), max_size=2), SIZES,
              st.lists(st.sampled_from(["interleave", "membind", "preferred", "local", "bogus"]), max_size=1),
              st.lists(NODE_STRINGS, max_size=1)).map(lambda t: [t[0], *t[1], t[2], *t[3], *t[4]]),
    st.lists(st.one_of(st.sampled_from(["-m", "--vm", "--vm-bytes", "-t", "--vm-keep", "--vm-hang", "-q", "-c"]),
                       NUMBERS, SIZES), max_size=6).map(lambda a: ["stress", *a]),
    st.lists(st.one_of(st.sampled_from(["--pages", "--addr", "--mbind", "--set-mempolicy", "--touch-cpu"]),
                       NUMBERS, NODE_STRINGS.map(lambda n: f"bind:{n}"), st.sampled_from(TRICKY)),
             max_size=6).map(lambda a: ["alloc", *a]),
    st.lists(NUMBERS, max_size=1).map(lambda a: ["move_pages", *a]),
    st.lists(st.sampled_from(["-c", "-t", "1M", "0", "x", "memset", "-e"]), max_size=3).map(lambda a: ["numademo", *a]),
    st.lists(st.sampled_from(["-P", "2", "-t", "1", "x", "64", "0"]), max_size=3).map(lambda a: ["lat_mem_rd", *a]),
    st.lists(st.sampled_from(["if=/dev/zero", "of=/dev/null", "bs=1M", "count=2", "bs=0", "count=x", "bs=", "x"]),
             max_size=3).map(lambda a: ["dd", *a]),
    st.lists(st.sampled_from(["1", "0", "x", "OMP_NUM_THREADS=2", ""]), max_size=1).map(lambda a: ["stream", *a]),
    st.lists(st.sampled_from(["--idle_latency", "-b1M", "-e", "-x", "--bogus", "-t1", "-bx"]), max_size=2)
    .map(lambda a: ["mlc", *a]),
    st.tuples(st.sampled_from(["ib_send_lat", "ib_send_bw"]),
              st.lists(st.sampled_from(["-n", "-s", "-a", "-d", "mlx5_0", "x", "0", "64K", "1Q", "--bogus"]), max_size=4))
    .map(lambda t: [t[0], *t[1]]),
    st.sampled_from([["true"], ["printcpu"], ["nodemap"], ["nosuch"], ["sleep", "x"], ["ls"]]),
)
NUMACTL_OPTIONS = st.lists(
    st.one_of(
        st.sampled_from(["-i", "-m", "-N", "-p", "-C", "--preferred-many", "-w", "--weighted-interleave",
                         "--cpunodebind", "--physcpubind", "--membind", "--interleave"]).flatmap(
            lambda o: NODE_STRINGS.map(lambda n: [o, n])),
        st.sampled_from([["-l"], ["--localalloc"], ["-a"], ["-b"], ["-s"], ["-H"], ["--show"], ["--bogus"], ["-x"],
                         ["--length", "1M"], ["--offset", "x"], ["--touch"], ["--strict"], ["--interleave=0-1"]]),
    ),
    max_size=3,
).map(lambda groups: [a for g in groups for a in g])


@pytest.fixture(scope="module")
def machine_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fuzz-numactl") / "four.toml"
    save_machine_toml(glueless(4, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def test_numactl_command_lines(machine_file: str) -> None:
    @fuzz_settings(60)
    @given(NUMACTL_OPTIONS, PROGRAMS, st.booleans())
    def check(options: list[str], program: list[str], dash: bool) -> None:
        argv = ["numactl", "--machine", machine_file, "--nominal", *options, *(["--"] if dash else []), *program]
        # numactl and the programs print their own usage text after the message, as the real ones do
        assert_clean(cli(*argv), usage_ok=True)

    check()


def test_bind_never_outside_its_mask_and_pages_are_conserved(machine_file: str) -> None:
    @fuzz_settings(25)
    @given(
        st.sets(st.integers(0, 3), min_size=1),
        st.sampled_from([["memhog", "6M"], ["alloc", "--pages", "300"], ["stress", "-m", "2", "--vm-bytes", "2M"],
                         ["memhog", "6M", "interleave", "0-3"], ["alloc", "--pages", "64", "--mbind", "interleave:0-3"]]),
    )
    def check(nodes: set[int], program: list[str]) -> None:
        mask = ",".join(map(str, sorted(nodes)))
        o = cli("numactl", "--machine", machine_file, "--nominal", "--json", "-m", mask, "--", *program)
        assert_clean(o, usage_ok=True)
        report = json.loads(o.out)
        per_node = {int(k): v for k, v in report["pages_per_node"].items() if v}
        if not report["page_runs_truncated"]:
            assert sum(per_node.values()) == sum(count for _, count in report["page_runs"])
        # the task policy is BIND: a VMA policy (memhog's mbind, alloc --mbind) may say otherwise for its
        # range, but pages of the task's own allocations never leave the mask; with no VMA policy, none do
        if not any("interleave" in a for a in program):
            assert set(per_node) <= nodes, (program, mask, per_node)
        for node, stats in report["numastat_delta"].items():
            assert all(v >= 0 for v in stats.values()), (node, stats)

    check()


def test_node_strings(machine_file: str, tmp_path: Path) -> None:
    @fuzz_settings(40)
    @given(st.sampled_from(["-i", "-m", "-N", "-p", "--preferred-many", "-w"]), NODE_STRINGS)
    def check(option: str, nodes: str) -> None:
        assert_clean(cli("numactl", "--machine", machine_file, option, nodes, "--", "true"), usage_ok=True)

    check()
