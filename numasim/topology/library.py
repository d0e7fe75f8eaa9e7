"""The shipped machines: TOML files under the repository's ``topologies/`` (``numasim/_shipped/topologies/`` in
an installed wheel, put there by the pyproject's force-include).

A machine is named by its file stem (``seed-000-4node``). :func:`find_shipped` suggests the closest name when
one is misspelt.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from numasim.errors import NumasimError
from numasim.topology.cpulist import parse_cpulist

__all__ = ["ShippedMachine", "UnknownMachineError", "shipped_dir", "list_shipped", "find_shipped"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


class UnknownMachineError(NumasimError, KeyError):
    """No shipped machine has this name (the message lists those that exist)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class ShippedMachine:
    """A shipped machine file and a summary read from it without building the model."""

    name: str
    path: Path
    nodes: int
    cpus: int
    memory_bytes: int
    source: str
    """First line of the machine's ``source`` field (provenance)."""
    calibration: str = ""
    """The calibration file the machine names (``calibration = "..."``), ``""`` if it names none."""
    calibration_exists: bool = False
    """Whether that file is next to the machine file (where :mod:`numasim.timing.resolve` looks first)."""


def shipped_dir() -> Path:
    """Where the shipped machine files are: the wheel's ``numasim/_shipped/topologies`` if it exists, else the
    repository's top-level ``topologies/`` next to the package (which may not exist yet)."""
    wheel = _PACKAGE_DIR / "_shipped" / "topologies"
    if wheel.is_dir():
        return wheel
    return _PACKAGE_DIR.parent / "topologies"


def _files() -> list[Path]:
    d = shipped_dir()
    return sorted(d.glob("*.toml")) if d.is_dir() else []


def _summary(path: Path) -> ShippedMachine:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return ShippedMachine(path.stem, path, 0, 0, 0, "(unreadable)")
    raw_nodes = data.get("nodes")
    nodes: list[object] = raw_nodes if isinstance(raw_nodes, list) else []
    cpus = 0
    memory = 0
    for node in nodes:
        if not isinstance(node, dict):
            continue
        raw = node.get("cpus", [])
        try:
            cpus += len(parse_cpulist(raw)) if isinstance(raw, str) else len(raw)
        except (ValueError, TypeError):
            pass
        mem = node.get("memory_bytes", 0)
        memory += mem if isinstance(mem, int) else 0
    source = str(data.get("source", "")).strip().splitlines()
    cal = data.get("calibration")
    cal_name = cal if isinstance(cal, str) else ""
    cal_exists = bool(cal_name) and (path.parent / cal_name).is_file()
    return ShippedMachine(
        path.stem, path, len(nodes), cpus, memory, source[0] if source else "", cal_name, cal_exists
    )


def list_shipped() -> list[ShippedMachine]:
    """Every shipped machine, by name."""
    return [_summary(p) for p in _files()]


def find_shipped(name: str) -> Path:
    """The path of the shipped machine ``name`` (a file stem; ``.toml`` may be given).

    Raises
    ------
    UnknownMachineError
        Naming the machines that exist and the closest match.
    """
    stem = name[:-5] if name.endswith(".toml") else name
    files = {p.stem: p for p in _files()}
    if stem in files:
        return files[stem]
    names = sorted(files)
    close = difflib.get_close_matches(stem, names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    listing = ", ".join(names) if names else f"none (no .toml files in {shipped_dir()})"
    raise UnknownMachineError(f"no shipped machine {stem!r}.{hint} Shipped machines: {listing}")
