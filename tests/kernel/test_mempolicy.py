"""mm/mempolicy.c rules (kernel_spec section 5): constants, flag sanitising, mpol_new, nodemask helpers,
rebinding, mpol_to_str, policy_nodemask and mpol_misplaced."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numasim.kernel.errno import KernelErrno
from numasim.kernel.mempolicy import (
    MAX_NUMNODES,
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_MOF,
    MPOL_F_MORON,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_MF_VALID,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
    NUMA_NO_NODE,
    MemPolicy,
    default_task_policy,
    get_nodes,
    mpol_max,
    mpol_misplaced,
    mpol_new,
    mpol_rebind_policy,
    mpol_relative_nodemask,
    mpol_to_str,
    next_node_in,
    node_remap,
    nodes_fold,
    nodes_onto,
    nodes_remap,
    policy_nodemask,
    policy_report,
    sanitize_mpol_flags,
)

ALL4 = frozenset(range(4))


def new(mode: int, nodes: set[int], mems: set[int] | frozenset[int] = ALL4, memory: set[int] | frozenset[int] = ALL4,
        version: str = "6.12") -> MemPolicy | None:
    m, f = sanitize_mpol_flags(mode, version)
    return mpol_new(m, f, nodes, mems_allowed=mems, memory_nodes=memory)


def errno_of(fn, *args, **kw) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(KernelErrno) as exc:
        fn(*args, **kw)
    return exc.value.errno


# --- 5.1 constants ----------------------------------------------------------------------------------------
def test_uapi_constants() -> None:
    assert (MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND, MPOL_INTERLEAVE, MPOL_LOCAL) == (0, 1, 2, 3, 4)
    assert (MPOL_PREFERRED_MANY, MPOL_WEIGHTED_INTERLEAVE) == (5, 6)
    assert (MPOL_F_STATIC_NODES, MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING) == (32768, 16384, 8192)
    assert MPOL_MF_VALID == 7
    assert (MPOL_F_MOF, MPOL_F_MORON) == (8, 16)


@pytest.mark.parametrize(("version", "expected"), [("6.12", 7), ("6.9", 7), ("6.8", 6), ("6.1", 6), ("5.10", 5)])
def test_mpol_max_per_version(version: str, expected: int) -> None:
    assert mpol_max(version) == expected


# --- 5.3 sanitize_mpol_flags ------------------------------------------------------------------------------
def test_mode_beyond_mpol_max_is_einval() -> None:
    assert errno_of(sanitize_mpol_flags, 7) == "EINVAL"
    assert errno_of(sanitize_mpol_flags, MPOL_WEIGHTED_INTERLEAVE, "6.1") == "EINVAL"
    assert sanitize_mpol_flags(MPOL_WEIGHTED_INTERLEAVE, "6.12") == (MPOL_WEIGHTED_INTERLEAVE, 0)


def test_static_and_relative_together_is_einval() -> None:
    assert errno_of(sanitize_mpol_flags, MPOL_BIND | MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) == "EINVAL"


@pytest.mark.parametrize("mode", [MPOL_DEFAULT, MPOL_PREFERRED, MPOL_INTERLEAVE, MPOL_LOCAL, MPOL_WEIGHTED_INTERLEAVE])
def test_numa_balancing_on_non_bind_is_einval(mode: int) -> None:
    assert errno_of(sanitize_mpol_flags, mode | MPOL_F_NUMA_BALANCING) == "EINVAL"


def test_numa_balancing_sets_mof_and_moron() -> None:
    mode, flags = sanitize_mpol_flags(MPOL_BIND | MPOL_F_NUMA_BALANCING)
    assert mode == MPOL_BIND
    assert flags == MPOL_F_NUMA_BALANCING | MPOL_F_MOF | MPOL_F_MORON


def test_numa_balancing_on_preferred_many_only_from_6_10() -> None:
    assert sanitize_mpol_flags(MPOL_PREFERRED_MANY | MPOL_F_NUMA_BALANCING, "6.10")[0] == MPOL_PREFERRED_MANY
    assert errno_of(sanitize_mpol_flags, MPOL_PREFERRED_MANY | MPOL_F_NUMA_BALANCING, "6.9") == "EINVAL"
    assert errno_of(sanitize_mpol_flags, MPOL_PREFERRED_MANY | MPOL_F_NUMA_BALANCING, "6.1") == "EINVAL"


# --- 5.4 get_nodes ----------------------------------------------------------------------------------------
def test_get_nodes_off_by_one() -> None:
    assert get_nodes({0, 1, 2}, 3) == {0, 1}
    assert get_nodes({0, 1, 2}, 4) == {0, 1, 2}
    assert get_nodes({0}, 1) == frozenset()
    assert get_nodes(None, 0) == frozenset()


def test_get_nodes_errors() -> None:
    assert errno_of(get_nodes, {0}, 0) == "EINVAL"  # unsigned wrap of --maxnode
    assert errno_of(get_nodes, {0}, 4096 * 8 + 2) == "EINVAL"
    assert errno_of(get_nodes, {MAX_NUMNODES}, MAX_NUMNODES + 2) == "EINVAL"
    assert get_nodes({MAX_NUMNODES}, MAX_NUMNODES + 1) == frozenset()  # that bit is beyond maxnode-1


# --- 5.5 mpol_new -----------------------------------------------------------------------------------------
def test_default_with_mask_is_einval_and_without_is_none() -> None:
    assert errno_of(new, MPOL_DEFAULT, {0}) == "EINVAL"
    assert new(MPOL_DEFAULT, set()) is None


def test_local_with_mask_or_flags_is_einval() -> None:
    assert errno_of(new, MPOL_LOCAL, {0}) == "EINVAL"
    assert errno_of(new, MPOL_LOCAL | MPOL_F_STATIC_NODES, set()) == "EINVAL"
    pol = new(MPOL_LOCAL, set())
    assert pol is not None and pol.mode == MPOL_LOCAL and pol.nodes == frozenset()


def test_empty_preferred_becomes_local() -> None:
    pol = new(MPOL_PREFERRED, set())
    assert pol is not None and pol.mode == MPOL_LOCAL
    assert errno_of(new, MPOL_PREFERRED | MPOL_F_STATIC_NODES, set()) == "EINVAL"
    assert errno_of(new, MPOL_PREFERRED | MPOL_F_RELATIVE_NODES, set()) == "EINVAL"


def test_preferred_multi_node_keeps_lowest() -> None:
    pol = new(MPOL_PREFERRED, {3, 1, 2})
    assert pol is not None and pol.nodes == {1}


@pytest.mark.parametrize("mode", [MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED_MANY, MPOL_WEIGHTED_INTERLEAVE])
def test_other_modes_need_nodes(mode: int) -> None:
    assert errno_of(new, mode, set()) == "EINVAL"


def test_memoryless_node_is_dropped_or_einval() -> None:
    memory = {0, 2, 3}  # node 1 is memoryless
    pol = new(MPOL_INTERLEAVE, {0, 1, 2}, memory=memory)
    assert pol is not None and pol.nodes == {0, 2}
    assert errno_of(new, MPOL_PREFERRED, {1}, memory=memory) == "EINVAL"
    assert errno_of(new, MPOL_BIND, {1}, memory=memory) == "EINVAL"


def test_mask_outside_cpuset_is_einval() -> None:
    assert errno_of(new, MPOL_BIND, {2, 3}, mems={0, 1}) == "EINVAL"
    pol = new(MPOL_BIND, {1, 2}, mems={0, 1})
    assert pol is not None and pol.nodes == {1}
    assert pol.cpuset_mems_allowed == {0, 1}


def test_static_keeps_user_mask_relative_maps_onto_allowed() -> None:
    pol = new(MPOL_BIND | MPOL_F_STATIC_NODES, {1, 7}, mems={0, 1, 2})
    assert pol is not None and pol.nodes == {1} and pol.user_nodemask == {1, 7}
    rel = new(MPOL_INTERLEAVE | MPOL_F_RELATIVE_NODES, {0, 1}, mems={2, 3}, memory={0, 1, 2, 3})
    assert rel is not None and rel.nodes == {2, 3} and rel.user_nodemask == {0, 1}


# --- nodemask helpers --------------------------------------------------------------------------------------
def test_next_node_in_wraps() -> None:
    assert next_node_in(MAX_NUMNODES - 1, {1, 3}) == 1
    assert next_node_in(1, {1, 3}) == 3
    assert next_node_in(3, {1, 3}) == 1
    assert next_node_in(0, set()) == MAX_NUMNODES


def test_fold_onto_relative() -> None:
    assert nodes_fold({0, 5, 6}, 4) == {0, 1, 2}
    assert nodes_onto({0, 2, 5}, {4, 6, 9}) == {4, 9}
    assert mpol_relative_nodemask({0, 3}, {10, 20, 30}) == {10}  # 3 folds to 0


def test_nodes_remap() -> None:
    assert nodes_remap({0, 1}, {0, 1, 2, 3}, {4, 5, 6, 7}) == {4, 5}
    assert nodes_remap({2, 9}, {0, 1, 2}, {5}) == {5, 9}  # 9 not in old: kept
    assert node_remap(3, {0, 1, 2, 3}, {6, 7}) == 7


# --- 5.12 rebinding ----------------------------------------------------------------------------------------
def test_rebind_default_remaps_by_ordinal() -> None:
    pol = new(MPOL_INTERLEAVE, {1, 2}, mems={0, 1, 2, 3})
    assert pol is not None
    moved = mpol_rebind_policy(pol, {4, 5})
    assert moved is not None and moved.nodes == {5, 4} and moved.cpuset_mems_allowed == {4, 5}


def test_rebind_static_intersects_and_falls_back_to_new_mems() -> None:
    pol = new(MPOL_BIND | MPOL_F_STATIC_NODES, {1, 2}, mems={0, 1, 2, 3})
    assert pol is not None
    assert mpol_rebind_policy(pol, {2, 3}).nodes == {2}  # type: ignore[union-attr]
    assert mpol_rebind_policy(pol, {5, 6}).nodes == {5, 6}  # type: ignore[union-attr]  # empty -> new


def test_rebind_relative() -> None:
    pol = new(MPOL_INTERLEAVE | MPOL_F_RELATIVE_NODES, {0, 2}, mems={0, 1, 2, 3})
    assert pol is not None and pol.nodes == {0, 2}
    assert mpol_rebind_policy(pol, {4, 5, 6, 7}).nodes == {4, 6}  # type: ignore[union-attr]


def test_rebind_preferred_keeps_nodes() -> None:
    pol = new(MPOL_PREFERRED, {1}, mems={0, 1, 2, 3})
    assert pol is not None
    moved = mpol_rebind_policy(pol, {2, 3})
    assert moved is not None and moved.nodes == {1} and moved.cpuset_mems_allowed == {2, 3}
    many = new(MPOL_PREFERRED_MANY, {0, 1})
    assert mpol_rebind_policy(many, {2, 3}).nodes == {0, 1}  # type: ignore[union-attr]


def test_rebind_local_and_none_untouched() -> None:
    assert mpol_rebind_policy(None, {1}) is None
    local = MemPolicy(MPOL_LOCAL)
    assert mpol_rebind_policy(local, {1}) is local


# --- 5.13 mpol_to_str -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pol", "text"),
    [
        (None, "default"),
        (default_task_policy(1), "default"),
        (MemPolicy(MPOL_LOCAL), "local"),
        (MemPolicy(MPOL_PREFERRED, 0, frozenset({2})), "prefer:2"),
        (MemPolicy(MPOL_BIND, 0, frozenset({0, 1, 2, 3, 5})), "bind:0-3,5"),
        (MemPolicy(MPOL_INTERLEAVE, MPOL_F_STATIC_NODES, frozenset({0, 2})), "interleave=static:0,2"),
        (MemPolicy(MPOL_INTERLEAVE, MPOL_F_RELATIVE_NODES, frozenset({1})), "interleave=relative:1"),
        (MemPolicy(MPOL_BIND, MPOL_F_NUMA_BALANCING | MPOL_F_MOF | MPOL_F_MORON, frozenset({0})), "bind=balancing:0"),
        (MemPolicy(MPOL_BIND, MPOL_F_STATIC_NODES | MPOL_F_NUMA_BALANCING, frozenset({0})), "bind=static|balancing:0"),
        (MemPolicy(MPOL_PREFERRED_MANY, 0, frozenset({0, 1})), "prefer (many):0-1"),
        (MemPolicy(MPOL_WEIGHTED_INTERLEAVE, 0, frozenset({0, 1})), "weighted interleave:0-1"),
    ],
)
def test_mpol_to_str(pol: MemPolicy | None, text: str) -> None:
    assert mpol_to_str(pol) == text


# --- get_mempolicy reporting -----------------------------------------------------------------------------
def test_policy_report_user_mask_only_with_static_or_relative() -> None:
    pol = new(MPOL_BIND | MPOL_F_STATIC_NODES, {1, 7}, mems={0, 1, 2})
    assert policy_report(pol).mode == MPOL_BIND | MPOL_F_STATIC_NODES
    assert policy_report(pol).nodemask == {1, 7}
    plain = new(MPOL_BIND, {1, 3}, mems={0, 1, 2})
    assert policy_report(plain).nodemask == {1}
    assert policy_report(None).mode == MPOL_DEFAULT
    assert policy_report(new(MPOL_BIND | MPOL_F_NUMA_BALANCING, {0})).mode == MPOL_BIND | MPOL_F_NUMA_BALANCING


# --- 5.6 policy_nodemask ----------------------------------------------------------------------------------
def test_policy_nodemask_per_mode() -> None:
    assert policy_nodemask(MemPolicy(MPOL_PREFERRED, 0, frozenset({2})), 0) == (None, 2)
    assert policy_nodemask(MemPolicy(MPOL_LOCAL), 3) == (None, 3)
    bind = MemPolicy(MPOL_BIND, 0, frozenset({1, 2}))
    assert policy_nodemask(bind, 0, mems_allowed={0, 1, 2}) == ({1, 2}, 0)
    assert policy_nodemask(bind, 0, mems_allowed={3}) == (None, 0)  # mask ignored when disjoint from cpuset
    assert policy_nodemask(MemPolicy(MPOL_BIND, 0, frozenset({1}), home_node=2), 0) == ({1}, 2)
    assert policy_nodemask(MemPolicy(MPOL_PREFERRED_MANY, 0, frozenset({1, 2})), 0) == ({1, 2}, 0)
    il = MemPolicy(MPOL_INTERLEAVE, 0, frozenset({1, 3}))
    assert policy_nodemask(il, 0, ilx=5) == (None, 3)
    assert policy_nodemask(il, 0) == (None, 1)  # il_prev = MAX_NUMNODES-1 -> first node


# --- 7.3 mpol_misplaced -----------------------------------------------------------------------------------
def test_misplaced_needs_mof() -> None:
    assert mpol_misplaced(MemPolicy(MPOL_BIND, 0, frozenset({0})), 1, 0) == NUMA_NO_NODE


def test_misplaced_default_policy_moves_towards_cpu() -> None:
    pol = default_task_policy(0)
    assert mpol_misplaced(pol, 1, 0) == 0
    assert mpol_misplaced(pol, 0, 0) == NUMA_NO_NODE
    assert mpol_misplaced(pol, 1, 0, should_numa_migrate_memory=lambda: False) == NUMA_NO_NODE


def test_misplaced_bind_balancing() -> None:
    pol = new(MPOL_BIND | MPOL_F_NUMA_BALANCING, {0, 1})
    assert pol is not None
    assert mpol_misplaced(pol, 1, 0) == 0  # cpu node in mask -> towards cpu
    assert mpol_misplaced(pol, 1, 2) == NUMA_NO_NODE  # cpu node outside the mask: stays
    no_moron = MemPolicy(MPOL_BIND, MPOL_F_MOF, frozenset({0, 1}))
    assert mpol_misplaced(no_moron, 3, 2, first_in_zonelist=lambda n, m: 1) == 1
    assert mpol_misplaced(no_moron, 0, 2) == NUMA_NO_NODE


# --- invariants --------------------------------------------------------------------------------------------
@given(st.frozensets(st.integers(0, 15), min_size=1), st.frozensets(st.integers(0, 15), min_size=1))
def test_relative_nodemask_stays_inside_rel(orig: frozenset[int], rel: frozenset[int]) -> None:
    out = mpol_relative_nodemask(orig, rel)
    assert out and out <= rel


@given(st.frozensets(st.integers(0, 15), min_size=1), st.frozensets(st.integers(0, 15), min_size=1),
       st.frozensets(st.integers(0, 15), min_size=1))
def test_rebind_bind_never_empty(nodes: frozenset[int], old: frozenset[int], new_mems: frozenset[int]) -> None:
    pol = MemPolicy(MPOL_BIND, 0, nodes, cpuset_mems_allowed=old)
    out = mpol_rebind_policy(pol, new_mems)
    assert out is not None and out.nodes


# --- 5.13 mpol_parse_str (tmpfs mpol=) ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("default", "default"),
        ("prefer:2", "prefer:2"),
        ("prefer", "local"),
        ("local", "local"),
        ("bind:0-1", "bind:0-1"),
        ("bind=static:1,3", "bind=static:1,3"),
        ("interleave", "interleave:0-3"),
        ("interleave=relative:0-1", "interleave=relative:0-1"),
        ("weighted interleave", "weighted interleave:0-3"),
        ("prefer (many):1-2", "prefer (many):1-2"),
    ],
)
def test_mpol_parse_str_accepts(text: str, shown: str) -> None:
    from numasim.kernel.mempolicy import mpol_parse_str

    assert mpol_to_str(mpol_parse_str(text, ALL4)) == shown


@pytest.mark.parametrize(
    "text",
    ["prefer:1-2", "prefer:", "prefer:1,2", "local:0", "default:0", "bind", "prefer (many)", "bind:7",
     "bind:2-1", "bind=balancing:0", "interleave=static|relative:0", "nonsense", "bind:x"],
)
def test_mpol_parse_str_rejects(text: str) -> None:
    from numasim.kernel.mempolicy import mpol_parse_str

    assert errno_of(mpol_parse_str, text, ALL4) == "EINVAL"


def test_mpol_parse_str_weighted_needs_6_9() -> None:
    from numasim.kernel.mempolicy import mpol_parse_str

    assert errno_of(mpol_parse_str, "weighted interleave", ALL4, "6.1") == "EINVAL"
