"""Workload spec: parsing, sizes, policies and errors that name the field and the value."""

from __future__ import annotations

import pytest

from numasim.errors import PolicyError, WorkloadError
from numasim.workload.layout import REGION_ALIGN_BYTES, layout
from numasim.workload.policy_text import parse_policy
from numasim.workload.spec import StreamPhase, loads_workload

BASE = """
name = "t"
[[threads]]
id = 0
node = 0
[[threads]]
id = 1
cpus = "4-7"
[[allocations]]
name = "a"
size_bytes = "64M"
policy = "interleave:0-3"
first_touch = 1
[[allocations]]
name = "b"
size_bytes = 4096
"""


def test_example_parses() -> None:
    w = loads_workload(BASE + '[[phases]]\npattern = "random"\nallocation = "a"\naccesses = 10\n')
    assert w.allocations[0].size_bytes == 64 << 20
    assert w.allocations[0].policy_spec.nodes == (0, 1, 2, 3)
    assert w.threads[1].cpus == [4, 5, 6, 7]
    assert w.first_touch_thread("a") == 1
    assert w.first_touch_thread("b") == 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('[[phases]]\npattern = "strided"\nallocation = "a"\nstride_bytes = 0\n', "phases.0.strided.stride_bytes = 0"),
        ('[[phases]]\npattern = "random"\nallocation = "zz"\n', "'zz'"),
        ('[[phases]]\npattern = "random"\nallocation = "a"\nwrite_fraction = 1.5\n', "write_fraction = 1.5"),
        ('[[phases]]\npattern = "spiral"\nallocation = "a"\n', "phases.0"),
        ('[[phases]]\npattern = "zipf"\nallocation = "a"\nhot_fraction = 0.1\n', "hot_access_fraction"),
        ('[[phases]]\npattern = "random"\nallocation = "a"\naccesses = 3\npasses = 2\n', "accesses and passes"),
        ('[[phases]]\npattern = "stream_triad"\narrays = ["a", "b"]\n', "stream_triad takes 3 arrays"),
        ('[[phases]]\npattern = "random"\nallocation = "a"\nthreads = [5]\n', "no thread 5"),
        ('[[phases]]\npattern = "random"\nallocation = "a"\nfree = ["a"]\n', "used while not allocated"),
        ('[[phases]]\npattern = "random"\nallocation = "a"\ncolour = "red"\n', "colour"),
    ],
)
def test_phase_errors_name_field(extra: str, needle: str) -> None:
    with pytest.raises(WorkloadError) as err:
        loads_workload(BASE + extra, "w.toml")
    assert needle in str(err.value)
    assert str(err.value).startswith("w.toml: ")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE.replace('"64M"', '"64Q"'), "allocations.0.size_bytes = '64Q'"),
        (BASE.replace('"interleave:0-3"', '"interleave"'), "needs a node list"),
        (BASE.replace('"interleave:0-3"', '"scatter:0"'), "unknown mode 'scatter'"),
        (BASE.replace('cpus = "4-7"', 'cpus = "4-7"\ncpu = 3'), "give one of cpu, node, cpus"),
        (BASE.replace("id = 1", "id = 4"), "threads[1].id = 4"),
        (BASE.replace('name = "b"', 'name = "a"'), "'a' is used twice"),
        (BASE.replace("first_touch = 1", "first_touch = 9"), "first_touch = 9"),
        ("threads = [", "not valid TOML"),
    ],
)
def test_errors_name_field(text: str, needle: str) -> None:
    with pytest.raises(WorkloadError, match="w.toml") as err:
        loads_workload(text, "w.toml")
    assert needle in str(err.value)


def test_malloc_free_order() -> None:
    text = BASE + (
        '[[phases]]\npattern = "random"\nallocation = "a"\naccesses = 1\n'
        '[[phases]]\npattern = "random"\nallocation = "b"\naccesses = 1\nmalloc = ["b"]\nfree = ["a"]\n'
    )
    w = loads_workload(text)
    assert w.malloc_phase("b") == 1 and w.free_phase("a") == 1 and w.free_phase("b") is None
    bad = BASE + '[[phases]]\npattern = "random"\nallocation = "b"\naccesses = 1\n[[phases]]\nmalloc = ["b"]\npattern = "random"\nallocation = "a"\n'
    with pytest.raises(WorkloadError, match="used while not allocated"):
        loads_workload(bad)


def test_stream_defaults_and_layout() -> None:
    text = """
threads = [{id = 0}]
allocations = [{name = "a", size_bytes = "1M"}, {name = "b", size_bytes = "1M"}, {name = "c", size_bytes = "1M"}]
phases = [{pattern = "stream_triad"}]
"""
    w = loads_workload(text)
    phase = w.phases[0]
    assert isinstance(phase, StreamPhase) and phase.array_names == ("b", "c", "a")
    regions = list(layout(w).values())
    for r0, r1 in zip(regions, regions[1:], strict=False):
        assert r1.base >= r0.end + REGION_ALIGN_BYTES
        assert r1.base % REGION_ALIGN_BYTES == 0


@pytest.mark.parametrize(
    ("text", "mode", "nodes", "flags"),
    [
        ("local", "local", (), ()),
        ("bind:1", "bind", (1,), ()),
        ("preferred:0", "preferred", (0,), ()),
        ("weighted_interleave:0,1", "weighted_interleave", (0, 1), ()),
        ("interleave:0-3:static", "interleave", (0, 1, 2, 3), ("static",)),
        ("membind:2-3:relative", "bind", (2, 3), ("relative",)),
        ("bind:0:balancing", "bind", (0,), ("balancing",)),
    ],
)
def test_parse_policy(text: str, mode: str, nodes: tuple[int, ...], flags: tuple[str, ...]) -> None:
    p = parse_policy(text)
    assert (p.mode, p.nodes, p.flags) == (mode, nodes, flags)
    assert parse_policy(str(p)) == p


@pytest.mark.parametrize("text", ["bind", "local:0", "interleave:0:static,relative", "bind:x", "interleave:0:balancing", "a:b:c:d"])
def test_parse_policy_errors(text: str) -> None:
    with pytest.raises(PolicyError, match="policy"):
        parse_policy(text)


def test_thread_groups_and_default_ids() -> None:
    w = loads_workload('threads = [{count = 3, node = 0}, {cpu = 5}, {count = 2, cpus = "8-9"}]')
    assert [t.id for t in w.threads] == [0, 1, 2, 3, 4, 5]
    assert [t.node for t in w.threads[:3]] == [0, 0, 0] and w.threads[3].cpu == 5
    assert w.threads[5].cpus == [8, 9]
    with pytest.raises(WorkloadError, match=r"threads\[0\].count = 0"):
        loads_workload("threads = [{count = 0}]")
    with pytest.raises(WorkloadError, match="takes no id"):
        loads_workload("threads = [{count = 2, id = 0}]")
