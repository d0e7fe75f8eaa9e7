"""khugepaged's knobs (``/sys/kernel/mm/transparent_hugepage/khugepaged/``), with mm/khugepaged.c's defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KhugepagedConfig"]


@dataclass(frozen=True)
class KhugepagedConfig:
    """Attributes
    ----------
    pages_to_scan : int
        Pages (PTEs) scanned per pass (4096: eight 2 MiB ranges).
    scan_sleep_ms : int
        Sleep between passes (10000).
    max_ptes_none : int
        Pages of a 2 MiB range that may be absent and still be collapsed (511: any range with a page present).
    """

    pages_to_scan: int = 4096
    scan_sleep_ms: int = 10000
    max_ptes_none: int = 511
