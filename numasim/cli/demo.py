"""``numasim demo``: what ``make demo`` runs.

One bandwidth-bound program (STREAM triad, 8 threads pinned to node 0) on a shipped machine whose timing was
fitted from a real Intel mlc run, placed under three policies: local first touch, ``--membind`` to the remote
node, and interleave over both. It prints the per-node cost of each run and the comparison, which is the
question a performance engineer asks before touching production: what does the policy cost here?
"""

from __future__ import annotations

from typing import Any

import typer

DEMO_MACHINE = "seed-001-e5-2680v2"

# STREAM's serial initialisation (thread 0 touches every array first) is what makes "local" local.
DEMO_WORKLOAD = """
name = "stream-triad-demo"
description = "STREAM triad a = b + s*c over three 16 MiB arrays, 8 threads on node 0"
threads = [
    { id = 0, node = 0 }, { id = 1, node = 0 }, { id = 2, node = 0 }, { id = 3, node = 0 },
    { id = 4, node = 0 }, { id = 5, node = 0 }, { id = 6, node = 0 }, { id = 7, node = 0 },
]
allocations = [
    { name = "a", size_bytes = "16M", first_touch = 0 },
    { name = "b", size_bytes = "16M", first_touch = 0 },
    { name = "c", size_bytes = "16M", first_touch = 0 },
]
phases = [ { name = "triad", pattern = "stream_triad", passes = 1, split = true } ]
"""

DEMO_POLICIES = ("local", "bind:1", "interleave:0-1")


def register(app: typer.Typer) -> None:
    app.command("demo", help="Run STREAM triad under three policies on a shipped machine; print per-node costs.")(demo)


def demo(
    machine_name: str = typer.Option(DEMO_MACHINE, "--machine", help="Shipped machine name or machine file."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the simulation (stored in every result)."),
) -> None:
    from numasim.report.run_report import format_comparison, format_table, node_cost_rows
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine
    from numasim.workload.run import run_workload
    from numasim.workload.spec import loads_workload

    machine = load_machine(machine_name)
    calibration = resolve_calibration(machine)
    workload = loads_workload(DEMO_WORKLOAD, "<demo workload>")
    typer.echo(f"machine      {machine.name}: {len(machine.nodes)} nodes, {len(machine.cpus)} cpus")
    typer.echo(f"calibration  {calibration.id} ({calibration.provenance.method})")
    typer.echo(f"workload     {workload.description}")
    rows: list[dict[str, Any]] = []
    for policy in DEMO_POLICIES:
        outcome = run_workload(machine, workload, calibration, policy=policy, seed=seed)
        result = outcome.result
        typer.echo(f"\n== policy {policy}: run time {result.run_time_ns / 1e3:.1f} us ==")
        typer.echo(format_table(node_cost_rows(outcome)))
        local = sum(n.local_accesses for n in result.nodes)
        remote = sum(n.remote_accesses for n in result.nodes)
        seconds = result.run_time_ns * 1e-9
        moved = sum(n.bytes_read + n.bytes_written for n in result.nodes)
        rows.append(
            {
                "policy": policy,
                "run_time_ns": result.run_time_ns,
                "remote_pct": 100.0 * remote / (local + remote) if local + remote else 0.0,
                "bandwidth_gb_s": moved / seconds / 1e9 if seconds else 0.0,
                "calibration": calibration.id,
            }
        )
    base = rows[0]["run_time_ns"]
    for row in rows:
        row["speedup"] = base / row["run_time_ns"] if row["run_time_ns"] else float("nan")
    typer.echo("\n== policy comparison ==")
    typer.echo(format_comparison(rows))
