"""Text, CSV and figures for one ``numasim run``: the per-node cost table, threads, and the kernel's views.

Library code: functions return strings or write files (atomically); the CLI prints.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from numasim.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from numasim.workload.run import RunOutcome

__all__ = [
    "format_table",
    "node_cost_rows",
    "thread_rows",
    "format_run_report",
    "numastat_view",
    "write_result_json",
    "write_csv_tables",
    "save_run_plots",
    "PLOT_FILES",
    "format_comparison",
]


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not np.isfinite(value):
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, digits: int = 1) -> str:
    """Rows of dicts as an aligned text table (first column left-aligned, the others right-aligned).

    Examples
    --------
    >>> print(format_table([{"node": 0, "gb_s": 1.25}, {"node": 1, "gb_s": 10.0}]))
    node  gb_s
    0      1.2
    1     10.0
    """
    if not rows:
        return "(no rows)"
    cols = list(columns) if columns is not None else list(rows[0])
    cells = [[_fmt(r.get(c), digits) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        parts = [values[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(cols)] + [line(row) for row in cells])


def node_cost_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    """Per target node: pages resident, accesses, local/remote %, latencies, controller bandwidth.

    Latency columns: ``mem_lat_ns`` / ``mem_p99_ns`` the memory request latency (issue to data of the requests
    that reached this node's memory, queueing included; mean and 99th percentile), ``idle_ns`` the idle latency
    of those requests' routes (``mem_lat_ns`` never falls below it), ``load_to_use_ns`` what the cores waited
    per access to this node, cache hits included and shortened by prefetching.
    """
    r = outcome.result
    controllers = {res.name: res for res in r.resources if res.kind == "controller"}
    rows = []
    for n in r.nodes:
        mc = controllers.get(f"mc{n.node}")
        served = n.local_accesses + n.remote_accesses
        rows.append(
            {
                "node": n.node,
                "pages": n.pages_resident,
                "accesses": n.accesses,
                "local_%": 100.0 * n.local_accesses / served if served else None,
                "remote_%": 100.0 * n.remote_accesses / served if served else None,
                "mem_accesses": n.memory_accesses,
                "mem_lat_ns": n.memory_latency_mean_ns,
                "mem_p99_ns": n.memory_latency_p99_ns,
                "idle_ns": n.memory_idle_latency_ns,
                "load_to_use_ns": n.load_to_use_mean_ns,
                "used_gb_s": mc.bandwidth_used_gb_s if mc else None,
                "avail_gb_s": mc.bandwidth_available_gb_s if mc else None,
                "util_%": 100.0 * mc.utilisation_mean if mc else None,
            }
        )
    return rows


def thread_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    """Per thread: cpu, node, accesses, load-to-use and memory request latency, stall and finish time."""
    return [
        {
            "thread": t.agent,
            "cpu": t.cpu,
            "node": t.node,
            "accesses": t.accesses,
            "load_to_use_ns": t.load_to_use_mean_ns,
            "mem_lat_ns": t.memory_latency_mean_ns,
            "stall_us": t.stall_ns / 1e3,
            "finish_us": t.finish_ns / 1e3,
        }
        for t in outcome.result.threads
    ]


def cpu_sharing_lines(outcome: RunOutcome) -> list[str]:
    """A line per share of a cpu below one that threads had, time-weighted over each one's run (the others'
    ends give those left more), to a tenth of a percent (none when every thread had a cpu to itself)."""
    by_share: dict[float, list[str]] = {}
    for t in outcome.result.threads:
        share = round(100 * t.cpu_share, 1)
        if share < 100.0:
            by_share.setdefault(share, []).append(t.agent)
    return [
        f"cpu sharing: {len(names)} thread{'s' if len(names) > 1 else ''} ({_names(names)}) had {share:.1f} % of "
        "a cpu each over their run (more threads than the cpus they may run on; their stall_us leaves out the wait "
        "for a turn)"
        for share, names in sorted(by_share.items())
    ]


def _names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ..., {names[-1]}"


def numastat_view(outcome: RunOutcome) -> str:
    """What ``numastat`` (no arguments) would print on the simulated kernel after placement."""
    from numasim.tools.numastat import numastat_sources, run_numastat

    return run_numastat([], numastat_sources(outcome.placement.kernel)).stdout


def format_run_report(outcome: RunOutcome) -> str:
    """The full text report of one run (deterministic: the wall time is not in it)."""
    r = outcome.result
    cal = outcome.calibration
    link_rows = [
        {"link": res.name, "used_gb_s": res.bandwidth_used_gb_s, "avail_gb_s": res.bandwidth_available_gb_s,
         "util_%": 100.0 * res.utilisation_mean, "peak_%": 100.0 * res.utilisation_peak}
        for res in r.resources
        if res.kind != "controller" and res.bytes
    ]
    total_bytes = sum(n.bytes_read + n.bytes_written for n in r.nodes)
    seconds = r.run_time_ns * 1e-9
    lines = [
        f"machine      {outcome.machine.name}",
        f"workload     {outcome.workload}",
        f"policy       {outcome.policy}",
        f"mode         {outcome.mode}   seed {outcome.seed}",
        f"calibration  {cal.id} ({cal.provenance.method})",
        f"accesses     {r.accesses}",
        f"run time     {r.run_time_ns / 1e3:.3f} us simulated"
        + (f", {total_bytes / seconds / 1e9:.2f} GB/s overall" if seconds else ""),
    ]
    if outcome.placement.first_touch:
        # who faulted each allocation's pages in: a researcher's first question when local and bind:0 agree
        lines.append("first touch  " + "; ".join(f"{a}: {w}" for a, w in outcome.placement.first_touch.items()))
    if outcome.placement.failed_pages:
        lines.append(f"WARNING      {outcome.placement.failed_pages} pages could not be allocated")
    lines += ["", "per node (target memory)", format_table(node_cost_rows(outcome))]
    if link_rows:
        lines += ["", "links", format_table(link_rows)]
    lines += ["", "threads", format_table(thread_rows(outcome))]
    lines += cpu_sharing_lines(outcome)
    if outcome.placement.pages_by_allocation:
        alloc_rows = [
            {"allocation": name, **{f"N{k}": v for k, v in sorted(d.items())}}
            for name, d in outcome.placement.pages_by_allocation.items()
        ]
        cols = ["allocation"] + sorted({c for row in alloc_rows for c in row if c != "allocation"}, key=lambda c: int(c[1:]))
        for row in alloc_rows:
            for c in cols:
                row.setdefault(c, 0)
            row["first_touch"] = outcome.placement.first_touch.get(str(row["allocation"]), "")
        cols.append("first_touch")
        # first_touch: the thread that faulted every page when the allocation was created (prefault), or each
        # page's first accessing thread
        lines += ["", "pages per allocation and node (numa_maps N<node>=<pages>; who first-touched them)",
                  format_table(alloc_rows, cols)]
    when = "after placement" if r.kernel is None else "at the end of the run, migrations included"
    lines += ["", f"numastat (simulated kernel, {when})", numastat_view(outcome).rstrip()]
    if r.tlb is not None:
        t = r.tlb
        lines += ["", f"TLB (nominal STLB of {t['spec']['entries']} entries): {t['misses']} misses of {t['accesses']} "
                  f"requests ({100 * t['miss_rate']:.1f} %, {t['misses_2m']} on 2 MiB pages), "
                  f"{t['walk_ns'] / 1e3:.1f} us of page walks"]
    if r.coherence is not None:
        coh = r.coherence
        per = ", ".join(f"{k} {v['misses']}/{v['transfers_local'] + v['transfers_remote']}"
                        for k, v in coh["threads"].items() if v["misses"] or v["transfers_local"] or v["transfers_remote"])
        lines += ["", f"coherence: {coh['misses']} accesses missed their first-level cache because another core's write took "
                  f"the line (they would have hit it otherwise), "
                  f"{coh['transfers_local']} + {coh['transfers_remote']} cache-to-cache transfers (same last-level "
                  f"cache + another; per thread coherence misses/transfers: {per})", f"  {coh['cost']}"]
        if "order" in coh:
            lines.append(f"  {coh['order']}")
    if r.write_allocate is not None:
        wa = r.write_allocate
        per = ", ".join(f"node {n} {k}" for n, k in wa["reads_for_ownership_skipped"].items())
        lines += ["", f"write-allocate evasion (calibration: up to {wa['evasion']:g} of each full-line write's read "
                  f"for ownership): {wa['total']} reads for ownership skipped ({per})", f"  {wa['rule']}"]
    if r.requests is not None:
        lines += ["", *request_report_lines(r.requests)]
    if r.kernel is not None:
        lines += ["", *kernel_report_lines(r.kernel)]
    return "\n".join(lines)


def request_report_lines(requests: dict[str, Any]) -> list[str]:
    """Request latencies (all threads, then each): count and mean, percentiles and maximum in microseconds."""
    cols = ("mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")

    def row(name: str, s: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"thread": name, "requests": s["count"]}
        out |= {c.replace("_ns", "_us"): (s[c] / 1e3 if s["count"] else None) for c in cols}
        return out

    rows = [row("all", requests)] + [row(n, s) for n, s in requests["threads"].items()]
    return [f"requests ({requests['accesses_per_request']} accesses each): latency in microseconds",
            format_table(rows, digits=2)]


def kernel_report_lines(kernel: dict[str, Any]) -> list[str]:
    """The run-time kernel's part of the report: /proc/vmstat counters, pages per node at the start and the
    end, the bytes its page copies moved."""
    series = kernel["pages_per_node_series"]
    nodes = series["node_ids"]
    first, last = series["pages"][0], series["pages"][-1]
    rows = [
        {"node": n, "pages_start": a, "pages_end": b, "copy_read_MB": kernel["copy_bytes_read_by_node"][str(n)] / 2**20,
         "copy_written_MB": kernel["copy_bytes_written_by_node"][str(n)] / 2**20}
        for n, a, b in zip(nodes, first, last, strict=True)
    ]
    vm = kernel["vmstat"]
    out = ["/proc/vmstat at the end of the run (the kernel on the simulation clock)"]
    out += [f"{name} {value}" for name, value in vm.items()]
    out += ["", "pages per node: start and end of the run; the kernel's page copies", format_table(rows)]
    if kernel["thread_moves"]:
        out += ["", "thread moves", format_table(kernel["thread_moves"], digits=0)]
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


def write_result_json(outcome: RunOutcome, path: str | Path) -> None:
    """``outcome.to_dict()`` as JSON, written atomically."""
    _atomic_write(Path(path), json.dumps(outcome.to_dict(), indent=1, allow_nan=False, default=_json_default).encode())


def write_comparison_json(rows: Sequence[dict[str, Any]], outcomes: Sequence[RunOutcome], path: str | Path) -> None:
    """``run --compare -o``: the comparison table and every run's result, as JSON, written atomically."""
    doc = {"numasim_compare": 1, "comparison": list(rows), "runs": [o.to_dict() for o in outcomes]}
    _atomic_write(Path(path), json.dumps(doc, indent=1, allow_nan=False, default=_json_default).encode())


def write_rows_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Rows (dicts with the same keys) as one CSV file, written atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    _atomic_write(Path(path), buf.getvalue().encode())


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def write_csv_tables(outcome: RunOutcome, directory: str | Path) -> list[Path]:
    """One CSV per result table (``nodes.csv``, ``threads.csv``, ...) plus ``node_costs.csv``; returns the paths."""
    d = Path(directory)
    tables = dict(outcome.result.tables())
    tables["node_costs"] = node_cost_rows(outcome)
    written = []
    for name, rows in tables.items():
        if not rows:
            continue
        path = d / f"{name}.csv"
        write_rows_csv(rows, path)
        written.append(path)
    return written


PLOT_FILES = (
    "bandwidth_per_node.png",
    "latency_by_node.png",
    "controller_utilisation.png",
    "initiator_target_heatmap.png",
    "utilisation_over_time.png",
    "latency_histograms.png",
    "kernel_over_time.png",
)
"""Every figure :func:`save_run_plots` can write (a figure with nothing to show is left out)."""


def _legend(ax: Any, **kwargs: Any) -> None:
    """A legend only when something is labelled (else matplotlib warns "No artists with labels ...")."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def _plain_log_axis(ax: Any) -> None:
    """Log x axis labelled with plain numbers at 1/2/5 x 10^k (or 10^k over wide ranges), no minor labels.

    Matplotlib's default labels the minor ticks of a log axis spanning less than a decade, and those labels
    (``6x10^1``, ``7x10^1``, ...) overlap; latency ranges are often that narrow.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = ax.get_xlim()
    decades = np.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def save_run_plots(outcome: RunOutcome, directory: str | Path) -> list[Path]:
    """PNG figures of one run (names in :data:`PLOT_FILES`); returns the paths written.

    Per-node controller bandwidth used vs available; latency histograms per target node (counts, and the
    engine's normalised :func:`~numasim.engine.plots.latency_histograms`); controller utilisation over time and
    every used controller and link over time (:func:`~numasim.engine.plots.utilisation_over_time`); the
    initiator x target access heatmap (:func:`~numasim.engine.plots.access_heatmap`). Figures with no data
    (an empty run has no latencies) are not written; no figure gets an empty legend.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from numasim.engine.plots import (
        access_heatmap,
        latency_histograms,
        smooth_utilisation,
        utilisation_over_time,
    )

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    r = outcome.result
    written: list[Path] = []

    def new_axes() -> tuple[Any, Any]:
        fig = Figure(figsize=(6, 3.5), layout="constrained")
        return fig, fig.add_subplot()

    def save(fig: Any, name: str) -> None:
        path = d / name
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        _atomic_write(path, buf.getvalue())
        written.append(path)

    rows = node_cost_rows(outcome)
    fig, ax = new_axes()
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [row["used_gb_s"] or 0 for row in rows], 0.4, label="used")
    ax.bar(x + 0.2, [row["avail_gb_s"] or 0 for row in rows], 0.4, label="available", alpha=0.5)
    ax.set_xticks(x, [f"node {row['node']}" for row in rows])
    ax.set_ylabel("GB/s")
    ax.set_title(f"{outcome.workload} on {outcome.machine.name}: controller bandwidth ({outcome.policy})",
                 fontsize=9)
    _legend(ax)
    save(fig, "bandwidth_per_node.png")

    hist = np.asarray(r.latency_hist_by_node)
    edges = np.asarray(r.hist_edges_ns)
    has_latencies = bool(hist.size and edges.size == hist.shape[-1] + 1 and hist.sum() > 0)
    if has_latencies:
        fig, ax = new_axes()
        centers = 0.5 * (edges[:-1] + edges[1:])
        for i, nid in enumerate(r.node_ids):
            if hist[i].sum():
                ax.step(centers, hist[i], where="mid", label=f"node {nid}")
        ax.set_xscale("log")
        used = np.flatnonzero(hist.sum(axis=0))
        if used.size and edges[used[0]] > 0:
            ax.set_xlim(edges[used[0]] / 1.5, edges[used[-1] + 1] * 1.5)
        _plain_log_axis(ax)
        ax.set_xlabel("memory request latency (ns)")
        ax.set_ylabel("memory accesses")
        ax.set_title("memory request latency by target node")
        _legend(ax)
        save(fig, "latency_by_node.png")

    util = np.asarray(r.utilisation)
    controllers = [j for j, res in enumerate(r.resources) if res.kind == "controller" and j < util.shape[-1]]
    if util.ndim == 2 and util.shape[0] > 1 and controllers:
        fig, ax = new_axes()
        # window means, not raw buckets: bucket by bucket a busy controller swings between ~0 and its peak
        windows, window_ns = smooth_utilisation(util[:, controllers], r.utilisation_bucket_ns, max_windows=60)
        t_us = (np.arange(windows.shape[0]) + 0.5) * window_ns / 1e3
        for k, j in enumerate(controllers):
            ax.plot(t_us, 100 * windows[:, k], label=r.resources[j].name)
        ax.set_xlabel("time (us)")
        ax.set_ylabel("utilisation (%)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"memory controller utilisation (mean over {window_ns / 1e3:.3g} us windows)")
        _legend(ax)
        save(fig, "controller_utilisation.png")

    if r.initiator_names and r.node_ids and r.access_matrix().sum() > 0:
        fig = access_heatmap(r)
        # sized to the matrix by the engine; a small machine's figure is narrower than the title
        w_in, h_in = fig.get_size_inches()
        fig.set_size_inches(max(w_in, 6.0), max(h_in, 3.0))
        save(fig, "initiator_target_heatmap.png")
    if util.ndim == 2 and util.shape[0] > 1:
        save(utilisation_over_time(r), "utilisation_over_time.png")
    if has_latencies:
        fig = latency_histograms(r)
        ax = fig.axes[0]
        used = np.flatnonzero(hist.sum(axis=0))
        if used.size and edges[used[0]] > 0:
            ax.set_xlim(edges[used[0]] / 1.5, edges[used[-1] + 1] * 1.5)
        _plain_log_axis(ax)
        save(fig, "latency_histograms.png")
    if r.kernel is not None:
        fig = numa_balancing_figure(r.kernel)
        save(fig, "kernel_over_time.png")
    return written


def numa_balancing_figure(kernel: dict[str, Any]) -> Any:
    """The kernel over the run: pages per node; hinting faults and migrated pages per millisecond; the program's
    mean memory latency per interval (what the moves bought)."""
    from matplotlib.figure import Figure

    series = kernel["pages_per_node_series"]
    t_ms = np.asarray(series["time_ns"]) / 1e6
    pages = np.asarray(series["pages"])
    fig = Figure(figsize=(6.5, 7), layout="constrained")
    ax, bx, cx = fig.subplots(3, 1, sharex=True)
    for j, nid in enumerate(series["node_ids"]):
        if pages[:, j].any():
            ax.step(t_ms, pages[:, j], where="post", label=f"node {nid}")
    ax.set_ylabel("resident pages")
    vm = kernel["vmstat"]
    ax.set_title(f"the kernel on the simulation clock: {vm.get('numa_hint_faults', 0)} hinting faults, "
                 f"{vm.get('numa_pages_migrated', vm.get('pgmigrate_success', 0))} pages migrated", fontsize=9)
    _legend(ax)
    act = kernel["activity_series"]
    at = np.asarray(act["time_ns"]) / 1e6
    if len(at) > 1:
        dt = np.diff(at)
        mid = at[1:]
        for name, label in (("numa_hint_faults", "hinting faults"), ("pages_migrated", "pages migrated")):
            rate = np.diff(np.asarray(act[name], dtype=float)) / np.where(dt > 0, dt, np.nan)
            bx.step(mid, rate, where="pre", label=label)
        lat = np.array([np.nan if v is None else v for v in act["memory_latency_mean_ns"]], dtype=float)
        cx.step(at, lat, where="pre")
    bx.set_ylabel("per ms")
    _legend(bx)
    cx.set_ylabel("memory latency (ns)")
    cx.set_xlabel("simulated time (ms)")
    return fig


def format_comparison(rows: Sequence[dict[str, Any]]) -> str:
    """The table :func:`numasim.workload.run.compare_policies` returns, as text."""
    if not rows:
        return "(no runs)"
    nodes = sorted({k[4:-5] for r in rows for k in r if k.startswith("node") and k.endswith("_gb_s")}, key=int)
    cols = ["policy", "run_time_ns", "speedup", "remote_pct", "bandwidth_gb_s"] + [f"node{n}_gb_s" for n in nodes]
    return format_table(rows, cols, digits=2)
