"""The same hardware in another clustering mode: SNC/CoD on Intel, NPS on AMD (``numasim topo reconfigure``).

Switching the mode does not change the hardware: every socket keeps its cores, its DRAM channels and its
socket-to-socket links. What changes is how firmware groups them:

* **structure.** A socket's ``k`` nodes become ``k'``. Cpus regroup the way Linux numbers them (see
  :func:`split_cpus`); memory splits evenly by channels or merges; the on-die hub (``socketS-mesh`` on Intel,
  ``socketS-ring`` for CoD, ``socketS-iod`` on AMD, as :func:`~numasim.topology.builders.multi_die` names
  them) appears or vanishes; the firmware SLIT is regenerated as firmware writes it
  (:data:`~numasim.topology.cluster_mode.FIRMWARE_SLIT`).
* **timing.** With one node per socket, firmware interleaves the socket's physical addresses over *all* its
  channels (AMD: "NPS1: eight channel interleaving ... NPS4: two channel interleaving" in Dell's PowerEdge
  R6525/R7515 manuals; Intel: SNC off interleaves over both memory controllers, SNC keeps each cluster's
  addresses on its own controller, Intel's Xeon Scalable tuning guides). So a cpu of a merged socket reads
  each line from sub-node ``j`` with the probability of ``j``'s share of the channels: the merged local latency
  is the mean of the near and far sub-node latencies weighted that way (and by cpus over the initiators), the
  remote latency likewise, and the merged controller's bandwidth is the sum of its parts. Splitting runs the
  rule backwards from the on-die latency ``d`` (near-to-far sub-node, without the controller): near
  ``= merged - d (k-1)/k``, far ``= near + d``, so that merging the result gives the merged numbers back.

The machine passed in must be *timed* (controllers and links carry the numbers to transfer: the machine file's
nominal ones, or a calibration's through :func:`numasim.timing.model.apply_calibration`, which is what
:func:`numasim.timing.transfer.transfer_calibration` does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar

import numpy as np

from numasim.errors import TopologyError
from numasim.topology.cluster_mode import FIRMWARE_SLIT, ClusterMode, ModeOffer, check_request
from numasim.topology.cpulist import format_cpulist
from numasim.topology.model import (
    LOCAL_DISTANCE,
    CacheScope,
    Device,
    Link,
    LinkKind,
    Machine,
    MemoryController,
    MemoryKind,
    Node,
    Switch,
    Vertex,
)
from numasim.topology.routing import latency_table_ns

__all__ = ["DieLink", "Reconfiguration", "reconfigure", "split_cpus", "cpu_runs", "cluster_caches"]


@dataclass(frozen=True)
class DieLink:
    """On-die timing between two sub-nodes of one socket: the path near node -> hub -> far node.

    ``measured`` is True when it was read off the source machine's own on-die links (a calibration's numbers
    if the machine was timed by one), False when it was given (a prior).
    """

    latency_ns: float
    bandwidth_gb_s: float
    measured: bool


@dataclass(frozen=True)
class Reconfiguration:
    """A machine in its new mode, and how its parts map to the old machine's.

    Attributes
    ----------
    parts : dict
        ``parts[new_node] = ((old_node, weight), ...)``. A merged node lists every old node of its socket with
        the fraction of its channels (bandwidth) each supplies (weights sum to 1); a split node lists its one
        parent with the fraction of the parent's channels it gets.
    socket_links : dict
        Each directed socket-to-socket link of the new machine -> the directed old links it stands for; and each
        direction of a carried CXL expander's link -> the old link's (a calibration's curves follow them).
    die_link : DieLink or None
        The on-die timing used to split (``None`` when the target has one node per socket).
    """

    machine: Machine
    source_mode: ClusterMode
    target_mode: ClusterMode
    parts: dict[int, tuple[tuple[int, float], ...]]
    socket_links: dict[tuple[Vertex, Vertex], tuple[tuple[Vertex, Vertex], ...]]
    die_link: DieLink | None


class _Cache(Protocol):
    size_bytes: int
    scope: CacheScope

    def model_copy(self, *, update: dict[str, object] | None = None, deep: bool = False) -> Self: ...


_C = TypeVar("_C", bound=_Cache)


def cluster_caches(caches: Sequence[_C], source: ClusterMode, target: ClusterMode) -> list[_C]:
    """A socket's shared caches in ``target`` mode (machine file or calibration levels alike).

    In Intel's sub-NUMA clustering and Cluster-on-Die modes a cluster's memory is cached in its own share of the
    socket's L3 slices (Intel's Xeon Scalable technical overview: SNC maps the addresses of a cluster's memory
    controller to the LLC slices of that cluster): with ``k`` clusters a socket, one instance a node
    (:attr:`CacheScope.CLUSTER`) of the socket's L3 over ``k``; with one node a socket, the whole L3
    (``SOCKET``). A ``CLUSTER`` level of the source is such a share (``k`` of them make the socket's). AMD's NPS
    modes move memory channels, not caches: an ``nps`` change keeps every level as it is, as it does private
    levels and a node's own (``NODE``).

    Examples
    --------
    >>> from numasim.topology.model import CacheLevel
    >>> l3 = CacheLevel(name="L3", size_bytes=48 << 20, latency_ns=18.0, scope=CacheScope.SOCKET)
    >>> [(c.size_bytes >> 20, c.scope.value) for c in cluster_caches([l3], ClusterMode("snc", 1), ClusterMode("snc", 2))]
    [(24, 'cluster')]
    """
    if "nps" in (source.family, target.family):
        return list(caches)
    out: list[_C] = []
    for c in caches:
        if c.scope not in (CacheScope.SOCKET, CacheScope.CLUSTER):
            out.append(c)
            continue
        socket_bytes = c.size_bytes * (source.per_socket if c.scope is CacheScope.CLUSTER else 1)
        if target.per_socket > 1:
            out.append(c.model_copy(update={"size_bytes": socket_bytes // target.per_socket,
                                            "scope": CacheScope.CLUSTER}))
        else:
            out.append(c.model_copy(update={"size_bytes": socket_bytes, "scope": CacheScope.SOCKET}))
    return out


def cpu_runs(cpus: Sequence[int]) -> list[list[int]]:
    """Maximal runs of consecutive cpu numbers, in order.

    Examples
    --------
    >>> cpu_runs([0, 1, 2, 8, 9])
    [[0, 1, 2], [8, 9]]
    """
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def split_cpus(cpus: Sequence[int], k: int, *, interleaved: bool, threads_per_core: int | None = None) -> list[list[int]]:
    """A socket's cpus dealt to ``k`` sub-nodes as Linux numbers them.

    ``interleaved``: the firmware enumerates cpus round robin over nodes (a 2-socket Dell R740 in SNC2: node
    0 has cpus 0,4,8,..., node 2 cpus 2,6,10,...), so sub-node ``j`` gets every ``k``-th of the socket's cpus.
    Otherwise cpus are numbered in blocks (the x86 MADT order multi_die, kerncraft's EPYC 7452 ``0-7,32-39``,
    the Cisco CoD Haswell and KNL SNC4 files show): the first hardware threads of a node's cores, then the
    second threads in the same order. Each block (one per thread of a core) is cut in ``k`` equal pieces and
    sub-node ``j`` gets piece ``j`` of every block. The blocks are the runs of consecutive numbers; when a
    socket's cpus are one run (a single socket), ``threads_per_core`` says how many blocks it holds.

    Examples
    --------
    >>> halves = split_cpus(list(range(0, 24)) + list(range(48, 72)), 2, interleaved=False)
    >>> halves[0][:3], halves[0][12:15], len(halves[0])
    ([0, 1, 2], [48, 49, 50], 24)
    >>> split_cpus(list(range(64)), 4, interleaved=False, threads_per_core=2)[1][:2]
    [8, 9]
    >>> split_cpus(list(range(0, 16, 2)), 2, interleaved=True)
    [[0, 4, 8, 12], [2, 6, 10, 14]]
    """
    ordered = sorted(cpus)
    if interleaved:
        return [ordered[j::k] for j in range(k)]
    runs = cpu_runs(ordered)
    if threads_per_core is not None and len(runs) != threads_per_core:
        if len(runs) != 1 or len(ordered) % threads_per_core:
            raise TopologyError(
                "threads_per_core", threads_per_core,
                f"the socket's cpus form {len(runs)} run(s) of consecutive numbers, which is not one per thread",
            )
        size = len(ordered) // threads_per_core
        runs = [ordered[t * size:(t + 1) * size] for t in range(threads_per_core)]
    out: list[list[int]] = [[] for _ in range(k)]
    for run in runs:
        if len(run) % k:
            raise TopologyError(
                "cpus", f"{run[0]}-{run[-1]}", f"{len(run)} cores per socket do not split into {k} equal clusters"
            )
        size = len(run) // k
        for j in range(k):
            out[j].extend(run[j * size:(j + 1) * size])
    return [sorted(part) for part in out]


_MODE_SUFFIX = re.compile(r"-(snc[1-4]|snc-off|nps[124]|cod|cod-off|cod-on)$", re.IGNORECASE)


def _new_name(name: str, target: ClusterMode) -> str:
    return f"{_MODE_SUFFIX.sub('', name)}-{target.suffix}"


def _first_description(machine: Machine) -> str:
    # A machine reconfigured twice keeps the original description once, not nested.
    head, sep, rest = machine.description.partition(" Before: ")
    return rest if sep and " by numasim topo reconfigure " in head else machine.description


def _vertex_sockets(machine: Machine) -> dict[Vertex, int]:
    """Socket of every vertex: nodes from their field, a switch from the nodes linked to it (one socket only)."""
    where: dict[Vertex, int] = {n.id: n.socket for n in machine.nodes if n.socket is not None}
    for sw in machine.switches:
        near = {where[v] for link in machine.links for v in (link.a, link.b)
                if sw.name in (link.a, link.b) and isinstance(v, int)}
        if len(near) != 1:
            raise TopologyError(
                f"switches[{sw.name}]", sorted(near),
                "reconfigure handles switches inside one socket (on-die hubs) only; this one joins "
                + ("no node" if not near else "nodes of several sockets"),
            )
        where[sw.name] = near.pop()
    return where


def _is_interleaved(socket_cpus: dict[int, list[int]]) -> bool:
    sockets = len(socket_cpus)
    if sockets < 2:
        return False
    return all(
        len(cpus) > 1 and cpus == list(range(cpus[0], cpus[0] + sockets * len(cpus), sockets))
        for cpus in socket_cpus.values()
    )


def _even_split(total: int, k: int) -> list[int]:
    base = total // k
    return [base + (1 if j < total - base * k else 0) for j in range(k)]


def reconfigure(
    machine: Machine,
    target: ClusterMode,
    *,
    die_latency_ns: float | None = None,
    die_bandwidth_gb_s: float | None = None,
    threads_per_core: int | None = None,
    channels_per_socket: int | None = None,
    offered: ModeOffer | None = None,
) -> Reconfiguration:
    """``machine`` (timed) in ``target`` mode, its timing carried by the interleave rule (module docstring).

    Parameters
    ----------
    die_latency_ns, die_bandwidth_gb_s : float, optional
        On-die path near sub-node -> hub -> far sub-node (latency without the controller) and its link
        bandwidth, for splitting. Default: read off the source's own on-die links; a machine with one node per
        socket has none, so splitting it needs both (they are priors).
    threads_per_core : int, optional
        Needed to split a single socket whose cpus are one run of numbers (see :func:`split_cpus`).
    channels_per_socket : int, optional
        When given, splitting checks that the channels divide evenly among the new nodes.
    offered : ModeOffer, optional
        The modes the processor's firmware offers (:func:`numasim.timing.catalog.mode_offer`); when given, a
        mode outside it is refused.

    Examples
    --------
    >>> from numasim.topology.builders import multi_die
    >>> from numasim.topology.cluster_mode import ClusterMode
    >>> r = reconfigure(multi_die(2, "SNC2"), ClusterMode("snc", 1))
    >>> m = r.machine
    >>> m.name, [n.cpus[:2] for n in m.nodes], m.nodes[0].controller.read_bandwidth_gb_s
    ('multi-die-2s-snc-off', [[0, 1], [24, 25]], 108.0)
    >>> round(m.nodes[0].controller.latency_ns, 1)  # 81 near, 89 far, half the lines each
    85.0
    """
    full = machine
    machine, cxl = _without_cxl(machine)
    source = check_request(machine, target, offered)
    if machine.routes:
        raise TopologyError("routes", len(machine.routes), "explicit routes cannot be carried across a mode change")
    for n in machine.nodes:
        if n.controller is None:
            raise TopologyError(f"nodes[{n.id}].controller", None, "reconfigure needs every node's controller timing")
        if n.relay_latency_ns > 0:
            raise TopologyError(f"nodes[{n.id}].relay_latency_ns", n.relay_latency_ns, "relay latencies are not carried")
    k = target.per_socket
    if channels_per_socket is not None and k > 1 and channels_per_socket % k:
        raise TopologyError(
            "channels_per_socket", channels_per_socket, f"{channels_per_socket} channels do not split into {k} clusters"
        )
    sockets = machine.sockets
    rank = {s: r for r, s in enumerate(sockets)}
    where = _vertex_sockets(machine)
    members = {s: [n for n in machine.nodes if n.socket == s] for s in sockets}
    socket_cpus = {s: sorted(c for n in members[s] for c in n.cpus) for s in sockets}
    interleaved = _is_interleaved(socket_cpus)
    if threads_per_core is None and k > 1 and len(sockets) == 1 and not interleaved and len(cpu_runs(socket_cpus[sockets[0]])) == 1:
        raise TopologyError(
            "threads_per_core", None,
            "the socket's cpus are one run of numbers, so which are second hardware threads cannot be told: "
            "give threads_per_core (--threads-per-core)",
        )

    lat = latency_table_ns(machine)
    idx = {n.id: i for i, n in enumerate(machine.nodes)}
    ctrl = {n.id: n.controller for n in machine.nodes if n.controller is not None}

    def cpu_w(s: int) -> dict[int, float]:
        total = sum(len(n.cpus) for n in members[s])
        return {n.id: len(n.cpus) / total for n in members[s]}

    def chan_w(s: int) -> dict[int, float]:
        total = sum(ctrl[n.id].read_bandwidth_gb_s for n in members[s])
        return {n.id: ctrl[n.id].read_bandwidth_gb_s / total for n in members[s]}

    def interleaved_ns(s: int, t: int) -> float:
        # A cpu of socket s (weighted by cpus) reading a line of socket t (weighted by channel share).
        return float(sum(wi * vj * lat[idx[i], idx[j]] for i, wi in cpu_w(s).items() for j, vj in chan_w(t).items()))

    merged_ns = {(s, t): interleaved_ns(s, t) for s in sockets for t in sockets}
    read_bw = {s: sum(ctrl[n.id].read_bandwidth_gb_s for n in members[s]) for s in sockets}
    write_bw = {s: sum(ctrl[n.id].effective_write_bandwidth_gb_s for n in members[s]) for s in sockets}
    write_given = any(ctrl[n.id].write_bandwidth_gb_s is not None for n in machine.nodes)

    die = _die_link(machine, source, members, where, lat, idx, ctrl, cpu_w, chan_w, die_latency_ns, die_bandwidth_gb_s, k)

    # --- nodes -----------------------------------------------------------------------------------------
    count = len(sockets)
    new_id: dict[tuple[int, int], int] = {}
    for s in sockets:
        for j in range(k):
            new_id[(s, j)] = j * count + rank[s] if interleaved and k > 1 else rank[s] * k + j
    nodes: list[Node] = []
    parts: dict[int, tuple[tuple[int, float], ...]] = {}
    near_ns: dict[int, float] = {}
    for s in sockets:
        memory = sum(n.memory_bytes for n in members[s])
        frees = [n.free_bytes for n in members[s]]
        free = sum(f for f in frees if f is not None) if all(f is not None for f in frees) else None
        # a memory-side cache caches its node's memory: the socket's caches go with its memory, merged or split
        caches = [n.memory_side_cache_bytes for n in members[s]]
        if any(c is not None for c in caches) and not all(c is not None for c in caches):
            raise TopologyError(f"nodes[{members[s][0].id}].memory_side_cache_bytes", caches[0],
                                f"only some of socket {s}'s nodes have a memory-side cache: it cannot be shared out")
        cache = sum(c for c in caches if c is not None) if caches[0] is not None else None
        if k == 1:
            nid = new_id[(s, 0)]
            controller = MemoryController(
                latency_ns=merged_ns[(s, s)],
                read_bandwidth_gb_s=read_bw[s],
                write_bandwidth_gb_s=write_bw[s] if write_given else None,
            )
            nodes.append(Node(id=nid, cpus=socket_cpus[s], memory_bytes=memory, free_bytes=free, socket=s,
                              memory_kind=members[s][0].memory_kind, controller=controller,
                              memory_side_cache_bytes=cache))
            parts[nid] = tuple(chan_w(s).items())
            continue
        assert die is not None
        near = merged_ns[(s, s)] - die.latency_ns * (k - 1) / k
        if near <= 0:
            raise TopologyError("die_latency_ns", die.latency_ns, f"leaves socket {s} no positive near latency ({near:.1f} ns)")
        near_ns[s] = near
        groups = split_cpus(socket_cpus[s], k, interleaved=interleaved, threads_per_core=threads_per_core)
        mems = _even_split(memory, k)
        free_parts = _even_split(free, k) if free is not None else [None] * k
        cache_parts = _even_split(cache, k) if cache is not None else [None] * k
        parent = members[s][0].id if len(members[s]) == 1 else None
        for j in range(k):
            nid = new_id[(s, j)]
            controller = MemoryController(
                latency_ns=near,
                read_bandwidth_gb_s=read_bw[s] / k,
                write_bandwidth_gb_s=write_bw[s] / k if write_given else None,
            )
            nodes.append(Node(id=nid, cpus=groups[j], memory_bytes=mems[j], free_bytes=free_parts[j], socket=s,
                              die=j, memory_kind=members[s][0].memory_kind, controller=controller,
                              memory_side_cache_bytes=cache_parts[j]))
            # From a split source (SNC2 -> SNC4) the new node's channels come from the whole socket's.
            parts[nid] = ((parent, 1.0 / k),) if parent is not None else tuple((i, w / k) for i, w in chan_w(s).items())
    nodes.sort(key=lambda n: n.id)

    # --- links -----------------------------------------------------------------------------------------
    amd = target.family == "nps"
    hub_kind = LinkKind.INFINITY_FABRIC if amd else LinkKind.ON_DIE
    suffix = "iod" if amd else ("ring" if target.family == "cod" else "mesh")
    hub = {s: (f"socket{s}-{suffix}" if k > 1 else new_id[(s, 0)]) for s in sockets}
    links: list[Link] = []
    switches: list[Switch] = []
    if k > 1:
        assert die is not None
        switches = [Switch(name=str(hub[s]), kind=hub_kind) for s in sockets]
        links += [
            Link(a=new_id[(s, j)], b=hub[s], kind=hub_kind, latency_ns=die.latency_ns / 2, bandwidth_gb_s=die.bandwidth_gb_s)
            for s in sockets for j in range(k)
        ]
    socket_links: dict[tuple[Vertex, Vertex], tuple[tuple[Vertex, Vertex], ...]] = {}
    for s in sockets:
        for t in sockets:
            if rank[t] <= rank[s]:
                continue
            old = [link for link in machine.links if {where[link.a], where[link.b]} == {s, t}]
            if not old:
                continue
            fwd = [(a, b, la, bw) for link in old for a, b, la, bw in link.directed() if where[a] == s]
            back = [(a, b, la, bw) for link in old for a, b, la, bw in link.directed() if where[a] == t]
            hop = {}
            for x, y in ((s, t), (t, s)):
                if k == 1:
                    ns = merged_ns[(x, y)] - merged_ns[(y, y)]
                else:
                    assert die is not None
                    ns = merged_ns[(x, y)] - near_ns[y] - die.latency_ns
                if ns <= 0:
                    raise TopologyError(
                        "die_latency_ns" if k > 1 else "links", round(ns, 3),
                        f"socket {x} -> {y}: no positive link latency is left for the socket-to-socket hop",
                    )
                hop[(x, y)] = ns
            bw_f = sum(e[3] for e in fwd)
            bw_b = sum(e[3] for e in back)
            links.append(Link(
                a=hub[s], b=hub[t], kind=old[0].kind, latency_ns=hop[(s, t)], bandwidth_gb_s=bw_f,
                latency_ns_reverse=hop[(t, s)] if not np.isclose(hop[(t, s)], hop[(s, t)], rtol=1e-12) else None,
                bandwidth_gb_s_reverse=bw_b if not np.isclose(bw_b, bw_f, rtol=1e-12) else None,
            ))
            socket_links[(hub[s], hub[t])] = tuple((e[0], e[1]) for e in fwd)
            socket_links[(hub[t], hub[s])] = tuple((e[0], e[1]) for e in back)

    devices = [_move_device(d, machine, new_id) for d in machine.devices]
    # Core dies are silicon: the same cpus behind the same ports in every mode, so each must land in one node.
    node_of = {c: n.id for n in nodes for c in n.cpus}
    for i, core_die in enumerate(machine.core_dies):
        landed = sorted({node_of[c] for c in core_die.cpus})
        if len(landed) > 1:
            raise TopologyError(f"core_dies[{i}].cpus", format_cpulist(core_die.cpus),
                                f"{target.label} would split this core die over nodes {landed}")
    slit = _firmware_slit(machine, source, target, nodes, new_id, members, near_ns, die) if machine.firmware_slit else None
    if cxl:
        nodes, links, slit, cxl_parts, cxl_links = _with_cxl(full, cxl, nodes, links, slit, hub, cpu_w,
                                                             die.latency_ns / 2 if k > 1 and die is not None else 0.0)
        parts.update(cxl_parts)
        socket_links.update(cxl_links)
    out = Machine(
        name=_new_name(machine.name, target),
        description=(
            f"{machine.name} reconfigured from {source.label} to {target.label} by numasim topo reconfigure "
            f"(same cores, channels and links; timing carried by the channel-interleave rule)."
            + (f" Before: {_first_description(machine)}" if machine.description else "")
        ),
        source=machine.source,
        nodes=nodes,
        links=links,
        switches=switches,
        devices=devices,
        caches=cluster_caches(machine.caches, source, target),
        core_dies=list(machine.core_dies),
        firmware_slit=slit,
        cpu_model=machine.cpu_model,
    )
    return Reconfiguration(out, source, target, parts, socket_links, die if k > 1 else None)


def _without_cxl(machine: Machine) -> tuple[Machine, list[tuple[Node, Link]]]:
    """``machine`` without its CXL memory nodes, and each of them with its CXL link.

    A CXL expander is no cluster of a socket: a mode change regroups the cpus and channels around it and leaves it
    where it is, behind its socket (:func:`_with_cxl` puts it back). Other memory-only nodes (MCDRAM, PMEM, a node
    whose cpus are offline) are refused, as is an expander behind more than one link.
    """
    cpuless = [n for n in machine.nodes if not n.has_cpus]
    if not cpuless:
        return machine, []
    out: list[tuple[Node, Link]] = []
    for n in cpuless:
        ends = [link for link in machine.links if n.id in (link.a, link.b)]
        if n.memory_kind is not MemoryKind.CXL or n.socket is None or len(ends) != 1 or ends[0].kind is not LinkKind.CXL:
            raise TopologyError(
                f"nodes[{n.id}].cpus", [], "memory-only nodes other than a CXL expander on a socket, behind one CXL "
                "link (MCDRAM, PMEM, offline cpus) are not reconfigured yet"
            )
        out.append((n, ends[0]))
    gone = {n.id for n in cpuless}
    keep = [i for i, n in enumerate(machine.nodes) if n.id not in gone]
    slit = machine.firmware_slit
    stripped = machine.model_copy(update={
        "nodes": [machine.nodes[i] for i in keep],
        "links": [link for link in machine.links if link.a not in gone and link.b not in gone],
        "firmware_slit": None if slit is None else [[slit[i][j] for j in keep] for i in keep],
    })
    return stripped, out


def _with_cxl(
    full: Machine, cxl: list[tuple[Node, Link]], nodes: list[Node], links: list[Link], slit: list[list[int]] | None,
    hub: dict[int, Vertex], cpu_w: Callable[[int], dict[int, float]], near_hop_ns: float,
) -> tuple[list[Node], list[Link], list[list[int]] | None, dict[int, tuple[tuple[int, float], ...]],
           dict[tuple[Vertex, Vertex], tuple[tuple[Vertex, Vertex], ...]]]:
    """The new mode's machine with the CXL nodes back: after the new nodes, each behind its socket's new hub
    (or its one node), its link's latency set so that the socket's cpus reach it in the time they did on average
    (weighted by cpus: what an expander behind the I/O die or the mesh costs from anywhere in the socket), its
    bandwidth and controller as they were, its firmware distances the means of its old ones to the socket's old
    nodes."""
    lat = latency_table_ns(full)
    idx = {n.id: i for i, n in enumerate(full.nodes)}
    old_slit = full.firmware_slit
    next_id = max(n.id for n in nodes) + 1
    new_nodes, new_links = list(nodes), list(links)
    parts: dict[int, tuple[tuple[int, float], ...]] = {}
    mapped: dict[tuple[Vertex, Vertex], tuple[tuple[Vertex, Vertex], ...]] = {}
    moved: dict[int, int] = {}
    for n, link in cxl:
        s = n.socket
        assert s is not None and n.controller is not None
        target = sum(w * lat[idx[i], idx[n.id]] for i, w in cpu_w(s).items())
        hop = target - n.controller.latency_ns - near_hop_ns
        if hop <= 0:
            raise TopologyError(f"nodes[{n.id}]", round(target, 3), "no positive CXL link latency is left in the new mode")
        nid = next_id
        next_id += 1
        moved[n.id] = nid
        new_nodes.append(n.model_copy(update={"id": nid}))
        attach = hub[s]
        (_, _, _, bw_ab), (_, _, _, bw_ba) = link.directed()
        fwd, back = (bw_ab, bw_ba) if link.b == n.id else (bw_ba, bw_ab)
        new_links.append(Link(a=attach, b=nid, kind=LinkKind.CXL, latency_ns=hop, bandwidth_gb_s=fwd,
                              bandwidth_gb_s_reverse=back if not np.isclose(back, fwd, rtol=1e-12) else None))
        old_attach = link.a if link.b == n.id else link.b
        parts[nid] = ((n.id, 1.0),)
        mapped[(attach, nid)] = ((old_attach, n.id),)
        mapped[(nid, attach)] = ((n.id, old_attach),)
    if slit is None or old_slit is None:
        return new_nodes, new_links, None, parts, mapped
    pos = {m.id: i for i, m in enumerate(full.nodes)}
    socket_of = {m.id: m.socket for m in full.nodes if m.has_cpus}
    order = [m.id for m in new_nodes]
    new_socket = {m.id: m.socket for m in new_nodes}
    back_id = {v: k for k, v in moved.items()}
    out = [[LOCAL_DISTANCE] * len(order) for _ in order]
    for a, na in enumerate(order):
        for b, nb in enumerate(order):
            if a == b:
                continue
            if na not in back_id and nb not in back_id:
                out[a][b] = slit[a][b]
            elif na in back_id and nb in back_id:
                out[a][b] = old_slit[pos[back_id[na]]][pos[back_id[nb]]]
            elif nb in back_id:  # a socket's new node to an expander: the mean over the socket's old nodes
                olds = [i for i, t in socket_of.items() if t == new_socket[na]]
                out[a][b] = round(float(np.mean([old_slit[pos[i]][pos[back_id[nb]]] for i in olds])))
            else:
                olds = [i for i, t in socket_of.items() if t == new_socket[nb]]
                out[a][b] = round(float(np.mean([old_slit[pos[back_id[na]]][pos[i]] for i in olds])))
    return new_nodes, new_links, out, parts, mapped


def _die_link(
    machine: Machine, source: ClusterMode, members: dict[int, list[Node]], where: dict[Vertex, int],
    lat: np.ndarray, idx: dict[int, int], ctrl: dict[int, MemoryController],
    cpu_w: object, chan_w: object, latency_ns: float | None, bandwidth_gb_s: float | None, k: int,
) -> DieLink | None:
    """The on-die timing for splitting: given (a prior), else the source's near-to-far path (measured)."""
    if k == 1:
        return None
    if latency_ns is not None and bandwidth_gb_s is not None:
        if latency_ns <= 0 or bandwidth_gb_s <= 0:
            raise TopologyError("die_latency_ns/die_bandwidth_gb_s", (latency_ns, bandwidth_gb_s), "must be > 0")
        return DieLink(latency_ns, bandwidth_gb_s, measured=False)
    if source.per_socket == 1:
        raise TopologyError(
            "die_latency_ns" if latency_ns is None else "die_bandwidth_gb_s", None,
            f"{machine.name} has one node per socket, so no on-die link to carry: give the near-to-far on-die "
            "latency and bandwidth (--die-latency-ns, --die-bandwidth-gb-s; priors, say where they come from)",
        )
    far, weight = 0.0, 0.0
    for nodes in members.values():
        w = cpu_w(nodes[0].socket)  # type: ignore[operator]
        v = chan_w(nodes[0].socket)  # type: ignore[operator]
        for i in nodes:
            for j in nodes:
                if i.id != j.id:
                    far += w[i.id] * v[j.id] * (lat[idx[i.id], idx[j.id]] - ctrl[j.id].latency_ns)
                    weight += w[i.id] * v[j.id]
    on_die = [bw for link in machine.links for a, b, _, bw in link.directed() if where[a] == where[b]]
    return DieLink(
        latency_ns if latency_ns is not None else far / weight,
        bandwidth_gb_s if bandwidth_gb_s is not None else float(np.mean(on_die)),
        measured=latency_ns is None and bandwidth_gb_s is None,
    )


def _move_device(device: Device, machine: Machine, new_id: dict[tuple[int, int], int]) -> Device:
    # A device stays on its socket; which cluster its PCIe root sits in is not known, so the first one.
    socket = machine.node(device.node).socket
    assert socket is not None
    return device.model_copy(update={"node": new_id[(socket, 0)]})


def _firmware_slit(
    machine: Machine, source: ClusterMode, target: ClusterMode, nodes: list[Node], new_id: dict[tuple[int, int], int],
    members: dict[int, list[Node]], near_ns: dict[int, float], die: DieLink | None,
) -> list[list[int]]:
    """The SLIT firmware writes in the new mode (conventions and sources at ``FIRMWARE_SLIT``)."""
    assert machine.firmware_slit is not None
    old = machine.firmware_slit
    pos = {n.id: i for i, n in enumerate(machine.nodes)}
    old_conv = FIRMWARE_SLIT.get((source.family, source.per_socket), (0, 0))
    new_conv = FIRMWARE_SLIT.get((target.family, target.per_socket), (0, 0))
    socket_of = {n.id: n.socket for n in nodes}
    order = [n.id for n in nodes]
    out = [[LOCAL_DISTANCE] * len(order) for _ in order]
    for a, na in enumerate(order):
        for b, nb in enumerate(order):
            if a == b:
                continue
            s, t = socket_of[na], socket_of[nb]
            assert s is not None and t is not None
            if s == t:
                if new_conv[0]:
                    d = new_conv[0]
                else:
                    assert die is not None
                    d = round(LOCAL_DISTANCE * (near_ns[s] + die.latency_ns) / near_ns[s])
            else:
                values = [old[pos[i.id]][pos[j.id]] for i in members[s] for j in members[t]]
                d = round(float(np.mean(values)))
                if old_conv[1] and new_conv[1]:
                    d += new_conv[1] - old_conv[1]  # CoD on/off moves the other socket 21 <-> 31
            out[a][b] = min(max(d, LOCAL_DISTANCE + 1), 254)
    return out
