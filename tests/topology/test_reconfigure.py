"""numasim.topology.reconfigure and cluster_mode: the same hardware in another SNC/CoD/NPS mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings

from numasim.errors import TopologyError
from numasim.topology.builders import glueless, multi_die
from numasim.topology.cluster_mode import ClusterMode, detect_mode, parse_mode
from numasim.topology.io import load_machine
from numasim.topology.model import Machine
from numasim.topology.reconfigure import reconfigure, split_cpus
from numasim.topology.routing import latency_table_ns
from tests.strategies import multi_die_machines

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared" / "data"
GiB = 2**30


def socket_view(m: Machine) -> dict[tuple[int, int], float]:
    """Latency from a cpu of socket s to a line of socket t, lines spread by channel (bandwidth) share."""
    lat = latency_table_ns(m)
    out = {}
    for s in m.sockets:
        for t in m.sockets:
            src = [(i, n) for i, n in enumerate(m.nodes) if n.socket == s]
            dst = [(j, n) for j, n in enumerate(m.nodes) if n.socket == t]
            cpus = sum(len(n.cpus) for _, n in src)
            bw = sum(n.controller.read_bandwidth_gb_s for _, n in dst)
            out[(s, t)] = sum(
                len(a.cpus) / cpus * b.controller.read_bandwidth_gb_s / bw * lat[i, j] for i, a in src for j, b in dst
            )
    return out


def per_socket(m: Machine, what: str) -> dict[int, float]:
    nodes = {s: [n for n in m.nodes if n.socket == s] for s in m.sockets}
    if what == "bandwidth":
        return {s: sum(n.controller.read_bandwidth_gb_s for n in ns) for s, ns in nodes.items()}
    if what == "memory":
        return {s: sum(n.memory_bytes for n in ns) for s, ns in nodes.items()}
    return {s: sorted(c for n in ns for c in n.cpus) for s, ns in nodes.items()}


def test_snc2_merge_averages_near_and_far() -> None:
    m = multi_die(2, "SNC2", controller_latency_ns=80.0, die_latency_ns=10.0, socket_bandwidth_gb_s=100.0)
    off = reconfigure(m, ClusterMode("snc", 1)).machine
    assert [n.cpus for n in off.nodes] == [list(range(0, 24)) + list(range(48, 72)), list(range(24, 48)) + list(range(72, 96))]
    assert off.switches == [] and len(off.links) == 1
    # Half of a socket's lines are on the cpu's own cluster (80 ns), half on the other (90 ns).
    assert latency_table_ns(off)[0, 0] == pytest.approx(85.0)
    assert latency_table_ns(off)[0, 1] == pytest.approx(latency_table_ns(m)[0, 2])
    assert off.nodes[0].controller.read_bandwidth_gb_s == pytest.approx(100.0)
    assert off.nodes[0].memory_bytes == 2 * 64 * GiB


def test_round_trip_snc2_off_snc2_gives_back_the_machine() -> None:
    m = multi_die(2, "SNC2")
    off = reconfigure(m, ClusterMode("snc", 1))
    back = reconfigure(off.machine, ClusterMode("snc", 2), die_latency_ns=8.0, die_bandwidth_gb_s=100.0).machine
    assert [(n.id, n.cpus, n.memory_bytes, n.socket, n.die) for n in back.nodes] == [
        (n.id, n.cpus, n.memory_bytes, n.socket, n.die) for n in m.nodes
    ]
    assert [s.name for s in back.switches] == [s.name for s in m.switches]
    np.testing.assert_allclose(latency_table_ns(back), latency_table_ns(m), rtol=1e-12)
    assert back.name == "multi-die-2s-snc2"


def test_memory_side_caches_go_with_the_memory_they_cache() -> None:
    # Memory Mode on an SNC2 box: each cluster's memory behind its share of the socket's DRAM cache
    m = multi_die(2, "SNC2")
    m = m.model_copy(update={"nodes": [n.model_copy(update={"memory_side_cache_bytes": 48 * GiB}) for n in m.nodes]})
    off = reconfigure(m, ClusterMode("snc", 1)).machine
    assert [n.memory_side_cache_bytes for n in off.nodes] == [96 * GiB, 96 * GiB]
    back = reconfigure(off, ClusterMode("snc", 2), die_latency_ns=8.0, die_bandwidth_gb_s=100.0).machine
    assert [n.memory_side_cache_bytes for n in back.nodes] == [48 * GiB] * 4
    # only one cluster of a socket behind a cache: nothing says how to share it out
    half = m.model_copy(update={"nodes": [m.nodes[0], *[n.model_copy(update={"memory_side_cache_bytes": None})
                                                         for n in m.nodes[1:]]]})
    with pytest.raises(TopologyError, match="memory_side_cache_bytes"):
        reconfigure(half, ClusterMode("snc", 1))


@pytest.mark.parametrize(
    ("file", "family"),
    [("dell-r740-2s-gold6230-snc2-optane2lm.xml", "snc"), ("cisco-b200m4-2s-E5-2683v3-CoD.v1.xml", "cod")],
)
def test_real_layouts_round_trip_cpus_and_firmware_slit(file: str, family: str) -> None:
    m = load_machine(SHARED / "hwloc" / file)
    off = reconfigure(m, ClusterMode(family, 1)).machine  # type: ignore[arg-type]
    # CoD writes 31 for the other socket, SNC2 and both "off" modes 21 (FIRMWARE_SLIT's sources).
    assert off.firmware_slit == [[10, 21], [21, 10]]
    back = reconfigure(off, ClusterMode(family, 2), die_latency_ns=10.0, die_bandwidth_gb_s=20.0).machine  # type: ignore[arg-type]
    assert [n.cpus for n in back.nodes] == [n.cpus for n in m.nodes]
    assert [n.socket for n in back.nodes] == [n.socket for n in m.nodes]
    assert back.firmware_slit == m.firmware_slit
    assert sum(n.memory_bytes for n in back.nodes) == m.memory_bytes


def test_dell_interleaved_numbering_regroups_round_robin() -> None:
    # Dell R740 in SNC2 numbers cpus round robin over the 4 nodes; with SNC off a socket has every 2nd cpu.
    m = load_machine(SHARED / "hwloc" / "dell-r740-2s-gold6230-snc2-optane2lm.xml")
    off = reconfigure(m, ClusterMode("snc", 1)).machine
    assert off.nodes[0].cpus == list(range(0, 80, 2)) and off.nodes[1].cpus == list(range(1, 80, 2))


def test_epyc_7452_nps4_to_nps1_keeps_the_socket_and_matches_kerncraft() -> None:
    m = load_machine(REPO / "topologies" / "epyc-7452-nps4.toml")
    one = reconfigure(m, ClusterMode("nps", 1)).machine
    assert one.name == "epyc-7452-nps1" and len(one.nodes) == 1
    assert one.nodes[0].cpus == list(range(64)) and one.memory_bytes == m.memory_bytes
    assert one.firmware_slit == [[10]] and one.switches == [] and one.links == []
    # Whole-socket local bandwidth: the sum of the four quadrant plateaus (4 x 35.67 GB/s) against
    # likwid-bench's all-core socket measurement, 143.46 GB/s (Zen2_EPYC-7452.yml).
    assert one.nodes[0].controller.read_bandwidth_gb_s == pytest.approx(142.68)
    assert one.nodes[0].controller.read_bandwidth_gb_s == pytest.approx(143.46, rel=0.01)
    # Local latency: 1/4 of the lines in the own quadrant (95 ns), 3/4 across the IO die (115 ns).
    assert one.nodes[0].controller.latency_ns == pytest.approx(110.0)
    back = reconfigure(one, ClusterMode("nps", 4), die_latency_ns=20.0, die_bandwidth_gb_s=60.0, threads_per_core=2).machine
    assert [n.cpus for n in back.nodes] == [n.cpus for n in m.nodes]
    assert back.firmware_slit == m.firmware_slit
    np.testing.assert_allclose(latency_table_ns(back), latency_table_ns(m), rtol=1e-12)


def _kerncraft(path: Path) -> tuple[dict, list[float]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    load = [float(x.split()[0]) for x in data["benchmarks"]["measurements"]["MEM"][1]["results"]["load"]]
    return data, load


KERNCRAFT_CLUSTERED = [
    "SkylakeSP_Gold-6148_SNC.yml", "CascadelakeSP_Gold-6248_SNC.yml", "IcelakeSP_Platinum-8360Y.yml",
    "SapphireRapids_Platinum-8470.yml", "HaswellEP_E5-2695v3_CoD.yml", "BroadwellEP_E5-2697v4_CoD.yml",
    "Zen_EPYC-7451.yml", "Zen2_EPYC-7452.yml",
]


@pytest.mark.parametrize("file", KERNCRAFT_CLUSTERED)
def test_kerncraft_socket_bandwidth_is_the_sum_of_its_clusters(file: str) -> None:
    """A machine built from one cluster's bandwidth plateau, merged to one node per socket, predicts the
    all-core socket bandwidth measured with every cluster busy (within 15 %; 0.5-9 % on these eight)."""
    data, load = _kerncraft(SHARED / "kerncraft" / file)
    k, cores = data["NUMA domains per socket"], data["cores per NUMA domain"]
    plateau = max(load[:cores])  # the bandwidth one cluster's cores reach on their own channels
    amd = "EPYC" in data["model name"]
    family = "nps" if amd else ("cod" if "v3" in data["model name"] or "v4" in data["model name"] else "snc")
    mode = f"NPS{k}" if amd else f"SNC{k}"
    m = multi_die(data["sockets"], mode, cores_per_socket=k * cores, threads_per_core=data["threads per core"],
                  socket_bandwidth_gb_s=plateau * k)
    m = m.model_copy(update={"cpu_model": data["model name"]})
    assert detect_mode(m) == ClusterMode(family, k)  # type: ignore[arg-type]
    merged = reconfigure(m, ClusterMode(family, 1)).machine  # type: ignore[arg-type]
    socket_gb_s = merged.nodes[0].controller.read_bandwidth_gb_s
    assert socket_gb_s == pytest.approx(plateau * k)
    assert socket_gb_s == pytest.approx(load[-1], rel=0.15)


@settings(max_examples=40, deadline=None)
@given(multi_die_machines())
def test_invariants_over_multi_die(drawn: tuple[Machine, int]) -> None:
    m, threads = drawn
    source = detect_mode(m)
    for k in {"snc": (1, 2, 3, 4), "nps": (1, 2, 4), "cod": (1, 2)}[source.family]:
        if k == source.per_socket:
            continue
        target = ClusterMode(source.family, k)
        out = reconfigure(m, target, die_latency_ns=None if source.per_socket > 1 else 5.0,
                          die_bandwidth_gb_s=None if source.per_socket > 1 else 50.0, threads_per_core=threads).machine
        assert len(out.nodes) == len(m.sockets) * k
        assert out.cpus == m.cpus and out.memory_bytes == m.memory_bytes
        assert per_socket(out, "cpus") == per_socket(m, "cpus")
        assert per_socket(out, "memory") == per_socket(m, "memory")
        for s, bw in per_socket(m, "bandwidth").items():
            assert per_socket(out, "bandwidth")[s] == pytest.approx(bw, rel=1e-12)
        # What a cpu of a socket sees over the socket's interleaved lines does not depend on the mode.
        before, after = socket_view(m), socket_view(out)
        for key, ns in before.items():
            assert after[key] == pytest.approx(ns, rel=1e-9)
        # ... and going back gives the machine back (multi_die machines are symmetric).
        die = latency_table_ns(m)[0, 1] - m.nodes[1].controller.latency_ns if source.per_socket > 1 else None
        die_bw = m.links[0].bandwidth_gb_s if source.per_socket > 1 else None
        back = reconfigure(out, source, die_latency_ns=die, die_bandwidth_gb_s=die_bw, threads_per_core=threads).machine
        assert [n.cpus for n in back.nodes] == [n.cpus for n in m.nodes]
        np.testing.assert_allclose(latency_table_ns(back), latency_table_ns(m), rtol=1e-9)


def test_split_cpus_blocks_and_threads() -> None:
    assert split_cpus(list(range(8)) + list(range(16, 24)), 2, interleaved=False) == [
        [0, 1, 2, 3, 16, 17, 18, 19], [4, 5, 6, 7, 20, 21, 22, 23]
    ]
    with pytest.raises(TopologyError, match="do not split into 3"):
        split_cpus(list(range(8)), 3, interleaved=False)


def test_refusals_name_field_and_value() -> None:
    intel, amd = multi_die(2, "SNC2"), multi_die(1, "NPS4")
    with pytest.raises(TopologyError, match="Intel machine: use --snc"):
        reconfigure(intel, ClusterMode("nps", 4))
    with pytest.raises(TopologyError, match="AMD machine: use --nps"):
        reconfigure(amd, ClusterMode("snc", 1))
    with pytest.raises(TopologyError, match="already in SNC2"):
        reconfigure(intel, ClusterMode("snc", 2))
    with pytest.raises(TopologyError, match="16 cores per socket do not split into 3"):
        reconfigure(multi_die(2, "SNC2", cores_per_socket=16), ClusterMode("snc", 3))
    with pytest.raises(TopologyError, match="8 channels do not split into 3"):
        reconfigure(multi_die(2, "SNC2"), ClusterMode("snc", 3), channels_per_socket=8)
    skx = intel.model_copy(update={"cpu_model": "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"})
    with pytest.raises(TopologyError, match="Haswell-EP/Broadwell-EP only"):
        reconfigure(skx, ClusterMode("cod", 1))
    hsw = intel.model_copy(update={"cpu_model": "Intel(R) Xeon(R) CPU E5-2695 v3 @ 2.30GHz"})
    with pytest.raises(TopologyError, match="use --cod"):
        reconfigure(hsw, ClusterMode("snc", 1))
    with pytest.raises(TopologyError, match="no on-die link to carry"):
        reconfigure(multi_die(2, "SNC1"), ClusterMode("snc", 2))
    with pytest.raises(TopologyError, match="threads_per_core"):
        reconfigure(multi_die(1, "NPS1"), ClusterMode("nps", 4), die_latency_ns=20.0, die_bandwidth_gb_s=60.0)
    with pytest.raises(TopologyError, match="no positive"):
        reconfigure(multi_die(2, "SNC1"), ClusterMode("snc", 2), die_latency_ns=500.0, die_bandwidth_gb_s=60.0)
    no_sockets = load_machine(REPO / "docs" / "examples" / "mybox.txt")
    with pytest.raises(TopologyError, match=r"nodes\[0\]\.socket"):
        reconfigure(no_sockets, ClusterMode("snc", 2))
    with pytest.raises(TopologyError, match="--snc = '5'"):
        parse_mode("snc", "5")


def test_glueless_machine_is_snc_off() -> None:
    m = glueless(2, controller_latency_ns=80.0)
    m = m.model_copy(update={"nodes": [n.model_copy(update={"socket": n.id}) for n in m.nodes]})
    assert detect_mode(m).label == "SNC off"
    out = reconfigure(m, ClusterMode("snc", 2), die_latency_ns=10.0, die_bandwidth_gb_s=100.0).machine
    assert [n.cpus for n in out.nodes] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert latency_table_ns(out)[0, 0] == pytest.approx(75.0) and latency_table_ns(out)[0, 1] == pytest.approx(85.0)


NUMACTL_9224 = REPO / "tests" / "data" / "topology" / "numactl-2s-epyc9224-nps2-cxl.txt"


def _cxl_cells(m: Machine) -> tuple[list[float], list[float]]:
    """Latency from each cpu node to the CXL node, and the firmware distances to it."""
    lat = latency_table_ns(m)
    ids = m.node_ids
    (x,) = [n.id for n in m.nodes if n.memory_kind.value == "cxl"]
    cpu = [n.id for n in m.nodes if n.cpus]
    slit = m.slit()
    return [float(lat[ids.index(i), ids.index(x)]) for i in cpu], [slit[ids.index(i)][ids.index(x)] for i in cpu]


def test_a_cxl_expander_stays_behind_its_socket_across_a_mode_change() -> None:
    # The EPYC 9224 box as imported (NPS2, a Samsung x8 expander off socket 0): NPS1 and back to NPS4 keep the
    # expander after the new nodes, each socket's cpus reaching it in the time they did on average, its controller
    # and link bandwidth as they were, and its firmware distances the socket's old ones.
    from numasim.timing.catalog import catalog_machine
    from numasim.topology.io.numactl import load_machine_numactl

    m = catalog_machine(load_machine_numactl(NUMACTL_9224), "AMD EPYC 9224")
    lat2, slit2 = _cxl_cells(m)
    nps1 = reconfigure(m, ClusterMode("nps", 1)).machine
    lat1, slit1 = _cxl_cells(nps1)
    assert [n.id for n in nps1.nodes] == [0, 1, 2] and nps1.node(2).memory_kind.value == "cxl"
    assert nps1.node(2).memory_bytes == m.node(4).memory_bytes and nps1.node(2).socket == 0
    assert nps1.node(2).controller == m.node(4).controller
    assert lat1[0] == pytest.approx(np.mean(lat2[:2]), abs=1e-6)  # socket 0's cpus, as they reached it on average
    assert lat1[1] > lat1[0]
    assert slit1 == [50, 60] and nps1.slit()[2][:2] == [255, 255]
    (link,) = [lk for lk in nps1.links if lk.kind.value == "cxl"]
    (old,) = [lk for lk in m.links if lk.kind.value == "cxl"]
    assert {link.a, link.b} == {0, 2} and link.bandwidth_gb_s == old.bandwidth_gb_s
    nps4 = reconfigure(nps1, ClusterMode("nps", 4), die_latency_ns=10.0, die_bandwidth_gb_s=400.0).machine
    lat4, _ = _cxl_cells(nps4)
    assert len(nps4.nodes) == 9 and nps4.node(8).memory_kind.value == "cxl"
    assert lat4[:4] == pytest.approx([lat1[0]] * 4, abs=1e-6)  # behind socket 0's I/O die: alike from its nodes
    (link4,) = [lk for lk in nps4.links if lk.kind.value == "cxl"]
    assert {link4.a, link4.b} == {"socket0-iod", 8}


def test_a_calibration_carries_its_cxl_node_across_a_mode_change() -> None:
    from numasim.timing.catalog import catalog_calibration, catalog_machine
    from numasim.timing.transfer import transfer_calibration
    from numasim.topology.io.numactl import load_machine_numactl

    m = catalog_machine(load_machine_numactl(NUMACTL_9224), "AMD EPYC 9224")
    cal = catalog_calibration(m)
    moved = transfer_calibration(m, cal, ClusterMode("nps", 1))
    assert moved.calibration.controller(2).read_bandwidth_gb_s == cal.controller(4).read_bandwidth_gb_s
    links = {(lt.src, lt.dst): lt for lt in moved.calibration.links}
    assert (0, 2) in links and (2, 0) in links


def test_memory_only_nodes_that_are_no_cxl_expander_are_still_refused() -> None:
    m = multi_die(2, "SNC2")
    from numasim.topology.model import MemoryKind

    pmem = m.nodes[-1].model_copy(update={"id": 4, "cpus": [], "memory_kind": MemoryKind.PMEM})
    bad = m.model_copy(update={"nodes": [*m.nodes, pmem], "links": [*m.links, m.links[0].model_copy(update={"b": 4})]})
    with pytest.raises(TopologyError, match="memory-only nodes other than a CXL expander"):
        reconfigure(Machine.model_validate(bad.model_dump()), ClusterMode("snc", 1))


def _llc_bytes_a_socket(m: Machine) -> dict[int, int]:
    """The shared cache bytes each socket holds: a socket-wide level once, a cluster's share once a node."""
    from numasim.topology.model import CacheScope

    out = {}
    for s in m.sockets:
        nodes = len([n for n in m.nodes if n.socket == s and n.cpus])
        out[s] = sum(c.size_bytes * (nodes if c.scope is CacheScope.CLUSTER else 1) for c in m.caches
                     if c.scope in (CacheScope.SOCKET, CacheScope.CLUSTER))
    return out


@pytest.mark.parametrize(("family", "ks"), [("snc", (1, 2, 4, 2, 1)), ("cod", (1, 2, 1))])
def test_an_snc_or_cod_cluster_caches_in_its_share_of_the_l3(family: str, ks: tuple[int, ...]) -> None:
    """SNC and Cluster-on-Die map a cluster's memory to its own share of the socket's L3 slices: a node of k a
    socket has 1/k of the L3 (NODE scope), one node a socket the whole (SOCKET); the socket's L3 bytes never
    change, and a round trip gives the levels back."""
    from numasim.topology.model import CacheLevel, CacheScope

    l1 = CacheLevel(name="L1d", size_bytes=48 << 10, latency_ns=1.5, scope=CacheScope.CORE)
    l3 = CacheLevel(name="L3", size_bytes=48 << 20, latency_ns=18.0, scope=CacheScope.SOCKET)
    m = multi_die(2, "SNC1", cores_per_socket=24, caches=[l1, l3])
    want = _llc_bytes_a_socket(m)
    here = ClusterMode(family, 1)
    for k in ks[1:]:
        target = ClusterMode(family, k)
        m = reconfigure(m, target, die_latency_ns=8.0, die_bandwidth_gb_s=100.0, threads_per_core=2).machine
        here = target
        got = {c.name: c for c in m.caches}
        assert got["L1d"] == l1
        assert got["L3"].scope is (CacheScope.CLUSTER if k > 1 else CacheScope.SOCKET)
        assert got["L3"].size_bytes == l3.size_bytes // k
        assert _llc_bytes_a_socket(m) == want
    assert here.per_socket == 1 and m.caches == [l1, l3]


def test_an_nps_change_keeps_the_caches() -> None:
    from numasim.topology.model import CacheLevel, CacheScope

    l3 = CacheLevel(name="L3", size_bytes=64 << 20, latency_ns=12.0, scope=CacheScope.SOCKET)
    m = multi_die(2, "NPS4", cores_per_socket=32)
    m = m.model_copy(update={"caches": [l3]})
    assert reconfigure(m, ClusterMode("nps", 1)).machine.caches == [l3]
