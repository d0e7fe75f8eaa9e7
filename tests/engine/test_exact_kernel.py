"""Exact mode's compiled kernel: bit-identical to the pure-Python engine it replaced, exact LRU, resumable.

``GOLDEN`` holds numbers of the pure-Python exact engine (``numasim/engine/exact.py`` at commit f7209d4, before
the kernel) on ten workloads, as exact float literals (``repr`` round-trips): run time, every agent's finish
time and mean load-to-use latency, every node's mean load-to-use latency, the sum of the utilisation series, a checksum of the latency
histogram and the per-level access counts. The kernel must reproduce them bit for bit. They cover: the engine
benchmark's random loads (8 threads, 3 cache levels, contended controllers and links), STREAM triad, small
working sets that hit every cache level (a die-shared L3, writes), a pointer chase, dependent and independent
threads with compute time and staggered (and negative) start times, DMA transfers next to threads, short
epochs (many epoch boundaries) and a FIFO backlog that outgrows the kernel's ring of open epoch buckets.
One case was regenerated on purpose since: ``negative_start`` (resources are idle before time 0 too; they had
been busy until 0, so a thread started at a negative time queued until then). Every ``hist_check`` was
regenerated when the histograms changed meaning from load-to-use latency of every request to the memory
request latency of the requests that went to memory (no timing changed: every other number is the same).
``stream``, ``caches`` and ``compute`` were regenerated when prefetching became physical: it acts on hits at
every level too (never below the level above), and a prefetched miss is never usable before its last server
has served it (the old rule let a bandwidth-bound stream finish before its controller had served its lines)
nor faster than a last-level-cache hit. ``compute`` again when "its last server" became the slowest of its route
(a line's data is not at the core before every link has carried it: mlc's bandwidth matrix on seed-000-4node read
40001.0 MB/s over a 40 GB/s link). ``caches`` was regenerated again when the caches became coherent: its four
threads write 30 % of the accesses to one 96 KiB set, and a write now takes the line from the other cores' private
caches (and the other socket's L3), so the others' next access to it hits their L3 or goes to memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

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
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine import DeviceTransfer, PageMap, SimulationResult, ThreadSpec, simulate
from numasim.engine.caches import LRUCache, cache_levels
from numasim.timing.model import load_calibration, nominal_calibration
from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import load_machine_toml
from numasim.workload.access import AccessChunk
from numasim.workload.quick import quick_workload
from numasim.workload.run import run_workload
from numasim.workload.spec import loads_workload

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_CAL = ROOT / "tests" / "data" / "engine" / "seed-000-4node-golden.cal.json"
"""The seed-000 calibration the golden numbers were made with (frozen: the shipped one moves with fits)."""


def _bench() -> SimulationResult:
    """The engine benchmark's workload (benchmarks/bench_engine.py), 50 k accesses."""
    m = load_machine_toml(ROOT / "topologies" / "seed-000-4node.toml")
    cal = load_calibration(GOLDEN_CAL)
    pm = PageMap()
    pm.assign(0, np.resize(np.arange(4, dtype=np.int16), 1 << 18))
    specs = [ThreadSpec(t, cpu=m.cpus[t * len(m.cpus) // 8]) for t in range(8)]
    rng = np.random.default_rng(0)
    n = 50_000
    chunk = AccessChunk(
        thread=(np.arange(n) % 8).astype(np.int32),
        address=rng.integers(0, (1 << 18) * 64, n, dtype=np.uint64) * np.uint64(64),
        is_write=np.zeros(n, dtype=bool),
        size_bytes=np.full(n, 64, dtype=np.uint16),
        compute_ns=np.zeros(n, dtype=np.float32),
    )
    return simulate(m, cal, specs, [chunk], pm, mode="exact")


def _stream() -> SimulationResult:
    m = glueless(2)
    w = loads_workload(
        "threads = [{id = 0, node = 0}, {id = 1, node = 0}, {id = 2, node = 1}, {id = 3, node = 1}]\n"
        'allocations = [{name = "a", size_bytes = "2M"}, {name = "b", size_bytes = "2M"}, '
        '{name = "c", size_bytes = "2M"}]\n'
        '[[phases]]\npattern = "stream_triad"\narrays = ["a", "b", "c"]\npasses = 1\n'
    )
    return run_workload(m, w, nominal_calibration(m), mode="exact", policy="interleave:0-1").result


def _caches() -> SimulationResult:
    m = seed000_machine()
    pm = interleaved_pages([0, 1, 2, 3], 1 << 10)
    specs = [ThreadSpec(t, cpu=t) for t in range(3)] + [ThreadSpec(3, cpu=30)]
    chunks = list(stream("rand", 40_000, 4, 96 * 1024, write_fraction=0.3, seed=3))
    chunks += list(stream("seq", 30_000, 4, 3 * 1024 * 1024, seed=4))
    return simulate(m, calibration(m), specs, chunks, pm, mode="exact", epoch_ns=250.0)


def _chase() -> SimulationResult:
    m = glueless(2)
    w = quick_workload("pointer_chase", size="8M", accesses=20_000, threads=2)
    return run_workload(m, w, nominal_calibration(m), mode="exact", policy="interleave:0-1").result


def _chase_mixed() -> SimulationResult:
    m = two_node(caches=True)
    pm = interleaved_pages([0, 1], 1 << 12)
    specs = [
        ThreadSpec(0, cpu=0, dependent=True),
        ThreadSpec(1, cpu=1, start_ns=333.25),
        ThreadSpec(2, cpu=8, dependent=True, start_ns=5000.5),
    ]
    accesses = stream("rand", 30_000, 3, (1 << 12) * PAGE, write_fraction=0.1, compute_ns=1.3)
    return simulate(m, calibration(m), specs, accesses, pm, mode="exact")


def _device() -> SimulationResult:
    m = seed000_machine(caches=False)
    pm = spread_pages([0, 1], 512)
    specs = [ThreadSpec(0, cpu=0), ThreadSpec(1, cpu=30)]
    devs = [
        DeviceTransfer("mlx5_2", "read", 0, 1 << 20),
        DeviceTransfer("mlx5_2", "write", 512 * PAGE, 1 << 19, start_ns=20_000.0),
    ]
    accesses = stream("rand", 20_000, 2, 1024 * PAGE, write_fraction=0.5)
    return simulate(m, calibration(m), specs, accesses, pm, mode="exact", devices=devs)


def _compute() -> SimulationResult:
    m = load_machine_toml(ROOT / "topologies" / "seed-000-4node.toml")
    cal = load_calibration(GOLDEN_CAL)
    pm = interleaved_pages([0, 1, 2, 3], 1 << 14)
    specs = [ThreadSpec(t, cpu=t * 12) for t in range(8)]
    chunks = list(stream("rand", 30_000, 8, (1 << 14) * PAGE, compute_ns=7.3, seed=5, chunk=7000))
    chunks += list(stream("seq", 30_000, 8, (1 << 14) * PAGE, compute_ns=0.4, seed=6, chunk=9000))
    return simulate(m, cal, specs, chunks, pm, mode="exact", epoch_ns=100.0)


def _nolat() -> SimulationResult:
    m = two_node()
    pm = interleaved_pages([0, 1], 1 << 10)
    specs = [ThreadSpec(t, cpu=t * 4) for t in range(4)]
    accesses = stream("seq", 20_000, 4, (1 << 10) * PAGE, write_fraction=0.5)
    cal = calibration(m, prefetch_distance_lines=0)
    return simulate(m, cal, specs, accesses, pm, mode="exact", record_latencies=False, epoch_ns=333.3)


def _grow() -> SimulationResult:
    m = seed000_machine(caches=False)
    pm = spread_pages([1], (1 << 20) // PAGE)
    devs = [DeviceTransfer("mlx5_2", "read", k << 18, 1 << 18, outstanding_lines=2048) for k in range(4)]
    accesses = stream("rand", 3000, 1, 1 << 20)
    return simulate(
        m, calibration(m), [ThreadSpec(0, cpu=0)], accesses, pm, mode="exact", devices=devs, epoch_ns=20.0
    )


def _negative_start() -> SimulationResult:
    m = two_node(caches=True)
    pm = interleaved_pages([0, 1], 1 << 10)
    specs = [ThreadSpec(0, cpu=0, start_ns=-3000.5), ThreadSpec(1, cpu=8)]
    return simulate(m, calibration(m), specs, stream("rand", 8000, 2, (1 << 10) * PAGE), pm, mode="exact")


nan = float("nan")
WORKLOADS: dict[str, Callable[[], SimulationResult]] = {
    "bench": _bench,
    "stream": _stream,
    "caches": _caches,
    "chase": _chase,
    "chase_mixed": _chase_mixed,
    "device": _device,
    "compute": _compute,
    "nolat": _nolat,
    "grow": _grow,
    "negative_start": _negative_start,
}
# fmt: off
GOLDEN = {
    'bench': {'run_time_ns': 74612.69060104447, 'finish_ns': [74581.15210941303, 73972.69153047686, 74545.95171850314, 74116.48712329229, 74217.74619225098, 73846.01178777606, 74604.08647870726, 74612.69060104447], 'thread_mean_ns': [119.26103712879085, 118.24939366856515, 119.21386094410217, 118.51220250320303, 118.61701467174427, 118.01211007195566, 119.24068699930672, 119.25087615257608], 'node_mean_ns': [118.99811523712408, 119.29286334321249, 118.34814799062856, 118.53419858521202], 'util_sum': 163.86527815028109, 'util_shape': (75, 14), 'hist_check': 4875315, 'levels': [0, 1, 8, 12491, 0, 0, 7, 12493, 1, 1, 10, 12488, 0, 1, 7, 12492]},  # noqa: E501
    'stream': {'run_time_ns': 135658.20812295162, 'finish_ns': [134750.88763839207, 135063.10140371355, 135639.54067807578, 135658.20812295162], 'thread_mean_ns': [54.81921911519773, 54.945774957088084, 55.184336441212814, 55.19214733981175], 'node_mean_ns': [55.08670277739629, 54.98403614925587], 'util_sum': 314.8278685173167, 'util_shape': (136, 4), 'hist_check': 9831424, 'levels': [49152, 49152]},  # noqa: E501
    'caches': {'run_time_ns': 74353.51932505339, 'finish_ns': [48037.699515833716, 54872.119703479264, 55287.55002074046, 74353.51932505339], 'thread_mean_ns': [27.440436105087194, 31.345860844211288, 31.583559041238072, 42.480790835232746], 'node_mean_ns': [24.49491843387149, 25.321566745156325, 41.883112014757145, 41.356472829096205], 'util_sum': 549.7838787978708, 'util_shape': (298, 16), 'hist_check': 3267145, 'levels': [13322, 4070, 12236, 22872, 4208, 3064, 0, 10228, 0, 0, 0, 0, 0, 0, 0, 0]},  # noqa: E501
    'chase': {'run_time_ns': 2100703.064927441, 'finish_ns': [2100703.064927441, 2094866.0279231872], 'thread_mean_ns': [105.03515324637205, 104.74330139615937], 'node_mean_ns': [80.02592823901816, 129.99487579918008], 'util_sum': 127.69906049982825, 'util_shape': (2101, 4), 'hist_check': 3819322, 'levels': [40000, 0]},  # noqa: E501
    'chase_mixed': {'run_time_ns': 1061542.680274897, 'finish_ns': [1049916.0397649098, 108172.6955764664, 1061542.680274897], 'thread_mean_ns': [103.69160402417467, 107.76187449893939, 104.35421807517338], 'node_mean_ns': [97.10259612512934, 113.48611105283946], 'util_sum': 94.96068329014359, 'util_shape': (1062, 4), 'hist_check': 2843802, 'levels': [34, 193, 19773, 24, 83, 9893]},  # noqa: E501
    'device': {'run_time_ns': 123991.73527133447, 'finish_ns': [123227.6086883778, 123991.73527133447, 48598.76671436729, 52255.597816057525], 'thread_mean_ns': [123.189777292488, 123.95076077496053, 751.1506074594713, 992.2909889038131], 'node_mean_ns': [514.1118378556632, 513.5657029848026, nan, nan], 'util_sum': 211.42602539630394, 'util_shape': (124, 18), 'hist_check': 4983690, 'levels': [10000, 10000, 0, 0, 24576]},  # noqa: E501
    'compute': {'run_time_ns': 68456.9956217229, 'finish_ns': [67561.98861124397, 63460.70339368486, 67811.73125599524, 68456.9956217229, 67634.64143997765, 63011.15737020937, 68090.30882311762, 68454.44776397865], 'thread_mean_ns': [88.67268988444151, 83.19966686496078, 88.88505090702728, 89.82421742847349, 88.8021085878164, 82.69946724381848, 89.3645977020573, 89.87026446203902], 'node_mean_ns': [85.84696436423346, 94.40725073726848, 84.88473007382834, 85.37605933950005], 'util_sum': 1949.8532764731337, 'util_shape': (685, 14), 'hist_check': 5864595, 'levels': [6, 40, 121, 14833, 6, 45, 128, 14821, 6, 26, 120, 14848, 4, 29, 130, 14837]},  # noqa: E501
    'nolat': {'run_time_ns': 58812.94893519026, 'finish_ns': [58108.87970847365, 58190.982111719466, 58697.684376056844, 58812.94893519026], 'thread_mean_ns': [116.1090724855175, 116.27323669160414, 117.32015919061348, 117.52365824822517], 'node_mean_ns': [116.93262245449044, 116.68003671631017], 'util_sum': 192.08778830138795, 'util_shape': (177, 4), 'hist_check': 0, 'levels': [10000, 10000]},  # noqa: E501
    'grow': {'run_time_ns': 89028.72895969808, 'finish_ns': [89028.72895969808, 39046.944941172886, 46760.827294107046, 54395.07411921813, 62142.91675034951], 'thread_mean_ns': [296.64009811244745, 17593.750365859407, 21448.781386760966, 25300.068837168652, 29126.40283377422], 'node_mean_ns': [nan, 19796.685839726186, nan, nan], 'util_sum': 3631.7994627142193, 'util_shape': (2226, 18), 'hist_check': 3046172, 'levels': [3000, 0, 0, 0, 16384]},  # noqa: E501
    'negative_start': {'run_time_ns': 43284.662289455424, 'finish_ns': [39592.061378401486, 43284.662289455424], 'thread_mean_ns': [106.33327296967973, 108.01811106035709], 'node_mean_ns': [107.60086875958106, 106.74344149552509], 'util_sum': 24.717338078491455, 'util_shape': (44, 4), 'hist_check': 749906, 'levels': [25, 102, 3873, 26, 68, 3906]},  # noqa: E501
}
# fmt: on


def _numbers(r: SimulationResult) -> dict[str, object]:
    hist = r.latency_hist_by_node
    return {
        "run_time_ns": r.run_time_ns,
        "finish_ns": [t.finish_ns for t in r.threads],
        "thread_mean_ns": [t.load_to_use_mean_ns for t in r.threads],
        "node_mean_ns": [n.load_to_use_mean_ns for n in r.nodes],
        "util_sum": float(r.utilisation.sum()),
        "util_shape": r.utilisation.shape,
        "hist_check": int((np.arange(hist.shape[1]) * hist.sum(axis=0)).sum()) if hist.size else 0,
        "levels": [c.accesses for c in r.cache_levels],
    }


def _same(a: object, b: object) -> bool:
    """Equal, bit for bit for floats (NaN equals NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a.hex() == b.hex()
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_bit_identical_to_the_python_engine(name: str) -> None:
    got = _numbers(WORKLOADS[name]())
    want = GOLDEN[name]
    differ = {k: (got[k], want[k]) for k in want if not _same(got[k], want[k])}
    assert not differ


def test_block_boundaries_do_not_change_timing() -> None:
    """The kernel returns to Python at every block end and resumes the agent mid-run: the timing must not
    depend on where the blocks end (the stream's chunking), only the order of floating-point sums may."""

    (accesses,) = stream("rand", 12_000, 3, (1 << 12) * PAGE, write_fraction=0.3, chunk=12_000, compute_ns=0.7)

    def run(chunk: int) -> SimulationResult:
        m = two_node(caches=True)
        pm = interleaved_pages([0, 1], 1 << 12)
        specs = [ThreadSpec(0, cpu=0), ThreadSpec(1, cpu=1, dependent=True), ThreadSpec(2, cpu=8)]
        pieces = [accesses.slice(lo, lo + chunk) for lo in range(0, len(accesses), chunk)]
        return simulate(m, calibration(m), specs, pieces, pm, mode="exact", epoch_ns=200.0)

    whole, pieces = run(12_000), run(997)
    assert whole.run_time_ns == pieces.run_time_ns
    assert [t.finish_ns for t in whole.threads] == [t.finish_ns for t in pieces.threads]
    assert np.array_equal(whole.latency_hist_by_node, pieces.latency_hist_by_node)
    assert np.array_equal(whole.utilisation, pieces.utilisation)
    assert [c.accesses for c in whole.cache_levels] == [c.accesses for c in pieces.cache_levels]


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 1 << 14),
    st.integers(200, 3000),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_cache_levels_match_lru_cache(footprint_lines: int, n: int, seed: int, two_threads: bool) -> None:
    """The kernel's tag/stamp LRU sets give every access the level the dict-based ``LRUCache`` gives it."""
    m = two_node(caches=True)
    cal = calibration(m)
    rng = np.random.default_rng(seed)
    threads = 2 if two_threads else 1
    lines = rng.integers(0, footprint_lines, n).astype(np.uint64)
    tid = rng.integers(0, threads, n)
    pm = spread_pages([0, 1], (footprint_lines * 64) // PAGE // 2 + 1)
    specs = [ThreadSpec(t, cpu=t) for t in range(threads)]  # private L1 and L2 per cpu
    chunk = AccessChunk.build(lines * np.uint64(64), thread=tid)
    r = simulate(m, cal, specs, [chunk], pm, mode="exact")

    levels = cache_levels(m, cal)
    want = np.zeros(len(levels) + 1, dtype=np.int64)
    for t in range(threads):
        caches = [LRUCache(s.sets, s.associativity) for s in levels]
        for line in lines[tid == t].tolist():
            level = len(levels)
            for lv, c in enumerate(caches):
                if c.access(line):
                    level = lv
                    break
            want[level] += 1
    got = np.zeros(len(levels) + 1, dtype=np.int64)
    names = [s.name for s in levels] + ["memory"]
    for row in r.cache_levels:
        got[names.index(row.level)] += row.accesses
    assert got.tolist() == want.tolist()
