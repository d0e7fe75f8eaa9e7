"""The utilisation-over-time figure is readable: a resource x time heatmap of window means (issue 13)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from numasim.engine.plots import UTILISATION_WINDOWS, smooth_utilisation, utilisation_over_time
from numasim.report.run_report import save_run_plots
from numasim.timing.model import nominal_calibration
from numasim.topology.io import load_machine
from numasim.workload.run import run_workload
from numasim.workload.spec import load_workload

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STREAM = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "stream.toml"


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 400), st.integers(1, 5)), elements=st.floats(0, 1)),
    st.integers(1, 200),
)
def test_window_means_conserve_the_busy_time(util: np.ndarray, max_windows: int) -> None:
    windows, window_ns = smooth_utilisation(util, 1000.0, max_windows)
    k = round(window_ns / 1000.0)
    assert windows.shape == (-(-util.shape[0] // k), util.shape[1]) and windows.shape[0] <= max_windows
    # full windows times k, plus the last window times its bucket count, give back every bucket's utilisation
    last = util.shape[0] - k * (windows.shape[0] - 1)
    total = windows[:-1].sum(axis=0) * k + windows[-1] * last
    np.testing.assert_allclose(total, util.sum(axis=0), rtol=1e-9, atol=1e-9)
    assert windows.min() >= util.min() - 1e-12 and windows.max() <= util.max() + 1e-12


def test_utilisation_figure_is_a_heatmap_of_window_means(tmp_path: Path) -> None:
    machine = load_machine("seed-000-4node")
    outcome = run_workload(machine, load_workload(STREAM), nominal_calibration(machine), policy="interleave:0-3")
    r = outcome.result
    fig = utilisation_over_time(r)
    ax = fig.axes[0]
    assert all(len(line.get_xdata()) == 2 for line in ax.get_lines())  # no series: only the separator
    (image,) = ax.get_images()
    shown = [res for res in r.resources if res.utilisation_mean >= 0.01]
    data = np.asarray(image.get_array())
    assert data.shape[0] == len(shown) >= 12  # every used controller and link, one row each
    assert 1 < data.shape[1] <= UTILISATION_WINDOWS
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:4] == ["mc0", "mc1", "mc2", "mc3"]  # controllers first
    windows, window_ns = smooth_utilisation(np.asarray(r.utilisation), r.utilisation_bucket_ns)
    row = [res.name for res in r.resources].index("mc0")
    np.testing.assert_allclose(data[0], windows[:, row])
    assert f"mean over {window_ns / 1000:.3g} us windows" in ax.get_title()
    # the raw series swings much more than the window means: that swing was the tangle
    raw = np.asarray(r.utilisation)[:, row]
    assert np.abs(np.diff(data[0])).mean() < 0.5 * np.abs(np.diff(raw)).mean()
    # rendered to PNG by --plots
    paths = save_run_plots(outcome, tmp_path)
    png = tmp_path / "utilisation_over_time.png"
    assert png in paths and png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000
