"""Builders: the closed forms of each family (node counts, degree, diameter, hop = Hamming distance) and
invariants every generated machine must satisfy (connected, symmetric SLIT with a 10 diagonal)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.topology.builders import (
    EIGHT_SOCKET_KINDS,
    NPS_MODES,
    SNC_MODES,
    cache_hierarchy,
    crossbar,
    eight_socket,
    glueless,
    hypercube,
    multi_die,
    with_cxl_expander,
    with_device,
)
from numasim.topology.distances import slit, timing_distances
from numasim.topology.model import DeviceKind, LinkKind, Machine, MemoryKind
from numasim.topology.routing import graph, hop_table, latency_table_ns
from numasim.units import GiB


def _undirected(m: Machine) -> nx.Graph:
    return graph(m).to_undirected()


def _assert_sane(m: Machine) -> None:
    g = _undirected(m)
    assert nx.is_connected(g)
    if m.firmware_slit is None:
        # uniform controllers and symmetric links: the timing-derived table is symmetric by itself
        derived = np.array(timing_distances(m))
        assert (derived == derived.T).all()
    table = np.array(slit(m))
    assert table.shape == (len(m.nodes), len(m.nodes))
    assert (np.diag(table) == 10).all()
    assert (table == table.T).all()
    off = table[~np.eye(len(m.nodes), dtype=bool)]
    assert (off > 10).all() if off.size else True
    # every cpu once, on a node that has a socket
    assert len(m.cpus) == len(set(m.cpus))


@given(st.integers(min_value=0, max_value=5))
@settings(max_examples=6)
def test_hypercube_closed_forms(c: int) -> None:
    m = hypercube(c)
    assert len(m.nodes) == 2**c
    g = _undirected(m)
    assert all(d == c for _, d in g.degree())
    hops = hop_table(m)
    ids = m.node_ids
    for i in ids:
        for j in ids:
            assert hops[i, j] == bin(i ^ j).count("1")
    assert int(hops.max()) == c
    _assert_sane(m)


@given(st.integers(min_value=1, max_value=12))
@settings(max_examples=12)
def test_glueless_full_has_diameter_one(n: int) -> None:
    m = glueless(n)
    assert int(hop_table(m).max()) == (1 if n > 1 else 0)
    _assert_sane(m)


@given(st.integers(min_value=3, max_value=16))
@settings(max_examples=14)
def test_glueless_ring_diameter_is_half(n: int) -> None:
    m = glueless(n, shape="ring")
    assert int(hop_table(m).max()) == n // 2
    assert all(d == 2 for _, d in _undirected(m).degree())
    _assert_sane(m)


@pytest.mark.parametrize("kind,diameter", [("twisted-ladder", 2), ("cube", 3), ("full", 1)])
def test_eight_socket_diameters(kind: str, diameter: int) -> None:
    m = eight_socket(kind)
    assert len(m.nodes) == 8
    assert int(hop_table(m).max()) == diameter
    degree = 7 if kind == "full" else 3
    assert all(d == degree for _, d in _undirected(m).degree())
    _assert_sane(m)


def test_eight_socket_kinds_are_listed_and_bad_kind_is_named() -> None:
    assert set(EIGHT_SOCKET_KINDS) == {"twisted-ladder", "cube", "full"}
    with pytest.raises(ValueError, match="'moebius'"):
        eight_socket("moebius")


@given(
    sockets=st.integers(min_value=1, max_value=4),
    mode=st.sampled_from(sorted({**SNC_MODES, **NPS_MODES})),
    threads=st.sampled_from([1, 2]),
)
@settings(max_examples=25)
def test_multi_die_node_counts(sockets: int, mode: str, threads: int) -> None:
    per = {**SNC_MODES, **NPS_MODES}[mode]
    m = multi_die(sockets, mode, cores_per_socket=24, threads_per_core=threads)
    assert len(m.nodes) == sockets * per
    assert len(m.cpus) == sockets * 24 * threads
    assert m.cpus == list(range(sockets * 24 * threads))
    assert [n.socket for n in m.nodes] == [i // per for i in range(sockets * per)]
    _assert_sane(m)
    lat = latency_table_ns(m)
    # a node on the same socket is never farther than one on another socket
    for i, a in enumerate(m.nodes):
        same = [lat[i, j] for j, b in enumerate(m.nodes) if b.socket == a.socket and j != i]
        other = [lat[i, j] for j, b in enumerate(m.nodes) if b.socket != a.socket]
        if same and other:
            assert max(same) < min(other)


def test_multi_die_snc2_numbers_like_article_000() -> None:
    m = multi_die(2, "SNC2", cores_per_socket=24, threads_per_core=2)
    assert m.nodes[0].cpus == [*range(0, 12), *range(48, 60)]
    assert m.nodes[3].cpus == [*range(36, 48), *range(84, 96)]
    table = slit(m)
    assert table[0][1] == 11 and table[0][2] > 11
    kinds = {link.kind for link in m.links}
    assert kinds == {LinkKind.ON_DIE, LinkKind.UPI}


def test_multi_die_nps4_derived_slit_is_12_within_a_socket() -> None:
    m = multi_die(1, "NPS4", cores_per_socket=32)
    assert [row[1:] for row in slit(m)][0] == [12, 12, 12]
    assert {link.kind for link in m.links} == {LinkKind.INFINITY_FABRIC}


def test_multi_die_rejects_bad_mode_and_uneven_split() -> None:
    with pytest.raises(ValueError, match="'SNC5'"):
        multi_die(2, "SNC5")
    with pytest.raises(ValueError, match="cores_per_socket = 10"):
        multi_die(2, "SNC3", cores_per_socket=10)


@given(nodes=st.integers(min_value=1, max_value=12), per=st.integers(min_value=1, max_value=6))
@settings(max_examples=20)
def test_crossbar_routes_through_routers(nodes: int, per: int) -> None:
    m = crossbar(nodes, nodes_per_router=per)
    routers = -(-nodes // per)
    assert len(m.switches) == routers
    hops = hop_table(m)
    for i in m.node_ids:
        for j in m.node_ids:
            expected = 0 if i == j else (2 if i // per == j // per else 3)
            assert hops[i, j] == expected
    _assert_sane(m)


@given(attach=st.integers(min_value=0, max_value=3), size_gib=st.integers(min_value=1, max_value=512))
@settings(max_examples=10)
def test_cxl_expander_adds_a_cpuless_node(attach: int, size_gib: int) -> None:
    base = multi_die(2, "SNC2")
    m = with_cxl_expander(base, attach, size_gib * GiB)
    cxl = m.nodes[-1]
    assert cxl.id == 4 and cxl.cpus == [] and cxl.memory_kind is MemoryKind.CXL
    assert cxl.memory_bytes == size_gib * GiB
    assert m.devices[-1].kind is DeviceKind.CXL_EXPANDER and m.devices[-1].node == attach
    assert any(link.kind is LinkKind.CXL and {link.a, link.b} == {attach, 4} for link in m.links)
    _assert_sane(m)
    table = slit(m)
    # the old part of the table is kept; the expander is nearest to the node it hangs off
    assert [row[:4] for row in table[:4]] == slit(base)
    assert table[attach][4] == min(table[i][4] for i in range(4))


def test_two_cxl_expanders_keep_a_symmetric_table() -> None:
    m = with_cxl_expander(with_cxl_expander(glueless(2), 0, 8 * GiB), 1, 8 * GiB)
    assert [d.name for d in m.devices] == ["cxl0", "cxl1"]
    _assert_sane(m)


def test_with_device_and_its_errors() -> None:
    m = with_device(glueless(2), "mlx5_2", 1, attach_bandwidth_gb_s=25.5)
    assert m.devices[0].node == 1 and m.devices[0].attach_bandwidth_gb_s == 25.5
    with pytest.raises(ValueError, match="node = 7"):
        with_device(m, "x", 7)
    with pytest.raises(ValueError, match="'mlx5_2'"):
        with_device(m, "mlx5_2", 0)
    with pytest.raises(ValueError, match="attach_node = 9"):
        with_cxl_expander(m, 9, GiB)


def test_cache_hierarchy_levels() -> None:
    levels = cache_hierarchy()
    assert [c.name for c in levels] == ["L1d", "L2", "L3"]
    assert levels[0].size_bytes < levels[1].size_bytes < levels[2].size_bytes
