"""Parsers of real measurement files, and :func:`detect_measurement_format` to pick one.

Each parser is tolerant of the variants real tools print and strict about garbage: a malformed table cell is
a :class:`~numasim.errors.FormatError` naming the file and line. Each returns a typed result (frozen
dataclasses of numpy arrays).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numasim.calibrate.parsers._text import NodeMatrix, read_source
from numasim.calibrate.parsers.dd import DdResult, looks_like_dd, parse_dd
from numasim.calibrate.parsers.external import (
    looks_like_hwloc,
    looks_like_numactl,
    parse_hwloc,
    parse_numactl_hardware,
)
from numasim.calibrate.parsers.hmat import HmatResult, looks_like_hmat, parse_hmat
from numasim.calibrate.parsers.hop_ratios import HopRatioResult, looks_like_hop_ratios, parse_hop_ratios
from numasim.calibrate.parsers.kerncraft import KerncraftResult, looks_like_kerncraft, parse_kerncraft
from numasim.calibrate.parsers.lmbench import LatMemRdResult, looks_like_lat_mem_rd, parse_lat_mem_rd
from numasim.calibrate.parsers.mlc import LoadedLatencyTable, MlcResult, looks_like_mlc, parse_mlc
from numasim.calibrate.parsers.numa_maps import NumaMapsResult, looks_like_numa_maps, parse_numa_maps
from numasim.calibrate.parsers.numastat import NumastatResult, looks_like_numastat, parse_numastat
from numasim.calibrate.parsers.perftest import PerftestResult, looks_like_perftest, parse_perftest
from numasim.calibrate.parsers.probe import ProbeResult, looks_like_probe, parse_probe
from numasim.calibrate.parsers.stream import StreamResult, looks_like_stream, parse_stream
from numasim.calibrate.parsers.stride_table import (
    StrideTableResult,
    looks_like_stride_table,
    parse_stride_table,
)
from numasim.errors import FormatError

__all__ = [
    "FORMATS",
    "detect_measurement_format",
    "parse_measurement",
    "NodeMatrix",
    "MlcResult",
    "LoadedLatencyTable",
    "LatMemRdResult",
    "StrideTableResult",
    "StreamResult",
    "DdResult",
    "NumastatResult",
    "NumaMapsResult",
    "HmatResult",
    "ProbeResult",
    "PerftestResult",
    "HopRatioResult",
    "KerncraftResult",
]

_PARSERS: dict[str, Any] = {
    "mlc": parse_mlc,
    "probe": parse_probe,
    "lat_mem_rd": parse_lat_mem_rd,
    "stride_table": parse_stride_table,
    "stream": parse_stream,
    "dd": parse_dd,
    "perftest": parse_perftest,
    "hop_ratios": parse_hop_ratios,
    "numastat": parse_numastat,
    "numa_maps": parse_numa_maps,
    "numactl": parse_numactl_hardware,
    "hwloc": parse_hwloc,
    "hmat": parse_hmat,
    "kerncraft": parse_kerncraft,
}
FORMATS = tuple(_PARSERS)
"""Names accepted by ``--format`` and :func:`parse_measurement`."""

# Order matters: the most specific signature first (an mlc page may quote a numactl line; a probe is JSON).
_TEXT_CHECKS = (
    ("probe", looks_like_probe),
    ("kerncraft", looks_like_kerncraft),
    ("hop_ratios", looks_like_hop_ratios),
    ("hwloc", looks_like_hwloc),
    ("mlc", looks_like_mlc),
    ("lat_mem_rd", looks_like_lat_mem_rd),
    ("stride_table", looks_like_stride_table),
    ("stream", looks_like_stream),
    ("perftest", looks_like_perftest),
    ("numastat", looks_like_numastat),
    ("dd", looks_like_dd),
    ("numactl", looks_like_numactl),
    ("numa_maps", looks_like_numa_maps),
)


def detect_measurement_format(path: str | Path) -> str:
    """The format name of a measurement file or directory (one of :data:`FORMATS`).

    An unrecognised file is a :class:`FormatError` that lists the formats numasim reads.
    """
    p = Path(path)
    if p.is_dir():
        if looks_like_hmat(p):
            return "hmat"
        raise FormatError(str(p), "directory is not a sysfs node tree with HMAT access*/initiators attributes")
    _, text = read_source(p)
    for name, check in _TEXT_CHECKS:
        if check(text):
            return name
    raise FormatError(
        str(p), f"unknown measurement format; numasim reads: {', '.join(FORMATS)} (use --format to force one)"
    )


def parse_measurement(path: str | Path, format: str | None = None) -> Any:
    """Parse ``path`` with the parser of ``format`` (detected when ``None``)."""
    fmt = format or detect_measurement_format(path)
    if fmt not in _PARSERS:
        raise FormatError(str(path), f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return _PARSERS[fmt](path)
