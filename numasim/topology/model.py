"""The machine description: NUMA nodes, their memory and cpus, memory controllers, links, switches, devices.

A :class:`Machine` is a pydantic model because it crosses the boundary: it is read from and written to files
(TOML, numactl text, sysfs trees, hwloc XML). Everything derived from it (routes, latency tables, the SLIT)
lives in :mod:`numasim.topology.routing` and :mod:`numasim.topology.distances` as plain functions.

Units are in the field names: ``latency_ns`` (nanoseconds), ``bandwidth_gb_s`` (decimal gigabytes per
second, 10**9 bytes/s; never gigabits), ``*_bytes`` (bytes).

Graph vertices are the NUMA node ids (``int``) and the names of switches (``str``), so a link joins two of
those. Links are directed in their timing: ``latency_ns``/``bandwidth_gb_s`` apply from ``a`` to ``b``, the
``*_reverse`` fields from ``b`` to ``a`` (``None`` means the same as forward).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from numasim.topology.cpulist import parse_cpulist

__all__ = [
    "LinkKind",
    "MemoryKind",
    "DeviceKind",
    "CacheScope",
    "MemoryController",
    "Node",
    "Link",
    "Switch",
    "Device",
    "CacheLevel",
    "CoreDie",
    "Route",
    "Machine",
    "Vertex",
    "LOCAL_DISTANCE",
]

LOCAL_DISTANCE = 10
"""The SLIT value of a node to itself (ACPI)."""

Vertex = int | str
"""A vertex of the link graph: a NUMA node id or a switch name."""

PositiveFloat = Annotated[float, Field(gt=0)]


class LinkKind(StrEnum):
    """What a link physically is; only informative for timing, but shown in drawings and reports."""

    QPI = "qpi"
    UPI = "upi"
    HYPERTRANSPORT = "hypertransport"
    INFINITY_FABRIC = "infinity-fabric"
    ON_DIE = "on-die"
    CXL = "cxl"
    CROSSBAR = "crossbar"
    NUMALINK = "numalink"
    NVLINK = "nvlink"
    PCIE = "pcie"
    OTHER = "other"


class MemoryKind(StrEnum):
    """The technology behind a node's memory (decides memory tiers: only DRAM/HBM are top tier)."""

    DRAM = "dram"
    HBM = "hbm"
    CXL = "cxl"
    PMEM = "pmem"
    GPU = "gpu"


class DeviceKind(StrEnum):
    """Devices that are attached to a node and do DMA to host memory."""

    NIC = "nic"
    GPU = "gpu"
    CXL_EXPANDER = "cxl-expander"
    NVME = "nvme"
    ACCELERATOR = "accelerator"
    OTHER = "other"


class CacheScope(StrEnum):
    """Which cpus share one instance of a cache level."""

    CORE = "core"
    DIE = "die"
    SOCKET = "socket"
    NODE = "node"
    """A node's own cache: one instance a node, for its cores (a die of a multi-chip package that is a node of its
    own, such as Magny-Cours')."""
    CLUSTER = "cluster"
    """An SNC or Cluster-on-Die cluster's share of its socket's L3: one instance a node, for its cores (the mode
    caches a cluster's memory in its own slices); a line modified in another cluster of the socket moves at the
    socket's local cache-to-cache cost, over the die's own mesh or ring."""
    CCX = "ccx"
    """An AMD core complex: the cores of one core die (``Machine.core_dies``) that share an L3, the whole die on
    Zen 3 and later, half of it on Zen 1 and 2 (``complexes_per_die``)."""


class _Model(BaseModel):
    # allow_inf_nan=False: a machine file with `bandwidth_gb_s = inf` (or nan) is refused, naming the field.
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)


class MemoryController(_Model):
    """A node's memory controller and DRAM as seen from a core of the same node when idle.

    ``latency_ns`` is the idle load-to-use latency of a local miss to DRAM (what mlc's latency matrix shows on
    the diagonal); remote latency adds the links of the route.
    """

    latency_ns: PositiveFloat
    read_bandwidth_gb_s: PositiveFloat
    write_bandwidth_gb_s: PositiveFloat | None = None

    @property
    def effective_write_bandwidth_gb_s(self) -> float:
        return self.write_bandwidth_gb_s if self.write_bandwidth_gb_s is not None else self.read_bandwidth_gb_s


class Node(_Model):
    """One NUMA node as Linux numbers it: cpus, memory, and where it sits (socket, die)."""

    id: Annotated[int, Field(ge=0)]
    cpus: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    memory_bytes: Annotated[int, Field(ge=0)] = 0
    free_bytes: Annotated[int, Field(ge=0)] | None = None
    socket: Annotated[int, Field(ge=0)] | None = None
    die: Annotated[int, Field(ge=0)] | None = None
    memory_kind: MemoryKind = MemoryKind.DRAM
    controller: MemoryController | None = None
    relay_latency_ns: Annotated[float, Field(ge=0)] = 0.0
    """Latency a request pays for passing *through* this node to another one (the socket's crossbar /
    northbridge on glueless machines: why Drepper's 2-hop Opteron read costs more than twice a 1-hop one)."""
    memory_side_cache_bytes: Annotated[int, Field(gt=0)] | None = None
    """A memory-side cache in front of this node's memory, as hwloc reports it (``MemCache``: Intel's Memory Mode /
    2LM, where DRAM caches Optane; KNL's and Xeon Max's HBM cache modes). Recorded, not timed: every access is
    timed as the node's controller, so a working set larger than the cache comes out too fast; ``numasim topo
    show`` and ``topo import`` say so."""

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus_from_list_string(cls, value: object) -> object:
        # Machine files may write cpus the way sysfs does ("0-11,48-59").
        if isinstance(value, str):
            return parse_cpulist(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.cpus and self.memory_bytes == 0:
            raise ValueError(f"node {self.id} has neither cpus nor memory")
        if len(set(self.cpus)) != len(self.cpus):
            raise ValueError(f"node {self.id} lists a cpu twice: {self.cpus}")
        if self.cpus != sorted(self.cpus):
            raise ValueError(f"node {self.id}: cpus must be in increasing order, got {self.cpus}")
        if self.free_bytes is not None and self.free_bytes > self.memory_bytes:
            raise ValueError(
                f"node {self.id}: free_bytes {self.free_bytes} exceeds memory_bytes {self.memory_bytes}"
            )
        return self

    @property
    def has_memory(self) -> bool:
        return self.memory_bytes > 0

    @property
    def has_cpus(self) -> bool:
        return bool(self.cpus)


class Link(_Model):
    """A point-to-point interconnect link between two vertices (node ids or switch names)."""

    a: Vertex
    b: Vertex
    kind: LinkKind = LinkKind.OTHER
    latency_ns: PositiveFloat
    bandwidth_gb_s: PositiveFloat
    latency_ns_reverse: PositiveFloat | None = None
    bandwidth_gb_s_reverse: PositiveFloat | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.a == self.b:
            raise ValueError(f"link joins {self.a!r} to itself")
        return self

    def directed(self) -> tuple[tuple[Vertex, Vertex, float, float], tuple[Vertex, Vertex, float, float]]:
        """Both directions as ``(src, dst, latency_ns, bandwidth_gb_s)``."""
        back_lat = self.latency_ns_reverse if self.latency_ns_reverse is not None else self.latency_ns
        back_bw = self.bandwidth_gb_s_reverse if self.bandwidth_gb_s_reverse is not None else self.bandwidth_gb_s
        return (
            (self.a, self.b, self.latency_ns, self.bandwidth_gb_s),
            (self.b, self.a, back_lat, back_bw),
        )


class Switch(_Model):
    """A router or crossbar that links meet at (NUMAlink router, node controller, CXL switch)."""

    name: Annotated[str, Field(min_length=1)]
    kind: LinkKind = LinkKind.CROSSBAR
    latency_ns: Annotated[float, Field(ge=0)] = 0.0
    """Traversal latency added by the switch itself, on top of its links."""


class Device(_Model):
    """A device attached to a node's PCIe/CXL root (NIC, GPU, ...); its DMA crosses this attach link."""

    name: Annotated[str, Field(min_length=1)]
    kind: DeviceKind
    node: Annotated[int, Field(ge=0)]
    attach_latency_ns: PositiveFloat = 250.0
    attach_bandwidth_gb_s: PositiveFloat = 16.0
    description: str = ""


class CacheLevel(_Model):
    """One level of the cache hierarchy, repeated once per ``scope`` (per core, per die, ...)."""

    name: Annotated[str, Field(min_length=1)]
    size_bytes: Annotated[int, Field(gt=0)]
    latency_ns: PositiveFloat
    scope: CacheScope = CacheScope.CORE
    line_bytes: Annotated[int, Field(gt=0)] = 64
    associativity: Annotated[int, Field(gt=0)] = 8
    complexes_per_die: Annotated[int, Field(gt=0)] = 1
    """``scope = "ccx"`` only: core complexes per core die, each a run of the die's consecutive cores (with their
    hardware threads) holding one instance."""

    @model_validator(mode="after")
    def _complexes_need_ccx(self) -> Self:
        if self.complexes_per_die != 1 and self.scope is not CacheScope.CCX:
            raise ValueError(f"complexes_per_die = {self.complexes_per_die}: only a ccx-scoped level splits a core die")
        return self


class CoreDie(_Model):
    """A group of cores on one piece of silicon: an AMD core die (CCD), whose core complexes share an L3
    (:attr:`CacheScope.CCX`), and, where it reaches memory through a port of its own (its GMI link to the I/O
    die), that port. Every memory request of a ported die's cpus crosses the port, reads in one direction and
    writes in the other, so a die's bandwidth is bounded whichever node it reads, and a read/write mix can exceed
    all-reads.

    The port adds no idle latency (the measured route latency already includes it); it is a queueing resource.
    A die without one (both bandwidths ``None``: Naples' and the EPYC 3000's dies, whose memory controllers are
    their own, or a part whose die link nobody measured) only says which cores form its complexes.
    """

    cpus: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    """The die's cpus (hardware threads), all on one node."""
    read_bandwidth_gb_s: PositiveFloat | None = None
    """Data to the die (reads) through its port, per die (``None``: no port of its own)."""
    write_bandwidth_gb_s: PositiveFloat | None = None
    """Data from the die (writes) through its port, per die (``None``: no port of its own)."""

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus_from_list_string(cls, value: object) -> object:
        return parse_cpulist(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _port_is_whole(self) -> Self:
        if (self.read_bandwidth_gb_s is None) != (self.write_bandwidth_gb_s is None):
            raise ValueError(f"read_bandwidth_gb_s = {self.read_bandwidth_gb_s}, write_bandwidth_gb_s = "
                             f"{self.write_bandwidth_gb_s}: a die's port has both directions, or the die has none")
        return self

    @property
    def has_port(self) -> bool:
        """Whether the die reaches memory through a port of its own (a queueing resource of the engine)."""
        return self.read_bandwidth_gb_s is not None


class Route(_Model):
    """An explicit route from ``src`` to ``dst`` (both node ids) through the listed vertices, ends included."""

    src: Annotated[int, Field(ge=0)]
    dst: Annotated[int, Field(ge=0)]
    path: list[Vertex]

    @model_validator(mode="after")
    def _check(self) -> Self:
        if len(self.path) < 2 or self.path[0] != self.src or self.path[-1] != self.dst:
            raise ValueError(f"route {self.src}->{self.dst}: path must start at src and end at dst, got {self.path}")
        return self


class Machine(_Model):
    """A NUMA machine: nodes, their interconnect, caches and devices.

    Two distance notions are kept apart on purpose: ``firmware_slit`` is what the kernel sees (ACPI SLIT, as in
    ``/sys/devices/system/node/nodeN/distance``) and may be wrong; the timing tables come from the links and
    controllers. When ``firmware_slit`` is absent, the SLIT is derived from the timing as
    ``round(10 * remote / local)``.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = glueless(2)
    >>> [n.id for n in m.nodes]
    [0, 1]
    """

    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    source: str = ""
    """Where the numbers come from (article, measurement file, vendor data), for provenance."""
    nodes: list[Node]
    links: list[Link] = Field(default_factory=list)
    switches: list[Switch] = Field(default_factory=list)
    devices: list[Device] = Field(default_factory=list)
    caches: list[CacheLevel] = Field(default_factory=list)
    routes: list[Route] = Field(default_factory=list)
    core_dies: list[CoreDie] = Field(default_factory=list)
    """Groups of cpus behind a die port of their own (AMD CCDs); empty where cores reach memory directly."""
    firmware_slit: list[list[int]] | None = None
    numactl_style: Literal["2.0.18", "2.0.19"] | None = None
    """The layout of the ``numactl --hardware`` text this machine was read from: ``"2.0.18"`` (and older numactl:
    3-wide distance columns) or ``"2.0.19"`` (4-wide). ``topo hardware`` and the virtual numactl print the same
    layout, so a text round trip keeps its column widths; ``None`` (not read from numactl text): 2.0.19's."""
    cpu_model: str | None = None
    """The processor as the OS names it (``/proc/cpuinfo``'s "model name", lscpu's "Model name", hwloc's
    ``CPUModel``), e.g. ``"Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"``: the key into the platform catalog
    (:mod:`numasim.timing.catalog`) for timing priors. ``None`` when the source did not say."""
    calibration: str | None = None
    """Name or path of the calibration file that timing results on this machine depend on."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.nodes:
            raise ValueError("nodes: a machine needs at least one node")
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"nodes: duplicate node id in {ids}")
        if ids != sorted(ids):
            raise ValueError(f"nodes: node ids must be listed in increasing order, got {ids}")
        seen: dict[int, int] = {}
        for n in self.nodes:
            for c in n.cpus:
                if c in seen:
                    raise ValueError(f"nodes[{n.id}].cpus: cpu {c} is already on node {seen[c]}")
                seen[c] = n.id
        if not any(n.has_memory for n in self.nodes):
            raise ValueError("nodes: no node has memory")
        switch_names = [s.name for s in self.switches]
        if len(set(switch_names)) != len(switch_names):
            raise ValueError(f"switches: duplicate switch name in {switch_names}")
        vertices: set[Vertex] = set(ids) | set(switch_names)
        for i, link in enumerate(self.links):
            for end in ("a", "b"):
                v = getattr(link, end)
                if v not in vertices:
                    raise ValueError(f"links[{i}].{end}: {v!r} is neither a node id nor a switch name")
        for d in self.devices:
            if d.node not in ids:
                raise ValueError(f"devices[{d.name}].node: no node {d.node}")
        for r in self.routes:
            for v in r.path:
                if v not in vertices:
                    raise ValueError(f"routes[{r.src}->{r.dst}].path: unknown vertex {v!r}")
        on_die: dict[int, int] = {}
        for k, die in enumerate(self.core_dies):
            nodes_of = {seen.get(c) for c in die.cpus}
            if None in nodes_of:
                missing = sorted(c for c in die.cpus if c not in seen)
                raise ValueError(f"core_dies[{k}].cpus: cpus {missing} are on no node")
            if len(nodes_of) > 1:
                raise ValueError(f"core_dies[{k}].cpus: a die's cpus must be on one node, these are on nodes "
                                 f"{sorted(n for n in nodes_of if n is not None)}")
            for c in die.cpus:
                if c in on_die:
                    raise ValueError(f"core_dies[{k}].cpus: cpu {c} is already on core die {on_die[c]}")
                on_die[c] = k
        for cache in self.caches:
            if cache.scope is CacheScope.CCX:
                unplaced = sorted(c for c in seen if c not in on_die)
                if unplaced:
                    raise ValueError(f"caches[{cache.name}].scope = 'ccx': cpus {unplaced[:8]} are on no core die "
                                     "(core_dies says which cores a complex is made of)")
                for k, die in enumerate(self.core_dies):
                    try:
                        core_complexes(die.cpus, cache.complexes_per_die)
                    except ValueError as exc:
                        raise ValueError(f"caches[{cache.name}]: core_dies[{k}]: {exc}") from None
        if self.firmware_slit is not None:
            _check_slit(self.firmware_slit, len(ids))
        if len(ids) > 1:
            _check_connected(ids, switch_names, self.links)
        return self

    # --- small conveniences; everything heavier is a function in routing/distances -------------------
    @property
    def node_ids(self) -> list[int]:
        return [n.id for n in self.nodes]

    def node(self, node_id: int) -> Node:
        """The node with id ``node_id`` (a KeyError names the ids that exist)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id} (nodes: {self.node_ids})")

    def index_of(self, node_id: int) -> int:
        """Position of ``node_id`` in :attr:`nodes` (= row of the distance/latency tables)."""
        return self.node_ids.index(node_id)

    @property
    def cpu_to_node(self) -> dict[int, int]:
        return {c: n.id for n in self.nodes for c in n.cpus}

    @property
    def cpus(self) -> list[int]:
        return sorted(c for n in self.nodes for c in n.cpus)

    @property
    def memory_bytes(self) -> int:
        return sum(n.memory_bytes for n in self.nodes)

    @property
    def sockets(self) -> list[int]:
        return sorted({n.socket for n in self.nodes if n.socket is not None})

    def slit(self) -> list[list[int]]:
        """The SLIT the kernel sees: firmware's if given, else derived from link timing."""
        from numasim.topology.distances import slit

        return slit(self)


def core_complexes(die_cpus: list[int], complexes: int) -> list[list[int]]:
    """A core die's cpus split into ``complexes`` core complexes of consecutive cores, each with its hardware
    threads.

    Linux numbers every core's first thread before the second threads, so a die's cpus are runs of consecutive
    ids of equal length, one run per thread (``0-7,128-135``); complex ``j`` is the ``j``-th part of every run.

    Examples
    --------
    >>> core_complexes([0, 1, 2, 3, 4, 5, 6, 7, 128, 129, 130, 131, 132, 133, 134, 135], 2)
    [[0, 1, 2, 3, 128, 129, 130, 131], [4, 5, 6, 7, 132, 133, 134, 135]]
    >>> core_complexes([8, 9, 10, 11, 12, 13], 1)
    [[8, 9, 10, 11, 12, 13]]
    """
    cpus = sorted(die_cpus)
    if complexes == 1:
        return [cpus]
    runs: list[list[int]] = [[cpus[0]]]
    for c in cpus[1:]:
        if c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    length = len(runs[0])
    if any(len(r) != length for r in runs) or length % complexes:
        raise ValueError(f"cpus {cpus} are not runs of equal length divisible by {complexes} (one run a hardware "
                         f"thread, consecutive cores): cannot split them into {complexes} core complexes")
    part = length // complexes
    return [sorted(c for r in runs for c in r[j * part : (j + 1) * part]) for j in range(complexes)]


def _check_slit(table: list[list[int]], n: int) -> None:
    if len(table) != n:
        raise ValueError(f"firmware_slit: {len(table)} rows for {n} nodes")
    for i, row in enumerate(table):
        if len(row) != n:
            raise ValueError(f"firmware_slit[{i}]: {len(row)} columns for {n} nodes (must be square)")
        if row[i] != LOCAL_DISTANCE:
            raise ValueError(f"firmware_slit[{i}][{i}] = {row[i]}: the diagonal must be {LOCAL_DISTANCE}")
        for j, d in enumerate(row):
            if j != i and not LOCAL_DISTANCE <= d <= 255:
                raise ValueError(f"firmware_slit[{i}][{j}] = {d}: remote distances are 10..255")


def _check_connected(ids: list[int], switches: list[str], links: list[Link]) -> None:
    # Union-find over node ids and switch names: cheap, and independent of networkx.
    everything: list[Vertex] = [*ids, *switches]
    parent: dict[Vertex, Vertex] = {v: v for v in everything}

    def find(v: Vertex) -> Vertex:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for link in links:
        parent[find(link.a)] = find(link.b)
    roots = {find(i) for i in ids}
    if len(roots) > 1:
        groups: dict[Vertex, list[int]] = {}
        for i in ids:
            groups.setdefault(find(i), []).append(i)
        parts = sorted(groups.values())
        raise ValueError(f"links: the link graph is disconnected; node groups {parts}")
