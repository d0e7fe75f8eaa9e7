"""The timing rules both fidelities share: how a thread's accesses turn into issue and completion times.

* A **cache hit** at level ``l`` takes that level's latency and uses no memory resource, except a write that hits
  a line clean in its core's caches: it owes the line's write-back (posted, the core does not wait; see
  :mod:`memsys`).
* A **miss** takes the idle latency of its route class (controller + links, see :mod:`memsys`) plus the
  queueing delay of every resource it crosses: its *memory request latency*, never below the idle latency.
* **Prefetching** shortens what the core waits for (its *load-to-use* latency), at every level: a request the
  stream prefetcher covers (see :mod:`stream`) costs the core its latency times ``M / (M + d)``, where ``M`` is
  the agent's memory-level parallelism and ``d`` the calibration's ``prefetch_distance_lines``: the prefetcher
  keeps ``d`` more lines in flight, so by Little's law a prefetched stream reaches ``(M + d) * 64 B / latency``.
  Two floors keep it physical (modelling rules, assumptions, not fits). The line is at best in the cache the
  prefetcher fills: the second level (Intel's L2 streamer and AMD's L2 prefetcher fetch into L2), the first for
  an L2 hit (the L1 next-line prefetcher); so a prefetched request never costs less than a hit there, and as
  the shortened latency grows with the level's own, no level is ever faster than the level above it and memory
  never faster than the last-level cache (given memory slower than the LLC, as on every real machine). And a
  miss is never usable before the last resource on its route has served it, so prefetching hides latency but
  never bandwidth (a stream is not delivered faster than its bottleneck serves it). A miss still costs the
  full bandwidth.
* An **independent** agent issues access ``k`` once it has computed ``compute_ns[k]`` since issuing access
  ``k-1`` and fewer than ``M`` accesses are in flight (``M = max_outstanding_misses`` for a core, the transfer's
  ``outstanding_lines`` for a device). A **dependent** agent (pointer chase) issues access ``k``
  ``compute_ns[k]`` after access ``k-1`` completed.

Both fidelities apply these rules request by request (see :mod:`exact` and :mod:`epoch`).
"""

from __future__ import annotations

__all__ = ["UTILISATION_EMA_WEIGHT", "prefetch_factor"]

UTILISATION_EMA_WEIGHT = 0.5
"""Weight of the previous epoch's utilisation in the smoothed value the loaded-latency curves read (both
fidelities): a one-epoch-late counter would otherwise make load and delay chase each other."""


def prefetch_factor(mlp: int, prefetch_distance_lines: float) -> float:
    """Latency multiplier of a prefetched miss, ``M / (M + d)``."""
    return mlp / (mlp + prefetch_distance_lines)
