"""numasim's own machine file: TOML whose tables mirror :class:`~numasim.topology.model.Machine` field by field.

The round trip TOML -> Machine -> TOML is lossless: :func:`dumps_machine` writes every field that differs from
its default, in model order, and :func:`loads_machine` validates through pydantic, so an error names the field.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from numasim.errors import FormatError, TopologyError
from numasim.fileio import atomic_write_text
from numasim.topology.cpulist import format_cpulist
from numasim.topology.model import Machine

__all__ = [
    "loads_machine",
    "load_machine_toml",
    "dumps_machine",
    "save_machine_toml",
    "validation_error",
    "format_validation_error",
    "describe_validation_error",
    "short_repr",
]


_VALUE_REPR_CHARS = 80
KNOWN_MACHINE_FORMATS = ("numasim-machine-1",)


def short_repr(value: object, limit: int = _VALUE_REPR_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (a whole machine dict is no use in an error line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_validation_error(err: ValidationError) -> tuple[str, object, str]:
    """(location, value or None, message) of the first pydantic error, without pydantic's prefixes.

    A model-level error (empty location, or an input that is a whole table) has no value worth printing:
    its message already names the field (``nodes[1].cpus: cpu 1 is already on node 0``).
    """
    errors = err.errors()
    first = errors[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    msg = str(first["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    value = first.get("input")
    if not loc or isinstance(value, dict):
        value = None
    return loc, value, msg


def format_validation_error(err: ValidationError, source: str | None = None) -> str:
    """One line for a pydantic error: ``SOURCE: LOC = VALUE: MESSAGE`` (value cut to ~80 characters).

    Examples
    --------
    >>> from numasim.topology.model import Machine
    >>> try:
    ...     Machine.model_validate({"name": "m", "nodes": [{"id": 0, "cpus": [0], "memory_bytes": 1},
    ...                                       {"id": 1, "cpus": [0], "memory_bytes": 1}]})
    ... except ValidationError as exc:
    ...     print(format_validation_error(exc, "m.toml"))
    m.toml: nodes[1].cpus: cpu 0 is already on node 0
    """
    loc, value, msg = describe_validation_error(err)
    head = f"{source}: " if source else ""
    if value is None:
        return f"{head}{loc}: {msg}" if loc else f"{head}{msg}"
    return f"{head}{loc} = {short_repr(value)}: {msg}"


def validation_error(err: ValidationError, source: str) -> TopologyError:
    """Turn a pydantic error into a :class:`TopologyError` naming the first bad field (and a short value)."""
    loc, value, msg = describe_validation_error(err)
    exc = TopologyError(f"{source}: {loc or 'machine'}", value, msg)
    exc.args = (format_validation_error(err, source),)  # the one line the CLI prints
    return exc


def _toml_error(source: str, exc: tomllib.TOMLDecodeError) -> FormatError:
    # Python 3.11's tomllib puts "(at line L, column C)" in the message only; take the line from there.
    text = str(exc)
    found = re.search(r"at line (\d+), column (\d+)", text)
    return FormatError(source, f"not valid TOML: {text}", int(found.group(1)) if found else None)


def loads_machine(text: str, source: str = "<toml>") -> Machine:
    """Parse a machine from TOML text.

    ``format``, when present, must be ``"numasim-machine-1"`` (a newer format is refused, not misread).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(source, exc) from None
    fmt = data.pop("format", None)
    if fmt is not None and fmt not in KNOWN_MACHINE_FORMATS:
        raise FormatError(
            source, f"format = {short_repr(fmt)}: unknown machine format version (known: {', '.join(KNOWN_MACHINE_FORMATS)})"
        )
    try:
        return Machine.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source) from None


def load_machine_toml(path: str | Path) -> Machine:
    p = Path(path)
    return loads_machine(p.read_text(encoding="utf-8"), str(p))


def _plain(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def dumps_machine(machine: Machine) -> str:
    """Serialise ``machine`` as TOML (``format = "numasim-machine-1"`` first, then the model's fields)."""
    body = _plain(machine.model_dump(mode="json", exclude_defaults=True))
    for node in body["nodes"]:
        if "cpus" in node:
            node["cpus"] = format_cpulist(node["cpus"])
    for die in body.get("core_dies", []):
        die["cpus"] = format_cpulist(die["cpus"])
    # Keep scalar keys before tables so the file reads top-down: name, description, ... then [[nodes]].
    head = {k: v for k, v in body.items() if not isinstance(v, list | dict)}
    tail = {k: v for k, v in body.items() if isinstance(v, list | dict)}
    return tomli_w.dumps({"format": "numasim-machine-1", **head, **tail}, multiline_strings=True)


def save_machine_toml(machine: Machine, path: str | Path) -> None:
    """Write ``machine`` to ``path`` atomically (a temporary file renamed into place)."""
    p = Path(path)
    text = dumps_machine(machine)  # render first: a failure here touches no file
    atomic_write_text(p, text)
