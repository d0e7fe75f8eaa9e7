"""``numasim run --plots``: every figure issue 3 asks for is written, an empty run writes what it can without a
matplotlib warning, and the latency axis (log scale) never gets overlapping tick labels."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest

from numasim.cli import main
from numasim.report.run_report import PLOT_FILES, _plain_log_axis, save_run_plots
from numasim.timing.model import nominal_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import RunOutcome, run_workload
from numasim.workload.spec import loads_workload

MINI = """
name = "mini"
threads = [{id = 0, node = 0}, {id = 1, node = 1}]
allocations = [{name = "a", size_bytes = "512K"}, {name = "b", size_bytes = "2M", policy = "bind:1"}]
[[phases]]
pattern = "random"
allocation = "a"
accesses = 1000
[[phases]]
pattern = "random"
allocation = "b"
accesses = 1000
"""
EMPTY = """
name = "empty"
threads = [{id = 0, node = 0}]
allocations = [{name = "a", size_bytes = "4K"}]
[[phases]]
pattern = "sequential"
allocation = "a"
accesses = 0
"""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(text: str) -> RunOutcome:
    m = load_machine("seed-003-2node")
    return run_workload(m, loads_workload(text), nominal_calibration(m), seed=1)


def test_a_run_writes_every_figure_issue_3_asks_for(tmp_path: Path) -> None:
    outcome = _run(MINI)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any matplotlib warning fails the test
        paths = save_run_plots(outcome, tmp_path)
    # every figure but the run-time kernel's (pages over time: only with automatic NUMA balancing)
    assert sorted(p.name for p in paths) == sorted(set(PLOT_FILES) - {"kernel_over_time.png"})
    assert {"initiator_target_heatmap.png", "utilisation_over_time.png", "latency_histograms.png"} <= set(PLOT_FILES)
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(PLOT_FILES) - {"kernel_over_time.png"})  # no temp files left behind


def test_utilisation_over_time_includes_links(tmp_path: Path) -> None:
    outcome = _run(MINI)
    links = [res for res in outcome.result.resources if res.kind != "controller" and res.utilisation_mean >= 0.01]
    assert links, "the run should load a link (thread 0 reads node 1's memory)"
    save_run_plots(outcome, tmp_path)
    assert (tmp_path / "utilisation_over_time.png").stat().st_size > 0


def test_an_empty_run_plots_without_warnings(tmp_path: Path) -> None:
    outcome = _run(EMPTY)
    assert outcome.result.accesses == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No artists with labels found to put in legend" used to leak here
        paths = save_run_plots(outcome, tmp_path)
    assert [p.name for p in paths] == ["bandwidth_per_node.png"]
    assert paths[0].read_bytes()[:8] == PNG_MAGIC


def test_the_cli_reports_the_figures_of_an_empty_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "empty.toml"
    w.write_text(EMPTY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["run", "-m", "seed-003-2node", "-w", str(w), "--nominal", "--plots", str(tmp_path / "p")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "wrote 1 figures" in captured.out and "Warning" not in captured.err


# (30, 1000): matplotlib's own labels (6x10^1, 7x10^1, ...) overlap there at this width
@pytest.mark.parametrize(("lo_ns", "hi_ns"), [(55.0, 140.0), (60.0, 75.0), (30.0, 1000.0), (100.0, 30000.0), (0.5, 20000.0)])
def test_log_latency_axis_labels_do_not_overlap(lo_ns: float, hi_ns: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    fig = Figure(figsize=(6, 3.5), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.geomspace(lo_ns, hi_ns, 50)
    ax.step(x, np.ones_like(x), label="node 0")
    ax.set_xscale("log")
    ax.set_xlim(lo_ns, hi_ns)
    _plain_log_axis(ax)
    canvas.draw()
    assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter)
    renderer = canvas.get_renderer()
    shown = [t for t in ax.get_xticklabels(which="both") if t.get_visible() and t.get_text()
             and lo_ns <= t.get_position()[0] <= hi_ns]
    assert len(shown) >= 1
    boxes = [t.get_window_extent(renderer) for t in shown]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    labels = [t.get_text() for t in shown]
    assert all("times" not in s and "^" not in s for s in labels), labels  # plain numbers, not 6x10^1
