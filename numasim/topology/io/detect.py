"""Tell a machine file's format from its content (not its name): TOML, numactl text, sysfs tree, hwloc XML, a
kerncraft machine file or lscpu output."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from numasim.errors import FormatError
from numasim.topology.io.kerncraft import looks_like_kerncraft
from numasim.topology.io.lscpu import looks_like_lscpu

__all__ = ["MachineFormat", "KNOWN_FORMATS", "WRITABLE_FORMATS", "detect_format", "format_for_suffix"]

MachineFormat = Literal["toml", "numactl", "sysfs", "hwloc", "kerncraft", "lscpu"]
KNOWN_FORMATS: tuple[MachineFormat, ...] = ("toml", "numactl", "sysfs", "hwloc", "kerncraft", "lscpu")
WRITABLE_FORMATS: tuple[MachineFormat, ...] = ("toml", "numactl", "sysfs", "hwloc")
"""Formats :func:`~numasim.topology.io.save_machine` writes (a kerncraft file and lscpu output are read only:
numasim has no measurements or cpu flags to put in them)."""
_DESCRIBED = (
    "toml (numasim machine file with [[nodes]]), numactl (`numactl --hardware` output), "
    "sysfs (a /sys/devices/system/node-like directory with nodeN/), hwloc (hwloc XML with <topology>), "
    "kerncraft (a kerncraft machine file, YAML with 'cores per NUMA domain:'), "
    "lscpu (`lscpu` output with 'Socket(s):' and 'NUMA nodeN CPU(s):' lines)"
)
_AVAILABLE_RE = re.compile(r"^\s*(?:>\s*)?available:\s*\d+\s+nodes?\b", re.MULTILINE)
_HEAD_BYTES = 64 * 1024
_OURS_RE = re.compile(r'^\s*(\[\[nodes\]\]|format\s*=\s*"numasim-machine)', re.MULTILINE)


def detect_format(path: str | Path) -> MachineFormat:
    """The format of the machine description at ``path``.

    A directory with ``nodeN`` subdirectories is a sysfs tree; a file whose first element is ``<topology`` is
    hwloc XML; text with an ``available: N nodes`` line is numactl output (lscpu's output may be in the same
    file); YAML with kerncraft's layout keys is a kerncraft machine file; text with lscpu's ``Socket(s):`` and
    ``NUMA nodeN CPU(s):`` lines is lscpu output; TOML with a ``nodes`` array is
    ours, and so is TOML with ``format = "numasim-machine..."``, and a ``.toml`` file or text with such a
    line or ``[[nodes]]`` that does not parse (so the TOML reader can name the line). Anything else raises
    :class:`~numasim.errors.FormatError` naming the file and the known formats.
    """
    p = Path(path)
    if p.is_dir():
        if any(c.is_dir() and re.fullmatch(r"node\d+", c.name) for c in p.iterdir()):
            return "sysfs"
        raise FormatError(str(p), f"directory without nodeN subdirectories; known formats: {_DESCRIBED}")
    try:
        with p.open("rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError as exc:
        raise FormatError(str(p), f"cannot read: {exc}") from None
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("<") and re.search(r"<topology[\s>]", text):
        return "hwloc"
    if _AVAILABLE_RE.search(text):
        return "numactl"
    if looks_like_kerncraft(text):
        return "kerncraft"
    if looks_like_lscpu(text):
        return "lscpu"
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        return "toml"
    # A .toml file, or text that looks like ours, that does not parse is still TOML: the TOML reader then
    # reports the parser's message with line and column. So is parsed TOML that declares our format.
    if data is None and (p.suffix.lower() == ".toml" or _OURS_RE.search(text)):
        return "toml"
    if isinstance(data, dict) and str(data.get("format", "")).startswith("numasim-machine"):
        return "toml"
    raise FormatError(str(p), f"unknown machine format; known formats: {_DESCRIBED}")


def format_for_suffix(path: str | Path) -> MachineFormat:
    """The format to *write* for ``path``: ``.toml``, ``.xml`` (hwloc), ``.txt`` (numactl), a directory (sysfs).

    A path without a suffix, or an existing directory, means a sysfs tree.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".toml":
        return "toml"
    if suffix == ".xml":
        return "hwloc"
    if suffix == ".txt":
        return "numactl"
    if p.is_dir() or suffix == "":
        return "sysfs"
    raise FormatError(
        str(p), f"cannot tell the format from suffix {suffix!r}: use .toml, .xml, .txt or a directory"
    )
