"""First-touch faults and kswapd on the simulation clock (numasim/kernel/first_touch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from numasim.errors import WorkloadError
from numasim.kernel.config import KernelConfig
from numasim.timing.resolve import resolve_calibration
from numasim.topology.builders import glueless
from numasim.workload.run import run_trace, run_workload
from numasim.workload.spec import Workload

MB = 1 << 20
PAGES = 600 * 256  # the 600 MiB allocation below


@pytest.fixture(scope="module")
def box():  # type: ignore[no-untyped-def]
    """Two 2 GiB nodes; node 0 has 256 MiB free and 700 MiB of clean page cache, node 1 is nearly empty."""
    g = glueless(2, memory_bytes=2048 * MB, cpus_per_node=2)
    m = g.model_copy(update={"nodes": [n.model_copy(update={"free_bytes": (256 if n.id == 0 else 1800) * MB})
                                       for n in g.nodes]})  # fmt: skip
    return m, resolve_calibration(m, nominal=True)


def _grow(compute_ns: float = 0.0, size: str = "600M", pattern: str = "strided", prefault: bool = False) -> Workload:
    phase = {"pattern": pattern, "allocation": "a", "passes": 1, "compute_ns": compute_ns}
    if pattern == "strided":
        phase["stride_bytes"] = 4096
    return Workload.model_validate({
        "name": "grow", "threads": [{"id": 0, "cpu": 0}],
        "allocations": [{"name": "a", "size_bytes": size, "prefault": prefault}], "phases": [phase],
    })  # fmt: skip


def _cfg(**kw: object) -> KernelConfig:
    return KernelConfig(kswapd_enabled=True, reclaimable_page_cache_bytes={0: 700 * MB}, **kw)  # type: ignore[arg-type]


def test_kswapd_reclaims_on_the_simulation_clock(box) -> None:  # type: ignore[no-untyped-def]
    """Without kswapd the 600 MiB spill to node 1 once node 0's free memory is gone; with it, kswapd frees node 0's
    cache while the program faults, at its rate in simulated time, and most pages stay local."""
    m, cal = box
    off = run_workload(m, _grow(), cal, kernel_config=KernelConfig(reclaimable_page_cache_bytes={0: 700 * MB}))
    on = run_workload(m, _grow(), cal, kernel_config=_cfg())
    assert on.placement.first_touch == {"a": "first access, on the clock"}
    local_off, local_on = (o.placement.pages_by_allocation["a"].get(0, 0) for o in (off, on))
    assert sum(on.placement.pages_by_allocation["a"].values()) == PAGES  # every page faulted in, once
    assert local_on > 0.9 * PAGES and local_off < 0.4 * PAGES
    vm = on.result.kernel["vmstat"]
    assert vm["first_touch_faults"] == vm["first_touch_pages"] == PAGES
    # kswapd's reclaim is its rate times the simulated time it was awake (one 50 us tick of slack per wake)
    rate_pages_per_ns = 2e9 / 4096 / 1e9
    assert 0 < vm["pgsteal_kswapd"] <= on.result.run_time_ns * rate_pages_per_ns + 25 * vm["pageoutrun"]
    assert vm["pgsteal_kswapd"] == pytest.approx(vm["kswapd_ticks"] * 50_000 * rate_pages_per_ns, abs=25)
    # each fault costs the nominal fault time on the faulting thread
    assert vm["first_touch_fault_ns"] == pytest.approx(PAGES * 1e9 / 500_000)
    assert on.result.kernel["fault_ns_by_agent"]["thread0"] >= vm["first_touch_fault_ns"]
    assert on.inputs["kernel"]["first_touch_faults"]["status"] == "nominal"
    assert {r.node: r.pages_resident for r in on.result.nodes} == {0: local_on, 1: PAGES - local_on}


def test_a_slower_program_leaves_kswapd_more_time(box) -> None:  # type: ignore[no-untyped-def]
    """The point of the clock: the same pages, faulted more slowly in simulated time, find more local memory."""
    m, cal = box
    local = [run_workload(m, _grow(compute_ns=c), cal, kernel_config=_cfg()).placement.pages_by_allocation["a"][0]
             for c in (0.0, 4000.0)]  # fmt: skip
    assert local[1] > local[0]


def test_a_fault_is_paid_by_the_faulting_thread(box) -> None:  # type: ignore[no-untyped-def]
    """One thread chasing pointers (every access waits for the one before): faults add their time exactly."""
    m, cal = box
    w = _grow(size="8M", pattern="pointer_chase")
    plain = run_workload(m, w, cal, kernel_config=KernelConfig()).result
    timed = run_workload(m, w, cal, kernel_config=_cfg()).result
    faults = timed.kernel["vmstat"]["first_touch_fault_ns"]
    assert faults == pytest.approx(2048 * 2000.0)
    assert timed.run_time_ns - plain.run_time_ns == pytest.approx(faults, rel=0.02)


def test_placement_without_pressure_is_first_touch(box) -> None:  # type: ignore[no-untyped-def]
    """Nothing to reclaim: the clock changes when pages fault in, not where they go (epoch and exact alike)."""
    m, cal = box
    w = Workload.model_validate({
        "name": "two", "threads": [{"id": 0, "cpu": 0}, {"id": 1, "cpu": 2}],
        "allocations": [{"name": "a", "size_bytes": "8M", "prefault": False}],
        "phases": [{"pattern": "sequential", "allocation": "a", "passes": 1, "split": True}],
    })  # fmt: skip
    before = run_workload(m, w, cal, kernel_config=KernelConfig())
    for mode in ("epoch", "exact"):
        on = run_workload(m, w, cal, kernel_config=_cfg(), mode=mode)
        assert on.placement.pages_by_allocation == before.placement.pages_by_allocation == {"a": {0: 1024, 1: 1024}}
        assert np.array_equal(on.placement.pages.lookup_tables()[3], before.placement.pages.lookup_tables()[3])


def test_memory_a_later_boundary_changes_is_placed_before_timing(box) -> None:  # type: ignore[no-untyped-def]
    m, cal = box
    w = Workload.model_validate({
        "name": "phased", "threads": [{"id": 0, "cpu": 0}],
        "allocations": [{"name": "a", "size_bytes": "4M", "prefault": False},
                        {"name": "b", "size_bytes": "4M"}],
        "phases": [{"pattern": "sequential", "allocation": "a", "passes": 1},
                   {"pattern": "sequential", "allocation": "b", "passes": 1, "malloc": ["b"]}],
    })  # fmt: skip
    out = run_workload(m, w, cal, kernel_config=_cfg())
    assert out.inputs["kernel"]["faulted_before_timing"] == {"a": "a later phase boundary prefaults an allocation"}
    assert out.placement.first_touch["a"] == "first access" and "first_touch_faults" not in out.inputs["kernel"]


def test_huge_pages_fault_whole(box) -> None:  # type: ignore[no-untyped-def]
    m, cal = box
    out = run_workload(m, _grow(size="64M"), cal, kernel_config=_cfg(thp_mode="always"))
    vm = out.result.kernel["vmstat"]
    assert vm["thp_fault_alloc"] == 32 and vm["first_touch_faults"] == 32 and vm["first_touch_pages"] == 64 * 256
    assert out.placement.pages.huge_flags().all()
    assert vm["first_touch_fault_ns"] == pytest.approx(64 * 256 * 2000.0)


def test_an_oom_during_the_run_names_its_time(box) -> None:  # type: ignore[no-untyped-def]
    m, cal = box
    w = _grow(size="1200M").model_copy(update={"allocations": [
        _grow(size="1200M").allocations[0].model_copy(update={"policy": "bind:0"})]})
    with pytest.raises(WorkloadError, match=r"ms of the run the OOM killer killed the workload"):
        run_workload(m, w, cal, kernel_config=KernelConfig(kswapd_enabled=True))


def test_a_trace_faults_on_the_clock(box, tmp_path) -> None:  # type: ignore[no-untyped-def]
    m, cal = box
    trace = tmp_path / "t.csv"
    addrs = [0x10000000 + 4096 * k for k in range(300)] + [0x10000000 + 4096 * k + 64 for k in range(300)]
    trace.write_text("thread,address,is_write,size_bytes,compute_ns,cpu\n"
                     + "".join(f"{k % 2},{a:#x},0,8,0,{2 * (k % 2)}\n" for k, a in enumerate(addrs)))
    off = run_trace(m, trace, cal)
    on = run_trace(m, trace, cal, kernel_config=_cfg())
    assert on.placement.first_touch == {"trace": "first access, on the clock"}
    assert on.placement.pages_by_allocation == off.placement.pages_by_allocation
    assert sum(on.placement.pages_by_allocation["trace"].values()) == 300
    assert on.result.kernel["vmstat"]["first_touch_faults"] == 300


def test_balancing_never_protects_a_page_not_faulted_in(box) -> None:  # type: ignore[no-untyped-def]
    m, cal = box
    w = Workload.model_validate({
        "name": "bal", "threads": [{"id": 0, "cpu": 2}],
        "allocations": [{"name": "a", "size_bytes": "64M", "prefault": False}],
        "phases": [{"pattern": "random", "allocation": "a", "accesses": 200_000}],
    })  # fmt: skip
    out = run_workload(m, w, cal, kernel_config=_cfg(),
                       sysctls={"kernel.numa_balancing": 1, "kernel.numa_balancing_scan_delay_ms": 0})  # fmt: skip
    vm = out.result.kernel["vmstat"]
    touched = vm["first_touch_faults"]
    assert 0 < touched <= 64 * 256 and sum(out.placement.pages_by_allocation["a"].values()) == touched


def test_the_pages_per_node_series_follows_the_faults(box) -> None:  # type: ignore[no-untyped-def]
    """From a review: the series only sampled when pages were copied, so faulted-in pages appeared at the end."""
    m, cal = box
    for mode in ("epoch", "exact"):
        series = run_workload(m, _grow(size="64M"), cal, kernel_config=_cfg(), mode=mode).result.kernel[
            "pages_per_node_series"]
        totals = [sum(p) for p in series["pages"]]
        assert len(totals) >= 8 and totals[0] == 0 and totals[-1] == 64 * 256
        assert all(a <= b for a, b in zip(totals, totals[1:], strict=False))  # pages appear as they fault


def test_a_fault_the_pool_cannot_serve_names_its_time(box) -> None:  # type: ignore[no-untyped-def]
    """From a review: a hugetlb fault with no allowed pool page (SIGBUS) crashed with an internal error."""
    m, cal = box
    w = Workload.model_validate({
        "name": "ht", "threads": [{"id": 0, "cpu": 2}],
        "allocations": [{"name": "h", "size_bytes": "16M", "prefault": False, "hugetlb": True, "policy": "bind:1"}],
        "phases": [{"pattern": "sequential", "allocation": "h", "passes": 1}],
    })  # fmt: skip
    with pytest.raises(WorkloadError, match=r"ms of the run a first-touch fault at 0x[0-9a-f]+ could not be served"):
        run_workload(m, w, cal, kernel_config=_cfg(), sysctls={"vm.nr_hugepages": 8})  # 4 a node
