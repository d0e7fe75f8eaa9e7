"""Placement through the kernel, calibration resolution, run_workload/run_trace and compare_policies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numasim.errors import CalibrationError, PolicyError, WorkloadError
from numasim.timing.model import nominal_calibration, save_calibration
from numasim.timing.resolve import resolve_calibration
from numasim.topology.builders import glueless
from numasim.workload.access import AccessChunk
from numasim.workload.layout import layout
from numasim.workload.placement import place_trace, place_workload, thread_cpus, thread_specs
from numasim.workload.run import compare_policies, run_trace, run_workload
from numasim.workload.spec import loads_workload
from numasim.workload.trace import write_trace

M = glueless(2)
NODE1_CPU = M.nodes[1].cpus[0]

W = loads_workload(
    """
name = "w"
threads = [{id = 0, node = 0}, {id = 1, node = 1}]
allocations = [
  {name = "a", size_bytes = "1M"},
  {name = "b", size_bytes = "1M", policy = "interleave:0-1"},
  {name = "c", size_bytes = "1M", first_touch = 1},
  {name = "d", size_bytes = "1M", prefault = false},
]
[[phases]]
pattern = "random"
allocation = "a"
accesses = 500
[[phases]]
pattern = "sequential"
allocation = "d"
accesses = 64
threads = [1]
malloc = ["d"]
free = ["a"]
[[phases]]
pattern = "pointer_chase"
allocation = "c"
accesses = 2000
threads = [0]
"""
)


def test_thread_cpus_and_specs() -> None:
    assert thread_cpus(M, W) == [M.nodes[0].cpus[0], NODE1_CPU]
    specs = thread_specs(M, W)
    assert [s.dependent for s in specs] == [True, False]  # thread 0 mostly chases pointers
    bad = loads_workload("threads = [{id = 0, cpu = 999}]")
    with pytest.raises(WorkloadError, match=r"threads\[0\].cpu = 999"):
        thread_cpus(M, bad)


def test_place_workload_policies_and_first_touch() -> None:
    p = place_workload(M, W)
    pages = p.pages_by_allocation
    assert pages["a"] == {0: 256}  # first touch by thread 0 (node 0)
    assert pages["b"] == {0: 128, 1: 128}  # mbind interleave
    assert pages["c"] == {1: 256}  # first_touch = 1
    assert pages["d"] == {1: 1}  # lazily faulted: 64 sequential lines = one page, touched by thread 1
    assert p.failed_pages == 0
    r = layout(W)
    # the page map covers freed "a" too (virtual ranges are never reused)
    assert p.pages.lookup(np.array([r["a"].base, r["c"].base], dtype=np.uint64)).tolist() == [0, 1]
    stat = p.numastat()
    assert stat[0]["numa_hit"] + stat[1]["numa_hit"] == 256 * 3 + 1
    bound = place_workload(M, W, policy="bind:1")
    assert bound.pages_by_allocation["a"] == {1: 256} and bound.pages_by_allocation["b"] == {0: 128, 1: 128}
    assert bound.policy == "bind:1"


def test_all_nodes_as_numactl_takes_it() -> None:
    """``interleave:all`` (numactl's ``--interleave=all``): every node with memory, here a CXL expander too."""
    from numasim.topology.io import load_machine
    from numasim.workload.policy_text import parse_policy

    assert str(parse_policy("interleave:all")) == "interleave:all"
    assert parse_policy("bind:ALL").all_nodes and parse_policy("bind:all").nodes == ()
    with pytest.raises(PolicyError, match="takes no nodes"):
        parse_policy("local:all")
    assert place_workload(M, W, policy="interleave:all").pages_by_allocation["a"] == {0: 128, 1: 128}
    cxl = load_machine("xeon-2s-cxl")
    memory_nodes = [n.id for n in cxl.nodes if n.has_memory]
    assert len(memory_nodes) > len([n for n in cxl.nodes if n.cpus])  # a cpu-less memory node
    w = loads_workload('threads = [{id = 0, node = 0}]\nallocations = [{name = "a", size_bytes = "3M", policy = "interleave:all"}]')
    spread = place_workload(cxl, w).pages_by_allocation["a"]
    assert sorted(spread) == memory_nodes and max(spread.values()) - min(spread.values()) <= 1


def test_bad_policies() -> None:
    with pytest.raises(PolicyError, match="EINVAL"):
        place_workload(M, W, policy="bind:7")
    with pytest.raises(PolicyError, match="no-such-policy"):
        place_workload(M, W, policy="no-such-policy")


def test_place_trace_first_touch_by_first_thread() -> None:
    addr = np.array([0x10000, 0x20000, 0x10040, 0x7F0000000000], dtype=np.uint64)
    chunk = AccessChunk.build(addr, thread=np.array([0, 1, 1, 1]))
    cpus = [M.nodes[0].cpus[0], NODE1_CPU]
    p = place_trace(M, [chunk], cpus)
    assert p.pages.lookup(addr).tolist() == [0, 1, 0, 1]
    assert p.pages.page_count == 3
    p = place_trace(M, [chunk], cpus, policy="bind:1")
    assert p.pages.lookup(addr).tolist() == [1, 1, 1, 1]
    kernel_space = AccessChunk.build(np.array([0xFFFF9F9E3ECB8540], dtype=np.uint64))
    with pytest.raises(WorkloadError, match="beyond user space"):
        place_trace(M, [kernel_space], cpus)


def test_resolve_calibration(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="names no calibration"):
        resolve_calibration(M)
    assert resolve_calibration(M, nominal=True).provenance.method == "nominal"
    save_calibration(nominal_calibration(M), tmp_path / "cal.json")
    assert resolve_calibration(M, tmp_path / "cal.json").machine == M.name
    named = M.model_copy(update={"calibration": "cal.json"})
    assert resolve_calibration(named, machine_path=tmp_path / "m.toml").machine == M.name
    with pytest.raises(CalibrationError, match="names calibration .missing.json."):
        resolve_calibration(M.model_copy(update={"calibration": "missing.json"}))
    other = glueless(2, name="other")
    with pytest.raises(CalibrationError, match="is for machine"):
        resolve_calibration(other, tmp_path / "cal.json")


def test_run_workload_and_to_dict() -> None:
    cal = nominal_calibration(M)
    out = run_workload(M, W, cal, seed=3)
    assert out.result.accesses >= 2564
    d = json.loads(json.dumps(out.to_dict()))
    assert d["calibration"]["method"] == "nominal" and d["seed"] == 3
    assert d["placement"]["pages_by_allocation"]["c"] == {"1": 256}


def test_run_trace(tmp_path: Path) -> None:
    addr = (np.arange(2000, dtype=np.uint64) % np.uint64(512)) * np.uint64(64) + np.uint64(1 << 30)
    write_trace([AccessChunk.build(addr, thread=np.arange(2000) % 2)], tmp_path / "t.npz")
    out = run_trace(M, tmp_path / "t.npz", nominal_calibration(M), cpus=[0, NODE1_CPU])
    assert out.result.accesses == 2000
    assert [t.cpu for t in out.threads] == [0, NODE1_CPU]


def test_compare_policies_local_vs_remote() -> None:
    w = loads_workload(
        'threads = [{id = 0, node = 0}]\nallocations = [{name = "a", size_bytes = "1M"}]\n'
        'phases = [{pattern = "random", allocation = "a", accesses = 3000}]'
    )
    with pytest.raises(CalibrationError, match="names no calibration"):
        compare_policies(M, w, ["local"])
    rows = compare_policies(M, w, ["local", "bind:1", "interleave:0-1"], nominal=True)
    assert rows[0]["calibration_method"] == "nominal"
    by = {r["policy"]: r for r in rows}
    assert by["local"]["remote_pct"] == 0.0 and by["bind:1"]["remote_pct"] == 100.0
    assert 40 < by["interleave:0-1"]["remote_pct"] < 60
    assert by["bind:1"]["run_time_ns"] > by["local"]["run_time_ns"]
    assert by["local"]["node0_pages"] == 256 and by["bind:1"]["node1_pages"] == 256


def test_plugin_policy_by_name() -> None:
    from numasim.kernel.registry import load_policy, register_policy, unregister_policy

    register_policy("test_all_on_node1", lambda: load_policy("bind", nodes=[1]))
    try:
        p = place_workload(M, W, policy="test_all_on_node1")
    finally:
        unregister_policy("test_all_on_node1")
    assert p.pages_by_allocation["a"] == {1: 256} and p.pages_by_allocation["c"] == {1: 256}
    assert p.pages_by_allocation["b"] == {0: 128, 1: 128}  # the allocation's own mbind still wins


def test_exact_mode_runs_the_same_accesses() -> None:
    cal = nominal_calibration(M)
    small = loads_workload(
        'threads = [{node = 0}, {node = 1}]\nallocations = [{name = "a", size_bytes = "64K"}]\n'
        'phases = [{pattern = "random", allocation = "a", accesses = 300}]'
    )
    epoch = run_workload(M, small, cal, mode="epoch")
    exact = run_workload(M, small, cal, mode="exact")
    assert exact.mode == "exact" and exact.result.accesses == epoch.result.accesses
    assert exact.placement.pages_per_node() == epoch.placement.pages_per_node()


def test_resolve_calibration_nominal_excludes_a_file(tmp_path: Path) -> None:
    save_calibration(nominal_calibration(M), tmp_path / "cal.json")
    with pytest.raises(CalibrationError, match="not a calibration and --nominal"):
        resolve_calibration(M, tmp_path / "cal.json", nominal=True)
    with pytest.raises(CalibrationError, match="not --nominal and --catalog"):
        resolve_calibration(M, nominal=True, catalog=True)


