"""Watermarks, min_free_kbytes and lowmem_reserve arithmetic (spec §4), by hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from numasim.kernel.config import KernelConfig
from numasim.kernel.physmem import PhysicalMemory
from numasim.kernel.watermarks import (
    calculate_min_free_kbytes,
    set_recommended_min_free_kbytes,
    setup_per_zone_lowmem_reserve,
    setup_per_zone_wmarks,
)
from numasim.kernel.zones import Zone, ZoneType
from numasim.topology.model import Link, Machine, Node

MB = 1 << 20


def _zones(managed: dict[ZoneType, int]) -> list[Zone]:
    zs = [Zone(node=0, type=ZoneType(t)) for t in range(5)]
    for t, m in managed.items():
        zs[t].managed_pages = m
        zs[t].present_pages = m
    return zs


def test_setup_per_zone_wmarks_by_hand() -> None:
    zs = _zones({ZoneType.DMA: 3840, ZoneType.DMA32: 761856, ZoneType.NORMAL: 3000000})
    setup_per_zone_wmarks(zs, 16384, 10)  # pages_min = 4096, lowmem = 3765696
    dma, dma32, normal = zs[0], zs[1], zs[2]
    assert (dma.wmark_min, dma.wmark_low, dma.wmark_high, dma.wmark_promo) == (4, 7, 10, 13)
    # DMA32: min = 4096*761856//3765696 = 828; delta = max(828>>2, 761856*10//10000 = 761) = 761
    assert (dma32.wmark_min, dma32.wmark_low, dma32.wmark_high, dma32.wmark_promo) == (828, 1589, 2350, 3111)
    # Normal: min = 3263; delta = max(815, 3000) = 3000
    assert (normal.wmark_min, normal.wmark_low, normal.wmark_high, normal.wmark_promo) == (
        3263,
        6263,
        9263,
        12263,
    )


def test_watermark_scale_factor_and_min_quarter() -> None:
    zs = _zones({ZoneType.NORMAL: 1000000})
    setup_per_zone_wmarks(zs, 65536, 1)  # min = 16384 (only zone); delta = max(4096, 100) = 4096
    assert (zs[2].wmark_min, zs[2].wmark_low, zs[2].wmark_high) == (16384, 20480, 24576)
    setup_per_zone_wmarks(zs, 65536, 1000)  # delta = max(4096, 100000)
    assert (zs[2].wmark_low, zs[2].wmark_high) == (116384, 216384)


@pytest.mark.parametrize(
    ("movable_like_highmem", "normal_min", "movable_min"), [(True, 4096, 128), (False, 2048, 2048)]
)
def test_movable_min_version_switch(movable_like_highmem: bool, normal_min: int, movable_min: int) -> None:
    zs = _zones({ZoneType.NORMAL: 1000000, ZoneType.MOVABLE: 1000000})
    setup_per_zone_wmarks(zs, 16384, 10, movable_like_highmem=movable_like_highmem)
    assert zs[2].wmark_min == normal_min
    assert zs[3].wmark_min == movable_min  # 6.12: clamp(1000000 // 1024, 32, 128)


def test_calculate_min_free_kbytes_sqrt_and_clamps() -> None:
    zs = _zones({ZoneType.NORMAL: 4 << 20})  # 16 GiB -> isqrt(16777216 * 16) = 16384
    assert calculate_min_free_kbytes(zs, 0, None) == 16384
    assert calculate_min_free_kbytes(_zones({ZoneType.NORMAL: 100}), 0, None) == 128
    assert calculate_min_free_kbytes(_zones({ZoneType.NORMAL: 1 << 36}), 0, None) == 262144
    # a user value at least as large as the computed one is kept
    assert calculate_min_free_kbytes(zs, 20000, 20000) == 20000
    assert calculate_min_free_kbytes(zs, 1000, 1000) == 16384


def test_thp_recommended_min_free_kbytes() -> None:
    zs = _zones({ZoneType.DMA: 3840, ZoneType.DMA32: 700000, ZoneType.NORMAL: 4000000})
    # 3 zones * 512 * (2 + 9) = 16896 pages = 67584 kB (the spec's example)
    assert set_recommended_min_free_kbytes(zs, 1000) == 67584
    assert set_recommended_min_free_kbytes(zs, 100000) == 100000
    small = _zones({ZoneType.NORMAL: 100000})  # capped at 5 % of lowmem: 5000 pages
    assert set_recommended_min_free_kbytes(small, 0) == 20000


def test_lowmem_reserve_by_hand() -> None:
    zs = _zones(
        {ZoneType.DMA: 3840, ZoneType.DMA32: 700000, ZoneType.NORMAL: 4000000, ZoneType.MOVABLE: 320000}
    )
    setup_per_zone_lowmem_reserve(zs, (256, 256, 32, 0))
    assert zs[0].lowmem_reserve == [0, 700000 // 256, 4700000 // 256, 5020000 // 256, 5020000 // 256]
    assert zs[1].lowmem_reserve == [0, 0, 4000000 // 256, 4320000 // 256, 4320000 // 256]
    assert zs[2].lowmem_reserve == [0, 0, 0, 320000 // 32, 320000 // 32]
    assert zs[3].lowmem_reserve == [0] * 5  # ratio 0 clears
    zs[1].managed_pages = 0  # an empty zone reserves nothing
    setup_per_zone_lowmem_reserve(zs, (256, 256, 32, 0))
    assert zs[1].lowmem_reserve == [0] * 5


def _article_001() -> Machine:
    return Machine(
        name="article-001",
        nodes=[
            Node(id=0, cpus=list(range(10)), memory_bytes=64141 * MB, free_bytes=42625 * MB),
            Node(id=1, cpus=list(range(10, 20)), memory_bytes=64509 * MB, free_bytes=43405 * MB),
        ],
        links=[Link(a=0, b=1, latency_ns=50.0, bandwidth_gb_s=20.0)],
        firmware_slit=[[10, 20], [20, 10]],
    )


def test_boot_min_free_kbytes_two_nodes() -> None:
    pm = PhysicalMemory(_article_001())
    assert pm.min_free_kbytes == 90112  # THP: 4 lowmem zones * 512 * 11 pages
    lowmem_pages = (64141 + 64509) * MB // 4096
    pm_nothp = PhysicalMemory(_article_001(), KernelConfig(thp_enabled=False))
    assert pm_nothp.min_free_kbytes == math.isqrt(lowmem_pages * 4 * 16)
    pm_user = PhysicalMemory(_article_001(), KernelConfig(min_free_kbytes=1024))
    assert pm_user.min_free_kbytes == 1024
    assert sum(z.wmark_min for z in pm_user.zones if z.populated) <= 256
    # 6.1+: an empty ZONE_MOVABLE still gets min = clamp(0 // 1024, 32, 128), as zoneinfo shows
    assert pm_user.zone(0, ZoneType.MOVABLE).wmark_min == 32
    assert (
        PhysicalMemory(_article_001(), KernelConfig(version="5.15")).zone(0, ZoneType.MOVABLE).wmark_min == 0
    )
    total_min = sum(z.wmark_min for z in pm.zones if z.populated)
    assert 22528 - 4 <= total_min <= 22528  # floors lose at most one page per zone


def test_hotadd_recomputes_watermarks() -> None:
    pm = PhysicalMemory(_article_001(), KernelConfig(thp_enabled=False))
    before = pm.min_free_kbytes
    pm.hotadd_memory(1, 64 << 30)
    assert pm.min_free_kbytes > before
    assert pm.zone(0, ZoneType.DMA32).lowmem_reserve[2] == pm.zone(0, ZoneType.NORMAL).managed_pages // 256
