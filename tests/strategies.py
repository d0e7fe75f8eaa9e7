"""Shared hypothesis strategies (machines, kernel configs). Other test modules may add theirs here."""

from __future__ import annotations

from hypothesis import strategies as st

from numasim.topology.model import Link, Machine, Node

__all__ = [
    "slit_tables",
    "small_machines",
    "kernel_configs",
    "multi_die_machines",
    "timed_machines",
    "timed_calibrations",
    "timed_workloads",
]

PAGE = 4096


@st.composite
def slit_tables(draw: st.DrawFn, n: int, symmetric: bool = True) -> list[list[int]]:
    """An n x n SLIT: 10 on the diagonal, remote distances 11..40 (small range: ties are likely)."""
    table = [[10] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if symmetric and j < i:
                table[i][j] = table[j][i]
            else:
                table[i][j] = draw(st.integers(11, 40))
    return table


@st.composite
def small_machines(
    draw: st.DrawFn,
    min_nodes: int = 1,
    max_nodes: int = 4,
    min_pages: int = 1024,
    max_pages: int = 12288,
    with_free: bool = True,
) -> Machine:
    """A small machine (a few thousand pages per node) with random SLIT, cpu-less and memoryless nodes.

    Node memory is between ``min_pages`` and ``max_pages`` pages (node 0 then has DMA and DMA32 zones), so a
    per-page reference walk stays fast. At least one node has memory; every node has cpus or memory.
    """
    n = draw(st.integers(min_nodes, max_nodes))
    nodes = []
    cpu = 0
    for i in range(n):
        kind = draw(st.sampled_from(["cpu+mem", "cpu+mem", "mem", "cpu"])) if n > 1 else "cpu+mem"
        if i == 0 and kind == "cpu":
            kind = "cpu+mem"
        cpus = [cpu, cpu + 1] if kind != "mem" else []
        cpu += len(cpus)
        mem_pages = draw(st.integers(min_pages, max_pages)) if kind != "cpu" else 0
        free = None
        if with_free and mem_pages and draw(st.booleans()):
            free = draw(st.integers(0, mem_pages)) * PAGE
        nodes.append(Node(id=i, cpus=cpus, memory_bytes=mem_pages * PAGE, free_bytes=free))
    links = [Link(a=i, b=i + 1, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(n - 1)]
    return Machine(name="hypothesis", nodes=nodes, links=links, firmware_slit=draw(slit_tables(n)))


@st.composite
def kernel_configs(draw: st.DrawFn, machine: Machine | None = None) -> dict[str, object]:
    """Keyword arguments for :class:`numasim.kernel.config.KernelConfig` (version, reclaim knobs, page cache)."""
    kwargs: dict[str, object] = {
        "version": draw(st.sampled_from(["6.1", "6.12"])),
        "zone_reclaim_mode": draw(st.sampled_from([0, 0, 1])),
        "node_reclaim_distance": draw(st.sampled_from([20, 30])),
        "page_cache_fraction_of_used": draw(st.sampled_from([0.0, 0.5, 1.0])),
        "cpus_known_at_boot": draw(st.booleans()),
        "thp_enabled": draw(st.booleans()),
        "watermark_scale_factor": draw(st.sampled_from([10, 100, 1000])),
    }
    if draw(st.booleans()):
        kwargs["min_free_kbytes"] = draw(st.integers(128, 4096))
    return kwargs


@st.composite
def multi_die_machines(draw: st.DrawFn) -> tuple[Machine, int]:
    """A :func:`~numasim.topology.builders.multi_die` machine with random timing, and its threads per core.

    Socket-to-socket latency stays above the on-die latency, as on real parts (UPI/xGMI hops cost several
    times a mesh or IO-die crossing), so every mode of the same hardware has positive link latencies.
    """
    from numasim.topology.builders import multi_die

    mode = draw(st.sampled_from(["SNC1", "SNC2", "SNC3", "SNC4", "NPS1", "NPS2", "NPS4"]))
    threads = draw(st.integers(1, 2))
    die_ns = draw(st.floats(2.0, 30.0))
    machine = multi_die(
        draw(st.integers(1, 3)),
        mode,
        cores_per_socket=draw(st.sampled_from([12, 24, 36])),
        threads_per_core=threads,
        memory_bytes=draw(st.integers(1, 64)) * 2**30,
        controller_latency_ns=draw(st.floats(60.0, 140.0)),
        socket_bandwidth_gb_s=draw(st.floats(20.0, 400.0)),
        die_latency_ns=die_ns,
        die_bandwidth_gb_s=draw(st.floats(20.0, 200.0)),
        socket_link_latency_ns=die_ns + draw(st.floats(20.0, 150.0)),
        socket_link_bandwidth_gb_s=draw(st.floats(10.0, 100.0)),
    )
    return machine, threads


# --- timed scenarios for the engine's physical invariants ----------------------------------------------------


@st.composite
def timed_machines(draw: st.DrawFn, max_nodes: int = 3, max_levels: int = 3) -> Machine:
    """A glueless machine (1..``max_nodes`` sockets, full mesh or ring) with random link and controller timing
    and 0..``max_levels`` cache levels: sizes and latencies growing level by level, every cache faster than
    memory (the controller latency is at least twice the slowest cache's), random associativity; the last
    level of three is shared per socket."""
    from numasim.topology.builders import glueless
    from numasim.topology.model import CacheLevel, CacheScope

    n = draw(st.integers(1, max_nodes))
    levels = draw(st.integers(0, max_levels))
    caches = []
    size, lat = 1024 * draw(st.sampled_from([2, 4, 8])), draw(st.floats(0.5, 2.0))
    for k in range(levels):
        scope = CacheScope.SOCKET if k == 2 else CacheScope.CORE
        caches.append(
            CacheLevel(
                name=f"L{k + 1}",
                size_bytes=size,
                latency_ns=round(lat, 3),
                scope=scope,
                associativity=draw(st.sampled_from([1, 2, 4, 8, 16])),
            )
        )
        size *= draw(st.sampled_from([4, 8, 16]))
        lat = min(lat * draw(st.floats(2.0, 5.0)), 60.0)
    controller_ns = draw(st.floats(max(40.0, 2.0 * lat), 150.0))
    m = glueless(
        n,
        shape=draw(st.sampled_from(["full", "ring"])),
        cpus_per_node=2,
        memory_bytes=1 << 30,
        link_latency_ns=draw(st.floats(5.0, 100.0)),
        link_bandwidth_gb_s=draw(st.floats(4.0, 40.0)),
        controller_latency_ns=controller_ns,
        controller_bandwidth_gb_s=draw(st.floats(4.0, 60.0)),
        name="hypothesis-timed",
    )
    return m.model_copy(update={"caches": caches})


@st.composite
def timed_calibrations(draw: st.DrawFn, machine: Machine):  # type: ignore[no-untyped-def]
    """The machine's nominal calibration with random core parameters (MLP, prefetch distance, write cost and
    latency, and write-allocate evasion on a third of them)."""
    from numasim.timing.model import Calibration, CoreTiming, nominal_calibration

    cal = nominal_calibration(machine)
    core = CoreTiming(
        max_outstanding_misses=draw(st.integers(1, 16)),
        prefetch_distance_lines=draw(st.integers(0, 32)),
        write_cost_factor=draw(st.floats(0.5, 2.0)),
        # a store miss's latency: the write cost factor's, or a read's (the catalog's)
        write_latency_factor=draw(st.sampled_from([None, 1.0])),
        write_allocate_evasion=draw(st.sampled_from([0.0, 0.0, 1.0])),
    )
    return Calibration.model_validate(cal.model_dump() | {"core": core.model_dump(), "id": ""})


@st.composite
def timed_workloads(draw: st.DrawFn, machine: Machine, max_threads: int = 3, max_accesses: int = 3000):  # type: ignore[no-untyped-def]
    """(threads, chunks, page map): threads on random cpus, each walking its own pattern (sequential by a
    stride, random, or a random cycle), some dependent, with writes and compute time; pages on random nodes."""
    import numpy as np

    from numasim.engine import PageMap, ThreadSpec
    from numasim.workload.access import AccessChunk, concat_chunks

    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_threads = draw(st.integers(1, max_threads))
    cpus = [c for node in machine.nodes for c in node.cpus]
    footprint_pages = draw(st.sampled_from([4, 32, 256, 1024]))
    pm = PageMap(PAGE)
    mem_nodes = [node.id for node in machine.nodes if node.memory_bytes]
    pm.assign(0, rng.choice(mem_nodes, footprint_pages * n_threads).astype(np.int16))
    threads, parts = [], []
    for t in range(n_threads):
        n = draw(st.integers(200, max_accesses))
        pattern = draw(st.sampled_from(["seq", "rand", "cycle"]))
        lines = footprint_pages * PAGE // 64
        if pattern == "seq":
            stride = draw(st.sampled_from([1, 2, 4]))
            line = (np.arange(n) * stride) % lines
        elif pattern == "rand":
            line = rng.integers(0, lines, n)
        else:
            line = np.resize(rng.permutation(lines), n)
        addr = (t * footprint_pages * PAGE + line * 64).astype(np.uint64)
        write = rng.random(n) < draw(st.sampled_from([0.0, 0.3]))
        compute = draw(st.sampled_from([0.0, 0.5, 5.0]))
        parts.append(AccessChunk.build(addr, thread=t, is_write=write, compute_ns=compute))
        threads.append(ThreadSpec(t, cpu=draw(st.sampled_from(cpus)), dependent=draw(st.booleans())))
    # a random interleaving of the threads' accesses, each thread's in its program order
    whole = concat_chunks(parts)
    tid = np.asarray(whole.thread)
    slots = rng.permutation(len(whole))
    order = np.empty(len(whole), dtype=np.int64)
    for t in range(n_threads):
        order[np.sort(slots[tid == t])] = np.flatnonzero(tid == t)
    mixed = AccessChunk(
        thread=tid[order],
        address=np.asarray(whole.address)[order],
        is_write=np.asarray(whole.is_write)[order],
        size_bytes=np.asarray(whole.size_bytes)[order],
        compute_ns=np.asarray(whole.compute_ns)[order],
    )
    return threads, [mixed], pm
