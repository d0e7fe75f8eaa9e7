"""Cache-heavy workloads against their floor (issue 14): epoch and exact mode where the caches decide.

The engine benchmark's loads miss every cache; here they mostly hit. Machine and threads as :mod:`bench_engine`
(seed-000-4node with its calibration: L1d 48 KiB, L2 1.25 MiB per core, L3 36 MiB per socket; 8 threads over
the 4 nodes). Each thread reads its own region, uniformly at random, 64-byte loads:

* ``L2``: half an L2 per thread (the L2 holds it; L1 misses);
* ``L3``: half of its socket's L3 shared among the socket's threads (L2 misses, L3 hits);
* ``2x L3``: twice its socket's L3 (mostly memory, the rest L3);
* ``chase``: the ``L3`` regions as dependent loads (one miss in flight per thread: latency-bound).

The floor is :func:`floor_kernel.cache_floor_run`: per access a set-associative LRU lookup at each level until one
hits (the engine's own cache geometry, :func:`numasim.engine.caches.cache_levels`), a miss going down the memory
floor's path. Epoch mode estimates hits from reuse distances instead of looking up sets, so its ns per access is
compared with a floor that does the lookups exactly; the hit fractions are printed side by side as a sanity
check (the two models differ, the estimate within a few points). Timed per *cpu* second (all threads), the
fastest and the median of ``REPEATS`` alternating runs; nothing asserted about time.

The process's allocator is tuned as the ``numasim`` command tunes it (:func:`numasim.allocator.tune_allocator`;
the estimate's windows here are millions of accesses, whose fresh temporaries otherwise fault their pages in
again on every window); ``BENCH_CACHE_ALLOCATOR=default`` leaves glibc's defaults.

Run by hand::

    .venv/bin/python -m pytest benchmarks/bench_cache.py --run-benchmarks -s
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import bench_engine as b  # noqa: E402
from floor_kernel import cache_floor_run  # noqa: E402

from numasim.engine import PageMap, ThreadSpec, simulate  # noqa: E402
from numasim.engine.caches import cache_levels, instance_keys  # noqa: E402
from numasim.engine.cores import thread_mlp  # noqa: E402
from numasim.engine.memsys import build_memory_system  # noqa: E402
from numasim.workload.access import AccessChunk  # noqa: E402

N = int(os.environ.get("BENCH_CACHE_ACCESSES", 4_000_000))
N_EXACT = int(os.environ.get("BENCH_CACHE_EXACT_ACCESSES", 400_000))
REPEATS = int(os.environ.get("BENCH_CACHE_REPEATS", 3))
REGION_STRIDE = 1 << 30  # each thread's region starts on its own GiB: no sharing between threads


def _regions(m, cal, specs: list[ThreadSpec]) -> dict[str, int]:  # type: ignore[no-untyped-def]
    levels = {lv.name: lv for lv in cache_levels(m, cal)}
    sockets = [m.node(m.cpu_to_node[t.cpu]).socket for t in specs]
    per_socket = max(sockets.count(s) for s in set(sockets))
    l2, l3 = levels["L2"].size_bytes, levels["L3"].size_bytes
    return {"L2": l2 // 2, "L3": l3 // 2 // per_socket, "2x L3": 2 * l3 // per_socket}


def _chunks(n: int, region_bytes: int, threads: int, seed: int = 0) -> Iterator[AccessChunk]:
    rng = np.random.default_rng(seed)
    lines = max(1, region_bytes // 64)
    for lo in range(0, n, b.CHUNK):
        k = min(b.CHUNK, n - lo)
        tid = (np.arange(lo, lo + k) % threads).astype(np.int32)
        address = tid.astype(np.uint64) * np.uint64(REGION_STRIDE) + rng.integers(0, lines, k, dtype=np.uint64) * np.uint64(64)
        yield AccessChunk(thread=tid, address=address, is_write=np.zeros(k, dtype=bool),
                          size_bytes=np.full(k, 64, dtype=np.uint16), compute_ns=np.zeros(k, dtype=np.float32))  # fmt: skip


def _pages(threads: int, region_bytes: int) -> tuple[PageMap, np.ndarray]:
    """Each thread's region interleaved over the 4 nodes; the floor's page -> node table for the same."""
    pm = PageMap()
    n_pages = (region_bytes + 4095) // 4096
    top = (threads - 1) * REGION_STRIDE // 4096 + n_pages
    table = np.zeros(top, dtype=np.int8)
    for t in range(threads):
        first = t * REGION_STRIDE // 4096
        nodes = np.resize(np.arange(4, dtype=np.int16), n_pages)
        pm.assign(t * REGION_STRIDE, nodes)
        table[first : first + n_pages] = nodes
    return pm, table


def _cpu(fn):  # type: ignore[no-untyped-def]
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def _engine_hits(r) -> float:  # type: ignore[no-untyped-def]
    """Fraction of accesses that did not go to memory."""
    memory = sum(int(t.memory_accesses) for t in r.threads)
    return 1.0 - memory / max(int(r.accesses), 1)


@pytest.mark.benchmark
def test_cache_heavy_workloads_against_their_floor() -> None:
    tuned = b.allocator_from_env("BENCH_CACHE_ALLOCATOR")
    m, cal = b.machine_and_calibration()
    ms = build_memory_system(m, cal)
    base_specs = b.threads(m)
    levels = cache_levels(m, cal)
    cpus = [t.cpu for t in base_specs]
    instance_of = []
    for level in levels:
        keys = instance_keys(m, level, cpus)
        index = {k: j for j, k in enumerate(dict.fromkeys(keys))}
        instance_of.append([index[k] for k in keys])
    node_index = {nid: k for k, nid in enumerate(ms.node_ids)}
    init = np.array([node_index[m.cpu_to_node[c]] for c in cpus], dtype=np.int64)
    rows = []
    regions = _regions(m, cal, base_specs)
    for name, region in [*regions.items(), ("chase", regions["L3"])]:
        dependent = name == "chase"
        specs = [ThreadSpec(t.id, t.cpu, dependent=dependent) for t in base_specs]
        mlp = np.array([1] * len(specs) if dependent else thread_mlp(cal.core, m.cpus, cpus, [False] * len(specs)),
                       dtype=np.int64)  # fmt: skip
        pm, table = _pages(len(specs), region)
        chunks = list(_chunks(N, region, len(specs)))
        thread = np.concatenate([c.thread for c in chunks])
        address = np.concatenate([c.address for c in chunks])
        simulate(m, cal, specs, iter(chunks[:1]), pm, mode="epoch")  # compile and warm
        cache_floor_run(ms, levels, instance_of, thread[:1000], address[:1000], table, init, mlp)
        eng, flo = [], []
        r = floor = None
        for _ in range(REPEATS):
            t, r = _cpu(lambda: simulate(m, cal, specs, iter(chunks), pm, mode="epoch"))  # noqa: B023
            eng.append(t / N * 1e9)
            t, floor = _cpu(lambda: cache_floor_run(ms, levels, instance_of, thread, address, table, init, mlp))  # noqa: B023
            flo.append(t / N * 1e9)
        exact_chunks = list(_chunks(N_EXACT, region, len(specs)))
        t_exact, r_exact = _cpu(lambda: simulate(m, cal, specs, iter(exact_chunks), pm, mode="exact"))  # noqa: B023
        small = cache_floor_run(ms, levels, instance_of, np.concatenate([c.thread for c in exact_chunks]),
                                np.concatenate([c.address for c in exact_chunks]), table, init, mlp)  # fmt: skip
        rows.append((name, region, statistics.median(eng), min(eng), statistics.median(flo), min(flo),
                     t_exact / N_EXACT * 1e9, _engine_hits(r), 1 - floor[2] / N,  # type: ignore[index]
                     _engine_hits(r_exact), 1 - small[2] / N_EXACT))  # fmt: skip
    lines = [
        f"machine {m.name}, calibration {cal.id}, {len(base_specs)} threads, {N:,} loads per workload (exact mode "
        f"{N_EXACT:,}), {REPEATS} alternating runs, cpu ns per access (all threads); allocator "
        f"{'tuned (numasim.allocator, as the numasim command)' if tuned else 'glibc defaults'}",
        "",
        "| workload | region per thread | epoch median | epoch fastest | floor median | floor fastest | "
        "epoch / floor (fastest) | exact | hits: epoch / floor | hits: exact / floor (exact's accesses) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, region, e_med, e_min, f_med, f_min, exact_ns, h_epoch, h_floor, h_exact, h_small in rows:
        lines.append(f"| {name} | {region / 2**20:.2f} MiB | {e_med:.1f} | {e_min:.1f} | {f_med:.1f} | {f_min:.1f} | "
                     f"{e_min / f_min:.2f} | {exact_ns:.0f} | {h_epoch:.3f} / {h_floor:.3f} | "
                     f"{h_exact:.3f} / {h_small:.3f} |")  # fmt: skip
    print("\n" + "\n".join(lines))
    for name, *_rest, h_exact, h_small in rows:  # sanity: the floor's caches are the exact mode's geometry
        assert abs(h_exact - h_small) < 0.05, (name, h_exact, h_small)
