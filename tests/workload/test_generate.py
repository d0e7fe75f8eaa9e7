"""Generators: determinism, chunking, and the statistical properties of each pattern."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.access import concat_chunks
from numasim.workload.generate import generate, phase_accesses, thread_blocks, total_accesses
from numasim.workload.layout import layout
from numasim.workload.patterns import zipf_ranks
from numasim.workload.spec import Workload, loads_workload


def one_phase(phase: str, size: str = "1M", threads: int = 1, block: int = 1024) -> Workload:
    ts = ", ".join(f"{{id = {i}}}" for i in range(threads))
    return loads_workload(
        f'block_accesses = {block}\nthreads = [{ts}]\n'
        f'allocations = [{{name = "a", size_bytes = "{size}"}}, {{name = "b", size_bytes = "{size}"}}, '
        f'{{name = "c", size_bytes = "{size}"}}]\n'
        f"[[phases]]\n{phase}\n"
    )


def all_of(w: Workload, seed: int = 0, chunk: int = 1 << 20):  # type: ignore[no-untyped-def]
    return concat_chunks(generate(w, seed, chunk_accesses=chunk))


def test_same_seed_same_chunks_different_seed_differs() -> None:
    w = one_phase('pattern = "random"\nallocation = "a"\naccesses = 5000\nwrite_fraction = 0.3', threads=2)
    a, b, c = all_of(w, 7), all_of(w, 7), all_of(w, 8)
    for name in ("thread", "address", "is_write", "size_bytes", "compute_ns"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.address, c.address)


@given(st.integers(min_value=1, max_value=5000))
def test_stream_does_not_depend_on_chunk_size(chunk: int) -> None:
    w = one_phase('pattern = "zipf"\nallocation = "a"\naccesses = 3000\nwrite_fraction = 0.5', threads=3, block=500)
    ref = all_of(w, 3)
    chunks = list(generate(w, 3, chunk_accesses=chunk))
    assert all(len(c) == chunk for c in chunks[:-1]) and 0 < len(chunks[-1]) <= chunk
    got = concat_chunks(chunks)
    assert np.array_equal(ref.address, got.address) and np.array_equal(ref.thread, got.thread)


def test_round_robin_blocks() -> None:
    w = one_phase('pattern = "sequential"\nallocation = "a"\naccesses = 300', threads=3, block=100)
    c = all_of(w)
    assert c.thread.tolist() == [0] * 100 + [1] * 100 + [2] * 100 + [0] * 100 + [1] * 100 + [2] * 100 + [0] * 100 + [1] * 100 + [2] * 100


def test_sequential_and_strided() -> None:
    w = one_phase('pattern = "sequential"\nallocation = "a"\npasses = 1')
    base = layout(w)["a"].base
    c = all_of(w)
    assert len(c) == (1 << 20) // 64
    assert np.all(np.diff(c.address.astype(np.int64)) == 64) and int(c.address[0]) == base
    w = one_phase('pattern = "strided"\nallocation = "a"\nstride_bytes = 4096\naccesses = 600')
    c = all_of(w)
    d = np.diff(c.address.astype(np.int64))
    # 256 pages per pass: +4096 within a pass, a wrap back to the start every 256 accesses
    assert set(d.tolist()) == {4096, -255 * 4096}
    assert int(c.address.max()) < layout(w)["a"].end


def test_split_gives_each_thread_its_slice() -> None:
    w = one_phase('pattern = "sequential"\nallocation = "a"\nsplit = true', threads=4)
    c = all_of(w)
    r = layout(w)["a"]
    quarter = r.size_bytes // 4
    for t in range(4):
        a = c.address[c.thread == t].astype(np.int64) - r.base
        assert a.min() == t * quarter and a.max() == (t + 1) * quarter - 64
    assert phase_accesses(w, 0) == {t: quarter // 64 for t in range(4)}


def test_random_within_allocation_and_write_fraction() -> None:
    w = one_phase('pattern = "random"\nallocation = "b"\naccesses = 40000\nwrite_fraction = 0.25\ncompute_ns = 3.5')
    r = layout(w)["b"]
    c = all_of(w)
    assert int(c.address.min()) >= r.base and int(c.address.max()) < r.end
    assert np.all(c.address % 64 == 0)
    assert abs(c.is_write.mean() - 0.25) < 0.02
    assert np.all(c.compute_ns == np.float32(3.5))
    # roughly uniform over the pages
    pages = (c.address - np.uint64(r.base)) // np.uint64(PAGE_SIZE_BYTES)
    counts = np.bincount(pages.astype(np.int64), minlength=256)
    assert counts.min() > 0.5 * counts.mean() and counts.max() < 1.5 * counts.mean()


def test_pointer_chase_visits_every_line_once_per_pass() -> None:
    w = one_phase('pattern = "pointer_chase"\nallocation = "a"\npasses = 2', size="256K")
    c = all_of(w)
    lines = (256 << 10) // 64
    assert len(c) == 2 * lines
    first = c.address[:lines]
    assert len(np.unique(first)) == lines
    assert np.array_equal(first, c.address[lines:])  # a cycle: the second pass repeats the first
    assert not np.all(np.diff(first.astype(np.int64)) > 0)  # not sequential


def test_zipf_hot_fraction() -> None:
    w = one_phase(
        'pattern = "zipf"\nallocation = "a"\naccesses = 50000\nexponent = 0.8\n'
        "hot_fraction = 0.1\nhot_access_fraction = 0.9",
        size="4M",
    )
    c = all_of(w)
    r = layout(w)["a"]
    pages = ((c.address - np.uint64(r.base)) // np.uint64(PAGE_SIZE_BYTES)).astype(np.int64)
    counts = np.sort(np.bincount(pages, minlength=1024))[::-1]
    top = counts[: round(0.1 * 1024)].sum() / counts.sum()
    assert abs(top - 0.9) < 0.02


def test_zipf_matches_analytic_share() -> None:
    n, s = 1000, 1.0
    ranks = zipf_ranks(np.random.default_rng(1), n, s, 200_000)
    weights = np.arange(1, n + 1, dtype=float) ** -s
    expected = weights[:100].sum() / weights.sum()
    assert abs((ranks < 100).mean() - expected) < 0.01
    # the continuous approximation used for huge regions agrees with the table
    big = zipf_ranks(np.random.default_rng(1), 4_000_000, s, 200_000)
    w_big = np.log(400_001) / np.log(4_000_001)  # share of the top 10% under the continuous law
    assert abs((big < 400_000).mean() - w_big) < 0.01


def test_stream_triad_pattern() -> None:
    w = one_phase('pattern = "stream_triad"\npasses = 1', size="64K", threads=2)
    c = all_of(w)
    regions = layout(w)
    lines = (64 << 10) // 64
    assert len(c) == 3 * lines
    # triad: a = b + s*c -> reads of b and c, writes of a, one each per line
    for name, write in (("a", True), ("b", False), ("c", False)):
        r = regions[name]
        inside = (c.address >= np.uint64(r.base)) & (c.address < np.uint64(r.end))
        assert inside.sum() == lines
        assert np.all(c.is_write[inside] == write)
    assert abs(c.is_write.mean() - 1 / 3) < 1e-9
    # split: each thread does its half of each array
    ra = regions["a"]
    a0 = c.address[(c.thread == 0) & c.is_write].astype(np.int64) - ra.base
    assert a0.max() < (32 << 10)


def test_phases_malloc_and_duration() -> None:
    w = loads_workload(
        """
threads = [{id = 0}, {id = 1}]
allocations = [{name = "a", size_bytes = "1M"}, {name = "b", size_bytes = "1M"}]
[[phases]]
pattern = "sequential"
allocation = "a"
accesses = 100
threads = [0]
[[phases]]
pattern = "random"
allocation = "b"
duration_ns = 10000
compute_ns = 0
assumed_access_ns = 100
malloc = ["b"]
free = ["a"]
"""
    )
    assert phase_accesses(w, 1) == {0: 100, 1: 100}
    assert total_accesses(w) == 300
    t0 = concat_chunks(thread_blocks(w, 0, 0))
    ra, rb = layout(w)["a"], layout(w)["b"]
    assert np.all(t0.address[:100] < np.uint64(ra.end)) and np.all(t0.address[100:] >= np.uint64(rb.base))


def test_chase_over_huge_region_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import numasim.workload.patterns as patterns

    monkeypatch.setattr(patterns, "MAX_CHASE_SLOTS", 1024)
    w = one_phase('pattern = "pointer_chase"\nallocation = "a"\naccesses = 5000', size="1M")  # 16384 lines
    c = all_of(w)
    r = layout(w)["a"]
    assert int(c.address.min()) >= r.base and int(c.address.max()) < r.end
    assert len(np.unique(c.address[:1024])) == 1024
