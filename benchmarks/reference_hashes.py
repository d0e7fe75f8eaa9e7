"""Bit-identity check for engine speed work: a hash of every output of ``simulate`` on a fixed set of workloads.

A change meant to make the engine faster, not different, must leave every hash as it was. Run it before the
change (``--save``), then after it (``--check``)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference_hashes.py --save /tmp/ref.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference_hashes.py --check /tmp/ref.json

The workloads: the engine benchmark's (several chunks, so the carried cache tail and its long horizon are in
play), the same with 100 ns epochs and with small windows, exact mode, the exact/epoch agreement cases, the cache
benchmark's working sets (L2, L3, 2x L3, a chase), line-crossing accesses, a pointer chase, devices beside
threads, NUMA balancing, the TLB, per-request latencies and a run without latency recording. A hash covers the
whole ``to_dict()``, the raw bytes of every array (``to_dict`` rounds the utilisation), the diagnostics and the
TLB, request and kernel sections. Not a test (the reference is whatever the code did before the change); about a
minute on the 2-core box.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "engine"))
sys.path.insert(0, str(Path(__file__).parent))

import bench_cache  # noqa: E402
import bench_engine as b  # noqa: E402
from _engine_machines import (  # noqa: E402
    PAGE,
    calibration,
    interleaved_pages,
    seed000_machine,
    spread_pages,
    stream,
    two_node,
)

from numasim.engine import DeviceTransfer, PageMap, SimulationResult, ThreadSpec, simulate  # noqa: E402
from numasim.engine.tlb import TlbSpec  # noqa: E402
from numasim.timing.model import load_calibration, nominal_calibration  # noqa: E402
from numasim.timing.resolve import resolve_calibration  # noqa: E402
from numasim.topology.builders import glueless  # noqa: E402
from numasim.topology.io import load_machine  # noqa: E402
from numasim.topology.io.toml_format import load_machine_toml  # noqa: E402
from numasim.workload.access import AccessChunk  # noqa: E402
from numasim.workload.quick import quick_workload  # noqa: E402
from numasim.workload.run import run_workload  # noqa: E402
from numasim.workload.spec import Workload  # noqa: E402

GOLDEN_CAL = ROOT / "tests" / "data" / "engine" / "seed-000-4node-golden.cal.json"  # frozen: fits move the shipped one


def digest(r: SimulationResult) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(r.to_dict(), sort_keys=True, default=repr).encode())
    for name in ("utilisation", "hist_edges_ns", "latency_hist_by_node", "latency_hist_by_initiator"):
        a = np.ascontiguousarray(getattr(r, name))
        h.update(name.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    h.update(json.dumps([r.diagnostics, r.tlb, r.requests, r.kernel], sort_keys=True, default=repr).encode())
    return h.hexdigest()


def _seed000():  # type: ignore[no-untyped-def]
    m = load_machine_toml(ROOT / "topologies" / "seed-000-4node.toml")
    return m, load_calibration(GOLDEN_CAL)


def _bench(n: int = 2_500_000, **kw: object) -> SimulationResult:
    m, cal = _seed000()
    return simulate(m, cal, b.threads(m), b.accesses(n), b.pages(), **kw)  # type: ignore[arg-type]


def _cache_bench(which: str, n: int = 3_000_000, mode: str = "epoch") -> SimulationResult:
    m, cal = _seed000()
    specs = b.threads(m)
    region = bench_cache._regions(m, cal, specs)["L3" if which == "chase" else which]
    pm, _ = bench_cache._pages(len(specs), region)
    chunks: Iterator[AccessChunk] = bench_cache._chunks(n, region, len(specs))
    if which == "chase":
        specs = [ThreadSpec(t.id, cpu=t.cpu, dependent=True) for t in specs]
    return simulate(m, cal, specs, chunks, pm, mode=mode)


def _crossing(mode: str) -> SimulationResult:
    """8- and 16-byte accesses, some straddling two lines, over working sets that hit every level, with writes."""
    m = seed000_machine()
    pm = interleaved_pages([0, 1, 2, 3], 1 << 12)
    specs = [ThreadSpec(t, cpu=t) for t in range(3)] + [ThreadSpec(3, cpu=30)]
    rng = np.random.default_rng(11)
    chunks = []
    for k, foot in enumerate((64 << 10, 1 << 20, 12 << 20)):
        n = 60_000
        addr = rng.integers(0, foot, n, dtype=np.uint64)
        addr[::3] = (addr[::3] | np.uint64(63)) - np.uint64(3)  # a third start 4 bytes before a line's end
        chunks.append(AccessChunk(
            thread=(np.arange(n) % 4).astype(np.int32), address=addr, is_write=rng.random(n) < 0.2 * k,
            size_bytes=rng.choice(np.array([8, 16], dtype=np.uint16), n), compute_ns=np.full(n, 1.5, np.float32),
        ))  # fmt: skip
    return simulate(m, calibration(m), specs, chunks, pm, mode=mode, epoch_ns=250.0)


def _chase(mode: str) -> SimulationResult:
    m = glueless(2)
    w = quick_workload("pointer_chase", size="8M", accesses=60_000, threads=2)
    return run_workload(m, w, nominal_calibration(m), mode=mode, policy="interleave:0-1").result


def _devices(mode: str) -> SimulationResult:
    m = seed000_machine(caches=True)
    pm = spread_pages([0, 1], 512)
    specs = [ThreadSpec(0, cpu=0), ThreadSpec(1, cpu=30)]
    devs = [
        DeviceTransfer("mlx5_2", "read", 0, 1 << 20),
        DeviceTransfer("mlx5_2", "write", 512 * PAGE, 1 << 19, start_ns=20_000.0),
    ]
    accesses = stream("rand", 40_000, 2, 1024 * PAGE, write_fraction=0.5)
    return simulate(m, calibration(m), specs, accesses, pm, mode=mode, devices=devs)


def _balancing() -> SimulationResult:
    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m, nominal=True)
    w = Workload.model_validate({
        "name": "wrong-node", "threads": [{"id": 0, "node": 0}, {"id": 1, "node": 1}],
        "allocations": [{"name": "data", "size_bytes": "16M", "first_touch": 1, "policy": "default"}],
        "phases": [{"pattern": "random", "allocation": "data", "threads": [0], "accesses": 150_000,
                    "compute_ns": 200.0}],
    })  # fmt: skip
    fast = [("kernel.numa_balancing", 1), ("kernel.numa_balancing_scan_delay_ms", 10)]
    return run_workload(m, w, cal, sysctls=fast).result


def _tlb(size: str, huge: bool) -> SimulationResult:
    m = load_machine("seed-003-2node")
    cal = resolve_calibration(m)
    alloc = {"name": "a", "size_bytes": size, **({"madvise": "hugepage"} if huge else {})}
    w = Workload.model_validate({
        "name": "tlb", "threads": [{"id": 0, "node": 0}, {"id": 1, "node": 1}], "allocations": [alloc],
        "phases": [{"pattern": "random", "allocation": "a", "accesses": 200_000, "compute_ns": 20}],
    })  # fmt: skip
    return run_workload(m, w, cal, tlb=TlbSpec()).result


def _agreement(i: int, mode: str) -> SimulationResult:
    sys.path.insert(0, str(ROOT / "tests" / "engine"))
    from test_engine_agreement import CASES

    name, kind, threads, nodes, wf, compute, cache = CASES[i]
    m = two_node(caches=cache) if name == "2node" else seed000_machine(caches=cache)
    pages = 1 << 13
    pm = interleaved_pages(nodes, pages) if kind == "rand" else spread_pages(nodes, pages // len(nodes))
    specs = [ThreadSpec(t, cpu=t * len(m.cpus) // threads) for t in range(threads)]
    acc = stream(kind, 40_000, threads, pages * PAGE, write_fraction=wf, compute_ns=compute, seed=3)
    return simulate(m, calibration(m), specs, acc, pm, mode=mode)


def _requests() -> SimulationResult:
    m, cal = _seed000()
    return simulate(m, cal, b.threads(m), b.accesses(300_000, seed=4), b.pages(), request_accesses=4)


def _mixed_chunks() -> SimulationResult:
    """Chunks of uneven sizes, one larger than the feeder's split, with compute time and no latency recording."""
    m, cal = _seed000()
    pm = PageMap()
    pm.assign(0, np.resize(np.arange(4, dtype=np.int16), 1 << 14))
    specs = [ThreadSpec(t, cpu=t * 12) for t in range(8)]
    chunks = list(stream("rand", 300_000, 8, (1 << 14) * 4096, compute_ns=7.3, seed=5, chunk=70_000))
    chunks += list(stream("seq", 1_300_000, 8, (1 << 14) * 4096, compute_ns=0.4, seed=6, chunk=1_300_000))
    return simulate(m, cal, specs, chunks, pm, epoch_ns=100.0, record_latencies=False)


def _catalog_writes(cpu: str, mode: str) -> SimulationResult:
    """Copies and in-place updates, local and to the other socket, on a catalog-timed machine (writes cost two
    lines, write hits owe their write-backs, and full-line copies on a processor with write-allocate evasion)."""
    from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
    from numasim.timing.catalog import catalog_calibration

    case = next(c for c in PUBLIC_MLC_CASES if cpu in c.label)
    m = public_machine(dataclasses.replace(case, cxl_socket=None))  # DRAM only: the 9224's CXL node is no writes case
    cal = catalog_calibration(m, turbo=case.turbo)
    last = m.nodes[-1].id
    pm = PageMap()
    specs, chunks = [], []
    n = 24_000 if mode == "exact" else 200_000
    for k, cpu_id in enumerate(m.node(m.nodes[0].id).cpus[:6]):
        src, dst = (k * 2) << 26, ((k * 2) + 1) << 26
        pm.assign(src, np.full(8 << 8, m.nodes[0].id if k % 2 else last, dtype=np.int16))
        pm.assign(dst, np.full(8 << 8, last if k % 3 == 0 else m.nodes[0].id, dtype=np.int16))
        line = np.arange(n // 2, dtype=np.uint64) * np.uint64(64)
        if k % 2:  # a copy: read a line, write a whole line elsewhere
            addr = np.stack([np.uint64(src) + line, np.uint64(dst) + line], axis=1).ravel()
        else:  # an update: read a line, write 8 bytes of it back
            addr = np.stack([np.uint64(src) + line, np.uint64(src) + line], axis=1).ravel()
        wr = np.tile(np.array([False, True]), n // 2)
        size = np.where(wr & bool(k % 2), 64, 8).astype(np.uint16)
        specs.append(ThreadSpec(k, cpu=cpu_id))
        chunks.append(AccessChunk.build(addr, thread=k, is_write=wr, size_bytes=size))
    return simulate(m, cal, specs, chunks, pm, mode=mode)


WORKLOADS: dict[str, Callable[[], SimulationResult]] = {
    "bench": lambda: _bench(),
    "bench-epoch100": lambda: _bench(1_200_000, epoch_ns=100.0),
    "bench-small-windows": lambda: _bench(400_000, window_accesses=1 << 11),
    "bench-exact": lambda: _bench(60_000, mode="exact"),
    "cache-L2": lambda: _cache_bench("L2"),
    "cache-L3": lambda: _cache_bench("L3"),
    "cache-2xL3": lambda: _cache_bench("2x L3"),
    "cache-chase": lambda: _cache_bench("chase", 1_500_000),
    "cache-L3-batched": lambda: _cache_bench("L3", 6_000_000),  # long enough for the feeder to batch chunks
    "crossing-epoch": lambda: _crossing("epoch"),
    "crossing-exact": lambda: _crossing("exact"),
    "chase-epoch": lambda: _chase("epoch"),
    "chase-exact": lambda: _chase("exact"),
    "devices-epoch": lambda: _devices("epoch"),
    "devices-exact": lambda: _devices("exact"),
    "balancing": _balancing,
    "tlb-4k": lambda: _tlb("512M", False),
    "tlb-2m": lambda: _tlb("512M", True),
    "tlb-small": lambda: _tlb("4M", False),
    "requests": _requests,
    "mixed-chunks": _mixed_chunks,
    "writes-cascadelake-epoch": lambda: _catalog_writes("8269CY (", "epoch"),
    "writes-cascadelake-exact": lambda: _catalog_writes("8269CY (", "exact"),
    "writes-sapphire-epoch": lambda: _catalog_writes("4416+", "epoch"),
    "writes-sapphire-exact": lambda: _catalog_writes("4416+", "exact"),
    "writes-genoa-epoch": lambda: _catalog_writes("9224", "epoch"),
    "writes-genoa-exact": lambda: _catalog_writes("9224", "exact"),
    **{f"agreement-{i}-{mode}": (lambda i=i, mode=mode: _agreement(i, mode)) for i in range(8) for mode in ("epoch", "exact")},
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    p.add_argument("--only", nargs="*", help="workload names (default: all)")
    args = p.parse_args()
    names = args.only or list(WORKLOADS)
    got = {}
    for name in names:
        got[name] = digest(WORKLOADS[name]())
        print(f"{name:24s} {got[name][:16]}", flush=True)
    if args.save:
        args.save.write_text(json.dumps(got, indent=1))
        return
    ref = json.loads(args.check.read_text())
    bad = [n for n in names if ref.get(n) != got[n]]
    print(f"{len(names) - len(bad)} of {len(names)} identical" + (f"; differ: {', '.join(bad)}" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
