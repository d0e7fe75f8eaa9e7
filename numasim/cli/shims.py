"""``numasim shims DIR``: executables named like the NUMA tools, acting on a persistent simulated machine.

With DIR first in ``PATH`` (and ``NUMASIM_MACHINE`` naming a machine started with ``numasim machine start``, or
``--machine NAME`` baked in), a script's ``numactl``, ``numastat``, ``memhog``, ``migratepages``, ``migspeed``,
``numademo`` and ``taskset`` run on the simulated machine and print what the real programs print, with their
exit statuses: each shim is a small ``sh`` script that runs this Python with numasim's own command for it.

DIR is laid out as numactl's build directory: the tools at the top, numactl's test programs (``make check``)
in ``DIR/test/`` (``printcpu``, ``pagesize``, ``distance``, ``node-parse``, ...), so numactl's test scripts run
unmodified with ``builddir=DIR`` (``experiments/numactl-testsuite``).
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "write_shims", "SHIMS"]

_PROGRAM = ["numactl", "--", "--", "--"]
"""A virtual program runs as the program of a numactl without options (a new process, the shell's affinity)."""

TEST_PROGRAMS = ("printcpu", "pagesize", "distance", "node-parse", "tbitmap", "prefered", "mynode", "tshared",
                 "realloc_test", "migrate_pages", "mbind_mig_pages", "move_pages", "nodemap", "ftok", "randmap")  # fmt: skip
"""numactl's test programs (its Makefile.am's check_PROGRAMS that numasim runs, and the printcpu script)."""

SHIMS: dict[str, list[str]] = {
    "numactl": ["numactl", "--", "--"],
    "numastat": ["numastat", "--", "--"],
    "memhog": [*_PROGRAM, "memhog"],
    "migratepages": [*_PROGRAM, "migratepages"],
    "migspeed": [*_PROGRAM, "migspeed"],
    "numademo": [*_PROGRAM, "numademo"],
    "taskset": ["taskset", "--"],
    **{f"test/{name}": [*_PROGRAM, name] for name in TEST_PROGRAMS},
}
"""Shim path (relative to DIR) -> the numasim command line its arguments are appended to. For numactl and
numastat the first ``--`` ends the command-line parser's options, the second numasim's own (``--machine``,
``--after``, ``--json``, ``-h``): everything the script passes is the program's; for a program the third ends
numactl's options before it. taskset has no numasim options: one ``--``."""


def register(app: typer.Typer) -> None:
    app.command("shims", help="Write executables numactl, numastat, memhog, migratepages, migspeed, numademo, "
                              "taskset and numactl's test programs (DIR/test/...) into DIR that run on a "
                              "persistent simulated machine (numasim machine start).")(shims)  # fmt: skip


def _script(name: str, machine: str | None) -> str:
    prefix = SHIMS[name]
    pinned = "" if machine is None else f"NUMASIM_MACHINE={shlex.quote(machine)}\nexport NUMASIM_MACHINE\n"
    from numasim.persist.store import default_root

    state = str(default_root()) if os.environ.get("NUMASIM_STATE_DIR") else None  # absolute: shims run anywhere
    pinned_state = f": \"${{NUMASIM_STATE_DIR:={shlex.quote(state)}}}\"\nexport NUMASIM_STATE_DIR\n" if state else ""
    import numasim

    source = str(Path(numasim.__file__).resolve().parents[1])  # this numasim, installed or not
    path = f"PYTHONPATH={shlex.quote(source)}${{PYTHONPATH:+:$PYTHONPATH}}\nexport PYTHONPATH\n"
    call = f"import sys; from numasim.cli import main; sys.exit(main({prefix!r} + sys.argv[1:]))"
    return (
        "#!/bin/sh\n"
        f"# numasim shim for {name}: runs on the persistent simulated machine $NUMASIM_MACHINE (numasim shims)\n"
        f"{pinned}{pinned_state}{path}"
        f"exec {shlex.quote(sys.executable)} -c {shlex.quote(call)} \"$@\"\n"
    )


def write_shims(directory: str | Path, machine: str | None = None) -> list[Path]:
    """Write the shims into ``directory`` (created if missing); ``machine`` pins NUMASIM_MACHINE in them.
    Returns their paths."""
    from numasim.fileio import atomic_write_text

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in SHIMS:
        path = d / name
        path.parent.mkdir(exist_ok=True)
        atomic_write_text(path, _script(name, machine))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        out.append(path)
    return out


def shims(
    directory: Annotated[Path, typer.Argument(help="Where to write the executables (created if missing).")],
    machine: Annotated[str | None, typer.Option("--machine", help="Pin this persistent machine (default: the "
                                                                  "NUMASIM_MACHINE of each call).")] = None,  # fmt: skip
) -> None:
    """Write shims for numactl, numastat, memhog, migratepages, migspeed, numademo, taskset and numactl's test
    programs (in DIR/test/, as numactl's build directory has them)."""
    if machine is not None:
        from numasim.persist.store import MachineStore

        if not any(m.name == machine for m in MachineStore().list()):
            from numasim.errors import MachineStateError

            raise MachineStateError(f"machine {machine} is not started; start it with "
                                    f"`numasim machine start MACHINE --name {machine}`")  # fmt: skip
    paths = write_shims(directory, machine)
    top = [str(p.relative_to(Path(directory))) for p in paths if p.parent == Path(directory)]
    tests = [p.name for p in paths if p.parent != Path(directory)]
    typer.echo(f"wrote {', '.join(top)} and test/{{{','.join(tests)}}} in {Path(directory).resolve()}")
    typer.echo(f"use them: export PATH={shlex.quote(str(Path(directory).resolve()))}:$PATH")
