"""Physical invariants of the engine, over random machines, calibrations and workloads (both fidelities).

* the memory request latency (issue to data of a request that went to memory) is never below its route's idle
  latency, in every record that reports it;
* Little's law: a thread never has more requests in flight than its memory-level parallelism allows (the sum of
  its load-to-use latencies is at most MLP x its run time), and a resource is never busy longer than the run
  (lines x service time fits in the run: no resource delivers above its bandwidth);
* more load never lowers latency: a thread's mean memory request latency does not drop when other threads add
  load on other cores.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import timed_calibrations, timed_machines, timed_workloads

from numasim.engine import SimulationResult, ThreadSpec, simulate
from numasim.topology.model import CacheScope
from numasim.workload.access import AccessChunk, concat_chunks

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_REL = 1e-9
PAGE = 4096


@st.composite
def _scenarios(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    machine = draw(timed_machines())
    calibration = draw(timed_calibrations(machine))
    threads, chunks, pages = draw(timed_workloads(machine))
    mode = draw(st.sampled_from(["epoch", "exact"]))
    return machine, calibration, threads, chunks, pages, mode


def _run(machine, calibration, threads, chunks, pages, mode) -> SimulationResult:  # type: ignore[no-untyped-def]
    return simulate(machine, calibration, threads, chunks, pages, mode=mode, epoch_ns=500.0)


@_SETTINGS
@given(_scenarios())
def test_memory_request_latency_is_never_below_the_idle_route_latency(scenario) -> None:  # type: ignore[no-untyped-def]
    r = _run(*scenario)
    machine = scenario[0]
    from numasim.topology.routing import latency_table_ns

    idle = latency_table_ns(machine)  # reads; writes scale by the write cost factor
    wcf = scenario[1].core.write_cost_factor
    rows = [*r.nodes, *r.initiators, *r.matrix]
    assert any(x.memory_accesses for x in rows)
    for x in rows:
        if x.memory_accesses:
            assert x.memory_latency_mean_ns >= x.memory_idle_latency_ns * (1 - _REL)
            assert x.memory_idle_latency_ns > 0
        else:
            assert math.isnan(x.memory_latency_mean_ns)
    for p in r.matrix:
        if p.memory_accesses:
            i = r.initiator_names.index(p.initiator)
            j = r.node_ids.index(p.target_node)
            assert p.memory_latency_mean_ns >= min(1.0, wcf) * idle[i, j] * (1 - _REL)
    for n in r.nodes:
        if n.memory_accesses:
            # no percentile below the fastest idle route that served the node's requests (a histogram bin's
            # interpolation used to put p50 of requests all at the idle latency 2 % under it)
            j = r.node_ids.index(n.node)
            served = [i for i, nm in enumerate(r.initiator_names)
                      if any(p.memory_accesses for p in r.matrix if p.initiator == nm and p.target_node == n.node)]
            fastest = min(min(1.0, wcf) * idle[i, j] for i in served)
            assert n.memory_latency_p50_ns >= fastest * (1 - _REL)
            assert n.memory_latency_p99_ns >= fastest * (1 - _REL)
    for t in r.threads:
        if t.memory_accesses:
            assert t.memory_latency_mean_ns > 0
    assert r.latency_hist_by_node.sum() == sum(n.memory_accesses for n in r.nodes)


@_SETTINGS
@given(_scenarios())
def test_littles_law_per_thread_and_per_resource(scenario) -> None:  # type: ignore[no-untyped-def]
    machine, calibration, threads, chunks, pages, mode = scenario
    r = _run(*scenario)
    mlp = calibration.core.max_outstanding_misses
    for t, spec in zip(r.threads, threads, strict=True):
        span = t.finish_ns - t.start_ns
        in_flight = t.load_to_use_mean_ns * t.accesses / span
        assert in_flight <= (1 if spec.dependent else mlp) * (1 + 1e-6)
    for res in r.resources:
        # a FIFO server holds one line at a time: its busy time (lines x service time) fits in the run
        assert res.busy_ns <= r.run_time_ns * (1 + 1e-9)
        assert res.utilisation_mean <= 1 + 1e-9
    if calibration.core.write_cost_factor >= 1:  # a write then costs at least a read's service time
        for res in r.resources:
            assert res.bandwidth_used_gb_s <= res.bandwidth_available_gb_s * (1 + 1e-9)


@_SETTINGS
@given(st.data())
def test_more_load_never_lowers_latency(data: st.DataObject) -> None:
    machine = data.draw(timed_machines())
    # private caches only: the load must not change which of the foreground's lines hit
    machine = machine.model_copy(update={"caches": [c for c in machine.caches if c.scope == CacheScope.CORE]})
    calibration = data.draw(timed_calibrations(machine))
    mode = data.draw(st.sampled_from(["epoch", "exact"]))
    threads, chunks, pages = data.draw(timed_workloads(machine, max_threads=1))
    fg = threads[0]
    cpus = [c for node in machine.nodes for c in node.cpus if c != fg.cpu]
    loaders = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    base = 1 << 30  # above the foreground's pages
    pm = pages
    mem_nodes = [n.id for n in machine.nodes if n.memory_bytes]
    n_load_pages = 512
    pm.assign(base, rng.choice(mem_nodes, n_load_pages * loaders).astype(np.int16))
    extra, load_threads = [], []
    for k in range(loaders):
        n = 4000
        lines = rng.integers(0, n_load_pages * PAGE // 64, n)
        addr = (base + k * n_load_pages * PAGE + lines * 64).astype(np.uint64)
        extra.append(AccessChunk.build(addr, thread=k + 1))
        load_threads.append(ThreadSpec(k + 1, cpu=cpus[k % len(cpus)]))
    alone = simulate(machine, calibration, threads, chunks, pm, mode=mode, epoch_ns=500.0)
    loaded = simulate(
        machine, calibration, [*threads, *load_threads], [concat_chunks([*chunks, *extra])], pm, mode=mode,
        epoch_ns=500.0,
    )
    a, b = alone.threads[0], loaded.threads[0]
    if a.memory_accesses:
        assert b.memory_accesses == a.memory_accesses
        assert b.memory_latency_mean_ns >= a.memory_latency_mean_ns * (1 - 1e-9)
    assert b.finish_ns >= a.finish_ns * (1 - 1e-9)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_lat_mem_rd_is_monotone_and_memory_never_beats_the_last_level_cache(data: st.DataObject) -> None:
    """At a fixed stride, latency per load never falls as the working set grows (whatever prefetching hides),
    so the memory plateau is never below the last-level cache's; the sweep goes to 4x the largest cache.

    One exception, which real lmbench curves show too: every pass of the chain restarts the prefetcher's
    stream (from the lowest line back to the highest), one load per pass that is not prefetched; spread over
    more loads in a larger working set, it lets the mean fall by at most that load's extra cost over the loads
    of a pass."""
    from numasim.tools.context import tool_context
    from numasim.tools.lat_mem_rd import lat_mem_rd

    machine = data.draw(timed_machines(max_nodes=2, max_levels=2))
    calibration = data.draw(timed_calibrations(machine))
    stride = data.draw(st.sampled_from([64, 128, 256]))
    largest = max((c.size_bytes for c in machine.caches), default=8192)
    r = lat_mem_rd(tool_context(machine, calibration), min(4 * largest, 1 << 19), [stride])
    lat = np.array(r.latency_ns[stride])
    loads = np.maximum(np.array(r.size_bytes) // stride, 1)
    # the restart's load costs at most an unprefetched memory access (idle route + the curve's delay at full load)
    worst_ns = max(c.latency_ns + (c.curve.added_latency_ns[-1] if c.curve else 0.0) for c in calibration.controllers)
    allowed = worst_ns / loads[:-1] + 1e-6 * lat[:-1]
    assert (np.diff(lat) >= -allowed).all(), list(zip(r.size_bytes, lat, strict=True))
    if machine.caches:
        llc = max(c.latency_ns for c in calibration.caches)
        beyond = np.array(r.size_bytes) > 2 * largest
        assert (lat[beyond] >= llc * (1 - 1e-9)).all()


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_a_prefetched_stream_is_not_delivered_above_its_bottleneck(mode: str) -> None:
    """A bandwidth-bound sequential stream: prefetching hides latency, never bandwidth (the controller's bytes
    fit in the run at its bandwidth; the old rule delivered 4.0035 GB/s from a 4 GB/s controller)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _engine_machines import calibration, spread_pages

    from numasim.topology.builders import glueless

    m = glueless(1, controller_bandwidth_gb_s=4.0, controller_latency_ns=80.0)
    cal = calibration(m, max_outstanding_misses=16, prefetch_distance_lines=32)
    n = 20_000
    chunk = AccessChunk.build((np.arange(n) * 64).astype(np.uint64))
    r = simulate(m, cal, [ThreadSpec(0, cpu=0)], [chunk], spread_pages([0], 4096), mode=mode)
    mc = r.resources[0]
    assert mc.busy_ns == pytest.approx(n * 16.0)
    assert r.run_time_ns >= mc.busy_ns
    assert mc.bandwidth_used_gb_s <= 4.0 * (1 + 1e-12)
    # the core's wait is shortened by the prefetcher, the memory request latency is not
    t = r.threads[0]
    assert t.load_to_use_mean_ns < t.memory_latency_mean_ns


def test_a_lone_dependent_chain_measures_its_idle_latency() -> None:
    """One pointer chase never queues behind itself: its memory request latency is the idle route latency, in
    both modes (the loaded-latency curve reads the last epoch's utilisation less the chain's own share)."""
    from numasim.engine import PageMap
    from numasim.timing import resolve_calibration
    from numasim.timing.model import apply_calibration
    from numasim.topology.io import load_machine
    from numasim.topology.routing import latency_table_ns

    m = load_machine("seed-002-opteron-4s")
    cal = resolve_calibration(m)
    idle = latency_table_ns(apply_calibration(m, cal))[0, 0]
    lines = np.random.default_rng(0).choice(1 << 22, size=4000, replace=False).astype(np.uint64)
    pm = PageMap()
    pm.assign(0, np.zeros((1 << 22) * 64 // 4096, dtype=np.int16))
    for mode in ("epoch", "exact"):
        r = simulate(m, cal, [ThreadSpec(0, cpu=m.node(0).cpus[0], dependent=True)],
                     [AccessChunk.build(lines * np.uint64(64))], pm, seed=0, mode=mode)
        assert r.run_time_ns / len(lines) == pytest.approx(idle, rel=1e-9), mode
