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
            # the percentiles come from a histogram of about 7 % bins
            assert n.memory_latency_p99_ns >= n.memory_idle_latency_ns / 1.08
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
