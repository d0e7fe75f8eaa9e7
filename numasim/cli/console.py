"""Output and exit statuses for the commands that must start fast (numactl, numastat, taskset): what they need
of typer's, without importing typer (about a third of a kernel-only command's start-up)."""

from __future__ import annotations

import sys

__all__ = ["echo", "exit_status"]


def echo(text: str = "", nl: bool = True, err: bool = False) -> None:
    """Write ``text`` (and a newline) to stdout or stderr, flushed: a script reading a pipe sees each line
    when the command prints it, as ``typer.echo`` does."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


def exit_status(done: SystemExit) -> int:
    """The status a :class:`SystemExit` exits with (``None``: 0; a message: 1, as Python exits)."""
    code = done.code
    return code if isinstance(code, int) else (0 if code is None else 1)
