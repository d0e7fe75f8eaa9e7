"""The engine: discrete-event simulation of memory accesses through caches, links and memory controllers.

Two fidelities over one timing model (:mod:`numasim.engine.timing`), one set of parameters (a
:class:`~numasim.calibrate.model.Calibration`), one entry point (:func:`simulate`):

* ``exact`` (:mod:`~numasim.engine.exact`): every request an event in strict time order on a SimPy clock; LRU
  set-associative caches; controllers and link directions are FIFO servers. For teaching and small traces.
* ``epoch`` (:mod:`~numasim.engine.epoch`): requests aggregated per epoch with numpy; caches by a StatStack
  reuse-distance estimate; queueing from the loaded-latency curves plus a capacity wait, solved as a fixed
  point per window of epochs. For sweeps and traces of 10^8 accesses in bounded memory.

Design rationale, briefly: the workload arrives as :class:`~numasim.workload.access.AccessChunk` columns and
never becomes a Python object per access in epoch mode; exact mode pays Python per request but not a SimPy
event per resource (the naive design, measured in ``benchmarks/bench_engine.py``). Modules: ``spec`` (inputs),
``pagemap``, ``memsys`` (resources and route classes), ``stream`` (chunks -> per-agent line requests,
prefetch rule), ``caches``, ``timing``, ``exact``, ``epoch``, ``stats``, ``result``, ``plots``.
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
