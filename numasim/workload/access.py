"""The unit of work the engine consumes: a chunk of memory accesses as parallel numpy arrays.

Traces and workload generators both produce an iterator of :class:`AccessChunk`; the engine never sees a
Python object per access. Chunks are bounded in size (``DEFAULT_CHUNK_ACCESSES``) so a trace larger than
memory streams through in bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "AccessChunk",
    "DEFAULT_CHUNK_ACCESSES",
    "MAX_COMPUTE_NS",
    "MAX_THREAD_ID",
    "chunk_problem",
    "concat_chunks",
    "rechunk",
]

DEFAULT_CHUNK_ACCESSES = 1 << 20

MAX_COMPUTE_NS = 1e12
"""Largest ``compute_ns`` before one access: 1000 s. The simulated clock is float64 nanoseconds, so a run keeps
nanosecond resolution only below 2**53 ns (about 104 days); a bound per access keeps ordinary traces far from
that, and the engine checks each thread's total against it (:data:`numasim.engine.stream.MAX_RUN_NS`). Values
beyond it (1e20 ns made the epoch index overflow int64 and the run never end) are rejected."""

MAX_THREAD_ID = (1 << 31) - 1
"""Largest thread id a trace may hold (the ``thread`` column is int32). Ids are labels: a run gives a thread
only to the ids that occur, so a trace of threads 0 and 2**31-1 runs two threads."""


@dataclass(frozen=True)
class AccessChunk:
    """``n`` memory accesses in program order per thread.

    Attributes
    ----------
    thread : ndarray of int32
        Issuing thread id (index into the workload's threads).
    address : ndarray of uint64
        Virtual byte address.
    is_write : ndarray of bool
        Store (True) or load (False).
    size_bytes : ndarray of uint16
        Access size (a 64-byte line for cache-line traffic; 1..4096 for traced loads/stores).
    compute_ns : ndarray of float32
        Time the thread computes before issuing this access (0 for back-to-back accesses).
    """

    thread: np.ndarray
    address: np.ndarray
    is_write: np.ndarray
    size_bytes: np.ndarray
    compute_ns: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.address)
        for name in ("thread", "is_write", "size_bytes", "compute_ns"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"AccessChunk.{name} has {len(getattr(self, name))} entries, address has {n}")

    def __len__(self) -> int:
        return len(self.address)

    @classmethod
    def build(
        cls,
        address: np.ndarray,
        *,
        thread: np.ndarray | int = 0,
        is_write: np.ndarray | bool = False,
        size_bytes: np.ndarray | int = 64,
        compute_ns: np.ndarray | float = 0.0,
    ) -> AccessChunk:
        """Make a chunk, broadcasting scalars (``AccessChunk.build(addrs, thread=3, is_write=True)``)."""
        addr = np.asarray(address, dtype=np.uint64)
        n = len(addr)
        return cls(
            thread=_column(thread, np.int32, n),
            address=addr,
            is_write=_column(is_write, np.bool_, n),
            size_bytes=_column(size_bytes, np.uint16, n),
            compute_ns=_column(compute_ns, np.float32, n),
        )

    def slice(self, start: int, stop: int) -> AccessChunk:
        return AccessChunk(
            self.thread[start:stop],
            self.address[start:stop],
            self.is_write[start:stop],
            self.size_bytes[start:stop],
            self.compute_ns[start:stop],
        )


def _column(value: np.ndarray | float | bool, dtype: type[np.generic], n: int) -> np.ndarray:
    # A scalar fills a new array (np.full: a generator builds thousands of small blocks, and broadcasting then
    # copying costs several times more); an array is broadcast and copied as before.
    v = np.asarray(value, dtype=dtype)
    if v.ndim == 0:
        out = np.empty(n, dtype=dtype)
        out.fill(v)
        return out
    return np.broadcast_to(v, (n,)).copy()


def chunk_problem(chunk: AccessChunk) -> str | None:
    """Describe the first value of ``chunk`` outside its column's range, or None when every value is valid.

    ``thread`` must be 0..:data:`MAX_THREAD_ID`; ``compute_ns`` a finite time in 0..:data:`MAX_COMPUTE_NS`.
    Vectorised: one pass per column.

    Examples
    --------
    >>> chunk_problem(AccessChunk.build(np.arange(3, dtype=np.uint64), compute_ns=5.0)) is None
    True
    >>> chunk_problem(AccessChunk.build(np.arange(3, dtype=np.uint64), compute_ns=float("nan")))
    'access 0: compute_ns = nan is not a time in 0..1e+12 ns'
    """
    thread = np.asarray(chunk.thread)
    if len(thread) and (int(thread.min()) < 0 or int(thread.max()) > MAX_THREAD_ID):
        k = int(np.flatnonzero((thread < 0) | (thread > MAX_THREAD_ID))[0])
        return f"access {k}: thread = {int(thread[k])} is not a thread id in 0..{MAX_THREAD_ID}"
    compute = np.asarray(chunk.compute_ns)
    with np.errstate(invalid="ignore"):
        bad = ~((compute >= 0) & (compute <= MAX_COMPUTE_NS))  # NaN fails both comparisons
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        return f"access {k}: compute_ns = {float(compute[k]):g} is not a time in 0..{MAX_COMPUTE_NS:g} ns"
    return None


def concat_chunks(chunks: Iterable[AccessChunk]) -> AccessChunk:
    """One chunk holding all of ``chunks`` in order (only for inputs known to fit in memory)."""
    parts = list(chunks)
    if not parts:
        return AccessChunk.build(np.zeros(0, dtype=np.uint64))
    return AccessChunk(
        np.concatenate([c.thread for c in parts]),
        np.concatenate([c.address for c in parts]),
        np.concatenate([c.is_write for c in parts]),
        np.concatenate([c.size_bytes for c in parts]),
        np.concatenate([c.compute_ns for c in parts]),
    )


def rechunk(chunks: Iterable[AccessChunk], size: int = DEFAULT_CHUNK_ACCESSES) -> Iterator[AccessChunk]:
    """Re-cut a stream of chunks into chunks of exactly ``size`` accesses (the last may be shorter)."""
    pending: list[AccessChunk] = []
    held = 0
    for c in chunks:
        pending.append(c)
        held += len(c)
        while held >= size:
            merged = concat_chunks(pending)
            yield merged.slice(0, size)
            rest = merged.slice(size, len(merged))
            pending = [rest] if len(rest) else []
            held = len(rest)
    if held:
        yield concat_chunks(pending)
