"""``numasim kernel ...``, ``numasim numactl`` and ``numasim numastat``: the simulated kernel from a shell.

* ``numasim kernel zonelists MACHINE`` -- the kernel's boot log lines ``Fallback order for Node N: ...``;
* ``numasim kernel zoneinfo|buddyinfo MACHINE [--after "numactl ARGS -- PROG ARGS"]...`` -- /proc views, after
  running the given commands;
* ``numasim numactl --machine MACHINE [--kernel-version V] [--calibration F | --nominal] [--json] [NUMACTL OPTIONS]
  -- PROGRAM [ARGS]`` --
  runs numactl and its program, then prints what ``numastat -p`` shows for the program's processes
  (``--json``: pages per node, the node of every page as runs ``[[node, count], ...]``, numastat deltas and
  every policy syscall with its return value and errno name);
* ``numasim numastat --machine MACHINE [--after ...] [NUMASTAT ARGS]``.

numactl's own option syntax (``-i 0,1``, ``--interleave=0,1``, ``-m``) clashes with typer's, so ``numasim
numactl`` and ``numasim numastat`` take their arguments raw: numasim's options (``--machine``,
``--kernel-version``, ``--json``, ``--after``) come first, everything from the first other
argument on belongs to numactl / numastat. (Typer drops a ``--`` separator; numactl stops at the program name
anyway.)
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["register", "build_kernel", "apply_after"]

_MAX_RUNS = 100_000
"""At most this many ``[node, count]`` runs in ``--json`` (an interleaved 64 GiB would give 16.7 million)."""

_RAW = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}

kernel_app = typer.Typer(
    name="kernel",
    help="The simulated kernel's boot log and /proc views (zonelists, zoneinfo, buddyinfo).",
    no_args_is_help=True,
    add_completion=False,
)


def register(app: typer.Typer) -> None:
    app.add_typer(kernel_app, name="kernel")
    app.command(
        "numactl",
        context_settings=_RAW,
        add_help_option=False,
        help="Run numactl on a simulated machine: numasim numactl --machine M [--json] [numactl options] -- PROGRAM",
    )(numactl_command)
    app.command(
        "numastat",
        context_settings=_RAW,
        add_help_option=False,
        help="Run numastat on a simulated machine: numasim numastat --machine M [--after CMD]... [numastat options]",
    )(numastat_command)


def build_kernel(machine: str, kernel_version: str = "6.12") -> Kernel:
    """A fresh :class:`~numasim.kernel.kernel.Kernel` on a shipped machine name or a machine file."""
    from numasim.kernel.config import KernelConfig
    from numasim.kernel.kernel import Kernel
    from numasim.topology.io import load_machine

    m = load_machine(machine)
    try:
        config = KernelConfig(version=kernel_version)
    except ValueError as exc:
        _fail(str(exc))
        raise
    return Kernel(m, config)


def apply_after(kernel: Kernel, commands: list[str]) -> list[str]:
    """Run each ``"numactl ARGS -- PROG"`` (or ``"PROG ARGS"``) command on ``kernel``; returns their output."""
    from numasim.kernel.numactl import run_numactl

    outputs = []
    for text in commands:
        argv = shlex.split(text)
        if argv and argv[0] == "numactl":
            argv = argv[1:]
        if argv and argv[0] == "--":
            argv = argv[1:]
        if "--" in argv:
            cut = argv.index("--")
            argv = argv[:cut] + argv[cut + 1 :]
        run = run_numactl(kernel, argv, keep_alive=True)
        outputs.append(run.stdout + run.stderr)
    return outputs


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"numasim: error: {message}", err=True)
    raise typer.Exit(code)


def _split_own(
    args: list[str], own_values: set[str], own_flags: set[str]
) -> tuple[dict[str, Any], list[str]]:
    if args[:1] in (["--help"], ["-h"]):
        typer.echo(__doc__)
        raise typer.Exit(0)
    opts: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in own_flags and not eq:
            opts[name] = True
            i += 1
            continue
        if name in own_values:
            if not eq:
                if i + 1 >= len(args):
                    _fail(f"{name} needs a value")
                value = args[i + 1]
                i += 1
            opts.setdefault(name, []).append(value)
            i += 1
            continue
        if arg == "--":
            i += 1
        break
    return opts, args[i:]


_OWN_VALUES = {"--machine", "--kernel-version", "--after", "--calibration"}
_OWN_FLAGS = {"--nominal"}


def _kernel_from(opts: dict[str, Any]) -> Kernel:
    machines: list[str] = opts.get("--machine") or []
    if not machines:
        _fail("--machine MACHINE is required (a shipped machine name or a machine file)")
    kernel = build_kernel(machines[-1], (opts.get("--kernel-version") or ["6.12"])[-1])
    calibrations: list[str] = opts.get("--calibration") or []
    if calibrations or opts.get("--nominal"):
        # Timed virtual tools (lat_mem_rd, dd, mlc, stream, ib_send_*) use this calibration; without either
        # option they use the one the machine names, and fail clearly if it names none.
        from numasim.tools import bind_calibration
        from numasim.workload.run import resolve_calibration

        path = machines[-1] if Path(machines[-1]).exists() else None
        cal = resolve_calibration(
            kernel.machine, calibration=calibrations[-1] if calibrations else None,
            nominal=bool(opts.get("--nominal")), machine_path=path,
        )
        bind_calibration(kernel, cal)
    return kernel


def numactl_command(ctx: typer.Context) -> None:
    """numasim numactl --machine M [--kernel-version V] [--json] [numactl options] -- PROG"""
    from numasim.kernel.numactl import run_numactl
    from numasim.kernel.numastat import run_numastat
    from numasim.kernel.procfs import numastat_sources, page_runs, pages_per_node_of

    opts, argv = _split_own(list(ctx.args), _OWN_VALUES, _OWN_FLAGS | {"--json"})
    kernel = _kernel_from(opts)
    apply_after(kernel, opts.get("--after", []))
    before = {nid: kernel.numastat(nid) for nid in kernel.machine.node_ids}
    run = run_numactl(kernel, argv, keep_alive=True)
    after = {nid: kernel.numastat(nid) for nid in kernel.machine.node_ids}
    pids = [p for p in run.program_pids if p in kernel.tasks]
    if opts.get("--json"):
        runs = page_runs(kernel, pids)
        report = {
            "machine": kernel.machine.name,
            "kernel_version": f"{kernel.version[0]}.{kernel.version[1]}",
            "argv": argv,
            "exit_code": run.exit_code,
            "stdout": run.stdout,
            "stderr": run.stderr,
            "pids": run.program_pids,
            "pages_per_node": {str(k): v for k, v in pages_per_node_of(kernel, pids).items()},
            "page_runs": runs[:_MAX_RUNS],
            "page_runs_truncated": len(runs) > _MAX_RUNS,
            "numastat_delta": {
                str(nid): {name: after[nid][name] - before[nid].get(name, 0) for name in after[nid]}
                for nid in after
            },
            "syscalls": [
                {"call": name, "args": args, "ret": res.ret, "errno": res.errno}
                for name, args, res in run.syscalls
            ],
            "oom_kills": [{"pid": o.pid, "comm": o.comm, "reason": o.reason} for o in kernel.oom_kills],
        }
        typer.echo(json.dumps(report, indent=2))
        raise typer.Exit(run.exit_code)
    if run.stdout:
        typer.echo(run.stdout, nl=False)
    if run.stderr:
        typer.echo(run.stderr, nl=False, err=True)
    if pids and run.command:
        stat = run_numastat(["-p", *[str(p) for p in pids]], numastat_sources(kernel))
        typer.echo(stat.stdout, nl=False)
    raise typer.Exit(run.exit_code)


def numastat_command(ctx: typer.Context) -> None:
    """numasim numastat --machine M [--after CMD]... [numastat options]"""
    from numasim.kernel.numastat import run_numastat
    from numasim.kernel.procfs import numastat_sources

    opts, argv = _split_own(list(ctx.args), _OWN_VALUES, _OWN_FLAGS)
    kernel = _kernel_from(opts)
    for text in apply_after(kernel, opts.get("--after", [])):
        del text  # the commands' own output is not numastat's
    res = run_numastat(argv, numastat_sources(kernel), numastat_width=os.environ.get("NUMASTAT_WIDTH"))
    typer.echo(res.stdout, nl=False)
    if res.stderr:
        typer.echo(res.stderr, nl=False, err=True)
    raise typer.Exit(res.exit_code)


MachineArg = Annotated[
    str, typer.Argument(help="Shipped machine name or machine file (TOML, numactl text, ...).")
]
VersionOpt = Annotated[str, typer.Option("--kernel-version", help="Kernel version to model (6.1 .. 6.12).")]
AfterOpt = Annotated[
    list[str] | None,
    typer.Option("--after", help='Run "numactl ARGS -- PROG ARGS" first (repeatable).'),
]


@kernel_app.command("zonelists")
def zonelists(machine: MachineArg, kernel_version: VersionOpt = "6.12") -> None:
    """Print the zonelist fallback order of every node, as the kernel logs it at boot."""
    kernel = build_kernel(machine, kernel_version)
    typer.echo("\n".join(line.rstrip("\n") for line in kernel.pm.boot_log()))


@kernel_app.command("zoneinfo")
def zoneinfo(machine: MachineArg, after: AfterOpt = None, kernel_version: VersionOpt = "6.12") -> None:
    """Print /proc/zoneinfo of the simulated kernel (after running the --after commands)."""
    from numasim.kernel.procfs import format_zoneinfo, zone_views

    kernel = build_kernel(machine, kernel_version)
    apply_after(kernel, after or [])
    typer.echo(format_zoneinfo(zone_views(kernel)), nl=False)


@kernel_app.command("buddyinfo")
def buddyinfo(machine: MachineArg, after: AfterOpt = None, kernel_version: VersionOpt = "6.12") -> None:
    """Print /proc/buddyinfo of the simulated kernel (after running the --after commands)."""
    from numasim.kernel.procfs import format_buddyinfo, zone_views

    kernel = build_kernel(machine, kernel_version)
    apply_after(kernel, after or [])
    typer.echo(format_buddyinfo(zone_views(kernel)), nl=False)
