"""Persistent simulated machines: numasim machine start|stop|reset|list|env, NUMASIM_MACHINE (numasim/persist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from numasim.errors import MachineStateError
from numasim.kernel.kernel import Kernel
from numasim.persist import BootOptions, MachineStore, dump_kernel, load_kernel
from numasim.topology.builders import glueless
from tests.cli.machines import run_cli


def test_a_started_machine_keeps_processes_segments_and_counters(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "box", "--sysctl", "vm.nr_hugepages=8")
    assert code == 0 and out.startswith(f"started box (seed-003-2node) in {state / 'box'}")
    assert run_cli(capsys, "machine", "env", "box")[1] == "export NUMASIM_MACHINE=box\nexport NUMASIM_STATE_DIR=" + str(state) + "\n"
    monkeypatch.setenv("NUMASIM_MACHINE", "box")
    # a shared memory segment outlives the command that made it (numactl's own shmtest needs this)
    assert run_cli(capsys, "numactl", "--length", "8m", "--shm", "A", "--interleave=all")[0] == 0
    assert run_cli(capsys, "numactl", "--shm", "A", "--dump")[1] == "0000000000000000-0000000000800000: interleave : 0 1 \n"
    # a still-running program keeps its memory; later commands see it and move it; numactl prints only numactl's
    code, out, _ = run_cli(capsys, "numactl", "--membind=1", "--", "stress", "-m", "1", "--vm-bytes", "64M", "--vm-keep")
    assert code == 0 and out.startswith("stress: info: [") and "numa_hit" not in out
    stress = int(out.split("[")[1].split("]")[0])  # this process's PID: the shell's $! on a real shim
    with MachineStore(state).session("box", save=False) as kernel:
        (worker,) = [pid for pid, t in kernel.tasks.items() if t.comm == "stress" and pid != stress]
    node1 = run_cli(capsys, "numastat", "-p", str(worker))[1].splitlines()[-1].split()
    assert float(node1[2]) >= 64.0  # Total row: node 1
    assert run_cli(capsys, "numactl", "--", "migratepages", str(worker), "1", "0")[0] == 0
    total = run_cli(capsys, "numastat", "-p", str(worker))[1].splitlines()[-1].split()
    assert float(total[1]) >= 64.0 and float(total[2]) < 0.1
    code, out, _ = run_cli(capsys, "machine", "list")
    assert code == 0 and out.splitlines()[1].split()[:4] == ["box", "seed-003-2node", "6.12", "2"]  # stress and its worker
    # reset: a fresh kernel with the same boot options (the pool is back, the segment and processes gone)
    assert run_cli(capsys, "machine", "reset", "box")[0] == 0
    code, _, err = run_cli(capsys, "numactl", "--shm", "A", "--dump")
    assert code == 1 and "need a --length to create a sysv shared memory segment" in err
    with MachineStore(state).session("box") as kernel:
        assert kernel.hugetlb.free() == 8 and not [t for t in kernel.tasks.values() if t.comm == "stress"]
    assert run_cli(capsys, "machine", "stop", "box")[0] == 0
    assert run_cli(capsys, "machine", "list")[1].startswith("no machine started")


def test_errors_say_how_to_recover(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMASIM_MACHINE", "nosuch")
    code, _, err = run_cli(capsys, "numastat")
    assert code == 2 and "machine nosuch is not started" in err and "numasim machine start MACHINE --name nosuch" in err
    monkeypatch.delenv("NUMASIM_MACHINE")
    assert run_cli(capsys, "machine", "start", "seed-003-2node")[0] == 0  # named after the machine
    code, _, err = run_cli(capsys, "machine", "start", "seed-003-2node")
    assert code == 2 and "already started" in err and "numasim machine reset seed-003-2node" in err
    monkeypatch.setenv("NUMASIM_MACHINE", "seed-003-2node")
    code, _, err = run_cli(capsys, "numactl", "--thp", "always", "--show")
    assert code == 2 and "--thp: machine seed-003-2node (NUMASIM_MACHINE) is already booted" in err
    (state / "seed-003-2node" / "kernel.state").write_bytes(b"garbage")
    code, _, err = run_cli(capsys, "numastat")
    assert code == 2 and "not a saved numasim kernel state" in err and "numasim machine reset seed-003-2node" in err
    assert run_cli(capsys, "machine", "reset", "seed-003-2node")[0] == 0 and run_cli(capsys, "numastat")[0] == 0
    # --machine still boots a fresh kernel of its own
    assert run_cli(capsys, "numastat", "--machine", "seed-003-2node")[0] == 0
    for bad, says in ((["machine", "start", "seed-003-2node", "--name", "../x"], "machine name '../x'"),
                      (["machine", "start", "seed-003-2node", "--name", "y", "--sysctl", "vm.bogus=1"], "vm.bogus")):
        code, _, err = run_cli(capsys, *bad)
        assert code == 2 and says in err
    assert not (state / "y").exists()  # a machine that could not boot leaves nothing behind


def test_a_state_from_another_numasim_is_refused() -> None:
    data = dump_kernel(Kernel(glueless(2)))
    head, rest = data.split(b"\n", 1)
    old = head.replace(b'"version": 1', b'"version": 0')
    with pytest.raises(MachineStateError, match="state format 0.*does not read it; reset"):
        load_kernel(old + b"\n" + rest, "x", "reset")
    with pytest.raises(MachineStateError, match="damaged"):
        load_kernel(head + b"\n" + rest[: len(rest) // 2], "x")


def test_concurrent_commands_never_corrupt_the_state(state) -> None:  # type: ignore[no-untyped-def]
    """Two shells creating segments on one machine at once: every segment is there afterwards (the lock)."""
    store = MachineStore(state)
    store.start("box", BootOptions(machine="seed-003-2node"))
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state), "NUMASIM_MACHINE": "box"}
    script = ("import sys\nfrom numasim.cli import main\n"
              "for k in range(4):\n"
              "    assert main(['numactl', '--length', '1m', '--shm', f'{sys.argv[1]}{k}', '--interleave=all']) == 0\n")  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", script, tag], env=env, stderr=subprocess.DEVNULL)
             for tag in ("a", "b")]  # fmt: skip
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    with store.session("box") as kernel:
        assert sorted(seg.key[0] for seg in kernel.shm_segments.values()) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]


def test_machine_files_are_kept_by_absolute_path(state, tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    box = tmp_path / "box.txt"
    box.write_text((Path(__file__).parents[1] / "data" / "topology" / "numactl-seed-003.txt").read_text())
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "machine", "start", "box.txt", "--name", "mine")[0] == 0
    assert MachineStore(state).list()[0].options.machine == str(box.resolve())
    monkeypatch.chdir(state)  # a later command elsewhere still finds the machine
    monkeypatch.setenv("NUMASIM_MACHINE", "mine")
    assert run_cli(capsys, "numactl", "--hardware")[1].startswith("available: 2 nodes (0-1)")


def test_shims_run_the_tools_on_the_machine(state, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A script's numactl / numastat / memhog / migratepages are the simulated machine's, output and status."""
    MachineStore(state).start("box", BootOptions(machine="seed-003-2node"))
    shims = tmp_path / "bin"
    assert run_cli(capsys, "shims", str(shims), "--machine", "box")[0] == 0
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state), "PATH": f"{shims}:{os.environ['PATH']}"}
    env.pop("NUMASIM_MACHINE", None)

    def sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=120)

    assert sh("echo $(numactl --physcpubind=3 printcpu)").stdout == "3\n"  # nothing but the program's output
    assert sh("numactl --length 4m --shm A --membind=1 && numactl --shm A --dump").stdout == \
        "0000000000000000-0000000000400000: bind : 1 \n"
    bad = sh("numactl --bogus")
    assert bad.returncode == 1 and bad.stderr.startswith("numactl: unrecognized option '--bogus'\nusage: numactl")
    assert sh("memhog 2m").returncode == 0
    assert sh("numastat -n").stdout.splitlines()[1].startswith("Per-node numastat info (in MBs):")
    assert run_cli(capsys, "shims", str(shims), "--machine", "nosuch")[0] == 2


# --- from a review -----------------------------------------------------------------------------------------------
def test_lazy_package_names_stay_the_functions() -> None:
    """numasim.topology.routing is a function and a submodule: importing the submodule must not shadow it."""
    import importlib

    importlib.import_module("numasim.topology.routing")
    importlib.import_module("numasim.workload.run")  # imports numasim.workload.generate, the module
    from numasim.topology import reconfigure, routing
    from numasim.workload import generate

    assert callable(routing) and callable(reconfigure) and callable(generate)
    assert not isinstance(routing, type(importlib))


def test_shims_pass_every_argument_to_the_program(state, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    MachineStore(state).start("box", BootOptions(machine="seed-003-2node"))
    shims = tmp_path / "bin"
    run_cli(capsys, "shims", str(shims), "--machine", "box")
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state), "PATH": f"{shims}:{os.environ['PATH']}"}
    run = subprocess.run(["numactl", "--machine", "seed-000-4node", "-H"], env=env, capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.startswith("numactl: unrecognized option '--machine'")
    run = subprocess.run(["numactl", "-h"], env=env, capture_output=True, text=True)
    assert run.returncode == 1 and "Usage: numasim" not in run.stdout + run.stderr
    run = subprocess.run(["numactl", "--membind=1", "--", "printcpu"], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().isdigit()


def test_persistent_commands_behave_as_on_a_real_box(state, tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    box = tmp_path / "box.txt"
    box.write_text((Path(__file__).parents[1] / "data" / "topology" / "numactl-seed-003.txt").read_text())
    assert run_cli(capsys, "machine", "start", str(box), "--name", "mine")[0] == 0
    monkeypatch.setenv("NUMASIM_MACHINE", "mine")
    # calibration options find the machine file the machine was started from
    assert run_cli(capsys, "numactl", "--nominal", "--show")[0] == 0
    # an --after program that finished exits, as the same program run as the command does
    assert run_cli(capsys, "numastat", "--after", "memhog 64m")[0] == 0
    with MachineStore(state).session("mine") as kernel:
        assert not [t for t in kernel.tasks.values() if t.comm == "memhog"]
    # --json reports what the program had when it finished, and only this command's OOM kills
    code, out, _ = run_cli(capsys, "numactl", "--json", "--membind=1", "--", "memhog", "16m")
    report = json.loads(out)
    assert code == 0 and sum(report["pages_per_node"].values()) >= 16 * 256 and report["oom_kills"] == []
    # a command that changes nothing does not rewrite the state
    path = state / "mine" / "kernel.state"
    before = path.stat().st_mtime_ns
    assert run_cli(capsys, "numastat")[0] == 0 and path.stat().st_mtime_ns == before


def test_machine_names_and_leftovers(state, tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab\n")
    assert code == 2 and "machine name" in err
    # a directory a killed stop (or a racing command) left without machine.json does not block a new start
    (state / "lab").mkdir(parents=True)
    (state / "lab" / "lock").write_text("")
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    # an unreadable machine.json can still be stopped
    (state / "lab" / "machine.json").write_text("{broken")
    assert run_cli(capsys, "machine", "stop", "lab")[0] == 0 and not (state / "lab" / "machine.json").exists()
    # a relative NUMASIM_STATE_DIR is written out absolute
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMASIM_STATE_DIR", "rel")
    run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "r")
    assert run_cli(capsys, "machine", "env", "r")[1].splitlines()[1] == f"export NUMASIM_STATE_DIR={tmp_path / 'rel'}"


def test_a_loaded_mapping_still_faults_into_its_segment() -> None:
    """A mapping of a shm segment holds views of the segment's arrays; a saved kernel keeps that link."""
    k = Kernel(glueless(2))
    task = k.spawn("app")
    seg = k.shm_segments[int(k.shmget_key(("A", 0), 1 << 20, create=True).value["shmid"])]
    k.shmat(task, seg)
    k2 = load_kernel(dump_kernel(k), "x")
    task2 = k2.tasks[task.pid]
    vma = next(v for v in task2.mm.vmas if v.shm is not None)
    k2.touch(task2, vma.start, 1 << 20)
    assert (vma.shm.nodes >= 0).all()  # the faults landed in the segment, not in a copy
