"""Request latencies: a thread's accesses cut into requests of ``n`` consecutive accesses, each timed from the
issue of its first access to the issue of the next request's first access (a server that handles one request
after another: its service time, kernel time at hinting faults included).

Latencies go into a log-spaced histogram (100 bins per decade from 1 ns to 1000 s: percentiles within 2.3 %),
with exact counts, sums and maxima, per thread and in all.

>>> import numpy as np
>>> r = RequestLatencies(n_agents=1, accesses=2)
>>> r.add_window(np.array([0]), np.array([0]), np.array([6]), np.array([0.0, 1, 10, 11, 20, 25]), np.array([True]))
>>> s = r.summary(["thread0"])
>>> s["count"], s["mean_ns"], s["max_ns"]  # requests [0, 10), [10, 20): the last one has no end yet
(2, 10.0, 10.0)
>>> r = RequestLatencies(n_agents=1, accesses=2)  # accesses 1 and 3 cross a line: two rows each
>>> first_line = np.array([True, False, True, True, False, True])
>>> r.add_window(np.array([0]), np.array([0]), np.array([6]), np.array([0.0, 1, 10, 11, 20, 25]),
...              np.array([True]), first_line)
>>> s = r.summary(["thread0"])  # four accesses, two requests: [0, 11) and one still open
>>> s["count"], s["max_ns"]
(1, 11.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RequestLatencies"]

_EDGES_NS = np.logspace(0, 12, 1201)


class RequestLatencies:
    """Per-agent request boundaries and the latency histogram (see the module docstring)."""

    def __init__(self, n_agents: int, accesses: int) -> None:
        if accesses < 1:
            raise ValueError(f"request_accesses = {accesses}: must be >= 1")
        self.n = int(accesses)
        self.done = np.zeros(n_agents, dtype=np.int64)  # accesses committed so far
        self.start = np.full(n_agents, np.nan)  # issue time of the current request's first access
        self.hist = np.zeros((n_agents, len(_EDGES_NS) + 1), dtype=np.int64)
        self.count = np.zeros(n_agents, dtype=np.int64)
        self.sum_ns = np.zeros(n_agents)
        self.max_ns = np.zeros(n_agents)

    def add_window(
        self,
        ids: np.ndarray,
        seg_start: np.ndarray,
        n_commit: np.ndarray,
        issue_ns: np.ndarray,
        program: np.ndarray,
        first_line: np.ndarray | None = None,
    ) -> None:
        """The committed requests of a window: agent ``ids[k]`` committed ``n_commit[k]`` line requests from row
        ``seg_start[k]`` of ``issue_ns`` on (only agents with ``program[agent]`` count). ``first_line`` marks
        the rows that start an access (an access that crosses a line is two rows, one access); None: every
        row is an access."""
        for k in range(len(ids)):
            a, n = int(ids[k]), int(n_commit[k])
            if not n or not program[a]:
                continue
            lo = int(seg_start[k])
            rows = lo + (np.arange(n) if first_line is None else np.flatnonzero(first_line[lo : lo + n]))
            first = int(-self.done[a] % self.n)  # the first request boundary among these accesses
            bounds = issue_ns[rows[first :: self.n]]
            self.done[a] += len(rows)
            if not len(bounds):
                continue
            times = bounds if np.isnan(self.start[a]) else np.r_[self.start[a], bounds]
            self.start[a] = bounds[-1]
            lat = np.diff(times)
            if len(lat):
                self.hist[a] += np.bincount(np.searchsorted(_EDGES_NS, lat), minlength=self.hist.shape[1])
                self.count[a] += len(lat)
                self.sum_ns[a] += float(lat.sum())
                self.max_ns[a] = max(self.max_ns[a], float(lat.max()))

    @staticmethod
    def _stats(hist: np.ndarray, count: int, total: float, largest: float) -> dict[str, Any]:
        if not count:
            return {"count": 0}
        cum = np.cumsum(hist)

        def pct(q: float) -> float:
            k = int(np.searchsorted(cum, q / 100.0 * count))
            if k == 0:
                return float(_EDGES_NS[0])
            lo = _EDGES_NS[min(k - 1, len(_EDGES_NS) - 1)]
            hi = _EDGES_NS[min(k, len(_EDGES_NS) - 1)]
            return float(min(np.sqrt(lo * hi), largest))  # the bin's geometric middle, never above the maximum

        return {"count": int(count), "mean_ns": total / count, "p50_ns": pct(50), "p90_ns": pct(90),
                "p99_ns": pct(99), "p999_ns": pct(99.9), "max_ns": float(largest)}  # fmt: skip

    def summary(self, names: list[str]) -> dict[str, Any]:
        """All threads' request latency statistics, then each thread's under ``threads``."""
        k = len(names)
        out = self._stats(self.hist[:k].sum(axis=0), int(self.count[:k].sum()), float(self.sum_ns[:k].sum()),
                          float(self.max_ns[:k].max(initial=0.0)))  # fmt: skip
        out["accesses_per_request"] = self.n
        out["threads"] = {
            names[a]: self._stats(self.hist[a], int(self.count[a]), float(self.sum_ns[a]), float(self.max_ns[a]))
            for a in range(k)
            if self.count[a]
        }
        return out
