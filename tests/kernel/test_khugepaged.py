"""khugepaged on the simulation clock (numasim.kernel.khugepaged)."""

from __future__ import annotations

import numpy as np
import pytest

from numasim.engine.tlb import TlbSpec
from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.kernel.khugepaged import Khugepaged, collapsible_ranges
from numasim.kernel.sysctl import apply_sysctls
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

M = load_machine("seed-003-2node")
CAL = resolve_calibration(M)
SLEEP = ("/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs", 5)


def _chase(size: str = "16M", accesses: int = 400_000) -> Workload:
    return Workload.model_validate({
        "name": "x", "threads": [{"id": 0, "node": 0}, {"id": 1, "node": 1}],
        "allocations": [{"name": "a", "size_bytes": size, "first_touch": 1}],
        "phases": [{"pattern": "pointer_chase", "allocation": "a", "threads": [0], "accesses": accesses,
                    "compute_ns": 20}],
    })  # fmt: skip


def test_knobs_have_the_kernel_defaults_and_ranges() -> None:
    cfg = KernelConfig()
    assert (cfg.khugepaged.pages_to_scan, cfg.khugepaged.scan_sleep_ms, cfg.khugepaged.max_ptes_none) == (4096, 10000, 511)
    assert apply_sysctls(cfg, [SLEEP]).khugepaged.scan_sleep_ms == 5
    with pytest.raises(Exception, match="max_ptes_none = 512"):
        apply_sysctls(cfg, [("/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", 512)])


def test_nothing_to_collapse_means_no_daemon() -> None:
    # THP madvise (the default) and no madvise: no mapping qualifies, the run is as before (no run-time kernel)
    out = run_workload(M, _chase(accesses=1000), CAL)
    assert out.result.kernel is None


def test_migrate_pages_splits_huge_pages_and_khugepaged_puts_them_back() -> None:
    sysctls = [("/sys/kernel/mm/transparent_hugepage/enabled", "always"), SLEEP]
    out = run_workload(M, _chase(), CAL, sysctls=sysctls, tlb=TlbSpec(),
                       daemons=["migratepages:at_ms=2,from_nodes=1,to_nodes=0"])  # fmt: skip
    vm = out.result.kernel["vmstat"]
    assert out.placement.pages_by_allocation["a"] == {1: 4096}  # 8 huge pages on node 1 at first
    assert vm["pgmigrate_success"] == 4096  # moved as base pages: split
    assert vm["thp_collapse_alloc"] == 8 and vm["khugepaged_pages_collapsed"] == 8
    (vma,) = out.placement.task.mm.vmas_in(0, 1 << 62)
    assert vma.thp.all() and (vma.nodes == 0).all()  # huge again, on node 0 where the pages were
    series = np.array(out.result.kernel["pages_per_node_series"]["pages"])
    assert (series.sum(axis=1) == 4096).all()
    free = out.placement.kernel.free_pages_per_node()
    assert (free >= 0).all()


def test_collapsible_ranges_follow_max_ptes_none() -> None:
    k = Kernel(M, KernelConfig(thp_mode="never"))
    t = k.spawn("x")
    start = 0x7F0000000000
    k.mmap(t, 4 << 20, addr=start)
    k.touch(t, start, 4096 * 10, cpu=0)  # 10 pages of the first 2 MiB range
    (vma,) = t.mm.vmas_in(start, start + (4 << 20))
    assert collapsible_ranges(vma, 511).tolist() == [0]
    assert collapsible_ranges(vma, 501).tolist() == []  # 502 absent > 501
    k.config = KernelConfig(thp_mode="always")
    kh = Khugepaged(k, t)
    assert kh.wanted()
