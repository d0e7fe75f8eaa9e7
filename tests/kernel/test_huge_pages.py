"""Huge pages in placement: THP order-9 faults (mm/huge_memory.c, mm/mempolicy.c) and hugetlb pools (mm/hugetlb.c).

Golden cases are worked from the source (the reasoning is in each test's comments); hypothesis checks that pages
are conserved, a bound policy never leaves its mask, and a huge folio never straddles nodes or zones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numasim.cli import main
from numasim.kernel.allocator import AllocRequest
from numasim.kernel.config import KernelConfig
from numasim.kernel.folio_alloc import folio_capacity
from numasim.kernel.gfp import GFP_TRANSHUGE_LIGHT, Gfp
from numasim.kernel.hugetlb import round_robin_fill
from numasim.kernel.kernel import Kernel, MmapError
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED, MPOL_PREFERRED_MANY
from numasim.kernel.procfs import node_meminfo_of
from numasim.tools.numactl import run_numactl
from numasim.topology.builders import glueless
from numasim.topology.io import save_machine_toml

MiB = 1 << 20
HUGE = 2 * MiB


def _kernel(**cfg: object) -> Kernel:
    sysctls = cfg.pop("sysctls", {})
    config = KernelConfig(**cfg).with_sysctls(sysctls)  # type: ignore[arg-type]
    return Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30), config)


def _folio_nodes(vma) -> np.ndarray:  # type: ignore[no-untyped-def]
    return vma.nodes.reshape(-1, 512)[:, 0]


# --- THP ----------------------------------------------------------------------------------------------------


def test_thp_always_local_fault_maps_whole_folios_on_the_local_node() -> None:
    k = _kernel(thp_mode="always")
    t = k.spawn("a", cpu=2)  # node 1
    v = k.mmap(t, 16 * MiB)
    hit_before = k.numastat(1)["numa_hit"]
    k.touch(t, v.start, 16 * MiB)
    assert v.pages_per_node() == {1: 4096} and v.thp.all()
    # one allocation (one zone_statistics event) per folio, 512 pages counted in pgalloc
    assert k.numastat(1)["numa_hit"] - hit_before == 8
    assert k.pm.vmstat["thp_fault_alloc"] == 8
    assert "AnonHugePages:     16384 kB" in node_meminfo_of(k, 1)


def test_touching_one_page_faults_the_whole_2mib_block() -> None:
    k = _kernel(thp_mode="always")
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * MiB)
    assert v.start % HUGE == 0
    res = k.touch(t, v.start + 5 * 4096, 4096)
    assert res.faulted == 512 and v.present == 512 and v.thp[:512].all()


def test_madvise_mode_needs_madv_hugepage_and_nohugepage_forbids() -> None:
    k = _kernel(thp_mode="madvise")
    t = k.spawn("a", cpu=0)
    plain = k.mmap(t, 4 * MiB)
    k.touch(t, plain.start, 4 * MiB)
    assert not plain.thp.any()
    asked = k.mmap(t, 4 * MiB)
    assert k.madvise_hugepage(t, asked.start, 4 * MiB, True).ok
    k.touch(t, asked.start, 4 * MiB)
    assert t.find_vma(asked.start).thp.all()  # type: ignore[union-attr]
    always = _kernel(thp_mode="always")
    t2 = always.spawn("a", cpu=0)
    no = always.mmap(t2, 4 * MiB)
    always.madvise_hugepage(t2, no.start, 4 * MiB, False)
    always.touch(t2, no.start, 4 * MiB)
    assert not t2.find_vma(no.start).thp.any()  # type: ignore[union-attr]


def test_never_keeps_base_pages_and_small_vmas_get_none() -> None:
    k = _kernel(thp_mode="never")
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 8 * MiB)
    k.touch(t, v.start, 8 * MiB)
    assert not v.thp.any()
    k2 = _kernel(thp_mode="always")
    t2 = k2.spawn("a", cpu=0)
    small = k2.mmap(t2, MiB + 4096)  # no aligned 2 MiB block fits (thp_vma_suitable_order)
    k2.touch(t2, small.start, small.end - small.start)
    assert not small.thp.any() and small.present == small.npages


def test_interleave_steps_one_folio_at_a_time() -> None:
    # 6.1 interleave_nid / 6.12 get_vma_policy: ilx = (vm_pgoff >> 9) + ((addr - vm_start) >> 21) = addr >> 21
    # for private anonymous memory; node = ilx % 2 over nodes {0, 1}.
    for version in ("6.1", "6.12"):
        k = _kernel(thp_mode="always", version=version)
        t = k.spawn("a", cpu=0)
        k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1})
        v = k.mmap(t, 16 * MiB)
        k.touch(t, v.start, 16 * MiB)
        expect = ((v.start >> 21) + np.arange(8)) % 2
        assert _folio_nodes(v).tolist() == expect.tolist()
        assert v.thp.all()
        assert k.numastat(0)["interleave_hit"] == 4


def test_bind_elsewhere_and_preferred_go_to_their_node() -> None:
    k = _kernel(thp_mode="always")
    t = k.spawn("a", cpu=0)
    b = k.mmap(t, 4 * MiB)
    k.mbind(t, b.start, 4 * MiB, MPOL_BIND, {1})  # local node 0 not in the mask: the standard way, mask {1}
    p = k.mmap(t, 4 * MiB)
    k.mbind(t, p.start, 4 * MiB, MPOL_PREFERRED, {1})  # THISNODE attempt on first_node = 1
    k.touch(t, b.start, 4 * MiB)
    k.touch(t, p.start, 4 * MiB)
    for start in (b.start, p.start):
        v = t.find_vma(start)
        assert v is not None and v.pages_per_node() == {1: 1024} and v.thp.all()


def _starve_node0(k: Kernel) -> None:
    """Leave node 0 just 100 pages above each zone's MIN mark: no order-9 folio fits there any more."""
    for z in k.pm.zones:
        if z.node == 0 and z.managed_pages:
            z.free_pages = min(z.free_pages, z.wmark_min + 100)
    req = AllocRequest(count=0, preferred_nid=0, gfp=GFP_TRANSHUGE_LIGHT | Gfp.THISNODE | Gfp.NORETRY)
    assert folio_capacity(k.pm, 0, req) == 0


def test_local_thp_fault_without_reclaim_falls_back_to_base_pages() -> None:
    # defrag=madvise, no MADV_HUGEPAGE: vma_thp_gfp_mask = GFP_TRANSHUGE_LIGHT (no __GFP_DIRECT_RECLAIM).
    # alloc_pages_mpol: THISNODE|NORETRY on node 0 fails and, without direct reclaim, is not retried remotely:
    # do_huge_pmd_anonymous_page returns VM_FAULT_FALLBACK and the 1024 base pages fault one by one, which the
    # order-0 walk places on node 1 (node 0 is below its LOW marks).
    k = _kernel(thp_mode="always")
    _starve_node0(k)
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * MiB)
    k.touch(t, v.start, 4 * MiB)
    assert not v.thp.any() and v.pages_per_node() == {1: 1024}
    assert k.pm.vmstat["thp_fault_fallback"] == 2


def test_local_thp_fault_with_direct_reclaim_retries_remote_huge() -> None:
    # defrag=always: GFP_TRANSHUGE | __GFP_NORETRY has __GFP_DIRECT_RECLAIM, so after the THISNODE attempt
    # fails, __alloc_pages(gfp, 9, nid=0, NULL) walks node 0's zonelist to node 1: a remote huge folio.
    k = _kernel(thp_mode="always", thp_defrag="always")
    _starve_node0(k)
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * MiB)
    k.touch(t, v.start, 4 * MiB)
    assert v.thp.all() and v.pages_per_node() == {1: 1024}
    assert k.numastat(1)["numa_miss"] == 2 and k.numastat(0)["numa_foreign"] == 2


def test_preferred_many_tries_its_nodes_first() -> None:
    k = _kernel(thp_mode="always")
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * MiB)
    k.mbind(t, v.start, 4 * MiB, MPOL_PREFERRED_MANY, {1})
    k.touch(t, v.start, 4 * MiB)
    assert v.pages_per_node() == {1: 1024} and v.thp.all()


def test_default_config_places_as_before() -> None:
    # thp_mode defaults to madvise: without MADV_HUGEPAGE nothing changes for existing callers.
    k = _kernel()
    t = k.spawn("a", cpu=0)
    k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1})
    v = k.mmap(t, 4 * MiB)
    k.touch(t, v.start, 4 * MiB)
    assert not v.thp.any() and v.nodes[:4].tolist() == [int((v.start >> 12) + i) % 2 for i in range(4)]


# --- hugetlb ------------------------------------------------------------------------------------------------


def test_round_robin_fill_matches_one_at_a_time() -> None:
    def slow(cap: list[int], want: int, start: int) -> list[int]:
        got, pos = [0] * len(cap), start
        while want and any(g < c for g, c in zip(got, cap, strict=True)):
            if got[pos] < cap[pos]:
                got[pos] += 1
                want -= 1
            pos = (pos + 1) % len(cap)
        return got

    rng = np.random.default_rng(1)
    for _ in range(200):
        cap = rng.integers(0, 8, size=int(rng.integers(1, 5))).tolist()
        want = int(rng.integers(0, 30))
        start = int(rng.integers(0, len(cap)))
        assert round_robin_fill(cap, want, start)[0] == slow(cap, want, start)


def test_nr_hugepages_spreads_round_robin_and_per_node_writes() -> None:
    k = _kernel(sysctls={"vm.nr_hugepages": 101})
    assert (k.hugetlb.total(0), k.hugetlb.total(1)) == (51, 50)  # node 0 first, one each in turn
    # nr_hugepages_store_common(node 1, 20): count = 20 + (101 - 50) = 71; only node 1 shrinks.
    k = _kernel(sysctls=[("vm.nr_hugepages", "100"),
                         ("/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "20")])
    assert (k.hugetlb.total(0), k.hugetlb.total(1)) == (50, 20)
    # shrinking to 10 frees round robin while a node has free pages: 50/20 -> 10/0
    k = _kernel(sysctls=[("vm.nr_hugepages", "100"),
                         ("/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "20"),
                         ("vm.nr_hugepages", "10")])
    assert (k.hugetlb.total(0), k.hugetlb.total(1)) == (10, 0)
    text = node_meminfo_of(k, 0)
    assert "Node 0 HugePages_Total:    10\n" in text and "Node 0 HugePages_Free:     10\n" in text


def test_a_full_node_gives_what_it_can_and_the_rest_goes_elsewhere() -> None:
    k = _kernel(sysctls={"vm.nr_hugepages": 100000})  # far more than 2 GiB holds
    per_node = [k.hugetlb.total(0), k.hugetlb.total(1)]
    assert 0 < per_node[0] < 512 and 0 < per_node[1] < 512
    assert sum(per_node) == k.hugetlb.total()
    for nid in (0, 1):  # every zone of the node left at or above its MIN mark (no order-9 folio more fits)
        for z in k.pm.zones:
            if z.node == nid and z.managed_pages:
                assert z.free_pages >= z.wmark_min


def test_hugetlb_faults_follow_the_policy_and_return_to_the_pool() -> None:
    k = _kernel(sysctls={"vm.nr_hugepages": 8})
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 5 * MiB, hugetlb=True)  # rounded up to 6 MiB: 3 folios reserved
    assert v.end - v.start == 6 * MiB and v.start % HUGE == 0 and k.hugetlb.reserved == 3
    k.mbind(t, v.start, 6 * MiB, MPOL_BIND, {1})
    k.touch(t, v.start, 6 * MiB)
    assert v.pages_per_node() == {1: 1536}
    assert (k.hugetlb.free(0), k.hugetlb.free(1), k.hugetlb.reserved) == (4, 1, 0)
    assert "AnonPages:             0 kB" in node_meminfo_of(k, 1)  # pool pages are not anonymous memory
    free_before = k.pm.free_pages(1)
    k.munmap(t, v.start, 6 * MiB)
    assert (k.hugetlb.free(1), k.pm.free_pages(1)) == (4, free_before)  # back to the pool, not the buddy


def test_hugetlb_bind_to_an_empty_pool_node_fails_like_sigbus() -> None:
    k = _kernel(sysctls={"/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": 4})
    t = k.spawn("a", cpu=0)
    v = k.mmap(t, 4 * MiB, hugetlb=True)  # the reservation is global: 4 free anywhere is enough
    k.mbind(t, v.start, 4 * MiB, MPOL_BIND, {1})
    res = k.touch(t, v.start, 4 * MiB)
    assert res.failed == 1024 and v.present == 0
    with pytest.raises(MmapError, match="hugetlb pool"):
        k.mmap(t, 16 * MiB, hugetlb=True)


def test_hugetlb_interleave_per_huge_page() -> None:
    k = _kernel(sysctls={"vm.nr_hugepages": 8})
    t = k.spawn("a", cpu=0)
    k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1})
    v = k.mmap(t, 8 * MiB, hugetlb=True)
    k.touch(t, v.start, 8 * MiB)
    assert _folio_nodes(v).tolist() == [int((v.start >> 21) + i) % 2 for i in range(4)]


# --- invariants -----------------------------------------------------------------------------------------------


def _free_total(k: Kernel) -> int:
    return sum(z.free_pages for z in k.pm.zones)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    thp=st.sampled_from(["always", "madvise", "never"]),
    defrag=st.sampled_from(["always", "defer", "defer+madvise", "madvise", "never"]),
    pool=st.integers(0, 40),
    ops=st.lists(
        st.tuples(st.integers(1, 24), st.sampled_from(["local", "bind0", "bind1", "interleave", "preferred1"]),
                  st.booleans(), st.booleans(), st.integers(0, 3)),
        min_size=1, max_size=6,
    ),
)
def test_pages_conserved_masks_kept_folios_whole(thp: str, defrag: str, pool: int, ops: list) -> None:  # type: ignore[type-arg]
    k = _kernel(thp_mode=thp, thp_defrag=defrag, sysctls={"vm.nr_hugepages": pool})
    start_free = _free_total(k) + k.hugetlb.total() * 512
    t = k.spawn("a", cpu=0)
    mapped = []
    for size_mib, pol, hugetlb, advise, cpu in ops:
        try:
            v = k.mmap(t, size_mib * MiB + 4096 * (size_mib % 3), hugetlb=hugetlb)
        except MmapError:
            continue
        length = v.end - v.start
        mask = {"bind0": {0}, "bind1": {1}}.get(pol)
        if mask is not None:
            k.mbind(t, v.start, length, MPOL_BIND, mask)
        elif pol == "interleave":
            k.mbind(t, v.start, length, MPOL_INTERLEAVE, {0, 1})
        elif pol == "preferred1":
            k.mbind(t, v.start, length, MPOL_PREFERRED, {1})
        if advise and not hugetlb:
            k.madvise_hugepage(t, v.start, length, True)
        k.run_on(t, cpu)
        k.touch(t, v.start, length)
        mapped.append((v.start, length, mask))
    # pages conserved: free + mapped (non-hugetlb) + the pool == what was free at boot
    anon = sum(int(np.count_nonzero(v.nodes >= 0)) for v in t.mm.vmas if not v.hugetlb)
    assert _free_total(k) + anon + k.hugetlb.total() * 512 == start_free
    for start, length, mask in mapped:
        for v in t.mm.vmas_in(start, start + length):
            present = v.nodes[v.nodes >= 0]
            if mask is not None:
                assert set(np.unique(present).tolist()) <= mask
            # huge folios: 2 MiB aligned, whole, one node and one zone
            addrs = v.start + (np.flatnonzero(v.thp) << 12)
            assert np.all((addrs >> 21) == ((addrs - (addrs % HUGE)) >> 21))
            if v.thp.any():
                first = np.flatnonzero(v.thp & (((v.start >> 12) + np.arange(v.npages)) % 512 == 0))
                assert v.thp.sum() == first.size * 512
                for f in first:
                    assert len(set(v.nodes[f : f + 512].tolist())) == 1
                    assert len(set(v.zones[f : f + 512].tolist())) == 1
    for start, length, _ in mapped:
        k.munmap(t, start, length)
    assert _free_total(k) + k.hugetlb.total() * 512 == start_free


# --- commands -------------------------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def test_numastat_m_shows_huge_pages(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numastat", "--machine", small, "--thp", "always", "--sysctl", "vm.nr_hugepages=6",
                 "--after", "numactl -m 1 -- alloc --pages 1024", "--after", "numactl -m 0 -- alloc --hugetlb --pages 512",
                 "-m"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    # alloc's 4 MiB mmap is placed top-down without 2 MiB alignment (coverage row H10), so only one aligned
    # 2 MiB block lies inside it: one huge folio, the other 2 MiB as base pages.
    assert lines["AnonHugePages"] == ["0.00", "2.00", "2.00"]
    assert lines["HugePages_Total"] == ["6.00", "6.00", "12.00"]  # numastat shows huge pages in MB
    assert lines["HugePages_Free"] == ["4.00", "6.00", "10.00"]


def test_alloc_madvise_and_memhog_h(small: str) -> None:
    k = Kernel(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), KernelConfig(thp_mode="madvise"))
    run = run_numactl(k, ["alloc", "--pages", "1024", "--madvise", "hugepage"], keep_alive=True)
    assert "(1 transparent huge page)" in run.stdout  # one aligned 2 MiB block inside the unaligned 4 MiB
    k2 = Kernel(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), KernelConfig(thp_mode="always"))
    run = run_numactl(k2, ["memhog", "-H", "8M"], keep_alive=True)
    assert run.exit_code == 0
    assert all(not v.thp.any() for task in k2.tasks.values() for v in task.mm.vmas)


def test_workload_hugetlb_and_madvise(small: str, tmp_path: Path) -> None:
    w = tmp_path / "w.toml"
    w.write_text(
        'threads = [{id = 0, cpu = 0}]\n'
        '[sysctl]\n"vm.nr_hugepages" = 4\n'
        '[[allocations]]\nname = "h"\nsize_bytes = "3M"\nhugetlb = true\npolicy = "bind:1"\n'
        '[[allocations]]\nname = "t"\nsize_bytes = "4M"\nmadvise = "hugepage"\n'
        '[[phases]]\npattern = "sequential"\nallocation = "h"\naccesses = 100\n'
        '[[phases]]\npattern = "sequential"\nallocation = "t"\naccesses = 100\n'
    )
    out = tmp_path / "r.json"
    assert main(["run", "-m", small, "-w", str(w), "--nominal", "--no-progress", "-o", str(out)]) == 0
    result = json.loads(out.read_text())
    by_alloc = result["placement"]["pages_by_allocation"]
    assert by_alloc["h"] == {"1": 1024}  # the 3 MiB allocation maps two whole 2 MiB pages, both on node 1
    assert by_alloc["t"] == {"0": 1024}
    assert result["inputs"]["kernel"]["sysctl"]["vm.nr_hugepages"] == "4"
