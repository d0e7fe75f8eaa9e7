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
from dataclasses import dataclass

import numpy as np

from numasim.workload.access import DEFAULT_CHUNK_ACCESSES, AccessChunk, rechunk
from numasim.workload.layout import Region, layout
from numasim.workload.patterns import make_walker
from numasim.workload.spec import PointerChasePhase, RandomPhase, Workload, ZipfPhase

__all__ = ["generate", "thread_blocks", "phase_accesses", "total_accesses"]


def phase_accesses(workload: Workload, index: int, regions: dict[str, Region] | None = None) -> dict[int, int]:
    """Accesses each thread makes in phase ``index`` (thread id -> count; absent threads are not listed)."""
    regions = regions if regions is not None else layout(workload)
    phase = workload.phases[index]
    members = workload.phase_threads(index)
    if phase.accesses is not None:
        return dict.fromkeys(members, phase.accesses)
    if phase.duration_ns is not None:
        return dict.fromkeys(members, max(1, round(phase.duration_ns / (phase.compute_ns + phase.assumed_access_ns))))
    # Natural length needs the walker's geometry (a thread's slice of a split region); the length is not random,
    # so one throwaway rng serves every member.
    rng = np.random.default_rng(0)
    out: dict[int, int] = {}
    for rank, tid in enumerate(members):
        walker = make_walker(phase, regions, rank, len(members), rng)
        out[tid] = int(np.ceil((phase.passes or 1.0) * walker.length))
    return out


def total_accesses(workload: Workload) -> int:
    """Accesses the whole workload makes (for progress bars and sizing)."""
    regions = layout(workload)
    return sum(sum(phase_accesses(workload, i, regions).values()) for i in range(len(workload.phases)))


@dataclass(frozen=True)
class _Plan:
    """What every thread's stream shares, computed once per workload: the layout, and per phase its members,
    each member's rank among them and its access count. Computing these per thread made generation quadratic in
    the thread count."""

    regions: dict[str, Region]
    members: list[list[int]]
    rank: list[dict[int, int]]
    counts: list[dict[int, int]]

    @classmethod
    def of(cls, workload: Workload) -> _Plan:
        regions = layout(workload)
        members = [workload.phase_threads(i) for i in range(len(workload.phases))]
        rank = [{tid: r for r, tid in enumerate(m)} for m in members]
        counts = [phase_accesses(workload, i, regions) for i in range(len(workload.phases))]
        return cls(regions, members, rank, counts)


def _thread_seed(seed: int, thread: int) -> np.random.SeedSequence:
    # Child ``thread`` of SeedSequence(seed).spawn(n), built directly: spawning all n children for each
    # thread is quadratic in the thread count, and SeedSequence defines child i by its spawn_key (i,).
    return np.random.SeedSequence(seed, spawn_key=(thread,))


def thread_blocks(workload: Workload, thread: int, seed: int = 0) -> Iterator[AccessChunk]:
    """Thread ``thread``'s accesses, phase after phase, in blocks of at most ``workload.block_accesses``."""
    return _thread_blocks(workload, thread, seed, _Plan.of(workload))


def _thread_blocks(workload: Workload, thread: int, seed: int, plan: _Plan) -> Iterator[AccessChunk]:
    thread_seq = _thread_seed(seed, thread)
    block = workload.block_accesses
    for index, phase in enumerate(workload.phases):
        rank = plan.rank[index].get(thread)
        if rank is None:
            continue
        count = plan.counts[index][thread]
        # The phase's address and read/write generators, as SeedSequence(seed).spawn(threads)[thread]
        # .spawn(phases)[index].spawn(2) defines them, made only when the phase draws random numbers: making
        # them costs more than a small block of a deterministic pattern (STREAM, sequential, strided).
        seqs = _LazySeeds(thread_seq, index)
        rng = np.random.default_rng(seqs.child(0)) if _is_random(phase) else None
        walker = make_walker(phase, plan.regions, rank, len(plan.members[index]), rng)
        write_rng: np.random.Generator | None = None
        for start in range(0, count, block):
            n = min(block, count - start)
            address, is_write = walker.take(start, n)
            if is_write is None:
                if phase.write_fraction >= 1.0:
                    is_write = np.ones(n, dtype=bool)
                elif phase.write_fraction > 0.0:
                    if write_rng is None:
                        write_rng = np.random.default_rng(seqs.child(1))
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


class _LazySeeds:
    """Child ``k`` of phase ``index``'s seed sequence, without spawning every phase's sequence up front."""

    def __init__(self, thread_seq: np.random.SeedSequence, index: int) -> None:
        self.thread_seq = thread_seq
        self.index = index

    def child(self, k: int) -> np.random.SeedSequence:
        # thread_seq.spawn(p)[index].spawn(2)[k] is, by SeedSequence's definition, the sequence with the
        # parent's entropy and spawn key extended by (index, k).
        key = (*self.thread_seq.spawn_key, self.index, k)
        return np.random.SeedSequence(self.thread_seq.entropy, spawn_key=key, pool_size=self.thread_seq.pool_size)


def _is_random(phase: object) -> bool:
    return isinstance(phase, RandomPhase | PointerChasePhase | ZipfPhase)


def _round_robin(workload: Workload, seed: int) -> Iterator[AccessChunk]:
    plan = _Plan.of(workload)
    streams = {t.id: _thread_blocks(workload, t.id, seed, plan) for t in workload.threads}
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
