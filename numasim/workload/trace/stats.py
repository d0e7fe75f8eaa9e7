"""Summary of a stream of accesses: counts, reads/writes, footprint, address range, per-thread counts.

Streams: per chunk, the touched pages and lines are reduced with ``numpy.unique`` and merged into sorted
arrays, so memory grows with the footprint, not with the number of accesses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.access import AccessChunk

__all__ = ["TraceInfo", "trace_info", "touched_pages", "spanned_units"]

_LINE_BYTES = 64


@dataclass
class TraceInfo:
    """What ``numasim trace info`` prints."""

    accesses: int = 0
    reads: int = 0
    writes: int = 0
    bytes_accessed: int = 0
    footprint_lines: int = 0
    footprint_pages: int = 0
    min_address: int | None = None
    max_address: int | None = None
    per_thread: dict[int, int] = field(default_factory=dict)
    compute_ns_total: float = 0.0

    @property
    def threads(self) -> int:
        return len(self.per_thread)

    @property
    def footprint_bytes(self) -> int:
        """Distinct 64-byte lines touched, in bytes."""
        return self.footprint_lines * _LINE_BYTES

    def to_dict(self) -> dict[str, Any]:
        return {
            "accesses": self.accesses,
            "reads": self.reads,
            "writes": self.writes,
            "bytes_accessed": self.bytes_accessed,
            "footprint_bytes": self.footprint_bytes,
            "footprint_pages": self.footprint_pages,
            "threads": self.threads,
            "min_address": self.min_address,
            "max_address": self.max_address,
            "per_thread": {str(k): v for k, v in sorted(self.per_thread.items())},
            "compute_ns_total": self.compute_ns_total,
        }


def spanned_units(address: np.ndarray, size_bytes: np.ndarray, unit_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``unit_bytes`` unit (line, page) each access touches, in access order, and the index of the access
    each belongs to: an access of ``size_bytes`` may span several (a size of 0 counts as 1 byte).

    Examples
    --------
    >>> units, index = spanned_units(np.array([0, 4090], dtype=np.uint64), np.array([64, 10], dtype=np.uint16), 4096)
    >>> units.tolist(), index.tolist()
    ([0, 0, 1], [0, 1, 1])
    """
    unit = np.uint64(unit_bytes)
    first = address // unit
    # (offset in the unit + size - 1) // unit: no uint64 overflow for addresses near 2**64
    extra = ((address % unit).astype(np.int64) + np.maximum(size_bytes.astype(np.int64), 1) - 1) // unit_bytes
    if not extra.any():
        return first, np.arange(len(address))
    index = np.repeat(np.arange(len(address)), extra + 1)
    starts = np.r_[0, np.cumsum(extra + 1)[:-1]]
    offset = (np.arange(len(index)) - starts[index]).astype(np.uint64)
    return first[index] + offset, index


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    # Sort-based: numpy 2's hash-based np.unique is several times slower on large uint64 arrays.
    a = np.sort(values)
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


class _DistinctCounter:
    """Distinct values seen over a stream: per-chunk uniques are held back and merged in amortised batches
    (merging only when the pending values outnumber the merged ones), so the cost stays O(n log n) overall."""

    def __init__(self) -> None:
        self.merged = np.zeros(0, dtype=np.uint64)
        self.pending: list[np.ndarray] = []
        self.pending_size = 0

    def add(self, values: np.ndarray) -> None:
        u = _sorted_unique(values)
        self.pending.append(u)
        self.pending_size += len(u)
        if self.pending_size > max(len(self.merged), 1 << 18):
            self._merge()

    def _merge(self) -> None:
        if self.pending:
            self.merged = _sorted_unique(np.concatenate([self.merged, *self.pending]))
            self.pending, self.pending_size = [], 0

    def __len__(self) -> int:
        self._merge()
        return len(self.merged)


def touched_pages(chunks: Iterable[AccessChunk], page_bytes: int = PAGE_SIZE_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Distinct virtual page numbers touched, and for each the thread that touched it first (trace order).

    Examples
    --------
    >>> c = AccessChunk.build(np.array([0, 8192, 64, 4096], dtype=np.uint64), thread=np.array([1, 0, 0, 2]))
    >>> pages, first = touched_pages([c])
    >>> pages.tolist(), first.tolist()
    ([0, 1, 2], [1, 2, 0])
    """
    pages = np.zeros(0, dtype=np.uint64)
    first = np.zeros(0, dtype=np.int32)
    for c in chunks:
        vp, access = spanned_units(c.address, c.size_bytes, page_bytes)  # an access may span pages
        new, idx = np.unique(vp, return_index=True)  # idx: first occurrence in this chunk
        keep = ~np.isin(new, pages, assume_unique=True)
        new, idx = new[keep], idx[keep]
        merged = np.concatenate([pages, new])
        order = np.argsort(merged, kind="stable")
        pages = merged[order]
        first = np.concatenate([first, c.thread[access[idx]].astype(np.int32)])[order]
    return pages, first


def trace_info(chunks: Iterable[AccessChunk]) -> TraceInfo:
    """Summarise a stream of chunks in one pass."""
    info = TraceInfo()
    lines = _DistinctCounter()
    pages = _DistinctCounter()
    per_thread: dict[int, int] = {}  # by id: ids are labels (0..2**31-1), so no array indexed by id
    for c in chunks:
        if not len(c):
            continue
        info.accesses += len(c)
        w = int(np.count_nonzero(c.is_write))
        info.writes += w
        info.reads += len(c) - w
        info.bytes_accessed += int(c.size_bytes.sum(dtype=np.int64))
        info.compute_ns_total += float(c.compute_ns.sum(dtype=np.float64))
        lo, hi = int(c.address.min()), int(c.address.max())
        info.min_address = lo if info.min_address is None else min(info.min_address, lo)
        info.max_address = hi if info.max_address is None else max(info.max_address, hi)
        lines.add(spanned_units(c.address, c.size_bytes, _LINE_BYTES)[0])
        pages.add(spanned_units(c.address, c.size_bytes, PAGE_SIZE_BYTES)[0])
        ids, counts = np.unique(c.thread, return_counts=True)
        for tid, count in zip(ids.tolist(), counts.tolist(), strict=True):
            per_thread[tid] = per_thread.get(tid, 0) + count
    info.footprint_lines = len(lines)
    info.footprint_pages = len(pages)
    info.per_thread = dict(sorted(per_thread.items()))
    return info
