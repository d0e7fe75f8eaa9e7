"""The buddy allocator's free areas: how a zone's free memory is split into blocks of each order.

The kernel keeps a zone's free pages in ``free_area[order]`` lists of naturally aligned blocks of ``2**order`` pages
(``mm/page_alloc.c``; ``/proc/buddyinfo`` prints how many blocks each order holds). numasim's allocator counts free
pages; this module keeps, beside the count, the number of free blocks per order, so that a 2 MiB (order-9)
allocation can find that a zone has enough free memory but no free block of that size: the memory is
*fragmented*, and only compaction (:mod:`numasim.kernel.compaction`) can make a block.

What changes the blocks (each rule the kernel's behaviour in bulk, without individual page frames):

* an order-0 allocation takes the smallest block there is (``__rmqueue_smallest``): fragments are used up first,
  and a larger block is split only when no smaller one is left; splitting a block for fewer pages than it holds
  leaves the rest as one block of each lower order the remainder needs (``expand``);
* an order-9 allocation takes an order-9 block, or splits an order-10 block into two;
* pages a process frees return as whole blocks (its pages came from split blocks and coalesce back with their
  buddies when all are free): a run of ``n`` pages is ``n // 1024`` order-10 blocks and the binary digits of the rest;
* reclaimed page cache returns in the shape of the zone's fragments (:attr:`FreeArea.fragment_shape`): page cache
  is spread over memory that is otherwise in use, so its pages free up in the block sizes the machine's own
  fragmented free memory shows. A zone booted without a measured shape (no ``/proc/buddyinfo`` given) has no
  fragments, and its reclaimed cache coalesces like freed pages: the least fragmented case, numasim's default.

Examples
--------
>>> area = FreeArea.shaped_like(4096, [100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])   # 9 % of it in single pages
>>> area.counts.tolist()       # 364 fragments, the other 3732 pages coalesced
[364, 0, 1, 0, 1, 0, 0, 1, 0, 1, 3]
>>> area.take_base(6)          # the fragments go first
>>> area.fragment_pages, area.blocks_of(9)
(358, 7)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["NR_PAGE_ORDERS", "MAX_ORDER", "HUGE_ORDER", "FreeArea", "binary_blocks", "fragmentation_index",
           "parse_buddyinfo", "load_buddyinfo"]

NR_PAGE_ORDERS = 11
"""Orders 0..10 (``MAX_PAGE_ORDER = 10`` on x86_64)."""
MAX_ORDER = NR_PAGE_ORDERS - 1
HUGE_ORDER = 9
"""A 2 MiB page (``HPAGE_PMD_ORDER``)."""
_SIZES = 1 << np.arange(NR_PAGE_ORDERS, dtype=np.int64)


def binary_blocks(pages: int) -> np.ndarray:
    """Blocks per order that ``pages`` contiguous pages coalesce into: order-10 blocks, then the binary digits of
    the rest.

    Examples
    --------
    >>> binary_blocks(1024 + 513).tolist()
    [1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    """
    if pages < 0:
        raise ValueError(f"binary_blocks: pages = {pages}: must be >= 0")
    out = np.zeros(NR_PAGE_ORDERS, dtype=np.int64)
    out[MAX_ORDER] = pages >> MAX_ORDER
    rest = pages & ((1 << MAX_ORDER) - 1)
    for order in range(MAX_ORDER):
        out[order] = (rest >> order) & 1
    return out


def fragmentation_index(counts: np.ndarray, order: int) -> int:
    """``__fragmentation_index`` (``mm/vmstat.c``) of a zone with these free blocks, for an allocation of ``order``.

    -1000 when a block of ``order`` or larger is free (the allocation succeeds); 0 with no free memory; else
    ``1000 - (1000 + free_pages * 1000 / 2**order) / free_blocks``: towards 0 the failure is for lack of memory,
    towards 1000 for fragmentation.

    Examples
    --------
    >>> fragmentation_index(np.array([2048] + [0] * 10), 9)   # 2048 single pages: fragmentation
    998
    >>> fragmentation_index(np.array([0] * 8 + [16, 0, 0]), 9)  # 16 order-8 blocks: rather too little memory
    438
    """
    c = np.asarray(counts, dtype=np.int64)
    total_blocks = int(c.sum())
    if not total_blocks:
        return 0
    if int(c[order:].sum()):
        return -1000
    free_pages = int((c * _SIZES).sum())
    requested = 1 << order
    return 1000 - (1000 + free_pages * 1000 // requested) // total_blocks


class FreeArea:
    """Free blocks per order of one zone (module docstring), in two parts.

    *Coalesced* free memory (:attr:`contiguous_pages`) sits in the largest blocks its size allows (its block
    counts are :func:`binary_blocks` of it): what a freshly booted zone has and what freed pages join. *Fragments*
    (:attr:`fragments`: blocks of order 0..8) are free blocks whose buddies are in use, each in a pageblock of its
    own: they cannot coalesce, and only compaction turns them into a 2 MiB block. A zone booted without a
    measured ``/proc/buddyinfo`` has no fragments, ever.

    Parameters
    ----------
    contiguous_pages : int
        Free pages that coalesce.
    fragments : sequence of int, optional
        Fragment blocks of order 0..8.
    fragment_shape : sequence of float, optional
        The share of fragmented free pages in each order below 9 (sums to 1): the block sizes reclaimed page
        cache comes back in. None: reclaimed cache coalesces like freed pages.
    """

    def __init__(
        self,
        contiguous_pages: int,
        fragments: Sequence[int] | np.ndarray | None = None,
        fragment_shape: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        if contiguous_pages < 0:
            raise ValueError(f"FreeArea: contiguous_pages = {contiguous_pages}: must be >= 0")
        self.contiguous_pages = int(contiguous_pages)
        f = np.zeros(HUGE_ORDER, dtype=np.int64) if fragments is None else np.asarray(fragments, dtype=np.int64)
        if f.shape != (HUGE_ORDER,) or (f < 0).any():
            raise ValueError(f"FreeArea: fragments = {f.tolist()}: need {HUGE_ORDER} non-negative block counts")
        self.fragments = f.copy()
        self._fragment_pages = int((self.fragments * _SIZES[:HUGE_ORDER]).sum())  # kept in step with fragments
        self.fragment_shape: np.ndarray | None = None
        if fragment_shape is not None:
            s = np.asarray(fragment_shape, dtype=float)
            if s.shape != (HUGE_ORDER,) or (s < 0).any() or not np.isclose(s.sum(), 1.0):
                raise ValueError(f"FreeArea: fragment_shape = {s.tolist()}: need {HUGE_ORDER} shares >= 0 summing to 1")
            self.fragment_shape = s

    @classmethod
    def contiguous(cls, pages: int) -> FreeArea:
        """A zone whose free memory is in the largest blocks (a freshly booted machine)."""
        return cls(pages)

    @classmethod
    def shaped_like(cls, pages: int, measured: Sequence[int] | np.ndarray) -> FreeArea:
        """``pages`` free pages split like a measured ``/proc/buddyinfo`` line (``measured``: blocks per order
        0..10): the share of its free pages in blocks below order 9 becomes fragments of those orders, the rest
        coalesces; the fragments' shape is kept for reclaimed page cache.

        Examples
        --------
        >>> a = FreeArea.shaped_like(4096, [512, 256, 0, 0, 0, 0, 0, 0, 0, 0, 1])   # half fragments, half whole
        >>> a.pages, a.fragment_pages, a.counts.tolist()
        (4096, 2048, [1024, 512, 0, 0, 0, 0, 0, 0, 0, 0, 2])
        """
        m = np.asarray(measured, dtype=np.int64)
        if m.shape != (NR_PAGE_ORDERS,) or (m < 0).any():
            raise ValueError(f"buddyinfo line {m.tolist()}: need {NR_PAGE_ORDERS} non-negative block counts")
        measured_pages = m * _SIZES
        total = int(measured_pages.sum())
        frag = measured_pages[:HUGE_ORDER]
        if total == 0 or not frag.sum():
            return cls(pages)
        counts = np.floor(pages * frag / total / _SIZES[:HUGE_ORDER]).astype(np.int64)
        used = int((counts * _SIZES[:HUGE_ORDER]).sum())
        return cls(pages - used, counts, frag / frag.sum())

    @property
    def counts(self) -> np.ndarray:
        """Free blocks of order 0..10, as /proc/buddyinfo prints them."""
        out = binary_blocks(self.contiguous_pages)
        out[:HUGE_ORDER] += self.fragments
        return out

    @property
    def pages(self) -> int:
        """Free pages in all blocks."""
        return self.contiguous_pages + self.fragment_pages

    @property
    def fragment_pages(self) -> int:
        """Free pages in fragments."""
        return self._fragment_pages

    def _fragments_changed(self) -> None:
        self._fragment_pages = int((self.fragments * _SIZES[:HUGE_ORDER]).sum())

    @property
    def fragment_blocks(self) -> int:
        """Fragment blocks."""
        return int(self.fragments.sum())

    def blocks_of(self, order: int) -> int:
        """Free blocks of ``order`` the zone could hand out: its own, and each larger block split."""
        if order >= HUGE_ORDER:
            return self.contiguous_pages >> order
        return int((self.counts[order:] << np.arange(NR_PAGE_ORDERS - order)).sum())

    def copy(self) -> FreeArea:
        return FreeArea(self.contiguous_pages, self.fragments, self.fragment_shape)

    def take_base(self, pages: int) -> None:
        """Allocate ``pages`` order-0 pages: fragments first, smallest blocks first (``__rmqueue_smallest``; a
        split fragment leaves its rest as smaller fragments), then coalesced memory."""
        if pages < 0:
            raise ValueError(f"take_base: pages = {pages}: must be >= 0")
        if pages > self.pages:
            raise ValueError(f"take_base: {pages} pages asked of {self.pages} free")
        if not self._fragment_pages:  # the common case: nothing fragmented (no measured buddyinfo)
            self.contiguous_pages -= pages
            return
        left = pages
        for order in range(HUGE_ORDER):
            if not left:
                break
            size = 1 << order
            whole = min(int(self.fragments[order]), left // size)
            self.fragments[order] -= whole
            left -= whole * size
            if left and left < size and self.fragments[order]:
                # split one fragment: what the allocation does not take stays, one block per binary digit
                self.fragments[order] -= 1
                self.fragments[:order] += binary_blocks(size - left)[:order]
                left = 0
        self._fragments_changed()
        self.contiguous_pages -= left

    def take_blocks(self, n: int, order: int = HUGE_ORDER) -> None:
        """Allocate ``n`` blocks of ``order`` >= 9 from the coalesced memory."""
        if order < HUGE_ORDER:
            raise ValueError(f"take_blocks: order {order}: numasim allocates blocks of order >= {HUGE_ORDER} only")
        if n > self.blocks_of(order):
            raise ValueError(f"take_blocks: {n} order-{order} blocks asked of {self.blocks_of(order)}")
        self.contiguous_pages -= n << order

    def add_freed(self, pages: int) -> None:
        """Pages a process frees: they coalesce (module docstring)."""
        if pages < 0:
            raise ValueError(f"add_freed: pages = {pages}: must be >= 0")
        self.contiguous_pages += pages

    def add_reclaimed(self, pages: int) -> None:
        """Page cache reclaimed: it returns as fragments of the measured shape, or coalesces when the zone has
        none."""
        if pages <= 0:
            return
        if self.fragment_shape is None:
            self.add_freed(pages)
            return
        counts = np.floor(pages * self.fragment_shape / _SIZES[:HUGE_ORDER]).astype(np.int64)
        self.fragments += counts
        self._fragments_changed()
        self.contiguous_pages += pages - int((counts * _SIZES[:HUGE_ORDER]).sum())  # what rounding left

    def compact_one(self) -> int:
        """Make one 2 MiB block out of fragments (:mod:`numasim.kernel.compaction`); returns the pages migrated.

        The pageblock compaction empties holds, on average, ``fragment_pages / fragment_blocks`` free pages (each
        fragment in a pageblock of its own); its other pages are migrated into free pages elsewhere, which uses up
        512 fragment pages in all (taken smallest first, as migration targets are order-0 pages), and the block
        joins the coalesced memory. Requires ``fragment_pages >= 512``.

        Examples
        --------
        >>> a = FreeArea(0, [1024, 0, 0, 0, 0, 0, 0, 0, 0])   # 1024 single free pages
        >>> a.compact_one(), a.fragment_pages, a.contiguous_pages
        (511, 512, 512)
        """
        frag, blocks = self.fragment_pages, self.fragment_blocks
        if frag < (1 << HUGE_ORDER):
            raise ValueError(f"compact_one: {frag} fragment pages, a 2 MiB block needs {1 << HUGE_ORDER}")
        migrated = (1 << HUGE_ORDER) - frag // blocks
        contiguous = self.contiguous_pages
        self.contiguous_pages = 0
        self.take_base(1 << HUGE_ORDER)  # fragments only: the coalesced part is set aside
        self.contiguous_pages = contiguous + (1 << HUGE_ORDER)
        return migrated

    def reconcile(self, free_pages: int) -> None:
        """Match a free page count changed by a path that did not say how: more free pages coalesce as freed
        ones, fewer are taken as order-0 allocations."""
        diff = free_pages - self.pages
        if diff > 0:
            self.add_freed(diff)
        elif diff < 0:
            self.take_base(-diff)


def parse_buddyinfo(text: str, source: str = "buddyinfo") -> dict[tuple[int, str], tuple[int, ...]]:
    """``/proc/buddyinfo`` as ``(node, zone name) -> free blocks of order 0..10``.

    Each line reads ``Node N, zone NAME c0 c1 ... c10`` (``frag_show_print``); blank lines and ``#`` comments
    are skipped. A malformed line, a count that is not a non-negative integer, a line with other than 11 counts
    or a zone listed twice raises ``ValueError`` naming ``source`` and the line.

    Examples
    --------
    >>> parse_buddyinfo("Node 0, zone   Normal   5 4 3 2 1 0 0 0 0 0 7")[(0, "Normal")]
    (5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 7)
    >>> parse_buddyinfo("Node 0, zone Normal 1 2 3")
    Traceback (most recent call last):
    ...
    ValueError: buddyinfo:1: 3 block counts, expected 11 (orders 0..10): 'Node 0, zone Normal 1 2 3'
    """
    out: dict[tuple[int, str], tuple[int, ...]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source}:{number}"
        head, comma, rest = stripped.partition(",")
        words = head.split()
        fields = rest.split()
        if not comma or len(words) != 2 or words[0] != "Node" or not words[1].isdigit() or len(fields) < 2 \
                or fields[0] != "zone":
            raise ValueError(f"{where}: expected 'Node N, zone NAME' and 11 block counts, got {stripped!r}")
        zone, counts = fields[1], fields[2:]
        if len(counts) != NR_PAGE_ORDERS:
            raise ValueError(f"{where}: {len(counts)} block counts, expected {NR_PAGE_ORDERS} (orders 0..10): {stripped!r}")
        if not all(c.isdigit() for c in counts):
            bad = next(c for c in counts if not c.isdigit())
            raise ValueError(f"{where}: block count {bad!r} is not a non-negative integer: {stripped!r}")
        key = (int(words[1]), zone)
        if key in out:
            raise ValueError(f"{where}: node {key[0]}, zone {zone} is listed twice")
        out[key] = tuple(int(c) for c in counts)
    if not out:
        raise ValueError(f"{source}: no 'Node N, zone NAME ...' line")
    return out


def load_buddyinfo(path: str) -> dict[tuple[int, str], tuple[int, ...]]:
    """:func:`parse_buddyinfo` of a file (a saved ``/proc/buddyinfo``)."""
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--buddyinfo {path}: cannot read it ({exc})") from None
    return parse_buddyinfo(text, str(p))
