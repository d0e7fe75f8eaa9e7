"""Speed of first-touch placement (run with --run-benchmarks); checks results, never times."""

from __future__ import annotations

import pytest
from _mpol_machines import kernel

from numasim.kernel.mempolicy import MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE


@pytest.mark.benchmark
@pytest.mark.parametrize("mode", [MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE])
def test_fault_16_gib_interleaved(mode: int) -> None:
    k = kernel([([i], 8192) for i in range(4)])
    t = k.spawn("big", cpu=0)
    assert k.set_mempolicy(t, mode, {0, 1, 2, 3}).ok
    vma = k.mmap(t, 16 << 30)
    res = k.touch(t, vma.start, 16 << 30)
    assert res.faulted == 4 << 20
    assert vma.pages_per_node() == {n: 1 << 20 for n in range(4)}
