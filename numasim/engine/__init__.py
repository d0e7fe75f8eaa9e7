"""The engine: discrete-event simulation of memory accesses through caches, links and memory controllers.

Two fidelities over one timing model (:mod:`numasim.engine.timing`): ``exact`` (every request an event on a
SimPy clock, FIFO servers) and ``epoch`` (per time window, aggregated with numpy, queueing from the
loaded-latency curves). Entry point: :func:`simulate`.
"""

from numasim.engine.memsys import MemorySystem, Resource, build_memory_system
from numasim.engine.pagemap import PageMap
from numasim.engine.result import (
    CacheLevelRecord,
    DeviceRecord,
    InitiatorRecord,
    NodeRecord,
    PairRecord,
    ResourceRecord,
    SimulationResult,
    ThreadRecord,
)
from numasim.engine.simulate import simulate
from numasim.engine.spec import DeviceTransfer, EngineMode, ThreadSpec

__all__ = [
    "simulate",
    "SimulationResult",
    "ThreadSpec",
    "DeviceTransfer",
    "PageMap",
    "EngineMode",
    "MemorySystem",
    "Resource",
    "build_memory_system",
    "NodeRecord",
    "InitiatorRecord",
    "PairRecord",
    "ResourceRecord",
    "ThreadRecord",
    "DeviceRecord",
    "CacheLevelRecord",
]
