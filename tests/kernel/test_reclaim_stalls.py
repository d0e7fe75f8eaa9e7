"""Direct reclaim stalls on the simulation clock (numasim/kernel/reclaim_stalls.py)."""

from __future__ import annotations

import pytest

from numasim.kernel.config import KernelConfig
from numasim.timing.resolve import resolve_calibration
from numasim.topology.builders import glueless
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

MB = 1 << 20


@pytest.fixture(scope="module")
def tiny():  # type: ignore[no-untyped-def]
    """Two 1 GiB nodes with 256 MiB free each: a 600 MiB allocation must reclaim page cache to fit."""
    g = glueless(2, memory_bytes=1 << 30)
    m = g.model_copy(update={"nodes": [n.model_copy(update={"free_bytes": 256 * MB}) for n in g.nodes]})
    return m, resolve_calibration(m, nominal=True)


def _fill(prefault: bool) -> Workload:
    return Workload.model_validate({
        "name": "fill", "threads": [{"id": 0, "cpu": 0}],
        "allocations": [{"name": "d", "size_bytes": "600M", "first_touch": 0, "prefault": prefault}],
        "phases": [{"pattern": "strided", "stride_bytes": 4096, "allocation": "d", "accesses": 153_600,
                    "compute_ns": 10.0}],
    })  # fmt: skip


def _cfg(rate: float = 2e9) -> KernelConfig:
    return KernelConfig(reclaimable_page_cache_bytes={0: 512 * MB, 1: 512 * MB}, direct_reclaim_bytes_per_s=rate)


def test_a_fault_that_reclaims_pays_for_it_on_the_clock(tiny) -> None:  # type: ignore[no-untyped-def]
    m, cal = tiny
    slow = run_workload(m, _fill(False), cal, kernel_config=_cfg())
    fast = run_workload(m, _fill(False), cal, kernel_config=_cfg(1e18))  # reclaim for free: the same placement
    k = slow.result.kernel
    reclaimed = slow.placement.kernel.pm.vmstat["pgsteal_direct"]
    assert reclaimed > 0 and k["vmstat"]["pgsteal_direct_timed"] == reclaimed
    stall_ns = reclaimed * 4096 / 2e9 * 1e9
    assert k["vmstat"]["direct_reclaim_stall_ns"] == pytest.approx(stall_ns, abs=1)
    assert k["vmstat"]["allocstall_movable"] == -(-reclaimed // 32)
    assert k["fault_ns_by_agent"]["thread0"] == pytest.approx(stall_ns)
    # one thread: its run is longer by exactly the kernel time it spent
    assert slow.result.run_time_ns - fast.result.run_time_ns == pytest.approx(stall_ns, rel=1e-3)
    assert slow.inputs["kernel"]["direct_reclaim_stalls"]["status"] == "nominal"
    # the time is spread over the faults that reclaimed, not paid at once
    (addrs, pages), = slow.placement.reclaim_stalls
    assert pages == reclaimed and len(addrs) >= reclaimed


def test_prefaulted_memory_reclaims_outside_the_timed_run(tiny) -> None:  # type: ignore[no-untyped-def]
    m, cal = tiny
    out = run_workload(m, _fill(True), cal, kernel_config=_cfg())
    assert out.result.kernel is None and not out.placement.reclaim_stalls
    assert out.inputs["kernel"]["untimed_reclaim_pages"] == out.placement.kernel.pm.vmstat["pgsteal_direct"] > 0


def test_exact_mode_charges_the_same_time(tiny) -> None:  # type: ignore[no-untyped-def]
    m, cal = tiny
    w = _fill(False)
    epoch = run_workload(m, w, cal, kernel_config=_cfg()).result
    exact = run_workload(m, w, cal, kernel_config=_cfg(), mode="exact").result
    assert exact.kernel["fault_ns_by_agent"] == pytest.approx(epoch.kernel["fault_ns_by_agent"])
    assert exact.run_time_ns == pytest.approx(epoch.run_time_ns, rel=0.03)


def test_bad_rates_are_refused() -> None:
    with pytest.raises(ValueError, match="direct_reclaim_bytes_per_s = 0"):
        KernelConfig(direct_reclaim_bytes_per_s=0)


def test_with_huge_pages_every_reclaimed_page_is_charged(tiny) -> None:  # type: ignore[no-untyped-def]
    """THP always, defrag = always (GFP_TRANSHUGE may reclaim): whichever fault reclaimed, a huge one or a base
    one after the huge attempt fell back, every page reclaimed is charged exactly once."""
    m, cal = tiny
    cfg = KernelConfig(thp_mode="always", reclaimable_page_cache_bytes={0: 512 * MB, 1: 512 * MB})
    out = run_workload(m, _fill(False), cal, kernel_config=cfg,
                       sysctls=[("/sys/kernel/mm/transparent_hugepage/defrag", "always")])  # fmt: skip
    reclaimed = out.placement.kernel.pm.vmstat["pgsteal_direct"]
    assert reclaimed > 0
    assert out.result.kernel["vmstat"]["pgsteal_direct_timed"] == reclaimed
    assert sum(n for _, n in out.placement.reclaim_stalls) == reclaimed
