"""Node fallback order and zonelists: ``build_zonelists`` and ``find_next_best_node`` (``mm/page_alloc.c``).

``__build_all_zonelists`` clears the shared ``node_load[]`` once and builds every possible node in increasing
id; the round-robin penalty one node's build adds changes the tie-breaks of the nodes built after it. Sort key
of ``find_next_best_node``: ``(distance + (n < local) + cpu_penalty, node_load[n], n)``.

**[VER]** 6.7+ skips a memoryless local node (it never appears in any order); before 6.7 a memoryless node's own
order starts with itself (it has no zones, so only the "Fallback order" printk differs).

The cpu penalty (``PENALTY_FOR_NODE_WITH_CPUS = 1``) only applies when the node-to-cpumask map is filled: not
for the boot build (observed on a real 6.1 kernel), but for every rebuild after a memory hot-add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from numasim.kernel.zones import MAX_NR_ZONES, Zone

__all__ = [
    "PENALTY_FOR_NODE_WITH_CPUS",
    "NodeFacts",
    "ZonelistBuild",
    "find_next_best_node",
    "build_zonelists",
    "build_all_zonelists",
    "build_zonerefs_node",
    "fallback_order_line",
]

PENALTY_FOR_NODE_WITH_CPUS = 1


@dataclass(frozen=True)
class NodeFacts:
    """What zonelist construction needs to know about the possible nodes.

    ``distance[a][b]`` is the SLIT entry for node ids ``a``, ``b``; ``memory_nodes`` is N_MEMORY;
    ``cpu_nodes`` the nodes whose cpumask is non-empty *at the time of the build*.
    """

    node_ids: tuple[int, ...]
    distance: Mapping[int, Mapping[int, int]]
    memory_nodes: frozenset[int]
    cpu_nodes: frozenset[int]
    skip_memoryless_local: bool = True  # [VER] 6.7+


@dataclass(frozen=True)
class ZonelistBuild:
    """The outcome of one ``__build_all_zonelists``: each node's order and the printk lines."""

    node_order: dict[int, list[int]]
    log: list[str]


def find_next_best_node(node: int, used: set[int], facts: NodeFacts, node_load: dict[int, int]) -> int:
    """The next node for ``node``'s fallback order, or -1 (NUMA_NO_NODE); adds the result to ``used``.

    Examples
    --------
    Node 0 of a 4-node machine with distances 10/11/20 (two dies per socket), no cpu penalty:

    >>> d = {0: {0: 10, 1: 11, 2: 20, 3: 20}}
    >>> f = NodeFacts((0, 1, 2, 3), d, frozenset({0, 1, 2, 3}), frozenset())
    >>> used, load = set(), {n: 0 for n in range(4)}
    >>> [find_next_best_node(0, used, f, load) for _ in range(5)]
    [0, 1, 2, 3, -1]
    """
    if node not in used and (node in facts.memory_nodes or not facts.skip_memoryless_local):
        used.add(node)
        return node
    best = -1
    best_key: tuple[int, int] | None = None
    row = facts.distance[node]
    for n in sorted(facts.memory_nodes):
        if n in used:
            continue
        val = row[n] + (1 if n < node else 0)
        if n in facts.cpu_nodes:
            val += PENALTY_FOR_NODE_WITH_CPUS
        key = (val, node_load.get(n, 0))  # val * MAX_NUMNODES + node_load[n]
        if best_key is None or key < best_key:  # strict '<': ties go to the lowest id
            best_key, best = key, n
    if best >= 0:
        used.add(best)
    return best


def build_zonelists(local: int, facts: NodeFacts, node_load: dict[int, int]) -> list[int]:
    """The fallback node order of ``local`` (as printed), updating the shared ``node_load``.

    The same order as calling :func:`find_next_best_node` until it returns -1, in O(N log N) instead of O(N^2):
    during one node's build ``node_load`` only changes for the node just picked, which is then used, so every
    candidate's key ``(distance + penalties, node_load, id)`` is fixed and the picks are those keys in sorted
    order (``tests/kernel/test_zonelist_fast.py`` checks this against the loop).
    """
    row = facts.distance[local]
    order: list[int] = []
    if local in facts.memory_nodes or not facts.skip_memoryless_local:
        order.append(local)  # find_next_best_node's first pick: the local node itself
    rest = [n for n in facts.memory_nodes if n != local]
    rest.sort(
        key=lambda n: (
            row[n] + (1 if n < local else 0) + (PENALTY_FOR_NODE_WITH_CPUS if n in facts.cpu_nodes else 0),
            node_load.get(n, 0),
            n,
        )
    )
    order += rest
    prev = local
    for node in order:
        # "penalty to the first node in same distance group to make it round-robin"
        if row[node] != row[prev]:
            node_load[node] = node_load.get(node, 0) + 1
        prev = node
    return order


def fallback_order_line(nid: int, order: Sequence[int]) -> str:
    """The ``pr_info``/``pr_cont`` line: ``"Fallback order for Node 0: 0 1 "`` (note the trailing space)."""
    return f"Fallback order for Node {nid}: " + "".join(f"{n} " for n in order)


def build_all_zonelists(facts: NodeFacts) -> ZonelistBuild:
    """``__build_all_zonelists(NULL)``: ``node_load`` zeroed once, every possible node built in id order.

    Examples
    --------
    >>> d = {0: {0: 10, 1: 20}, 1: {0: 20, 1: 10}}
    >>> b = build_all_zonelists(NodeFacts((0, 1), d, frozenset({0, 1}), frozenset({0, 1})))
    >>> b.log
    ['Fallback order for Node 0: 0 1 ', 'Fallback order for Node 1: 1 0 ']
    """
    node_load = {n: 0 for n in facts.node_ids}
    orders: dict[int, list[int]] = {}
    log: list[str] = []
    for nid in sorted(facts.node_ids):
        orders[nid] = build_zonelists(nid, facts, node_load)
        log.append(fallback_order_line(nid, orders[nid]))
    return ZonelistBuild(orders, log)


def build_zonerefs_node(node_zones: Sequence[Zone]) -> list[Zone]:
    """A node's populated zones, highest type first (Movable, Normal, DMA32, DMA)."""
    if len(node_zones) != MAX_NR_ZONES:
        raise ValueError(f"node_zones: expected {MAX_NR_ZONES} zones, got {len(node_zones)}")
    return [z for z in reversed(node_zones) if z.populated]
