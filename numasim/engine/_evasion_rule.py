"""Write-allocate evasion as both compiled kernels apply it (:func:`numasim.timing.model.write_allocate_evaded`,
written once for numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["evaded_share"]


@njit(cache=True, inline="always")
def evaded_share(free_ns: float, issue_ns: float, line_busy_ns: float, ramp: np.ndarray) -> float:
    """Share of a full-line write's read for ownership skipped at a controller free at ``free_ns`` when the write
    issues at ``issue_ns``: the lines queued ahead of it (``(free - issue) / line busy``) placed on the ramp
    ``ramp[0]`` (none skipped) .. ``ramp[1]`` (all)."""
    queued = (free_ns - issue_ns) / line_busy_ns
    return min(max((queued - ramp[0]) / (ramp[1] - ramp[0]), 0.0), 1.0)
