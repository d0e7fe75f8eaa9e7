"""``numasim shims`` laid out as numactl's build directory, ``numasim taskset`` (util-linux's output) and the
calling shell's affinity carried into the simulated task (numasim/cli/shims.py, numasim/cli/taskset.py,
numasim/persist/shell_affinity.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from numasim.cli import main
from numasim.cli.shims import SHIMS, TEST_PROGRAMS
from numasim.cli.taskset import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask
from numasim.persist import shell_affinity
from tests.cli.machines import run_cli, stress_worker


@pytest.fixture
def box(tmp_path, monkeypatch, capsys):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    assert main(["machine", "start", "seed-002-opteron-4s", "--name", "box"]) == 0  # 4 nodes, cpus 0-7
    monkeypatch.setenv("NUMASIM_MACHINE", "box")
    capsys.readouterr()
    return tmp_path / "machines" / "box"


def test_cpulist_and_mask_formats_are_util_linux() -> None:
    assert format_cpulist({0, 1}) == "0,1"  # a pair is not a range in cpulist_create
    assert format_cpulist({0, 1, 2, 7}) == "0-2,7"
    assert format_cpumask(set(range(24))) == "ffffff" and format_cpumask(set()) == "0"
    assert parse_cpulist("0-7:2") == {0, 2, 4, 6}
    assert parse_cpulist("1,") is None and parse_cpulist("") is None and parse_cpulist("a") is None
    assert parse_cpumask("0x3") == {0, 1} and parse_cpumask("g") is None


def test_taskset_on_the_calling_shell_carries_into_numactl(box, capsys) -> None:  # type: ignore[no-untyped-def]
    shell = os.getppid()  # this process inherits from its parent, as a command inherits from its shell
    assert run_cli(capsys, "taskset", "-p", str(shell)) == (0, f"pid {shell}'s current affinity mask: ff\n", "")
    code, out, _ = run_cli(capsys, "taskset", "-p", "-c", "2,3", str(shell))
    assert (code, out) == (0, f"pid {shell}'s current affinity list: 0-7\npid {shell}'s new affinity list: 2,3\n")
    assert shell_affinity.inherited(box) == {2, 3}
    assert run_cli(capsys, "numactl", "--", "printcpu") == (0, "2\n", "")
    code, out, err = run_cli(capsys, "numactl", "--physcpubind=5", "printcpu")
    assert code == 1 and out == "<5> is invalid\n" and "cpu argument 5 is out of range" in err
    assert run_cli(capsys, "numactl", "--all", "--physcpubind=5", "printcpu")[:2] == (0, "5\n")
    code, out, _ = run_cli(capsys, "taskset", "-p", "ff", str(shell))
    assert out == f"pid {shell}'s current affinity mask: c\npid {shell}'s new affinity mask: ff\n"


def test_taskset_runs_a_program_and_acts_on_simulated_pids(box, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli(capsys, "taskset", "-c", "6", "printcpu") == (0, "6\n", "")
    assert run_cli(capsys, "taskset", "0x10", "printcpu") == (0, "4\n", "")
    code, out, _ = run_cli(capsys, "numactl", "--", "stress", "-m", "1", "--vm-bytes", "1M", "--vm-keep")
    worker = stress_worker(out)
    code, out, _ = run_cli(capsys, "taskset", "-pc", "1-3", str(worker))
    assert out == f"pid {worker}'s current affinity list: 0-7\npid {worker}'s new affinity list: 1-3\n"
    assert run_cli(capsys, "taskset", "-p", str(worker))[1] == f"pid {worker}'s current affinity mask: e\n"


def test_taskset_errors_as_util_linux(box, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli(capsys, "taskset", "-c", "99", "printcpu")[0] == 1
    assert run_cli(capsys, "taskset", "-c", "1", "nosuch")[2] == "taskset: failed to execute nosuch: No such file or directory\n"
    assert run_cli(capsys, "taskset", "-c", "1", "nosuch")[0] == 127
    assert run_cli(capsys, "taskset", "-c", "3-1", "ls") == (1, "", "taskset: failed to parse CPU list 3-1\n")
    assert run_cli(capsys, "taskset", "3") == (1, "", "taskset: bad usage\nTry 'taskset --help' for more information.\n")
    assert run_cli(capsys, "taskset", "-p", "x")[2] == "taskset: invalid PID argument: 'x'\n"
    assert run_cli(capsys, "taskset", "-p", "999999999")[2] == "taskset: failed to get pid 999999999's affinity: No such process\n"
    assert run_cli(capsys, "taskset", "--help")[1].startswith("\nUsage:\n taskset [options] [mask | cpu-list]")


def test_shell_affinity_ignores_a_recycled_pid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    shell_affinity.record(tmp_path, os.getpid(), {1})
    data = (tmp_path / shell_affinity.FILE_NAME).read_text().replace('"start": ', '"start": 1')
    (tmp_path / shell_affinity.FILE_NAME).write_text(data)  # another process's start time
    assert shell_affinity.recorded(tmp_path, os.getpid()) is None


def test_shims_lay_out_numactls_build_directory(box, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    build = tmp_path / "build"
    assert main(["shims", str(build), "--machine", "box"]) == 0
    for name in ["numactl", "numastat", "memhog", "migratepages", "migspeed", "numademo", "taskset"]:
        assert os.access(build / name, os.X_OK), name
    for name in TEST_PROGRAMS:
        assert os.access(build / "test" / name, os.X_OK), name
    assert set(SHIMS) >= {f"test/{n}" for n in ("distance", "pagesize", "node-parse", "tbitmap", "migrate_pages")}
    env = {k: v for k, v in os.environ.items() if k != "NUMASIM_MACHINE"}
    # the issue's own example: a command substitution gets just the program's output
    out = subprocess.run(["sh", "-c", f"x=$({build}/numactl --physcpubind=3 {build}/test/printcpu); echo \"[$x]\""],
                         env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert out == "[3]\n"
    done = subprocess.run([str(build / "test" / "pagesize")], env=env, capture_output=True, text=True)
    assert (done.stdout, done.returncode) == ("4096\n", 0)
    # a shell that pins itself: its later commands start with its affinity
    script = f"{build}/taskset -p -c 6 $$ >/dev/null && {build}/test/printcpu && {build}/numactl --physcpubind=1 true"
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert (done.stdout, done.returncode) == ("6\n<1> is invalid\n", 1)
