"""Caches: exact LRU, and the epoch mode's reuse-distance estimate against it."""

from __future__ import annotations

import numpy as np
import pytest
from _engine_machines import calibration, spread_pages, two_node

from numasim.engine import ThreadSpec, simulate
from numasim.engine.caches import LRUCache
from numasim.workload.access import AccessChunk


def test_lru_set_associative() -> None:
    c = LRUCache(sets=2, ways=2)
    # lines 0, 2, 4 map to set 0 (two ways): 4 evicts 2 (0 was used since), then 2 evicts 4
    assert [c.access(x) for x in (0, 2, 0, 4, 0, 2, 0, 1)] == [
        False,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
    ]


def _levels(mode: str, addresses: np.ndarray) -> dict[str, int]:
    m = two_node(caches=True)
    pm = spread_pages([0], 4096)
    chunks = [
        AccessChunk.build(addresses[i : i + 10_000], size_bytes=8) for i in range(0, len(addresses), 10_000)
    ]
    r = simulate(m, calibration(m), [ThreadSpec(0, cpu=0)], chunks, pm, mode=mode)
    return {row.level: row.accesses for row in r.cache_levels if row.initiator == "node0"}


CASES = {
    # 8-byte loads walking 4 MiB: 7 of every 8 hit L1, every line is a first touch.
    "sequential": np.arange(0, 4 << 20, 8, dtype=np.uint64),
    # random lines of a 16 KiB set (fits L1), then of a 128 KiB set (fits L2 only), then of 8 MiB (fits none)
    "fits-L1": np.random.default_rng(1).integers(0, 256, 30_000).astype(np.uint64) * np.uint64(64),
    "fits-L2": np.random.default_rng(2).integers(0, 2048, 60_000).astype(np.uint64) * np.uint64(64),
    "exceeds-L2": np.random.default_rng(3).integers(0, 131072, 30_000).astype(np.uint64) * np.uint64(64),
}


@pytest.mark.parametrize("name", list(CASES))
def test_epoch_cache_estimate_agrees_with_exact_lru(name: str) -> None:
    exact, epoch = _levels("exact", CASES[name]), _levels("epoch", CASES[name])
    n = len(CASES[name])
    # where requests are served: memory (and so DRAM traffic) within 2 % of all accesses, and L1+L2 likewise
    assert abs(epoch["memory"] - exact["memory"]) <= 0.02 * n
    assert abs(epoch["L1d"] - exact["L1d"]) <= 0.1 * n
    if name == "sequential":
        assert exact["L1d"] == epoch["L1d"] == n * 7 // 8
