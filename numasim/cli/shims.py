"""``numasim shims DIR``: executables named like the NUMA tools, acting on a persistent simulated machine.

With DIR first in ``PATH`` (and ``NUMASIM_MACHINE`` naming a machine started with ``numasim machine start``, or
``--machine NAME`` baked in), a script's ``numactl``, ``numastat``, ``memhog`` and ``migratepages`` run on the
simulated machine and print what the real programs print, with their exit statuses: each shim is a small
``sh`` script that runs this Python with numasim's own command for it.
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

SHIMS: dict[str, list[str]] = {
    "numactl": ["numactl", "--", "--"],
    "numastat": ["numastat", "--", "--"],
    "memhog": ["numactl", "--", "--", "--", "memhog"],
    "migratepages": ["numactl", "--", "--", "--", "migratepages"],
}
"""Shim name -> the numasim command line its arguments are appended to. The first ``--`` ends the command-line
parser's options, the second numasim's own (``--machine``, ``--after``, ``--json``, ``-h``): everything the
script passes is the program's; the third ends numactl's options before a program."""


def register(app: typer.Typer) -> None:
    app.command("shims", help="Write executables numactl, numastat, memhog, migratepages into DIR that run on a "
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
        atomic_write_text(path, _script(name, machine))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        out.append(path)
    return out


def shims(
    directory: Annotated[Path, typer.Argument(help="Where to write the executables (created if missing).")],
    machine: Annotated[str | None, typer.Option("--machine", help="Pin this persistent machine (default: the "
                                                                  "NUMASIM_MACHINE of each call).")] = None,  # fmt: skip
) -> None:
    """Write shims for numactl, numastat, memhog, migratepages."""
    if machine is not None:
        from numasim.persist.store import MachineStore

        if not any(m.name == machine for m in MachineStore().list()):
            from numasim.errors import MachineStateError

            raise MachineStateError(f"machine {machine} is not started; start it with "
                                    f"`numasim machine start MACHINE --name {machine}`")  # fmt: skip
    paths = write_shims(directory, machine)
    typer.echo(f"wrote {', '.join(p.name for p in paths)} in {Path(directory).resolve()}")
    typer.echo(f"use them: export PATH={shlex.quote(str(Path(directory).resolve()))}:$PATH")
