"""hwloc XML topologies (what ``lstopo foo.xml`` writes), versions 1.x and 2.x/3.x, read with the stdlib.

Mapping to the model:

* ``NUMANode`` ``os_index`` -> node id; ``local_memory`` -> ``memory_bytes``.
* cpus: every ``PU`` (its ``os_index``) belongs to the node attached closest above it. In v1 the PU sits
  inside its NUMANode; in v2 NUMA nodes are *memory children* of a Package/Group/L3 (possibly behind a
  ``MemCache``), so a PU belongs to the memory children of its nearest ancestor that has any. When several
  nodes hang there (KNL: DRAM + MCDRAM; POWER9: DRAM + GPU memory) the cpus go to the first DRAM node, and
  the others are cpu-less, as Linux numbers them.
* ``Package`` ancestor -> ``socket``; ``Die`` ancestor -> ``die`` (``Group`` objects are not used for ``die``:
  hwloc makes groups for many reasons: distance clusters, boards, Kunpeng clusters).
* ``subtype`` of the NUMANode -> ``memory_kind``: MCDRAM/HBM -> hbm, GPUMemory -> gpu, NVM/DAX/SPM -> pmem,
  CXL/CXLMem -> cxl, anything else (DRAM, none) -> dram.
* v1 ``<distances relative_depth latency_base>`` (``<latency value>`` x base) and v2 ``<distances2
  type="NUMANode">`` (``indexing`` os/gp, ``<indexes>``, ``<u64values>``; the ``NUMALatency`` matrix first) ->
  ``firmware_slit``, values kept exactly; links are inferred from it
  (:func:`numasim.topology.infer.from_distance_matrix`; off-diagonal 10s, which firmware does print, are
  treated as 11 for the inference only).
* ``<memattr name="Latency"|"Bandwidth"|"ReadBandwidth"|"WriteBandwidth">`` (ns, MiB/s) -> the node's
  controller: the best value over initiators (lowest latency, highest bandwidth), i.e. the local one.

Decisions for what the model cannot hold:

* a NUMANode without ``local_memory`` (hwloc did not know the size) gets the mean size of the nodes with a
  known non-zero size (1 GiB if none is), and the machine's description lists them;
* a node with neither cpus nor memory (hwloc keeps empty nodes, e.g. restricted by a cgroup) is dropped with
  its row and column of the distance table, and the description lists it;
* a distance matrix that does not cover every kept node is ignored (remote distance 20 assumed, noted);
* a memory-side cache in front of a node (``MemCache``: Intel's Memory Mode / 2LM, where DRAM caches Optane
  memory; KNL's and Xeon Max's HBM cache modes) is not modelled: the node's accesses are timed as its memory
  controller's, so a working set larger than the cache comes out too fast. The node records the cache's size
  (``Node.memory_side_cache_bytes``, which our writer puts back as a ``MemCache``), the description says so, and
  :func:`memory_side_caches` lists them (``numasim topo import`` prints a warning).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from numasim.errors import FormatError, TopologyError
from numasim.fileio import atomic_write_text
from numasim.topology.io.cpumodel import cpu_model_from_hwloc
from numasim.topology.model import LOCAL_DISTANCE, Machine, MemoryController, MemoryKind, Node
from numasim.units import GiB, format_size

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

__all__ = [
    "MemorySideCache",
    "describe_memory_side_caches",
    "memory_kind_of_subtype",
    "memory_side_caches",
    "read_hwloc_xml",
    "save_machine_hwloc",
    "write_hwloc_xml",
]

_KIND_BY_SUBTYPE = {
    "mcdram": MemoryKind.HBM,
    "hbm": MemoryKind.HBM,
    "gpumemory": MemoryKind.GPU,
    "nvm": MemoryKind.PMEM,
    "dax": MemoryKind.PMEM,
    "spm": MemoryKind.PMEM,
    "pmem": MemoryKind.PMEM,
    "cxl": MemoryKind.CXL,
    "cxlmem": MemoryKind.CXL,
    "cxl-dram": MemoryKind.CXL,
}
_SUBTYPE_BY_KIND = {
    MemoryKind.HBM: "HBM",
    MemoryKind.GPU: "GPUMemory",
    MemoryKind.PMEM: "NVM",
    MemoryKind.CXL: "CXL",
}
_MIB_S_TO_GB_S = (1 << 20) / 1e9


def memory_kind_of_subtype(subtype: str | None) -> MemoryKind:
    """The memory kind an hwloc NUMANode ``subtype`` names (DRAM when absent or unknown).

    Examples
    --------
    >>> memory_kind_of_subtype("MCDRAM"), memory_kind_of_subtype(None)
    (<MemoryKind.HBM: 'hbm'>, <MemoryKind.DRAM: 'dram'>)
    """
    if not subtype:
        return MemoryKind.DRAM
    return _KIND_BY_SUBTYPE.get(subtype.strip().lower(), MemoryKind.DRAM)


def _bitmap(text: str) -> set[int]:
    """hwloc bitmap string ("0x000f000f,0x000f000f": 32-bit words, high first) -> set bits."""
    value = 0
    for word in text.strip().split(","):
        word = word.strip().lower()
        if word.startswith("0x"):
            word = word[2:]
        value = (value << 32) | (int(word, 16) if word else 0)
    return {b for b in range(value.bit_length()) if value >> b & 1}


@dataclass(frozen=True)
class MemorySideCache:
    """A memory-side cache hwloc found in front of a NUMA node (its ``MemCache`` object)."""

    node: int
    """The NUMA node (os index) whose memory it caches."""
    size_bytes: int
    line_bytes: int | None
    associativity: int | None
    """Ways; 1 is direct-mapped (Intel's Memory Mode), None when hwloc did not know."""
    depth: int | None

    def describe(self) -> str:
        """e.g. ``"96 GiB, direct-mapped, 64 B lines"``."""
        ways = {None: "associativity unknown", 1: "direct-mapped"}.get(self.associativity, f"{self.associativity}-way")
        line = f", {self.line_bytes} B lines" if self.line_bytes else ""
        return f"{format_size(self.size_bytes)}, {ways}{line}"


@dataclass
class _NumaObj:
    elem: ET.Element
    os_index: int
    gp_index: int | None
    memory_bytes: int | None
    kind: MemoryKind
    order: int


class _Tree:
    def __init__(self, root: ET.Element, source: str) -> None:
        self.root = root
        self.source = source
        self.parent: dict[ET.Element, ET.Element] = {c: p for p in root.iter() for c in p}
        self.numa: list[_NumaObj] = []
        for order, e in enumerate(o for o in root.iter("object") if o.get("type") == "NUMANode"):
            self.numa.append(
                _NumaObj(
                    elem=e,
                    os_index=self._int(e, "os_index"),
                    gp_index=self._int(e, "gp_index") if e.get("gp_index") is not None else None,
                    memory_bytes=self._int(e, "local_memory") if e.get("local_memory") is not None else None,
                    kind=memory_kind_of_subtype(e.get("subtype")),
                    order=order,
                )
            )
        self.by_elem = {n.elem: n for n in self.numa}
        self._attached: dict[ET.Element, list[_NumaObj]] = {}

    def _int(self, e: ET.Element, attr: str) -> int:
        value = e.get(attr)
        try:
            return int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise FormatError(self.source, f"{e.get('type')} object: bad {attr}={value!r}") from None

    def memory_side_caches(self) -> list[MemorySideCache]:
        """The ``MemCache`` objects between each NUMA node and the object it is attached to, nearest first."""
        out = []
        for n in self.numa:
            e = n.elem
            while e in self.parent and self.parent[e].get("type") == "MemCache":
                e = self.parent[e]
                size = e.get("cache_size")
                if size is None:
                    continue  # hwloc did not know its size: nothing to say about it
                line, ways = e.get("cache_linesize"), e.get("cache_associativity")
                out.append(MemorySideCache(
                    n.os_index, self._int(e, "cache_size"),
                    self._int(e, "cache_linesize") if line not in (None, "0") else None,
                    self._int(e, "cache_associativity") if ways not in (None, "0") else None,
                    self._int(e, "depth") if e.get("depth") is not None else None,
                ))
        return out

    def ancestors(self, e: ET.Element) -> list[ET.Element]:
        out = []
        while e in self.parent:
            e = self.parent[e]
            out.append(e)
        return out

    def attached(self, e: ET.Element) -> list[_NumaObj]:
        """NUMA nodes that are memory children of ``e`` (through MemCache objects), or ``e`` itself."""
        if e in self._attached:
            return self._attached[e]
        if e in self.by_elem:
            found = [self.by_elem[e]]
        else:
            found = []
            stack = [c for c in e if c.tag == "object"]
            while stack:
                c = stack.pop(0)
                if c in self.by_elem:
                    found.append(self.by_elem[c])
                elif c.get("type") == "MemCache":
                    stack.extend(x for x in c if x.tag == "object")
        self._attached[e] = found
        return found

    def home(self, e: ET.Element) -> _NumaObj | None:
        """The node a PU belongs to: memory attached closest above it, DRAM first."""
        for a in self.ancestors(e):
            nodes = self.attached(a)
            if nodes:
                dram = [n for n in nodes if n.kind == MemoryKind.DRAM]
                return (dram or nodes)[0]
        return None

    def nearest(self, e: ET.Element, obj_type: str) -> int | None:
        for a in self.ancestors(e):
            if a.get("type") == obj_type and a.get("os_index") is not None:
                return self._int(a, "os_index")
        return None


def _quoteattr(value: str) -> str:
    """An XML attribute value with its quotes, escaped (``xml.sax.saxutils.quoteattr``'s rule: double quotes
    unless the value has some, then single, then ``&quot;``); ours because importing saxutils costs 25 ms of
    every command's start (it imports urllib.request)."""
    value = value.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
    value = value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', "&quot;") + '"'


def _parse(path_or_text: str | Path) -> tuple[ET.Element, str, str]:
    import xml.etree.ElementTree as ET  # here, not at import: loading a TOML machine never needs it

    if isinstance(path_or_text, str) and path_or_text.lstrip().startswith("<"):
        text, source, stem = path_or_text, "<hwloc-xml>", "hwloc"
    else:
        p = Path(path_or_text)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise FormatError(str(p), f"cannot read: {exc}") from None
        source, stem = str(p), p.name.split(".")[0]
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line = exc.position[0] if hasattr(exc, "position") else None
        raise FormatError(source, f"not well-formed XML: {exc}", line) from None
    if root.tag != "topology":
        raise FormatError(source, f"root element is <{root.tag}>, expected <topology> (hwloc XML)")
    return root, source, stem


def _distances_v2(tree: _Tree) -> dict[tuple[int, int], int] | None:
    candidates = [d for d in tree.root.iter("distances2") if d.get("type") == "NUMANode"]
    if not candidates:
        return None
    latency = [d for d in candidates if d.get("name") == "NUMALatency"] or [
        d for d in candidates if int(d.get("kind", "0")) & 4
    ]
    d = (latency or candidates)[0]
    try:
        n = int(d.get("nbobjs", ""))
        indexes = [int(v) for e in d.iter("indexes") for v in (e.text or "").split()]
        values = [int(v) for e in d.iter("u64values") for v in (e.text or "").split()]
    except ValueError:
        raise FormatError(tree.source, "distances2: indexes and values must be whole numbers") from None
    if len(indexes) != n or len(values) != n * n:
        raise FormatError(
            tree.source, f"distances2: {len(indexes)} indexes and {len(values)} values for nbobjs={n}"
        )
    if d.get("indexing", "os") == "gp":
        by_gp = {o.gp_index: o.os_index for o in tree.numa}
        try:
            indexes = [by_gp[g] for g in indexes]
        except KeyError as exc:
            raise FormatError(tree.source, f"distances2: no NUMANode with gp_index {exc}") from None
    return {(a, b): values[i * n + j] for i, a in enumerate(indexes) for j, b in enumerate(indexes)}


def _distances_v1(tree: _Tree) -> dict[tuple[int, int], int] | None:
    for d in tree.root.iter("distances"):
        holder = tree.parent.get(d)
        if holder is None:
            continue
        try:
            n = int(d.get("nbobjs", ""))
            depth = int(d.get("relative_depth", ""))
            base = float(d.get("latency_base", "1"))
            lat = [float(e.get("value", "")) for e in d.iter("latency")]
        except ValueError:
            raise FormatError(
                tree.source, "distances: nbobjs, relative_depth and latency values must be numbers"
            ) from None
        level = [holder]
        for _ in range(depth):
            level = [c for e in level for c in e if c.tag == "object"]
        objs = [tree.by_elem[e] for e in level if e in tree.by_elem]
        if len(objs) != len(level) or len(objs) != n or len(lat) != n * n:
            continue  # distances between other objects (or a partial set): not the node SLIT
        return {
            (a.os_index, b.os_index): round(lat[i * n + j] * base)
            for i, a in enumerate(objs)
            for j, b in enumerate(objs)
        }
    return None


def _memattrs(tree: _Tree) -> dict[int, dict[str, float]]:
    """Per node os_index: best ``latency_ns``, ``read_gb_s``, ``write_gb_s`` over all initiators."""
    by_gp = {o.gp_index: o.os_index for o in tree.numa if o.gp_index is not None}
    by_os = {o.os_index for o in tree.numa}
    out: dict[int, dict[str, float]] = {}
    for attr in tree.root.iter("memattr"):
        name = attr.get("name", "")
        key = {
            "Latency": "latency_ns",
            "ReadLatency": "latency_ns",
            "Bandwidth": "read_gb_s",
            "ReadBandwidth": "read_gb_s",
            "WriteBandwidth": "write_gb_s",
        }.get(name)
        if key is None:
            continue
        for v in attr.iter("memattr_value"):
            if v.get("target_obj_type", "NUMANode") != "NUMANode":
                continue
            target: int | None = None
            if v.get("target_obj_gp_index") is not None:
                target = by_gp.get(int(v.get("target_obj_gp_index", "-1")))
            elif (
                v.get("target_obj_os_index") is not None and int(v.get("target_obj_os_index", "-1")) in by_os
            ):
                target = int(v.get("target_obj_os_index", "-1"))
            if target is None:
                continue
            try:
                value = float(v.get("value", ""))
            except ValueError:
                raise FormatError(tree.source, f"memattr {name}: bad value {v.get('value')!r}") from None
            if value <= 0:
                continue
            if key != "latency_ns":
                value *= _MIB_S_TO_GB_S
            best = out.setdefault(target, {})
            better = value < best[key] if key == "latency_ns" and key in best else value > best.get(key, 0.0)
            if better:
                best[key] = value
    return out


_NAME_INFOS = ("numasim.name", "numasimMachine")


def _written_name(root: ET.Element) -> str | None:
    """The machine name :func:`write_hwloc_xml` stored as ``<info name="numasim.name">`` on the Machine object."""
    for obj in root.iter("object"):
        if obj.get("type") != "Machine":
            continue
        for info in obj.findall("info"):
            value = info.get("value")
            if info.get("name") in _NAME_INFOS and value:
                return value
        break  # only the outermost Machine object carries it
    return None


def memory_side_caches(path_or_text: str | Path) -> list[MemorySideCache]:
    """The memory-side caches (hwloc ``MemCache`` objects) in front of the NUMA nodes of an hwloc XML topology.

    numasim does not model them (see the module docstring); this says where they are, so that a tool can warn.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> memory_side_caches(write_hwloc_xml(glueless(2)))
    []
    """
    root, source, _ = _parse(path_or_text)
    return _Tree(root, source).memory_side_caches()


def describe_memory_side_caches(caches: list[MemorySideCache]) -> str:
    """One sentence for a machine's description or a warning: which nodes, how large, what it means for timing.

    Examples
    --------
    >>> describe_memory_side_caches([MemorySideCache(0, 96 * 2**30, 64, 1, 1)])[:60]
    'memory-side caches (hwloc MemCache: Intel Memory Mode / 2LM '
    """
    by_kind: dict[str, list[int]] = {}
    for c in caches:
        by_kind.setdefault(c.describe(), []).append(c.node)
    where = "; ".join(f"node{'s' if len(ns) > 1 else ''} {', '.join(map(str, sorted(ns)))}: {what}"
                      for what, ns in by_kind.items())
    return (f"memory-side caches (hwloc MemCache: Intel Memory Mode / 2LM or an HBM cache mode) in front of {where}; "
            "not modelled: every access is timed as the node's memory controller, so working sets larger than the "
            "cache come out too fast")


def read_hwloc_xml(path_or_text: str | Path, name: str | None = None) -> Machine:
    """Read an hwloc XML topology (a path, or the XML text itself) into a :class:`Machine`.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> m = read_hwloc_xml(write_hwloc_xml(glueless(2, cpus_per_node=2)))
    >>> [n.cpus for n in m.nodes], m.slit(), m.name == glueless(2, cpus_per_node=2).name
    ([[0, 1], [2, 3]], [[10, 16], [16, 10]], True)
    """
    from numasim.topology.infer import from_distance_matrix

    root, source, stem = _parse(path_or_text)
    tree = _Tree(root, source)
    if not tree.numa:
        raise FormatError(source, "no NUMANode object: hwloc saw no NUMA memory on this machine")
    ids = [n.os_index for n in tree.numa]
    if len(set(ids)) != len(ids):
        raise FormatError(source, f"NUMANode os_index values repeat: {sorted(ids)}")

    cpus: dict[int, list[int]] = {i: [] for i in ids}
    sockets_of: dict[int, set[int]] = {i: set() for i in ids}
    dies_of: dict[int, set[int]] = {i: set() for i in ids}
    for pu in (o for o in root.iter("object") if o.get("type") == "PU"):
        home = tree.home(pu)
        if home is None:
            continue
        cpus[home.os_index].append(tree._int(pu, "os_index"))
        for kind, into in (("Package", sockets_of), ("Die", dies_of)):
            v = tree.nearest(pu, kind)
            if v is not None:
                into[home.os_index].add(v)

    notes: list[str] = []
    known = [n.memory_bytes for n in tree.numa if n.memory_bytes]  # sizes hwloc knew, memoryless nodes aside
    fallback = round(sum(known) / len(known)) if known else GiB
    nodes: list[Node] = []
    for n in sorted(tree.numa, key=lambda o: o.os_index):
        memory = n.memory_bytes
        if memory is None:
            memory = fallback
            notes.append(f"node {n.os_index} size unknown, assumed {memory} bytes")
        node_cpus = sorted(cpus[n.os_index])
        if not node_cpus and memory == 0:
            notes.append(f"node {n.os_index} has neither cpus nor memory: dropped")
            continue
        socket = tree.nearest(n.elem, "Package")
        if socket is None and len(sockets_of[n.os_index]) == 1:
            socket = next(iter(sockets_of[n.os_index]))
        die = tree.nearest(n.elem, "Die")
        if die is None and len(dies_of[n.os_index]) == 1:
            die = next(iter(dies_of[n.os_index]))
        nodes.append(
            Node(
                id=n.os_index, cpus=node_cpus, memory_bytes=memory, socket=socket, die=die, memory_kind=n.kind
            )
        )
    if not nodes:
        raise FormatError(source, "no NUMA node has cpus or memory")
    kept = [n.id for n in nodes]

    dist = _distances_v2(tree) if root.get("version") else _distances_v1(tree)
    firmware: list[list[int]] | None = None
    if dist is not None and all((a, b) in dist for a in kept for b in kept):
        firmware = [[dist[(a, b)] for b in kept] for a in kept]
        table = [
            [max(v, LOCAL_DISTANCE + 1) if i != j else v for j, v in enumerate(row)]
            for i, row in enumerate(firmware)
        ]
    else:
        if dist is not None:
            notes.append("distance matrix does not cover every node: ignored")
        if len(kept) > 1:
            notes.append("no node distances: remote distance 20 assumed")
        table = [[LOCAL_DISTANCE if a == b else 20 for b in kept] for a in kept]

    caches = [c for c in tree.memory_side_caches() if c.node in kept]
    if caches:
        notes.append(describe_memory_side_caches(caches))
        # the node records the largest (nearly always the only) one: what a working set has to fit in
        cache_of: dict[int, int] = {}
        for mc in caches:
            cache_of[mc.node] = max(cache_of.get(mc.node, 0), mc.size_bytes)
        nodes = [n.model_copy(update={"memory_side_cache_bytes": cache_of[n.id]}) if n.id in cache_of else n
                 for n in nodes]

    perf = _memattrs(tree)
    latencies = [p["latency_ns"] for nid, p in perf.items() if "latency_ns" in p and nid in kept]
    ctrl_ns = sum(latencies) / len(latencies) if latencies else 100.0
    description = f"from hwloc XML {Path(source).name}" + (f" ({'; '.join(notes)})" if notes else "")
    try:
        machine = from_distance_matrix(
            table,
            name=name or _written_name(root) or stem,
            nodes=nodes,
            firmware_slit=firmware,
            controller_latency_ns=ctrl_ns,
            description=description,
            source=source,
        )
    except (TopologyError, ValueError) as exc:
        raise FormatError(source, f"cannot build the machine: {exc}") from None
    if perf:
        updated = []
        for node in machine.nodes:
            p = perf.get(node.id)
            if p and node.controller is not None:
                c = node.controller
                node = node.model_copy(
                    update={
                        "controller": MemoryController(
                            latency_ns=p.get("latency_ns", c.latency_ns),
                            read_bandwidth_gb_s=p.get("read_gb_s", c.read_bandwidth_gb_s),
                            write_bandwidth_gb_s=p.get("write_gb_s", c.write_bandwidth_gb_s),
                        )
                    }
                )
            updated.append(node)
        machine = machine.model_copy(update={"nodes": updated})
    cpu_model = cpu_model_from_hwloc(root)
    if cpu_model:
        machine = machine.model_copy(update={"cpu_model": cpu_model})
    return machine


def _cpuset(cpus: list[int]) -> str:
    value = sum(1 << c for c in cpus)
    words = max(1, max(cpus) // 32 + 1) if cpus else 1
    return ",".join(f"0x{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def write_hwloc_xml(machine: Machine) -> str:
    """A minimal hwloc v2 XML for ``machine``: Machine > Package > Die > Group (one per node) > NUMANode + PUs.

    Levels are left out when the node has no socket/die. The SLIT goes into ``<distances2 name="NUMALatency">``,
    controllers into ``Latency``/``Bandwidth``/``WriteBandwidth`` memattrs (initiator: the node's own cpus, or
    the cpus of the nearest node with cpus), a node's memory-side cache into a ``MemCache`` above it (its size; the
    associativity left unknown). Enough for :func:`read_hwloc_xml` and for hwloc itself to show the nodes; cpu
    caches and cores are not described.
    """
    gp = iter(range(1, 1 << 30))
    numa_gp: dict[int, int] = {}
    all_cpus = machine.cpus

    def obj(type_: str, os_index: int | None, cpus: list[int], extra: str = "", indent: int = 0) -> str:
        attrs = f'type="{type_}"' + (f' os_index="{os_index}"' if os_index is not None else "")
        return " " * indent + f'<object {attrs} cpuset="{_cpuset(cpus)}" gp_index="{next(gp)}"{extra}'

    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
        '<topology version="2.0">',
        obj("Machine", 0, all_cpus, indent=2) + ">",
        f'    <info name="numasim.name" value={_quoteattr(machine.name)}/>',
    ]

    def group_of(node: Node, indent: int) -> list[str]:
        out = [obj("Group", None, node.cpus, indent=indent) + ">"]
        gp_index = None
        extra = f' local_memory="{node.memory_bytes}"'
        if node.memory_kind in _SUBTYPE_BY_KIND:
            extra += f' subtype="{_SUBTYPE_BY_KIND[node.memory_kind]}"'
        inner = indent + 2
        if node.memory_side_cache_bytes is not None:  # Memory Mode / an HBM cache mode: the node's memory behind it
            out.append(obj("MemCache", None, node.cpus, f' nodeset="0x{1 << node.id:x}" cache_size='
                           f'"{node.memory_side_cache_bytes}" depth="1" cache_linesize="64" cache_associativity="0" '
                           'cache_type="0"', inner) + ">")
            inner += 2
        line = (
            obj("NUMANode", node.id, node.cpus, extra + f' nodeset="0x{1 << node.id:x}"', inner) + "/>"
        )
        gp_index = int(line.split('gp_index="')[1].split('"')[0])
        numa_gp[node.id] = gp_index
        out.append(line)
        if node.memory_side_cache_bytes is not None:
            out.append(" " * (indent + 2) + "</object>")
        out.extend(obj("PU", c, [c], indent=indent + 2) + "/>" for c in node.cpus)
        out.append(" " * indent + "</object>")
        return out

    sockets = sorted({n.socket for n in machine.nodes if n.socket is not None})
    for node in machine.nodes:
        if node.socket is None:
            lines.extend(group_of(node, 4))
    for s in sockets:
        members = [n for n in machine.nodes if n.socket == s]
        lines.append(obj("Package", s, sorted(c for n in members for c in n.cpus), indent=4) + ">")
        if machine.cpu_model:
            lines.append(f'      <info name="CPUModel" value={_quoteattr(machine.cpu_model)}/>')
        dies = sorted({n.die for n in members if n.die is not None})
        lines.extend(line for n in members if n.die is None for line in group_of(n, 6))
        for d in dies:
            in_die = [n for n in members if n.die == d]
            lines.append(obj("Die", d, sorted(c for n in in_die for c in n.cpus), indent=6) + ">")
            lines.extend(line for n in in_die for line in group_of(n, 8))
            lines.append("      </object>")
        lines.append("    </object>")
    lines.append("  </object>")

    slit = machine.slit()
    ids = machine.node_ids
    lines.append(
        f'  <distances2 type="NUMANode" nbobjs="{len(ids)}" kind="5" name="NUMALatency" indexing="os">'
    )
    lines.append(f'    <indexes length="{len(" ".join(map(str, ids)))}">{" ".join(map(str, ids))}</indexes>')
    flat = " ".join(str(v) for row in slit for v in row)
    lines.append(f'    <u64values length="{len(flat)}">{flat}</u64values>')
    lines.append("  </distances2>")

    with_ctrl = [nd for nd in machine.nodes if nd.controller is not None and nd.has_memory]
    if with_ctrl:

        def initiator(nd: Node) -> list[int]:
            if nd.cpus:
                return nd.cpus
            k = machine.index_of(nd.id)
            near = sorted((slit[k][j], j) for j, other in enumerate(machine.nodes) if other.cpus)
            return machine.nodes[near[0][1]].cpus if near else all_cpus

        values = {
            "Latency": [(nd, c.latency_ns) for nd in with_ctrl if (c := nd.controller) is not None],
            "Bandwidth": [
                (nd, c.read_bandwidth_gb_s / _MIB_S_TO_GB_S)
                for nd in with_ctrl
                if (c := nd.controller) is not None
            ],
            "WriteBandwidth": [
                (nd, c.write_bandwidth_gb_s / _MIB_S_TO_GB_S)
                for nd in with_ctrl
                if (c := nd.controller) is not None and c.write_bandwidth_gb_s is not None
            ],
        }
        flags = {"Latency": 6, "Bandwidth": 5, "WriteBandwidth": 5}
        for attr_name, entries in values.items():
            if not entries:
                continue
            lines.append(f'  <memattr name="{attr_name}" flags="{flags[attr_name]}">')
            for nd, value in entries:
                lines.append(
                    f'    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="{numa_gp[nd.id]}" '
                    f'value="{round(value)}" initiator_cpuset="{_cpuset(initiator(nd))}"/>'
                )
            lines.append("  </memattr>")
    lines.append("</topology>")
    return "\n".join(lines) + "\n"


def save_machine_hwloc(machine: Machine, path: str | Path) -> None:
    """Write :func:`write_hwloc_xml` of ``machine`` to ``path`` atomically."""
    p = Path(path)
    text = write_hwloc_xml(machine)  # render first: a failure here touches no file
    atomic_write_text(p, text)
