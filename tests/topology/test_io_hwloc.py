"""hwloc XML: all 29 real topologies load; golden facts from several; our writer round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.errors import FormatError
from numasim.topology.distances import timing_distances
from numasim.topology.infer import from_distance_matrix
from numasim.topology.io.hwloc import (
    MemorySideCache,
    memory_kind_of_subtype,
    memory_side_caches,
    read_hwloc_xml,
    write_hwloc_xml,
)
from numasim.topology.model import Machine, MemoryController, MemoryKind, Node
from numasim.units import GiB

HWLOC = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "hwloc"
ALL = sorted(HWLOC.glob("*.xml"))
needs_data = pytest.mark.skipif(not ALL, reason="shared/data/hwloc not beside the checkout")


def _load(name: str) -> Machine:
    return read_hwloc_xml(HWLOC / name)


@needs_data
def test_all_29_files_are_there() -> None:
    assert len(ALL) == 29


@needs_data
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_real_topology_loads_into_a_valid_machine(path: Path) -> None:
    m = read_hwloc_xml(path)
    assert m.nodes and all(n.cpus or n.memory_bytes > 0 for n in m.nodes)
    if m.firmware_slit is not None:
        assert len(m.firmware_slit) == len(m.nodes)


@needs_data
def test_sgi_uv2000_24_nodes_and_numalink_distances() -> None:
    m = _load("sgi-uv2000-24n-E5-4640.xml")
    assert len(m.nodes) == 24 and len(m.cpus) == 384
    assert m.firmware_slit is not None
    assert m.firmware_slit[0][:4] == [10, 50, 65, 65] and m.firmware_slit[0][10] == 79
    assert [n.socket for n in m.nodes] == list(range(24))


@needs_data
def test_sgi_altix_64_nodes_timing_reproduces_the_firmware_table() -> None:
    m = _load("sgi-altix-ia64-64n.from-sysfs.xml")
    assert len(m.nodes) == 64 and len(m.cpus) == 256
    assert m.firmware_slit is not None and m.firmware_slit[0][:5] == [10, 22, 22, 22, 26]
    assert timing_distances(m) == m.firmware_slit


@needs_data
def test_power9_gpu_memory_nodes_are_cpuless_gpu_kind_on_their_socket() -> None:
    m = _load("ibm-power9-v100-gpunuma.from-sysfs.xml")
    assert m.node_ids == [0, 8, 250, 251, 252, 253, 254, 255]
    gpu = [n for n in m.nodes if n.memory_kind == MemoryKind.GPU]
    assert [n.id for n in gpu] == [250, 251, 252, 253, 254, 255]
    assert all(not n.cpus and n.memory_bytes == 15360 << 20 for n in gpu)
    assert [m.node(i).socket for i in (250, 253)] == [8, 0]
    assert m.firmware_slit is not None and m.firmware_slit[0][:3] == [10, 40, 80]


@needs_data
@pytest.mark.parametrize(
    "name,kind", [("intel-knl-snc4-hybrid.xml", "MCDRAM"), ("synthetic-knl-like-heteromem.xml", "HBM")]
)
def test_knl_mcdram_is_cpuless_hbm_beside_its_ddr_node(name: str, kind: str) -> None:
    m = _load(name)
    assert [(n.id, n.memory_kind, bool(n.cpus)) for n in m.nodes] == [
        (0, MemoryKind.DRAM, True),
        (1, MemoryKind.DRAM, True),
        (2, MemoryKind.DRAM, True),
        (3, MemoryKind.DRAM, True),
        (4, MemoryKind.HBM, False),
        (5, MemoryKind.HBM, False),
        (6, MemoryKind.HBM, False),
        (7, MemoryKind.HBM, False),
    ]
    assert m.nodes[0].memory_bytes == GiB and m.nodes[4].memory_bytes == 2 * GiB
    assert len(m.cpus) == 64 and m.firmware_slit is None  # this XML has no distances
    # memattr Bandwidth (MiB/s) becomes the controller bandwidth: MCDRAM 90000 MiB/s, DDR 22500 MiB/s.
    c4, c0 = m.nodes[4].controller, m.nodes[0].controller
    assert c4 is not None and c0 is not None
    assert c4.read_bandwidth_gb_s == pytest.approx(90000 * 2**20 / 1e9)
    assert c0.read_bandwidth_gb_s == pytest.approx(22500 * 2**20 / 1e9)


@needs_data
def test_hp_superdome_cpuless_node_loads_with_its_memory() -> None:
    m = _load("hp-superdome-sx2000-ia64-17n.from-sysfs.xml")
    assert len(m.nodes) == 17
    n16 = m.node(16)
    assert n16.cpus == [] and n16.memory_bytes > 0
    assert m.firmware_slit is not None and m.firmware_slit[16][0] == 14 and m.firmware_slit[0][1] == 17


@needs_data
def test_opterons_one_node_per_socket_with_slit() -> None:
    m4 = _load("4s-opteron8218.from-sysfs.xml")
    assert [n.socket for n in m4.nodes] == [0, 1, 2, 3] and m4.firmware_slit == [
        [10, 20, 20, 20],
        [20, 10, 20, 20],
        [20, 20, 10, 20],
        [20, 20, 20, 10],
    ]
    m8 = _load("tyan-s4881-8s-opteron865.from-sysfs.xml")
    assert len(m8.nodes) == 8 and len(m8.cpus) == 16
    mc = _load("amd-drachma-4s-magnycours.from-sysfs.xml")  # two nodes per Magny-Cours package
    assert mc.node_ids == [0, 1, 2, 33, 34, 45, 72, 73]
    assert [n.socket for n in mc.nodes[:2]] == [0, 0]
    assert mc.firmware_slit is not None and mc.firmware_slit[0] == [10, 16, 16, 22, 16, 22, 16, 22]


@needs_data
def test_v1_xml_with_relative_latencies() -> None:
    m = _load("cisco-b200m4-2s-E5-2683v3-CoD.v1.xml")
    assert m.firmware_slit == [[10, 21, 31, 31], [21, 10, 31, 31], [31, 31, 10, 21], [31, 31, 21, 10]]
    assert [(n.socket, n.cpus[0], len(n.cpus)) for n in m.nodes] == [
        (0, 0, 7),
        (0, 7, 7),
        (1, 14, 7),
        (1, 21, 7),
    ]


@needs_data
def test_cgroup_restricted_nodes_become_cpuless() -> None:
    m = _load("supermicro-h8qg6-4s-opteron6134-cgroup.xml")
    assert [len(n.cpus) for n in m.nodes] == [4, 2, 0, 0, 0, 0]


def test_writer_round_trip_keeps_nodes_kinds_sockets_dies_slit_and_controllers() -> None:
    ctrl = MemoryController(
        latency_ns=90.0, read_bandwidth_gb_s=2**20 * 40000 / 1e9, write_bandwidth_gb_s=2**20 * 20000 / 1e9
    )
    nodes = [
        Node(id=0, cpus=[0, 1], memory_bytes=GiB, socket=0, die=0, controller=ctrl),
        Node(id=1, cpus=[2, 3], memory_bytes=GiB, socket=0, die=1, controller=ctrl),
        Node(id=2, cpus=[4, 5, 6, 7], memory_bytes=2 * GiB, socket=1, controller=ctrl),
        Node(id=5, cpus=[], memory_bytes=4 * GiB, memory_kind=MemoryKind.CXL, controller=ctrl),
    ]
    slit = [[10, 12, 21, 31], [12, 10, 21, 31], [21, 21, 10, 41], [31, 31, 41, 10]]
    m = from_distance_matrix(slit, name="rt", nodes=nodes, firmware_slit=slit)
    back = read_hwloc_xml(write_hwloc_xml(m))
    assert [(n.id, n.cpus, n.memory_bytes, n.socket, n.die, n.memory_kind) for n in back.nodes] == [
        (n.id, n.cpus, n.memory_bytes, n.socket, n.die, n.memory_kind) for n in m.nodes
    ]
    assert back.firmware_slit == slit
    assert back.nodes[3].controller == ctrl and back.nodes[0].controller == ctrl


@pytest.mark.parametrize(
    "subtype,kind",
    [
        ("MCDRAM", MemoryKind.HBM),
        ("GPUMemory", MemoryKind.GPU),
        ("NVM", MemoryKind.PMEM),
        ("DAX", MemoryKind.PMEM),
        ("CXL", MemoryKind.CXL),
        ("CXLMem", MemoryKind.CXL),
        ("DRAM", MemoryKind.DRAM),
        (None, MemoryKind.DRAM),
    ],
)
def test_subtype_to_memory_kind(subtype: str | None, kind: MemoryKind) -> None:
    assert memory_kind_of_subtype(subtype) == kind


def test_missing_local_memory_gets_the_mean_and_is_noted() -> None:
    xml = """<?xml version="1.0"?><topology version="2.0">
    <object type="Machine" os_index="0">
      <object type="Package" os_index="0">
        <object type="NUMANode" os_index="0" local_memory="2147483648"/>
        <object type="PU" os_index="0"/>
      </object>
      <object type="Package" os_index="1">
        <object type="NUMANode" os_index="1"/>
        <object type="PU" os_index="1"/>
      </object>
      <object type="Package" os_index="2">
        <object type="NUMANode" os_index="2" local_memory="0"/>
      </object>
    </object></topology>"""
    m = read_hwloc_xml(xml, name="gaps")
    assert m.node_ids == [0, 1]
    assert m.nodes[1].memory_bytes == 2 * GiB
    assert (
        "node 1 size unknown" in m.description
        and "node 2 has neither cpus nor memory: dropped" in m.description
    )


def test_memory_side_caches_are_listed_and_the_description_says_they_are_not_modelled() -> None:
    # Intel Memory Mode (2LM): DRAM caches the node's memory, direct-mapped; hwloc puts a MemCache above the node
    xml = """<?xml version="1.0"?><topology version="2.0">
    <object type="Machine" os_index="0">
      <object type="Package" os_index="0">
        <object type="MemCache" cache_size="103079215104" depth="1" cache_linesize="64" cache_associativity="1">
          <object type="NUMANode" os_index="0" local_memory="397816131584"/>
        </object>
        <object type="PU" os_index="0"/>
      </object>
      <object type="Package" os_index="1">
        <object type="NUMANode" os_index="1" local_memory="2147483648"/>
        <object type="PU" os_index="1"/>
      </object>
    </object></topology>"""
    assert memory_side_caches(xml) == [MemorySideCache(0, 96 * GiB, 64, 1, 1)]
    m = read_hwloc_xml(xml, name="2lm")
    assert m.nodes[0].cpus == [0] and m.nodes[0].memory_bytes == 397816131584  # the memory, not the cache
    assert m.nodes[0].memory_side_cache_bytes == 96 * GiB and m.nodes[1].memory_side_cache_bytes is None
    assert "in front of node 0: 96.0 GiB, direct-mapped, 64 B lines" in m.description
    assert "not modelled" in m.description and "too fast" in m.description
    # our writer keeps it (its size; the associativity it leaves unknown), and our TOML too
    again = read_hwloc_xml(write_hwloc_xml(m))
    assert [n.memory_side_cache_bytes for n in again.nodes] == [96 * GiB, None]
    assert memory_side_caches(write_hwloc_xml(m)) == [MemorySideCache(0, 96 * GiB, 64, None, 1)]
    from numasim.topology.io.toml_format import dumps_machine, loads_machine

    assert loads_machine(dumps_machine(m)) == m


@needs_data
def test_optane_memory_mode_box_lists_its_four_caches() -> None:
    caches = memory_side_caches(HWLOC / "dell-r740-2s-gold6230-snc2-optane2lm.xml")
    assert sorted(c.node for c in caches) == [0, 1, 2, 3]
    assert {(c.size_bytes, c.associativity) for c in caches} == {(96 * GiB, 1)}


@pytest.mark.parametrize(
    "text,match",
    [
        ("<topology version='2.0'><object type='Machine'>", "not well-formed"),
        ("<lstopo/>", "expected <topology>"),
        ("<topology version='2.0'><object type='Machine' os_index='0'/></topology>", "no NUMANode"),
        (
            "<topology version='2.0'><object type='NUMANode' os_index='x' local_memory='1'/></topology>",
            "os_index",
        ),
    ],
)
def test_bad_xml_is_a_format_error(text: str, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        read_hwloc_xml(text)


def test_v2_distances_with_gp_indexing_and_memattr_latency() -> None:
    xml = """<topology version="2.0">
    <object type="Machine" os_index="0" gp_index="1">
      <object type="Package" os_index="0" gp_index="2">
        <object type="NUMANode" os_index="3" gp_index="7" local_memory="1073741824"/>
        <object type="PU" os_index="0" gp_index="3"/>
      </object>
      <object type="Package" os_index="1" gp_index="4">
        <object type="NUMANode" os_index="5" gp_index="9" local_memory="1073741824"/>
        <object type="PU" os_index="1" gp_index="5"/>
      </object>
    </object>
    <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="gp">
      <indexes length="3">9 7</indexes>
      <u64values length="11">10 32 31 10</u64values>
    </distances2>
    <memattr name="Latency" flags="6">
      <memattr_value target_obj_type="NUMANode" target_obj_gp_index="7" value="85" initiator_cpuset="0x1"/>
      <memattr_value target_obj_type="NUMANode" target_obj_gp_index="7" value="140" initiator_cpuset="0x2"/>
    </memattr>
    </topology>"""
    m = read_hwloc_xml(xml)
    assert m.node_ids == [3, 5]
    assert m.firmware_slit == [[10, 31], [32, 10]]  # rows by gp index 9 (node 5) then 7 (node 3), re-ordered
    assert m.nodes[0].controller is not None and m.nodes[0].controller.latency_ns == 85.0
    # Links were scaled to the memattr latency (85 ns), so the timing alone still gives the firmware table.
    assert timing_distances(m.model_copy(update={"firmware_slit": None})) == [[10, 31], [32, 10]]
