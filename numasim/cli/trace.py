"""``numasim trace``: convert, summarise and synthesise memory-access traces.

``numasim trace convert IN OUT``, ``numasim trace info FILE``, ``numasim trace generate --workload W.toml -o OUT``
and ``numasim trace generate --pattern random --size 64M --accesses 1000000 -o OUT.npz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from numasim.errors import TraceError, WorkloadError
from numasim.units import PAGE_SIZE_BYTES, format_size
from numasim.workload.quick import QUICK_PATTERNS as _QUICK_PATTERNS
from numasim.workload.trace.perf_script import PERF_LEVELS

__all__ = ["register", "trace_app"]

trace_app = typer.Typer(
    name="trace",
    help="Convert, summarise and synthesise memory-access traces (npz, csv, parquet, perf script, lackey).",
    no_args_is_help=True,
)



def register(app: typer.Typer) -> None:
    app.add_typer(trace_app, name="trace")


def _reader_options(fmt_in: str | None, levels: str | None, instructions: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if levels:
        wanted = {x.strip() for x in levels.split(",") if x.strip()}
        bad = wanted - set(PERF_LEVELS)
        if bad:
            raise TraceError("--levels", f"unknown level(s) {sorted(bad)}; expected some of {', '.join(PERF_LEVELS)}")
        options["levels"] = wanted
    if instructions:
        options["instructions"] = True
    return options


@trace_app.command("convert")
def convert(
    source: Path = typer.Argument(..., help="Input trace (.npz .csv .parquet .perf .lackey, or sniffed .txt)."),
    target: Path = typer.Argument(..., help="Output trace (.npz .csv .parquet); written atomically."),
    from_format: str | None = typer.Option(None, "--from", help="Input format if the suffix does not say it."),
    to_format: str | None = typer.Option(None, "--to", help="Output format if the suffix does not say it."),
    levels: str | None = typer.Option(None, help=f"perf: keep only these data-source levels ({', '.join(PERF_LEVELS)})."),
    instructions: bool = typer.Option(False, help="lackey: keep instruction fetches (as loads)."),
) -> None:
    """Convert a trace from one format to another, streaming chunk by chunk."""
    from numasim.workload.trace import read_trace, write_trace

    if source.resolve() == target.resolve():
        raise TraceError(str(target), "output is the input file")
    chunks = read_trace(source, from_format, **_reader_options(from_format, levels, instructions))
    n = write_trace(chunks, target, to_format, meta={"converted_from": source.name})
    typer.echo(f"wrote {n} accesses to {target}")


def _info_text(path: Path, info: dict[str, Any]) -> list[str]:
    lines = [
        f"trace            {path}",
        f"accesses         {info['accesses']}",
        f"reads            {info['reads']}",
        f"writes           {info['writes']}",
        f"bytes accessed   {info['bytes_accessed']}",
        f"footprint        {info['footprint_bytes']} bytes in 64-byte lines ({format_size(info['footprint_bytes'])}), "
        f"{info['footprint_pages']} pages of {PAGE_SIZE_BYTES} bytes",
        f"threads          {info['threads']}",
    ]
    if info["min_address"] is not None:
        lines.append(f"address range    {info['min_address']:#x} .. {info['max_address']:#x}")
    lines.append("per thread")
    for tid, count in info["per_thread"].items():
        share = 100.0 * count / info["accesses"] if info["accesses"] else 0.0
        lines.append(f"  thread {tid:>4}  {count:>12}  {share:5.1f}%")
    return lines


@trace_app.command("info")
def info(
    path: Path = typer.Argument(..., help="Trace file."),
    format: str | None = typer.Option(None, "--format", help="Trace format if the suffix does not say it."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Accesses, reads/writes, footprint (bytes and pages), threads, address range and per-thread counts."""
    from numasim.workload.trace import read_trace, trace_info

    summary = trace_info(read_trace(path, format)).to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo("\n".join(_info_text(path, summary)))


@trace_app.command("generate")
def generate_cmd(
    output: Path = typer.Option(..., "-o", "--output", help="Output trace (.npz .csv .parquet)."),
    workload: Path | None = typer.Option(None, "--workload", "-w", help="Workload TOML file to synthesise."),
    pattern: str | None = typer.Option(None, help=f"Quick one-phase pattern: {', '.join(_QUICK_PATTERNS)}."),
    seed: int = typer.Option(0, min=0, help="Seed of the random streams (stored in the trace header)."),
    size: str = typer.Option("64M", help="--pattern: allocation size (64M, 1G, ...)."),
    accesses: int = typer.Option(1_000_000, help="--pattern: accesses per thread."),
    threads: int = typer.Option(1, help="--pattern: number of threads."),
    write_fraction: float = typer.Option(0.0, help="--pattern: fraction of stores."),
    exponent: float = typer.Option(1.0, help="--pattern zipf: the Zipf exponent."),
    stride_bytes: int = typer.Option(64, help="--pattern strided: the stride."),
) -> None:
    """Synthesise a trace from a workload file, or from a quick pattern."""
    from numasim.workload.generate import generate
    from numasim.workload.quick import quick_workload
    from numasim.workload.spec import load_workload
    from numasim.workload.trace import write_trace

    if (workload is None) == (pattern is None):
        raise WorkloadError("trace generate: give exactly one of --workload FILE or --pattern NAME")
    if workload is not None:
        spec = load_workload(workload)
        source = str(workload)
    else:
        assert pattern is not None
        spec = quick_workload(
            pattern, size=size, accesses=accesses, threads=threads, write_fraction=write_fraction,
            exponent=exponent, stride_bytes=stride_bytes,
        )
        source = f"--pattern {pattern}"
    meta = {"workload": spec.name, "source": source, "seed": seed}
    n = write_trace(generate(spec, seed), output, meta=meta)
    typer.echo(f"wrote {n} accesses ({spec.name}, seed {seed}) to {output}")
