"""``--help`` that reads like a real tool's: ``--machine MACHINE``, ``--seed N``, ``-o FILE``, flags bare.

Typer labels every parameter with its Python type (``<str>``, ``<bool>``, ``<path>``, ``<int>``), flags included.
:func:`plain_help_labels` walks the click command tree once, before it runs, and gives each option a metavar
(an explicit one wins; otherwise from the option's name and type, :func:`option_metavar`), drops the label of
flags and arguments (an argument's name already is its label) and writes a required argument as ``FILE`` in the
usage line instead of ``{FILE}``.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperOption

__all__ = ["plain_help_labels", "option_metavar"]

_BY_NAME = {
    "after": "CMD",
    "compare": "POLICY",
    "created": "DATE",
    "fit-on": "TABLES",
    "working-set": "SIZE",
    "cod": "MODE",
    "snc": "MODE",
    "nps": "MODE",
    "cpu": "MODEL",
    "from": "FORMAT",
    "to": "FORMAT",
    "trace-format": "FORMAT",
    "kernel-version": "VERSION",
    "style": "VERSION",
    "prior-source": "SOURCE",
    "csv": "DIR",
    "plots": "DIR",
}
"""Names whose value is better called by what it is than by the option's last word."""


def option_metavar(long_name: str, kind: str) -> str:
    """The value label of option ``--long-name`` whose value is of ``kind`` (``str``, ``int``, ``float``, ``path``).

    Examples
    --------
    >>> option_metavar("--machine", "str"), option_metavar("--seed", "int"), option_metavar("--output", "path")
    ('MACHINE', 'N', 'FILE')
    >>> option_metavar("--die-latency-ns", "float"), option_metavar("--stride-bytes", "int")
    ('NS', 'BYTES')
    """
    name = long_name.lstrip("-")
    if name in _BY_NAME:
        return _BY_NAME[name]
    last = name.rsplit("-", 1)[-1]
    if name.endswith("-gb-s"):
        return "GB/S"
    if last in ("ns", "bytes"):
        return last.upper()
    if kind == "path":
        return "FILE"
    if kind == "int":
        return "N"
    if kind == "float":
        return "X"
    return last.upper()


class _Flag(TyperOption):
    """A flag: no value, so no value label."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class _Argument(TyperArgument):
    """A positional argument: its name (``MACHINE``, ``FILE...``) is its label."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if not self.required:
            name = f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


def _kind(param: TyperOption) -> str:
    desc = param.type_descriptor
    if desc.is_path:
        return "path"
    annotation = desc.annotation
    for kind in (int, float):
        if annotation is kind or (getattr(annotation, "__args__", None) or (None,))[0] is kind:
            return kind.__name__
    return "str"


def _relabel(param: Any) -> None:
    if isinstance(param, TyperOption):
        if param.is_flag or param.count:
            param.__class__ = _Flag
        elif param.metavar is None:
            if param.type_descriptor.is_choice:
                return  # typer's own label lists the choices
            long_names = [o for o in param.opts if o.startswith("--")] or list(param.opts)
            param.metavar = option_metavar(long_names[0], _kind(param))
    elif isinstance(param, TyperArgument):
        if param.metavar is None and param.name:
            param.metavar = "FILE" if param.type_descriptor.is_path and param.name in ("path", "files") else (
                param.name.upper()
            )
        param.__class__ = _Argument


def plain_help_labels(command: Any) -> None:
    """Relabel every parameter of ``command`` and its subcommands, the ``--help`` options included."""
    import typer._click as click

    ctx = click.Context(command)
    for param in [*command.params, command.get_help_option(ctx)]:
        if param is not None:
            _relabel(param)
    for sub in getattr(command, "commands", {}).values():
        plain_help_labels(sub)
