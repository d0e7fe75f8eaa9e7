"""Formats read by other layers' readers: ``numactl --hardware`` text and hwloc XML.

numasim's topology layer owns those readers (``numasim.topology.io.numactl``, ``numasim.topology.io.hwloc``);
this module only forwards to them, so the calibration layer never duplicates a parser. They are imported when
used, and a build without them reports that clearly.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from numasim.errors import FormatError

__all__ = ["parse_numactl_hardware", "parse_hwloc", "looks_like_numactl", "looks_like_hwloc"]


def looks_like_numactl(text: str) -> bool:
    return "available:" in text and "node distances:" in text


def looks_like_hwloc(text: str) -> bool:
    return "<topology" in text[:2000] and "<?xml" in text[:200]


def _reader(module: str, names: tuple[str, ...], path: Path) -> Any:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise FormatError(str(path), f"reading this format needs {module}, which this numasim build lacks") from None
    for name in names:
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    raise FormatError(str(path), f"{module} has none of {names}")


def parse_numactl_hardware(path: str | Path) -> Any:
    """The machine described by ``numactl --hardware`` text (via the topology layer's reader)."""
    p = Path(path)
    fn = _reader("numasim.topology.io.numactl", ("load_numactl", "read_numactl", "parse_numactl_file"), p)
    return fn(p)


def parse_hwloc(path: str | Path) -> Any:
    """The machine (with memattrs, if the reader exposes them) of an hwloc XML file."""
    p = Path(path)
    fn = _reader("numasim.topology.io.hwloc", ("load_hwloc", "read_hwloc", "load_hwloc_xml"), p)
    return fn(p)
