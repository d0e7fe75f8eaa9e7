"""The ``numasim`` command line (typer). Each command group lives in its own module and registers itself here.

Library code never prints; this layer turns results into text and errors into one line on stderr with exit
status 2 (bad input) so scripts can tell a usage error from a simulated failure.
"""

from __future__ import annotations

import sys

import typer
from pydantic import ValidationError

from numasim.cli.help_labels import plain_help_labels
from numasim.errors import NumasimError

__all__ = ["app", "main", "run"]

app = typer.Typer(
    name="numasim",
    help="Simulate NUMA machines: where Linux places memory under each policy, and what every access costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


_MODULES = ("demo", "topo", "trace", "kernel", "machine", "shims", "taskset", "calibrate", "catalog", "run_command", "sweep")
"""Every command module, in the order ``numasim --help`` lists their commands."""
_KERNEL_ONLY = {"numactl": "kernel", "numastat": "kernel", "kernel": "kernel", "machine": "machine", "shims": "shims",
                "taskset": "taskset"}
"""Commands whose module alone is loaded: kernel-only commands start without the timing model, the workload
layer or the plotting code (scripts call them often; issue 11 asks for a fast start)."""
_registered: set[str] = set()


def _register(argv: list[str] | None = None) -> None:
    """Register the command modules ``argv`` needs (all of them, unless it names a kernel-only command); each
    module once per process, so that main() can be called again (tests, notebooks), and the commands always
    listed in :data:`_MODULES` order whatever was registered first."""
    import importlib

    command = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), None)
    wanted = [_KERNEL_ONLY[command]] if command in _KERNEL_ONLY else list(_MODULES)
    added = False
    for name in wanted:
        if name in _registered:
            continue
        before = (len(app.registered_commands), len(app.registered_groups))
        importlib.import_module(f"numasim.cli.{name}").register(app)
        for info in app.registered_commands[before[0] :] + app.registered_groups[before[1] :]:  # type: ignore[operator]
            _origin[id(info)] = _MODULES.index(name)
        _registered.add(name)
        added = True
    if added:
        app.registered_commands.sort(key=lambda info: _origin.get(id(info), len(_MODULES)))
        app.registered_groups.sort(key=lambda info: _origin.get(id(info), len(_MODULES)))


_origin: dict[int, int] = {}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``numasim`` script; returns the exit status instead of exiting."""
    _register(argv)
    try:
        # standalone mode: typer prints usage errors itself and exits 2; our own errors come through here.
        command = typer.main.get_command(app)
        plain_help_labels(command)  # --machine MACHINE, --seed N, flags bare: not <str>, <int>, <bool>
        command(args=argv, prog_name="numasim", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except NumasimError as exc:
        typer.echo(f"numasim: error: {exc}", err=True)
        return 2
    except ValidationError as exc:
        from numasim.topology.io.toml_format import format_validation_error

        typer.echo(f"numasim: error: {format_validation_error(exc)}", err=True)
        return 2
    except FileNotFoundError as exc:
        typer.echo(f"numasim: error: no such file: {exc.filename}", err=True)
        return 2
    except (FileExistsError, NotADirectoryError, PermissionError, IsADirectoryError) as exc:
        # An output path some writer did not check itself: name the path and the cause, no traceback.
        from numasim.fileio import output_error

        typer.echo(f"numasim: error: {output_error(exc.filename or '?', exc, is_dir=isinstance(exc, FileExistsError))}", err=True)
        return 2
    return 0


@app.callback()
def _root() -> None:
    """Simulate NUMA machines: where Linux places memory under each policy, and what every access costs."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())
