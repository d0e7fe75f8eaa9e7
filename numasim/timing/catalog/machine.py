"""A machine whose nominal numbers are its processor's catalog priors (what ``numasim topo import --cpu`` writes).

An imported topology (``numactl --hardware``, sysfs, hwloc) knows which cpus and how much memory each node has,
and the firmware's distances, but not what a link or a controller can do: the importer's nominal 20 GB/s links
and 100 ns controllers are placeholders. Given the processor, the platform catalog knows better: this puts the
catalog calibration's controllers, links, caches (with the catalog's associativity) into the machine file, and
says so in its description. Timing results still name a calibration: ``--catalog`` builds the same numbers as a
``method="catalog"`` calibration whose priors are listed one by one.
"""

from __future__ import annotations

from numasim.timing.catalog.calibration import catalog_calibration
from numasim.timing.catalog.match import match_cpu
from numasim.timing.model import apply_calibration
from numasim.topology.model import CacheLevel, Machine

__all__ = ["catalog_machine"]


def catalog_machine(machine: Machine, cpu: str | None = None) -> Machine:
    """``machine`` with ``cpu_model = cpu`` (when given) and its timing numbers from the catalog.

    Raises the catalog's error (naming the string and close matches) when the processor is not in the catalog,
    and an error naming ``--cpu`` when the machine names no processor and none is given.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = catalog_machine(glueless(2), "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz")
    >>> m.cpu_model, round(m.nodes[0].controller.read_bandwidth_gb_s, 1), [c.name for c in m.caches]
    ('Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz', 125.2, ['L1d', 'L2'])
    """
    if cpu is not None:
        machine = machine.model_copy(update={"cpu_model": cpu})
    cal = catalog_calibration(machine)
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
    description = f"{machine.description}\n{note}" if machine.description else note
    return timed.model_copy(
        update={"calibration": machine.calibration, "description": description}
    )
