"""Catalog priors for a CXL memory node: its controller, its CXL link, and where each number comes from.

The model: a CXL Type-3 expander is a cpu-less node joined to its attach node by a :attr:`LinkKind.CXL` link.
A core of the attach socket reaching it pays the node's controller latency plus the link's latency, so

* **controller** latency = the host platform's local-DRAM prior (the expander's DRAM behind its own
  controller costs what DRAM costs; the path difference is put on the link), read bandwidth = device channels
  x MT/s x 8 B x the catalog-wide median of measured read efficiencies (a device controller is not the host's),
  capped by a published all-read figure of the device when there is one, else by its link's line payload x the
  share of theirs that measured expanders read at (expanders read well below both their DRAM and their link:
  the Intel OCP x8 device 17.8 GB/s of 26.4), write bandwidth = read (no figure);
* **link** latency = the device's added latency over local DRAM (its own figure, else one derived from its
  published total latency on the platform it was measured on, else the catalog default), bandwidth = the CXL
  link's payload per direction (:attr:`~numasim.timing.catalog.cxl.CxlLinkSpec.payload_gb_s`).

So the idle latency from the attach socket is local + added, and from another socket the socket link's latency
more (the route crosses it): CXL memory is closer than remote DRAM only where its device adds less than a
socket hop. The catalog's default device adds 137 ns; Granite Rapids' socket hop is 139 ns (a public 2x Xeon
6962P: 137.5 ns local, 276.2 across sockets), so there an expander on the reader's socket is as near as the
other socket's DRAM.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from numasim.errors import CalibrationError
from numasim.timing.catalog.cxl import CxlCatalog, CxlDevice, load_cxl_catalog
from numasim.timing.catalog.loader import get_platform, load_catalog
from numasim.timing.model import ControllerTiming, PriorParameter, default_curve
from numasim.topology.model import LinkKind, Machine, MemoryKind

__all__ = ["CxlNodeTiming", "CxlFigures", "cxl_figures", "cxl_node_timings", "choose_cxl_device"]

WHY = "catalog prior: no measurement"


@dataclass(frozen=True)
class CxlFigures:
    """One device's catalog timing on one host, each number with the sentence saying where it came from."""

    device: CxlDevice
    controller_latency_ns: float
    controller_read_gb_s: float
    link_latency_ns: float
    link_bandwidth_gb_s: float
    latency_source: str
    added_source: str
    read_source: str
    link_source: str
    why: str
    """The ``why`` of every prior these figures set (says when the device is the catalog's default)."""


def choose_cxl_device(node: int | None, cxl_device: str | Mapping[int, str] | None, cat: CxlCatalog) -> tuple[CxlDevice, str]:
    """The device of CXL node ``node`` and the ``why`` of its priors (a default device is said, never silent)."""
    name = cxl_device.get(node) if isinstance(cxl_device, Mapping) and node is not None else cxl_device
    if isinstance(name, Mapping):
        name = None
    if name is not None:
        return cat.device(name), WHY
    dev = cat.default()
    return dev, (f"{WHY}; the machine names no CXL device for {'node ' + str(node) if node is not None else 'its expanders'}, so the catalog's default "
                 f"{dev.name} is assumed ({cat.default_device_why})")


def _median_read_efficiency() -> tuple[float, int]:
    measured = [p.efficiency.read_factor for p in load_catalog() if p.efficiency is not None]
    return statistics.median(measured), len(measured)


def _measured_read_share(cat: CxlCatalog) -> tuple[float, str]:
    """The median over the catalog's devices with a measured all-read figure of that figure over their link's
    line payload, and which devices those are ("" and 1.0: none)."""
    got = [(d.read_bandwidth_gb_s / cat.link(d.lanes).payload_gb_s, d) for d in cat.devices
           if d.read_bandwidth_gb_s is not None and d.measured_on]
    if not got:
        return 1.0, ""
    share = statistics.median(x for x, _ in got)
    return min(share, 1.0), "; ".join(f"{d.name}: {d.read_bandwidth_gb_s:g} GB/s on {d.measured_on}" for _, d in got)


def _measured_added_ns(device: CxlDevice) -> tuple[float, float, str]:
    """What a device with a measured idle latency adds over its measuring host's local-DRAM prior: (added ns,
    that prior, the host's catalog name)."""
    from numasim.timing.catalog.calibration import catalog_figures

    assert device.idle_latency_ns is not None and device.measured_platform is not None
    host = get_platform(device.measured_platform)
    base = catalog_figures(host, host.skus[0]).local_ns
    added = device.idle_latency_ns - base
    if added <= 0:
        raise CalibrationError(
            f"cxl device {device.name}: idle_latency_ns = {device.idle_latency_ns} is not above the local prior "
            f"{base:.1f} ns of {host.name}"
        )
    return added, base, host.name


def measured_added_latency(cat: CxlCatalog) -> tuple[float, str] | None:
    """The median over the catalog's devices with a measured idle latency of what each adds over its host's local
    prior, and which devices those are (None: no device has one)."""
    got = [(_measured_added_ns(d)[0], d) for d in cat.devices
           if d.idle_latency_ns is not None and d.measured_platform is not None]
    if not got:
        return None
    return statistics.median(x for x, _ in got), "; ".join(
        f"{d.name}: {d.idle_latency_ns:g} ns on {d.measured_on}, +{x:.1f}" for x, d in got)


def cxl_figures(device: CxlDevice, local_ns: float, local_source: str, why: str = WHY) -> CxlFigures:
    """The device's controller and link figures on a host whose local-DRAM prior is ``local_ns``.

    Examples
    --------
    >>> cat = load_cxl_catalog()
    >>> f = cxl_figures(cat.device("micron-cz120"), 100.0, "example host")
    >>> round(f.link_latency_ns), round(f.link_bandwidth_gb_s, 1), round(f.controller_read_gb_s, 1)
    (137, 26.4, 17.8)
    """
    cat = load_cxl_catalog()
    link = cat.link(device.lanes)
    est = [f"{e} (estimate)" for e in device.estimates]
    dev_src = f"cxl device {device.name}: {device.title} [{cat.cite(device.sources)}]" + (
        f"; estimates: {', '.join(est)}" if est else "")
    if device.added_latency_ns is not None:
        added = device.added_latency_ns
        added_src = f"added latency of {dev_src}"
    elif device.idle_latency_ns is not None and device.measured_platform is not None:
        added, base, host_name = _measured_added_ns(device)
        added_src = (f"{device.idle_latency_ns:g} ns measured on {device.measured_on} less {host_name}'s local "
                     f"prior {base:.1f} ns; {dev_src}")
    else:
        got = measured_added_latency(cat)
        if got is not None:
            added, measured = got
            added_src = (f"{added:.1f} ns, what measured expanders add over their host's local DRAM ({measured}; "
                         f"{device.name} has no public figure: an assumption). The CXL Consortium's and Pond's design "
                         f"figures are lower: {cat.latency.derivation} [{cat.cite(cat.latency.sources)}]; {dev_src}")
        else:
            added = cat.latency.default_added_ns
            added_src = (f"catalog default added latency (estimate; {device.name} has no public figure and no device "
                         f"in the catalog has a measured one): {cat.latency.derivation} "
                         f"[{cat.cite(cat.latency.sources)}]")
    eff, n = _median_read_efficiency()
    read = device.dram_peak_gb_s * eff
    read_src = (f"{device.channels} x {device.ddr}-{device.mt_s} channels x 8 B = {device.dram_peak_gb_s:g} GB/s x "
                f"efficiency {eff:.3f} (median of the catalog's {n} measured host read efficiencies: the device's "
                f"controller has none of its own); {dev_src}")
    if device.read_bandwidth_gb_s is not None and device.read_bandwidth_gb_s < read:
        read = device.read_bandwidth_gb_s
        read_src = f"all-read bandwidth {read:g} GB/s measured on {device.measured_on}; {dev_src}"
    elif device.read_bandwidth_gb_s is None:
        share, measured = _measured_read_share(cat)
        if measured and link.payload_gb_s * share < read:
            read = link.payload_gb_s * share
            read_src = (f"{link.payload_gb_s:.2f} GB/s of x{device.lanes} line payload x {share:.3f}, the share of "
                        f"their link's payload that measured expanders read at ({measured}; an expander's all-read "
                        f"figure stays below its link and its DRAM: the controller's); {dev_src}")
    link_src = (f"CXL {device.cxl_version} x{device.lanes} on PCIe 5.0: {link.derivation} "
                f"[{cat.cite(link.sources)}]; estimates: {', '.join(link.estimates) or 'none'}")
    return CxlFigures(
        device=device,
        controller_latency_ns=local_ns,
        controller_read_gb_s=read,
        link_latency_ns=added,
        link_bandwidth_gb_s=link.payload_gb_s,
        latency_source=(f"the expander's DRAM costs what the host's local DRAM does ({local_source}); what CXL adds "
                        "is on the link"),
        added_source=added_src,
        read_source=read_src,
        link_source=link_src,
        why=why,
    )


@dataclass
class CxlNodeTiming:
    """What :func:`cxl_node_timings` sets: controllers, CXL link numbers by link index, device attach numbers."""

    controllers: dict[int, ControllerTiming] = field(default_factory=dict)
    links: dict[int, tuple[float, float, str, str, str]] = field(default_factory=dict)
    """link index -> (latency_ns, bandwidth_gb_s, latency source, bandwidth source, why)."""
    devices: dict[str, CxlFigures] = field(default_factory=dict)
    """cxl-expander device name -> the figures of the node it exposes."""
    priors: list[PriorParameter] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def cxl_node_timings(
    machine: Machine,
    platform_name: str,
    cxl_versions: Sequence[str] | None,
    local_ns: float,
    local_source: str,
    cxl_device: str | Mapping[int, str] | None = None,
) -> CxlNodeTiming:
    """Catalog priors for every CXL memory node of ``machine`` on a host platform (``cxl_versions`` None: the
    platform has no CXL support, and a CXL node is an error naming it)."""
    cat = load_cxl_catalog()
    out = CxlNodeTiming()
    cxl_nodes = [n for n in machine.nodes if n.has_memory and n.memory_kind is MemoryKind.CXL]
    if isinstance(cxl_device, Mapping):
        extra = sorted(set(cxl_device) - {n.id for n in cxl_nodes})
        if extra:
            raise CalibrationError(f"cxl_device names nodes {extra}, which are not CXL memory nodes of {machine.name}")
    for n in cxl_nodes:
        if cxl_versions is None:
            raise CalibrationError(
                f"node {n.id} of {machine.name} is cxl memory, but the catalog's {platform_name} has no CXL support; "
                "check the processor, or calibrate this node from measurements"
            )
        ends = [i for i, link in enumerate(machine.links) if link.kind is LinkKind.CXL and n.id in (link.a, link.b)]
        if len(ends) != 1:
            raise CalibrationError(
                f"node {n.id} of {machine.name} is cxl memory with {len(ends)} CXL links; the catalog times an "
                "expander behind exactly one (link kind 'cxl' to its attach node)"
            )
        device, why = choose_cxl_device(n.id, cxl_device, cat)
        fig = cxl_figures(device, local_ns, local_source, why)
        if device.cxl_version not in cxl_versions:
            out.notes.append(f"node {n.id}: {device.name} is a CXL {device.cxl_version} device on a CXL "
                             f"{max(cxl_versions)} host: it runs as {max(cxl_versions)} (same PHY and flit)")
        out.controllers[n.id] = ControllerTiming(
            node=n.id, latency_ns=fig.controller_latency_ns, read_bandwidth_gb_s=fig.controller_read_gb_s,
            write_bandwidth_gb_s=fig.controller_read_gb_s, curve=default_curve(fig.controller_latency_ns),
        )
        key = f"controllers[{n.id}]"
        out.priors += [
            PriorParameter(parameter=f"{key}.read_bandwidth_gb_s", value=fig.controller_read_gb_s, unit="GB/s",
                           source=fig.read_source, why=why),
            PriorParameter(parameter=f"{key}.write_bandwidth_gb_s", value=fig.controller_read_gb_s, unit="GB/s",
                           source="equal to read bandwidth: no public write figure for the device", why=why),
            PriorParameter(parameter=f"{key}.latency_ns", value=fig.controller_latency_ns, unit="ns",
                           source=fig.latency_source, why=why),
        ]
        i = ends[0]
        out.links[i] = (fig.link_latency_ns, fig.link_bandwidth_gb_s, fig.added_source, fig.link_source, why)
        link = machine.links[i]
        attach = link.b if link.a == n.id else link.a
        # behind a node, or behind a socket's switch (its devices sit on the switch's nodes)
        on_switch = {x for lk in machine.links for x in (lk.a, lk.b) if attach in (lk.a, lk.b) and isinstance(x, int)}
        hosts = {attach} if isinstance(attach, int) else on_switch
        expanders = [d for d in machine.devices if d.kind.value == "cxl-expander" and d.node in hosts]
        behind = [m.id for m in cxl_nodes if any(
            lk.kind is LinkKind.CXL and {lk.a, lk.b} == {attach, m.id} for lk in machine.links)]
        if len(expanders) == len(behind):
            out.devices[expanders[behind.index(n.id)].name] = fig
        out.notes.append(f"node {n.id}: CXL expander {device.name} (x{device.lanes}, {device.channels}x "
                         f"{device.ddr}-{device.mt_s}) behind node {attach}")
    return out
