"""What the engine is asked to run: threads pinned to cpus, DMA transfers by devices, and the fidelity mode.

These are plain frozen dataclasses (the engine's inside); the workload layer builds them from its pydantic specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = ["EngineMode", "ThreadSpec", "DeviceTransfer", "DEFAULT_DEVICE_OUTSTANDING_LINES"]

DEFAULT_DEVICE_OUTSTANDING_LINES = 256
"""64-byte DMA reads a device keeps in flight (PCIe tags x read request size: 256 x 64 B = 16 KiB)."""


class EngineMode(StrEnum):
    """The two fidelities over the same timing model."""

    EPOCH = "epoch"
    """Accesses aggregated per time window with numpy; queueing delay from the loaded-latency curves."""
    EXACT = "exact"
    """Each access an event on a SimPy clock; controllers and links are FIFO servers."""


@dataclass(frozen=True)
class ThreadSpec:
    """A thread on a cpu; the cpu's node is the thread's initiator node.

    Attributes
    ----------
    id : int
        The thread id used in :attr:`AccessChunk.thread`.
    cpu : int
        The cpu the thread runs on (with ``cpus``: starts on; its caches and node stay this cpu's).
    dependent : bool
        Every access depends on the previous one (a pointer chase): memory-level parallelism 1, so the thread
        pays the full latency of each access. Otherwise accesses are independent up to the core's
        ``max_outstanding_misses``.
    start_ns : float
        When the thread starts issuing.
    cpus : tuple of int, optional
        The cpus the scheduler may run it on (its affinity: a node's cpus, a cpuset, the whole machine), ``cpu``
        among them. Threads that outnumber their cpus share them evenly (the scheduler's load balancing:
        :func:`~numasim.engine.cores.cpu_sharers`). None: pinned to ``cpu``, sharing it only with threads pinned
        there too.
    """

    id: int
    cpu: int
    dependent: bool = False
    start_ns: float = 0.0
    cpus: tuple[int, ...] | None = None


@dataclass(frozen=True)
class DeviceTransfer:
    """One DMA transfer by a device (e.g. a NIC sending a buffer: a DMA *read* of host memory).

    Attributes
    ----------
    device : str
        Name of a :class:`~numasim.topology.model.Device` of the machine.
    direction : {"read", "write"}
        ``"read"``: the device reads host memory (a send); ``"write"``: it writes host memory (a receive).
    address : int
        Virtual address of the buffer (looked up in the :class:`PageMap` like a cpu access).
    size_bytes : int
        Length of the buffer.
    start_ns : float
        When the transfer starts.
    outstanding_lines : int
        64-byte requests the device keeps in flight (its memory-level parallelism).
    """

    device: str
    direction: Literal["read", "write"]
    address: int
    size_bytes: int
    start_ns: float = 0.0
    outstanding_lines: int = DEFAULT_DEVICE_OUTSTANDING_LINES
