"""The feeder hands the engine the same blocks whether it distributes chunks on a background thread or not, and
an error in a chunk surfaces in the engine's thread at that chunk."""

from __future__ import annotations

import numpy as np
import pytest
from _engine_machines import PAGE, seed000_machine, spread_pages

from numasim.engine.stream import Agent, Feeder
from numasim.errors import WorkloadError
from numasim.workload.access import AccessChunk


def _agents(n: int) -> list[Agent]:
    return [Agent(k, f"t{k}", 0, 10, False, 0.0, thread_id=k, cpu=k) for k in range(n)]


def _chunks(bad_at: int | None = None):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    for k in range(6):
        addr = rng.integers(0, 1024 * PAGE, 5000).astype(np.uint64)
        if k == bad_at:
            addr[123] = np.uint64(1 << 40)  # unmapped
        yield AccessChunk.build(addr, thread=rng.integers(0, 3, 5000), size_bytes=rng.integers(1, 100, 5000))


def _feeder(background: bool, chunks) -> Feeder:  # type: ignore[no-untyped-def]
    m = seed000_machine(caches=False)
    index = np.full(max(n.id for n in m.nodes) + 1, -1, dtype=np.int16)
    index[[n.id for n in m.nodes]] = np.arange(len(m.nodes))
    return Feeder(
        chunks,
        _agents(3),
        spread_pages([0, 1], 512),
        index,
        cache_instances=np.zeros((1, 3), dtype=np.int64),
        cache_capacity_lines=np.array([512.0]),
        background=background,
        class_base=np.zeros(3, dtype=np.int64),
    )


def test_background_and_foreground_feeders_give_the_same_blocks() -> None:
    got = {}
    for background in (False, True):
        f = _feeder(background, _chunks())
        while f.pull():
            pass
        f.close()
        got[background] = [[(b.line, b.target, b.prefetched, b.level, b.route_class) for b in buf] for buf in f.buffers]
    for fg, bg in zip(got[False], got[True], strict=True):
        assert len(fg) == len(bg) > 0
        for x, y in zip(fg, bg, strict=True):
            assert all(np.array_equal(u, v) for u, v in zip(x, y, strict=True))


@pytest.mark.parametrize("background", [False, True])
def test_an_error_in_a_chunk_is_raised_in_the_engines_thread_at_that_chunk(background: bool) -> None:
    f = _feeder(background, _chunks(bad_at=3))
    for _ in range(3):
        assert f.pull()
    with pytest.raises(WorkloadError, match="not mapped"):
        f.pull()
    f.close()


def _resident_chunks(n_chunks: int, per_chunk: int, lines: int):  # type: ignore[no-untyped-def]
    """Random loads by 3 threads over ``lines`` lines: a working set the feeder's cache holds."""
    rng = np.random.default_rng(11)
    for _ in range(n_chunks):
        line = rng.integers(0, lines, per_chunk).astype(np.uint64)
        yield AccessChunk.build(line * np.uint64(64), thread=rng.integers(0, 3, per_chunk))


def _resident_feeder(chunks, track_pages: bool = False) -> Feeder:  # type: ignore[no-untyped-def]
    m = seed000_machine(caches=False)
    index = np.full(max(n.id for n in m.nodes) + 1, -1, dtype=np.int16)
    index[[n.id for n in m.nodes]] = np.arange(len(m.nodes))
    return Feeder(
        chunks, _agents(3), spread_pages([0, 1], 8192), index,
        cache_instances=np.zeros((1, 3), dtype=np.int64),
        cache_capacity_lines=np.array([400_000.0]),  # a long carry: 3 capacities, 1.2 Mi accesses
        background=False, class_base=np.zeros(3, dtype=np.int64), track_pages=track_pages,
    )  # fmt: skip


@pytest.mark.parametrize("track_pages", [False, True])
def test_while_the_long_carry_pays_chunks_are_estimated_together(monkeypatch: pytest.MonkeyPatch, track_pages: bool) -> None:
    """A working set the cache holds keeps the long carry (1.2 Mi accesses here); estimating 300 k-access chunks
    one by one would sort each with four times as many carried ones, so the feeder estimates batches of about
    the carry (never with a run-time kernel: it must not read far ahead of the kernel's page moves). Every access
    is handed on once, in order."""
    from numasim.engine import stream

    sizes: list[int] = []
    original = stream.estimate_levels

    def recording(lines, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(lines))
        return original(lines, *args, **kwargs)

    monkeypatch.setattr(stream, "estimate_levels", recording)
    chunks = list(_resident_chunks(12, 300_000, 200_000))
    f = _resident_feeder(iter(chunks), track_pages=track_pages)
    while f.pull():
        pass
    f.close()
    assert sum(sizes) == f.accesses_read == 12 * 300_000
    if track_pages:
        assert sizes == [300_000] * 12
    else:
        assert max(sizes) > 300_000 and max(sizes) <= 1_500_000 and len(sizes) < 12
    lines = np.concatenate([c.address for c in chunks]) >> np.uint64(6)
    threads = np.concatenate([c.thread for c in chunks])
    for agent, buf in enumerate(f.buffers):
        got = np.concatenate([b.line for b in buf])
        assert np.array_equal(got, lines[threads == agent])


def test_a_long_carry_measured_not_to_pay_is_dropped_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random loads over 1 GiB, a cache of 400 k lines (a long carry of 1.2 Mi accesses): the first estimate that
    can count the hits only the long carry finds (fewer than _LONG_HITS of its accesses) keeps just CARRY_ACCESSES
    for the next one. Before, that next window still held the long tail: 2-3x a chunk's accesses sorted after the
    first chunk and after every probe, for hits the feeder had just judged not worth them."""
    from numasim.engine import stream
    from numasim.engine.caches import CARRY_ACCESSES

    tails: list[int] = []
    original = stream.estimate_levels

    def recording(lines, agent, instances, capacity, state, *args, **kwargs):  # type: ignore[no-untyped-def]
        tails.append(len(state.lines))
        return original(lines, agent, instances, capacity, state, *args, **kwargs)

    monkeypatch.setattr(stream, "estimate_levels", recording)
    rng = np.random.default_rng(5)
    per_chunk, n_chunks = 300_000, 11
    chunks = [AccessChunk.build(rng.integers(0, 1 << 24, per_chunk).astype(np.uint64) * np.uint64(64),
                                thread=rng.integers(0, 3, per_chunk)) for _ in range(n_chunks)]  # fmt: skip
    m = seed000_machine(caches=False)
    index = np.full(max(n.id for n in m.nodes) + 1, -1, dtype=np.int16)
    index[[n.id for n in m.nodes]] = np.arange(len(m.nodes))
    f = Feeder(
        iter(chunks), _agents(3), spread_pages([0, 1], 1 << 18), index,
        cache_instances=np.zeros((1, 3), dtype=np.int64), cache_capacity_lines=np.array([400_000.0]),
        background=False, class_base=np.zeros(3, dtype=np.int64),
    )  # fmt: skip
    while f.pull():
        pass
    f.close()
    probe = 400_000  # the probe carries the largest cache's lines
    # the first chunk whole (nothing measured yet); the probe's tail (the 8th estimate carries it) once
    assert tails == [0, per_chunk] + [CARRY_ACCESSES] * 6 + [probe] + [CARRY_ACCESSES] * 2
