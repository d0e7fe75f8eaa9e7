"""Zone layout at boot, gfp_zone, KernelConfig validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import small_machines

from numasim.kernel.config import KernelConfig
from numasim.kernel.gfp import (
    GFP_ATOMIC,
    GFP_DMA,
    GFP_DMA32,
    GFP_HIGHUSER,
    GFP_HIGHUSER_MOVABLE,
    GFP_KERNEL,
    GFP_TRANSHUGE,
    GFP_USER,
    Gfp,
    gfp_zone,
)
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.zones import DMA_MANAGED_PAGES, MAX_NR_ZONES, ZONE_NAMES, ZoneType
from numasim.topology.model import Link, Machine, Node

GiB = 1 << 30


def test_gfp_zone_table() -> None:
    assert gfp_zone(GFP_DMA) == ZoneType.DMA
    assert gfp_zone(GFP_DMA32) == ZoneType.DMA32
    assert gfp_zone(GFP_KERNEL) == gfp_zone(GFP_USER) == gfp_zone(GFP_HIGHUSER) == ZoneType.NORMAL
    assert gfp_zone(GFP_HIGHUSER_MOVABLE) == gfp_zone(GFP_TRANSHUGE) == ZoneType.MOVABLE
    assert gfp_zone(Gfp.MOVABLE) == ZoneType.NORMAL  # movable without highmem stays below ZONE_MOVABLE
    assert gfp_zone(GFP_ATOMIC) == ZoneType.NORMAL
    with pytest.raises(ValueError, match="GFP_ZONE_BAD"):
        gfp_zone(Gfp.DMA | Gfp.DMA32)


def _two_nodes(free0: int | None = None) -> Machine:
    return Machine(
        name="two",
        nodes=[
            Node(id=0, cpus=[0, 1], memory_bytes=16 * GiB, free_bytes=free0),
            Node(id=1, cpus=[2, 3], memory_bytes=16 * GiB),
            Node(id=2, cpus=[4, 5]),
        ],
        links=[
            Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0),
            Link(a=1, b=2, latency_ns=50.0, bandwidth_gb_s=20.0),
        ],
        firmware_slit=[[10, 20, 20], [20, 10, 20], [20, 20, 10]],
    )


def test_x86_layout() -> None:
    pm = PhysicalMemory(_two_nodes())
    assert len(pm.zones) == 3 * MAX_NR_ZONES
    assert [z.name for z in pm.node_zones(0)] == list(ZONE_NAMES)
    z0 = pm.node_zones(0)
    assert [z.populated for z in z0] == [True, True, True, False, False]
    assert z0[ZoneType.DMA].managed_pages == DMA_MANAGED_PAGES
    assert (z0[ZoneType.DMA].spanned_pages, z0[ZoneType.DMA].present_pages) == (4095, 3998)
    assert z0[ZoneType.DMA32].spanned_pages == (1 << 20) - 4096
    assert z0[ZoneType.DMA32].present_pages <= (3 << 30) // 4096
    assert z0[ZoneType.NORMAL].start_pfn == 1 << 20
    # managed pages of a node sum to its MemTotal; present adds reservations
    for nid in (0, 1):
        assert pm.managed_pages(nid) == 16 * GiB // 4096
        assert sum(z.present_pages for z in pm.node_zones(nid)) > pm.managed_pages(nid)
    assert [z.populated for z in pm.node_zones(1)] == [False, False, True, False, False]
    assert not any(z.populated for z in pm.node_zones(2))  # memoryless cpu node
    assert pm.memory_nodes == frozenset({0, 1})
    assert pm.policy_zone == ZoneType.NORMAL
    # node ranges do not overlap
    assert (
        pm.zone(1, ZoneType.NORMAL).start_pfn
        >= pm.zone(0, ZoneType.NORMAL).start_pfn + pm.zone(0, ZoneType.NORMAL).spanned_pages
    )


def test_free_bytes_and_page_cache() -> None:
    pm = PhysicalMemory(_two_nodes(free0=10 * GiB), KernelConfig(reclaimable_page_cache_bytes={0: 4 * GiB}))
    assert pm.free_pages(0) == 10 * GiB // 4096
    assert pm.reclaimable_pages(0) == 4 * GiB // 4096
    assert pm.free_pages(1) == pm.managed_pages(1) - pm.managed_pages(1) // 256
    assert pm.reclaimable_pages(1) == 0
    pm2 = PhysicalMemory(_two_nodes(free0=10 * GiB), KernelConfig(page_cache_fraction_of_used=0.5))
    assert pm2.reclaimable_pages(0) == 3 * GiB // 4096


def test_small_first_node_has_no_normal_zone() -> None:
    m = Machine(name="small", nodes=[Node(id=0, cpus=[0], memory_bytes=1 * GiB)])
    pm = PhysicalMemory(m)
    assert [z.populated for z in pm.node_zones(0)] == [True, True, False, False, False]
    assert pm.policy_zone == ZoneType.DMA32


def test_movable_zone_from_config() -> None:
    pm = PhysicalMemory(_two_nodes(), KernelConfig(movable_bytes={1: 4 * GiB}))
    z = pm.node_zones(1)
    assert z[ZoneType.MOVABLE].managed_pages == 4 * GiB // 4096
    assert z[ZoneType.NORMAL].managed_pages == 12 * GiB // 4096
    assert [x.type for x in pm.zonelist(1)][:2] == [ZoneType.MOVABLE, ZoneType.NORMAL]
    assert pm.policy_zone == ZoneType.NORMAL


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": "six"}, "version"),
        ({"watermark_scale_factor": 0}, "watermark_scale_factor"),
        ({"zone_reclaim_mode": 9}, "zone_reclaim_mode"),
        ({"min_free_kbytes": -1}, "min_free_kbytes"),
        ({"page_size_bytes": 3000}, "page_size_bytes"),
        ({"page_cache_fraction_of_used": 2.0}, "page_cache_fraction_of_used"),
    ],
)
def test_config_errors_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        KernelConfig(**kwargs)  # type: ignore[arg-type]


def test_versions() -> None:
    assert KernelConfig().at_least(6, 7)
    assert not KernelConfig(version="6.1").at_least(6, 3)


@settings(max_examples=40)
@given(machine=small_machines(max_nodes=4))
def test_layout_invariants(machine: Machine) -> None:
    pm = PhysicalMemory(machine)
    for node in machine.nodes:
        assert pm.managed_pages(node.id) == node.memory_bytes // 4096
        for z in pm.node_zones(node.id):
            assert (
                0
                <= z.free_pages
                <= z.managed_pages
                <= z.present_pages
                <= max(z.spanned_pages, z.present_pages)
            )
            assert 0 <= z.reclaimable_pages <= z.managed_pages - z.free_pages
            assert z.wmark_min <= z.wmark_low <= z.wmark_high <= z.wmark_promo
