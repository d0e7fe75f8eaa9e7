"""kernel_spec.md section 6 (numastat counters, ``zone_statistics``) as hypothesis invariants."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import small_machines

from numasim.kernel.allocator import NUMA_STAT_ITEMS, AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.procfs import format_node_numastat
from numasim.topology.model import Machine


@st.composite
def _requests(draw: st.DrawFn, pm: PhysicalMemory) -> AllocRequest:
    ids = pm.node_ids
    mem = sorted(pm.memory_nodes)
    count = draw(st.integers(0, 20000))
    cpu_node = draw(st.sampled_from(ids))
    if draw(st.booleans()):  # interleave: one target per page
        targets = draw(st.lists(st.sampled_from(mem), min_size=1, max_size=4))
        pref: int | np.ndarray = np.resize(np.array(targets, dtype=np.int64), count)
        return AllocRequest(count=count, preferred_nid=pref, cpu_node=cpu_node, interleave=True)
    nodemask = None
    if draw(st.booleans()):
        nodemask = frozenset(draw(st.sets(st.sampled_from(mem), min_size=1)))
    return AllocRequest(count=count, preferred_nid=draw(st.sampled_from(ids)), nodemask=nodemask,
                        cpu_node=cpu_node)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), machine=small_machines(max_nodes=4, max_pages=6000))
def test_zone_statistics_identities(data: st.DataObject, machine: Machine) -> None:
    """6: one event per page (order 0): hit or (miss on the page's node + foreign on the preferred zone's
    node); local or other against the *cpu's* node; interleave_hit only where the page landed on its target.
    Per-zone counters add up to the per-node files."""
    pm = PhysicalMemory(machine, KernelConfig())
    req = data.draw(_requests(pm))
    r = pm.alloc(req)
    c = pm.counters
    hit, miss, foreign = c.numa_hit.sum(), c.numa_miss.sum(), c.numa_foreign.sum()
    assert hit + miss == r.allocated
    assert miss == foreign
    assert c.local_node.sum() + c.other_node.sum() == r.allocated
    # local_node only on the cpu's node, and there it counts every page placed on that node
    assert c.local_node.sum() == int(c.local_node[req.cpu_node])
    assert int(c.local_node[req.cpu_node]) == r.per_node_pages.get(req.cpu_node, 0)
    for n, pages in r.per_node_pages.items():
        assert int(c.numa_hit[n] + c.numa_miss[n]) == pages
        assert int(c.interleave_hit[n]) <= pages
    if not req.interleave:
        assert c.interleave_hit.sum() == 0
        if req.nodemask is None:
            # the preferred zone is the first zone of the preferred node's zonelist: every hit is there,
            # every foreign is charged there
            first = pm.zonelist(int(req.preferred_nid))[0].node
            assert hit == int(c.numa_hit[first]) and foreign == int(c.numa_foreign[first])
    else:
        targets = np.asarray(req.preferred_nid)[: r.allocated]
        landed = r.nodes.astype(np.int64)
        want = np.bincount(landed[landed == targets], minlength=len(c.interleave_hit))
        assert np.array_equal(c.interleave_hit, want[: len(c.interleave_hit)])
    # per-zone counters (zoneinfo) sum to the per-node numastat files
    for name in NUMA_STAT_ITEMS:
        per_zone = getattr(pm.zone_counters, name)
        for n in pm.node_ids:
            idx = [i for i, z in enumerate(pm.zones) if z.node == n]
            assert int(per_zone[idx].sum()) == int(getattr(c, name)[n]), (name, n)


def test_numastat_file_has_exactly_six_lines_in_order() -> None:
    """6/9.4: ``nodeN/numastat`` = six ``name value`` lines in the kernel's order."""
    text = format_node_numastat(dict.fromkeys(NUMA_STAT_ITEMS, 0) | {"numa_foreign": 5, "other_node": 7})
    assert text == (
        "numa_hit 0\nnuma_miss 0\nnuma_foreign 5\ninterleave_hit 0\nlocal_node 0\nother_node 7\n"
    )
