"""``numasim run``: place a workload's (or a trace's) memory through the kernel, time it, report per node.

(The module is not called ``run.py``: ``numasim.cli.run`` is the console-script function, and a submodule of
that name would replace it on import.)

``numasim run --machine seed-000-4node --workload examples/workloads/stream-triad.toml --nominal --policy interleave:0-3``
``numasim run --machine M --trace t.npz --calibration cal.json -o result.json --csv out/ --plots out/``
``numasim run --machine M --workload W.toml --nominal --compare local --compare bind:1 --compare interleave:0-3``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer

from numasim.errors import WorkloadError
from numasim.fileio import check_output_path

__all__ = ["register", "run"]


def register(app: typer.Typer) -> None:
    app.command("run", help="Place a workload or trace through the kernel, time it, and report the cost per node.")(run)


class _Progress:
    """A one-line progress indicator on stderr (only when stderr is a terminal), and the wall time at the end.

    The wall time goes to stderr, never into the report or a result file: those depend on the inputs and the
    seed only, so two runs give the same bytes.
    """

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.wanted = enabled
        self.enabled = enabled and sys.stderr.isatty()
        self.last = -1.0
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < 0.2:
            return
        self.last = now
        pct = f" {100.0 * done / total:5.1f}%" if total else ""
        typer.echo(f"\r{self.label}: {done:,} accesses{pct} ({now - self.started:.1f} s)", err=True, nl=False)

    def close(self) -> None:
        if self.enabled and self.last >= 0:
            typer.echo("", err=True)

    def wall_time(self, wall_s: float) -> None:
        if self.wanted:
            typer.echo(f"wall time {wall_s:.2f} s (not part of the result)", err=True)


def run(
    machine: str = typer.Option(..., "--machine", "-m", help="Shipped machine name or machine file."),
    workload: Path | None = typer.Option(None, "--workload", "-w", help="Workload TOML file."),
    trace: Path | None = typer.Option(None, "--trace", "-t", help="Trace file (.npz .csv .parquet .perf .lackey)."),
    policy: str | None = typer.Option(None, help="Process policy MODE[:NODES[:FLAGS]] (e.g. interleave:0-3) or a plug-in policy name/path."),
    mode: str = typer.Option("epoch", help="Fidelity: epoch (fast, aggregated) or exact (every access an event)."),
    seed: int = typer.Option(0, min=0, help="Seed of the workload's random streams (stored in the result)."),
    calibration: Path | None = typer.Option(None, help="Calibration JSON (default: the one the machine names)."),
    nominal: bool = typer.Option(False, "--nominal", help="Time with the machine file's own nominal numbers (explicit)."),
    catalog: bool = typer.Option(
        False, "--catalog", help="Time with the platform catalog's priors for the machine's cpu model (no measurement)."
    ),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the full result as JSON (atomic)."),
    csv_dir: Path | None = typer.Option(None, "--csv", help="Write the result tables as CSV files into DIR."),
    plots_dir: Path | None = typer.Option(None, "--plots", help="Write PNG figures into DIR."),
    cpus: str | None = typer.Option(None, help="--trace: cpus of the trace's threads in order, e.g. 0,24 or 0-3."),
    trace_format: str | None = typer.Option(None, "--trace-format", help="--trace: format if the suffix does not say it."),
    compare: list[str] | None = typer.Option(None, "--compare", help="Run once per policy (repeat the option) and print a comparison table."),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Progress line (terminals only) and the wall time, on stderr."
    ),
    thp: str = typer.Option(
        "madvise", "--thp", metavar="always|madvise|never",
        help="Transparent hugepages of the kernel that places the memory (the same knob as "
        "--sysctl /sys/kernel/mm/transparent_hugepage/enabled=MODE).",
    ),
    sysctl: list[str] | None = typer.Option(
        None, "--sysctl", metavar="NAME=VALUE",
        help="Write a kernel knob before placement (repeatable, in order; after the workload's [sysctl]), "
        "e.g. kernel.numa_balancing=1 or vm.nr_hugepages=512.",
    ),
    page_cache: list[str] | None = typer.Option(
        None, "--page-cache", metavar="NODE=SIZE",
        help="Clean page cache on NODE at boot, part of its memory in use (repeatable), e.g. 0=2G.",
    ),
    kswapd: bool = typer.Option(
        False, "--kswapd", help="Run kswapd's background reclaim of clean page cache on the simulation clock: lazily "
        "faulted pages then fault at their first access in the run (nominal rates: 2 GB/s reclaim, 2 us a fault).",
    ),
    buddyinfo: str | None = typer.Option(
        None, "--buddyinfo", metavar="FILE", help="A measured /proc/buddyinfo: boot each zone's free memory as "
        "fragmented as it shows, so that 2 MiB faults may need (and pay for) direct compaction.",
    ),
    tlb: bool = typer.Option(
        False, "--tlb", help="Model each core's STLB and page walks (nominal Skylake-SP numbers), so that huge "
        "pages matter to timing (epoch mode).",
    ),
    daemon: list[str] | None = typer.Option(
        None, "--daemon", metavar="NAME|FILE.py[:NAME=VALUE,...]",
        help="Run a user-space daemon beside the program on the simulation clock (repeatable), e.g. "
        "numad:interval_ms=100 (policies/numad.py).",
    ),
) -> None:
    """Place memory through the simulated kernel, time every access, and print the per-node cost report."""
    from numasim.report.run_report import (
        format_run_report,
        save_run_plots,
        write_csv_tables,
        write_result_json,
    )
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.cpulist import parse_cpulist
    from numasim.topology.io import load_machine, machine_source
    from numasim.workload.run import run_trace, run_workload
    from numasim.workload.spec import load_workload

    if (workload is None) == (trace is None):
        raise WorkloadError("run: give exactly one of --workload FILE or --trace FILE")
    if workload is not None and (cpus is not None or trace_format is not None):
        # A workload file pins its threads itself (threads = [{cpu|node|cpus}]): ignoring these would mislead.
        given = "--cpus" if cpus is not None else "--trace-format"
        raise WorkloadError(
            f"{given} = {cpus if cpus is not None else trace_format!r}: applies to --trace only "
            "(a workload's threads name their cpu or node in the workload file)"
        )
    if mode not in ("epoch", "exact"):
        raise WorkloadError(f"--mode = {mode!r}: expected epoch or exact")
    if thp not in ("always", "madvise", "never"):
        raise WorkloadError(f"--thp = {thp!r}: expected always, madvise or never")
    from numasim.engine.tlb import TlbSpec
    from numasim.kernel.buddy import load_buddyinfo
    from numasim.kernel.config import KernelConfig, parse_page_cache_arg
    from numasim.kernel.sysctl import parse_sysctl_arg

    try:
        cache = dict(parse_page_cache_arg(text) for text in page_cache or [])
        fragments = load_buddyinfo(buddyinfo) if buddyinfo is not None else None
    except ValueError as exc:
        raise WorkloadError(str(exc)) from None
    kernel_config = KernelConfig(thp_mode=thp, kswapd_enabled=kswapd, reclaimable_page_cache_bytes=cache or None,
                                 buddyinfo=fragments)  # fmt: skip
    sysctls = [parse_sysctl_arg(text) for text in sysctl or []]  # SysctlError before any work
    # Refuse unwritable destinations before simulating, not after minutes of work.
    for dest, is_dir in ((output, False), (csv_dir, True), (plots_dir, True)):
        if dest is not None:
            check_output_path(dest, is_dir=is_dir)
    m = load_machine(machine)
    machine_path = machine_source(machine)
    cal = resolve_calibration(m, calibration, nominal=nominal, catalog=catalog, machine_path=machine_path)
    if nominal:
        typer.echo(f"note: timing with nominal calibration {cal.id} (the machine file's own numbers, not fitted)", err=True)
    if catalog:
        typer.echo(
            f"note: timing with catalog calibration {cal.id} (platform {cal.provenance.platform}: priors only, "
            "no measurement of this machine)",
            err=True,
        )
    from numasim.topology.render import memory_side_cache_note

    if note := memory_side_cache_note(m):  # recorded by the machine file, not timed: said where the result is read
        typer.echo(f"note: {note}", err=True)

    if compare:
        if daemon or tlb:
            raise WorkloadError("--daemon and --tlb: not with --compare (run each policy on its own)")
        if policy is not None:
            raise WorkloadError("--policy and --compare: give the policies to compare with --compare only")
        _run_comparison(m, cal, workload, trace, list(compare), mode=mode, seed=seed, kernel_config=kernel_config,
                        sysctls=sysctls, cpus=cpus, trace_format=trace_format, output=output, csv_dir=csv_dir,
                        plots_dir=plots_dir, progress=progress)  # fmt: skip
        return

    bar = _Progress("simulating", progress)
    try:
        if workload is not None:
            outcome = run_workload(m, load_workload(workload), cal, policy=policy, mode=mode, seed=seed, progress=bar,
                                   kernel_config=kernel_config, sysctls=sysctls, daemons=daemon or (),
                                   tlb=TlbSpec() if tlb else None)
        else:
            assert trace is not None
            try:
                cpu_list = parse_cpulist(cpus) if cpus else None
            except ValueError as exc:
                raise WorkloadError(f"--cpus = {cpus!r}: {exc}") from None
            outcome = run_trace(m, trace, cal, policy=policy, mode=mode, seed=seed, cpus=cpu_list,
                                format=trace_format, progress=bar, kernel_config=kernel_config, sysctls=sysctls,
                                daemons=daemon or (), tlb=TlbSpec() if tlb else None)
    finally:
        bar.close()
    bar.wall_time(outcome.wall_s)
    if "trace_cpus" in outcome.inputs:  # where the trace's threads ran: said, never silent
        tc = outcome.inputs["trace_cpus"]
        shown = ", ".join(f"{t}->{c}" for t, c in tc["cpus"].items())
        typer.echo(f"note: trace threads on cpus {shown}: {tc['source']}", err=True)
    typer.echo(format_run_report(outcome))
    if output is not None:
        write_result_json(outcome, output)
        typer.echo(f"\nwrote {output}")
    if csv_dir is not None:
        paths = write_csv_tables(outcome, csv_dir)
        typer.echo(f"wrote {len(paths)} CSV tables to {csv_dir}")
    if plots_dir is not None:
        figs = save_run_plots(outcome, plots_dir)
        typer.echo(f"wrote {len(figs)} figures to {plots_dir}")


def _policy_dir(policy: str) -> str:
    """A directory name for a policy string (``interleave:0-3`` -> ``interleave_0-3``)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in policy) or "default"


def _run_comparison(m, cal, workload, trace, policies, *, mode, seed, kernel_config, sysctls, cpus, trace_format,  # type: ignore[no-untyped-def]
                    output, csv_dir, plots_dir, progress) -> None:  # fmt: skip
    """``--compare``: one run per policy, the comparison table, and every output asked for, per policy: ``-o``
    one JSON with the table and each run's result, ``--csv DIR`` ``comparison.csv`` and a folder of tables per
    policy, ``--plots DIR`` a folder of figures per policy."""
    from numasim.report.run_report import (
        format_comparison,
        save_run_plots,
        write_comparison_json,
        write_csv_tables,
        write_rows_csv,
    )
    from numasim.topology.cpulist import parse_cpulist
    from numasim.workload.run import RunOutcome, compare_policies
    from numasim.workload.spec import load_workload

    dirs = [_policy_dir(p) for p in policies]
    if (csv_dir is not None or plots_dir is not None) and len(set(dirs)) != len(dirs):
        raise WorkloadError(f"--compare: two policies share an output folder name ({', '.join(dirs)})")
    trace_options: dict[str, Any] = {}
    if trace is not None:
        try:
            trace_options["cpus"] = parse_cpulist(cpus) if cpus else None
        except ValueError as exc:
            raise WorkloadError(f"--cpus = {cpus!r}: {exc}") from None
        trace_options["format"] = trace_format
    subject = load_workload(workload) if workload is not None else trace
    name = subject.name if workload is not None else str(trace)

    def tell(k: int, n: int, pol: str) -> None:
        if progress:
            typer.echo(f"policy {k + 1}/{n}: {pol}", err=True)

    outcomes: list[RunOutcome] = []
    rows = compare_policies(m, subject, policies, cal, mode=mode, seed=seed, kernel_config=kernel_config,
                            sysctls=sysctls, progress=tell, outcomes=outcomes, **trace_options)  # fmt: skip
    typer.echo(f"{name} on {m.name}, calibration {cal.id} ({cal.provenance.method}), mode {mode}, seed {seed}")
    typer.echo(format_comparison(rows))
    if output is not None:
        write_comparison_json(rows, outcomes, output)
        typer.echo(f"\nwrote {output} (the comparison and {len(outcomes)} results)")
    if csv_dir is not None:
        csv_dir.mkdir(parents=True, exist_ok=True)
        write_rows_csv(rows, csv_dir / "comparison.csv")
        for d, o in zip(dirs, outcomes, strict=True):
            write_csv_tables(o, csv_dir / d)
        typer.echo(f"wrote {csv_dir / 'comparison.csv'} and each policy's tables in {csv_dir}/<policy>/")
    if plots_dir is not None:
        total = sum(len(save_run_plots(o, plots_dir / d)) for d, o in zip(dirs, outcomes, strict=True))
        typer.echo(f"wrote {total} figures to {plots_dir}/<policy>/")
