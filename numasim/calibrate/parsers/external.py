"""Formats read by the topology layer's readers: ``numactl --hardware`` text and hwloc XML (with memattrs).

The calibration layer forwards to :mod:`numasim.topology.io.numactl` and :mod:`numasim.topology.io.hwloc`
instead of parsing these formats a second time. Both return a :class:`~numasim.topology.model.Machine`.
"""

from __future__ import annotations

from pathlib import Path

from numasim.topology.model import Machine

__all__ = ["parse_numactl_hardware", "parse_hwloc", "looks_like_numactl", "looks_like_hwloc"]


def looks_like_numactl(text: str) -> bool:
    return "available:" in text and "node distances:" in text


def looks_like_hwloc(text: str) -> bool:
    return "<topology" in text[:4000] and "<?xml" in text[:200]


def parse_numactl_hardware(path: str | Path) -> Machine:
    """The machine ``numactl --hardware`` text describes (nodes, cpus, sizes, SLIT)."""
    from numasim.topology.io.numactl import load_machine_numactl

    return load_machine_numactl(path)


def parse_hwloc(path: str | Path) -> Machine:
    """The machine of an hwloc XML file; hwloc memattrs (Latency, Bandwidth) become controller timing."""
    from numasim.topology.io.hwloc import read_hwloc_xml

    return read_hwloc_xml(Path(path))
