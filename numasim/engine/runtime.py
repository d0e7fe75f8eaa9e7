"""The kernel on the engine's clock: what a run-time kernel is given by the engine, and what it may do to the run.

A *run-time kernel* (automatic NUMA balancing, kswapd and tiering, user-space daemons such as numad) is an
object the caller hands to :func:`~numasim.engine.simulate.simulate`. Both fidelities offer it the same
:class:`EngineControl` and call it the same way:

- :meth:`KernelRuntime.attach` once, before the first access, with the run's SimPy environment: the kernel
  starts its daemons there as SimPy processes (``env.process(...)``), timed with ``env.timeout``;
- the engine times accesses only up to the next event the environment has scheduled (``env.peek()``, to an
  epoch), then lets the environment run it: a daemon therefore sees the page map, and changes it, at the
  simulated time it runs, to within one epoch;
- a request to a page whose :attr:`EngineControl.page_protected` flag is set (a PTE the scanner made
  PROT_NONE) takes a *hinting fault*: the engine clears the flag (the fault handler restores the PTE), records
  the fault and times the request against the page's node as it is then. The faults are handed to
  :meth:`KernelRuntime.on_faults` in time order, at the latest when the engine next yields to the environment;
  what the fault handler does (its cost on the faulting thread, a migration) the kernel applies with
  :meth:`EngineControl.stall` and :meth:`EngineControl.copy_pages`, which take effect at that thread's next
  request.

Pages are addressed by their *flat index*: the order of :meth:`numasim.engine.pagemap.PageMap.lookup_tables`'
flat node array (runs of consecutive virtual pages sorted by address). :attr:`EngineControl.page_node` is that
array itself: the engine reads it at issue time, so a kernel that writes a page's new node there has moved it
for every request issued after the write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

__all__ = ["FaultBatch", "EngineControl", "KernelRuntime"]


@dataclass(frozen=True)
class FaultBatch:
    """Hinting faults taken since the last batch, in time order (parallel arrays, one row per fault).

    Attributes
    ----------
    agent : ndarray of int64
        The faulting agent (a thread; devices do not fault).
    page : ndarray of int64
        Flat page index of the faulting page.
    time_ns : ndarray of float64
        When the faulting request issued (non-decreasing).
    write : ndarray of bool
        The faulting request was a write.
    node : ndarray of int16
        The page's node when it faulted (what the request was timed against).
    """

    agent: np.ndarray
    page: np.ndarray
    time_ns: np.ndarray
    write: np.ndarray
    node: np.ndarray

    def __len__(self) -> int:
        return len(self.page)


class EngineControl(Protocol):
    """What a run-time kernel may read and change while the engine runs."""

    page_node: np.ndarray
    """int16 node id per flat page index; written by the kernel to move pages, read by the engine at issue."""
    page_protected: np.ndarray
    """bool per flat page index; set by the kernel (scanner), cleared by the engine on the fault it causes."""

    def page_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per run of consecutive virtual pages, in address order: first virtual page number (uint64), number
        of pages (int64) and the flat index of its first page (int64)."""
        ...

    def agent_cpu(self) -> np.ndarray:
        """The cpu each agent runs on now (int64; -1 for devices and kernel agents)."""
        ...

    def agent_thread_id(self) -> np.ndarray:
        """The workload's thread id of each agent (int64; -1 for devices and kernel agents)."""
        ...

    def kernel_agent(self, node: int) -> int:
        """The agent index of the kernel thread (kworker/kswapd) on ``node``: copies a daemon makes are issued
        by it, on that node's cpus."""
        ...

    def stall(self, agent: np.ndarray, duration_ns: np.ndarray) -> None:
        """Delay each ``agent``'s next request by ``duration_ns`` (kernel time on that thread: fault handling,
        reclaim). Durations add up."""
        ...

    def copy_pages(self, agent: int, src_node: np.ndarray, dst_node: np.ndarray) -> None:
        """Copy one base page per element from ``src_node[k]`` to ``dst_node[k]``: ``page_bytes / 64`` line
        reads of the source node, then as many line writes to the destination, issued by ``agent`` before its
        own next request, through the same controllers and links as its own traffic (and counted as kernel
        traffic, not as the program's)."""
        ...

    def move_thread(self, agent: int, cpu: int) -> None:
        """Run thread ``agent`` on ``cpu`` from its next request on (its route to memory changes; its caches
        are those of the new cpu)."""
        ...


class KernelRuntime(Protocol):
    """A kernel whose daemons and fault handlers run on the simulation clock."""

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        """Called once before the first access: keep ``ctl`` and start daemon processes on ``env``."""
        ...

    def on_faults(self, faults: FaultBatch) -> None:
        """Handle the hinting faults taken since the previous call (in time order)."""
        ...

    def counters(self) -> dict[str, int]:
        """/proc/vmstat-style counters at the end of the run, with the kernel's names."""
        ...
