"""``build_zonelists`` sorts once per node; it must give exactly the order the kernel's pick loop gives.

The loop below is ``build_zonelists`` of mm/page_alloc.c as written (``find_next_best_node`` until
NUMA_NO_NODE, each pick charging ``node_load`` when the distance group changes); the fast version replaced it
because it is cubic in the node count (a 256-node machine spent 19 s here).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.zonelist import NodeFacts, build_all_zonelists, build_zonelists, find_next_best_node


def _loop_build(local: int, facts: NodeFacts, node_load: dict[int, int]) -> list[int]:
    used: set[int] = set()
    order: list[int] = []
    prev = local
    row = facts.distance[local]
    while (node := find_next_best_node(local, used, facts, node_load)) >= 0:
        if row[node] != row[prev]:
            node_load[node] = node_load.get(node, 0) + 1
        order.append(node)
        prev = node
    return order


@st.composite
def node_facts(draw: st.DrawFn) -> NodeFacts:
    n = draw(st.integers(1, 9))
    ids = tuple(sorted(draw(st.sets(st.integers(0, 15), min_size=n, max_size=n))))
    # Few distinct distances, so ties (the round-robin load and the id order) decide often.
    dist = {a: {b: 10 if a == b else draw(st.sampled_from([11, 12, 20, 21, 30])) for b in ids} for a in ids}
    memory = frozenset(draw(st.sets(st.sampled_from(ids))))
    cpus = frozenset(draw(st.sets(st.sampled_from(ids))))
    return NodeFacts(ids, dist, memory, cpus, skip_memoryless_local=draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(node_facts())
def test_sorted_build_equals_the_pick_loop(facts: NodeFacts) -> None:
    load = {n: 0 for n in facts.node_ids}
    expected = {nid: _loop_build(nid, facts, load) for nid in sorted(facts.node_ids)}
    expected_load = dict(load)
    built = build_all_zonelists(facts)
    assert built.node_order == expected
    # the shared node_load ends the same too (it decides the next rebuild's tie-breaks)
    load2 = {n: 0 for n in facts.node_ids}
    for nid in sorted(facts.node_ids):
        build_zonelists(nid, facts, load2)
    assert load2 == expected_load


class _CountingRow(dict[int, int]):
    """A distance row that counts its look-ups (the work of a build, without timing it)."""

    lookups = 0

    def __getitem__(self, key: int) -> int:
        _CountingRow.lookups += 1
        return super().__getitem__(key)


def test_build_is_quadratic_not_cubic_in_nodes() -> None:
    n = 64
    dist = {a: _CountingRow({b: 10 if a == b else 20 + (a ^ b) % 3 for b in range(n)}) for a in range(n)}
    facts = NodeFacts(tuple(range(n)), dist, frozenset(range(n)), frozenset(range(n)))
    _CountingRow.lookups = 0
    built = build_all_zonelists(facts)
    assert all(sorted(order) == list(range(n)) and order[0] == nid for nid, order in built.node_order.items())
    # A few look-ups per (node, candidate) pair; the pick loop makes n per pick, n^3 = 262,144 in all.
    assert _CountingRow.lookups <= 4 * n * n
