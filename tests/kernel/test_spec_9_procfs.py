"""kernel_spec.md section 9 (/proc and /sys formats) on the views of a running simulated kernel."""

from __future__ import annotations

import re

from numasim.kernel.allocator import NUMA_STAT_ITEMS
from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_F_STATIC_NODES, MPOL_INTERLEAVE
from numasim.kernel.procfs import format_buddyinfo, format_zoneinfo, numa_maps_of, zone_views
from numasim.kernel.task import PAGE_SIZE
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30
ZONE_NAMES = ("DMA", "DMA32", "Normal", "Movable", "Device")


def _kernel(version: str = "6.12") -> Kernel:
    machine = Machine(
        name="spec9",
        nodes=[
            Node(id=0, cpus=[0, 1], memory_bytes=2 * GiB),
            Node(id=1, cpus=[2, 3], memory_bytes=GiB),
            Node(id=2, cpus=[4, 5], memory_bytes=0),  # memoryless: all zones unpopulated
        ],
        links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0),
               Link(a=1, b=2, latency_ns=50.0, bandwidth_gb_s=20.0)],
        firmware_slit=[[10, 20, 30], [20, 10, 20], [30, 20, 10]],
    )
    return Kernel(machine, KernelConfig(version=version))


def _blocks(text: str) -> list[str]:
    return ["Node " + b for b in text.split("Node ")[1:]]


def test_zoneinfo_lists_every_zone_and_unpopulated_ones_stop_after_protection() -> None:
    """9.2: ALL zones incl. unpopulated, nodes ascending, zones low->high, "Node %d, zone %8s"; protection has
    MAX_NR_ZONES = 5 entries (lowmem_reserve); an unpopulated zone's block ends after protection; per-node
    stats only in the node's first populated zone; the six numa_* lines equal the zone's counters."""
    k = _kernel()
    t = k.spawn("a", cpu=2)
    vma = k.mmap(t, 64 * PAGE_SIZE)
    k.touch(t, vma.start, 64 * PAGE_SIZE)
    text = format_zoneinfo(zone_views(k, pagesets=False))
    blocks = _blocks(text)
    assert [b.split("\n")[0] for b in blocks] == [
        f"Node {n}, zone {name:>8}" for n in (0, 1, 2) for name in ZONE_NAMES
    ]
    for i, b in enumerate(blocks):
        z = k.pm.zones[i]
        lines = b.rstrip("\n").split("\n")
        prot = [ln for ln in lines if ln.startswith("        protection: (")]
        assert prot == ["        protection: (" + ", ".join(str(x) for x in z.lowmem_reserve) + ")"]
        assert len(z.lowmem_reserve) == 5
        if not z.populated:
            assert lines[-1] == prot[0]
            continue
        numa = {ln.split()[0]: int(ln.split()[1]) for ln in lines if re.match(r"      numa_\w+ +\d+$", ln)}
        names = ["numa_hit", "numa_miss", "numa_foreign", "numa_interleave", "numa_local", "numa_other"]
        assert list(numa) == names
        assert list(numa.values()) == [int(getattr(k.pm.zone_counters, n)[i]) for n in NUMA_STAT_ITEMS]
    per_node = [b.split("\n")[0] for b in blocks if "\n  per-node stats" in b]
    assert per_node == ["Node 0, zone      DMA", "Node 1, zone   Normal"]  # node 2 has no populated zone
    # the 64 pages touched from cpu 2 (node 1) are numa_hit + numa_local in node 1's Normal zone (index 7),
    # on top of whatever the boot image allocated there
    assert int(k.pm.zone_counters.numa_hit[7]) >= 64 and int(k.pm.zone_counters.local_node[7]) >= 64


def test_zoneinfo_promo_line_by_version() -> None:
    """9.2 [VER]: ``promo`` (WMARK_PROMO, 6.0+) between high and spanned."""
    for version, has in (("5.15", False), ("6.1", True)):
        text = format_zoneinfo(zone_views(_kernel(version), pagesets=False))
        assert ("\n        promo    " in text) == has
        if has:
            assert re.search(r"\n        high     \d+\n        promo    \d+\n        spanned  ", text)


def test_buddyinfo_populated_zones_only_with_eleven_orders() -> None:
    """9.1: populated zones only, nodes ascending, zones low->high, "Node %d, zone %8s " + "%6lu " x 11."""
    k = _kernel()
    text = format_buddyinfo(zone_views(k, pagesets=False))
    lines = text.split("\n")
    assert lines[-1] == ""
    populated = [z for z in k.pm.zones if z.populated]
    assert [ln[:21] for ln in lines[:-1]] == [f"Node {z.node}, zone {z.name:>8}" for z in populated]
    for ln, z in zip(lines, populated, strict=False):
        counts = ln[22:]
        assert len(counts) == 11 * 7  # "%6lu " per order
        assert all(re.fullmatch(r" *\d+ ", counts[7 * i : 7 * i + 7]) for i in range(11))
        assert sum(int(c) << order for order, c in enumerate(counts.split())) == z.free_pages


def test_numa_maps_policy_column_and_node_counts() -> None:
    """9.3 + 5.13: the policy column is mpol_to_str of the VMA policy, else of the task policy; N<node>=<pages>
    ascending, only non-zero; a VMA without pages ends after the policy (and heap/stack)."""
    k = _kernel()
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_BIND | MPOL_F_STATIC_NODES, {1}).ok
    a = k.mmap(t, 4 * PAGE_SIZE)
    b = k.mmap(t, 4 * PAGE_SIZE)
    assert k.mbind(t, b.start, 4 * PAGE_SIZE, MPOL_INTERLEAVE, {0, 1}).ok
    k.touch(t, b.start, 4 * PAGE_SIZE)
    lines = {int(ln.split()[0], 16): ln for ln in numa_maps_of(k, t).splitlines()}
    assert lines[a.start] == f"{a.start:08x} bind=static:1"
    assert lines[b.start] == f"{b.start:08x} interleave:0-1 anon=4 dirty=4 N0=2 N1=2 kernelpagesize_kB=4"
