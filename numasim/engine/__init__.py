"""The engine: discrete-event simulation of memory accesses through caches, links and memory controllers.

Two fidelities over one timing model (:mod:`numasim.engine.timing`), one set of parameters (a
:class:`~numasim.timing.model.Calibration`), one entry point (:func:`simulate`):

* ``exact`` (:mod:`~numasim.engine.exact`): every request in strict time order on a SimPy clock; LRU
  set-associative caches; controllers and link directions are FIFO servers. For teaching and small traces.
* ``epoch`` (:mod:`~numasim.engine.epoch`): the same FIFO servers and issue rules, advanced epoch by epoch;
  caches by a StatStack reuse-distance estimate over whole chunks. For sweeps and traces of 10^8 accesses in
  bounded memory.

Design rationale, briefly: the workload arrives as :class:`~numasim.workload.access.AccessChunk` columns and
never becomes a Python object per access; the per-request loops are compiled with numba (``_exact_kernel``,
``_epoch_kernel``, ``_feed_kernel``) over numpy arrays, and the feeder prepares the next chunk on a second
thread while a chunk is timed (the naive design, a SimPy event per resource per access, is measured in
``benchmarks/bench_engine.py``). Modules: ``spec`` (inputs), ``pagemap``, ``memsys`` (resources and route
classes), ``stream`` (chunks -> per-agent line requests, prefetch rule), ``caches``, ``timing``, ``exact``,
``epoch``, ``stats``, ``result``, ``plots``; ``runtime`` (a kernel on the simulation clock: what it may change
while the engine runs), ``tlb`` (the STLB and page walks), ``requests`` (request latencies). :func:`tune_allocator`
(:mod:`numasim.allocator`) keeps freed memory for reuse; the ``numasim`` command and sweep workers call it.
"""

from numasim.allocator import tune_allocator
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
from numasim.engine.runtime import CompositeRuntime, Daemon, EngineControl, FaultBatch, KernelRuntime
from numasim.engine.simulate import simulate
from numasim.engine.spec import DeviceTransfer, EngineMode, ThreadSpec
from numasim.engine.tlb import TlbSpec

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
    "KernelRuntime",
    "EngineControl",
    "FaultBatch",
    "CompositeRuntime",
    "Daemon",
    "TlbSpec",
    "tune_allocator",
]
