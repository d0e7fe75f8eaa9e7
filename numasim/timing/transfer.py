"""Carry a calibration across a clustering-mode change (SNC/CoD/NPS): a fit in one mode times the other.

The physical parameters stay the hardware's: the same DRAM channels (a merged node's controller bandwidth is
the sum of its parts, a split node gets its share), the same socket-to-socket links, the same on-die fabric.
Latencies follow the channel-interleave rule of :mod:`numasim.topology.reconfigure`. Loaded-latency curves are
functions of utilisation; with lines spread over the channels by bandwidth share every part of a merged
controller runs at the merged utilisation, so the merged curve is the bandwidth-share-weighted mean of its
parts' curves, and a split controller keeps its parent's curve.

What no measured parameter carries is listed in ``provenance.priors``: the on-die latency and bandwidth used to
split a one-node-per-socket calibration (there is no on-die link to measure in that mode).

Examples
--------
>>> from numasim.timing.model import nominal_calibration
>>> from numasim.topology.builders import multi_die
>>> from numasim.topology.cluster_mode import ClusterMode
>>> m = multi_die(2, "SNC2")
>>> moved = transfer_calibration(m, nominal_calibration(m), ClusterMode("snc", 1))
>>> moved.calibration.machine, [round(c.latency_ns, 1) for c in moved.calibration.controllers]
('multi-die-2s-snc-off', [85.0, 85.0])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numasim.timing.catalog.modes import mode_offer_for_cpu
from numasim.timing.model import (
    Calibration,
    ControllerTiming,
    DeviceTiming,
    LinkTiming,
    LoadedLatencyCurve,
    PriorParameter,
    Provenance,
    RelayTiming,
    apply_calibration,
)
from numasim.topology.cluster_mode import ClusterMode
from numasim.topology.model import Machine, Vertex
from numasim.topology.reconfigure import Reconfiguration, cluster_caches, reconfigure

__all__ = ["TransferredCalibration", "transfer_calibration", "mean_curve"]


@dataclass(frozen=True)
class TransferredCalibration:
    """The machine in its new mode (timed by the transferred numbers) and the transferred calibration."""

    machine: Machine
    calibration: Calibration
    reconfiguration: Reconfiguration


def mean_curve(curves: list[tuple[LoadedLatencyCurve, float]]) -> LoadedLatencyCurve:
    """The weighted mean of loaded-latency curves, on the union of their utilisation points.

    Examples
    --------
    >>> a = LoadedLatencyCurve(utilisation=[0.0, 1.0], added_latency_ns=[0.0, 100.0])
    >>> b = LoadedLatencyCurve(utilisation=[0.0, 0.5, 1.0], added_latency_ns=[0.0, 10.0, 200.0])
    >>> mean_curve([(a, 0.5), (b, 0.5)]).added_latency_ns
    [0.0, 30.0, 150.0]
    """
    total = sum(w for _, w in curves)
    points = np.unique(np.concatenate([np.asarray(c.utilisation) for c, _ in curves]))
    added = sum(w / total * c.added_ns(points) for c, w in curves)
    added = np.maximum.accumulate(np.asarray(added, dtype=float))  # rounding must not make it decrease
    return LoadedLatencyCurve(utilisation=[float(u) for u in points], added_latency_ns=[float(a) for a in added])


def _moved_device(dev: DeviceTiming, rc: Reconfiguration) -> DeviceTiming:
    """A device's DMA read limits re-keyed to the new nodes (they name nodes by id, and the ids change).

    A split node reads through its parent's path: the parent's limit. A merged node's lines interleave over its
    parts by channel share ``w``, so a path limited to ``b`` caps the whole stream at ``b / w``; the tightest
    such cap is the merged node's limit.
    """
    if not dev.dma_read_bandwidth_gb_s:
        return dev
    moved: dict[int, float] = {}
    for new_node, parts in rc.parts.items():
        limited = [(dev.dma_read_bandwidth_gb_s[old], w) for old, w in parts if old in dev.dma_read_bandwidth_gb_s]
        if not limited:
            continue
        moved[new_node] = limited[0][0] if len(parts) == 1 else min(b / w for b, w in limited)
    return dev.model_copy(update={"dma_read_bandwidth_gb_s": moved})


def _controller_curve(cal: Calibration, parts: tuple[tuple[int, float], ...]) -> LoadedLatencyCurve | None:
    curves = [(cal.controller(old).curve, w) for old, w in parts]
    known = [(c, w) for c, w in curves if c is not None]
    if not known:
        return None
    if len(parts) == 1:
        return known[0][0]
    return mean_curve(known)


def _link_curve(cal: Calibration, old: tuple[tuple[Vertex, Vertex], ...]) -> LoadedLatencyCurve | None:
    by_edge = {(lt.src, lt.dst): lt for lt in cal.links}
    known = [(by_edge[e].curve, by_edge[e].bandwidth_gb_s) for e in old if e in by_edge and by_edge[e].curve is not None]
    if not known:
        return None
    return known[0][0] if len(known) == 1 else mean_curve(known)  # type: ignore[arg-type]


def transfer_calibration(
    machine: Machine,
    calibration: Calibration,
    target: ClusterMode,
    *,
    die_latency_ns: float | None = None,
    die_bandwidth_gb_s: float | None = None,
    prior_source: str = "",
    threads_per_core: int | None = None,
    channels_per_socket: int | None = None,
) -> TransferredCalibration:
    """``calibration`` (of ``machine``) carried to the same hardware in ``target`` mode.

    Parameters are those of :func:`numasim.topology.reconfigure.reconfigure`; ``prior_source`` says where the
    on-die numbers come from when they are given (it goes into ``provenance.priors``).
    """
    timed = apply_calibration(machine, calibration)
    rc = reconfigure(
        timed, target, die_latency_ns=die_latency_ns, die_bandwidth_gb_s=die_bandwidth_gb_s,
        threads_per_core=threads_per_core, channels_per_socket=channels_per_socket,
        offered=mode_offer_for_cpu(machine.cpu_model),
    )
    new = rc.machine
    controllers = []
    for n in new.nodes:
        assert n.controller is not None
        controllers.append(ControllerTiming(
            node=n.id,
            latency_ns=n.controller.latency_ns,
            read_bandwidth_gb_s=n.controller.read_bandwidth_gb_s,
            write_bandwidth_gb_s=n.controller.effective_write_bandwidth_gb_s,
            curve=_controller_curve(calibration, rc.parts[n.id]),
        ))
    die_edges = _source_die_edges(machine)
    die_curve = _link_curve(calibration, die_edges) if rc.die_link is not None and rc.die_link.measured else None
    links = []
    for link in new.links:
        for src, dst, lat, bw in link.directed():
            old = rc.socket_links.get((src, dst))
            curve = _link_curve(calibration, old) if old is not None else die_curve
            links.append(LinkTiming(src=src, dst=dst, latency_ns=lat, bandwidth_gb_s=bw, curve=curve))
    priors = [p.model_copy(update={"why": f"{p.why} (prior of the {rc.source_mode.label} calibration)".strip()})
              for p in calibration.provenance.priors]
    priors += _die_priors(rc, prior_source)
    prov = calibration.provenance
    notes = (
        f"transferred from calibration {calibration.id} of {machine.name} ({rc.source_mode.label}) to "
        f"{rc.target_mode.label} by numasim.timing.transfer: controller bandwidths are sums (merge) or equal "
        "channel shares (split) of the fitted ones; latencies follow the channel-interleave rule (a node "
        "spanning several clusters reads each line from a cluster with the probability of its channel share); "
        "loaded-latency curves are bandwidth-share means (merge) or copies (split); socket-to-socket links are "
        "the fitted ones. Not refitted: a transfer is a prediction for the other mode, not a fit to it."
        + (f" Source notes: {prov.notes}" if prov.notes else "")
    )
    cal = Calibration(
        machine=new.name,
        controllers=controllers,
        links=links,
        caches=cluster_caches(calibration.caches, rc.source_mode, rc.target_mode),  # an SNC/CoD cluster's L3 share
        devices=[_moved_device(d, rc) for d in calibration.devices],
        relays=[RelayTiming(node=n.id, latency_ns=n.relay_latency_ns) for n in new.nodes if n.relay_latency_ns > 0],
        core=calibration.core,
        core_dies=list(calibration.core_dies),  # the same silicon in every mode (reconfigure checks they fit)
        coherence=calibration.coherence,  # cores and sockets keep their caches in every mode
        provenance=Provenance(
            method=prov.method,
            machine=new.name,
            numasim_version=prov.numasim_version,
            sources=list(prov.sources),
            fit_quality={f"source_{k}": v for k, v in prov.fit_quality.items()},
            priors=priors,
            platform=prov.platform,
            notes=notes,
        ),
    )
    return TransferredCalibration(new.model_copy(update={"calibration": cal.id}), cal, rc)


def _source_die_edges(machine: Machine) -> tuple[tuple[Vertex, Vertex], ...]:
    socket = {n.id: n.socket for n in machine.nodes}
    hubs = {s.name for s in machine.switches}
    edges = []
    for link in machine.links:
        ends = [socket.get(v) if isinstance(v, int) else None for v in (link.a, link.b)]
        intra = (link.a in hubs or link.b in hubs) or (ends[0] is not None and ends[0] == ends[1])
        if intra and not (link.a in hubs and link.b in hubs):
            edges += [(link.a, link.b), (link.b, link.a)]
    return tuple(edges)


def _die_priors(rc: Reconfiguration, source: str) -> list[PriorParameter]:
    die = rc.die_link
    if die is None:
        return []
    if die.measured:
        if rc.source_mode.per_socket == rc.target_mode.per_socket:
            return []
        # Measured, but in the other mode: the near-to-far distance of SNC2 is not that of SNC4.
        return [PriorParameter(
            parameter="on_die.latency_ns", value=die.latency_ns, unit="ns",
            source=f"the {rc.source_mode.label} calibration's on-die path, carried unchanged",
            why=f"{rc.target_mode.label} clusters are laid out differently; nothing measured their distance",
        )]
    hub = next((s.name for s in rc.machine.switches), "hub")
    first = next(n.id for n in rc.machine.nodes)
    where = source or "given on the command line (--die-latency-ns / --die-bandwidth-gb-s), source not stated"
    why = f"{rc.source_mode.label} has no on-die link between clusters, so no measurement in it constrains this"
    return [
        PriorParameter(parameter=f"links[{first}->{hub}].latency_ns", value=die.latency_ns / 2, unit="ns",
                       source=where, why=f"half the near-to-far on-die latency {die.latency_ns:g} ns; {why}"),
        PriorParameter(parameter=f"links[{first}->{hub}].bandwidth_gb_s", value=die.bandwidth_gb_s, unit="GB/s",
                       source=where, why=why),
    ]
