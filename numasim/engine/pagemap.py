"""Where each virtual page lives: a map from page numbers to NUMA nodes, looked up for millions of addresses.

The kernel layer decides placement; the engine only needs ``address -> node``. Pages are held as contiguous
runs (a VMA, or a run of consecutive page numbers), so a lookup is one ``searchsorted`` over the run starts
(a handful) plus one gather, never a Python loop per page or per access.
"""

from __future__ import annotations

import numpy as np

from numasim.errors import WorkloadError

__all__ = ["PageMap"]


class PageMap:
    """Virtual page -> NUMA node.

    Examples
    --------
    >>> import numpy as np
    >>> pm = PageMap(page_bytes=4096)
    >>> pm.assign(0x10000, np.array([0, 1, 1], dtype=np.int16))
    >>> pm.lookup(np.array([0x10000, 0x11fff, 0x12000], dtype=np.uint64)).tolist()
    [0, 1, 1]
    """

    def __init__(self, page_bytes: int = 4096) -> None:
        if page_bytes <= 0 or page_bytes & (page_bytes - 1):
            raise WorkloadError(f"page_bytes = {page_bytes}: must be a positive power of two")
        self.page_bytes = page_bytes
        self._shift = page_bytes.bit_length() - 1
        self._runs: list[tuple[int, np.ndarray]] = []  # (first page number, nodes of consecutive pages)
        self._huge_of: dict[int, np.ndarray] = {}  # first page number of a run -> its pages' "in a 2 MiB page" flags
        self._huge = np.zeros(0, dtype=bool)
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._offsets = np.zeros(0, dtype=np.int64)
        self._flat = np.zeros(0, dtype=np.int16)
        self._dirty = False

    # --- building ------------------------------------------------------------------------------------------
    def assign(self, start_address: int, nodes: np.ndarray, huge: np.ndarray | None = None) -> None:
        """Map the pages of a VMA starting at ``start_address`` (page aligned), in order, to ``nodes``;
        ``huge`` marks the pages that belong to a 2 MiB page (THP or hugetlb; for the TLB)."""
        if start_address < 0 or start_address % self.page_bytes:
            raise WorkloadError(
                f"PageMap.assign: start_address {start_address:#x} is not aligned to {self.page_bytes}-byte pages"
            )
        arr = np.asarray(nodes, dtype=np.int16).ravel()
        if len(arr) == 0:
            return
        if (arr < 0).any():
            raise WorkloadError(f"PageMap.assign: node {int(arr.min())} at {start_address:#x} is negative")
        self._runs.append((start_address >> self._shift, arr.copy()))
        if huge is not None:
            flags = np.asarray(huge, dtype=bool).ravel()
            if len(flags) != len(arr):
                raise WorkloadError(f"PageMap.assign: {len(arr)} nodes but {len(flags)} huge flags")
            if flags.any():
                self._huge_of[start_address >> self._shift] = flags.copy()
        self._dirty = True

    @classmethod
    def from_arrays(
        cls, page_numbers: np.ndarray, nodes: np.ndarray, page_bytes: int = 4096, huge: np.ndarray | None = None
    ) -> PageMap:
        """A map from parallel arrays of page numbers (any order, no duplicates), their nodes and (optionally)
        whether each belongs to a 2 MiB page."""
        pages = np.asarray(page_numbers, dtype=np.uint64).ravel()
        where = np.asarray(nodes, dtype=np.int16).ravel()
        flags = None if huge is None else np.asarray(huge, dtype=bool).ravel()
        if flags is not None and len(flags) != len(pages):
            raise WorkloadError(f"PageMap.from_arrays: {len(pages)} page numbers but {len(flags)} huge flags")
        if len(pages) != len(where):
            raise WorkloadError(f"PageMap.from_arrays: {len(pages)} page numbers but {len(where)} nodes")
        pm = cls(page_bytes)
        if len(pages) == 0:
            return pm
        order = np.argsort(pages, kind="stable")
        pages, where = pages[order], where[order]
        if flags is not None:
            flags = flags[order]
        if (np.diff(pages) == 0).any():
            dup = int(pages[1:][np.diff(pages) == 0][0])
            raise WorkloadError(f"PageMap.from_arrays: page number {dup} is listed twice")
        # Cut into runs of consecutive page numbers.
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(pages)], strict=True):
            pm.assign(int(pages[lo]) << pm._shift, where[lo:hi], None if flags is None else flags[lo:hi])
        return pm

    def _build(self) -> None:
        runs = sorted(self._runs, key=lambda r: r[0])
        starts = np.array([r[0] for r in runs], dtype=np.uint64)
        lengths = np.array([len(r[1]) for r in runs], dtype=np.int64)
        ends = starts + lengths.astype(np.uint64)
        if len(runs) > 1 and (starts[1:] < ends[:-1]).any():
            k = int(np.flatnonzero(starts[1:] < ends[:-1])[0])
            raise WorkloadError(
                f"PageMap: page range starting at {int(starts[k + 1]) << self._shift:#x} overlaps the one "
                f"starting at {int(starts[k]) << self._shift:#x}"
            )
        self._runs = runs
        self._starts, self._ends = starts, ends
        self._offsets = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
        self._flat = np.concatenate([r[1] for r in runs]) if runs else np.zeros(0, dtype=np.int16)
        self._huge = (
            np.concatenate([self._huge_of.get(r[0], np.zeros(len(r[1]), dtype=bool)) for r in runs])
            if runs and self._huge_of
            else np.zeros(len(self._flat), dtype=bool)
        )
        self._dirty = False

    # --- queries -------------------------------------------------------------------------------------------
    def lookup(self, addresses: np.ndarray) -> np.ndarray:
        """Node of each address (int16); an unmapped address raises :class:`WorkloadError` naming it."""
        if self._dirty:
            self._build()
        pages = np.asarray(addresses, dtype=np.uint64) >> np.uint64(self._shift)
        if len(self._starts) == 1 and len(pages):
            # One run (a single VMA): no search, one bounds check.
            lo, hi = int(self._starts[0]), int(self._ends[0])
            if int(pages.min()) >= lo and int(pages.max()) < hi:
                return self._flat[(pages - np.uint64(lo)).astype(np.int64)]
        run = np.searchsorted(self._starts, pages, side="right").astype(np.int64) - 1
        ok = run >= 0
        safe = np.where(ok, run, 0)
        if len(self._starts):
            ok &= pages < self._ends[safe]
        else:
            ok[:] = False
        if not ok.all():
            bad = int(np.asarray(addresses, dtype=np.uint64)[np.flatnonzero(~ok)[0]])
            raise WorkloadError(f"address {bad:#x} is not mapped to any node (page {bad >> self._shift:#x})")
        index = self._offsets[safe] + (pages - self._starts[safe]).astype(np.int64)
        return self._flat[index]

    def lookup_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """The arrays :meth:`lookup` searches: run starts and ends (page numbers), each run's offset into the
        flat node array, that array, and the page shift (for compiled lookups)."""
        if self._dirty:
            self._build()
        return self._starts, self._ends, self._offsets, self._flat, self._shift

    def huge_flags(self) -> np.ndarray:
        """Per flat page index (the order of :meth:`lookup_tables`' node array): in a 2 MiB page?"""
        if self._dirty:
            self._build()
        return self._huge

    def pages_per_node(self, node_count: int) -> np.ndarray:
        """Resident pages per node id ``0..node_count-1``."""
        if self._dirty:
            self._build()
        if len(self._flat) and int(self._flat.max()) >= node_count:
            raise WorkloadError(
                f"PageMap: page on node {int(self._flat.max())}, machine has {node_count} nodes"
            )
        return np.bincount(self._flat, minlength=node_count)[:node_count].astype(np.int64)

    @property
    def page_count(self) -> int:
        return int(sum(len(r[1]) for r in self._runs))
