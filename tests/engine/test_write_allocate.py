"""Write-allocate evasion (Intel's SpecI2M): a full-line write skips its read for ownership when lines queue at
its controller (numasim/timing/model.py, ``write_allocate_evaded``; both engines, ``_evasion_rule``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine import PageMap, SimulationResult, ThreadSpec, simulate
from numasim.timing.model import (
    EVASION_FULL_QUEUE_LINES,
    EVASION_ONSET_QUEUE_LINES,
    Calibration,
    CoreTiming,
    nominal_calibration,
    write_allocate_evaded,
)
from numasim.topology.builders import glueless
from numasim.topology.model import Machine
from numasim.workload.access import AccessChunk, concat_chunks

_A, _B = 1 << 32, 1 << 34


def _machine() -> Machine:
    return glueless(2, cpus_per_node=8)


def _calibration(m: Machine, evasion: float, mlp: int = 32) -> Calibration:
    cal = nominal_calibration(m)
    # 32 misses in flight a thread: eight threads can queue the 256 lines that skip every read
    core = CoreTiming(write_cost_factor=2.0, max_outstanding_misses=mlp, write_allocate_evasion=evasion)
    return Calibration.model_validate({**cal.model_dump(), "core": core.model_dump(), "id": ""})


def _copy(threads: int, lines: int, write_bytes: int = 64, node: int = 0) -> tuple[list[AccessChunk], PageMap]:
    """``threads`` threads each copying ``lines`` lines of array a into array b (STREAM Copy, line by line), both
    arrays on ``node``; each write stores ``write_bytes`` of its line."""
    pm = PageMap(4096)
    pages = threads * lines * 64 // 4096 + 2
    pm.assign(_A, np.full(pages, node, dtype=np.int16))
    pm.assign(_B, np.full(pages, node, dtype=np.int16))
    out = []
    for t in range(threads):
        off = (np.arange(lines, dtype=np.uint64) + np.uint64(t * lines)) * np.uint64(64)
        addr = np.stack([np.uint64(_A) + off, np.uint64(_B) + off], axis=1).ravel()
        wr = np.zeros((lines, 2), dtype=bool)
        wr[:, 1] = True
        out.append(AccessChunk.build(addr, thread=t, is_write=wr.ravel(), size_bytes=np.where(wr.ravel(), write_bytes, 64)))
    return [concat_chunks(out)], pm


def _run(evasion: float, threads: int, lines: int = 3000, mode: str = "epoch", write_bytes: int = 64,
         mlp: int = 32) -> SimulationResult:
    m = _machine()
    chunks, pm = _copy(threads, lines, write_bytes)
    specs = [ThreadSpec(t, cpu=t) for t in range(threads)]
    return simulate(m, _calibration(m, evasion, mlp), specs, chunks, pm, mode=mode, record_latencies=False)


def _controller(r: SimulationResult, node: int = 0):  # type: ignore[no-untyped-def]
    return next(x for x in r.resources if x.kind == "controller" and x.name == f"mc{node}")


def test_the_ramp_runs_from_the_onset_to_the_full_backlog() -> None:
    q = np.array([0.0, EVASION_ONSET_QUEUE_LINES, (EVASION_ONSET_QUEUE_LINES + EVASION_FULL_QUEUE_LINES) / 2,
                  EVASION_FULL_QUEUE_LINES, 10 * EVASION_FULL_QUEUE_LINES])
    assert write_allocate_evaded(q, 0.5).tolist() == pytest.approx([0.0, 0.0, 0.25, 0.5, 0.5])


@pytest.mark.parametrize("mode", ["exact", "epoch"])
def test_a_saturating_copy_skips_reads_for_ownership_and_runs_faster(mode: str) -> None:
    without = _run(0.0, threads=8, mode=mode)
    with_it = _run(1.0, threads=8, mode=mode)
    assert without.write_allocate is None
    wa = with_it.write_allocate
    assert wa is not None and wa["evasion"] == 1.0
    writes = 8 * 3000
    # most writes found a deep queue and skipped their read; none can skip more than one
    assert 0.5 * writes < wa["total"] <= writes
    assert wa["reads_for_ownership_skipped"][0] == wa["total"]
    # the copy is bandwidth-bound: a read and a write-back per element instead of two reads and a write-back
    assert with_it.run_time_ns < 0.85 * without.run_time_ns
    # what the controller did is what it was charged, and never more than it can do
    for r in (without, with_it):
        assert _controller(r).utilisation_mean <= 1.0 + 1e-9
    # it was busy for what it served: each element's read and write-back at least
    mc = _controller(with_it)
    m = _machine()
    ctl = m.nodes[0].controller
    assert ctl is not None
    floor_ns = writes * 64 / ctl.read_bandwidth_gb_s + writes * 64 / ctl.effective_write_bandwidth_gb_s
    assert mc.busy_ns >= floor_ns * (1 - 1e-9)


def test_both_engines_skip_the_same_reads() -> None:
    exact, epoch = _run(1.0, threads=6, mode="exact"), _run(1.0, threads=6, mode="epoch")
    assert exact.write_allocate is not None and epoch.write_allocate is not None
    assert epoch.write_allocate["total"] == pytest.approx(exact.write_allocate["total"], rel=0.05)
    assert epoch.run_time_ns == pytest.approx(exact.run_time_ns, rel=0.02)


@pytest.mark.parametrize("mode", ["exact", "epoch"])
def test_partial_line_writes_and_light_loads_skip_nothing(mode: str) -> None:
    # a store to part of a line must read the rest (mlc writes partial lines on SpecItoM parts for this reason)
    partial, off = _run(1.0, threads=8, mode=mode, write_bytes=32), _run(0.0, threads=8, mode=mode, write_bytes=32)
    assert partial.write_allocate is not None and partial.write_allocate["total"] == 0
    assert partial.run_time_ns == off.run_time_ns
    # one thread with 10 misses in flight cannot queue the 32 lines it takes: no read is skipped
    alone, alone_off = _run(1.0, threads=1, mode=mode, mlp=10), _run(0.0, threads=1, mode=mode, mlp=10)
    assert alone.write_allocate is not None and alone.write_allocate["total"] == 0
    assert alone.run_time_ns == alone_off.run_time_ns


@settings(max_examples=10, deadline=None)
@given(
    evasion=st.floats(0.05, 1.0),
    threads=st.integers(1, 8),
    partial=st.booleans(),
    mode=st.sampled_from(["exact", "epoch"]),
)
def test_evasion_never_slows_a_run_nor_overdrives_a_controller(evasion: float, threads: int, partial: bool,
                                                               mode: str) -> None:
    lines = 1500
    on = _run(evasion, threads, lines, mode, 32 if partial else 64)
    off = _run(0.0, threads, lines, mode, 32 if partial else 64)
    # (a shorter service can reorder a queue's later arrivals, which moves the last completion by a few ns)
    assert on.run_time_ns <= off.run_time_ns * 1.005
    assert on.write_allocate is not None
    assert 0 <= on.write_allocate["total"] <= threads * lines * evasion + 1
    if partial:
        assert on.write_allocate["total"] == 0
    assert _controller(on).utilisation_mean <= 1.0 + 1e-9


def test_no_evasion_keeps_calibration_ids() -> None:
    m = _machine()
    cal = nominal_calibration(m).model_dump()
    body = {**cal, "core": CoreTiming(write_cost_factor=2.0, max_outstanding_misses=32).model_dump(), "id": ""}
    body["core"].pop("write_allocate_evasion")  # a calibration written before the field existed
    assert _calibration(m, 0.0).id == Calibration.model_validate(body).id
    assert _calibration(m, 1.0).id != _calibration(m, 0.0).id


def test_a_workload_run_reports_the_skipped_reads() -> None:
    from numasim.report.run_report import format_run_report
    from numasim.workload.run import run_workload
    from numasim.workload.spec import Workload

    m = _machine()
    w = Workload.model_validate({
        "name": "copy",
        "threads": [{"id": t, "cpu": t} for t in range(8)],
        "allocations": [{"name": n, "size_bytes": "8M", "first_touch": 0, "policy": "bind:0"} for n in ("a", "c")],
        "phases": [{"pattern": "stream_copy", "arrays": ["a", "c"], "threads": list(range(8)), "passes": 1}],
    })  # fmt: skip
    out = run_workload(m, w, _calibration(m, 1.0))
    wa = out.result.write_allocate
    assert wa is not None and wa["total"] > 0
    assert out.result.to_dict()["write_allocate"] == wa
    assert "write-allocate evasion (calibration: up to 1 of each full-line write's read for ownership)" in (
        format_run_report(out))
    off = run_workload(m, w, _calibration(m, 0.0))
    assert off.result.write_allocate is None and off.result.run_time_ns > out.result.run_time_ns


def _run_stores(evasion: float, store_bytes: int, repeat_word: bool = False, threads: int = 8,
                lines: int = 1500) -> SimulationResult:
    """The copy of :func:`_copy`, its stores ``store_bytes`` wide: ``64 / store_bytes`` of them per line (or, with
    ``repeat_word``, as many to the line's first word)."""
    m = _machine()
    per = 64 // store_bytes
    pm = PageMap(4096)
    pages = threads * lines * 64 // 4096 + 2
    pm.assign(_A, np.zeros(pages, dtype=np.int16))
    pm.assign(_B, np.zeros(pages, dtype=np.int16))
    out = []
    for t in range(threads):
        line = (np.arange(lines, dtype=np.uint64) + np.uint64(t * lines)) * np.uint64(64)
        word = np.zeros(per, dtype=np.uint64) if repeat_word else np.arange(per, dtype=np.uint64) * np.uint64(store_bytes)
        store = (np.uint64(_B) + line[:, None] + word[None, :]).ravel()
        load = np.repeat(np.uint64(_A) + line, per)
        addr = np.stack([load, store], axis=1).ravel()
        size = np.tile(np.array([store_bytes, store_bytes], dtype=np.int64), len(load))
        wr = np.tile(np.array([False, True]), len(load))
        out.append(AccessChunk.build(addr, thread=t, is_write=wr, size_bytes=size))
    specs = [ThreadSpec(t, cpu=t) for t in range(threads)]
    return simulate(m, _calibration(m, evasion), specs, [concat_chunks(out)], pm, record_latencies=False)


def test_lines_written_whole_by_several_stores_skip_their_reads_and_rewritten_words_do_not() -> None:
    # a copy loop's 8-byte stores fill each line: the hardware claims it as a 64-byte store's line
    by_8 = _run_stores(1.0, 8)
    assert by_8.write_allocate is not None and by_8.write_allocate["total"] > 0.5 * 8 * 1500
    assert by_8.run_time_ns < 0.9 * _run_stores(0.0, 8).run_time_ns
    # eight stores to the same word leave 56 bytes of the line to read
    same_word = _run_stores(1.0, 8, repeat_word=True)
    assert same_word.write_allocate is not None and same_word.write_allocate["total"] == 0
    assert same_word.run_time_ns == _run_stores(0.0, 8, repeat_word=True).run_time_ns


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 63), st.integers(1, 80), st.booleans()),
                min_size=1, max_size=40))
def test_full_line_writes_is_the_union_of_each_agents_bytes(accesses: list[tuple[int, int, int, int, bool]]) -> None:
    from numasim.engine.stream import full_line_writes

    # (line, agent, offset, size, write); an access past its line's end continues into the next line's request
    rows = []
    for line, agent, off, size, write in accesses:
        start = line * 64 + off
        end = start + size
        for ln in range(start // 64, (end - 1) // 64 + 1):
            rows.append((ln, agent, start, end, write))
    ln, ag, lo, hi, wr = (np.array(c) for c in zip(*rows, strict=True))
    got = full_line_writes(ln.astype(np.uint64), ag.astype(np.int64), wr.astype(bool), lo.astype(np.uint64),
                           hi.astype(np.uint64))
    for k, (line, agent, _, _, write) in enumerate(rows):
        covered: set[int] = set()
        for line2, agent2, s, e, w2 in rows:
            if w2 and line2 == line and agent2 == agent:
                covered |= set(range(max(s, line * 64), min(e, line * 64 + 64)))
        assert got[k] == (write and len(covered) == 64)


def test_write_backs_of_write_hits_do_not_hide_skipped_reads() -> None:
    # A copy whose threads also update another array in place (read a line, then write it): those write hits'
    # write-backs, charged too, must not be taken for reads for ownership that were not skipped.
    m = _machine()
    chunks, pm = _copy(8, 3000)
    table = 1 << 36
    pm.assign(table, np.zeros(8 * 3000 * 64 // 4096 + 2, dtype=np.int16))
    mixed = []
    for t in range(8):
        sel = chunks[0].thread == t
        addr = chunks[0].address[sel]
        wr = chunks[0].is_write[sel]
        upd = np.uint64(table) + (np.arange(len(addr) // 2, dtype=np.uint64) + np.uint64(3000 * t)) * np.uint64(64)
        both = np.stack([addr[0::2], addr[1::2], upd, upd], axis=1).ravel()
        both_wr = np.stack([wr[0::2], wr[1::2], np.zeros(len(upd), bool), np.ones(len(upd), bool)], axis=1).ravel()
        mixed.append(AccessChunk.build(both, thread=t, is_write=both_wr))
    specs = [ThreadSpec(t, cpu=t) for t in range(8)]
    from numasim.topology.model import CacheLevel

    cached = m.model_copy(update={"caches": [CacheLevel(name="L1d", size_bytes=32 * 1024, latency_ns=1.0,
                                                        associativity=8)]})
    r = simulate(cached, _calibration(cached, 1.0), specs, [concat_chunks(mixed)], pm, record_latencies=False)
    copy_only = simulate(cached, _calibration(cached, 1.0), specs, chunks, pm, record_latencies=False)
    assert r.write_allocate is not None and copy_only.write_allocate is not None
    # (the update's own writes are hits: none of them skips a read; the copy's skip about as many as alone)
    assert r.write_allocate["total"] == pytest.approx(copy_only.write_allocate["total"], rel=0.25)
    assert r.write_allocate["total"] > 0.3 * 8 * 3000
