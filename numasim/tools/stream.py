"""Virtual STREAM (McCalpin's stream.c 5.10, OpenMP build): Copy, Scale, Add, Triad on three arrays.

What stream.c does: three ``double`` arrays of N elements (static arrays; their pages are first touched by the
parallel initialisation loop, ``schedule(static)``, so each thread's block lands on the node its thread runs
on under the default policy), then NTIMES (10) passes of each kernel; the best time of passes 2..10 gives the
rate, counting 2 (Copy, Scale) or 3 (Add, Triad) arrays x 8 bytes per element.

Simulated: the arrays are mapped in the tool's task and faulted in block by block from each thread's cpu by the
simulated kernel (so ``numactl --membind``/``--interleave`` and first touch behave as on Linux). Each thread is
pinned to an allowed cpu in ascending order (``OMP_PROC_BIND=close``). The engine times, per kernel, a window
of :data:`WINDOW_LINES` cache lines per array per thread (all threads together, so they share controllers and
links), and the pass time is that window's time scaled to the block length. Every pass of a deterministic
simulation takes the same time: avg = min = max.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from numasim.engine import ThreadSpec, simulate
from numasim.errors import WorkloadError
from numasim.kernel.task import VMA
from numasim.tools.context import ToolContext, page_map
from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.access import AccessChunk, concat_chunks

__all__ = [
    "StreamResult", "stream", "format_stream", "first_touched_arrays", "streaming_pass_ns", "KERNELS", "WINDOW_LINES",
    "DEFAULT_ARRAY_ELEMENTS",
]

KERNELS = ("Copy", "Scale", "Add", "Triad")
_READS = {"Copy": ("a",), "Scale": ("c",), "Add": ("a", "b"), "Triad": ("b", "c")}
_WRITE = {"Copy": "c", "Scale": "b", "Add": "c", "Triad": "a"}
_WORDS = {"Copy": 2, "Scale": 2, "Add": 3, "Triad": 3}
DEFAULT_ARRAY_ELEMENTS = 10_000_000
WINDOW_LINES = 2048
"""Lines per array per thread the engine times for each kernel (the rest of the pass is scaled from it)."""
NTIMES = 10


@dataclass
class StreamResult:
    array_elements: int
    threads: int
    cpus: list[int]
    best_rate_mb_s: dict[str, float]
    avg_time_s: dict[str, float]
    min_time_s: dict[str, float]
    max_time_s: dict[str, float]
    calibration_id: str
    seed: int
    pages_per_node: dict[int, int] = field(default_factory=dict)


def stream(
    ctx: ToolContext,
    threads: int = 1,
    array_elements: int = DEFAULT_ARRAY_ELEMENTS,
    kernels: Sequence[str] = KERNELS,
) -> StreamResult:
    """Run the virtual STREAM with ``threads`` OpenMP threads (``OMP_NUM_THREADS``) in ``ctx``.

    ``kernels`` times only those of :data:`KERNELS` (validation that compares one kernel need not pay for four);
    the result then holds only those.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> r = stream(tool_context(m, resolve_calibration(m), cpunodebind=[0]), threads=2, array_elements=200_000)
    >>> sorted(r.best_rate_mb_s) == sorted(KERNELS), r.pages_per_node
    (True, {0: 1173})
    """
    if threads < 1:
        raise WorkloadError(f"STREAM: OMP_NUM_THREADS = {threads}: must be at least 1")
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown or not kernels:
        raise WorkloadError(f"STREAM: kernels = {list(kernels)}: expected some of {', '.join(KERNELS)}")
    if array_elements < threads * 8:
        raise WorkloadError(f"STREAM: array size {array_elements} is too small for {threads} threads")
    cpus = ctx.cpus(threads)
    bounds = np.linspace(0, array_elements, threads + 1).astype(np.int64)
    arrays = first_touched_arrays(ctx, ("a", "b", "c"), array_elements, cpus, bounds, "STREAM")
    best, avg, mn, mx = {}, {}, {}, {}
    for kernel in kernels:
        secs = streaming_pass_ns(ctx, cpus, arrays, bounds, _READS[kernel], (_WRITE[kernel],)) * 1e-9
        best[kernel] = 1.0e-06 * _WORDS[kernel] * 8 * array_elements / secs
        avg[kernel] = mn[kernel] = mx[kernel] = secs
    pages: dict[int, int] = {}
    for v in arrays.values():
        for n, c in v.pages_per_node().items():
            pages[n] = pages.get(n, 0) + c
    return StreamResult(array_elements, threads, cpus, best, avg, mn, mx, ctx.calibration.id, ctx.seed,
                        dict(sorted(pages.items())))


def first_touched_arrays(
    ctx: ToolContext, names: Sequence[str], array_elements: int, cpus: Sequence[int], bounds: np.ndarray, tool: str
) -> dict[str, VMA]:
    """``double`` arrays of ``array_elements`` mapped in ``ctx``'s task, each thread's block (elements
    ``bounds[t]`` to ``bounds[t + 1]``, OpenMP's static schedule) first touched from its cpu ``cpus[t]``, so the
    policy places it as Linux would; ``tool`` names the program in the error if the policy cannot place them."""
    nbytes = array_elements * 8
    arrays = {}
    for name in names:
        vma = ctx.kernel.mmap(ctx.task, nbytes)
        for t in range(len(cpus)):
            lo = (int(bounds[t]) * 8) // PAGE_SIZE_BYTES * PAGE_SIZE_BYTES
            hi = int(bounds[t + 1]) * 8
            if hi > lo:
                ctx.kernel.touch(ctx.task, vma.start + lo, hi - lo, cpu=cpus[t])
        if (vma.nodes < 0).any() or not ctx.task.alive:
            raise WorkloadError(f"{tool}: the kernel could not place the arrays (out of memory under the policy)")
        arrays[name] = vma
    return arrays


def streaming_pass_ns(
    ctx: ToolContext,
    cpus: Sequence[int],
    arrays: dict[str, VMA],
    bounds: np.ndarray,
    reads: Sequence[str],
    writes: Sequence[str],
) -> float:
    """Time (ns) of one pass of a streaming kernel over ``arrays`` by ``len(cpus)`` threads, thread ``t`` on
    elements ``bounds[t]`` to ``bounds[t + 1]``: per cache line, a load of each of ``reads`` then a store to
    each of ``writes``, in that order (an array in both is read, then written back: ``a[i] = s * a[i]``).

    The engine times :data:`WINDOW_LINES` lines per thread (all threads together, so they share controllers
    and links); each thread's window is scaled to its block, and the pass ends with the slowest (the implicit
    barrier)."""
    specs = [ThreadSpec(t, cpu=c) for t, c in enumerate(cpus)]
    chunks = []
    block_lines = []
    for t in range(len(cpus)):
        lo_line = int(bounds[t]) * 8 // 64
        hi_line = int(bounds[t + 1]) * 8 // 64
        n = max(min(WINDOW_LINES, hi_line - lo_line), 1)
        block_lines.append(max(hi_line - lo_line, 1))
        off = (np.arange(n, dtype=np.uint64) + np.uint64(lo_line)) * np.uint64(64)
        cols = [np.uint64(arrays[s].start) + off for s in (*reads, *writes)]
        addr = np.stack(cols, axis=1).ravel()
        wr = np.zeros((n, len(cols)), dtype=bool)
        wr[:, len(reads):] = True
        chunks.append(AccessChunk.build(addr, thread=t, is_write=wr.ravel()))
    r = simulate(ctx.machine, ctx.calibration, specs, [concat_chunks(chunks)], page_map(arrays.values()),
                 seed=ctx.seed, record_latencies=False)
    pass_ns = 0.0
    for t, rec in enumerate(r.threads):
        window = min(WINDOW_LINES, block_lines[t])
        pass_ns = max(pass_ns, (rec.finish_ns - rec.start_ns) * block_lines[t] / window)
    return pass_ns


def format_stream(result: StreamResult) -> str:
    """What stream.c 5.10 (OpenMP) prints, header to ``Solution Validates``."""
    n = result.array_elements
    rule = "-------------------------------------------------------------"
    per_array_mib = 8 * n / 1024.0 / 1024.0
    per_test_us = int(next(iter(result.min_time_s.values())) * 1e6)  # the first kernel run (Copy in a full run)
    lines = [
        rule,
        "STREAM version $Revision: 5.10 $",
        rule,
        "This system uses 8 bytes per array element.",
        rule,
        f"Array size = {n} (elements), Offset = 0 (elements)",
        f"Memory per array = {per_array_mib:.1f} MiB (= {per_array_mib / 1024.0:.1f} GiB).",
        f"Total memory required = {3 * per_array_mib:.1f} MiB (= {3 * per_array_mib / 1024.0:.1f} GiB).",
        f"Each kernel will be executed {NTIMES} times.",
        " The *best* time for each kernel (excluding the first iteration)",
        " will be used to compute the reported bandwidth.",
        rule,
        f"Number of Threads requested = {result.threads}",
        f"Number of Threads counted = {result.threads}",
        rule,
        "Your clock granularity/precision appears to be 1 microseconds.",
        f"Each test below will take on the order of {per_test_us} microseconds.",
        f"   (= {per_test_us} clock ticks)",
        "Increase the size of the arrays if this shows that",
        "you are not getting at least 20 clock ticks per test.",
        rule,
        "WARNING -- The above is only a rough guideline.",
        "For best results, please be sure you know the",
        "precision of your system timer.",
        rule,
        "Function    Best Rate MB/s  Avg time     Min time     Max time",
    ]
    for k in (k for k in KERNELS if k in result.best_rate_mb_s):
        label = f"{k}:".ljust(11)
        lines.append(
            f"{label}{result.best_rate_mb_s[k]:12.1f}  {result.avg_time_s[k]:11.6f}  "
            f"{result.min_time_s[k]:11.6f}  {result.max_time_s[k]:11.6f}"
        )
    lines += [rule, "Solution Validates: avg error less than 1.000000e-13 on all three arrays", rule]
    return "\n".join(lines) + "\n"
