"""Fuzz: traces in every readable format (CSV, npz, perf script, lackey), mutated from valid ones, through
``trace info`` and ``run -t``; on runs that succeed, every touched page is placed or counted as failed, and the
run times every access."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from _fuzz import assert_clean, cli, fuzz_settings, mutated
from hypothesis import given
from hypothesis import strategies as st

from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import save_machine_toml
from numasim.workload.access import AccessChunk
from numasim.workload.trace import write_trace
from numasim.workload.trace.npz import COLUMNS, write_npz

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
_counter = itertools.count()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-traces")


@pytest.fixture(scope="module")
def machine_file(work: Path) -> str:
    path = work / "two.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def _base_chunk() -> AccessChunk:
    rng = np.random.default_rng(7)
    n = 200
    return AccessChunk(
        thread=rng.integers(0, 3, n).astype(np.int32),
        address=(0x7F0000000000 + rng.integers(0, 64, n) * 4096 + rng.integers(0, 64, n) * 64).astype(np.uint64),
        is_write=rng.random(n) < 0.3,
        size_bytes=np.full(n, 64, dtype=np.uint16),
        compute_ns=rng.uniform(0, 50, n).astype(np.float32),
    )


def _check_run(work: Path, machine_file: str, path: Path, extra: tuple[str, ...] = ()) -> None:
    info = cli("trace", "info", *extra, "--json", str(path))
    assert_clean(info, names=(path.name, *extra))
    result = work / f"r{next(_counter)}.json"
    run = cli("run", "-m", machine_file, "--nominal", "-t", str(path), *(("--trace-format", extra[1]) if extra else ()),
              "--no-progress", "-o", str(result))
    assert_clean(run, names=(path.name,))
    assert (run.code == 0) == result.is_file()  # no half-written result
    if run.code == 0 and info.code == 0:
        summary, report = json.loads(info.out), json.loads(result.read_text())
        placement = report["placement"]
        assert sum(placement["pages_per_node"].values()) + placement["failed_pages"] == summary["footprint_pages"]
        assert report["inputs"]["accesses"] == summary["accesses"]
        # the engine counts 64-byte line requests: at least one per access (two when an access spans lines)
        assert report["result"]["accesses"] >= summary["accesses"]


@pytest.mark.parametrize("fmt", ["csv", "perf", "lackey"])
def test_mutated_text_traces(work: Path, machine_file: str, fmt: str) -> None:
    if fmt == "csv":
        write_trace([_base_chunk()], work / "base.csv")
        base = (work / "base.csv").read_text()
    else:
        base = (DATA / ("perf_mem_sample.txt" if fmt == "perf" else "lackey_sample.txt")).read_text()

    @fuzz_settings(15)
    @given(mutated(base))
    def check(text: str) -> None:
        path = work / f"t{next(_counter)}.txt"
        path.write_text(text)
        _check_run(work, machine_file, path, ("--format", fmt))

    check()


BAD_VALUES = {
    "thread": [-1, 2**31 - 1, 7],
    "address": [0, 2**64 - 1, 2**47, 0x7FFFFFFFF000],
    "size_bytes": [0, 1, 65535, 4096],
    "compute_ns": [float("nan"), float("inf"), -1.0, 1e20, 1e12, 0.0],
}


def test_mutated_npz_values(work: Path, machine_file: str) -> None:
    @fuzz_settings(20)
    @given(st.sampled_from(sorted(BAD_VALUES)), st.data())
    def check(column: str, data: st.DataObject) -> None:
        chunk = _base_chunk()
        values = getattr(chunk, column).copy()
        where = data.draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=5))
        values[where] = np.array(data.draw(st.sampled_from(BAD_VALUES[column]))).astype(COLUMNS[column])
        columns = {name: getattr(chunk, name) for name in COLUMNS}
        columns[column] = values
        path = work / f"v{next(_counter)}.npz"
        write_npz([AccessChunk(**columns)], path)  # the raw writer: a foreign tool's file, not checked
        _check_run(work, machine_file, path)

    check()


def test_mutated_npz_bytes(work: Path, machine_file: str) -> None:
    write_npz([_base_chunk()], work / "base.npz")
    raw = (work / "base.npz").read_bytes()

    @fuzz_settings(15)
    @given(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=4),
           st.integers(0, len(raw)))
    def check(flips: list[tuple[int, int]], cut: int) -> None:
        data = bytearray(raw[: max(cut, len(raw) // 2)])
        for k, b in flips:
            if k < len(data):
                data[k] = b
        path = work / f"b{next(_counter)}.npz"
        path.write_bytes(bytes(data))
        _check_run(work, machine_file, path)

    check()
