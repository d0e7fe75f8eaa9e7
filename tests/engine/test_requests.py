"""Request latencies (``request_accesses``): a thread's accesses cut into requests, each timed start to start."""

from __future__ import annotations

import pydantic
import pytest

from numasim.errors import WorkloadError
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload


def _service(request_accesses: int = 100, accesses: int = 20_000, compute_ns: float = 100.0,
             pattern: str = "random") -> Workload:
    return Workload.model_validate({
        "name": "service", "threads": [{"id": 0, "node": 0}, {"id": 1, "node": 1}],
        "request_accesses": request_accesses,
        "allocations": [{"name": "d", "size_bytes": "8M", "first_touch": 0}],
        "phases": [{"pattern": pattern, "allocation": "d", "accesses": accesses, "compute_ns": compute_ns}],
    })  # fmt: skip


def test_compute_bound_requests_take_their_compute_time() -> None:
    m = load_machine("seed-003-2node")
    r = run_workload(m, _service(), resolve_calibration(m)).result
    s = r.requests
    assert s is not None and s["accesses_per_request"] == 100
    assert s["count"] == 2 * (20_000 // 100 - 1)  # start to start: each thread's last request has no end
    # the loads overlap (independent, MLP): a request costs its 100 x 100 ns of compute
    assert s["p50_ns"] == pytest.approx(10_000, rel=0.03) and s["max_ns"] >= s["p99_ns"] >= s["p50_ns"]
    assert set(s["threads"]) == {"thread0", "thread1"}
    assert "requests" in r.to_dict()


def test_a_pointer_chase_pays_each_lookup_and_remote_requests_are_slower() -> None:
    m = load_machine("seed-003-2node")
    w = _service(accesses=10_000, compute_ns=0.0, pattern="pointer_chase")
    s = run_workload(m, w, resolve_calibration(m)).result.requests
    assert s["threads"]["thread1"]["mean_ns"] > 1.2 * s["threads"]["thread0"]["mean_ns"]  # node 1 reads node 0


def test_bad_request_settings_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="request_accesses"):
        _service(request_accesses=0)
    m = load_machine("seed-003-2node")
    with pytest.raises(WorkloadError, match="epoch mode only"):
        run_workload(m, _service(), resolve_calibration(m), mode="exact")


def test_a_request_counts_accesses_not_the_lines_they_touch() -> None:
    """Every access below straddles two cache lines (64 bytes at offset 32): two line requests, one access."""
    import numpy as np

    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.workload.access import AccessChunk

    m = load_machine("seed-003-2node")
    pm = PageMap()
    pm.assign(0, np.zeros(64, dtype=np.int16))
    n = 2000
    addr = (32 + 128 * np.arange(n)).astype(np.uint64) % np.uint64(64 * 4096)
    chunk = AccessChunk.build(addr, size_bytes=np.full(n, 64), compute_ns=np.full(n, 50.0))
    r = simulate(m, resolve_calibration(m), [ThreadSpec(0, cpu=0)], [chunk], pm, request_accesses=10)
    assert r.requests is not None and r.requests["count"] == n // 10 - 1
