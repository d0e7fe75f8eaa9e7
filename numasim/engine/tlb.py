"""The TLB: how many of a thread's accesses miss its translation cache and pay a page walk, 4 KiB or 2 MiB pages.

Huge pages matter to timing through the TLB: a 2 MiB page is one entry where 4 KiB pages need 512, so the same
entries reach 512 times as much memory, and a walk for a 2 MiB page is one level shorter. With a
:class:`TlbSpec` (``simulate(..., tlb=...)``, ``numasim run --tlb``) the epoch engine estimates each access's
hit or miss in its core's second-level TLB with the same reuse-distance estimate it uses for the caches
(:func:`numasim.engine.caches.estimate_levels`, on page numbers instead of lines: a 2 MiB page counts as one
entry), and a miss adds the walk's time before the access (it is on the load's critical path).

The numbers are nominal (Intel's optimization manual for Skylake-SP: a 1536-entry, 12-way STLB shared by 4 KiB
and 2 MiB pages; walks of 20-30 cycles when the paging-structure caches and the L1/L2 hold the upper levels),
not fitted: a result with a TLB names them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["TlbSpec", "HUGE_KEY_BIT", "tlb_keys"]

HUGE_KEY_BIT = np.uint64(1 << 62)
"""Set in the key of a 2 MiB page, so it never equals a 4 KiB page's."""


@dataclass(frozen=True)
class TlbSpec:
    """A core's second-level TLB and its page-walk costs (nominal; see the module docstring).

    Attributes
    ----------
    entries : int
        STLB entries (shared by 4 KiB and 2 MiB pages).
    ways : int
        Associativity (``entries / ways`` sets).
    walk_ns_4k, walk_ns_2m : float
        Time a miss adds for a 4 KiB and a 2 MiB page.
    """

    entries: int = 1536
    ways: int = 12
    walk_ns_4k: float = 25.0
    walk_ns_2m: float = 18.0

    def __post_init__(self) -> None:
        if self.entries < 1 or self.ways < 1 or self.entries % self.ways:
            raise ValueError(f"TlbSpec: entries = {self.entries}, ways = {self.ways}: need entries a multiple of ways")
        if not (self.walk_ns_4k >= 0 and self.walk_ns_2m >= 0):
            raise ValueError("TlbSpec: walk times must be >= 0")

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "status": "nominal (Skylake-SP STLB; not fitted)"}


def tlb_keys(addresses: np.ndarray, huge: np.ndarray) -> np.ndarray:
    """The TLB entry each access needs: its 4 KiB page number, or its 2 MiB page number tagged as huge.

    >>> tlb_keys(np.array([0, 4096, 2 << 20], dtype=np.uint64), np.array([False, False, True])).tolist()
    [0, 1, 4611686018427387905]
    """
    vpn = np.asarray(addresses, dtype=np.uint64) >> np.uint64(12)
    return np.where(huge, (vpn >> np.uint64(9)) | HUGE_KEY_BIT, vpn)
