"""Workload generation is linear in the thread count, and its streams are the ones the seed defines.

Issue 13, finding 3: each thread recomputed every member's access count (building a walker per member) and
spawned the seed sequences of every thread, so generation grew with the square of the thread count. These
tests count the work instead of timing it.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from numasim.workload.access import concat_chunks
from numasim.workload.layout import layout
from numasim.workload.patterns import make_walker
from numasim.workload.spec import loads_workload

# The module, not the function numasim.workload re-exports under the same name.
gen = importlib.import_module("numasim.workload.generate")

NATURAL = """
threads = [{{count = {n}, node = 0}}]
block_accesses = 64
allocations = [{{name = "a", size_bytes = "1M"}}, {{name = "b", size_bytes = "1M"}}, {{name = "c", size_bytes = "1M"}}]
[[phases]]
pattern = "stream_triad"
split = true
[[phases]]
pattern = "random"
allocation = "a"
split = true
write_fraction = 0.5
[[phases]]
pattern = "pointer_chase"
allocation = "b"
split = true
[[phases]]
pattern = "zipf"
allocation = "c"
accesses = 100
write_fraction = 0.25
"""


def _count_walkers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]

    def counting(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return make_walker(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gen, "make_walker", counting)
    return calls


@pytest.mark.parametrize("n", [8, 64])
def test_walkers_built_grow_linearly_with_threads(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    w = loads_workload(NATURAL.format(n=n))
    expected = gen.total_accesses(w)
    calls = _count_walkers(monkeypatch)
    assert sum(len(c) for c in gen.generate(w, seed=1)) == expected
    # One walker per (thread, phase) to generate, plus one per (thread, natural-length phase) to size them:
    # before the fix each thread sized every member, n * n per phase.
    assert calls[0] <= 2 * n * len(w.phases)


def test_thread_streams_are_the_seed_sequences_children() -> None:
    # Thread t, phase i draws from SeedSequence(seed).spawn(threads)[t].spawn(phases)[i].spawn(2): addresses
    # from child 0, the read/write mix from child 1. Rebuilt here the slow way, for every thread and phase.
    n, seed = 6, 11
    w = loads_workload(NATURAL.format(n=n))
    regions = layout(w)
    for t in range(n):
        got = concat_chunks(gen.thread_blocks(w, t, seed))
        phase_seqs = np.random.SeedSequence(seed).spawn(n)[t].spawn(len(w.phases))
        start = 0
        for i, phase in enumerate(w.phases):
            count = gen.phase_accesses(w, i, regions)[t]
            addr_seq, write_seq = phase_seqs[i].spawn(2)
            walker = make_walker(phase, regions, t, n, np.random.default_rng(addr_seq))
            write_rng = np.random.default_rng(write_seq)
            addr, writes = [], []
            for s in range(0, count, w.block_accesses):
                k = min(w.block_accesses, count - s)
                a, wr = walker.take(s, k)
                addr.append(a)
                writes.append(wr if wr is not None else write_rng.random(k) < phase.write_fraction)
            assert np.array_equal(got.address[start:start + count], np.concatenate(addr)), (t, i)
            assert np.array_equal(got.is_write[start:start + count], np.concatenate(writes)), (t, i)
            start += count
        assert start == len(got)


def test_a_deterministic_walker_needs_no_rng_and_a_random_one_refuses_none() -> None:
    w = loads_workload(NATURAL.format(n=2))
    regions = layout(w)
    assert make_walker(w.phases[0], regions, 0, 2, None).length > 0
    with pytest.raises(TypeError, match="RandomPhase"):
        make_walker(w.phases[1], regions, 0, 2, None)
