"""Our TOML format, format detection by content, and load_machine/save_machine across all four formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.errors import FormatError, TopologyError
from numasim.topology.builders import glueless, hypercube
from numasim.topology.io import detect_format, load_machine, save_machine
from numasim.topology.io.toml_format import dumps_machine, loads_machine
from numasim.topology.model import Machine, MemoryKind, Node
from numasim.units import GiB

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def _machine() -> Machine:
    m = hypercube(2, cpus_per_node=2, memory_bytes=2 * GiB)
    nodes = [n.model_copy(update={"free_bytes": GiB}) for n in m.nodes]
    nodes.append(Node(id=4, memory_bytes=4 * GiB, memory_kind=MemoryKind.CXL))
    links = [*m.links, m.links[0].model_copy(update={"a": 0, "b": 4, "latency_ns": 150.0})]
    return m.model_copy(update={"nodes": nodes, "links": links})


def test_toml_round_trip_is_lossless() -> None:
    m = Machine.model_validate(_machine().model_dump())
    text = dumps_machine(m)
    assert text.startswith('format = "numasim-machine-1"')
    assert 'cpus = "0-1"' in text
    assert loads_machine(text) == m


def test_toml_errors_name_the_field_or_file() -> None:
    with pytest.raises(FormatError, match="m.toml: not valid TOML"):
        loads_machine("name = ", "m.toml")
    with pytest.raises(TopologyError, match="nodes"):
        loads_machine('name = "x"\nnodes = []\n', "m.toml")


@pytest.mark.parametrize(
    "fmt,suffix", [("toml", ".toml"), ("hwloc", ".xml"), ("numactl", ".txt"), ("sysfs", "")]
)
def test_save_by_suffix_then_detect_and_load(tmp_path: Path, fmt: str, suffix: str) -> None:
    m = Machine.model_validate(_machine().model_dump())
    path = tmp_path / f"machine{suffix}"
    save_machine(m, path)
    assert detect_format(path) == fmt
    back = load_machine(path)
    assert [(n.id, n.cpus, n.memory_bytes) for n in back.nodes] == [
        (n.id, n.cpus, n.memory_bytes) for n in m.nodes
    ]
    assert back.slit() == m.slit()


def test_explicit_format_overrides_the_suffix(tmp_path: Path) -> None:
    path = tmp_path / "machine.dat"
    save_machine(glueless(2), path, format="numactl")
    assert detect_format(path) == "numactl"


def test_save_sysfs_replaces_a_node_tree_but_not_other_directories(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    save_machine(glueless(2), tree)
    save_machine(hypercube(2), tree)
    assert len(load_machine(tree).nodes) == 4
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_text("meow")
    with pytest.raises(FormatError, match="exists already"):
        save_machine(glueless(2), other)


def test_detect_real_files() -> None:
    assert detect_format(DATA / "numactl-seed-000.txt") == "numactl"
    hwloc = (
        Path(__file__).resolve().parents[2]
        / ".."
        / "shared"
        / "data"
        / "hwloc"
        / "cisco-b200m4-2s-E5-2683v3-CoD.v1.xml"
    )
    if hwloc.exists():
        assert detect_format(hwloc) == "hwloc"


def test_unknown_content_names_the_file_and_the_known_formats(tmp_path: Path) -> None:
    p = tmp_path / "mystery.toml"
    p.write_text('name = "no nodes here"\n')
    with pytest.raises(
        FormatError,
        match=r"mystery.toml: unknown machine format; known formats: toml .*numactl.*sysfs.*hwloc",
    ):
        detect_format(p)
    d = tmp_path / "emptydir"
    d.mkdir()
    with pytest.raises(FormatError, match="without nodeN"):
        detect_format(d)
    with pytest.raises(FormatError, match="cannot tell the format"):
        save_machine(glueless(2), tmp_path / "m.json")


def test_load_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        load_machine(tmp_path / "absent.toml")
