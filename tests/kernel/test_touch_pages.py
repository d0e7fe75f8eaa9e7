"""Kernel.touch_pages: the batched first-touch path agrees with touching page by page."""

from __future__ import annotations

import numpy as np
import pytest

from numasim.errors import WorkloadError
from numasim.kernel.kernel import Kernel
from numasim.topology.builders import glueless

PAGE = 4096


def _setup(policy: str) -> tuple[Kernel, object, object]:
    k = Kernel(glueless(4, cpus_per_node=2))
    t = k.spawn("t", cpu=0)
    vma = k.mmap(t, 512 * PAGE)
    if policy == "interleave":
        assert k.set_mempolicy(t, 3, {0, 1, 2, 3}).ok  # MPOL_INTERLEAVE
    return k, t, vma


@pytest.mark.parametrize("policy", ["default", "interleave"])
def test_batched_touch_matches_page_by_page_when_memory_is_ample(policy: str) -> None:
    rng = np.random.default_rng(7)
    pages = rng.permutation(512)[:300]
    cpus = rng.choice([0, 2, 4, 6], size=300)  # first cpu of each of the 4 nodes
    k1, t1, v1 = _setup(policy)
    for p, c in zip(pages, cpus, strict=True):
        k1.touch(t1, v1.start + int(p) * PAGE, PAGE, cpu=int(c))
    k2, t2, v2 = _setup(policy)
    res = k2.touch_pages(t2, np.uint64(v2.start) + pages.astype(np.uint64) * np.uint64(PAGE), cpus)
    assert res.faulted == 300
    np.testing.assert_array_equal(v1.nodes, v2.nodes)
    for nid in range(4):
        assert k1.numastat(nid) == k2.numastat(nid)


def test_repeated_address_keeps_its_first_cpu_and_unmapped_is_sigsegv() -> None:
    k, t, vma = _setup("default")
    res = k.touch_pages(t, np.array([vma.start, vma.start], dtype=np.uint64), np.array([2, 4]))
    assert res.faulted == 1 and vma.nodes[0] == 1  # cpu 2 is on node 1
    with pytest.raises(WorkloadError, match="unmapped"):
        k.touch_pages(t, np.array([vma.end + PAGE], dtype=np.uint64), np.array([0]))
