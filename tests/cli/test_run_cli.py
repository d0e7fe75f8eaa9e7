"""``numasim run``: workload and trace runs, outputs, comparisons and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.io import save_machine_toml

WORKLOAD = """
name = "mini"
threads = [{id = 0, node = 0}, {id = 1, node = 1}]
allocations = [{name = "a", size_bytes = "512K"}, {name = "b", size_bytes = "512K", policy = "bind:1"}]
[[phases]]
pattern = "random"
allocation = "a"
accesses = 1000
write_fraction = 0.25
[[phases]]
pattern = "sequential"
allocation = "b"
accesses = 500
"""


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    p = tmp_path / "w.toml"
    p.write_text(WORKLOAD)
    return p


def test_run_workload_outputs(tmp_path: Path, workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["run", "--machine", "seed-003-2node", "--workload", str(workload), "--nominal", "--seed", "4",
                 "-o", str(out), "--csv", str(tmp_path / "csv"), "--plots", str(tmp_path / "plots")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = captured.out
    for needle in ("per node (target memory)", "numastat", "numa_hit", "calibration", "(nominal)", "pages per allocation"):
        assert needle in text
    assert "nominal calibration" in captured.err  # said out loud, never silent
    result = json.loads(out.read_text())
    assert result["seed"] == 4 and result["workload"] == "mini"
    assert result["placement"]["pages_by_allocation"]["b"] == {"1": 128}
    assert (tmp_path / "csv" / "node_costs.csv").read_text().startswith("node,pages,accesses")
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) >= ["bandwidth_per_node.png"]


def test_run_policy_and_compare(workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload), "--nominal", "--policy", "interleave:0-1"]) == 0
    assert "policy       interleave:0-1" in capsys.readouterr().out
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload), "--nominal",
                 "--compare", "local", "--compare", "bind:1"]) == 0
    text = capsys.readouterr().out
    assert "remote_pct" in text and "bind:1" in text and "local" in text


def test_run_trace(tmp_path: Path, workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.npz"
    assert main(["trace", "generate", "--workload", str(workload), "-o", str(trace)]) == 0
    assert main(["run", "-m", "seed-003-2node", "--trace", str(trace), "--nominal", "--cpus", "0,12"]) == 0
    text = capsys.readouterr().out
    assert "accesses     3000" in text and "t.npz" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--machine", "M", "--workload", "W"], "names no calibration"),
        (["--workload", "W", "--nominal", "--mode", "fast"], "--mode = 'fast'"),
        (["--nominal"], "exactly one of --workload"),
        (["--workload", "W", "--nominal", "--policy", "bind:9"], "EINVAL"),
        (["--trace", "nope.npz", "--nominal"], "no such file"),
    ],
)
def test_run_errors(tmp_path: Path, workload: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    save_machine_toml(glueless(2), tmp_path / "m.toml")  # a machine that names no calibration
    names = {"W": str(workload), "nope.npz": str(tmp_path / "nope.npz"), "M": str(tmp_path / "m.toml")}
    args = [names.get(a, a) for a in args]
    out = tmp_path / "never.json"
    machine = [] if "--machine" in args else ["-m", "seed-003-2node"]
    assert main(["run", *machine, *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_run_uses_the_machines_named_calibration(workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload)]) == 0
    captured = capsys.readouterr()
    assert "nominal calibration" not in captured.err
    line = next(x for x in captured.out.splitlines() if x.startswith("calibration"))
    assert "seed-003-2node" in line and "(nominal)" not in line


def test_run_with_catalog_priors(workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--catalog: timed with the platform catalog's priors for the machine's cpu (no measurement), said so."""
    code = main(["run", "-m", "skylake-8180-2s", "-w", str(workload), "--catalog", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "(catalog)" in captured.out and "catalog calibration" in captured.err
    assert "intel-skylake-sp" in captured.err
    code = main(["run", "-m", "seed-003-2node", "-w", str(workload), "--catalog", "--nominal"])
    assert code == 2 and "not --nominal and --catalog" in capsys.readouterr().err
    # a machine that names no processor: the catalog cannot be asked, and the error says how to name one
    code = main(["run", "-m", "seed-003-2node", "-w", str(workload), "--catalog"])
    err = capsys.readouterr().err
    assert code == 2 and "cpu" in err.lower()


def test_numactl_with_catalog_priors(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["numactl", "--machine", "seed-001-e5-2680v2", "--catalog", "--membind=1", "--",
                 "lat_mem_rd", "64", "64"])
    captured = capsys.readouterr()
    assert code == 0, captured.err


def test_compare_writes_every_output_per_policy_and_takes_traces(tmp_path: Path, workload: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload), "--nominal", "--compare", "local",
                 "--compare", "interleave:0-1", "-o", str(out), "--csv", str(tmp_path / "csv"),
                 "--plots", str(tmp_path / "plots")]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert "policy 2/2: interleave:0-1" in captured.err
    doc = json.loads(out.read_text())
    assert [r["policy"] for r in doc["comparison"]] == ["local", "interleave:0-1"]
    assert [r["policy"] for r in doc["runs"]] == ["local", "interleave:0-1"]
    assert (tmp_path / "csv" / "comparison.csv").read_text().startswith("policy,run_time_ns")
    assert (tmp_path / "csv" / "interleave_0-1" / "node_costs.csv").exists()
    assert (tmp_path / "plots" / "local" / "bandwidth_per_node.png").exists()
    trace = tmp_path / "t.npz"
    assert main(["trace", "generate", "--workload", str(workload), "-o", str(trace)]) == 0
    assert main(["run", "-m", "seed-003-2node", "-t", str(trace), "--nominal", "--cpus", "0,12",
                 "--compare", "local", "--compare", "bind:1"]) == 0  # fmt: skip
    assert "bind:1" in capsys.readouterr().out
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload), "--nominal", "--policy", "local",
                 "--compare", "bind:1"]) == 2  # fmt: skip
    assert "--policy and --compare" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "says"), [("5=1G", "page cache of node 5: no such node"),
                                             ("0=100G", "more than the node's memory in use"),
                                             ("x", "--page-cache 'x': expected NODE=SIZE")])
def test_run_refuses_a_page_cache_the_machine_cannot_hold(workload: Path, value: str, says: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-m", "seed-003-2node", "-w", str(workload), "--nominal", "--page-cache", value]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_memory_side_cache_is_said_not_timed(tmp_path: Path, workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Memory Mode: node 1's memory behind a DRAM cache the engine does not time; the run says so, on stderr and in
    # the result, and times the node as before
    m = glueless(2)
    cached = m.model_copy(update={"nodes": [m.nodes[0], m.nodes[1].model_copy(update={"memory_side_cache_bytes": 2**30})]})
    results = []
    for name, machine in (("plain", m), ("cached", cached)):
        save_machine_toml(machine, tmp_path / f"{name}.toml")
        out = tmp_path / f"{name}.json"
        assert main(["run", "-m", str(tmp_path / f"{name}.toml"), "-w", str(workload), "--nominal", "-o", str(out)]) == 0
        err = capsys.readouterr().err
        assert ("note: nodes [1] sit behind memory-side caches" in err) == (name == "cached")
        results.append(json.loads(out.read_text()))
    assert "not_modelled" not in results[0]
    assert results[1]["not_modelled"] == {"memory_side_cache_bytes": {"1": 2**30}}
    assert results[1]["result"] == results[0]["result"]
