"""Quick one-allocation, one-phase workloads (``numasim trace generate --pattern``, experiments, demos)."""

from __future__ import annotations

from typing import Any

from numasim.errors import WorkloadError
from numasim.units import parse_size
from numasim.workload.spec import Workload

__all__ = ["QUICK_PATTERNS", "quick_workload"]

QUICK_PATTERNS = ("random", "sequential", "strided", "zipf", "pointer_chase")


def quick_workload(
    pattern: str,
    *,
    size: str = "64M",
    accesses: int = 1_000_000,
    threads: int = 1,
    write_fraction: float = 0.0,
    exponent: float = 1.0,
    stride_bytes: int = 64,
    compute_ns: float = 0.0,
) -> Workload:
    """A one-allocation, one-phase workload for ``trace generate --pattern`` and quick experiments.

    Examples
    --------
    >>> w = quick_workload("zipf", size="1M", accesses=10, threads=2)
    >>> [p.pattern for p in w.phases], w.allocations[0].size_bytes
    (['zipf'], 1048576)
    """
    if pattern not in QUICK_PATTERNS:
        raise WorkloadError(f"--pattern = {pattern!r}: expected one of {', '.join(QUICK_PATTERNS)}")
    if threads < 1:
        raise WorkloadError(f"--threads = {threads}: need at least one thread")
    try:
        size_bytes = parse_size(size)
    except ValueError as exc:
        raise WorkloadError(f"--size = {size!r}: {exc}") from None
    phase: dict[str, Any] = {
        "pattern": pattern,
        "allocation": "data",
        "accesses": accesses,
        "write_fraction": write_fraction,
        "compute_ns": compute_ns,
    }
    if pattern == "zipf":
        phase["exponent"] = exponent
    if pattern == "strided":
        phase["stride_bytes"] = stride_bytes
    if pattern == "sequential":
        phase["split"] = True
    return Workload.model_validate(
        {
            "name": f"quick-{pattern}",
            "threads": [{"id": i} for i in range(threads)],
            "allocations": [{"name": "data", "size_bytes": size_bytes}],
            "phases": [phase],
        }
    )
