"""The two distance notions of a machine, kept apart on purpose.

* :func:`slit` is what the kernel sees (ACPI SLIT): the machine's ``firmware_slit`` when given, else derived
  from the timing as ``round(10 * latency[i][j] / latency[i][i])``. Firmware can lie: Drepper's 4-socket
  Opteron reports 20 for every remote node of a 2-D hypercube whose far corner is two hops away.
* :func:`timing_distances` is always derived from the links, whatever the firmware says.
"""

from __future__ import annotations

import numpy as np

from numasim.errors import TopologyError
from numasim.topology.model import LOCAL_DISTANCE, Machine

__all__ = ["slit", "timing_distances", "slit_from_latency"]


def slit_from_latency(latency_ns: np.ndarray) -> list[list[int]]:
    """``round(10 * remote / local)`` per row, local = the row's diagonal (ACPI's relative distance).

    Rounding is half-up (as firmware tables are produced), and a remote distance is never below 11.

    Examples
    --------
    >>> slit_from_latency(np.array([[80.0, 168.0], [168.0, 80.0]]))
    [[10, 21], [21, 10]]
    """
    lat = np.asarray(latency_ns, dtype=float)
    rel = LOCAL_DISTANCE * lat / np.diag(lat)[:, None]
    out = np.maximum(np.floor(rel + 0.5).astype(np.int64), LOCAL_DISTANCE + 1)
    np.fill_diagonal(out, LOCAL_DISTANCE)
    return out.tolist()


def timing_distances(machine: Machine) -> list[list[int]]:
    """The SLIT the link timing implies, regardless of what the firmware reports.

    A memoryless node has no controller; it is given the mean controller latency of the memory nodes so that
    its row and column are still defined (the kernel needs a distance for every pair of nodes).
    """
    from numasim.topology.routing import routing

    r = routing(machine)
    ctrl = [n.controller.latency_ns if n.controller is not None else np.nan for n in machine.nodes]
    known = [c for c in ctrl if np.isfinite(c)]
    if not known:
        raise TopologyError("nodes[*].controller", None, "no memory controller latency to derive distances from")
    ref = float(np.mean(known))
    ctrl_ns = np.array([c if np.isfinite(c) else ref for c in ctrl])
    ids = machine.node_ids
    path_ns = np.array([[r.path_latency_ns(a, b) for b in ids] for a in ids])
    return slit_from_latency(ctrl_ns[None, :] + path_ns)


def slit(machine: Machine) -> list[list[int]]:
    """The SLIT table in node-id order (firmware's if the machine carries one)."""
    if machine.firmware_slit is not None:
        return [list(row) for row in machine.firmware_slit]
    return timing_distances(machine)
