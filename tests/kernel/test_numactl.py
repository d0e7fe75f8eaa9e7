"""The virtual numactl (kernel_spec.md 8.1, 8.4, 8.5, 8.7): option parsing, output texts, numactl's own tests."""

from __future__ import annotations

import pytest

from numasim.kernel.errno import SyscallResult
from numasim.kernel.kernel import Kernel
from numasim.kernel.mempolicy import MPOL_F_NUMA_BALANCING
from numasim.kernel.procfs import node_numastat
from numasim.tools.numactl import USAGE, KernelProcess, getopt_numactl, numactl_main, run_numactl
from numasim.topology.builders import glueless
from numasim.topology.io.numactl import numactl_hardware_for

PAGES = 3840  # numactl test/regress: 15 MiB of 4 KiB pages
HALFPAGES = 1820
DOUBLEPAGES = 7480


@pytest.fixture
def k2() -> Kernel:
    return Kernel(glueless(2, cpus_per_node=4, memory_bytes=1 << 30))


@pytest.fixture
def k4() -> Kernel:
    return Kernel(glueless(4, cpus_per_node=2, memory_bytes=512 << 20))


def show(kernel: Kernel, *opts: str) -> list[str]:
    run = run_numactl(kernel, [*opts, "--show"])
    assert run.exit_code == 0, run.stderr
    return run.stdout.split("\n")


# --- getopt ----------------------------------------------------------------------------------------------


def test_getopt_plus_semantics_and_forms() -> None:
    items = list(getopt_numactl(["-i", "0,1", "--membind=1", "-l", "prog", "-m", "0"]))
    assert items == [("i", "0,1", 2), ("m", "1", 3), ("l", None, 4), ("", None, 4)]
    assert list(getopt_numactl(["-i0", "--", "-x"])) == [("i", "0", 1), ("", None, 2)]
    assert list(getopt_numactl(["--cpun", "0"]))[0] == ("N", "0", 2)  # unique prefix
    assert list(getopt_numactl(["-sl"]))[:2] == [("s", None, 1), ("l", None, 1)]  # clustered flags


def test_getopt_errors_use_glibc_wording() -> None:
    assert list(getopt_numactl(["-x"]))[0] == ("?", "invalid option -- 'x'", 1)
    assert list(getopt_numactl(["-i"]))[0] == ("?", "option requires an argument -- 'i'", 1)
    assert list(getopt_numactl(["--interleave"]))[0] == ("?", "option '--interleave' requires an argument", 1)
    assert list(getopt_numactl(["--show=1"]))[0] == ("?", "option '--show' doesn't allow an argument", 1)
    assert list(getopt_numactl(["--bogus"]))[0] == ("?", "unrecognized option '--bogus'", 1)
    key, msg, _ = list(getopt_numactl(["--c", "0"]))[0]
    assert key == "?" and msg.startswith(
        "option '--c' is ambiguous; possibilities: '--cpubind' '--cpunodebind'"
    )


# --- --show --------------------------------------------------------------------------------------------------


def test_show_default(k2: Kernel) -> None:
    assert show(k2) == [
        "policy: default",
        "preferred node: current",
        "physcpubind: 0 1 2 3 4 5 6 7 ",
        "cpubind: 0 1 ",
        "nodebind: 0 1 ",
        "membind: 0 1 ",
        "preferred: ",
        "",
    ]


def test_show_interleave_bind_preferred(k2: Kernel) -> None:
    assert show(k2, "--interleave=all")[:4] == [
        "policy: interleave",
        "preferred node: 0 (interleave next)",
        "interleavemask: 0 1 ",
        "interleavenode: 0",
    ]
    assert show(k2, "--interleave=all")[-2] == "preferred: 0 1 "  # __numa_preferred keeps the returned mask
    bind = show(k2, "-m", "1", "-N", "0")
    assert bind[:2] == ["policy: bind", "preferred node: 1"]
    assert bind[2:] == [
        "physcpubind: 0 1 2 3 ",
        "cpubind: 0 ",
        "nodebind: 0 ",
        "membind: 1 ",
        "preferred: 1 ",
        "",
    ]
    assert show(k2, "-p", "1")[:2] == ["policy: preferred", "preferred node: 1"]
    many = show(k2, "-P", "0,1")
    assert many[:2] == ["policy: preferred-many", "preferred node: 0 (preferred-many)"]


def test_show_local_glues_the_next_line(k2: Kernel) -> None:
    lines = show(k2, "--localalloc")
    assert lines[:2] == ["policy: local", "preferred node: physcpubind: 0 1 2 3 4 5 6 7 "]


def test_show_weighted_interleave(k2: Kernel) -> None:
    lines = show(k2, "-w", "0,1")
    assert lines[:5] == [
        "policy: weighted-interleave",
        "preferred node: 0 (interleave next)",
        "interleavemask: 0 1 ",
        "interleaveweights: 1 1",
        "interleavenode: 0",
    ]


def test_show_balancing_prints_raw_mode_number(k2: Kernel) -> None:
    # get_mempolicy returns MPOL_BIND|MPOL_F_NUMA_BALANCING = 8194: policy_name() prints "[8194]"
    lines = show(k2, "-b", "-m", "0")
    assert lines[0] == f"policy: [{2 | MPOL_F_NUMA_BALANCING}]"
    assert lines[1].startswith("preferred node: physcpubind:")


def test_show_exits_at_once(k2: Kernel) -> None:
    run = run_numactl(k2, ["--show", "--bogus"])
    assert run.exit_code == 0 and run.stderr == ""


# --- errors --------------------------------------------------------------------------------------------------


def test_conflicting_policies(k2: Kernel) -> None:
    run = run_numactl(k2, ["-i", "0", "-m", "1", "true"])
    assert run.exit_code == 1
    assert run.stderr == "numactl: Conflicting policies" + USAGE
    assert run.stdout == "\n"  # usage_msg()'s newline goes to stdout


def test_invalid_node_list(k2: Kernel) -> None:
    run = run_numactl(k2, ["--membind=5", "true"])
    assert run.exit_code == 1
    assert run.stdout == "<5> is invalid\n"
    assert run.stderr == "libnuma: Warning: node argument 5 is out of range\n\n" + USAGE
    run = run_numactl(k2, ["-i", "all,1", "true"])
    assert run.stdout == "<all,1> is invalid\n"


def test_all_must_come_first(k2: Kernel) -> None:
    run = run_numactl(k2, ["-N", "0", "--all", "true"])
    assert run.exit_code == 1
    assert run.stderr.startswith("numactl: --all/-a option must be before all cpu/node specifications")


def test_preferred_needs_exactly_one_node(k2: Kernel) -> None:
    run = run_numactl(k2, ["-p", "0,1", "true"])
    assert (run.exit_code, run.stderr) == (1, USAGE)


def test_no_command_and_unknown_command(k2: Kernel) -> None:
    assert run_numactl(k2, ["-l"]).exit_code == 1
    run = run_numactl(k2, ["-l", "frobnicate"])
    assert (run.exit_code, run.stderr) == (
        1,
        "numactl: execution of `frobnicate': No such file or directory\n\n",
    )


def test_same_reuses_previous_list(k2: Kernel) -> None:
    lines = show(k2, "-N", "1", "-m", "same")
    assert "membind: 1 " in lines and "nodebind: 1 " in lines
    run = run_numactl(k2, ["-m", "same", "true"])
    assert run.stderr.startswith("numactl: same needs previous node specification")


def test_balancing_falls_back_to_plain_bind_on_einval(k2: Kernel) -> None:
    class OldKernel(KernelProcess):  # a kernel before 5.12 rejects MPOL_F_NUMA_BALANCING
        def set_mempolicy(self, mode: int, nodes: frozenset[int], maxnode: int) -> SyscallResult:
            if mode & MPOL_F_NUMA_BALANCING:
                return SyscallResult.fail("EINVAL", "unknown mode flag")
            return super().set_mempolicy(mode, nodes, maxnode)

    proc = OldKernel(k2, k2.spawn("numactl"))
    run = numactl_main(proc, ["-b", "-m", "1", "--show"])
    assert run.exit_code == 0 and run.stdout.startswith("policy: bind\n")
    assert [r.errno for _, _, r in run.syscalls] == ["EINVAL", None]


def test_setaffinity_failure_is_reported(k2: Kernel) -> None:
    k2.cpuset_create("small", cpus=[0, 1], mems=[0])
    task = k2.spawn("sh", cpuset="small")
    run = run_numactl(k2, ["--all", "-C", "6", "true"], task=task)
    assert run.exit_code == 1 and run.stderr == "sched_setaffinity: Invalid argument\n"


def test_version_and_strict(k2: Kernel) -> None:
    assert run_numactl(k2, ["--version"]).stdout == "2.0.19\n"
    assert (
        run_numactl(k2, ["--strict", "-l", "true"]).stderr
        == "numactl: warning. Strict flag for process ignored.\n"
    )
    # shm options: tests/kernel/test_numactl_shm.py; a new segment needs a length
    run = run_numactl(k2, ["--shm", "/x", "-l"])
    assert run.exit_code == 1 and run.stderr.endswith("need a --length to create a sysv shared memory segment\n")


# --- --hardware ------------------------------------------------------------------------------------------------


def test_hardware_matches_topology_formatter_on_a_fresh_kernel() -> None:
    machine = glueless(2, cpus_per_node=4, memory_bytes=1 << 30)
    kernel = Kernel(machine)
    text = run_numactl(kernel, ["--hardware"]).stdout
    lines, expected = text.splitlines(), numactl_hardware_for(machine).splitlines()
    assert lines[0] == expected[0] == "available: 2 nodes (0-1)"
    assert lines[1] == expected[1]
    assert lines[-3:] == expected[-3:]  # distance table
    assert lines[2].startswith("node 0 size: ") and lines[3].startswith("node 0 free: ")
    compressed = run_numactl(kernel, ["-H", "--cpu-compress"]).stdout.splitlines()
    assert compressed[1] == "node 0 cpus: 0-3 (4)"


def test_hardware_free_memory_drops_while_a_program_holds_memory(k2: Kernel) -> None:
    before = run_numactl(k2, ["-H"]).stdout.splitlines()[3]
    assert run_numactl(k2, ["-m", "0", "memhog", "100M"], keep_alive=True).exit_code == 0
    after = run_numactl(k2, ["-H"]).stdout.splitlines()[3]
    assert int(before.split()[3]) - int(after.split()[3]) >= 100


# --- numactl's own test suite (test/checkaffinity, test/bind_range, test/regress) -------------------------------


def test_checkaffinity(k4: Kernel) -> None:
    cpus = show(k4)[2].split()[1:]
    nodes = show(k4)[4].split()[1:]
    for c in cpus:
        assert run_numactl(k4, [f"--physcpubind={c}", "printcpu"]).stdout == f"{c}\n"
        nested = run_numactl(k4, [f"--physcpubind={c}", "numactl", "--show"]).stdout
        assert [line.split()[1] for line in nested.splitlines() if line.startswith("physcpubind")] == [c]
    for n in nodes:
        nested = run_numactl(k4, [f"--cpunodebind={n}", "numactl", "--show"]).stdout
        assert [line.split()[1] for line in nested.splitlines() if line.startswith("nodebind")] == [n]


def test_bind_range(k4: Kernel) -> None:
    highest_cpu = str(max(k4.machine.cpus))
    highest_node = str(max(k4.machine.node_ids))
    assert run_numactl(k4, ["--all", f"--physcpubind={highest_cpu}", "ls"]).exit_code == 0
    assert run_numactl(k4, [f"--physcpubind={highest_cpu}", "--all", "ls"]).exit_code == 1
    shell_on_cpu0 = k4.spawn("sh", cpus=[0])
    assert run_numactl(k4, [f"--physcpubind={highest_cpu}", "ls"], task=shell_on_cpu0).exit_code == 1
    shell_on_cpu0 = k4.spawn("sh", cpus=[0])
    assert run_numactl(k4, ["--all", f"--physcpubind={highest_cpu}", "ls"], task=shell_on_cpu0).exit_code == 0
    lowest_node_cpus = k4.machine.nodes[0].cpus
    for opts in ([f"--cpunodebind={highest_node}"], ["--all", f"--cpunodebind={highest_node}"]):
        shell = k4.spawn("sh", cpus=lowest_node_cpus)
        assert run_numactl(k4, [*opts, "ls"], task=shell).exit_code == 0


def _counter(kernel: Kernel, node: int, name: str) -> int:
    return node_numastat(kernel, node)[name]


@pytest.mark.parametrize("via_mbind", [False, True])
def test_regress(k2: Kernel, via_mbind: bool) -> None:
    n0, n1 = 0, 1

    def hog(opts: list[str], policy: list[str]) -> None:
        run = run_numactl(
            k2, [*opts, "memhog", "-H", "15M", *policy] if via_mbind else [*opts, "memhog", "-H", "15M"]
        )
        assert run.exit_code == 0, run.stderr
        assert run.stdout == "..\n"

    before = [_counter(k2, n, "interleave_hit") for n in (n0, n1)]
    hog([] if via_mbind else ["--interleave=0,1"], ["interleave", "0,1"])
    for n, b in zip((n0, n1), before, strict=True):
        assert _counter(k2, n, "interleave_hit") - b >= HALFPAGES
    before = [_counter(k2, n, "numa_hit") for n in (n0, n1)]
    hog([] if via_mbind else ["--membind=0,1"], ["membind", "0,1"])
    assert sum(_counter(k2, n, "numa_hit") for n in (n0, n1)) - sum(before) >= PAGES
    for i in (n0, n1):
        b = _counter(k2, i, "numa_hit")
        hog([] if via_mbind else [f"--membind={i}"], ["membind", str(i)])
        hog([] if via_mbind else [f"--preferred={i}"], ["preferred", str(i)])
        assert _counter(k2, i, "numa_hit") - b >= DOUBLEPAGES
    for opts in (["--interleave=all"], ["--membind=all"], ["--localalloc"], ["--cpubind=1"]):
        assert run_numactl(k2, [*opts, "memhog", "15M"]).exit_code == 0


def test_finished_programs_exit_and_free_their_memory(k2: Kernel) -> None:
    free = k2.free_pages_per_node().tolist()
    run = run_numactl(k2, ["-m", "1", "memhog", "20M"])
    assert run.program_pages_per_node[1] >= 20 * 256
    assert k2.free_pages_per_node().tolist() == free
    assert run.task_pid not in k2.tasks
    assert run_numactl(k2, ["--show"]).task_pid not in k2.tasks


def test_weighted_interleave_needs_6_9() -> None:
    from numasim.kernel.config import KernelConfig

    old = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), KernelConfig(version="6.1"))
    run = run_numactl(old, ["-w", "0,1", "true"])
    assert run.exit_code == 1
    assert run.stderr == "set_mempolicy: Invalid argument\nsetting interleave mask: Invalid argument\n"
    assert [r.errno for _, _, r in run.syscalls] == ["EINVAL"]


def test_memoryless_node_is_listed_but_not_bindable() -> None:
    from numasim.topology.model import Link, Machine, Node

    machine = Machine(
        name="memoryless",
        nodes=[Node(id=0, cpus=[0, 1], memory_bytes=1 << 30), Node(id=1, cpus=[2, 3], memory_bytes=0)],
        links=[Link(a=0, b=1, latency_ns=50, bandwidth_gb_s=20)],
        firmware_slit=[[10, 20], [20, 10]],
    )
    kernel = Kernel(machine)
    hw = run_numactl(kernel, ["--hardware"]).stdout.splitlines()
    assert (
        hw[0] == "available: 2 nodes (0-1)" and hw[4] == "node 1 cpus: 2 3" and hw[5] == "node 1 size: 0 MB"
    )
    # libnuma parses node lists against Mems_allowed, which has no memoryless node
    run = run_numactl(kernel, ["--cpunodebind=1", "true"])
    assert run.exit_code == 1 and run.stdout == "<1> is invalid\n"
    assert run_numactl(kernel, ["--all", "--cpunodebind=1", "printcpu"]).stdout == "2\n"
    assert show(kernel, "-C", "2")[3] == "cpubind: "  # nodebind only lists memory nodes


def test_checktopology_and_distance(k4: Kernel) -> None:
    hw = run_numactl(k4, ["--hardware"]).stdout.splitlines()
    assert sum(1 for line in hw if line.startswith("node ") and " size: " in line) == len(k4.machine.nodes)
    listed = [int(c) for line in hw if " cpus:" in line for c in line.split(":")[1].split()]
    assert sorted(listed) == k4.machine.cpus
    header = hw.index("node distances:")
    rows = [[int(x) for x in line.split(":")[1].split()] for line in hw[header + 2 :]]
    assert all(rows[i][i] == 10 for i in range(len(rows)))
    assert all(rows[i][j] == rows[j][i] for i in range(len(rows)) for j in range(len(rows)))
