"""Every catalog platform running programs, timed from the catalog alone: every number the run reports must be
physically possible.

A platform's middle SKU on a machine of its kind (two sockets unless single-socket; its first multi-node mode)
runs STREAM triad from one node (memory local, then bound to the farthest node), a zipf-popular table with 30 %
writes read by threads on every node (interleaved), and a pointer chase bound to the farthest node. The checks:

- no controller or link direction moves more than it can (``bandwidth_used <= bandwidth_available``, utilisation
  at most 1, mean and peak);
- no memory request, by node, initiator or node pair, waits less on average than the idle route latency;
- Little's law per thread: its misses in flight on average (memory accesses x mean latency / its run time) are
  no more than its core's demand misses plus what its prefetcher keeps ahead
  (``core.max_outstanding_misses + core.prefetch_distance_lines``);
- every page of the program's allocations is resident on one node, and the times are finite and ordered.

The same checks over every platform, with larger working sets and a stream of stores, found nothing on
2026-12-07 (the sweep this test keeps); tests/tools/test_catalog_platforms_through_mlc.py does the same for the
virtual mlc's tables.
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from numasim.engine.result import SimulationResult
from numasim.timing.catalog import catalog_calibration, load_catalog
from numasim.timing.catalog.model import Platform
from numasim.timing.model import Calibration
from numasim.topology.builders import multi_die
from numasim.topology.model import Machine
from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.run import run_workload
from numasim.workload.spec import Workload

PLATFORMS = sorted(load_catalog(), key=lambda p: p.name)
MiB = 1 << 20


def _machine(platform: Platform) -> Machine:
    modes = [m for m in platform.numa_modes if m.nodes_per_socket > 1]
    k, min_cores = (modes[0].nodes_per_socket, modes[0].min_cores or 0) if modes else (1, 0)
    skus = sorted(platform.skus, key=lambda s: (s.cores, s.model))
    fits = [s for s in skus if s.cores % k == 0 and s.cores >= min_cores] or skus
    sku = fits[len(fits) // 2]
    family = "NPS" if platform.vendor == "amd" else "SNC"
    m = multi_die(1 if platform.single_socket else 2, f"{family}{k}", cores_per_socket=sku.cores,
                  threads_per_core=max(1, sku.threads // sku.cores), memory_bytes=4 << 30)  # fmt: skip
    return m.model_copy(update={"cpu_model": sku.model})


def _workloads(m: Machine, cal: Calibration) -> list[tuple[str, Workload, list[str | None]]]:
    far = m.nodes[-1].id
    every = f"0-{far}"
    llc = max((c.size_bytes for c in cal.caches), default=8 * MiB)
    array = int(min(max(4 * MiB, 2 * llc), 48 * MiB))  # past the largest cache where that stays quick
    threads = min(8, len([c for c in m.cpus if m.cpu_to_node[c] == 0]))
    spread = ", ".join(f"{{id = {i}, node = {m.nodes[i % len(m.nodes)].id}}}" for i in range(min(2 * len(m.nodes), 8)))
    arrays = "".join(f'[[allocations]]\nname = "{a}"\nsize_bytes = {array}\nfirst_touch = 0\n' for a in "abc")
    texts = [
        ("triad", f'name = "triad"\nthreads = [{{count = {threads}, node = 0}}]\n{arrays}'
                  '[[phases]]\nname = "triad"\npattern = "stream_triad"\npasses = 1\nsplit = true\n', [None, f"bind:{far}"]),
        ("table", f'name = "table"\nthreads = [{spread}]\n[[allocations]]\nname = "t"\nsize_bytes = {2 * array}\n'
                  '[[phases]]\nname = "serve"\npattern = "zipf"\nallocation = "t"\nexponent = 0.9\nhot_fraction = 0.1\n'
                  'hot_access_fraction = 0.9\nwrite_fraction = 0.3\naccesses = 40000\n', [f"interleave:{every}"]),
        ("chase", f'name = "chase"\nthreads = [{{id = 0, node = 0}}]\n[[allocations]]\nname = "b"\nsize_bytes = {2 * array}\n'
                  '[[phases]]\nname = "chase"\npattern = "pointer_chase"\nallocation = "b"\naccesses = 20000\n', [f"bind:{far}"]),
    ]  # fmt: skip
    return [(name, Workload.model_validate(tomllib.loads(text)), policies) for name, text, policies in texts]


def _physical(r: SimulationResult, cal: Calibration, placed_pages: int) -> list[str]:
    wrong = []
    for res in r.resources:
        if res.bandwidth_used_gb_s > res.bandwidth_available_gb_s * (1 + 1e-9):
            wrong.append(f"{res.name} moved {res.bandwidth_used_gb_s:.2f} GB/s of {res.bandwidth_available_gb_s:.2f}")
        if max(res.utilisation_mean, res.utilisation_peak) > 1 + 1e-9:
            wrong.append(f"{res.name} utilisation {res.utilisation_mean:.3f} / {res.utilisation_peak:.3f}")
    for rec in [*r.nodes, *r.initiators, *r.matrix]:
        if rec.memory_accesses and not rec.memory_latency_mean_ns >= rec.memory_idle_latency_ns * (1 - 1e-9):
            wrong.append(f"{rec}: memory latency below the idle route's")
    limit = cal.core.max_outstanding_misses + cal.core.prefetch_distance_lines
    for t in r.threads:
        span = t.finish_ns - t.start_ns
        if not (np.isfinite(span) and span >= 0 and t.stall_ns >= -1e-6):
            wrong.append(f"{t.agent}: start {t.start_ns}, finish {t.finish_ns}, stall {t.stall_ns}")
        elif t.memory_accesses and span > 0 and t.memory_accesses * t.memory_latency_mean_ns / span > limit * 1.01:
            wrong.append(f"{t.agent}: {t.memory_accesses * t.memory_latency_mean_ns / span:.1f} misses in flight, "
                         f"its core keeps at most {limit}")  # fmt: skip
    if sum(n.pages_resident for n in r.nodes) != placed_pages:
        wrong.append(f"{sum(n.pages_resident for n in r.nodes)} pages resident, the program's allocations {placed_pages}")
    if not (np.isfinite(r.run_time_ns) and r.run_time_ns > 0):
        wrong.append(f"run time {r.run_time_ns}")
    return wrong


@pytest.mark.parametrize("platform", PLATFORMS, ids=[p.name for p in PLATFORMS])
def test_programs_on_a_catalog_machine_of_every_platform_report_physical_numbers(platform: Platform) -> None:
    m = _machine(platform)
    cal = catalog_calibration(m)
    wrong = []
    for name, workload, policies in _workloads(m, cal):
        placed = sum(-(-a.size_bytes // PAGE_SIZE_BYTES) for a in workload.allocations)
        for policy in policies:
            out = run_workload(m, workload, cal, policy=policy, seed=3)
            wrong += [f"{name} under {policy or 'the default'}: {w}" for w in _physical(out.result, cal, placed)]
    assert not wrong, "\n".join(wrong)
