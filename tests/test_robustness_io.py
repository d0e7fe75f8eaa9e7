"""QA findings on file input/output: unwritable destinations, short validation errors, TOML syntax errors,
format versions and inf/nan, real sysfs meminfo, calibrating from a probe directory, hwloc names."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.parsers.numastat import parse_numastat
from numasim.cli import main
from numasim.errors import CalibrationError, FormatError, OutputError, TopologyError
from numasim.fileio import atomic_path, atomic_write_text, check_output_path
from numasim.timing.model import load_calibration
from numasim.topology.builders import glueless
from numasim.topology.io import load_machine
from numasim.topology.io.hwloc import read_hwloc_xml
from numasim.topology.io.sysfs import write_sysfs_node_tree
from numasim.topology.io.toml_format import dumps_machine, loads_machine

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = str(REPO / "examples" / "workloads" / "pointer-chase.toml")
REAL_NODE_TREE = Path("/sys/devices/system/node")


@pytest.fixture
def afile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    return tmp_path


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and ".tmp" not in err
    assert "FileExistsError" not in err and "NotADirectoryError" not in err


# 1. atomic_path: clear errors, normal file mode -------------------------------------------------------------


def test_atomic_path_parent_is_a_file_names_target_and_cause(afile: Path) -> None:
    with pytest.raises(OutputError) as info:
        atomic_write_text("afile/r.json", "{}")
    msg = str(info.value)
    assert msg == "cannot write afile/r.json: afile is not a directory"
    assert not list(afile.glob(".*tmp"))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_atomic_path_in_proc_is_a_clear_error() -> None:
    with pytest.raises(OutputError, match=r"^cannot write /proc/numasim-r\.json: ") as info:
        atomic_write_text("/proc/numasim-r.json", "{}")
    assert ".tmp" not in str(info.value)


def test_atomic_path_gives_the_mode_open_would(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        with open(tmp_path / "plain.txt", "w") as fh:
            fh.write("x")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "new.txt").stat().st_mode)
    assert mode == 0o640 == stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    # an existing file keeps its mode, as open(path, "w") would
    os.chmod(tmp_path / "new.txt", 0o600)
    with atomic_path(tmp_path / "new.txt") as tmp:
        tmp.write_text("y")
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o600
    assert (tmp_path / "new.txt").read_text() == "y"


def test_check_output_path(afile: Path) -> None:
    check_output_path("fresh/dir/out.json")
    check_output_path("fresh/dir", is_dir=True)
    assert not (afile / "fresh").exists()  # a check creates nothing
    with pytest.raises(OutputError, match=r"^cannot write afile/x\.json: afile is not a directory$"):
        check_output_path("afile/x.json")
    with pytest.raises(OutputError, match="afile exists and is not a directory"):
        check_output_path("afile", is_dir=True)
    with pytest.raises(OutputError, match="is a directory"):
        check_output_path(".")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["-o", "afile/r.json"], "cannot write afile/r.json: afile is not a directory"),
        (["--csv", "afile"], "cannot write afile: afile exists and is not a directory"),
        (["--plots", "afile/figs"], "cannot write afile/figs: afile is not a directory"),
    ],
)
def test_run_refuses_unwritable_outputs_before_simulating(
    afile: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    assert main(["run", "-m", "seed-003-2node", "-w", WORKLOAD, "--no-progress", *extra]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing simulated, no report printed
    assert needle in err
    _no_traceback(err)


def test_other_writers_give_the_same_clear_error(afile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "draw", "seed-003-2node", "-o", "afile/x.png"]) == 2
    err = capsys.readouterr().err
    assert "cannot write afile/x.png: afile is not a directory" in err
    _no_traceback(err)
    assert main(["topo", "import", "seed-003-2node", "-o", "afile/m.toml"]) == 2
    err = capsys.readouterr().err
    assert "cannot write afile/m.toml: afile is not a directory" in err
    assert main(["trace", "generate", "--pattern", "random", "-o", "afile/t.npz"]) == 2
    err = capsys.readouterr().err
    assert "afile" in err and "not a directory" in err
    _no_traceback(err)


# 3. validation errors: location and message, no machine dict -------------------------------------------------

_TWO_NODES = """
name = "qa"
[[nodes]]
id = 0
cpus = "0-1"
memory_bytes = 1073741824
[[nodes]]
id = 1
cpus = "CPUS1"
memory_bytes = 1073741824
"""
_LINK = """
[[links]]
a = 0
b = 1
latency_ns = 100.0
bandwidth_gb_s = 10.0
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_TWO_NODES.replace("CPUS1", "1-2") + _LINK, "qa.toml: nodes[1].cpus: cpu 1 is already on node 0"),
        (_TWO_NODES.replace("CPUS1", "2-3"), "qa.toml: links: the link graph is disconnected"),
        (
            _TWO_NODES.replace("CPUS1", "2-3").replace('name = "qa"', 'name = "qa"\nfirmware_slit = [[10, 20], [20]]')
            + _LINK,
            "firmware_slit",
        ),
    ],
    ids=["duplicate-cpu", "disconnected", "non-square-slit"],
)
def test_machine_validation_errors_are_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    path = tmp_path / "qa.toml"
    path.write_text(text)
    with pytest.raises(TopologyError) as info:
        loads_machine(text, "qa.toml")
    assert needle in str(info.value)
    assert "{'name'" not in str(info.value) and len(str(info.value)) < 300
    assert main(["topo", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "{'name'" not in err and err.count("\n") == 1 and len(err) < 300


def test_long_field_values_are_cut(tmp_path: Path) -> None:
    text = _TWO_NODES.replace("CPUS1", "2-3").replace('name = "qa"', f'name = "qa"\ndescription = {["x" * 50] * 10!r}')
    with pytest.raises(TopologyError) as info:
        loads_machine(text + _LINK, "qa.toml")
    msg = str(info.value)
    assert msg.startswith("qa.toml: description = ['xxx") and "..." in msg and len(msg) < 200


def test_truncated_calibration_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"id": "abc", "controllers": [{"node": 0, "idle_latency_ns": 90.0' + " " * 400)
    with pytest.raises(CalibrationError) as info:
        load_calibration(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: Invalid JSON") and len(msg) < 200 and "controllers" not in msg
    assert main(["run", "-m", "seed-003-2node", "-w", WORKLOAD, "--calibration", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Invalid JSON" in err and err.count("\n") == 1 and len(err) < 300


# 4-5. TOML syntax errors, format versions, inf/nan ----------------------------------------------------------


def test_toml_syntax_error_is_reported_as_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.toml"
    path.write_text('name = "x"\nsocket = = 0\n')
    with pytest.raises(FormatError) as info:
        load_machine(path)
    assert info.value.line == 2
    assert "not valid TOML" in str(info.value) and "line 2, column 10" in str(info.value)
    # our format is recognised by content too, whatever the suffix
    other = tmp_path / "m.txt"
    other.write_text('format = "numasim-machine-1"\n[[nodes]]\nid = = 0\n')
    assert main(["topo", "show", str(other)]) == 2
    err = capsys.readouterr().err
    assert "not valid TOML" in err and "line 3" in err and "unknown machine format" not in err


def test_unknown_format_version_is_refused() -> None:
    text = dumps_machine(glueless(2, cpus_per_node=1))
    assert loads_machine(text).name == glueless(2, cpus_per_node=1).name
    assert loads_machine(text.replace('format = "numasim-machine-1"\n', "")).nodes  # absent is fine
    with pytest.raises(FormatError, match=r"format = 'numasim-machine-9': unknown machine format version"):
        loads_machine(text.replace("numasim-machine-1", "numasim-machine-9"))


@pytest.mark.parametrize("bad", ["inf", "nan", "-inf"])
def test_inf_and_nan_floats_are_refused(bad: str) -> None:
    text = dumps_machine(glueless(2, cpus_per_node=1))
    assert "read_bandwidth_gb_s = " in text
    head, rest = text.split("read_bandwidth_gb_s = ", 1)
    broken = head + f"read_bandwidth_gb_s = {bad}\n" + rest.split("\n", 1)[1]
    with pytest.raises(TopologyError, match=r"nodes\[0\]\.controller\.read_bandwidth_gb_s = .*finite number"):
        loads_machine(broken, "m.toml")


# 6. sysfs meminfo of a real kernel ---------------------------------------------------------------------------

_REAL_MEMINFO_EXTRA = """Node {n} Active(anon):       1544 kB
Node {n} Inactive(file):   123456 kB
Node {n} HugePages_Total:     0
Node {n} HugePages_Free:      0
Node {n} HugePages_Surp:      0
"""


def _tree_with_real_meminfo(root: Path) -> Path:
    tree = root / "node"
    write_sysfs_node_tree(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), tree)
    for n in (0, 1):
        meminfo = tree / f"node{n}" / "meminfo"
        meminfo.write_text(meminfo.read_text() + _REAL_MEMINFO_EXTRA.format(n=n))
    return tree


def test_sysfs_meminfo_with_parentheses_and_hugepages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree_with_real_meminfo(tmp_path)
    m = load_machine(tree)
    assert [n.memory_bytes for n in m.nodes] == [1 << 30, 1 << 30]
    assert main(["topo", "hardware", str(tree)]) == 0
    assert capsys.readouterr().out.startswith("available: 2 nodes (0-1)\n")


@pytest.mark.skipif(not (REAL_NODE_TREE / "node0" / "meminfo").exists(), reason="no sysfs node tree here")
def test_topo_hardware_on_this_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "hardware", str(REAL_NODE_TREE)]) == 0
    assert capsys.readouterr().out.startswith("available: ")


# 7. probe directory -> calibrate -----------------------------------------------------------------------------


def test_sysfs_per_node_numastat_is_a_numastat_variant(tmp_path: Path) -> None:
    f = tmp_path / "node3" / "numastat"
    f.parent.mkdir()
    f.write_text("numa_hit 120\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 7\nlocal_node 118\nother_node 2\n")
    table = parse_numastat(f).tables[0]
    assert (table.layout, table.nodes, table.rows["other_node"].tolist()) == ("sysfs-node", [3], [2.0])


def _two_node_probe_dir(root: Path) -> Path:
    d = root / "probe2"
    d.mkdir()
    write_sysfs_node_tree(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), d / "sys" / "devices" / "system" / "node")
    tree = d / "sys" / "devices" / "system" / "node"
    assert (tree / "node0" / "numastat").read_text().startswith("numa_hit ")
    (tree / "node0" / "vmstat").write_text("nr_free_pages 1234\n")
    probe = {
        "format": "numasim-probe",
        "version": 1,
        "host": "qa",
        "nodes": [0, 1],
        "placement": "numactl",
        "latency_ns": [[90.0, 140.0], [140.0, 90.0]],
        "bandwidth_gb_s": [[20.0, 12.0], [12.0, 20.0]],
        "working_set_bytes": 1 << 28,
    }
    (d / "probe.json").write_text(json.dumps(probe))
    return d


def test_calibrate_from_a_hand_made_probe_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _two_node_probe_dir(tmp_path)
    formats = sorted(m.format for m in load_measurements([d]))
    assert formats == ["hmat", "probe"]  # the copied tree is one HMAT measurement, not 20 files
    tree = d / "sys" / "devices" / "system" / "node"
    out = tmp_path / "c.json"
    assert main(["calibrate", "-m", str(tree), str(d), "-o", str(out)]) == 0
    capsys.readouterr()
    assert load_calibration(out).id
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.skipif(not (REAL_NODE_TREE / "node0").is_dir(), reason="needs a Linux sysfs node tree")
def test_probe_then_calibrate_on_this_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "probe"
    assert main(["probe", "-o", str(d), "--working-set", "2M", "--repeats", "1", "--steps", "2000"]) == 0
    out = tmp_path / "c.json"
    assert main(["calibrate", "-m", str(d / "sys" / "devices" / "system" / "node"), str(d), "-o", str(out)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"wrote {out}")
    assert load_calibration(out).id
    assert main(["calibrate", "-m", str(d / "sys" / "devices" / "system" / "node"), str(d), "-o", "/proc/qa/c.json"]) == 2
    err = capsys.readouterr().err
    assert "cannot write /proc/qa/c.json" in err
    _no_traceback(err)


# 8. hwloc keeps the machine name -----------------------------------------------------------------------------


def test_hwloc_round_trip_keeps_the_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.xml"
    assert main(["topo", "import", "seed-002-opteron-4s", "-o", str(out)]) == 0
    assert load_machine(out).name == "seed-002-opteron-4s"
    assert read_hwloc_xml(out.read_text()).name == "seed-002-opteron-4s"
    assert read_hwloc_xml(out, name="given").name == "given"


def test_probe_json_validation_error_is_short(tmp_path: Path) -> None:
    from numasim.calibrate.parsers.probe import parse_probe_text

    bad = {"format": "numasim-probe", "host": "qa", "nodes": [0], "placement": "numactl",
           "latency_ns": [["x" * 200]], "bandwidth_gb_s": [[1.0]], "working_set_bytes": 1}
    with pytest.raises(FormatError) as info:
        parse_probe_text(json.dumps(bad), "p.json")
    msg = str(info.value)
    assert msg.startswith("p.json: latency_ns[0][0] = 'xxx") and "..." in msg and len(msg) < 250


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_permission_denied_names_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OutputError, match=r"cannot write .*locked/r\.json: permission denied"):
            atomic_write_text(locked / "r.json", "{}")
        assert main(["run", "-m", "seed-003-2node", "-w", WORKLOAD, "-o", str(locked / "r.json")]) == 2
        assert "permission denied" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)
