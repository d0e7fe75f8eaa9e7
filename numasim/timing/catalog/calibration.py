"""A calibration made of platform-catalog priors only: timing a machine nothing was measured on.

:func:`catalog_calibration` turns a machine's structure plus its processor's catalog entry into a complete
:class:`~numasim.timing.model.Calibration` with ``provenance.method = "catalog"``. Every parameter it sets is
listed in ``provenance.priors`` with its value, unit, source and ``why="catalog prior: no measurement"``; a
number the catalog has no public figure for is taken from the next source in a fixed order (another platform's
measurement, the catalog-wide median, the machine file's nominal value, numasim's default) and its prior says
which. Such a calibration is a starting point and a what-if, never evidence: the fit is what checks it.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from numasim.errors import CalibrationError
from numasim.timing.catalog.cxl_timing import CxlNodeTiming, cxl_node_timings
from numasim.timing.catalog.loader import load_catalog
from numasim.timing.catalog.match import CatalogMatch, match_cpu, model_key
from numasim.timing.catalog.model import LatencyPrior, Platform, Sku
from numasim.timing.model import (
    CacheTiming,
    Calibration,
    CoherenceTiming,
    ControllerTiming,
    CoreTiming,
    LinkTiming,
    PriorParameter,
    Provenance,
    default_curve,
    machine_devices_and_relays,
)
from numasim.topology.model import CacheScope, CoreDie, LinkKind, Machine, MemoryKind, Vertex, core_complexes
from numasim.units import KiB, MiB

__all__ = [
    "catalog_calibration", "CatalogFigures", "catalog_figures", "coherence_remote_delta", "latency_donors",
    "machine_threads_per_core", "remote_from_coherence", "running_clock", "sibling_route",
]

WHY = "catalog prior: no measurement"
BYTES_PER_TRANSFER = 8
"""A DDR channel is 64 bits wide: 8 bytes per transfer, so peak GB/s = MT/s x 8 / 1000."""
_FALLBACK_LOCAL_LINK_NS = 1.0
"""Floor for a socket link whose share of (remote - local) the intra-socket hops already use up."""


@dataclass(frozen=True)
class CatalogFigures:
    """The figures of one platform/SKU the derivation uses, each with where it came from."""

    platform: Platform
    sku: Sku
    channels_per_socket: int
    mt_s: int
    read_factor: float
    read_factor_source: str
    write_factor: float | None
    write_factor_source: str
    links_to_sockets: int
    link_bandwidth_gb_s: float
    link_read_efficiency: float
    link_read_efficiency_source: str
    local_ns: float
    local_source: str
    remote_minus_local_ns: float
    remote_source: str
    local_measured_per_socket: int | None = None
    """Nodes per socket of the mode ``local_ns`` was measured in, when that is not the machine's mode and the
    source has no figure for the machine's (None otherwise): :func:`catalog_calibration` then converts it."""
    sibling_route_ns: float | None = None
    """What reaching a sibling cluster's memory adds to the local latency, on average over a socket's clusters,
    where the latency source measured the socket both ways (:func:`sibling_route`); None: no such figure."""
    sibling_route_source: str = ""

    @property
    def socket_peak_gb_s(self) -> float:
        return self.channels_per_socket * self.mt_s * BYTES_PER_TRANSFER / 1000.0


def _nearest(platform: Platform, candidates: list[Platform]) -> Platform | None:
    # Never the platform itself: a platform copied without its measurement borrows someone else's (the
    # leave-one-out check in tests/timing relies on this).
    candidates = [p for p in candidates if p.name != platform.name]
    same = [p for p in candidates if p.vendor == platform.vendor] or candidates
    # a desktop die's latencies are not a server die's (nor the other way), where the catalog has the other kind
    same = [p for p in same if p.client_die == platform.client_die] or same
    if not same:
        return None
    # DRAM latency follows how the DIMMs are attached (an EX platform's memory buffers add some 40-70 ns: Westmere-EX
    # 135 ns local against Westmere-EP's direct DIMMs' ~65) and then the DRAM generation more than the calendar: a
    # DDR4 platform borrows from a DDR4 one
    return min(same, key=lambda p: (p.memory.buffered != platform.memory.buffered, p.memory.ddr != platform.memory.ddr,
                                    abs(p.years[0] - platform.years[0]), p.years[0], p.name))


def _link_read_efficiency(platform: Platform, catalog: tuple[Platform, ...]) -> tuple[float, str]:
    """Line-read bandwidth over a socket link's data rate: the platform's measured factor, else that of the measured
    platform with the same link kind and the nearest transfer rate (said so), else the packet format's share."""
    ic = platform.interconnect
    if ic is None:
        return 1.0, f"{platform.name} is a single-socket platform: no socket links"
    if ic.read_efficiency is not None:
        eff = ic.read_efficiency
        return eff.read_factor, f"{platform.name} link read efficiency: {eff.derivation} [{platform.cite(eff.sources)}]"
    measured = [p for p in catalog if p.name != platform.name and p.interconnect is not None
                and p.interconnect.kind == ic.kind and p.interconnect.read_efficiency is not None]  # fmt: skip
    if measured:
        donor = min(measured, key=lambda p: (abs(math.log(p.interconnect.gt_s / ic.gt_s)), p.name))  # type: ignore[union-attr]
        assert donor.interconnect is not None
        got = donor.interconnect.read_efficiency
        assert got is not None
        return got.read_factor, (
            f"borrowed from {donor.name} ({donor.interconnect.kind} at {donor.interconnect.gt_s:g} GT/s, the measured "
            f"link of this kind nearest to {ic.gt_s:g} GT/s: {got.derivation} [{donor.cite(got.sources)}]); "
            f"{platform.name} has no measured link efficiency"
        )
    share, why = LINE_PACKET_EFFICIENCY.get(ic.kind, (1.0, "the link's data rate, whole (no packet format known)"))
    return share, f"{why} (no measured {ic.kind} link in the catalog)"


def _mode_label(platform: Platform, nodes_per_socket: int | None) -> str | None:
    if nodes_per_socket is None:
        return None
    from numasim.timing.catalog.modes import mode_offer
    from numasim.topology.cluster_mode import ClusterMode

    offer = mode_offer(platform)
    if offer.fixed:
        return "none" if nodes_per_socket == 1 else "die"
    return ClusterMode(offer.family, nodes_per_socket).label


def _mode_nodes_per_socket(label: str) -> int | None:
    """Nodes per socket of a clustering mode's label (:attr:`ClusterMode.label`; ``none``: a platform without
    the setting, one node a socket)."""
    from numasim.topology.cluster_mode import ClusterMode

    if label.lower() == "none":
        return 1
    for family in ("snc", "nps", "cod"):
        for k in (1, 2, 3, 4, 6, 8):
            if ClusterMode(family, k).label.lower() == label.lower():  # type: ignore[arg-type]
                return k
    return None


def _local_for_mode(latency: LatencyPrior, mode: str | None) -> tuple[float, str, int | None]:
    """The local latency measured in ``mode`` when the source has it, what to say about the mode, and the nodes
    per socket of the mode it was measured in when that is another mode with no figure for this one."""
    if latency.mode is None or mode is None:
        return latency.local_ns, "", None
    if latency.mode.lower() == mode.lower():
        return latency.local_ns, f" (measured in {latency.mode}, this machine's mode)", None
    by_mode = {k.lower(): v for k, v in latency.local_ns_by_mode.items()}
    if mode.lower() in by_mode:
        return by_mode[mode.lower()], f" ({mode} figure, this machine's mode)", None
    return latency.local_ns, f" (measured in {latency.mode}; this machine is in {mode})", _mode_nodes_per_socket(
        latency.mode
    )


def _local_for_sockets(latency: LatencyPrior, sockets: int | None) -> tuple[float, str] | None:
    """The local latency for a machine of ``sockets`` sockets, and what to say about it, where the source's
    figures depend on the socket count (None: they do not, or the machine's count is unknown, or it is the
    measured one)."""
    if latency.sockets is None or sockets is None or sockets == latency.sockets:
        return None
    if sockets in latency.local_ns_by_sockets:
        return latency.local_ns_by_sockets[sockets], f" ({sockets}-socket figure, this machine's socket count)"
    return latency.local_ns, (
        f" (measured on {latency.sockets} sockets; this machine has {sockets}, for which the source has no figure)"
    )


def _carries(latency: LatencyPrior, sockets: int | None) -> bool:
    """Whether a platform's own remote - local difference holds on a machine of ``sockets`` sockets (None:
    unknown, taken as the measured count)."""
    return latency.sockets is None or sockets is None or latency.sockets == sockets


def _lends(lender: Platform, borrower: Platform, sockets: int | None) -> bool:
    """Whether ``borrower`` may take ``lender``'s remote - local difference for a machine of ``sockets`` sockets:
    a figure bound to a socket count (broadcast snoops) lends only to a machine known to have that many sockets
    and joined by the same kind of link (the same coherence protocol)."""
    lat = lender.latency
    assert lat is not None
    return lat.sockets is None or (
        lat.sockets == sockets and lender.interconnect is not None and borrower.interconnect is not None
        and lender.interconnect.kind == borrower.interconnect.kind
    )


def remote_donor(platform: Platform, sockets: int | None) -> Platform | None:
    """The platform whose remote - local difference a catalog calibration of a ``sockets``-socket machine of
    ``platform`` borrows (None: socket count unknown): the nearest measured one whose figure holds on that many
    sockets."""
    candidates = [p for p in load_catalog() if p.latency is not None and p.latency.remote_ns is not None
                  and _lends(p, platform, sockets)]  # fmt: skip
    return _nearest(platform, candidates)


def coherence_remote_delta(platform: Platform) -> tuple[float, str] | None:
    """(remote - local) of ``platform``'s memory taken from its own cache-to-cache tiers, and what to say about it:
    what a transfer from another socket adds over one from another last-level cache of the same socket (the
    writer's own cache where the socket has one). None where the entry lacks those tiers.

    A remote memory read and a cross-socket line transfer make the same round trip over the socket link. Where the
    catalog has both figures they agree within about a fifth: Ivy Bridge EP 41.8 against 53.4 ns, Skylake-SP 60.2
    against 49.7, Ice Lake-SP 56.5 against 58.5. Public mlc runs say the same: 2x E5-2682 v4 62.4 against 52.2,
    2x Platinum 8269CY 59.5 against 65.7, 2x Silver 4114 66.5 against 53.6. On Genoa the tiers give 94.2 ns, and
    the 2x EPYC 9224 of cxl-2s-genoa-epyc9224-nps2.md measured 93. That run showed this rule was needed (Sapphire
    Rapids' 54.9 ns, borrowed before, made its remote cells 16 % low), so its latency rows are marked circular."""
    coh = platform.coherence
    if coh is None or coh.remote_hitm_ns is None:
        return None
    near = coh.socket_hitm_ns if coh.socket_hitm_ns is not None else coh.local_hitm_ns
    if coh.remote_hitm_ns <= near:
        return None
    tier = "another core complex of the socket" if coh.socket_hitm_ns is not None else "the same socket"
    return coh.remote_hitm_ns - near, (
        f"remote - local from {platform.name}'s cache-to-cache tiers: a line from another socket {coh.remote_hitm_ns:g} "
        f"ns less one from {tier} {near:g} ns ({coh.measured_on}) [{platform.cite(coh.sources)}]: a remote read makes "
        "the same round trip over the socket link, and the two agree within about a fifth where both were measured "
        "(Genoa: 94.2 against 93 ns on cxl-2s-genoa-epyc9224-nps2.md; Intel from Ivy Bridge to Ice Lake)"
    )


def remote_from_coherence(platform: Platform, sockets: int | None) -> tuple[float, str, Platform] | None:
    """:func:`coherence_remote_delta` where a catalog calibration of a ``sockets``-socket machine of ``platform``
    takes it: the platform has no remote latency of its own for that many sockets, and no platform of its vendor
    lends one (a figure of another vendor's interconnect says little: Genoa would borrow Sapphire Rapids' 54.9 ns
    where its own tiers give 94.2). Its own tiers where it has them, else those of the platform its cache-to-cache
    latencies are borrowed from (:func:`coherence_donor`: Turin takes Genoa's), said so. Returns the difference,
    its source text and the platform whose tiers gave it."""
    own = platform.latency
    if platform.single_socket or (own is not None and own.remote_ns is not None and _carries(own, sockets)):
        return None
    donor = remote_donor(platform, sockets)
    if donor is not None and donor.vendor == platform.vendor:
        return None
    mine = coherence_remote_delta(platform)
    if mine is not None:
        return mine[0], mine[1], platform
    lender = coherence_donor(platform)  # (the same platform its cache-to-cache latencies come from)
    lent = None if lender is None else coherence_remote_delta(lender)
    if lender is None or lent is None:
        return None
    why = f"borrowed from {lender.name} ({lent[1]}): {platform.name} has no cache-to-cache tiers of its own"
    return lent[0], why, lender


def latency_donors(platform: Platform) -> tuple[Platform | None, Platform | None]:
    """The platforms whose measured local latency and (remote - local) a catalog calibration of ``platform``
    borrows (None where it has its own): the nearest measured platform, same vendor and DRAM generation first."""
    catalog = load_catalog()
    local = None if platform.latency is not None else _nearest(platform, [p for p in catalog if p.latency is not None])
    remote = None
    if not platform.single_socket and (platform.latency is None or platform.latency.remote_ns is None):
        remote = None if remote_from_coherence(platform, None) is not None else remote_donor(platform, None)
    return local, remote


def _mode_family(label: str) -> str:
    """A clustering mode's family, e.g. ``"nps"`` of ``"NPS4"`` (``"snc"`` of ``"SNC off"``)."""
    return label.lower().split()[0].rstrip("0123456789")


def sibling_route(latency: LatencyPrior, mode: str | None) -> tuple[float, str] | None:
    """The mean latency a sibling cluster's memory adds, from a source that measured local latency with one
    node a socket (``L1``) and with ``k`` (``Lk``, the finest it has), for a machine in ``mode`` of the same family.

    With one node a socket a core's addresses interleave over every cluster's channels: ``L1`` is the mean of
    its own cluster's ``Lk`` and the ``k - 1`` others, each ``d`` further, so ``d = (L1 - Lk) k / (k - 1)``
    (the rule :func:`_cluster_local_latency` applies the other way round; it held within 0.3 ns on the 8269CY's
    SNC2 and SNC-off runs). Rome's 122 ns in NPS1 and 113 ns in NPS4 give 12 ns. None without both figures, for
    a mode of another family (Naples' dies borrowing Rome's quadrants) or where ``L1 <= Lk``."""
    if mode is None or latency.mode is None:
        return None
    figures = {latency.mode: latency.local_ns, **latency.local_ns_by_mode}
    if any(_mode_family(m) not in (_mode_family(mode), "none") for m in figures):
        return None
    by_k = {k: (m, ns) for m, ns in figures.items() if (k := _mode_nodes_per_socket(m)) is not None}
    finest = max(by_k, default=1)
    if 1 not in by_k or finest < 2:
        return None
    (m1, l1), (mk, lk) = by_k[1], by_k[finest]
    if l1 <= lk:
        return None
    d = (l1 - lk) * finest / (finest - 1)
    return d, f"({m1} {l1:g} - {mk} {lk:g} ns) x {finest}/{finest - 1}: {latency.measured_on}"


def catalog_figures(
    platform: Platform, sku: Sku, nodes_per_socket: int | None = None, sockets: int | None = None
) -> CatalogFigures:
    """Resolve the SKU's figures, falling back (and saying so) where the platform has no public figure.

    ``nodes_per_socket`` (the machine's clustering mode) picks the local latency measured in that mode when
    the platform's source has one: Rome's 113 ns was measured in NPS4, its NPS1 figure is 122 ns. ``sockets``
    (the machine's socket count) does the same where the figures depend on it: a 4-socket K8 Opteron's local
    reads wait for three snoop answers (95 ns), a 2-socket one's for one (60 ns); a remote - local difference
    measured on another socket count is then borrowed from a platform whose figure holds, and said so.
    """
    catalog = load_catalog()
    mode = _mode_label(platform, nodes_per_socket)
    cite = platform.cite
    if platform.efficiency is not None:
        factor = platform.efficiency.read_factor
        factor_src = f"{platform.name} efficiency: {platform.efficiency.derivation} [{cite(platform.efficiency.sources)}]"
        write_factor = platform.efficiency.write_factor
    else:
        measured = [p.efficiency.read_factor for p in catalog if p.efficiency is not None]
        factor = statistics.median(measured)
        factor_src = (
            f"median of the catalog's {len(measured)} measured read efficiencies ({platform.name} has none)"
        )
        write_factor = None
    write_source = f"{platform.name} efficiency: measured write factor"
    if write_factor is None:
        write_factor = factor * WRITE_TO_READ_EFFICIENCY
        write_source = WRITE_TO_READ_SOURCE
    if platform.latency is not None:
        local, mode_note, measured_per_socket = _local_for_mode(platform.latency, mode)
        by_sockets = _local_for_sockets(platform.latency, sockets)
        if by_sockets is not None:
            local, mode_note = by_sockets[0], mode_note + by_sockets[1]
        local_src = f"{platform.name}: {platform.latency.measured_on} [{cite(platform.latency.sources)}]{mode_note}"
        sibling = sibling_route(platform.latency, mode)
        sibling_src = "" if sibling is None else f"{platform.name}: {sibling[1]} [{cite(platform.latency.sources)}]"
    else:
        donor = latency_donors(platform)[0]
        if donor is None or donor.latency is None:  # pragma: no cover - the shipped catalog has some
            raise CalibrationError(f"no platform in the catalog has an idle-latency measurement to borrow for {platform.name}")
        # the donor's figure for this machine's mode where it has one (Rome: NPS4 113 ns, NPS1 122 ns)
        local, mode_note, measured_per_socket = _local_for_mode(donor.latency, mode)
        by_sockets = _local_for_sockets(donor.latency, sockets)
        if by_sockets is not None:
            local, mode_note = by_sockets[0], mode_note + by_sockets[1]
        local_src = (
            f"borrowed from {donor.name} ({donor.latency.measured_on}){mode_note}: {platform.name} has no public "
            "idle-latency measurement"
        )
        sibling = sibling_route(donor.latency, mode)
        sibling_src = "" if sibling is None else f"borrowed from {donor.name}: {sibling[1]}"
    own = platform.latency
    if platform.single_socket and sockets is not None and sockets > 1:
        raise CalibrationError(
            f"{platform.name} / {sku.model} is a single-socket part, but the machine has {sockets} sockets: check the "
            "cpu model, or the machine's sockets"
        )
    if platform.single_socket:
        delta, remote_src = 0.0, f"{platform.name} is a single-socket platform: no remote socket"
    elif own is not None and own.remote_ns is not None and _carries(own, sockets):
        delta = own.remote_ns - own.local_ns
        remote_src = f"{platform.name}: {own.measured_on} [{cite(own.sources)}]"
    elif (from_tiers := remote_from_coherence(platform, sockets)) is not None:
        delta, remote_src, _ = from_tiers
    else:
        donor = remote_donor(platform, sockets)
        if donor is None or donor.latency is None or donor.latency.remote_ns is None:  # pragma: no cover
            raise CalibrationError(f"no platform in the catalog has a remote-latency measurement to borrow for {platform.name}")
        delta = donor.latency.remote_ns - donor.latency.local_ns
        why = (
            f"{platform.name}'s was measured on {own.sockets} sockets and this machine has {sockets}"
            if own is not None and own.remote_ns is not None
            else f"{platform.name} has no public remote-latency measurement"
        )
        remote_src = f"remote - local borrowed from {donor.name} ({donor.latency.measured_on}): {why}"
    ic = platform.interconnect
    link_eff, link_eff_src = _link_read_efficiency(platform, catalog)
    if ic is None:
        to_sockets, link_gb_s = 0, 0.0
    else:
        links = sku.links or ic.links_per_socket
        to_sockets = min(links, ic.links_to_sockets) if ic.links_to_sockets is not None else links
        link_gb_s = ic.bandwidth_gb_s * (sku.link_gt_s or ic.gt_s) / ic.gt_s
    return CatalogFigures(
        platform=platform,
        sku=sku,
        channels_per_socket=sku.channels or platform.memory.channels_per_socket,
        mt_s=sku.max_mt_s or platform.memory.max_mt_s,
        read_factor=factor,
        read_factor_source=factor_src,
        write_factor=write_factor,
        write_factor_source=write_source,
        links_to_sockets=to_sockets,
        link_bandwidth_gb_s=link_gb_s,
        link_read_efficiency=link_eff,
        link_read_efficiency_source=link_eff_src,
        local_ns=local,
        local_source=local_src,
        remote_minus_local_ns=delta,
        remote_source=remote_src,
        local_measured_per_socket=measured_per_socket,
        sibling_route_ns=None if sibling is None else sibling[0],
        sibling_route_source=sibling_src,
    )


def _hbm_node_timings(
    machine: Machine, fig: CatalogFigures, socket_of: Mapping[int, int], local_of: Mapping[int, float], here: str
) -> CxlNodeTiming:
    """Catalog priors for the package's HBM nodes (``memory_kind = "hbm"``) on a platform with an ``[hbm]`` entry.

    Each node's cpus are those it holds (HBM-only mode) or, for a cpu-less node (flat mode), those of the one node
    it is linked to (:func:`~numasim.timing.catalog.machine.catalog_machine` joins it to the nearest cluster by
    the firmware's distances). Read bandwidth: the socket's measured HBM read bandwidth (else its stacks' peak x the
    platform's DDR read efficiency, said) split evenly among the socket's HBM nodes; write bandwidth the same (no
    public HBM write figure: the measured 1:1 mix moved more than reads alone). Idle latency: the node's cluster's
    DDR local latency + the measured HBM - DDR difference. The link to its cluster adds nothing over that: the
    difference was measured end to end."""
    out = CxlNodeTiming()
    spec = fig.platform.hbm
    hbm_nodes = [n for n in machine.nodes if n.has_memory and n.memory_kind is MemoryKind.HBM]
    if spec is None or not hbm_nodes:
        return out
    platform = fig.platform
    cite = platform.cite(spec.sources)
    attach: dict[int, int] = {}
    link_of: dict[int, int] = {}
    for n in hbm_nodes:
        if n.has_cpus:
            attach[n.id] = n.id
            continue
        joined = [(i, lk) for i, lk in enumerate(machine.links) if n.id in (lk.a, lk.b)]
        ends = [lk.b if lk.a == n.id else lk.a for _, lk in joined]
        if len(joined) != 1 or not isinstance(ends[0], int) or ends[0] not in socket_of:
            raise CalibrationError(
                f"node {n.id} of {machine.name} is HBM without cpus, joined to {ends or 'nothing'}: the catalog times "
                "a package's HBM node beside the one cpu node whose tile holds it (one link to that node)"
            )
        attach[n.id], link_of[n.id] = ends[0], joined[0][0]
    per_socket = Counter(socket_of[a] for a in attach.values())
    if spec.read_gb_s_per_socket is not None:
        socket_read = spec.read_gb_s_per_socket
        read_src = f"measured {spec.read_gb_s_per_socket:g} GB/s a socket ({spec.read_measured_on}) [{cite}]"
    else:
        socket_read = spec.peak_gb_s_per_socket * fig.read_factor
        read_src = (f"{spec.stacks_per_socket} stacks' peak {spec.peak_gb_s_per_socket:g} GB/s ({spec.derivation}) x the "
                    f"DDR read efficiency {fig.read_factor:.3f} ({fig.read_factor_source}): no measured HBM read [{cite}]")
    why = "catalog prior: no measurement"
    for n in hbm_nodes:
        a = attach[n.id]
        share = per_socket[socket_of[a]]
        read = socket_read / share
        local = local_of.get(a, fig.local_ns)
        latency = local + spec.added_latency_ns
        out.controllers[n.id] = ControllerTiming(node=n.id, latency_ns=latency, read_bandwidth_gb_s=read,
                                                 write_bandwidth_gb_s=read, curve=default_curve(latency))
        key = f"controllers[{n.id}]"
        split = f" / {share} HBM nodes of socket {socket_of[a]}" if share > 1 else ""
        out.priors += [
            PriorParameter(parameter=f"{key}.read_bandwidth_gb_s", value=read, unit="GB/s", why=why,
                           source=f"{here}: HBM, {read_src}{split}"),
            PriorParameter(parameter=f"{key}.write_bandwidth_gb_s", value=read, unit="GB/s", why=why,
                           source="equal to read bandwidth: no public HBM write figure"),
            PriorParameter(parameter=f"{key}.latency_ns", value=latency, unit="ns", why=why,
                           source=f"node {a}'s local DDR {local:g} ns + HBM's {spec.added_latency_ns:g} ns more "
                                  f"({spec.latency_measured_on}) [{cite}]"),
        ]
        if n.id in link_of:
            # the link only places the node: its latency is in the controller's, its bandwidth no limit below it
            out.links[link_of[n.id]] = (
                HBM_LINK_LATENCY_NS, spec.peak_gb_s_per_socket,
                "none of its own: the HBM - DDR difference was measured end to end (in the controller's latency)",
                f"the socket's HBM peak ({spec.derivation}): no limit below the node's controller", why,
            )
    out.notes.append(f"HBM nodes {sorted(attach)}: timed from {platform.name}'s [hbm] (cache mode, HBM as a "
                     "memory-side cache, is not modelled)")
    return out


HBM_LINK_LATENCY_NS = 1e-3
"""The link joining a flat-mode HBM node to its cluster: a placeholder (latencies must be positive); the HBM's
measured extra latency is its controller's."""


def _cluster_local_latency(
    machine: Machine, fig: CatalogFigures, dram_of_socket: Mapping[int, list[int]]
) -> tuple[dict[int, float], dict[int, str]]:
    """Each DRAM node's local latency when the catalog's figure was measured with one node per socket and this
    machine splits its sockets into clusters (SNC, NPS), and what to say of it.

    With one node per socket a core's addresses interleave over every cluster's channels, so the figure is the
    mean over the socket's clusters of reaching each: its own at the cluster's local latency, each of the
    ``k - 1`` others a hop ``d`` further (this machine's own route between the clusters). A cluster's local
    latency is then the figure less ``(k - 1) / k x d``; the remote figure stays what it is (a mean over the
    remote socket's clusters too), so the socket links carry what the clusters' local latency lost. On the 8269CY
    the SNC-off local latency (77.9-78.4 ns) is the mean of its SNC2 run's own-cluster (73.5-78.5) and
    sibling-cluster (81.6-82.1) latencies within 0.3 ns. Any other pair of modes is used as is, and said so.
    """
    from numasim.topology.routing import routing

    out: dict[int, float] = {}
    notes: dict[int, str] = {}
    measured = fig.local_measured_per_socket
    if measured is None:
        return out, notes
    r = routing(machine)
    for nodes in dram_of_socket.values():
        k = len(nodes)
        if k == measured:
            continue
        if measured != 1 or k < 2:
            for n in nodes:
                notes[n] = f"; measured with {measured} node(s) a socket, used as is for {k} here"
            continue
        for n in nodes:
            hop = statistics.fmean(r.path_latency_ns(n, m) for m in nodes if m != n)
            if hop >= fig.local_ns:
                raise CalibrationError(
                    f"node {n} of {machine.name}: its route to its sibling clusters ({hop:.1f} ns, the machine "
                    f"file's) is no less than the catalog's whole-socket local latency ({fig.local_ns:.1f} ns) it "
                    "is a share of: lower the on-die links' latency_ns"
                )
            out[n] = fig.local_ns - (k - 1) / k * hop
            notes[n] = (
                f"; measured with one node a socket (the mean over its {k} clusters here): this cluster's own is "
                f"{fig.local_ns:.1f} - {k - 1}/{k} x {hop:.1f} ns (the machine file's route to its sibling clusters)"
            )
    return out, notes


def _resolve(machine: Machine, sku: str | None) -> CatalogMatch:
    spec = sku if sku is not None else machine.cpu_model
    if not spec:
        raise CalibrationError(
            f"machine {machine.name} names no cpu_model; pass the processor (sku=..., --sku) to time it from "
            "the platform catalog (`numasim catalog list`)"
        )
    found = match_cpu(spec)
    if found.sku is None and found.how == "pattern":
        found = stand_in_sku(found, machine)
    if found.sku is None:
        models = ", ".join(s.model for s in found.platform.skus)
        raise CalibrationError(
            f"{spec!r} names platform {found.platform.name} but no SKU of it; the catalog needs the SKU for its "
            f"clock and L3 (listed: {models})"
        )
    return found


_CLOCK = re.compile(r"@\s*([\d.]+)\s*GHZ", re.IGNORECASE)


def _cpus_per_socket(machine: Machine) -> int | None:
    """The cpus a socket of ``machine`` holds, where that does not take a SKU to tell: its nodes' sockets, else
    the firmware's distances (nodes closer than :data:`REMOTE_DISTANCE` are one socket), else a node a socket;
    None where sockets come out of unequal sizes."""
    cpu_nodes = [n for n in machine.nodes if n.has_cpus]
    if not cpu_nodes:
        return None
    group: Mapping[int, object]
    if any(n.socket is not None for n in cpu_nodes):
        group = {n.id: n.socket for n in cpu_nodes}
    elif machine.firmware_slit is not None:
        group = slit_groups(machine, REMOTE_DISTANCE)
    else:
        group = {n.id: n.id for n in cpu_nodes}
    sizes: Counter[object] = Counter()
    for n in cpu_nodes:
        sizes[group[n.id]] += len(n.cpus)
    return next(iter(sizes.values())) if len(set(sizes.values())) == 1 else None


def stand_in_sku(found: CatalogMatch, machine: Machine | None = None) -> CatalogMatch:
    """``found`` (a part its platform's pattern recognised but the catalog does not list: a cloud provider's own
    Platinum 8488C or EPYC 9R14, a custom SKU) with a stand-in SKU: the listed SKU of the platform nearest in
    cores a socket (the machine's cpus a socket over the platform's threads a core; fewer cpus than that makes
    hyper-threading off), renamed, with the machine's cores and threads, the CPU string's clock where it has one
    (``@ 2.90GHz``; then no all-core turbo is known), and its L3 scaled to the cores on a socket-wide L3 (Intel's
    slice a core). What was taken from where is in ``stand_in``, which catalog calibrations list in their notes
    and every prior's source names (the SKU's model says "unlisted")."""
    platform = found.platform
    if not platform.skus:  # pragma: no cover - every platform lists some
        return found
    per_socket = _cpus_per_socket(machine) if machine is not None else None
    tpc = platform.threads_per_core
    cores: int | None = None
    if per_socket is not None:
        cores = per_socket // tpc if per_socket % tpc == 0 else per_socket
        if cores > platform.max_cores_per_socket:
            cores = None  # (not one socket of this platform: leave the layout to the listed SKU)
    clock_m = _CLOCK.search(found.query)
    clock = float(clock_m.group(1)) if clock_m else None
    pick = min(platform.skus, key=lambda s: (abs(s.cores - cores) if cores is not None else 0,
                                             abs(s.base_ghz - clock) if clock is not None else 0, s.model))
    use_cores = cores if cores is not None else pick.cores
    threads = pick.threads if cores is None else use_cores * (tpc if per_socket == use_cores * tpc else 1)
    l3 = pick.l3_mib
    l3_scope = platform.cache("L3")
    if l3 is not None and use_cores != pick.cores and l3_scope is not None and l3_scope.scope == "socket":
        l3 = l3 * use_cores / pick.cores
    name = model_key(found.query) or found.query.strip()
    sku = pick.model_copy(update={
        "model": f"{name} (unlisted; as {pick.model})", "cores": use_cores, "threads": threads,
        "base_ghz": clock if clock is not None else pick.base_ghz,
        "all_core_turbo_ghz": pick.all_core_turbo_ghz if clock is None and use_cores == pick.cores else None,
        "l3_mib": l3,
    })
    said = [f"{found.query.strip()!r} is not listed in the catalog's {platform.name}: timed as its nearest listed SKU, "
            f"{pick.model} ({pick.cores} cores, {pick.base_ghz:g} GHz)"]
    if cores is not None:
        said.append(f"with the machine's {use_cores} cores ({threads} threads) a socket")
    else:
        said.append("with that SKU's cores (the machine's sockets could not be told without one)")
    said.append(f"at the CPU string's {clock:g} GHz" if clock is not None else "at that SKU's clock (the CPU string gives none)")
    if l3 != pick.l3_mib and l3 is not None:
        said.append(f"its L3 scaled to the cores: {l3:g} MiB")
    return replace(found, sku=sku, stand_in=", ".join(said))


def _smt_off(machine: Machine, sku: Sku, socket_of: dict[int, int]) -> bool:
    """Whether the machine shows one cpu a core of an SMT part (hyper-threading off in the firmware): its cpus
    number the SKU's cores times its sockets."""
    sockets_seen = {socket_of[n.id] for n in machine.nodes if n.cpus and n.id in socket_of}
    return (sku.threads > sku.cores and len(sockets_seen) > 0
            and sum(len(n.cpus) for n in machine.nodes) == len(sockets_seen) * sku.cores)


def machine_threads_per_core(machine: Machine) -> tuple[int, str] | None:
    """Hardware threads a core runs on ``machine``, and why: from the SKU its ``cpu_model`` names in the catalog
    (its threads / cores, or 1 where the machine shows one cpu a core: SMT off); ``None`` when the machine names
    no cpu the catalog knows the SKU of.

    What counts threads a core where the calibration does not say (``CoreTiming.threads_per_core``): the virtual
    mlc's load threads, whose delay loop shares its core's pipeline, and the core clock fitted to their pace.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = glueless(2, cpus_per_node=28).model_copy(update={"cpu_model": "Intel(R) Xeon(R) Platinum 8180 CPU"})
    >>> machine_threads_per_core(m)[0]  # 28 cpus a socket of a 28-core, 56-thread SKU: hyper-threading off
    1
    """
    try:
        found = _resolve(machine, None)
    except CalibrationError:
        return None
    assert found.sku is not None
    sku = found.sku
    socket_of, _ = socket_layout(machine, sku)
    if _smt_off(machine, sku, socket_of):
        return 1, (f"the machine shows {sku.cores} cpus a socket of {sku.model}, one a core: hyper-threading off "
                   f"({sku.threads} threads / {sku.cores} cores with it on)")
    tpc = sku.threads // sku.cores
    return tpc, f"{sku.model}: {sku.threads} threads / {sku.cores} cores (platform catalog)"


def socket_layout(machine: Machine, sku: Sku) -> tuple[dict[int, int], str]:
    """Socket of every node, and how it was found.

    Machines imported from ``numactl --hardware`` name no sockets. Then the SKU says how many cpus a socket has
    (its threads, or its cores with SMT off), and the cpu nodes, in id order, are packed into sockets of that
    many cpus (Linux numbers a socket's nodes consecutively). Only when the cpus do not pack that way is each cpu
    node taken as a socket of its own, and said so (otherwise an SNC or NPS node would get a whole socket's
    channels: more bandwidth than the socket has).
    """
    if any(n.socket is not None for n in machine.nodes):
        return {n.id: n.socket for n in machine.nodes if n.socket is not None}, ""
    cpu_nodes = [n for n in machine.nodes if n.has_cpus]
    total = sum(len(n.cpus) for n in cpu_nodes)
    by_slit = _sockets_from_slit(machine, sku)
    if by_slit is not None:
        return by_slit
    for per_socket in (sku.threads, sku.cores):
        if total % per_socket:
            continue
        out: dict[int, int] = {}
        filled, socket = 0, 0
        for n in cpu_nodes:
            out[n.id] = socket
            filled += len(n.cpus)
            if filled > per_socket:
                break
            if filled == per_socket:
                filled, socket = 0, socket + 1
        else:
            if filled == 0:
                return out, (
                    f"the machine names no sockets: its {total} cpus packed into {total // per_socket} socket(s) of "
                    f"{per_socket} cpus (the SKU's {'threads' if per_socket == sku.threads else 'cores'})"
                )
    return {n.id: n.id for n in cpu_nodes}, (
        "the machine names no sockets and its cpus do not pack into sockets of the SKU's size: each node with "
        "cpus is taken as one socket (assumption)"
    )


REMOTE_DISTANCE = 20
"""ACPI SLIT convention Linux follows (``include/linux/topology.h``): nodes of one package (SNC, NPS, CoD
clusters, sibling dies) are closer than 20, nodes on other sockets at 20 or more."""


def slit_groups(machine: Machine, below: int) -> dict[int, int]:
    """The cpu nodes of ``machine`` grouped by its firmware's distances: nodes closer than ``below``, directly or
    through each other, share a group (numbered 0, 1, ... in node order)."""
    import networkx as nx

    assert machine.firmware_slit is not None
    ids, slit = machine.node_ids, machine.firmware_slit
    cpu = [n.id for n in machine.nodes if n.has_cpus]
    g = nx.Graph()
    g.add_nodes_from(cpu)
    g.add_edges_from((a, b) for a in cpu for b in cpu if a < b and slit[ids.index(a)][ids.index(b)] < below)
    parts = sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: c[0])
    return {nid: k for k, part in enumerate(parts) for nid in part}


def _sockets_from_slit(machine: Machine, sku: Sku) -> tuple[dict[int, int], str] | None:
    """Sockets as the firmware's distances group the cpu nodes, when every group holds exactly one socket of the
    SKU (its threads, or its cores with SMT off); else None.

    Nodes closer than :data:`REMOTE_DISTANCE` are one socket by ACPI's convention, but Intel's Cluster-on-Die
    firmware gives a socket's two clusters 21 and the other socket's 31 (E5-2600 v3/v4). So the groups are tried
    at each distance the table holds, nearest first, and the first that packs whole sockets wins; where the cpu
    numbering shows hyper-threads (each node's cpus ``c`` and ``c + total / 2``, as Linux numbers siblings) a
    socket of the SKU's threads at any distance goes before one of its cores (else a Cluster-on-Die box reads as
    twice the sockets with SMT off), and otherwise the convention's grouping goes first.
    """
    if machine.firmware_slit is None:
        return None
    cpu_nodes = [n for n in machine.nodes if n.has_cpus]
    ids = machine.node_ids
    slit = machine.firmware_slit

    def groups(below: int) -> dict[int, int]:
        return slit_groups(machine, below)

    total = sum(len(n.cpus) for n in cpu_nodes)
    half = total // 2
    siblings_numbered = total % 2 == 0 and all(
        {c + half for c in n.cpus if c < half} == {c for c in n.cpus if c >= half} for n in cpu_nodes)
    distances = sorted({slit[ids.index(a.id)][ids.index(b.id)] for a in cpu_nodes for b in cpu_nodes
                        if a.id != b.id and slit[ids.index(a.id)][ids.index(b.id)] >= REMOTE_DISTANCE})
    tiers = [REMOTE_DISTANCE] + [d + 1 for d in distances]
    if siblings_numbered:
        order = [(t, sku.threads) for t in tiers] + [(t, sku.cores) for t in tiers]
    else:
        order = [(REMOTE_DISTANCE, sku.threads), (REMOTE_DISTANCE, sku.cores)]
        order += [(t, per) for per in (sku.threads, sku.cores) for t in tiers[1:]]
    for below, per_socket in order:
        group = groups(below)
        sizes: Counter[int] = Counter()
        for n in cpu_nodes:
            sizes[group[n.id]] += len(n.cpus)
        if all(size == per_socket for size in sizes.values()):
            how = (f"nodes of one socket are closer than {REMOTE_DISTANCE}" if below == REMOTE_DISTANCE else
                   f"nodes at distance {below - 1} or less are one socket, as Cluster-on-Die firmware numbers a "
                   "socket's clusters")
            return group, (
                f"the machine names no sockets: the firmware's distances group its nodes into {len(sizes)} "
                f"socket(s) of {per_socket} cpus (the SKU's {'threads' if per_socket == sku.threads else 'cores'}; "
                f"{how})"
            )
    return None


LINE_PACKET_EFFICIENCY = {
    "qpi": (8 / 9, "a 64-byte line travels as a data packet of 1 header flit + 8 data flits (QPI's standard "
            "data-response format, 9 flits for 64 B): 8/9 of a link's flit rate carries data"),
    "upi": (8 / 9, "assumed as QPI's: header + 8 data flits per 64-byte line (no public UPI flit breakdown found)"),
    "hypertransport": (64 / 68, "a 64-byte line travels as a 4-byte read-response control packet and its 64-byte "
                       "data packet (HyperTransport's packets are multiples of 4 bytes; a response is one "
                       "doubleword): 16/17 of a link's bytes carry data; its periodic CRC, probes and flow control "
                       "are not counted"),
}
"""Share of a socket link's data rate that carries cache-line payload, per link kind (others: 1)."""

WRITE_TO_READ_EFFICIENCY = 0.72
"""Write over read bandwidth of a controller under mixed traffic, when the platform has no write figure: the
median of eight public likwid-bench runs (``shared/data/kerncraft``: update ``a[i] = s * a[i]``, one line read and
one written back per element, against load, all cores of a socket): ``W / R = 1 / (R (2/U - 1/R))`` = 0.53
(Haswell-EP), 0.63 (Naples), 0.67 (Ice Lake-SP), 0.69 (Broadwell-EP), 0.74 (Skylake-SP), 0.75 (Sapphire
Rapids), 0.81 (Cascade Lake-SP), 0.95 (Rome); median 0.72. DRAM pays a bus turnaround between reads and writes."""

WRITE_TO_READ_SOURCE = (
    "read factor x 0.72, the median write/read ratio of 8 public likwid-bench update-vs-load runs "
    "(numasim shared/data/kerncraft; WRITE_TO_READ_EFFICIENCY): the platform has no write efficiency of its own"
)

WRITE_ALLOCATE_FACTOR = 2.0
"""Line transfers per store miss on a write-back, write-allocate cache (read for ownership + write-back)."""
STORE_MISS_LATENCY_FACTOR = 1.0
"""A store miss's idle latency in read latencies: it waits for its read for ownership; the write-back is posted."""


MAX_CORE_CLOCK_GHZ = 10.0
"""The highest core clock :func:`catalog_calibration` takes as given: above it the number is not GHz (3300 MHz)."""


def running_clock(platform: Platform, sku: Sku, turbo: bool = True) -> tuple[float, str]:
    """The clock ``sku``'s cores run at with every core busy, and where it comes from.

    What counts core cycles (mlc's injection delay, a cache's latency in cycles) counts them at this clock. With
    turbo on, the firmware's default on servers, every core busy runs at the all-core turbo frequency where the
    catalog has it; with turbo off, or without that figure, at the base clock. Evidence on the project's real
    mlc runs (load bandwidth versus injection delay; experiments/validation/README.md): the Platinum 8269CY's
    load threads ran at 3.2 GHz (its all-core turbo), the E5-2680 v2's at about 3.1 (its all-core turbo), the
    Platinum 8180's at the 2.5 GHz base its mlc printed (turbo off on that testbed).

    Examples
    --------
    >>> from numasim.timing.catalog import match_cpu
    >>> found = match_cpu("Xeon Platinum 8269CY")
    >>> running_clock(found.platform, found.sku)[0], running_clock(found.platform, found.sku, turbo=False)[0]
    (3.2, 2.5)
    """
    if turbo and sku.all_core_turbo_ghz is not None:
        return sku.all_core_turbo_ghz, (
            f"all-core turbo (turbo ASSUMED on, the firmware's default; --turbo off: the {sku.base_ghz:g} GHz base) "
            f"[{platform.cite(sku.sources)}]"
        )
    why = "turbo off" if not turbo else "the catalog has no all-core turbo frequency for this SKU"
    return sku.base_ghz, f"base clock ({why}) [{platform.cite(sku.sources)}]"


def coherence_donor(platform: Platform) -> Platform | None:
    """The platform whose measured cache-to-cache latencies a catalog calibration of ``platform`` borrows where it
    has none: same vendor and socket link (the coherence protocol: QPI's snoops, UPI's directory), a dense core
    (Zen 4c) from a dense one where the catalog has one, then the nearest by DRAM generation and years, as for
    latencies; None where it has its own or nothing matches (the Opterons' HyperTransport)."""
    if platform.coherence is not None:
        return None
    # (a single-socket platform has only the local transfer: any measured platform of its vendor has that)
    kind = None if platform.interconnect is None else platform.interconnect.kind
    same = [p for p in load_catalog() if p.coherence is not None and p.vendor == platform.vendor
            and (kind is None or (p.interconnect is not None and p.interconnect.kind == kind))]
    # a dense core's complex (Zen 4c: two complexes of eight on a CCD, 16 MiB of L3 each) moves a line within it
    # slower than a full core's (a 2x EPYC 9754's 32.5 ns against a 2x EPYC 9454's 26.5): borrow within the kind
    dense = platform.microarchitecture.endswith("c")
    return _nearest(platform, [p for p in same if p.microarchitecture.endswith("c") == dense] or same)


def _coherence(platform: Platform) -> CoherenceTiming | None:
    """The platform's measured cache-to-cache transfer latencies, or those of :func:`coherence_donor` (said so),
    as the calibration carries them. None: no measured figure to go on (the engine then times such a read as
    what serves it: the socket's last cache level, or memory across sockets)."""
    donor = coherence_donor(platform)
    owner = platform if donor is None else donor
    c = owner.coherence
    if c is None:
        return None
    source = f"{owner.name}: {c.measured_on} [{owner.cite(c.sources)}]"
    if donor is not None:
        how = ("the measured platform of the same vendor and socket link, "
               f"{donor.interconnect.kind}" if donor.interconnect is not None and platform.interconnect is not None
               else "the measured platform of the same vendor")
        source = (f"borrowed from {donor.name} ({how}, nearest by DRAM generation and years: {source}); "
                  f"{platform.name} has no cache-to-cache figure of its own")
    return CoherenceTiming(
        local_hitm_ns=c.local_hitm_ns, socket_hitm_ns=c.socket_hitm_ns, remote_hitm_ns=c.remote_hitm_ns,
        remote_hitm_home_reader_ns=c.remote_hitm_home_reader_ns, source=source,
    )


def catalog_calibration(
    machine: Machine,
    sku: str | None = None,
    cxl_device: str | Mapping[int, str] | None = None,
    turbo: bool = True,
    core_clock_ghz: float | None = None,
) -> Calibration:
    """A complete calibration of ``machine`` from its processor's platform-catalog entry alone.

    ``sku`` is anything :func:`~numasim.timing.catalog.match_cpu` reads (a CPU string, "Gold 6240", "8180");
    ``None`` uses ``machine.cpu_model``; neither is an error. The derivation, per parameter:

    * **controllers** (memory nodes): read bandwidth = the node's share of its socket's channels (channels per
      socket / DRAM nodes of that socket: SNC, CoD and NPS split them evenly) x MT/s x 8 B x the platform's
      measured read efficiency (else the catalog-wide median of measured efficiencies); write bandwidth the
      same with the write factor when the catalog has one, else equal to read; idle latency = the platform's
      measured local latency (else the nearest platform's of the same vendor, said so); loaded-latency curve
      = :func:`~numasim.timing.model.default_curve`.
    * **CXL memory nodes** (cpu-less, ``memory_kind="cxl"``, behind one CXL link) on a platform whose entry
      supports CXL: the device ``cxl_device`` names (one catalog key for all CXL nodes, or ``{node: key}``;
      ``None``: the catalog's default device, said in every prior's ``why``) sets the node's controller and its
      CXL link (:mod:`numasim.timing.catalog.cxl_timing`): idle latency from the attach socket = local DRAM +
      the device's added latency, from another socket the socket link more. CXL nodes take none of the
      socket's DDR channels. Other non-DRAM memory (HBM, PMEM, GPU) is an error naming the node.
    * **socket-to-socket links**: each direction carries (links joining that pair of sockets) x per-link
      bandwidth, shared among the machine's links between the pair; the links joining a pair are the SKU's
      socket links divided among the socket's neighbour sockets (2 sockets: all of them, a 4-socket glueless
      with 3 links: one per pair). Latency = (remote - local prior) minus the intra-socket hops on the route,
      split over the route's socket-to-socket hops.
    * **links inside a socket** (mesh, I/O die, sibling dies) and anything the catalog cannot classify: the
      catalog's die-to-die bandwidth when it has one, otherwise the machine file's nominal numbers; latency
      always the machine file's. Relays and devices likewise come from the machine file.
    * **caches**: the platform's levels; L1d/L2 per core, the L3 as one socket-wide cache of the SKU's L3,
      or where the platform's L3 belongs to a core complex (AMD's CCX) one instance a complex of the core dies
      below, the SKU's L3 split evenly among them (without core dies, socket-wide, said in the notes); latency =
      cycles / the running clock (below); a level without a cycle count keeps the machine file's latency.
    * **cache-to-cache** (``coherence``): the platform's measured mlc HITM figures, else those of
      :func:`coherence_donor` (the nearest measured platform of its vendor and socket link, said "borrowed
      from"), else none (said in the notes: such a read is then timed as what serves it).
    * **core**: ``max_outstanding_misses`` = the L1D fill buffers (else numasim's default);
      ``outstanding_misses_per_core`` = the L2 miss queue (superqueue) shared by a core's hardware threads, and
      ``threads_per_core`` from the SKU, where the catalog has the queue;
      ``core_clock_ghz`` = the clock the cores run at under an all-core load (:func:`running_clock`): the SKU's
      all-core turbo where the catalog has it and ``turbo`` (on: the firmware's default, an assumption said in the
      prior), else its base clock, unless ``core_clock_ghz`` gives the clock the box is known to run at (a
      prior labelled "given"; the cache latencies in cycles follow it); ``write_cost_factor`` =
      :data:`WRITE_ALLOCATE_FACTOR` (a store miss is a read for ownership and a write-back: without it a
      catalog machine's STREAM copy came out 30-86 % too fast against kerncraft's measurements, with it 12-28 %).

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> cal = catalog_calibration(glueless(2), sku="Xeon Gold 6240")
    >>> cal.provenance.method, cal.provenance.platform
    ('catalog', 'intel-cascade-lake-sp')
    >>> round(cal.controllers[0].read_bandwidth_gb_s, 1), cal.core.core_clock_ghz
    (125.2, 2.6)
    """
    found = _resolve(machine, sku)
    assert found.sku is not None
    socket_of, socket_note = socket_layout(machine, found.sku)
    per_socket = Counter(
        socket_of[n.id] for n in machine.nodes
        if n.has_memory and n.memory_kind is MemoryKind.DRAM and n.id in socket_of
    )
    fig = catalog_figures(
        found.platform, found.sku, max(per_socket.values()) if per_socket else None,
        sockets=len(set(socket_of.values())) or None,
    )
    platform, chosen = fig.platform, fig.sku
    here = f"catalog {platform.name} / {chosen.model}"
    priors: list[PriorParameter] = []
    notes: list[str] = []

    def prior(parameter: str, value: float, unit: str, source: str) -> None:
        priors.append(PriorParameter(parameter=parameter, value=float(value), unit=unit, source=source, why=WHY))

    if found.stand_in:
        notes.append(found.stand_in)
    if socket_note:
        notes.append(socket_note)
    cxl = cxl_node_timings(machine, platform.name, platform.cxl.versions if platform.cxl else None,
                           fig.local_ns, fig.local_source, cxl_device)
    notes += cxl.notes
    dram_of_socket: dict[int, list[int]] = defaultdict(list)
    for n in machine.nodes:
        if not n.has_memory or n.id in cxl.controllers:
            continue
        if n.memory_kind is MemoryKind.HBM and platform.hbm is not None:
            continue  # (the package's HBM: timed below, from the catalog's [hbm])
        if n.memory_kind is not MemoryKind.DRAM:
            raise CalibrationError(
                f"node {n.id} of {machine.name} is {n.memory_kind.value} memory; the platform catalog "
                f"({platform.name}) has no public figure for it: calibrate this node from measurements"
            )
        if n.id not in socket_of:
            raise CalibrationError(
                f"node {n.id} of {machine.name} has memory but neither cpus nor a socket, so the catalog cannot "
                "tell whose channels it owns; set its socket in the machine file"
            )
        dram_of_socket[socket_of[n.id]].append(n.id)

    # every node of a socket that is not a CXL expander (cpus, memory or both): its dies where a node is a die
    nodes_of_socket: dict[int, list[int]] = defaultdict(list)
    for n in machine.nodes:
        if n.id in socket_of and n.id not in cxl.controllers and (n.has_cpus or n.has_memory):
            nodes_of_socket[socket_of[n.id]].append(n.id)
    mem_src = f"{here}: {platform.memory.ddr}-{fig.mt_s}, {fig.channels_per_socket} channels per socket [{platform.cite(platform.memory.sources)}]"
    local_of, local_note = _cluster_local_latency(machine, fig, dram_of_socket)
    hbm = _hbm_node_timings(machine, fig, socket_of, local_of, here)
    cxl.controllers.update(hbm.controllers)  # (fixed like an expander's: no DDR channels, their own link)
    cxl.links.update(hbm.links)
    cxl.priors += hbm.priors
    notes += hbm.notes
    controllers = []
    for n in machine.nodes:
        if not n.has_memory:
            continue
        if n.id in cxl.controllers:
            controllers.append(cxl.controllers[n.id])
            continue
        share = len(dram_of_socket[socket_of[n.id]])
        channels = fig.channels_per_socket / share
        split = f"{fig.channels_per_socket} per socket / {share} memory nodes"
        die_nodes = nodes_of_socket[socket_of[n.id]]
        mem = platform.memory
        if mem.channels_per_die is not None and len(die_nodes) == mem.dies_per_socket and share < len(die_nodes):
            # a node a die, some dies without memory (Naples with DIMMs on one die's channels): a memory node has
            # its own die's channels, not the empty dies' too
            channels = float(mem.channels_per_die)
            split = (f"its die's {mem.channels_per_die} (a node a die; {len(die_nodes) - share} of the socket's "
                     f"{len(die_nodes)} dies show no memory: their channels are empty)")
        peak = channels * fig.mt_s * BYTES_PER_TRANSFER / 1000.0
        read = peak * fig.read_factor
        write = peak * fig.write_factor if fig.write_factor is not None else read
        local_ns = local_of.get(n.id, fig.local_ns)
        controllers.append(
            ControllerTiming(
                node=n.id,
                latency_ns=local_ns,
                read_bandwidth_gb_s=read,
                write_bandwidth_gb_s=write,
                curve=default_curve(local_ns),
            )
        )
        key = f"controllers[{n.id}]"
        prior(f"{key}.read_bandwidth_gb_s", read, "GB/s",
              f"{channels:g} channels ({split}) x {fig.mt_s} MT/s x 8 B "
              f"x efficiency {fig.read_factor:.3f}; {mem_src}; efficiency: {fig.read_factor_source}")
        prior(f"{key}.write_bandwidth_gb_s", write, "GB/s",
              f"channel peak x write factor {fig.write_factor:.3f}" + f" ({fig.write_factor_source})"
              if fig.write_factor is not None
              else "equal to read bandwidth: the catalog has no write efficiency for this platform")
        prior(f"{key}.latency_ns", local_ns, "ns", fig.local_source + local_note.get(n.id, ""))
    priors += cxl.priors
    notes.append("loaded-latency curves: numasim's default_curve shape (fitted on other machines), scaled by the idle latency")

    links, link_priors = _links(machine, fig, socket_of, here, cxl, local_of)
    priors += link_priors
    if core_clock_ghz is not None:
        if not 0.1 <= core_clock_ghz <= MAX_CORE_CLOCK_GHZ:
            raise CalibrationError(
                f"core_clock_ghz = {core_clock_ghz:g}: a core clock in GHz, between 0.1 and {MAX_CORE_CLOCK_GHZ:g}"
                + (f" (did you mean {core_clock_ghz / 1000:g} GHz?)" if 100 < core_clock_ghz < math.inf else "")
            )
        clock_ghz = float(core_clock_ghz)
        clock_source = (f"given ({clock_ghz:g} GHz, --core-clock-ghz): the clock the box's busy cores run at, as its "
                        f"user measured or knows it (the SKU's base: {chosen.base_ghz:g} GHz) "
                        f"[{platform.cite(chosen.sources)}]")
    else:
        clock_ghz, clock_source = running_clock(platform, chosen, turbo)
    core_dies, die_priors, die_notes = _core_dies(machine, fig, socket_of, here)
    # nodes with cpus a socket: more than one is an SNC or Cluster-on-Die mode, whose clusters split the L3
    cluster_counts = set(Counter(socket_of[n.id] for n in machine.nodes if n.has_cpus and n.id in socket_of).values())
    clusters = cluster_counts.pop() if len(cluster_counts) == 1 else 1
    caches, cache_priors, cache_notes = _caches(machine, fig, here, clock_ghz, core_dies, clusters)
    priors += cache_priors
    notes += cache_notes

    fb = platform.core.l1d_fill_buffers
    sq = platform.core.l2_outstanding_misses
    tpc = chosen.threads // chosen.cores
    # A box with hyper-threading (SMT) off shows one cpu a core: its cpus then pair with no sibling.
    smt_off = _smt_off(machine, chosen, socket_of)
    if smt_off:
        tpc = 1
    core = CoreTiming(
        max_outstanding_misses=fb if fb is not None else CoreTiming().max_outstanding_misses,
        outstanding_misses_per_core=sq,
        threads_per_core=tpc if sq is not None else None,
        core_clock_ghz=clock_ghz,
        # Write-back, write-allocate caches: a store that misses reads the line for ownership and later
        # writes it back, two line transfers where the program counts one (STREAM and likwid-bench count one).
        write_cost_factor=WRITE_ALLOCATE_FACTOR,
        write_allocate_evasion=platform.write_allocate.evasion if platform.write_allocate is not None else 0.0,
        # A store miss holds its miss slot for its read for ownership, a read's round trip; its write-back is
        # posted (docs/design-rationale.md, "One core's stream depth, and what a store miss waits for").
        write_latency_factor=STORE_MISS_LATENCY_FACTOR,
        prefetch_distance_lines=(platform.stream.prefetch_lines if platform.stream is not None
                                 else CoreTiming().prefetch_distance_lines),
    )
    prior("core.max_outstanding_misses", core.max_outstanding_misses, "lines",
          f"{here}: L1D fill buffers [{platform.cite(platform.core.sources)}]" if fb is not None
          else "numasim default (CoreTiming): the catalog has no fill-buffer count for this platform")
    if sq is not None:
        prior("core.outstanding_misses_per_core", sq, "lines",
              f"{here}: L2 outstanding misses per core, shared by its hardware threads "
              f"[{platform.cite(platform.core.sources)}]" + (f"; {platform.core.note}" if platform.core.note else ""))
        prior("core.threads_per_core", tpc, "threads",
              f"the machine shows {chosen.cores} cpus a socket, one a core: hyper-threading off ({here}: "
              f"{chosen.threads} threads / {chosen.cores} cores with it on) [{platform.cite(chosen.sources)}]" if smt_off
              else f"{here}: {chosen.threads} threads / {chosen.cores} cores [{platform.cite(chosen.sources)}]")
    prior("core.core_clock_ghz", clock_ghz, "GHz", f"{here}: {clock_source}")
    prior("core.prefetch_distance_lines", core.prefetch_distance_lines, "lines",
          f"{here}: {platform.stream.derivation}; {platform.stream.measured_on} [{platform.cite(platform.stream.sources)}]"
          if platform.stream is not None
          else "numasim default (CoreTiming): the catalog has no one-core streaming measurement of this platform")
    prior("core.write_latency_factor", STORE_MISS_LATENCY_FACTOR, "",
          "a store miss waits for its read for ownership (a read's latency); its write-back is posted (the core "
          "does not wait for it); checked against kerncraft's likwid-bench copy and triad series "
          "(experiments/validation)")
    prior("core.write_cost_factor", core.write_cost_factor, "",
          "write-allocate: a store miss moves the line twice (read for ownership, then write-back); x86 caches "
          "are write-back write-allocate (Intel SDM vol. 3A 11.3, AMD APM vol. 2 7.4); checked against "
          "kerncraft's likwid-bench copy series (experiments/validation)")

    wa = platform.write_allocate
    if wa is not None:  # (none: every store miss reads its line, as the write cost factor's prior says)
        prior("core.write_allocate_evasion", core.write_allocate_evasion, "",
              f"{here}: {wa.measured_on} [{platform.cite(wa.sources)}]; from what backlog at the controller is "
              "numasim's (timing.model.EVASION_ONSET_QUEUE_LINES..EVASION_FULL_QUEUE_LINES, read off the "
              "Platinum 8360Y's likwid-bench series)")

    priors += die_priors
    notes += die_notes

    devices, relays = machine_devices_and_relays(machine)
    devices = [
        d.model_copy(update={"attach_latency_ns": cxl.devices[d.name].link_latency_ns,
                             "attach_bandwidth_gb_s": cxl.devices[d.name].link_bandwidth_gb_s})
        if d.name in cxl.devices else d
        for d in devices
    ]
    for d in devices:
        if d.name in cxl.devices:
            f = cxl.devices[d.name]
            priors.append(PriorParameter(parameter=f"devices[{d.name}].attach_latency_ns", value=d.attach_latency_ns,
                                         unit="ns", source=f"its CXL link: {f.added_source}", why=f.why))
            priors.append(PriorParameter(parameter=f"devices[{d.name}].attach_bandwidth_gb_s",
                                         value=d.attach_bandwidth_gb_s, unit="GB/s", source=f"its CXL link: {f.link_source}",
                                         why=f.why))
            continue
        prior(f"devices[{d.name}].attach_latency_ns", d.attach_latency_ns, "ns", "machine file (nominal): no catalog figure")
        prior(f"devices[{d.name}].attach_bandwidth_gb_s", d.attach_bandwidth_gb_s, "GB/s", "machine file (nominal): no catalog figure")
    for r in relays:
        prior(f"relays[{r.node}].latency_ns", r.latency_ns, "ns", "machine file (nominal): no catalog figure")
    coherence = _coherence(platform)
    if coherence is not None:
        prior("coherence.local_hitm_ns", coherence.local_hitm_ns, "ns", coherence.source)
        if coherence.socket_hitm_ns is not None:
            prior("coherence.socket_hitm_ns", coherence.socket_hitm_ns, "ns", coherence.source)
        if coherence.remote_hitm_ns is not None:
            prior("coherence.remote_hitm_ns", coherence.remote_hitm_ns, "ns", coherence.source)
        if coherence.remote_hitm_home_reader_ns is not None:
            prior("coherence.remote_hitm_home_reader_ns", coherence.remote_hitm_home_reader_ns, "ns", coherence.source)
    else:
        notes.append(f"no cache-to-cache latencies for {platform.name}: transfers timed as the level or memory "
                     "access that serves them")

    return Calibration(
        machine=machine.name,
        coherence=coherence,
        controllers=controllers,
        links=links,
        caches=caches,
        devices=devices,
        relays=relays,
        core=core,
        core_dies=core_dies,
        provenance=Provenance(
            method="catalog",
            machine=machine.name,
            platform=platform.name,
            priors=priors,
            notes=(
                f"platform-catalog priors only, no measurement ({platform.name}, SKU {chosen.model}); a what-if "
                "starting point, not a fit. " + "; ".join(notes)
            ),
        ),
    )


def _core_dies(
    machine: Machine, fig: CatalogFigures, socket_of: dict[int, int], here: str
) -> tuple[list[CoreDie], list[PriorParameter], list[str]]:
    """The SKU's core dies (CCDs) laid over the machine's cpus, each with the platform's die port; on a platform
    with no die link in the catalog (Naples and the EPYC 3000, whose dies own their memory controllers; the AM5
    parts, whose link nobody measured) dies with no port, which only place its core complexes' L3 (a lone core
    of a Naples complex has 8 MiB of L3, not the package's 64).

    A socket's dies split evenly among its nodes with cpus (NPS puts whole dies in a quadrant); within a node,
    consecutive cores form a die, a core's hardware threads with it. Linux numbers the first thread of every
    core before the second threads (the assumption :mod:`numasim.engine.cores` states), so in a node's sorted
    cpus the first ``cpus / threads per core`` are cores, and the rest their siblings in the same order. With SMT
    off (one cpu a core: :func:`_smt_off`) every cpu is a core.
    """
    link, sku = fig.platform.core_die_link, fig.sku
    complexes = any(c.level == "L3" and c.scope == "ccx" for c in fig.platform.caches)
    if link is None and not (complexes and sku.core_dies is not None):
        return [], [], []
    if sku.core_dies is None:
        assert link is not None
        return [], [], [f"core dies: the catalog gives no die count for {sku.model} ({link.dies_rule}); "
                        "no die ports modelled"]
    # one cpu a core where SMT is off in the firmware: a node's cpus are then all cores (0-63 of a 64-core die set),
    # not cores and their siblings
    tpc = 1 if _smt_off(machine, sku, socket_of) else max(1, sku.threads // sku.cores)
    nodes_of_socket: dict[int, list[int]] = defaultdict(list)
    for n in machine.nodes:
        if n.has_cpus and n.id in socket_of:
            nodes_of_socket[socket_of[n.id]].append(n.id)
    dies: list[CoreDie] = []
    links = sku.core_die_links or 1
    left_out = "no die ports modelled" if link is not None else "no core dies laid (the L3 is then socket-wide)"
    for socket, node_ids in sorted(nodes_of_socket.items()):
        if sku.core_dies % len(node_ids):
            return [], [], [f"core dies: {sku.core_dies} dies of socket {socket} do not split evenly over its "
                            f"{len(node_ids)} nodes; {left_out}"]
        per_node = sku.core_dies // len(node_ids)
        for nid in node_ids:
            cpus = sorted(machine.node(nid).cpus)
            if len(cpus) % tpc or len(cpus) // tpc < per_node:
                return [], [], [f"core dies: node {nid}'s {len(cpus)} cpus are not {per_node} dies of "
                                f"{tpc}-thread cores; {left_out}"]
            n_cores = len(cpus) // tpc
            for part in np.array_split(np.arange(n_cores), per_node):
                die_cpus = [cpus[t * n_cores + c] for t in range(tpc) for c in part]
                dies.append(CoreDie(cpus=sorted(die_cpus)) if link is None else
                            CoreDie(cpus=sorted(die_cpus), read_bandwidth_gb_s=link.read_gb_s(links),
                                    write_bandwidth_gb_s=link.write_gb_s(links)))
    if link is None:
        return dies, [], [f"{len(dies)} core dies ({sku.core_dies} per socket, {sku.model}) with no port of their own "
                          "(the catalog has no die link for this platform): they place the L3's core complexes"]
    src = (f"{here}: {links} x {link.read_bytes_per_clock} B (reads) / {link.write_bytes_per_clock} B (writes) per "
           f"fabric clock x {link.fabric_clock_ghz:g} GHz ({link.fabric_clock_note}) [{fig.platform.cite(link.sources)}]")
    priors = [
        PriorParameter(parameter="core_dies[*].read_bandwidth_gb_s", value=link.read_gb_s(links), unit="GB/s",
                       source=src, why=WHY),
        PriorParameter(parameter="core_dies[*].write_bandwidth_gb_s", value=link.write_gb_s(links), unit="GB/s",
                       source=src, why=WHY),
    ]
    notes = [f"{len(dies)} core dies ({sku.core_dies} per socket, {sku.model}), each behind its own port"]
    return dies, priors, notes


def _vertex_sockets(machine: Machine, socket_of: dict[int, int]) -> dict[Vertex, set[int]]:
    out: dict[Vertex, set[int]] = {n.id: ({socket_of[n.id]} if n.id in socket_of else set()) for n in machine.nodes}
    for s in machine.switches:
        out[s.name] = set()
    for link in machine.links:
        for here, there in ((link.a, link.b), (link.b, link.a)):
            if isinstance(here, str) and not isinstance(there, str):
                out[here] |= out[there]
    return out


def _sibling_links(
    machine: Machine, fig: CatalogFigures, socket_of: Mapping[int, int], excluded: set[int]
) -> tuple[dict[int, float], str]:
    """The latency of each link on a route between two memory clusters of one socket, where the catalog has
    what a sibling cluster adds (:attr:`CatalogFigures.sibling_route_ns`): that figure spread evenly over the
    links of the machine's sibling routes (two on an I/O die's star, one between adjacent SNC clusters), and
    the source to cite. Empty where the catalog has no figure or no socket has two clusters; ``excluded``
    (socket and CXL links) keep their own."""
    if fig.sibling_route_ns is None:
        return {}, ""
    from numasim.topology.routing import routing

    clusters: dict[int, list[int]] = defaultdict(list)
    for n in machine.nodes:
        if n.has_memory and n.memory_kind is MemoryKind.DRAM and n.id in socket_of:
            clusters[socket_of[n.id]].append(n.id)
    index = {}
    for i, link in enumerate(machine.links):
        index[(link.a, link.b)] = index[(link.b, link.a)] = i
    r = routing(machine)
    on_route: set[int] = set()
    hops: list[int] = []
    for nodes in clusters.values():
        for a in nodes:
            for b in nodes:
                if a == b:
                    continue
                used = [index[e] for e in r.edges(a, b) if index.get(e) is not None]
                if any(i in excluded for i in used):
                    return {}, ""  # a sibling route through another socket or a CXL link: no such geometry
                on_route.update(used)
                hops.append(len(used))
    if not hops or min(hops) == 0:
        return {}, ""
    per_link = fig.sibling_route_ns / statistics.fmean(hops)
    src = (f"a sibling cluster's memory adds {fig.sibling_route_ns:.1f} ns on average, {per_link:.2f} ns per link "
           f"of the machine's {statistics.fmean(hops):g}-link sibling routes; {fig.sibling_route_source}")
    return {i: per_link for i in on_route}, src


def _links(
    machine: Machine, fig: CatalogFigures, socket_of: dict[int, int], here: str, cxl: CxlNodeTiming,
    local_of: Mapping[int, float],
) -> tuple[list[LinkTiming], list[PriorParameter]]:
    platform = fig.platform
    ic = platform.interconnect
    sockets = _vertex_sockets(machine, socket_of)
    pair_of: dict[int, tuple[int, int]] = {}
    for i, link in enumerate(machine.links):
        sa, sb = sockets[link.a], sockets[link.b]
        if len(sa) == 1 and len(sb) == 1 and sa != sb and link.kind is not LinkKind.CXL:
            a, b = sorted((next(iter(sa)), next(iter(sb))))
            pair_of[i] = (a, b)
    neighbours: dict[int, set[int]] = defaultdict(set)
    per_pair: dict[tuple[int, int], int] = defaultdict(int)
    for a, b in pair_of.values():
        neighbours[a].add(b)
        neighbours[b].add(a)
        per_pair[(a, b)] += 1

    def links_between(a: int, b: int) -> float:
        # A socket's links divided among its neighbours: with more neighbours than links (8 sockets, 3 UPI links)
        # a pair's share is a fraction of a link, never a whole link each (more than the socket has).
        return min(fig.links_to_sockets / len(neighbours[a]), fig.links_to_sockets / len(neighbours[b]))

    sibling_lat, sibling_src = _sibling_links(machine, fig, socket_of, set(pair_of) | set(cxl.links))
    # First pass: bandwidths, and latencies of everything that is not a socket link (needed for routes).
    bw: dict[int, float] = {}
    lat: dict[int, float] = {}
    priors: list[PriorParameter] = []
    src_ic = "" if ic is None else (
        f"{here}: {ic.kind} {ic.bandwidth_gb_s:g} GB/s per link at {ic.gt_s:g} GT/s ({ic.derivation}) [{platform.cite(ic.sources)}]"
    )
    for i, link in enumerate(machine.links):
        if i in cxl.links:
            lat[i], bw[i], lat_src, bw_src, why = cxl.links[i]
            key = f"links[{link.a}<->{link.b}]"
            priors.append(PriorParameter(parameter=f"{key}.bandwidth_gb_s", value=bw[i], unit="GB/s", source=bw_src, why=why))
            priors.append(PriorParameter(parameter=f"{key}.latency_ns", value=lat[i], unit="ns", source=lat_src, why=why))
            continue
        if i in pair_of:
            a, b = pair_of[i]
            n_links = links_between(a, b)
            eff, eff_src = fig.link_read_efficiency, fig.link_read_efficiency_source
            bw[i] = n_links * fig.link_bandwidth_gb_s * eff / per_pair[(a, b)]
            priors.append(PriorParameter(
                parameter=f"links[{link.a}<->{link.b}].bandwidth_gb_s", value=bw[i], unit="GB/s", why=WHY,
                source=f"{n_links:g} link(s) between sockets {a} and {b} x {fig.link_bandwidth_gb_s:g} GB/s"
                + (f" x {eff:.3f} ({eff_src})" if eff != 1.0 else "")
                + (f", shared by the machine's {per_pair[(a, b)]} links between them" if per_pair[(a, b)] > 1 else "")
                + f"; {src_ic}",
            ))
            continue
        inside = len(sockets[link.a] | sockets[link.b]) == 1 and link.kind is not LinkKind.CXL
        if inside and ic is not None and ic.die_to_die_bandwidth_gb_s is not None:
            bw[i] = ic.die_to_die_bandwidth_gb_s
            bw_src = f"{here}: die-to-die bandwidth [{platform.cite(ic.sources)}]"
        elif inside and platform.core_die_link is not None:
            # Inside an I/O die every request already crosses its core die's port and a controller; the IOD's
            # own fabric has no public figure below the socket's DRAM peak, so it is not made a third limit.
            bw[i] = fig.socket_peak_gb_s
            bw_src = (f"assumption: the I/O die's fabric carries the socket's DRAM peak ({fig.channels_per_socket} "
                      f"channels x {fig.mt_s} MT/s x 8 B); the core-die ports and the controllers are the limits")
        elif inside and platform.vendor == "intel" and link.kind is LinkKind.ON_DIE:
            # A node's share of an Intel mesh or ring (SNC, CoD, sub-NUMA clusters): no public figure, and a
            # measured cluster reads its sibling's memory as fast as its own (8269CY SNC2: 59.1 against 58.7
            # GB/s), so the mesh is not made a limit below the socket's DRAM peak. The builder's nominal
            # 100 GB/s capped a Granite Rapids SNC3 cluster's sibling reads at half its own.
            bw[i] = fig.socket_peak_gb_s
            bw_src = (f"assumption: a socket's mesh carries its DRAM peak ({fig.channels_per_socket} channels x "
                      f"{fig.mt_s} MT/s x 8 B); the controllers, the cores' misses in flight and the socket links "
                      "are the limits")
        else:
            bw[i] = link.bandwidth_gb_s
            bw_src = "machine file (nominal): the catalog has no figure for " + (
                "links inside a socket" if inside else f"this {link.kind.value} link"
            )
        lat[i] = sibling_lat.get(i, link.latency_ns)
        priors.append(PriorParameter(parameter=f"links[{link.a}<->{link.b}].bandwidth_gb_s", value=bw[i], unit="GB/s", source=bw_src, why=WHY))
        priors.append(PriorParameter(parameter=f"links[{link.a}<->{link.b}].latency_ns", value=lat[i], unit="ns",
                                     source=sibling_src if i in sibling_lat else "machine file (nominal): no catalog figure",
                                     why=WHY))
    # Second pass: a socket link's latency is what is left of (remote - local) after the intra-socket hops.
    if pair_of:
        from numasim.topology.routing import routing

        probe = machine.model_copy(update={"links": [
            link.model_copy(update={"latency_ns": lat.get(i, 1.0), "latency_ns_reverse": None})
            for i, link in enumerate(machine.links)
        ]})
        r = routing(probe)
        socket_edges = {(machine.links[i].a, machine.links[i].b) for i in pair_of}
        socket_edges |= {(b, a) for a, b in socket_edges}
        by_pair: dict[tuple[int, int], float] = {}
        for (a, b) in per_pair:
            src = next((n.id for n in machine.nodes if n.has_cpus and socket_of.get(n.id) == a), None)
            dst = next((n.id for n in machine.nodes if n.has_memory and n.memory_kind is MemoryKind.DRAM
                        and socket_of.get(n.id) == b), None)
            if src is None or dst is None:
                by_pair[(a, b)] = fig.remote_minus_local_ns
                continue
            edges = r.edges(src, dst)
            hops = sum(1 for e in edges if e in socket_edges) or 1
            intra = r.path_latency_ns(src, dst) - sum(1.0 for e in edges if e in socket_edges)
            # the remote figure is reached whatever the cluster's own local latency (_cluster_local_latency):
            # with one node a socket it too is a mean over the target socket's clusters
            lowered = fig.local_ns - local_of.get(dst, fig.local_ns)
            by_pair[(a, b)] = max((fig.remote_minus_local_ns + lowered - intra) / hops, _FALLBACK_LOCAL_LINK_NS)
        for i, (a, b) in pair_of.items():
            lat[i] = by_pair[(a, b)]
            link = machine.links[i]
            priors.append(PriorParameter(
                parameter=f"links[{link.a}<->{link.b}].latency_ns", value=lat[i], unit="ns", why=WHY,
                source=f"(remote - local) {fig.remote_minus_local_ns:.1f} ns less the intra-socket hops, over the "
                f"route's socket hops; {fig.remote_source}",
            ))
    out: list[LinkTiming] = []
    for i, link in enumerate(machine.links):
        out.append(LinkTiming(src=link.a, dst=link.b, latency_ns=lat[i], bandwidth_gb_s=bw[i]))
        out.append(LinkTiming(src=link.b, dst=link.a, latency_ns=lat[i], bandwidth_gb_s=bw[i]))
    # A calibration times each direction of a link: list the prior under both directed keys, the names every
    # other calibration's parameters go by (numasim.calibrate.priors.timing_parameters).
    directed = []
    for p in priors:
        group, sep, rest = p.parameter.partition("<->")
        if not sep:
            directed.append(p)
            continue
        end_a = group.removeprefix("links[")
        end_b, _, attr = rest.partition("].")
        directed += [
            p.model_copy(update={"parameter": f"links[{x}->{y}].{attr}"}) for x, y in ((end_a, end_b), (end_b, end_a))
        ]
    return out, directed


_SCOPES = {"core": CacheScope.CORE, "module": CacheScope.CORE, "ccx": CacheScope.DIE, "die": CacheScope.DIE,
           "socket": CacheScope.SOCKET}


def _cache_latency_donor(platform: Platform, level: str) -> Platform | None:
    """The platform whose ``level`` latency in cycles a platform without one borrows: the same vendor's with the
    nearest first year (on a tie the later: a shrink keeps its predecessor's uncore, Broadwell-EP Haswell-EP's)."""
    have = [p for p in load_catalog() if p.name != platform.name and p.vendor == platform.vendor
            and any(c.level == level and c.latency_cycles is not None for c in p.caches)]
    have = [p for p in have if p.client_die == platform.client_die] or have  # (a desktop ring is shorter)
    if not have:
        return None
    return min(have, key=lambda p: (abs(p.years[0] - platform.years[0]), -p.years[0], p.name))


def _dies_split(core_dies: list[CoreDie], complexes: int) -> bool:
    """Whether every core die's cpus split into ``complexes`` core complexes (:func:`core_complexes`)."""
    try:
        for die in core_dies:
            core_complexes(die.cpus, complexes)
    except ValueError:
        return False
    return True


def _caches(
    machine: Machine, fig: CatalogFigures, here: str, clock_ghz: float, core_dies: list[CoreDie], clusters: int = 1
) -> tuple[list[CacheTiming], list[PriorParameter], list[str]]:
    platform, sku = fig.platform, fig.sku
    nominal = {c.name.lower(): c for c in machine.caches}
    # A machine the catalog timed (topo import --cpu) carries the catalog's own cache latencies, borrowed ones
    # included: derive them again (at this clock), rather than pass them off as the machine file's nominal ones.
    from numasim.timing.catalog.machine import catalog_timed_by

    from_catalog = catalog_timed_by(machine) is not None
    out: list[CacheTiming] = []
    priors: list[PriorParameter] = []
    notes: list[str] = []
    for spec in platform.caches:
        src = f"{here} [{platform.cite(spec.sources)}]"
        complexes = 1
        if spec.level == "L3" and sku.l3_mib is not None and spec.scope == "ccx" and core_dies and sku.core_dies \
                and _dies_split(core_dies, spec.complexes_per_die):
            # one instance a core complex, laid over the core dies: the SKU's L3 split evenly among them (a part
            # with fewer cores than its dies hold keeps every die's complexes, each with part of its L3 fused off)
            complexes = spec.complexes_per_die
            instances = sku.core_dies * complexes
            size = round(sku.l3_mib * MiB / instances)
            scope = CacheScope.CCX
            size_src = (f"{here}: the SKU's L3 ({sku.l3_mib:g} MiB) over its {sku.core_dies} core dies x {complexes} "
                        f"core complex(es) a die [{platform.cite(sku.sources + spec.sources)}]")
        elif spec.level == "L3" and sku.l3_mib is not None and spec.scope == "socket" and clusters > 1:
            # SNC / Cluster-on-Die: a cluster's memory is cached in its own share of the socket's L3 slices
            size = round(sku.l3_mib * MiB / clusters)
            scope = CacheScope.CLUSTER
            size_src = (f"{here}: the SKU's L3 ({sku.l3_mib:g} MiB) over the socket's {clusters} clusters (SNC or "
                        "Cluster-on-Die maps a cluster's memory to its own share of the L3 slices: Intel, Xeon "
                        f"Scalable technical overview, sub-NUMA clustering) [{platform.cite(sku.sources)}]")
            notes.append(f"L3: each of a socket's {clusters} clusters caches in its own {size / MiB:g} MiB share, "
                         "modelled as one instance a node for its cores (assumption: a line of another cluster's "
                         "memory takes the reader's share, where SNC keeps it in its home cluster's)")
        elif spec.level == "L3" and sku.l3_mib is not None and spec.scope == "die" and clusters > 1:
            # a multi-chip package whose dies are nodes of their own (Magny-Cours, Interlagos): a die's L3 each
            size = round(sku.l3_mib * MiB / clusters)
            scope = CacheScope.NODE
            size_src = (f"{here}: the SKU's L3 ({sku.l3_mib:g} MiB) over the package's {clusters} dies, each a node "
                        f"with its own L3 [{platform.cite(sku.sources + spec.sources)}]")
        elif spec.level == "L3" and sku.l3_mib is not None:
            size = round(sku.l3_mib * MiB)
            scope = CacheScope.SOCKET
            size_src = f"{here}: the SKU's L3 [{platform.cite(sku.sources)}]"
            if spec.scope != "socket":
                notes.append(f"the L3 is split per {spec.scope} on this platform; modelled as one socket-wide cache "
                             "of the SKU's total (assumption: the catalog lays no core dies over this machine whose "
                             "cores split into its complexes)")
        elif spec.size_kib is not None and spec.scope == "module":
            # no module scope in the machine model: an even share a core (what each gets with the module busy; a
            # lone thread on a module has the whole instance, and hits more than this estimate)
            size = round(spec.size_kib * KiB / spec.cores_per_module)
            scope = CacheScope.CORE
            size_src = f"{spec.size_kib:g} KiB shared by a module of {spec.cores_per_module} cores, an even share a core; {src}"
            notes.append(f"{spec.level} is shared by a module of {spec.cores_per_module} cores; modelled as an even share "
                         "per core (assumption: a lone thread on a module has the whole instance)")
        elif spec.size_kib is not None:
            size = round(spec.size_kib * KiB)
            scope = _SCOPES[spec.scope]
            size_src = src
        else:
            notes.append(f"{spec.level}: the catalog has no size for this SKU; level left out")
            continue
        name = "L1d" if spec.level == "L1d" else spec.level
        if spec.latency_cycles is not None:
            latency = spec.latency_cycles / clock_ghz
            lat_src = f"{spec.latency_cycles:g} cycles / {clock_ghz:g} GHz running clock; {src}"
        elif (name.lower() in nominal or (name == "L1d" and "l1" in nominal)) and not from_catalog:
            latency = nominal.get(name.lower(), nominal.get("l1")).latency_ns  # type: ignore[union-attr]
            lat_src = "machine file (nominal): the catalog has no cycle count for this level"
        elif (donor := _cache_latency_donor(platform, spec.level)) is not None:
            # A level left out would time every working set between the level above and the memory as memory:
            # a neighbour's cycles, at this platform's clock, are nearer the truth (and said to be borrowed).
            got = next(c for c in donor.caches if c.level == spec.level and c.latency_cycles is not None)
            assert got.latency_cycles is not None
            latency = got.latency_cycles / clock_ghz
            lat_src = (f"{got.latency_cycles:g} cycles / {clock_ghz:g} GHz running clock, borrowed from {donor.name} "
                       f"({donor.years[0]}) [{donor.cite(got.sources)}]: {platform.name} has no public {spec.level} "
                       "latency in the catalog and the machine file gives none"
                       + (" of its own (its numbers are this catalog's)" if from_catalog else ""))
            notes.append(f"{spec.level} latency: borrowed from {donor.name} ({got.latency_cycles:g} cycles)")
        else:
            notes.append(f"{spec.level}: neither the catalog nor the machine file gives a latency; level left out")
            continue
        out.append(CacheTiming(name=name, size_bytes=size, latency_ns=latency, scope=scope, complexes_per_die=complexes))
        priors.append(PriorParameter(parameter=f"caches[{name}].size_bytes", value=size, unit="bytes", source=size_src, why=WHY))
        priors.append(PriorParameter(parameter=f"caches[{name}].latency_ns", value=latency, unit="ns", source=lat_src, why=WHY))
    return out, priors, notes
