"""Analytic predictions of measured tables from a calibrated machine: the same model the engine uses.

* idle latency(i, j) = controller j + links (and switches) on route(i, j) (:func:`latency_table_ns`);
* bandwidth(i, j) = min(controller j read, links on the route j -> i, the direction read data flows, the read
  ports of node i's core dies, what node i's cores keep in flight over the latency they then see:
  :func:`initiator_bound_gb_s`);
* peak mixes: ``1 / bw(f) = f / R + (1 - f) / W`` over the controllers of nodes with cpus, and no more than the
  core dies' ports carry (reads toward the dies, writes away from them, each direction its own bandwidth); the
  all-reads figure no more than the cores keep in flight either;
* loaded latency at bandwidth B: idle + curve(B / R);
* a stride-64 walk beyond the caches: per-access time = latency / outstanding misses (Little's law);
* device DMA bandwidth from memory node m: min(controller m read, links on route(m, device node), attach).
"""

from __future__ import annotations

import numpy as np

from numasim.calibrate.fit import READ_FRACTION, mix_write_cost, peak_mix_gb_s
from numasim.calibrate.parsers import NodeMatrix
from numasim.engine.cores import thread_mlp, thread_prefetch_lines
from numasim.timing.model import Calibration, apply_calibration, default_curve
from numasim.topology.model import Machine
from numasim.topology.routing import latency_table_ns, routing

__all__ = [
    "calibrated",
    "predict_latency_matrix",
    "predict_bandwidth_matrix",
    "predict_peak_mix",
    "predict_loaded_latency",
    "predict_stride_time_ns",
    "predict_lat_mem_rd",
    "predict_device_bandwidth_gb_s",
    "initiator_bound_gb_s",
]


def calibrated(machine: Machine, calibration: Calibration) -> Machine:
    return apply_calibration(machine, calibration)


def _table(machine: Machine, full: np.ndarray, like: NodeMatrix, unit: str, scale: float = 1.0) -> NodeMatrix:
    ids = machine.node_ids
    arr = np.array([[full[ids.index(i), ids.index(j)] * scale for j in like.cols] for i in like.rows])
    return NodeMatrix(list(like.rows), list(like.cols), arr, unit)


def predict_latency_matrix(machine: Machine, calibration: Calibration, like: NodeMatrix) -> NodeMatrix:
    m = calibrated(machine, calibration)
    return _table(m, latency_table_ns(m), like, "ns")


def predict_bandwidth_matrix(machine: Machine, calibration: Calibration, like: NodeMatrix) -> NodeMatrix:
    """Read bandwidth in MB/s, like mlc: ``min(controller j read, links of the route j -> i)``.

    The links are taken in the direction read data flows (memory node back to the initiator), as the engine
    charges them; :func:`numasim.topology.routing.bandwidth_table_gb_s` takes the request direction, which
    differs only for asymmetric links.
    """
    m = calibrated(machine, calibration)
    r = routing(m)
    ids = m.node_ids
    idle = latency_table_ns(m)
    ports = _die_ports(m)[0]
    full = np.full((len(ids), len(ids)), np.nan)
    for b, j in enumerate(ids):
        ctrl = m.nodes[b].controller
        if ctrl is None:
            continue
        for a, i in enumerate(ids):
            if i not in like.rows or j not in like.cols:
                continue
            top = min(ctrl.read_bandwidth_gb_s, r.path_bandwidth_gb_s(j, i), ports.get(i, np.inf))
            cpus = list(m.nodes[a].cpus)
            full[a, b] = initiator_bound_gb_s(m, calibration, cpus, j, float(idle[a, b]), top) if cpus else top
    return _table(m, full, like, "MB/s", 1000.0)


def initiator_bound_gb_s(
    machine: Machine,
    calibration: Calibration,
    cpus: list[int],
    mem_node: int,
    idle_ns: float,
    ceiling_gb_s: float,
    *,
    read_fraction: float = 1.0,
    write_cost: float = 1.0,
) -> float:
    """What ``cpus`` streaming through ``mem_node``'s memory move (GB/s, as mlc counts it), no more than
    ``ceiling_gb_s``: each thread's misses and prefetched lines in flight (:func:`~numasim.engine.cores.thread_mlp`,
    :func:`~numasim.engine.cores.thread_prefetch_lines`, as the engine gives them) over the latency they see,
    the route's ``idle_ns`` plus the controller's loaded-latency curve at the utilisation they cause (Little's
    law, solved for its fixed point). Where the cores' misses bind before the controller (a few cores, or a
    controller faster than they can fill), mlc's figure is this, not the controller's.

    ``read_fraction`` and ``write_cost``: a mix of loads and stores, as :func:`~numasim.calibrate.fit.peak_mix_gb_s`
    takes them. Each operation holds one line in flight; a store's read for ownership and its write-back load the
    controller at its read and write bandwidth, and mlc counts ``write_cost`` lines a store.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> round(initiator_bound_gb_s(m, resolve_calibration(m), list(m.node(0).cpus), 0, 61.7, 1000.0))
    114
    """
    if not cpus or ceiling_gb_s <= 0:
        return 0.0
    core = calibration.core
    streaming = [False] * len(cpus)
    mlp = thread_mlp(core, machine.cpus, cpus, streaming)
    ahead = thread_prefetch_lines(core, machine.cpus, cpus, streaming, mlp)
    lines = float(sum(mlp) + sum(ahead))
    ctrl = calibration.controller(mem_node)
    curve = ctrl.curve if ctrl.curve is not None else default_curve(ctrl.latency_ns)
    f, w = read_fraction, write_cost
    counted = f + (1 - f) * w  # lines mlc counts an operation
    # controller time an operation takes, per GB/s of operations: its read line(s) and its write-back
    busy = (f + (1 - f) * max(w - 1.0, 0.0)) / ctrl.read_bandwidth_gb_s + (1 - f) * min(w, 1.0) / ctrl.write_bandwidth_gb_s

    def moved(x: float) -> float:  # GB/s (counted) the lines in flight move at the latency a load of x gives
        return counted * lines * 64.0 / (idle_ns + float(curve.added_ns(x / counted * busy)))

    top = min(ceiling_gb_s, counted * lines * 64.0 / idle_ns)  # no more than at the idle latency
    if moved(top) >= top:
        return top
    lo, hi = 0.0, top  # moved(x) - x falls as x rises: bisect its zero
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if moved(mid) >= mid:
            lo = mid
        else:
            hi = mid
    return lo


def _die_ports(timed: Machine) -> tuple[dict[int, float], dict[int, float]]:
    """Per node, the read and the write bandwidth of its core dies' ports (nodes without dies absent)."""
    node_of = timed.cpu_to_node
    rd: dict[int, float] = {}
    wr: dict[int, float] = {}
    for die in timed.core_dies:
        if die.read_bandwidth_gb_s is None or die.write_bandwidth_gb_s is None:
            continue  # no port of its own
        n = node_of[die.cpus[0]]
        rd[n] = rd.get(n, 0.0) + die.read_bandwidth_gb_s
        wr[n] = wr.get(n, 0.0) + die.write_bandwidth_gb_s
    return rd, wr


def _system(machine: Machine, calibration: Calibration) -> tuple[float, float]:
    with_cpus = {n.id for n in machine.nodes if n.has_cpus}
    ctrls = [c for c in calibration.controllers if c.node in with_cpus] or calibration.controllers
    return sum(c.read_bandwidth_gb_s for c in ctrls), sum(c.write_bandwidth_gb_s for c in ctrls)


def predict_peak_mix(machine: Machine, calibration: Calibration, keys: list[str]) -> dict[str, float]:
    """mlc peak-injection figures (MB/s) for the given mixes."""
    rd, wr = _system(machine, calibration)
    timed = calibrated(machine, calibration)
    port_rd, port_wr = _die_ports(timed)
    streams = _local_streams(timed)
    die_rd, die_wr = sum(port_rd.values()), sum(port_wr.values())
    out: dict[str, float] = {}
    for k in keys:
        if k not in READ_FRACTION:
            continue
        f = float(READ_FRACTION[k])
        w = float(mix_write_cost([k], calibration.core.write_cost_factor)[0])
        bw = float(peak_mix_gb_s(np.array(f), rd, wr, w))
        bw = min(bw, sum(initiator_bound_gb_s(timed, calibration, cpus, mem, idle_ns, np.inf, read_fraction=f,
                                              write_cost=w) for cpus, mem, idle_ns in streams))
        if port_rd:
            # Operations per ns the ports allow: loads and a store's read for ownership (w - 1 lines) fill the
            # read direction, its write-back the other (at w <= 1 a store is w lines of write).
            to_die = f + (1 - f) * max(w - 1.0, 0.0)
            from_die = (1 - f) * min(w, 1.0)
            ops = min(die_rd / to_die if to_die > 0 else np.inf, die_wr / from_die if from_die > 0 else np.inf)
            bw = min(bw, (f + (1 - f) * w) * ops)
        out[k] = 1000.0 * bw
    return out


def _local_streams(timed: Machine) -> list[tuple[list[int], int, float]]:
    """mlc's peak run, node by node: the node's cpus, the memory they read (their own node's, else the nearest
    with a controller, as the virtual mlc picks it) and its idle route latency (ns)."""
    ids = timed.node_ids
    idle = latency_table_ns(timed)
    out = []
    for a, node in enumerate(timed.nodes):
        if not node.cpus:
            continue
        mem = node.id if node.controller is not None else min(n.id for n in timed.nodes if n.controller is not None)
        out.append((list(node.cpus), mem, float(idle[a, ids.index(mem)])))
    return out


def predict_loaded_latency(
    machine: Machine,
    calibration: Calibration,
    bandwidth_gb_s: np.ndarray,
    node: int = 0,
    *,
    saturated: np.ndarray | None = None,
    prefetchers_on: bool = False,
) -> np.ndarray:
    """Latency (ns) seen by a local reader on ``node`` while the system moves ``bandwidth_gb_s``: idle latency plus
    the controller's loaded-latency curve at the utilisation.

    ``saturated`` marks rows where mlc's load threads (one per other cpu) all have their misses in flight (its
    smallest injection delays): there the controller's queue holds them, and the latency is Little's law over
    them when that is more: ``(the misses in flight of the node's load threads + 1) x 64 B / the node's share
    of the bandwidth``, what the engine's FIFO controllers give. ``prefetchers_on`` (mlc ``-e``, or a run whose
    prefetchers mlc could not turn off): each load thread's prefetched lines are in flight too
    (:func:`~numasim.engine.cores.thread_prefetch_lines`).
    """
    rd, _ = _system(machine, calibration)
    c = calibration.controller(node)
    curve = c.curve if c.curve is not None else default_curve(c.latency_ns)
    bw = np.asarray(bandwidth_gb_s, dtype=float)
    out = c.latency_ns + curve.added_ns(bw / rd)
    if saturated is not None:
        # mlc's latency thread chases on the first cpu; a load thread on every other cpu, each with its share
        # of its core's misses (engine.cores.thread_mlp, as the engine gives them).
        cpus = machine.cpus
        chasing = [k == 0 for k in range(len(cpus))]
        mlp = thread_mlp(calibration.core, cpus, cpus, chasing)
        ahead = (thread_prefetch_lines(calibration.core, cpus, cpus, chasing, mlp) if prefetchers_on
                 else [0.0] * len(cpus))
        on_node = set(machine.node(node).cpus)
        lines = sum(m + (a if not dep else 0.0) for c, m, a, dep in zip(cpus, mlp, ahead, chasing, strict=True)
                    if c in on_node) * 64.0
        little_ns = lines / np.maximum(bw * c.read_bandwidth_gb_s / rd, 1e-12)
        out = np.where(np.asarray(saturated, dtype=bool), np.maximum(out, little_ns), out)
    return out


def predict_stride_time_ns(machine: Machine, calibration: Calibration, cpu_node: int, mem_node: int) -> float:
    m = calibrated(machine, calibration)
    lat = latency_table_ns(m)
    ids = m.node_ids
    return float(lat[ids.index(cpu_node), ids.index(mem_node)] / calibration.core.max_outstanding_misses)


def predict_lat_mem_rd(machine: Machine, calibration: Calibration, size_bytes: np.ndarray, node: int = 0) -> np.ndarray:
    """Load-to-use latency of a pointer chase over ``size_bytes``: the first cache level that holds it, else
    local memory."""
    caches = sorted(calibration.caches, key=lambda c: c.size_bytes)
    mem = calibration.controller(node).latency_ns
    out = []
    for s in np.asarray(size_bytes):
        hit = next((c.latency_ns for c in caches if s <= c.size_bytes), mem)
        out.append(hit)
    return np.array(out)


def predict_device_bandwidth_gb_s(machine: Machine, calibration: Calibration, device: str, mem_node: int) -> float:
    m = calibrated(machine, calibration)
    dev = next((d for d in calibration.devices if d.name == device), None)
    node = next((d.node for d in m.devices if d.name == device), None)
    if dev is None or node is None:
        from numasim.errors import CalibrationError

        raise CalibrationError(f"calibration {calibration.id} / machine {machine.name} has no device {device!r}")
    r = routing(m)
    path_bw = r.path_bandwidth_gb_s(mem_node, node)
    own_path = dev.dma_read_bandwidth_gb_s.get(mem_node, float("inf"))
    return float(
        min(dev.attach_bandwidth_gb_s, own_path, path_bw, calibration.controller(mem_node).read_bandwidth_gb_s)
    )
