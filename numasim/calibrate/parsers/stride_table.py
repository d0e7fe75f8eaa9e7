"""The stride x working-set latency table of source article 003 (a lat_mem_rd-like test program).

The program prints one table per run, rows per access pattern (``s1``, ``s32``, ``s64`` = stride in bytes,
``random``; the article's copy truncates it to ``andom``), columns per working-set size (``2k`` ... ``128m``),
cells = time per access in ns. The ``numactl --cpubind=C --membind=M ./main`` line before a table says which
node ran the code and which held the memory::

    # numactl --cpubind=0 --membind=0 ./main
    Delay  (ns)
            2k      8k      32k     128k    512k    2m      8m      32m     128m
    s1      1.28    1.28    1.26    1.25    1.26    1.26    1.28    1.43    1.43
    ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError
from numasim.units import parse_size

__all__ = ["StrideTable", "StrideTableResult", "parse_stride_table", "parse_stride_table_text", "looks_like_stride_table"]

_BIND_RE = re.compile(r"--cpu(?:node)?bind[= ](\d+).*--membind[= ](\d+)")
_ROW_RE = re.compile(r"^(s\d+|random|andom|rand)$", re.IGNORECASE)


@dataclass(frozen=True)
class StrideTable:
    """One run: time per access (ns) per pattern (``"s64"``, ``"random"``) and working-set size."""

    cpu_node: int | None
    mem_node: int | None
    size_bytes: np.ndarray
    latency_ns: dict[str, np.ndarray]

    def value(self, pattern: str, size_bytes: int) -> float:
        idx = int(np.flatnonzero(self.size_bytes == size_bytes)[0])
        return float(self.latency_ns[pattern][idx])


@dataclass(frozen=True)
class StrideTableResult:
    source: str
    tables: list[StrideTable]
    tool_version: str | None = None

    def table(self, cpu_node: int, mem_node: int) -> StrideTable:
        for t in self.tables:
            if (t.cpu_node, t.mem_node) == (cpu_node, mem_node):
                return t
        raise FormatError(self.source, f"no table for --cpubind={cpu_node} --membind={mem_node}")


def looks_like_stride_table(text: str) -> bool:
    return bool(re.search(r"^\s*Delay\s+\(ns\)\s*$", text, re.MULTILINE))


def parse_stride_table_text(text: str, source: str = "<text>") -> StrideTableResult:
    tables: list[StrideTable] = []
    bind: tuple[int | None, int | None] = (None, None)
    lines = numbered_lines(text)
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _BIND_RE.search(ln.text)
        if m:
            bind = (int(m.group(1)), int(m.group(2)))
        if not re.match(r"^\s*Delay\s+\(ns\)\s*$", ln.text):
            i += 1
            continue
        if i + 1 >= len(lines):
            raise FormatError(source, "table header 'Delay (ns)' without a size row (truncated?)", ln.number)
        head = lines[i + 1]
        try:
            sizes = np.array([parse_size(s) for s in head.text.split()], dtype=np.int64)
        except ValueError as exc:
            raise FormatError(source, f"working-set size row: {exc}", head.number) from None
        if len(sizes) == 0:
            raise FormatError(source, "empty working-set size row", head.number)
        rows: dict[str, np.ndarray] = {}
        i += 2
        while i < len(lines) and lines[i].text.strip() and not lines[i].text.strip().startswith("```"):
            row = lines[i]
            cells = row.text.split()
            if not _ROW_RE.match(cells[0]):
                break
            name = "random" if "and" in cells[0].lower() else cells[0].lower()
            if len(cells) - 1 != len(sizes):
                raise FormatError(
                    source, f"row {cells[0]!r} has {len(cells) - 1} cells, the size row has {len(sizes)}", row.number
                )
            rows[name] = np.array([to_float(c, source, row.number, f"row {cells[0]}") for c in cells[1:]])
            i += 1
        if not rows:
            raise FormatError(source, "table has no s<stride>/random rows (truncated?)", head.number)
        tables.append(StrideTable(cpu_node=bind[0], mem_node=bind[1], size_bytes=sizes, latency_ns=rows))
        bind = (None, None)
    if not tables:
        raise FormatError(source, "no 'Delay (ns)' stride table found")
    return StrideTableResult(source=source, tables=tables, tool_version="article-003 stride test (main)")


def parse_stride_table(path: str | Path) -> StrideTableResult:
    source, text = read_source(path)
    return parse_stride_table_text(text, source)
