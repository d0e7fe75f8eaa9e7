"""numactl's test programs (numactl/test/*.c) and migspeed as virtual programs: output and exit status as the
C programs print them (numasim/tools/numactl_tests.py, numasim/tools/migspeed.py)."""

from __future__ import annotations

import functools
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.kernel import Kernel
from numasim.tools.numactl import run_numactl
from numasim.tools.numactl_tests import bitmap_scnprintf, ftok_key, numa_parse_bitmap
from numasim.topology.builders import glueless


@pytest.fixture
def k2() -> Kernel:
    return Kernel(glueless(2, cpus_per_node=4, memory_bytes=1 << 30))


def _one_node() -> Kernel:
    return Kernel(glueless(1, cpus_per_node=2, memory_bytes=1 << 30))


def test_pagesize_prints_getpagesize(k2: Kernel) -> None:
    run = run_numactl(k2, ["pagesize"])
    assert (run.stdout, run.stderr, run.exit_code) == ("4096\n", "", 0)


def test_distance_prints_the_slit_rows_in_03d(k2: Kernel) -> None:
    run = run_numactl(k2, ["distance"])
    d = k2.machine.slit()[0][1]
    assert run.stdout == f"000: 010 {d:03d} \n001: {d:03d} 010 \n" and run.exit_code == 0


def test_distance_stops_at_an_asymmetric_pair() -> None:
    m = glueless(2, cpus_per_node=1, memory_bytes=1 << 30)
    m = m.model_copy(update={"firmware_slit": [[10, 20], [30, 10]]})  # what a broken firmware table can say
    run = run_numactl(Kernel(m), ["distance"])
    assert run.stdout == "000: 010 020 \n(0,1)->(20,30) wrong!\n" and run.exit_code == 1


def test_node_parse_prints_printmask_or_failed_to_convert(k2: Kernel) -> None:
    run = run_numactl(k2, ["node-parse", "0-1", "1", "all", "7", "ip:8.8.8.8"])
    assert run.stdout == (
        "result: 0 1 \nresult: 1 \nresult: 0 1 \nFailed to convert `7'\nFailed to convert `ip:8.8.8.8'\n"
    )
    assert "libnuma: Warning: node argument 7 is out of range" in run.stderr
    assert run.exit_code == 1
    assert run_numactl(k2, ["node-parse", "0"]).exit_code == 0


def test_node_parse_resolves_a_machine_device_by_name() -> None:
    from numasim.topology.io import load_machine

    m = load_machine("seed-000-4node")
    nic = next(d for d in m.devices if d.kind == "nic")
    run = run_numactl(Kernel(m), ["node-parse", f"netdev:{nic.name}", "netdev:lo"])
    assert run.stdout == f"result: {nic.node} \nFailed to convert `netdev:lo'\n"
    assert "Cannot read node mask for net device `lo'" in run.stderr



def test_node_parse_io_prefixes_fail_with_libnumas_warnings(k2: Kernel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # regress-io's lookups on a machine without devices: each fails as affinity.c fails it (warning texts)
    args = ["file:.", "ip:8.8.8.8", "ip:127.0.0.1", "netdev:f0", "netdev:lo", f"file:{tmp_path / 'missing'}",
            "block:vda", "pci:0:0.0", "pci:nonsense", "netdev:a.b", "ip:example.org"]  # fmt: skip
    run = run_numactl(k2, ["node-parse", *args])
    assert run.stdout == "".join(f"Failed to convert `{a}'\n" for a in args) and run.exit_code == 1
    assert run.stderr.splitlines() == [f"libnuma: Warning: {w}" for w in (
        "Cannot find block device 0:0 in sysfs for `.'",
        "Cannot request rtnetlink route: Network is unreachable",
        "Cannot read node mask for net device `lo'",
        "Cannot read node mask for net device `f0'",
        "Cannot read node mask for net device `lo'",
        f"Cannot stat file {tmp_path / 'missing'}",
        "Cannot read node mask for block device `vda'",
        "Cannot read node mask for  device `0:0.0'",  # cls is NULL for pci: two spaces
        "Cannot parse PCI device `nonsense'",
        "Illegal characters in `a.b' specification",
        "Cannot resolve example.org: Temporary failure in name resolution",
    )]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["netdev", "block", "pci", "file", "ip"]),
       ident=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12))  # fmt: skip
def test_io_affinity_is_a_node_or_libnumas_warning(kind: str, ident: str) -> None:
    from numasim.kernel.nodestring import NodeStringError
    from numasim.tools.numactl_tests import io_affinity_node
    from numasim.topology.io import load_machine

    kernel = _seed0()
    try:
        node = io_affinity_node(kernel, kind, ident)
    except NodeStringError as exc:
        assert exc.warning and exc.text == f"{kind}:{ident}"  # libnuma's message, naming what it was given
        return
    named = {d.name: d.node for d in load_machine("seed-000-4node").devices}
    assert kind in ("netdev", "block", "pci") and node == named[ident]


@functools.lru_cache(maxsize=1)
def _seed0() -> Kernel:  # read-only here: io_affinity_node changes nothing
    from numasim.topology.io import load_machine

    return Kernel(load_machine("seed-000-4node"))


def test_tbitmap_round_trips_every_bit(k2: Kernel) -> None:
    run = run_numactl(k2, ["tbitmap"])
    assert (run.stdout, run.exit_code) == ("Testing bitmap functions\nPassed\n", 0)
    # the printer's layout: the top chunk only as wide as 300 % 32 = 12 bits needs (3 hex digits)
    text = bitmap_scnprintf(frozenset({0, 299}), 300)
    assert text.split(",")[0] == "800" and text.endswith(",00000001") and len(text.split(",")) == 10
    assert numa_parse_bitmap(text, 300) == {0, 299}
    assert numa_parse_bitmap("zz", 300) is None


def test_prefered_on_two_nodes(k2: Kernel) -> None:
    run = run_numactl(k2, ["prefered"])
    assert run.stdout == (
        "\nTesting MPOL_PREFERRED policy:\n\n1 offset 0\ngot node 1 expected 1\n0 offset 0\ngot node 0 expected 0\n"
        "\nTesting MPOL_PREFERRED_MANY policy:\n\nGot nodes: 0 1 \nExpected nodes: 0 1 \n"
        "Got node: 0 Expected nodes: 0 1 \n"
    )
    assert run.exit_code == 0


def test_prefered_many_needs_5_15() -> None:
    from numasim.kernel.config import KernelConfig

    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), KernelConfig(version="5.10"))
    run = run_numactl(k, ["prefered"])
    assert run.stdout.endswith("\nTesting MPOL_PREFERRED_MANY policy:\n\n")
    assert (run.stderr, run.exit_code) == ("mbind: Invalid argument\n", 1)


def test_mynode_is_the_local_node(k2: Kernel) -> None:
    assert run_numactl(k2, ["mynode"]).stdout == "my node 0\n"
    assert run_numactl(k2, ["--physcpubind=5", "mynode"]).stdout == "my node 1\n"


def test_tshared_interleaves_by_offset_silently(k2: Kernel) -> None:
    run = run_numactl(k2, ["tshared"])
    assert (run.stdout, run.stderr, run.exit_code) == ("", "", 0)
    assert k2.numastat(0)["interleave_hit"] >= 25600 // 2  # the parent's faults, round robin by offset


def test_realloc_test_keeps_the_policy(k2: Kernel) -> None:
    run = run_numactl(k2, ["realloc_test", "1", "20"])
    lines = run.stdout.splitlines()
    assert lines[:3] == ["Page size: 4096", "Pages realloc'ed: 20", "Allocate data in node: 1"]
    inplace, moved = int(lines[3].split(": ")[1]), int(lines[4].split(": ")[1])
    assert lines[3].startswith("In-place reallocs: ") and lines[4].startswith("Moved reallocs: ")
    assert inplace + moved == 20 and run.exit_code == 0


def test_realloc_test_parse_error(k2: Kernel) -> None:
    run = run_numactl(k2, ["realloc_test", "1x"])
    assert (run.stdout, run.stderr, run.exit_code) == ("", "[error] strtol() failed: parse error: x\n", 1)


def test_migrate_pages_test_moves_everything_from_node_1_to_0(k2: Kernel) -> None:
    run = run_numactl(k2, ["migrate_pages", "4"])
    lines = run.stdout.splitlines()
    assert lines[:3] == ["migrate_pages() test ......", "Page location at the beginning of the test",
                         "------------------------------------------"]  # fmt: skip
    assert [ln.rsplit(" ", 1)[1] for ln in lines[3:7]] == ["node=1", "node=1", "node=-2", "node=1"]
    assert lines[3].split()[2].startswith("vaddr=0x")  # %p
    assert lines[7:9] == ["", "Migrating the current processes pages ..."]
    assert [ln.rsplit(" ", 1)[1] for ln in lines[9:13]] == ["node=0", "node=0", "node=-2", "node=0"]
    assert not lines[9].split()[2].startswith("vaddr=0x")  # %lx
    assert lines[-1] == "Test successful." and run.exit_code == 0


def test_mbind_mig_pages_ends_on_node_1(k2: Kernel) -> None:
    run = run_numactl(k2, ["mbind_mig_pages"])
    assert run.stdout.startswith("mbind migration test ......\n\nPage status before page migration\n")
    assert "\nMoving pages via mbind to node 0 ...\n\nMoving pages via mbind from node 0 to 1 ...\n" in run.stdout
    tail = run.stdout.split("from node 0 to 1 ...\n")[1].splitlines()
    assert len(tail) == 33 and all(ln.endswith("node=1") for i, ln in enumerate(tail[:32]) if i != 2)
    assert tail[-1] == "Test successful." and run.exit_code == 0


@pytest.mark.parametrize("program", ["migrate_pages", "mbind_mig_pages"])
def test_migration_tests_need_two_nodes(program: str) -> None:
    run = run_numactl(_one_node(), [program])
    assert (run.stdout, run.exit_code) == ("A minimum of 2 nodes is required for this test.\n", 1)


def test_ftok_of_a_real_file(k2: Kernel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "key"
    f.write_text("")
    st = os.stat(f)
    key = (st.st_dev & 0xFF) << 16 | (st.st_ino & 0xFFFF)
    assert ftok_key(str(f)) == key
    run = run_numactl(k2, ["ftok", str(f), str(tmp_path / "missing")])
    assert run.stdout == f"{key:#x}\n0xffffffff\n"


def test_migspeed_times_the_move_with_the_kernels_per_page_cost(k2: Kernel) -> None:
    run = run_numactl(k2, ["migspeed", "-v", "0", "1"])
    lines = run.stdout.splitlines()
    assert lines[:5] == ["From: 0 ", "To: 1 ", "Allocating 1000 pages of 4096 bytes of memory", "Dirtying memory....",
                         "Starting test"]  # fmt: skip
    assert " bind:0 " in lines[5] and "N0=1000" in lines[5]
    assert " bind:1 " in lines[6] and "N1=1000" in lines[6]
    seconds = 1000 * k2.config.compact_migrate_page_ns * 1e-9
    mb = 1000 * 4096 / 2**20
    assert lines[7] == f"{mb:1.1f} Mbyte migrated in {seconds:1.2f} secs. {mb / seconds:3.1f} Mbytes/second"
    assert run.exit_code == 0


def test_migspeed_usage_and_bad_nodes(k2: Kernel) -> None:
    run = run_numactl(k2, ["migspeed"])
    assert run.stdout.startswith("usage migspeed [-p pages] [-h] [-v] from-nodes to-nodes\n") and run.exit_code == 1
    assert "(defaults to 1000)" in run.stdout
    run = run_numactl(k2, ["migspeed", "-p", "12x", "0", "1"])  # strtoul has set pages before usage() prints it
    assert "(defaults to 12)" in run.stdout and run.exit_code == 1
    run = run_numactl(k2, ["migspeed", "0", "9"])
    assert (run.stdout, run.exit_code) == ("<9> is invalid\n", 1)
    run = run_numactl(k2, ["migspeed", "-p", "8", "1", "1"])  # nothing moves: 0 s, and C's division gives inf
    assert run.stdout.splitlines()[-1] == "0.0 Mbyte migrated in 0.00 secs. inf Mbytes/second"


def test_glibc_random_sequence() -> None:
    from numasim.tools.randmap import GlibcRandom

    rng = GlibcRandom(1)  # glibc: srandom(1); random() x 3
    assert [rng.random() for _ in range(3)] == [1804289383, 846930886, 1681692777]
    rng = GlibcRandom(0)  # srandom(0) seeds with 1
    assert rng.random() == 1804289383


def test_randmap_runs_until_its_alarm(k2: Kernel) -> None:
    from numasim.tools.randmap import RANDMAP_ITERATIONS_PER_S

    run = run_numactl(k2, ["randmap", "1", "42"])
    lines = run.stdout.splitlines()
    assert lines[0].startswith("map 0x") and lines[1:4] == ["running for 1 seconds", "random seed 42", "simple tests"]
    assert lines[4:7] == ["off:0 length:6400 policy:3 nodes:3", "off:0 length:100 policy:2 nodes:1",
                          "off:100 length:100 policy:2 nodes:1"]  # fmt: skip
    assert "done" in lines and (run.stderr, run.exit_code) == ("Alarm clock\n", 142)
    tries = [ln for ln in lines[lines.index("done") + 1 :] if ln.startswith("off:")]
    assert 0 < len(tries) <= RANDMAP_ITERATIONS_PER_S
    assert run_numactl(k2, ["randmap", "1", "42"]).stdout.splitlines()[1:] == lines[1:]  # the seed decides
    run = run_numactl(k2, ["randmap"])
    assert run.exit_code == 1 and "give a timeout" in run.stderr
