"""Fuzz: workload TOMLs (a small one and the shipped examples), mutated, through ``run -w``. A mutation that
leaves a valid workload of at most 1,000 accesses runs to the end under the alarm, and its report conserves
pages; a larger valid one is only parsed (its run time is not this suite's question)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from _fuzz import assert_clean, cli, fuzz_settings, mutated
from hypothesis import given

from numasim.errors import NumasimError
from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import save_machine_toml
from numasim.workload.generate import total_accesses
from numasim.workload.spec import loads_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"
_counter = itertools.count()

SMALL = """name = "fuzz-small"
description = "two threads, two small arrays, a few hundred accesses"
threads = [{id = 0, node = 0}, {id = 1, cpu = 2}]

[[allocations]]
name = "a"
size_bytes = "64K"
policy = "interleave:0-1"

[[allocations]]
name = "b"
size_bytes = 65536
first_touch = 1

[[phases]]
name = "scan"
pattern = "sequential"
allocation = "a"
accesses = 200
compute_ns = 5.0
write_fraction = 0.25

[[phases]]
name = "poke"
pattern = "random"
allocation = "b"
threads = [1]
accesses = 150
size_bytes = 8
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-workloads")


@pytest.fixture(scope="module")
def machine_file(work: Path) -> str:
    path = work / "two.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def _shrunk(text: str) -> str:
    """A shipped example scaled down to a few hundred accesses: sizes in KiB, few threads and accesses."""
    text = re.sub(r'"\d+[KMG]"', '"4K"', text)
    text = re.sub(r"(?m)^(\s*accesses\s*=\s*)\d[\d_]*", r"\g<1>40", text)
    text = re.sub(r"count\s*=\s*\d+", "count = 2", text)
    text = re.sub(r"(?m)^(\s*passes\s*=\s*)[\d.]+", r"\g<1>0.01", text)
    return re.sub(r"(?m)^(\s*duration_ns\s*=\s*)[\d._e]+", r"\g<1>2000", text)


def _small_enough(text: str) -> bool:
    """Whether the workload parses and makes at most 1,000 accesses (else its run is not timed here)."""
    try:
        return total_accesses(loads_workload(text, "w.toml")) <= 1000
    except (NumasimError, ValueError):
        return True  # invalid: the run must fail fast and cleanly


@pytest.mark.parametrize("base", ["small", *sorted(p.name for p in EXAMPLES.glob("*.toml"))])
def test_mutated_workloads(work: Path, machine_file: str, base: str) -> None:
    text = SMALL if base == "small" else _shrunk((EXAMPLES / base).read_text())
    assert _small_enough(text), f"{base} shrunk still makes more than 1,000 accesses"

    @fuzz_settings(30 if base == "small" else 10)
    @given(mutated(text))
    def check(bad: str) -> None:
        if not _small_enough(bad):
            return
        path = work / f"w{next(_counter)}.toml"
        path.write_text(bad)
        result = work / f"r{next(_counter)}.json"
        o = cli("run", "-m", machine_file, "--nominal", "-w", str(path), "--no-progress", "-o", str(result))
        assert_clean(o, names=(path.name,))
        assert (o.code == 0) == result.is_file()
        if o.code == 0:
            placement = json.loads(result.read_text())["placement"]
            by_allocation = sum(sum(v.values()) for v in placement["pages_by_allocation"].values())
            assert sum(placement["pages_per_node"].values()) == by_allocation

    check()
