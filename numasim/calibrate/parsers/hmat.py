"""sysfs HMAT access attributes: ``/sys/devices/system/node/nodeN/access0/initiators/*``.

Documented in Documentation/admin-guide/mm/numaperf.rst: for each memory target node, ``access0`` describes the
performance from its best initiators (``access1``: best cpu initiators), ``initiators/nodeM`` names them, and
``read_latency``/``write_latency`` (nanoseconds) and ``read_bandwidth``/``write_bandwidth`` (MB/s) hold the
numbers. A copied tree (``cp -rL``) turns the ``nodeM`` symlinks into directories; both are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numasim.errors import FormatError

__all__ = ["HmatTarget", "HmatResult", "parse_hmat", "looks_like_hmat"]

_FILES = {
    "read_latency": "read_latency_ns",
    "write_latency": "write_latency_ns",
    "read_bandwidth": "read_bandwidth_mb_s",
    "write_bandwidth": "write_bandwidth_mb_s",
}


@dataclass(frozen=True)
class HmatTarget:
    node: int
    access_class: int
    initiators: list[int]
    values: dict[str, float] = field(default_factory=dict)
    """Keys ``read_latency_ns``, ``write_latency_ns``, ``read_bandwidth_mb_s``, ``write_bandwidth_mb_s``."""


@dataclass(frozen=True)
class HmatResult:
    source: str
    targets: list[HmatTarget]
    tool_version: str | None = "sysfs hmat"


def _node_root(path: Path) -> Path:
    for cand in (path, path / "devices" / "system" / "node", path / "sys" / "devices" / "system" / "node"):
        if cand.is_dir() and any(re.fullmatch(r"node\d+", p.name) for p in cand.iterdir()):
            return cand
    return path


def looks_like_hmat(path: Path) -> bool:
    if not path.is_dir():
        return False
    root = _node_root(path)
    return any((p / "access0" / "initiators").is_dir() for p in root.glob("node*"))


def parse_hmat(path: str | Path) -> HmatResult:
    """Read every ``nodeN/accessK/initiators`` directory under a sysfs node tree (or a copy of one)."""
    root = _node_root(Path(path))
    if not root.is_dir():
        raise FormatError(str(path), "not a directory (expected a /sys/devices/system/node tree)")
    targets: list[HmatTarget] = []
    for node_dir in sorted(root.glob("node*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else -1):
        if not node_dir.name[4:].isdigit():
            continue
        for access in sorted(node_dir.glob("access*")):
            init = access / "initiators"
            if not init.is_dir():
                continue
            initiators = sorted(int(p.name[4:]) for p in init.iterdir() if re.fullmatch(r"node\d+", p.name))
            values: dict[str, float] = {}
            for fname, key in _FILES.items():
                f = init / fname
                if not f.exists():
                    continue
                text = f.read_text().strip()
                try:
                    values[key] = float(int(text))
                except ValueError:
                    raise FormatError(str(f), f"expected an integer, got {text!r}", 1) from None
            targets.append(HmatTarget(int(node_dir.name[4:]), int(access.name[6:] or 0), initiators, values))
    if not targets:
        raise FormatError(str(path), "no nodeN/accessK/initiators directories (kernel without HMAT, or not a node tree)")
    return HmatResult(source=str(path), targets=targets)
