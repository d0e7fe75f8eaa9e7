"""Measurement files as the fitter sees them: parsed result + format + sha256, and the tables they provide."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numasim.calibrate.parsers import detect_measurement_format, parse_measurement
from numasim.calibrate.parsers.hmat import looks_like_hmat
from numasim.errors import FormatError

__all__ = ["Measurement", "load_measurements", "sha256_of"]

_NODE_DIR_RE = re.compile(r"node\d+")


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory's files (sorted relative paths and contents)."""
    h = hashlib.sha256()
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode())
                h.update(p.read_bytes())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Measurement:
    """One parsed measurement file."""

    path: Path
    format: str
    data: Any
    sha256: str

    @property
    def tool_version(self) -> str | None:
        return getattr(self.data, "tool_version", None)


def _detectable(path: Path) -> bool:
    try:
        detect_measurement_format(path)
    except FormatError:
        return False
    return True


def _is_node_tree(d: Path) -> bool:
    """Whether ``d`` is a ``/sys/devices/system/node``-like directory (has ``nodeN`` subdirectories)."""
    return any(c.is_dir() and _NODE_DIR_RE.fullmatch(c.name) for c in d.iterdir())


def _sysfs_trees(root: Path) -> list[Path]:
    """Directories under ``root`` that are copied ``/sys/devices/system/node`` trees (outermost only)."""
    trees: list[Path] = []
    for d in sorted(x for x in root.rglob("*") if x.is_dir()):
        if any(t in d.parents for t in trees):
            continue
        if _is_node_tree(d):
            trees.append(d)
    return trees


def load_measurements(paths: list[str | Path], format: str | None = None) -> list[Measurement]:
    """Parse every file. A directory that is not a sysfs node tree contributes each file inside it whose format
    is recognised (others, such as notes and figures, are skipped); a file named explicitly must parse."""
    out: list[Measurement] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise FormatError(str(p), "no such file or directory")
        if p.is_dir() and format != "hmat":
            try:
                if not _is_node_tree(p):
                    # a directory holding a node tree *and* other files (a probe directory) is walked, so
                    # that probe.json is read too, not only the tree's HMAT attributes
                    raise FormatError(str(p), "not a node tree")
                fmt = detect_measurement_format(p)
            except FormatError:
                trees = [p] if _is_node_tree(p) else _sysfs_trees(p)
                files = sorted(
                    f
                    for f in p.rglob("*")
                    if f.is_file() and not f.name.startswith(".") and not any(t in f.parents for t in trees)
                )
                # A directory of measurements may hold notes and figures: files of no known format are
                # skipped, but a directory with no measurement at all is an error. A copied sysfs node tree
                # (``numasim probe`` keeps one) is not read file by file: it counts as one HMAT measurement
                # when it has HMAT attributes, and is skipped otherwise (its topology is the machine's, -m).
                known: list[str | Path] = [f for f in files if format is not None or _detectable(f)]
                hmat_trees: list[str | Path] = [t for t in trees if format in (None, "hmat") and looks_like_hmat(t)]
                if not known and not hmat_trees:
                    raise FormatError(str(p), "directory holds no file in a known measurement format") from None
                out += load_measurements(known, format)
                out += load_measurements(hmat_trees, "hmat")
                continue
        else:
            fmt = format or detect_measurement_format(p)
        out.append(Measurement(p, fmt, parse_measurement(p, fmt), sha256_of(p)))
    return out
