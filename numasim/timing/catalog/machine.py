"""A machine whose nominal numbers are its processor's catalog priors (what ``numasim topo import --cpu`` writes).

An imported topology (``numactl --hardware``, sysfs, hwloc) knows which cpus and how much memory each node has,
and the firmware's distances, but not what a link or a controller can do: the importer's nominal 20 GB/s links
and 100 ns controllers are placeholders. Given the processor, the platform catalog knows better: this puts the
catalog calibration's controllers, links, caches (with the catalog's associativity) into the machine file, and
says so in its description. Timing results still name a calibration: ``--catalog`` builds the same numbers as a
``method="catalog"`` calibration whose priors are listed one by one.
"""

from __future__ import annotations

from collections.abc import Mapping

from numasim.errors import CalibrationError
from numasim.timing.catalog.calibration import catalog_calibration, catalog_figures
from numasim.timing.catalog.cxl import load_cxl_catalog
from numasim.timing.catalog.cxl_timing import choose_cxl_device, cxl_figures
from numasim.timing.catalog.match import CatalogMatch, match_cpu
from numasim.timing.model import apply_calibration
from numasim.topology.model import CacheLevel, Machine
from numasim.units import GiB

__all__ = ["catalog_machine"]


def catalog_machine(
    machine: Machine,
    cpu: str | None = None,
    *,
    cxl_device: str | Mapping[int, str] | None = None,
    cxl_expanders: int = 0,
    cxl_socket: int = 0,
    cxl_size_bytes: int = 128 * GiB,
) -> Machine:
    """``machine`` with ``cpu_model = cpu`` (when given) and its timing numbers from the catalog.

    ``cxl_expanders`` adds that many CXL Type-3 expanders of the catalog device ``cxl_device`` (``None``: the
    catalog's default device, said in the description) behind the first node of socket ``cxl_socket``, each a
    cpu-less node of ``cxl_size_bytes`` whose controller, CXL link and SLIT row come from the catalog. CXL nodes
    the machine already has are timed with ``cxl_device`` too (one key for all, or ``{node: key}``).

    Raises the catalog's error (naming the string and close matches) when the processor is not in the catalog,
    and an error naming ``--cpu`` when the machine names no processor and none is given.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = catalog_machine(glueless(2), "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz")
    >>> m.cpu_model, round(m.nodes[0].controller.read_bandwidth_gb_s, 1), [c.name for c in m.caches]
    ('Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz', 125.2, ['L1d', 'L2'])
    >>> x = catalog_machine(glueless(2), "Xeon Platinum 8470", cxl_expanders=1, cxl_device="micron-cz120")
    >>> cxl = x.nodes[-1]
    >>> cxl.memory_kind.value, cxl.cpus, round(x.links[-1].bandwidth_gb_s, 1), x.slit()[0]
    ('cxl', [], 26.4, [10, 15, 19])
    """
    if cpu is not None:
        machine = machine.model_copy(update={"cpu_model": cpu})
    cal = catalog_calibration(machine, cxl_device=cxl_device)
    found = match_cpu(machine.cpu_model or "")
    # The catalog's associativity per level, so the engine's set-associative estimate uses the real ways.
    ways = {spec.level.lower(): spec.associativity for spec in found.platform.caches}
    shaped = machine.model_copy(update={"caches": [
        CacheLevel(name=c.name, size_bytes=c.size_bytes, latency_ns=c.latency_ns, scope=c.scope,
                   line_bytes=c.line_bytes, associativity=ways.get(c.name.lower()) or 8)
        for c in cal.caches
    ]}) if cal.caches else machine
    timed = apply_calibration(shaped, cal)
    note = (
        f"Nominal timing numbers are the platform catalog's priors for {found.label} "
        f"(numasim catalog show {found.platform.name!r}); nothing of this box was measured."
    )
    if cxl_expanders:
        timed, cxl_note = _add_expanders(timed, found, cxl_device, cxl_expanders, cxl_socket, cxl_size_bytes)
        note = f"{note} {cxl_note}"
    description = f"{machine.description}\n{note}" if machine.description else note
    return timed.model_copy(
        update={"calibration": machine.calibration, "description": description}
    )


def _add_expanders(
    timed: Machine, found: CatalogMatch, cxl_device: str | Mapping[int, str] | None, count: int, socket: int,
    size_bytes: int,
) -> tuple[Machine, str]:
    from numasim.topology.builders import with_cxl_expander

    if count < 0:
        raise CalibrationError(f"cxl_expanders = {count}: must be 0 or more")
    platform = found.platform
    if platform.cxl is None:
        raise CalibrationError(f"cxl_expanders = {count}: the catalog's {platform.name} has no CXL support")
    if isinstance(cxl_device, Mapping):
        raise CalibrationError("cxl_device: new expanders take one device name, not a per-node mapping")
    attach = next((n.id for n in timed.nodes if n.has_cpus and n.socket == socket), None)
    if attach is None:
        sockets = sorted({n.socket for n in timed.nodes if n.socket is not None})
        raise CalibrationError(f"cxl_socket = {socket}: no node with cpus on that socket (sockets: {sockets})")
    assert found.sku is not None
    fig = catalog_figures(platform, found.sku)
    device, why = choose_cxl_device(None, cxl_device, load_cxl_catalog())
    cf = cxl_figures(device, fig.local_ns, fig.local_source, why)
    for _ in range(count):
        # The catalog's numbers go in before the SLIT row is derived, so the firmware distances match them.
        timed = with_cxl_expander(
            timed, attach, size_bytes, link_latency_ns=cf.link_latency_ns, link_bandwidth_gb_s=cf.link_bandwidth_gb_s,
            device_latency_ns=cf.controller_latency_ns, device_bandwidth_gb_s=cf.controller_read_gb_s,
        )
    default = "" if cxl_device is not None else " (the catalog's default device: none was named)"
    return timed, (f"{count} CXL expander(s) {device.name}{default} added behind node {attach} "
                   f"(numasim catalog cxl), timed from the catalog's CXL section.")
