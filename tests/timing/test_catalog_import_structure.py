"""A machine imported from ``numactl --hardware`` gets the catalog machines' socket structure.

numactl's text names no sockets or switches; its importer joins every pair of nodes with a link of its own, which
split a socket's links over its node pairs: a node of an SNC2 socket read the other socket at a quarter of its
links (bandwidth matrix 55 % off on the public 8269CY SNC2 run, against 3.5 % for the same machine built by
``multi_die``), and a 2-socket box with SMT off was taken for one socket. ``topo import --cpu`` is the path issue 9's
held-out procedure takes (write the box's ``numactl -H``, import it with its processor), so the two must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.timing.catalog import catalog_calibration, catalog_machine
from numasim.timing.catalog.calibration import socket_layout
from numasim.timing.catalog.match import match_cpu
from numasim.topology.builders import glueless
from numasim.topology.io.numactl import machine_from_numactl, numactl_hardware_for
from numasim.topology.routing import bandwidth_table_gb_s, latency_table_ns


def _as_numactl_reports(case_file: str):  # type: ignore[no-untyped-def]
    """The case's machine, and what importing its ``numactl -H`` (distances as firmware reports them) gives."""
    case = next(c for c in PUBLIC_MLC_CASES if c.file == case_file)
    ref = public_machine(case)
    same, cross = (12, 32) if "EPYC" in case.cpu else (11, 21)  # what Intel and AMD firmware write
    slit = [[10 if a.id == b.id else (same if a.socket == b.socket else cross) for b in ref.nodes] for a in ref.nodes]
    ref = ref.model_copy(update={"firmware_slit": slit})
    imported = catalog_machine(machine_from_numactl(numactl_hardware_for(ref), name="imported"), case.cpu)
    return ref, imported


@pytest.mark.parametrize("case_file", ["plantegg-2s-cascadelake-8269CY-snc2.md", "cxl-2s-genoa-epyc9224-nps2.md",
                                       "cxl-2s-spr-silver4410Y.md"])
def test_an_imported_machine_is_timed_like_the_catalog_built_one(case_file: str) -> None:
    ref, imported = _as_numactl_reports(case_file)
    assert [n.socket for n in imported.nodes] == [n.socket for n in ref.nodes]
    assert sorted(s.name for s in imported.switches) == sorted(s.name for s in ref.switches)
    a, b = (catalog_machine(m, m.cpu_model) if m is ref else m for m in (ref, imported))
    np.testing.assert_allclose(bandwidth_table_gb_s(b), bandwidth_table_gb_s(a), rtol=1e-6)
    np.testing.assert_allclose(latency_table_ns(b), latency_table_ns(a), rtol=1e-6)
    assert len(b.core_dies) == len(a.core_dies)


def test_the_firmware_distances_tell_sockets_apart_with_smt_off() -> None:
    # 2 x 12-core Silver 4410Y with SMT off: 24 cpus are also one socket's threads; the distance 21 says two.
    _, imported = _as_numactl_reports("cxl-2s-spr-silver4410Y.md")
    found = match_cpu(imported.cpu_model or "")
    assert found.sku is not None
    bare = imported.model_copy(update={"nodes": [n.model_copy(update={"socket": None}) for n in imported.nodes]})
    sockets, note = socket_layout(bare, found.sku)
    assert sockets == {0: 0, 1: 1} and "firmware's distances" in note


def test_a_glueless_machine_keeps_its_links() -> None:
    m = glueless(4, cpus_per_node=8).model_copy(update={"firmware_slit": [[10 if i == j else 20 for j in range(4)] for i in range(4)]})
    timed = catalog_machine(m, "Intel(R) Xeon(R) CPU E7-8890 v2 @ 2.80GHz")
    assert not timed.switches and len(timed.links) == len(m.links)
    assert catalog_calibration(timed).machine == m.name


def test_a_catalog_machine_says_which_numbers_other_platforms_lent() -> None:
    """A Nehalem-EP has no public latency, QPI efficiency or cache-to-cache figure of its own in the catalog: Ivy
    Bridge-EP lends the first two, Westmere-EP (the same uncore, a measured ping-pong) the third.
    That used to be said only in the calibration's priors; the machine file and `topo show/latency` say it too."""
    from numasim.timing.catalog.machine import catalog_borrowed

    m = catalog_machine(glueless(2), "Xeon X5550")
    assert catalog_borrowed(m) == ("controllers.latency_ns, links.bandwidth_gb_s, links.latency_ns from intel-ivy-bridge-ep; "
                                   "coherence.local_hitm_ns, coherence.remote_hitm_ns, coherence.remote_hitm_home_reader_ns "
                                   "from intel-westmere-ep")
    own = catalog_machine(glueless(2), "Platinum 8180")  # every figure its own
    assert catalog_borrowed(own) is None and catalog_borrowed(glueless(2)) is None


def _numactl_text(sockets: int, cores_per_node: list[int], near: int, far: int) -> str:
    """``numactl -H`` of ``sockets`` sockets split into nodes of ``cores_per_node`` cores, two threads a core
    numbered as Linux numbers them (a core's sibling is ``cpu + total cores``), at distances ``near`` inside a
    socket and ``far`` across."""
    total = sockets * sum(cores_per_node)
    nodes, first = [], 0
    for _ in range(sockets):
        for k in cores_per_node:
            nodes.append([*range(first, first + k), *range(first + total, first + total + k)])
            first += k
    per = len(cores_per_node)
    lines = [f"available: {len(nodes)} nodes (0-{len(nodes) - 1})"]
    for i, cpus in enumerate(nodes):
        lines += [f"node {i} cpus: {' '.join(map(str, cpus))}", f"node {i} size: 65536 MB", f"node {i} free: 60000 MB"]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(len(nodes)))]
    for i in range(len(nodes)):
        row = [10 if i == j else (near if i // per == j // per else far) for j in range(len(nodes))]
        lines.append(f"  {i}: " + " ".join(f"{d:3d}" for d in row))
    return "\n".join(lines) + "\n"


def test_cluster_on_die_distances_name_two_clusters_of_one_socket() -> None:
    # Broadwell-EP with Cluster-on-Die as its firmware reports it: 10 / 21 / 31, siblings at cpu + 36. The 18
    # cpus of a node are also an 18-core socket with SMT off, which is what the convention's grouping (closer
    # than 20) alone made of it: four sockets joined by QPI links of a quarter of their bandwidth.
    m = machine_from_numactl(_numactl_text(2, [9, 9], 21, 31), name="cod")
    cpu = "Intel(R) Xeon(R) CPU E5-2697 v4 @ 2.30GHz"
    sku = match_cpu(cpu).sku
    assert sku is not None
    sockets, note = socket_layout(m, sku)
    assert sockets == {0: 0, 1: 0, 2: 1, 3: 1} and "distance 21 or less are one socket" in note
    timed = catalog_machine(m, cpu)
    assert [n.socket for n in timed.nodes] == [0, 0, 1, 1] and len(timed.switches) == 2
    bw = np.asarray(bandwidth_table_gb_s(timed))
    assert bw[0, 1] == pytest.approx(bw[0, 0], rel=0.01)  # a sibling cluster's memory through the ring
    assert bw[0, 2] < bw[0, 1]  # the other socket's through QPI


def test_a_mesh_is_no_limit_below_the_socket_s_dram() -> None:
    # Granite Rapids SNC3 (43 + 43 + 42 cores a socket): a cluster reads its siblings' memory as fast as its own.
    timed = catalog_machine(machine_from_numactl(_numactl_text(2, [43, 43, 42], 12, 21), name="gnr"),
                            "Intel(R) Xeon(R) 6980P")
    bw = np.asarray(bandwidth_table_gb_s(timed))
    assert bw[0, 1] == pytest.approx(bw[0, 0], rel=0.01) and bw[0, 2] == pytest.approx(bw[0, 0], rel=0.01)


def test_an_epyc_with_smt_off_gets_dies_of_consecutive_cores() -> None:
    # 2 x EPYC 9575F (64 cores, 8 dies of 8) with SMT off: 64 cpus a socket, every one a core. Taking cpus 32-63
    # for the siblings of 0-31 made dies of 0-3 + 32-35.
    text = "\n".join(
        ["available: 2 nodes (0-1)"]
        + [line for n in (0, 1) for line in (f"node {n} cpus: {' '.join(map(str, range(64 * n, 64 * n + 64)))}",
                                             f"node {n} size: 65536 MB", f"node {n} free: 60000 MB")]
        + ["node distances:", "node   0   1", "  0:  10  32", "  1:  32  10"]) + "\n"
    timed = catalog_machine(machine_from_numactl(text, "turin"), "AMD EPYC 9575F 64-Core Processor")
    assert [d.cpus for d in timed.core_dies[:2]] == [list(range(0, 8)), list(range(8, 16))]
    assert len(timed.core_dies) == 16 and all(len(d.cpus) == 8 for d in timed.core_dies)


def test_a_naples_die_with_the_socket_s_only_memory_keeps_its_own_channels() -> None:
    # 2 x EPYC 7401 (4 dies of 2 channels a socket): DIMMs on one die's channels per socket, the other dies'
    # nodes without memory. The memory node reads at its die's 2 channels, not at the socket's 8.
    lines = ["available: 8 nodes (0-7)"]
    for n in range(8):
        lines += [f"node {n} cpus: {' '.join(map(str, range(6 * n, 6 * n + 6)))}",
                  f"node {n} size: {65536 if n in (1, 5) else 0} MB", f"node {n} free: {60000 if n in (1, 5) else 0} MB"]
    slit = [[10 if i == j else (16 if i // 4 == j // 4 else 32) for j in range(8)] for i in range(8)]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(8))]
    lines += [f"{i:3d}: " + " ".join(f"{d:3d}" for d in row) for i, row in enumerate(slit)]
    m = machine_from_numactl("\n".join(lines) + "\n", "naples")
    cal = catalog_calibration(m.model_copy(update={"cpu_model": "AMD EPYC 7401 24-Core Processor"}))
    full = catalog_calibration(glueless(2, cpus_per_node=48).model_copy(update={"cpu_model": "AMD EPYC 7401"}))
    per_socket = full.controller(0).read_bandwidth_gb_s  # one node a socket: all 8 channels
    assert cal.controller(1).read_bandwidth_gb_s == pytest.approx(per_socket / 4)
    why = next(p.source for p in cal.provenance.priors if p.parameter == "controllers[1].read_bandwidth_gb_s")
    assert "its die's 2" in why


def test_a_naples_package_links_its_dies_directly_and_each_to_its_counterpart() -> None:
    # Naples has no I/O die: a die's three sibling links were one link to a hub, carrying a die's traffic to all
    # three siblings at one link's bandwidth
    lines = ["available: 8 nodes (0-7)"]
    for n in range(8):
        lines += [f"node {n} cpus: {' '.join(map(str, range(6 * n, 6 * n + 6)))}", f"node {n} size: 16384 MB",
                  f"node {n} free: 16000 MB"]
    slit = [[10 if i == j else (16 if i // 4 == j // 4 else 32) for j in range(8)] for i in range(8)]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(8))]
    lines += [f"{i:3d}: " + " ".join(f"{d:3d}" for d in row) for i, row in enumerate(slit)]
    m = machine_from_numactl("\n".join(lines) + "\n", "naples")
    timed = catalog_machine(m, "AMD EPYC 7451 24-Core Processor")
    assert not timed.switches and [n.socket for n in timed.nodes] == [0] * 4 + [1] * 4
    pairs = {frozenset((lk.a, lk.b)) for lk in timed.links}
    assert {frozenset((0, 1)), frozenset((2, 3)), frozenset((5, 7))} <= pairs  # a package's dies, directly
    assert {frozenset((i, i + 4)) for i in range(4)} <= pairs and frozenset((0, 5)) not in pairs  # counterparts
    sibling = next(lk for lk in timed.links if {lk.a, lk.b} == {0, 1})
    assert sibling.bandwidth_gb_s == pytest.approx(21.3)  # the catalog's die-to-die figure, each of the three
    lat = latency_table_ns(timed)
    assert lat[0, 4] < lat[0, 5]  # the counterpart die is one socket hop away, the others a die hop more


@pytest.mark.parametrize(("cpu", "cpus"), [("Intel(R) Xeon(R) D-2796NT CPU @ 2.00GHz", 40),
                                           ("Intel(R) Atom(TM) CPU C3858 @ 2.00GHz", 12),
                                           ("AMD EPYC 8534P 64-Core Processor", 128)])
def test_a_single_socket_part_imports_as_one_socket_without_socket_links(cpu: str, cpus: int) -> None:
    """Xeon D, Atom and EPYC 8004 have no socket link (the catalog gives their platforms none): a box's one-node
    ``numactl -H`` imports and is timed from its own memory alone; a machine of two sockets is an error."""
    from numasim.errors import CalibrationError

    text = (f"available: 1 nodes (0)\nnode 0 cpus: {' '.join(map(str, range(cpus)))}\nnode 0 size: 65536 MB\n"
            "node 0 free: 60000 MB\nnode distances:\nnode   0\n  0:  10\n")
    timed = catalog_machine(machine_from_numactl(text, name="one"), cpu)
    cal = catalog_calibration(timed)
    assert not cal.links and len(cal.controllers) == 1
    assert not [p for p in cal.provenance.priors if p.parameter.startswith("links[")]
    assert cal.controllers[0].read_bandwidth_gb_s > 0
    with pytest.raises(CalibrationError, match="single-socket part, but the machine has 2 sockets"):
        catalog_calibration(glueless(2), sku=cpu)


def _graded_numactl(adjacent: list[set[int]], cpus: int, near: int = 21, step: int = 10) -> str:
    """``numactl -H`` of one node a socket, distances graded by hops over ``adjacent`` (``near`` for one hop,
    ``near + step`` for two ...), ``cpus`` cpus a node."""
    from collections import deque

    n = len(adjacent)
    hops = []
    for s in range(n):
        d, todo = {s: 0}, deque([s])
        while todo:
            x = todo.popleft()
            for y in adjacent[x]:
                if y not in d:
                    d[y] = d[x] + 1
                    todo.append(y)
        hops.append([d[t] for t in range(n)])
    lines = [f"available: {n} nodes (0-{n - 1})"]
    for s in range(n):
        lines += [f"node {s} cpus: {' '.join(map(str, range(s * cpus, (s + 1) * cpus)))}", f"node {s} size: 65536 MB",
                  f"node {s} free: 60000 MB"]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(n))]
    lines += [f"  {s}: " + " ".join(f"{10 if h == 0 else near + step * (h - 1):3d}" for h in hops[s]) for s in range(n)]
    return "\n".join(lines) + "\n"


def test_eight_sockets_graded_by_hops_are_joined_only_where_one_link_reaches() -> None:
    """An 8-socket Skylake-SP has 3 UPI links a socket for 7 other sockets; its firmware writes 21 for the 3 it
    reaches in one hop and 31 for the rest. The importer used to join every pair, each with 3/7 of a link (7.3
    GB/s) and all at one hop's latency; now the 21 pairs keep a whole link and the others route through one."""
    wagner = [{(s + 1) % 8, (s - 1) % 8, (s + 4) % 8} for s in range(8)]  # degree 3, every socket within 2 hops
    timed = catalog_machine(machine_from_numactl(_graded_numactl(wagner, 56), name="8s"), "Xeon Platinum 8180")
    assert "only those pairs are joined" in (timed.description or "")
    lat, bw = np.asarray(latency_table_ns(timed)), np.asarray(bandwidth_table_gb_s(timed))
    one, two = lat[0, 1], lat[0, 2]
    assert lat[0, 4] == pytest.approx(one) and two == pytest.approx(one + (one - lat[0, 0]), rel=1e-6)
    cal = catalog_calibration(timed)
    link = next(p for p in cal.provenance.priors if p.parameter.startswith("links[") and "bandwidth" in p.parameter)
    assert link.source.startswith("1 link(s) between sockets")
    assert bw[0, 1] == pytest.approx(link.value) and bw[0, 2] == pytest.approx(link.value)


def test_grades_that_leave_sockets_apart_keep_a_link_per_pair() -> None:
    # a glued 8-socket Westmere-EX (IBM eX5) as its firmware reports it: 12 within a board's pair, 17 within a
    # chassis, 19 across; the pairs at 12 join no more than two sockets, so every pair keeps its share of links
    slit = [[10, 12, 17, 17, 19, 19, 19, 19], [12, 10, 17, 17, 19, 19, 19, 19], [17, 17, 10, 12, 19, 19, 19, 19],
            [17, 17, 12, 10, 19, 19, 19, 19], [19, 19, 19, 19, 10, 12, 17, 17], [19, 19, 19, 19, 12, 10, 17, 17],
            [19, 19, 19, 19, 17, 17, 10, 12], [19, 19, 19, 19, 17, 17, 12, 10]]
    m = glueless(8, cpus_per_node=20).model_copy(update={"firmware_slit": slit})
    timed = catalog_machine(m, "Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz")
    assert len([lk for lk in timed.links if isinstance(lk.a, int) and isinstance(lk.b, int)]) == 28
    assert "only those pairs are joined" not in (timed.description or "")


def test_a_catalog_machine_calibrated_again_derives_its_borrowed_cache_latency_again() -> None:
    """A machine ``topo import --cpu`` timed carries the catalog's cache latencies, borrowed ones included; a
    calibration of it used to keep them as "machine file (nominal)", whatever clock it was given."""
    timed = catalog_machine(glueless(2), "Xeon Platinum 8470")  # Sapphire Rapids: no L3 cycles of its own
    (l3,) = [p for p in catalog_calibration(timed).provenance.priors if p.parameter == "caches[L3].latency_ns"]
    assert "borrowed from" in l3.source and "nominal" not in l3.source
    cycles = float(l3.source.split(" cycles")[0])
    slow = catalog_calibration(timed, core_clock_ghz=1.0)
    assert next(c for c in slow.caches if c.name == "L3").latency_ns == pytest.approx(cycles)
