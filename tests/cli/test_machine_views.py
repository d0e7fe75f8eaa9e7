"""A persistent machine's /sys and /proc as a real tree (numasim/persist/views.py, numasim/kernel/sysfs.py), and
``numasim machine exec`` showing it in a private mount namespace (numasim/persist/namespace.py)."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from numasim.kernel.kernel import Kernel
from numasim.persist import MachineStore
from numasim.persist.views import write_views
from numasim.topology.cpulist import parse_cpulist
from numasim.topology.io import load_machine, read_sysfs_node_tree
from numasim.topology.library import list_shipped
from tests.cli.machines import run_cli, stress_worker

ROOT = Path(__file__).resolve().parents[2]
NODE = "sys/devices/system/node"
CPU = "sys/devices/system/cpu"


def _numasim(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """numasim in a process of its own (real file descriptors, as a shell runs it)."""
    code = "import sys; from numasim.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120, check=False)  # fmt: skip


def _namespaces_permitted() -> bool:
    probe = "from numasim.persist.namespace import _enter_namespace; _enter_namespace()"
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, check=False).returncode == 0


needs_namespaces = pytest.mark.skipif(
    sys.platform != "linux" or not _namespaces_permitted(),
    reason="this system permits no private mount namespace (not root, and no unprivileged user namespaces)",
)


def _read(tree: Path, rel: str) -> str:
    return (tree / rel).read_text(encoding="utf-8")


def test_the_tree_has_linux_layout_and_agrees_with_numactl_hardware(state, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    tree = state / "lab" / "fs"
    assert tree.is_symlink()
    hardware = run_cli(capsys, "numactl", "--machine", "seed-003-2node", "--hardware")[1]
    for nid, cpus in re.findall(r"^node (\d+) cpus: ([\d ]+)$", hardware, re.MULTILINE):
        assert parse_cpulist(_read(tree, f"{NODE}/node{nid}/cpulist")) == [int(c) for c in cpus.split()]
        for cpu in cpus.split():
            link = tree / NODE / f"node{nid}" / f"cpu{cpu}"
            assert os.readlink(link) == f"../../cpu/cpu{cpu}" and link.resolve() == (tree / CPU / f"cpu{cpu}").resolve()
            assert os.readlink(tree / CPU / f"cpu{cpu}" / f"node{nid}") == f"../../node/node{nid}"
            bus = tree / "sys/bus/cpu/devices" / f"cpu{cpu}"
            assert os.readlink(bus) == f"../../../devices/system/cpu/cpu{cpu}" and bus.resolve().is_dir()
    rows = re.findall(r"^\s+(\d+):((?:\s+\d+)+)$", hardware.split("node distances:")[1], re.MULTILINE)
    for nid, row in rows:
        assert _read(tree, f"{NODE}/node{nid}/distance") == " ".join(row.split()) + "\n"
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        assert _read(tree, f"{NODE}/{name}") == "0-1\n"
    assert _read(tree, f"{NODE}/has_generic_initiator") == "\n"
    assert _read(tree, f"{NODE}/node0/cpumap") == "03f03f\n"  # cpus 0-5,12-17 of 24: %*pb over nr_cpu_ids bits
    assert _read(tree, f"{NODE}/node0/numastat").splitlines()[0] == "numa_hit 0"
    assert _read(tree, f"{NODE}/node1/meminfo").startswith("Node 1 MemTotal:   ")
    assert _read(tree, f"{CPU}/online") == _read(tree, f"{CPU}/present") == "0-23\n"
    assert _read(tree, f"{CPU}/offline") == "\n" and _read(tree, f"{CPU}/kernel_max") == "8191\n"
    assert not (tree / CPU / "cpu0" / "online").exists() and _read(tree, f"{CPU}/cpu7/online") == "1\n"
    assert _read(tree, f"{CPU}/cpu7/topology/package_cpus_list") == "6-11,18-23\n"
    assert _read(tree, f"{CPU}/cpu7/topology/thread_siblings_list") == "7\n"
    assert _read(tree, "proc/meminfo").startswith("MemTotal:       ")
    assert _read(tree, "proc/buddyinfo") == run_cli(capsys, "kernel", "buddyinfo", "seed-003-2node")[1]
    assert _read(tree, "proc/zoneinfo") == run_cli(capsys, "kernel", "zoneinfo", "seed-003-2node")[1]


def _field(text: str, name: str) -> int:
    return int(re.search(rf"^(?:Node \d+ )?{re.escape(name)}:?\s+(\d+)", text, re.MULTILINE).group(1))  # type: ignore[union-attr]


def test_the_tree_follows_each_command(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    tree = state / "lab" / "fs"
    hit_before = _field(_read(tree, f"{NODE}/node1/numastat"), "numa_hit")
    vm_before = _field(_read(tree, "proc/vmstat"), "numa_hit")
    monkeypatch.setenv("NUMASIM_MACHINE", "lab")
    assert run_cli(capsys, "numactl", "-m", "1", "memhog", "10m")[0] == 0
    # memhog has exited (its memory is free again); the allocations are counted on node 1
    assert _field(_read(tree, f"{NODE}/node1/numastat"), "numa_hit") - hit_before >= 2560
    assert _field(_read(tree, "proc/vmstat"), "numa_hit") - vm_before >= 2560
    assert _field(_read(tree, f"{NODE}/node1/vmstat"), "numa_hit") == _field(_read(tree, f"{NODE}/node1/numastat"), "numa_hit")
    used_before = _field(_read(tree, f"{NODE}/node1/meminfo"), "MemUsed")
    code, out, _ = run_cli(capsys, "numactl", "-m", "1", "stress", "-m", "1", "--vm-bytes", "20m", "--vm-keep")
    assert code == 0
    worker = stress_worker(out)
    assert _field(_read(tree, f"{NODE}/node1/meminfo"), "MemUsed") - used_before >= 20 * 1024
    assert re.search(r" anon=5\d\d\d dirty=5\d\d\d N1=5\d\d\d kernelpagesize_kB=4$", _read(tree, f"proc/{worker}/numa_maps"), re.MULTILINE)
    status = _read(tree, f"proc/{worker}/status")
    assert f"\nPid:\t{worker}\n" in status and "Mems_allowed_list:\t0-1\n" in status and "Cpus_allowed_list:\t0-23\n" in status
    # a reader (numastat) does not rewrite the tree; reset does
    generation = tree.resolve().name
    assert run_cli(capsys, "numastat")[0] == 0 and tree.resolve().name == generation
    assert run_cli(capsys, "machine", "reset", "lab")[0] == 0
    assert tree.resolve().name != generation and not (tree / "proc" / str(worker)).exists()


def test_a_reader_never_sees_half_a_tree(state) -> None:  # type: ignore[no-untyped-def]
    """Every generation a reader finds through ``fs`` is whole: its per-node counters add up to its /proc/vmstat,
    while commands keep replacing it; only the current and the previous generation stay on disk."""
    store = MachineStore(state)
    from numasim.persist import BootOptions

    store.start("lab", BootOptions(machine="seed-003-2node"))
    done = threading.Event()
    seen: set[str] = set()
    errors: list[str] = []

    def read() -> None:
        while not done.is_set():
            tree = (state / "lab" / "fs").resolve()  # resolve once: one generation
            try:
                nodes = sum(_field(_read(tree, f"{NODE}/node{n}/numastat"), "numa_hit") for n in (0, 1))
                total = _field(_read(tree, "proc/vmstat"), "numa_hit")
                cpus = _read(tree, "sys/bus/cpu/devices/cpu23/topology/core_cpus_list")
            except OSError as exc:
                # a reader slower than two writes finds its generation retired (only the current one and the
                # one before stay): that is no half tree; a file missing from a generation still kept is
                now = int((state / "lab" / "fs").resolve().name.split(".")[1])
                if now < int(tree.name.split(".")[1]) + 2:
                    errors.append(f"{tree.name}: {exc}")
                continue
            if nodes != total or cpus != "23\n":
                errors.append(f"{tree.name}: nodes {nodes} != vmstat {total}, or cpu23 {cpus!r}")
            seen.add(tree.name)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for k in range(12):
            with store.session("lab") as kernel:
                task = kernel.spawn("writer", cpu=0)
                vma = kernel.mmap(task, 64 * 4096)
                kernel.touch(task, vma.start, (k + 1) * 4096)
    finally:
        done.set()
        reader.join()
    assert not errors, errors[:3]
    assert len(seen) >= 2
    generations = sorted(p.name for p in (state / "lab").iterdir() if re.fullmatch(r"fs\.\d+", p.name))
    assert generations == ["fs.12", "fs.13"]


def test_a_killed_write_leaves_the_previous_tree(state, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    directory = state / "box"
    directory.mkdir(parents=True)
    kernel = Kernel(load_machine("seed-003-2node"))
    first = write_views(directory, kernel)
    import numasim.persist.views as views

    def broken(directory: Path, root: Path, kernel: Kernel) -> str:
        (root / "proc").mkdir()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(views, "_fill", broken)
    with pytest.raises(OSError, match="No space left on device"):
        write_views(directory, kernel)
    assert (directory / "fs").resolve() == first and (first / "proc/meminfo").exists()
    monkeypatch.undo()
    second = write_views(directory, kernel)  # the partial tree of the failed write is swept
    static = [p.name for p in directory.iterdir() if p.name.startswith("fs.static.")]
    assert sorted(p.name for p in directory.iterdir()) == sorted(["fs", first.name, second.name, *static])
    assert len(static) == 1  # the cpu subtrees, written once and shared


@pytest.mark.parametrize("name", sorted(m.name for m in list_shipped()))
def test_every_shipped_machines_tree_is_self_consistent(name: str, tmp_path: Path) -> None:
    kernel = Kernel(load_machine(name))
    tree = write_views(tmp_path, kernel)
    nodes = sorted(int(p.name[4:]) for p in (tree / NODE).iterdir() if re.fullmatch(r"node\d+", p.name))
    owner: dict[int, int] = {}
    for nid in nodes:
        cpus = parse_cpulist(_read(tree, f"{NODE}/node{nid}/cpulist"))
        mask = int(_read(tree, f"{NODE}/node{nid}/cpumap").replace(",", ""), 16)
        assert mask == sum(1 << c for c in cpus)
        for cpu in cpus:
            assert cpu not in owner, f"cpu {cpu} on nodes {owner.get(cpu)} and {nid}"
            owner[cpu] = nid
        assert sorted(int(p.name[3:]) for p in (tree / NODE / f"node{nid}").glob("cpu[0-9]*")) == cpus
    assert sorted(owner) == parse_cpulist(_read(tree, f"{CPU}/online")) == kernel.machine.cpus
    assert parse_cpulist(_read(tree, f"{NODE}/has_cpu")) == sorted(set(owner.values()))
    # every symlink of the machine's directory: the generation's and those of the shared cpu subtrees
    links = [Path(top) / name for top, dirs, names in os.walk(tmp_path) for name in [*dirs, *names]
             if (Path(top) / name).is_symlink()]  # fmt: skip
    assert len(links) >= 3 * len(owner)  # nodeN/cpuK, cpuK/nodeN, the bus's cpuK
    for link in links:
        target = link.resolve(strict=True)  # resolves, and inside the machine's directory
        assert target.is_relative_to(tmp_path.resolve()), f"{link} -> {os.readlink(link)}"
    for cpu, nid in owner.items():
        assert (tree / CPU / f"cpu{cpu}" / f"node{nid}").resolve() == (tree / NODE / f"node{nid}").resolve()
    # the tree reads back as the same machine (what `numasim topo import` of a real /sys would give)
    back = read_sysfs_node_tree(tree / NODE)
    assert [n.cpus for n in back.nodes] == [n.cpus for n in kernel.machine.nodes]
    assert back.slit() == kernel.machine.slit()


def test_exec_on_a_machine_that_is_not_started(state, capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(capsys, "machine", "exec", "nope", "--", "true")
    assert code == 2 and "machine nope is not started" in err and "numasim machine start MACHINE --name nope" in err


def test_exec_says_what_the_os_did_not_permit(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import numasim.persist.namespace as namespace

    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0

    def refused(flags: int, call: str) -> None:
        raise OSError(errno.EPERM, f"{call}: Operation not permitted (EPERM)")

    monkeypatch.setattr(namespace, "_unshare", refused)  # the forked child inherits the refusal
    code, out, err = run_cli(capsys, "machine", "exec", "lab", "--", "echo", "ran")
    assert code == namespace.EXIT_SETUP_FAILED and out == ""
    assert err.count("\n") == 1 and err.startswith("numasim: error: machine exec: unshare(CLONE_NEWNS): Operation not permitted")
    assert "CAP_SYS_ADMIN" in err
    assert not list((state / "lab").glob(".exec.*"))


@needs_namespaces
def test_exec_shows_the_simulated_machine(state, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT"):  # nproc honours them, as coreutils' does
        monkeypatch.delenv(name, raising=False)
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    script = "cat /sys/devices/system/node/online; nproc; ls /sys/devices/system/node/node0"
    # in process (output relayed through sys.stdout) ...
    code, out, _ = run_cli(capsys, "machine", "exec", "lab", "--", "sh", "-c", script)
    node0 = sorted(["cpulist", "cpumap", "distance", "hugepages", "meminfo", "numastat", "vmstat"]
                   + [f"cpu{c}" for c in [*range(6), *range(12, 18)]])  # fmt: skip
    assert code == 0 and out.splitlines() == ["0-1", "24", *sorted(node0)]
    # ... and as a shell runs it; the host's /sys and /proc are untouched afterwards
    host = Path("/proc/meminfo").read_text(encoding="utf-8").splitlines()[0]
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state)}
    got = _numasim("machine", "exec", "lab", "--", "sh", "-c",
                   "head -1 /proc/meminfo; nproc --all --ignore=4; OMP_NUM_THREADS=3 nproc; nproc --ignore=99; "
                   "readlink /sys/bus/cpu/devices/cpu3; echo $NUMASIM_MACHINE; exit 7", env=env)  # fmt: skip
    meminfo = _read(state / "lab" / "fs", "proc/meminfo").splitlines()[0]
    assert got.returncode == 7, got.stderr
    assert got.stdout.splitlines() == [meminfo, "20", "3", "1", "../../../devices/system/cpu/cpu3", "lab"]
    assert Path("/proc/meminfo").read_text(encoding="utf-8").splitlines()[0] == host
    assert str(state) not in Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    bad = _numasim("machine", "exec", "lab", "--", "nproc", "--ignore=x", env=env)
    assert bad.returncode == 1 and bad.stderr == "nproc: invalid number: 'x'\n"
    missing = _numasim("machine", "exec", "lab", "--", "no-such-program", env=env)
    assert missing.returncode == 127 and missing.stderr == "numasim: error: machine exec: cannot run 'no-such-program': No such file or directory\n"


@needs_namespaces
def test_a_command_inside_exec_refreshes_what_the_script_reads(state, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state)}
    numasim = f"{sys.executable} -c 'import sys; from numasim.cli import main; sys.exit(main(sys.argv[1:]))'"
    script = (f"grep numa_hit /sys/devices/system/node/node1/numastat; {numasim} numactl -m 1 memhog 10m >/dev/null; "
              "grep numa_hit /sys/devices/system/node/node1/numastat")  # fmt: skip
    got = _numasim("machine", "exec", "lab", "--", "sh", "-c", script, env=env)
    assert got.returncode == 0, got.stderr
    before, after = (int(line.split()[1]) for line in got.stdout.splitlines())
    assert after - before >= 2560
    assert not list((state / "lab").glob(".exec.*"))  # the pin went with the exec


@needs_namespaces
def test_nproc_counts_the_cpus_a_pinned_shell_left_its_children(state, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # numactl's bind_range pins its shell with taskset -p -c LIST $$; every later command inherits it, nproc too.
    assert run_cli(capsys, "machine", "start", "seed-003-2node", "--name", "lab")[0] == 0
    assert run_cli(capsys, "shims", str(tmp_path / "bin"), "--machine", "lab")[0] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")} | {"NUMASIM_STATE_DIR": str(state)}
    script = (f"nproc; PATH={tmp_path / 'bin'}:$PATH; taskset -p -c 0-3 $$ >/dev/null; nproc; "
              "sh -c 'nproc; nproc --all'")  # fmt: skip
    got = _numasim("machine", "exec", "lab", "--", "sh", "-c", script, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["24", "4", "4", "24"]
