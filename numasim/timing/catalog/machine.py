"""A machine whose nominal numbers are its processor's catalog priors (what ``numasim topo import --cpu`` writes).

An imported topology (``numactl --hardware``, sysfs, hwloc) knows which cpus and how much memory each node has,
and the firmware's distances, but not what a link or a controller can do: the importer's nominal 20 GB/s links
and 100 ns controllers are placeholders. Given the processor, the platform catalog knows better: this puts the
catalog calibration's controllers, links, caches (with the catalog's associativity) into the machine file, and
says so in its description. Timing results still name a calibration: ``--catalog`` builds the same numbers as a
``method="catalog"`` calibration whose priors are listed one by one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from numasim.errors import CalibrationError
from numasim.timing.catalog.calibration import catalog_calibration, catalog_figures, stand_in_sku
from numasim.timing.catalog.cxl import load_cxl_catalog
from numasim.timing.catalog.cxl_timing import choose_cxl_device, cxl_figures
from numasim.timing.catalog.match import CatalogMatch, match_cpu
from numasim.timing.model import Calibration, apply_calibration
from numasim.topology.model import CacheLevel, Link, LinkKind, Machine, MemoryKind, Node
from numasim.units import GiB

__all__ = ["catalog_borrowed", "catalog_machine", "catalog_timed_by"]

_PRIORS_NOTE = "Nominal timing numbers are the platform catalog's priors for "
_BORROWED_NOTE = "Borrowed from other platforms (no public figure of this one's): "


def _borrowed(cal: Calibration) -> str:
    """Which of a catalog calibration's priors another platform lent, grouped by lender, e.g.
    ``"controllers.latency_ns, links.latency_ns from intel-ivy-bridge-ep"`` ("" where none was)."""
    by_donor: dict[str, list[str]] = {}
    for p in cal.provenance.priors:
        got = re.search(r"borrowed from ([a-z0-9-]+)", p.source)
        if got is None:
            continue
        name = p.parameter if p.parameter.startswith("caches[") else re.sub(r"\[[^\]]*\]", "", p.parameter)
        names = by_donor.setdefault(got.group(1), [])
        if name not in names:
            names.append(name)
    return "; ".join(f"{', '.join(names)} from {donor}" for donor, names in by_donor.items())


def catalog_borrowed(machine: Machine) -> str | None:
    """What :func:`catalog_machine` wrote of the priors other platforms lent (None: none, or not a catalog
    machine)."""
    text = machine.description
    at = text.find(_BORROWED_NOTE)
    if at < 0:
        return None
    rest = text[at + len(_BORROWED_NOTE):]
    end = rest.find(".\n") if ".\n" in rest else rest.find(". ")
    return rest[:end] if end > 0 else rest.rstrip(".")


def catalog_timed_by(machine: Machine) -> str | None:
    """The catalog entry whose priors ``machine``'s own numbers are (what :func:`catalog_machine` wrote in its
    description, e.g. ``"intel-skylake-sp / Xeon Gold 6148"``), or None for any other machine file.

    >>> from numasim.topology.builders import glueless
    >>> catalog_timed_by(catalog_machine(glueless(2), "Xeon Gold 6240")), catalog_timed_by(glueless(2))
    ('intel-cascade-lake-sp / Xeon Gold 6240', None)
    """
    text = machine.description
    at = text.find(_PRIORS_NOTE)
    if at < 0:
        return None
    rest = text[at + len(_PRIORS_NOTE):]
    end = rest.find(" (numasim catalog show")
    return rest[:end] if end > 0 else None


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
    ('Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz', 125.2, ['L1d', 'L2', 'L3'])
    >>> x = catalog_machine(glueless(2), "Xeon Platinum 8470", cxl_expanders=1, cxl_device="micron-cz120")
    >>> cxl = x.nodes[-1]
    >>> cxl.memory_kind.value, cxl.cpus, round(x.links[-1].bandwidth_gb_s, 1), x.slit()[0]
    ('cxl', [], 26.4, [10, 15, 22])
    """
    if cpu is not None:
        machine = machine.model_copy(update={"cpu_model": cpu})
    found = match_cpu(machine.cpu_model or "")
    if found.sku is None and found.how == "pattern":  # an unlisted part: the nearest listed SKU stands in
        found = stand_in_sku(found, machine)
    machine, hbm_note = _memory_only_as_hbm(machine, found)
    machine, memory_only_note = _memory_only_as_cxl(machine, found, cxl_device)
    machine, structure_note = _socket_structure(machine, found)
    converted = [n.id for n in machine.nodes if n.memory_kind.value == "cxl" and n.socket is None]
    machine = _cxl_at_socket_switch(machine, converted)
    cal = catalog_calibration(machine, cxl_device=cxl_device)
    # The catalog's associativity per level, so the engine's set-associative estimate uses the real ways.
    ways = {spec.level.lower(): spec.associativity for spec in found.platform.caches}
    shaped = machine.model_copy(update={"caches": [
        CacheLevel(name=c.name, size_bytes=c.size_bytes, latency_ns=c.latency_ns, scope=c.scope,
                   line_bytes=c.line_bytes, associativity=ways.get(c.name.lower()) or 8,
                   complexes_per_die=c.complexes_per_die)
        for c in cal.caches
    ]}) if cal.caches else machine
    timed = _socket_links_named(apply_calibration(shaped, cal), found)
    note = (
        f"{_PRIORS_NOTE}{found.label} "
        f"(numasim catalog show {found.platform.name!r}); nothing of this box was measured."
    )
    if lent := _borrowed(cal):
        note = f"{note} {_BORROWED_NOTE}{lent}."
    if structure_note:
        note = f"{note} {structure_note}"
    if hbm_note:
        note = f"{note} {hbm_note}"
    if memory_only_note:
        note = f"{note} {memory_only_note}"
    if cxl_expanders:
        timed, cxl_note = _add_expanders(timed, found, cxl_device, cxl_expanders, cxl_socket, cxl_size_bytes)
        note = f"{note} {cxl_note}"
    description = f"{machine.description}\n{note}" if machine.description else note
    return timed.model_copy(
        update={"calibration": machine.calibration, "description": description}
    )


def _loose_memory(machine: Machine) -> list[Node]:
    """The nodes an importer could not place: memory and no cpus, DRAM by the file, on no socket."""
    return [n for n in machine.nodes
            if n.has_memory and not n.has_cpus and n.memory_kind is MemoryKind.DRAM and n.socket is None]


def _nearest_cpu_node(machine: Machine, node: int) -> tuple[int, str]:
    """The cpu node the firmware's distances put nearest ``node`` (the cpus' rows: a cpu-less node's own row is
    often 255, "no distance"; ties to the lowest id), and why, in words."""
    slit = machine.firmware_slit if machine.firmware_slit is not None else machine.slit()
    index = {nid: i for i, nid in enumerate(machine.node_ids)}
    far = {c.id: slit[index[c.id]][index[node]] for c in machine.nodes if c.has_cpus}
    nearest = min(far.values())
    attach = min(c for c, d in far.items() if d == nearest)
    ties = [c for c, d in far.items() if d == nearest]
    others = sorted({d for d in far.values() if d != nearest})
    why = (f"distance {nearest} from node {attach}" + (f" (as from nodes {ties[1:]})" if len(ties) > 1 else "")
           + (f", {'/'.join(map(str, others))} from the others" if others else ", as from every cpu node: "
              "no nearest, so the lowest id"))
    return attach, why


def _rejoined(
    machine: Machine, links: list[Link], node: int, kind: LinkKind, latency_ns: float, bandwidth_gb_s: float
) -> tuple[list[Link], int, str]:
    """``links`` with ``node``'s own replaced by one link of ``kind`` to the cpu node nearest it
    (:func:`_nearest_cpu_node`), and that node and why."""
    attach, why = _nearest_cpu_node(machine, node)
    out = [lk for lk in links if node not in (lk.a, lk.b)]
    out += _bridges(out, [lk for lk in links if node in (lk.a, lk.b)], node)
    out.append(Link(a=attach, b=node, kind=kind, latency_ns=latency_ns, bandwidth_gb_s=bandwidth_gb_s))
    return out, attach, why


def _bridges(kept: list[Link], own: list[Link], node: int) -> list[Link]:
    """Links that keep the rest of the machine joined where ``node`` (losing its links ``own``) joined it.

    The importer leaves out a direct link wherever the firmware's distances make a path through a third node
    as short (a cpu-less node at distance 13 from one socket and 29 from the other, the sockets 32 apart, carries
    their traffic). Each pair of ``node``'s neighbours that ``kept`` no longer connects gets that path as a link
    of its own: latency the two hops' sum each way, bandwidth the narrower hop's, the first hop's kind.
    """
    import networkx as nx

    joined = nx.Graph([(lk.a, lk.b) for lk in kept])
    hops = {}  # neighbour -> (latency to node, latency from node, bandwidth, kind)
    for lk in own:
        (src, dst, fwd, _), (_, _, back, _) = lk.directed()
        other = dst if src == node else src
        to_node, from_node = (fwd, back) if src == other else (back, fwd)
        bw = min(lk.bandwidth_gb_s, lk.bandwidth_gb_s_reverse or lk.bandwidth_gb_s)
        hops[other] = (to_node, from_node, bw, lk.kind)
    out: list[Link] = []
    joined.add_nodes_from(hops)
    near = sorted(hops, key=lambda v: (hops[v][0] + hops[v][1], str(v)))
    for i, u in enumerate(near):
        for v in near[i + 1:]:
            if nx.has_path(joined, u, v):
                continue
            (u_in, u_out, u_bw, kind), (v_in, v_out, v_bw, _) = hops[u], hops[v]
            out.append(Link(a=u, b=v, kind=kind, latency_ns=u_in + v_out, bandwidth_gb_s=min(u_bw, v_bw),
                            latency_ns_reverse=v_in + u_out if v_in + u_out != u_in + v_out else None))
            joined.add_edge(u, v)
    return out


def _memory_only_as_hbm(machine: Machine, found: CatalogMatch) -> tuple[Machine, str]:
    """An imported machine's cpu-less memory nodes as the package's high-bandwidth memory (Xeon Max in flat
    mode), each joined by one on-die link to the cpu node the firmware's distances put nearest: the cluster (or,
    in quadrant mode, the socket) whose tile holds the stacks.

    ``numactl --hardware`` names no memory kind: on a platform with HBM, a cpu-less node no larger than a socket's
    HBM is taken for HBM, a larger one is left for :func:`_memory_only_as_cxl` (a CXL expander), and the note
    says which. A node an hwloc import typed HBM is re-joined the same way. The SLIT stays the firmware's.
    """
    from numasim.topology import builders as b

    hbm = found.platform.hbm
    if hbm is None or not any(n.has_cpus for n in machine.nodes):
        return machine, ""
    cap_bytes = hbm.capacity_gib_per_socket * GiB
    taken = [n for n in _loose_memory(machine) if (n.memory_bytes or 0) <= cap_bytes]
    # nodes an hwloc import already typed HBM (its "HBM" subtype), joined to every node as its importer joins them
    taken += [n for n in machine.nodes if n.memory_kind is MemoryKind.HBM and n.has_memory and not n.has_cpus
              and sum(1 for lk in machine.links if n.id in (lk.a, lk.b)) != 1]
    if not taken:
        return _hbm_only(machine, found)
    links = list(machine.links)
    nodes = {n.id: n for n in machine.nodes}
    said = []
    for n in taken:
        links, _, why = _rejoined(machine, links, n.id, LinkKind.ON_DIE, b.MESH_LATENCY_NS / 2, b.MESH_BANDWIDTH_GB_S)
        nodes[n.id] = n.model_copy(update={"memory_kind": MemoryKind.HBM})
        said.append(f"node {n.id} ({why})")
    gone = {n.id for n in taken}
    routes = [r for r in machine.routes if not gone & set(v for v in r.path if isinstance(v, int))]
    out = machine.model_copy(update={"nodes": [nodes[i] for i in machine.node_ids], "links": links, "routes": routes})
    Machine.model_validate(out.model_dump())
    return out, (f"Memory nodes without cpus, no larger than a socket's {hbm.capacity_gib_per_socket:g} GiB of HBM, "
                 f"taken for the package's HBM (the catalog's {found.platform.name} has it; numactl names no memory "
                 f"kind), each beside the cpu node nearest by the firmware's distances: {'; '.join(said)}.")


def _hbm_only(machine: Machine, found: CatalogMatch) -> tuple[Machine, str]:
    """A Xeon Max booted without DIMMs (HBM-only mode): ``numactl -H`` shows only cpu nodes, whose memory is the
    package's HBM. Taken so when no node lacks cpus and all the machine's memory fits its sockets' HBM (64 GB a
    socket; a box with DIMMs has at least 8 of them a socket), and said; otherwise the memory stays DDR."""
    hbm = found.platform.hbm
    sku = found.sku
    cpu_nodes = [n for n in machine.nodes if n.has_cpus]
    if hbm is None or sku is None or any(n.has_memory and not n.has_cpus for n in machine.nodes):
        return machine, ""
    cpus = sum(len(n.cpus) for n in cpu_nodes)
    per_socket = sku.threads if cpus % sku.threads == 0 else sku.cores
    sockets = max(1, cpus // per_socket)
    memory = sum(n.memory_bytes or 0 for n in machine.nodes)
    if not memory or memory > sockets * hbm.capacity_gib_per_socket * GiB:
        return machine, ""
    nodes = [n.model_copy(update={"memory_kind": MemoryKind.HBM}) if n.has_memory else n for n in machine.nodes]
    out = machine.model_copy(update={"nodes": nodes})
    return out, (f"All of its memory ({memory / GiB:.0f} GiB) fits its {sockets} socket(s)' HBM "
                 f"({hbm.capacity_gib_per_socket:g} GiB each) and no node lacks cpus: taken for HBM-only mode (no "
                 "DIMMs), every node's memory the package's HBM; set memory_kind = 'dram' in the machine file if "
                 "the box has small DIMMs instead.")


def _memory_only_as_cxl(
    machine: Machine, found: CatalogMatch, cxl_device: str | Mapping[int, str] | None
) -> tuple[Machine, str]:
    """An imported machine's cpu-less memory nodes as CXL memory expanders, each behind the cpu node the
    firmware's distances put nearest.

    ``numactl --hardware`` shows a CXL Type-3 expander as a node with memory and no cpus, and says nothing else
    of it; its importer joins it to every node with a nominal link. On a platform whose catalog entry supports
    CXL memory, such a node (DRAM by the file, on no socket) is taken for an expander (the only cpu-less memory
    those platforms ship besides HBM, which :func:`_memory_only_as_hbm` takes first) and is re-joined
    by one CXL link to the cpu node nearest to it by the firmware's distances (the cpus' rows: a cpu-less node's
    own row is often 255, "no distance"). Ties go to the lowest node id, and the note says so. The SLIT stays the
    firmware's. The expander's device is the catalog's default unless one is named (``cxl_device``).
    """
    from numasim.topology.model import Device, DeviceKind

    loose = _loose_memory(machine)
    cpu_nodes = [n.id for n in machine.nodes if n.has_cpus]
    if not loose or not cpu_nodes:
        return machine, ""
    if found.platform.cxl is None:
        raise CalibrationError(
            f"node {loose[0].id} of {machine.name} has memory but no cpus, and the catalog's {found.platform.name} "
            "has no CXL memory support, so the catalog cannot tell what memory it is or whose channels it owns; "
            "set its socket (and memory_kind, if not DRAM) in the machine file, or calibrate it from measurements"
        )
    from numasim.topology.builders import CXL_LINK_BANDWIDTH_GB_S, CXL_LINK_LATENCY_NS

    links = list(machine.links)
    devices = list(machine.devices)
    nodes = {n.id: n for n in machine.nodes}
    said = []
    for n in loose:
        links, attach, why = _rejoined(machine, links, n.id, LinkKind.CXL, CXL_LINK_LATENCY_NS, CXL_LINK_BANDWIDTH_GB_S)
        name = f"cxl{sum(1 for d in devices if d.kind is DeviceKind.CXL_EXPANDER)}"
        devices.append(Device(name=name, kind=DeviceKind.CXL_EXPANDER, node=attach,
                              attach_latency_ns=CXL_LINK_LATENCY_NS, attach_bandwidth_gb_s=CXL_LINK_BANDWIDTH_GB_S,
                              description=f"CXL memory expander exposed as cpu-less node {n.id} (taken from the "
                                          "imported topology)"))
        nodes[n.id] = n.model_copy(update={"memory_kind": MemoryKind.CXL})
        device, _ = choose_cxl_device(n.id, cxl_device, load_cxl_catalog())
        named = cxl_device.get(n.id) if isinstance(cxl_device, Mapping) else cxl_device
        said.append(f"node {n.id} ({why}); timed as {device.name}"
                    + ("" if named is not None else " (the catalog's default: no device named)"))
    # explicit routes through an expander's old links go with them (routing finds the new ones)
    gone = {n.id for n in loose}
    routes = [r for r in machine.routes if not gone & set(v for v in r.path if isinstance(v, int))]
    out = machine.model_copy(update={"nodes": [nodes[i] for i in machine.node_ids], "links": links,
                                     "devices": devices, "routes": routes})
    if routes:
        # the importer pins routes where a path through the memory-only node looked shorter; without its links,
        # those the routing finds anyway are redundant (and would keep the sockets' structure from being built)
        from numasim.topology.routing import routing

        free = routing(out.model_copy(update={"routes": []}))
        if all(free.path(r.src, r.dst) == r.path for r in routes):
            out = out.model_copy(update={"routes": []})
    Machine.model_validate(out.model_dump())
    return out, ("Memory nodes without cpus, taken for CXL memory expanders (the catalog's "
                 f"{found.platform.name} supports CXL memory; numactl names no memory kind), each behind the cpu "
                 f"node nearest by the firmware's distances: {'; '.join(said)}.")


def _cxl_at_socket_switch(machine: Machine, cxl_nodes: list[int]) -> Machine:
    """Each of ``cxl_nodes`` behind its socket's switch (the mesh or I/O die that holds the CXL root port, so
    that every node of the socket reaches it alike, as the 9224's mlc run shows: 279.4 and 278.8 ns from its two
    NPS2 nodes) instead of behind one NUMA node, and on its attach node's socket. A socket without a switch
    (one node a socket) keeps the node as the attach point: there the two are one."""

    socket: dict[int, int | None] = {n.id: n.socket for n in machine.nodes}
    switches = {sw.name for sw in machine.switches}
    hub: dict[int, str] = {}
    for lk in machine.links:
        for a, b in ((lk.a, lk.b), (lk.b, lk.a)):
            if isinstance(a, int) and isinstance(b, str) and b in switches:
                hub.setdefault(a, b)
    links = []
    attach_socket: dict[int, int] = {}
    for lk in machine.links:
        if lk.kind is LinkKind.CXL and (lk.a in cxl_nodes or lk.b in cxl_nodes):
            node, attach = (lk.a, lk.b) if lk.a in cxl_nodes else (lk.b, lk.a)
            if isinstance(attach, int) and isinstance(node, int):
                if (s := socket.get(attach)) is not None:
                    attach_socket[node] = s
                if attach in hub:
                    lk = lk.model_copy(update={"a": hub[attach], "b": node})
        links.append(lk)
    nodes = [n.model_copy(update={"socket": attach_socket[n.id]}) if n.id in attach_socket and n.socket is None
             else n for n in machine.nodes]
    return machine.model_copy(update={"nodes": nodes, "links": links})


def _socket_links_named(machine: Machine, found: CatalogMatch) -> Machine:
    """The links between two sockets labelled with the platform's interconnect (QPI before Skylake-SP, UPI
    after, HyperTransport on Opteron, Infinity Fabric on EPYC): builders and importers cannot know which."""

    if found.platform.interconnect is None:  # a single-socket platform: no link joins two sockets
        return machine
    kind = LinkKind(found.platform.interconnect.kind)
    socket_kinds = (LinkKind.QPI, LinkKind.UPI, LinkKind.HYPERTRANSPORT, LinkKind.INFINITY_FABRIC, LinkKind.OTHER)
    node_socket = {n.id: n.socket for n in machine.nodes}

    def socket_of(vertex: int | str) -> int | None:
        if isinstance(vertex, int):
            return node_socket.get(vertex)
        m = re.match(r"^socket(\d+)-", vertex)
        return int(m.group(1)) if m else None

    links = []
    for link in machine.links:
        a, b = socket_of(link.a), socket_of(link.b)
        between = a is not None and b is not None and a != b
        links.append(link.model_copy(update={"kind": kind}) if between and link.kind in socket_kinds else link)
    return machine.model_copy(update={"links": links})


def _socket_structure(machine: Machine, found: CatalogMatch) -> tuple[Machine, str]:
    """An imported machine's sockets as the catalog's machines have them: each socket with several nodes joined
    through one switch (Intel's mesh, AMD's I/O die) and one socket link between each pair of sockets.

    ``numactl --hardware`` (and a sysfs tree) name no sockets and no switches: their importer joins every pair of
    nodes with a link of its own, which splits a socket's links over its nodes' pairs (a node of an SNC2 socket
    then reads the other socket at a quarter of its links). The sockets come from the firmware's distances and
    the SKU's size (:func:`numasim.timing.catalog.calibration.socket_layout`); the switch and link numbers are
    the same nominal ones :func:`numasim.topology.builders.multi_die` uses, which the catalog then times.
    Machines that already have switches or explicit routes, memory-only nodes joined to more than one node, or
    sockets of unequal node counts are kept as they are.
    """
    from numasim.timing.catalog.calibration import socket_layout
    from numasim.topology import builders as b
    from numasim.topology.model import Switch

    if machine.switches or machine.routes or found.sku is None:
        return machine, ""
    socket_of, _ = socket_layout(machine, found.sku)
    cpu_nodes = [n for n in machine.nodes if n.has_cpus]
    if any(n.id not in socket_of for n in cpu_nodes):
        return machine, ""
    per_socket = Counter(socket_of[n.id] for n in cpu_nodes)
    if len(set(per_socket.values())) != 1:
        return machine, ""
    direct, direct_note = _direct_socket_pairs(machine, found, socket_of, cpu_nodes)
    if max(per_socket.values()) == 1:  # a node a socket: the importer's links are the sockets' own; name them
        nodes = [n.model_copy(update={"socket": socket_of[n.id]}) if n.id in socket_of else n for n in machine.nodes]
        links = list(machine.links)
        if direct is not None:  # only the pairs the firmware's distances put one link apart keep theirs

            def joins(link: Link) -> tuple[int, int] | None:
                a, b = (socket_of.get(v) if isinstance(v, int) else None for v in (link.a, link.b))
                return None if a is None or b is None or a == b else (min(a, b), max(a, b))

            links = [lk for lk in links if (pair := joins(lk)) is None or pair in direct]
        return machine.model_copy(update={"nodes": nodes, "links": links}), direct_note
    k = max(per_socket.values())
    cpu_ids = {n.id for n in cpu_nodes}
    kept = [link for link in machine.links if not (link.a in cpu_ids and link.b in cpu_ids)]
    if any(sum(1 for link in kept if n.id in (link.a, link.b)) > 1 for n in machine.nodes if not n.has_cpus):
        return machine, ""
    intel = found.platform.vendor == "intel"
    if not intel and found.platform.memory.channels_per_die is not None:
        return _die_mesh(machine, found, socket_of, cpu_nodes, kept)
    kind = LinkKind.ON_DIE if intel else LinkKind.INFINITY_FABRIC
    die_lat = b.MESH_LATENCY_NS if intel else b.IF_DIE_LATENCY_NS
    die_bw = b.MESH_BANDWIDTH_GB_S if intel else b.IF_DIE_BANDWIDTH_GB_S
    sock_lat = b.UPI_LATENCY_NS if intel else b.XGMI_LATENCY_NS
    sock_bw = b.UPI_BANDWIDTH_GB_S if intel else b.XGMI_BANDWIDTH_GB_S
    sockets = sorted(per_socket)
    hub = {s: f"socket{s}-{'mesh' if intel else 'iod'}" for s in sockets}
    die_of: dict[int, int] = {}
    for s in sockets:
        for j, nid in enumerate(sorted(n.id for n in cpu_nodes if socket_of[n.id] == s)):
            die_of[nid] = j
    nodes = [n.model_copy(update={"socket": socket_of[n.id], "die": die_of[n.id]}) if n.id in die_of else n
             for n in machine.nodes]
    links = [Link(a=n.id, b=hub[socket_of[n.id]], kind=kind, latency_ns=die_lat / 2, bandwidth_gb_s=die_bw)
             for n in cpu_nodes]
    links += [Link(a=hub[x], b=hub[y], kind=LinkKind.UPI if intel else LinkKind.INFINITY_FABRIC,
                   latency_ns=max(sock_lat - die_lat, 1e-3), bandwidth_gb_s=sock_bw)
              for i, x in enumerate(sockets) for y in sockets[i + 1:] if direct is None or (x, y) in direct]
    out = machine.model_copy(update={
        "nodes": nodes, "links": [*links, *kept], "switches": [Switch(name=hub[s], kind=kind) for s in sockets],
    })
    Machine.model_validate(out.model_dump())
    return out, (f"Its {len(sockets)} sockets of {k} nodes each (from the firmware's distances and the SKU) are "
                 f"joined as the catalog's machines are: one {'mesh' if intel else 'I/O-die'} switch per socket "
                 + ("and socket links as below" if direct_note else "and one socket link per pair of sockets")
                 + ", in place of the importer's link per pair of nodes." + (f" {direct_note}" if direct_note else ""))


def _direct_socket_pairs(
    machine: Machine, found: CatalogMatch, socket_of: Mapping[int, int], cpu_nodes: list[Node]
) -> tuple[set[tuple[int, int]] | None, str]:
    """The pairs of sockets one socket link joins, where the firmware's distances grade them and the SKU's links
    cannot join every pair: an 8-socket Skylake-SP has 3 UPI links a socket for 7 other sockets, and its firmware
    writes 21 for the 3 it reaches in one hop and 31 for those two hops away. The pairs at the nearest remote
    distance are taken for the links when they join every socket and no socket has more of them than links;
    otherwise (or with every pair joinable, or two sockets) None: every pair keeps a link, a share of the
    socket's links each. A route two hops long then crosses a third socket's links, as on the machine."""
    ic = found.platform.interconnect
    sockets = sorted({socket_of[n.id] for n in cpu_nodes})
    if ic is None or found.sku is None or len(sockets) <= 2 or machine.firmware_slit is None:
        return None, ""
    links = found.sku.links or ic.links_per_socket
    to_sockets = min(links, ic.links_to_sockets) if ic.links_to_sockets is not None else links
    if to_sockets >= len(sockets) - 1:
        return None, ""
    ids, slit = machine.node_ids, machine.firmware_slit
    members = {s: [n.id for n in cpu_nodes if socket_of[n.id] == s] for s in sockets}
    far = {(x, y): min(slit[ids.index(a)][ids.index(b)] for a in members[x] for b in members[y])
           for i, x in enumerate(sockets) for y in sockets[i + 1:]}
    nearest = min(far.values())
    pairs = {pair for pair, d in far.items() if d == nearest}
    import networkx as nx

    graph = nx.Graph(pairs)
    graph.add_nodes_from(sockets)
    if not nx.is_connected(graph) or max(d for _, d in graph.degree) > to_sockets or len(pairs) == len(far):
        return None, ""
    return pairs, (f"The firmware's distances grade its {len(sockets)} sockets ({nearest} for "
                   f"{len(pairs)} of the {len(far)} pairs) and each has {to_sockets} socket links: only those "
                   f"pairs are joined, one link each, and the others route through a neighbour.")


def _die_mesh(
    machine: Machine, found: CatalogMatch, socket_of: Mapping[int, int], cpu_nodes: list[Node], kept: list[Link]
) -> tuple[Machine, str]:
    """The sockets of an AMD multi-chip package with no I/O die (Naples, Magny-Cours, Bulldozer): each die a
    node with its own memory controllers, the dies of a package linked to each other directly, and, between two
    sockets, each die to its counterpart in the other package (the platform's wiring; with more sockets every
    pair of nodes on different sockets keeps the importer's link). No switch: a hub would make one die's links to
    its three siblings a single link."""
    from numasim.topology import builders as b

    if found.platform.interconnect is None:
        raise CalibrationError(f"{found.label}: a package of several dies on a platform the catalog has no die "
                               "links for (a single-socket platform)")
    kind = LinkKind(found.platform.interconnect.kind)
    sockets = sorted({socket_of[n.id] for n in cpu_nodes})
    dies = {s: sorted(n.id for n in cpu_nodes if socket_of[n.id] == s) for s in sockets}
    die_of = {nid: j for s in sockets for j, nid in enumerate(dies[s])}
    nodes = [n.model_copy(update={"socket": socket_of[n.id], "die": die_of[n.id]}) if n.id in die_of else n
             for n in machine.nodes]
    links = [Link(a=x, b=y, kind=kind, latency_ns=b.IF_DIE_LATENCY_NS, bandwidth_gb_s=b.IF_DIE_BANDWIDTH_GB_S)
             for s in sockets for i, x in enumerate(dies[s]) for y in dies[s][i + 1:]]
    if len(sockets) == 2:
        links += [Link(a=x, b=y, kind=kind, latency_ns=b.XGMI_LATENCY_NS, bandwidth_gb_s=b.XGMI_BANDWIDTH_GB_S)
                  for x, y in zip(dies[sockets[0]], dies[sockets[1]], strict=True)]
        wiring = "each die to its counterpart in the other package"
    else:
        links += [lk.model_copy(update={"kind": kind}) for lk in machine.links
                  if lk.a in die_of and lk.b in die_of and socket_of[lk.a] != socket_of[lk.b]]  # type: ignore[index]
        wiring = "every pair of dies on different sockets, as imported"
    out = machine.model_copy(update={"nodes": nodes, "links": [*links, *kept], "switches": []})
    Machine.model_validate(out.model_dump())
    return out, (f"Its {len(sockets)} sockets of {len(dies[sockets[0]])} dies each (from the firmware's distances and "
                 f"the SKU) are joined as {found.platform.name} is wired: the dies of a package directly to each "
                 f"other, and across sockets {wiring}.")


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
    fig = catalog_figures(platform, found.sku, sockets=len({n.socket for n in timed.nodes if n.socket is not None}) or None)
    device, why = choose_cxl_device(None, cxl_device, load_cxl_catalog())
    cf = cxl_figures(device, fig.local_ns, fig.local_source, why)
    for _ in range(count):
        # The catalog's numbers go in before the SLIT row is derived, so the firmware distances match them.
        timed = with_cxl_expander(
            timed, attach, size_bytes, link_latency_ns=cf.link_latency_ns, link_bandwidth_gb_s=cf.link_bandwidth_gb_s,
            device_latency_ns=cf.controller_latency_ns, device_bandwidth_gb_s=cf.controller_read_gb_s,
        )
    timed = _cxl_at_socket_switch(timed, [n.id for n in timed.nodes[-count:]])
    default = "" if cxl_device is not None else " (the catalog's default device: none was named)"
    behind = f"socket {socket}'s switch" if any(isinstance(lk.a, str) and lk.kind.value == "cxl" for lk in timed.links) \
        else f"node {attach}"
    return timed, (f"{count} CXL expander(s) {device.name}{default} added behind {behind} "
                   f"(numasim catalog cxl), timed from the catalog's CXL section.")
