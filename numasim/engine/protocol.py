"""What every fidelity is given and what it offers: one input record and one protocol for both engines.

A fidelity is a class built from an :class:`EngineInput` (everything the run is made of, frozen) that offers a
SimPy process (:meth:`Engine.process`), a :meth:`Engine.flush` of its last epoch buckets and its
:meth:`Engine.diagnostics`; :data:`ENGINES` maps each :class:`~numasim.engine.spec.EngineMode` to its class.
``simulate`` runs whichever the caller asked for the same way, so what plugs into the run (kernel daemons,
faults) plugs in once for both. The rules both apply are in :mod:`numasim.engine.timing`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import simpy

if TYPE_CHECKING:
    from .caches import CacheLevelSpec, CacheToCache
    from .cores import CpuShares
    from .memsys import MemorySystem
    from .runtime import EngineBridge
    from .stats import Stats
    from .stream import Agent, Feeder

__all__ = ["EngineInput", "Engine", "grow_bucket_ring"]


@dataclass(frozen=True)
class EngineInput:
    """Everything one run of an engine is made of.

    Attributes
    ----------
    ms : MemorySystem
        Resources, route classes and their idle latencies.
    agents : list of Agent
        Threads then devices, in agent index order.
    feeder : Feeder
        The access stream, cut into blocks per agent.
    stats : Stats
        Where the run's counters go.
    levels : list of CacheLevelSpec
        Cache levels, fastest first.
    instances : ndarray
        ``instances[level, agent]``: the global cache instance an agent uses at a level (devices: unused).
    prefetch_distance_lines : int
        The calibration's stream prefetch depth.
    epoch_ns : float
        Epoch length (utilisation buckets, curve updates).
    window_accesses : int
        Accesses per window the epoch fidelity times at once.
    request_accesses : int
        Accesses per request of each thread (0: no request latencies).
    c2c : CacheToCache or None
        What a cache-to-cache transfer costs (exact mode times them itself; epoch mode's feeder has its own).
    shares : CpuShares or None
        The thread agents' cpu shares while they run (None: no thread shares a cpu); an engine tells it when a
        thread ends and applies the changes (:meth:`Feeder.set_share`, its ``stretch``).
    bridge : EngineBridge or None
        With a run-time kernel: what it may change between windows (pages' nodes and protection, routes,
        stalls, copies); the kernel agents are the last agents.
    """

    ms: MemorySystem
    agents: Sequence[Agent]
    feeder: Feeder
    stats: Stats
    levels: Sequence[CacheLevelSpec]
    instances: np.ndarray
    prefetch_distance_lines: int
    epoch_ns: float
    window_accesses: int
    bridge: EngineBridge | None = None
    request_accesses: int = 0
    c2c: CacheToCache | None = None
    shares: CpuShares | None = None

    @property
    def level_latency_ns(self) -> np.ndarray:
        return np.array([s.latency_ns for s in self.levels], dtype=float)


class Engine(Protocol):
    """A fidelity: built from an :class:`EngineInput`, run as a SimPy process."""

    def __init__(self, inp: EngineInput) -> None: ...

    def process(self, env: simpy.Environment) -> Generator[simpy.Event, None, None]:
        """The SimPy process that times every access of the input's stream."""
        ...

    def flush(self) -> None:
        """Record the epoch buckets the run left open (called once the process has ended)."""
        ...

    def diagnostics(self) -> dict[str, float]:
        """Numbers about the run itself (windows, epochs), not about the machine."""
        ...


def grow_bucket_ring(ring: np.ndarray, touched: np.ndarray, low: int, rows_needed: int) -> tuple[np.ndarray, np.ndarray]:
    """A ring of epoch buckets grown to hold ``rows_needed`` rows from bucket ``low`` on.

    Bucket ``k`` lives in row ``k mod size``; sizes are powers of two, at least doubled, and every open bucket
    ``low .. low + old size - 1`` moves to its row in the larger ring.

    Examples
    --------
    >>> r, t = grow_bucket_ring(np.arange(4.0).reshape(4, 1), np.ones(4, bool), 6, 5)
    >>> r.ravel().tolist()  # buckets 6, 7, 8, 9 were rows 2, 3, 0, 1; now rows 6, 7, 0, 1 of 8
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0]
    """
    rows = len(ring)
    size = max(2 * rows, 1 << max(rows_needed - 1, 1).bit_length())
    ks = np.arange(low, low + rows, dtype=np.int64)
    new_ring = np.zeros((size, ring.shape[1]))
    new_touched = np.zeros(size, dtype=np.bool_)
    new_ring[ks & (size - 1)] = ring[ks & (rows - 1)]
    new_touched[ks & (size - 1)] = touched[ks & (rows - 1)]
    return new_ring, new_touched
