"""``numasim trace convert | info | generate``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numasim.cli import main
from numasim.workload.access import concat_chunks
from numasim.workload.trace import read_trace
from numasim.workload.trace.npz import read_npz_header

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"

WORKLOAD = """
name = "mini"
threads = [{id = 0, cpu = 0}, {id = 1, cpu = 1}]
allocations = [{name = "a", size_bytes = "256K", policy = "interleave:0-1"}]
[[phases]]
pattern = "random"
allocation = "a"
accesses = 2000
write_fraction = 0.5
"""


def test_generate_from_workload_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    for name in ("a.npz", "b.npz"):
        assert main(["trace", "generate", "--workload", str(w), "--seed", "5", "-o", str(tmp_path / name)]) == 0
    a = concat_chunks(read_trace(tmp_path / "a.npz"))
    b = concat_chunks(read_trace(tmp_path / "b.npz"))
    assert len(a) == 4000 and np.array_equal(a.address, b.address)
    assert read_npz_header(tmp_path / "a.npz")["meta"]["seed"] == 5
    assert "wrote 4000 accesses" in capsys.readouterr().out


def test_generate_pattern_and_info_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "z.csv"
    assert main(["trace", "generate", "--pattern", "zipf", "--size", "1M", "--accesses", "500", "--threads", "2", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["trace", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["accesses"] == 1000 and info["threads"] == 2 and info["per_thread"] == {"0": 500, "1": 500}


def test_convert_perf_to_npz_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.npz"
    assert main(["trace", "convert", str(DATA / "perf_mem_sample.txt"), str(out), "--levels", "local_ram,remote_ram"]) == 0
    capsys.readouterr()
    assert main(["trace", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "accesses         3" in text and "threads          3" in text


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "info", str(DATA / "malformed.csv")]) == 2
    err = capsys.readouterr().err
    assert "malformed.csv:3" in err and "Traceback" not in err
    assert main(["trace", "generate", "-o", str(tmp_path / "x.npz")]) == 2
    assert "exactly one of --workload" in capsys.readouterr().err
    assert main(["trace", "generate", "--pattern", "spiral", "-o", str(tmp_path / "x.npz")]) == 2
    assert "--pattern = 'spiral'" in capsys.readouterr().err
    assert main(["trace", "convert", str(DATA / "lackey_malformed.txt"), str(tmp_path / "y.npz")]) == 2
    assert "lackey_malformed.txt:4" in capsys.readouterr().err
    assert not (tmp_path / "y.npz").exists() and not (tmp_path / "x.npz").exists()
    assert main(["trace", "info", str(tmp_path / "missing.npz")]) == 2
    assert "no such file" in capsys.readouterr().err
