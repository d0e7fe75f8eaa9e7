"""``numastat`` output in its layouts: compat (no options; pages), ``-n`` (MB), ``-m`` (meminfo MB), ``-p PID``.

Layouts, as numactl's numastat.c prints them:

* compat: a header ``node0 node1 ...`` then ``numa_hit``/``numa_miss``/... rows (counts of pages);
* ``-n``: ``Per-node numastat info (in MBs):``, header ``Node 0  Node 1  Total``, a dashed rule, rows;
* ``-m``: ``Per-node system memory usage (in MBs):``, rows ``MemTotal``, ``MemFree`` ...;
* ``-p``: ``Per-node process memory usage (in MBs) for PID 23652 (stress)``, rows ``Huge``/``Heap``/``Stack``/
  ``Private``, a rule, ``Total``;
* sysfs ``/sys/devices/system/node/nodeN/numastat``: one ``numa_hit 123`` pair per line, no header (one node;
  its id comes from the ``nodeN`` directory name, 0 when the file is elsewhere). Layout ``"sysfs-node"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numasim.calibrate.parsers._text import Line, numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["NumastatTable", "NumastatResult", "parse_numastat", "parse_numastat_text", "looks_like_numastat"]

_COMPAT_HEAD_RE = re.compile(r"^\s*(node\d+\s*)+$")
_NODE_HEAD_RE = re.compile(r"^\s*(Node\s+\d+\s*)+(Total\s*)?$")
_TITLE_RE = re.compile(r"^Per-node (.*?) \(in (\w+)\)(?: for PID (\d+) \((.*)\))?:?\s*$")
_RULE_RE = re.compile(r"^[\s-]+$")
_PAIR_RE = re.compile(r"^\s*([a-z_]+)\s+(\d+)\s*$")


@dataclass(frozen=True)
class NumastatTable:
    """One numastat table: ``rows[name]`` holds one value per node (in ``nodes`` order)."""

    layout: str
    """``"compat"``, ``"numastat"`` (-n), ``"meminfo"`` (-m), ``"process"`` (-p) or ``"sysfs-node"``."""
    unit: str
    """``"pages"`` or ``"MB"``."""
    nodes: list[int]
    rows: dict[str, np.ndarray]
    totals: dict[str, float]
    title: str = ""
    pid: int | None = None
    command: str | None = None


@dataclass(frozen=True)
class NumastatResult:
    source: str
    tables: list[NumastatTable]
    tool_version: str | None = "numastat"


def looks_like_numastat(text: str) -> bool:
    return bool(re.search(r"^\s*numa_hit\s+\d", text, re.MULTILINE) or re.search(r"^Per-node .* \(in MBs\)", text, re.MULTILINE))


def _read_rows(lines: list[Line], i: int, ncols: int, source: str, total: bool) -> tuple[dict[str, list[float]], dict[str, float], int]:
    rows: dict[str, list[float]] = {}
    totals: dict[str, float] = {}
    while i < len(lines):
        t = lines[i].text.strip()
        if not t:
            break
        if _RULE_RE.match(t):
            i += 1
            continue
        cells = t.split()
        # a "---- ----" rule with a leading label ("----------------  ------") is also a rule
        if all(set(c) <= {"-"} for c in cells):
            i += 1
            continue
        if _TITLE_RE.match(t) or _COMPAT_HEAD_RE.match(t):
            break
        name, vals = cells[0], cells[1:]
        expected = ncols + (1 if total else 0)
        if len(vals) != expected:
            raise FormatError(source, f"row {name!r} has {len(vals)} values, expected {expected}", lines[i].number)
        nums = [to_float(v, source, lines[i].number, f"row {name!r}") for v in vals]
        if total:
            totals[name] = nums[-1]
            nums = nums[:-1]
        rows[name] = nums
        i += 1
    return rows, totals, i


def _sysfs_node_table(lines: list[Line], node_id: int) -> NumastatTable | None:
    """The per-node sysfs layout (``numa_hit 123`` pairs), or None if ``lines`` are not all such pairs."""
    rows: dict[str, np.ndarray] = {}
    for line in lines:
        t = line.text.strip()
        if not t:
            continue
        m = _PAIR_RE.match(t)
        if not m:
            return None
        rows[m.group(1)] = np.array([float(m.group(2))])
    if "numa_hit" not in rows:
        return None
    return NumastatTable("sysfs-node", "pages", [node_id], rows, {})


def parse_numastat_text(text: str, source: str = "<text>", node_id: int = 0) -> NumastatResult:
    """Parse numastat output (any of its layouts; several tables in one file are all kept).

    Examples
    --------
    >>> t = parse_numastat_text("        node0   node1\\nnuma_hit  10  20\\nnuma_miss 0 5\\n").tables[0]
    >>> t.layout, t.rows["numa_miss"].tolist()
    ('compat', [0.0, 5.0])
    >>> t = parse_numastat_text("numa_hit 7\\nnuma_miss 0\\n", node_id=1).tables[0]
    >>> t.layout, t.nodes, t.rows["numa_hit"].tolist()
    ('sysfs-node', [1], [7.0])
    """
    lines = numbered_lines(text)
    per_node = _sysfs_node_table(lines, node_id)
    if per_node is not None:
        return NumastatResult(source=source, tables=[per_node])
    tables: list[NumastatTable] = []
    title: tuple[str, str, int | None, str | None] | None = None
    i = 0
    while i < len(lines):
        t = lines[i].text.strip()
        tm = _TITLE_RE.match(t)
        if tm:
            title = (tm.group(1), tm.group(2), int(tm.group(3)) if tm.group(3) else None, tm.group(4))
            i += 1
            continue
        if _COMPAT_HEAD_RE.match(t):
            nodes = [int(x[4:]) for x in t.split()]
            rows, _, i = _read_rows(lines, i + 1, len(nodes), source, total=False)
            if not rows:
                raise FormatError(source, "numastat header without rows (truncated?)", lines[i - 1].number)
            tables.append(
                NumastatTable("compat", "pages", nodes, {k: np.array(v) for k, v in rows.items()}, {})
            )
            continue
        if _NODE_HEAD_RE.match(t):
            nums = re.findall(r"Node\s+(\d+)", t)
            nodes = [int(x) for x in nums]
            has_total = t.endswith("Total")
            rows, totals, i = _read_rows(lines, i + 1, len(nodes), source, total=has_total)
            if not rows:
                raise FormatError(source, "numastat header without rows (truncated?)", lines[i - 1].number)
            what = title[0] if title else ""
            layout = "process" if "process" in what else "meminfo" if "system memory" in what else "numastat"
            tables.append(
                NumastatTable(
                    layout,
                    "MB",
                    nodes,
                    {k: np.array(v) for k, v in rows.items()},
                    totals,
                    title=what,
                    pid=title[2] if title else None,
                    command=title[3] if title else None,
                )
            )
            title = None
            continue
        i += 1
    if not tables:
        raise FormatError(source, "no numastat table found (expected a 'node0 node1' or 'Node 0 Node 1' header)")
    return NumastatResult(source=source, tables=tables)


def parse_numastat(path: str | Path) -> NumastatResult:
    source, text = read_source(path)
    # sysfs .../nodeN/numastat names its node only in the directory name
    parent = Path(path).parent.name
    found = re.fullmatch(r"node(\d+)", parent)
    return parse_numastat_text(text, source, int(found.group(1)) if found else 0)
