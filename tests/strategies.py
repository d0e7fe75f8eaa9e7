"""Shared hypothesis strategies (machines, kernel configs). Other test modules may add theirs here."""

from __future__ import annotations

from hypothesis import strategies as st

from numasim.topology.model import Link, Machine, Node

__all__ = ["slit_tables", "small_machines", "kernel_configs", "multi_die_machines"]

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
