"""Infer a link graph from a SLIT distance table, so that the derived SLIT reproduces the table exactly.

Readers of numactl text, sysfs trees and hwloc XML only see the firmware's distance table; the simulator needs
links with latencies. :func:`from_distance_matrix` builds the smallest link set consistent with the table:

* every node gets the same controller latency ``L`` (the table is relative to the local access, so a uniform
  ``L`` is the only choice the table itself supports);
* the *wanted* interconnect latency from ``i`` to ``j`` is ``L * (d_ij - 10) / 10``, so that
  ``round(10 * (L + path) / L) == d_ij``;
* a direct link ``i - j`` is kept only when no path through other nodes is as short (redundant links are
  pruned: a 4-node ring with 10/20/30 distances comes back as a ring, not a full mesh). Asymmetric tables
  put ``d_ji`` in the link's ``*_reverse`` fields;
* where the table violates the triangle inequality (a detour through ``k`` would be *shorter* than ``d_ij``),
  the direct link is kept and an explicit :class:`~numasim.topology.model.Route` forces it, because the
  kernel's table says so even if shortest-path routing would not.

Shortest paths are computed on the integer excess ``d - 10`` (exact, no float ties); latencies are then
``L/10`` times an integer, and the derived SLIT divides back to an exact integer, so float rounding never
moves a value across the ``.5`` boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from numasim.errors import TopologyError
from numasim.topology.builders import DEFAULT_CONTROLLER_BANDWIDTH_GB_S, DEFAULT_LINK_BANDWIDTH_GB_S
from numasim.topology.model import (
    LOCAL_DISTANCE,
    Link,
    LinkKind,
    Machine,
    MemoryController,
    Node,
    Route,
)
from numasim.units import GiB

__all__ = ["from_distance_matrix", "check_distance_matrix", "DEFAULT_INFER_CONTROLLER_LATENCY_NS"]

DEFAULT_INFER_CONTROLLER_LATENCY_NS = 100.0
"""Controller latency given to inferred machines: 100 ns makes every link latency a whole number of ns."""


def check_distance_matrix(
    distances: Sequence[Sequence[int]] | np.ndarray, field: str = "distances"
) -> np.ndarray:
    """Validate a SLIT (square, integer, diagonal 10, off-diagonal 11..255) and return it as an int array.

    Examples
    --------
    >>> check_distance_matrix([[10, 21], [21, 10]]).tolist()
    [[10, 21], [21, 10]]
    """
    try:
        d = np.asarray(distances)
    except ValueError:
        raise TopologyError(field, distances, "rows of different lengths") from None
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] == 0:
        raise TopologyError(field, np.asarray(distances).tolist(), "must be a non-empty square table")
    if d.dtype == object:  # an int beyond 64 bits, or a value that is not a number at all
        raise TopologyError(field, d.tolist(), "distances must be whole numbers 10..255")
    if not np.issubdtype(d.dtype, np.integer):
        if not np.all(np.isfinite(d)) or not np.all(d == np.round(d)):
            raise TopologyError(field, d.tolist(), "distances must be whole numbers")
        d = d.astype(np.int64)
    d = d.astype(np.int64)
    n = d.shape[0]
    for i in range(n):
        if d[i, i] != LOCAL_DISTANCE:
            raise TopologyError(f"{field}[{i}][{i}]", int(d[i, i]), f"the diagonal must be {LOCAL_DISTANCE}")
    off = ~np.eye(n, dtype=bool)
    bad = np.argwhere(off & ((d <= LOCAL_DISTANCE) | (d > 255)))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise TopologyError(f"{field}[{i}][{j}]", int(d[i, j]), "remote distances must be 11..255")
    return d


def _all_pairs_shortest(excess: np.ndarray) -> np.ndarray:
    # Floyd-Warshall on integers, vectorised over (i, j) for each k: 64 nodes is 64 numpy steps.
    s = excess.copy()
    for k in range(s.shape[0]):
        np.minimum(s, s[:, k, None] + s[None, k, :], out=s)
    return s


def _essential_and_forced(excess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Directed edges that must exist (``essential``) and the subset that needs a forced route."""
    n = excess.shape[0]
    s = _all_pairs_shortest(excess)
    forced = excess > s  # the table wants a longer i->j than the detour: force the direct link
    # i->j is redundant when some k != i, j lies on a shortest path of the same length.
    via = s[:, None, :] + s.T[None, :, :]  # via[i, j, k] = s[i, k] + s[k, j]
    idx = np.arange(n)
    via[idx, :, idx] = np.iinfo(np.int64).max  # k == i
    via[:, idx, idx] = np.iinfo(np.int64).max  # k == j
    redundant = (via == excess[:, :, None]).any(axis=2) & ~forced
    essential = ~redundant
    np.fill_diagonal(essential, False)
    return essential, forced


def from_distance_matrix(
    distances: Sequence[Sequence[int]] | np.ndarray,
    *,
    name: str,
    node_ids: Sequence[int] | None = None,
    nodes: Sequence[Node] | None = None,
    cpus_per_node: int = 4,
    memory_bytes: int = 16 * GiB,
    controller_latency_ns: float = DEFAULT_INFER_CONTROLLER_LATENCY_NS,
    controller_bandwidth_gb_s: float = DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    link_bandwidth_gb_s: float = DEFAULT_LINK_BANDWIDTH_GB_S,
    link_kind: LinkKind = LinkKind.OTHER,
    firmware_slit: Sequence[Sequence[int]] | None = None,
    description: str = "",
    source: str = "",
) -> Machine:
    """A machine whose derived SLIT equals ``distances`` exactly.

    Parameters
    ----------
    distances : square table of int
        The SLIT, rows and columns in node order (``distances[i][j]``: from node ``i`` to memory of ``j``).
    name : str
        Machine name.
    node_ids : sequence of int, optional
        Node ids in table order (default ``0..n-1``). Ignored when ``nodes`` is given.
    nodes : sequence of Node, optional
        Use these nodes (cpus, memory, socket ...) instead of generated ones; memory nodes without a
        controller get the uniform one.
    cpus_per_node, memory_bytes : int
        Shape of generated nodes (``cpus_per_node`` consecutive cpus each).
    controller_latency_ns : float
        The uniform local latency ``L``; link latencies are ``L * (d - 10) / 10``.
    firmware_slit : table of int, optional
        Stored as the machine's ``firmware_slit`` (readers pass the table they read, unchanged).

    Examples
    --------
    >>> m = from_distance_matrix([[10, 20, 30], [20, 10, 20], [30, 20, 10]], name="line")
    >>> [(link.a, link.b, link.latency_ns) for link in m.links]
    [(0, 1, 100.0), (1, 2, 100.0)]
    >>> m.slit()
    [[10, 20, 30], [20, 10, 20], [30, 20, 10]]
    """
    d = check_distance_matrix(distances)
    n = d.shape[0]
    if controller_latency_ns <= 0:
        raise TopologyError("controller_latency_ns", controller_latency_ns, "must be > 0")
    ctrl = MemoryController(latency_ns=controller_latency_ns, read_bandwidth_gb_s=controller_bandwidth_gb_s)
    if nodes is not None:
        if len(nodes) != n:
            raise TopologyError("nodes", [nd.id for nd in nodes], f"{len(nodes)} nodes for a {n}x{n} table")
        node_list = [
            nd.model_copy(update={"controller": ctrl}) if nd.has_memory and nd.controller is None else nd
            for nd in nodes
        ]
    else:
        ids = list(node_ids) if node_ids is not None else list(range(n))
        if len(ids) != n:
            raise TopologyError("node_ids", ids, f"{len(ids)} ids for a {n}x{n} table")
        node_list = [
            Node(
                id=nid,
                cpus=list(range(k * cpus_per_node, (k + 1) * cpus_per_node)),
                memory_bytes=memory_bytes,
                controller=ctrl,
            )
            for k, nid in enumerate(ids)
        ]
    ids = [nd.id for nd in node_list]
    excess = d - LOCAL_DISTANCE
    essential, forced = _essential_and_forced(excess)
    unit_ns = controller_latency_ns / LOCAL_DISTANCE
    links: list[Link] = []
    for i in range(n):
        for j in range(i + 1, n):
            if not (essential[i, j] or essential[j, i]):
                continue
            fwd = float(unit_ns * excess[i, j])
            back = float(unit_ns * excess[j, i])
            links.append(
                Link(
                    a=ids[i],
                    b=ids[j],
                    kind=link_kind,
                    latency_ns=fwd,
                    bandwidth_gb_s=link_bandwidth_gb_s,
                    latency_ns_reverse=back if back != fwd else None,
                )
            )
    routes = [Route(src=ids[i], dst=ids[j], path=[ids[i], ids[j]]) for i, j in np.argwhere(forced).tolist()]
    return Machine(
        name=name,
        description=description,
        source=source,
        nodes=node_list,
        links=links,
        routes=routes,
        firmware_slit=[list(map(int, row)) for row in firmware_slit] if firmware_slit is not None else None,
    )
