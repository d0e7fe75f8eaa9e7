"""A machine as text, the way ``lstopo --of console`` shows a real one: a tree, then the interconnect.

The tree is Machine (total memory) / Package (socket) / Die / NUMANode (id, memory, free, kind, a memory-side
cache in front of it, cpus as a kernel cpulist) with the devices attached to each node; nodes without a socket (CXL expanders, memory-only
nodes described without one) are listed under ``Package (none)``. After the tree come the cache levels, the
links (each direction's latency and bandwidth) and the switches.
"""

from __future__ import annotations

from numasim.topology.cpulist import format_cpulist
from numasim.topology.model import Link, Machine, Node
from numasim.units import format_size

__all__ = ["memory_side_cache_note", "render_tree", "render_links"]

_INDENT = "  "


def _node_line(node: Node) -> str:
    parts = [format_size(node.memory_bytes) if node.has_memory else "no memory"]
    if node.free_bytes is not None:
        parts.append(f"free {format_size(node.free_bytes)}")
    parts.append(node.memory_kind.value)
    if node.memory_side_cache_bytes is not None:
        parts.append(f"behind a {format_size(node.memory_side_cache_bytes)} memory-side cache, not modelled")
    cpus = f"cpus {format_cpulist(node.cpus)}" if node.cpus else "no cpus"
    return f"NUMANode {node.id} ({', '.join(parts)})  {cpus}"


def memory_side_cache_note(machine: Machine) -> str | None:
    """One sentence for the nodes that sit behind a memory-side cache (``Node.memory_side_cache_bytes``), which
    numasim records but does not time; ``None`` when no node does.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = glueless(2)
    >>> memory_side_cache_note(m) is None
    True
    >>> m = m.model_copy(update={"nodes": [m.nodes[0], m.nodes[1].model_copy(update={"memory_side_cache_bytes": 2**30})]})
    >>> memory_side_cache_note(m)[:60]
    'nodes [1] sit behind memory-side caches (node 1: 1.0 GiB; Me'
    """
    behind = [n for n in machine.nodes if n.memory_side_cache_bytes is not None]
    if not behind:
        return None
    sizes = ", ".join(f"node {n.id}: {format_size(n.memory_side_cache_bytes or 0)}" for n in behind)
    return (f"nodes {[n.id for n in behind]} sit behind memory-side caches ({sizes}; Memory Mode / an HBM cache "
            "mode), which numasim records but does not time: every access costs the node's controller, so working "
            "sets larger than the cache come out too fast")


def _ns(value: float) -> str:
    return f"{value:g} ns"


def _gb_s(value: float) -> str:
    return f"{value:g} GB/s"


def _link_line(link: Link) -> str:
    (a, b, lat, bw), (_, _, back_lat, back_bw) = link.directed()
    if (lat, bw) == (back_lat, back_bw):
        return f"{a} <-> {b}  {link.kind.value}  {_ns(lat)}  {_gb_s(bw)}  each way"
    return f"{a} <-> {b}  {link.kind.value}  -> {_ns(lat)} {_gb_s(bw)}  <- {_ns(back_lat)} {_gb_s(back_bw)}"


def render_links(machine: Machine) -> list[str]:
    """The "Links" and "Switches" sections of :func:`render_tree`, one line per link or switch."""
    lines: list[str] = []
    if machine.links:
        lines.append("Links (a <-> b  kind  latency  bandwidth; -> is a to b, <- is b to a)")
        lines += [_INDENT + _link_line(link) for link in machine.links]
    if machine.switches:
        lines.append("Switches")
        for s in machine.switches:
            peers = [str(link.b if link.a == s.name else link.a) for link in machine.links if s.name in (link.a, link.b)]
            lines.append(f"{_INDENT}{s.name}  {s.kind.value}  traversal {_ns(s.latency_ns)}  links to {', '.join(peers)}")
    return lines


def render_tree(machine: Machine) -> str:
    """An lstopo-like text tree of ``machine``, then its caches, links and switches.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> print(render_tree(glueless(2, cpus_per_node=2)))  # doctest: +NORMALIZE_WHITESPACE
    Machine glueless-2s-full (64.0 GiB total, 2 nodes, 4 cpus)
      Package 0
        NUMANode 0 (32.0 GiB, dram)  cpus 0-1
      Package 1
        NUMANode 1 (32.0 GiB, dram)  cpus 2-3
    Links (a <-> b  kind  latency  bandwidth; -> is a to b, <- is b to a)
      0 <-> 1  qpi  50 ns  20 GB/s  each way
    """
    lines = [
        f"Machine {machine.name} ({format_size(machine.memory_bytes)} total, "
        f"{len(machine.nodes)} nodes, {len(machine.cpus)} cpus)"
    ]
    devices_of: dict[int, list[str]] = {}
    for d in machine.devices:
        devices_of.setdefault(d.node, []).append(
            f"Device {d.name} ({d.kind.value}, {_ns(d.attach_latency_ns)}, {_gb_s(d.attach_bandwidth_gb_s)})"
        )

    sockets: dict[int | None, list[Node]] = {}
    for n in machine.nodes:
        sockets.setdefault(n.socket, []).append(n)
    order = sorted(s for s in sockets if s is not None) + ([None] if None in sockets else [])
    for socket in order:
        lines.append(_INDENT + (f"Package {socket}" if socket is not None else "Package (none)"))
        last_die: object = object()
        for n in sorted(sockets[socket], key=lambda n: (n.die is None, n.die or 0, n.id)):
            depth = 2
            if n.die is not None:
                if n.die != last_die:
                    lines.append(_INDENT * 2 + f"Die {n.die}")
                    last_die = n.die
                depth = 3
            lines.append(_INDENT * depth + _node_line(n))
            lines += [_INDENT * (depth + 1) + text for text in devices_of.get(n.id, [])]
    if machine.caches:
        lines.append("Caches")
        for c in machine.caches:
            lines.append(
                f"{_INDENT}{c.name} {format_size(c.size_bytes)} per {c.scope.value}, {_ns(c.latency_ns)}, "
                f"{c.associativity}-way, {c.line_bytes} B lines"
            )
    if machine.core_dies:
        lines.append("Core dies (a die with a port of its own: reads cross it toward the die, writes away from it)")
        node_of = machine.cpu_to_node
        for k, die in enumerate(machine.core_dies):
            port = (f"{_gb_s(die.read_bandwidth_gb_s)} read, {_gb_s(die.write_bandwidth_gb_s)} write"
                    if die.read_bandwidth_gb_s is not None and die.write_bandwidth_gb_s is not None
                    else "no port of its own (its core complexes only)")
            lines.append(f"{_INDENT}die {k}: node {node_of[die.cpus[0]]}, cpus {format_cpulist(die.cpus)}, {port}")
    lines += render_links(machine)
    return "\n".join(lines)
