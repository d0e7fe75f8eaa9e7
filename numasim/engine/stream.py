"""From the workload's :class:`~numasim.workload.access.AccessChunk` stream to per-agent blocks of line requests.

An *agent* is whatever issues memory requests: a thread (from :class:`ThreadSpec`) or one device transfer. The
:class:`Feeder` pulls chunks lazily, turns every access into the 64-byte line requests it touches (an access
spanning two lines counts as two requests; its bytes and compute time go to the first), looks up each line's
node in the :class:`PageMap`, marks requests the stream prefetcher covers, and appends them to the issuing
agent's buffer, preserving each agent's program order. Everything is vectorised per chunk.

Prefetch rule (the same in both fidelities): a request is *prefetched* when the line just before or after it
was requested by the same agent among its previous ``PREFETCH_STREAMS`` requests -- a sequential stream, with
up to that many streams interleaved (``a[i] = b[i] + c[i]`` is three).
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from numasim.errors import WorkloadError
from numasim.workload.access import AccessChunk, concat_chunks

from ._feed_kernel import (
    PREFETCH_STREAMS,
    compute_by_agent,
    first_lines,
    gather_by_agent,
    group_by_agent,
    lookup_nodes,
    lookup_pages,
    node_targets,
    prefetch_flags,
    thread_agents,
)
from .caches import CARRY_ACCESSES, CacheToCache, EpochCacheState, carry_accesses, estimate_levels
from .memsys import LINE_BYTES
from .pagemap import PageMap
from .timing import prefetch_factor
from .tlb import TlbSpec, tlb_keys

__all__ = ["PREFETCH_STREAMS", "MAX_RUN_NS", "Agent", "Block", "Feeder"]

MAX_RUN_NS = float(1 << 53)
"""The longest run the float64 clock holds at nanosecond resolution (2**53 ns, about 104 days): a thread whose
compute time adds up to more is refused instead of running with a clock that no longer advances (at 1e20 ns the
epoch index overflowed int64 and the run never ended)."""

_LINE_SHIFT = np.uint64(6)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)
_EMPTY_I8 = np.zeros(0, dtype=np.int8)
_MAX_CHUNK = 1 << 20
_MAX_BATCH = 1 << 22
"""The most accesses estimated together (:meth:`Feeder._batch_target`): a window of this plus the carried tail."""
_PROBE_EVERY = 8
"""With a short reuse horizon, every this many estimates the feeder carries the long one again."""
_LONG_HITS = 0.02
"""The share of a chunk's accesses the long reuse horizon must turn into hits to be kept: a trade of speed
(the long carry costs every estimate about a quarter more) against at most this share of hits counted as
misses (uniformly random loads over 1 GiB on source 000's 36 MiB L3s find 1 %: about 1 % of run time)."""


@dataclass(frozen=True)
class Agent:
    index: int
    name: str
    initiator: int
    mlp: int
    dependent: bool
    start_ns: float
    thread_id: int | None = None
    cpu: int | None = None
    device: str | None = None
    prefetch_lines: float | None = None
    """How far ahead its sequential streams are prefetched (``cores.thread_prefetch_lines``); None: the
    calibration's depth."""
    cpu_share: float = 1.0
    """Threads sharing its cpu time (``cores.cpu_sharers``: ``k`` for ``1 / k`` of a cpu): its compute time counts
    this many times."""
    lines_per_request: int = 1
    """Cache lines each of its requests carries (a kernel copy agent's: ``runtime.COPY_LINES_PER_REQUEST``)."""
    cpus: tuple[int, ...] | None = None
    """The cpus a thread may run on (its ``ThreadSpec.cpus``; None: its ``cpu`` only)."""

    def prefetch_factor(self, mlp: int, depth_lines: float) -> float:
        """Its prefetched misses' latency multiplier ``M / (M + d)``, both in lines: its ``mlp`` requests in flight
        times the lines each carries, and its prefetch depth (``prefetch_lines``, else the calibration's
        ``depth_lines``). (A kernel copy agent's 2 requests of 8 lines counted as 2 against 16 lines of depth cut
        its copies' latency to a sixth: one copied 35 GB/s where 32 lines in flight carry 23.)"""
        return prefetch_factor(mlp * self.lines_per_request, depth_lines if self.prefetch_lines is None
                               else self.prefetch_lines)


@dataclass
class Block:
    """Line requests of one agent, in program order (parallel arrays)."""

    line: np.ndarray  # uint64
    target: np.ndarray  # int16 node index
    is_write: np.ndarray  # bool
    size_bytes: np.ndarray  # int32 program bytes (on the first line of an access)
    compute_ns: np.ndarray  # float32 or float64, as the chunk gave it (widened exactly where used)
    prefetched: np.ndarray  # bool
    level: np.ndarray | None = None  # int8 cache level (epoch mode), n_levels = memory
    route_class: np.ndarray | None = None  # int32 (initiator * n_nodes + target) * 2 + is_write (epoch mode)
    page: np.ndarray | None = None  # int64 flat page index (with a run-time kernel; -1: not a program page)
    c2c_ns: np.ndarray | None = None  # float64 cache-to-cache transfer latency (epoch mode; 0: none)
    full_line: np.ndarray | None = None  # bool: its line written whole (full_line_writes; with evasion, else None)
    write_back: np.ndarray | None = None  # bool: a write hit on a clean line, its write-back owed (epoch mode)
    share: float = 1.0
    """The cpu sharers ``k`` its ``compute_ns`` counts (the agent's when the block was made; see
    :meth:`Feeder.set_share`)."""

    def __len__(self) -> int:
        return len(self.line)

    def slice(self, a: int, b: int) -> Block:
        return Block(
            self.line[a:b],
            self.target[a:b],
            self.is_write[a:b],
            self.size_bytes[a:b],
            self.compute_ns[a:b],
            self.prefetched[a:b],
            None if self.level is None else self.level[a:b],
            None if self.route_class is None else self.route_class[a:b],
            None if self.page is None else self.page[a:b],
            None if self.c2c_ns is None else self.c2c_ns[a:b],
            None if self.full_line is None else self.full_line[a:b],
            None if self.write_back is None else self.write_back[a:b],
            self.share,
        )

    def rescale(self, share: float) -> None:
        """Count its compute time at ``share`` sharers instead of :attr:`share` (a new array: the old one may be a
        view another block shares)."""
        if share != self.share:
            self.compute_ns = self.compute_ns * (share / self.share)
            self.share = share


def full_line_writes(
    lines: np.ndarray, agent: np.ndarray, is_write: np.ndarray, start_address: np.ndarray, end_address: np.ndarray
) -> np.ndarray:
    """Which line requests are writes whose line the same agent writes whole in this chunk.

    ``start_address``/``end_address``: each request's access (``[start, end)``). The bytes each write puts in its
    line are OR-ed per (agent, line): a line counts as written whole when every one of its 64 bytes is, by one
    access (a 64-byte streaming store) or by several (eight 8-byte stores of a copy loop); the same 8 bytes
    written eight times, or a line written partly, is not. (The hardware guesses from the stream it sees; a
    line whose stores straddle two chunks is left out.)

    Examples
    --------
    >>> lines = np.array([1, 1, 1, 1, 2], dtype=np.uint64)
    >>> start = np.array([64, 80, 96, 112, 128], dtype=np.uint64)     # line 1 in four 16-byte stores; line 2 half
    >>> full_line_writes(lines, np.zeros(5, np.int64), np.ones(5, bool), start, start + np.uint64(16) + (start >= 128) * np.uint64(16)).tolist()
    [True, True, True, True, False]
    """
    full = np.zeros(len(lines), dtype=bool)
    w = np.flatnonzero(is_write)
    if not len(w):
        return full
    base = lines[w] << _LINE_SHIFT
    lo = np.maximum(start_address[w], base) - base
    hi = np.minimum(end_address[w], base + np.uint64(64)) - base
    width = hi - lo
    every = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    # the request's bytes in its line as bits (a width of 64 would overflow the shift: every bit)
    narrow = np.minimum(width, np.uint64(63))
    mask = np.where(width >= 64, every, ((np.uint64(1) << narrow) - np.uint64(1)) << np.minimum(lo, np.uint64(63)))
    order = np.lexsort((agent[w], lines[w]))
    ln, ag = lines[w][order], agent[w][order]
    starts = np.flatnonzero(np.r_[True, (ln[1:] != ln[:-1]) | (ag[1:] != ag[:-1])])
    covered = np.bitwise_or.reduceat(mask[order], starts) == every
    group = np.cumsum(np.r_[False, (ln[1:] != ln[:-1]) | (ag[1:] != ag[:-1])])
    full[w[order]] = covered[group]
    return full


@dataclass
class _Failure:
    """An exception of the background thread, carried to the engine's thread."""

    error: BaseException


class Feeder:
    """Per-agent buffers filled lazily from the chunk stream (see module docstring)."""

    def __init__(
        self,
        chunks: Iterable[AccessChunk],
        agents: list[Agent],
        pages: PageMap,
        node_index: np.ndarray,
        *,
        cache_instances: np.ndarray | None = None,
        cache_capacity_lines: np.ndarray | None = None,
        cache_sets: np.ndarray | None = None,
        progress: object = None,
        background: bool = False,
        class_base: np.ndarray | None = None,
        track_pages: bool = False,
        tlb: TlbSpec | None = None,
        c2c: CacheToCache | None = None,
        full_line_writes: bool = False,
        write_backs: bool = False,
    ) -> None:
        self._it: Iterator[AccessChunk] = iter(chunks)
        # Mark the writes that cover their whole line (write-allocate evasion may skip their read for ownership).
        self.full_line_writes = full_line_writes
        # Find the write hits on clean lines, whose write-backs are owed (epoch mode's estimate; see caches.py).
        self.write_backs = write_backs
        self._chunks = self._distributed()
        # Distributing a chunk (page lookup, per-agent split, prefetch rule, reuse-distance estimate) is numpy
        # work that releases the GIL; in the background it runs on another core while the engine times the
        # chunk before. Same chunks, same order, same state: the same result as in the foreground.
        self._background = background
        self._queue: queue.Queue[object] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.agents = agents
        self.pages = pages
        # Node index of each node id, narrowed (small per-request arrays move less memory).
        self.node_index = node_index.astype(np.int16)
        thread_agents = [a for a in agents if a.thread_id is not None]
        ids = np.array([a.thread_id for a in thread_agents], dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        self._tid_sorted = ids[order]
        self._tid_agent = np.array([thread_agents[k].index for k in order], dtype=np.int64)
        # Thread ids 0..k (the usual case) map through a table instead of a search.
        self._dense: np.ndarray | None = None
        if len(ids) and ids.min() >= 0 and ids.max() < 1 << 16:
            self._dense = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
            self._dense[self._tid_sorted] = self._tid_agent
        # Each agent's compute time so far, from its start: the clock must stay below MAX_RUN_NS.
        self._compute_total_ns = np.array([a.start_ns for a in agents], dtype=np.float64)
        # threads taking turns on one cpu: each one's compute time counts as many times (None: every cpu has one)
        share = np.array([a.cpu_share for a in agents], dtype=np.float64)
        # the sharers blocks are made at (read by the background thread: never changed) and the agents' current
        # ones (the engine's thread only): a block made before a thread ended is rescaled when it is handed on
        self._cpu_share: np.ndarray | None = share if (share > 1).any() else None
        self.share_now: np.ndarray | None = None if self._cpu_share is None else self._cpu_share.copy()
        self.buffers: list[list[Block]] = [[] for _ in agents]
        self.buffered = np.zeros(len(agents), dtype=np.int64)
        # Per agent, its last PREFETCH_STREAMS lines (oldest first) and how many it has requested.
        self._history = np.zeros((len(agents), PREFETCH_STREAMS), dtype=np.int64)
        self._history_n = np.zeros(len(agents), dtype=np.int64)
        self.exhausted = False
        self.cache_instances = cache_instances  # (n_levels, n_agents) global instance index
        self.cache_capacity = cache_capacity_lines
        self.cache_sets = cache_sets
        # The reuse horizon: carry_accesses' long one (three capacities of each instance's own accesses) from the
        # start and while it finds hits; else CARRY_ACCESSES (a longer carry costs every chunk's estimate more),
        # probed every _PROBE_EVERY chunks with the largest cache's lines (cheaper), back to the long one where
        # that finds hits. The estimate that finds too few drops the long tail at once (``long_pays_at``): else
        # the next window still held it (a window 2-3x a chunk's after the first chunks and after every probe).
        top = int(np.max(cache_capacity_lines)) if cache_capacity_lines is not None and len(cache_capacity_lines) else 0
        self._carry_probe = max(CARRY_ACCESSES, top)
        self._carry_long = carry_accesses(cache_capacity_lines) if cache_capacity_lines is not None else 0
        self._carry = self._carry_long
        self._estimates = 0
        self._long_pays = False  # the last estimate's long carry found hits (the feeder then batches chunks)
        self._cache_state = EpochCacheState.empty() if cache_capacity_lines is not None else None
        self._progress = progress
        # Per agent, ``initiator * n_nodes * 2``: given, every block carries its requests' route classes.
        self.class_base = class_base
        self.accesses_read = 0
        # With a run-time kernel, every request keeps its flat page index: the engine resolves its node when it
        # times it, not when it was read (the kernel may have moved the page in between).
        self.track_pages = track_pages
        # The TLB (tlb.py): one STLB per cpu (agents without a cpu never miss), its carried reuse state, counts.
        self.tlb = tlb
        self.c2c = c2c
        self.c2c_local = np.zeros(len(agents), dtype=np.int64)
        self.c2c_remote = np.zeros(len(agents), dtype=np.int64)
        """Per reader agent, the cache-to-cache transfers the estimate found (from its own last-level instance,
        from another)."""
        if tlb is not None:
            cpus = sorted({a.cpu for a in agents if a.cpu is not None})
            self._tlb_instance = np.array(
                [[cpus.index(a.cpu) if a.cpu is not None else len(cpus) + a.index for a in agents]], dtype=np.int64
            )
            self._tlb_capacity = np.array([tlb.entries], dtype=float)
            self._tlb_sets = np.array([tlb.entries // tlb.ways], dtype=np.int64)
            self._tlb_state = EpochCacheState.empty()
            self._has_cpu = np.array([a.cpu is not None for a in agents])
        self.tlb_accesses = np.zeros(len(agents), dtype=np.int64)
        self.tlb_misses = np.zeros(len(agents), dtype=np.int64)
        self.coherence_misses = np.zeros(len(agents), dtype=np.int64)
        """Per agent, the accesses the cache estimate found had lost their line to another core's write."""
        self.tlb_misses_2m = np.zeros(len(agents), dtype=np.int64)
        self.tlb_walk_ns = np.zeros(len(agents))

    # --- input -------------------------------------------------------------------------------------------
    def add_block(self, agent: int, block: Block) -> None:
        if len(block):
            self.buffers[agent].append(block)
            self.buffered[agent] += len(block)

    def pull(self) -> bool:
        """Read and distribute one more chunk; False when the stream is exhausted."""
        if self.exhausted:
            return False
        item = self._next_distributed()
        if item is None:
            self.exhausted = True
            self.close()
            return False
        n, blocks = item
        for agent, block in blocks:
            self.add_block(agent, block)
        self.accesses_read += n
        if callable(self._progress):
            self._progress(self.accesses_read)
        return True

    def _batch_target(self) -> int:
        """How many accesses to estimate together: a chunk, or while the long carry pays (its reuses turn at
        least :data:`_LONG_HITS` of the accesses into hits: a working set the caches hold) as many as it
        carries, up to :data:`_MAX_BATCH`, so that the window the estimate sorts is not four times the accesses
        it decides. Not for the long carry's occasional probe (a stream that misses the caches pays for its
        window, not for a batch), nor with a run-time kernel, whose page moves the feeder must not read far
        ahead of."""
        if self.track_pages or self._cache_state is None or not self._long_pays:
            return _MAX_CHUNK
        return max(_MAX_CHUNK, min(self._carry, _MAX_BATCH))

    def _distributed(self) -> Iterator[tuple[int, list[tuple[int, Block]]]]:
        """The stream distributed: (accesses read, their agents' blocks in order), a chunk at a time, or while
        the estimate carries a long tail as batches of :meth:`_batch_target` accesses (a yield may then hold
        several chunks, or none while a batch fills)."""
        pending: list[AccessChunk] = []  # parts waiting for their batch, in stream order
        pending_n = 0
        blocks: list[tuple[int, Block]] = []
        read = 0

        def flush() -> int:
            blocks.extend(self._distribute(pending[0] if len(pending) == 1 else concat_chunks(pending)))
            pending.clear()
            return 0

        for chunk in self._it:
            for lo in range(0, len(chunk), _MAX_CHUNK):
                part = chunk if len(chunk) <= _MAX_CHUNK else chunk.slice(lo, lo + _MAX_CHUNK)
                target = self._batch_target()
                single = target <= _MAX_CHUNK  # a part at a time, as without a long carry
                if pending and (single or pending_n + len(part) > target):
                    pending_n = flush()  # what waits goes first: nothing overtakes it
                pending.append(part)
                pending_n += len(part)
                if single or pending_n >= target:
                    pending_n = flush()
            read += len(chunk)
            if not pending:
                yield read, blocks
                blocks, read = [], 0
        if pending:
            flush()
        if blocks or read:
            yield read, blocks

    def _next_distributed(self) -> tuple[int, list[tuple[int, Block]]] | None:
        if not self._background:
            return next(self._chunks, None)
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="numasim-feeder", daemon=True)
            self._thread.start()
        item = self._queue.get()
        if isinstance(item, _Failure):
            self.exhausted = True
            raise item.error  # raised where the foreground would have raised it: at this chunk
        return item  # type: ignore[return-value]

    def _work(self) -> None:
        """The background thread: distribute chunks ahead, at most the queue's size, until stopped."""
        try:
            for item in self._chunks:
                if not self._put(item):
                    return
            self._put(None)
        except BaseException as error:  # handed to the engine's thread, which raises it
            self._put(_Failure(error))

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """Stop the background thread (if any); the feeder reads nothing more."""
        if self._thread is not None:
            self._stop.set()
            # Bounded: a thread blocked in the caller's iterator (a pipe, a socket) is left behind (it is a
            # daemon and stops at its next chunk) rather than hanging the caller or hiding its error.
            self._thread.join(timeout=10.0)
            self._thread = None

    def _check_compute(self, compute: np.ndarray, agent: np.ndarray) -> None:
        """Refuse compute times the clock cannot hold: NaN, negative, or a thread's total beyond MAX_RUN_NS (the
        last line of defence; trace readers and workload files name the file and line first)."""
        total_ns, k = compute_by_agent(agent, compute, len(self.agents))
        if k >= 0:
            raise WorkloadError(f"access {k} of the chunk (or batch of chunks) being read: compute_ns = {float(compute[k]):g} is not a time >= 0")
        self._compute_total_ns += total_ns
        worst = int(np.argmax(self._compute_total_ns))
        if self._compute_total_ns[worst] > MAX_RUN_NS:
            raise WorkloadError(
                f"{self.agents[worst].name}: compute_ns adds up to {self._compute_total_ns[worst]:.3g} ns, beyond the "
                f"simulated clock's range ({MAX_RUN_NS:.3g} ns, about 104 days, keeps nanosecond resolution)"
            )

    def _distribute(self, chunk: AccessChunk) -> list[tuple[int, Block]]:
        n = len(chunk)
        out: list[tuple[int, Block]] = []
        if n == 0:
            return out
        tid = np.asarray(chunk.thread)
        agent, mapped = thread_agents(tid, self._dense) if self._dense is not None else (tid, False)
        if not mapped:
            tid = tid.astype(np.int64)
            pos = np.minimum(np.searchsorted(self._tid_sorted, tid), max(len(self._tid_sorted) - 1, 0))
            bad = self._tid_sorted[pos] != tid if len(self._tid_sorted) else np.ones(n, dtype=bool)
            if np.any(bad):
                t = int(tid[np.flatnonzero(bad)[0]])
                raise WorkloadError(
                    f"access by thread {t}: no ThreadSpec with id {t} (threads: {self._tid_sorted.tolist()})"
                )
            agent = self._tid_agent[pos]
        addr = np.asarray(chunk.address, dtype=np.uint64)
        first, size, crosses = first_lines(addr, np.asarray(chunk.size_bytes))
        compute = np.asarray(chunk.compute_ns)
        if compute.dtype != np.float32:
            compute = compute.astype(np.float64, copy=False)
        if self._cpu_share is not None:
            compute = compute * self._cpu_share[agent]
        self._check_compute(compute, agent)
        is_write = np.asarray(chunk.is_write, dtype=bool)
        page = self._lookup_pages(addr) if self.track_pages else None
        node = self._lookup(addr) if page is None else self.pages.lookup_tables()[3][page]
        access_end = addr + size.astype(np.uint64) if self.full_line_writes else None
        if crosses:
            last = (addr + size.astype(np.uint64) - np.uint64(1)) >> _LINE_SHIFT
            span = (last - first).astype(np.int64) + 1
            rep = np.repeat(np.arange(n), span)
            starts = np.r_[0, np.cumsum(span)[:-1]]
            offset = np.arange(len(rep)) - starts[rep]
            is_first = offset == 0
            lines = first[rep] + offset.astype(np.uint64)
            if page is not None:
                page = np.where(is_first, page[rep], self._lookup_pages(lines << _LINE_SHIFT))
                node = self.pages.lookup_tables()[3][page]
            else:
                node = np.where(is_first, node[rep], self._lookup(lines << _LINE_SHIFT))
            agent, is_write = agent[rep], is_write[rep]
            if access_end is not None:
                addr_req, end_req = addr[rep], access_end[rep]
            size = np.where(is_first, size[rep], 0)
            compute = np.where(is_first, compute[rep], 0.0)
        else:
            lines = first
            if access_end is not None:
                addr_req, end_req = addr, access_end
        full = None if access_end is None else full_line_writes(lines, agent, is_write, addr_req, end_req)
        # compiled where the table covers every int16 node id, negative ones wrapping (the engine pads it so):
        # numpy would raise on an id beyond it, the compiled gather read past it
        target = node_targets(self.node_index, node) if len(self.node_index) >= 1 << 15 else self.node_index[node]
        if self.track_pages and (target < 0).any():
            # a page not faulted in yet (node -1: a run-time kernel faults it at its first access, before the
            # request is timed, and routes it again then) takes a placeholder route (node_index[-1] may be one)
            target = np.where(node >= 0, target, 0)
        if (target < 0).any():
            k = int(np.flatnonzero(target < 0)[0])
            raise WorkloadError(
                f"address {int(lines[k]) << 6:#x} is on node {int(node[k])}, which has no memory on this machine"
            )
        order, rank, bounds = group_by_agent(agent.astype(np.int64, copy=False), len(self.agents))
        if self.tlb is not None:
            compute = self._tlb_walks(lines, agent, order, rank, np.diff(bounds), compute)
        level = None
        c2c_ns: np.ndarray | None = None
        owed: np.ndarray | None = None
        if (
            self._cache_state is not None
            and self.cache_instances is not None
            and self.cache_capacity is not None
        ):
            long_pays_at = math.ceil(_LONG_HITS * len(lines))  # hits the long carry must find to be kept
            level, self._cache_state = estimate_levels(
                lines, agent, self.cache_instances, self.cache_capacity, self._cache_state, order, rank,
                self.cache_sets, self._carry, np.diff(bounds), is_write, self.write_backs, long_pays_at,
            )
            self._estimates += 1
            if self._cache_state.coherence_misses is not None:
                self.coherence_misses += self._cache_state.coherence_misses
            holder = self._cache_state.c2c_holder
            owed = self._cache_state.write_backs
            if holder is not None and owed is not None:
                owed = owed & (holder < 0)  # a line taken from another core's cache: its one write-back moved
            if holder is not None and self.c2c is not None:
                level, c2c_ns = self._transfers(level, holder, agent, target)
            # how far back this chunk's instances need to look (a socket's L3 sees its share of the stream)
            self._carry_long = carry_accesses(self.cache_capacity, self._cache_state.horizon)
            found = self._cache_state.long_hits
            self._long_pays = found >= long_pays_at
            if found >= 0:  # this estimate looked beyond CARRY_ACCESSES: keep looking while it finds >= 2 % more hits
                self._carry = self._carry_long if self._long_pays else CARRY_ACCESSES
            elif self._carry != CARRY_ACCESSES:  # no tail beyond CARRY_ACCESSES yet (the first chunks)
                self._carry = self._carry_long
            if self._carry == CARRY_ACCESSES and self._estimates % _PROBE_EVERY == _PROBE_EVERY - 1:
                self._carry = self._carry_probe  # the next estimate looks further back again
        ln, tg, wr, sz, cp, lv_all, rc_all = gather_by_agent(
            order, bounds, _EMPTY_I64 if self.class_base is None else self.class_base, lines, target, is_write, size,
            compute, _EMPTY_I8 if level is None else level,
        )  # fmt: skip
        lv = None if level is None else lv_all
        rc = None if self.class_base is None else rc_all
        pg = None if page is None else page[order]
        c2 = None if c2c_ns is None else c2c_ns[order]
        fl = None if full is None else full[order]
        wb = None if owed is None else owed[order]
        pf = prefetch_flags(ln, bounds, self._history, self._history_n)
        for a in np.flatnonzero(np.diff(bounds)).tolist():
            lo, hi = int(bounds[a]), int(bounds[a + 1])
            out.append((
                a,
                Block(
                    ln[lo:hi],
                    tg[lo:hi],
                    wr[lo:hi],
                    sz[lo:hi],
                    cp[lo:hi],
                    pf[lo:hi],
                    None if lv is None else lv[lo:hi],
                    None if rc is None else rc[lo:hi],
                    None if pg is None else pg[lo:hi],
                    None if c2 is None else c2[lo:hi],
                    None if fl is None else fl[lo:hi],
                    None if wb is None else wb[lo:hi],
                    1.0 if self._cpu_share is None else float(self._cpu_share[a]),
                ),
            ))
        return out

    def _transfers(
        self, level: np.ndarray, holder: np.ndarray, agent: np.ndarray, target: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Count the chunk's cache-to-cache transfers (``holder``: the agent holding each access's line modified,
        -1 for none) and time them: where the calibration has their latency, the access is served from a cache
        (the last level's index) at that latency instead of the level or memory access the estimate found."""
        assert self.c2c is not None
        at = np.flatnonzero(holder >= 0)
        reader = agent[at].astype(np.int64)
        same = self.c2c.same_instance(reader, holder[at])
        n = len(self.agents)
        self.c2c_local += np.bincount(reader[same], minlength=n)
        self.c2c_remote += np.bincount(reader[~same], minlength=n)
        ns = self.c2c.latency_ns(reader, holder[at], target[at].astype(np.int64))
        timed = ns > 0
        if not timed.any():
            return level, None
        c2c_ns = np.zeros(len(level))
        c2c_ns[at[timed]] = ns[timed]
        level = level.copy()
        level[at[timed]] = self.cache_instances.shape[0] - 1 if self.cache_instances is not None else 0
        return level, c2c_ns

    def _tlb_walks(
        self,
        lines: np.ndarray,
        agent: np.ndarray,
        order: np.ndarray,
        rank: np.ndarray,
        counts: np.ndarray,
        compute: np.ndarray,
    ) -> np.ndarray:
        """Each request's compute time plus the page walk of its STLB miss (reuse distance over page keys)."""
        assert self.tlb is not None
        huge = self.pages.huge_flags()[self._lookup_pages(lines << _LINE_SHIFT)]
        keys = tlb_keys(lines << _LINE_SHIFT, huge)
        agent64 = agent.astype(np.int64, copy=False)
        level, self._tlb_state = estimate_levels(
            keys, agent64, self._tlb_instance, self._tlb_capacity, self._tlb_state, order, rank, self._tlb_sets,
            carry_accesses(self._tlb_capacity), counts,
        )  # fmt: skip
        miss = (level >= 1) & self._has_cpu[agent64]
        walk = np.where(miss, np.where(huge, self.tlb.walk_ns_2m, self.tlb.walk_ns_4k), 0.0)
        n = len(self.agents)
        self.tlb_accesses += counts
        self.tlb_misses += np.bincount(agent64[miss], minlength=n)
        self.tlb_misses_2m += np.bincount(agent64[miss & huge], minlength=n)
        self.tlb_walk_ns += np.bincount(agent64, weights=walk, minlength=n)
        return compute.astype(np.float64) + walk

    def _lookup(self, addresses: np.ndarray) -> np.ndarray:
        """Node of each address (``PageMap.lookup``, compiled); an unmapped one raises its error."""
        starts, ends, offsets, flat, shift = self.pages.lookup_tables()
        node, bad = lookup_nodes(addresses, starts, ends, offsets, flat, shift)
        if bad >= 0:
            return self.pages.lookup(addresses[bad : bad + 1])  # raises, naming the address
        return node

    def _lookup_pages(self, addresses: np.ndarray) -> np.ndarray:
        """Flat page index of each address (compiled); an unmapped one raises its error."""
        starts, ends, offsets, _, shift = self.pages.lookup_tables()
        index, bad = lookup_pages(addresses, starts, ends, offsets, shift)
        if bad >= 0:
            self.pages.lookup(addresses[bad : bad + 1])  # raises, naming the address
        return index

    def device_block(
        self, address: int, size_bytes: int, is_write: bool, n_levels: int, agent: int = 0
    ) -> Block:
        """The line requests of one DMA transfer (no caches, no prefetch: DMA goes to memory)."""
        if size_bytes <= 0:
            raise WorkloadError(f"DeviceTransfer.size_bytes = {size_bytes}: must be positive")
        lo = address // LINE_BYTES
        hi = (address + size_bytes - 1) // LINE_BYTES
        lines = np.arange(lo, hi + 1, dtype=np.uint64)
        node = (
            self.pages.lookup(lines << _LINE_SHIFT)
            if len(lines) > 1
            else self.pages.lookup(np.array([address], dtype=np.uint64))
        )
        target = self.node_index[node]
        if (target < 0).any():
            raise WorkloadError(f"DeviceTransfer at {address:#x}: pages on a node without memory")
        n = len(lines)
        size = np.full(n, LINE_BYTES, dtype=np.int32)
        size[-1] = size_bytes - LINE_BYTES * (n - 1)
        return Block(
            lines,
            target,
            np.full(n, is_write, dtype=bool),
            size,
            np.zeros(n),
            np.zeros(n, dtype=bool),
            np.full(n, n_levels, dtype=np.int8),
            None if self.class_base is None else (self.class_base[agent] + target.astype(np.int64) * 2
                                                  + int(is_write)).astype(np.int32),
            None if not self.track_pages else np.full(n, -1, dtype=np.int64),  # DMA targets stay as read
        )

    # --- output ------------------------------------------------------------------------------------------
    def fill(self, want: int, max_buffered: int, until_found: Sequence[int] | None = None) -> None:
        """Pull chunks until every thread agent holds more than ``want`` requests, ``max_buffered`` are held, or
        the end. More than: a window takes ``want`` of each agent, and an agent the window takes everything of
        counts as finished (until the end of the stream, that is only so for a thread whose accesses stopped
        while ``max_buffered`` filled up with the others'). Each agent of ``until_found`` holds a request after it,
        or the stream has ended (past ``max_buffered``, as :meth:`take` reads on): none held is its end."""
        threads = np.array([a.thread_id is not None for a in self.agents])
        watch = None if until_found is None else np.asarray(until_found, dtype=np.int64)
        while not self.exhausted:
            if not threads.any() or (self.buffered[threads] > want).all():
                return
            if self.buffered.sum() >= max_buffered and (watch is None or (self.buffered[watch] > 0).all()):
                return
            self.pull()

    def set_share(self, agent: int, share: float) -> None:
        """From now on ``agent``'s compute counts ``share`` sharers (:class:`~numasim.engine.cores.CpuShares`):
        its blocks are rescaled as they are handed on (:meth:`take`, :meth:`peek_pieces`)."""
        assert self.share_now is not None
        self.share_now[agent] = share

    def _current(self, agent: int, block: Block) -> Block:
        if self.share_now is not None:
            block.rescale(float(self.share_now[agent]))
        return block

    def peek_pieces(self, agent: int, n: int) -> list[Block]:
        """Up to ``n`` buffered requests of ``agent`` as slices of its buffered blocks, in order, without
        consuming or joining them."""
        out: list[Block] = []
        for block in self.buffers[agent]:
            if n <= 0:
                break
            self._current(agent, block)
            out.append(block if len(block) <= n else block.slice(0, n))
            n -= len(out[-1])
        if not out:
            raise ValueError(f"agent {agent} has nothing buffered")
        return out

    def consume(self, agent: int, n: int) -> None:
        buf = self.buffers[agent]
        while n > 0 and buf:
            if len(buf[0]) <= n:
                n -= len(buf[0])
                self.buffered[agent] -= len(buf[0])
                buf.pop(0)
            else:
                buf[0] = buf[0].slice(n, len(buf[0]))
                self.buffered[agent] -= n
                n = 0

    def take(self, agent: int) -> Block | None:
        """The next buffered block of ``agent`` (pulling chunks as needed); None at the end of its stream."""
        while not self.buffers[agent]:
            if not self.pull():
                return None
        block = self.buffers[agent].pop(0)
        self.buffered[agent] -= len(block)
        return self._current(agent, block)
