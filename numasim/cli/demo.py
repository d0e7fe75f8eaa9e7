"""``numasim demo``: what ``make demo`` runs."""

from __future__ import annotations

import typer

from numasim.topology.builders import hypercube
from numasim.topology.distances import slit
from numasim.topology.routing import hop_table, latency_table_ns


def register(app: typer.Typer) -> None:
    app.command("demo", help="Run a short demonstration on a shipped machine and print a per-node report.")(demo)


def demo() -> None:
    machine = hypercube(2, name="demo-hypercube-2")
    lat = latency_table_ns(machine)
    hops = hop_table(machine)
    table = slit(machine)
    typer.echo(f"machine {machine.name}: {len(machine.nodes)} nodes")
    for i, n in enumerate(machine.nodes):
        row = " ".join(f"{x:6.0f}" for x in lat[i])
        typer.echo(f"node {n.id}: latency_ns {row}  hops {hops[i].tolist()}  slit {table[i]}")
