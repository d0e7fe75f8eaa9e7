"""sysfs node trees: kernel file layouts, a real KNL distance table, HMAT, atomic writes and round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

import numasim.topology.io.sysfs as sysfs
from numasim.errors import FormatError
from numasim.topology.builders import hypercube
from numasim.topology.distances import timing_distances
from numasim.topology.io.sysfs import read_sysfs_node_tree, write_sysfs_node_tree
from numasim.topology.model import Link, Machine, MemoryController, MemoryKind, Node
from numasim.units import GiB, KiB

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def _knl_tree(root: Path) -> Path:
    """A node tree from the real KNL SNC-4 hybrid distance file (cpus 0-15 spread over the DDR nodes)."""
    tree = root / "node"
    tree.mkdir()
    for line in (DATA / "intel-knl-snc4-hybrid.sysfs-distance.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, _, mem, _, dist = line.split(" ", 4)
        nid = int(name[4:])
        d = tree / name
        d.mkdir()
        cpus = f"{4 * nid}-{4 * nid + 3}" if nid < 4 else ""
        (d / "cpulist").write_text(cpus + "\n")
        kb = int(mem.split("=")[1])
        (d / "meminfo").write_text(
            f"Node {nid} MemTotal:       {kb:8d} kB\nNode {nid} MemFree:        {kb // 2:8d} kB\n"
        )
        (d / "distance").write_text(dist.split(":", 1)[1].strip() + "\n")
    (tree / "has_cpu").write_text("0-3\n")
    (tree / "online").write_text("0-7\n")
    return tree


def test_real_knl_distance_file_reads_with_cpuless_mcdram_nodes(tmp_path: Path) -> None:
    m = read_sysfs_node_tree(_knl_tree(tmp_path))
    assert m.node_ids == list(range(8))
    assert m.firmware_slit is not None
    assert m.firmware_slit[0] == [10, 21, 21, 21, 41, 41, 41, 31]
    assert m.firmware_slit[7] == [31, 41, 41, 41, 41, 41, 41, 10]
    assert [n.cpus for n in m.nodes[4:]] == [[], [], [], []]
    assert m.nodes[4].memory_bytes == 2097152 * KiB and m.nodes[4].free_bytes == 1048576 * KiB
    assert timing_distances(m) == m.firmware_slit


def _machine() -> Machine:
    base = hypercube(2, cpus_per_node=2, memory_bytes=4 * GiB)
    ctrl = MemoryController(latency_ns=91.0, read_bandwidth_gb_s=38.5, write_bandwidth_gb_s=20.25)
    nodes = [n.model_copy(update={"free_bytes": GiB + 4096 * n.id, "controller": ctrl}) for n in base.nodes]
    nodes.append(Node(id=4, cpus=[], memory_bytes=8 * GiB, memory_kind=MemoryKind.CXL))
    links = [*base.links, Link(a=0, b=4, latency_ns=120.0, bandwidth_gb_s=16.0)]
    return base.model_copy(update={"nodes": nodes, "links": links, "firmware_slit": None})


def test_round_trip_keeps_nodes_memory_free_slit_and_hmat(tmp_path: Path) -> None:
    m = Machine.model_validate(_machine().model_dump())
    write_sysfs_node_tree(m, tmp_path / "node")
    back = read_sysfs_node_tree(tmp_path / "node")
    assert [(n.id, n.cpus, n.memory_bytes, n.free_bytes) for n in back.nodes] == [
        (n.id, n.cpus, n.memory_bytes, n.free_bytes if n.free_bytes is not None else n.memory_bytes)
        for n in m.nodes
    ]
    assert back.slit() == m.slit()
    assert back.nodes[0].controller == MemoryController(
        latency_ns=91.0, read_bandwidth_gb_s=38.5, write_bandwidth_gb_s=20.25
    )
    assert back.nodes[4].cpus == []


def test_written_files_follow_the_kernel_layout(tmp_path: Path) -> None:
    m = Machine.model_validate(_machine().model_dump())
    root = tmp_path / "node"
    write_sysfs_node_tree(m, root)
    assert (root / "has_cpu").read_text() == "0-3\n"
    assert (root / "has_memory").read_text() == "0-4\n"
    assert (root / "possible").read_text() == "0-4\n"
    n0 = root / "node0"
    assert (n0 / "cpulist").read_text() == "0-1\n"
    assert (n0 / "cpumap").read_text() == "00000003\n"
    assert (n0 / "distance").read_text() == " ".join(map(str, m.slit()[0])) + "\n"
    assert (n0 / "meminfo").read_text().splitlines()[0] == "Node 0 MemTotal:        4194304 kB"
    assert (n0 / "meminfo").read_text().splitlines()[1] == "Node 0 MemFree:         1048576 kB"
    assert (n0 / "numastat").read_text().split() == [
        "numa_hit",
        "0",
        "numa_miss",
        "0",
        "numa_foreign",
        "0",
        "interleave_hit",
        "0",
        "local_node",
        "0",
        "other_node",
        "0",
    ]
    assert (n0 / "cpu0").is_file() and (n0 / "cpu1").is_file() and not (n0 / "cpu2").exists()
    assert (n0 / "access0" / "initiators" / "read_latency").read_text() == "91\n"
    assert (n0 / "access0" / "initiators" / "read_bandwidth").read_text() == "38500\n"
    assert not (root / "node4" / "access0").exists()  # no controller given: no HMAT entry
    assert (root / "node4" / "cpulist").read_text() == "\n"


def test_cpumap_is_read_when_cpulist_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "node"
    write_sysfs_node_tree(hypercube(1, cpus_per_node=40), root)
    (root / "node1" / "cpulist").unlink()
    assert (root / "node1" / "cpumap").read_text() == "0000ffff,ffffff00,00000000\n"
    assert (root / "node0" / "cpumap").read_text() == "00000000,000000ff,ffffffff\n"
    assert read_sysfs_node_tree(root).nodes[1].cpus == list(range(40, 80))


def test_existing_target_is_not_replaced_without_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "node"
    write_sysfs_node_tree(hypercube(1), root)
    with pytest.raises(FormatError, match="exists already"):
        write_sysfs_node_tree(hypercube(2), root)
    write_sysfs_node_tree(hypercube(2), root, overwrite=True)
    assert len(read_sysfs_node_tree(root).nodes) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node"]


def test_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(machine: Machine, root: Path) -> None:
        (root / "node0").mkdir()
        raise OSError("disk full")

    monkeypatch.setattr(sysfs, "_write_tree", boom)
    with pytest.raises(OSError, match="disk full"):
        write_sysfs_node_tree(hypercube(1), tmp_path / "node")
    assert list(tmp_path.iterdir()) == []


def test_node_without_cpus_or_memory_is_dropped(tmp_path: Path) -> None:
    root = _knl_tree(tmp_path)
    (root / "node7" / "meminfo").write_text("Node 7 MemTotal:              0 kB\n")
    m = read_sysfs_node_tree(root)
    assert m.node_ids == list(range(7))
    assert "node 7 has neither cpus nor memory: dropped" in m.description
    assert m.firmware_slit is not None and len(m.firmware_slit) == 7


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda r: (r / "node1" / "distance").write_text("21 10\n"), "2 distances for 8 nodes"),
        (lambda r: (r / "node1" / "distance").write_text("21 ten\n"), "not a list of numbers"),
        (lambda r: (r / "node1" / "meminfo").unlink(), "meminfo: missing"),
        (lambda r: (r / "node1" / "meminfo").write_text("MemTotal 5\n"), "expected 'Node 1"),
        (lambda r: (r / "has_cpu").write_text("0-4\n"), "says node 4 has cpus"),
        (lambda r: (r / "online").write_text("0-8\n"), "online nodes"),
        (lambda r: (r / "node2" / "cpulist").write_text("3-1\n"), "cpulist"),
    ],
)
def test_bad_trees_name_the_file(tmp_path: Path, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    root = _knl_tree(tmp_path)
    edit(root)
    with pytest.raises(FormatError, match=match):
        read_sysfs_node_tree(root)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="not a directory"):
        read_sysfs_node_tree(tmp_path / "missing")
