"""Machine generators, one family per function (like networkx's generators): each returns a :class:`Machine`.

Timing numbers given to generated machines are nominal (named defaults below, each saying where it comes
from); a calibration replaces them. Cpu numbers follow Linux's usual enumeration on x86: the first hardware
thread of every core, node after node, then the second threads in the same order (so node 0 of a 2 x 24-core
SMT machine gets ``0-23,48-71``).

Families: :func:`hypercube`, :func:`glueless` (full mesh or ring), :func:`eight_socket` (twisted ladder, cube,
full), :func:`multi_die` (Intel SNC / AMD NPS sockets), :func:`crossbar` (routers, NUMAlink-like); and two
modifiers that add to an existing machine: :func:`with_cxl_expander` and :func:`with_device`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from numasim.topology.model import (
    LOCAL_DISTANCE,
    CacheLevel,
    CacheScope,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    Machine,
    MemoryController,
    MemoryKind,
    Node,
    Switch,
)
from numasim.units import GiB, KiB, MiB

__all__ = [
    "DEFAULT_CONTROLLER_LATENCY_NS",
    "DEFAULT_CONTROLLER_BANDWIDTH_GB_S",
    "DEFAULT_LINK_LATENCY_NS",
    "DEFAULT_LINK_BANDWIDTH_GB_S",
    "UPI_LATENCY_NS",
    "UPI_BANDWIDTH_GB_S",
    "MESH_LATENCY_NS",
    "MESH_BANDWIDTH_GB_S",
    "IF_DIE_LATENCY_NS",
    "IF_DIE_BANDWIDTH_GB_S",
    "XGMI_LATENCY_NS",
    "XGMI_BANDWIDTH_GB_S",
    "NUMALINK_LATENCY_NS",
    "NUMALINK_BANDWIDTH_GB_S",
    "CXL_LINK_LATENCY_NS",
    "CXL_LINK_BANDWIDTH_GB_S",
    "CXL_DEVICE_LATENCY_NS",
    "CXL_DEVICE_BANDWIDTH_GB_S",
    "SNC_MODES",
    "NOMINAL_CACHE_LATENCY_NS",
    "NPS_MODES",
    "EIGHT_SOCKET_KINDS",
    "cache_hierarchy",
    "hypercube",
    "glueless",
    "eight_socket",
    "multi_die",
    "crossbar",
    "with_cxl_expander",
    "with_device",
]

DEFAULT_CONTROLLER_LATENCY_NS = 80.0
"""Idle local DRAM latency of a 2010s server (mlc: 61.7 ns Ivy Bridge-EP, 81.4 ns Skylake-SP)."""
DEFAULT_CONTROLLER_BANDWIDTH_GB_S = 40.0
"""Read bandwidth of one node's memory: 4 DDR3/DDR4 channels sustain 40-55 GB/s (mlc: 55.3 GB/s E5-2680 v2)."""
DEFAULT_LINK_LATENCY_NS = 50.0
"""One socket-to-socket hop: mlc remote minus local is 53.9 ns (2x E5-2680 v2) and 49.7 ns (2x 8180)."""
DEFAULT_LINK_BANDWIDTH_GB_S = 20.0
"""One socket-to-socket link: QPI 8 GT/s carries 16 GB/s each way, UPI 10.4 GT/s 20.8 GB/s (vendor data)."""

UPI_LATENCY_NS = 50.0
"""Skylake-SP UPI hop, from the 2x Platinum 8180 mlc latency matrix (131.1 - 81.4 ns)."""
UPI_BANDWIDTH_GB_S = 50.0
"""Socket-to-socket read bandwidth of 2x Platinum 8180 (mlc bandwidth matrix: 50.9 GB/s)."""
MESH_LATENCY_NS = 8.0
"""Between two sub-NUMA clusters of one socket, over the mesh (nominal Skylake-SP SNC: ~81 vs ~89 ns: SLIT 11)."""
MESH_BANDWIDTH_GB_S = 100.0
IF_DIE_LATENCY_NS = 20.0
"""Between two quadrants of one AMD socket, across the IO die (nominal: +20 ns over ~95 ns: SLIT 12, as Rome reports)."""
IF_DIE_BANDWIDTH_GB_S = 60.0
XGMI_LATENCY_NS = 90.0
"""Socket-to-socket Infinity Fabric (xGMI) on Rome, nominal: 2P remote ~200 ns vs ~95 ns NPS4 local."""
XGMI_BANDWIDTH_GB_S = 72.0
"""Three or four xGMI x16 links at ~18 GB/s each (nominal, vendor data)."""
NUMALINK_LATENCY_NS = 50.0
"""A NUMAlink-class cable/router hop, nominal (SGI UV remote latencies are a few hundred ns)."""
NUMALINK_BANDWIDTH_GB_S = 6.7
"""NUMAlink 6 per direction per link (vendor data)."""
CXL_LINK_LATENCY_NS = 100.0
"""CXL.mem round trip over the root port and flit layer, nominal: with the device, ~220 ns load-to-use, about
2x local DDR5 on Sapphire Rapids as published CXL characterisations report (ASIC expanders ~200-270 ns)."""
CXL_LINK_BANDWIDTH_GB_S = 52.0
"""CXL 2.0 x16 on PCIe 5.0: 64 GB/s raw per direction, ~52 GB/s measured for reads (nominal)."""
CXL_DEVICE_LATENCY_NS = 120.0
"""The expander's own controller and DRAM, nominal."""
CXL_DEVICE_BANDWIDTH_GB_S = 76.8
"""Two DDR5-4800 channels on the expander."""

SNC_MODES = {"SNC1": 1, "SNC2": 2, "SNC3": 3, "SNC4": 4}
"""Intel sub-NUMA clustering: nodes per socket."""
NPS_MODES = {"NPS1": 1, "NPS2": 2, "NPS4": 4}
"""AMD nodes-per-socket settings: nodes per socket."""
EIGHT_SOCKET_KINDS = ("twisted-ladder", "cube", "full")


def _controller(latency_ns: float, bandwidth_gb_s: float) -> MemoryController:
    return MemoryController(latency_ns=latency_ns, read_bandwidth_gb_s=bandwidth_gb_s)


def _linux_cpus(index: int, count: int, cores_per_node: int, threads_per_core: int) -> list[int]:
    # Thread t of core c on node i is cpu t * total_cores + i * cores_per_node + c (x86 ACPI/MADT order).
    total = count * cores_per_node
    return [
        t * total + index * cores_per_node + c for t in range(threads_per_core) for c in range(cores_per_node)
    ]


def _nodes(
    count: int,
    cpus_per_node: int,
    memory_bytes: int,
    controller: MemoryController,
    socket_of: list[int] | None = None,
    die_of: list[int] | None = None,
    threads_per_core: int = 1,
) -> list[Node]:
    if threads_per_core < 1 or cpus_per_node % threads_per_core:
        raise ValueError(f"threads_per_core = {threads_per_core}: must be >= 1 and divide {cpus_per_node}")
    cores = cpus_per_node // threads_per_core
    return [
        Node(
            id=i,
            cpus=sorted(_linux_cpus(i, count, cores, threads_per_core)),
            memory_bytes=memory_bytes,
            socket=socket_of[i] if socket_of is not None else i,
            die=die_of[i] if die_of is not None else None,
            controller=controller,
        )
        for i in range(count)
    ]


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise ValueError(f"{name} = {value}: must be >= {minimum}")


NOMINAL_CACHE_LATENCY_NS = {"L1d": 1.5, "L2": 5.0, "L3": 20.0}
"""Placeholder load-to-use latencies of a cache level no source times (a Skylake-SP-like core: 4-5, ~14 and
~50-70 cycles at 2.5-3 GHz); the platform catalog replaces them where it knows the processor."""


def cache_hierarchy(
    *,
    l1d_bytes: int = 32 * KiB,
    l2_bytes: int = 1 * MiB,
    l3_bytes: int | None = 32 * MiB,
    l1_latency_ns: float = NOMINAL_CACHE_LATENCY_NS["L1d"],
    l2_latency_ns: float = NOMINAL_CACHE_LATENCY_NS["L2"],
    l3_latency_ns: float = NOMINAL_CACHE_LATENCY_NS["L3"],
    l3_scope: CacheScope = CacheScope.SOCKET,
    l2_scope: CacheScope = CacheScope.CORE,
) -> list[CacheLevel]:
    """L1d/L2/L3 as :class:`CacheLevel` entries (``l3_bytes=None`` for parts without an L3).

    Defaults are a Skylake-SP-like core (32 KiB L1d in 4-5 cycles, 1 MiB L2 in ~14 cycles, a shared L3 in
    ~50-70 cycles at 2.5-3 GHz).

    Examples
    --------
    >>> [c.name for c in cache_hierarchy(l3_bytes=None)]
    ['L1d', 'L2']
    """
    levels = [
        CacheLevel(name="L1d", size_bytes=l1d_bytes, latency_ns=l1_latency_ns, scope=CacheScope.CORE),
        CacheLevel(name="L2", size_bytes=l2_bytes, latency_ns=l2_latency_ns, scope=l2_scope, associativity=16),
    ]
    if l3_bytes is not None:
        levels.append(
            CacheLevel(name="L3", size_bytes=l3_bytes, latency_ns=l3_latency_ns, scope=l3_scope, associativity=16)
        )
    return levels


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

    A full mesh has diameter 1 (every remote node one QPI/UPI hop away, as on 2- and 4-socket Xeons with
    enough links); a ring has diameter ``n // 2``.

    Examples
    --------
    >>> [(link.a, link.b) for link in glueless(4, shape="ring").links]
    [(0, 1), (0, 3), (1, 2), (2, 3)]
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


def _eight_socket_pairs(kind: str) -> list[tuple[int, int]]:
    if kind == "full":
        return [(a, b) for a in range(8) for b in range(a + 1, 8)]
    if kind == "cube":
        return [(i, i ^ (1 << bit)) for i in range(8) for bit in range(3) if i < i ^ (1 << bit)]
    if kind == "twisted-ladder":
        # A ladder of four rungs (0-1, 2-3, 4-5, 6-7) with rails 0-2-4-6 and 1-3-5-7, whose ends are joined
        # crosswise (6-1, 7-0). Joined straight it would be the 3-cube (diameter 3); the twist makes it a
        # Moebius ladder, diameter 2, with the same three links per socket.
        rungs = [(0, 1), (2, 3), (4, 5), (6, 7)]
        rails = [(0, 2), (2, 4), (4, 6), (1, 3), (3, 5), (5, 7)]
        twist = [(1, 6), (0, 7)]
        return sorted(rungs + rails + twist)
    raise ValueError(f"kind = {kind!r}: expected one of {', '.join(EIGHT_SOCKET_KINDS)}")


def eight_socket(
    kind: str = "twisted-ladder",
    *,
    cpus_per_node: int = 8,
    threads_per_core: int = 1,
    memory_bytes: int = 32 * GiB,
    link_kind: LinkKind = LinkKind.HYPERTRANSPORT,
    link_latency_ns: float = DEFAULT_LINK_LATENCY_NS,
    link_bandwidth_gb_s: float = DEFAULT_LINK_BANDWIDTH_GB_S,
    controller_latency_ns: float = DEFAULT_CONTROLLER_LATENCY_NS,
    controller_bandwidth_gb_s: float = DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    name: str | None = None,
) -> Machine:
    """Eight single-node sockets wired as 8-socket boards are: ``"twisted-ladder"``, ``"cube"`` or ``"full"``.

    Sockets with three coherent links (Opteron HyperTransport, Xeon E7 QPI, 3-UPI Xeons) cannot be fully
    meshed at eight sockets. The twisted ladder (a Moebius ladder) reaches every socket in at most two hops
    with three links each, as 8-socket Opteron boards and 8-socket Xeon glueless designs do; the plain cube
    needs three hops; ``"full"`` (seven links per socket) is the ideal for comparison.

    Examples
    --------
    >>> m = eight_socket("twisted-ladder")
    >>> len(m.nodes), len(m.links)
    (8, 12)
    >>> from numasim.topology.routing import hop_table
    >>> int(hop_table(m).max()), int(hop_table(eight_socket("cube")).max())
    (2, 3)
    """
    pairs = _eight_socket_pairs(kind)
    links = [
        Link(a=a, b=b, kind=link_kind, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s)
        for a, b in pairs
    ]
    ctrl = _controller(controller_latency_ns, controller_bandwidth_gb_s)
    return Machine(
        name=name or f"eight-socket-{kind}",
        description=f"8-socket machine, {kind} wiring, one node per socket",
        source="numasim.topology.builders.eight_socket (nominal timing)",
        nodes=_nodes(8, cpus_per_node, memory_bytes, ctrl, threads_per_core=threads_per_core),
        links=links,
    )


def multi_die(
    sockets: int,
    mode: str = "SNC2",
    *,
    cores_per_socket: int = 24,
    threads_per_core: int = 2,
    memory_bytes: int = 64 * GiB,
    controller_latency_ns: float | None = None,
    socket_bandwidth_gb_s: float | None = None,
    die_latency_ns: float | None = None,
    die_bandwidth_gb_s: float | None = None,
    socket_link_latency_ns: float | None = None,
    socket_link_bandwidth_gb_s: float | None = None,
    caches: Sequence[CacheLevel] = (),
    name: str | None = None,
) -> Machine:
    """Sockets split into several NUMA nodes: Intel sub-NUMA clustering (``SNC1..4``) or AMD ``NPS1/2/4``.

    Each socket with more than one node gets a switch vertex for what joins its nodes: the on-die mesh
    (Intel, ``socketS-mesh``, :attr:`LinkKind.ON_DIE` links) or the IO die (AMD Rome/Milan, ``socketS-iod``,
    :attr:`LinkKind.INFINITY_FABRIC` links). Socket-to-socket links (UPI, xGMI) join those switches, every
    pair of sockets once, so one node can use the whole inter-socket bandwidth and a node in another cluster
    of the same socket is two short links away. With one node per socket, nodes are linked directly.

    ``memory_bytes`` is per node; ``socket_bandwidth_gb_s`` is split evenly among a socket's nodes (each
    cluster owns its share of the channels). Defaults: Intel from the 2x Platinum 8180 mlc run (81 ns local,
    108 GB/s per socket, +50 ns UPI), AMD from kerncraft's EPYC 7452 (143 GB/s per socket in NPS4) and
    nominal Rome latencies (~95 ns local, +20 ns across the IO die).

    Examples
    --------
    >>> m = multi_die(2, "SNC2")
    >>> len(m.nodes), [n.socket for n in m.nodes], m.nodes[0].cpus[:2], len(m.nodes[0].cpus)
    (4, [0, 0, 1, 1], [0, 1], 24)
    >>> [s.name for s in multi_die(1, "NPS4").switches]
    ['socket0-iod']
    """
    _positive("sockets", sockets)
    _positive("cores_per_socket", cores_per_socket)
    _positive("threads_per_core", threads_per_core)
    if mode in SNC_MODES:
        per_socket, intel = SNC_MODES[mode], True
    elif mode in NPS_MODES:
        per_socket, intel = NPS_MODES[mode], False
    else:
        raise ValueError(f"mode = {mode!r}: expected one of {', '.join([*SNC_MODES, *NPS_MODES])}")
    if cores_per_socket % per_socket:
        raise ValueError(f"cores_per_socket = {cores_per_socket}: {mode} needs a multiple of {per_socket}")
    ctrl_lat = controller_latency_ns if controller_latency_ns is not None else (81.0 if intel else 95.0)
    sock_bw = socket_bandwidth_gb_s if socket_bandwidth_gb_s is not None else (108.0 if intel else 143.0)
    die_lat = die_latency_ns if die_latency_ns is not None else (MESH_LATENCY_NS if intel else IF_DIE_LATENCY_NS)
    die_bw = die_bandwidth_gb_s if die_bandwidth_gb_s is not None else (
        MESH_BANDWIDTH_GB_S if intel else IF_DIE_BANDWIDTH_GB_S
    )
    sock_lat = socket_link_latency_ns if socket_link_latency_ns is not None else (
        UPI_LATENCY_NS if intel else XGMI_LATENCY_NS
    )
    sock_link_bw = socket_link_bandwidth_gb_s if socket_link_bandwidth_gb_s is not None else (
        UPI_BANDWIDTH_GB_S if intel else XGMI_BANDWIDTH_GB_S
    )
    die_kind = LinkKind.ON_DIE if intel else LinkKind.INFINITY_FABRIC
    sock_kind = LinkKind.UPI if intel else LinkKind.INFINITY_FABRIC
    count = sockets * per_socket
    nodes = _nodes(
        count,
        cores_per_socket // per_socket * threads_per_core,
        memory_bytes,
        _controller(ctrl_lat, sock_bw / per_socket),
        socket_of=[i // per_socket for i in range(count)],
        die_of=[i % per_socket for i in range(count)] if per_socket > 1 else None,
        threads_per_core=threads_per_core,
    )
    switches: list[Switch] = []
    links: list[Link] = []
    if per_socket > 1:
        suffix = "mesh" if intel else "iod"
        hub = [f"socket{s}-{suffix}" for s in range(sockets)]
        switches = [Switch(name=h, kind=die_kind) for h in hub]
        # die_lat is node -> hub -> node, so each half is one link.
        links += [
            Link(a=i, b=hub[i // per_socket], kind=die_kind, latency_ns=die_lat / 2, bandwidth_gb_s=die_bw)
            for i in range(count)
        ]
        ends: list[Any] = hub
        # The switch hops on both ends already cost die_lat; keep socket-to-socket latency as given.
        sock_hop_ns = max(sock_lat - die_lat, 1e-3)
    else:
        ends = list(range(count))
        sock_hop_ns = sock_lat
    links += [
        Link(a=ends[a], b=ends[b], kind=sock_kind, latency_ns=sock_hop_ns, bandwidth_gb_s=sock_link_bw)
        for a in range(sockets)
        for b in range(a + 1, sockets)
    ]
    vendor = "Intel sub-NUMA clustering" if intel else "AMD nodes-per-socket"
    return Machine(
        name=name or f"multi-die-{sockets}s-{mode.lower()}",
        description=f"{sockets} socket(s) in {mode} ({vendor}): {per_socket} node(s) per socket",
        source="numasim.topology.builders.multi_die (nominal timing)",
        nodes=nodes,
        links=links,
        switches=switches,
        caches=list(caches),
    )


def crossbar(
    nodes: int,
    *,
    nodes_per_router: int | None = None,
    cpus_per_node: int = 8,
    memory_bytes: int = 32 * GiB,
    link_kind: LinkKind = LinkKind.NUMALINK,
    link_latency_ns: float = NUMALINK_LATENCY_NS,
    link_bandwidth_gb_s: float = NUMALINK_BANDWIDTH_GB_S,
    router_latency_ns: float = 20.0,
    controller_latency_ns: float = DEFAULT_CONTROLLER_LATENCY_NS,
    controller_bandwidth_gb_s: float = DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    name: str | None = None,
) -> Machine:
    """Nodes hanging off routers (:class:`Switch` vertices), NUMAlink- or node-controller-style.

    Every node links to its router (``router0``, ``router1`` ...; ``nodes_per_router`` nodes each, all on one
    router by default); routers are fully meshed. Two nodes on one router are two links apart, nodes on
    different routers three, whatever their number: the flat, high-latency-everywhere shape of SGI Altix/UV
    and of glued (node-controller) x86 servers. Each router traversal adds ``router_latency_ns``.

    Examples
    --------
    >>> m = crossbar(4, nodes_per_router=2)
    >>> [s.name for s in m.switches], len(m.links)
    (['router0', 'router1'], 5)
    """
    _positive("nodes", nodes)
    per = nodes if nodes_per_router is None else nodes_per_router
    _positive("nodes_per_router", per)
    routers = math.ceil(nodes / per)
    names = [f"router{r}" for r in range(routers)]
    switches = [Switch(name=r, kind=link_kind, latency_ns=router_latency_ns) for r in names]
    links = [
        Link(a=i, b=names[i // per], kind=link_kind, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s)
        for i in range(nodes)
    ]
    links += [
        Link(a=names[a], b=names[b], kind=link_kind, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s)
        for a in range(routers)
        for b in range(a + 1, routers)
    ]
    return Machine(
        name=name or f"crossbar-{nodes}n-{routers}r",
        description=f"{nodes} nodes on {routers} router(s), {per} per router",
        source="numasim.topology.builders.crossbar (nominal timing)",
        nodes=_nodes(nodes, cpus_per_node, memory_bytes, _controller(controller_latency_ns, controller_bandwidth_gb_s)),
        links=links,
        switches=switches,
    )


def _rebuild(machine: Machine, **changes: Any) -> Machine:
    # Machine is frozen; rebuilding through validation keeps every check (unlike model_copy(update=...)).
    data = machine.model_dump()
    data.update(changes)
    return Machine.model_validate(data)


def _symmetric_slit(machine: Machine, base: list[list[int]] | None) -> list[list[int]]:
    """``base`` for the nodes it covers, timing-derived distances for the rest, made symmetric.

    A pair gets the distance seen from the side that has cpus (what a task on it would see); the kernel
    wants a symmetric table, and HMAT-like latency tables keep the exact asymmetric numbers.
    """
    from numasim.topology.distances import timing_distances

    derived = timing_distances(machine)
    n = len(machine.nodes)
    has_cpus = [node.has_cpus for node in machine.nodes]
    out = [[LOCAL_DISTANCE] * n for _ in range(n)]
    known = len(base) if base is not None else 0
    for i in range(n):
        for j in range(i + 1, n):
            if i < known and j < known and base is not None:
                d_ij, d_ji = base[i][j], base[j][i]
            else:
                d_ij, d_ji = derived[i][j], derived[j][i]
            if has_cpus[i] and not has_cpus[j]:
                d = d_ij
            elif has_cpus[j] and not has_cpus[i]:
                d = d_ji
            else:
                d = max(d_ij, d_ji)
            out[i][j] = out[j][i] = min(max(d, LOCAL_DISTANCE + 1), 255)
    return out


def with_cxl_expander(
    machine: Machine,
    attach_node: int,
    size_bytes: int,
    *,
    link_latency_ns: float = CXL_LINK_LATENCY_NS,
    link_bandwidth_gb_s: float = CXL_LINK_BANDWIDTH_GB_S,
    device_latency_ns: float = CXL_DEVICE_LATENCY_NS,
    device_bandwidth_gb_s: float = CXL_DEVICE_BANDWIDTH_GB_S,
    free_bytes: int | None = None,
    name: str | None = None,
) -> Machine:
    """Add a CXL Type-3 memory expander behind ``attach_node``: a cpu-less ``memory_kind="cxl"`` node.

    The new node gets the next free id, a controller with the device's own latency and bandwidth, a
    :attr:`LinkKind.CXL` link to ``attach_node``, and a ``cxl-expander`` :class:`Device` on ``attach_node``.
    The machine's SLIT becomes explicit (``firmware_slit``): the old table (firmware or derived) kept, the
    new row and column derived from timing as seen from the cpu nodes, as platform firmware describes a
    CXL window in SRAT/SLIT. Defaults are nominal for a DDR5 expander on a PCIe 5.0 x16 port: about 220 ns
    from the attach node (about 2x local DDR5 on Sapphire Rapids), ~52 GB/s.

    Examples
    --------
    >>> m = with_cxl_expander(glueless(2), attach_node=0, size_bytes=64 * GiB)
    >>> cxl = m.nodes[-1]
    >>> cxl.id, cxl.cpus, cxl.memory_kind.value, m.devices[0].kind.value
    (2, [], 'cxl', 'cxl-expander')
    >>> m.slit()[0]
    [10, 16, 28]
    """
    if attach_node not in machine.node_ids:
        raise ValueError(f"attach_node = {attach_node}: no such node (nodes: {machine.node_ids})")
    _positive("size_bytes", size_bytes)
    new_id = max(machine.node_ids) + 1
    node = Node(
        id=new_id,
        cpus=[],
        memory_bytes=size_bytes,
        free_bytes=free_bytes,
        socket=machine.node(attach_node).socket,
        memory_kind=MemoryKind.CXL,
        controller=_controller(device_latency_ns, device_bandwidth_gb_s),
    )
    link = Link(
        a=attach_node, b=new_id, kind=LinkKind.CXL, latency_ns=link_latency_ns, bandwidth_gb_s=link_bandwidth_gb_s
    )
    index = sum(1 for d in machine.devices if d.kind is DeviceKind.CXL_EXPANDER)
    device = Device(
        name=name or f"cxl{index}",
        kind=DeviceKind.CXL_EXPANDER,
        node=attach_node,
        attach_latency_ns=link_latency_ns,
        attach_bandwidth_gb_s=link_bandwidth_gb_s,
        description=f"CXL Type-3 memory expander, {size_bytes // GiB} GiB, exposed as cpu-less node {new_id}",
    )
    base = machine.slit()
    grown = _rebuild(
        machine,
        nodes=[*machine.nodes, node],
        links=[*machine.links, link],
        devices=[*machine.devices, device],
        firmware_slit=None,
    )
    return _rebuild(grown, firmware_slit=_symmetric_slit(grown, base))


def with_device(
    machine: Machine,
    name: str,
    node: int,
    *,
    kind: DeviceKind = DeviceKind.NIC,
    attach_latency_ns: float = 500.0,
    attach_bandwidth_gb_s: float = 25.0,
    description: str = "",
) -> Machine:
    """Attach a device (NIC by default) to ``node``'s PCIe root.

    Defaults are a 200 Gb/s NIC on PCIe 4.0 x16: 25 GB/s (the RDMA NIC of source article 000 reaches
    204 Gb/s from local memory), and a nominal ~0.5 us DMA read round trip.

    Examples
    --------
    >>> m = with_device(glueless(2), "mlx5_0", 0)
    >>> m.devices[0].name, m.devices[0].kind.value, m.devices[0].node
    ('mlx5_0', 'nic', 0)
    """
    if node not in machine.node_ids:
        raise ValueError(f"node = {node}: no such node (nodes: {machine.node_ids})")
    if any(d.name == name for d in machine.devices):
        raise ValueError(f"name = {name!r}: the machine already has a device of that name")
    device = Device(
        name=name,
        kind=kind,
        node=node,
        attach_latency_ns=attach_latency_ns,
        attach_bandwidth_gb_s=attach_bandwidth_gb_s,
        description=description,
    )
    return _rebuild(machine, devices=[*machine.devices, device])
