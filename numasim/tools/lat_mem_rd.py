"""Virtual lmbench ``lat_mem_rd SIZE STRIDE...``: a pointer chase over growing working sets.

lmbench (src/lat_mem_rd.c) builds, for each working set ``range`` from 512 bytes up to SIZE, a chain of
pointers ``stride`` bytes apart walked *backwards* (``addr[i] -> addr[i - stride]``), times the dependent
loads and prints, per stride, a block on stderr::

    "stride=64
    0.00049 1.181
    ...
    <blank line>

with ``range / 2**20`` to 5 decimals and the load latency in ns to 3 decimals. Ranges step like lmbench's
``step()``: doubling below 1 KiB, +1 KiB below 4 KiB, +2 KiB up to 32 KiB, then 8 steps per octave.

Here the buffer is mapped and faulted in by the simulated kernel under the task's policy, and the chase is
timed by the engine as a dependent thread (memory-level parallelism 1). lmbench warms the chain up before
timing; so does this: every working set is timed on its own as ``T(2 passes) - T(1 pass)``, the steady state
of the walk, so each cache step lands at the working set where that cache's sets run out. A working set larger
than every cache level (more lines than the largest one holds) misses everywhere in the steady state, as on a
cold pass: it is timed on one cold pass of at most :data:`MAX_CHASE_ACCESSES` loads (cost control).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.errors import WorkloadError
from numasim.tools.context import ToolContext, map_buffer, page_map
from numasim.units import parse_size
from numasim.workload.access import AccessChunk

__all__ = ["LatMemRdResult", "lat_mem_rd", "format_lat_mem_rd", "lmbench_sizes", "MAX_CHASE_ACCESSES", "LOWER"]

LOWER = 512
"""lmbench's smallest working set (bytes)."""
MAX_CHASE_ACCESSES = 1 << 16
"""Loads timed for a working set the caches cannot hold (a cold pass = the steady state there)."""


def lmbench_sizes(max_bytes: int) -> list[int]:
    """The working sets lmbench visits up to ``max_bytes`` (its ``step()``).

    Examples
    --------
    >>> lmbench_sizes(8192)
    [512, 1024, 2048, 3072, 4096, 6144, 8192]
    """
    out = []
    k = LOWER
    while k <= max_bytes:
        out.append(k)
        if k < 1024:
            k *= 2
        elif k < 4096:
            k += 1024
        else:
            s = 32 * 1024
            while s <= k:
                s *= 2
            k += s // 16
    return out


@dataclass
class LatMemRdResult:
    """Latency (ns per dependent load) per working set, per stride."""

    size_bytes: list[int]
    latency_ns: dict[int, list[float]]
    """``stride -> latencies`` in the order of ``size_bytes``."""
    cpu: int
    node: int
    calibration_id: str
    seed: int
    engine_runs: int = 0
    pages_per_node: dict[int, int] = field(default_factory=dict)


def _chain(base: int, range_bytes: int, stride: int) -> np.ndarray:
    # lmbench's stride_initialize: the walk starts at the last element and goes backwards by `stride`.
    n = max(range_bytes // stride, 1)
    idx = np.arange(n - 1, -1, -1, dtype=np.uint64)
    return np.uint64(base) + idx * np.uint64(stride)


def _time_chase(ctx: ToolContext, pm: PageMap, addrs: np.ndarray) -> float:
    thread = [ThreadSpec(0, cpu=ctx.cpu, dependent=True)]
    r = simulate(ctx.machine, ctx.calibration, thread, [AccessChunk.build(addrs, size_bytes=8)], pm,
                 seed=ctx.seed, record_latencies=False)
    return float(r.run_time_ns)


def lat_mem_rd(ctx: ToolContext, size: int | str, strides: list[int] | None = None) -> LatMemRdResult:
    """Run the virtual ``lat_mem_rd SIZE STRIDE...`` in ``ctx`` (a :class:`ToolContext`).

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-003-2node")
    >>> r = lat_mem_rd(tool_context(m, resolve_calibration(m)), "8K", [64])
    >>> r.size_bytes[:3], round(r.latency_ns[64][0], 2)
    ([512, 1024, 2048], 1.7)
    """
    size_bytes = parse_size(size) if isinstance(size, str) else int(size)
    strides = list(strides or [64])
    if size_bytes < LOWER:
        raise WorkloadError(f"lat_mem_rd: size {size_bytes} is below lmbench's smallest working set {LOWER}")
    for s in strides:
        if s < 8 or s > size_bytes:
            raise WorkloadError(f"lat_mem_rd: stride {s} must be at least 8 (a pointer) and at most the size")
    vma = map_buffer(ctx, size_bytes)
    pm = page_map([vma])
    sizes = lmbench_sizes(size_bytes)
    out: dict[int, list[float]] = {}
    runs = 0
    # lines the largest cache level holds: beyond, every load of a cyclic walk misses every level
    largest = max((c.size_bytes // c.line_bytes for c in ctx.calibration.caches), default=0)
    for stride in strides:
        lat: list[float] = []
        for r in sizes:
            one = _chain(vma.start, r, stride)
            if max(r // max(stride, 64), 1) <= largest:  # lines the walk touches
                t1 = _time_chase(ctx, pm, one)
                t2 = _time_chase(ctx, pm, np.concatenate([one, one]))
                lat.append((t2 - t1) / len(one))
                runs += 2
            else:
                walk = one[:MAX_CHASE_ACCESSES]
                lat.append(_time_chase(ctx, pm, walk) / len(walk))
                runs += 1
        out[stride] = lat
    return LatMemRdResult(sizes, out, ctx.cpu, ctx.node, ctx.calibration.id, ctx.seed, runs, vma.pages_per_node())


def format_lat_mem_rd(result: LatMemRdResult) -> str:
    """What lmbench prints (on stderr): a ``"stride=N`` block per stride, ``size_MB latency_ns`` lines."""
    lines: list[str] = []
    for stride, lat in result.latency_ns.items():
        lines.append(f'"stride={stride}')
        lines += [f"{s / (1024.0 * 1024.0):.5f} {v:.3f}" for s, v in zip(result.size_bytes, lat, strict=True)]
        lines.append("")
    return "\n".join(lines) + "\n"
