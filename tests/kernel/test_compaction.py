"""Fragmented free memory and direct compaction (numasim/kernel/buddy.py, compaction.py, folio_alloc.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import KernelConfigError
from numasim.kernel.allocator import AllocRequest
from numasim.kernel.buddy import FreeArea, binary_blocks, fragmentation_index, load_buddyinfo, parse_buddyinfo
from numasim.kernel.config import KernelConfig
from numasim.kernel.folio_alloc import alloc_folios
from numasim.kernel.gfp import GFP_TRANSHUGE, GFP_TRANSHUGE_LIGHT
from numasim.kernel.kernel import Kernel
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.procfs import buddy_orders_from_free, format_buddyinfo, zone_views
from numasim.timing.resolve import resolve_calibration
from numasim.topology.builders import glueless
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

MB = 1 << 20
HOTSOS = Path(__file__).parents[1] / "data" / "buddyinfo" / "hotsos-node1-fragmented.txt"
FRAGMENTED = (426212, 143208, 42644, 13656, 1167, 0, 0, 0, 0, 0, 0)  # hotsos's node 1, zone Normal


# --- the free areas -----------------------------------------------------------------------------------------
def test_a_measured_line_shapes_the_free_memory() -> None:
    area = FreeArea.shaped_like(100_000, FRAGMENTED)
    assert area.pages == 100_000 and area.blocks_of(9) == area.contiguous_pages >> 9
    assert area.fragment_pages > 99_000  # the line has no block of order 5 or more: nearly all fragments
    assert fragmentation_index(area.counts, 9) > 900  # fragmentation, not lack of memory
    # reclaimed page cache comes back in the same shape; freed pages coalesce
    before = area.fragment_pages
    area.add_reclaimed(10_000)
    assert 9_000 < area.fragment_pages - before <= 10_000
    area.add_freed(4096)
    assert area.pages == 114_096


def test_compaction_makes_a_block_out_of_fragments() -> None:
    area = FreeArea(0, [2048, 0, 0, 0, 0, 0, 0, 0, 0])
    migrated = area.compact_one()
    assert migrated == 511  # single free pages: the pageblock holds one, the other 511 move
    assert area.blocks_of(9) == 1 and area.pages == 2048
    area = FreeArea(0, [0, 0, 0, 0, 0, 0, 0, 0, 4])  # order-8 halves: each pageblock is half free
    assert area.compact_one() == 256 and area.blocks_of(9) == 1


@settings(max_examples=200, deadline=None)
@given(contig=st.integers(0, 1 << 16), frags=st.lists(st.integers(0, 300), min_size=9, max_size=9),
       ops=st.lists(st.tuples(st.sampled_from(["base", "blocks", "freed", "reclaimed", "compact"]),
                              st.integers(0, 5000)), max_size=20),
       shaped=st.booleans())  # fmt: skip
def test_free_area_invariants(contig, frags, ops, shaped) -> None:  # type: ignore[no-untyped-def]
    """Pages are conserved, counts never go negative, the coalesced part's blocks are its binary digits."""
    area = FreeArea(contig, frags, np.full(9, 1 / 9) if shaped else None)
    for op, n in ops:
        before = area.pages
        if op == "base":
            n = min(n, area.pages)
            area.take_base(n)
            assert area.pages == before - n
        elif op == "blocks":
            k = min(n // 512, area.blocks_of(9))
            area.take_blocks(k)
            assert area.pages == before - 512 * k
        elif op == "freed":
            area.add_freed(n)
            assert area.pages == before + n
        elif op == "reclaimed":
            area.add_reclaimed(n)
            assert area.pages == before + n
        elif area.fragment_pages >= 512:
            frag = area.fragment_pages
            migrated = area.compact_one()
            assert 0 <= migrated < 512 and area.pages == before and area.fragment_pages == frag - 512
        assert (area.counts >= 0).all() and (area.fragments >= 0).all()
        assert int((area.counts * (1 << np.arange(11))).sum()) == area.pages
        assert (area.counts[9:] == binary_blocks(area.contiguous_pages)[9:]).all()


def test_buddyinfo_files_parse_and_bad_ones_say_where() -> None:
    assert load_buddyinfo(str(HOTSOS)) == {(1, "Normal"): FRAGMENTED}
    for text, says in (("Node 0, zone Normal 1 2", "2 block counts, expected 11"),
                       ("Node x, zone Normal" + " 1" * 11, "expected 'Node N, zone NAME'"),
                       ("Node 0, zone Normal" + " 1" * 10 + " -3", "block count '-3'"),
                       ("Node 0, zone Normal" + " 1" * 11 + "\nNode 0, zone Normal" + " 1" * 11, "listed twice"),
                       ("# nothing\n", "no 'Node N, zone NAME ...' line")):  # fmt: skip
        with pytest.raises(ValueError, match=says):
            parse_buddyinfo(text, "box.txt")


# --- the kernel -----------------------------------------------------------------------------------------------
def _pm(buddyinfo: dict | None, **kw: object) -> PhysicalMemory:  # type: ignore[type-arg]
    g = glueless(2, memory_bytes=2048 * MB, cpus_per_node=2)
    m = g.model_copy(update={"nodes": [n.model_copy(update={"free_bytes": 1024 * MB}) for n in g.nodes]})
    return PhysicalMemory(m, KernelConfig(buddyinfo=buddyinfo, **kw))  # type: ignore[arg-type]


def _thp(count: int, gfp: int, nid: int = 1) -> AllocRequest:
    from numasim.kernel.gfp import Gfp

    return AllocRequest(count=count, preferred_nid=nid, cpu_node=nid, gfp=Gfp(int(gfp)) | Gfp.THISNODE)


def test_without_a_measured_buddyinfo_nothing_changes() -> None:
    pm = _pm(None)
    nodes, _ = alloc_folios(pm, _thp(100, GFP_TRANSHUGE))
    assert (nodes == 1).all() and "compact_stall" not in pm.vmstat
    for z in pm.zones:  # buddyinfo prints what it always printed: the least fragmented layout
        assert z.buddy().counts.tolist() == buddy_orders_from_free(z.free_pages)


def test_a_fragmented_node_compacts_for_huge_pages_that_may_reclaim() -> None:
    pm = _pm({(1, "Normal"): FRAGMENTED})
    z = pm.zone(1, 2)
    assert z.buddy().blocks_of(9) < 20  # the measured shape: (nearly) no 2 MiB block
    nodes, _ = alloc_folios(pm, _thp(100, GFP_TRANSHUGE))  # defrag=always / madvised: direct compaction
    assert (nodes == 1).all()
    compacted = pm.folio_compaction > 0
    assert pm.vmstat["compact_stall"] == pm.vmstat["compact_success"] == int(compacted.sum()) >= 80
    assert pm.vmstat["pgmigrate_success"] == int(pm.folio_compaction.sum())
    assert (pm.folio_compaction[compacted] >= 500).all()  # ~1.6 free pages a pageblock: ~510 pages move each
    assert z.buddy().pages == z.free_pages


def test_a_fault_that_may_not_reclaim_falls_back_instead() -> None:
    pm = _pm({(1, "Normal"): FRAGMENTED})
    blocks = pm.zone(1, 2).buddy().blocks_of(9)
    nodes, _ = alloc_folios(pm, _thp(100, GFP_TRANSHUGE_LIGHT))  # defrag=madvise, not madvised
    assert int((nodes == 1).sum()) == blocks and "compact_stall" not in pm.vmstat


def test_lack_of_memory_is_not_fragmentation() -> None:
    """Free memory in a few order-8 blocks: the index says too little memory, so no compaction (the threshold)."""
    shape = (0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0)
    for threshold, compacts in ((500, False), (0, True)):
        pm = _pm({(1, "Normal"): shape}, extfrag_threshold=threshold)
        z = pm.zone(1, 2)
        z.buddy()  # fragments only: all of the node's free memory is in order-8 blocks
        assert fragmentation_index(z.buddy().counts, 9) > 0
        alloc_folios(pm, _thp(4, GFP_TRANSHUGE))
        assert ("compact_stall" in pm.vmstat) == (compacts and fragmentation_index(np.array(shape), 9) <= 500)


def test_a_buddyinfo_for_a_zone_the_machine_lacks_is_an_error() -> None:
    with pytest.raises(KernelConfigError, match="node 5, zone Normal: no such populated zone"):
        _pm({(5, "Normal"): FRAGMENTED})


def test_buddyinfo_view_shows_the_fragmented_zone(capsys) -> None:  # type: ignore[no-untyped-def]
    from numasim.cli import main

    assert main(["kernel", "buddyinfo", "seed-003-2node", "--buddyinfo", str(HOTSOS)]) == 0
    out = capsys.readouterr().out
    node1 = [line for line in out.splitlines() if line.startswith("Node 1, zone   Normal")][0].split()[4:]
    assert int(node1[0]) > 100_000 and int(node1[9]) + int(node1[10]) < 10
    assert main(["kernel", "buddyinfo", "seed-003-2node", "--buddyinfo", __file__]) == 2
    assert "expected 'Node N, zone NAME'" in capsys.readouterr().err
    k = Kernel(glueless(2), KernelConfig(buddyinfo=load_buddyinfo(str(HOTSOS))))
    assert "Node 1, zone   Normal" in format_buddyinfo(zone_views(k))


# --- the clock ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def box():  # type: ignore[no-untyped-def]
    g = glueless(2, memory_bytes=2048 * MB, cpus_per_node=2)
    m = g.model_copy(update={"nodes": [n.model_copy(update={"free_bytes": 1024 * MB}) for n in g.nodes]})
    return m, resolve_calibration(m, nominal=True)


def _huge_chase() -> Workload:
    """One thread on node 1 chasing pointers through 64 MiB it faults lazily, madvised for huge pages."""
    return Workload.model_validate({
        "name": "chase", "threads": [{"id": 0, "cpu": 2}],
        "allocations": [{"name": "a", "size_bytes": "64M", "prefault": False, "madvise": "hugepage"}],
        "phases": [{"pattern": "pointer_chase", "allocation": "a", "accesses": 40_000}],
    })  # fmt: skip


@pytest.mark.parametrize("kswapd", [False, True])
def test_compaction_stalls_the_faulting_thread(box, kswapd) -> None:  # type: ignore[no-untyped-def]
    """Every 2 MiB fault on the fragmented node compacts; the thread pays 5 us per page migrated (nominal),
    whether its pages fault before timing or on the clock."""
    m, cal = box
    plain = run_workload(m, _huge_chase(), cal, kernel_config=KernelConfig(kswapd_enabled=kswapd))
    frag = run_workload(m, _huge_chase(), cal,
                        kernel_config=KernelConfig(kswapd_enabled=kswapd, buddyinfo={(1, "Normal"): FRAGMENTED}))  # fmt: skip
    vm = frag.result.kernel["vmstat"]
    migrated = int(sum(int(x.sum()) for _, _, x, _ in frag.placement.kernel.compaction_stalls))
    assert migrated > 30 * 500  # 32 huge pages, nearly all compacted
    stall_ns = migrated * 5000.0
    assert vm["compact_stall_ns"] == pytest.approx(stall_ns, abs=1)
    slower = frag.result.run_time_ns - plain.result.run_time_ns
    assert slower == pytest.approx(stall_ns, rel=0.05)
    assert frag.placement.pages_by_allocation == plain.placement.pages_by_allocation == {"a": {1: 16384}}
    assert frag.inputs["kernel"]["compaction"]["status"] == "nominal"
