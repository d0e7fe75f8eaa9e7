"""kernel_spec.md section 5 (memory policy): argument checks as hypothesis invariants against the spec text,
plus the zonelist each mode starts from and mbind's validation order."""

from __future__ import annotations

import pytest
from _mpol_machines import kernel, two_nodes
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.errno import KernelErrno
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_MOF,
    MPOL_F_MORON,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_MF_LAZY,
    MPOL_MF_MOVE_ALL,
    MPOL_MF_STRICT,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MemPolicy,
    apply_policy_zone,
    get_nodes,
    sanitize_mpol_flags,
)
from numasim.kernel.task import PAGE_SIZE

VERSIONS = ["5.10", "5.15", "6.1", "6.8", "6.9", "6.10", "6.12"]
MODE_FLAGS = (1 << 15) | (1 << 14) | (1 << 13)


def _spec_mpol_max(version: str) -> int:
    # 5.1: MPOL_MAX = 7 (6.9+), 6 (5.15-6.8), 5 before
    major, minor = (int(x) for x in version.split("."))
    v = (major, minor)
    return 7 if v >= (6, 9) else 6 if v >= (5, 15) else 5


@settings(max_examples=300)
@given(
    mode=st.one_of(st.integers(0, 8), st.integers(-(1 << 31), 1 << 31)),
    flags=st.sampled_from([0, 1 << 15, 1 << 14, 1 << 13, (1 << 15) | (1 << 14), (1 << 15) | (1 << 13),
                           (1 << 14) | (1 << 13), MODE_FLAGS]),
    version=st.sampled_from(VERSIONS),
)
def test_sanitize_mpol_flags_equals_spec(mode: int, flags: int, version: str) -> None:
    """5.3: mode >= MPOL_MAX, STATIC+RELATIVE, NUMA_BALANCING outside BIND (and PREFERRED_MANY from 6.10)
    are EINVAL; NUMA_BALANCING adds MOF|MORON; the flags are split off the mode argument."""
    arg = mode | flags
    f = arg & MODE_FLAGS
    m = arg & ~MODE_FLAGS
    expect_einval = (
        not 0 <= m < _spec_mpol_max(version)
        or (f & (1 << 15) and f & (1 << 14))
        or (f & (1 << 13) and m not in ({MPOL_BIND, MPOL_PREFERRED_MANY} if version in ("6.10", "6.12")
                                        else {MPOL_BIND}))
    )
    try:
        got_mode, got_flags = sanitize_mpol_flags(arg, version)
    except KernelErrno as err:
        assert err.errno == "EINVAL"
        assert expect_einval
        return
    assert not expect_einval
    want_flags = f | (MPOL_F_MOF | MPOL_F_MORON if f & MPOL_F_NUMA_BALANCING else 0)
    assert (got_mode, got_flags) == (m, want_flags)


@settings(max_examples=300)
@given(
    nodes=st.one_of(st.none(), st.sets(st.one_of(st.integers(0, 70), st.integers(0, 40000)), max_size=6)),
    maxnode=st.one_of(st.integers(0, 80), st.integers(0, 40000), st.sampled_from([(1 << 64) - 1, 1 << 63])),
)
def test_get_nodes_equals_spec(nodes: set[int] | None, maxnode: int) -> None:
    """5.4: ``--maxnode``; decremented maxnode == 0 or NULL mask -> empty; > PAGE_SIZE*8 -> EINVAL; a set bit
    below maxnode-1 but >= MAX_NUMNODES (1024) -> EINVAL; bits at or above maxnode-1 are not read."""
    m = (maxnode - 1) % (1 << 64)
    if nodes is None or m == 0:
        want: frozenset[int] | str = frozenset()
    elif m > 4096 * 8:
        want = "EINVAL"
    else:
        kept = frozenset(n for n in nodes if n < m)
        want = "EINVAL" if any(n >= 1024 for n in kept) else kept
    try:
        got: frozenset[int] | str = get_nodes(nodes, maxnode)
    except KernelErrno as err:
        got = err.errno
    assert got == want


def test_apply_policy_zone_movable_only_nodes() -> None:
    """5.6: a BIND mask applies only when gfp_zone >= policy_zone, raised to ZONE_MOVABLE when none of the
    policy's nodes has N_HIGH_MEMORY (movable-only nodes)."""
    pol = MemPolicy(MPOL_BIND, 0, frozenset({1}))
    assert apply_policy_zone(pol, 2, policy_zone=2, high_memory_nodes={0, 1})  # GFP_KERNEL, normal node
    assert not apply_policy_zone(pol, 1, policy_zone=2, high_memory_nodes={0, 1})  # GFP_DMA32 < NORMAL
    assert not apply_policy_zone(pol, 2, policy_zone=2, high_memory_nodes={0})  # node 1 movable-only
    assert apply_policy_zone(pol, 3, policy_zone=2, high_memory_nodes={0})  # user pages (MOVABLE)


def test_preferred_falls_back_along_the_preferred_nodes_zonelist() -> None:
    """5.6: MPOL_PREFERRED allocates from the *preferred node's* zonelist, not the cpu node's.

    SLIT: node 2 is closer to node 1 (15) than to node 0 (20), so node 2's order is 2, 1, 0 while the cpu
    node 0's order is 0, 1, 2. With node 2 full, pages preferred to node 2 go to node 1 (2's next), and
    would go to node 0 if the cpu node's list were used."""
    slit = [[10, 20, 20], [20, 10, 15], [20, 15, 10]]
    k = kernel([([0], 64), ([1], 64), ([2], 16)], slit=slit)
    assert k.pm.fallback_order(2) == [2, 1, 0]
    # node 2 exactly at its LOW mark (+ reserve): it fails the fast path's strict test (3.3)
    for z in k.pm.node_zones(2):
        if z.populated:
            z.free_pages = z.wmark_low + z.lowmem_reserve[3]
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_PREFERRED, {2}).ok
    vma = k.mmap(t, 64 * PAGE_SIZE)
    k.touch(t, vma.start, 64 * PAGE_SIZE)
    assert set(vma.pages_per_node()) == {1}


def test_mbind_validation_precedence() -> None:
    """5.10: sanitize/get_nodes (syscall entry), then flags -> EINVAL, MOVE_ALL without CAP_SYS_NICE -> EPERM,
    start alignment -> EINVAL, PAGE_ALIGN(len) and end < start -> EINVAL, end == start -> 0, then mpol_new."""
    k = two_nodes()
    t = k.spawn("a")
    s = k.mmap(t, 8 * PAGE_SIZE).start
    # invalid flags beat the missing capability
    assert k.mbind(t, s, PAGE_SIZE, MPOL_BIND, {0}, flags=MPOL_MF_LAZY | MPOL_MF_MOVE_ALL).errno == "EINVAL"
    # the missing capability beats the unaligned start
    assert k.mbind(t, s + 1, PAGE_SIZE, MPOL_BIND, {0}, flags=MPOL_MF_MOVE_ALL).errno == "EPERM"
    # the unaligned start beats a zero length (which alone returns 0)
    assert k.mbind(t, s + 1, 0, MPOL_BIND, {0}).errno == "EINVAL"
    # len = -1 is ULONG_MAX; PAGE_ALIGN wraps it to 0 -> end == start -> success without looking further
    assert k.mbind(t, s, -1, MPOL_BIND, set()).ok
    # len = 1 rounds up to one page: the policy covers exactly that page
    assert k.mbind(t, s, 1, MPOL_BIND, {1}).ok
    assert t.mm.find_vma(s).end == s + PAGE_SIZE  # type: ignore[union-attr]
    # the mode is checked at the syscall entry, before the mbind flags and the capability
    assert k.mbind(t, s, PAGE_SIZE, 9, {0}, flags=MPOL_MF_MOVE_ALL).errno == "EINVAL"


def test_mbind_default_ignores_strict() -> None:
    """5.10: mode MPOL_DEFAULT clears MPOL_MF_STRICT, so misplaced pages give no EIO."""
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 4 * PAGE_SIZE)  # local: node 0
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_BIND, {1}, flags=MPOL_MF_STRICT).errno == "EIO"
    assert k.mbind(t, vma.start, 4 * PAGE_SIZE, MPOL_DEFAULT, None, flags=MPOL_MF_STRICT).ok


@pytest.mark.parametrize("flag", [MPOL_F_STATIC_NODES, MPOL_F_RELATIVE_NODES])
def test_empty_preferred_with_static_or_relative_is_einval(flag: int) -> None:
    """5.5: MPOL_PREFERRED with an empty mask becomes LOCAL, except with STATIC/RELATIVE (EINVAL)."""
    k = two_nodes()
    t = k.spawn("a")
    assert k.set_mempolicy(t, MPOL_PREFERRED | flag, set()).errno == "EINVAL"
    assert k.set_mempolicy(t, MPOL_PREFERRED, set()).ok


def test_interleave_drops_memoryless_nodes_silently() -> None:
    """5.5 + "Observed": a memoryless cpu node is dropped from interleave sets; alone it is EINVAL."""
    k = kernel([([0], 64), ([1], 0), ([2], 64)])
    t = k.spawn("a", cpu=0)
    assert k.set_mempolicy(t, MPOL_INTERLEAVE, {0, 1, 2}).ok
    assert t.mempolicy is not None and t.mempolicy.nodes == {0, 2}
    assert k.set_mempolicy(t, MPOL_PREFERRED, {1}).errno == "EINVAL"
    assert k.set_mempolicy(t, MPOL_BIND, {1}).errno == "EINVAL"


def test_numa_balancing_flag_does_not_store_the_user_nodemask() -> None:
    """5.5/5.11/5.12 [spec wording]: the spec says ``w.user_nodemask`` is kept "if a mode flag was given";
    in mm/mempolicy.c only STATIC/RELATIVE do that (``mpol_store_user_nodemask``). So BIND|NUMA_BALANCING
    keeps ``w.cpuset_mems_allowed`` and rebinds by ordinal like a plain BIND:
    nodes_remap({0, 1}, old={0, 1, 2, 3}, new={2, 3}) = {new[0 % 2], new[1 % 2]} = {2, 3}."""
    from _mpol_machines import four_nodes

    k = four_nodes()
    k.cpuset_create("job", cpus=[0, 1, 2, 3, 4, 5, 6, 7], mems=[0, 1, 2, 3])
    t = k.spawn("a", cpuset="job")
    assert k.set_mempolicy(t, MPOL_BIND | MPOL_F_NUMA_BALANCING, {0, 1}).ok
    k.cpuset_set("job", mems=[2, 3])
    r = k.get_mempolicy(t)
    assert (r["mode"], r["nodemask"]) == (MPOL_BIND | MPOL_F_NUMA_BALANCING, {2, 3})
