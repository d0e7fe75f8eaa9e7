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
levels (tests compare them); an approximation for set conflicts, for lines shared between threads (a line last
touched by another core counts as a hit only in a cache both share) and across the carried horizon of
``CARRY_ACCESSES`` accesses (a longer reuse is a miss).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numasim.timing.model import Calibration
from numasim.topology.model import CacheScope, Machine

from ._feed_kernel import reuse_keys, reuse_pairs

__all__ = [
    "CacheLevelSpec",
    "cache_levels",
    "instance_keys",
    "LRUCache",
    "EpochCacheState",
    "estimate_levels",
]


@dataclass(frozen=True)
class CacheLevelSpec:
    name: str
    size_bytes: int
    latency_ns: float
    scope: CacheScope
    line_bytes: int
    associativity: int

    @property
    def lines(self) -> int:
        return max(1, self.size_bytes // self.line_bytes)

    @property
    def sets(self) -> int:
        return max(1, self.lines // self.associativity)


def cache_levels(machine: Machine, calibration: Calibration) -> list[CacheLevelSpec]:
    """The calibration's cache levels, fastest first."""
    assoc = {c.name: c.associativity for c in machine.caches}
    levels = [
        CacheLevelSpec(
            c.name, c.size_bytes, c.latency_ns, CacheScope(c.scope), c.line_bytes, assoc.get(c.name, 8)
        )
        for c in calibration.caches
    ]
    return sorted(levels, key=lambda c: c.latency_ns)


def instance_keys(machine: Machine, level: CacheLevelSpec, cpus: list[int]) -> list[tuple[object, ...]]:
    """The cache instance each cpu of ``cpus`` uses at ``level`` (cpus with equal keys share it)."""
    node_of = machine.cpu_to_node
    keys: list[tuple[object, ...]] = []
    for cpu in cpus:
        node = machine.node(node_of[cpu])
        if level.scope == CacheScope.CORE:
            keys.append(("cpu", cpu))
        elif level.scope == CacheScope.DIE and node.die is not None:
            keys.append(("die", node.socket, node.die))
        elif level.scope in (CacheScope.DIE, CacheScope.SOCKET) and node.socket is not None:
            keys.append(("socket", node.socket))
        else:
            keys.append(("node", node.id))
    return keys


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
) -> np.ndarray:
    """Expected LRU stack distance of each reuse from the reuse-time distribution of its cache instance.

    StatStack's relation (Eklov and Hagersten, ISPASS 2010): the number of distinct lines touched during a reuse
    time ``g`` is ``D(g) = integral_0^g S(t) dt``, ``S(t)`` being the fraction of the instance's accesses whose
    reuse time exceeds ``t``. ``sample_time`` holds one reuse time per access of the window: the real one for
    reuses, and for cold accesses (no earlier access in the window) the time since the window began, a
    *censored* sample that only says "longer than this". ``S`` is taken from a histogram with 8 bins per octave
    (one ``bincount`` for all instances).
    """
    if len(reuse_time) == 0:
        return np.zeros(0)
    nb = _BINS_PER_OCTAVE * _OCTAVES

    def bins(t: np.ndarray) -> np.ndarray:
        return np.clip((np.log2(np.maximum(t, 1.0)) * _BINS_PER_OCTAVE).astype(np.int64), 0, nb - 1)

    hist = np.bincount(sample_instance * nb + bins(sample_time), minlength=n_inst * nb).reshape(n_inst, nb)
    total = np.maximum(hist.sum(axis=1), 1).astype(np.float64)
    # fraction of the samples beyond the lower edge of each bin (censored ones included up to their time)
    beyond = total[:, None] - np.cumsum(hist, axis=1) + hist
    surv = beyond / total[:, None]
    edges = 2.0 ** (np.arange(nb + 1) / _BINS_PER_OCTAVE)
    width = np.diff(edges)
    surv_next = np.concatenate([surv[:, 1:], np.zeros((n_inst, 1))], axis=1)
    area = 0.5 * (surv + surv_next) * width[None, :]
    d_lo = 1.0 + np.concatenate([np.zeros((n_inst, 1)), np.cumsum(area, axis=1)[:, :-1]], axis=1)
    b = bins(reuse_time)
    frac = np.clip((reuse_time - edges[b]) / width[b], 0.0, 1.0)
    return d_lo[instance, b] + frac * area[instance, b]


@dataclass
class EpochCacheState:
    """The tail of the previous chunk carried into the next reuse-distance estimate.

    ``rank`` is each carried access's rank among the carried accesses of its agent (0, 1, ...), kept so the
    next estimate need not sort the tail by agent again.
    """

    lines: np.ndarray
    agent: np.ndarray
    rank: np.ndarray

    @classmethod
    def empty(cls) -> EpochCacheState:
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))


CARRY_ACCESSES = 1 << 18
"""Accesses of the previous chunk kept to find reuses across a chunk boundary."""


def estimate_levels(
    lines: np.ndarray,
    agent: np.ndarray,
    agent_instance: np.ndarray,
    capacity_lines: np.ndarray,
    state: EpochCacheState,
    agent_order: np.ndarray | None = None,
    agent_rank: np.ndarray | None = None,
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
    """
    n_levels = len(capacity_lines)
    n = len(lines)
    if n_levels == 0:
        return np.full(n, 0, dtype=np.int8), state
    all_lines = np.concatenate([state.lines, lines]) if len(state.lines) else lines
    all_agent = np.concatenate([state.agent, agent]) if len(state.agent) else agent
    m = len(all_lines)
    head = m - n
    shift = max(1, int(m).bit_length())
    # Reuses: each access whose line occurred before (``cur``) and that previous occurrence (``prv``).
    if m and int(all_lines.max()) < (1 << (63 - shift)):
        key = reuse_keys(all_lines, shift)
        key.sort()  # in place: no second copy of the keys
        # neighbours in sorted order with the same line: their keys differ only in the low (index) bits
        cur, prv = reuse_pairs(key, shift)
    else:
        order = np.lexsort((np.arange(m), all_lines))
        sorted_lines = all_lines[order]
        pair = np.flatnonzero(sorted_lines[1:] == sorted_lines[:-1])
        cur, prv = order[pair + 1], order[pair]
    gap = (cur - prv).astype(np.float64)
    level = np.full(m, n_levels, dtype=np.int8)
    n_agents = agent_instance.shape[1]
    carry_counts = np.bincount(state.agent, minlength=n_agents)
    new_counts = np.bincount(agent, minlength=n_agents)
    per_agent_n = carry_counts + new_counts
    per_agent = per_agent_n.astype(np.float64)
    a_cur, a_prv = all_agent[cur], all_agent[prv]
    # Each access's rank among its own agent's accesses: a reuse by the same agent then counts exactly how many
    # of that agent's accesses lie in between, whatever the interleaving of agents in the stream. The carried
    # tail's ranks come with it; the chunk's follow them, from one stable sort of the chunk by agent.
    if agent_rank is not None:
        rank_new = agent_rank + carry_counts.astype(np.int32)[agent]
    else:
        if agent_order is None:
            agent_order = np.argsort(agent.astype(np.uint8) if n_agents < 256 else agent, kind="stable")
        starts = np.r_[0, np.cumsum(new_counts)[:-1]] - carry_counts
        rank_new = np.empty(n, dtype=np.int32)
        rank_new[agent_order] = np.arange(n, dtype=np.int32) - np.repeat(starts.astype(np.int32), new_counts)
    rank = np.concatenate([state.rank, rank_new]) if len(state.rank) else rank_new
    same_agent = a_cur == a_prv
    own_gap = (rank[cur] - rank[prv]).astype(np.float64)
    memo: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (partition, own, stack) of the last level
    for lv in range(n_levels - 1, -1, -1):
        inst_of = agent_instance[lv]
        partition = inst_of - inst_of.min()
        if memo is not None and np.array_equal(memo[0], partition):
            # Same sharing as the level below (L1 and L2 are both per core): same stack distances.
            own, stack = memo[1], memo[2]
            hit = np.zeros(len(cur), dtype=bool)
            hit[own] = stack < capacity_lines[lv]
            level[cur[hit]] = lv
            continue
        n_inst = int(inst_of.max()) + 1
        count = np.bincount(inst_of, weights=per_agent, minlength=n_inst)
        i_cur = inst_of[a_cur]
        own = i_cur == inst_of[a_prv]  # reused by the same cache instance (else: cold for it)
        # Reuse time in this instance's own accesses (the others' accesses in between do not age its lines):
        # the agent's own gap scaled by the instance's accesses per access of that agent (1 for a private
        # cache of one thread), or, for a line last touched by another agent, the stream gap times the
        # instance's share of the stream.
        ratio = count[inst_of] / np.maximum(per_agent, 1.0)  # per agent
        g_all = np.where(same_agent, own_gap * ratio[a_cur], gap * (count / max(m, 1))[i_cur])
        g = np.maximum(g_all[own], 1.0)
        # The reuse-time distribution from a regular sample of the accesses (at most _SAMPLES; StatStack
        # samples too): reuse times of own reuses, censored times since the window began for the others.
        stride = max(1, m // _SAMPLES)
        pick = np.arange(0, m, stride)
        sample = rank[pick] * ratio[all_agent[pick]]
        reused = np.full(len(pick), np.nan)
        cur_own = cur[own]
        picked = cur_own % stride == 0
        reused[cur_own[picked] // stride] = g[picked]
        sample = np.where(np.isnan(reused), sample, reused)
        stack = _stack_distance(g, i_cur[own], sample, inst_of[all_agent[pick]], n_inst)
        hit = np.zeros(len(cur), dtype=bool)
        hit[own] = stack < capacity_lines[lv]
        level[cur[hit]] = lv
        memo = (partition, own, stack)
    keep = min(m, CARRY_ACCESSES)
    kept_agent = all_agent[m - keep :].copy()
    # Ranks within the kept tail: drop each agent's accesses before it.
    dropped = (per_agent_n - np.bincount(kept_agent, minlength=n_agents)).astype(np.int32)
    new_state = EpochCacheState(
        all_lines[m - keep :].copy(), kept_agent, rank[m - keep :] - dropped[kept_agent]
    )
    return level[head:], new_state
