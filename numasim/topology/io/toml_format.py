"""numasim's own machine file: TOML whose tables mirror :class:`~numasim.topology.model.Machine` field by field.

The round trip TOML -> Machine -> TOML is lossless: :func:`dumps_machine` writes every field that differs from
its default, in model order, and :func:`loads_machine` validates through pydantic, so an error names the field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from numasim.errors import FormatError, TopologyError
from numasim.fileio import atomic_write_text
from numasim.topology.cpulist import format_cpulist
from numasim.topology.model import Machine

__all__ = ["loads_machine", "load_machine_toml", "dumps_machine", "save_machine_toml", "validation_error"]


def validation_error(err: ValidationError, source: str) -> TopologyError:
    """Turn a pydantic error into a :class:`TopologyError` naming the first bad field and value."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "machine"
    return TopologyError(f"{source}: {field}", first.get("input"), first["msg"])


def loads_machine(text: str, source: str = "<toml>") -> Machine:
    """Parse a machine from TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(source, f"not valid TOML: {exc}") from None
    data.pop("format", None)
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
    # Keep scalar keys before tables so the file reads top-down: name, description, ... then [[nodes]].
    head = {k: v for k, v in body.items() if not isinstance(v, list | dict)}
    tail = {k: v for k, v in body.items() if isinstance(v, list | dict)}
    return tomli_w.dumps({"format": "numasim-machine-1", **head, **tail}, multiline_strings=True)


def save_machine_toml(machine: Machine, path: str | Path) -> None:
    """Write ``machine`` to ``path`` atomically (a temporary file renamed into place)."""
    p = Path(path)
    text = dumps_machine(machine)  # render first: a failure here touches no file
    atomic_write_text(p, text)
