"""Priors of a fit: the calibration a fit starts from, and where each of its numbers comes from.

Every timing parameter of a :class:`~numasim.timing.model.Calibration` has a key (``"links[0->1].bandwidth_gb_s"``,
the same keys as ``Calibration.uncertainty``). A *prior calibration* supplies the starting value of every
parameter and, through ``provenance.priors``, its source: today the machine file's nominal numbers
(:func:`nominal_priors`), tomorrow a platform catalog's. What the measurements do not constrain keeps its prior
value and is listed with that source (:mod:`numasim.calibrate.identify` decides which).
"""

from __future__ import annotations

from numasim.timing.model import (
    Calibration,
    LoadedLatencyCurve,
    Provenance,
    nominal_calibration,
)
from numasim.topology.builders import DEFAULT_CONTROLLER_BANDWIDTH_GB_S, DEFAULT_CONTROLLER_LATENCY_NS
from numasim.topology.model import Machine

__all__ = [
    "NOMINAL_SOURCE",
    "DEFAULT_SOURCE",
    "CURVE_SOURCE",
    "TimingParameter",
    "timing_parameters",
    "with_parameter",
    "nominal_priors",
    "prior_source",
    "scaled_curve",
]

NOMINAL_SOURCE = "machine file (nominal)"
DEFAULT_SOURCE = "numasim default (the machine file gives no controller timing)"
CURVE_SOURCE = "numasim default_curve shape (fitted on a 2-socket Xeon 8180's mlc loaded-latency table)"

TimingParameter = tuple[float, str]
"""A parameter's value and unit."""


def timing_parameters(cal: Calibration) -> dict[str, TimingParameter]:
    """Every timing parameter of ``cal`` by key, with its value and unit.

    A loaded-latency curve is one parameter, ``controllers[j].curve``, valued by the latency it adds at
    saturation (utilisation 1); the core clock is left out while it is unknown (``None``).

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> p = timing_parameters(nominal_priors(glueless(2)))
    >>> p["links[0->1].bandwidth_gb_s"][1], "controllers[1].curve" in p
    ('GB/s', True)
    """
    out: dict[str, TimingParameter] = {}
    for c in cal.controllers:
        out[f"controllers[{c.node}].latency_ns"] = (c.latency_ns, "ns")
        out[f"controllers[{c.node}].read_bandwidth_gb_s"] = (c.read_bandwidth_gb_s, "GB/s")
        out[f"controllers[{c.node}].write_bandwidth_gb_s"] = (c.write_bandwidth_gb_s, "GB/s")
        if c.curve is not None:
            out[f"controllers[{c.node}].curve"] = (float(c.curve.added_ns(1.0)), "ns added at saturation")
    for lt in cal.links:
        out[f"links[{lt.src}->{lt.dst}].latency_ns"] = (lt.latency_ns, "ns")
        out[f"links[{lt.src}->{lt.dst}].bandwidth_gb_s"] = (lt.bandwidth_gb_s, "GB/s")
    for r in cal.relays:
        out[f"relays[{r.node}].latency_ns"] = (r.latency_ns, "ns")
    for ch in cal.caches:
        out[f"caches[{ch.name}].size_bytes"] = (float(ch.size_bytes), "bytes")
        out[f"caches[{ch.name}].latency_ns"] = (ch.latency_ns, "ns")
    for d in cal.devices:
        out[f"devices[{d.name}].attach_latency_ns"] = (d.attach_latency_ns, "ns")
        out[f"devices[{d.name}].attach_bandwidth_gb_s"] = (d.attach_bandwidth_gb_s, "GB/s")
        for node, bw in sorted(d.dma_read_bandwidth_gb_s.items()):
            out[f"devices[{d.name}].dma_read_bandwidth_gb_s[{node}]"] = (bw, "GB/s")
    core = cal.core
    out["core.max_outstanding_misses"] = (float(core.max_outstanding_misses), "lines")
    out["core.prefetch_distance_lines"] = (float(core.prefetch_distance_lines), "lines")
    out["core.write_cost_factor"] = (core.write_cost_factor, "1")
    if core.write_latency_factor is not None:
        out["core.write_latency_factor"] = (core.write_latency_factor, "1")
    if core.write_allocate_evasion > 0:
        out["core.write_allocate_evasion"] = (core.write_allocate_evasion, "1")
    if core.outstanding_misses_per_core is not None:
        out["core.outstanding_misses_per_core"] = (float(core.outstanding_misses_per_core), "lines")
    if core.threads_per_core is not None:
        out["core.threads_per_core"] = (float(core.threads_per_core), "threads")
    if core.core_clock_ghz is not None:
        out["core.core_clock_ghz"] = (core.core_clock_ghz, "GHz")
    return out


def scaled_curve(curve: LoadedLatencyCurve, factor: float) -> LoadedLatencyCurve:
    """The same curve with every added latency multiplied by ``factor``."""
    return curve.model_copy(update={"added_latency_ns": [a * factor for a in curve.added_latency_ns]})


def _split_key(key: str) -> tuple[str, str, str]:
    """``"links[0->1].bandwidth_gb_s"`` -> ``("links", "0->1", "bandwidth_gb_s")``; ``core.x`` -> ``("core", "", "x")``."""
    head, _, attr = key.rpartition(".")
    if "[" in head:
        group, _, rest = head.partition("[")
        return group, rest.rstrip("]"), attr
    return head, "", attr


def with_parameter(cal: Calibration, key: str, value: float) -> Calibration:
    """``cal`` with the parameter ``key`` set to ``value`` (a curve key scales the curve to that saturation value).

    The result keeps ``cal``'s provenance; it is a what-if (used to probe which tables a parameter moves), not a
    calibration to save.
    """
    group, item, attr = _split_key(key)
    ints = {"size_bytes", "max_outstanding_misses", "prefetch_distance_lines", "outstanding_misses_per_core",
            "threads_per_core"}
    v: float | int = int(round(value)) if attr in ints else value
    if group == "core":
        return cal.model_copy(update={"core": cal.core.model_copy(update={attr: v})})
    if group == "controllers":
        new_c = []
        for c in cal.controllers:
            if str(c.node) == item:
                if attr == "curve":
                    assert c.curve is not None
                    c = c.model_copy(update={"curve": scaled_curve(c.curve, value / float(c.curve.added_ns(1.0)))})
                else:
                    c = c.model_copy(update={attr: v})
            new_c.append(c)
        return cal.model_copy(update={"controllers": new_c})
    if group == "links":
        return cal.model_copy(
            update={"links": [lt.model_copy(update={attr: v}) if f"{lt.src}->{lt.dst}" == item else lt for lt in cal.links]}
        )
    if group == "relays":
        return cal.model_copy(
            update={"relays": [r.model_copy(update={attr: v}) if str(r.node) == item else r for r in cal.relays]}
        )
    if group == "caches":
        return cal.model_copy(
            update={"caches": [c.model_copy(update={attr: v}) if c.name == item else c for c in cal.caches]}
        )
    if group == "devices":
        if attr.startswith("dma_read_bandwidth_gb_s["):
            node = int(attr[attr.index("[") + 1 : -1])
            return cal.model_copy(update={"devices": [
                d.model_copy(update={"dma_read_bandwidth_gb_s": d.dma_read_bandwidth_gb_s | {node: value}})
                if d.name == item else d
                for d in cal.devices
            ]})
        return cal.model_copy(
            update={"devices": [d.model_copy(update={attr: v}) if d.name == item else d for d in cal.devices]}
        )
    raise KeyError(key)


def nominal_priors(machine: Machine) -> Calibration:
    """The default priors: the machine file's nominal numbers, each labelled ``"machine file (nominal)"``.

    A memory node without controller timing gets numasim's defaults, labelled as such; curves are
    :func:`~numasim.timing.model.default_curve`, labelled as that shape.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> cal = nominal_priors(glueless(2))
    >>> prior_source(cal, "links[0->1].bandwidth_gb_s")
    'machine file (nominal)'
    """
    missing = {n.id for n in machine.nodes if n.has_memory and n.controller is None}
    if missing:
        from numasim.topology.model import MemoryController

        nodes = [
            n.model_copy(
                update={
                    "controller": MemoryController(
                        latency_ns=DEFAULT_CONTROLLER_LATENCY_NS, read_bandwidth_gb_s=DEFAULT_CONTROLLER_BANDWIDTH_GB_S
                    )
                }
            )
            if n.id in missing
            else n
            for n in machine.nodes
        ]
        machine = machine.model_copy(update={"nodes": nodes})
    base = nominal_calibration(machine, notes="priors: the machine file's nominal numbers")
    from numasim.timing.catalog.machine import catalog_timed_by
    from numasim.timing.model import PriorParameter

    # a machine file the catalog timed (topo import --cpu) holds the catalog's priors, not numasim's nominal numbers
    entry = catalog_timed_by(machine)
    file_source = NOMINAL_SOURCE if entry is None else f"machine file: the platform catalog's priors for {entry}"
    priors = []
    for key, (value, unit) in timing_parameters(base).items():
        group, item, attr = _split_key(key)
        if attr == "curve":
            source = CURVE_SOURCE
        elif group == "controllers" and int(item) in missing:
            source = DEFAULT_SOURCE
        elif group == "core":
            source = "numasim default (CoreTiming)"
        else:
            source = file_source
        priors.append(PriorParameter(parameter=key, value=value, unit=unit, source=source, why="prior"))
    prov = base.provenance.model_copy(update={"priors": priors})
    return base.model_copy(update={"provenance": prov})


def prior_source(priors: Calibration, key: str) -> str:
    """Where ``priors`` says the value of ``key`` comes from (its listed source, else the calibration itself)."""
    for p in priors.provenance.priors:
        if p.parameter == key:
            return p.source
    prov: Provenance = priors.provenance
    if prov.method == "nominal":
        return NOMINAL_SOURCE
    return f"{prov.method} calibration {priors.id}" + (f" ({prov.platform})" if prov.platform else "")

