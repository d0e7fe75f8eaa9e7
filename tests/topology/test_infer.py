"""infer.from_distance_matrix: the derived SLIT reproduces the table exactly, with as few links as possible."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import TopologyError
from numasim.topology.distances import timing_distances
from numasim.topology.infer import check_distance_matrix, from_distance_matrix
from numasim.topology.routing import routing


@st.composite
def slits(draw: st.DrawFn, symmetric: bool) -> list[list[int]]:
    n = draw(st.integers(1, 16))
    values = draw(st.lists(st.integers(11, 255), min_size=n * n, max_size=n * n))
    d = np.array(values, dtype=np.int64).reshape(n, n)
    if symmetric:
        d = np.triu(d, 1) + np.triu(d, 1).T
    np.fill_diagonal(d, 10)
    return d.tolist()


@st.composite
def metric_slits(draw: st.DrawFn) -> list[list[int]]:
    """Tables that come from a real link graph (shortest paths of random positive weights): prunable."""
    n = draw(st.integers(2, 12))
    w = np.array(draw(st.lists(st.integers(1, 30), min_size=n * n, max_size=n * n))).reshape(n, n)
    w = np.minimum(w, w.T)
    s = w.copy()
    np.fill_diagonal(s, 0)
    for k in range(n):
        s = np.minimum(s, s[:, k, None] + s[None, k, :])
    return (10 + s).tolist()


@settings(max_examples=40)
@given(slits(symmetric=True))
def test_symmetric_tables_round_trip_exactly(table: list[list[int]]) -> None:
    m = from_distance_matrix(table, name="t")
    assert m.firmware_slit is None
    assert timing_distances(m) == table


@settings(max_examples=40)
@given(slits(symmetric=False))
def test_asymmetric_tables_round_trip_exactly(table: list[list[int]]) -> None:
    m = from_distance_matrix(table, name="t")
    assert timing_distances(m) == table


@settings(max_examples=40)
@given(metric_slits(), st.sampled_from([80.0, 100.0, 73.3, 131.0]))
def test_metric_tables_need_no_forced_routes_and_any_controller_latency_works(
    table: list[list[int]], latency_ns: float
) -> None:
    m = from_distance_matrix(table, name="t", controller_latency_ns=latency_ns)
    assert m.routes == []
    assert timing_distances(m) == table


def test_a_line_is_pruned_to_its_two_links() -> None:
    m = from_distance_matrix([[10, 20, 30], [20, 10, 20], [30, 20, 10]], name="line")
    assert [(link.a, link.b, link.latency_ns) for link in m.links] == [(0, 1, 100.0), (1, 2, 100.0)]


def test_a_square_of_2d_hypercube_distances_comes_back_as_a_ring() -> None:
    d = [[10, 20, 20, 30], [20, 10, 30, 20], [20, 30, 10, 20], [30, 20, 20, 10]]
    m = from_distance_matrix(d, name="square")
    assert sorted((link.a, link.b) for link in m.links) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert routing(m).hops(0, 3) == 2


def test_seed_000_two_sockets_of_two_dies_keep_all_six_links() -> None:
    d = [[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]]
    m = from_distance_matrix(d, name="seed-000")
    lat = {(link.a, link.b): link.latency_ns for link in m.links}
    assert lat == {(0, 1): 10.0, (2, 3): 10.0, (0, 2): 100.0, (0, 3): 100.0, (1, 2): 100.0, (1, 3): 100.0}


def test_triangle_violation_forces_the_direct_link_with_a_route() -> None:
    d = [[10, 15, 40], [15, 10, 15], [40, 15, 10]]
    m = from_distance_matrix(d, name="v")
    assert [(r.src, r.dst, r.path) for r in m.routes] == [(0, 2, [0, 2]), (2, 0, [2, 0])]
    assert routing(m).path(0, 2) == [0, 2]
    assert timing_distances(m) == d


def test_asymmetric_table_uses_reverse_latency() -> None:
    m = from_distance_matrix([[10, 20], [30, 10]], name="a")
    (link,) = m.links
    assert (link.latency_ns, link.latency_ns_reverse) == (100.0, 200.0)


def test_sparse_node_ids_and_given_nodes() -> None:
    m = from_distance_matrix([[10, 40], [40, 10]], name="p9", node_ids=[0, 8], cpus_per_node=2)
    assert m.node_ids == [0, 8] and m.nodes[1].cpus == [2, 3]


def test_64_node_random_table_round_trips() -> None:
    rng = np.random.default_rng(7)
    d = rng.integers(11, 256, size=(64, 64))
    np.fill_diagonal(d, 10)
    m = from_distance_matrix(d, name="big")
    assert timing_distances(m) == d.tolist()


@pytest.mark.parametrize(
    "table,match",
    [
        ([[10, 20], [20]], "square|rows"),
        ([[11, 20], [20, 10]], r"\[0\]\[0\]"),
        ([[10, 10], [10, 10]], "11..255"),
        ([[10, 256], [20, 10]], "11..255"),
        ([[10, 20.5], [20, 10]], "whole"),
    ],
)
def test_bad_tables_name_the_cell(table: list[list[float]], match: str) -> None:
    with pytest.raises(TopologyError, match=match):
        check_distance_matrix(table)  # type: ignore[arg-type]
