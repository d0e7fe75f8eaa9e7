"""``numasim machine start|stop|reset|list|env|exec``: persistent simulated machines (numasim.persist).

A started machine keeps its kernel between commands: ``NUMASIM_MACHINE=NAME numasim numactl ...`` (or
``eval "$(numasim machine env NAME)"`` once) runs numactl and numastat on it, and what they leave (live
processes, shared memory segments, counters) is there for the next command.
"""

from __future__ import annotations

import os
import shlex
from typing import Annotated

import typer

__all__ = ["register", "machine_app"]

machine_app = typer.Typer(
    no_args_is_help=True,
    help="Persistent simulated machines: boot once, then numactl / numastat act on them (NUMASIM_MACHINE=NAME).",
)


def register(app: typer.Typer) -> None:
    app.add_typer(machine_app, name="machine")


NameArg = Annotated[str, typer.Argument(help="The machine's name (numasim machine list shows them).")]


@machine_app.command("start")
def start(
    machine: Annotated[str, typer.Argument(help="Shipped machine name or machine file (TOML, numactl text, ...).")],
    name: Annotated[str | None, typer.Option("--name", help="Name of the persistent machine (default: the "
                                                             "machine's name).")] = None,  # fmt: skip
    kernel_version: Annotated[str, typer.Option("--kernel-version", help="Kernel version to model (6.1 .. 6.12).")] = "6.12",
    thp: Annotated[str, typer.Option("--thp", metavar="always|madvise|never", help="Transparent hugepages at boot.")] = "madvise",
    sysctl: Annotated[list[str] | None, typer.Option("--sysctl", metavar="NAME=VALUE",
                                                     help="Write a kernel knob at boot (repeatable).")] = None,  # fmt: skip
    page_cache: Annotated[list[str] | None, typer.Option("--page-cache", metavar="NODE=SIZE",
                                                         help="Clean page cache on NODE at boot (repeatable).")] = None,  # fmt: skip
    kswapd: Annotated[bool, typer.Option("--kswapd", help="Run kswapd's background reclaim.")] = False,
    buddyinfo: Annotated[str | None, typer.Option("--buddyinfo", metavar="FILE",
                                                  help="A measured /proc/buddyinfo (fragmented free memory).")] = None,  # fmt: skip
) -> None:
    """Boot a machine whose kernel outlives each command; print how to use it."""
    from pathlib import Path

    from numasim.persist.store import ENV_MACHINE, BootOptions, MachineStore, resolve_machine_argument

    try:
        text = Path(buddyinfo).read_text(encoding="utf-8") if buddyinfo is not None else None
    except OSError as exc:
        raise typer.BadParameter(f"{buddyinfo}: {exc.strerror}", param_hint="--buddyinfo") from None
    options = BootOptions(
        machine=resolve_machine_argument(machine), kernel_version=kernel_version, thp=thp, sysctl=tuple(sysctl or ()),
        page_cache=tuple(page_cache or ()), kswapd=kswapd, buddyinfo=text,
    )  # fmt: skip
    from numasim.topology.io import load_machine

    chosen = name or load_machine(options.machine).name
    try:
        stored = MachineStore().start(chosen, options)
    except ValueError as exc:  # a bad sysctl, page cache or buddyinfo: the option's own message
        from numasim.errors import MachineStateError

        raise MachineStateError(str(exc)) from None
    typer.echo(f"started {stored.name} ({options.machine}) in {stored.directory}")
    typer.echo(f"use it: export {ENV_MACHINE}={shlex.quote(stored.name)}   (or: eval \"$(numasim machine env {stored.name})\")")


@machine_app.command("stop")
def stop(name: NameArg) -> None:
    """Stop a machine: its state is removed."""
    from numasim.persist.store import MachineStore

    MachineStore().stop(name)
    typer.echo(f"stopped {name}")


@machine_app.command("reset")
def reset(name: NameArg) -> None:
    """Boot a machine afresh with the options it was started with (processes, segments and counters go)."""
    from numasim.persist.store import MachineStore

    stored = MachineStore().reset(name)
    typer.echo(f"reset {stored.name} ({stored.options.machine})")


@machine_app.command("list")
def list_machines() -> None:
    """The started machines: name, machine, kernel version, live processes, where the state is."""
    from numasim.persist.store import MachineStore

    store = MachineStore()
    rows = []
    for m in store.list():
        try:
            with store.session(m.name, save=False) as kernel:
                processes = str(sum(1 for t in kernel.tasks.values() if t.pid == t.tgid))
        except Exception as exc:  # a damaged state still lists, with the reason
            processes = f"unreadable ({type(exc).__name__})"
        rows.append((m.name, m.options.machine, m.options.kernel_version, processes, str(m.directory)))
    if not rows:
        typer.echo(f"no machine started (in {store.root})")
        return
    header = ("name", "machine", "kernel", "processes", "state")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


@machine_app.command("env")
def env(name: NameArg) -> None:
    """Shell lines that point later commands at machine NAME: eval "$(numasim machine env NAME)"."""
    from numasim.persist.store import ENV_MACHINE, ENV_STATE_DIR, MachineStore

    store = MachineStore()
    store.directory(name)  # a bad name is an error here, not in the shell later
    if not any(m.name == name for m in store.list()):
        from numasim.errors import MachineStateError

        raise MachineStateError(f"machine {name} is not started; start it with `numasim machine start MACHINE --name {name}`")
    typer.echo(f"export {ENV_MACHINE}={shlex.quote(name)}")
    if os.environ.get(ENV_STATE_DIR):
        typer.echo(f"export {ENV_STATE_DIR}={shlex.quote(str(store.root))}")  # absolute


@machine_app.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
def exec_command(
    name: NameArg,
    command: Annotated[list[str], typer.Argument(metavar="-- CMD ARGS", help="The command and its arguments.")],
) -> None:
    """Run CMD in a private mount namespace that shows the machine's /sys and /proc, with the simulated nproc."""
    from numasim.persist.namespace import NamespaceError, run_in_namespace
    from numasim.persist.nproc import write_nproc
    from numasim.persist.store import ENV_MACHINE, ENV_STATE_DIR, MachineStore

    argv = command[1:] if command[:1] == ["--"] else command
    if not argv:
        raise typer.BadParameter("give the command to run after --", param_hint="CMD")
    store = MachineStore()
    tree = store.views(name)  # a machine that is not started: the usual error
    cpus = (tree / "sys/devices/system/cpu/present").read_text(encoding="utf-8")
    from numasim.topology.cpulist import parse_cpulist

    count = len(parse_cpulist(cpus))
    bin_dir = store.directory(name) / "bin"
    write_nproc(bin_dir, name, count, count, store.directory(name))
    env = dict(os.environ)
    env[ENV_MACHINE] = name
    env[ENV_STATE_DIR] = str(store.root)  # absolute: the command may change directory
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', os.defpath)}"
    try:
        status = run_in_namespace(store.directory(name), tree, argv, env)
    except NamespaceError as exc:
        typer.echo(f"numasim: error: {exc}", err=True)
        raise typer.Exit(exc.status) from None
    raise typer.Exit(status)
