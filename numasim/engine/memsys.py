"""The timed memory system: which queueing resources each access crosses, and what it costs when idle.

Built once per simulation from a machine and its :class:`~numasim.timing.model.Calibration`:

* **resources**: one memory controller per memory node, one per *direction* of every link (and switch link),
  and the attach link of every device in each direction. Each has a capacity (bytes per ns; 1 GB/s is exactly
  1 byte/ns) and optionally a :class:`~numasim.timing.model.LoadedLatencyCurve`.
  A core die with a port of its own (an AMD CCD's GMI link, ``Machine.core_dies``) has one resource per
  direction: data to the die (reads) and from it (writes).
* **route classes**: one per (initiator, target memory node, read/write). Initiators are the NUMA nodes (by
  index), then the core dies (a thread on a die's cpu issues through its die, whose route is its node's plus
  the port), then the devices. A class has an idle latency (controller latency of the target plus the link
  latencies along the route, plus the attach latency for a device) and, per resource, the busy time one 64-byte
  line costs there.

Bandwidth is charged in the direction the data flows: a read charges the links of the route from the memory back
to the initiator, a write the route from the initiator to the memory (for symmetric links that is the same
route reversed). A write costs ``write_cost_factor`` (``w``) lines. Where ``w > 1`` a core's store miss is its
line's write-back (one line on the route to memory, at the controller's write bandwidth) and ``w - 1`` lines of
read for ownership (at the controller's read bandwidth, then on the route back to the core, a core die's port
included, as a read's data); a device's write, and any write at ``w <= 1``, is ``w`` lines on the route to
memory, at the write bandwidth. In idle latency a write costs ``core.write_latency`` times a read: the
calibration's ``write_latency_factor`` (the catalog's 1.0: a store miss waits for its read for ownership), else
``w`` (one factor, as a calibration fits it from a hop table's write/read latency, AMD's for source 002, whose
closed form predicts ``write(h) = factor x read(h)``; at 1.0, the default, writes cost what reads do). A write
that hits a line clean in its core's caches owes the write-back part of that, posted
(``MemorySystem.path_wb_share``, per entry of its route).
Where the calibration grants write-allocate evasion (Intel's SpecI2M, Ice Lake-SP and later), a core's
write of a whole line skips part of its read for ownership when lines queue at its controller: the engines
scale its busy time (not its latency) at each entry by that entry's read-for-ownership share and
:meth:`MemorySystem.class_evasion`'s evasion, from the backlog it finds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numasim.errors import CalibrationError, WorkloadError
from numasim.timing.model import Calibration, LoadedLatencyCurve, apply_calibration
from numasim.topology.model import Machine, Vertex
from numasim.topology.routing import Routing, routing

from .spec import DeviceTransfer, ThreadSpec

__all__ = ["LINE_BYTES", "Resource", "MemorySystem", "build_memory_system"]

LINE_BYTES = 64


@dataclass(frozen=True)
class Resource:
    """A queueing resource: a controller, one direction of a link, or one direction of a device attach link."""

    name: str
    kind: str  # "controller" | "link" | "attach" | "die" (a core die's port, one per direction)
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
    path_ptr, path_res, path_busy : ndarray
        The route classes' resources in the order a miss crosses them, as CSR: class ``c`` crosses
        ``path_res[path_ptr[c]:path_ptr[c + 1]]``, where one 64-byte line costs ``path_busy`` ns of work. Sparse
        on purpose: a dense class x resource table is O(nodes^3) (800 MB for 256 nodes).
    path_wb_share : ndarray
        Parallel to ``path_busy``: the share of a write's busy time at that entry that is its line's write-back
        (what a write hit on a clean line still owes there; the rest is its read for ownership, which
        write-allocate evasion may skip). Empty when the calibration models no write-back (``write_cost_factor
        <= 1``).
    """

    machine: Machine
    calibration: Calibration
    routes: Routing
    node_ids: list[int]
    initiator_names: list[str]
    initiator_node: np.ndarray
    resources: list[Resource]
    base_latency_ns: np.ndarray
    path_ptr: np.ndarray
    path_res: np.ndarray
    path_busy: np.ndarray
    path_wb_share: np.ndarray
    write_cost_factor: float
    die_initiator_of_cpu: dict[int, int]
    write_allocate_evasion: float = 0.0
    n_core_initiators: int = 0

    def initiator_of_cpu(self, cpu: int) -> int:
        """The initiator a thread on ``cpu`` issues from: its core die's, else its node's."""
        die = self.die_initiator_of_cpu.get(cpu)
        return die if die is not None else self.node_ids.index(self.machine.cpu_to_node[cpu])

    @property
    def models_write_backs(self) -> bool:
        """Whether a write costs more than the line it writes (``write_cost_factor > 1``): a read for ownership and
        a write-back, the latter owed by a write that hits a clean line."""
        return self.write_cost_factor > 1.0

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
        """Idle latency per route class: the route's for a read, ``calibration.core.write_latency`` times it for a
        write."""
        out = np.repeat(self.base_latency_ns.ravel(), 2)
        out[1::2] *= self.calibration.core.write_latency
        return out

    def class_paths(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Route classes' resources in the order a miss crosses them, as CSR: (start of each class's run, with
        one end entry; resource; busy ns of one line there). Both engines' compiled loops walk these."""
        return self.path_ptr, self.path_res, self.path_busy

    @property
    def class_resources(self) -> list[list[int]]:
        """Each route class's resources in crossing order (a list per class; built on demand from the CSR)."""
        res = self.path_res.tolist()
        ptr = self.path_ptr.tolist()
        return [res[ptr[c]:ptr[c + 1]] for c in range(self.n_classes)]

    def class_evasion(self) -> tuple[np.ndarray, np.ndarray]:
        """What write-allocate evasion may take off each route class (``calibration.core.write_allocate_evasion``).

        Returns ``(class_ctrl, class_evadable)``: per class, its target's controller resource (-1: none) and the
        calibration's evasion ``e`` for a core's write (0 for reads and device transfers, and where writes model
        no read for ownership, ``w <= 1``). A full-line write's busy time at each entry of its route is scaled by
        ``1 - class_evadable * (1 - path_wb_share) * write_allocate_evaded(q, 1)``, ``q`` the lines queued at its
        controller when it issues: the read it skips is the entry's read-for-ownership share.
        """
        n = self.n_classes
        cls = np.arange(n, dtype=np.int64)
        ctrl_of_node = np.full(max(1, self.n_nodes), -1, dtype=np.int64)
        for r, res in enumerate(self.resources):
            if res.kind == "controller" and res.node is not None:
                ctrl_of_node[self.node_ids.index(res.node)] = r
        class_ctrl = ctrl_of_node[(cls // 2) % max(1, self.n_nodes)]
        core = cls // (2 * max(1, self.n_nodes)) < self.n_core_initiators
        share = self.write_allocate_evasion if self.models_write_backs else 0.0
        evadable = np.where((cls % 2 == 1) & core & (class_ctrl >= 0), share, 0.0)
        return class_ctrl.astype(np.int64), evadable.astype(float)

    def path_class(self) -> np.ndarray:
        """The route class of every CSR entry (``path_res``'s parallel array)."""
        return np.repeat(np.arange(self.n_classes, dtype=np.int64), np.diff(self.path_ptr))

    def write_back_totals(self, write_backs_per_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per resource: the busy ns and the lines that the write-backs owed by write hits (a count per class) put
        on it: each entry's write-back share of its busy time, and a line where that share is not nil."""
        weight = np.asarray(write_backs_per_class, dtype=float)[self.path_class()]
        n = len(self.resources)
        if not self.models_write_backs:
            return np.zeros(n), np.zeros(n)
        return (
            np.bincount(self.path_res, weights=weight * self.path_busy * self.path_wb_share, minlength=n),
            np.bincount(self.path_res, weights=np.where(self.path_wb_share > 0, weight, 0.0), minlength=n),
        )

    def resource_totals(self, lines_per_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per resource: the busy ns and the lines that ``lines_per_class`` lines of each class put on it."""
        weight = np.asarray(lines_per_class, dtype=float)[self.path_class()]
        n = len(self.resources)
        return (
            np.bincount(self.path_res, weights=weight * self.path_busy, minlength=n),
            np.bincount(self.path_res, weights=np.where(self.path_busy > 0, weight, 0.0), minlength=n),
        )

    @property
    def busy_ns(self) -> np.ndarray:
        """Dense (n_classes, n_resources) busy time of one line of each class on each resource (0 where it does
        not cross). For small machines and tests: it grows as nodes^3; the engines use the CSR."""
        out = np.zeros((self.n_classes, len(self.resources)))
        out[self.path_class(), self.path_res] = self.path_busy
        return out

    @property
    def crosses(self) -> np.ndarray:
        """Dense: whether each class's latency sees each resource's queueing delay (see :attr:`busy_ns`)."""
        return self.busy_ns > 0

    def own_line_busy_ns(self) -> np.ndarray:
        """Per resource, one line's busy time (the least over classes): what a request's own line adds to the
        utilisation it sees, left out so that a request does not queue behind itself."""
        out = np.full(len(self.resources), np.inf)
        busy = np.where(self.path_busy > 0, self.path_busy, np.inf)
        if len(self.path_wb_share):
            # a write's read-for-ownership entries on the route back carry ``w - 1`` lines, not one
            rfo_only = (self.path_class() % 2 == 1) & (self.path_wb_share == 0.0)
            busy = np.where(rfo_only, np.inf, busy)
        np.minimum.at(out, self.path_res, busy)
        return np.where(np.isfinite(out), out, 0.0)

    def curve_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The resources' loaded-latency curves as padded tables for the compiled loops: per resource its point
        count (0: no curve), utilisations and added delays (``_epoch_kernel.curve_delay`` reads them)."""
        n_res = len(self.resources)
        width = max([len(r.curve.utilisation) for r in self.resources if r.curve is not None] + [2])
        n = np.zeros(n_res, dtype=np.int64)
        x = np.zeros((n_res, width))
        y = np.zeros((n_res, width))
        for r, res in enumerate(self.resources):
            if res.curve is not None:
                k = len(res.curve.utilisation)
                n[r] = k
                x[r, :k] = res.curve.utilisation
                y[r, :k] = res.curve.added_latency_ns
        return n, x, y

    def curve_delay_ns(self, utilisation: np.ndarray) -> np.ndarray:
        """Loaded-latency added delay per resource; ``utilisation`` has the resources on the last axis."""
        u = np.asarray(utilisation, dtype=float)
        out = np.zeros_like(u)
        for r, res in enumerate(self.resources):
            if res.curve is not None:
                out[..., r] = res.curve.added_ns(u[..., r])
        return out


def _route_resources(path: list[Vertex], edge_of: dict[tuple[Vertex, Vertex], int]) -> list[int]:
    """The link-direction resources a route (a vertex sequence) crosses, in order."""
    return [edge_of[(path[k], path[k + 1])] for k in range(len(path) - 1)]


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
    # Core dies: an initiator each after the nodes, with its port's two directions (None for the others).
    die_port: list[tuple[int, int] | None] = [None] * len(ids)
    die_initiator_of_cpu: dict[int, int] = {}
    cpu_node = timed.cpu_to_node
    ported = [(k, die) for k, die in enumerate(timed.core_dies) if die.has_port]  # (a portless die: no resource)
    for k, die in ported:
        assert die.read_bandwidth_gb_s is not None and die.write_bandwidth_gb_s is not None
        node = cpu_node[die.cpus[0]]
        initiator_names.append(f"node{node}.die{k}")
        initiator_node.append(node)
        attach_latency.append(0.0)
        attach_in.append(None)
        attach_out.append(None)
        dma_path.append({})
        to_die = len(resources)
        resources.append(Resource(f"node{node}->die{k}", "die", die.read_bandwidth_gb_s, None, node=node,
                                  src=node, dst=f"die{k}"))
        resources.append(Resource(f"die{k}->node{node}", "die", die.write_bandwidth_gb_s, None, node=node,
                                  src=f"die{k}", dst=node))
        die_port.append((to_die, to_die + 1))
        for c in die.cpus:
            die_initiator_of_cpu[c] = len(initiator_names) - 1
    for _ in used_devices:
        die_port.append(None)
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

    n_init, n_nodes = len(initiator_names), len(ids)
    base = np.full((n_init, n_nodes), np.nan)
    ctrl_idx = np.array([ctrl_of.get(nid, -1) for nid in ids], dtype=np.int64)
    for i in range(n_init):
        for j, dst in enumerate(ids):
            ctrl = timed.nodes[j].controller
            if dst in ctrl_of and ctrl is not None:
                base[i, j] = ctrl.latency_ns + routes.path_latency_ns(initiator_node[i], dst) + attach_latency[i]

    # Every class's path as CSR, in class order ((i * n_nodes + j) * 2 + is_write); classes to memoryless nodes
    # are empty. A read crosses the target's controller, then the links of the route back to the initiator; a
    # write the links of the route to the target, then its controller, and, where writes read their line for
    # ownership (``wcf > 1``), the route back that read's data takes. Built with numpy from each node pair's
    # route: a Python list per class costs seconds on a 256-node machine (131,072 classes).
    rfo = wcf > 1.0
    pair_lists = [_route_resources(routes.paths[(a, b)], edge_of) for a in ids for b in ids]
    pair_len = np.array([len(x) for x in pair_lists], dtype=np.int64)
    pair_start = np.r_[0, np.cumsum(pair_len)[:-1]].astype(np.int64)
    pair_res = np.array([r for x in pair_lists for r in x] or [0], dtype=np.int64)
    node_i = np.repeat(np.arange(n_nodes, dtype=np.int64), n_nodes)
    node_j = np.tile(np.arange(n_nodes, dtype=np.int64), n_nodes)
    to_memory = ctrl_idx[node_j] >= 0
    back = node_j * n_nodes + node_i  # the pair whose route data from the target takes to the initiator
    there = node_i * n_nodes + node_j
    lens_rw = np.zeros((n_nodes * n_nodes, 2), dtype=np.int64)
    lens_rw[:, 0] = np.where(to_memory, 1 + pair_len[back], 0)
    lens_rw[:, 1] = np.where(to_memory, pair_len[there] + 1 + (pair_len[back] if rfo else 0), 0)
    lens_node = lens_rw.ravel()
    cls = np.repeat(np.arange(len(lens_node), dtype=np.int64), lens_node)
    k = np.arange(len(cls), dtype=np.int64) - np.r_[0, np.cumsum(lens_node)[:-1]][cls]
    write = cls % 2 == 1
    ij = cls // 2
    # where each class's controller sits in its path: first for a read, after the route there for a write
    ctrl_pos = np.where(write, pair_len[there[ij]], 0)
    at_controller = k == ctrl_pos
    returning = k > ctrl_pos  # on the route back (a read's data; a write's read for ownership)
    link_pos = np.where(returning, pair_start[back[ij]] + k - ctrl_pos - 1, pair_start[there[ij]] + k)
    node_entries = np.where(at_controller, ctrl_idx[node_j[ij]], pair_res[np.clip(link_pos, 0, len(pair_res) - 1)])
    node_rfo = write & returning

    # Core dies and devices (few): a die's port, or a device's attach link directions and DMA read paths, around
    # the route of their node. A die's write reads its line for ownership like a node's, through its port's
    # read direction; a device's write (DMA) moves its lines as before, on its way to memory only.
    lens_dev: list[int] = []
    dev_entries: list[int] = []
    dev_rfo: list[bool] = []
    dev_device: list[bool] = []
    for i in range(n_nodes, n_init):
        src = initiator_node[i]
        for dst in ids:
            for is_write in (0, 1):
                if dst not in ctrl_of:
                    lens_dev.append(0)
                    continue
                mc = ctrl_of[dst]
                path = _route_resources(routes.paths[(src, dst)] if is_write else routes.paths[(dst, src)], edge_of)
                port = die_port[i]
                if port is not None:  # a core die: its node's route, and its port in the data's direction
                    full = [port[1], *path, mc] if is_write else [mc, *path, port[0]]
                    returned: list[int] = []
                    if is_write and rfo:
                        returned = [*_route_resources(routes.paths[(dst, src)], edge_of), port[0]]
                    lens_dev.append(len(full) + len(returned))
                    dev_entries += full + returned
                    dev_rfo += [False] * len(full) + [True] * len(returned)
                    dev_device += [False] * (len(full) + len(returned))
                    continue
                a = attach_in[i] if is_write else attach_out[i]
                assert a is not None
                path = [a, *path] if is_write else [*path, a]
                if not is_write and dst in dma_path[i]:
                    path = [*path, dma_path[i][dst]]
                full = [*path, mc] if is_write else [mc, *path]
                lens_dev.append(len(full))
                dev_entries += full
                dev_rfo += [False] * len(full)
                dev_device += [True] * len(full)
    lens = np.r_[lens_node, np.array(lens_dev, dtype=np.int64)].astype(np.int64)
    path_ptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    path_res = np.r_[node_entries, np.array(dev_entries, dtype=np.int64)].astype(np.int64)
    entry_class = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    is_write_entry = entry_class % 2 == 1
    entry_rfo = np.r_[node_rfo, np.array(dev_rfo, dtype=bool)].astype(bool)
    entry_device = np.r_[np.zeros(len(node_entries), dtype=bool), np.array(dev_device, dtype=bool)].astype(bool)
    # the controller of each entry's class (its target node's)
    entry_ctrl = path_res == ctrl_idx[(entry_class // 2) % max(1, n_nodes)]
    capacity = np.array([r.capacity_bytes_per_ns for r in resources], dtype=float)
    ctrl_write_cap = np.zeros(len(resources))
    for nid, r in ctrl_of.items():
        ctrl_write_cap[r] = write_cap[nid]
    # A line costs 64 B / capacity at every resource it crosses, and at the controller a write uses the write
    # bandwidth. A write costs ``wcf`` lines: where ``wcf > 1`` a core's write is its line's write-back (one line
    # on the route to memory, at the controller's write bandwidth) and ``wcf - 1`` lines of read for ownership
    # (at the controller's read bandwidth, then on the route back to the core, as a read's data); a device's
    # write, and any write at ``wcf <= 1``, is ``wcf`` lines on the route to memory.
    cap = np.where(is_write_entry & entry_ctrl, ctrl_write_cap[path_res], capacity[path_res])
    line_ns = LINE_BYTES / cap if len(path_res) else np.zeros(0)
    split = is_write_entry & ~entry_device & rfo
    wb_busy = np.where(split & ~entry_rfo, line_ns, 0.0)
    rfo_busy = np.where(split & (entry_rfo | entry_ctrl), (wcf - 1.0) * LINE_BYTES / capacity[path_res], 0.0)
    whole = np.where(is_write_entry, wcf, 1.0) * line_ns
    path_busy = np.where(split, wb_busy + rfo_busy, whole)
    if rfo:  # a device's write keeps the write-back share of a uniform cost
        wb_busy = np.where(split, wb_busy, np.where(is_write_entry, whole * (wcf - 1.0) / wcf, 0.0))
    # A resource crossed twice by one class (only an odd explicit route could) carries its total at each entry.
    key = entry_class * max(1, len(resources)) + path_res
    uniq, inverse = np.unique(key, return_inverse=True)
    if len(uniq) < len(key):
        path_busy = np.bincount(inverse, weights=path_busy)[inverse]
        wb_busy = np.bincount(inverse, weights=wb_busy)[inverse]
    # The write-back's share of a write's busy time at each entry (the rest is its read for ownership).
    path_wb_share = (
        np.where(is_write_entry, wb_busy / np.where(path_busy > 0, path_busy, 1.0), 0.0) if rfo else np.zeros(0)
    )
    return MemorySystem(
        machine=timed,
        calibration=calibration,
        routes=routes,
        node_ids=ids,
        initiator_names=initiator_names,
        initiator_node=np.array(initiator_node, dtype=np.int64),
        resources=resources,
        base_latency_ns=base,
        path_ptr=path_ptr,
        path_res=path_res,
        path_busy=np.ascontiguousarray(path_busy, dtype=float),
        path_wb_share=np.ascontiguousarray(path_wb_share, dtype=float),
        write_cost_factor=wcf,
        die_initiator_of_cpu=die_initiator_of_cpu,
        write_allocate_evasion=calibration.core.write_allocate_evasion,
        n_core_initiators=n_nodes + len(ported),
    )
