"""The :class:`Calibration`: every timing parameter the engine reads, in one typed place, with provenance.

A machine file describes structure (nodes, links, caches) and may carry nominal numbers; a calibration says
what those numbers really are on a given box and where they came from (measurement files with their hashes,
tool versions, fit quality). The engine only times accesses through a calibration, and every timing result
names the calibration's ``id``. Nominal numbers can be used, but only on purpose, through
:func:`nominal_calibration`, whose provenance says so.

Saved as JSON. The ``id`` is derived from the content, so two different calibrations never share an id and
the same parameters always give the same id.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from numasim.errors import CalibrationError
from numasim.fileio import atomic_write_text
from numasim.topology.model import CacheLevel, CacheScope, CoreDie, Machine, MemoryController, Vertex

__all__ = [
    "SourceFile",
    "Provenance",
    "LoadedLatencyCurve",
    "ControllerTiming",
    "LinkTiming",
    "CacheTiming",
    "DeviceTiming",
    "RelayTiming",
    "CoreTiming",
    "CoherenceTiming",
    "PriorParameter",
    "Calibration",
    "default_curve",
    "shaped_curve",
    "DEFAULT_CURVE_SHAPE",
    "EVASION_ONSET_QUEUE_LINES",
    "EVASION_FULL_QUEUE_LINES",
    "write_allocate_evaded",
    "nominal_calibration",
    "machine_devices_and_relays",
    "apply_calibration",
    "load_calibration",
    "save_calibration",
]

PositiveFloat = Annotated[float, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceFile(_Model):
    """A measurement file a calibration was fitted from."""

    path: str
    sha256: str
    tool: str
    tool_version: str | None = None
    sections: list[str] = Field(default_factory=list)


class PriorParameter(_Model):
    """A timing parameter that no measurement constrained: its value is a prior, and says where it came from.

    A calibration fitted on some tables keeps every parameter those tables cannot pin down at its prior (the
    platform catalog's value, or the machine file's nominal one) and lists it here, so a result that depends on
    it says so instead of passing a guess off as a fit.
    """

    parameter: str
    """Keyed like the uncertainty dict: ``"links[0->1].bandwidth_gb_s"``, ``"core.core_clock_ghz"``."""
    value: float
    unit: str = ""
    source: str
    """Where the prior comes from: a catalog entry and its public source, or ``"machine file (nominal)"``."""
    why: str = ""
    """Why no measurement constrained it, e.g. "not constrained by the latency and peak tables"."""


class Provenance(_Model):
    """Where a calibration's numbers come from and how good the fit was.

    ``method`` says what kind of calibration it is: ``"fit"`` (fitted to measurements, unconstrained parameters
    listed in ``priors``), ``"catalog"`` (no measurement at all: every number is a platform-catalog prior),
    ``"nominal"`` (the machine file's own numbers, on purpose) or ``"manual"``.
    """

    method: Literal["fit", "catalog", "nominal", "manual"]
    machine: str
    created: str = Field(default_factory=lambda: _dt.date.today().isoformat())
    numasim_version: str = "0.1.0"
    sources: list[SourceFile] = Field(default_factory=list)
    fit_quality: dict[str, float] = Field(default_factory=dict)
    """Named figures of merit, e.g. ``{"latency_matrix_mape_pct": 1.2}``."""
    priors: list[PriorParameter] = Field(default_factory=list)
    """Parameters no measurement constrained, kept at their prior (see :class:`PriorParameter`)."""
    platform: str | None = None
    """The platform-catalog entry the priors came from (``numasim catalog show NAME``), if any."""
    notes: str = ""


class LoadedLatencyCurve(_Model):
    """Extra latency a resource adds as a function of its utilisation (0 = idle, 1 = saturated).

    Piecewise linear through the points; beyond the last point the last segment's slope continues, so a
    resource driven past its last measured utilisation keeps getting slower (never faster).
    """

    utilisation: list[Annotated[float, Field(ge=0)]]
    added_latency_ns: list[Annotated[float, Field(ge=0)]]

    @model_validator(mode="after")
    def _check(self) -> Self:
        u, a = self.utilisation, self.added_latency_ns
        if len(u) != len(a) or len(u) < 2:
            raise ValueError("utilisation and added_latency_ns need the same length, at least 2 points")
        if any(x >= y for x, y in zip(u, u[1:], strict=False)):
            raise ValueError(f"utilisation must be strictly increasing, got {u}")
        if any(x > y for x, y in zip(a, a[1:], strict=False)):
            raise ValueError(f"added_latency_ns must be non-decreasing, got {a}")
        return self

    def added_ns(self, utilisation: np.ndarray | float) -> np.ndarray:
        """Added latency (ns) at the given utilisation(s); vectorised."""
        u = np.asarray(utilisation, dtype=float)
        xs = np.asarray(self.utilisation)
        ys = np.asarray(self.added_latency_ns)
        out = np.interp(u, xs, ys)
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        beyond = u > xs[-1]
        return np.where(beyond, ys[-1] + slope * (u - xs[-1]), out)


EVASION_ONSET_QUEUE_LINES = 32.0
"""Lines queued at a controller below which a store miss reads its line for ownership
(:func:`write_allocate_evaded`)."""
EVASION_FULL_QUEUE_LINES = 256.0
"""Lines queued at a controller from which a platform skips its whole :attr:`CoreTiming.write_allocate_evasion`.

Intel says only "when the memory subsystem is heavily loaded" (Hot Chips 32, 2020, Ice Lake-SP). What is
heavily loaded here is the backlog a full-line write finds at its memory controller when it issues, in lines of
that controller's service time; the ramp between the two bounds is read off one public series, likwid-bench copy
against update on a Platinum 8360Y (shared/data/kerncraft): there copy's traffic parts from update's from about
six busy cores of an 18-core domain and meets it at 17, well after the domain's bandwidth has saturated, so
the evasion follows how deep the queue is, not whether the controller is busy."""


def write_allocate_evaded(queued_lines: np.ndarray | float, evasion: float) -> np.ndarray:
    """Share of a full-line store miss's read for ownership skipped when ``queued_lines`` wait at its controller.

    Examples
    --------
    >>> write_allocate_evaded(np.array([0.0, 144.0, 300.0]), 1.0).tolist()
    [0.0, 0.5, 1.0]
    """
    q = np.asarray(queued_lines, dtype=float)
    ramp = (q - EVASION_ONSET_QUEUE_LINES) / (EVASION_FULL_QUEUE_LINES - EVASION_ONSET_QUEUE_LINES)
    return evasion * np.clip(ramp, 0.0, 1.0)


DEFAULT_CURVE_SHAPE = (0.468, 0.0444, 2.29)
"""``(a, b, cap)`` of :func:`shaped_curve` used by :func:`default_curve`.

Fitted (least squares on relative error) to the mlc ``--loaded_latency`` table of a 2-socket Xeon Platinum
8180 (FD.io CSIT calibration data, ``shared/data/mlc``), then checked on a held-out machine: it predicts the
2-socket Xeon E5-2680 v2 table (KU Leuven) within 6.9 % MAPE (experiments/calibration-seed-001-e5-2680v2).
"""


def shaped_curve(idle_latency_ns: float, a: float, b: float, cap: float, points: int = 10) -> LoadedLatencyCurve:
    """Added latency ``idle * min(a u + b u / (1 - u), cap)``: a linear rise, an M/M/1-like queueing term, and a
    cap where the closed loop saturates (mlc's load threads have a bounded number of misses in flight, so by
    Little's law the latency at peak bandwidth is bounded: about 2-2.5 x idle on both measured Xeons).

    Utilisation points: ``points`` evenly over [0, 0.9], then 0.95, 0.97 and 1.0; beyond 1.0 the last segment's
    slope continues (an overloaded controller keeps getting slower).
    """
    u = np.concatenate([np.linspace(0.0, 0.9, points), [0.95, 0.97, 1.0]])
    shape = np.minimum(a * u + b * u / np.maximum(1.0 - u, 1e-9), cap)
    shape[-1] = cap
    shape = np.maximum.accumulate(shape)
    return LoadedLatencyCurve(
        utilisation=[float(x) for x in u], added_latency_ns=[float(x) for x in shape * idle_latency_ns]
    )


def default_curve(idle_latency_ns: float, points: int = 10) -> LoadedLatencyCurve:
    """A principled default loaded-latency shape when no loaded-latency measurement exists.

    :func:`shaped_curve` with :data:`DEFAULT_CURVE_SHAPE`: a gentle linear rise (about +25 % of idle at half
    load), queueing that dominates above ~85 % utilisation, and saturation at 2.3 x idle added latency, the
    shape both measured Xeons share once latency is scaled by idle latency and bandwidth by peak.

    Examples
    --------
    >>> c = default_curve(80.0)
    >>> round(float(c.added_ns(0.5)), 1), round(float(c.added_ns(1.0)), 1)
    (22.3, 183.2)
    """
    a, b, cap = DEFAULT_CURVE_SHAPE
    return shaped_curve(idle_latency_ns, a, b, cap, points)


class ControllerTiming(_Model):
    """Timing of one node's memory controller (idle latency from a local core, bandwidths, loaded curve)."""

    node: Annotated[int, Field(ge=0)]
    latency_ns: PositiveFloat
    read_bandwidth_gb_s: PositiveFloat
    write_bandwidth_gb_s: PositiveFloat
    curve: LoadedLatencyCurve | None = None


class LinkTiming(_Model):
    """Timing of one *direction* of a link, from ``src`` to ``dst`` (node ids or switch names)."""

    src: Vertex
    dst: Vertex
    latency_ns: PositiveFloat
    bandwidth_gb_s: PositiveFloat
    curve: LoadedLatencyCurve | None = None


class CacheTiming(_Model):
    """One cache level (size and load-to-use latency)."""

    name: str
    size_bytes: Annotated[int, Field(gt=0)]
    latency_ns: PositiveFloat
    scope: CacheScope = CacheScope.CORE
    line_bytes: Annotated[int, Field(gt=0)] = 64
    complexes_per_die: Annotated[int, Field(gt=0)] = 1
    """``scope = "ccx"``: core complexes per core die (``CacheLevel.complexes_per_die``)."""


class RelayTiming(_Model):
    """Latency of passing *through* a node on a multi-hop route (its crossbar), see ``Node.relay_latency_ns``."""

    node: Annotated[int, Field(ge=0)]
    latency_ns: Annotated[float, Field(ge=0)]


class DeviceTiming(_Model):
    """A device's attach link (e.g. a NIC's PCIe link to its node), and its own path to other nodes' memory."""

    name: str
    attach_latency_ns: PositiveFloat
    attach_bandwidth_gb_s: PositiveFloat
    dma_read_bandwidth_gb_s: dict[int, PositiveFloat] = Field(default_factory=dict)
    """DMA read bandwidth from memory of the listed nodes (data toward the device: a NIC's send) where it was
    measured below the attach link's (``ib_send_bw --membind=1`` on a NIC of node 0). What limits it is on the
    device's own path (the PCIe root port and IIO, the die crossing of its read requests, how many are in
    flight), which cpu traffic does not take: a resource only the device's DMA reads cross, not a cap on a link
    every core's reads share. Its writes (a receive) were not measured apart and keep the route's links."""


class CoreTiming(_Model):
    """Per-core limits that shape achievable bandwidth (memory-level parallelism, prefetching)."""

    max_outstanding_misses: Annotated[int, Field(gt=0)] = 10
    """Line fill buffers: concurrent misses one core can have in flight (Little's law caps its bandwidth)."""
    prefetch_distance_lines: Annotated[int, Field(ge=0)] = 16
    """How far ahead the stream prefetcher runs on a detected sequential stream."""
    write_cost_factor: Annotated[float, Field(gt=0)] = 1.0
    """Lines a write moves relative to a read on the same route (above 1: its read for ownership and its
    write-back), charged in busy time on the resources it crosses; and its idle latency, unless
    ``write_latency_factor`` says otherwise."""
    write_latency_factor: Annotated[float, Field(gt=0)] | None = None
    """A store miss's idle latency relative to a read's: how long it holds its miss slot. ``None``: the write cost
    factor (one factor for both, as a hop table's write/read ratio is fitted). A store miss waits for its read for
    ownership, a read's round trip; its write-back is posted: 1.0 (the catalog's prior)."""
    outstanding_misses_per_core: Annotated[int, Field(gt=0)] | None = None
    """Misses one physical core can keep in flight, shared by its hardware threads: Intel's L2 superqueue, AMD's
    L2 miss buffers. A thread then keeps ``min(max_outstanding_misses, this / busy threads of its core)``: with
    one busy thread per core the L1 fill buffers bound it, with every hardware thread busy (mlc) the core's
    share does. ``None``: no per-core limit (each thread keeps ``max_outstanding_misses``)."""
    threads_per_core: Annotated[int, Field(gt=0)] | None = None
    """Hardware threads per core, to tell which cpus share a core (with ``outstanding_misses_per_core``)."""
    core_clock_ghz: PositiveFloat | None = None
    """The cores' clock (GHz) while running memory-bound code, used where a tool counts in core cycles (mlc's
    injection delay, its "core clocks" line). ``None``: unknown; such a tool then says it assumed one."""
    write_allocate_evasion: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    """Share of a store miss's read for ownership that the uncore skips when the line's memory controller is
    heavily loaded and the store writes the whole line (Intel's SpecI2M, Ice Lake-SP and later: the line is
    claimed without its data). It scales only the bandwidth such a write costs, never its latency, by how many
    lines already wait at its controller (:func:`write_allocate_evaded`). 0: every store miss reads its line
    (``write_cost_factor`` lines each)."""

    @property
    def write_latency(self) -> float:
        """A write's idle latency in read latencies (``write_latency_factor``, else ``write_cost_factor``)."""
        return self.write_latency_factor if self.write_latency_factor is not None else self.write_cost_factor


class CoherenceTiming(_Model):
    """What an access to a line *modified* in another core's cache costs: a cache-to-cache transfer (mlc
    ``--c2c_latency``'s HITM figures), in place of the hit or memory access that would otherwise serve it.

    ``local_hitm_ns``: the other core shares the reader's last-level cache instance (its socket, or its core
    complex or die where the L3 is split; an SNC or Cluster-on-Die cluster's share of the L3 counts its whole
    socket, whose mesh or ring the transfer crosses). ``remote_hitm_ns``: it does not, and the line's home is not the reader's node
    (mlc: "data address homed in writer socket"); ``remote_hitm_home_reader_ns``: the line's home is the reader's
    node (mlc: "homed in reader socket"). Unset remote figures: the local one's machine has one last-level cache
    instance, or its remote transfers were not measured (then they are timed as memory accesses, and results say
    so). ``socket_hitm_ns``: the other core is on the reader's socket but not on its last-level instance (AMD:
    another core complex), and the line is homed on that socket; None: timed as the remote figures are (a
    socket with one instance has no such transfer). Where the line is homed on another socket the request visits
    it, and such a transfer costs a remote one (``remote_hitm_ns``: a ping-pong between two core complexes of a
    2x EPYC 7R13's other socket measured 200.5 ns, as between its sockets 197.2, against 107.6 on the line's own
    socket). ``source``: where the figures come from."""

    local_hitm_ns: PositiveFloat
    socket_hitm_ns: PositiveFloat | None = None
    remote_hitm_ns: PositiveFloat | None = None
    remote_hitm_home_reader_ns: PositiveFloat | None = None
    source: str = ""


class Calibration(_Model):
    """All timing parameters for one machine, with where they came from.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> cal = nominal_calibration(glueless(2))
    >>> cal.provenance.method, len(cal.controllers), len(cal.links)
    ('nominal', 2, 2)
    """

    id: str = ""
    machine: str
    controllers: list[ControllerTiming]
    links: list[LinkTiming] = Field(default_factory=list)
    caches: list[CacheTiming] = Field(default_factory=list)
    devices: list[DeviceTiming] = Field(default_factory=list)
    relays: list[RelayTiming] = Field(default_factory=list)
    core: CoreTiming = Field(default_factory=CoreTiming)
    core_dies: list[CoreDie] = Field(default_factory=list)
    """Core dies with a port of their own (AMD CCDs and their GMI links), with the port's bandwidth per
    direction. They replace the machine file's ``core_dies``: empty, the timed machine has none."""
    coherence: CoherenceTiming | None = None
    """Cache-to-cache transfer latencies (None: not measured; an access to a line modified in another core is
    then timed as the cache level or memory access that serves it, and results say so)."""
    uncertainty: dict[str, float] = Field(default_factory=dict)
    """Standard error of fitted parameters, keyed like ``"controllers[0].latency_ns"``."""
    provenance: Provenance

    @model_validator(mode="after")
    def _fill_id(self) -> Self:
        expected = self.content_id()
        if not self.id:
            object.__setattr__(self, "id", expected)
        return self

    def content_id(self) -> str:
        """``<machine>-<first 12 hex of sha256 of the parameters>``; provenance dates do not change it."""
        body = self.model_dump(mode="json", exclude={"id", "provenance"})
        if body.get("coherence") is None:
            body.pop("coherence", None)  # calibrations from before it keep their ids
        elif body["coherence"].get("socket_hitm_ns") is None:
            body["coherence"].pop("socket_hitm_ns", None)  # ... and those from before its socket tier
        for optional_list in ("relays", "core_dies"):
            if not body.get(optional_list):
                # Calibrations written before these existed keep their ids.
                body.pop(optional_list, None)
        for dev in body.get("devices", []):
            if not dev.get("dma_read_bandwidth_gb_s"):
                dev.pop("dma_read_bandwidth_gb_s", None)  # ids of calibrations from before it stay
        for cache in body.get("caches", []):
            if cache.get("complexes_per_die") == 1:
                cache.pop("complexes_per_die")  # ids from before core complexes stay
        if not body.get("core", {}).get("write_allocate_evasion"):
            body.get("core", {}).pop("write_allocate_evasion", None)  # ids from before it stay
        for optional in ("core_clock_ghz", "outstanding_misses_per_core", "threads_per_core", "write_latency_factor"):
            if body.get("core", {}).get(optional) is None:
                # ... and so do those written before these fields existed.
                body.get("core", {}).pop(optional, None)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.machine}-{digest}"

    def controller(self, node: int) -> ControllerTiming:
        for c in self.controllers:
            if c.node == node:
                return c
        raise CalibrationError(f"calibration {self.id} has no controller timing for node {node}")


def machine_devices_and_relays(machine: Machine) -> tuple[list[DeviceTiming], list[RelayTiming]]:
    """The machine file's own device attach links and relay latencies, as calibration entries (what a
    calibration that has no measurement of them carries: the nominal one, the catalog's)."""
    devices = [
        DeviceTiming(name=d.name, attach_latency_ns=d.attach_latency_ns, attach_bandwidth_gb_s=d.attach_bandwidth_gb_s)
        for d in machine.devices
    ]
    relays = [RelayTiming(node=n.id, latency_ns=n.relay_latency_ns) for n in machine.nodes if n.relay_latency_ns > 0]
    return devices, relays


def nominal_calibration(machine: Machine, *, notes: str = "") -> Calibration:
    """A calibration made of the machine file's own nominal numbers, clearly labelled ``method="nominal"``."""
    controllers = []
    for n in machine.nodes:
        if n.controller is None:
            if n.has_memory:
                raise CalibrationError(
                    f"node {n.id} of {machine.name} has memory but no controller timing; "
                    "run `numasim calibrate` on measurements of this machine"
                )
            continue
        controllers.append(
            ControllerTiming(
                node=n.id,
                latency_ns=n.controller.latency_ns,
                read_bandwidth_gb_s=n.controller.read_bandwidth_gb_s,
                write_bandwidth_gb_s=n.controller.effective_write_bandwidth_gb_s,
                curve=default_curve(n.controller.latency_ns),
            )
        )
    links = [
        LinkTiming(src=src, dst=dst, latency_ns=lat, bandwidth_gb_s=bw)
        for link in machine.links
        for src, dst, lat, bw in link.directed()
    ]
    caches = [
        CacheTiming(name=c.name, size_bytes=c.size_bytes, latency_ns=c.latency_ns, scope=c.scope, line_bytes=c.line_bytes,
                    complexes_per_die=c.complexes_per_die)
        for c in machine.caches
    ]
    devices, relays = machine_devices_and_relays(machine)
    return Calibration(
        machine=machine.name,
        controllers=controllers,
        links=links,
        caches=caches,
        devices=devices,
        relays=relays,
        core_dies=list(machine.core_dies),
        provenance=Provenance(
            method="nominal",
            machine=machine.name,
            notes=notes or "nominal numbers from the machine file; not fitted to any measurement",
        ),
    )


def apply_calibration(machine: Machine, calibration: Calibration) -> Machine:
    """The machine timed by the calibration: every number a simulation of it uses, in one view.

    Controllers, links (matched by their endpoints), relays, device attach links and caches are replaced by
    the calibration's. The caches become exactly the calibration's levels, which are the ones the engine
    simulates (:func:`numasim.engine.caches.cache_levels`), each keeping the machine's associativity for a
    level of the same name. A calibration that names a link or device the machine does not have, or leaves a
    memory node without controller timing, is an error.
    """
    by_node = {c.node: c for c in calibration.controllers}
    relay_ns = {r.node: r.latency_ns for r in calibration.relays}
    nodes = []
    for n in machine.nodes:
        c = by_node.get(n.id)
        if c is None:
            if n.has_memory:
                raise CalibrationError(f"calibration {calibration.id} has no controller timing for node {n.id}")
            nodes.append(n)
            continue
        ctrl = MemoryController(
            latency_ns=c.latency_ns,
            read_bandwidth_gb_s=c.read_bandwidth_gb_s,
            write_bandwidth_gb_s=c.write_bandwidth_gb_s,
        )
        nodes.append(n.model_copy(update={"controller": ctrl, "relay_latency_ns": relay_ns.get(n.id, 0.0)}))
    directed = {(lt.src, lt.dst): lt for lt in calibration.links}
    links = []
    for link in machine.links:
        fwd = directed.get((link.a, link.b))
        back = directed.get((link.b, link.a))
        update: dict[str, float] = {}
        if fwd is not None:
            update |= {"latency_ns": fwd.latency_ns, "bandwidth_gb_s": fwd.bandwidth_gb_s}
        if back is not None:
            update |= {"latency_ns_reverse": back.latency_ns, "bandwidth_gb_s_reverse": back.bandwidth_gb_s}
        links.append(link.model_copy(update=update))
    known = {(link.a, link.b) for link in machine.links} | {(link.b, link.a) for link in machine.links}
    unknown = [k for k in directed if k not in known]
    if unknown:
        raise CalibrationError(f"calibration {calibration.id} times links the machine does not have: {unknown}")
    dev_timing = {d.name: d for d in calibration.devices}
    missing = sorted(set(dev_timing) - {d.name for d in machine.devices})
    if missing:
        raise CalibrationError(f"calibration {calibration.id} times devices the machine does not have: {missing}")
    devices = [
        d.model_copy(update={
            "attach_latency_ns": dev_timing[d.name].attach_latency_ns,
            "attach_bandwidth_gb_s": dev_timing[d.name].attach_bandwidth_gb_s,
        }) if d.name in dev_timing else d
        for d in machine.devices
    ]
    ways = {c.name: c.associativity for c in machine.caches}
    caches = [
        CacheLevel(
            name=c.name, size_bytes=c.size_bytes, latency_ns=c.latency_ns, scope=c.scope, line_bytes=c.line_bytes,
            complexes_per_die=c.complexes_per_die, **({"associativity": ways[c.name]} if c.name in ways else {}),
        )
        for c in calibration.caches
    ]
    dies = list(calibration.core_dies)
    if dies or any(c.scope is CacheScope.CCX for c in caches):
        # Checked as the machine checks its own: every die on one node, no cpu on two dies, a core-complex cache
        # over dies that split into its complexes.
        try:
            Machine.model_validate({**machine.model_dump(), "core_dies": [d.model_dump() for d in dies],
                                    "caches": [c.model_dump() for c in caches]})
        except ValidationError as exc:
            raise CalibrationError(f"calibration {calibration.id} does not fit {machine.name}: "
                                   f"{exc.errors()[0]['msg']}") from None
    return machine.model_copy(update={
        "nodes": nodes, "links": links, "devices": devices, "caches": caches, "calibration": calibration.id,
        "core_dies": dies,
    })


def save_calibration(calibration: Calibration, path: str | Path) -> None:
    """Write JSON atomically (temporary file, then rename), so a failed run leaves no half-written file."""
    atomic_write_text(path, calibration.model_dump_json(indent=2) + "\n")


def load_calibration(path: str | Path) -> Calibration:
    p = Path(path)
    try:
        cal = Calibration.model_validate_json(p.read_text(encoding="utf-8"))
    except ValidationError as exc:
        from numasim.topology.io.toml_format import format_validation_error

        raise CalibrationError(format_validation_error(exc, str(p))) from None
    if cal.id != cal.content_id():
        raise CalibrationError(f"{p}: id {cal.id!r} does not match its parameters (edited by hand?)")
    return cal
