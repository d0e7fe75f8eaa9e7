"""``lscpu`` output as a machine: sockets, NUMA nodes and their cpus, hardware threads, caches, the processor.

``lscpu`` (util-linux) prints what a machine's NUMA layout needs but its memory: the processor (``Model name``),
``Socket(s)``, ``Core(s) per socket``, ``Thread(s) per core``, each ``NUMA nodeN CPU(s)`` list and the cache
sizes. Its layouts are read: the oldest (``L3 cache: 36608K``, one instance's size), the newest
(``L3: 71.5 MiB (2 instances)``, the sum over instances), and the one between (util-linux 2.34-2.36: ``L3
cache: 71.5 MiB``, a sum without its count), whose L1d and L2 are taken to be per core and whose L3 per socket
on Intel, and left out on other processors (AMD's is per core complex); the machine's description says which.

Each socket is split into its nodes as Intel sub-NUMA clustering or AMD NPS does it (``multi_die``), nodes
numbered socket by socket (an assumption lscpu cannot confirm: it does not say which socket a node is on), and
each node gets the cpus lscpu lists for it. Memory sizes are not in lscpu's output: every node gets
``memory_bytes_per_node`` (64 GiB unless told), said in the description; ``numactl --hardware`` gives the real
sizes (a ``numactl -H`` text with the ``lscpu`` text in the same file or an ``lscpu.txt`` beside it gets both).
Links, controllers and cache latencies are placeholders until the processor is timed from the catalog
(``numasim topo import`` does that when ``Model name`` names one it knows).

Examples
--------
>>> info = parse_lscpu_text('''Model name:          Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
... Thread(s) per core:  2
... Core(s) per socket:  20
... Socket(s):           2
... L3 cache:            28160K
... NUMA node(s):        2
... NUMA node0 CPU(s):   0-19,40-59
... NUMA node1 CPU(s):   20-39,60-79
... ''')
>>> info.sockets, info.nodes[1][:2], info.caches["L3"].size_bytes
(2, [20, 21], 28835840)
>>> m = machine_from_lscpu(info)
>>> [n.socket for n in m.nodes], m.cpu_model
([0, 1], 'Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numasim.errors import FormatError
from numasim.topology.cpulist import parse_cpulist
from numasim.topology.io._text import read_machine_text
from numasim.topology.model import CacheLevel, CacheScope, Machine
from numasim.units import GiB, KiB

__all__ = [
    "LscpuCache",
    "LscpuInfo",
    "looks_like_lscpu",
    "parse_lscpu_text",
    "machine_from_lscpu",
    "load_machine_lscpu",
    "DEFAULT_MEMORY_BYTES_PER_NODE",
]

DEFAULT_MEMORY_BYTES_PER_NODE = 64 * GiB
_LINE = re.compile(r"^\s*([^:\n]+?)\s*:\s*(.*?)\s*$")
_NODE = re.compile(r"^NUMA node(\d+) CPU\(s\)$")
_SIZE = re.compile(r"^([0-9.]+)\s*([KMG]i?B?|[KMG])?(?:\s*\((\d+) instances?\))?$", re.IGNORECASE)
_UNIT = {"": 1, "B": 1, "K": KiB, "KB": KiB, "KIB": KiB, "M": KiB**2, "MB": KiB**2, "MIB": KiB**2,
         "G": KiB**3, "GB": KiB**3, "GIB": KiB**3}  # fmt: skip


@dataclass(frozen=True)
class LscpuCache:
    """One cache level as lscpu gives it: one instance's size and, where it says, how many instances."""

    size_bytes: int
    instances: int | None


@dataclass(frozen=True)
class LscpuInfo:
    """What an ``lscpu`` text says about the machine's layout."""

    source: str
    model_name: str | None
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    nodes: dict[int, list[int]]
    """Each NUMA node's cpus, by node id."""
    caches: dict[str, LscpuCache] = field(default_factory=dict)
    """``L1d``, ``L2``, ``L3`` where the text gives an instance's size unambiguously."""
    notes: list[str] = field(default_factory=list)
    """What was left out or assumed, for the machine's description."""


def looks_like_lscpu(text: str) -> bool:
    """Whether ``text`` is lscpu's output (it names sockets, cores per socket and the NUMA nodes' cpus)."""
    return bool(re.search(r"^\s*Socket\(s\)\s*:", text, re.M)) and bool(
        re.search(r"^\s*NUMA node\d+ CPU\(s\)\s*:", text, re.M)
    )


def _fields(text: str) -> dict[str, str]:
    """``Key: value`` pairs, the first of each key (a big.LITTLE part prints one section a core type)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


def _count(fields: dict[str, str], key: str, source: str) -> int:
    value = fields.get(key)
    if value is None:
        raise FormatError(source, f"no {key!r} line: not lscpu output, or a cut one")
    if not value.isdigit() or int(value) <= 0:
        raise FormatError(source, f"{key!r}: expected a positive integer, got {value!r}")
    return int(value)


def _cache(value: str, level: str, source: str, per: tuple[int, str] | None) -> tuple[LscpuCache | None, str | None]:
    """An instance's size, and a note when it was inferred or left out. The old layout gives one instance
    (``32K``), the new the sum and the count (``1.5 MiB (48 instances)``); a sum without its count (util-linux
    2.34-2.36) is divided by ``per`` (the instances the level is assumed to have, and why), or left out."""
    m = _SIZE.match(value)
    if not m:
        raise FormatError(source, f"{level} cache: cannot read the size {value!r}")
    unit = (m.group(2) or "").upper()
    size = float(m.group(1)) * _UNIT[unit]
    n = int(m.group(3)) if m.group(3) else None
    note = None
    if n is None and unit not in ("K", "M", "G", "", "B"):
        if per is None:
            return None, f"{level}: {value!r} is the sum over instances without their count (util-linux 2.34-2.36): left out"
        n, why = per
        note = f"{level}: {value!r} is a sum without its count: {why}"
    if n is None:  # the old layout: one instance, "32K"
        return LscpuCache(round(size), None), None
    # the sum is printed to a tenth of its unit ("1.6 MiB" for 52 x 32 KiB): an instance to the nearest 4 KiB
    return LscpuCache(max(1, round(size / n / (4 * KiB))) * 4 * KiB, n), note


def parse_lscpu_text(text: str, source: str = "<text>") -> LscpuInfo:
    """Read ``lscpu`` output. A missing or malformed count, a cpu list that is not one, or nodes whose cpus
    overlap or leave cpus out is a :class:`~numasim.errors.FormatError` naming the line's key."""
    fields = _fields(text)
    sockets = _count(fields, "Socket(s)", source)
    cores = _count(fields, "Core(s) per socket", source)
    threads = _count(fields, "Thread(s) per core", source)
    nodes: dict[int, list[int]] = {}
    for key, value in fields.items():
        m = _NODE.match(key)
        if not m:
            continue
        if not value:
            raise FormatError(source, f"{key!r} is empty: a memory-only node (CXL, persistent memory), which lscpu "
                                      "does not place; import `numactl --hardware` output instead")
        try:
            nodes[int(m.group(1))] = parse_cpulist(value)
        except ValueError as exc:
            raise FormatError(source, f"{key!r}: {exc}") from None
    if not nodes:
        raise FormatError(source, "no 'NUMA nodeN CPU(s)' line: lscpu prints them on a NUMA machine")
    declared = fields.get("NUMA node(s)")
    if declared is not None and declared.isdigit() and int(declared) != len(nodes):
        raise FormatError(source, f"'NUMA node(s)' says {declared}, but {len(nodes)} 'NUMA nodeN CPU(s)' lines follow")
    every = sorted(c for cpus in nodes.values() for c in cpus)
    if len(every) != len(set(every)):
        raise FormatError(source, "'NUMA nodeN CPU(s)': a cpu is listed on two nodes")
    total = sockets * cores * threads
    if len(every) != total:
        raise FormatError(
            source, f"the nodes list {len(every)} cpus, but 'Socket(s)' {sockets} x 'Core(s) per socket' {cores} x "
                    f"'Thread(s) per core' {threads} = {total} (offline cpus? lscpu counts only online ones)"
        )
    named = " ".join(fields.get("Model name", "").split())
    model = None if named in ("", "-") else named  # some ARM parts print "-"
    caches: dict[str, LscpuCache] = {}
    notes: list[str] = []
    # what a sum without its count is divided by: L1d and L2 per core (every server core since Nehalem and
    # K10 but Bulldozer's module-shared L2), the L3 per socket on Intel (AMD's per core complex: unknown)
    n_cores = sockets * cores
    per = {"L1d": (n_cores, f"{n_cores} per-core instances assumed"),
           "L2": (n_cores, f"{n_cores} per-core instances assumed")}
    if model is not None and "INTEL" in model.upper():
        per["L3"] = (sockets, f"{sockets} per-socket instances assumed (Intel)")
    for level in ("L1d", "L2", "L3"):
        given = fields.get(f"{level} cache", fields.get(level))
        if given:
            found, note = _cache(given, level, source, per.get(level))
            if found is not None:
                caches[level] = found
            if note is not None:
                notes.append(note)
    return LscpuInfo(source, model, sockets, cores, threads, dict(sorted(nodes.items())), caches, notes)


def _cache_levels(info: LscpuInfo) -> list[CacheLevel]:
    from numasim.topology.builders import NOMINAL_CACHE_LATENCY_NS

    out = []
    n_nodes = len(info.nodes)
    for level, cache in info.caches.items():
        if level != "L3":
            scope = CacheScope.CORE
        elif cache.instances is None or cache.instances == info.sockets:
            scope = CacheScope.SOCKET
        elif cache.instances == n_nodes:
            scope = CacheScope.NODE
        else:
            scope = CacheScope.DIE  # more instances than nodes: AMD's core complexes
        out.append(CacheLevel(name=level, size_bytes=cache.size_bytes, latency_ns=NOMINAL_CACHE_LATENCY_NS[level],
                              scope=scope))
    return out


def machine_from_lscpu(
    info: LscpuInfo, *, name: str | None = None, memory_bytes_per_node: int = DEFAULT_MEMORY_BYTES_PER_NODE
) -> Machine:
    """The machine ``info`` describes (see the module docstring for what is assumed)."""
    from numasim.topology.builders import multi_die

    n_nodes = len(info.nodes)
    if n_nodes % info.sockets:
        raise FormatError(info.source, f"{n_nodes} NUMA nodes over {info.sockets} sockets: not the same number on each")
    per_socket = n_nodes // info.sockets
    amd = "AMD" in (info.model_name or "").upper()
    mode = f"NPS{per_socket}" if amd else f"SNC{per_socket}"
    size = {len(cpus) for cpus in info.nodes.values()}
    if len(size) != 1:
        raise FormatError(info.source, f"the nodes hold {sorted(size)} cpus: numasim builds equal nodes from lscpu "
                                       "(import `numactl --hardware` output for this machine)")
    caches = _cache_levels(info)
    try:
        machine = multi_die(info.sockets, mode, cores_per_socket=info.cores_per_socket,
                            threads_per_core=info.threads_per_core, memory_bytes=memory_bytes_per_node,
                            name=name or Path(info.source).stem, caches=caches)
    except ValueError as exc:
        raise FormatError(info.source, f"cannot build its machine ({mode}): {exc}") from None
    # lscpu's own cpu numbering, node k (in id order) taking the k-th node's place, socket by socket
    ids = list(info.nodes)
    nodes = [n.model_copy(update={"id": ids[k], "cpus": info.nodes[ids[k]]}) for k, n in enumerate(machine.nodes)]
    renumber = dict(zip([n.id for n in machine.nodes], ids, strict=True))
    links = [lk.model_copy(update={"a": renumber.get(lk.a, lk.a), "b": renumber.get(lk.b, lk.b)})  # type: ignore[arg-type]
             for lk in machine.links]
    notes = [f"{mode}, {info.threads_per_core} threads per core",
             f"memory size not in lscpu: {memory_bytes_per_node / GiB:g} GiB a node assumed",
             "nodes taken to be numbered socket by socket"]
    notes += [f"cache latencies nominal ({', '.join(c.name for c in caches)})"] if caches else []
    notes += info.notes
    data = machine.model_dump()
    data.update(nodes=[n.model_dump() for n in nodes], links=[lk.model_dump() for lk in links],
                cpu_model=info.model_name, source=info.source,
                description=f"from lscpu output {Path(info.source).name} ({'; '.join(notes)})")
    return Machine.model_validate(data)


def load_machine_lscpu(path: str | Path) -> Machine:
    """Read the file at ``path`` holding ``lscpu`` output as a machine (:func:`machine_from_lscpu`)."""
    source, text = read_machine_text(path)
    return machine_from_lscpu(parse_lscpu_text(text, source))
