"""The prefetch rules both compiled kernels apply (see :mod:`numasim.engine.timing`), written once.

A prefetched request costs the core its latency times ``M / (M + d)`` (``factor``), but never less than what is
physical: a hit is at best in the level the prefetcher fills (the second; the first for an L2 hit), so no level is
faster than the one above it; a miss is not usable before every server on its route has served it (prefetching
hides latency, not bandwidth: the slowest server's end, which on a route whose link is slower than its controller
is the link's), nor before a hit in the level the prefetcher fills.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["prefetched_hit_ns", "prefetched_miss_ns"]


@njit(cache=True, inline="always")
def prefetched_hit_ns(latency_ns: float, factor: float, level_lat: np.ndarray, level: int) -> float:
    """A prefetched hit at ``level`` (> 0): shortened, not below a hit in the level it is prefetched into."""
    return max(latency_ns * factor, level_lat[min(level - 1, 1)])


@njit(cache=True, inline="always")
def prefetched_miss_ns(request_ns: float, factor: float, served_ns: float, level_lat: np.ndarray, n_levels: int) -> float:
    """A prefetched miss: shortened, not before ``served_ns`` (every server of its route done), nor below a
    prefetched hit."""
    lat = max(request_ns * factor, served_ns)
    if n_levels > 0 and lat < level_lat[min(n_levels - 1, 1)]:
        lat = level_lat[min(n_levels - 1, 1)]
    return lat
