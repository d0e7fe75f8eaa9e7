"""Exact mode's kernel copy agents (NUMA balancing's migrations) respect their miss slots when woken.

A copy agent goes idle with its slots still busy; woken with new copies, it was put back into the dispatch heap
without freeing one, and its next issue pushed one more request than its in-flight heap holds: a write past the
heap (past the end of the buffer for the last agent), which corrupted memory and aborted long runs.
"""

from __future__ import annotations

import pytest

from numasim.engine import exact as X
from numasim.timing import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload


def test_a_woken_copy_agent_never_holds_more_misses_than_its_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    over: list[tuple[int, int, int]] = []
    woken: list[int] = []
    push = X.ExactEngine._heap_push

    def checked(self: X.ExactEngine, a: int) -> None:
        push(self, a)
        woken.append(a)
        if self.infl_n[a] >= self.mlp[a]:  # the next issue needs a free slot
            over.append((a, int(self.infl_n[a]), int(self.mlp[a])))

    monkeypatch.setattr(X.ExactEngine, "_heap_push", checked)
    m = load_machine("seed-003-2node")
    w = Workload.model_validate({
        "name": "kworker", "threads": [{"id": 0, "node": 0}, {"id": 1, "node": 1}],
        "allocations": [{"name": "data", "size_bytes": "8M", "first_touch": 0}],
        "phases": [{"pattern": "random", "allocation": "data", "threads": "all", "accesses": 60000,
                    "compute_ns": 200.0, "split": True}]})
    run = run_workload(m, w, resolve_calibration(m), mode="exact",
                       sysctls=[("kernel.numa_balancing", 1), ("kernel.numa_balancing_scan_delay_ms", 10)])
    assert run.result.kernel["vmstat"]["numa_pages_migrated"] == 1024
    assert woken, "no copy agent was woken: the case no longer exercises the path"
    assert not over
