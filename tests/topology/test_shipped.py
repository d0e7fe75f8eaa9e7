"""Every machine shipped in ``topologies/`` loads, round-trips through TOML, and carries the numbers of the
article or data file it was written from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.topology.distances import slit
from numasim.topology.io.toml_format import dumps_machine, load_machine_toml, loads_machine
from numasim.topology.model import DeviceKind, Machine, MemoryKind
from numasim.topology.routing import bandwidth_table_gb_s, hop_table, latency_table_ns
from numasim.units import GiB, MiB

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
FILES = sorted(TOPOLOGIES.glob("*.toml"))


def _load(name: str) -> Machine:
    return load_machine_toml(TOPOLOGIES / f"{name}.toml")


def test_the_source_article_machines_are_shipped() -> None:
    names = {p.stem for p in FILES}
    assert {
        "seed-000-4node",
        "seed-001-e5-2680v2",
        "seed-001-e5-2620v3",
        "seed-002-opteron-4s",
        "seed-003-2node",
        "skylake-8180-2s",
        "opteron-865-8s",
        "epyc-7452-nps4",
        "xeon-2s-cxl",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_file_loads_and_round_trips(path: Path) -> None:
    m = load_machine_toml(path)
    assert m.name == path.stem
    assert loads_machine(dumps_machine(m)) == m
    assert m.source and m.description
    assert m.caches, "every shipped machine lists its cache levels"
    table = np.array(slit(m))
    assert (table == table.T).all() and (np.diag(table) == 10).all()
    lat = latency_table_ns(m)
    mem = [i for i, n in enumerate(m.nodes) if n.has_memory]
    assert np.isfinite(lat[:, mem]).all()
    for i in mem:
        if m.nodes[i].has_cpus:
            # local memory is the nearest memory (the premise of every NUMA policy)
            assert lat[i, i] == lat[i, mem].min()


def _mb(values: list[int]) -> list[int]:
    return [v * MiB for v in values]


def test_seed_000_matches_numactl_hardware() -> None:
    m = _load("seed-000-4node")
    assert len(m.cpus) == 96
    assert m.nodes[0].cpus == [*range(0, 12), *range(48, 60)]
    assert m.nodes[1].cpus == [*range(12, 24), *range(60, 72)]
    assert m.nodes[2].cpus == [*range(24, 36), *range(72, 84)]
    assert m.nodes[3].cpus == [*range(36, 48), *range(84, 96)]
    assert [n.memory_bytes for n in m.nodes] == _mb([128402, 128965, 129017, 129010])
    assert [n.free_bytes for n in m.nodes] == _mb([49043, 849, 25550, 10116])
    assert slit(m) == [[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]]
    assert [(n.socket, n.die) for n in m.nodes] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    nic = [d for d in m.devices if d.kind is DeviceKind.NIC]
    assert len(nic) == 1 and nic[0].node == 0 and nic[0].attach_bandwidth_gb_s == pytest.approx(204 / 8)


def test_seed_001_e5_2680v2_matches_article_and_mlc() -> None:
    m = _load("seed-001-e5-2680v2")
    assert len(m.cpus) == 40
    assert m.nodes[0].cpus == [*range(0, 10), *range(20, 30)]
    assert [n.memory_bytes for n in m.nodes] == _mb([64141, 64509])
    assert [n.free_bytes for n in m.nodes] == _mb([42625, 43405])
    assert slit(m) == [[10, 20], [20, 10]]
    # the mlc idle-latency and bandwidth matrices are reproduced exactly
    assert latency_table_ns(m) == pytest.approx(np.array([[61.7, 115.1], [114.6, 61.2]]))
    assert bandwidth_table_gb_s(m) == pytest.approx(np.array([[55.2638, 25.5012], [25.2797, 55.2685]]))


def test_seed_001_e5_2620v3_has_24_cpus() -> None:
    m = _load("seed-001-e5-2620v3")
    assert len(m.cpus) == 24 and slit(m) == [[10, 20], [20, 10]]
    assert "nominal" in m.description and "Provisional" in m.description


def test_seed_002_firmware_slit_lies_about_the_hypercube() -> None:
    m = _load("seed-002-opteron-4s")
    assert slit(m) == [[10 if i == j else 20 for j in range(4)] for i in range(4)]
    hops = hop_table(m)
    assert hops[0, 3] == hops[1, 2] == 2 and hops[0, 1] == 1
    lat = latency_table_ns(m)
    assert lat[0, 3] / lat[0, 0] == pytest.approx(1.30)
    assert lat[0, 1] / lat[0, 0] == pytest.approx(1.09)


def test_seed_003_matches_numactl_hardware() -> None:
    m = _load("seed-003-2node")
    assert len(m.cpus) == 24
    assert m.nodes[1].cpus == [*range(6, 12), *range(18, 24)]
    assert [n.memory_bytes for n in m.nodes] == _mb([32756, 32768])
    assert [n.free_bytes for n in m.nodes] == _mb([19642, 18652])
    assert slit(m) == [[10, 21], [21, 10]]


def test_skylake_8180_matches_mlc() -> None:
    m = _load("skylake-8180-2s")
    assert len(m.cpus) == 112
    assert latency_table_ns(m) == pytest.approx(np.array([[81.4, 131.1], [131.1, 81.3]]))
    assert bandwidth_table_gb_s(m) == pytest.approx(np.array([[107.9477, 50.9515], [50.8346, 108.1834]]))


def test_opteron_865_is_a_twisted_ladder_with_a_flat_slit() -> None:
    m = _load("opteron-865-8s")
    assert len(m.nodes) == 8 and len(m.cpus) == 16
    assert m.nodes[0].memory_bytes == 8587984896 and m.nodes[7].memory_bytes == 8 * GiB
    assert int(hop_table(m).max()) == 2
    assert {d for row in slit(m) for d in row} == {10, 20}


def test_epyc_7452_nps4_layout() -> None:
    m = _load("epyc-7452-nps4")
    assert len(m.nodes) == 4 and len(m.cpus) == 64
    assert m.nodes[0].cpus == [*range(0, 8), *range(32, 40)]
    assert slit(m)[0] == [10, 12, 12, 12]
    assert sum(n.controller.read_bandwidth_gb_s for n in m.nodes if n.controller) == pytest.approx(142.68)


def test_xeon_cxl_has_a_cpuless_cxl_node() -> None:
    m = _load("xeon-2s-cxl")
    cxl = [n for n in m.nodes if n.memory_kind is MemoryKind.CXL]
    assert len(cxl) == 1 and cxl[0].cpus == [] and cxl[0].memory_bytes == 128 * GiB
    assert any(d.kind is DeviceKind.CXL_EXPANDER for d in m.devices)
    lat = latency_table_ns(m)
    assert lat[0, cxl[0].id] > lat[0, 1] > lat[0, 0]
