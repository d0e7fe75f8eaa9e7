"""The platform catalog's data model: one :class:`Platform` per processor generation, with its SKUs and sources.

Every numeric field of an entry traces to the entry's ``sources`` (a :class:`Source` has an ``id`` the groups
of fields cite in their own ``sources`` list). Fields whose value no public source gave are left out (``None``)
rather than guessed; :func:`numasim.timing.catalog.catalog_calibration` says what it used in their place.

Units are in the names: ``*_bytes``, ``*_ghz``, ``*_gt_s`` (gigatransfers per second), ``*_gb_s`` (decimal
gigabytes per second), ``*_ns``, ``latency_cycles`` (core clock cycles), ``max_mt_s`` (DRAM megatransfers
per second).
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Source",
    "CacheSpec",
    "MemorySpec",
    "HbmSpec",
    "NumaMode",
    "LinkSpec",
    "LinkEfficiency",
    "CoreLimits",
    "CoreDieLink",
    "LatencyPrior",
    "EfficiencyPrior",
    "StreamPrior",
    "WriteAllocatePrior",
    "CxlSupport",
    "Sku",
    "Platform",
]

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Source(_Model):
    """A public document an entry's numbers come from: what it is, where, and what it gave."""

    id: Annotated[str, Field(min_length=1)]
    title: Annotated[str, Field(min_length=1)]
    url: str = ""
    """A URL, or a document number (Intel and AMD datasheets have ids) when there is no stable URL."""
    gave: Annotated[str, Field(min_length=1)]
    """Which figures of the entry this source supports."""


class _Sourced(_Model):
    sources: list[str] = Field(default_factory=list)
    """Ids of the entry's :class:`Source` records these numbers come from."""


class CacheSpec(_Sourced):
    """One cache level: size of one instance, associativity, load-to-use latency, and which cpus share it."""

    level: Literal["L1d", "L2", "L3"]
    size_kib: PositiveFloat | None = None
    """Size of one instance in KiB (vendors' "KB"); for the L3 the SKU's ``l3_mib`` wins when given."""
    associativity: PositiveInt | None = None
    latency_cycles: PositiveFloat | None = None
    """Load-to-use latency of a hit, in core clock cycles (None: no public figure)."""
    scope: Literal["core", "module", "ccx", "die", "socket"]
    """Which cpus share one instance: a core (and its SMT threads), a Bulldozer module, an AMD core complex
    (CCX/CCD), a die of a multi-die package, or the whole socket."""
    complexes_per_die: PositiveInt = 1
    """``scope = "ccx"``: core complexes per core die (Zen 1 and 2: two of four cores each; Zen 3 and later: the
    die is one complex)."""
    cores_per_module: PositiveInt = 2
    """``scope = "module"``: the cores sharing one instance (Bulldozer: 2; Goldmont's L2: 2 or 4; Crestmont's:
    4). numasim has no module scope: each core gets an even share of the instance (``size_kib`` / this)."""


class MemorySpec(_Sourced):
    """DRAM attached to one socket."""

    ddr: Literal["DDR", "DDR2", "DDR3", "DDR4", "DDR5"]
    max_mt_s: PositiveInt
    """The fastest DRAM the platform supports (the SKU may be slower: ``Sku.max_mt_s``)."""
    channels_per_socket: PositiveInt
    dies_per_socket: PositiveInt = 1
    channels_per_die: PositiveInt | None = None
    """Channels wired to each die, for packages whose dies each own memory (Magny-Cours, Naples)."""
    buffered: bool = False
    """The DIMMs hang off on-board memory buffers (Intel's SMI, Nehalem-EX to Broadwell-EX): every access crosses
    a buffer, so the idle latency sits tens of ns above a direct-attached platform's. A platform without a latency
    measurement borrows one only from a platform alike in this, where there is one."""
    note: str = ""


class NumaMode(_Sourced):
    """A BIOS setting that splits a socket into NUMA nodes, and how it splits the channels."""

    name: Annotated[str, Field(min_length=1)]
    """``"SNC2"``, ``"CoD"``, ``"NPS4"``, ... (``"none"``: one node per socket)."""
    nodes_per_socket: PositiveInt
    channels_per_node: PositiveFloat
    note: str = ""
    min_cores: PositiveInt | None = None
    """The fewest cores a SKU needs to offer the mode (Cluster-on-Die needs the dies with two rings); None: every
    SKU of the platform offers it."""


class LinkEfficiency(_Sourced):
    """Measured cache-line read bandwidth over a socket link's data rate (``bandwidth_gb_s`` x links)."""

    read_factor: Annotated[float, Field(gt=0, le=1)]
    """Remote all-core read bandwidth of one socket from the other / (links x ``bandwidth_gb_s``)."""
    derivation: Annotated[str, Field(min_length=1)]
    """The measured numbers, the data rate they are divided by, and why the link (not the cores) limits them."""


class LinkSpec(_Sourced):
    """The socket-to-socket interconnect (and, optionally, what joins the dies or clusters inside a socket)."""

    kind: Literal["qpi", "upi", "hypertransport", "infinity-fabric"]
    links_per_socket: PositiveInt
    gt_s: PositiveFloat
    """Transfer rate of one link, gigatransfers per second."""
    bandwidth_gb_s: PositiveFloat
    """Data bandwidth of one link, per direction (GB/s)."""
    derivation: Annotated[str, Field(min_length=1)]
    """How ``bandwidth_gb_s`` follows from ``gt_s`` (lanes, bytes per transfer, what is counted)."""
    links_to_sockets: PositiveInt | None = None
    """How many of ``links_per_socket`` join other sockets (None: all; Nehalem-EP sends one to the I/O hub)."""
    wiring: str = ""
    """How the links join sockets on the usual boards (all between the pair on 2 sockets, one per pair ...)."""
    die_to_die_bandwidth_gb_s: PositiveFloat | None = None
    """Per direction, between two dies (or clusters) of one package, when public."""
    read_efficiency: LinkEfficiency | None = None
    """Measured on a public machine of this platform; None: taken from the nearest measured link of its kind."""


class CoreDieLink(_Sourced):
    """The port each core die (an AMD CCD) reaches the I/O die, memory and the other dies through (GMI).

    Per die and direction: ``bytes_per_clock`` x ``fabric_clock_ghz`` (the Infinity Fabric clock, FCLK) GB/s,
    reads toward the die and writes from it on separate wires, so a read/write mix can move more than all-reads.
    """

    read_bytes_per_clock: PositiveInt
    """Per GMI link; a die joined by two links (GMI-Wide, ``Sku.core_die_links``) has twice."""
    write_bytes_per_clock: PositiveInt
    fabric_clock_ghz: PositiveFloat
    fabric_clock_note: Annotated[str, Field(min_length=1)]
    """Where the clock comes from: a vendor figure, or why an estimate had to stand in for one."""
    dies_rule: Annotated[str, Field(min_length=1)]
    """How many dies a SKU has when the SKU does not say (``Sku.core_dies``), with its source."""

    def read_gb_s(self, links: int = 1) -> float:
        """Reads toward one die joined by ``links`` GMI links (two on Turin's GMI-Wide parts)."""
        return links * self.read_bytes_per_clock * self.fabric_clock_ghz

    def write_gb_s(self, links: int = 1) -> float:
        return links * self.write_bytes_per_clock * self.fabric_clock_ghz


class CoreLimits(_Sourced):
    """Per-core memory-level parallelism: how many misses one core can have in flight."""

    l1d_fill_buffers: PositiveInt | None = None
    """Intel line fill buffers / AMD L1 miss address buffers: outstanding L1D misses per core."""
    l2_outstanding_misses: PositiveInt | None = None
    """Intel L2 superqueue entries / AMD L2 miss buffers: outstanding L2 misses per core."""
    note: str = ""


class StreamPrior(_Sourced):
    """How far one core's sequential read stream runs ahead of its loads: the lines its prefetchers keep in flight
    beyond its fill buffers (numasim's ``CoreTiming.prefetch_distance_lines``).

    No vendor publishes it as such (Intel's streamer "can run up to 20 lines ahead" bounds it, the L2 queue it
    shares with demand misses bounds it too), so it is read off a measurement: the depth at which numasim's replay
    of one core's streaming load matches the measured bandwidth."""

    prefetch_lines: Annotated[int, Field(ge=0)]
    measured_on: Annotated[str, Field(min_length=1)]
    """The machine, benchmark and measured figure the depth was solved from."""
    derivation: Annotated[str, Field(min_length=1)]


class LatencyPrior(_Sourced):
    """Idle DRAM latency measured on a public machine of this platform (not a datasheet figure)."""

    local_ns: PositiveFloat
    remote_ns: PositiveFloat | None = None
    """One socket-to-socket hop away; None when the source measured only local memory."""
    measured_on: Annotated[str, Field(min_length=1)]
    """The machine and tool, e.g. "2x Xeon Platinum 8180, Intel MLC v3.5 idle latency matrix"."""
    mode: str | None = None
    """The clustering mode the figures were measured in ("SNC off", "SNC2", "NPS4", "none" where the platform
    has no setting). Local latency depends on it: with one node per socket the addresses interleave over every
    channel of the socket, far ones included, so its local latency is higher than a cluster's."""
    local_ns_by_mode: dict[str, PositiveFloat] = Field(default_factory=dict)
    """Local latency measured in other modes by the same source, e.g. ``{"NPS1" = 122.0}``."""
    sockets: PositiveInt | None = None
    """How many sockets the measured machine had, where that changes the figures (None: it does not, or was not
    recorded). Where every read waits for every other socket's answer to its snoop (broadcast coherence: Opteron
    before its probe filter), local latency grows with the sockets, and a remote - local difference measured on
    one socket count does not carry to another."""
    local_ns_by_sockets: dict[int, PositiveFloat] = Field(default_factory=dict)
    """Local latency measured on machines of other socket counts by the same source, e.g. ``{2 = 60.0}``."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.remote_ns is not None and self.remote_ns <= self.local_ns:
            raise ValueError(f"remote_ns = {self.remote_ns}: must exceed local_ns = {self.local_ns}")
        if self.local_ns_by_sockets and self.sockets is None:
            raise ValueError("local_ns_by_sockets: needs sockets, the socket count local_ns was measured on")
        bad = [k for k in self.local_ns_by_sockets if k < 1 or k == self.sockets]
        if bad:
            raise ValueError(f"local_ns_by_sockets: socket counts {bad} must be >= 1 and differ from sockets = {self.sockets}")
        return self


class CoherencePrior(_Sourced):
    """Cache-to-cache transfer latencies measured on a public machine of this platform (mlc ``--c2c_latency``'s
    HITM rows, or a core-to-core ping-pong's one-way latency per tier): a read of a line another core holds modified."""

    local_hitm_ns: PositiveFloat
    """From a core of the same last-level cache instance (the socket's, or a core complex's)."""
    socket_hitm_ns: PositiveFloat | None = None
    """From a core of another last-level instance of the same socket (another core complex), the line homed on
    that socket (None: the platform has one instance a socket, or it was not measured)."""
    remote_hitm_ns: PositiveFloat | None = None
    """From a core of another socket, the line homed at the writer's node (None: not measured)."""
    remote_hitm_home_reader_ns: PositiveFloat | None = None
    """From a core of another socket, the line homed at the reader's node (None: as ``remote_hitm_ns``)."""
    measured_on: Annotated[str, Field(min_length=1)]


class WriteAllocatePrior(_Sourced):
    """Write-allocate evasion: a store miss that claims its line without reading it once memory is heavily
    loaded (Intel's SpecI2M on Ice Lake-SP). Platforms without an entry read every store miss's line."""

    evasion: Annotated[float, Field(gt=0, le=1)]
    """Share of the reads for ownership skipped at full load (``CoreTiming.write_allocate_evasion``)."""
    measured_on: Annotated[str, Field(min_length=1)]
    """What shows it, e.g. "likwid-bench copy against update on a Platinum 8360Y"."""


class EfficiencyPrior(_Sourced):
    """Sustained over peak DRAM bandwidth, from a public streaming-bandwidth measurement."""

    read_factor: Annotated[float, Field(gt=0, le=1)]
    """Measured all-core read bandwidth of one socket / (channels x MT/s x 8 B)."""
    write_factor: Annotated[float, Field(gt=0, le=1)] | None = None
    derivation: Annotated[str, Field(min_length=1)]
    """The measured number, the peak it is divided by, and what was assumed about the installed DIMMs."""


class CxlSupport(_Sourced):
    """Whether, and how, the platform attaches CXL memory (Type-3 expanders appear as cpu-less NUMA nodes)."""

    versions: list[Literal["1.1", "2.0", "3.0"]]
    """CXL versions the host ports speak (a 2.0 device trains down to a 1.1 host)."""
    lanes_per_socket: PositiveInt | None = None
    """PCIe 5.0 lanes per socket that can run CXL, when public."""
    note: str = ""


class HbmSpec(_Sourced):
    """High-bandwidth memory in the package (Xeon Max's HBM2e): in flat mode Linux shows it as cpu-less nodes,
    one a socket (quadrant) or one a cluster (SNC4), each beside the DDR node of its cpus."""

    stacks_per_socket: PositiveInt
    gb_per_stack: PositiveFloat
    gt_s: PositiveFloat
    """Data rate of one pin, gigatransfers per second."""
    bus_bits: PositiveInt
    """Data bits of one stack's interface (1024 for HBM2e)."""
    derivation: Annotated[str, Field(min_length=1)]
    """How the peak follows from the numbers above."""
    added_latency_ns: Annotated[float, Field(ge=0)]
    """Idle latency of a read from a socket's own HBM over that of its own DDR, measured on one box."""
    latency_measured_on: Annotated[str, Field(min_length=1)]
    read_gb_s_per_socket: PositiveFloat | None = None
    """Measured line-read bandwidth of one socket's cores from its own HBM (None: not measured)."""
    read_measured_on: str = ""
    note: str = ""

    @property
    def capacity_gib_per_socket(self) -> float:
        return self.stacks_per_socket * self.gb_per_stack

    @property
    def peak_gb_s_per_socket(self) -> float:
        return self.stacks_per_socket * self.bus_bits / 8 * self.gt_s

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.read_gb_s_per_socket is not None:
            if not self.read_measured_on:
                raise ValueError("read_gb_s_per_socket needs read_measured_on: what was measured, on what")
            if self.read_gb_s_per_socket > self.peak_gb_s_per_socket:
                raise ValueError(f"read_gb_s_per_socket = {self.read_gb_s_per_socket:g} exceeds the peak "
                                 f"{self.peak_gb_s_per_socket:g} GB/s of {self.stacks_per_socket} stacks")
        return self


class Sku(_Sourced):
    """One processor model of a platform; fields left out take the platform's value."""

    model: Annotated[str, Field(min_length=1)]
    """As the vendor writes it, with the brand: ``"Xeon Gold 6240"``, ``"Xeon E5-2680 v2"``, ``"EPYC 7452"``."""
    cores: PositiveInt
    threads: PositiveInt
    base_ghz: PositiveFloat
    all_core_turbo_ghz: PositiveFloat | None = None
    l3_mib: PositiveFloat | None = None
    """Total L3 of one socket in MiB (vendors' "MB")."""
    channels: PositiveInt | None = None
    max_mt_s: PositiveInt | None = None
    links: PositiveInt | None = None
    """Socket-to-socket links this SKU enables (Xeon Scalable: 2 or 3 UPI)."""
    link_gt_s: PositiveFloat | None = None
    core_dies: PositiveInt | None = None
    """Core dies (CCDs, or Naples' and the EPYC 3000's whole dies) per socket: where the platform has a
    :class:`CoreDieLink` each is a port; where its L3 is split per core complex (``scope = "ccx"``) they say which
    cores share each instance."""
    core_die_links: PositiveInt | None = None
    """GMI links joining each core die to the I/O die (None: one; two on GMI-Wide parts)."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.threads < self.cores:
            raise ValueError(f"sku {self.model}: threads = {self.threads} < cores = {self.cores}")
        return self


class Platform(_Sourced):
    """One processor generation: what the timing model needs, each group of numbers with its public sources."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    """The catalog key, e.g. ``"intel-skylake-sp"``."""
    vendor: Literal["intel", "amd"]
    title: Annotated[str, Field(min_length=1)]
    """Marketing family, e.g. "Xeon Scalable (1st gen), Skylake-SP"."""
    microarchitecture: Annotated[str, Field(min_length=1)]
    years: tuple[int, int]
    """First and last year of launches (the same year twice for a single launch)."""
    max_cores_per_socket: PositiveInt
    threads_per_core: PositiveInt
    client_die: bool = False
    """Built on a desktop processor's die (Xeon E3, E-2000): a short ring and few cores make its cache and memory
    latencies well below a server die's (a desktop Skylake reads memory in ~62 ns, a Skylake-SP in ~81), so a
    platform without a figure borrows one from a platform alike in this where there is one."""
    caches: list[CacheSpec]
    memory: MemorySpec
    numa_modes: list[NumaMode] = Field(default_factory=list)
    interconnect: LinkSpec | None = None
    """None: a single-socket platform (Xeon D, Atom, EPYC 4004/8004): its parts have no socket links, and a machine
    of several sockets is an error naming the platform."""
    core: CoreLimits = Field(default_factory=CoreLimits)
    core_die_link: CoreDieLink | None = None
    """None: the cores reach the memory controllers without a per-die port (monolithic dies, Intel)."""
    latency: LatencyPrior | None = None
    """None: no public idle-latency measurement of this platform was found; say so, do not guess."""
    efficiency: EfficiencyPrior | None = None
    stream: StreamPrior | None = None
    """None: no one-core streaming measurement of this platform; numasim's default depth stands in, said so."""
    coherence: CoherencePrior | None = None
    """None: no public cache-to-cache measurement of this platform was found (transfers are then timed as the
    cache level or memory access that serves them)."""
    write_allocate: WriteAllocatePrior | None = None
    """None: every store miss reads its line (no public evidence of write-allocate evasion on the platform)."""
    cxl: CxlSupport | None = None
    """None: the platform has no CXL memory support (a CXL node on it is an error naming the platform)."""
    hbm: HbmSpec | None = None
    """None: no high-bandwidth memory in the package (an HBM node on it is an error naming the platform)."""
    model_patterns: list[str] = Field(default_factory=list)
    """Regular expressions over the normalised model key (``"E5-2680 V2"``, ``"GOLD 6240"``) that recognise
    SKUs of this platform the catalog does not list."""
    source_list: list[Source] = Field(alias="source", default_factory=list)
    skus: list[Sku]
    notes: str = ""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> Self:
        first, last = self.years
        if not 1990 <= first <= last <= 2100:
            raise ValueError(f"years = {self.years}: expected (first, last) with first <= last")
        ids = [s.id for s in self.source_list]
        if len(set(ids)) != len(ids):
            raise ValueError(f"source: duplicate id in {ids}")
        known = set(ids)
        groups: list[tuple[str, _Sourced]] = [("platform", self), ("memory", self.memory), ("core", self.core)]
        if self.interconnect is not None:
            groups.append(("interconnect", self.interconnect))
        groups += [(f"caches[{c.level}]", c) for c in self.caches]
        groups += [(f"numa_modes[{m.name}]", m) for m in self.numa_modes]
        groups += [(f"skus[{s.model}]", s) for s in self.skus]
        if self.latency is not None:
            groups.append(("latency", self.latency))
        if self.efficiency is not None:
            groups.append(("efficiency", self.efficiency))
        if self.coherence is not None:
            groups.append(("coherence", self.coherence))
        if self.interconnect is not None and self.interconnect.read_efficiency is not None:
            groups.append(("interconnect.read_efficiency", self.interconnect.read_efficiency))
        if self.cxl is not None:
            groups.append(("cxl", self.cxl))
        if self.hbm is not None:
            groups.append(("hbm", self.hbm))
        if self.core_die_link is not None:
            groups.append(("core_die_link", self.core_die_link))
        for where, group in groups:
            missing = [s for s in group.sources if s not in known]
            if missing:
                raise ValueError(f"{where}.sources: {missing} are not ids of this platform's sources {sorted(known)}")
            has_numbers = any(
                isinstance(v, int | float) and not isinstance(v, bool) and k != "years"
                for k, v in group.__dict__.items()
            )
            if has_numbers and not group.sources and where != "platform":
                raise ValueError(f"{where}: numbers without sources")
        if not self.skus:
            raise ValueError("skus: a platform needs at least one SKU")
        models = [s.model for s in self.skus]
        if len(set(models)) != len(models):
            raise ValueError(f"skus: duplicate model in {models}")
        levels = [c.level for c in self.caches]
        if len(set(levels)) != len(levels):
            raise ValueError(f"caches: duplicate level in {levels}")
        return self

    def source(self, source_id: str) -> Source:
        """The source record with id ``source_id``."""
        for s in self.source_list:
            if s.id == source_id:
                return s
        raise KeyError(f"platform {self.name} has no source {source_id!r}")

    def cite(self, ids: list[str]) -> str:
        """One line naming the sources behind a group of numbers: ``"title (url)"; ...``."""
        parts = []
        for i in ids:
            s = self.source(i)
            parts.append(f"{s.title} ({s.url})" if s.url else s.title)
        return "; ".join(parts)

    @property
    def single_socket(self) -> bool:
        """Whether the platform's parts have no socket links (one socket a machine)."""
        return self.interconnect is None

    def cache(self, level: str) -> CacheSpec | None:
        return next((c for c in self.caches if c.level == level), None)
