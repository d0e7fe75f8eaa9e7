"""What a simulation returns: flat typed records that become tables, plus a few arrays for figures.

``SimulationResult.tables()`` gives ``{name: [row dict, ...]}``; ``to_dict()`` is plain JSON-able (arrays as
lists); ``to_pandas()`` gives ``{name: DataFrame}`` when pandas is installed.

Two latencies, named for what they measure:

* ``load_to_use_mean_ns``: what the core waits for per 64-byte line request, from issue to the data being
  usable, averaged over *every* request (cache hits included), and shortened by prefetching (a prefetched line
  was requested ahead of the load). It is what a program's run time is made of, not a memory latency: with
  caches and prefetching it is usually far below the idle route latency.
* ``memory_latency_*_ns``: the memory request latency, issue to data of the requests that missed every cache
  and went to memory (idle route latency + queueing at controllers and links + loaded-latency delays), whether
  or not a prefetcher issued them early. It is what mlc's loaded-latency or a latency counter reports, and never
  below ``memory_idle_latency_ns``, the mean idle latency of the same requests' routes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

__all__ = [
    "NodeRecord",
    "InitiatorRecord",
    "PairRecord",
    "ResourceRecord",
    "ThreadRecord",
    "DeviceRecord",
    "CacheLevelRecord",
    "SimulationResult",
]


@dataclass(frozen=True)
class NodeRecord:
    """Accesses to the memory of one node (the *target*), from every initiator.

    ``accesses`` count 64-byte line requests (an access spanning two lines counts twice); ``bytes_*`` are the
    program's bytes; ``memory_accesses`` are the requests that missed every cache and reached the controller.
    Latencies: see the module docstring (``load_to_use_mean_ns`` over all requests; ``memory_latency_*`` over
    the memory accesses, percentiles from the histogram).
    """

    node: int
    pages_resident: int
    accesses: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    local_accesses: int
    remote_accesses: int
    memory_accesses: int
    load_to_use_mean_ns: float
    memory_latency_mean_ns: float
    memory_latency_p50_ns: float
    memory_latency_p99_ns: float
    memory_idle_latency_ns: float


@dataclass(frozen=True)
class InitiatorRecord:
    """Accesses issued by the cpus of one node, or by one device (``initiator`` is ``node<k>`` or its name)."""

    initiator: str
    node: int
    accesses: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    local_accesses: int
    remote_accesses: int
    memory_accesses: int
    load_to_use_mean_ns: float
    memory_latency_mean_ns: float
    memory_latency_p50_ns: float
    memory_latency_p99_ns: float
    memory_idle_latency_ns: float


@dataclass(frozen=True)
class PairRecord:
    """One cell of the initiator x target matrix."""

    initiator: str
    target_node: int
    accesses: int
    bytes: int
    memory_accesses: int
    load_to_use_mean_ns: float
    memory_latency_mean_ns: float
    memory_idle_latency_ns: float


@dataclass(frozen=True)
class ResourceRecord:
    """A memory controller, one direction of a link, or a device attach link."""

    name: str
    kind: str
    bytes: int
    busy_ns: float
    utilisation_mean: float
    utilisation_peak: float
    bandwidth_used_gb_s: float
    bandwidth_available_gb_s: float


@dataclass(frozen=True)
class ThreadRecord:
    """One thread (or device transfer) of the run.

    ``stall_ns`` is the time it was not computing (finish - start - compute): the load-to-use latency that
    memory-level parallelism did not overlap. ``cpu_share``: the share of a cpu it had over its run, time-weighted
    (1: a cpu to itself; less where threads outnumber the cpus they may run on,
    :class:`~numasim.engine.cores.CpuShares`: more once others end); its ``compute_ns`` then counts the time it
    waited for its turn on the cpu too.
    """

    agent: str
    thread_id: int | None
    cpu: int | None
    node: int
    accesses: int
    compute_ns: float
    stall_ns: float
    start_ns: float
    finish_ns: float
    load_to_use_mean_ns: float
    memory_accesses: int
    memory_latency_mean_ns: float
    cpu_share: float = 1.0


@dataclass(frozen=True)
class DeviceRecord:
    """One DMA transfer."""

    device: str
    direction: str
    size_bytes: int
    start_ns: float
    finish_ns: float
    duration_ns: float
    bandwidth_gb_s: float


@dataclass(frozen=True)
class CacheLevelRecord:
    """Where an initiator's requests were served (a cache level or ``memory``)."""

    initiator: str
    level: str
    accesses: int


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.generic):
        return _clean(x.item())
    return x


@dataclass
class SimulationResult:
    """Everything one :func:`~numasim.engine.simulate` run measured.

    Attributes
    ----------
    utilisation : ndarray (n_buckets, n_resources)
        Utilisation of every resource over time, in buckets of ``utilisation_bucket_ns`` (``epoch_ns``, doubled
        as often as needed to stay under 4096 buckets); columns in the order of ``resources``.
    latency_hist_by_node, latency_hist_by_initiator : ndarray
        Memory request latency histograms (counts of the requests that went to memory) per target node / per
        initiator over the bins ``hist_edges_ns``.
    """

    mode: str
    seed: int
    calibration_id: str
    machine: str
    epoch_ns: float
    run_time_ns: float
    accesses: int
    nodes: list[NodeRecord]
    initiators: list[InitiatorRecord]
    matrix: list[PairRecord]
    resources: list[ResourceRecord]
    threads: list[ThreadRecord]
    devices: list[DeviceRecord]
    cache_levels: list[CacheLevelRecord]
    utilisation_bucket_ns: float
    utilisation: np.ndarray
    hist_edges_ns: np.ndarray
    latency_hist_by_node: np.ndarray
    latency_hist_by_initiator: np.ndarray
    node_ids: list[int] = field(default_factory=list)
    initiator_names: list[str] = field(default_factory=list)
    diagnostics: dict[str, float] = field(default_factory=dict)
    """Engine statistics (epoch mode: windows timed, the last epoch reached); not part of ``to_dict``."""
    tlb: dict[str, Any] | None = None
    """With ``tlb``: STLB misses and page-walk time (all threads and per thread) and the TLB assumed."""
    coherence: dict[str, Any] | None = None
    """When threads wrote lines other cores held: the accesses that missed their first cache level because
    another core's write took the line (``misses``), the cache-to-cache transfers (an access to a line another
    core held modified: ``transfers_local`` from a core of the same last-level cache, ``transfers_remote`` from
    another), in all and per thread (``threads``), and what they were charged (``cost``)."""
    write_allocate: dict[str, Any] | None = None
    """With a calibration that grants write-allocate evasion (``core.write_allocate_evasion``): the reads for
    ownership that full-line writes skipped, per memory node and in all, and the rule that skipped them."""
    requests: dict[str, Any] | None = None
    """With ``request_accesses``: the requests' latency (count, mean, percentiles, max; all threads and per
    thread), from the issue of a request's first access to that of the next one."""
    kernel: dict[str, Any] | None = None
    """With a run-time kernel (``simulate(runtime=...)``): its /proc/vmstat counters (``vmstat``), pages per node
    over time (``pages_per_node_series``), the bytes its page copies read and wrote per node, its thread moves."""

    _TABLES = ("nodes", "initiators", "matrix", "resources", "threads", "devices", "cache_levels")

    def access_matrix(self, what: str = "accesses") -> np.ndarray:
        """Initiator (rows, ``initiator_names``) x target node (columns, ``node_ids``) of ``what``."""
        out = np.zeros((len(self.initiator_names), len(self.node_ids)))
        ri = {n: k for k, n in enumerate(self.initiator_names)}
        ci = {n: k for k, n in enumerate(self.node_ids)}
        for p in self.matrix:
            out[ri[p.initiator], ci[p.target_node]] = getattr(p, what)
        return out

    def node(self, node_id: int) -> NodeRecord:
        for n in self.nodes:
            if n.node == node_id:
                return n
        raise KeyError(f"no node {node_id} in the result (nodes: {self.node_ids})")

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Every record list as rows of plain values (``None`` for undefined numbers such as a mean of nothing)."""
        return {
            name: [{k: _clean(v) for k, v in asdict(r).items()} for r in getattr(self, name)]
            for name in self._TABLES
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able content (arrays as nested lists)."""
        out: dict[str, Any] = {
            f.name: _clean(getattr(self, f.name))
            for f in fields(self)
            if f.name not in self._TABLES
            and f.name not in ("diagnostics", "kernel", "requests", "tlb", "coherence", "write_allocate")
            and not isinstance(getattr(self, f.name), np.ndarray)
        }
        out |= self.tables()
        out["utilisation"] = np.round(self.utilisation, 9).tolist()
        out["hist_edges_ns"] = self.hist_edges_ns.tolist()
        out["latency_hist_by_node"] = self.latency_hist_by_node.tolist()
        out["latency_hist_by_initiator"] = self.latency_hist_by_initiator.tolist()
        if self.kernel is not None:
            out["kernel"] = self.kernel
        if self.requests is not None:
            out["requests"] = self.requests
        if self.tlb is not None:
            out["tlb"] = self.tlb
        if self.coherence is not None:
            out["coherence"] = self.coherence
        if self.write_allocate is not None:
            out["write_allocate"] = self.write_allocate
        return out

    def to_pandas(self) -> dict[str, Any]:
        """``{table name: pandas.DataFrame}``; needs pandas (an optional dependency)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("SimulationResult.to_pandas needs pandas: pip install pandas") from exc
        return {name: pd.DataFrame(rows) for name, rows in self.tables().items()}
