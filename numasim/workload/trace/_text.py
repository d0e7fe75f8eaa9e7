"""Shared plumbing of the text trace readers: numbered lines in, bounded :class:`AccessChunk` out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np

from numasim.fileio import atomic_path
from numasim.workload.access import AccessChunk

__all__ = ["ChunkBuilder", "numbered_lines", "atomic_text_file", "atomic_path", "TEXT_CHUNK_ACCESSES"]

#: Text traces are parsed in Python line by line; smaller chunks keep the builder's lists small.
TEXT_CHUNK_ACCESSES = 1 << 16


class ChunkBuilder:
    """Collects parsed accesses in lists and hands out an :class:`AccessChunk` every ``size`` accesses."""

    def __init__(self, size: int = TEXT_CHUNK_ACCESSES) -> None:
        self.size = size
        self._clear()

    def _clear(self) -> None:
        self.thread: list[int] = []
        self.address: list[int] = []
        self.is_write: list[bool] = []
        self.size_bytes: list[int] = []
        self.compute_ns: list[float] = []

    def add(self, thread: int, address: int, is_write: bool, size_bytes: int, compute_ns: float = 0.0) -> None:
        self.thread.append(thread)
        self.address.append(address)
        self.is_write.append(is_write)
        self.size_bytes.append(size_bytes)
        self.compute_ns.append(compute_ns)

    def full(self) -> bool:
        return len(self.address) >= self.size

    def take(self) -> AccessChunk:
        chunk = AccessChunk(
            thread=np.array(self.thread, dtype=np.int32),
            address=np.array(self.address, dtype=np.uint64),
            is_write=np.array(self.is_write, dtype=bool),
            size_bytes=np.array(self.size_bytes, dtype=np.uint16),
            compute_ns=np.array(self.compute_ns, dtype=np.float32),
        )
        self._clear()
        return chunk

    def __len__(self) -> int:
        return len(self.address)


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` pairs, 1-based, without the newline; undecodable bytes become U+FFFD."""
    with path.open("r", encoding="utf-8", errors="replace", newline=None) as f:
        for number, line in enumerate(f, start=1):
            yield number, line.rstrip("\n")


@contextmanager
def atomic_text_file(path: str | Path) -> Iterator[IO[str]]:
    """Open a text file for writing that only appears at ``path`` when the block succeeds."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
        yield f
