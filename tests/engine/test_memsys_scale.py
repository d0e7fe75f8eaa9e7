"""The memory system of a many-node machine stays small: route classes' paths are sparse (CSR).

Issue 13: a 256-node crossbar's ``run`` took 2.0 GiB, most of it a dense (classes x resources) busy table,
O(nodes^3). Memory is measured with tracemalloc (allocations, not time), so the test is deterministic.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

from numasim.calibrate import nominal_calibration
from numasim.engine.memsys import LINE_BYTES, build_memory_system
from numasim.topology.builders import crossbar, glueless


def test_many_node_memory_system_is_sparse() -> None:
    m = crossbar(128)
    cal = nominal_calibration(m)
    tracemalloc.start()
    try:
        ms = build_memory_system(m, cal)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    dense_bytes = ms.n_classes * len(ms.resources) * 8  # what one dense float table alone took
    assert dense_bytes > 100e6
    assert peak < dense_bytes / 3
    # every class to memory: its controller, and node -> router -> node for a remote one
    lens = np.diff(ms.path_ptr)
    assert set(lens.tolist()) == {1, 3}


def test_sparse_paths_match_the_dense_view() -> None:
    m = glueless(4)
    cal = nominal_calibration(m)
    ms = build_memory_system(m, cal)
    dense = ms.busy_ns
    for c, path in enumerate(ms.class_resources):
        assert set(np.flatnonzero(dense[c]).tolist()) == set(path)
        read = c % 2 == 0
        target = ms.node_ids[(c // 2) % ms.n_nodes]
        mc = next(r for r, res in enumerate(ms.resources) if res.kind == "controller" and res.node == target)
        assert (path[0] if read else path[-1]) == mc  # a read starts at memory, a write ends there
        factor = 1.0 if read else ms.write_cost_factor
        for r in path[1:] if read else path[:-1]:
            assert dense[c, r] == factor * LINE_BYTES / ms.resources[r].capacity_bytes_per_ns
    busy, lines = ms.resource_totals(np.ones(ms.n_classes))
    assert np.allclose(busy, dense.sum(axis=0)) and np.array_equal(lines, (dense > 0).sum(axis=0))
