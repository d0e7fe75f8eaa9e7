"""Same seed, same bytes: every file numasim writes for a run or a trace is byte-identical across two runs.

Each test runs the command twice in-process and compares the files byte for byte. The second run of a trace
writer runs with the clock zipfile reads moved ten years on, so a timestamp that leaked into a file would show
even when both runs fall in one second.
"""

from __future__ import annotations

import importlib.util
import time
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from numasim.cli import main

WORKLOAD = """
name = "mini"
threads = [{id = 0, node = 0}, {id = 1, node = 1}]
allocations = [{name = "a", size_bytes = "512K"}, {name = "b", size_bytes = "512K", policy = "interleave:0-1"}]
[[phases]]
pattern = "random"
allocation = "a"
accesses = 1500
write_fraction = 0.25
[[phases]]
pattern = "zipf"
allocation = "b"
accesses = 800
"""

TEN_YEARS_S = 10 * 365 * 86400


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def later_clock(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """Call ``.on()`` to move the clock zipfile stamps members with ten years on."""
    fake = types.SimpleNamespace(time=lambda: time.time() + TEN_YEARS_S, localtime=time.localtime)
    return types.SimpleNamespace(on=lambda: monkeypatch.setattr(zipfile, "time", fake))


def test_run_outputs_are_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    stdout = []
    for run in ("one", "two"):
        d = tmp_path / run
        code = main(["run", "-m", "seed-003-2node", "-w", str(w), "--nominal", "--seed", "7",
                     "-o", str(d / "result.json"), "--csv", str(d / "csv"), "--plots", str(d / "plots")])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "wall time" in captured.err and "wall" not in captured.out  # the wall time goes to stderr only
        stdout.append(captured.out.replace(str(d), "DIR"))
    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert "result.json" in one and "csv/nodes.csv" in one and any(k.startswith("plots/") for k in one)
    assert one == two
    assert b"wall" not in one["result.json"]
    assert stdout[0] == stdout[1]


def test_no_progress_leaves_the_wall_time_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    assert main(["run", "-m", "seed-003-2node", "-w", str(w), "--nominal", "--no-progress"]) == 0
    assert "wall" not in capsys.readouterr().err


def test_a_different_seed_changes_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The identity above is not vacuous: the seed reaches the bytes.
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    for seed in ("1", "2"):
        assert main(["run", "-m", "seed-003-2node", "-w", str(w), "--nominal", "--seed", seed,
                     "-o", str(tmp_path / f"{seed}.json")]) == 0
    assert (tmp_path / "1.json").read_bytes() != (tmp_path / "2.json").read_bytes()


def test_trace_generate_npz_is_byte_identical_and_loads_with_numpy(
    tmp_path: Path, later_clock: types.SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    assert main(["trace", "generate", "-w", str(w), "--seed", "3", "-o", str(tmp_path / "a.npz")]) == 0
    later_clock.on()
    assert main(["trace", "generate", "-w", str(w), "--seed", "3", "-o", str(tmp_path / "b.npz")]) == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with np.load(tmp_path / "a.npz") as npz:  # still an ordinary npz
        assert npz["c000000.address"].dtype == np.uint64
        assert sum(len(npz[k]) for k in npz.files if k.endswith(".thread")) == 4600  # 2 threads x 2300
    with zipfile.ZipFile(tmp_path / "a.npz") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.testzip() is None


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_trace_convert_is_byte_identical(
    tmp_path: Path, suffix: str, later_clock: types.SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src.npz"
    assert main(["trace", "generate", "--pattern", "random", "--size", "1M", "--accesses", "3000", "--threads", "2",
                 "-o", str(src)]) == 0
    outs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        out = tmp_path / name / f"t{suffix}"
        assert main(["trace", "convert", str(src), str(out)]) == 0
        outs.append(out.read_bytes())
        later_clock.on()
    assert outs[0] == outs[1]


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="Parquet is optional (needs pyarrow)")
def test_parquet_trace_is_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        out = tmp_path / name / "t.parquet"
        assert main(["trace", "generate", "--pattern", "zipf", "--size", "1M", "--accesses", "2000", "-o", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert main(["trace", "convert", str(tmp_path / "a" / "t.parquet"), str(tmp_path / "back.npz")]) == 0
