"""linux-rdma perftest output (``ib_send_lat``, ``ib_send_bw``, ``ib_write_bw`` ...): the per-message-size table.

Latency tests print ``#bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] ...``; bandwidth
tests ``#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]`` (``--report_gbits``; MB/sec
otherwise). A ``numactl --membind=N`` prefix on the command line before a table says where the buffers were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numasim.calibrate.parsers._text import numbered_lines, read_source, to_float
from numasim.errors import FormatError

__all__ = ["PerftestTable", "PerftestResult", "parse_perftest", "parse_perftest_text", "looks_like_perftest"]

_CMD_RE = re.compile(r"\b(ib_\w+_(?:lat|bw))\b")
_MEM_RE = re.compile(r"--membind[= ](\d+)")


@dataclass(frozen=True)
class PerftestTable:
    test: str
    """e.g. ``"ib_send_lat"``."""
    kind: str
    """``"lat"`` or ``"bw"``."""
    columns: list[str]
    size_bytes: np.ndarray
    values: np.ndarray
    """One row per message size, the columns after ``#bytes``."""
    mem_node: int | None
    command: str

    def column(self, name: str) -> np.ndarray:
        for k, c in enumerate(self.columns):
            if c.startswith(name):
                return np.asarray(self.values[:, k])
        raise KeyError(f"{self.test}: no column {name!r} in {self.columns}")


@dataclass(frozen=True)
class PerftestResult:
    source: str
    tables: list[PerftestTable]
    tool_version: str | None = "perftest"


def looks_like_perftest(text: str) -> bool:
    return "#bytes" in text and bool(_CMD_RE.search(text))


def _columns(header: str) -> list[str]:
    # "#bytes #iterations t_min[usec] ..." / "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]"
    h = header.replace("BW peak", "BW_peak").replace("BW average", "BW_average")
    h = re.sub(r"(\d+(?:\.\d+)?)% percentile", r"p\1", h)
    return [c.lstrip("#") for c in h.split()]


def parse_perftest_text(text: str, source: str = "<text>") -> PerftestResult:
    tables: list[PerftestTable] = []
    command: str | None = None
    lines = numbered_lines(text)
    i = 0
    while i < len(lines):
        t = lines[i].text.strip()
        m = _CMD_RE.search(t)
        if m and not t.startswith("#"):
            command = t
        if t.startswith("#bytes"):
            if command is None:
                raise FormatError(source, "perftest table without a preceding ib_*_lat/bw command line", lines[i].number)
            cols = _columns(t)[1:]
            rows: list[list[float]] = []
            sizes: list[int] = []
            i += 1
            while i < len(lines):
                row = lines[i].text.strip()
                if not row or row.startswith("-"):
                    break
                cells = row.split()
                if len(cells) != len(cols) + 1:
                    raise FormatError(
                        source, f"perftest row has {len(cells)} fields, header has {len(cols) + 1}", lines[i].number
                    )
                sizes.append(int(to_float(cells[0], source, lines[i].number, "#bytes")))
                rows.append([to_float(c, source, lines[i].number, "perftest cell") for c in cells[1:]])
                i += 1
            if not rows:
                raise FormatError(source, "perftest table header without rows (truncated?)", lines[i - 1].number)
            cm = _CMD_RE.search(command)
            assert cm is not None
            mm = _MEM_RE.search(command)
            tables.append(
                PerftestTable(
                    test=cm.group(1),
                    kind="lat" if cm.group(1).endswith("lat") else "bw",
                    columns=cols,
                    size_bytes=np.array(sizes, dtype=np.int64),
                    values=np.array(rows),
                    mem_node=int(mm.group(1)) if mm else None,
                    command=command,
                )
            )
            command = None
            continue
        i += 1
    if not tables:
        raise FormatError(source, "no perftest '#bytes ...' table found")
    return PerftestResult(source=source, tables=tables)


def parse_perftest(path: str | Path) -> PerftestResult:
    source, text = read_source(path)
    return parse_perftest_text(text, source)
