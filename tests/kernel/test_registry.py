"""Placement plug-ins: the protocol, built-in kernel modes as plug-ins, lookup by name, file, entry point."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
from _mpol_machines import four_nodes, two_nodes

from numasim.errors import PolicyError
from numasim.kernel import registry
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_INTERLEAVE
from numasim.kernel.protocol import PlacementContext, PlacementDecision, PlacementPolicy
from numasim.kernel.registry import (
    BUILTIN_POLICY_NAMES,
    ENTRY_POINT_GROUP,
    available_policies,
    load_policy,
    register_policy,
    unregister_policy,
)
from numasim.kernel.task import PAGE_SIZE


class AllOn:
    def __init__(self, node: int) -> None:
        self.name = f"all_on_{node}"
        self.node = node

    def place(self, ctx: PlacementContext, count: int) -> PlacementDecision:
        return PlacementDecision(preferred=self.node)


def test_builtin_names() -> None:
    assert BUILTIN_POLICY_NAMES == (
        "default", "local", "preferred", "bind", "interleave", "preferred_many", "weighted_interleave",
    )
    for name in BUILTIN_POLICY_NAMES:
        assert available_policies()[name] == "builtin"


def test_builtin_plugins_match_kernel_modes() -> None:
    """A built-in plug-in with nodes places pages exactly like the equivalent set_mempolicy."""
    for name, mode, nodes in [("interleave", MPOL_INTERLEAVE, {1, 2, 3}), ("bind", MPOL_BIND, {2})]:
        a, b = four_nodes(), four_nodes()
        ta, tb = a.spawn("a", cpu=0), b.spawn("b", cpu=0)
        assert a.set_mempolicy(ta, mode, nodes).ok
        b.set_placement(tb, load_policy(name, nodes=sorted(nodes)))
        va, vb = a.mmap(ta, 40 * PAGE_SIZE), b.mmap(tb, 40 * PAGE_SIZE)
        a.touch(ta, va.start, 40 * PAGE_SIZE)
        b.touch(tb, vb.start, 40 * PAGE_SIZE)
        assert va.nodes.tolist() == vb.nodes.tolist()
        assert [a.numastat(n) for n in range(4)] == [b.numastat(n) for n in range(4)]


def test_builtin_param_errors() -> None:
    with pytest.raises(PolicyError):
        load_policy("local", nodes=[0])
    with pytest.raises(PolicyError):
        load_policy("interleave", nodes=[])
    with pytest.raises(PolicyError):
        load_policy("bind", colour="red")
    assert load_policy("interleave", nodes="0-2").name == "interleave"


def test_custom_plugin_on_vma_range_overrides_policy() -> None:
    k = two_nodes()
    t = k.spawn("a", cpu=0)
    vma = k.mmap(t, 8 * PAGE_SIZE)
    k.set_placement(t, AllOn(1), vma.start + 4 * PAGE_SIZE, 4 * PAGE_SIZE)
    k.touch(t, vma.start, 8 * PAGE_SIZE)
    assert [v.pages_per_node() for v in t.mm.vmas] == [{0: 4}, {1: 4}]
    assert isinstance(AllOn(0), PlacementPolicy)
    with pytest.raises(PolicyError):
        k.set_placement(t, object())  # type: ignore[arg-type]


def test_register_and_unknown() -> None:
    register_policy("all_on_one", lambda: AllOn(1))
    try:
        assert load_policy("all_on_one").name == "all_on_1"
        assert available_policies()["all_on_one"] == "registered"
    finally:
        unregister_policy("all_on_one")
    with pytest.raises(PolicyError, match="no placement policy"):
        load_policy("no_such_policy")
    with pytest.raises(PolicyError):
        register_policy("bind", lambda: AllOn(0))


def test_load_from_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.py"
    f.write_text(
        "from numasim.kernel.protocol import PlacementDecision\n"
        "class P:\n    name = 'mine'\n    def __init__(self, node=0):\n        self.node = node\n"
        "    def place(self, ctx, count):\n        return PlacementDecision(preferred=self.node)\n"
        "def make_policy(node=0):\n    return P(node)\n"
    )
    assert load_policy(f, node=1).name == "mine"
    assert load_policy(str(f)).name == "mine"
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(PolicyError, match="make_policy"):
        load_policy(bad)
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(tmp_path / "missing.py")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PolicyError, match="boom"):
        load_policy(broken)


def test_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint(name="third_party", value="numasim.kernel.modes:KernelMode", group=ENTRY_POINT_GROUP)

    def fake_entry_points(group: str) -> list[EntryPoint]:
        return [ep] if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert available_policies()["third_party"].startswith("entry point")
    assert load_policy("third_party", name="local").name == "local"


def test_shipped_examples_found_by_name() -> None:
    names = available_policies()
    for name in ("bandwidth_interleave", "fill_local_then_spread", "cxl_tiering"):
        assert name in names
        assert load_policy(name).name == name


def test_decision_shape_checked() -> None:
    d = PlacementDecision(preferred=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError):
        d.preferred_array(4)
