"""The timed memory system: which queueing resources each access crosses, and what it costs when idle.

Built once per simulation from a machine and its :class:`~numasim.timing.model.Calibration`:

* **resources**: one memory controller per memory node, one per *direction* of every link (and switch link),
  and the attach link of every device in each direction. Each has a capacity (bytes per ns; 1 GB/s is exactly
  1 byte/ns) and optionally a :class:`~numasim.timing.model.LoadedLatencyCurve`.
* **route classes**: one per (initiator, target memory node, read/write). Initiators are the NUMA nodes (by
  index) and then the devices. A class has an idle latency (controller latency of the target plus the link
  latencies along the route, plus the attach latency for a device) and, per resource, the busy time one 64-byte
  line costs there.

Bandwidth is charged in the direction the data flows: a read charges the links of the route from the memory back
to the initiator, a write the route from the initiator to the memory (for symmetric links that is the same
route reversed). A write costs ``write_cost_factor`` times a read: in busy time on every resource it crosses (it is a
read-for-ownership plus a write-back), the controller using its write bandwidth for it, and in idle latency
(the calibration fits the factor as write latency / read latency, AMD's hop table for source 002, and its closed
form predicts ``write(h) = factor x read(h)``; at 1.0, the default, writes cost what reads do). A calibration
that gives ``write_latency_factor`` separates the two: its writes take that factor in latency and
``write_cost_factor`` in traffic (the catalog's write-allocate prior: twice the traffic, a read's latency).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numasim.errors import CalibrationError, WorkloadError
from numasim.timing.model import Calibration, LoadedLatencyCurve, apply_calibration, write_latency_factor
from numasim.topology.model import Machine, Vertex
from numasim.topology.routing import Routing, routing

from .spec import DeviceTransfer, ThreadSpec

__all__ = ["LINE_BYTES", "Resource", "MemorySystem", "build_memory_system"]

LINE_BYTES = 64


@dataclass(frozen=True)
class Resource:
    """A queueing resource: a controller, one direction of a link, or one direction of a device attach link."""

    name: str
    kind: str  # "controller" | "link" | "attach"
    capacity_bytes_per_ns: float
    curve: LoadedLatencyCurve | None
    node: int | None = None
    src: Vertex | None = None
    dst: Vertex | None = None


@dataclass
class MemorySystem:
    """Resources, route classes and their costs, as numpy arrays for the engines.

    Attributes
    ----------
    node_ids : list of int
        Node ids in index order (``target`` indices and node-initiator indices refer to these).
    initiator_names : list of str
        ``"node<k>"`` for nodes then the device names.
    base_latency_ns : ndarray (n_initiators, n_nodes)
        Idle latency of a miss from an initiator to memory of a node (``nan`` for memoryless nodes).
    busy_ns : ndarray (n_classes, n_resources)
        Busy time a 64-byte line of a route class costs on each resource.
    crosses : ndarray of bool (n_classes, n_resources)
        Whether the class's latency sees the resource's queueing delay.
    """

    machine: Machine
    calibration: Calibration
    routes: Routing
    node_ids: list[int]
    initiator_names: list[str]
    initiator_node: np.ndarray
    resources: list[Resource]
    base_latency_ns: np.ndarray
    busy_ns: np.ndarray
    crosses: np.ndarray
    class_resources: list[list[int]]
    write_cost_factor: float
    write_latency_factor: float

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def n_initiators(self) -> int:
        return len(self.initiator_names)

    def route_class(self, initiator: np.ndarray, target: np.ndarray, is_write: np.ndarray) -> np.ndarray:
        """Vectorised class index ``(initiator * n_nodes + target) * 2 + is_write``."""
        return ((initiator.astype(np.int64) * self.n_nodes + target.astype(np.int64)) * 2 + is_write).astype(
            np.int64
        )

    @property
    def n_classes(self) -> int:
        return self.n_initiators * self.n_nodes * 2

    def class_base_latency_ns(self) -> np.ndarray:
        """Idle latency per route class: the route's for a read, ``write_latency_factor`` times it for a write."""
        out = np.repeat(self.base_latency_ns.ravel(), 2)
        out[1::2] *= self.write_latency_factor
        return out

    def class_paths(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Route classes' resources in the order a miss crosses them, as CSR: (start of each class's run, with
        one end entry; resource; busy ns of one line there). Both engines' compiled loops walk these."""
        lens = np.array([len(p) for p in self.class_resources], dtype=np.int64)
        start = np.r_[0, np.cumsum(lens)].astype(np.int64)
        res = np.array([r for p in self.class_resources for r in p], dtype=np.int64)
        busy = np.array([float(self.busy_ns[c, r]) for c, p in enumerate(self.class_resources) for r in p], dtype=float)
        return start, res, busy

    def own_line_busy_ns(self) -> np.ndarray:
        """Per resource, one line's busy time (the least over classes): what a request's own line adds to the
        utilisation it sees, left out so that a request does not queue behind itself."""
        if not len(self.resources):
            return np.zeros(0)
        line_busy = np.where(self.busy_ns > 0, self.busy_ns, np.inf).min(axis=0)
        return np.where(np.isfinite(line_busy), line_busy, 0.0)

    def curve_delay_ns(self, utilisation: np.ndarray) -> np.ndarray:
        """Loaded-latency added delay per resource; ``utilisation`` has the resources on the last axis."""
        u = np.asarray(utilisation, dtype=float)
        out = np.zeros_like(u)
        for r, res in enumerate(self.resources):
            if res.curve is not None:
                out[..., r] = res.curve.added_ns(u[..., r])
        return out


def build_memory_system(
    machine: Machine,
    calibration: Calibration | None,
    threads: list[ThreadSpec] | tuple[ThreadSpec, ...] = (),
    devices: list[DeviceTransfer] | tuple[DeviceTransfer, ...] = (),
) -> MemorySystem:
    """Resources and route classes of ``machine`` timed by ``calibration`` (required: see below).

    Raises
    ------
    CalibrationError
        If ``calibration`` is None: timing without a calibration is an error, never a silent default.
    """
    if calibration is None:
        raise CalibrationError(
            f"simulating {machine.name} needs a calibration: run `numasim calibrate` on measurements of this "
            "machine, or pass numasim.calibrate.nominal_calibration(machine) to use the machine file's nominal "
            "numbers on purpose"
        )
    timed = apply_calibration(machine, calibration)
    routes = routing(timed)
    ids = timed.node_ids
    wcf = calibration.core.write_cost_factor

    resources: list[Resource] = []
    ctrl_of: dict[int, int] = {}
    ctrl_timing = {c.node: c for c in calibration.controllers}
    for n in timed.nodes:
        if n.controller is None:
            continue
        ct = ctrl_timing.get(n.id)
        ctrl_of[n.id] = len(resources)
        resources.append(
            Resource(
                name=f"mc{n.id}",
                kind="controller",
                capacity_bytes_per_ns=n.controller.read_bandwidth_gb_s,
                curve=ct.curve if ct is not None else None,
                node=n.id,
            )
        )
    write_cap = {
        n.id: n.controller.effective_write_bandwidth_gb_s for n in timed.nodes if n.controller is not None
    }
    link_curves = {(lt.src, lt.dst): lt.curve for lt in calibration.links}
    g = routes._graph
    edge_of: dict[tuple[Vertex, Vertex], int] = {}
    for u, v, data in sorted(g.edges(data=True), key=lambda e: (str(e[0]), str(e[1]))):
        edge_of[(u, v)] = len(resources)
        resources.append(
            Resource(
                name=f"{u}->{v}",
                kind="link",
                capacity_bytes_per_ns=float(data["bandwidth_gb_s"]),
                curve=link_curves.get((u, v)),
                src=u,
                dst=v,
            )
        )

    dev_timing = {d.name: d for d in calibration.devices}
    used_devices = sorted({d.device for d in devices})
    machine_devices = {d.name: d for d in timed.devices}
    initiator_names = [f"node{nid}" for nid in ids]
    initiator_node = [nid for nid in ids]
    attach_latency: list[float] = [0.0] * len(ids)
    attach_in: list[int | None] = [None] * len(ids)  # device -> node direction (device writes)
    attach_out: list[int | None] = [None] * len(ids)  # node -> device direction (device reads)
    dma_path: list[dict[int, int]] = [{} for _ in ids]  # device's own read path from a node's memory (DeviceTiming)
    for name in used_devices:
        if name not in machine_devices:
            raise WorkloadError(
                f"DeviceTransfer.device = {name!r}: {machine.name} has no such device "
                f"(devices: {sorted(machine_devices)})"
            )
        dev = machine_devices[name]
        dt = dev_timing.get(name)
        lat = dt.attach_latency_ns if dt is not None else dev.attach_latency_ns
        bw = dt.attach_bandwidth_gb_s if dt is not None else dev.attach_bandwidth_gb_s
        initiator_names.append(name)
        initiator_node.append(dev.node)
        attach_latency.append(lat)
        attach_in.append(len(resources))
        resources.append(Resource(f"{name}->{dev.node}", "attach", bw, None, src=name, dst=dev.node))
        attach_out.append(len(resources))
        resources.append(Resource(f"{dev.node}->{name}", "attach", bw, None, src=dev.node, dst=name))
        paths: dict[int, int] = {}
        for mem_node, dma_bw in sorted((dt.dma_read_bandwidth_gb_s if dt is not None else {}).items()):
            if mem_node not in ids:
                raise CalibrationError(
                    f"calibration {calibration.id}: devices[{name}].dma_read_bandwidth_gb_s names node {mem_node}, "
                    f"which {machine.name} does not have"
                )
            paths[mem_node] = len(resources)
            resources.append(Resource(f"{name}~{mem_node}", "attach", dma_bw, None, src=name, dst=mem_node))
        dma_path.append(paths)

    n_init, n_nodes, n_res = len(initiator_names), len(ids), len(resources)
    base = np.full((n_init, n_nodes), np.nan)
    busy = np.zeros((n_init * n_nodes * 2, n_res))
    class_resources: list[list[int]] = [[] for _ in range(n_init * n_nodes * 2)]
    for i in range(n_init):
        src = initiator_node[i]
        for j, dst in enumerate(ids):
            if dst not in ctrl_of:
                continue
            ctrl = timed.nodes[j].controller
            assert ctrl is not None
            base[i, j] = ctrl.latency_ns + routes.path_latency_ns(src, dst) + attach_latency[i]
            for is_write in (0, 1):
                c = (i * n_nodes + j) * 2 + is_write
                factor = wcf if is_write else 1.0
                edges = routes.edges(src, dst) if is_write else routes.edges(dst, src)
                path = [edge_of[e] for e in edges]
                if i >= len(ids):
                    a = attach_in[i] if is_write else attach_out[i]
                    assert a is not None
                    path = [a, *path] if is_write else [*path, a]
                    if not is_write and dst in dma_path[i]:
                        path = [*path, dma_path[i][dst]]
                for r in path:
                    busy[c, r] += factor * LINE_BYTES / resources[r].capacity_bytes_per_ns
                cap = write_cap[dst] if is_write else resources[ctrl_of[dst]].capacity_bytes_per_ns
                busy[c, ctrl_of[dst]] += factor * LINE_BYTES / cap
                class_resources[c] = [*path, ctrl_of[dst]] if is_write else [ctrl_of[dst], *path]
    return MemorySystem(
        machine=timed,
        calibration=calibration,
        routes=routes,
        node_ids=ids,
        initiator_names=initiator_names,
        initiator_node=np.array(initiator_node, dtype=np.int64),
        resources=resources,
        base_latency_ns=base,
        busy_ns=busy,
        crosses=busy > 0,
        class_resources=class_resources,
        write_cost_factor=wcf,
        write_latency_factor=write_latency_factor(calibration.core),
    )
