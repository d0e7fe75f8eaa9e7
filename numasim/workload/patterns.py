"""Address patterns: each phase of a workload becomes a *walker* that produces its addresses in vectorised blocks.

A walker knows its natural length (the accesses in one pass over its region) and returns the addresses of
accesses ``start .. start + n`` of its sequence. Random walkers draw from their own ``numpy.random.Generator``
in call order, so the same sequence of calls gives the same addresses (the generator always calls with fixed
block sizes, which keeps a workload's stream independent of the chunk size the consumer asks for).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.layout import Region
from numasim.workload.spec import (
    PointerChasePhase,
    RandomPhase,
    SequentialPhase,
    StreamPhase,
    StridedPhase,
    ZipfPhase,
    _PhaseBase,
)

__all__ = ["Walker", "make_walker", "zipf_ranks", "zipf_cdf", "MAX_CHASE_SLOTS", "MAX_ZIPF_TABLE"]

#: Pointer chases over more slots than this (256 MiB of 64-byte lines) step through a random cycle of groups of
#: adjacent slots, one fixed slot per group: bounded memory and set-up time, every page still visited.
MAX_CHASE_SLOTS = 1 << 22
#: Zipf over more ranks than this is sampled from the continuous inverse CDF instead of a table.
MAX_ZIPF_TABLE = 1 << 21
_MAX_PERMUTATION = 1 << 24


@dataclass(frozen=True)
class _Span:
    base: int
    units: int  # how many `unit`-sized slots
    unit: int


def _slice(region: Region, unit: int, rank: int, of: int, split: bool) -> _Span:
    """The part of ``region`` thread ``rank`` of ``of`` walks, in whole slots of ``unit`` bytes."""
    slots = max(1, region.size_bytes // unit)
    if not split or of <= 1:
        return _Span(region.base, slots, unit)
    lo = rank * slots // of
    hi = max(lo + 1, (rank + 1) * slots // of)
    lo = min(lo, slots - 1)
    hi = min(hi, slots)
    return _Span(region.base + lo * unit, hi - lo, unit)


class Walker:
    """Base class: ``length`` accesses per pass; :meth:`take` gives addresses and, when inherent, the writes."""

    length: int = 1

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        raise NotImplementedError


class _Linear(Walker):
    def __init__(self, span: _Span, stride: int, region_bytes: int) -> None:
        self.base = span.base
        self.stride = stride
        self.length = max(1, -(-span.units * span.unit // stride))

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        idx = (np.arange(start, start + n, dtype=np.uint64)) % np.uint64(self.length)
        return np.uint64(self.base) + idx * np.uint64(self.stride), None


class _Uniform(Walker):
    def __init__(self, span: _Span, rng: np.random.Generator) -> None:
        self.span = span
        self.rng = rng
        self.length = span.units

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        slot = self.rng.integers(0, self.span.units, size=n, dtype=np.uint64)
        return np.uint64(self.span.base) + slot * np.uint64(self.span.unit), None


class _Chase(Walker):
    """One random cycle through the slots; beyond MAX_CHASE_SLOTS, through groups with a fixed slot per step."""

    def __init__(self, span: _Span, rng: np.random.Generator) -> None:
        self.span = span
        self.group = max(1, -(-span.units // MAX_CHASE_SLOTS))
        cycle = -(-span.units // self.group)
        dtype = np.uint32 if cycle < (1 << 32) else np.uint64
        self.order = rng.permutation(cycle).astype(dtype)
        self.length = cycle

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        k = np.arange(start, start + n, dtype=np.uint64) % np.uint64(self.length)
        slot = self.order[k].astype(np.uint64) * np.uint64(self.group)
        if self.group > 1:
            slot += (k * np.uint64(0x9E3779B1)) % np.uint64(self.group)
            slot = np.minimum(slot, np.uint64(self.span.units - 1))
        return np.uint64(self.span.base) + slot * np.uint64(self.span.unit), None


def zipf_cdf(n_ranks: int, exponent: float) -> np.ndarray | None:
    """The cumulative table :func:`zipf_ranks` samples from (None when the continuous law is used instead)."""
    if n_ranks <= 1 or exponent == 0 or n_ranks > MAX_ZIPF_TABLE:
        return None
    cdf = np.cumsum(np.arange(1, n_ranks + 1, dtype=np.float64) ** -exponent)
    cdf /= cdf[-1]
    return cdf


def zipf_ranks(
    rng: np.random.Generator, n_ranks: int, exponent: float, size: int, cdf: np.ndarray | None = None
) -> np.ndarray:
    """``size`` ranks in ``[0, n_ranks)`` with P(rank r) proportional to ``(r + 1) ** -exponent``.

    Exact (a cumulative table, ``cdf`` from :func:`zipf_cdf` to reuse it) up to ``MAX_ZIPF_TABLE`` ranks, the
    continuous inverse CDF beyond.

    Examples
    --------
    >>> r = zipf_ranks(np.random.default_rng(0), 1000, 1.0, 10_000)
    >>> bool(r.min() >= 0 and r.max() < 1000 and (r == 0).mean() > (r == 10).mean())
    True
    """
    u = rng.random(size)
    if n_ranks <= 1:
        return np.zeros(size, dtype=np.int64)
    if exponent == 0:
        return np.minimum((u * n_ranks).astype(np.int64), n_ranks - 1)
    if n_ranks <= MAX_ZIPF_TABLE:
        table = cdf if cdf is not None else zipf_cdf(n_ranks, exponent)
        assert table is not None
        return np.minimum(np.searchsorted(table, u, side="right"), n_ranks - 1).astype(np.int64)
    top = float(n_ranks + 1)
    if abs(exponent - 1.0) < 1e-12:
        x = top**u
    else:
        e = 1.0 - exponent
        x = (1.0 + u * (top**e - 1.0)) ** (1.0 / e)
    return np.clip(np.floor(x).astype(np.int64) - 1, 0, n_ranks - 1)


_BLOCK_PAGES = 1 << 12


def _rank_to_item(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A shuffle of ranks over items: a full permutation, or above ``_MAX_PERMUTATION`` items a permutation of
    blocks of ``_BLOCK_PAGES`` consecutive items (constant memory per item, hot items still spread)."""
    if n <= _MAX_PERMUTATION:
        return rng.permutation(n), 1
    return rng.permutation(-(-n // _BLOCK_PAGES)), _BLOCK_PAGES


class _Zipf(Walker):
    def __init__(self, span: _Span, phase: ZipfPhase, rng: np.random.Generator) -> None:
        self.rng = rng
        self.base = span.base
        self.bytes = span.units * span.unit
        self.unit = span.unit
        self.pages = max(1, -(-self.bytes // PAGE_SIZE_BYTES))
        self.slots_per_page = max(1, PAGE_SIZE_BYTES // span.unit)
        self.phase = phase
        self.map = _rank_to_item(rng, self.pages)
        self.length = span.units
        if phase.hot_fraction is None:
            self.hot_pages = self.pages
        else:
            self.hot_pages = min(self.pages, max(1, round(phase.hot_fraction * self.pages)))
        self.cdf = zipf_cdf(self.hot_pages, phase.exponent)

    def _page(self, rank: np.ndarray) -> np.ndarray:
        order, block = self.map
        if block == 1:
            return order[rank]
        item = order[rank // block] * block + rank % block
        return np.minimum(item, self.pages - 1)

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        p = self.phase
        if p.hot_fraction is None or p.hot_access_fraction is None:
            rank = zipf_ranks(self.rng, self.pages, p.exponent, n, self.cdf)
        else:
            hot = self.rng.random(n) < p.hot_access_fraction
            rank = zipf_ranks(self.rng, self.hot_pages, p.exponent, n, self.cdf)
            cold_pages = self.pages - self.hot_pages
            if cold_pages > 0:
                cold = self.hot_pages + self.rng.integers(0, cold_pages, size=n)
                rank = np.where(hot, rank, cold)
        page = np.asarray(self._page(rank), dtype=np.uint64)
        slot = self.rng.integers(0, self.slots_per_page, size=n, dtype=np.uint64)
        offset = page * np.uint64(PAGE_SIZE_BYTES) + slot * np.uint64(self.unit)
        offset = np.minimum(offset, np.uint64(max(0, self.bytes - self.unit)))
        return np.uint64(self.base) + offset, None


class _Stream(Walker):
    """Line ``j`` of each array in turn: sources read, the last array written."""

    def __init__(self, spans: list[_Span]) -> None:
        self.m = len(spans)
        self.lines = min(s.units for s in spans)
        self.bases = np.array([s.base for s in spans], dtype=np.uint64)
        self.unit = spans[0].unit
        self.length = self.m * self.lines

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        # int64 indices (an index never nears 2^63), uint64 only for the addresses: the same values, without
        # numpy's slower uint64-scalar arithmetic (a generator takes thousands of small blocks).
        idx = np.arange(start, start + n, dtype=np.int64)
        line, which = np.divmod(idx, self.m)
        line %= self.lines
        line *= self.unit
        addr = self.bases[which] + line.astype(np.uint64)
        return addr, which == self.m - 1


def make_walker(
    phase: _PhaseBase,
    regions: dict[str, Region],
    rank: int,
    of: int,
    rng: np.random.Generator | None,
) -> Walker:
    """The walker of ``phase`` for thread number ``rank`` of the ``of`` threads running it.

    ``rng`` feeds the random patterns (random, pointer chase, zipf); the others never draw, and may get None.
    """
    unit = phase.size_bytes
    if isinstance(phase, StreamPhase):
        return _Stream([_slice(regions[n], unit, rank, of, phase.split) for n in phase.array_names])
    if isinstance(phase, StridedPhase):
        span = _slice(regions[phase.allocation], phase.stride_bytes, rank, of, phase.split)
        return _Linear(span, phase.stride_bytes, regions[phase.allocation].size_bytes)
    if isinstance(phase, SequentialPhase):
        span = _slice(regions[phase.allocation], unit, rank, of, phase.split)
        return _Linear(span, unit, regions[phase.allocation].size_bytes)
    if rng is None:
        raise TypeError(f"make_walker: a {type(phase).__name__} draws random numbers and needs an rng")
    if isinstance(phase, RandomPhase):
        return _Uniform(_slice(regions[phase.allocation], unit, rank, of, phase.split), rng)
    if isinstance(phase, PointerChasePhase):
        return _Chase(_slice(regions[phase.allocation], unit, rank, of, phase.split), rng)
    if isinstance(phase, ZipfPhase):
        return _Zipf(_slice(regions[phase.allocation], unit, rank, of, phase.split), phase, rng)
    raise TypeError(f"no walker for phase type {type(phase).__name__}")  # pragma: no cover
