"""Turn a :class:`~numasim.workload.spec.Workload` and a seed into a stream of :class:`AccessChunk`.

Each thread walks its phases in order, producing blocks of ``workload.block_accesses`` accesses (a phase's last
block may be shorter). The threads' blocks are interleaved round-robin, so every thread progresses at the same
pace through the stream, and the interleaved blocks are re-cut into chunks of ``chunk_accesses``.

Randomness: ``SeedSequence(seed).spawn(n_threads)`` gives each thread its stream, and each thread's sequence
spawns one child per phase (then one for addresses and one for the read/write mix), so adding a phase or a
thread does not perturb the others, and the output does not depend on ``chunk_accesses``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from numasim.workload.access import DEFAULT_CHUNK_ACCESSES, AccessChunk, rechunk
from numasim.workload.layout import Region, layout
from numasim.workload.patterns import make_walker
from numasim.workload.spec import Workload

__all__ = ["generate", "thread_blocks", "phase_accesses", "total_accesses"]


def phase_accesses(workload: Workload, index: int, regions: dict[str, Region] | None = None) -> dict[int, int]:
    """Accesses each thread makes in phase ``index`` (thread id -> count; absent threads are not listed)."""
    regions = regions if regions is not None else layout(workload)
    phase = workload.phases[index]
    members = workload.phase_threads(index)
    out: dict[int, int] = {}
    for rank, tid in enumerate(members):
        if phase.accesses is not None:
            out[tid] = phase.accesses
        elif phase.duration_ns is not None:
            out[tid] = max(1, round(phase.duration_ns / (phase.compute_ns + phase.assumed_access_ns)))
        else:
            # Natural length needs the walker's geometry; a throwaway rng is fine (length is not random).
            walker = make_walker(phase, regions, rank, len(members), np.random.default_rng(0))
            out[tid] = int(np.ceil((phase.passes or 1.0) * walker.length))
    return out


def total_accesses(workload: Workload) -> int:
    """Accesses the whole workload makes (for progress bars and sizing)."""
    regions = layout(workload)
    return sum(sum(phase_accesses(workload, i, regions).values()) for i in range(len(workload.phases)))


def thread_blocks(workload: Workload, thread: int, seed: int = 0) -> Iterator[AccessChunk]:
    """Thread ``thread``'s accesses, phase after phase, in blocks of at most ``workload.block_accesses``."""
    regions = layout(workload)
    thread_seq = np.random.SeedSequence(seed).spawn(len(workload.threads))[thread]
    phase_seqs = thread_seq.spawn(max(1, len(workload.phases)))
    block = workload.block_accesses
    for index, phase in enumerate(workload.phases):
        members = workload.phase_threads(index)
        if thread not in members:
            continue
        count = phase_accesses(workload, index, regions)[thread]
        addr_seq, write_seq = phase_seqs[index].spawn(2)
        walker = make_walker(phase, regions, members.index(thread), len(members), np.random.default_rng(addr_seq))
        write_rng = np.random.default_rng(write_seq)
        for start in range(0, count, block):
            n = min(block, count - start)
            address, is_write = walker.take(start, n)
            if is_write is None:
                if phase.write_fraction >= 1.0:
                    is_write = np.ones(n, dtype=bool)
                elif phase.write_fraction > 0.0:
                    is_write = write_rng.random(n) < phase.write_fraction
                else:
                    is_write = np.zeros(n, dtype=bool)
            yield AccessChunk.build(
                address,
                thread=thread,
                is_write=is_write,
                size_bytes=phase.size_bytes,
                compute_ns=phase.compute_ns,
            )


def _round_robin(workload: Workload, seed: int) -> Iterator[AccessChunk]:
    streams = {t.id: thread_blocks(workload, t.id, seed) for t in workload.threads}
    while streams:
        for tid in list(streams):
            block = next(streams[tid], None)
            if block is None:
                del streams[tid]
            elif len(block):
                yield block


def generate(
    workload: Workload, seed: int = 0, *, chunk_accesses: int = DEFAULT_CHUNK_ACCESSES
) -> Iterator[AccessChunk]:
    """The workload's accesses as chunks of ``chunk_accesses`` (the last may be shorter).

    Examples
    --------
    >>> from numasim.workload.spec import loads_workload
    >>> w = loads_workload('''
    ... block_accesses = 128
    ... threads = [{id = 0}, {id = 1}]
    ... allocations = [{name = "a", size_bytes = "64K"}]
    ... phases = [{pattern = "sequential", allocation = "a", split = true}]
    ... ''')
    >>> chunks = list(generate(w, seed=1, chunk_accesses=256))
    >>> sum(len(c) for c in chunks), sorted(set(chunks[0].thread.tolist()))
    (1024, [0, 1])
    """
    if chunk_accesses < 1:
        raise ValueError(f"chunk_accesses must be positive, got {chunk_accesses}")
    return rechunk(_round_robin(workload, seed), chunk_accesses)
