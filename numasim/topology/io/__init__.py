"""Machine file formats: our TOML, ``numactl --hardware`` text, sysfs node trees, hwloc XML, and (read only)
kerncraft machine files and ``lscpu`` output.

:func:`load_machine` takes a shipped machine's name or a path in any of these formats (told apart by content,
:func:`~numasim.topology.io.detect.detect_format`); :func:`save_machine` writes by suffix.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from numasim.errors import FormatError, TopologyError
from numasim.topology.io.detect import (
    KNOWN_FORMATS,
    WRITABLE_FORMATS,
    MachineFormat,
    detect_format,
    format_for_suffix,
)
from numasim.topology.io.hwloc import read_hwloc_xml, save_machine_hwloc, write_hwloc_xml
from numasim.topology.io.kerncraft import load_machine_kerncraft
from numasim.topology.io.lscpu import load_machine_lscpu
from numasim.topology.io.numactl import (
    NumactlHardware,
    NumactlNode,
    format_numactl_hardware,
    load_machine_numactl,
    machine_from_numactl,
    numactl_hardware_for,
    parse_numactl_hardware,
    save_machine_numactl,
)
from numasim.topology.io.sysfs import read_sysfs_node_tree, write_sysfs_node_tree
from numasim.topology.io.toml_format import (
    dumps_machine,
    load_machine_toml,
    loads_machine,
    save_machine_toml,
    validation_error,
)
from numasim.topology.model import Machine

__all__ = [
    "KNOWN_FORMATS",
    "WRITABLE_FORMATS",
    "MachineFormat",
    "detect_format",
    "load_machine",
    "machine_source",
    "save_machine",
    "read_hwloc_xml",
    "load_machine_kerncraft",
    "load_machine_lscpu",
    "write_hwloc_xml",
    "read_sysfs_node_tree",
    "write_sysfs_node_tree",
    "NumactlHardware",
    "NumactlNode",
    "parse_numactl_hardware",
    "format_numactl_hardware",
    "machine_from_numactl",
    "numactl_hardware_for",
    "loads_machine",
    "dumps_machine",
    "load_machine_toml",
    "save_machine_toml",
]


def machine_source(spec: str | Path) -> Path | None:
    """The user's file or folder that ``spec`` names, or ``None`` when it names a shipped machine.

    The rule, so that a stray folder never hides a shipped machine and a typo in a path is reported as one:

    * a ``Path``, or a string with a path separator (``./box``, ``dir/box.txt``) or a file suffix
      (``box.toml``, ``nosuch.txt``), is a path: it must exist;
    * a bare name (``seed-003-2node``) is a file in the current directory when such a *file* exists,
      otherwise a shipped machine, and only when no shipped machine has that name a directory (a sysfs tree)
      of that name. Write ``./NAME`` for a folder named like a shipped machine.

    Raises
    ------
    FormatError
        ``no such file`` for a path that does not exist.
    UnknownMachineError
        For a bare name that is neither a file, a shipped machine nor a directory (naming the shipped ones).

    Examples
    --------
    >>> machine_source("seed-003-2node") is None
    True
    >>> machine_source("nosuch.toml")
    Traceback (most recent call last):
    ...
    numasim.errors.FormatError: nosuch.toml: no such file
    """
    from numasim.topology.library import UnknownMachineError, find_shipped

    p = Path(spec)
    text = str(spec)
    if isinstance(spec, Path) or "/" in text or "\\" in text or p.suffix:
        if not p.exists():
            raise FormatError(text, "no such file")
        return p
    if p.is_file():
        return p
    try:
        find_shipped(text)
    except UnknownMachineError:
        if p.is_dir():
            return p
        raise
    return None


def load_machine(spec: str | Path) -> Machine:
    """Load a machine: a shipped machine's name (``"seed-001-e5-2680v2"``) or a path in any known format.

    Which one ``spec`` names follows :func:`machine_source`: a path has a separator or a suffix (and must
    exist), a bare name is a shipped machine unless a file of that name exists; a name that is neither names
    the shipped machines (with a close-match suggestion) in the error.
    """
    from numasim.topology.library import find_shipped

    source = machine_source(spec)
    p = find_shipped(str(spec)) if source is None else source
    fmt = detect_format(p)
    try:
        if fmt == "toml":
            return load_machine_toml(p)
        if fmt == "numactl":
            return load_machine_numactl(p)
        if fmt == "sysfs":
            return read_sysfs_node_tree(p)
        if fmt == "kerncraft":
            return load_machine_kerncraft(p)
        if fmt == "lscpu":
            return load_machine_lscpu(p)
        return read_hwloc_xml(p)
    except ValidationError as exc:
        # A value the reader took from the file broke a model rule: say which file, then which field.
        raise validation_error(exc, str(p)) from None
    except TopologyError as exc:
        if str(p) in str(exc):
            raise
        raise TopologyError(f"{p}: {exc.field}", exc.value, exc.reason) from None


def save_machine(machine: Machine, path: str | Path, format: MachineFormat | None = None) -> None:
    """Write ``machine`` to ``path`` atomically, in ``format`` or by suffix (``.toml``, ``.xml`` hwloc, ``.txt``
    numactl text, a directory or no suffix: sysfs tree)."""
    fmt = format or format_for_suffix(path)
    if fmt == "toml":
        save_machine_toml(machine, path)
    elif fmt == "hwloc":
        save_machine_hwloc(machine, path)
    elif fmt == "numactl":
        save_machine_numactl(machine, path)
    elif fmt == "sysfs":
        # Replace an existing directory only when it is a node tree itself (never someone's other data).
        target = Path(path)
        replace = target.is_dir() and any(c.name.startswith("node") and c.is_dir() for c in target.iterdir())
        write_sysfs_node_tree(machine, target, overwrite=replace)
    else:
        raise FormatError(str(path), f"cannot write format {fmt!r}; writable: {', '.join(WRITABLE_FORMATS)}")
