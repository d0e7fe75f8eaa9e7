"""Routes through the link graph, hop counts, and the initiator x target latency/bandwidth tables.

Routing is deterministic: the shortest path by latency, ties broken first by fewer links, then by the
lexicographically smallest vertex sequence (node ids before switch names). Explicit :class:`Route` entries
of the machine override the computed path for their (src, dst) pair.

Idle latency from initiator node ``i`` to memory on node ``j`` is the controller latency of ``j`` plus the
latencies of the links (and switches, and the relay latency of every intermediate node) along the route; the bottleneck bandwidth is the minimum of the target
controller's read bandwidth and every link's bandwidth along the route.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from numasim.errors import TopologyError
from numasim.topology.model import Machine, MemoryController, Vertex

__all__ = ["graph", "Routing", "routing", "latency_table_ns", "bandwidth_table_gb_s", "hop_table"]

# Sums of float latencies are compared after rounding so that 10.1 + 20.2 ties with 20.2 + 10.1.
_TIE_DECIMALS = 6


def _vertex_key(v: Vertex) -> tuple[int, int | str]:
    return (0, v) if isinstance(v, int) else (1, v)


def graph(machine: Machine) -> nx.DiGraph:
    """The machine as a directed networkx graph.

    Vertices are node ids (attribute ``kind="node"``, plus the :class:`Node` under ``"node"``) and switch names
    (``kind="switch"``). Every link gives two directed edges carrying ``latency_ns``, ``bandwidth_gb_s``,
    ``link_kind`` and ``link_index`` (position in ``machine.links``).

    Examples
    --------
    >>> from numasim.topology.builders import hypercube
    >>> g = graph(hypercube(2))
    >>> sorted(g.successors(0))
    [1, 2]
    """
    g = nx.DiGraph(name=machine.name)
    for n in machine.nodes:
        g.add_node(n.id, kind="node", node=n)
    for s in machine.switches:
        g.add_node(s.name, kind="switch", switch=s)
    for index, link in enumerate(machine.links):
        for src, dst, lat, bw in link.directed():
            if g.has_edge(src, dst):
                # Parallel links between the same pair: keep the faster one for routing, add bandwidth.
                e = g.edges[src, dst]
                e["bandwidth_gb_s"] += bw
                if lat < e["latency_ns"]:
                    e["latency_ns"] = lat
                continue
            g.add_edge(src, dst, latency_ns=lat, bandwidth_gb_s=bw, link_kind=link.kind, link_index=index)
    return g


@dataclass(frozen=True)
class Routing:
    """All routes between NUMA nodes of one machine, and the tables derived from them.

    Attributes
    ----------
    node_ids : list of int
        Row/column order of every table.
    paths : dict
        ``paths[(i, j)]`` is the vertex sequence from node ``i`` to node ``j`` (``[i]`` when ``i == j``).
    """

    node_ids: list[int]
    paths: dict[tuple[int, int], list[Vertex]]
    _graph: nx.DiGraph
    _switch_latency_ns: dict[str, float]
    _relay_latency_ns: dict[int, float]
    # Plain dicts of the graph's edge attributes: networkx's edge view costs microseconds per look-up, and a
    # 256-node machine looks up hundreds of thousands of route edges.
    _edge_latency_ns: dict[tuple[Vertex, Vertex], float] = field(default_factory=dict)
    _edge_bandwidth_gb_s: dict[tuple[Vertex, Vertex], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self._edge_latency_ns:
            for u, v, d in self._graph.edges(data=True):
                self._edge_latency_ns[(u, v)] = float(d["latency_ns"])
                self._edge_bandwidth_gb_s[(u, v)] = float(d["bandwidth_gb_s"])

    def path(self, src: int, dst: int) -> list[Vertex]:
        return self.paths[(src, dst)]

    def edges(self, src: int, dst: int) -> list[tuple[Vertex, Vertex]]:
        """Directed edges (link directions) the route from ``src`` to ``dst`` crosses."""
        p = self.paths[(src, dst)]
        return list(zip(p[:-1], p[1:], strict=True))

    def hops(self, src: int, dst: int) -> int:
        return len(self.paths[(src, dst)]) - 1

    def path_latency_ns(self, src: int, dst: int) -> float:
        """Interconnect latency of the route (links plus switch traversals), without the controller."""
        p = self.paths[(src, dst)]
        lat = self._edge_latency_ns
        # Three sums, added in this order (links, switches, relays): the same float as ever, in one pass.
        links = 0.0
        for k in range(len(p) - 1):
            links += lat[(p[k], p[k + 1])]
        switches = relays = 0.0
        for v in p[1:-1]:
            if isinstance(v, str):
                switches += self._switch_latency_ns.get(v, 0.0)
            else:
                relays += self._relay_latency_ns.get(v, 0.0)
        return float(links + switches + relays)

    def path_bandwidth_gb_s(self, src: int, dst: int) -> float:
        """Bottleneck link bandwidth of the route (``inf`` for the local route)."""
        p = self.paths[(src, dst)]
        bws = [self._edge_bandwidth_gb_s[(u, v)] for u, v in zip(p[:-1], p[1:], strict=True)]
        return float(min(bws)) if bws else float("inf")


def _shortest_from(
    succ: dict[Vertex, list[tuple[Vertex, float, float, tuple[int, int | str]]]], src: int, relay_lat: dict[int, float]
) -> dict[Vertex, list[Vertex]]:
    # Dijkstra with a total order on (latency, hops, vertex-key sequence): deterministic tie-breaking.
    # ``succ[v]`` lists (w, latency of the link v->w, w's switch latency, w's sort key).
    best: set[Vertex] = set()
    paths: dict[Vertex, list[Vertex]] = {}
    heap: list[tuple[float, int, tuple[tuple[int, int | str], ...], list[Vertex]]] = [
        (0.0, 0, (_vertex_key(src),), [src])
    ]
    while heap:
        dist, hops, key, path = heapq.heappop(heap)
        v = path[-1]
        if v in best:
            continue
        best.add(v)
        paths[v] = path
        # Routes go through switches but never *through* another NUMA node's vertex is fine too
        # (glueless multi-hop routes pass through intermediate sockets), so every vertex relays.
        # Leaving a node other than the source means relaying through it.
        relay = relay_lat.get(v, 0.0) if isinstance(v, int) and v != src else 0.0
        for w, link_lat, switch_lat, wkey in succ[v]:
            if w in best:
                continue
            nd = round(dist + (link_lat + relay + switch_lat), _TIE_DECIMALS)
            heapq.heappush(heap, (nd, hops + 1, (*key, wkey), [*path, w]))
    return paths


def routing(machine: Machine) -> Routing:
    """Compute every node-to-node route of ``machine`` (explicit routes first, else shortest by latency)."""
    g = graph(machine)
    switch_lat = {s.name: s.latency_ns for s in machine.switches}
    relay_lat = {n.id: n.relay_latency_ns for n in machine.nodes if n.relay_latency_ns > 0}
    ids = machine.node_ids
    succ = {
        v: [
            (w, g.edges[v, w]["latency_ns"], switch_lat.get(w, 0.0) if isinstance(w, str) else 0.0, _vertex_key(w))
            for w in g.successors(v)
        ]
        for v in g.nodes
    }
    paths: dict[tuple[int, int], list[Vertex]] = {}
    for src in ids:
        found = _shortest_from(succ, src, relay_lat)
        for dst in ids:
            if dst not in found:
                raise TopologyError("links", machine.name, f"no route from node {src} to node {dst}")
            paths[(src, dst)] = found[dst]
    for r in machine.routes:
        for u, v in zip(r.path[:-1], r.path[1:], strict=True):
            if not g.has_edge(u, v):
                raise TopologyError(f"routes[{r.src}->{r.dst}].path", r.path, f"no link from {u!r} to {v!r}")
        paths[(r.src, r.dst)] = list(r.path)
    return Routing(node_ids=ids, paths=paths, _graph=g, _switch_latency_ns=switch_lat, _relay_latency_ns=relay_lat)


def _require_controllers(machine: Machine) -> None:
    for n in machine.nodes:
        if n.has_memory and n.controller is None:
            raise TopologyError(
                f"nodes[{n.id}].controller", None, "timing tables need a memory controller on every memory node"
            )


def _initiator_target_table(
    machine: Machine, routes: Routing | None, cell: Callable[[MemoryController, Routing, int, int], float]
) -> np.ndarray:
    # One value per (initiator i, memory node j); columns of memoryless nodes stay nan.
    _require_controllers(machine)
    r = routes or routing(machine)
    ids = machine.node_ids
    out = np.full((len(ids), len(ids)), np.nan)
    for j, dst in enumerate(ids):
        ctrl = machine.nodes[j].controller
        if ctrl is None:
            continue
        for i, src in enumerate(ids):
            out[i, j] = cell(ctrl, r, src, dst)
    return out


def latency_table_ns(machine: Machine, routes: Routing | None = None) -> np.ndarray:
    """Idle latency (ns) from a cpu of node ``i`` (row) to memory of node ``j`` (column).

    Columns of memoryless nodes are ``nan``; rows exist for every node (a cpu-less node has no initiator,
    but its row is still defined as if an initiator sat there, which is what HMAT reports for it).
    """
    return _initiator_target_table(
        machine, routes, lambda ctrl, r, src, dst: ctrl.latency_ns + r.path_latency_ns(src, dst)
    )


def bandwidth_table_gb_s(machine: Machine, routes: Routing | None = None) -> np.ndarray:
    """Bottleneck read bandwidth (GB/s) for a cpu of node ``i`` reading memory of node ``j``.

    Read data flows from the memory back to the reader, so the links counted are those of the route from
    ``j`` to ``i`` (what the engine charges and the calibration fits); the controller's read bandwidth caps it.
    """
    return _initiator_target_table(
        machine, routes, lambda ctrl, r, src, dst: min(ctrl.read_bandwidth_gb_s, r.path_bandwidth_gb_s(dst, src))
    )


def hop_table(machine: Machine, routes: Routing | None = None) -> np.ndarray:
    """Number of links on the route from node ``i`` to node ``j`` (0 on the diagonal)."""
    r = routes or routing(machine)
    ids = machine.node_ids
    return np.array([[r.hops(a, b) for b in ids] for a in ids], dtype=np.int64)
