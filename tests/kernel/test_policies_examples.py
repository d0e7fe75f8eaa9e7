"""The example plug-ins in policies/: each one answers its what-if question on a small machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _mpol_machines import kernel

from numasim.kernel.registry import load_policy
from numasim.kernel.task import PAGE_SIZE
from numasim.topology.model import MemoryKind

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def test_bandwidth_interleave_follows_controller_bandwidth() -> None:
    k = kernel([([0], 64), ([1], 64)], bandwidth={0: 60.0, 1: 20.0})
    t = k.spawn("stream", cpu=0)
    k.set_placement(t, load_policy("bandwidth_interleave", resolution=3))
    vma = k.mmap(t, 400 * PAGE_SIZE)
    k.touch(t, vma.start, 400 * PAGE_SIZE)
    assert vma.pages_per_node() == {0: 300, 1: 100}
    # like interleave, pages landing on their target count as interleave hits
    assert k.numastat(0)["interleave_hit"] + k.numastat(1)["interleave_hit"] == 400


def test_bandwidth_interleave_restricted_nodes() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64)], bandwidth={0: 40.0, 1: 40.0, 2: 10.0})
    t = k.spawn("a", cpu=0)
    k.set_placement(t, load_policy(POLICIES / "bandwidth_interleave.py", nodes=[1, 2], resolution=4))
    vma = k.mmap(t, 100 * PAGE_SIZE)
    k.touch(t, vma.start, 100 * PAGE_SIZE)
    assert vma.pages_per_node() == {1: 80, 2: 20}


def test_fill_local_then_spread() -> None:
    k = kernel([([0], 64), ([1], 64), ([2], 64), ([3], 64)])
    t = k.spawn("big", cpu=0)
    policy = load_policy("fill_local_then_spread", threshold=0.5)
    k.set_placement(t, policy)
    free0, total0 = k.pm.free_pages(0), k.pm.managed_pages(0)
    room = int(free0 - 0.5 * total0)
    pages = room + 3000
    vma = k.mmap(t, pages * PAGE_SIZE)
    k.touch(t, vma.start, pages * PAGE_SIZE)
    counts = vma.pages_per_node()
    assert counts[0] == room
    spread = [counts[n] for n in (1, 2, 3)]
    assert sum(spread) == 3000 and max(spread) - min(spread) <= 30  # proportional to (nearly equal) free
    # the overflow is interleaved page by page, not laid out in three blocks
    tail = vma.nodes[room : room + 6].tolist()
    assert len(set(tail)) == 3
    with pytest.raises(ValueError):
        load_policy("fill_local_then_spread", threshold=1.5)


def test_cxl_tiering_hot_on_dram_cold_on_cxl() -> None:
    k = kernel([([0, 1], 256), ([], 256)], kinds={1: MemoryKind.CXL})
    t = k.spawn("kv", cpu=0)
    k.set_placement(t, load_policy("cxl_tiering", hot_threshold=0.8))
    vma = k.mmap(t, 100 * PAGE_SIZE)
    hotness = np.linspace(0.0, 1.0, 100)
    k.touch(t, vma.start, 100 * PAGE_SIZE, hints={"hotness": hotness})
    assert vma.nodes.tolist() == np.where(hotness >= 0.8, 0, 1).tolist()
    # without a score every page counts as hot
    other = k.mmap(t, 10 * PAGE_SIZE)
    k.touch(t, other.start, 10 * PAGE_SIZE)
    assert other.pages_per_node() == {0: 10}


def test_cxl_tiering_hints_must_match_the_range() -> None:
    k = kernel([([0], 64), ([], 64)], kinds={1: MemoryKind.CXL})
    t = k.spawn("kv", cpu=0)
    k.set_placement(t, load_policy("cxl_tiering"))
    vma = k.mmap(t, 10 * PAGE_SIZE)
    with pytest.raises(ValueError, match="hint"):
        k.touch(t, vma.start, 10 * PAGE_SIZE, hints={"hotness": np.zeros(3)})


def test_plugin_parameters_on_the_command_line() -> None:
    """`--policy NAME:KEY=VALUE,...`: the grammar of --daemon and sweep files; a wrong key names the policy."""
    import io
    from contextlib import redirect_stderr, redirect_stdout
    from pathlib import Path

    from numasim.cli import main

    spread = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "spread.toml")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["run", "-m", "seed-003-2node", "-w", spread, "--nominal", "--no-progress",
                     "--policy", "fill_local_then_spread:threshold=0.5"])  # fmt: skip
    assert code == 0 and "policy       fill_local_then_spread:threshold=0.5" in out.getvalue()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["run", "-m", "seed-003-2node", "-w", spread, "--nominal", "--no-progress",
                     "--policy", "fill_local_then_spread:thresh=0.5"])  # fmt: skip
    assert code == 2 and "unexpected keyword argument 'thresh'" in err.getvalue()
