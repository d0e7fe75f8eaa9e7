"""Exact and epoch fidelities agree within 2 % on total time and per-node cost for small workloads."""

from __future__ import annotations

import numpy as np
import pytest
from _engine_machines import (
    PAGE,
    calibration,
    interleaved_pages,
    seed000_machine,
    spread_pages,
    stream,
    two_node,
)

from numasim.engine import ThreadSpec, simulate
from numasim.workload.access import AccessChunk

CASES = [
    # (machine, kind, threads, nodes of the pages, write fraction, compute_ns, cache)
    ("2node", "seq", 4, [0, 1], 0.0, 0.0, False),
    ("2node", "rand", 4, [0, 1], 0.0, 0.0, False),
    ("2node", "rand", 2, [1], 0.3, 20.0, False),
    ("2node", "seq", 2, [0, 1], 0.5, 2.0, True),
    ("4node", "seq", 4, [0, 1, 2, 3], 0.0, 0.0, False),
    ("4node", "rand", 4, [0, 2], 0.2, 0.0, False),
    ("4node", "rand", 8, [1, 3], 0.0, 5.0, False),
    ("4node", "seq", 8, [0], 0.0, 0.0, True),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}t-{c[3]}" for c in CASES])
def test_exact_and_epoch_agree(case: tuple) -> None:
    name, kind, threads, nodes, wf, compute, cache = case
    m = two_node(caches=cache) if name == "2node" else seed000_machine(caches=cache)
    cal = calibration(m)
    pages = 1 << 13
    pm = interleaved_pages(nodes, pages) if kind == "rand" else spread_pages(nodes, pages // len(nodes))
    # Threads spread over the machine's cpus (node 0 first).
    cpus = [t * len(m.cpus) // threads for t in range(threads)]
    specs = [ThreadSpec(t, cpu=c) for t, c in enumerate(cpus)]
    n = 40_000
    got = {}
    for mode in ("exact", "epoch"):
        got[mode] = simulate(
            m,
            cal,
            specs,
            stream(kind, n, threads, pages * PAGE, write_fraction=wf, compute_ns=compute, seed=3),
            pm,
            mode=mode,
        )
    ex, ep = got["exact"], got["epoch"]
    assert ep.accesses == ex.accesses == n
    assert ep.run_time_ns == pytest.approx(ex.run_time_ns, rel=0.02)
    if not cache:  # the modes differ only in their cache models
        assert ep.run_time_ns == ex.run_time_ns
    for a, b in zip(ex.nodes, ep.nodes, strict=True):
        assert a.accesses == b.accesses
        if a.accesses:
            assert b.load_to_use_mean_ns == pytest.approx(a.load_to_use_mean_ns, rel=0.02)
    for a, b in zip(ex.resources, ep.resources, strict=True):
        assert b.bytes == a.bytes if not cache else True


def test_agreement_when_threads_come_one_after_another_in_the_stream() -> None:
    """A stream holding thread 0's accesses, then thread 1's (started later), plus a thread with none."""
    m = two_node(caches=True)
    cal = calibration(m)
    pm = spread_pages([0, 1], 1 << 11)
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 1 << 12, 30_000).astype(np.uint64) * np.uint64(64) for _ in range(2)]
    chunks = [
        AccessChunk.build(p[i : i + 10_000], thread=t)
        for t, p in enumerate(parts)
        for i in range(0, 30_000, 10_000)
    ]
    specs = [ThreadSpec(0, cpu=0), ThreadSpec(1, cpu=9, start_ns=5000.0), ThreadSpec(2, cpu=3)]
    ex, ep = (simulate(m, cal, specs, iter(chunks), pm, mode=mode) for mode in ("exact", "epoch"))
    assert ep.run_time_ns == pytest.approx(ex.run_time_ns, rel=0.02)
    for a, b in zip(ex.threads, ep.threads, strict=True):
        assert a.accesses == b.accesses and a.start_ns == b.start_ns
        assert b.finish_ns == pytest.approx(a.finish_ns, rel=0.02)
    assert ex.threads[2].accesses == 0 and ex.threads[2].finish_ns == 0.0
    for a, b in zip(ex.cache_levels, ep.cache_levels, strict=True):
        assert abs(a.accesses - b.accesses) <= 0.02 * 30_000


def test_agreement_at_a_saturation_knee() -> None:
    """8 threads of node 0 reading nodes 1 and 3: the die link 1 -> 0 runs at 96-97 %. Both modes queue every
    miss at the same FIFO servers, so even at the knee the totals and per-node latency agree within 2 % (the
    first epoch engine, with fluid queues, needed 8 % here)."""
    m = seed000_machine(caches=False)
    cal = calibration(m)
    pm = interleaved_pages([1, 3], 1 << 13)
    specs = [ThreadSpec(t, cpu=3 * t) for t in range(8)]
    ex, ep = (
        simulate(
            m, cal, specs, stream("rand", 40_000, 8, (1 << 13) * PAGE, compute_ns=5.0, seed=3), pm, mode=mode
        )
        for mode in ("exact", "epoch")
    )
    assert ep.run_time_ns == pytest.approx(ex.run_time_ns, rel=0.02)
    for a, b in zip(ex.nodes, ep.nodes, strict=True):
        if a.accesses:
            assert b.load_to_use_mean_ns == pytest.approx(a.load_to_use_mean_ns, rel=0.02)
    link = next(r for r in ex.resources if r.name == "1->0")
    assert link.utilisation_mean > 0.95


def test_epoch_results_do_not_depend_on_the_window() -> None:
    """The window (how many buffered requests one call of the compiled loop takes) is a speed/memory trade-off:
    an epoch is committed only once every agent's requests in it were seen, whatever the window."""
    m = seed000_machine(caches=True)
    cal = calibration(m)
    pm = interleaved_pages([0, 1, 2, 3], 1 << 13)
    specs = [ThreadSpec(t, cpu=3 * t) for t in range(8)]
    runs = [
        simulate(
            m, cal, specs, stream("rand", 60_000, 8, (1 << 13) * PAGE, compute_ns=2.0, seed=5), pm,
            mode="epoch", window_accesses=w,
        )
        for w in (1 << 11, 1 << 14, 1 << 20)
    ]  # fmt: skip
    for r in runs[1:]:
        assert r.run_time_ns == runs[0].run_time_ns
        assert [t.finish_ns for t in r.threads] == [t.finish_ns for t in runs[0].threads]
        assert [n.accesses for n in r.nodes] == [n.accesses for n in runs[0].nodes]
