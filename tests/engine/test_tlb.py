"""The STLB and page walks (numasim.engine.tlb): huge pages matter to timing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine.tlb import TlbSpec
from numasim.errors import WorkloadError
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

M = load_machine("seed-003-2node")
CAL = resolve_calibration(M)


def _random(size: str, accesses: int = 50_000, madvise: str | None = None, seed_pattern: str = "random") -> Workload:
    alloc = {"name": "a", "size_bytes": size, **({"madvise": madvise} if madvise else {})}
    return Workload.model_validate({
        "name": "tlb", "threads": [{"id": 0, "node": 0}], "allocations": [alloc],
        "phases": [{"pattern": seed_pattern, "allocation": "a", "accesses": accesses, "compute_ns": 20}],
    })  # fmt: skip


def test_huge_pages_remove_the_walks_of_random_access() -> None:
    base = run_workload(M, _random("512M"), CAL, tlb=TlbSpec()).result
    huge = run_workload(M, _random("512M", madvise="hugepage"), CAL, tlb=TlbSpec()).result
    assert base.tlb["miss_rate"] > 0.95 and base.tlb["misses_2m"] == 0  # 131,072 pages, 1,536 entries
    assert huge.tlb["misses"] <= 256 and huge.tlb["misses"] == huge.tlb["misses_2m"]  # 256 huge pages: cold misses
    assert huge.run_time_ns < base.run_time_ns
    plain = run_workload(M, _random("512M"), CAL).result
    assert plain.tlb is None and base.run_time_ns > plain.run_time_ns  # the walks cost time


def test_a_working_set_within_reach_only_misses_once_per_page() -> None:
    r = run_workload(M, _random("4M"), CAL, tlb=TlbSpec()).result  # 1,024 pages < 1,536 entries
    assert r.tlb["misses"] <= 1024 * 1.02
    assert r.tlb["walk_ns"] == pytest.approx(25.0 * r.tlb["misses"])
    assert "tlb" in r.to_dict() and r.to_dict()["tlb"]["spec"]["status"].startswith("nominal")


def test_exact_mode_and_bad_specs_are_refused() -> None:
    with pytest.raises(WorkloadError, match="epoch mode only"):
        run_workload(M, _random("4M", accesses=100), CAL, tlb=TlbSpec(), mode="exact")
    with pytest.raises(ValueError, match="multiple of ways"):
        TlbSpec(entries=100, ways=12)


@settings(max_examples=10, deadline=None)
@given(size_mb=st.integers(1, 64), huge=st.booleans(), entries=st.sampled_from([64, 1536]))
def test_counts_are_consistent(size_mb: int, huge: bool, entries: int) -> None:
    spec = TlbSpec(entries=entries, ways=4)
    t = run_workload(M, _random(f"{size_mb}M", accesses=5_000, madvise="hugepage" if huge else None), CAL,
                     tlb=spec).result.tlb  # fmt: skip
    assert 0 <= t["misses_2m"] <= t["misses"] <= t["accesses"] == 5_000
    assert t["walk_ns"] == pytest.approx(spec.walk_ns_2m * t["misses_2m"] + spec.walk_ns_4k * (t["misses"] - t["misses_2m"]))
