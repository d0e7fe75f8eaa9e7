"""Virtual copy of source article 003's latency test (``./main``): time per access by stride and working set.

The article's program (from the author's earlier posts) walks an ``int`` array of each working-set size
(2k .. 128m) with a fixed stride, or at random, and prints the time per access in ns::

    Delay  (ns)
            2k      8k      32k     128k    512k    2m      8m      32m     128m
    s1      1.28    1.28    1.26    1.25    1.26    1.26    1.28    1.43    1.43
    s32     ...
    s64     ...
    random  ...

``sN`` is a stride of N ``int`` (4-byte) elements: s32 = 128 bytes and s64 = 256 bytes both miss on every
access at 128m (the article's 10.37 and 8.92 ns are close), s1 misses once per 16 accesses (1.43 ns). The
accesses are independent loads (the loop does not chase pointers), so the core overlaps up to its
``max_outstanding_misses``; each access also costs :data:`LOOP_NS` of loop work (the time per access the
article measures inside L1). The engine times a warmed pass (``T(2 passes) - T(1 pass)``) when the working set
is within its reuse horizon (:data:`TWO_PASS_ACCESSES`), else one pass of :data:`WINDOW_ACCESSES` accesses (every access then misses the
caches, which is the steady state).

The random row draws fresh indices: a second draw of :data:`WINDOW_ACCESSES` is timed after a first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.tools.context import ToolContext, map_buffer, page_map
from numasim.units import parse_size
from numasim.workload.access import AccessChunk

__all__ = ["StrideTableResult", "stride_table", "format_stride_table", "SIZES", "PATTERNS", "LOOP_NS",
           "WINDOW_ACCESSES"]

SIZES = ("2k", "8k", "32k", "128k", "512k", "2m", "8m", "32m", "128m")
PATTERNS = ("s1", "s32", "s64", "random")
LOOP_NS = 1.25
"""Loop work per access (ns): the article's time per access while the array fits in L1 (1.25-1.28 ns)."""
WINDOW_ACCESSES = 1 << 16
TWO_PASS_ACCESSES = 1 << 17
"""Largest pass timed warm (the engine sees reuses within a chunk and its carried tail of 2**18 accesses)."""
EPILOGUE_ACCESSES = 1024
_INT = 4


@dataclass
class StrideTableResult:
    sizes: list[str]
    latency_ns: dict[str, list[float]]
    cpu: int
    calibration_id: str
    seed: int
    pages_per_node: dict[int, int] = field(default_factory=dict)


def _time(ctx: ToolContext, pm: PageMap, addr: np.ndarray, loop_ns: float) -> float:
    r = simulate(ctx.machine, ctx.calibration, [ThreadSpec(0, cpu=ctx.cpu)],
                 [AccessChunk.build(addr, size_bytes=_INT, compute_ns=loop_ns)], pm,
                 seed=ctx.seed, record_latencies=False)
    return float(r.run_time_ns)


def _warm(ctx: ToolContext, pm: PageMap, warmup: np.ndarray, timed: np.ndarray, loop_ns: float) -> float:
    # T(warmup + timed + tail) - T(warmup + tail): the tail (hits on one line) outlasts every miss still in
    # flight, so both runs end at the tail and the difference is the timed pass alone.
    tail = np.full(EPILOGUE_ACCESSES, timed[-1], dtype=np.uint64)
    t1 = _time(ctx, pm, np.concatenate([warmup, tail]), loop_ns)
    t2 = _time(ctx, pm, np.concatenate([warmup, timed, tail]), loop_ns)
    return (t2 - t1) / len(timed)


def stride_table(
    ctx: ToolContext, sizes: tuple[str, ...] = SIZES, patterns: tuple[str, ...] = PATTERNS, loop_ns: float = LOOP_NS
) -> StrideTableResult:
    """Run the virtual ``./main`` of article 003 in ``ctx``.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-003-2node")
    >>> r = stride_table(tool_context(m, resolve_calibration(m), cpunodebind=[0], membind=[0]), ("2k",), ("s64",))
    >>> round(r.latency_ns["s64"][0], 2)  # in L1: the loop's own time
    1.25
    """
    size_bytes = [parse_size(s) for s in sizes]
    vma = map_buffer(ctx, max(size_bytes))
    pm = page_map([vma])
    rng = np.random.default_rng(ctx.seed)
    base = np.uint64(vma.start)
    out: dict[str, list[float]] = {}
    for pat in patterns:
        row = []
        for ws in size_bytes:
            elems = ws // _INT
            if pat == "random":
                # the program keeps drawing fresh random indices: time a second draw after a first one
                first = base + rng.integers(0, elems, size=WINDOW_ACCESSES).astype(np.uint64) * np.uint64(_INT)
                second = base + rng.integers(0, elems, size=WINDOW_ACCESSES).astype(np.uint64) * np.uint64(_INT)
                row.append(_warm(ctx, pm, first, second, loop_ns))
                continue
            addr = base + np.arange(0, elems, int(pat[1:]), dtype=np.uint64) * np.uint64(_INT)
            if len(addr) <= TWO_PASS_ACCESSES:
                row.append(_warm(ctx, pm, addr, addr, loop_ns))
            else:
                window = addr[:WINDOW_ACCESSES]
                row.append(_time(ctx, pm, window, loop_ns) / len(window))
        out[pat] = row
    return StrideTableResult(list(sizes), out, ctx.cpu, ctx.calibration.id, ctx.seed, vma.pages_per_node())


def format_stride_table(result: StrideTableResult) -> str:
    """The article's table layout (``Delay  (ns)``, size header, one row per pattern; tabs between cells)."""
    lines = ["Delay  (ns)", "\t" + "\t".join(result.sizes)]
    for pat, row in result.latency_ns.items():
        lines.append(pat + "\t" + "\t".join(f"{v:.2f}" for v in row))
    return "\n".join(lines) + "\n"
