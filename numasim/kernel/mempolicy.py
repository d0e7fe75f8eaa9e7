"""Linux memory policies: modes, flags, validation, node selection, rebinding, ``mpol_to_str``.

A re-implementation of ``mm/mempolicy.c`` and ``include/uapi/linux/mempolicy.h`` (Linux 6.1 .. 6.12, the
differences flagged **[VER]** in ``kernel_spec.md`` section 5 are selected by the kernel version string).
Names follow the kernel (``sanitize_mpol_flags``, ``mpol_new``, ``mpol_set_nodemask``, ``policy_nodemask``,
``interleave_nid``, ``weighted_interleave_nid``, ``mpol_rebind_policy``, ``mpol_to_str``, ``mpol_misplaced``)
so that the code can be read beside mm/mempolicy.c. Nodemasks are ``frozenset[int]`` of node ids.

Everything here is pure: functions take the state they need (the task's ``mems_allowed``, the set of nodes
with memory, the kernel version) and either return a value or raise :class:`~numasim.kernel.errno.KernelErrno`.
Per-page work (interleave targets of a whole fault range) is vectorised with numpy.

Examples
--------
>>> pol = mpol_new(MPOL_INTERLEAVE, 0, {0, 1, 2}, mems_allowed={0, 1, 2}, memory_nodes={0, 1, 2})
>>> mpol_to_str(pol)
'interleave:0-2'
>>> interleave_nid_array(pol, np.array([0, 1, 2, 3]), version="6.12").tolist()
[0, 1, 2, 0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from numasim.kernel.errno import KernelErrno
from numasim.kernel.version import KernelVersion, parse_version
from numasim.topology.cpulist import format_cpulist, parse_cpulist

__all__ = [
    "MPOL_DEFAULT",
    "MPOL_PREFERRED",
    "MPOL_BIND",
    "MPOL_INTERLEAVE",
    "MPOL_LOCAL",
    "MPOL_PREFERRED_MANY",
    "MPOL_WEIGHTED_INTERLEAVE",
    "MPOL_F_STATIC_NODES",
    "MPOL_F_RELATIVE_NODES",
    "MPOL_F_NUMA_BALANCING",
    "MPOL_MODE_FLAGS",
    "MPOL_F_NODE",
    "MPOL_F_ADDR",
    "MPOL_F_MEMS_ALLOWED",
    "MPOL_MF_STRICT",
    "MPOL_MF_MOVE",
    "MPOL_MF_MOVE_ALL",
    "MPOL_MF_LAZY",
    "MPOL_MF_VALID",
    "MPOL_F_SHARED",
    "MPOL_F_MOF",
    "MPOL_F_MORON",
    "MAX_NUMNODES",
    "NUMA_NO_NODE",
    "MODE_NAMES",
    "KernelVersion",
    "parse_version",
    "mpol_max",
    "MemPolicy",
    "sanitize_mpol_flags",
    "get_nodes",
    "mpol_new",
    "next_node_in",
    "nodes_fold",
    "nodes_onto",
    "mpol_relative_nodemask",
    "node_remap",
    "nodes_remap",
    "interleave_nodes",
    "interleave_nodes_bulk",
    "bulk_interleave_split",
    "interleave_nid",
    "interleave_nid_array",
    "WeightedInterleaveWeights",
    "weighted_interleave_nodes",
    "weighted_interleave_nodes_bulk",
    "weighted_interleave_nid",
    "weighted_interleave_nid_array",
    "apply_policy_zone",
    "policy_nodemask",
    "mpol_rebind_policy",
    "mpol_to_str",
    "mpol_parse_str",
    "mpol_misplaced",
    "default_task_policy",
    "policy_report",
    "PolicyReport",
]

# --- uapi constants (include/uapi/linux/mempolicy.h) ----------------------------------------------------
MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3
MPOL_LOCAL = 4
MPOL_PREFERRED_MANY = 5
MPOL_WEIGHTED_INTERLEAVE = 6

MPOL_F_STATIC_NODES = 1 << 15
MPOL_F_RELATIVE_NODES = 1 << 14
MPOL_F_NUMA_BALANCING = 1 << 13
MPOL_MODE_FLAGS = MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING

# get_mempolicy(2) flags
MPOL_F_NODE = 1 << 0
MPOL_F_ADDR = 1 << 1
MPOL_F_MEMS_ALLOWED = 1 << 2

# mbind(2) flags
MPOL_MF_STRICT = 1 << 0
MPOL_MF_MOVE = 1 << 1
MPOL_MF_MOVE_ALL = 1 << 2
MPOL_MF_LAZY = 1 << 3
MPOL_MF_VALID = MPOL_MF_STRICT | MPOL_MF_MOVE | MPOL_MF_MOVE_ALL

# internal policy flags (include/linux/mempolicy.h area of uapi: "internal flags start here")
MPOL_F_SHARED = 1 << 0
MPOL_F_MOF = 1 << 3
MPOL_F_MORON = 1 << 4

MAX_NUMNODES = 1 << 10
"""``1 << CONFIG_NODES_SHIFT`` of x86_64 distribution kernels."""
NUMA_NO_NODE = -1
PAGE_SIZE_BITS = 4096 * 8

MODE_NAMES: dict[int, str] = {
    MPOL_DEFAULT: "default",
    MPOL_PREFERRED: "prefer",
    MPOL_BIND: "bind",
    MPOL_INTERLEAVE: "interleave",
    MPOL_WEIGHTED_INTERLEAVE: "weighted interleave",
    MPOL_LOCAL: "local",
    MPOL_PREFERRED_MANY: "prefer (many)",
}
"""``policy_modes[]`` of mm/mempolicy.c: the names ``mpol_to_str`` prints."""

Nodes = frozenset[int]


def mpol_max(version: str | KernelVersion) -> int:
    """``MPOL_MAX``: 7 from 6.9 (weighted interleave), 6 from 5.15 (preferred-many), 5 before."""
    v = parse_version(version)
    if v >= (6, 9):
        return 7
    if v >= (5, 15):
        return 6
    return 5


@dataclass(frozen=True)
class MemPolicy:
    """``struct mempolicy``: a mode, its flags, the effective nodes and what rebinding needs.

    Attributes
    ----------
    mode : int
        ``MPOL_*`` mode (never ``MPOL_DEFAULT``: the default policy is "no policy", ``None``).
    flags : int
        User mode flags (``MPOL_F_STATIC_NODES``, ...) plus internal ``MPOL_F_MOF`` / ``MPOL_F_MORON``.
    nodes : frozenset of int
        The effective nodes (``pol->nodes``); empty for ``MPOL_LOCAL``.
    user_nodemask : frozenset of int
        The nodes as the user gave them, kept only with STATIC or RELATIVE (``w.user_nodemask``).
    cpuset_mems_allowed : frozenset of int
        The task's ``mems_allowed`` when the policy was made, kept without those flags (``w.cpuset_mems_allowed``).
    home_node : int
        ``set_mempolicy_home_node`` target, ``NUMA_NO_NODE`` if unset.
    """

    mode: int
    flags: int = 0
    nodes: Nodes = frozenset()
    user_nodemask: Nodes = frozenset()
    cpuset_mems_allowed: Nodes = frozenset()
    home_node: int = NUMA_NO_NODE

    @property
    def mode_flags(self) -> int:
        return self.flags & MPOL_MODE_FLAGS

    @property
    def stores_user_nodemask(self) -> bool:
        """``mpol_store_user_nodemask``: STATIC or RELATIVE."""
        return bool(self.flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES))

    @property
    def name(self) -> str:
        return MODE_NAMES[self.mode]


def default_task_policy(cpu_node: int) -> MemPolicy:
    """``preferred_node_policy[cpu_node]``: what a task without a policy really uses (MOF|MORON set)."""
    return MemPolicy(MPOL_PREFERRED, MPOL_F_MOF | MPOL_F_MORON, frozenset({cpu_node}))


# --- syscall argument checks ---------------------------------------------------------------------------
def sanitize_mpol_flags(mode_arg: int, version: str | KernelVersion = "6.12") -> tuple[int, int]:
    """Split the ``mode`` argument into ``(mode, flags)`` and check it (shared by set_mempolicy and mbind).

    Raises ``EINVAL`` for a mode >= ``MPOL_MAX``, for STATIC together with RELATIVE, and for
    ``MPOL_F_NUMA_BALANCING`` on a mode other than BIND (and PREFERRED_MANY from 6.10). NUMA_BALANCING adds the
    internal ``MPOL_F_MOF | MPOL_F_MORON``.

    Examples
    --------
    >>> sanitize_mpol_flags(MPOL_BIND | MPOL_F_STATIC_NODES)
    (2, 32768)
    """
    v = parse_version(version)
    flags = mode_arg & MPOL_MODE_FLAGS
    mode = mode_arg & ~MPOL_MODE_FLAGS
    if mode < 0 or mode >= mpol_max(v):
        raise KernelErrno("EINVAL", f"mode {mode} >= MPOL_MAX ({mpol_max(v)}) on {v[0]}.{v[1]}")
    if (flags & MPOL_F_STATIC_NODES) and (flags & MPOL_F_RELATIVE_NODES):
        raise KernelErrno("EINVAL", "MPOL_F_STATIC_NODES and MPOL_F_RELATIVE_NODES together")
    if flags & MPOL_F_NUMA_BALANCING:
        allowed = {MPOL_BIND, MPOL_PREFERRED_MANY} if v >= (6, 10) else {MPOL_BIND}
        if mode not in allowed:
            raise KernelErrno("EINVAL", f"MPOL_F_NUMA_BALANCING with {MODE_NAMES[mode]!r}")
        flags |= MPOL_F_MOF | MPOL_F_MORON
    return mode, flags


def get_nodes(nodemask: Iterable[int] | None, maxnode: int) -> Nodes:
    """The nodemask the kernel reads from a user bitmap of ``maxnode`` bits (``get_nodes``).

    The kernel decrements ``maxnode`` first and reads bits ``0 .. maxnode-2`` (the classic off-by-one):
    higher bits are ignored. ``maxnode`` is unsigned, so ``maxnode == 0`` with a mask wraps and is EINVAL;
    a ``None`` (NULL) mask or ``maxnode == 1`` gives the empty set. More than ``PAGE_SIZE * 8`` bits, or a
    set bit at or above ``MAX_NUMNODES``, is EINVAL.

    Examples
    --------
    >>> sorted(get_nodes({0, 1, 2}, 3))      # bit 2 is beyond maxnode-1 = 2 bits
    [0, 1]
    """
    if nodemask is None:
        return frozenset()
    bits = (maxnode - 1) % (1 << 64)
    if bits == 0:
        return frozenset()
    if bits > PAGE_SIZE_BITS:
        raise KernelErrno("EINVAL", f"maxnode {maxnode} exceeds PAGE_SIZE*8+1 bits")
    nodes = frozenset(int(n) for n in nodemask)
    if any(n < 0 for n in nodes):
        raise KernelErrno("EINVAL", f"negative node id in nodemask {sorted(nodes)}")
    kept = frozenset(n for n in nodes if n < bits)
    if any(n >= MAX_NUMNODES for n in kept):
        raise KernelErrno("EINVAL", f"node >= MAX_NUMNODES ({MAX_NUMNODES}) in nodemask")
    return kept


# --- nodemask helpers (include/linux/nodemask.h, lib/bitmap.c) ------------------------------------------
def next_node_in(node: int, mask: Iterable[int]) -> int:
    """Smallest node of ``mask`` above ``node``, wrapping to the first; ``MAX_NUMNODES`` if empty."""
    ordered = sorted(mask)
    if not ordered:
        return MAX_NUMNODES
    for n in ordered:
        if n > node:
            return n
    return ordered[0]


def nodes_fold(orig: Iterable[int], size: int) -> Nodes:
    """``bitmap_fold``: bit ``b`` -> ``b mod size``."""
    if size <= 0:
        return frozenset()
    return frozenset(b % size for b in orig)


def nodes_onto(orig: Iterable[int], relmap: Iterable[int]) -> Nodes:
    """``bitmap_onto``: bit ``m`` of ``orig`` -> the ``m``-th (0-based) set bit of ``relmap`` (dropped if none)."""
    rel = sorted(relmap)
    return frozenset(rel[m] for m in orig if 0 <= m < len(rel))


def mpol_relative_nodemask(orig: Iterable[int], rel: Iterable[int]) -> Nodes:
    """``mpol_relative_nodemask``: ``nodes_onto(nodes_fold(orig, weight(rel)), rel)``."""
    rel = frozenset(rel)
    return nodes_onto(nodes_fold(orig, len(rel)), rel)


def node_remap(node: int, old: Iterable[int], new: Iterable[int]) -> int:
    """``bitmap_bitremap``: the ordinal of ``node`` in ``old`` -> the same ordinal (mod weight) in ``new``."""
    old_sorted, new_sorted = sorted(old), sorted(new)
    if node not in old_sorted or not new_sorted:
        return node
    return new_sorted[old_sorted.index(node) % len(new_sorted)]


def nodes_remap(src: Iterable[int], old: Iterable[int], new: Iterable[int]) -> Nodes:
    """``bitmap_remap`` applied to every node of ``src``."""
    old_f, new_f = frozenset(old), frozenset(new)
    return frozenset(node_remap(b, old_f, new_f) for b in src)


# --- mpol_new + mpol_set_nodemask ------------------------------------------------------------------------
def mpol_new(
    mode: int,
    flags: int,
    nodes: Iterable[int],
    *,
    mems_allowed: Iterable[int],
    memory_nodes: Iterable[int],
) -> MemPolicy | None:
    """Build and validate a policy: ``mpol_new`` followed by ``mpol_set_nodemask`` (kernel_spec 5.5).

    Parameters
    ----------
    mode, flags : int
        As returned by :func:`sanitize_mpol_flags`.
    nodes : iterable of int
        The user's nodes (from :func:`get_nodes`).
    mems_allowed : iterable of int
        The calling task's cpuset ``mems_allowed``.
    memory_nodes : iterable of int
        ``node_states[N_MEMORY]``: nodes that have memory (memoryless nodes are silently dropped).

    Returns
    -------
    MemPolicy or None
        ``None`` for ``MPOL_DEFAULT`` (the policy is removed).

    Raises
    ------
    KernelErrno
        ``EINVAL`` on every rule of kernel_spec 5.5.

    Examples
    --------
    >>> mpol_new(MPOL_PREFERRED, 0, {2, 3}, mems_allowed={0, 1, 2, 3}, memory_nodes={0, 1, 2, 3}).nodes
    frozenset({2})
    >>> mpol_new(MPOL_PREFERRED, 0, set(), mems_allowed={0}, memory_nodes={0}).mode == MPOL_LOCAL
    True
    """
    user = frozenset(nodes)
    static_or_relative = bool(flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES))
    if mode == MPOL_DEFAULT:
        if user:
            raise KernelErrno("EINVAL", "MPOL_DEFAULT with a non-empty nodemask")
        return None
    if mode == MPOL_PREFERRED:
        if not user:
            if static_or_relative:
                raise KernelErrno("EINVAL", "empty MPOL_PREFERRED with STATIC or RELATIVE")
            mode = MPOL_LOCAL
    elif mode == MPOL_LOCAL:
        if user or static_or_relative:
            raise KernelErrno("EINVAL", "MPOL_LOCAL with a nodemask or STATIC/RELATIVE")
    elif not user:
        raise KernelErrno("EINVAL", f"{MODE_NAMES[mode]!r} with an empty nodemask")

    if mode == MPOL_LOCAL:
        return MemPolicy(MPOL_LOCAL, flags)

    allowed_cpuset = frozenset(mems_allowed)
    allowed = allowed_cpuset & frozenset(memory_nodes)
    eff = mpol_relative_nodemask(user, allowed) if flags & MPOL_F_RELATIVE_NODES else user & allowed
    if not eff:
        raise KernelErrno(
            "EINVAL", f"no usable node left in {sorted(user)} (allowed memory nodes {sorted(allowed)})"
        )
    pol_nodes = frozenset({min(eff)}) if mode == MPOL_PREFERRED else eff
    if static_or_relative:
        return MemPolicy(mode, flags, pol_nodes, user_nodemask=user)
    return MemPolicy(mode, flags, pol_nodes, cpuset_mems_allowed=allowed_cpuset)


# --- interleave -----------------------------------------------------------------------------------------
def interleave_nodes(pol: MemPolicy, il_prev: int) -> int:
    """Per-task round robin (no VMA): the next node after ``il_prev``; the caller stores it as ``il_prev``."""
    return next_node_in(il_prev, pol.nodes)


def interleave_nodes_bulk(pol: MemPolicy, il_prev: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` consecutive :func:`interleave_nodes` results and the final ``il_prev``."""
    ordered = np.array(sorted(pol.nodes), dtype=np.int64)
    if count <= 0 or ordered.size == 0:
        return np.empty(0, dtype=np.int64), il_prev
    start = int(np.searchsorted(ordered, next_node_in(il_prev, pol.nodes)))
    out = ordered[(start + np.arange(count)) % ordered.size]
    return out, int(out[-1])


def bulk_interleave_split(pol: MemPolicy, il_prev: int, nr_pages: int) -> tuple[dict[int, int], int]:
    """``alloc_pages_bulk_interleave`` (vmalloc): pages per node and the final ``il_prev``.

    Every node gets ``nr // nnodes``; the first ``nr % nnodes`` nodes in round-robin order after ``il_prev``
    get one more. ``interleave_nodes`` runs once per node, so ``il_prev`` advances by one full cycle (unlike
    page-by-page allocation).

    Examples
    --------
    >>> bulk_interleave_split(MemPolicy(MPOL_INTERLEAVE, 0, frozenset({0, 1, 2})), 0, 10)
    ({1: 4, 2: 3, 0: 3}, 0)
    """
    order, last = interleave_nodes_bulk(pol, il_prev, len(pol.nodes))
    nnodes = len(pol.nodes)
    if nnodes == 0:
        return {}, il_prev
    base, delta = divmod(nr_pages, nnodes)
    return {int(n): base + (1 if i < delta else 0) for i, n in enumerate(order.tolist())}, last


def _truncates_ilx(version: str | KernelVersion) -> bool:
    # <6.7 offset_il_node() did "(unsigned int)n % nnodes"; 6.7 (ilx rework) computes on the full pgoff_t.
    return parse_version(version) < (6, 7)


def interleave_nid(pol: MemPolicy, ilx: int, version: str | KernelVersion = "6.12") -> int:
    """Offset-based interleave target: the ``ilx % weight``-th node of the policy (VMA faults)."""
    return int(interleave_nid_array(pol, np.array([ilx], dtype=np.int64), version)[0])


def interleave_nid_array(pol: MemPolicy, ilx: np.ndarray, version: str | KernelVersion = "6.12") -> np.ndarray:
    """Vectorised :func:`interleave_nid` over an array of interleave indices.

    Before 6.7 the index is truncated to 32 bits first (``(u32)ilx % weight``), which the spec reports from a
    real kernel: with a non-power-of-two number of nodes, high addresses map to a different node.
    """
    ordered = np.array(sorted(pol.nodes), dtype=np.int64)
    idx = np.asarray(ilx, dtype=np.int64)
    if ordered.size == 0:
        raise ValueError("interleave over an empty nodemask")
    if _truncates_ilx(version):
        idx = idx & 0xFFFFFFFF
    return ordered[idx % ordered.size]


class WeightedInterleaveWeights:
    """``/sys/kernel/mm/mempolicy/weighted_interleave/nodeN``: one u8 weight per possible node.

    ``0`` (the initial value) means "system default", read back as 1 (6.9-6.15 behaviour).

    Examples
    --------
    >>> w = WeightedInterleaveWeights(possible_nodes=[0, 1])
    >>> w.write(1, "3\\n")
    >>> w.read(1), w.read(0)
    ('3\\n', '1\\n')
    >>> w.write(0, "256")
    Traceback (most recent call last):
    ...
    numasim.kernel.errno.KernelErrno: EINVAL: weight '256' is not a u8 (kstrtou8)
    """

    def __init__(self, possible_nodes: Iterable[int], weights: Mapping[int, int] | None = None) -> None:
        self._table: dict[int, int] = {int(n): 0 for n in possible_nodes}
        for n, w in (weights or {}).items():
            if n not in self._table:
                raise KeyError(f"no node {n} (possible nodes {sorted(self._table)})")
            if not 0 <= int(w) <= 255:
                raise ValueError(f"weight of node {n} = {w}: must be 0..255")
            self._table[n] = int(w)

    @property
    def nodes(self) -> list[int]:
        return sorted(self._table)

    def get_il_weight(self, node: int) -> int:
        """``get_il_weight``: the table entry, 1 if it is 0 (or the node is unknown)."""
        return self._table.get(node, 0) or 1

    def raw(self, node: int) -> int:
        return self._table[node]

    def read(self, node: int) -> str:
        """What ``cat .../weighted_interleave/nodeN`` prints."""
        if node not in self._table:
            raise KernelErrno("ENOENT", f"no file weighted_interleave/node{node}")
        return f"{self.get_il_weight(node)}\n"

    def write(self, node: int, text: str) -> None:
        """``node_store``: empty or "0" -> default; else ``kstrtou8(text, 0)`` or EINVAL."""
        if node not in self._table:
            raise KernelErrno("ENOENT", f"no file weighted_interleave/node{node}")
        if text in ("", "\n"):
            self._table[node] = 0
            return
        value = _kstrtoull(text)
        if value is None or value > 255:
            raise KernelErrno("EINVAL", f"weight {text!r} is not a u8 (kstrtou8)")
        self._table[node] = value

    def set(self, node: int, weight: int) -> None:
        """Set a weight directly (0..255)."""
        self.write(node, str(int(weight)))

    def weights_for(self, nodes: Iterable[int]) -> np.ndarray:
        return np.array([self.get_il_weight(n) for n in sorted(nodes)], dtype=np.int64)


def _kstrtoull(text: str) -> int | None:
    # lib/kstrtox.c: one trailing newline allowed, optional '+', base 0 (0x.. hex, 0.. octal, else decimal).
    s = text[:-1] if text.endswith("\n") else text
    if s.startswith("+"):
        s = s[1:]
    base = 10
    if s[:2].lower() == "0x":
        base, s = 16, s[2:]
    elif s.startswith("0") and len(s) > 1:
        base, s = 8, s[1:]
    if not s:
        return None
    try:
        if any(c in "+-_ \t" for c in s):
            return None
        return int(s, base)
    except ValueError:
        return None


def weighted_interleave_nodes(
    pol: MemPolicy, il_prev: int, il_weight: int, weights: WeightedInterleaveWeights
) -> tuple[int, int, int]:
    """Per-task weighted round robin: returns ``(node, new_il_prev, new_il_weight)``."""
    node = il_prev
    if il_weight == 0 or node not in pol.nodes:
        node = next_node_in(node, pol.nodes)
        il_prev = node
        il_weight = weights.get_il_weight(node)
    return node, il_prev, il_weight - 1


def weighted_interleave_nodes_bulk(
    pol: MemPolicy, il_prev: int, il_weight: int, weights: WeightedInterleaveWeights, count: int
) -> tuple[np.ndarray, int, int]:
    """``count`` consecutive :func:`weighted_interleave_nodes` results and the final ``(il_prev, il_weight)``.

    Same final state as page-by-page allocation (as ``alloc_pages_bulk_weighted_interleave`` guarantees).
    """
    if count <= 0:
        return np.empty(0, dtype=np.int64), il_prev, il_weight
    head = 0
    if il_weight > 0 and il_prev in pol.nodes:
        head = min(count, il_weight)
    first = np.full(head, il_prev, dtype=np.int64)
    rest = count - head
    if rest == 0:
        return first, il_prev, il_weight - head
    ordered = sorted(pol.nodes)
    start = ordered.index(next_node_in(il_prev, pol.nodes))
    cycle_nodes = ordered[start:] + ordered[:start]
    w = np.array([weights.get_il_weight(n) for n in cycle_nodes], dtype=np.int64)
    cycle = np.repeat(np.array(cycle_nodes, dtype=np.int64), w)
    run_end = np.repeat(np.cumsum(w), w)  # index one past the end of each position's run
    pos = np.arange(rest) % cycle.size
    out = np.concatenate([first, cycle[pos]])
    last = int(pos[-1])
    return out, int(cycle[last]), int(run_end[last] - last - 1)


def weighted_interleave_nid(
    pol: MemPolicy, ilx: int, weights: WeightedInterleaveWeights
) -> int:
    """Offset-based weighted interleave target (``weighted_interleave_nid``)."""
    return int(weighted_interleave_nid_array(pol, np.array([ilx], dtype=np.int64), weights)[0])


def weighted_interleave_nid_array(
    pol: MemPolicy, ilx: np.ndarray, weights: WeightedInterleaveWeights
) -> np.ndarray:
    """Vectorised :func:`weighted_interleave_nid`: ``t = ilx % total``, walk the nodes until ``t < w(node)``."""
    ordered = np.array(sorted(pol.nodes), dtype=np.int64)
    if ordered.size == 0:
        raise ValueError("weighted interleave over an empty nodemask")
    w = weights.weights_for(pol.nodes)
    cum = np.cumsum(w)
    t = np.asarray(ilx, dtype=np.int64) % int(cum[-1])
    return ordered[np.searchsorted(cum, t, side="right")]


# --- policy_nodemask (allocation time) ------------------------------------------------------------------
def apply_policy_zone(pol: MemPolicy, zone: int, *, policy_zone: int = 2, high_memory_nodes: Iterable[int] | None = None) -> bool:
    """``apply_policy_zone``: BIND masks apply only for ``gfp_zone >= policy_zone`` (MOVABLE if movable-only)."""
    dynamic = policy_zone
    if high_memory_nodes is not None and not (pol.nodes & frozenset(high_memory_nodes)):
        dynamic = 3  # ZONE_MOVABLE
    return zone >= dynamic


def policy_nodemask(
    pol: MemPolicy,
    cpu_node: int,
    *,
    ilx: int | None = None,
    il_prev: int = MAX_NUMNODES - 1,
    mems_allowed: Iterable[int] | None = None,
    gfp_zone: int = 3,
    policy_zone: int = 2,
    weights: WeightedInterleaveWeights | None = None,
    version: str | KernelVersion = "6.12",
) -> tuple[Nodes | None, int]:
    """``policy_nodemask``: the ``(nodemask, preferred nid)`` an allocation under ``pol`` uses (spec 5.6).

    ``ilx=None`` is ``NO_INTERLEAVE_INDEX`` (per-task interleave from ``il_prev``; weighted interleave then
    starts a new node, i.e. behaves as if ``il_weight == 0``; use :func:`weighted_interleave_nodes` for the
    stateful version).
    """
    nid = cpu_node
    if pol.mode == MPOL_PREFERRED:
        return None, min(pol.nodes)
    if pol.mode == MPOL_PREFERRED_MANY:
        return pol.nodes, (pol.home_node if pol.home_node != NUMA_NO_NODE else nid)
    if pol.mode == MPOL_BIND:
        mask: Nodes | None = None
        allowed = frozenset(mems_allowed) if mems_allowed is not None else pol.nodes
        if apply_policy_zone(pol, gfp_zone, policy_zone=policy_zone) and pol.nodes & allowed:
            mask = pol.nodes
        return mask, (pol.home_node if pol.home_node != NUMA_NO_NODE else nid)
    if pol.mode == MPOL_INTERLEAVE:
        return None, interleave_nodes(pol, il_prev) if ilx is None else interleave_nid(pol, ilx, version)
    if pol.mode == MPOL_WEIGHTED_INTERLEAVE:
        w = weights if weights is not None else WeightedInterleaveWeights(pol.nodes)
        if ilx is None:
            return None, weighted_interleave_nodes(pol, il_prev, 0, w)[0]
        return None, weighted_interleave_nid(pol, ilx, w)
    return None, nid  # MPOL_LOCAL


# --- cpuset rebinding (mpol_rebind_*) ---------------------------------------------------------------------
def mpol_rebind_policy(pol: MemPolicy | None, new_mems: Iterable[int]) -> MemPolicy | None:
    """``mpol_rebind_policy``: the policy after the task's cpuset mems became ``new_mems`` (spec 5.12).

    Examples
    --------
    >>> pol = MemPolicy(MPOL_BIND, 0, frozenset({0, 1}), cpuset_mems_allowed=frozenset({0, 1, 2, 3}))
    >>> sorted(mpol_rebind_policy(pol, {4, 5, 6, 7}).nodes)
    [4, 5]
    """
    new = frozenset(new_mems)
    if pol is None or pol.mode == MPOL_LOCAL:
        return pol
    if not pol.stores_user_nodemask and pol.cpuset_mems_allowed == new:
        return pol
    if pol.mode in (MPOL_PREFERRED, MPOL_PREFERRED_MANY):
        return replace(pol, cpuset_mems_allowed=new)
    if pol.flags & MPOL_F_STATIC_NODES:
        tmp = pol.user_nodemask & new
        cma = pol.cpuset_mems_allowed
    elif pol.flags & MPOL_F_RELATIVE_NODES:
        tmp = mpol_relative_nodemask(pol.user_nodemask, new)
        cma = pol.cpuset_mems_allowed
    else:
        tmp = nodes_remap(pol.nodes, pol.cpuset_mems_allowed, new)
        cma = new
    if not tmp:
        tmp = new
    return replace(pol, nodes=tmp, cpuset_mems_allowed=cma)


# --- mpol_to_str ------------------------------------------------------------------------------------------
def mpol_to_str(pol: MemPolicy | None) -> str:
    """``mpol_to_str``: ``<mode>[=<flags>][:<nodelist>]`` as in /proc/PID/numa_maps (spec 5.13).

    ``None`` (no policy) and the per-node default policy print as ``default``.

    Examples
    --------
    >>> mpol_to_str(MemPolicy(MPOL_BIND, MPOL_F_STATIC_NODES | MPOL_F_NUMA_BALANCING, frozenset({0, 1, 2, 3, 5})))
    'bind=static|balancing:0-3,5'
    """
    if pol is None or _is_default_policy(pol):
        return "default"
    out = MODE_NAMES[pol.mode]
    flags = pol.flags & MPOL_MODE_FLAGS
    if flags:
        out += "="
        if flags & MPOL_F_STATIC_NODES:
            out += "static"
        elif flags & MPOL_F_RELATIVE_NODES:
            out += "relative"
        if flags & MPOL_F_NUMA_BALANCING:
            if flags & (flags - 1):  # !is_power_of_2(): another flag was printed before
                out += "|"
            out += "balancing"
    nodes = pol.nodes if pol.mode not in (MPOL_DEFAULT, MPOL_LOCAL) else frozenset()
    if nodes:
        out += ":" + format_cpulist(sorted(nodes))
    return out


def mpol_parse_str(
    text: str, memory_nodes: Iterable[int], version: str | KernelVersion = "6.12"
) -> MemPolicy | None:
    """``mpol_parse_str``: the tmpfs ``mpol=`` mount option (``<mode>[=<flags>][:<nodelist>]``).

    ``prefer`` takes exactly one node number (none = local), ``interleave`` / ``weighted interleave`` default
    to every memory node, ``local`` and ``default`` forbid a nodelist, ``bind`` and ``prefer (many)`` need
    one; the nodes must all have memory; flags are ``static`` or ``relative``. Returns ``None`` for
    ``default``; anything else invalid raises EINVAL.

    Examples
    --------
    >>> mpol_to_str(mpol_parse_str("interleave=static:0-1", {0, 1, 2}))
    'interleave=static:0-1'
    >>> mpol_to_str(mpol_parse_str("interleave", {0, 1, 2}))
    'interleave:0-2'
    """
    memory = frozenset(memory_nodes)
    mode_text, _, nodelist = text.partition(":")
    has_nodelist = ":" in text
    mode_text, _, flags_text = mode_text.partition("=")
    has_flags = "=" in text.partition(":")[0]
    nodes: frozenset[int] = frozenset()
    if has_nodelist:
        try:
            nodes = frozenset(_parse_nodelist(nodelist))
        except ValueError:
            raise KernelErrno("EINVAL", f"mpol: bad nodelist {nodelist!r}") from None
        if not nodes <= memory:
            raise KernelErrno("EINVAL", f"mpol: nodes {sorted(nodes - memory)} have no memory")
    names = {MODE_NAMES[m]: m for m in range(mpol_max(version))}
    if mode_text not in names:
        raise KernelErrno("EINVAL", f"mpol: unknown mode {mode_text!r}")
    mode = names[mode_text]
    if mode == MPOL_PREFERRED and has_nodelist and (not nodelist.isdigit() or not nodes):
        raise KernelErrno("EINVAL", "mpol: prefer takes a single node number")
    if mode in (MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE) and not has_nodelist:
        nodes = memory
    if mode == MPOL_LOCAL and has_nodelist:
        raise KernelErrno("EINVAL", "mpol: local takes no nodelist")
    if mode == MPOL_DEFAULT:
        if has_nodelist:
            raise KernelErrno("EINVAL", "mpol: default takes no nodelist")
        return None
    if mode in (MPOL_BIND, MPOL_PREFERRED_MANY) and not has_nodelist:
        raise KernelErrno("EINVAL", f"mpol: {mode_text} needs a nodelist")
    flags = 0
    if has_flags:
        if flags_text == "static":
            flags = MPOL_F_STATIC_NODES
        elif flags_text == "relative":
            flags = MPOL_F_RELATIVE_NODES
        else:
            raise KernelErrno("EINVAL", f"mpol: unknown flag {flags_text!r}")
    # mpol_new's checks, without the cpuset step (tmpfs contextualises the policy later)
    if mode == MPOL_PREFERRED and not nodes:
        if flags:
            raise KernelErrno("EINVAL", "mpol: empty prefer with static/relative")
        return MemPolicy(MPOL_LOCAL, 0, frozenset(), user_nodemask=nodes)
    if mode == MPOL_LOCAL:
        if flags:
            raise KernelErrno("EINVAL", "mpol: local with static/relative")
        return MemPolicy(MPOL_LOCAL, 0, frozenset(), user_nodemask=nodes)
    if not nodes:
        raise KernelErrno("EINVAL", f"mpol: {mode_text} with an empty nodelist")
    kept = frozenset({min(nodes)}) if mode == MPOL_PREFERRED else nodes
    return MemPolicy(mode, flags, kept, user_nodemask=nodes)


def _parse_nodelist(text: str) -> list[int]:
    # bitmap_parselist as the kernel's mount option sees it: the kernel list format ("0-3,5", empty = no node),
    # numasim's one parser of it, without the blanks parse_cpulist forgives in files.
    if any(c.isspace() for c in text):
        raise ValueError(text)
    return parse_cpulist(text)


def _is_default_policy(pol: MemPolicy) -> bool:
    # preferred_node_policy[] entries are the only PREFERRED policies carrying MOF|MORON without the
    # NUMA_BALANCING user flag (user PREFERRED cannot take that flag).
    return (
        pol.mode == MPOL_PREFERRED
        and (pol.flags & (MPOL_F_MOF | MPOL_F_MORON)) == (MPOL_F_MOF | MPOL_F_MORON)
        and not pol.flags & MPOL_MODE_FLAGS
    )


# --- NUMA balancing -------------------------------------------------------------------------------------
def mpol_misplaced(
    pol: MemPolicy,
    page_nid: int,
    this_cpu_node: int,
    *,
    ilx: int = 0,
    first_in_zonelist: Callable[[int, Nodes], int] | None = None,
    should_numa_migrate_memory: Callable[[], bool] | None = None,
    weights: WeightedInterleaveWeights | None = None,
    version: str | KernelVersion = "6.12",
) -> int:
    """``mpol_misplaced``: the node a hinting fault should move the page to, or ``NUMA_NO_NODE`` (spec 7.3).

    Parameters
    ----------
    pol : MemPolicy
        The VMA's (or task's, or the per-node default) policy; nothing moves without ``MPOL_F_MOF``.
    page_nid, this_cpu_node : int
        Node of the page, and of the CPU taking the fault.
    first_in_zonelist : callable, optional
        ``(node, mask) -> nid``: first node of ``node``'s zonelist inside ``mask`` (BIND/PREFERRED_MANY
        without MORON); defaults to the lowest node of the mask.
    should_numa_migrate_memory : callable, optional
        The two-stage filter consulted with ``MPOL_F_MORON`` (default: always yes).
    """
    if not pol.flags & MPOL_F_MOF:
        return NUMA_NO_NODE
    if pol.mode == MPOL_INTERLEAVE:
        polnid = interleave_nid(pol, ilx, version)
    elif pol.mode == MPOL_WEIGHTED_INTERLEAVE:
        polnid = weighted_interleave_nid(pol, ilx, weights or WeightedInterleaveWeights(pol.nodes))
    elif pol.mode == MPOL_PREFERRED:
        if page_nid in pol.nodes:
            return NUMA_NO_NODE
        polnid = min(pol.nodes)
    elif pol.mode == MPOL_LOCAL:
        polnid = this_cpu_node
    elif pol.mode in (MPOL_BIND, MPOL_PREFERRED_MANY):
        if pol.flags & MPOL_F_MORON:
            if this_cpu_node not in pol.nodes:
                return NUMA_NO_NODE
            polnid = this_cpu_node
        else:
            if page_nid in pol.nodes:
                return NUMA_NO_NODE
            polnid = first_in_zonelist(this_cpu_node, pol.nodes) if first_in_zonelist else min(pol.nodes)
    else:
        return NUMA_NO_NODE
    if pol.flags & MPOL_F_MORON:
        polnid = this_cpu_node
        if should_numa_migrate_memory is not None and not should_numa_migrate_memory():
            return NUMA_NO_NODE
    return polnid if page_nid != polnid else NUMA_NO_NODE


@dataclass(frozen=True)
class PolicyReport:
    """What ``get_mempolicy`` reports for a policy: mode (with user flags) and nodemask."""

    mode: int
    nodemask: Nodes = field(default_factory=frozenset)


def policy_report(pol: MemPolicy | None) -> PolicyReport:
    """The ``(mode, nodemask)`` pair ``get_mempolicy`` returns for ``pol`` (``None`` = default)."""
    if pol is None or _is_default_policy(pol):
        return PolicyReport(MPOL_DEFAULT, frozenset())
    mode = pol.mode | (pol.flags & MPOL_MODE_FLAGS)
    if pol.stores_user_nodemask:
        return PolicyReport(mode, pol.user_nodemask)
    nodes = frozenset() if pol.mode in (MPOL_DEFAULT, MPOL_LOCAL) else pol.nodes
    return PolicyReport(mode, nodes)
