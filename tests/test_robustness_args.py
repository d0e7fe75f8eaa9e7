"""Issue 13, findings 6-10: the virtual programs' argument errors read like the real tools' usage errors, and
cpu/node lists in machine files, sysfs trees and numactl -H text name the field and the value, never Python's
own exception text."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.cpulist import MAX_LIST_ID, parse_cpulist
from numasim.topology.io.sysfs import write_sysfs_node_tree
from numasim.topology.io.toml_format import save_machine_toml

PYTHON_TEXT = ("Traceback", "invalid literal", "ValueError", "KeyError", "IndexError", "OverflowError", "base 0")


def _clean(text: str) -> None:
    for needle in PYTHON_TEXT:
        assert needle not in text, text


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return path


def _numactl(small: Path, capsys: pytest.CaptureFixture[str], *program: str) -> tuple[int, str, str]:
    code = main(["numactl", "--machine", str(small), "--nominal", "--", *program])
    out, err = capsys.readouterr()
    _clean(out + err)
    return code, out, err


# --- 6-8: stress and memhog ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["-m", "1", "--vm-bytes", "1Q"], "(647) unrecognized suffix: Q"),
        (["-m", "1", "--vm-bytes", ""], "(622) invalid string"),
        (["-m", "x"], "(647) unrecognized suffix: x"),
        (["-m", "k"], "(654) invalid number: k"),
        (["-m"], "(62) missing argument to option '--vm'"),
        (["-m", "--vm-keep"], "(62) missing argument to option '--vm'"),
        (["-m", "-1"], "(184) invalid number of vm hogs: -1"),
        (["-m", "0"], "(184) invalid number of vm hogs: 0"),
        (["-m", "1", "--vm-bytes", "0"], "(194) invalid vm byte value: 0"),
        (["-m", "1", "-t", "0"], "(154) invalid timeout value: 0s"),
        (["-m", "1", "-t", "5x"], "(705) unrecognized suffix: x"),
        (["-m", "1", "--vm-stride", "0"], "(204) invalid stride value: 0"),
        (["-m", "1", "--vm-hang", "-1"], "(214) invalid value: -1"),
        (["--bogus"], "(244) unrecognized option: --bogus"),
    ],
)
def test_stress_argument_errors_are_stress_s(
    small: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    code, out, err = _numactl(small, capsys, "stress", *args)
    assert code == 1
    assert err.splitlines()[0] == f"stress: FAIL: [1000] {line}"
    assert "dispatching hogs" not in out


def test_stress_numbers_parse_like_atoll(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _numactl(small, capsys, "stress", "-m", "0x2", "--vm-bytes", "0x10k", "-t", "1m")
    assert code == 0
    assert "dispatching hogs: 0 cpu, 0 io, 2 vm, 0 hdd" in out
    assert "successful run completed in 60s" in out  # atoll_s: 1m is 60 seconds


@pytest.mark.parametrize(
    ("args", "dots"), [(["-rx", "1M"], 0), (["-r-3", "1M"], 0), (["-r2", "1M"], 2), (["-r", "1M"], 0)]
)
def test_memhog_repeat_is_atoi(small: Path, capsys: pytest.CaptureFixture[str], args: list[str], dots: int) -> None:
    code, out, _ = _numactl(small, capsys, "memhog", *args)
    assert code == 0
    assert out.split("Per-node")[0].count(".") == dots  # numastat -p follows the program


def test_memhog_absurd_repeat_is_refused(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _numactl(small, capsys, "memhog", "-r99999999999", "1M")
    assert code == 1
    assert err.startswith("memhog: numasim: -r1215752191: at most 1000 passes are simulated")


# --- 9: alloc ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["--pages", "a"], "alloc: --pages 'a' is not a number of pages"),
        (["--pages", "4", "--touch-cpu", "!0"], "alloc: --touch-cpu '!0' is not a cpu number"),
        (["--pages", "4", "--addr", "zz"], "alloc: --addr 'zz' is not an address (0x7f..., or decimal)"),
        (["--pages"], "alloc: option --pages needs a value"),
    ],
)
def test_alloc_bad_numbers(small: Path, capsys: pytest.CaptureFixture[str], args: list[str], first: str) -> None:
    code, _, err = _numactl(small, capsys, "alloc", *args)
    assert code == 2
    assert err.splitlines()[0] == first


# --- 9-10: cpu and node lists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("all", "item 'all' is not a number or a range a-b"),
        ("0-1,,5", "item '' is not a number or a range a-b"),
        ("0-x", "item '0-x' is not a number or a range a-b"),
        ("3-1", "item '3-1' is a range that runs backwards"),
        ("0-99999999999", f"id 99999999999 is above {MAX_LIST_ID}"),
        ("-1", "item '-1' is not a number or a range a-b"),
    ],
)
def test_parse_cpulist_messages(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_cpulist(text)
    assert str(info.value) == message


def test_machine_file_cpus_all(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small.write_text(small.read_text().replace('cpus = "0-1"', 'cpus = "all"'))
    assert main(["topo", "show", str(small)]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert err.strip() == f"numasim: error: {small}: nodes[0].cpus = 'all': item 'all' is not a number or a range a-b"


@pytest.mark.parametrize(
    ("member", "text", "needle"),
    [
        ("node0/cpulist", "0-x\n", "node0/cpulist:1: '0-x': item '0-x' is not a number or a range a-b"),
        ("online", "0-1,,5-\n", "online:1: not a node list: '0-1,,5-'"),
        ("has_memory", "0-99999999999\n", "id 99999999999 is above 65535"),
    ],
)
def test_corrupt_sysfs_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str, text: str, needle: str
) -> None:
    tree = tmp_path / "node"
    write_sysfs_node_tree(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), tree)
    (tree / member).write_text(text)
    assert main(["topo", "show", str(tree)]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert needle in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("available: 2 nodes (0-1)", "available: 2 nodes (0-x)", "bad node list '0-x': item '0-x' is not a number"),
        ("node 0 cpus: 0 1", "node 0 cpus: 0 x", "node 0 cpus: not a list of cpu numbers: '0 x'"),
    ],
)
def test_corrupt_numactl_hardware_lists(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, needle: str
) -> None:
    assert main(["topo", "hardware", str(small)]) == 0
    text = capsys.readouterr().out
    assert old in text
    path = tmp_path / "h.txt"
    path.write_text(text.replace(old, new))
    assert main(["topo", "show", str(path)]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert needle in err and err.count("\n") == 1


def test_cli_cpus_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("thread,address,is_write,size_bytes\n0,0x10000,0,64\n")
    for bad, needle in (("x", "item 'x' is not a number"), ("0-99999999", "id 99999999 is above 65535")):
        assert main(["run", "-m", "seed-003-2node", "-t", str(trace), "--cpus", bad, "--no-progress"]) == 2
        err = capsys.readouterr().err
        _clean(err)
        assert f"--cpus = '{bad}'" in err and needle in err



@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["ib_send_lat", "-n", "x"], "ib_send_lat: -n 'x' is not a number of iterations"),
        (["ib_send_bw", "-s", "1Q"], "ib_send_bw: -s '1Q' is not a message size in bytes (1, 64K, 8M ...)"),
        (["ib_send_bw", "-s", "0"], "ib_send_bw: -s '0' is not a message size in bytes (1, 64K, 8M ...)"),
    ],
)
def test_perftest_bad_numbers(small: Path, capsys: pytest.CaptureFixture[str], args: list[str], first: str) -> None:
    code, _, err = _numactl(small, capsys, *args)
    assert code == 1
    assert err.splitlines()[0] == first


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "-m", "seed-003-2node", "-w", "examples/workloads/pointer-chase.toml", "--nominal", "--seed", "-1"],
        ["trace", "generate", "--pattern", "random", "--accesses", "10", "--seed", "-1", "-o", "{tmp}/t.npz"],
        ["demo", "--seed", "-1"],
        ["calibrate", "x.md", "-m", "seed-003-2node", "-o", "{tmp}/c.json", "--seed", "-1"],
        ["calibrate", "x.md", "-m", "seed-003-2node", "-o", "{tmp}/c.json", "--bootstrap", "-1"],
    ],
    ids=["run", "trace-generate", "demo", "calibrate-seed", "calibrate-bootstrap"],
)
def test_negative_seed_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    # numpy's SeedSequence refused -1 with a traceback from deep inside workload generation
    root = Path(__file__).resolve().parents[1]
    args = [a.replace("{tmp}", str(tmp_path)).replace("examples/", f"{root}/examples/") for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert "Invalid value for '--" in err
    assert "greater than or equal to 0" in err or "-1 is below 0" in err
    assert not list(tmp_path.iterdir())
