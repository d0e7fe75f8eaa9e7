"""Machine generators, one family per function (like networkx's generators): each returns a :class:`Machine`.

Timing numbers given to generated machines are nominal (named defaults below); a calibration replaces them.
"""

from __future__ import annotations

from numasim.topology.model import (
    Link,
    LinkKind,
    Machine,
    MemoryController,
    Node,
)
from numasim.units import GiB

__all__ = [
    "DEFAULT_CONTROLLER_LATENCY_NS",
    "DEFAULT_CONTROLLER_BANDWIDTH_GB_S",
    "DEFAULT_LINK_LATENCY_NS",
    "DEFAULT_LINK_BANDWIDTH_GB_S",
    "hypercube",
    "glueless",
]

DEFAULT_CONTROLLER_LATENCY_NS = 80.0
DEFAULT_CONTROLLER_BANDWIDTH_GB_S = 40.0
DEFAULT_LINK_LATENCY_NS = 50.0
DEFAULT_LINK_BANDWIDTH_GB_S = 20.0


def _controller(latency_ns: float, bandwidth_gb_s: float) -> MemoryController:
    return MemoryController(latency_ns=latency_ns, read_bandwidth_gb_s=bandwidth_gb_s)


def _nodes(
    count: int,
    cpus_per_node: int,
    memory_bytes: int,
    controller: MemoryController,
    socket_of: list[int] | None = None,
    die_of: list[int] | None = None,
) -> list[Node]:
    return [
        Node(
            id=i,
            cpus=list(range(i * cpus_per_node, (i + 1) * cpus_per_node)),
            memory_bytes=memory_bytes,
            socket=socket_of[i] if socket_of is not None else i,
            die=die_of[i] if die_of is not None else None,
            controller=controller,
        )
        for i in range(count)
    ]


def hypercube(
    dimension: int,
    *,
    cpus_per_node: int = 4,
    memory_bytes: int = 16 * GiB,
    link_kind: LinkKind = LinkKind.HYPERTRANSPORT,
    link_latency_ns: float = DEFAULT_LINK_LATENCY_NS,
    link_bandwidth_gb_s: float = DEFAULT_LINK_BANDWIDTH_GB_S,
    controller_latency_ns: float = DEFAULT_CONTROLLER_LATENCY_NS,
    controller_bandwidth_gb_s: float = DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    name: str | None = None,
) -> Machine:
    """A C-dimensional hypercube: ``2**C`` nodes, each linked to the ``C`` nodes whose id differs in one bit.

    Degree ``C`` and diameter ``C`` (Drepper, part 4): the hop count between two nodes is the Hamming distance
    of their ids. One node per socket.

    Examples
    --------
    >>> m = hypercube(3)
    >>> len(m.nodes), len(m.links)
    (8, 12)
    """
    if dimension < 0:
        raise ValueError(f"dimension = {dimension}: must be >= 0")
    count = 1 << dimension
    links = [
        Link(a=i, b=i ^ (1 << bit), kind=link_kind, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s)
        for i in range(count)
        for bit in range(dimension)
        if i < i ^ (1 << bit)
    ]
    return Machine(
        name=name or f"hypercube-{dimension}",
        description=f"{dimension}-dimensional hypercube of {count} single-node sockets",
        source="numasim.topology.builders.hypercube (nominal timing)",
        nodes=_nodes(count, cpus_per_node, memory_bytes, _controller(controller_latency_ns, controller_bandwidth_gb_s)),
        links=links,
    )


def glueless(
    sockets: int,
    *,
    shape: str = "full",
    cpus_per_node: int = 8,
    memory_bytes: int = 32 * GiB,
    link_kind: LinkKind = LinkKind.QPI,
    link_latency_ns: float = DEFAULT_LINK_LATENCY_NS,
    link_bandwidth_gb_s: float = DEFAULT_LINK_BANDWIDTH_GB_S,
    controller_latency_ns: float = DEFAULT_CONTROLLER_LATENCY_NS,
    controller_bandwidth_gb_s: float = DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    name: str | None = None,
) -> Machine:
    """An n-socket glueless machine, one node per socket, ``shape="full"`` (every pair linked) or ``"ring"``.

    Examples
    --------
    >>> glueless(4, shape="ring").links[3].a, glueless(4, shape="ring").links[3].b
    (0, 3)
    """
    if sockets < 1:
        raise ValueError(f"sockets = {sockets}: must be >= 1")
    if shape == "full":
        pairs = [(a, b) for a in range(sockets) for b in range(a + 1, sockets)]
    elif shape == "ring":
        pairs = sorted({tuple(sorted((i, (i + 1) % sockets))) for i in range(sockets) if sockets > 1})  # type: ignore[misc]
    else:
        raise ValueError(f"shape = {shape!r}: expected 'full' or 'ring'")
    links = [
        Link(a=a, b=b, kind=link_kind, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s)
        for a, b in pairs
    ]
    return Machine(
        name=name or f"glueless-{sockets}s-{shape}",
        description=f"{sockets}-socket glueless ({shape}) machine",
        source="numasim.topology.builders.glueless (nominal timing)",
        nodes=_nodes(sockets, cpus_per_node, memory_bytes, _controller(controller_latency_ns, controller_bandwidth_gb_s)),
        links=links,
    )
