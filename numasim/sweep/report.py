"""What a sweep shows: one figure per metric against a parameter (a line per policy), and an HTML report.

:func:`save_figures` draws each metric of the results table against the sweep's x parameter, one line (mean
over repeats, with their spread) per value of the series parameter (the policy, when the sweep varies it).
:func:`write_report` writes ``report.html``: the sweep's description, the figures embedded as PNG data (the
file is self-contained: mail it, open it anywhere), the table of every run, and the failures with their errors.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numasim.fileio import atomic_write_text, save_figure

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_METRICS", "save_figures", "write_report", "figure_for"]

DEFAULT_METRICS = ("run_time_ms", "accesses_per_us", "memory_latency_mean_ns", "load_to_use_mean_ns", "local_fraction")
"""The metrics drawn unless asked otherwise (each present in every successful run's row)."""

_LABELS = {
    "run_time_ms": "run time (ms)",
    "accesses_per_us": "accesses per µs",
    "memory_latency_mean_ns": "memory request latency, mean (ns)",
    "load_to_use_mean_ns": "load-to-use latency, mean (ns)",
    "local_fraction": "share of memory accesses that are local",
}


def _series_key(table: pd.DataFrame, x: str) -> str | None:
    for key in ("policy", "machine", "workload", "trace", "label", "sysctl", "calibration"):
        if key != x and key in table.columns and table[key].nunique(dropna=False) > 1:
            return key
    return None


def _x_values(table: pd.DataFrame, x: str) -> tuple[list[Any], bool]:
    import pandas as pd

    values = table[x]
    numeric = pd.api.types.is_numeric_dtype(values)
    order = sorted(values.dropna().unique().tolist(), key=lambda v: (isinstance(v, str), v))
    return order, bool(numeric)


def figure_for(table: pd.DataFrame, metric: str, x: str) -> Any:
    """One metric against ``x``: a line per series value, the mean over repeats with its min-max spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[(table["status"] == "ok") & table[metric].notna()]
    series = _series_key(ok, x)
    order, numeric = _x_values(ok, x)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if series is not None:
        ok = ok.assign(**{series: ok[series].astype(object).where(ok[series].notna(), "(none)")})
    groups = [(None, ok)] if series is None else list(ok.groupby(series, sort=False))
    for name, g in groups:
        stats = g.groupby(x)[metric].agg(["mean", "min", "max"])
        stats = stats.reindex([v for v in order if v in stats.index])
        pos = list(stats.index) if numeric else [order.index(v) for v in stats.index]
        ax.plot(pos, stats["mean"], marker="o", label=str(name) if name is not None else metric)
        if (stats["max"] > stats["min"]).any():
            ax.fill_between(pos, stats["min"], stats["max"], alpha=0.2)
    if not numeric:
        ax.set_xticks(range(len(order)), [str(v)[:24] for v in order], rotation=20, ha="right")
    ax.set_xlabel(x)
    ax.set_ylabel(_LABELS.get(metric, metric))
    ax.grid(True, alpha=0.3)
    if series is not None:
        ax.legend(title=series, fontsize="small")
    ax.set_title(f"{_LABELS.get(metric, metric)} vs {x}")
    fig.tight_layout()
    return fig


def save_figures(
    table: pd.DataFrame, directory: str | Path, *, x: str = "threads", metrics: tuple[str, ...] = DEFAULT_METRICS,
    fmt: str = "png",
) -> list[Path]:
    """Write one figure per metric (``<metric>_vs_<x>.<fmt>``) into ``directory``; returns the files written.
    Nothing is drawn when no run succeeded or ``x`` is not a column."""
    if "status" not in table.columns or x not in table.columns or not (table["status"] == "ok").any():
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for metric in metrics:
        if metric not in table.columns:
            continue
        path = directory / f"{metric}_vs_{x.replace('.', '_')}.{fmt}"
        save_figure(figure_for(table, metric, x), path)
        out.append(path)
    return out


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def write_report(directory: str | Path, *, x: str | None = None, metrics: tuple[str, ...] = DEFAULT_METRICS) -> Path:
    """Write ``report.html`` into a sweep's results directory (figures embedded, every run tabled, failures
    listed) and the figures as PNG files beside it; returns the report's path."""
    from numasim.sweep.runner import SPEC_FILE, results_table
    from numasim.sweep.spec import SweepError, SweepSpec

    directory = Path(directory)
    spec_file = directory / SPEC_FILE
    if not spec_file.is_file():
        raise SweepError(f"{directory}: not a sweep's results directory (no {SPEC_FILE}; run `numasim sweep` first)")
    spec = SweepSpec.model_validate(json.loads(spec_file.read_text(encoding="utf-8")))
    table = results_table(directory, spec.expand())
    asked = x is not None
    x = x or spec.x_parameter()
    if asked and x not in table.columns:
        raise SweepError(f"--x {x}: not a column of the results (columns: {', '.join(map(str, table.columns))})")
    if x not in table.columns:  # the default axis is a metric: absent when no run succeeded
        metrics = ()
    save_figures(table, directory / "figures", x=x, metrics=metrics)
    ok = table[table["status"] == "ok"]
    failed = table[table["status"] != "ok"]
    figures = "".join(
        f'<figure><img alt="{html.escape(m)} vs {html.escape(x)}" src="data:image/png;base64,{_png(figure_for(table, m, x))}">'
        f"<figcaption>{html.escape(_LABELS.get(m, m))} against {html.escape(x)}</figcaption></figure>"
        for m in metrics if m in table.columns and len(ok) and x in table.columns
    )  # fmt: skip
    shown = [c for c in table.columns if c not in ("error",)]
    rows = table[shown].to_html(index=False, na_rep="", float_format=lambda v: f"{v:.4g}", border=0, classes="runs")
    fails = (
        "<p>None.</p>" if failed.empty else
        "<ul>" + "".join(f"<li><code>{html.escape(str(r.run_id))}</code> ({html.escape(str(r.status))}): "
                         f"{html.escape(str(r.error))}</li>" for r in failed.itertuples()) + "</ul>"
    )  # fmt: skip
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>numasim sweep: {html.escape(spec.name)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 80em; }}
figure {{ display: inline-block; margin: 0.5em; }} img {{ max-width: 40em; }}
table.runs {{ border-collapse: collapse; font-size: small; }}
table.runs td, table.runs th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
</style>
<script>
// for a headless browser's check: every figure decoded (tests/sweep/test_report_browser.py)
window.addEventListener("load", () => {{
  document.body.dataset.imagesOk = String([...document.images].every(i => i.complete && i.naturalWidth > 0));
}});
</script></head><body>
<h1>Sweep {html.escape(spec.name)}</h1>
<p>{html.escape(spec.description)}</p>
<p id="summary">{len(table)} runs: {len(ok)} ok, {len(failed)} failed or missing.</p>
<h2>Figures</h2>
{figures or "<p>No successful run to draw.</p>"}
<h2>Failures</h2>
{fails}
<h2>Every run</h2>
{rows}
</body></html>
"""
    path = directory / "report.html"
    atomic_write_text(path, page)
    return path
