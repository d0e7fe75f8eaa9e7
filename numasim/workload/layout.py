"""Virtual addresses for a workload's allocations.

Each allocation gets its own range, 2 MiB aligned with a 2 MiB guard gap, in declaration order from
``REGION_BASE``. Ranges are never reused after a ``free``: the page map stays a function of the virtual page,
so placement (which runs the malloc/free events in phase order) and the access stream never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.spec import Workload

__all__ = ["Region", "layout", "REGION_BASE", "REGION_ALIGN_BYTES"]

REGION_BASE = 1 << 40
REGION_ALIGN_BYTES = 2 << 20


@dataclass(frozen=True)
class Region:
    """An allocation's virtual range ``[base, base + size_bytes)``."""

    name: str
    base: int
    size_bytes: int

    @property
    def end(self) -> int:
        return self.base + self.size_bytes

    @property
    def first_page(self) -> int:
        return self.base // PAGE_SIZE_BYTES

    @property
    def n_pages(self) -> int:
        return -(-self.size_bytes // PAGE_SIZE_BYTES)


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


def layout(workload: Workload) -> dict[str, Region]:
    """Map allocation name -> :class:`Region`.

    Examples
    --------
    >>> from numasim.workload.spec import loads_workload
    >>> w = loads_workload('threads = [{id = 0}]\\nallocations = [{name = "a", size_bytes = 100}, {name = "b", size_bytes = 100}]')
    >>> [hex(r.base) for r in layout(w).values()]
    ['0x10000000000', '0x10000400000']
    """
    out: dict[str, Region] = {}
    cursor = REGION_BASE
    for a in workload.allocations:
        out[a.name] = Region(a.name, cursor, a.size_bytes)
        cursor = _align_up(cursor + a.size_bytes, REGION_ALIGN_BYTES) + REGION_ALIGN_BYTES
    return out
