"""Zones (``include/linux/mmzone.h``) and the x86_64 boot layout of a node's memory into zones.

Every node (pgdat) has ``MAX_NR_ZONES = 5`` zones, ``DMA, DMA32, Normal, Movable, Device`` (a distro kernel has
CONFIG_ZONE_DEVICE, so ``/proc/zoneinfo`` shows five ``protection`` entries). A zone is *populated* iff it has
present pages; only populated zones enter zonelists.

Layout (what ``free_area_init`` produces on x86_64, simplified to round numbers):

* the first memory node holds ZONE_DMA (pfn 1..4095: spanned 4095, present 3998, managed 3840 — the BIOS area and
  trampoline below 1 MiB are reserved) and ZONE_DMA32 (16 MiB .. 4 GiB: the PCI hole leaves at most 3 GiB - 16 MiB
  present; the kernel image is reserved there);
* everything else of a node is ZONE_NORMAL, minus what ``movable_bytes`` puts into ZONE_MOVABLE;
* a node's ``memory_bytes`` is read as its *MemTotal* (managed pages, what ``numactl --hardware`` prints as
  "size"); present pages add the struct-page array (1/64 of the memory, taken from the node's highest zone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from numasim.kernel.buddy import FreeArea

__all__ = [
    "ZoneType",
    "Zone",
    "MAX_NR_ZONES",
    "ZONE_NAMES",
    "DMA_SPANNED_PAGES",
    "DMA_PRESENT_PAGES",
    "DMA_MANAGED_PAGES",
    "DMA32_PRESENT_MAX_PAGES",
    "KERNEL_IMAGE_PAGES",
]


class ZoneType(IntEnum):
    """``enum zone_type`` on x86_64 (no ZONE_HIGHMEM)."""

    DMA = 0
    DMA32 = 1
    NORMAL = 2
    MOVABLE = 3
    DEVICE = 4


MAX_NR_ZONES = 5
ZONE_NAMES = ("DMA", "DMA32", "Normal", "Movable", "Device")
"""The names ``/proc/zoneinfo`` and ``/proc/buddyinfo`` print."""

DMA_SPANNED_PAGES = 4095
DMA_PRESENT_PAGES = 3998
DMA_MANAGED_PAGES = 3840
DMA32_PRESENT_MAX_PAGES = (3 << 30) // 4096 - 4096
"""DMA32 spans 16 MiB..4 GiB, but the PCI hole (3..4 GiB on a typical server) leaves 3 GiB - 16 MiB present."""
KERNEL_IMAGE_PAGES = 16384
"""64 MiB reserved in DMA32 of the first memory node: kernel text/data, initrd, early page tables."""


@dataclass
class Zone:
    """One zone of one node: sizes, free pages, watermarks, lowmem_reserve and reclaimable page cache.

    Page counts are in base pages. ``lowmem_reserve[j]`` is what an allocation whose highest usable zone is
    ``j`` must leave free in this zone. ``reclaimable_pages`` is clean page cache that reclaim can free (it is
    part of the used, non-free pages).
    """

    node: int
    type: ZoneType
    start_pfn: int = 0
    spanned_pages: int = 0
    present_pages: int = 0
    managed_pages: int = 0
    free_pages: int = 0
    wmark_min: int = 0
    wmark_low: int = 0
    wmark_high: int = 0
    wmark_promo: int = 0
    lowmem_reserve: list[int] = field(default_factory=lambda: [0] * MAX_NR_ZONES)
    reclaimable_pages: int = 0
    free_area: FreeArea = field(default_factory=lambda: FreeArea.contiguous(0))
    """The free pages as buddy blocks per order (:mod:`numasim.kernel.buddy`); kept equal to ``free_pages``
    by every path that changes it (:meth:`buddy` matches it for one that does not say how)."""

    def buddy(self) -> FreeArea:
        """:attr:`free_area`, first matched to :attr:`free_pages` if something changed the count alone (a test,
        a tool setting a zone's state): more pages coalesce, fewer are taken as order-0 allocations."""
        if self.free_area.pages != self.free_pages:
            self.free_area.reconcile(self.free_pages)
        return self.free_area

    @property
    def name(self) -> str:
        """``"DMA"``, ``"DMA32"``, ``"Normal"``, ``"Movable"`` or ``"Device"``."""
        return ZONE_NAMES[self.type]

    @property
    def populated(self) -> bool:
        """``populated_zone()``: the zone has present pages."""
        return self.present_pages > 0

    def watermark(self, which: str) -> int:
        """The ``"min"``, ``"low"``, ``"high"`` or ``"promo"`` watermark in pages."""
        return int(getattr(self, f"wmark_{which}"))

    def __repr__(self) -> str:
        return (
            f"Zone(node={self.node}, {self.name}, managed={self.managed_pages}, free={self.free_pages}, "
            f"min/low/high={self.wmark_min}/{self.wmark_low}/{self.wmark_high})"
        )
