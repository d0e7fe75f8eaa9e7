"""``numasim probe``: gather what a calibration needs on a real Linux host.

1. Copies the ``/sys/devices/system/node`` tree (regular files of each ``nodeN``, HMAT ``access*/initiators``
   attributes, symlinked initiators recorded as empty directories) under ``DIR/sys/devices/system/node``.
2. Saves ``numactl --hardware`` output when numactl exists, and ``lscpu`` as ``lscpu.txt`` (the processor
   name, the platform catalog's key, which ``numasim topo import`` of the tree picks up).
3. Measures idle latency and read bandwidth per (cpu node, memory node) pair with
   :mod:`numasim.calibrate.probe_kernel`: in a ``numactl --cpunodebind=I --membind=J`` subprocess when
   numactl exists, else in this process pinned with ``os.sched_setaffinity`` (local memory by first touch,
   remote cells not measured).
4. Writes ``DIR/probe.json`` (:class:`~numasim.calibrate.parsers.probe.ProbeResult`), the input of
   ``numasim calibrate``.

On a 1-node machine only the local cell exists; the result says so in ``notes``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from numasim.calibrate.parsers.probe import ProbeResult
from numasim.calibrate.probe_kernel import measure
from numasim.fileio import atomic_write_text
from numasim.topology.cpulist import parse_cpulist

__all__ = ["probe", "copy_node_tree", "node_cpus"]

SYS_NODE = Path("/sys/devices/system/node")


def copy_node_tree(src: Path, dst: Path) -> list[int]:
    """Copy the small text files of a sysfs node tree; return the node ids found."""
    nodes: list[int] = []
    if not src.is_dir():
        return nodes
    for node_dir in sorted(src.glob("node[0-9]*")):
        nodes.append(int(node_dir.name[4:]))
        for path in node_dir.rglob("*"):
            rel = path.relative_to(src)
            # cpuN links and memoryN blocks lead out of the node tree; initiators/nodeM and targets/nodeM
            # links are the HMAT relation and are kept as (empty) directories.
            if path.is_symlink():
                if path.parent.name in ("initiators", "targets") and path.name.startswith("node"):
                    (dst / rel).mkdir(parents=True, exist_ok=True)
                continue
            if any(part.startswith(("cpu", "memory")) and part[-1:].isdigit() for part in rel.parts[1:]):
                continue
            if path.is_dir():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if len(data) > 1 << 20:
                continue
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            (dst / rel).write_bytes(data)
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        f = src / name
        if f.is_file():
            dst.mkdir(parents=True, exist_ok=True)
            try:
                (dst / name).write_bytes(f.read_bytes())
            except OSError:
                pass
    return sorted(nodes)


def node_cpus(tree: Path, node: int) -> list[int]:
    f = tree / f"node{node}" / "cpulist"
    return parse_cpulist(f.read_text().strip()) if f.is_file() and f.read_text().strip() else []


def _kernel_subprocess(cpu_node: int, mem_node: int, size: int, repeats: int, steps: int) -> dict[str, float]:
    cmd = [
        "numactl",
        f"--cpunodebind={cpu_node}",
        f"--membind={mem_node}",
        sys.executable,
        "-m",
        "numasim.calibrate.probe_kernel",
        f"--working-set={size}",
        f"--repeats={repeats}",
        f"--steps={steps}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    return dict(json.loads(out.stdout))


def _save_cpu_model(out: Path, notes: list[str]) -> None:
    """Save ``lscpu`` (else /proc/cpuinfo's first model name) as ``lscpu.txt``: the processor's name is the key
    into the platform catalog, and ``numasim topo import`` of the copied sysfs tree finds it there."""
    lscpu = shutil.which("lscpu")
    text = ""
    if lscpu:
        try:
            text = subprocess.run([lscpu], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            notes.append(f"lscpu failed: {exc}")
    if "model name" not in text.lower():
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                line = next((ln for ln in f if ln.lower().startswith("model name")), "")
            text = line
        except OSError:
            text = ""
    if text:
        (out / "lscpu.txt").write_text(text)
    else:
        notes.append("no lscpu or /proc/cpuinfo model name: the processor is not named (pass --cpu to topo import)")


def probe(
    out_dir: str | Path,
    *,
    working_set_bytes: int = 256 << 20,
    repeats: int = 3,
    steps: int = 200_000,
    sys_node: Path = SYS_NODE,
    use_numactl: bool | None = None,
) -> ProbeResult:
    """Probe this host; everything lands in ``out_dir`` (created)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    nodes = copy_node_tree(sys_node, out / "sys" / "devices" / "system" / "node")
    if not nodes:
        nodes = [0]
        notes.append(f"{sys_node} not found: treated as a single node 0")
    _save_cpu_model(out, notes)
    numactl = shutil.which("numactl") if use_numactl is not False else None
    if numactl:
        try:
            hw = subprocess.run([numactl, "--hardware"], capture_output=True, text=True, timeout=30)
            (out / "numactl-hardware.txt").write_text(hw.stdout)
        except (OSError, subprocess.SubprocessError) as exc:
            notes.append(f"numactl --hardware failed: {exc}")
            numactl = None
    else:
        notes.append("numactl not found: memory cannot be bound to a node, only local cells (first touch) measured")
    n = len(nodes)
    lat: list[list[float | None]] = [[None] * n for _ in nodes]
    bw: list[list[float | None]] = [[None] * n for _ in nodes]
    tree = out / "sys" / "devices" / "system" / "node"
    for a, cpu_node in enumerate(nodes):
        cpus = node_cpus(tree, cpu_node)
        if tree.is_dir() and not cpus:
            notes.append(f"node {cpu_node} has no cpus: no initiator row")
            continue
        for b, mem_node in enumerate(nodes):
            if numactl and n > 1:
                res = _kernel_subprocess(cpu_node, mem_node, working_set_bytes, repeats, steps)
            elif a == b:
                old = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
                try:
                    if cpus and hasattr(os, "sched_setaffinity"):
                        os.sched_setaffinity(0, cpus)
                    res = measure(working_set_bytes, repeats, steps)
                finally:
                    if old is not None:
                        os.sched_setaffinity(0, old)
            else:
                continue
            lat[a][b] = round(res["latency_ns"], 3)
            bw[a][b] = round(res["bandwidth_gb_s"], 4)
    if n == 1:
        notes.append(
            "1 NUMA node: only the local cell is measured; links cannot be calibrated from this host "
            "(run the probe on a multi-node machine)"
        )
    notes.append(
        "latency: Python pointer chase, interpreter cost per step subtracted (cache-resident chase); "
        "bandwidth: single-thread numpy read (core-bound, a lower bound of the controller's)"
    )
    result = ProbeResult(
        host=platform.node(),
        kernel=platform.release(),
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        nodes=nodes,
        placement="numactl" if (numactl and n > 1) else "local-only",
        latency_ns=lat,
        bandwidth_gb_s=bw,
        working_set_bytes=working_set_bytes,
        repeats=repeats,
        notes=notes,
    )
    atomic_write_text(out / "probe.json", result.model_dump_json(indent=2) + "\n")
    return result
