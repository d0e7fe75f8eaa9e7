"""Measurement files as the fitter sees them: parsed result + format + sha256, and the tables they provide."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numasim.calibrate.parsers import detect_measurement_format, parse_measurement
from numasim.errors import FormatError

__all__ = ["Measurement", "load_measurements", "sha256_of"]


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


def load_measurements(paths: list[str | Path], format: str | None = None) -> list[Measurement]:
    """Parse every file (a directory that is not a sysfs node tree contributes each file inside it)."""
    out: list[Measurement] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise FormatError(str(p), "no such file or directory")
        if p.is_dir() and format != "hmat":
            try:
                fmt = detect_measurement_format(p)
            except FormatError:
                files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
                if not files:
                    raise FormatError(str(p), "directory holds no measurement files") from None
                out += load_measurements(list(files), format)
                continue
        else:
            fmt = format or detect_measurement_format(p)
        out.append(Measurement(p, fmt, parse_measurement(p, fmt), sha256_of(p)))
    return out
