"""Shared helpers of the measurement parsers: numbered lines, markdown fences, strict number parsing.

Every parser works on ``(line_number, text)`` pairs so that an error can point at the line of the *original*
file, even when the measurement was cut out of a markdown page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numasim.errors import FormatError

__all__ = ["Line", "numbered_lines", "fenced_blocks", "read_source", "to_float", "NodeMatrix"]


@dataclass(frozen=True)
class Line:
    """One line of a source file, with its 1-based number in that file."""

    number: int
    text: str


def numbered_lines(text: str, first: int = 1) -> list[Line]:
    return [Line(first + i, t.rstrip("\r\n")) for i, t in enumerate(text.splitlines())]


def fenced_blocks(lines: list[Line]) -> list[list[Line]]:
    """Contents of the markdown ``` fences of a page (line numbers kept); empty if the text has none."""
    blocks: list[list[Line]] = []
    current: list[Line] | None = None
    for ln in lines:
        if ln.text.lstrip().startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
            continue
        if current is not None:
            current.append(ln)
    return blocks


def read_source(path: str | Path) -> tuple[str, str]:
    """``(name, text)`` of a measurement file; a missing or binary file is a :class:`FormatError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise FormatError(str(p), "no such file") from None
    except IsADirectoryError:
        raise FormatError(str(p), "is a directory, expected a text file") from None
    try:
        return str(p), data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(str(p), f"not UTF-8 text (byte {exc.start})") from None


def to_float(cell: str, source: str, line: int, what: str) -> float:
    """A number from one table cell; anything else is a :class:`FormatError` naming the cell."""
    try:
        value = float(cell.replace(",", ""))
    except ValueError:
        raise FormatError(source, f"{what}: {cell!r} is not a number", line) from None
    if not np.isfinite(value):
        raise FormatError(source, f"{what}: {cell!r} is not a finite number", line)
    return value


@dataclass(frozen=True)
class NodeMatrix:
    """A measured initiator x target table (rows: initiator node ids, columns: target node ids).

    ``values[i, j]`` is ``nan`` for cells the tool printed as ``-`` (not measured).
    """

    rows: list[int]
    cols: list[int]
    values: np.ndarray
    unit: str
    row_axis: str = "node"
    """What the row ids number: ``"node"``, ``"socket"`` (old mlc's cache-to-cache tables, ``Writer Socket``) or
    ``"cpu"`` (``mlc --latency_matrix -a``: one row per cpu)."""

    def cell(self, row: int, col: int) -> float:
        return float(self.values[self.rows.index(row), self.cols.index(col)])

    def cells(self) -> list[tuple[int, int, float]]:
        """Measured cells as ``(row_node, col_node, value)``, skipping the unmeasured ones."""
        out = []
        for i, r in enumerate(self.rows):
            for j, c in enumerate(self.cols):
                v = float(self.values[i, j])
                if np.isfinite(v):
                    out.append((r, c, v))
        return out
