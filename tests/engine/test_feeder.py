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
