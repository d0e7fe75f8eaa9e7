"""Spec rows the coverage review found MISSING: 3.4 item 6 (``__GFP_NOFAIL``) and 8.7 (nodemap, move_pages,
numademo run through the virtual numactl).

The NOFAIL golden numbers come from the spec's watermark arithmetic (sections 3.3, 4.2) on a 2 x 8 GiB machine
with ``vm.min_free_kbytes = 65536``: node 1 has one zone (Normal, 2097152 managed pages) out of 4194304 lowmem
pages in all, so its MIN mark is (65536 / 4) * 2097152 / 4194304 = 8192 pages and its LOW mark
8192 + max(8192 / 4, 2097152 * 10 / 10000) = 10289. Its lowmem_reserve for a movable request is 0 (no
ZONE_MOVABLE) and there is no page cache to reclaim.
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.kernel.config import KernelConfig
from numasim.kernel.gfp import GFP_HIGHUSER_MOVABLE, GFP_NOWAIT, Gfp
from numasim.kernel.physmem import AllocRequest, PhysicalMemory
from numasim.kernel.zones import ZoneType
from numasim.topology.builders import glueless

NOFAIL = GFP_HIGHUSER_MOVABLE | Gfp.NOFAIL
FREE = 20000
MIN, LOW = 8192, 10289


def _pm(version: str = "6.12") -> PhysicalMemory:
    pm = PhysicalMemory(glueless(2, memory_bytes=8 << 30), KernelConfig(version=version, min_free_kbytes=65536))
    z = pm.zone(1, ZoneType.NORMAL)
    assert (z.wmark_min, z.wmark_low, z.lowmem_reserve[ZoneType.MOVABLE]) == (MIN, LOW, 0)  # the derivation
    z.free_pages = FREE
    z.reclaimable_pages = 0
    return pm


def test_bind_without_nofail_stops_at_min_and_ooms() -> None:
    pm = _pm()
    r = pm.alloc(AllocRequest(count=16000, preferred_nid=1, nodemask=frozenset({1})))
    assert (r.allocated, r.failed, r.oom, r.stuck) == (FREE - MIN, True, True, False)


@pytest.mark.parametrize(("version", "nofail_mark"), [("6.12", MIN - MIN // 2), ("6.1", MIN - MIN // 4)])
def test_nofail_goes_below_min_by_the_reserve_cut(version: str, nofail_mark: int) -> None:
    # 6.3+: ALLOC_MIN_RESERVE halves MIN (4096); <= 6.2: ALLOC_HARDER takes a quarter (6144)
    room = FREE - nofail_mark  # 15904 / 13856
    pm = _pm(version)
    r = pm.alloc(AllocRequest(count=room, preferred_nid=1, nodemask=frozenset({1}), gfp=NOFAIL))
    assert (r.allocated, r.failed, r.oom, r.stuck) == (room, False, False, False)
    assert pm.zone(1, ZoneType.NORMAL).free_pages == nofail_mark
    assert pm.counters.item(1)["numa_hit"] == room


def test_nofail_that_cannot_be_satisfied_is_stuck_not_failed() -> None:
    pm = _pm()
    r = pm.alloc(AllocRequest(count=16000, preferred_nid=1, nodemask=frozenset({1}), gfp=NOFAIL))
    assert (r.allocated, r.failed, r.oom, r.stuck) == (FREE - 4096, False, False, True)
    assert pm.vmstat["oom_kill"] == 0


def test_nofail_leaves_the_cpuset_but_not_the_policy_nodemask() -> None:
    # cpuset {1}, no policy: the normal path stays on node 1 (down to MIN), the NOFAIL pass first takes node 1
    # down to 4096 (ALLOC_CPUSET), then ignores the cpuset: node 0 is next in node 1's zonelist
    pm = _pm()
    r = pm.alloc(AllocRequest(count=FREE - 4096 + 100, preferred_nid=1, mems_allowed=frozenset({1}), gfp=NOFAIL))
    assert (r.allocated, r.failed, r.stuck) == (FREE - 4096 + 100, False, False)
    assert r.per_node_pages == {0: 100, 1: FREE - 4096}
    # preferred zone of the slow path is node 1's Normal: the 100 pages are misses on node 0
    assert pm.counters.item(0)["numa_miss"] == 100 and pm.counters.item(1)["numa_foreign"] == 100


def test_nofail_without_direct_reclaim_fails_like_the_kernel() -> None:
    # WARN_ON_ONCE_GFP(!can_direct_reclaim) -> goto fail: NOWAIT stops at LOW/MIN as before
    pm = _pm()
    r = pm.alloc(AllocRequest(count=16000, preferred_nid=1, nodemask=frozenset({1}), gfp=GFP_NOWAIT | Gfp.NOFAIL))
    assert (r.allocated, r.failed, r.oom, r.stuck) == (FREE - MIN, True, False, False)


def test_nofail_interleave_targets_fall_back_per_target() -> None:
    # one target per page (the vectorised interleave walk): node 1's pages reach the NOFAIL pass, node 0's not
    pm = _pm()
    targets = np.tile(np.array([0, 1], dtype=np.int64), 16000)
    r = pm.alloc(AllocRequest(count=targets.size, preferred_nid=targets, nodemask=frozenset({1}), gfp=NOFAIL))
    # policy {1}: every page, whatever its target, may only use node 1
    assert (r.allocated, r.stuck) == (FREE - 4096, True)
    assert r.per_node_pages == {1: FREE - 4096}
