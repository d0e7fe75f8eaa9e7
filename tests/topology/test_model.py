"""The machine model: validation names the field, routing and tables follow the closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from numasim.topology import Link, Machine, MemoryController, Node, glueless, hypercube
from numasim.topology.distances import slit, slit_from_latency
from numasim.topology.routing import hop_table, latency_table_ns, routing

CTRL = MemoryController(latency_ns=80.0, read_bandwidth_gb_s=40.0)


def _node(i: int, cpus: list[int], mem: int = 1 << 30) -> Node:
    return Node(id=i, cpus=cpus, memory_bytes=mem, controller=CTRL)


def test_duplicate_cpu_is_rejected_naming_the_cpu() -> None:
    with pytest.raises(ValidationError, match="cpu 1 is already on node 0"):
        Machine(
            name="x",
            nodes=[_node(0, [0, 1]), _node(1, [1, 2])],
            links=[Link(a=0, b=1, latency_ns=10, bandwidth_gb_s=1)],
        )


def test_disconnected_graph_is_rejected() -> None:
    with pytest.raises(ValidationError, match="disconnected"):
        Machine(name="x", nodes=[_node(0, [0]), _node(1, [1]), _node(2, [2])],
                links=[Link(a=0, b=1, latency_ns=10, bandwidth_gb_s=1)])


def test_node_without_cpus_and_memory_is_rejected() -> None:
    with pytest.raises(ValidationError, match="neither cpus nor memory"):
        Node(id=3, cpus=[], memory_bytes=0)


@pytest.mark.parametrize("field,value", [("latency_ns", 0), ("latency_ns", -1), ("bandwidth_gb_s", 0)])
def test_non_positive_link_numbers_are_rejected(field: str, value: float) -> None:
    kwargs = {"a": 0, "b": 1, "latency_ns": 10.0, "bandwidth_gb_s": 1.0, field: value}
    with pytest.raises(ValidationError, match=field):
        Link(**kwargs)


@pytest.mark.parametrize(
    "table,match",
    [([[10, 20]], "rows"), ([[10, 20], [20]], "square"), ([[10, 20], [20, 11]], "diagonal")],
)
def test_bad_slit_is_rejected(table: list[list[int]], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        glueless(2).model_copy(update={}).model_validate({**glueless(2).model_dump(), "firmware_slit": table})


def test_idle_latency_is_controller_plus_route() -> None:
    m = hypercube(2, link_latency_ns=50.0, controller_latency_ns=80.0)
    lat = latency_table_ns(m)
    assert lat[0, 0] == 80.0
    assert lat[0, 1] == 130.0
    assert lat[0, 3] == 180.0  # two hops across the square


def test_routing_ties_break_to_lowest_vertex_sequence() -> None:
    r = routing(hypercube(2))
    assert r.path(0, 3) == [0, 1, 3]  # 0-1-3 and 0-2-3 tie; lowest ids win
    assert r.path(3, 0) == [3, 1, 0]


def test_hypercube_hops_are_hamming_distances() -> None:
    m = hypercube(3)
    hops = hop_table(m)
    for a in range(8):
        for b in range(8):
            assert hops[a, b] == bin(a ^ b).count("1")


def test_slit_from_latency_rounds_half_up() -> None:
    assert slit_from_latency(np.array([[100.0, 205.0], [215.0, 100.0]])) == [[10, 21], [22, 10]]


def test_firmware_slit_is_kept_apart_from_timing() -> None:
    m = hypercube(2)
    lying = m.model_validate({**m.model_dump(), "firmware_slit": [[10, 20, 20, 20], [20, 10, 20, 20],
                                                                  [20, 20, 10, 20], [20, 20, 20, 10]]})
    assert slit(lying)[0][3] == 20
    from numasim.topology.distances import timing_distances

    assert timing_distances(lying)[0][3] > timing_distances(lying)[0][1]


def test_relay_latency_is_paid_only_by_routes_through_the_node() -> None:
    # Drepper's Opteron: a 2-hop read costs more than two 1-hop link latencies (the middle socket's crossbar).
    base = hypercube(2, link_latency_ns=9.0, controller_latency_ns=100.0)
    relaying = base.model_copy(
        update={"nodes": [n.model_copy(update={"relay_latency_ns": 12.0}) for n in base.nodes]}
    )
    lat = latency_table_ns(relaying)
    assert lat[0, 0] == 100.0
    assert lat[0, 1] == 109.0  # +9 %: one link, no relay
    assert lat[0, 3] == 130.0  # +30 %: two links and one relay


def test_calibration_carries_relays_and_keeps_ids_without_them() -> None:
    from numasim.timing.model import apply_calibration, nominal_calibration

    plain = nominal_calibration(hypercube(2))
    assert plain.relays == []
    base = hypercube(2)
    relaying = base.model_copy(update={"nodes": [n.model_copy(update={"relay_latency_ns": 5.0}) for n in base.nodes]})
    cal = nominal_calibration(relaying)
    assert len(cal.relays) == 4 and cal.id != plain.id
    assert apply_calibration(base, cal).nodes[0].relay_latency_ns == 5.0
