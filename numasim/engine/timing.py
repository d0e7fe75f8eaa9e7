"""The timing rules both fidelities share: how a thread's accesses turn into issue and completion times.

* A **cache hit** at level ``l`` takes that level's latency and uses no memory resource.
* A **miss** takes the idle latency of its route class (controller + links, see :mod:`memsys`) plus the
  queueing delay of every resource it crosses; a miss the stream prefetcher covers (see :mod:`stream`) takes
  that latency times ``M / (M + d)``, where ``M`` is the agent's memory-level parallelism and ``d`` the
  calibration's ``prefetch_distance_lines``: the prefetcher keeps ``d`` more lines in flight, so by Little's
  law a prefetched stream reaches ``(M + d) * 64 B / latency``. It still costs the full bandwidth.
* An **independent** agent issues access ``k`` once it has computed ``compute_ns[k]`` since issuing access
  ``k-1`` and fewer than ``M`` accesses are in flight (``M = max_outstanding_misses`` for a core, the transfer's
  ``outstanding_lines`` for a device). A **dependent** agent (pointer chase) issues access ``k``
  ``compute_ns[k]`` after access ``k-1`` completed.

Both fidelities apply these rules request by request (see :mod:`exact` and :mod:`epoch`).
"""

from __future__ import annotations

__all__ = ["prefetch_factor"]


def prefetch_factor(mlp: int, prefetch_distance_lines: int) -> float:
    """Latency multiplier of a prefetched miss, ``M / (M + d)``."""
    return mlp / (mlp + prefetch_distance_lines)
