"""Issue 13, findings 1, 2, 4, 5: trace values outside their column's range are a clear error (never a crash, a
hang or Python's text), and thread ids are labels (a huge id costs nothing per id)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from numasim.cli import main
from numasim.engine import simulate
from numasim.engine.pagemap import PageMap
from numasim.engine.spec import ThreadSpec
from numasim.engine.stream import MAX_RUN_NS
from numasim.errors import TraceError, WorkloadError
from numasim.timing.resolve import resolve_calibration
from numasim.topology.builders import glueless
from numasim.workload.access import MAX_COMPUTE_NS, MAX_THREAD_ID, AccessChunk
from numasim.workload.spec import loads_workload
from numasim.workload.trace import read_trace, trace_info, write_trace
from numasim.workload.trace.npz import write_npz

ROOT = Path(__file__).resolve().parents[2]


def _chunk(n: int = 50, **kw: object) -> AccessChunk:
    return AccessChunk.build(np.arange(n, dtype=np.uint64) * 64 + 0x10000, **kw)  # type: ignore[arg-type]


def _one_clear_line(err: str) -> str:
    assert "Traceback" not in err and "Error:" not in err and "invalid literal" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numasim: error: "), err
    return lines[0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5.0, 1e20, MAX_COMPUTE_NS * 2])
def test_npz_compute_ns_out_of_range_is_rejected(tmp_path: Path, bad: float, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.npz"
    write_npz([_chunk(compute_ns=bad)], path)  # the low-level writer, as a foreign tool would write it
    with pytest.raises(TraceError, match=r"chunk 0, access 0: compute_ns = .* is not a time in 0\.\.1e\+12 ns"):
        list(read_trace(path))
    for argv in (["run", "-m", "seed-003-2node", "-t", str(path), "--no-progress"], ["trace", "info", str(path)]):
        assert main(argv) == 2
        line = _one_clear_line(capsys.readouterr().err)
        assert str(path) in line and "compute_ns" in line


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_write_trace_refuses_nan_and_leaves_no_file(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"t{suffix}"
    with pytest.raises(TraceError, match="compute_ns = nan"):
        write_trace([_chunk(), _chunk(compute_ns=float("nan"))], target)
    assert list(tmp_path.iterdir()) == []


def test_compute_ns_at_the_bound_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ok.npz"
    write_trace([_chunk(compute_ns=MAX_COMPUTE_NS)], path)
    assert trace_info(read_trace(path)).compute_ns_total == pytest.approx(50 * MAX_COMPUTE_NS, rel=1e-6)


def test_engine_refuses_a_run_longer_than_its_clock() -> None:
    # Each access is within bounds, but one thread's total (1e4 x 1e12 ns) is beyond 2**53 ns.
    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    cal = resolve_calibration(machine, nominal=True)
    chunk = _chunk(10_000, compute_ns=MAX_COMPUTE_NS)
    numbers = np.unique(chunk.address // np.uint64(4096))
    pages = PageMap.from_arrays(numbers, np.zeros(len(numbers), dtype=np.int16))
    with pytest.raises(WorkloadError, match=r"compute_ns adds up to 1e\+16 ns, beyond the simulated clock's range"):
        simulate(machine, cal, [ThreadSpec(id=0, cpu=0)], [chunk], pages)
    assert MAX_RUN_NS == 2.0**53


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("t.csv", "thread,address,is_write,size_bytes\n18446744073709551616,0x1000,0,64\n",
         "t.csv:2: thread = '18446744073709551616' is not a thread id in 0..2147483647"),
        ("t.csv", "thread,address,is_write,size_bytes\n2147483648,0x1000,0,64\n", "is not a thread id"),
        ("t.csv", "thread,address,is_write,size_bytes\n0,0x10000000000000000,0,64\n",
         "address = '0x10000000000000000' is not an address in 0..2**64-1"),
        ("t.csv", "thread,address,is_write,size_bytes,compute_ns\n0,0x1000,0,64,inf\n",
         "compute_ns = 'inf' is not a time in 0..1e+12 ns"),
        ("t.csv", "thread,address,is_write,size_bytes,compute_ns\n0,0x1000,0,64,1e20\n", "compute_ns = '1e20'"),
        ("t.lackey", " L 1ffffffffffffffff0,8\n", "t.lackey:1: address 1ffffffffffffffff0 is beyond 64 bits"),
        ("t.perf",
         "stream  4711/4712 [003] 11286.409870:  3247 cpu/mem-loads,ldlat=30/P:  1ffffffffffffffff0  6a100142 "
         "|OP LOAD|LVL Local RAM hit|SNP None\n",
         "t.perf:1: data address 1ffffffffffffffff0 is beyond 64 bits"),
    ],
    ids=["csv-thread-2**64", "csv-thread-2**31", "csv-address-2**64", "csv-inf", "csv-1e20", "lackey", "perf"],
)
def test_text_trace_values_beyond_their_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    for argv in (
        ["trace", "info", str(path)],
        ["trace", "convert", str(path), str(tmp_path / "out.npz")],
        ["run", "-m", "seed-003-2node", "-t", str(path), "--no-progress"],
    ):
        assert main(argv) == 2, argv
        assert needle in _one_clear_line(capsys.readouterr().err)
    assert not (tmp_path / "out.npz").exists()


def test_huge_thread_ids_are_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ids.npz"
    thread = np.array([0, MAX_THREAD_ID] * 25, dtype=np.int32)
    write_trace([_chunk(thread=thread)], path)
    info = trace_info(read_trace(path))
    assert info.per_thread == {0: 25, MAX_THREAD_ID: 25}
    assert main(["trace", "info", str(path)]) == 0
    assert f"thread {MAX_THREAD_ID}" in capsys.readouterr().out
    result = tmp_path / "r.json"
    assert main(["run", "-m", "seed-003-2node", "-t", str(path), "--no-progress", "-o", str(result)]) == 0
    threads = json.loads(result.read_text())["threads"]
    assert [t["id"] for t in threads] == [0, MAX_THREAD_ID]


def test_run_trace_gives_one_thread_per_distinct_id() -> None:
    from numasim.workload.run import run_trace

    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    cal = resolve_calibration(machine, nominal=True)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ids.npz"
        write_trace([_chunk(thread=np.array([7, MAX_THREAD_ID] * 25, dtype=np.int32))], path)
        out = run_trace(machine, path, cal, cpus=[0, 2])
    assert [(t.id, t.cpu) for t in out.threads] == [(7, 0), (MAX_THREAD_ID, 2)]
    assert out.result.accesses == 50 and out.inputs["accesses"] == 50


@pytest.mark.parametrize(("value", "needle"), [("inf", "compute_ns"), ("nan", "compute_ns"), ("1e20", "compute_ns")])
def test_workload_compute_ns_out_of_range(value: str, needle: str) -> None:
    text = (ROOT / "examples" / "workloads" / "stream-triad.toml").read_text()
    assert "[[phases]]" in text
    text = text.replace("[[phases]]", "[[phases]]\ncompute_ns = " + value, 1)
    with pytest.raises(WorkloadError, match=needle):
        loads_workload(text, "w.toml")
