"""Machines, calibrations and workloads shared by the engine tests (and the engine benchmark)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from numasim.engine import PageMap
from numasim.timing.model import Calibration, CoreTiming, nominal_calibration
from numasim.topology.builders import glueless
from numasim.topology.model import (
    CacheLevel,
    CacheScope,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    Machine,
    MemoryController,
    Node,
)
from numasim.units import GiB, MiB
from numasim.workload.access import AccessChunk

PAGE = 4096
LINE = 64


def seed000_machine(*, caches: bool = True) -> Machine:
    """Source 000's 4-node machine: 2 sockets x 2 dies, 96 cpus, SLIT 10/11/20, a NIC on node 0.

    Timing is nominal (controller 80 ns / 40 GB/s; die-to-die 8 ns, socket-to-socket 80 ns, so the derived
    SLIT is 10 / 11 / 20); the NIC's attach link and the die link's bandwidth are set so that an 8 MiB RDMA send
    from node 0 / node 1 memory takes about 331 / 494 us, as measured in source 000.
    """
    ctrl = MemoryController(latency_ns=80.0, read_bandwidth_gb_s=40.0, write_bandwidth_gb_s=30.0)
    nodes = [
        Node(
            id=i,
            cpus=list(range(24 * i, 24 * i + 24)),
            memory_bytes=64 * GiB,
            socket=i // 2,
            die=i % 2,
            controller=ctrl,
        )
        for i in range(4)
    ]
    die = dict(kind=LinkKind.ON_DIE, latency_ns=8.0, bandwidth_gb_s=17.0)
    upi = dict(kind=LinkKind.UPI, latency_ns=80.0, bandwidth_gb_s=20.0)
    links = [
        Link(a=0, b=1, **die),
        Link(a=2, b=3, **die),
        Link(a=0, b=2, **upi),
        Link(a=1, b=3, **upi),
        Link(a=0, b=3, **upi),
        Link(a=1, b=2, **upi),
    ]
    cache = [
        CacheLevel(name="L1d", size_bytes=48 * 1024, latency_ns=1.2, scope=CacheScope.CORE, associativity=12),
        CacheLevel(name="L2", size_bytes=2 * MiB, latency_ns=4.5, scope=CacheScope.CORE, associativity=16),
        CacheLevel(name="L3", size_bytes=32 * MiB, latency_ns=20.0, scope=CacheScope.DIE, associativity=16),
    ]
    return Machine(
        name="seed-000-4node",
        description="2 sockets x 2 dies, 96 cpus (source 000)",
        nodes=nodes,
        links=links,
        caches=cache if caches else [],
        devices=[
            Device(
                name="mlx5_2",
                kind=DeviceKind.NIC,
                node=0,
                attach_latency_ns=250.0,
                attach_bandwidth_gb_s=25.4,
            )
        ],
        firmware_slit=[[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]],
    )


def two_node(*, caches: bool = False) -> Machine:
    m = glueless(2)
    if caches:
        m = m.model_copy(
            update={
                "caches": [
                    CacheLevel(name="L1d", size_bytes=32 * 1024, latency_ns=1.0, associativity=8),
                    CacheLevel(name="L2", size_bytes=256 * 1024, latency_ns=4.0, associativity=8),
                ]
            }
        )
    return m


def calibration(machine: Machine, **core: float) -> Calibration:
    """Nominal calibration with core parameters overridden (e.g. ``prefetch_distance_lines=0``)."""
    cal = nominal_calibration(machine)
    if core:
        fields = cal.core.model_dump() | core
        cal = cal.model_copy(update={"core": CoreTiming(**fields)})
        cal = Calibration.model_validate(cal.model_dump() | {"id": ""})
    return cal


def spread_pages(nodes: list[int], pages_per_node: int) -> PageMap:
    """Pages 0.. placed in blocks: the first ``pages_per_node`` on nodes[0], the next on nodes[1], ..."""
    pm = PageMap(PAGE)
    pm.assign(0, np.repeat(np.array(nodes, dtype=np.int16), pages_per_node))
    return pm


def interleaved_pages(nodes: list[int], pages: int) -> PageMap:
    pm = PageMap(PAGE)
    pm.assign(0, np.resize(np.array(nodes, dtype=np.int16), pages))
    return pm


def stream(
    kind: str,
    n: int,
    threads: int,
    footprint_bytes: int,
    *,
    seed: int = 0,
    chunk: int = 50_000,
    write_fraction: float = 0.0,
    compute_ns: float = 0.0,
    base: int = 0,
) -> Iterator[AccessChunk]:
    """Round-robin over threads; ``seq``: each thread walks its own slice line by line; ``rand``: uniform lines."""
    rng = np.random.default_rng(seed)
    lines = footprint_bytes // LINE
    per_thread = max(lines // threads, 1)
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        i = np.arange(lo, lo + k)
        th = i % threads
        if kind == "seq":
            line = th * per_thread + (i // threads) % per_thread
        elif kind == "rand":
            line = rng.integers(0, lines, k)
        else:
            raise ValueError(kind)
        w = rng.random(k) < write_fraction if write_fraction else False
        yield AccessChunk.build(
            (base + line * LINE).astype(np.uint64), thread=th, is_write=w, compute_ns=compute_ns
        )
