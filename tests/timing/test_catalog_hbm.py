"""Xeon Max's HBM in flat mode: ``numactl -H`` shows it as cpu-less nodes, which ``topo import --cpu`` makes the
package's HBM (timed from the catalog's ``[hbm]``) where it used to take them for CXL expanders."""

from __future__ import annotations

import numpy as np
import pytest

from numasim.errors import CalibrationError
from numasim.timing.catalog import catalog_calibration, catalog_machine, get_platform
from numasim.timing.catalog.model import HbmSpec
from numasim.topology.io.numactl import machine_from_numactl
from numasim.topology.model import MemoryKind
from numasim.topology.routing import bandwidth_table_gb_s, latency_table_ns

MAX = "Intel(R) Xeon(R) CPU Max 9470"


def _numactl(cpu_nodes: list[list[int]], sizes_mb: list[int], slit: list[list[int]]) -> str:
    """``numactl -H`` text: the first nodes with the given cpus, then cpu-less nodes, of ``sizes_mb``."""
    lines = [f"available: {len(slit)} nodes (0-{len(slit) - 1})"]
    for i, size in enumerate(sizes_mb):
        cpus = cpu_nodes[i] if i < len(cpu_nodes) else []
        lines += [f"node {i} cpus: {' '.join(map(str, cpus))}", f"node {i} size: {size} MB", f"node {i} free: {size} MB"]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(len(slit)))]
    lines += [f"  {i}: " + " ".join(f"{d:3d}" for d in row) for i, row in enumerate(slit)]
    return "\n".join(lines) + "\n"


def _quadrant_flat() -> str:
    # 2x Xeon CPU Max 9470C in flat + quadrant mode as ALCF's Aurora guide prints it: nodes 2 and 3 are the two
    # sockets' 64 GB of HBM, at distance 13 from their own socket and 23 from the other
    cpus = [[*range(0, 52), *range(104, 156)], [*range(52, 104), *range(156, 208)]]
    slit = [[10, 21, 13, 23], [21, 10, 23, 13], [13, 23, 10, 23], [23, 13, 23, 10]]
    return _numactl(cpus, [515524, 514994, 65536, 65536], slit)


def test_flat_quadrant_hbm_nodes_are_the_package_s_hbm_beside_their_socket() -> None:
    m = catalog_machine(machine_from_numactl(_quadrant_flat(), name="aurora"), MAX)
    kinds = {n.id: n.memory_kind for n in m.nodes}
    assert kinds == {0: MemoryKind.DRAM, 1: MemoryKind.DRAM, 2: MemoryKind.HBM, 3: MemoryKind.HBM}
    assert "taken for the package's HBM" in (m.description or "")
    spec = get_platform("intel-sapphire-rapids-hbm").hbm
    assert spec is not None
    lat, bw = np.asarray(latency_table_ns(m)), np.asarray(bandwidth_table_gb_s(m))
    # own socket's HBM: its DDR's local latency plus the measured difference; the other socket's further still
    assert lat[0, 2] == pytest.approx(lat[0, 0] + spec.added_latency_ns, abs=0.01)
    assert lat[1, 3] == pytest.approx(lat[1, 1] + spec.added_latency_ns, abs=0.01)
    assert lat[0, 3] > lat[0, 1] and lat[0, 3] > lat[0, 2]
    # one HBM node a socket reads at the socket's measured HBM bandwidth, above its DDR's, and below the peak
    assert bw[0, 2] == pytest.approx(spec.read_gb_s_per_socket)
    assert bw[0, 0] < bw[0, 2] < spec.peak_gb_s_per_socket
    assert bw[0, 3] == pytest.approx(bw[0, 1])  # the other socket's HBM through the same UPI links


def test_snc4_flat_splits_a_socket_s_hbm_among_its_four_clusters() -> None:
    # flat + SNC4 (OSC: nodes 0-7 DDR with cpus, 8-15 HBM of 16 GB); no public distance matrix, so one written
    # the way the firmware writes the quadrant one: a cluster's own HBM nearest
    cpus = [[*range(13 * k, 13 * k + 13), *range(104 + 13 * k, 104 + 13 * k + 13)] for k in range(8)]

    def d(i: int, j: int) -> int:
        if i == j:
            return 10
        si, sj = (i % 8) // 4, (j % 8) // 4
        if si != sj:
            return 21 if max(i, j) < 8 else 23
        hbm = (i >= 8) + (j >= 8)
        return 12 if hbm == 0 else (13 if i % 8 == j % 8 else 14) if hbm == 1 else 14

    slit = [[d(i, j) for j in range(16)] for i in range(16)]
    m = catalog_machine(machine_from_numactl(_numactl(cpus, [131072] * 8 + [16384] * 8, slit), name="snc4"), MAX)
    cal = catalog_calibration(m)
    hbm = {c.node: c for c in cal.controllers if c.node >= 8}
    spec = get_platform("intel-sapphire-rapids-hbm").hbm
    assert spec is not None and spec.read_gb_s_per_socket is not None
    assert all(c.read_bandwidth_gb_s == pytest.approx(spec.read_gb_s_per_socket / 4) for c in hbm.values())
    for k in range(8):  # each HBM node beside its own cluster
        (link,) = [lk for lk in m.links if 8 + k in (lk.a, lk.b)]
        assert {link.a, link.b} == {k, 8 + k}


def test_a_cpu_less_node_larger_than_the_hbm_is_a_cxl_expander() -> None:
    text = _quadrant_flat().replace("node 3 size: 65536 MB", "node 3 size: 262144 MB")
    m = catalog_machine(machine_from_numactl(text, name="mixed"), MAX)
    assert {n.id: n.memory_kind for n in m.nodes}[2] is MemoryKind.HBM
    assert {n.id: n.memory_kind for n in m.nodes}[3] is MemoryKind.CXL


def test_hbm_on_a_platform_without_it_is_an_error_naming_the_node() -> None:
    m = machine_from_numactl(_quadrant_flat(), name="aurora")
    hbm = m.model_copy(update={"nodes": [n.model_copy(update={"memory_kind": MemoryKind.HBM}) if n.id == 2 else n
                                         for n in m.nodes]})
    with pytest.raises(CalibrationError, match="node 2 of aurora is hbm memory"):
        catalog_calibration(hbm, sku="Xeon Platinum 8470")


def test_a_measured_hbm_read_above_the_stacks_peak_is_refused() -> None:
    with pytest.raises(ValueError, match="exceeds the peak 1638.4 GB/s of 4 stacks"):
        HbmSpec(stacks_per_socket=4, gb_per_stack=16, gt_s=3.2, bus_bits=1024, derivation="x", added_latency_ns=26.4,
                latency_measured_on="x", read_gb_s_per_socket=2000.0, read_measured_on="x", sources=["s"])


def test_hbm_only_mode_is_told_by_memory_that_fits_the_hbm() -> None:
    # 2x Max 9480 booted without DIMMs: two cpu nodes of ~64 GB each, the sockets' HBM; with DIMMs (a socket has
    # at least 8) the same nodes would hold 128 GB or more, and stay DDR
    cpus = [[*range(0, 56), *range(112, 168)], [*range(56, 112), *range(168, 224)]]
    text = _numactl(cpus, [64000, 64000], [[10, 21], [21, 10]])
    m = catalog_machine(machine_from_numactl(text, name="hbm-only"), "Intel(R) Xeon(R) CPU Max 9480")
    assert {n.memory_kind for n in m.nodes} == {MemoryKind.HBM}
    assert "HBM-only mode" in (m.description or "")
    spec = get_platform("intel-sapphire-rapids-hbm").hbm
    assert spec is not None and spec.read_gb_s_per_socket is not None
    assert np.asarray(bandwidth_table_gb_s(m))[0, 0] == pytest.approx(spec.read_gb_s_per_socket)
    ddr = catalog_machine(machine_from_numactl(_numactl(cpus, [256000, 256000], [[10, 21], [21, 10]]), name="ddr"),
                          "Intel(R) Xeon(R) CPU Max 9480")
    assert {n.memory_kind for n in ddr.nodes} == {MemoryKind.DRAM}


def test_hbm_nodes_an_hwloc_import_typed_are_rejoined_beside_their_cluster() -> None:
    # hwloc names the HBM ("HBM" subtype) and its package, and its importer joins the node to every other: the
    # catalog used to stop at "HBM without cpus, joined to [0, 1, 3]"
    m = machine_from_numactl(_quadrant_flat(), name="hwloc-like")
    typed = m.model_copy(update={"nodes": [
        n.model_copy(update={"memory_kind": MemoryKind.HBM, "socket": n.id - 2}) if n.id >= 2
        else n.model_copy(update={"socket": n.id}) for n in m.nodes
    ]})
    timed = catalog_machine(typed, MAX)
    for hbm in (2, 3):
        (link,) = [lk for lk in timed.links if hbm in (lk.a, lk.b)]
        assert {link.a, link.b} == {hbm, hbm - 2}
    lat = np.asarray(latency_table_ns(timed))
    spec = get_platform("intel-sapphire-rapids-hbm").hbm
    assert spec is not None and lat[0, 2] == pytest.approx(lat[0, 0] + spec.added_latency_ns, abs=0.01)
