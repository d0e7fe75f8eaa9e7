"""Sweeps (numasim/sweep): the spec, the runs on a process pool and on a real Dask LocalCluster, resume, failures,
the table, the figures and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from numasim.cli import main
from numasim.sweep import SweepError, load_sweep, loads_sweep, run

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "examples" / "sweeps"
SMALL = [{"name": n, "size_bytes": "256K", "first_touch": 0} for n in "abc"]


def _spec(tmp_path: Path, extra: str = "", grid: str = 'policy = ["local", "interleave:all"]') -> Path:
    (tmp_path / "triad.toml").write_text((SWEEPS / "triad.toml").read_text())
    allocations = ", ".join(f'{{name = "{a["name"]}", size_bytes = "256K", first_touch = 0}}' for a in SMALL)
    text = f'''name = "t"
{extra}
[defaults]
machine = "seed-003-2node"
workload = "triad.toml"
calibration = "nominal"
"workload.allocations" = [{allocations}]
[grid]
{grid}
'''
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


# --- the spec ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('name = "x"', "the sweep has no runs"),
        ('name = "x"\n[grid]\npolicy = ["local"]', "run 1 (policy='local'): no machine"),
        ('name = "x"\n[grid]\nmachine = ["m"]', "give exactly one of workload and trace"),
        ('name = "x"\n[grid]\nmachin = ["m"]', "grid: unknown key 'machin'"),
        ('name = "x"\n[grid]\npolicy = []', "grid.policy = []: a grid key needs at least one value"),
        ('name = "x"\n[defaults]\nseed = -1', "defaults.seed = -1: expected an integer >= 0"),
        ('name = "x"\n[defaults]\nmode = "fast"', "defaults.mode = 'fast': expected \"epoch\" or \"exact\""),
        ('name = "x"\nrepeats = 0\n[defaults]\nmachine = "m"\nworkload = "w"', "repeats"),
        ('name = "x"\n[[runs]]\nmachine = "m"\ntrace = "t"\n"workload.threads" = []', "overrides need a workload"),
        ("name = ", "not valid TOML"),
    ],
)
def test_bad_specs_name_the_field_and_value(text: str, says: str) -> None:
    with pytest.raises(SweepError, match=None) as err:
        loads_sweep(text, "s.toml")
    assert says in str(err.value) and str(err.value).startswith("s.toml: ")


def test_grid_runs_and_repeats_expand_in_order() -> None:
    spec = loads_sweep('''name = "x"
repeats = 2
[defaults]
machine = "m"
workload = "w.toml"
seed = 10
[grid]
policy = ["local", "bind:0"]
[[runs]]
policy = "interleave:all"
''')
    runs = spec.expand()
    assert [(r["policy"], r["seed"]) for r in runs] == [
        ("local", 10), ("local", 11), ("bind:0", 10), ("bind:0", 11), ("interleave:all", 10), ("interleave:all", 11)]
    assert spec.x_parameter() == "threads"


# --- running ---------------------------------------------------------------------------------------------------
def test_a_sweep_on_the_process_pool_gives_one_table_and_figures(tmp_path: Path) -> None:
    t = run(_spec(tmp_path, grid='policy = ["local", "interleave:all"]\nseed = [0, 1]'), tmp_path / "r", processes=2)
    directory = t.attrs["directory"]
    assert list(t["policy"]) == ["local", "local", "interleave:all", "interleave:all"] and (t["status"] == "ok").all()
    # the same run through `numasim run` gives the same result
    res = json.loads((directory / "runs" / t.run_id[2] / "result.json").read_text())
    assert res["policy"] == "interleave:all" and res["result"]["run_time_ns"] / 1e6 == pytest.approx(t.run_time_ms[2])
    assert t.pages_node0[0] == 192 and t.pages_node1[0] == 0  # local: thread 0 on node 0 touched every page
    assert t.pages_node0[2] == t.pages_node1[2] == 96
    assert t.memory_latency_mean_ns.notna().all() and t.load_to_use_mean_ns.notna().all()  # a node with no misses
    on_disk = pd.read_parquet(directory / "results.parquet")
    assert list(on_disk.columns) == list(t.columns) and len(pd.read_csv(directory / "results.csv")) == 4
    assert sorted(p.name for p in (directory / "figures").iterdir())[0] == "accesses_per_us_vs_threads.png"


def test_the_same_sweep_on_a_dask_local_cluster_gives_the_same_table(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    pool = run(spec, tmp_path / "pool", processes=1, figures=False)
    dask = run(spec, tmp_path / "dask", workers=2, figures=False)
    cols = ["run_id", "policy", "status", "run_time_ms", "accesses", "memory_latency_mean_ns"]
    pd.testing.assert_frame_equal(pool[cols], dask[cols])


def test_resume_redoes_nothing_that_finished_and_failures_are_recorded(tmp_path: Path) -> None:
    path = _spec(tmp_path, grid='policy = ["local", "bind:7"]')  # node 7 does not exist: that run fails
    t = run(path, tmp_path / "r", processes=1, figures=False)
    assert list(t["status"]) == ["ok", "failed"] and "node" in t.error[1]
    assert (tmp_path / "r" / "runs" / t.run_id[1] / "error.json").exists()
    ok_file = tmp_path / "r" / "runs" / t.run_id[0] / "result.json"
    stamp = ok_file.stat().st_mtime_ns
    again = run(path, tmp_path / "r", processes=1, resume=True, figures=False)
    assert again.attrs["skipped"] == 1 and again.attrs["ran"] == 1 and ok_file.stat().st_mtime_ns == stamp
    with pytest.raises(SweepError, match="holds a sweep already; add --resume"):
        run(path, tmp_path / "r", processes=1)
    (tmp_path / "o").mkdir()
    other = _spec(tmp_path / "o", grid='policy = ["local"]')
    with pytest.raises(SweepError, match="holds another sweep"):
        run(other, tmp_path / "r", processes=1, resume=True)


def test_a_run_that_never_finished_is_missing_from_the_table_and_resume_runs_it(tmp_path: Path) -> None:
    path = _spec(tmp_path)
    t = run(path, tmp_path / "r", processes=1, figures=False)
    gone = tmp_path / "r" / "runs" / t.run_id[1]
    for f in gone.iterdir():
        f.unlink()  # as if the sweep had been killed before this run finished
    spec = load_sweep(path)
    from numasim.sweep import results_table

    assert list(results_table(tmp_path / "r", spec.expand())["status"]) == ["ok", "missing"]
    again = run(path, tmp_path / "r", processes=1, resume=True, figures=False)
    assert again.attrs["ran"] == 1 and list(again["status"]) == ["ok", "ok"]


def test_cli_sweep_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _spec(tmp_path, extra='description = "two policies"')
    assert main(["sweep", str(path), "-o", str(tmp_path / "r"), "--processes", "1", "--no-progress"]) == 0
    assert "2 runs in" in capsys.readouterr().out
    assert main(["sweep", "report", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<h1>Sweep t</h1>" in page and "two policies" in page and page.count("data:image/png;base64,") == 5
    assert '2 runs: 2 ok, 0 failed or missing.' in page
    assert main(["sweep", "report", str(tmp_path)]) == 2
    assert "not a sweep's results directory" in capsys.readouterr().err
    bad = _spec(tmp_path, grid='policy = ["local", "bind:7"]')
    assert main(["sweep", str(bad), "-o", str(tmp_path / "b"), "--processes", "1", "--no-progress"]) == 1
    assert "failed" in capsys.readouterr().err
    assert main(["sweep", str(path), "-o", str(tmp_path / "c"), "--workers", "1", "--scheduler", "tcp://x:1"]) == 2
    assert "not both" in capsys.readouterr().err


def test_the_shipped_example_sweeps_are_valid() -> None:
    for f in [*SWEEPS.glob("*.toml"), *ROOT.glob("experiments/*/sweep.toml")]:
        if f.name != "triad.toml":  # the workload the sweeps use
            spec = load_sweep(f)
            for config in spec.expand():
                assert spec.path(config["workload"]).is_file(), (f, config["workload"])


def test_a_running_dask_cluster_takes_the_sweep_by_its_address(tmp_path: Path) -> None:
    """--scheduler ADDRESS: a cluster started elsewhere (here a LocalCluster of 2 workers standing for `dask
    scheduler` + `dask worker`), and a clear error for an address where nothing listens."""
    from distributed import LocalCluster

    spec = _spec(tmp_path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        t = run(spec, tmp_path / "r", scheduler=cluster.scheduler_address, figures=False)
    assert list(t["status"]) == ["ok", "ok"]
    with pytest.raises(SweepError, match="cannot reach a Dask scheduler there"):
        run(spec, tmp_path / "r2", scheduler="tcp://127.0.0.1:9", figures=False)


def test_problems_a_run_would_hit_are_found_before_anything_runs(tmp_path: Path) -> None:
    for grid, says in (('"workload.phases.5.accesses" = [10]', "run 1: workload.phases.5.accesses: '5' is not an index"),
                       ('machine = ["no-such-box"]', "run 1: "),
                       ('"workload.threads" = [[{count = 0, node = 0}]]', "run 1: "),
                       ('calibration = ["missing.json"]', "calibration = 'missing.json': no such file")):  # fmt: skip
        path = _spec(tmp_path, grid=grid)
        with pytest.raises(SweepError, match=None) as err:
            run(path, tmp_path / "never", processes=1)
        assert says in str(err.value), str(err.value)
        assert not (tmp_path / "never").exists()


def test_a_run_listed_twice_runs_twice_and_gaps_stay_missing_in_the_table(tmp_path: Path) -> None:
    path = _spec(tmp_path, grid='policy = ["local"]')
    text = path.read_text() + '[[runs]]\npolicy = "interleave:all"\ntlb = true\n[[runs]]\npolicy = "interleave:all"\ntlb = true\n'
    path.write_text(text)
    t = run(path, tmp_path / "r", processes=1, figures=False)
    assert list(t["policy"]) == ["local", "interleave:all", "interleave:all"] and (t["status"] == "ok").all()
    assert t.run_id[2] == t.run_id[1] + "-2"
    back = pd.read_parquet(tmp_path / "r" / "results.parquet")
    assert back["tlb"].isna()[0] and bool(back["tlb"][1]) is True  # a bool column with a gap, not "nan" text
    assert back["workload.allocations"][0].startswith("[{")  # tables and lists as JSON text


def test_ctrl_c_stops_the_sweep_and_resume_finishes_it(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) to the sweep's process group: the runs not started are cancelled, the finished ones stay,
    and --resume runs only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "r"
    cmd = [str(Path(sys.executable).parent / "numasim"), "sweep", str(SWEEPS / "triad-policies.toml"), "-o", str(out),
           "--processes", "1", "--no-progress"]  # fmt: skip
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("runs/*/row.json"))) < 2:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=60) != 0
    done = len(list(out.glob("runs/*/row.json")))
    assert 2 <= done < 16
    t = run(SWEEPS / "triad-policies.toml", out, processes=2, resume=True, figures=False)
    assert t.attrs["skipped"] >= 2 and (t["status"] == "ok").all() and len(t) == 16


def test_review_findings_stay_fixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report when no run succeeded; --resume whatever the spec path's spelling; a plug-in policy file beside
    the sweep file; a narrower workload override winning over a broader one; unlabelled runs drawn as a line."""
    from numasim.sweep import results_table, write_report
    from numasim.sweep.report import figure_for

    failing = _spec(tmp_path, grid='policy = ["bind:7"]')
    run(failing, tmp_path / "f", processes=1)
    page = write_report(tmp_path / "f").read_text()
    assert "No successful run to draw" in page and "1 runs: 0 ok, 1 failed or missing." in page
    path = _spec(tmp_path)
    run(path, tmp_path / "r", processes=1, figures=False)
    monkeypatch.chdir(tmp_path)
    again = run("sweep.toml", tmp_path / "r", processes=1, resume=True, figures=False)  # another spelling
    assert again.attrs["skipped"] == 2
    (tmp_path / "mypol.py").write_text((ROOT / "policies" / "fill_local_then_spread.py").read_text())
    monkeypatch.chdir(ROOT)
    t = run(_spec(tmp_path, grid='policy = ["mypol.py:threshold=0.5"]'), tmp_path / "p", processes=1, figures=False)
    assert list(t["status"]) == ["ok"], t.error[0]
    over = _spec(tmp_path, grid='"workload.phases" = [[{name = "triad", pattern = "stream_triad", passes = 1, split = true}]]')
    over.write_text(over.read_text().replace("[grid]", '"workload.phases.0.passes" = 3\n[grid]'))
    (tmp_path / "o1").mkdir()
    once = run(_spec(tmp_path / "o1", grid="seed = [0]"), tmp_path / "o1r", processes=1, figures=False)
    thrice = run(over, tmp_path / "o", processes=1, figures=False)
    assert thrice.accesses[0] == 3 * once.accesses[0]
    table = results_table(tmp_path / "r")
    table = pd.concat([table, table.assign(label="tuned", run_time_ms=table.run_time_ms * 2)], ignore_index=True)
    fig = figure_for(table, "run_time_ms", "policy")
    assert len(fig.axes[0].get_lines()) == 2
