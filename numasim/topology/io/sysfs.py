"""A ``/sys/devices/system/node`` tree: read a (copied) one into a :class:`Machine`, write one for a Machine.

Files, as the kernel lays them out (``drivers/base/node.c``, ``shared/kernel_spec.md`` section 9.4)::

    possible online has_cpu has_memory has_normal_memory     node lists ("0-3")
    nodeN/cpulist        "0-11,48-59"
    nodeN/cpumap         hex mask, 32-bit words high first ("00000000,00000fff")
    nodeN/distance       "10 21"
    nodeN/meminfo        "Node 0 MemTotal:       16314556 kB" (MemTotal, MemFree, MemUsed here)
    nodeN/numastat       numa_hit ... other_node (zeros: a fresh machine)
    nodeN/cpuK           the kernel makes symlinks to ../../cpu/cpuK; we write empty regular files (a tree
                         that can be copied, zipped and diffed anywhere; readers only test that they exist)
    nodeN/access0/initiators/{read,write}_{latency,bandwidth}
                         HMAT performance of the node's memory for its best initiators (latency in ns,
                         bandwidth in MB/s; the kernel prints whole numbers)

Reading uses ``cpulist`` (or ``cpumap`` when ``cpulist`` is missing), ``meminfo`` and ``distance``; the
top-level lists, when present, must agree with the per-node files. The distance table becomes the machine's
``firmware_slit``, and links are inferred from it (:func:`numasim.topology.infer.from_distance_matrix`); HMAT
values, when present, replace the inferred controller timing of that node.
"""

from __future__ import annotations

import re
from pathlib import Path

from numasim.errors import FormatError, TopologyError
from numasim.fileio import atomic_dir
from numasim.topology.cpulist import format_cpulist, parse_cpulist
from numasim.topology.io.cpumodel import cpu_model_near
from numasim.topology.model import Machine, MemoryController, Node
from numasim.units import KiB

__all__ = ["read_sysfs_node_tree", "write_sysfs_node_tree", "NUMASTAT_COUNTERS"]

NUMASTAT_COUNTERS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")
_NODE_DIR_RE = re.compile(r"^node(\d+)$")
# Real kernels print keys with parentheses (Active(anon)) and HugePages_* counts without "kB".
_MEMINFO_RE = re.compile(r"^Node\s+(\d+)\s+([\w()]+):\s+(\d+)(?:\s+kB)?\s*$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FormatError(str(path), f"cannot read: {exc}") from None


def _node_list(path: Path) -> list[int] | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except ValueError as exc:
        raise FormatError(str(path), f"not a node list: {text.strip()!r} ({exc})", 1) from None


def _cpumap(text: str, source: str) -> list[int]:
    words = text.strip().split(",")
    try:
        value = 0
        for w in words:
            value = (value << 32) | int(w, 16)
    except ValueError:
        raise FormatError(source, f"not a cpu mask: {text.strip()!r}", 1) from None
    return [bit for bit in range(value.bit_length()) if value >> bit & 1]


def _meminfo(path: Path, node_id: int) -> dict[str, int]:
    text = _read(path)
    if text is None:
        return {}
    out: dict[str, int] = {}
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _MEMINFO_RE.match(line)
        if not m:
            raise FormatError(str(path), f"expected 'Node {node_id} Key: value kB', got {line!r}", k)
        if int(m.group(1)) != node_id:
            raise FormatError(str(path), f"line is about node {m.group(1)}, file is node{node_id}'s", k)
        out[m.group(2)] = int(m.group(3))
    return out


def _hmat(node_dir: Path) -> MemoryController | None:
    base = node_dir / "access0" / "initiators"
    values: dict[str, int] = {}
    for key in ("read_latency", "read_bandwidth", "write_latency", "write_bandwidth"):
        text = _read(base / key)
        if text is None:
            continue
        try:
            values[key] = int(text.strip())
        except ValueError:
            raise FormatError(str(base / key), f"not a whole number: {text.strip()!r}", 1) from None
    if not values.get("read_latency") or not values.get("read_bandwidth"):
        return None
    write_bw = values.get("write_bandwidth")
    return MemoryController(
        latency_ns=float(values["read_latency"]),
        read_bandwidth_gb_s=values["read_bandwidth"] / 1000.0,  # MB/s -> GB/s (decimal)
        write_bandwidth_gb_s=write_bw / 1000.0 if write_bw else None,
    )


def read_sysfs_node_tree(path: str | Path, name: str | None = None) -> Machine:
    """Read a ``/sys/devices/system/node``-like directory.

    A node with neither cpus nor memory (an offline or hot-plug placeholder node) cannot exist in the model:
    it is dropped, with its row and column of the distance table, and the description says so.

    Examples
    --------
    >>> import tempfile
    >>> from numasim.topology.builders import glueless
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_sysfs_node_tree(glueless(2), Path(tmp) / "node")
    ...     m = read_sysfs_node_tree(Path(tmp) / "node")
    >>> [n.cpus for n in m.nodes][1], m.slit()
    ([8, 9, 10, 11, 12, 13, 14, 15], [[10, 16], [16, 10]])
    """
    from numasim.topology.infer import from_distance_matrix

    root = Path(path)
    src = str(root)
    if not root.is_dir():
        raise FormatError(src, "not a directory (expected a /sys/devices/system/node-like tree)")
    dirs = sorted(
        ((int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _NODE_DIR_RE.match(p.name))),
        key=lambda t: t[0],
    )
    if not dirs:
        raise FormatError(src, "no nodeN directories")
    has_cpu = _node_list(root / "has_cpu")
    has_memory = _node_list(root / "has_memory")
    online = _node_list(root / "online")
    ids = [nid for nid, _ in dirs]
    if online is not None and set(online) != set(ids):
        raise FormatError(
            str(root / "online"),
            f"online nodes {format_cpulist(online)} but directories for {format_cpulist(ids)}",
        )

    raw: list[tuple[int, list[int], int, int | None, MemoryController | None]] = []
    rows: list[list[int] | None] = []
    for nid, d in dirs:
        cpulist = _read(d / "cpulist")
        if cpulist is not None:
            try:
                cpus = parse_cpulist(cpulist)
            except ValueError as exc:
                raise FormatError(str(d / "cpulist"), f"{cpulist.strip()!r}: {exc}", 1) from None
        else:
            cpumap = _read(d / "cpumap")
            cpus = _cpumap(cpumap, str(d / "cpumap")) if cpumap is not None else []
        if has_cpu is not None and (nid in has_cpu) != bool(cpus):
            raise FormatError(
                str(root / "has_cpu"),
                f"says node {nid} {'has' if nid in has_cpu else 'has no'} cpus, its cpulist is {format_cpulist(cpus)!r}",
            )
        info = _meminfo(d / "meminfo", nid)
        if "MemTotal" not in info and (has_memory is None or nid in has_memory):
            raise FormatError(str(d / "meminfo"), "missing, or without a MemTotal line")
        total = info.get("MemTotal", 0) * KiB
        if has_memory is not None and nid not in has_memory:
            total = 0  # the kernel's N_MEMORY state wins over a leftover meminfo
        free = info.get("MemFree")
        dist_text = _read(d / "distance")
        if dist_text is None:
            rows.append(None)
        else:
            try:
                rows.append([int(tok) for tok in dist_text.split()])
            except ValueError:
                raise FormatError(
                    str(d / "distance"), f"not a list of numbers: {dist_text.strip()!r}", 1
                ) from None
            row = rows[-1]
            assert row is not None
            if len(row) != len(ids):
                raise FormatError(str(d / "distance"), f"{len(row)} distances for {len(ids)} nodes", 1)
        raw.append((nid, cpus, total, min(free * KiB, total) if free is not None else None, _hmat(d)))

    notes: list[str] = []
    keep = [k for k, (nid, cpus, total, _, _) in enumerate(raw) if cpus or total]
    for k, (nid, _, _, _, _) in enumerate(raw):
        if k not in keep:
            notes.append(f"node {nid} has neither cpus nor memory: dropped")
    if not keep:
        raise FormatError(src, "no node has cpus or memory")
    nodes = [Node(id=raw[k][0], cpus=raw[k][1], memory_bytes=raw[k][2], free_bytes=raw[k][3]) for k in keep]
    if all(r is not None for r in rows):
        full = [r for r in rows if r is not None]
        table = [[full[a][b] for b in keep] for a in keep]
        firmware: list[list[int]] | None = table
    else:
        missing = [raw[k][0] for k, r in enumerate(rows) if r is None]
        notes.append(f"no distance file for nodes {missing}: remote distance 20 assumed")
        table = [[10 if a == b else 20 for b in keep] for a in keep]
        firmware = None
    hmat = {raw[k][0]: raw[k][4] for k in keep if raw[k][4] is not None and raw[k][2] > 0}
    # Links are scaled to the controller latency: use the measured (HMAT) mean when there is one.
    latencies = [c.latency_ns for c in hmat.values() if c is not None]
    try:
        machine = from_distance_matrix(
            table,
            controller_latency_ns=sum(latencies) / len(latencies) if latencies else 100.0,
            name=name or (root.name if root.name not in ("", "node") else root.parent.name or "sysfs"),
            nodes=nodes,
            firmware_slit=firmware,
            description="from a sysfs node tree" + (f" ({'; '.join(notes)})" if notes else ""),
            source=src,
        )
    except TopologyError as exc:
        raise FormatError(src, f"node distances: {exc}") from None
    if hmat:
        machine = machine.model_copy(
            update={
                "nodes": [
                    n.model_copy(update={"controller": hmat.get(n.id, n.controller)}) for n in machine.nodes
                ]
            }
        )
    cpu_model = cpu_model_near(root)
    if cpu_model:
        machine = machine.model_copy(update={"cpu_model": cpu_model})
    return machine


def _cpumap_text(cpus: list[int], words: int) -> str:
    # The kernel prints nr_cpu_ids bits for every node; we use the machine's highest cpu the same way.
    value = sum(1 << c for c in cpus)
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def _meminfo_text(node: Node) -> str:
    total_kb = node.memory_bytes // KiB
    free_kb = (node.free_bytes if node.free_bytes is not None else node.memory_bytes) // KiB
    lines = [("MemTotal:", total_kb), ("MemFree:", free_kb), ("MemUsed:", total_kb - free_kb)]
    return "".join(f"Node {node.id} {label:<16}{kb:8d} kB\n" for label, kb in lines)


def _write_tree(machine: Machine, root: Path) -> None:
    ids = machine.node_ids
    slit = machine.slit()
    with_cpus = [n.id for n in machine.nodes if n.cpus]
    with_memory = [n.id for n in machine.nodes if n.has_memory]
    words = max(machine.cpus) // 32 + 1 if machine.cpus else 1
    for fname, values in (
        ("possible", ids),
        ("online", ids),
        ("has_cpu", with_cpus),
        ("has_memory", with_memory),
        ("has_normal_memory", with_memory),
    ):
        (root / fname).write_text(format_cpulist(values) + "\n", encoding="utf-8")
    for k, node in enumerate(machine.nodes):
        d = root / f"node{node.id}"
        d.mkdir()
        (d / "cpulist").write_text(format_cpulist(node.cpus) + "\n", encoding="utf-8")
        (d / "cpumap").write_text(_cpumap_text(node.cpus, words) + "\n", encoding="utf-8")
        (d / "distance").write_text(" ".join(str(v) for v in slit[k]) + "\n", encoding="utf-8")
        (d / "meminfo").write_text(_meminfo_text(node), encoding="utf-8")
        (d / "numastat").write_text("".join(f"{c} 0\n" for c in NUMASTAT_COUNTERS), encoding="utf-8")
        for c in node.cpus:
            (d / f"cpu{c}").write_text("", encoding="utf-8")
        if node.controller is not None and node.has_memory:
            ini = d / "access0" / "initiators"
            ini.mkdir(parents=True)
            ctrl = node.controller
            perf = {
                "read_latency": round(ctrl.latency_ns),
                "write_latency": round(ctrl.latency_ns),
                "read_bandwidth": round(ctrl.read_bandwidth_gb_s * 1000),
                "write_bandwidth": round(ctrl.effective_write_bandwidth_gb_s * 1000),
            }
            for key, value in perf.items():
                (ini / key).write_text(f"{value}\n", encoding="utf-8")


def write_sysfs_node_tree(machine: Machine, path: str | Path, *, overwrite: bool = False) -> None:
    """Write ``machine`` as a ``/sys/devices/system/node``-like tree at ``path``.

    The tree is built in a temporary directory beside ``path`` and renamed into place, so a failure never
    leaves a half-written tree. An existing ``path`` is replaced only with ``overwrite=True``.
    HMAT files are written for memory nodes with a controller (latency rounded to whole ns, bandwidth to
    whole MB/s, as the kernel reports them); ``cpuK`` entries are empty regular files, not symlinks.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise FormatError(str(target), "exists already (pass overwrite=True to replace it)")
    with atomic_dir(target) as tmp:  # never a half-written tree; no temporary survives a kill (see fileio)
        _write_tree(machine, tmp)
