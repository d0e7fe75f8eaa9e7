"""Cache levels in front of memory: exact LRU set-associative caches, and the epoch mode's cheap estimate.

Levels come from the calibration (size, latency, scope); associativity from the machine's matching
:class:`~numasim.topology.model.CacheLevel` (8 if absent). Levels are searched in order of latency; a miss at
every level goes to memory. Caches are write-back and non-inclusive; a miss fills every level it missed in, and
write-backs of evicted dirty lines are folded into the write cost of stores (see :mod:`memsys`).

**Exact** (:class:`LRUCache`): one instance per cpu (``core`` scope) or per die/socket/node, true LRU within
each set, accessed in simulated-time order.

**Epoch** (:func:`estimate_levels`): a reuse-distance estimate, fully vectorised. For every access, the previous
access to the same line (in the chunk and a carried tail of the previous chunk) is found with one sort; the
accesses in between, scaled by the share of them the access's cache instance issued, give its reuse time; the
instance's reuse-time distribution turns that into an expected LRU stack distance (StatStack, see
:func:`_stack_distance`). The access hits the first level whose capacity (lines per instance) exceeds it.
Close to exact LRU for one thread's sequential or random walks over a working set below, between or above the
levels (tests compare them); an approximation for set conflicts and across the carried horizon of
:func:`carry_accesses` accesses (three capacities of each instance's own accesses; a longer reuse is a miss
unless the instance's whole footprint fits it, :func:`_footprint_hits`). Within 2 % of exact mode's run time
for working sets from 0.5x to 2x of every level (experiments/cache-agreement).

**Coherence** (both modes): a line several cores read stays in each one's caches; a write takes it from every
cache instance its core does not use (the other cores' L1 and L2, the other sockets' L3), whose next access to it
then misses there: it hits a level the writer shares (the socket's L3) or goes to memory, unless another cache
holds it modified: a cache-to-cache transfer (:class:`CacheToCache`), timed at the calibration's coherence
figures where it has them (else as the level or memory access that serves it). Epoch mode orders accesses as the stream does, exact mode as simulated time
does: where threads run at their own pace (no compute between accesses, one slowed by misses falls behind), a
write-shared line's invalidations differ between them; with reads only, or threads paced by their compute, they
agree (tests/engine/test_coherence.py). The accesses that missed their first level because another core's write
took the line and would have hit it otherwise (coherence misses: exact mode keeps a shadow of each first level fed
the same accesses without invalidations; epoch mode counts the taken reuses whose stack distance without the
write fits the level), and the transfers, are counted per thread (the result's ``coherence`` section).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from numasim.errors import TopologyError
from numasim.timing.model import Calibration
from numasim.topology.model import CacheScope, Machine, core_complexes

from ._feed_kernel import (
    asks_fit,
    c2c_holders,
    interpolate_distance,
    level_hits,
    merge_known,
    new_in_line_order,
    reuse_candidates,
    reuse_keys,
    reuse_keys_at,
    reuse_pairs,
    reuse_times,
    set_counts,
    sort_reuse_keys,
    window_arrays,
)
from ._feed_kernel import write_backs as write_back_flags

_EMPTY_POS = np.zeros(0, dtype=np.int64)

__all__ = [
    "CacheLevelSpec",
    "CacheToCache",
    "coherence_domains",
    "cache_levels",
    "instance_keys",
    "LRUCache",
    "EpochCacheState",
    "estimate_levels",
    "carry_accesses",
    "CARRY_ACCESSES",
]


@dataclass(frozen=True)
class CacheLevelSpec:
    name: str
    size_bytes: int
    latency_ns: float
    scope: CacheScope
    line_bytes: int
    associativity: int
    complexes_per_die: int = 1

    @property
    def lines(self) -> int:
        return max(1, self.size_bytes // self.line_bytes)

    @property
    def sets(self) -> int:
        return max(1, self.lines // self.associativity)


@dataclass(frozen=True)
class CacheToCache:
    """What a cache-to-cache transfer (an access to a line another core holds modified) costs in a run.

    ``local_ns``: from a core on the reader's last-level instance (``llc_instance``, per agent);
    ``socket_ns``: from another instance of the reader's socket, the line homed on that socket (``agent_socket``
    per agent, ``target_socket`` per target index; 0: as from another socket); ``remote_ns`` /
    ``remote_home_reader_ns``: otherwise, the line homed away from / at the reader's node (``agent_target``:
    each agent's own node's target index, -1 for none). 0: not calibrated; such a transfer is then timed as the
    estimate's cache level or memory access (the calibration's :class:`~numasim.timing.model.CoherenceTiming`).

    Examples
    --------
    Two core complexes of socket 0 (agents 0 and 1) and one of socket 1 (agent 2); targets 0 and 1 are the
    sockets' memories:

    >>> c = CacheToCache(20.0, 200.0, 250.0, np.array([0, 1, 2]), np.array([0, 0, 1]), socket_ns=110.0,
    ...                  agent_socket=np.array([0, 0, 1]), target_socket=np.array([0, 1]))
    >>> c.latency_ns(np.array([0, 0, 0, 0]), np.array([0, 1, 1, 2]), np.array([0, 0, 1, 0])).tolist()
    [20.0, 110.0, 200.0, 250.0]

    The third transfer crosses no socket, but the line's home is on the other one, which the request visits.
    """

    local_ns: float
    remote_ns: float
    remote_home_reader_ns: float
    llc_instance: np.ndarray
    agent_target: np.ndarray
    socket_ns: float = 0.0
    agent_socket: np.ndarray | None = None
    target_socket: np.ndarray | None = None

    @classmethod
    def from_calibration(
        cls,
        calibration: Calibration,
        llc_instance: np.ndarray,
        agent_target: np.ndarray,
        agent_socket: np.ndarray | None = None,
        target_socket: np.ndarray | None = None,
    ) -> CacheToCache:
        c = calibration.coherence
        if c is None:
            return cls(0.0, 0.0, 0.0, llc_instance, agent_target)
        remote = c.remote_hitm_ns or 0.0
        socket = c.socket_hitm_ns or 0.0
        if socket > 0 and (agent_socket is None or target_socket is None):
            raise ValueError("CacheToCache: a socket figure needs agent_socket and target_socket")
        return cls(c.local_hitm_ns, remote, c.remote_hitm_home_reader_ns or remote, llc_instance, agent_target,
                   socket, agent_socket, target_socket)  # fmt: skip

    def same_instance(self, reader: np.ndarray, holder: np.ndarray) -> np.ndarray:
        """Whether each reader agent shares its last-level instance with its line's holder agent."""
        return self.llc_instance[reader] == self.llc_instance[holder]

    def far_ns(self, reader: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A transfer's latency from another instance, per access: from one of another socket (by where the line
        is homed), and from one of the reader's socket (the socket figure where the line is homed on it; else as
        the first: the request visits the home's socket)."""
        far = np.where(target == self.agent_target[reader], self.remote_home_reader_ns, self.remote_ns)
        if self.socket_ns <= 0:
            return far, far
        assert self.agent_socket is not None and self.target_socket is not None
        home_here = self.target_socket[target] == self.agent_socket[reader]
        return far, np.where(home_here, self.socket_ns, far)

    def latency_ns(self, reader: np.ndarray, holder: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Each transfer's latency (``target``: its line's home target index; 0 where not calibrated)."""
        far, near = self.far_ns(reader, target)
        if near is not far:
            assert self.agent_socket is not None
            far = np.where(self.agent_socket[reader] == self.agent_socket[holder], near, far)
        return np.where(self.same_instance(reader, holder), self.local_ns, far)


def cache_levels(machine: Machine, calibration: Calibration) -> list[CacheLevelSpec]:
    """The calibration's cache levels, fastest first."""
    assoc = {c.name: c.associativity for c in machine.caches}
    levels = [
        CacheLevelSpec(
            c.name, c.size_bytes, c.latency_ns, CacheScope(c.scope), c.line_bytes, assoc.get(c.name, 8),
            c.complexes_per_die,
        )
        for c in calibration.caches
    ]
    return sorted(levels, key=lambda c: c.latency_ns)


def instance_keys(machine: Machine, level: CacheLevelSpec, cpus: list[int]) -> list[tuple[object, ...]]:
    """The cache instance each cpu of ``cpus`` uses at ``level`` (cpus with equal keys share it)."""
    node_of = machine.cpu_to_node
    keys: list[tuple[object, ...]] = []
    complex_of: dict[int, tuple[int, int]] = {}
    if level.scope == CacheScope.CCX:
        for k, die in enumerate(machine.core_dies):
            for j, members in enumerate(core_complexes(die.cpus, level.complexes_per_die)):
                complex_of.update(dict.fromkeys(members, (k, j)))
    for cpu in cpus:
        node = machine.node(node_of[cpu])
        if level.scope == CacheScope.CORE:
            keys.append(("cpu", cpu))
        elif level.scope == CacheScope.CCX:
            if cpu not in complex_of:
                raise TopologyError(f"caches[{level.name}].scope", "ccx", f"cpu {cpu} is on no core die of machine "
                                    f"{machine.name} (core_dies says which cores a complex is made of)")
            keys.append(("ccx", *complex_of[cpu]))
        elif level.scope == CacheScope.DIE and node.die is not None:
            keys.append(("die", node.socket, node.die))
        elif level.scope in (CacheScope.DIE, CacheScope.SOCKET) and node.socket is not None:
            keys.append(("socket", node.socket))
        else:
            keys.append(("node", node.id))
    return keys


def coherence_domains(machine: Machine, calibration: Calibration, cpus: Sequence[int]) -> list[tuple[object, ...]]:
    """Each cpu's coherence domain, as the engine has it (``simulate._c2c_domains``): cpus with equal keys move a
    modified line at the calibration's local cost. The cpu's last-level cache instance (on the machine with the
    calibration's core dies), or its socket where that instance is an SNC or Cluster-on-Die cluster's share of
    the L3 or a core's own.

    Examples
    --------
    >>> from numasim.timing.catalog import catalog_calibration, catalog_machine
    >>> from numasim.topology.builders import multi_die
    >>> m = catalog_machine(multi_die(1, "NPS1", cores_per_socket=16, threads_per_core=2), "AMD EPYC 7313 16-Core Processor")
    >>> keys = coherence_domains(m, catalog_calibration(m), [0, 1, 4])
    >>> keys[0] == keys[1], keys[0] == keys[2]  # cores 0 and 1 share a core complex, core 4 is on another
    (True, False)
    """
    from numasim.timing.model import apply_calibration

    levels = cache_levels(machine, calibration)
    timed = apply_calibration(machine, calibration)
    if levels and levels[-1].scope not in (CacheScope.CLUSTER, CacheScope.CORE):
        return instance_keys(timed, levels[-1], list(cpus))
    out: list[tuple[object, ...]] = []
    for cpu in cpus:
        node = timed.node(timed.cpu_to_node[cpu])
        out.append(("socket", node.socket) if node.socket is not None else ("node", node.id))
    return out


class LRUCache:
    """A set-associative LRU cache of line numbers (exact mode; one call per access).

    Examples
    --------
    >>> c = LRUCache(sets=1, ways=2)
    >>> [c.access(x) for x in (1, 2, 1, 3, 2)]
    [False, False, True, False, False]
    """

    __slots__ = ("sets", "ways", "_data")

    def __init__(self, sets: int, ways: int) -> None:
        self.sets = sets
        self.ways = ways
        # Per set (a list indexed by set number: faster than a dict lookup), its lines least recently used
        # first, as a dict (keeps insertion order and finds in O(1)); None until the set is first touched.
        self._data: list[dict[int, None] | None] = [None] * sets

    def access(self, line: int) -> bool:
        """Touch ``line``; True on a hit. A miss inserts it as most recently used."""
        key = line % self.sets
        s = self._data[key]
        if s is None:
            self._data[key] = {line: None}
            return False
        if line in s:
            del s[line]
            s[line] = None
            return True
        if len(s) >= self.ways:
            del s[next(iter(s))]
        s[line] = None
        return False


_BINS_PER_OCTAVE = 8
_SAMPLES = 1 << 16
_OCTAVES = 48


def _stack_distance(
    reuse_time: np.ndarray,
    instance: np.ndarray,
    sample_time: np.ndarray,
    sample_instance: np.ndarray,
    n_inst: int,
    sample_censored: np.ndarray | None = None,
) -> np.ndarray:
    """Expected LRU stack distance of each reuse from the reuse-time distribution of its cache instance.

    StatStack's relation (Eklov and Hagersten, ISPASS 2010): the number of distinct lines touched during a reuse
    time ``g`` is ``D(g) = integral_0^g S(t) dt``, ``S(t)`` being the fraction of the instance's accesses whose
    reuse time exceeds ``t``. ``sample_time`` holds one reuse time per sampled access of the window: the real one
    for reuses, and for cold accesses (no earlier access in the window, ``sample_censored``) the time since the
    window began, a *censored* sample that only says "longer than this". ``S`` is the Kaplan-Meier estimate over
    a histogram with 8 bins per octave (one ``bincount`` for all instances): a censored sample stays at risk up
    to its time and then leaves without counting as a reuse. (Counting it as a reuse at its time, as a plain
    histogram does, shortens every distance: a cyclic walk repeated twice came out at 3/4 of its length, so a
    working set up to 4/3 of a cache looked like it fitted.)
    """
    if len(reuse_time) == 0:
        return np.zeros(0)
    nb = _BINS_PER_OCTAVE * _OCTAVES

    def bins(t: np.ndarray) -> np.ndarray:
        return np.clip((np.log2(np.maximum(t, 1.0)) * _BINS_PER_OCTAVE).astype(np.int64), 0, nb - 1)

    cens = np.zeros(len(sample_time), dtype=bool) if sample_censored is None else sample_censored
    key = sample_instance * nb + bins(sample_time)
    size = n_inst * nb
    events = np.bincount(key[~cens], minlength=size).reshape(n_inst, nb).astype(np.float64)
    censored = np.bincount(key[cens], minlength=size).reshape(n_inst, nb).astype(np.float64)
    gone = events + censored
    at_risk = gone.sum(axis=1)[:, None] - np.cumsum(gone, axis=1) + gone  # samples with time >= the bin's start
    keep = 1.0 - events / np.maximum(at_risk, 1.0)
    surv_next = np.cumprod(keep, axis=1)  # S at each bin's end
    surv = np.concatenate([np.ones((n_inst, 1)), surv_next[:, :-1]], axis=1)  # S at each bin's start
    edges = 2.0 ** (np.arange(nb + 1) / _BINS_PER_OCTAVE)
    width = np.diff(edges)
    area = 0.5 * (surv + surv_next) * width[None, :]
    d_lo = 1.0 + np.concatenate([np.zeros((n_inst, 1)), np.cumsum(area, axis=1)[:, :-1]], axis=1)
    # A reuse after ``g`` accesses has ``g - 1`` accesses in between: its stack distance (the distinct other
    # lines they touched; LRU hits while it is below the capacity) is ``D(g - 1)``. Within its own bin ``S`` is
    # taken at the bin's start (the reuses in that bin are not before it): a cyclic walk of N lines then has
    # distance N - 1 exactly, so it fits a cache of N lines and not one of N - 1.
    x = np.asarray(reuse_time, dtype=np.float64) - 1.0
    # the rest per reuse compiled (the logarithm stays numpy's: the same bins to the last bit)
    return interpolate_distance(x, np.log2(np.maximum(x, 1.0)), instance, edges, width, d_lo, surv, _BINS_PER_OCTAVE)


def _set_limited_capacity(
    lines: np.ndarray, instance: np.ndarray, n_inst: int, sets: int, ways: int, rate: float = 1.0
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Lines each instance can hold of the window's distinct ``lines`` (``instance``: the one that first touched
    each): ``ways`` x the effective number of sets they spread over, ``(sum n)^2 / sum n^2`` for ``n`` lines
    per set (all sets for an even spread; a quarter for a walk touching every fourth line). An LRU cache's
    capacity for a pattern is its ways in the sets the pattern uses, which a fully associative estimate
    misses (a stride of four lines fills a cache at a quarter of its size).

    ``lines`` may be a sample of the distinct lines (:class:`_DistinctSample`): with ``c`` sampled lines per set,
    ``sum c^2 - (1 - rate) sum c`` estimates the full ``sum n^2`` up to the sample's scale (binomial thinning at
    ``rate``; ``rate`` 0 for draws with replacement), so the ratio stays unbiased."""
    full = float(sets * ways)
    if sets <= 1 or len(lines) == 0:
        return np.full(n_inst, full), None
    total, square, per_set = set_counts(lines, instance, n_inst, sets)
    # every distinct line counted (no sample): each line's own set's count is known too (level_hits)
    table = (per_set, total.copy()) if rate == 1.0 else None
    square -= (1.0 - rate) * total
    effective = np.where(square > 0, total * total / np.maximum(square, 1e-12), sets)
    return np.minimum(full, ways * effective), table


class _DistinctSample:
    """Lines (and their agents) of a window's distinct lines to count in their sets, where a mask marks each
    line's one access to count (its first in the window; or where its instance brings it in, see
    :func:`estimate_levels`): all of them (rate 1) when there are at most :data:`_SET_SAMPLES`, else about that
    many drawn uniformly with replacement (rate 0 in :func:`_set_limited_capacity`'s correction: the counts per set
    are then Poisson-like, ``sum c^2 - sum c`` estimates ``(k / n)^2 sum n^2``). Positions are drawn over the whole
    window and those the mask does not mark dropped, which draws the distinct lines uniformly without gathering
    them all. The generator is seeded by the window's size: the same window gives the same sample. (A
    multiplicative hash of the line looked random but is a Weyl sequence over consecutive lines, correlated
    with their sets: it saw a third of a sequential walk's sets.)

    One instance per window: the masks of one window draw a prefix of the same positions (the more accesses a
    mask marks, the fewer it draws; a generator gives the same first values however many it is asked for), so
    the positions are drawn once. (The lines are gathered where each mask marks them, a window of reuses marking
    few of its draws, up to four per access; or, for a sparse sample, once for all the window's masks:
    :data:`_GATHER_ONCE_SHARE`.)"""

    __slots__ = ("lines", "agent", "pos", "pos_lines", "pos_agent")

    def __init__(self, lines: np.ndarray, agent: np.ndarray) -> None:
        self.lines = lines
        self.agent = agent
        self.pos = _EMPTY_POS
        self.pos_lines: np.ndarray | None = None  # the lines and agents at ``pos``, where gathered once
        self.pos_agent: np.ndarray | None = None

    def draw(self, mask: np.ndarray, n_marked: int) -> tuple[np.ndarray, np.ndarray, float]:
        """(lines, agents, rate) of the accesses ``mask`` marks (``n_marked`` of them), or of a sample of them."""
        m = len(mask)
        if n_marked <= _SET_SAMPLES:
            at = np.flatnonzero(mask)
            return self.lines[at], self.agent[at], 1.0
        draws = int(min(4 * m, _SET_SAMPLES * m // n_marked))
        if len(self.pos) < draws:
            self.pos = np.random.default_rng(m).integers(0, m, draws)
            self.pos_lines = self.pos_agent = None
        pos = self.pos[:draws]
        if draws * _GATHER_ONCE_SHARE > m:
            at = pos[mask[pos]]
            return self.lines[at], self.agent[at], 0.0
        # A sparse sample (a window of first touches, which a stream missing the caches is): its lines and
        # agents are gathered once for every mask of the window, which then takes them in order. Gathered at
        # random from a 10 MB window, they cost 20 ns each, three times a window.
        if self.pos_lines is None or self.pos_agent is None:
            self.pos_lines, self.pos_agent = self.lines[self.pos], self.agent[self.pos]
        keep = mask[pos]
        return self.pos_lines[:draws][keep], self.pos_agent[:draws][keep], 0.0


_GATHER_ONCE_SHARE = 8
""":class:`_DistinctSample` gathers its drawn positions' lines once per window where it draws at most one access in
this many (most of the window marked). A window of reuses marks few accesses and draws up to four per access: it
gathers only those each mask marks."""


_SET_SAMPLES = 1 << 16
_NEAR_REUSES_MIN = 4096
_NEAR_REUSES_SHARE = 0.25
"""A sampled window counts all its distinct lines in their sets after all when at least this many of its reuses
(and this share of its accesses) have a stack distance between half and twice the level's capacity: there the set a
line falls in decides whether LRU kept it. A stream that misses the caches (distances far beyond) never pays."""
_NO_WRITES = np.zeros(0, dtype=np.bool_)
_NO_COUNTS = np.zeros(0, dtype=np.int32)
_NO_TOTALS = np.zeros(0, dtype=np.float64)


def _kept_writes(all_write: np.ndarray, start: int) -> np.ndarray | None:
    """The write flags of the window's accesses from ``start`` on, to carry (None: no write among them)."""
    kept = all_write[start:]
    return kept.copy() if len(kept) and kept.any() else None


def _tail_writes(state: EpochCacheState) -> np.ndarray:
    """The carried accesses' write flags (all reads where the carrying estimate was given none)."""
    return state.write if state.write is not None else np.zeros(len(state.lines), dtype=np.bool_)


class _Buffers:
    """Arrays an estimate reuses from one call to the next: the window's lines, agents and ranks, and the reuse
    filter's bitmaps. Fresh arrays of these sizes (about 15 MB for a million-access chunk) cost a page fault per
    4 KiB when first written, about a microsecond each on the benchmark's host: 3-4 ns per access."""

    __slots__ = ("lines", "agent", "rank", "flags", "hits", "scratch", "pick_m", "pick")

    def __init__(self) -> None:
        self.lines = np.zeros(0, dtype=np.uint64)
        self.agent = np.zeros(0, dtype=np.uint8)
        self.rank = np.zeros(0, dtype=np.int32)
        self.flags = np.zeros(0, dtype=np.uint64)
        self.hits = np.zeros(0, dtype=np.uint32)
        self.scratch = np.zeros(0, dtype=np.uint64)
        self.pick_m = -1  # the window size ``pick`` was drawn for
        self.pick = np.zeros(0, dtype=np.int64)

    def sample_positions(self, m: int) -> np.ndarray:
        """The reuse-time sample's positions in a window of ``m`` accesses: one in each run of ``m //``
        :data:`_SAMPLES` (at least 1), drawn by a generator seeded by ``m``. A function of ``m`` alone, so kept for
        the next window of the same size (most are): drawing 65 k of them took 0.6 ms a window, 0.6 ns an access
        on the engine benchmark."""
        if m != self.pick_m:
            stride = max(1, m // _SAMPLES)
            pick = np.arange(0, m, stride)
            if stride > 1:
                pick = np.minimum(pick + np.random.default_rng(m).integers(0, stride, len(pick)), m - 1)
            self.pick_m, self.pick = m, pick
        return self.pick

    def sort(self, key: np.ndarray, shift: int) -> np.ndarray:
        """``key`` (reuse keys of ``shift`` index bits) sorted in place, through the reused scratch array."""
        if len(self.scratch) < len(key):
            self.scratch = np.empty(max(len(key), len(self.scratch) + len(self.scratch) // 4), dtype=np.uint64)
        return sort_reuse_keys(key, shift, self.scratch)

    def window(self, m: int, agent_dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Room for a window of ``m`` accesses (views of the buffers, grown as needed)."""
        if len(self.lines) < m or self.agent.dtype != agent_dtype:
            size = max(m, len(self.lines) + len(self.lines) // 4)
            self.lines = np.empty(size, dtype=np.uint64)
            self.agent = np.empty(size, dtype=agent_dtype)
            self.rank = np.empty(size, dtype=np.int32)
        return self.lines[:m], self.agent[:m], self.rank[:m]


@dataclass
class EpochCacheState:
    """The tail of the previous chunk carried into the next reuse-distance estimate.

    ``rank`` is each carried access's rank among the carried accesses of its agent (0, 1, ...), kept so the
    next estimate need not sort the tail by agent again. ``long_hits`` counts the accesses of the last estimate
    that hit a cache thanks to an access carried from beyond :data:`CARRY_ACCESSES` (-1: it had no such
    carry); :class:`~numasim.engine.stream.Feeder` uses it to carry that far only where it matters.
    """

    lines: np.ndarray
    agent: np.ndarray
    rank: np.ndarray
    long_hits: int = -1
    counts: np.ndarray | None = None  # the carried accesses per agent (None: counted when needed)
    seen: dict[tuple[int, int], np.ndarray | None] | None = None
    """Per (level, instance), the sorted lines the instance was ever asked for, while they fit its capacity
    (``None`` once they did not): a line asked for again after the carried horizon is then an LRU hit, since no
    more distinct lines than the instance holds can have come in between (:func:`estimate_levels`)."""
    horizon: int = 0
    """Stream accesses the last estimate's chunk needed to carry to see :data:`HORIZON_CAPACITIES` x each
    cache instance's capacity of its own accesses (0: not known yet); :class:`~numasim.engine.stream.Feeder`
    carries that far (within :func:`carry_accesses`' bound) while it finds hits there."""
    buffers: _Buffers | None = None
    """Scratch arrays the estimates pass on to each other (none of the results lives in them)."""
    write: np.ndarray | None = None
    """Which carried accesses are writes (``None``: none known; the estimate was given no write flags)."""
    coherence_misses: np.ndarray | None = None
    """Per agent, the last estimate's chunk accesses that missed their first level because another core's write
    took the line (None: none)."""
    c2c_holder: np.ndarray | None = None
    """Per access of the last estimate's chunk, the agent whose cache held its line modified (-1: none; None:
    no such access): a cache-to-cache transfer (:func:`~numasim.engine._feed_kernel.c2c_holders`)."""
    write_backs: np.ndarray | None = None
    """Per access of the last estimate's chunk, whether it is a write that hit a line clean in its core's
    caches, its write-back owed (None: none, or not asked for)."""

    @classmethod
    def empty(cls) -> EpochCacheState:
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))


CARRY_ACCESSES = 1 << 18
"""Accesses of the previous chunk kept to find reuses across a chunk boundary (at least; see
:func:`carry_accesses`)."""


HORIZON_CAPACITIES = 3
"""How many of a cache's capacities of its own accesses the long carry spans. A uniformly random walk over a
working set ``r`` times a cache's size reuses a line within ``r ln(r / (r - 1))`` capacities when it still
hits: 2 for ``r`` = 1.25, 1.4 for 2; three cover every working set from 1.07x up. With one capacity a working
set 1.25x an L3 hit 68 % of the time where exact LRU hits 74 % (+9 % run time; experiments/cache-agreement);
below 1.07x the footprint rule of :func:`_footprint_hits` decides."""


MAX_CARRY_CAPACITIES = 8
"""The longest carry, in capacities of the largest cache (its stream accesses): two sockets' L3s sharing the
stream need six (:data:`HORIZON_CAPACITIES` of each one's half); four sockets get two-thirds of their span."""


def carry_accesses(capacity_lines: np.ndarray, horizon: int = 0) -> int:
    """The longest carry across chunk boundaries for caches of ``capacity_lines`` per instance: ``horizon``
    (:attr:`EpochCacheState.horizon`, the stream accesses that span :data:`HORIZON_CAPACITIES` of every
    instance's capacity in its own accesses) or, before it is known, that many capacities of the largest cache;
    at least :data:`CARRY_ACCESSES` and at most :data:`MAX_CARRY_CAPACITIES` of the largest cache (the window's
    memory and sort). A reuse beyond the carried horizon counts as a miss (with a shorter one a 25 MiB L3 never
    held a 16 MiB working set, and a working set 1.25x a cache hit 5 points less than exact LRU). The feeder
    carries that far while it finds hits there (see :attr:`EpochCacheState.long_hits`)."""
    top = int(np.max(capacity_lines)) if len(capacity_lines) else 0
    want = horizon if horizon > 0 else HORIZON_CAPACITIES * top
    return max(CARRY_ACCESSES, min(want, MAX_CARRY_CAPACITIES * top))


def _tracked(seen: dict[tuple[int, int], np.ndarray | None] | None, agent_instance: np.ndarray) -> dict[int, list[int]]:
    """Per level, the instances whose footprint :func:`_footprint_hits` still tracks (all before the first
    estimate; those whose lines still fit them after)."""
    known = seen or {}
    return {lv: [i for i in np.flatnonzero(np.bincount(agent_instance[lv])).tolist() if known.get((lv, i), 0) is not None]
            for lv in range(len(agent_instance))}  # fmt: skip


_FILTER_MIN = 1 << 14
"""Windows shorter than this sort all their accesses (the filter's bitmaps cost more than it saves)."""
_FILTER_BITS = 4
"""Buckets of the reuse filter per access of the window (at least; rounded up to a power of two), of two bits each
(one in each of the filter's two bitmaps). Fewer buckets make smaller bitmaps and more candidates to sort: 4 was
the fastest of 2, 4, 8 and 16 on one host (the engine benchmark's estimate, 16 M accesses: 21.7 ns an access
against 22.5 at 8 and 23.4 at 2) and near the fastest on another, whose 2 MiB second-level cache a million-access
window's 8-bucket bitmap overflows (8 M accesses, the engine on one thread: 42.7-45.9 ns against 47.1-48.7 at 8
and 40.6-43.0 at 2). Measured again with the two bitmaps (stop 41, the estimate replayed on the bench's chunks,
steady state): 19-21 ns at 4, 21-22 at 2, 25-26 at 8."""


def _sets_hold(lines: np.ndarray, n_sets: int, ways: int) -> bool:
    """Whether no set of a cache of ``n_sets`` x ``ways`` gets more than ``ways`` of the distinct ``lines``."""
    if n_sets <= 1 or len(lines) <= ways:
        return len(lines) <= n_sets * ways
    per_set = np.bincount((lines % np.uint64(n_sets)).astype(np.int64), minlength=n_sets)
    return int(per_set.max()) <= ways


def _footprint_hits(
    seen_before: dict[tuple[int, int], np.ndarray | None] | None,
    lines: np.ndarray,
    agent: np.ndarray,
    head: int,
    level: np.ndarray,
    agent_instance: np.ndarray,
    cold_in_line_order: Callable[[], np.ndarray],
    cold_in_chunk: np.ndarray,
    tracked: dict[int, list[int]],
    capacity_lines: np.ndarray,
    sets: np.ndarray | None,
    invalid: dict[int, np.ndarray] | None = None,
    write: np.ndarray | None = None,
    fresh: dict[int, np.ndarray] | None = None,
) -> dict[tuple[int, int], np.ndarray | None]:
    """Hits the carried horizon cannot see: a chunk access with no earlier access in the window, to a line its
    instance was asked for before, hits that level while every line the instance was ever asked for fits it:
    no set of it was asked for more lines than it has ways (``sets`` per instance of each level, ``None``: fully
    associative, ``capacity_lines`` in all), so an LRU cache never evicted one of them
    (``tracked``: the instances of each level whose lines still fit, :func:`_tracked`). Counting the sets of the
    lines themselves is exact where the window's sample of them is not: a working set exactly the size of a
    cache, each set holding its ways, fits it (it used to look larger by the sample's scatter over the sets, and
    a cache-sized working set missed 10 % of the time). ``cold_in_line_order()`` gives the window positions of
    the chunk's accesses with no earlier access in the window (the chunk's start at ``head``), in line order;
    ``cold_in_chunk`` marks the same accesses (chunk positions): all an instance's first asks need.
    Sets ``level`` of those accesses; returns the updated per-instance line sets (``None`` once an instance's
    lines outgrew it: from then on only the window decides).

    Without it a working set that fits a cache but is reused after more accesses than the window carries counted
    as misses: four threads sharing an L3 with half of it each touched 18 MiB of a 36 MiB cache and hit 75 % of
    the time where an exact LRU hits 85 % (benchmarks/bench_cache.py).

    ``fresh[lv]``: the chunk's accesses (chunk positions, in line order) that are their instance's first in the
    window at level ``lv`` though another instance touched the line before: asks for lines like the cold ones.
    Coherence: a line another instance's write took from this one (``invalid[lv]``: window positions, from the
    window's reuse pass) is no hit here, and a line such a write took in this chunk (``write``: the chunk's write
    flags) without the instance asking for it again afterwards leaves the instance's lines. (A line asked for
    again only inside the window is not added back: a later hit on it beyond the horizon is then missed.)
    """
    seen: dict[tuple[int, int], np.ndarray | None] = dict(seen_before) if seen_before else {}
    if not any(tracked.values()):  # every instance outgrew its lines: nothing to track (the usual case)
        return seen
    # This chunk's accesses with no earlier access in the window: the only ones that can bring a line the
    # instance has not been asked for (a line met earlier in the window was added when it was first met). They
    # are distinct lines, and in line order each instance's share is sorted: membership and union are merges.
    # An instance whose first asks outgrow it (a stream over more than the caches, the usual case) needs only
    # the lines asked for, in stream order (a pass over the chunk); line order (a sort, then a gather at random)
    # only for an instance whose lines still fit it.
    cold_any = np.flatnonzero(cold_in_chunk)
    cold_any_agent = agent[cold_any]
    cold: np.ndarray | None = None  # in line order, once needed
    agent_asks = np.bincount(cold_any_agent, minlength=agent_instance.shape[1]).astype(np.float64)
    warm: np.ndarray | None = None  # the chunk's accesses with an earlier access in the window
    for lv in range(len(capacity_lines) - 1, -1, -1):  # slowest first: a faster level's hit overrides
        asks = np.bincount(agent_instance[lv], weights=agent_asks)
        n_sets = 1 if sets is None else int(sets[lv])
        ways = max(1, int(capacity_lines[lv]) // n_sets)
        holds = float(n_sets * ways)
        for i in tracked[lv]:
            if asks[i] > holds:  # more distinct lines asked for than it holds
                seen[(lv, i)] = None
        left = [i for i in tracked[lv] if seen.get((lv, i), 0) is not None]
        if not left:
            continue
        cold_any_inst = agent_instance[lv][cold_any_agent]
        for i in left:
            known = seen.get((lv, i))
            extra = _EMPTY_POS if fresh is None else fresh.get(lv, _EMPTY_POS)
            if len(extra):
                # lines another instance touched first in the window: this one's first asks for them
                extra = extra[agent_instance[lv][agent[extra]] == i]
            if (known is None or not len(known)) and not asks_fit(lines, cold_any, cold_any_inst, i, extra, n_sets, ways):
                seen[(lv, i)] = None  # its first asks (counted in stream order) outgrow one of its sets
                continue
            if cold is None:
                cold = cold_in_line_order() - head
                cold_lines, cold_agent = lines[cold], agent[cold]
            mine = np.flatnonzero(agent_instance[lv][cold_agent] == i)
            asked, pos = cold_lines[mine], cold[mine]
            if len(extra):
                both = np.concatenate([asked, lines[extra]])
                by_line = np.argsort(both, kind="stable")
                asked, pos = both[by_line], np.concatenate([pos, extra])[by_line]
            if known is None or not len(known):
                # nothing known: no hits, and the lines asked for (their sets hold them) are the instance's
                seen[(lv, i)] = asked
                continue
            again, grown, size = merge_known(known, asked, holds)
            if size > holds or not _sets_hold(grown, n_sets, ways):
                seen[(lv, i)] = None  # outgrew the instance: from now on only the window decides
                continue
            seen[(lv, i)] = grown
            level[head + pos[again]] = lv
            # The chunk's reuses inside the window, of a line this instance holds, hit here too (or faster):
            # the window's stack-distance estimate must not lose what the footprint proves is held.
            if warm is None:
                warm = np.ones(len(lines), dtype=bool)
                warm[cold] = False
            # (only those the estimate put below this level: the others keep what they have)
            sel = np.flatnonzero(warm & (agent_instance[lv][agent] == i) & (level[head:] > lv))
            if invalid is not None and len(invalid.get(lv, _EMPTY_POS)) and len(sel):
                sel = sel[~np.isin(sel + head, invalid[lv])]
            if len(extra) and len(sel):  # (their first asks were decided above, against what was known)
                sel = sel[~np.isin(sel, extra)]
            if len(sel):
                at = np.minimum(np.searchsorted(grown, lines[sel]), len(grown) - 1)
                held = sel[grown[at] == lines[sel]]
                chunk_level = level[head:]
                chunk_level[held] = np.minimum(chunk_level[held], lv)
    if write is not None and write.any():
        for lv in range(len(capacity_lines)):
            for i in tracked[lv]:
                known = seen.get((lv, i))
                if known is not None and len(known):
                    seen[(lv, i)] = _drop_invalidated(known, lines, write, agent_instance[lv][agent] == i)
    return seen


def _c2c_holders(
    cur: np.ndarray,
    prv: np.ndarray,
    cont: np.ndarray,
    a_cur: np.ndarray,
    a_prv: np.ndarray,
    all_agent: np.ndarray,
    agent_instance: np.ndarray,
    capacity_lines: np.ndarray,
    write: np.ndarray,
    head: int,
    n: int,
) -> np.ndarray | None:
    """Per chunk access, the agent whose cache held its line modified (-1: none; None: no such access): a
    cache-to-cache transfer. :func:`~numasim.engine._feed_kernel.c2c_holders` finds the accesses to lines another
    core (or another last-level instance) holds modified; the holder still has the line while fewer accesses of its own than its caches hold came
    since its last touch (a sufficient condition for LRU; a longer gap counts as written back): its core's, against
    its private levels (those with the first level's sharing), for a reader on its own last-level instance; its
    last-level instance's, against that level, for a reader on another."""
    pos, holder, last = c2c_holders(cur, prv, cont, a_cur, a_prv, agent_instance[0], agent_instance[-1], write, head)
    if not len(pos):
        return None
    first = agent_instance[0] - agent_instance[0].min()
    private = max(lv for lv in range(len(capacity_lines))
                  if np.array_equal(agent_instance[lv] - agent_instance[lv].min(), first))  # fmt: skip
    llc = agent_instance[-1]
    reader = all_agent[pos].astype(np.int64)
    same = llc[reader] == llc[holder]
    held = np.zeros(len(pos), dtype=bool)
    for inst_row, cap, want in ((agent_instance[private], capacity_lines[private], same),
                                (llc, capacity_lines[-1], ~same)):  # fmt: skip
        inst_all = inst_row[all_agent.astype(np.int64)]  # each window access's instance, once per level
        for h in np.unique(inst_row[holder[want]]).tolist():
            # the window positions of the holding instance's accesses, and how many lie between each
            # candidate's last touch by the holder and the access
            mine = np.flatnonzero(inst_all == h)
            at = np.flatnonzero(want & (inst_row[holder] == h))
            since = np.searchsorted(mine, pos[at]) - np.searchsorted(mine, last[at], side="right")
            held[at] = since < cap
    out = np.full(n, -1, dtype=np.int64)
    out[pos[held] - head] = holder[held]
    return out if held.any() else None


def _drop_invalidated(known: np.ndarray, lines: np.ndarray, write: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """``known`` (sorted lines an instance holds) less those another instance wrote in this chunk (``write``,
    ``mine``: the chunk's accesses that are writes, and those of this instance) after this instance's last access
    to them in it."""
    foreign = np.flatnonzero(write & ~mine)
    if not len(foreign):
        return known

    def last_by_line(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        back = pos[::-1]
        line, first = np.unique(lines[back], return_index=True)
        return line, back[first]

    w_line, w_last = last_by_line(foreign)
    again = np.zeros(len(w_line), dtype=bool)  # the instance asked for the line after the write
    own_pos = np.flatnonzero(mine)
    if len(own_pos):
        o_line, o_last = last_by_line(own_pos)
        at = np.minimum(np.searchsorted(o_line, w_line), len(o_line) - 1)
        again = (o_line[at] == w_line) & (o_last[at] > w_last)
    gone = w_line[~again]
    return known[~np.isin(known, gone)] if len(gone) else known


def estimate_levels(
    lines: np.ndarray,
    agent: np.ndarray,
    agent_instance: np.ndarray,
    capacity_lines: np.ndarray,
    state: EpochCacheState,
    agent_order: np.ndarray | None = None,
    agent_rank: np.ndarray | None = None,
    sets: np.ndarray | None = None,
    carry: int = CARRY_ACCESSES,
    agent_counts: np.ndarray | None = None,
    write: np.ndarray | None = None,
    write_backs: bool = False,
    long_pays_at: int | None = None,
) -> tuple[np.ndarray, EpochCacheState]:
    """Cache level (0..L-1, or L for memory) of each access, by the reuse-distance estimate.

    Parameters
    ----------
    lines : ndarray of uint64
        Line number of each access, in stream order.
    agent : ndarray of int64
        Issuing agent of each access.
    agent_instance : ndarray (L, n_agents) of int64
        Cache instance each agent uses at each level (a global index over all instances of all levels).
    capacity_lines : ndarray (L,)
        Lines per instance of each level.
    state : EpochCacheState
        Carried tail of the previous chunk.
    agent_order : ndarray of int64, optional
        ``np.argsort(agent, kind="stable")`` if the caller has it already (it is computed otherwise).
    agent_rank : ndarray of int32, optional
        Each access's rank among its agent's accesses in this chunk, if the caller has it (with ``agent_order``).
    sets : ndarray (L,) of int, optional
        Sets per instance of each level (``capacity_lines / sets`` ways): a level then holds, of a pattern, its
        ways in the sets the pattern uses (see :func:`_set_limited_capacity`); None: fully associative.
    carry : int
        Accesses of the window to carry into the next call (:func:`carry_accesses`).
    long_pays_at : int, optional
        With a ``carry`` longer than :data:`CARRY_ACCESSES`: carry it only if this estimate's hits that only the
        longer carry held (``EpochCacheState.long_hits``, where this window could count them) reach this many;
        else carry :data:`CARRY_ACCESSES`. None: always ``carry``.
    agent_counts : ndarray of int64, optional
        Each agent's accesses in ``agent`` (``np.bincount(agent, minlength=n_agents)``), if the caller has it.
    write : ndarray of bool, optional
        Which accesses are writes. A write invalidates the line in every instance its agent does not use (the
        caches' coherence, as exact mode has it: :mod:`~numasim.engine._exact_kernel`); None: no access is one
        (the TLB's page keys).
    write_backs : bool
        Also find the writes that hit a line clean in their core's caches (their write-back is owed: a write
        miss pays for its own), as ``EpochCacheState.write_backs`` of the returned state
        (:func:`~numasim.engine._feed_kernel.write_backs`).
    """
    n_levels = len(capacity_lines)
    n = len(lines)
    if n_levels == 0:
        return np.full(n, 0, dtype=np.int8), state
    n_agents = agent_instance.shape[1]
    # counts the caller and the last estimate already made are not made again (a pass over the chunk each)
    carry_counts = state.counts if state.counts is not None else np.bincount(state.agent, minlength=n_agents)
    new_counts = agent_counts if agent_counts is not None else np.bincount(agent, minlength=n_agents)
    per_agent_n = carry_counts + new_counts
    per_agent = per_agent_n.astype(np.float64)
    # Each access's rank among its own agent's accesses: a reuse by the same agent then counts exactly how many
    # of that agent's accesses lie in between, whatever the interleaving of agents in the stream. The carried
    # tail's ranks come with it; the chunk's follow them, from one stable sort of the chunk by agent.
    if agent_rank is not None:
        rank_new, offset = agent_rank, carry_counts.astype(np.int32)
    else:
        if agent_order is None:
            agent_order = np.argsort(agent.astype(np.uint8) if n_agents < 256 else agent, kind="stable")
        starts = np.r_[0, np.cumsum(new_counts)[:-1]] - carry_counts
        rank_new = np.empty(n, dtype=np.int32)
        rank_new[agent_order] = np.arange(n, dtype=np.int32) - np.repeat(starts.astype(np.int32), new_counts)
        offset = np.zeros(n_agents, dtype=np.int32)
    # The window: the carried tail, then the chunk (agents as bytes where they fit: the gathers below read less).
    m = len(state.lines) + n
    keep = min(m, carry)
    buffers = state.buffers if state.buffers is not None else _Buffers()
    if len(state.lines):
        all_lines, all_agent, rank = buffers.window(m, np.uint8 if n_agents <= 256 else np.int64)
        top, kept_counts = window_arrays(
            state.lines, state.agent, state.rank, lines, agent, rank_new.astype(np.int32, copy=False), offset,
            all_lines, all_agent, rank, keep, per_agent_n,
        )
    else:  # the first chunk: the window is the chunk
        all_lines, all_agent, rank = lines, agent, rank_new + offset[agent] if agent_rank is not None else rank_new
        top = np.uint64(all_lines.max() if m else 0)
        kept_counts = np.bincount(all_agent[m - keep :], minlength=n_agents)
    head = m - n
    shift = max(1, int(m).bit_length())
    # The window's write flags, for the reuse passes only where two instances of a level share the window (a
    # write invalidates the line in the others) and something was written; carried on in any case.
    all_write = _NO_WRITES  # (while nothing was written, none: most streams of loads never build one)
    if (write is not None and write.any()) or state.write is not None:
        chunk_write = np.zeros(n, dtype=bool) if write is None else np.asarray(write, dtype=bool)
        all_write = np.concatenate([_tail_writes(state), chunk_write]) if len(state.lines) else chunk_write
    present = per_agent_n > 0
    shared_levels = bool(present.any()) and bool(
        (agent_instance[:, present].min(axis=1) != agent_instance[:, present].max(axis=1)).any()
    )
    pass_write = all_write if shared_levels and all_write.any() else _NO_WRITES
    # Reuses: each access whose line occurred before (``cur``) and that previous occurrence (``prv``), their
    # agents, and the gaps between them in the stream and in their agent's ranks.
    key: np.ndarray | None = None
    tracked = _tracked(state.seen, agent_instance)
    packed = bool(m) and int(top) < (1 << (63 - shift))
    filtered = False
    if packed and not any(tracked.values()) and m >= _FILTER_MIN:
        # Nothing needs the window's lines in order (no instance tracks its footprint): sort only the accesses
        # of lines that may occur twice, which a hash filter finds. The same pairs in the same order: every
        # access of a line that occurs twice is among them. (Filtering a first window too, whose instances all
        # track their footprints, made the cache-heavy benchmark's estimate 4-8 % slower: its windows are
        # mostly reuses, and a footprint that fits sorts them all after all.)
        # (at most 2**32 buckets: the filter keeps a bucket per access in 32 bits)
        log2_buckets = min(32, max(16, int(_FILTER_BITS * m).bit_length()))
        if len(buffers.flags) < (1 << log2_buckets) >> 5:
            buffers.flags = np.empty((1 << log2_buckets) >> 5, dtype=np.uint64)
        if len(buffers.hits) < m:
            buffers.hits = np.empty(max(m, len(buffers.hits) + len(buffers.hits) // 4), dtype=np.uint32)
        at, filtered = reuse_candidates(all_lines, log2_buckets, m // 2, buffers.flags, buffers.hits)
        if filtered:
            sub, agent_at, rank_at = reuse_keys_at(all_lines, all_agent, rank, at, shift)
            buffers.sort(sub, shift)
            cur, prv, a_cur, a_prv, gap, own_gap, cont = reuse_pairs(sub, shift, at, agent_at, rank_at)
    if packed and not filtered:
        key = buffers.sort(reuse_keys(all_lines, shift), shift)
        # neighbours in sorted order with the same line: their keys differ only in the low (index) bits
        cur, prv, a_cur, a_prv, gap, own_gap, cont = reuse_pairs(key, shift, _EMPTY_POS, all_agent, rank)
    elif not packed:
        order = np.lexsort((np.arange(m), all_lines))
        sorted_lines = all_lines[order]
        pair = np.flatnonzero(sorted_lines[1:] == sorted_lines[:-1])
        cur, prv = order[pair + 1], order[pair]
        cont = np.r_[False, pair[1:] == pair[:-1] + 1] if len(pair) else np.zeros(0, dtype=bool)
        a_cur, a_prv = all_agent[cur], all_agent[prv]
        gap = (cur - prv).astype(np.float64)
        own_gap = (rank[cur] - rank[prv]).astype(np.float64)

    def cold_in_line_order() -> np.ndarray:
        """The chunk's accesses with no earlier access in the window (positions >= head), in line order."""
        if packed:
            return new_in_line_order(key if key is not None else buffers.sort(reuse_keys(all_lines, shift), shift),
                                     shift, head)
        starts = order[np.r_[True, sorted_lines[1:] != sorted_lines[:-1]]] if m else order
        return starts[starts >= head]

    level = np.full(m, n_levels, dtype=np.int8)
    # each line's first access in the window (no earlier one to reuse)
    first = np.ones(m, dtype=bool)
    first[cur] = False
    if sets is not None:
        # the window's distinct lines (each at its first access), sampled once for every level
        sampler = _DistinctSample(all_lines, all_agent)
        first_lines, first_agent, rate = sampler.draw(first, m - len(cur))
    # The reuse-time distribution comes from a sample of the accesses (at most _SAMPLES; StatStack samples too):
    # reuse times of own reuses, censored times since the window began for the others. One access drawn in each
    # run of ``stride`` (seeded by the window's size): a regular stride aliases with threads interleaved in a
    # fixed order (8 threads round-robin and a stride of 64 sampled one thread only, so the other socket's L3 saw
    # no reuse at all and took every gap for its stack distance). The same accesses for every level.
    stride = max(1, m // _SAMPLES)
    pick = buffers.sample_positions(m)
    pick_rank, pick_agent = rank[pick], all_agent[pick]
    cur_slot = cur // stride  # the sample slot each reuse falls in, and whether it is that slot's access
    cur_picked = pick[np.minimum(cur_slot, len(pick) - 1)] == cur
    # (partition, own, stack, distinct lines) of the last level
    memo: tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, float] | None] | None = None
    invalid: dict[int, np.ndarray] = {}  # per level, the window positions whose line another instance's write took
    brings: np.ndarray | None = None  # the accesses that bring a line into their instance (see below)
    fresh: dict[int, np.ndarray] = {}  # per level, for the footprint rule (see _footprint_hits)
    long_shared = _EMPTY_POS  # long reuses of shared lines the count below cannot see (see reuse_times)
    taken_at: dict[int, np.ndarray] = {}  # per level, the window positions whose line another core's write took
    taken_stack: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # ... their stack distances without it, instances
    track = any(tracked.values())
    for lv in range(n_levels - 1, -1, -1):
        inst_of = agent_instance[lv]
        partition = inst_of - inst_of.min()
        n_inst = int(inst_of.max()) + 1
        same = memo is not None and np.array_equal(memo[0], partition)
        if memo is not None and same:
            # Same sharing as the level below (L1 and L2 are both per core): same stack distances.
            own, stack, distinct_lines = memo[1], memo[2], memo[3]
            invalid[lv] = invalid[lv + 1]
            if lv + 1 in taken_at:
                taken_at[lv] = taken_at[lv + 1]
                taken_stack[lv] = taken_stack[lv + 1]
            if lv + 1 in fresh:
                fresh[lv] = fresh[lv + 1]
        else:
            count = np.bincount(inst_of, weights=per_agent, minlength=n_inst)
            # Reuse time in this instance's own accesses (the others' accesses in between do not age its lines):
            # the agent's own gap scaled by the instance's accesses per access of that agent (1 for a private
            # cache of one thread), or, for a reuse of a line another agent of the instance touched last, the
            # stream gap times the instance's share of the stream.
            # Which reuses find the line in their own instance (``own``; the others are cold for it: first
            # touched by another instance, or taken by its write), their reuse times ``g`` (at least 1) and
            # instances, and the sample: reuse times of own reuses, censored times since the window began for
            # the others.
            ratio = count[inst_of] / np.maximum(per_agent, 1.0)  # per agent
            (own, g, i_own, own_reuses, sample, censored, sample_inst, invalid[lv], taken, taken_gap, taken_inst,
             long_cur) = reuse_times(
                a_cur, a_prv, gap, own_gap, inst_of, ratio, count / max(m, 1), cur_slot, cur_picked, pick_rank,
                pick_agent, n_inst, cur, prv, cont, rank, pass_write, head, head - CARRY_ACCESSES,
            )
            if lv == n_levels - 1:
                long_shared = long_cur
            if len(taken_gap):
                taken_at[lv] = invalid[lv][taken]
                # how far back in the instance's LRU stack each would have found its line, had the write not taken
                # it (no further than the distinct lines the instance touched in the window, as for its own reuses)
                t_stack = _stack_distance(taken_gap, taken_inst, sample, sample_inst, n_inst, censored)
                taken_stack[lv] = (np.minimum(t_stack, (count - own_reuses)[taken_inst]),
                                   taken_inst - inst_of.min())  # (instances as the partition numbers them)
            stack = _stack_distance(g, i_own, sample, sample_inst, n_inst, censored)
            if track and len(own) and not own.all():
                # first asks by an instance for a line another touched first (not those a write took back)
                first_ask = cur[~own]
                if len(invalid[lv]):
                    first_ask = first_ask[~np.isin(first_ask, invalid[lv])]
                fresh[lv] = first_ask[first_ask >= head] - head
            distinct_lines = None
            if sets is not None:
                # The lines each instance brings in: its first touches in the window. Where another instance
                # touched a line first, or took it by a write, that is more than the lines' first accesses.
                if len(own) and not own.all():
                    # (one mask for every level: caches nest, a reuse that misses a socket's L3 for another
                    # socket's write misses its cores' caches too, and the slower levels come first)
                    if brings is None:
                        brings = first.copy()
                    brings[cur[~own]] = True
                    distinct_lines = sampler.draw(brings, int(np.count_nonzero(brings)))
                else:
                    distinct_lines = (first_lines, first_agent, rate)
            # No more distinct lines can come between two accesses than the instance touched in the whole
            # window (its accesses less its own reuses): while a cache fills, its reuse-time distribution is
            # mostly censored and the estimate runs ahead of the lines there are (two sockets' L3s warming up
            # on 1.25x their size hit 60-67 % where LRU hits ~80 %).
            bound = count - own_reuses
        cap = np.full(n_inst, float(capacity_lines[lv]))
        table = None
        if sets is not None and distinct_lines is not None:
            lo = int(inst_of.min())
            n_sets = int(sets[lv])
            ways = max(1, int(capacity_lines[lv]) // n_sets)
            cap[lo:], table = _set_limited_capacity(
                distinct_lines[0], partition[distinct_lines[1]], n_inst - lo, n_sets, ways, distinct_lines[2],
            )
        if table is None and sets is not None and distinct_lines is not None and len(stack):
            # The lines were sampled (too many to count): where many reuses fall near the capacity, which is where a
            # line's own set decides (a cyclic walk just over a core complex's L3), count them all after all
            near = int(np.count_nonzero((stack >= 0.5 * cap[lo:].min()) & (stack < 2.0 * cap[lo:].max())))
            if near >= max(_NEAR_REUSES_MIN, _NEAR_REUSES_SHARE * m):
                mask = brings if brings is not None and len(own) and not own.all() else first
                pos = np.flatnonzero(mask)
                counted, _, per_set_all = set_counts(all_lines[pos], partition[all_agent[pos]], n_inst - lo, n_sets)
                table = (per_set_all, counted)
        # each reuse against its own set's occupancy where every distinct line of the window was counted (a cyclic
        # walk just over a level keeps the sets that hold no more than their ways, as LRU does), else the capacity
        per_set, totals = table if table is not None else (_NO_COUNTS, _NO_TOTALS)
        level_hits(stack, own, a_cur, cur, inst_of, np.full(n_inst, np.inf) if same else bound, cap, level, lv,
                   all_lines, per_set, totals, lo if table is not None else 0, n_sets if table is not None else 1,
                   ways if table is not None else 1)
        if lv == 0 and 0 in taken_at:
            # a coherence miss is one that would have hit the first level had no other core written the line (exact
            # mode's shadow of that level without invalidations): the taken reuses whose own stack distance fits it
            t_stack, t_part = taken_stack[0]
            taken_at[0] = taken_at[0][t_stack < cap[t_part + inst_of.min()]]
        memo = (partition, own, stack, distinct_lines)
    seen = _footprint_hits(state.seen, lines, agent, head, level, agent_instance, cold_in_line_order, first[head:],
                           tracked,
                           capacity_lines, sets, invalid, None if write is None or not len(pass_write) else write,
                           fresh)
    owed = None
    if write_backs and len(all_write) == m and all_write[head:].any():
        # a written line stays dirty in the caches of its writer's last-level instance (threads of one cpu share
        # all of them; another core of the instance that reads it leaves it dirty in their shared level), as exact
        # mode's dirty ways have it: the chains follow last-level instances, not agents (threads)
        owed = write_back_flags(cur, prv, agent_instance[-1][all_agent], all_write, level, n_levels, head)
    long_hits = -1
    if head > CARRY_ACCESSES:  # hits whose previous access only the longer carry held
        # only this chunk's accesses (cur >= head): a reuse inside the carried head was counted by its own chunk
        long_hits = int(np.count_nonzero((cur >= head) & (prv < head - CARRY_ACCESSES) & (level[cur] < n_levels)))
        long_hits += int(np.count_nonzero(level[long_shared] < n_levels))
    if long_pays_at is not None and 0 <= long_hits < long_pays_at and keep > CARRY_ACCESSES:
        # The long carry was measured not to pay: the next window need not be that long either.
        keep = CARRY_ACCESSES  # (fewer than ``keep``, so fewer than the window's accesses)
        kept_counts = np.bincount(all_agent[m - keep :], minlength=n_agents)
    kept_agent = all_agent[m - keep :].copy()
    # Ranks within the kept tail: drop each agent's accesses before it.
    dropped = (per_agent_n - kept_counts).astype(np.int32)
    # The stream accesses that span HORIZON_CAPACITIES x each instance's capacity in its own accesses: a
    # socket's L3 sees half the stream of a two-socket run, so it needs twice the stream to see as far.
    horizon = 0
    for lv in range(n_levels):
        share = np.bincount(agent_instance[lv], weights=new_counts.astype(np.float64)) / max(n, 1)
        used = share > 0
        if used.any():
            horizon = max(horizon, int(HORIZON_CAPACITIES * float(capacity_lines[lv]) / float(share[used].min())))
    new_state = EpochCacheState(
        all_lines[m - keep :].copy(), kept_agent, rank[m - keep :] - dropped[kept_agent], long_hits, kept_counts,
        seen, horizon, buffers, _kept_writes(all_write, m - keep),
    )
    new_state.write_backs = owed
    lost = taken_at.get(0, _EMPTY_POS)
    lost = lost[lost >= head] - head
    if len(lost):
        new_state.coherence_misses = np.bincount(agent[lost], minlength=n_agents)
    if len(pass_write):
        new_state.c2c_holder = _c2c_holders(
            cur, prv, cont, a_cur, a_prv, all_agent, agent_instance, capacity_lines, pass_write, head, n
        )
    return level[head:], new_state
