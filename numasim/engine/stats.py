"""Counters the engines fill, vectorised: per initiator x target counts, latency histograms, resource busy time.

Both fidelities hand their accesses here in blocks of numpy arrays, so the two modes are measured the same way.
Two latencies are kept apart, because they answer different questions:

* **load-to-use** (``load_to_use_*``): what the core waits for per line request, cache hits included and shortened
  by prefetching (a prefetched line was requested ahead of the load);
* **memory request latency** (``memory_latency_*``): issue to data of the requests that missed every cache and
  went to memory, queueing included; never below the route's idle latency.

Memory request latencies go into log-spaced histograms (32 bins per decade, 0.1 ns to 10 ms) rather than being stored, so a run
of 10^8 accesses needs no more memory than one of 10^3; percentiles are read from the histogram
(resolution about 7 %, interpolated within a bin).
"""

from __future__ import annotations

import functools

import numpy as np

from ._epoch_kernel import add_rows_at

__all__ = ["HIST_BINS_PER_DECADE", "hist_edges_ns", "Stats", "TimeSeries", "percentile_from_hist"]

HIST_BINS_PER_DECADE = 32
HIST_MIN_EXP = -1.0
_HIST_DECADES = 8
N_HIST = HIST_BINS_PER_DECADE * _HIST_DECADES


def hist_edges_ns() -> np.ndarray:
    """Edges of the latency histogram bins (``N_HIST + 1`` values, ns)."""
    return np.asarray(10.0 ** (HIST_MIN_EXP + np.arange(N_HIST + 1) / HIST_BINS_PER_DECADE))


def _bins(latency_ns: np.ndarray) -> np.ndarray:
    # float32 logarithm: twice as fast, and its ~1e-7 relative error only moves a latency within that of a
    # bin edge (bins are 7 % wide) into the neighbouring bin. Clipped as a float, then cast (same bins).
    x = np.log10(np.maximum(latency_ns.astype(np.float32), np.float32(1e-3)))
    x -= np.float32(HIST_MIN_EXP)
    x *= np.float32(HIST_BINS_PER_DECADE)
    np.clip(x, 0, N_HIST - 1, out=x)
    return x.astype(np.int64)


@functools.cache
def bin_table() -> tuple[np.ndarray, np.ndarray]:
    """A table for binning float32 latencies by their top 16 bits (sign, exponent, 7 mantissa bits): the bin of
    each cell's lower end, and the float32 edge inside the cell where the next bin starts (infinity if none).
    A cell spans under 1 % and a bin 7 %, so one edge at most. Agrees with :func:`_bins` except within float32
    rounding of an edge."""
    lower = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(lower) & (lower >= 0)
    lo = np.where(finite, lower, np.float32(0))
    bin_lo = _bins(lo.astype(np.float64))
    edges = hist_edges_ns().astype(np.float32)
    nxt = np.minimum(bin_lo + 1, N_HIST)
    edge = np.where(bin_lo + 1 < N_HIST, edges[nxt], np.float32(np.inf)).astype(np.float32)
    upper = ((np.arange(1 << 16, dtype=np.uint64) + 1) << np.uint64(16)).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        inside = edge < np.where(np.isfinite(upper), upper, np.float32(np.inf))
    edge = np.where(finite & inside, edge, np.float32(np.inf)).astype(np.float32)
    return bin_lo.astype(np.int16), edge


def percentile_from_hist(hist: np.ndarray, q: float) -> float:
    """The ``q``-th percentile (0..100) of a latency histogram, geometric interpolation within the bin."""
    total = hist.sum()
    if total == 0:
        return float("nan")
    cum = np.cumsum(hist)
    target = q / 100.0 * total
    k = int(np.searchsorted(cum, target, side="left"))
    k = min(k, len(hist) - 1)
    before = cum[k - 1] if k > 0 else 0
    frac = (target - before) / hist[k] if hist[k] else 0.0
    edges = hist_edges_ns()
    lo, hi = np.log10(edges[k]), np.log10(edges[k + 1])
    return float(10.0 ** (lo + frac * (hi - lo)))


class TimeSeries:
    """Busy time per resource over simulated time, in buckets that double in width to stay under ``max_points``."""

    def __init__(self, n_resources: int, epoch_ns: float, max_points: int = 4096) -> None:
        self.epoch_ns = epoch_ns
        self.factor = 1  # epochs per bucket (a power of two)
        self.max_points = max_points
        self.busy = np.zeros((0, n_resources))

    @property
    def bucket_ns(self) -> float:
        return self.epoch_ns * self.factor

    def add(self, epoch_index: np.ndarray, busy_ns: np.ndarray) -> None:
        """Add ``busy_ns[k]`` (one row per resource vector) to the bucket of ``epoch_index[k]``; work before time 0
        (threads may start at negative times) counts in the first bucket, where the run's time axis starts."""
        if len(epoch_index) == 0:
            return
        rows = np.asarray(busy_ns, dtype=np.float64)
        if rows.shape != (len(epoch_index), self.busy.shape[1]):
            raise ValueError(f"TimeSeries.add: busy_ns has shape {rows.shape}, need one row of "
                             f"{self.busy.shape[1]} resources per epoch index ({len(epoch_index)})")
        epoch_index = np.maximum(np.asarray(epoch_index), 0)
        top = int(epoch_index.max())
        while top // self.factor >= self.max_points:
            self._coarsen()
        need = top // self.factor + 1
        if need > len(self.busy):
            grown = np.zeros((max(need, 2 * len(self.busy)), self.busy.shape[1]))
            grown[: len(self.busy)] = self.busy
            self.busy = grown
        add_rows_at(self.busy, epoch_index // self.factor, rows)

    def _coarsen(self) -> None:
        b = self.busy
        if len(b) % 2:
            b = np.vstack([b, np.zeros((1, b.shape[1]))])
        self.busy = b[0::2] + b[1::2]
        self.factor *= 2

    def utilisation(self, run_time_ns: float) -> np.ndarray:
        """Per bucket x resource utilisation up to ``run_time_ns`` (the last bucket may be partial), at most 1.

        A service's busy time is recorded in the bucket it starts in, so a bucket can hold more work than its
        width; a resource serves what it can and carries the rest into the next bucket (work is conserved:
        ``c_k = max(0, c_{k-1} + x_k - w_k)``, Lindley's recursion, written with a running minimum).

        Examples
        --------
        >>> ts = TimeSeries(1, epoch_ns=100.0)
        >>> ts.add(np.array([0, 1, 2]), np.array([[130.0], [90.0], [0.0]]))
        >>> ts.utilisation(300.0)[:, 0].round(2).tolist()
        [1.0, 1.0, 0.2]
        """
        n = max(1, int(np.ceil(run_time_ns / self.bucket_ns))) if run_time_ns > 0 else 0
        b = np.zeros((n, self.busy.shape[1]))
        k = min(n, len(self.busy))
        b[:k] = self.busy[:k]
        width = np.full(n, self.bucket_ns)
        if n:
            width[-1] = max(run_time_ns - (n - 1) * self.bucket_ns, 1e-9)
        if n and (b > width[:, None]).any():
            total = np.cumsum(b - width[:, None], axis=0)
            carry = total - np.minimum(np.minimum.accumulate(total, axis=0), 0.0)
            before = np.vstack([np.zeros((1, b.shape[1])), carry[:-1]])
            b = b + before - carry
        return b / width[:, None]


class Stats:
    """Accumulated counts of one simulation."""

    def __init__(
        self,
        n_initiators: int,
        n_nodes: int,
        n_agents: int,
        n_levels: int,
        n_resources: int,
        epoch_ns: float,
        record_latencies: bool,
    ) -> None:
        self.n_init, self.n_nodes, self.n_levels = n_initiators, n_nodes, n_levels
        shape = (n_initiators, n_nodes, 2)
        self.accesses = np.zeros(shape, dtype=np.int64)
        self.bytes = np.zeros(shape, dtype=np.int64)
        self.memory_lines = np.zeros(shape, dtype=np.int64)
        self.load_to_use_sum_ns = np.zeros((n_initiators, n_nodes))
        self.memory_latency_sum_ns = np.zeros((n_initiators, n_nodes))
        self.record_latencies = record_latencies
        self.hist = np.zeros((n_initiators, n_nodes, N_HIST), dtype=np.int64) if record_latencies else None
        self.level_hits = np.zeros((n_initiators, n_levels + 1), dtype=np.int64)
        self.agent_accesses = np.zeros(n_agents, dtype=np.int64)
        self.agent_load_to_use_ns = np.zeros(n_agents)
        self.agent_memory_lines = np.zeros(n_agents, dtype=np.int64)
        self.agent_memory_latency_ns = np.zeros(n_agents)
        self.agent_compute_ns = np.zeros(n_agents)
        self.agent_finish_ns = np.zeros(n_agents)
        self.series = TimeSeries(n_resources, epoch_ns)

    def add(
        self,
        agent: np.ndarray,
        initiator: np.ndarray | None,
        target: np.ndarray,
        is_write: np.ndarray,
        level: np.ndarray,
        latency_ns: np.ndarray,
        size_bytes: np.ndarray,
        compute_ns: np.ndarray,
        route_class: np.ndarray | None = None,
        agent_runs: tuple[np.ndarray, np.ndarray] | None = None,
        request_ns: np.ndarray | None = None,
    ) -> None:
        """Count a block of completed accesses (all arrays of one length).

        ``latency_ns`` is each request's load-to-use latency, ``request_ns`` its memory request latency (read
        only where ``level`` is memory; None: equal to ``latency_ns``).

        ``route_class``, if the caller has it, is ``(initiator * n_nodes + target) * 2 + is_write`` (int64);
        ``initiator`` is then not read (may be None). ``agent_runs`` = (agents, run lengths), if ``agent`` is
        those agents in runs (each agent once), sums per agent over the runs instead of by ``bincount``.
        """
        if len(agent) == 0:
            return
        nn = self.n_nodes
        if route_class is None:
            assert initiator is not None
            pair = initiator.astype(np.int64) * nn + target
            cls = pair * 2 + is_write
        else:
            cls = route_class
            pair = cls >> 1
        size = self.n_init * nn * 2
        # One count per (route class, level) gives accesses, memory lines and level hits alike.
        nl = self.n_levels + 1
        by_level = np.bincount(cls * nl + level, minlength=size * nl).reshape(self.n_init, nn, 2, nl)
        self.accesses += by_level.sum(axis=3)
        self.memory_lines += by_level[..., self.n_levels]
        self.level_hits += by_level.sum(axis=(1, 2))
        self.bytes += (
            np.bincount(cls, weights=size_bytes, minlength=size).astype(np.int64).reshape(self.bytes.shape)
        )
        self.load_to_use_sum_ns += np.bincount(pair, weights=latency_ns, minlength=self.n_init * nn).reshape(
            self.load_to_use_sum_ns.shape
        )
        mem = level == self.n_levels
        req = (latency_ns if request_ns is None else request_ns)[mem]
        self.memory_latency_sum_ns += np.bincount(pair[mem], weights=req, minlength=self.n_init * nn).reshape(
            self.memory_latency_sum_ns.shape
        )
        if self.hist is not None:
            flat = pair[mem] * N_HIST + _bins(req)
            self.hist += np.bincount(flat, minlength=self.hist.size).reshape(self.hist.shape)
        if agent_runs is not None:
            ids, lens = agent_runs
            keep = lens > 0
            ids, lens = ids[keep], lens[keep]
            starts = np.r_[0, np.cumsum(lens)[:-1]]
            self.agent_accesses[ids] += lens
            self.agent_load_to_use_ns[ids] += np.add.reduceat(latency_ns, starts)
            self.agent_compute_ns[ids] += np.add.reduceat(compute_ns, starts, dtype=np.float64)
        else:
            na = len(self.agent_accesses)
            self.agent_accesses += np.bincount(agent, minlength=na)
            self.agent_load_to_use_ns += np.bincount(agent, weights=latency_ns, minlength=na)
            self.agent_compute_ns += np.bincount(agent, weights=compute_ns, minlength=na)
        na = len(self.agent_accesses)
        self.agent_memory_lines += np.bincount(agent[mem], minlength=na)
        self.agent_memory_latency_ns += np.bincount(agent[mem], weights=req, minlength=na)

    def finish(self, agent: int, completion_ns: float) -> None:
        if completion_ns > self.agent_finish_ns[agent]:
            self.agent_finish_ns[agent] = completion_ns
