"""The ``numasim`` command line (typer). Each command group lives in its own module and registers itself here.

Library code never prints; this layer turns results into text and errors into one line on stderr with exit
status 2 (bad input) so scripts can tell a usage error from a simulated failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from numasim.errors import NumasimError

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main", "run"]

_APP: typer.Typer | None = None


def _app() -> typer.Typer:
    """The typer application, made on first use: numactl, numastat and taskset run without typer (:func:`main`)."""
    global _APP
    if _APP is None:
        import typer

        _APP = typer.Typer(
            name="numasim",
            help="Simulate NUMA machines: where Linux places memory under each policy, and what every access costs.",
            no_args_is_help=True,
            add_completion=False,
            pretty_exceptions_enable=False,
        )
        _APP.callback()(_root)
    return _APP


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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

    app = _app()
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


def _fast_commands() -> dict[str, Callable[[list[str]], int]]:
    from numasim.cli.kernel import numactl_main, numastat_main
    from numasim.cli.taskset import taskset_entry

    return {"numactl": numactl_main, "numastat": numastat_main, "taskset": taskset_entry}


_FAST = ("numactl", "numastat", "taskset")
"""Commands run without typer: their arguments are raw (numactl's, numastat's, taskset's own syntax), and scripts
call them through the shims many times, so their start-up counts (issue 11)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``numasim`` script; returns the exit status instead of exiting."""
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:
        # The numasim process is ours: let the engine's large temporaries be reused instead of page-faulted in
        # again chunk after chunk (numasim.allocator; results do not depend on it).
        from numasim.allocator import tune_allocator

        tune_allocator()
    if args[:1] and args[0] in _FAST:
        rest = args[1:]
        if "--" in rest:  # what typer's parser does with the line: the first "--" ends its options and goes
            rest.remove("--")
        return _reporting_errors(lambda: _fast_commands()[args[0]](rest))
    _register(args)

    def typer_main() -> int:
        import typer

        from numasim.cli.help_labels import plain_help_labels

        # standalone mode: typer prints usage errors itself and exits 2; our own errors come through here.
        command = typer.main.get_command(_app())
        plain_help_labels(command)  # --machine MACHINE, --seed N, flags bare: not <str>, <int>, <bool>
        command(args=args, prog_name="numasim", standalone_mode=True)
        return 0

    return _reporting_errors(typer_main)


def _reporting_errors(body: Callable[[], int]) -> int:
    """Run a command; numasim's own errors become one ``numasim: error:`` line on stderr and exit status 2."""
    from numasim.cli.console import echo, exit_status

    try:
        return body()
    except SystemExit as exc:
        return exit_status(exc)
    except NumasimError as exc:
        echo(f"numasim: error: {exc}", err=True)
        return 2
    except FileNotFoundError as exc:
        echo(f"numasim: error: no such file: {exc.filename}", err=True)
        return 2
    except (FileExistsError, NotADirectoryError, PermissionError, IsADirectoryError) as exc:
        # An output path some writer did not check itself: name the path and the cause, no traceback.
        from numasim.fileio import output_error

        echo(f"numasim: error: {output_error(exc.filename or '?', exc, is_dir=isinstance(exc, FileExistsError))}", err=True)
        return 2
    except Exception as exc:
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        from numasim.topology.io.toml_format import format_validation_error

        echo(f"numasim: error: {format_validation_error(exc)}", err=True)
        return 2


def _root() -> None:
    """Simulate NUMA machines: where Linux places memory under each policy, and what every access costs."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())
