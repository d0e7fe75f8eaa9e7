"""The kernel on the engine's clock: what a run-time kernel is given by the engine, and what it may do to the run.

A *run-time kernel* (automatic NUMA balancing, kswapd and tiering, user-space daemons such as numad) is an
object the caller hands to :func:`~numasim.engine.simulate.simulate`. Both fidelities offer it an
:class:`EngineBridge` (this module's :class:`EngineControl`) and call it as follows (as described for the
epoch fidelity; the exact one yields to the environment at every epoch boundary and installs each thread's
requests 2,048 at a time, handling their faults and reading their routes then):

- :meth:`KernelRuntime.attach` once, before the first access, with the run's SimPy environment: the kernel
  starts its daemons there as SimPy processes (``env.process(...)``), timed with ``env.timeout``;
- the engine times accesses a window at a time (in epoch mode, up to ``window_accesses`` buffered requests;
  at most until about the next event the environment has scheduled) and then lets the environment run every
  event due by the window's end: a daemon therefore sees the page map, and changes it, at the simulated time it
  runs, to within one window: the engine sizes windows to end near the environment's next event, at the pace of
  the window before (the result's ``kernel["late_ns_max"]`` says how late a daemon ran at worst);
- a request to a page whose :attr:`EngineControl.page_protected` flag is set (a PTE the scanner made
  PROT_NONE) takes a *hinting fault*. Before it times a window, the engine finds each protected page's first
  request in it (in the order the requests are estimated to issue, at the last window's pace), clears the flag
  (the fault handler restores the PTE) and hands the faults to :meth:`KernelRuntime.on_faults`, in that order.
  The handler may move the page (the faulting request and the rest of the window then go to its new node, as
  the retried access does in Linux) and returns its time on the faulting thread, which the engine spends right
  before the faulting request; copies it asks for with :meth:`EngineControl.copy_pages` are issued by the
  node's kernel agent from the next window on; other kernel time (a scan) goes through
  :meth:`EngineControl.stall`, before the thread's next window.

Pages are addressed by their *flat index*: the order of :meth:`numasim.engine.pagemap.PageMap.lookup_tables`'
flat node array (runs of consecutive virtual pages sorted by address). :attr:`EngineControl.page_node` is that
array itself: the engine reads it when it times a window, so a kernel that writes a page's new node there has
moved it for every request timed after the write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import simpy

from numasim.timing.model import EVASION_FULL_QUEUE_LINES, EVASION_ONSET_QUEUE_LINES

from ._runtime_kernel import commit_window, protected_rows, reroute

if TYPE_CHECKING:
    from .memsys import MemorySystem
    from .pagemap import PageMap
    from .stream import Agent, Block

__all__ = [
    "FaultBatch", "huge_block_keys", "EngineControl", "KernelRuntime", "EngineBridge", "KERNEL_AGENT_MLP", "COPY_LINES_PER_REQUEST",
    "bulk_class_tables", "evasion_tables", "CompositeRuntime", "Daemon", "FirstTouchRuntime",
]

COPY_LINES_PER_REQUEST = 8
"""A kernel page copy is timed in requests of this many lines (512 bytes), each holding every resource on its
route for as many lines' busy time: the same bandwidth on the links and controllers as line by line, at an
eighth of the requests to time (the queues see copies in 512-byte grains)."""
ACTIVITY_NS = 100_000.0
"""How often the kernel's activity over time is recorded (100 us of simulated time)."""
FAULT_ROUND_NS = 10_000.0
"""When two agents of a window fault on one page, the kernel handles the window's hinting faults in rounds of at
most this much estimated time, and the time each round charges a thread delays that thread's later requests before
the next round is ordered: a thread paying for migrations (5 us each) does not win the race to a page it would
reach far later. Where a round would decide a page two threads reach within a round of each other, it is
:data:`FAULT_ROUND_CLOSE_NS` long: no longer than one fault (1 us nominal) and the next request, so that a thread
has at most one fault whose cost its estimates do not know yet. (10 us rounds throughout let the thread ahead of
two sweeping the same pages take a round's worth of them at its mean cost, and keep the lead it would have lost:
tests/kernel/test_balancing.py, threads sweeping in step; 2 us rounds throughout doubled the database
experiment's time for the same result.)"""
FAULT_ROUND_CLOSE_NS = 2_000.0
"""The round where two threads are estimated to reach a page within :data:`FAULT_ROUND_NS` of each other."""
KERNEL_AGENT_MLP = 16 // COPY_LINES_PER_REQUEST
"""Copy requests a kernel agent keeps in flight: 16 lines, an L2 streamer's worth, as a core's own streaming
loop does (a nominal value, not fitted)."""


def bulk_class_tables(
    class_base: np.ndarray, path_ptr: np.ndarray, path_res: np.ndarray, path_busy: np.ndarray,
    path_wb_share: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The route class tables doubled: class ``n_classes + c`` is class ``c`` for a copy request of
    :data:`COPY_LINES_PER_REQUEST` lines (the same route and idle latency, that many lines' busy time, the same
    write-back shares)."""
    n = len(class_base)
    ptr = np.concatenate([path_ptr, path_ptr[1:] + path_ptr[-1]])
    return (
        np.concatenate([class_base, class_base]),
        ptr,
        np.concatenate([path_res, path_res]),
        np.concatenate([path_busy, path_busy * COPY_LINES_PER_REQUEST]),
        np.concatenate([path_wb_share, path_wb_share]),
    ) if n else (class_base, path_ptr, path_res, path_busy, path_wb_share)


def evasion_tables(ms: MemorySystem, bulk: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The compiled loops' write-allocate evasion arguments (:meth:`MemorySystem.class_evasion`): per class its
    controller and its evadable share (doubled like :func:`bulk_class_tables` for ``bulk``; both empty when the
    calibration grants none), and the ramp's bounds in queued lines (:func:`~numasim.timing.model.write_allocate_evaded`)."""
    class_ctrl, evadable = ms.class_evasion()
    ramp = np.array([EVASION_ONSET_QUEUE_LINES, EVASION_FULL_QUEUE_LINES])
    if not evadable.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0), ramp
    if bulk:
        class_ctrl, evadable = np.concatenate([class_ctrl, class_ctrl]), np.concatenate([evadable, evadable])
    return class_ctrl, evadable, ramp


def huge_block_keys(huge: np.ndarray, vpn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each faulting row's 2 MiB block (its virtual page number over 512) where its page is part of a huge page,
    else a key of its own; and which rows are their key's first. A huge page faults once
    (``do_huge_pmd_numa_page`` restores the whole PMD): its block's later rows in a batch are no faults.

    >>> keys, first = huge_block_keys(np.array([True, True, False]), np.array([512, 513, 7], dtype=np.uint64))
    >>> keys.tolist(), first.tolist()
    ([1, 1, -3], [True, False, True])
    """
    keys = np.where(huge, (vpn >> np.uint64(9)).astype(np.int64), -1 - np.arange(len(huge)))
    first = np.zeros(len(huge), dtype=bool)
    first[np.unique(keys, return_index=True)[1]] = True
    return keys, first


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
    page_last_access_ns: np.ndarray
    """float64 per flat page index: when a program request last touched the page (-inf: never); the kernel's
    LRU for reclaim and demotion."""
    page_huge: np.ndarray
    """bool per flat page index: the page belongs to a 2 MiB page (the TLB counts one entry for its range);
    written by the kernel when it collapses or splits huge pages."""
    page_absent: np.ndarray
    """bool per flat page index: not faulted in yet (its ``page_node`` is -1). Set by a kernel that faults pages
    on the clock (:meth:`KernelRuntime.on_first_touch`); the engine hands each such page's first request to it
    before the request is timed. A kernel that fills a page some other way writes its node, which ends it."""

    def page_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per run of consecutive virtual pages, in address order: first virtual page number (uint64), number
        of pages (int64) and the flat index of its first page (int64)."""
        ...

    def page_vpn(self) -> np.ndarray:
        """The virtual page number (uint64) of every flat page index, in ascending order (read only)."""
        ...

    def split_huge(self, flat_pages: np.ndarray) -> None:
        """Mark the 2 MiB pages these flat pages belong to as split (every page of each a base page)."""
        ...

    def agent_cpu(self) -> np.ndarray:
        """The cpu each agent runs on now (int64; -1 for devices and kernel agents)."""
        ...

    def agent_thread_id(self) -> np.ndarray:
        """The workload's thread id of each agent (int64; -1 for devices and kernel agents)."""
        ...

    def agent_requests(self) -> np.ndarray:
        """Requests each agent has issued by the environment's time (int64): which threads are running (a
        scheduler tick only comes to a thread that runs)."""
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
        """Run thread ``agent`` on ``cpu`` from its next request on: its route to memory changes (its cache and
        TLB estimates stay those of its first cpu: a simplification, coverage row B10)."""
        ...

    def set_first_access_ns(self, flat_pages: np.ndarray, cost_ns: np.ndarray) -> None:
        """Charge ``cost_ns[k]`` of kernel time to whichever thread first accesses flat page ``flat_pages[k]``,
        right before that access (a page fault that stalled in the allocator: direct reclaim). Costs of one
        page add up; each is charged once."""
        ...


class KernelRuntime(Protocol):
    """A kernel whose daemons and fault handlers run on the simulation clock."""

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        """Called once before the first access: keep ``ctl`` and start daemon processes on ``env``."""
        ...

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        """Handle a window's hinting faults (in time order) before the window is timed; return the kernel's
        time on the faulting thread per fault in ns (fault handling, a synchronous migration), spent right
        before the faulting request, or None for none."""
        ...

    def counters(self) -> dict[str, int]:
        """/proc/vmstat-style counters at the end of the run, with the kernel's names."""
        ...


class FirstTouchRuntime(KernelRuntime, Protocol):
    """A run-time kernel that also takes first-touch faults: pages it marked :attr:`EngineControl.page_absent`
    fault in at their first request, on the clock."""

    def on_first_touch(self, faults: FaultBatch) -> np.ndarray | None:
        """Fault in a window's absent pages at their first requests (in time order; ``faults.node`` is -1)
        before the window is timed: write each page's node (and of every page a fault fills with it, a huge
        page's) into :attr:`EngineControl.page_node`; return the time on the faulting thread per fault in ns,
        or None for none."""
        ...


class EngineBridge:
    """The engine's side of :class:`EngineControl`: one object both fidelities hand to a run-time kernel.

    The engine owns the timing; this object owns what the kernel may change between windows -- the node and
    the protection bit of every page, each agent's route (its initiator), delays owed by agents and copies
    waiting to be issued -- and what the engine reports back (hinting faults, kernel traffic, pages per node
    over time).

    Parameters
    ----------
    ms : MemorySystem
        The run's memory system (initiators, nodes, route classes).
    pages : PageMap
        The page map; its flat node array becomes :attr:`page_node` (written in place: the result's
        ``pages_resident`` then counts where pages ended).
    agents : list of Agent
        Every agent: program threads and devices first, then the kernel agents (``kernel_agents``).
    kernel_agents : dict of int to int
        Node id -> index of the kernel agent that issues copies for that node.
    now_ns : callable
        The engine's current time (copies never issue before it).
    """

    def __init__(
        self,
        ms: MemorySystem,
        pages: PageMap,
        agents: Sequence[Agent],
        kernel_agents: dict[int, int],
        now_ns: Callable[[], float],
        page_bytes: int,
    ) -> None:
        self.ms = ms
        self.page_bytes = page_bytes
        self.lines_per_page = page_bytes // 64
        self.requests_per_page = max(1, self.lines_per_page // COPY_LINES_PER_REQUEST)
        starts, ends, offsets, flat, _ = pages.lookup_tables()
        self._runs = (starts.copy(), (ends - starts).astype(np.int64), offsets.copy())
        self.page_node: np.ndarray = flat
        self.page_protected: np.ndarray = np.zeros(len(flat), dtype=bool)
        self.page_last_access_ns: np.ndarray = np.full(len(flat), -np.inf)
        self.page_huge: np.ndarray = pages.huge_flags()
        self.page_absent: np.ndarray = np.zeros(len(flat), dtype=bool)
        # kernel time owed at a page's first access (set_first_access_ns); kept apart from page_protected so that
        # a run-time kernel's fault handlers see only the faults they caused
        self._first_access_ns = np.zeros(0)
        self._first_access_pending = np.zeros(0, dtype=bool)
        self._first_access_left = 0
        self.agents = list(agents)
        self.n_program = len(self.agents) - len(kernel_agents)
        self._kernel_of_node = dict(kernel_agents)
        self.kernel_agent_ids = np.array(sorted(kernel_agents.values()), dtype=np.int64)
        self.is_kernel = np.zeros(len(self.agents), dtype=bool)
        self.is_kernel[self.kernel_agent_ids] = True
        self.now_ns = now_ns
        n_nodes = ms.n_nodes
        top = max(ms.node_ids) + 1
        self.node_index = np.full(max(top, 1), -1, dtype=np.int16)
        self.node_index[np.array(ms.node_ids)] = np.arange(n_nodes, dtype=np.int16)
        self.node_ids = np.array(ms.node_ids, dtype=np.int16)
        self.agent_initiator = np.array([a.initiator for a in self.agents], dtype=np.int64)
        self.agent_class_base = self.agent_initiator * (n_nodes * 2)
        self._cpu = np.array([-1 if a.cpu is None else a.cpu for a in self.agents], dtype=np.int64)
        self._tid = np.array([-1 if a.thread_id is None else a.thread_id for a in self.agents], dtype=np.int64)
        # what the engine applies at the next window
        self.pending_stall_ns = np.zeros(len(self.agents))
        self.pending_stall_since_ns = np.full(len(self.agents), np.inf)  # when each pending stall was first charged
        self._env: simpy.Environment | None = None
        self._copies: dict[int, list[np.ndarray]] = {}  # kernel agent -> [(2, k) src/dst node ids]
        self._copy_line = 0  # copy requests get line numbers of their own (never a program's, never reused)
        # what the engine reports
        self._copy_requests_rc = np.zeros(2 * ms.n_classes, dtype=np.int64)  # line classes, then copy classes
        self.pages_copied = 0
        self.thread_moves: list[tuple[float, int, int, int]] = []  # (time, agent, from cpu, to cpu)
        self.series_ns: list[float] = []
        self.series_pages: list[np.ndarray] = []
        self.late_ns_max = 0.0
        self._requests = np.zeros(len(self.agents), dtype=np.int64)
        # epoch mode: committed requests issued past the environment's clock (agent and issue time of each): a
        # window runs past the environment's next event, and its requests issued after a scheduler tick ran after it
        self._ahead: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.int64), np.zeros(0))
        # exact mode: requests issued from the blocks installed now, counted only when a block completes (a block
        # of 2,048 requests can outlast a scan period)
        self.issued_in_blocks: Callable[[], np.ndarray] | None = None
        self.window_limit = np.zeros(0, dtype=np.int64)  # per segment of the last window: requests it may commit
        self._sampled_at_copies: tuple[int, int] = (-1, -1)
        self.kernel_ns = np.zeros(len(self.agents))  # the kernel's time charged to each agent at its faults
        # each agent's hinting faults so far and the kernel's time on them: what a fault still ahead will cost
        self._hint_ns = np.zeros(len(self.agents))
        self._hints = np.zeros(len(self.agents))
        self._runtime: KernelRuntime | None = None
        self._absent_left = 0
        self._faulted_in = 0
        self._vpn: np.ndarray | None = None
        self._moves: tuple[np.ndarray, ...] = (
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16), np.zeros(0, dtype=np.int16), np.zeros(0, np.int64)
        )
        # the kernel's activity over time: cumulative counters and the program's memory latency per interval
        self.activity: list[tuple[float, int, int, float, int]] = []  # (t, hint faults, migrated, lat sum, n)
        self._lat_sum, self._lat_n = 0.0, 0

    # --- EngineControl ---------------------------------------------------------------------------------------
    def page_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._runs

    def page_vpn(self) -> np.ndarray:
        if self._vpn is None:
            first, count, offset = self._runs
            self._vpn = np.zeros(len(self.page_node), dtype=np.uint64)
            for f, c, o in zip(first.tolist(), count.tolist(), offset.tolist(), strict=True):
                self._vpn[o : o + c] = np.arange(f, f + c, dtype=np.uint64)
        return self._vpn

    def split_huge(self, flat_pages: np.ndarray) -> None:
        """The 2 MiB pages these flat pages belong to are split: every page of each is a base page now."""
        flat_pages = np.asarray(flat_pages)
        if not len(flat_pages):
            return
        flat_pages = flat_pages[self.page_huge[flat_pages]]  # base pages have nothing to split
        if not len(flat_pages):
            return
        vpn = self.page_vpn()
        for key in np.unique(vpn[flat_pages] >> np.uint64(9)).tolist():
            lo, hi = np.searchsorted(vpn, [np.uint64(key << 9), np.uint64((key + 1) << 9)])
            self.page_huge[lo:hi] = False

    def agent_cpu(self) -> np.ndarray:
        return self._cpu.copy()

    def agent_thread_id(self) -> np.ndarray:
        return self._tid.copy()

    def agent_requests(self) -> np.ndarray:
        if self.issued_in_blocks is not None:
            return self._requests + self.issued_in_blocks()
        out = self._requests.copy()
        if len(self._ahead[0]) and self._env is not None:
            # Epoch mode counts a window's requests when it is timed, and its environment runs the events due by
            # the window's end afterwards: a request the window issued after an event's time has not issued yet at
            # that event. Counted as issued, a thread the scan at 3 ms charged 983 us of PTE updates, whose window
            # had run 28 us past it, ran before that scan and not after it (its stall then ended past the tick at
            # 4 ms): it looked idle at that tick, and another thread ran the next scan (exact mode: the first).
            agent, issue = self._ahead
            out -= np.bincount(agent[issue > self._env.now], minlength=len(out))
        return out

    def kernel_agent(self, node: int) -> int:
        if node in self._kernel_of_node:
            return self._kernel_of_node[node]
        # a memory-only node: its copies are issued from the nearest node with cpus
        m = self.ms.machine
        row = m.slit()[m.index_of(node)]
        best = min(self._kernel_of_node, key=lambda n: (row[m.index_of(n)], n))
        return self._kernel_of_node[best]

    def stall(self, agent: np.ndarray, duration_ns: np.ndarray) -> None:
        agent = np.asarray(agent, dtype=np.int64)
        np.add.at(self.pending_stall_ns, agent, np.asarray(duration_ns, dtype=float))
        if self._env is not None:
            np.minimum.at(self.pending_stall_since_ns, agent, float(self._env.now))

    def copy_pages(self, agent: int, src_node: np.ndarray, dst_node: np.ndarray) -> None:
        pair = np.vstack([np.asarray(src_node, dtype=np.int16), np.asarray(dst_node, dtype=np.int16)])
        if pair.shape[1]:
            self._copies.setdefault(int(agent), []).append(pair)
            self.pages_copied += int(pair.shape[1])

    def set_first_access_ns(self, flat_pages: np.ndarray, cost_ns: np.ndarray) -> None:
        flat = np.asarray(flat_pages, dtype=np.int64)
        cost = np.asarray(cost_ns, dtype=float)
        if flat.shape != cost.shape or (len(flat) and (flat.min() < 0 or flat.max() >= len(self.page_node))):
            raise ValueError("set_first_access_ns: one cost per flat page index, each within the page map")
        if not np.isfinite(cost).all() or (cost < 0).any():
            raise ValueError("set_first_access_ns: costs must be finite and >= 0 ns")
        if not len(self._first_access_ns):
            self._first_access_ns = np.zeros(len(self.page_node))
            self._first_access_pending = np.zeros(len(self.page_node), dtype=bool)
        np.add.at(self._first_access_ns, flat, cost)
        self._first_access_pending[flat[cost > 0]] = True
        self._first_access_left = int(np.count_nonzero(self._first_access_pending))

    def move_thread(self, agent: int, cpu: int) -> None:
        init = self.ms.initiator_of_cpu(cpu)
        self.thread_moves.append((self.now_ns(), int(agent), int(self._cpu[agent]), int(cpu)))
        self._cpu[agent] = cpu
        self.agent_initiator[agent] = init
        self.agent_class_base[agent] = init * (self.ms.n_nodes * 2)

    # --- the engine's side -----------------------------------------------------------------------------------
    def attach(self, runtime: KernelRuntime, env: simpy.Environment) -> None:
        self._runtime = runtime
        self._env = env
        runtime.attach(env, self)
        if self.page_absent.any():
            self.page_node[self.page_absent] = -1
        self._absent_left = int(np.count_nonzero(self.page_absent))
        self.sample(0.0)

    @property
    def absent_pages(self) -> int:
        """Pages still to fault in at their first request."""
        return self._absent_left

    def sample(self, t_ns: float, *, force: bool = False) -> None:
        """Record pages per node (node order of the memory system) at ``t_ns`` if pages moved since the last
        record (a kernel that moves a page copies it), or ``force``: the series holds every change and the end."""
        changes = (self.pages_copied, self._faulted_in)  # pages move by copies, and appear by first-touch faults
        if self.series_pages and changes == self._sampled_at_copies and not force:
            return
        self._sampled_at_copies = changes
        # a page not faulted in yet is on no node
        present = self.page_node[self.page_node >= 0] if self._absent_left else self.page_node
        counts = np.bincount(present, minlength=len(self.node_index))[self.node_ids.astype(np.int64)]
        if self.series_pages and t_ns <= self.series_ns[-1]:
            self.series_pages[-1] = counts
            return
        self.series_ns.append(float(t_ns))
        self.series_pages.append(counts)

    def note_latency(self, latency_sum_ns: float, requests: int) -> None:
        """The program's memory requests timed since the last call: their latency sum and count."""
        self._lat_sum += latency_sum_ns
        self._lat_n += requests

    def record_activity(self, t_ns: float, *, force: bool = False) -> None:
        """At most every :data:`ACTIVITY_NS` (or ``force``): the kernel's cumulative hinting faults and migrated
        pages, and the program's memory requests since the last record."""
        if not force and self.activity and t_ns - self.activity[-1][0] < ACTIVITY_NS:
            return
        c = self.counters()
        migrated = c.get("pgmigrate_success", 0)  # every mover counts here (one counter: the rate stays >= 0)
        self.activity.append((float(t_ns), int(c.get("numa_hint_faults", 0)), int(migrated), self._lat_sum, self._lat_n))
        self._lat_sum, self._lat_n = 0.0, 0

    def copy_blocks(self, budget_pages: int, n_levels: int) -> list[tuple[int, Block]]:
        """Up to ``budget_pages`` queued page copies per kernel agent, as blocks of line requests (each page:
        its lines read from the source node, then written to the destination)."""
        from .stream import Block

        out: list[tuple[int, Block]] = []
        for agent, queue in self._copies.items():
            if not queue:
                continue
            pairs = np.concatenate(queue, axis=1)
            take, rest = pairs[:, :budget_pages], pairs[:, budget_pages:]
            queue.clear()
            if rest.shape[1]:
                queue.append(rest)
            k = take.shape[1]
            rpp = self.requests_per_page
            write = np.tile(np.repeat(np.array([False, True]), rpp), k)
            node = np.where(write, np.repeat(take[1], 2 * rpp), np.repeat(take[0], 2 * rpp))
            target = self.node_index[node]
            n = len(target)
            lines = np.arange(self._copy_line, self._copy_line + n, dtype=np.uint64) | np.uint64(1 << 62)
            self._copy_line += n
            rc = self.ms.n_classes + self.agent_class_base[agent] + target.astype(np.int64) * 2 + write
            size = np.full(n, 64 * COPY_LINES_PER_REQUEST, dtype=np.int32)
            out.append((agent, Block(
                lines, target, write, size, np.zeros(n), np.ones(n, dtype=bool),
                np.full(n, n_levels, dtype=np.int8), rc, np.full(n, -1, dtype=np.int64),
            )))  # fmt: skip
        return out

    def faults_before_window(
        self, ids: np.ndarray, lens: np.ndarray, page: np.ndarray, rc: np.ndarray, t0_ns: float,
        pace_ns: float | np.ndarray, start_ns: np.ndarray | None = None, span_ns: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Take the hinting faults of a window before it is timed: the first request to each protected page
        (in the order the requests are estimated to issue: each segment's ``start_ns``, else ``t0_ns``, plus the
        request's position times ``pace_ns``, one for all segments or one each; ``span_ns``: how long each
        segment is expected to take, the kernel's time included, else its length times its pace) faults,
        the kernel handles it (it may move the page: the request then goes to the new node), and the kernel's
        time on the faulting thread is returned per faulting row, to be spent right before that request. Kernel
        time owed at a page's first access (:meth:`set_first_access_ns`) joins it, on the same rows. First-touch
        faults (:attr:`page_absent`) come before all of these: a page must be present to be protected. With
        several agents, :attr:`window_limit` says how many requests of each the window may commit: those before
        its first fault left to a later window."""
        self.window_limit = np.asarray(lens, dtype=np.int64).copy()
        starts = np.full(len(lens), t0_ns) if start_ns is None else np.asarray(start_ns, dtype=float)
        paces = np.broadcast_to(np.asarray(pace_ns, dtype=float), (len(lens),))
        spans = lens * paces if span_ns is None else np.asarray(span_ns, dtype=float)
        rows, cost = _merge_rows(
            self._first_touch_faults(ids, lens, page, rc, t0_ns, starts, paces),
            self._hinting_faults(ids, lens, page, rc, t0_ns, starts, paces, spans),
        )
        if not self._first_access_left:
            return rows, cost
        first = self._first_rows(lens, page, self._first_access_pending, starts, paces)[0]
        if not len(first):
            return rows, cost
        pages = page[first]
        owed = self._first_access_ns[pages]
        self._first_access_pending[pages] = False
        self._first_access_left -= len(pages)
        np.add.at(self.kernel_ns, np.repeat(ids, lens)[first], owed)
        return _merge_rows((rows, cost), (first, owed))

    def _first_touch_faults(
        self, ids: np.ndarray, lens: np.ndarray, page: np.ndarray, rc: np.ndarray, t0_ns: float, starts: np.ndarray,
        paces: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        none = np.zeros(0, dtype=np.int64), np.zeros(0)
        if self._runtime is None or not self._absent_left:
            return none
        rows, times = self._first_rows(lens, page, self.page_absent, starts, paces)
        if not len(rows):
            return none
        faulted = page[rows]
        filled = self.page_node[faulted] >= 0  # filled since it was marked (a collapse, a migration): not absent
        if filled.any():
            self.page_absent[faulted[filled]] = False
            rows, times, faulted = rows[~filled], times[~filled], faulted[~filled]
            if not len(rows):
                self._absent_left = int(np.count_nonzero(self.page_absent))
                return none
        agent = np.repeat(ids, lens)[rows]
        self.sample(t0_ns)
        handler = getattr(self._runtime, "on_first_touch", None)
        if handler is None:
            raise RuntimeError("pages are marked absent but the run-time kernel takes no first-touch faults")
        cost = handler(FaultBatch(agent, faulted, times, (rc[rows] & 1).astype(bool), np.full(len(rows), -1, np.int16)))
        missing = faulted[self.page_node[faulted] < 0]
        if len(missing):
            raise RuntimeError(f"first-touch fault left flat page {int(missing[0])} without a node")
        self.page_absent[self.page_absent & (self.page_node >= 0)] = False
        self._absent_left = int(np.count_nonzero(self.page_absent))
        cost = np.zeros(len(rows)) if cost is None else np.asarray(cost, dtype=float)
        np.add.at(self.kernel_ns, agent, cost)
        self._faulted_in += len(rows)
        return rows, cost

    @staticmethod
    def _first_rows(
        lens: np.ndarray, page: np.ndarray, flagged: np.ndarray, starts: np.ndarray, paces: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The first row (in estimated issue order) to each flagged page, in that order, and its estimated time."""
        cand = protected_rows(page, flagged)
        if not len(cand):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ends = np.cumsum(lens)
        seg = np.searchsorted(ends, cand, side="right")  # each candidate's segment
        est = starts[seg] + (cand - (ends - lens)[seg] + 1) * paces[seg]
        pg = page[cand]
        order = np.lexsort((est, pg))
        first = np.r_[True, pg[order][1:] != pg[order][:-1]]
        keep = order[first]
        keep = keep[np.argsort(est[keep], kind="stable")]
        return cand[keep], est[keep]

    def _hinting_faults(
        self, ids: np.ndarray, lens: np.ndarray, page: np.ndarray, rc: np.ndarray, t0_ns: float, t_start: np.ndarray,
        paces: np.ndarray, spans: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        none = np.zeros(0, dtype=np.int64), np.zeros(0)
        if self._runtime is None:
            return none
        cand = protected_rows(page, self.page_protected)
        if not len(cand):
            return none
        self._moves = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16), np.zeros(0, dtype=np.int16),
                       np.zeros(0, dtype=np.int64))  # fmt: skip
        ends = np.cumsum(lens)
        starts = ends - lens
        seg = np.searchsorted(ends, cand, side="right")
        self.sample(t0_ns)  # where pages were before this window's faults moved some
        # Order the faults by estimated issue time, in rounds of FAULT_ROUND_NS: each thread's later requests are
        # delayed by the kernel time its faults so far cost, and by its mean cost so far for each fault still
        # ahead of them (threads race for the pages: one paying for migrations reaches its pages later). Faults
        # estimated past the window's intended end are left to a later window: the segment may commit only the
        # requests before its first one (self.window_limit).
        base = t_start[seg] + (cand - starts[seg] + 1) * paces[seg]
        program = ~self.is_kernel[ids]
        # (the window's end: its first program segment's, the kernel's time included, as the faults' estimates)
        horizon = float((t_start + spans)[program].min()) if program.any() else np.inf
        alive = np.ones(len(cand), dtype=bool)
        # the faults handled so far, by row, their kernel time and its running sum
        h_rows, h_cost, h_cum = np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(1)
        seg_cost, seg_n = np.zeros(len(lens)), np.zeros(len(lens))
        n_pages = len(self.page_protected)
        # Without a page two threads fault on, the order across threads decides nothing: a round takes every
        # fault up to the window's end, once each thread's fault cost is known (a round per 10 us made a lone
        # thread's window dozens of kernel calls)
        pairs = np.unique(seg * n_pages + page[cand])
        race = len(np.unique(pairs % n_pages)) < len(pairs)
        round_ns = FAULT_ROUND_NS if race else np.inf
        first_round = True
        while alive.any():
            idx = np.flatnonzero(alive)
            if round_ns < np.inf:
                # A candidate's estimate is at least its base (the estimate without kernel time), so one whose base
                # lies past the earliest segment's next fault plus a round cannot be in this round: each round
                # orders a short prefix of the window's faults, not all that are left.
                heads = idx[np.r_[True, seg[idx][1:] != seg[idx][:-1]]]
                at_head = h_cum[np.searchsorted(h_rows, cand[heads], side="right")] - h_cum[
                    np.searchsorted(h_rows, starts[seg[heads]], side="left")]
                # (two rounds: the faults a round would decide, and any page's next contender after them)
                idx = idx[base[idx] <= float((base[heads] + at_head).min()) + 2.0 * round_ns]
            # the kernel time charged so far at rows before each candidate, within its segment
            at = h_cum[np.searchsorted(h_rows, cand[idx], side="right")] - h_cum[
                np.searchsorted(h_rows, starts[seg[idx]], side="left")]
            # ... and the faults still ahead of it in its segment (a page's first request there), at the mean cost
            _, own = np.unique(seg[idx] * n_pages + page[cand[idx]], return_index=True)
            is_own = np.zeros(len(idx), dtype=bool)
            is_own[own] = True
            ahead = np.cumsum(is_own) - is_own
            ahead -= (np.cumsum(is_own) - is_own)[np.searchsorted(seg[idx], seg[idx], side="left")]
            known_n = seg_n + self._hints[ids]
            mean = (seg_cost + self._hint_ns[ids]) / np.maximum(known_n, 1)
            est = base[idx] + at + ahead * mean[seg[idx]]
            order = np.lexsort((est, page[cand[idx]]))
            pg = page[cand[idx]][order]
            head = np.flatnonzero(np.r_[True, pg[1:] != pg[:-1]])  # each page's first candidate in ``order``
            firsts = order[head]
            t_first = float(est[firsts].min())
            if t_first > horizon and not first_round:
                break
            now_ns = round_ns
            if race:
                # A page two threads reach within a round of each other is decided by costs the round does not
                # know yet (the earlier faults of the same round, each 1 us or, migrating, 6 us): such a round
                # is short, one fault and the next request long (threads sweeping the same pages in step)
                second = np.r_[pg[1:] == pg[:-1], False][head]  # the page has a runner-up
                runner_up = np.where(second, est[order[np.minimum(head + 1, len(order) - 1)]], np.inf)
                soon = est[firsts] <= t_first + round_ns
                if (runner_up[soon] - est[firsts][soon] < round_ns).any():
                    now_ns = FAULT_ROUND_CLOSE_NS
            take = firsts[est[firsts] <= t_first + now_ns]
            # never past the window's end (the first round takes at least its first fault: progress). Without a
            # race the one round is unbounded, and a thread whose window was sized by a stale pace took every fault
            # of its part ahead of the others (2,855 promotions in one window, 17 ms of kernel time, on 4 threads
            # sharing 16 MiB of CXL memory; exact mode spreads them over the threads)
            take = take[est[take] <= (horizon if not first_round else max(horizon, t_first))]
            take = take[np.argsort(est[take], kind="stable")]
            # an agent none of whose faults has a known cost yet takes one: a fault may cost 1 us or, migrating a
            # huge page, 90 us, and its next ones wait for it (all taken at once, one thread took 16 huge pages
            # in 6 us and they ping-ponged between the nodes)
            blind = known_n[seg[idx[take]]] == 0
            if blind.any():
                s_take = seg[idx[take]]
                first_of = np.zeros(len(take), dtype=bool)
                first_of[np.unique(s_take, return_index=True)[1]] = True
                take = take[~blind | first_of]
            first_round = False
            rows, cost = self._fault_batch(ids, lens, page, rc, cand[idx[take]], est[take])
            alive &= self.page_protected[page[cand]]  # (a huge page's fault unprotects its whole block)
            np.add.at(seg_cost, seg[idx[take]], cost)
            np.add.at(seg_n, seg[idx[take]], 1)
            o = np.argsort(rows)  # (a row faults once: rows are distinct, in the batch and across rounds)
            at_pos = np.searchsorted(h_rows, rows[o])
            h_rows, h_cost = np.insert(h_rows, at_pos, rows[o]), np.insert(h_cost, at_pos, cost[o])
            h_cum = np.r_[0.0, np.cumsum(h_cost)]
        self.window_limit = lens.copy()
        if alive.any():
            left = cand[alive]
            s_left = seg[alive]
            first_left = np.full(len(lens), np.iinfo(np.int64).max)
            np.minimum.at(first_left, s_left, left - starts[s_left])
            self.window_limit = np.minimum(lens, first_left)
        return h_rows, h_cost

    def _fault_batch(
        self, ids: np.ndarray, lens: np.ndarray, page: np.ndarray, rc: np.ndarray, rows: np.ndarray, times: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The kernel handles the hinting faults of ``rows`` (in that order, at ``times``): their pages' protection
        is cleared, the kernel's time on each faulting row is returned."""
        if not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        assert self._runtime is not None
        faulted = page[rows]
        self.page_protected[faulted] = False
        agent = np.repeat(ids, lens)[rows]
        before = self.page_node[faulted].copy()
        huge_before = self.page_huge[faulted].copy()
        cost = self._runtime.on_faults(FaultBatch(
            agent, faulted, times, (rc[rows] & 1).astype(bool), before.copy(),
        ))  # fmt: skip
        after = self.page_node[faulted]
        moved = np.flatnonzero(after != before)
        if huge_before[moved].any():
            # a huge page faults once (the kernel skips its block's other rows of the batch), and its first row
            # carries the whole block's move: the others moved with it, and counted again they took the
            # pages-per-node series below zero (-16,384 on a node, found by fuzzing)
            moved = moved[huge_block_keys(huge_before[moved], self.page_vpn()[faulted[moved]])[1]]
        prev = self._moves
        new = (rows[moved], before[moved], after[moved].copy(),
               self._pages_moved_with(faulted[moved], huge_before[moved], after[moved]))  # fmt: skip
        self._moves = tuple(np.concatenate([a, b]) for a, b in zip(prev, new, strict=True))  # type: ignore[assignment]
        cost = np.zeros(len(rows)) if cost is None else np.asarray(cost, dtype=float)
        np.add.at(self.kernel_ns, agent, cost)
        np.add.at(self._hint_ns, agent, cost)
        np.add.at(self._hints, agent, 1)
        return rows, cost

    def route_classes(self, ids: np.ndarray, lens: np.ndarray, page: np.ndarray, rc: np.ndarray) -> np.ndarray:
        """Each request's route class from its page's node *now* and its agent's initiator now (requests
        without a program page keep theirs)."""
        return reroute(ids, lens, page, rc, self.page_node, self.node_index, self.agent_class_base)

    def window_done(
        self,
        ids: np.ndarray,
        lens: np.ndarray,
        n_commit: np.ndarray,
        rc: np.ndarray,
        page: np.ndarray,
        issue_ns: np.ndarray,
    ) -> None:
        """After a window: count the requests each agent issued and the kernel's copy traffic; note when each
        page was last touched."""
        self._requests[ids] += n_commit
        committed = commit_window(
            np.asarray(lens, dtype=np.int64), np.asarray(n_commit, dtype=np.int64), self.is_kernel[ids],
            np.asarray(rc, dtype=np.int64), np.asarray(page, dtype=np.int64), np.asarray(issue_ns, dtype=np.float64),
            self.page_last_access_ns, self._copy_requests_rc,
        )  # fmt: skip
        self._series_moves(committed, issue_ns)
        if self._env is not None:  # (the requests of earlier windows issued before the clock stay counted)
            now = self._env.now
            agent = np.r_[self._ahead[0], np.repeat(np.asarray(ids, dtype=np.int64), lens)[committed]]
            issue = np.r_[self._ahead[1], np.asarray(issue_ns, dtype=float)[committed]]
            self._ahead = (agent[issue > now], issue[issue > now])

    def _pages_moved_with(self, faulted: np.ndarray, was_huge: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """How many pages each moved faulting page took with it: 1, or, for a 2 MiB page (all on one node before),
        the pages of its block now on the destination (a whole huge page moves with its one fault)."""
        weight = np.ones(len(faulted), dtype=np.int64)
        if not was_huge.any():
            return weight
        vpn = self.page_vpn()
        for k in np.flatnonzero(was_huge).tolist():
            key = int(vpn[faulted[k]]) >> 9
            lo, hi = np.searchsorted(vpn, [np.uint64(key << 9), np.uint64((key + 1) << 9)])
            weight[k] = max(1, int(np.count_nonzero(self.page_node[lo:hi] == dst[k])))
        return weight

    def _series_moves(self, committed: np.ndarray, issue_ns: np.ndarray) -> None:
        """Put the moves of this window's faults into the pages-per-node series at the times their faulting
        requests issued (at most 16 points per window), so the series does not show them all at its end."""
        rows, src, dst, weight = self._moves
        self._moves = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16), np.zeros(0, dtype=np.int16),
                       np.zeros(0, dtype=np.int64))  # fmt: skip
        if not len(rows) or not self.series_pages:
            return
        done = committed[rows]
        if not committed.any():
            return  # nothing was timed: the end-of-window sample records where the pages are
        end = float(issue_ns[committed].max())
        t = np.where(done, issue_ns[rows], end)
        order = np.argsort(t, kind="stable")
        t, src, dst = t[order], self.node_index[src[order]].astype(np.int64), self.node_index[dst[order]].astype(np.int64)
        weight = weight[order]
        n = len(self.node_ids)
        delta = np.zeros((len(t), n), dtype=np.int64)
        delta[np.arange(len(t)), src] -= weight
        delta[np.arange(len(t)), dst] += weight
        cum = np.cumsum(delta, axis=0)
        base = self.series_pages[-1]
        for k in np.unique(np.linspace(0, len(t) - 1, min(16, len(t))).astype(np.int64)).tolist():
            if t[k] > self.series_ns[-1]:
                self.series_ns.append(float(t[k]))
                self.series_pages.append(base + cum[k])

    def count_copies(self, rc: np.ndarray) -> None:
        """Exact mode: a kernel agent's copy requests of these route classes were timed."""
        self._copy_requests_rc += np.bincount(rc, minlength=len(self._copy_requests_rc))

    def count_requests(self, agent: int, n: int, page: np.ndarray | None, t_ns: float) -> None:
        """Exact mode: ``agent`` issued ``n`` more requests (to ``page``), the last around ``t_ns``."""
        self._requests[agent] += n
        if page is not None:
            touched = page[page >= 0]
            self.page_last_access_ns[touched] = t_ns

    @property
    def kernel_lines_rc(self) -> np.ndarray:
        """Lines the kernel's copies moved, per route class (a copy request counts its lines)."""
        n = self.ms.n_classes
        return self._copy_requests_rc[:n] + COPY_LINES_PER_REQUEST * self._copy_requests_rc[n:]

    def take_stalls(self) -> np.ndarray:
        out = self.pending_stall_ns.copy()
        self.pending_stall_ns[:] = 0.0
        self.pending_stall_since_ns[:] = np.inf
        return out

    def counters(self) -> dict[str, int]:
        return {} if self._runtime is None else self._runtime.counters()


class CompositeRuntime:
    """Several run-time kernels at once (automatic NUMA balancing and a user-space daemon such as numad).

    Each attaches to the same environment and control; every fault batch goes to each in turn (their times on
    the faulting thread add up); counters merge, summed where two report the same name.
    """

    def __init__(self, parts: Sequence[KernelRuntime]) -> None:
        self.parts = list(parts)

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        for p in self.parts:
            p.attach(env, ctl)

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        total: np.ndarray | None = None
        for p in self.parts:
            cost = p.on_faults(faults)
            if cost is not None:
                total = np.asarray(cost, dtype=float) if total is None else total + cost
        return total

    def on_first_touch(self, faults: FaultBatch) -> np.ndarray | None:
        takers = [p for p in self.parts if hasattr(p, "on_first_touch")]
        if len(takers) > 1:
            raise RuntimeError("two run-time kernels take first-touch faults: a page faults in once")
        return takers[0].on_first_touch(faults) if takers else None  # type: ignore[attr-defined, no-any-return]

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.parts:
            for k, v in p.counters().items():
                out[k] = out.get(k, 0) + int(v)
        return out


class Daemon:
    """A run-time kernel that takes no faults and acts on its own schedule (khugepaged, numad, a syscall at a
    given time): subclasses set ``vmstat`` (their counters) and define :meth:`run`, the SimPy process body."""

    vmstat: dict[str, int]

    def attach(self, env: simpy.Environment, ctl: EngineControl) -> None:
        self.env, self.ctl = env, ctl
        self.flat_vpn = ctl.page_vpn()
        env.process(self.run(env))

    def run(self, env: simpy.Environment):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def on_faults(self, faults: FaultBatch) -> np.ndarray | None:
        return None

    def counters(self) -> dict[str, int]:
        return dict(self.vmstat)


def _merge_rows(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of (faulting rows, kernel ns per row) as one, in row order (costs of one row added)."""
    if not len(b[0]):
        return a
    if not len(a[0]):
        return b
    both, where = np.unique(np.r_[a[0], b[0]], return_inverse=True)
    total = np.zeros(len(both))
    np.add.at(total, where, np.r_[a[1], b[1]])
    return both, total
