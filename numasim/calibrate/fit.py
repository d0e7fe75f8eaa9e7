"""Fit controller and link models to measured tables (least squares with bounds).

Idle latency is linear in the parameters: ``latency(i, j) = ctrl_j + sum of link (and switch) latencies on
route(i, j)``, the same sum :func:`numasim.topology.routing.latency_table_ns` computes, so the fit is a bounded
linear least-squares problem (:func:`scipy.optimize.least_squares`, all latencies > 0). When the measured cells
cannot pin every parameter (a design matrix without full column rank), the fitter adds one named assumption at
a time, only for the parameters the null space touches, until they can be pinned:

1. the two directions of a link have the same latency;
2. all memory controllers have the same idle latency;
3. all links of one kind have the same latency;
4. (last resort) a weak pull towards the machine file's nominal value.

Bandwidth follows the bottleneck model: ``bandwidth(i, j) = min(ctrl_read_j, links on route(j, i))``: read data
flows from the memory node back to the initiator, and that is the direction the engine charges. A link's
bandwidth is pinned by the smallest link-bound cell whose route crosses it; controller read and write
bandwidth come from mlc's peak injection mixes, ``1 / bw(f) = f / R + (1 - f) / W`` for a read fraction ``f``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from numasim.calibrate.parsers._text import NodeMatrix
from numasim.calibrate.result import CellResidual, FitResult, FittedParameter
from numasim.errors import CalibrationError
from numasim.topology.builders import (
    DEFAULT_CONTROLLER_BANDWIDTH_GB_S,
    DEFAULT_CONTROLLER_LATENCY_NS,
)
from numasim.topology.model import Machine, Vertex
from numasim.topology.routing import Routing, routing

__all__ = [
    "LatencyFit",
    "BandwidthFit",
    "fit_latency",
    "fit_bandwidth",
    "fit_peak_mix",
    "peak_mix_gb_s",
    "READ_FRACTION",
    "NON_TEMPORAL",
    "mix_write_cost",
    "slit_warnings",
]

READ_FRACTION = {"all_reads": 1.0, "3:1": 2 / 3, "2:1": 0.5, "1:1": 0.0, "stream_triad": 2 / 3}
"""Share of the operations that are loads in each of mlc's traffic mixes: mlc names a mix by what reaches memory, a
store's read for ownership counted as a read, so its 3:1 is two loads and a store, 2:1 one of each, 1:1 stores only
(:data:`numasim.tools.mlc.MIXES`; stream-triad: two loads, one store)."""
NON_TEMPORAL = frozenset({"stream_triad"})
"""The mixes whose stores are non-temporal (mlc's stream-triad-like ``-W10``): a line written once, no read for
ownership, whatever the calibration's write cost factor."""

Edge = tuple[Vertex, Vertex]
Atom = tuple[str, object]  # ("ctrl", node) | ("link", (u, v)) | ("switch", name) | ("relay", node)


def _atom_name(a: Atom) -> str:
    kind, key = a
    if kind == "ctrl":
        return f"controllers[{key}].latency_ns"
    if kind == "link":
        edge: Edge = key  # type: ignore[assignment]
        return f"links[{edge[0]}->{edge[1]}].latency_ns"
    if kind == "relay":
        return f"relays[{key}].latency_ns"
    raise AssertionError(f"unknown latency atom {a!r}")


def _nominal_ctrl_latency(machine: Machine, node: int) -> float:
    c = machine.node(node).controller
    return c.latency_ns if c is not None else DEFAULT_CONTROLLER_LATENCY_NS


@dataclass
class LatencyFit:
    """Fitted idle latencies: per controller, per directed link, per relaying node; plus the fit report.

    A switch's traversal latency is not fitted: a calibration has no field for it, so it stays the machine
    file's and the links next to the switch carry what the cells say beyond it.
    """

    controller_latency_ns: dict[int, float] = field(default_factory=dict)
    link_latency_ns: dict[Edge, float] = field(default_factory=dict)
    relay_latency_ns: dict[int, float] = field(default_factory=dict)
    result: FitResult = field(default_factory=FitResult)


def _cells(machine: Machine, matrices: Sequence[NodeMatrix], table: str) -> list[tuple[int, int, float]]:
    ids = set(machine.node_ids)
    out = []
    for m in matrices:
        for i, j, v in m.cells():
            if i not in ids or j not in ids:
                raise CalibrationError(
                    f"{table}: cell ({i}, {j}) names a node that machine {machine.name} lacks (nodes {sorted(ids)})"
                )
            if not machine.node(j).has_memory:
                raise CalibrationError(f"{table}: cell ({i}, {j}) targets memoryless node {j} of {machine.name}")
            if v <= 0:
                raise CalibrationError(f"{table}: cell ({i}, {j}) = {v} is not positive")
            out.append((i, j, v))
    if not out:
        raise CalibrationError(f"{table}: no measured cells")
    return out


def _cxl_over_sockets(
    machine: Machine, cells: list[tuple[int, int, float]]
) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """The cells to fit, and those left out: a CXL node's cells read from another socket than the node's, when
    a cell from its own socket is measured (that one pins the CXL link; the others would only bend the rest)."""
    from numasim.topology.model import MemoryKind

    socket = {n.id: n.socket for n in machine.nodes}
    cxl = {n.id for n in machine.nodes if n.memory_kind is MemoryKind.CXL and n.socket is not None}
    own = {j for i, j, _ in cells if j in cxl and socket.get(i) == socket[j]}
    out = [(i, j, v) for i, j, v in cells if j in own and socket.get(i) is not None and socket.get(i) != socket[j]]
    return [c for c in cells if c not in out], out


def _null_atoms(a: np.ndarray, tol: float = 1e-9) -> set[int]:
    """Columns of ``a`` that the null space touches (parameters the data cannot pin)."""
    if a.shape[1] == 0:
        return set()
    _, s, vt = np.linalg.svd(a, full_matrices=True)
    rank = int(np.sum(s > tol * max(1.0, s.max() if s.size else 1.0)))
    null = vt[rank:]
    if null.size == 0:
        return set()
    return {int(k) for k in np.flatnonzero(np.abs(null).max(axis=0) > 1e-7)}


def fit_latency(
    machine: Machine,
    matrices: Sequence[NodeMatrix],
    *,
    routes: Routing | None = None,
    resolution_ns: float = 0.1,
    bootstrap: int = 0,
    seed: int = 0,
    table: str = "latency_matrix",
    tie: Sequence[str] = (),
) -> LatencyFit:
    """Fit controller and link latencies to measured idle-latency matrices (repeats are stacked).

    Parameters
    ----------
    machine : Machine
        Gives the structure (routes); its nominal numbers start the fit and fill what no cell crosses.
    matrices : list of NodeMatrix
        Rows are initiator node ids, columns target node ids, values in ns; ``nan`` cells are skipped.
    resolution_ns : float
        Print resolution of the tool; with no residual degrees of freedom the uncertainty comes from it.
    bootstrap : int
        If > 0, the standard errors come from this many resamples of the cells (seeded) instead of the
        linearised covariance.
    tie : list of str
        Ties to impose up front, when the data say nothing per link (e.g. per-hop ratios):
        ``"link_directions"``, ``"controllers"``, ``"links_by_kind"``, ``"relays"``.

    The residuals are relative (each cell weighted by 1 / measured), since the targets are percentage errors.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = NodeMatrix([0, 1], [0, 1], np.array([[61.7, 115.1], [114.6, 61.2]]), "ns")
    >>> fit = fit_latency(glueless(2), [m])
    >>> round(fit.link_latency_ns[(0, 1)], 1), round(fit.controller_latency_ns[1], 1)
    (53.9, 61.2)
    """
    r = routes or routing(machine)
    cells, left_out = _cxl_over_sockets(machine, _cells(machine, matrices, table))
    # Parameters ("atoms") are every controller and link direction some measured route needs.
    atoms: list[Atom] = []
    index: dict[Atom, int] = {}

    def atom(a: Atom) -> int:
        if a not in index:
            index[a] = len(atoms)
            atoms.append(a)
        return index[a]

    result = FitResult()
    if left_out:
        result.assumptions.append(
            f"{table}: cells {', '.join(f'({i}, {j})' for i, j, _ in left_out)} (a CXL node read from another "
            "socket than its own) not fitted: the route is the socket link then the CXL link, with no term of its "
            "own, and a CXL read from across sockets can cost more than that (a Silver 4410Y's: 171 ns more than "
            "from its own socket, where DRAM's costs 67); fitting them would bend the socket link and the local "
            "latencies the other cells pin. They are predictions"
        )
    relaying = {n.id for n in machine.nodes if n.relay_latency_ns > 0}
    # A switch's traversal is a fixed part of every route through it (the machine file's; a calibration cannot
    # hold another), so it is taken off the measured cells rather than fitted and then dropped.
    switch_ns = {s.name: s.latency_ns for s in machine.switches}
    offsets: list[float] = []
    rows: list[list[int]] = []
    for i, j, _ in cells:
        cols = [atom(("ctrl", j))]
        path = r.path(i, j)
        cols += [atom(("link", e)) for e in r.edges(i, j)]
        offsets.append(sum(switch_ns.get(v, 0.0) for v in path[1:-1] if isinstance(v, str)))
        # Relaying through an intermediate node costs time only where the machine file says the node relays.
        cols += [atom(("relay", v)) for v in path[1:-1] if isinstance(v, int) and v in relaying]
        rows.append(cols)
    a_atoms = np.zeros((len(cells), len(atoms)))
    for k, cols in enumerate(rows):
        for c in cols:
            a_atoms[k, c] += 1.0
    y_cells = np.array([v for _, _, v in cells])
    offset = np.array(offsets)
    if np.any(offset >= y_cells):
        k = int(np.argmax(offset >= y_cells))
        i, j, v = cells[k]
        raise CalibrationError(
            f"{table}: cell ({i}, {j}) = {v} ns is no more than the {offset[k]:g} ns its route spends in the "
            f"machine file's switches ({machine.name}): lower the switches' latency_ns"
        )
    y = y_cells - offset
    if np.any(offset > 0):
        result.assumptions.append(
            "switch traversal latencies kept at the machine file's "
            f"({', '.join(f'{n} {v:g} ns' for n, v in switch_ns.items() if v > 0)}); the links carry the rest"
        )

    nominal = np.array([_nominal_atom(machine, r, a) for a in atoms])
    # Links of one kind that join different sorts of vertex are different hardware: an IO die's node-to-hub
    # links and its socket-to-socket (xGMI) links are both Infinity Fabric, but only the latter leaves the package.
    hubs = set(switch_ns)

    def role(link_a: object, link_b: object) -> str:
        ends = (link_a in hubs) + (link_b in hubs)
        return ("node-node", "node-hub", "hub-hub")[ends]

    kinds = {(link.a, link.b): f"{link.kind} {role(link.a, link.b)}" for link in machine.links}
    kinds |= {(b, a): k for (a, b), k in kinds.items()}

    # Groups: atoms tied together share one fitted value.
    group = list(range(len(atoms)))

    def design() -> tuple[np.ndarray, list[int]]:
        labels = sorted(set(group))
        g = np.zeros((len(atoms), len(labels)))
        for k, lab in enumerate(group):
            g[k, labels.index(lab)] = 1.0
        return a_atoms @ g, labels

    def merge(members: list[int]) -> None:
        if len(members) < 2:
            return
        target = group[members[0]]
        olds = {group[m] for m in members}
        for k in range(len(group)):
            if group[k] in olds:
                group[k] = target

    def weak_atoms() -> set[int]:
        a, labels = design()
        weak_groups = {labels[c] for c in _null_atoms(a)}
        return {k for k in range(len(atoms)) if group[k] in weak_groups}

    tied_note: dict[int, str] = {}
    for how in tie:
        if how == "link_directions":
            for k, (kind_k, key_k) in enumerate(atoms):
                if kind_k == "link":
                    e: Edge = key_k  # type: ignore[assignment]
                    other_k = index.get(("link", (e[1], e[0])))
                    if other_k is not None:
                        merge([k, other_k])
                        tied_note[k] = "tied: both directions of the link assumed equal"
            result.assumptions.append("both directions of every link assumed to have the same latency (imposed)")
        elif how == "controllers":
            members = [k for k in range(len(atoms)) if atoms[k][0] == "ctrl"]
            merge(members)
            for k in members:
                tied_note[k] = "tied: all controllers assumed equal"
            result.assumptions.append("all memory controllers assumed to have the same idle latency (imposed)")
        elif how == "relays":
            members = [k for k in range(len(atoms)) if atoms[k][0] == "relay"]
            merge(members)
            for k in members:
                tied_note[k] = "tied: all relays assumed equal"
            if members:
                result.assumptions.append("every relaying node assumed to add the same latency (imposed)")
        elif how == "links_by_kind":
            groups_by_kind: dict[str | None, list[int]] = {}
            for k in range(len(atoms)):
                if atoms[k][0] == "link":
                    groups_by_kind.setdefault(kinds.get(atoms[k][1]), []).append(k)  # type: ignore[call-overload]
            for lk, members in groups_by_kind.items():
                merge(members)
                for k in members:
                    tied_note[k] = f"tied: all {lk!s} links assumed equal"
            result.assumptions.append("all links of one kind assumed to have the same latency (imposed)")
        else:
            raise CalibrationError(
                f"tie = {how!r}: expected 'link_directions', 'controllers', 'links_by_kind' or 'relays'"
            )
    result.assumptions.append(
        "a controller's idle latency is the same for local and remote requesters; the whole remote-minus-local "
        "difference is put on the links of the route"
    )
    weak = weak_atoms()
    if weak:  # 1. symmetric links
        done = set()
        for k in sorted(weak):
            kind, key = atoms[k]
            if kind != "link" or k in done:
                continue
            edge: Edge = key  # type: ignore[assignment]
            other = index.get(("link", (edge[1], edge[0])))
            if other is not None:
                merge([k, other])
                done |= {k, other}
                tied_note[k] = tied_note[other] = "tied: both directions of the link assumed equal"
                result.assumptions.append(
                    f"link {edge[0]}<->{edge[1]}: both directions assumed to have the same latency"
                )
        weak = weak_atoms()
    if weak and any(atoms[k][0] == "ctrl" for k in weak):  # 2. equal controllers
        ctrls = [k for k in range(len(atoms)) if atoms[k][0] == "ctrl"]
        merge(ctrls)
        for k in ctrls:
            tied_note[k] = "tied: all controllers assumed to have the same idle latency"
        result.assumptions.append(
            "controller vs link latency cannot be separated from these cells: all memory controllers assumed "
            f"to have the same idle latency (nodes {sorted(atoms[k][1] for k in ctrls)})"  # type: ignore[type-var]
        )
        weak = weak_atoms()
    if weak:  # 3. links of one kind equal
        by_kind: dict[str | None, list[int]] = {}
        for k in range(len(atoms)):
            if atoms[k][0] == "link":
                by_kind.setdefault(kinds.get(atoms[k][1]), []).append(k)  # type: ignore[call-overload]
        for link_kind, members in by_kind.items():
            if any(m in weak for m in members):
                merge(members)
                for k in members:
                    tied_note[k] = f"tied: all {link_kind!s} links assumed equal"
                result.assumptions.append(f"all {link_kind} links assumed to have the same latency")
        weak = weak_atoms()
    a, labels = design()
    x0 = np.array([np.mean([nominal[k] for k in range(len(atoms)) if group[k] == lab]) for lab in labels])
    prior_rows = sorted({labels.index(group[k]) for k in weak})
    if prior_rows:
        names = ", ".join(_atom_name(atoms[k]) for k in sorted(weak))
        result.assumptions.append(f"not identifiable even after tying; pulled weakly towards the machine file: {names}")

    def resid(x: np.ndarray) -> np.ndarray:
        res = (a @ x - y) / y_cells
        if prior_rows:
            res = np.concatenate([res, 1e-3 * (x[prior_rows] - x0[prior_rows])])
        return res

    sol = least_squares(resid, x0, bounds=(1e-3, np.inf), method="trf", x_scale=np.maximum(x0, 1.0))
    x = sol.x
    fitted = a @ x + offset
    # Uncertainty: linearised covariance from the residual scatter, floored by the tool's print resolution.
    n, p = a.shape
    rank = int(np.linalg.matrix_rank(a))
    dof = n - rank
    floor = resolution_ns / math.sqrt(12.0) / float(np.median(y_cells))
    aw = a / y_cells[:, None]
    if dof > 0:
        sigma = max(math.sqrt(float(np.sum(((fitted - y_cells) / y_cells) ** 2)) / dof), floor)
    else:
        sigma = floor
        worst_ns = float(np.max(np.abs(fitted - y_cells))) if n else 0.0
        if worst_ns <= 2 * resolution_ns:
            result.warnings.append(
                f"{table}: {n} cells for {rank} free parameters: exactly determined, so the residuals are zero by "
                f"construction and the uncertainty reflects only the print resolution ({resolution_ns} ns)"
            )
        else:  # a latency held at its lower bound: the cells ask for a negative one
            at_bound = [lab for lab, v in zip(labels, x, strict=True) if v <= 2e-3]
            result.warnings.append(
                f"{table}: {n} cells for {rank} free parameters, yet the fit misses a cell by {worst_ns:.3g} ns: "
                f"the cells ask for a negative latency ({len(at_bound)} parameter(s) held at the 0.001 ns bound)"
            )
    cov = sigma**2 * np.linalg.pinv(aw.T @ aw)
    stderr = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    if bootstrap > 0:
        stderr = _bootstrap_latency(aw, y / y_cells, x, bootstrap, seed)
    fit = LatencyFit(result=result)
    for k, at in enumerate(atoms):
        col = labels.index(group[k])
        value = float(x[col])
        kind, key = at
        if kind == "ctrl":
            fit.controller_latency_ns[int(key)] = value  # type: ignore[call-overload]
        elif kind == "link":
            fit.link_latency_ns[key] = value  # type: ignore[index]
        else:
            fit.relay_latency_ns[int(key)] = value  # type: ignore[call-overload]
        result.parameters.append(
            FittedParameter(
                _atom_name(at), value, "ns", float(stderr[col]), identifiable=k not in weak, note=tied_note.get(k, "")
            )
        )
    for (i, j, v), f in zip(cells, fitted, strict=True):
        result.residuals.append(CellResidual(table, str(i), str(j), v, float(f), "ns"))
    # A link direction no measured route crosses takes its reverse direction's fitted latency when that exists
    # (links are close to symmetric; the machine file's nominal number would be a worse guess).
    for link in machine.links:
        for a_end, b_end in ((link.a, link.b), (link.b, link.a)):
            if (a_end, b_end) not in fit.link_latency_ns and (b_end, a_end) in fit.link_latency_ns:
                value = fit.link_latency_ns[(b_end, a_end)]
                fit.link_latency_ns[(a_end, b_end)] = value
                index[("link", (a_end, b_end))] = -1
                result.parameters.append(
                    FittedParameter(
                        f"links[{a_end}->{b_end}].latency_ns", value, "ns", math.nan, False, "copied from the reverse direction"
                    )
                )
                result.assumptions.append(
                    f"link {a_end}->{b_end}: no measured route crosses it; latency copied from {b_end}->{a_end}"
                )
    _untouched_warnings(machine, index, result, table)
    return fit


def _nominal_atom(machine: Machine, r: Routing, a: Atom) -> float:
    kind, key = a
    if kind == "relay":
        return max(machine.node(int(key)).relay_latency_ns, 1.0)  # type: ignore[call-overload]
    if kind == "ctrl":
        return _nominal_ctrl_latency(machine, int(key))  # type: ignore[call-overload]
    edge: Edge = key  # type: ignore[assignment]
    return float(r._graph.edges[edge]["latency_ns"])


def _bootstrap_latency(a: np.ndarray, y: np.ndarray, x: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(y), len(y))
        ab, yb = a[pick], y[pick]
        if np.linalg.matrix_rank(ab) < a.shape[1]:
            continue
        sol = least_squares(lambda z, ab=ab, yb=yb: ab @ z - yb, x, bounds=(1e-3, np.inf))
        draws.append(sol.x)
    if len(draws) < 2:
        return np.full(a.shape[1], np.nan)
    return np.asarray(np.std(np.array(draws), axis=0, ddof=1))


def _untouched_warnings(machine: Machine, index: dict[Atom, int], result: FitResult, table: str) -> None:
    for link in machine.links:
        for a_end, b_end in ((link.a, link.b), (link.b, link.a)):
            if ("link", (a_end, b_end)) not in index:
                result.warnings.append(
                    f"{table}: link {a_end}->{b_end} is crossed by no measured route; kept its machine-file value"
                )
    for n in machine.nodes:
        if n.has_memory and ("ctrl", n.id) not in index:
            result.warnings.append(f"{table}: no measured cell targets node {n.id}; its controller keeps the machine-file value")


def slit_warnings(machine: Machine, matrices: Sequence[NodeMatrix]) -> list[str]:
    """Where the firmware SLIT disagrees with the measured latency ratios (``round(10 * remote / local)``)."""
    if machine.firmware_slit is None:
        return []
    out = []
    ids = machine.node_ids
    for m in matrices:
        for i in m.rows:
            if i not in m.cols or i not in ids:
                continue
            local = m.cell(i, i)
            if not np.isfinite(local):
                continue
            for j in m.cols:
                if j == i or j not in ids:
                    continue
                v = m.cell(i, j)
                if not np.isfinite(v):
                    continue
                implied = int(math.floor(10 * v / local + 0.5))
                firmware = machine.firmware_slit[ids.index(i)][ids.index(j)]
                if abs(implied - firmware) >= 2:
                    out.append(
                        f"firmware SLIT[{i}][{j}] = {firmware} but measured latency ratio {v:.1f}/{local:.1f} ns "
                        f"implies {implied}"
                    )
        break
    return out


# ---------------------------------------------------------------------------------------------- bandwidth


@dataclass
class BandwidthFit:
    """Fitted bandwidths (GB/s): controller read/write per node, link per direction; plus the fit report."""

    controller_read_gb_s: dict[int, float] = field(default_factory=dict)
    controller_write_gb_s: dict[int, float] = field(default_factory=dict)
    link_bandwidth_gb_s: dict[Edge, float] = field(default_factory=dict)
    core_die_read_gb_s: float | None = None
    """Per core die, when the peak is the dies' (``Machine.core_dies``): their ports' read bandwidth."""
    core_die_write_gb_s: float | None = None
    result: FitResult = field(default_factory=FitResult)


def peak_mix_gb_s(
    read_fraction: np.ndarray, read_gb_s: float, write_gb_s: float, write_cost_factor: float | np.ndarray = 1.0
) -> np.ndarray:
    """What mlc reports for a mix whose operations are a share ``f`` loads, the rest stores, at controllers that
    read ``R`` and write ``W`` GB/s: ``(f + (1-f) w) / (f/R + (1-f) (1/W + (w-1)/R))``.

    A store moves ``w`` (``write_cost_factor``) lines, as the engine charges it: its line's write-back at the
    write bandwidth and ``w - 1`` lines of read for ownership at the read bandwidth; mlc counts what moves
    (module :mod:`numasim.tools.mlc`). At ``w <= 1`` a store is ``w`` lines at the write bandwidth, and ``w = 1``
    gives ``1/bw = f/R + (1-f)/W`` (a non-temporal store's, whatever the calibration's factor). ``w`` may be an
    array parallel to ``f``.
    """
    f = np.asarray(read_fraction, dtype=float)
    w = np.asarray(write_cost_factor, dtype=float)
    store_ns = np.where(w > 1.0, 1.0 / write_gb_s + (w - 1.0) / read_gb_s, w / write_gb_s)
    return (f + (1 - f) * w) / (f / read_gb_s + (1 - f) * store_ns)


def mix_write_cost(keys: Sequence[str], write_cost_factor: float) -> np.ndarray:
    """Each mix's store cost in lines: the calibration's factor, 1 for a non-temporal mix (:data:`NON_TEMPORAL`)."""
    return np.array([1.0 if k in NON_TEMPORAL else write_cost_factor for k in keys])


def fit_peak_mix(peak_mb_s: dict[str, float], write_cost_factor: float = 1.0) -> tuple[float, float | None, FitResult]:
    """System read and write bandwidth (GB/s) from mlc's traffic mixes (:func:`peak_mix_gb_s`).

    Returns ``(read, write, result)``; write is ``None`` with only the all-reads figure. The read bandwidth is
    the all-reads figure, the only mix without stores; the write bandwidth is fitted to the mixes with stores
    (least squares on relative error). ``write_cost_factor`` is the calibration's (the priors'): the write
    bandwidth is then that of the lines writes move. Fitting both to every mix let a calibration whose writes
    model no read for ownership (``w = 1``; mlc's stores read theirs) pull the read bandwidth under the
    all-reads figure (E5-2680 v2's run on nominal priors: 4 % under, and the leave-one-out loaded latency, all
    reads, 12.1 % MAPE instead of 6.9 %).

    Examples
    --------
    >>> r, w, _ = fit_peak_mix({"all_reads": 110395.9, "1:1": 81146.3})
    >>> round(r, 1), round(w, 1)
    (110.4, 81.1)
    """
    res = FitResult()
    known = {k: v / 1000.0 for k, v in peak_mb_s.items() if k in READ_FRACTION}
    if "all_reads" not in known:
        raise CalibrationError(f"peak bandwidth: no 'ALL Reads' figure among {sorted(peak_mb_s)}")
    if len(known) == 1:
        res.parameters.append(FittedParameter("system.read_bandwidth_gb_s", known["all_reads"], "GB/s"))
        return known["all_reads"], None, res
    f = np.array([READ_FRACTION[k] for k in known])
    w = mix_write_cost(list(known), write_cost_factor)
    bw = np.array(list(known.values()))
    rd = known["all_reads"]
    stores = f < 1.0

    def resid(z: np.ndarray) -> np.ndarray:
        return (peak_mix_gb_s(f[stores], rd, z[0], w[stores]) - bw[stores]) / bw[stores]

    sol = least_squares(resid, [float(bw[stores].min())], bounds=(1e-3, np.inf))
    wr = float(sol.x[0])
    model = peak_mix_gb_s(f, rd, wr, w)
    dof = int(stores.sum()) - 1
    stderr = math.nan
    if dof > 0:
        j = sol.jac
        s2 = float(np.sum(sol.fun**2)) / dof
        stderr = float(math.sqrt(max(float(s2 * np.linalg.pinv(j.T @ j)[0, 0]), 0.0)))
    res.parameters += [
        FittedParameter("system.read_bandwidth_gb_s", rd, "GB/s"),
        FittedParameter("system.write_bandwidth_gb_s", wr, "GB/s", stderr),
    ]
    for k, m, v in zip(known, model, bw, strict=True):
        res.residuals.append(CellResidual("peak_bandwidth", k, "system", float(v), float(m), "GB/s"))
    return rd, wr, res


def fit_bandwidth(
    machine: Machine,
    matrices: Sequence[NodeMatrix] = (),
    peak_mb_s: dict[str, float] | None = None,
    *,
    routes: Routing | None = None,
    link_bound_margin: float = 0.95,
    write_cost_factor: float = 1.0,
) -> BandwidthFit:
    """Fit controller read/write and link bandwidths (GB/s) under the bottleneck model.

    ``matrices`` are mlc-style bandwidth matrices in MB/s (all cores of the row's node reading the column's
    memory). Peak injection (all nodes reading their local memory at once) gives the system read and write
    bandwidth, split over the nodes in proportion to the matrix diagonal (equally without one).
    """
    r = routes or routing(machine)
    fit = BandwidthFit()
    res = fit.result
    cells = [(i, j, v / 1000.0) for i, j, v in _cells(machine, matrices, "bandwidth_matrix")] if matrices else []
    mem_nodes = [n.id for n in machine.nodes if n.has_memory]
    cpu_mem_nodes = [n.id for n in machine.nodes if n.has_memory and n.has_cpus]
    diag: dict[int, list[float]] = {}
    for i, j, v in cells:
        if i == j:
            diag.setdefault(j, []).append(v)
    diag_mean = {j: float(np.mean(v)) for j, v in diag.items()}
    write_ratio: float | None = None
    # (a portless die bounds nothing); each ported die with its port's read and write bandwidth
    dies = [d for d in machine.core_dies if d.has_port]
    die_rd = [float(d.read_bandwidth_gb_s or 0.0) for d in dies]
    die_wr = [float(d.write_bandwidth_gb_s or 0.0) for d in dies]
    node_of_cpu = machine.cpu_to_node
    die_bound = False
    kept: set[int] = set()
    if peak_mb_s and dies and "all_reads" in {k for k in peak_mb_s if k in READ_FRACTION}:
        ctrl_sum = sum(c.read_bandwidth_gb_s for j in cpu_mem_nodes if (c := machine.node(j).controller) is not None)
        die_sum = sum(die_rd)
        # Every request of a die's cpus crosses its port: when the priors' ports carry less than the controllers,
        # mlc's all-reads peak measures the ports (and reads and writes cross them in separate directions, which
        # is why the mixes exceed all-reads on such parts), so the peak fits the ports, not the controllers.
        die_bound = die_sum < ctrl_sum
    def fit_ports(per_die: float, what: str) -> None:
        # The die ports take the measurement; their write direction keeps the priors' ratio, the controllers
        # keep the priors (they are not what was measured).
        ratio = die_wr[0] / die_rd[0]
        fit.core_die_read_gb_s, fit.core_die_write_gb_s = per_die, per_die * ratio
        res.parameters.append(FittedParameter("core_dies[*].read_bandwidth_gb_s", per_die, "GB/s"))
        res.assumptions.append(f"{what}: it fits the ports ({per_die:.1f} GB/s each, write direction at the "
                               f"priors' ratio {ratio:.2f}); the controllers keep the priors")  # fmt: skip
        for j in mem_nodes:
            c = machine.node(j).controller
            if c is not None:
                fit.controller_read_gb_s[j] = c.read_bandwidth_gb_s
                fit.controller_write_gb_s[j] = c.effective_write_bandwidth_gb_s
                kept.add(j)

    if die_bound:
        fit_ports(peak_mb_s["all_reads"] / 1000.0 / len(dies),  # type: ignore[index]
                  f"the priors' {len(dies)} core-die ports ({die_sum:.0f} GB/s) bound the all-reads peak before "
                  f"the controllers ({ctrl_sum:.0f} GB/s)")  # fmt: skip
    elif peak_mb_s:
        rd, wr, peak_res = fit_peak_mix(peak_mb_s, write_cost_factor)
        res.extend(peak_res)
        weights = {j: diag_mean.get(j, math.nan) for j in cpu_mem_nodes}
        if all(np.isfinite(w) for w in weights.values()):
            total = sum(weights.values())
            share = {j: w / total for j, w in weights.items()}
        else:
            share = {j: 1.0 / len(cpu_mem_nodes) for j in cpu_mem_nodes}
            res.assumptions.append(
                f"peak bandwidth split equally over the {len(cpu_mem_nodes)} nodes with cpus and memory"
            )
        for j, s in share.items():
            fit.controller_read_gb_s[j] = rd * s
            if wr is not None:
                fit.controller_write_gb_s[j] = wr * s
        if wr is not None:
            write_ratio = wr / rd
        for j, d in diag_mean.items():
            if j in fit.controller_read_gb_s and d < 0.9 * fit.controller_read_gb_s[j]:
                res.warnings.append(
                    f"bandwidth_matrix: local cell of node {j} ({d:.1f} GB/s) is below its controller's share of "
                    f"the peak ({fit.controller_read_gb_s[j]:.1f} GB/s): initiator (core/MLP) bound"
                )
    if dies and not peak_mb_s and diag_mean:
        # Without a peak, the local cells tell the ports when the priors put them below the node's controller.
        per_node: dict[int, int] = defaultdict(int)
        for die in dies:
            per_node[node_of_cpu[die.cpus[0]]] += 1
        bound = [j for j in diag_mean if j in per_node and (c := machine.node(j).controller) is not None
                 and sum(r for x, r in zip(dies, die_rd, strict=True) if node_of_cpu[x.cpus[0]] == j) < c.read_bandwidth_gb_s]
        if bound and len(bound) == len([j for j in diag_mean if j in per_node]):
            fit_ports(float(np.mean([diag_mean[j] / per_node[j] for j in bound])),
                      "the priors' core-die ports bound the local cells before the controllers")  # fmt: skip
    for j, d in diag_mean.items():
        if j not in fit.controller_read_gb_s:
            fit.controller_read_gb_s[j] = d
            res.assumptions.append(
                f"controller {j} read bandwidth taken from its local matrix cell (assumed controller-bound)"
            )
    for j in mem_nodes:
        if j not in fit.controller_read_gb_s:
            best = max((v for i, jj, v in cells if jj == j), default=None)
            if best is not None:
                fit.controller_read_gb_s[j] = best
                res.assumptions.append(f"controller {j}: no local cell; read bandwidth = best remote cell {best:.1f} GB/s")
            else:
                c = machine.node(j).controller
                fit.controller_read_gb_s[j] = c.read_bandwidth_gb_s if c else DEFAULT_CONTROLLER_BANDWIDTH_GB_S
                res.warnings.append(f"no bandwidth measurement reaches node {j}; controller keeps the machine-file value")
    for j in mem_nodes:
        if j not in fit.controller_write_gb_s:
            c = machine.node(j).controller
            if write_ratio is not None:
                fit.controller_write_gb_s[j] = fit.controller_read_gb_s[j] * write_ratio
            elif c is not None and c.write_bandwidth_gb_s is not None:
                fit.controller_write_gb_s[j] = c.write_bandwidth_gb_s * fit.controller_read_gb_s[j] / c.read_bandwidth_gb_s
            else:
                fit.controller_write_gb_s[j] = fit.controller_read_gb_s[j]
                res.assumptions.append(f"controller {j}: no read/write mix measured; write bandwidth assumed = read")
    # What the dies of each node can read in all (inf without dies): a cell at that bound is die-bound.
    die_read: dict[int, float] = defaultdict(float)
    for die, rd in zip(dies, die_rd, strict=True):
        die_read[node_of_cpu[die.cpus[0]]] += fit.core_die_read_gb_s if fit.core_die_read_gb_s is not None else rd

    def initiator_bound(i: int) -> float:
        return die_read[i] if i in die_read else math.inf

    # Links: each link-bound remote cell pins the minimum over its route; a link is pinned by the smallest
    # link-bound cell crossing it (every other cell crossing it is only a lower bound).
    # A link that another cell shows carrying clearly more (by the same margin) is not the bottleneck of a
    # link-bound cell that crosses it too: the on-die links of an SNC socket carry its clusters' 59 GB/s to each
    # other, so a cross-socket cell's 50 GB/s pins the socket link, not them.
    pinned: dict[Edge, float] = {}
    lower: dict[Edge, float] = {}
    remote = [(i, j, v, r.edges(j, i)) for i, j, v in cells if i != j]  # read data flows from memory j to i
    for _, _, v, edges in remote:
        for e in edges:
            lower[e] = max(lower.get(e, 0.0), v)
    for i, j, v, edges in remote:
        if v < link_bound_margin * min(fit.controller_read_gb_s[j], initiator_bound(i)):
            narrow = [e for e in edges if v >= link_bound_margin * lower[e]]
            if not narrow:
                # Every link of the route carries clearly more for another cell: no link bandwidth explains this
                # one, and pinning them all to it would cap those cells too (a 2x Silver 4410Y reads its CXL
                # expander from the other socket at 7.1 GB/s, though that socket's link carries 63.5 for its
                # DRAM and the expander's link 19.5 for its own socket: pinned, both fell to 7.1).
                res.warnings.append(
                    f"bandwidth_matrix: cell {i} -> {j} ({v:.1f} GB/s) is below what every link of its route carries "
                    f"for another cell ({', '.join(f'{a}->{b} {lower[(a, b)]:.1f}' for a, b in edges)} GB/s) and "
                    f"below its controller and cores: no link bandwidth explains it (a limit the model does not "
                    f"have); no link is fitted to it, and its residual says how far the model is"
                )
                continue
            for e in narrow:
                pinned[e] = min(pinned.get(e, math.inf), v)
    for link in machine.links:
        for a_end, b_end in ((link.a, link.b), (link.b, link.a)):
            e = (a_end, b_end)
            if e in pinned:
                fit.link_bandwidth_gb_s[e] = pinned[e]
            elif (b_end, a_end) in pinned:
                fit.link_bandwidth_gb_s[e] = pinned[(b_end, a_end)]
                res.assumptions.append(
                    f"link {a_end}->{b_end}: no link-bound cell crosses this direction; bandwidth copied from "
                    f"{b_end}->{a_end}"
                )
    for e, lo in lower.items():
        if e in fit.link_bandwidth_gb_s:
            continue
        if r._graph.edges[e]["bandwidth_gb_s"] < lo:
            # a cell moved more across it than the machine file lets it carry: it carries at least that
            fit.link_bandwidth_gb_s[e] = lo
            res.assumptions.append(f"link {e[0]}->{e[1]}: no cell is bound by it; raised to the most a cell moved "
                                   f"across it ({lo:.1f} GB/s), above the machine file's figure")  # fmt: skip
        else:
            res.warnings.append(
                f"link {e[0]}->{e[1]}: every cell crossing it is bound elsewhere; only a lower bound "
                f"{lo:.1f} GB/s is known (the machine file's figure kept)"
            )
    for e, bw in fit.link_bandwidth_gb_s.items():
        res.parameters.append(FittedParameter(f"links[{e[0]}->{e[1]}].bandwidth_gb_s", bw, "GB/s"))
    for j in sorted(fit.controller_read_gb_s):
        if j in kept:
            continue
        res.parameters.append(FittedParameter(f"controllers[{j}].read_bandwidth_gb_s", fit.controller_read_gb_s[j], "GB/s"))
        res.parameters.append(
            FittedParameter(f"controllers[{j}].write_bandwidth_gb_s", fit.controller_write_gb_s[j], "GB/s")
        )
    for i, j, v in cells:
        route_bw = min((fit.link_bandwidth_gb_s.get(e, r._graph.edges[e]["bandwidth_gb_s"]) for e in r.edges(j, i)), default=math.inf)
        model = min(fit.controller_read_gb_s[j], route_bw, initiator_bound(i))
        res.residuals.append(CellResidual("bandwidth_matrix", str(i), str(j), v, model, "GB/s"))
    return fit
