"""Persistent simulated machines: numasim machine start|stop|reset|list|env, NUMASIM_MACHINE (numasim/persist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.errors import MachineStateError
from numasim.kernel.kernel import Kernel
from numasim.persist import BootOptions, MachineStore, dump_kernel, load_kernel
from numasim.topology.builders import glueless


@pytest.fixture
def state(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    return tmp_path / "machines"


def _run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_started_machine_keeps_processes_segments_and_counters(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = _run(capsys, "machine", "start", "seed-003-2node", "--name", "box", "--sysctl", "vm.nr_hugepages=8")
    assert code == 0 and out.startswith(f"started box (seed-003-2node) in {state / 'box'}")
    assert _run(capsys, "machine", "env", "box")[1] == "export NUMASIM_MACHINE=box\nexport NUMASIM_STATE_DIR=" + str(state) + "\n"
    monkeypatch.setenv("NUMASIM_MACHINE", "box")
    # a shared memory segment outlives the command that made it (numactl's own shmtest needs this)
    assert _run(capsys, "numactl", "--length", "8m", "--shm", "A", "--interleave=all")[0] == 0
    assert _run(capsys, "numactl", "--shm", "A", "--dump")[1] == "0000000000000000-0000000000800000: interleave : 0 1 \n"
    # a still-running program keeps its memory; later commands see it and move it; numactl prints only numactl's
    code, out, _ = _run(capsys, "numactl", "--membind=1", "--", "stress", "-m", "1", "--vm-bytes", "64M", "--vm-keep")
    assert code == 0 and out.startswith("stress: info: [") and "numa_hit" not in out
    worker = int(out.split("[")[1].split("]")[0]) + 1
    node1 = _run(capsys, "numastat", "-p", str(worker))[1].splitlines()[-1].split()
    assert float(node1[2]) >= 64.0  # Total row: node 1
    assert _run(capsys, "numactl", "--", "migratepages", str(worker), "1", "0")[0] == 0
    total = _run(capsys, "numastat", "-p", str(worker))[1].splitlines()[-1].split()
    assert float(total[1]) >= 64.0 and float(total[2]) < 0.1
    code, out, _ = _run(capsys, "machine", "list")
    assert code == 0 and out.splitlines()[1].split()[:4] == ["box", "seed-003-2node", "6.12", "2"]  # stress and its worker
    # reset: a fresh kernel with the same boot options (the pool is back, the segment and processes gone)
    assert _run(capsys, "machine", "reset", "box")[0] == 0
    code, _, err = _run(capsys, "numactl", "--shm", "A", "--dump")
    assert code == 1 and "need a --length to create a sysv shared memory segment" in err
    with MachineStore(state).session("box") as kernel:
        assert kernel.hugetlb.free() == 8 and not [t for t in kernel.tasks.values() if t.comm == "stress"]
    assert _run(capsys, "machine", "stop", "box")[0] == 0
    assert _run(capsys, "machine", "list")[1].startswith("no machine started")


def test_errors_say_how_to_recover(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMASIM_MACHINE", "nosuch")
    code, _, err = _run(capsys, "numastat")
    assert code == 2 and "machine nosuch is not started" in err and "numasim machine start MACHINE --name nosuch" in err
    monkeypatch.delenv("NUMASIM_MACHINE")
    assert _run(capsys, "machine", "start", "seed-003-2node")[0] == 0  # named after the machine
    code, _, err = _run(capsys, "machine", "start", "seed-003-2node")
    assert code == 2 and "already started" in err and "numasim machine reset seed-003-2node" in err
    monkeypatch.setenv("NUMASIM_MACHINE", "seed-003-2node")
    code, _, err = _run(capsys, "numactl", "--thp", "always", "--show")
    assert code == 2 and "--thp: machine seed-003-2node (NUMASIM_MACHINE) is already booted" in err
    (state / "seed-003-2node" / "kernel.state").write_bytes(b"garbage")
    code, _, err = _run(capsys, "numastat")
    assert code == 2 and "not a saved numasim kernel state" in err and "numasim machine reset seed-003-2node" in err
    assert _run(capsys, "machine", "reset", "seed-003-2node")[0] == 0 and _run(capsys, "numastat")[0] == 0
    # --machine still boots a fresh kernel of its own
    assert _run(capsys, "numastat", "--machine", "seed-003-2node")[0] == 0
    for bad, says in ((["machine", "start", "seed-003-2node", "--name", "../x"], "machine name '../x'"),
                      (["machine", "start", "seed-003-2node", "--name", "y", "--sysctl", "vm.bogus=1"], "vm.bogus")):
        code, _, err = _run(capsys, *bad)
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
    assert _run(capsys, "machine", "start", "box.txt", "--name", "mine")[0] == 0
    assert MachineStore(state).list()[0].options.machine == str(box.resolve())
    monkeypatch.chdir(state)  # a later command elsewhere still finds the machine
    monkeypatch.setenv("NUMASIM_MACHINE", "mine")
    assert _run(capsys, "numactl", "--hardware")[1].startswith("available: 2 nodes (0-1)")


def test_shims_run_the_tools_on_the_machine(state, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A script's numactl / numastat / memhog / migratepages are the simulated machine's, output and status."""
    MachineStore(state).start("box", BootOptions(machine="seed-003-2node"))
    shims = tmp_path / "bin"
    assert _run(capsys, "shims", str(shims), "--machine", "box")[0] == 0
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
    assert _run(capsys, "shims", str(shims), "--machine", "nosuch")[0] == 2
