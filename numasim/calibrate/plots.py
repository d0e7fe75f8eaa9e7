"""Validation figures: measured-vs-simulated heatmaps for node x node tables, curves for loaded latency and for
bandwidth versus active cores, and a measured-vs-simulated scatter for anything else. PNG files, written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from numasim.calibrate.validate import TableValidation, ValidationReport
from numasim.fileio import save_figure

__all__ = ["plot_table", "plot_report"]


def _matrix(t: TableValidation) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    rows = list(dict.fromkeys(c.row for c in t.cells))
    cols = list(dict.fromkeys(c.col for c in t.cells))
    meas = np.full((len(rows), len(cols)), np.nan)
    sim = np.full_like(meas, np.nan)
    for c in t.cells:
        meas[rows.index(c.row), cols.index(c.col)] = c.measured
        sim[rows.index(c.row), cols.index(c.col)] = c.model
    return rows, cols, meas, sim


def plot_table(t: TableValidation, path: str | Path, title: str = "") -> Path:
    """One figure for one validated table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = Path(path)
    unit = t.cells[0].unit if t.cells else ""
    if t.table in ("latency_matrix", "bandwidth_matrix"):
        rows, cols, meas, sim = _matrix(t)
        err = 100.0 * (sim - meas) / meas
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
        lo, hi = np.nanmin([meas, sim]), np.nanmax([meas, sim])
        for ax, data, name, cmap, (vmin, vmax) in (
            (axes[0], meas, f"measured ({unit})", "viridis", (lo, hi)),
            (axes[1], sim, f"simulated ({unit})", "viridis", (lo, hi)),
            (axes[2], err, "error (%)", "coolwarm", (-max(1.0, np.nanmax(np.abs(err))), max(1.0, np.nanmax(np.abs(err))))),
        ):
            im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax)
            ax.set_xticks(range(len(cols)), cols)
            ax.set_yticks(range(len(rows)), rows)
            ax.set_xlabel("target node")
            ax.set_ylabel("initiator node")
            ax.set_title(name)
            span = (vmax - vmin) or 1.0
            for (i, j), v in np.ndenumerate(data):
                if np.isfinite(v):
                    # dark text on the bright end of viridis, light text on its dark end
                    light = cmap == "viridis" and (v - vmin) / span < 0.6
                    ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="w" if light else "k", fontsize=8)
            fig.colorbar(im, ax=ax, shrink=0.8)
        fig.suptitle(title or f"{t.table}: MAPE {t.mape_pct:.2f} %")
    elif t.table == "loaded_latency":
        # cells by injection delay (the row): latency always, bandwidth when the virtual mlc ran (engine)
        lat = {c.row: c for c in t.cells if c.col != "bandwidth"}
        bwc = {c.row: c for c in t.cells if c.col == "bandwidth"}
        rows = sorted(lat, key=int)
        meas = np.array([lat[r].measured for r in rows])
        sim = np.array([lat[r].model for r in rows])
        if bwc and all(r in bwc for r in rows):
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
            ax.plot([bwc[r].measured / 1000 for r in rows], meas, "o-", label="measured (mlc --loaded_latency)")
            ax.plot([bwc[r].model / 1000 for r in rows], sim, "s--", label="simulated (virtual mlc)")
            ax.set_xlabel("bandwidth (GB/s)")
            delay = [max(int(r), 1) for r in rows]
            ax2.semilogx(delay, [bwc[r].measured / 1000 for r in rows], "o-", label="measured")
            ax2.semilogx(delay, [bwc[r].model / 1000 for r in rows], "s--", label="simulated")
            ax2.set_xlabel("injection delay (core cycles; 0 drawn at 1)")
            ax2.set_ylabel("bandwidth (GB/s)")
            ax2.legend()
        else:
            fig, ax = plt.subplots(figsize=(6, 4))
            delay = [max(int(r), 1) for r in rows]
            ax.semilogx(delay, meas, "o-", label="measured (mlc --loaded_latency)")
            ax.semilogx(delay, sim, "s--", label="simulated (curve at the measured bandwidth)")
            ax.set_xlabel("injection delay (core cycles; 0 drawn at 1)")
        ax.set_ylabel("latency (ns)")
        ax.legend()
        ax.set_title(title or f"loaded latency: MAPE {t.mape_pct:.2f} %")
    elif t.table == "bandwidth_scaling":
        # one curve pair per kernel: bandwidth against active cores, measured solid, simulated dashed
        fig, ax = plt.subplots(figsize=(7, 4.5))
        kernels = list(dict.fromkeys(c.col for c in t.cells))
        for k, kernel in enumerate(kernels):
            cs = [c for c in t.cells if c.col == kernel]
            cores = [int(c.row.split()[0]) for c in cs]
            color = f"C{k % 10}"
            ax.plot(cores, [c.measured for c in cs], "o-", color=color, ms=3, label=f"{kernel} measured")
            ax.plot(cores, [c.model for c in cs], "s--", color=color, ms=3, label=f"{kernel} simulated")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("active cores (socket 0, one thread a core)")
        ax.set_ylabel(f"bandwidth ({unit})")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title(title or f"bandwidth vs cores: MAPE {t.mape_pct:.2f} %")
    else:
        meas = np.array([c.measured for c in t.cells])
        sim = np.array([c.model for c in t.cells])
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter(meas, sim)
        for c in t.cells:
            ax.annotate(f"{c.row} {c.col}", (c.measured, c.model), fontsize=6)
        lim = [0.9 * min(meas.min(), sim.min()), 1.1 * max(meas.max(), sim.max())]
        ax.plot(lim, lim, "k:", lw=1)
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"simulated ({unit})")
        ax.set_title(title or f"{t.table}: MAPE {t.mape_pct:.2f} %")
    save_figure(fig, p, bbox_inches="tight")
    return p


def plot_report(report: ValidationReport, directory: str | Path, prefix: str = "") -> list[Path]:
    """One PNG per validated table, named ``<prefix><table>[-k].png``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    seen: dict[str, int] = {}
    for t in report.tables:
        k = seen.get(t.table, 0)
        seen[t.table] = k + 1
        name = f"{prefix}{t.table}{'' if k == 0 else f'-{k}'}.png"
        out.append(plot_table(t, d / name))
    return out
