"""A program started in the background on a persistent machine (``numactl -m 1 stress ... -t 60 &``) keeps its
memory while its shim lives, under the shim's PID (the shell's ``$!``), and frees it when it ends, is signalled
or is killed (numasim/cli/kernel.py, numasim/persist/live.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.cli.shims import write_shims
from numasim.kernel.kernel import Kernel
from numasim.persist import MachineStore, live
from numasim.tools.numactl import run_numactl
from numasim.topology.builders import glueless

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/stat")


@pytest.fixture
def box(tmp_path, monkeypatch, capsys):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    assert main(["machine", "start", "seed-003-2node", "--name", "box"]) == 0
    monkeypatch.setenv("NUMASIM_MACHINE", "box")
    write_shims(tmp_path / "bin")
    capsys.readouterr()
    return tmp_path


def _node1_pages(state: Path) -> int:
    with MachineStore(state / "machines").session("box", save=False) as kernel:
        return sum(int(t.pages_per_node().get(1, 0)) for t in kernel.tasks.values())


def _start(box: Path, *argv: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(box / "bin" / "numactl"), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))  # fmt: skip
    deadline = time.monotonic() + 120
    while proc.pid not in live.running(box / "machines" / "box"):  # until its program has run and holds memory
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the background program never registered"
        time.sleep(0.05)
    return proc


def test_a_background_program_holds_its_memory_under_its_pid_until_signalled(box, capsys) -> None:  # type: ignore[no-untyped-def]
    before = _node1_pages(box)
    proc = _start(box, "-m", "1", "stress", "-m", "1", "--vm-bytes", "16M", "--vm-keep", "-t", "600")
    assert _node1_pages(box) - before >= 4096  # the worker's 16 MiB on node 1, while the shim lives
    assert main(["numastat", "-p", str(proc.pid)]) == 0  # $! names the simulated stress
    out = capsys.readouterr().out
    assert f"for PID {proc.pid} (stress)" in out
    proc.send_signal(signal.SIGTERM)  # kill $!
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and stdout.startswith(f"stress: info: [{proc.pid}] dispatching")
    assert _node1_pages(box) == before and not live.running(box / "machines" / "box")
    main(["numastat", "-p", str(proc.pid)])  # gone: numastat says so as the real one does
    assert f"Can't read /proc/{proc.pid}/numa_maps" in capsys.readouterr().err


def test_a_killed_shim_is_reaped_by_the_next_command(box, capsys) -> None:  # type: ignore[no-untyped-def]
    before = _node1_pages(box)
    proc = _start(box, "-m", "1", "sleep", "600")
    proc.kill()  # SIGKILL: the shim cannot clean up
    proc.communicate(timeout=60)
    assert main(["numastat"]) == 0  # any command reaps it first
    capsys.readouterr()
    with MachineStore(box / "machines").session("box", save=False) as kernel:
        assert proc.pid not in kernel.tasks
    assert _node1_pages(box) == before


def test_a_program_that_ends_frees_its_memory_and_exits_zero(box, capsys) -> None:  # type: ignore[no-untyped-def]
    before = _node1_pages(box)
    done = subprocess.run([str(box / "bin" / "numactl"), "-m", "1", "sleep", "0.3"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert _node1_pages(box) == before and not live.running(box / "machines" / "box")


def test_program_durations() -> None:
    kernel = Kernel(glueless(2))
    run = run_numactl(kernel, ["memhog", "100m"])
    assert run.program_duration_s == pytest.approx(25600 / kernel.config.fault_pages_per_s)
    assert run_numactl(kernel, ["sleep", "1.5", "1m"]).program_duration_s == 61.5
    assert run_numactl(kernel, ["sleep", "inf"]).program_running
    bad = run_numactl(kernel, ["sleep", "x"])
    assert (bad.exit_code, bad.stderr) == (1, "sleep: invalid time interval 'x'\nTry 'sleep --help' for more information.\n")
    assert run_numactl(kernel, ["sleep"]).stderr.startswith("sleep: missing operand\n")
    run = run_numactl(kernel, ["stress", "-m", "2", "--vm-bytes", "1M", "-t", "7"])
    assert run.program_duration_s == 7.0 and run.exit_code == 0
    assert not [t for t in kernel.tasks.values() if t.comm == "stress"]  # a fresh kernel's run: they exited


def test_a_given_pid_is_taken_and_the_counter_skips_it() -> None:
    kernel = Kernel(glueless(2))
    task = kernel.spawn("shim", pid=1001)
    assert task.pid == 1001 and [kernel.spawn("a").pid, kernel.spawn("b").pid] == [1000, 1002]
    with pytest.raises(Exception, match="pid 1001 is in use"):
        kernel.spawn("again", pid=1001)


def test_a_damaged_list_of_running_programs_is_refused_with_the_reset_hint(box, capsys) -> None:  # type: ignore[no-untyped-def]
    (box / "machines" / "box" / live.FILE_NAME).write_text("[1, 2")
    assert main(["numastat"]) == 2
    err = capsys.readouterr().err
    assert "live.json: not the machine's list of running programs" in err and "numasim machine reset box" in err
    assert main(["machine", "reset", "box"]) == 0  # the running programs went with the old kernel
    assert main(["numastat"]) == 0
