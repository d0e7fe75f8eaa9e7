"""Intel Memory Latency Checker (mlc) output: latency and bandwidth matrices, peak injection, loaded latency, c2c.

Handles the default run (``mlc`` with no arguments, all sections in one output) and separate runs
(``--latency_matrix``, ``--bandwidth_matrix``, ``--peak_injection_bandwidth``, ``--max_bandwidth``,
``--idle_latency``, ``--loaded_latency``, ``--c2c_latency``) concatenated in one file, in both matrix layouts:

* old (mlc 2.x): a ``Memory node`` label line, then a header ``Socket  0  1``, rows ``0  67.2 122.0``;
* new (mlc 3.x): a ``Numa node`` label line, then a header ``Numa node  0  1``.

A markdown page with the output in ``` fences is accepted: only the fenced blocks that hold mlc output are
read, and errors still name the line of the page. Lines mlc prints for information (buffer sizes, command
lines) are skipped; a malformed row inside a table is an error. Also read: old mlc's cache-to-cache tables
(``Writer Socket`` rows, ``Reader Socket`` columns: socket ids, :attr:`NodeMatrix.row_axis`), the per-cpu
latency matrix of ``--latency_matrix -a`` (kept apart: :attr:`MlcResult.per_cpu_latency_matrices`),
``--idle_latency`` in base-frequency clocks (mlc 3.10 on: the ns count, the clock not), and output pasted with
a blank line after every line. What the parser decided about a file (which of repeated runs it kept, tables it
leaves out) is in :attr:`MlcResult.notes`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numasim.calibrate.parsers._text import (
    Line,
    NodeMatrix,
    fenced_blocks,
    numbered_lines,
    read_source,
    to_float,
)
from numasim.errors import FormatError

__all__ = [
    "LoadedLatencyTable", "MlcResult", "parse_mlc", "parse_mlc_text", "looks_like_mlc", "node_latency_matrices",
    "RATIO_KEYS",
]

RATIO_KEYS = {
    "all reads": "all_reads",
    "3:1 reads-writes": "3:1",
    "2:1 reads-writes": "2:1",
    "1:1 reads-writes": "1:1",
    "stream-triad like": "stream_triad",
}
"""mlc's read/write mix labels and the keys used for them here."""

_VERSION_RE = re.compile(r"Memory Latency Checker[^-\n]*-\s*(v\S+)")
_RATIO_RE = re.compile(r"^\s*([A-Za-z0-9:\- ]+?)\s*:\s*(\S+)\s*$")
_HEADER_RE = re.compile(
    r"^\s*(numa node|socket|writer numa node|writer socket|node|cpu)\s+(\d+(?:\s+\d+)*)\s*$", re.IGNORECASE
)
_ROW_START_RE = re.compile(r"^\s*(\d+)\s+\S")
_ITER_RE = re.compile(
    r"Each iteration took\s+([\d.]+)\s+(core|base frequency) clocks\s*\(\s*([\d.]+)\s*ns\)", re.IGNORECASE
)
_BUFFER_RE = re.compile(r"^Using buffer size of\s+([\d.]+)\s*(MiB|MB)\b", re.IGNORECASE)
_SECTION_STARTS = (
    "measuring idle latencies", "measuring memory bandwidths between nodes", "measuring peak",
    "measuring maximum memory bandwidths", "measuring loaded latencies", "measuring cache-to-cache",
)
"""How mlc's sections begin (lower case): any of them marks a text as mlc output, with or without its banner."""
_PLAIN_OPTIONS = {"-e", "-r"}
"""Options that leave a bandwidth run the whole system's: not changing the prefetchers, random access (a latency
matter). Buffer size (``-b``) and duration (``-t``) are allowed too; anything else (``-m1``: one cpu, ``-k``: a cpu
list, ``-X``: one thread a core, ``-W``: a traffic mix, ``-Z``: 512-bit loads) measures something else."""
_MIX_CHANGE = 0.10
"""Repeated runs of one bandwidth command that differ by more than this (relative, in any mix) measured different
things (mlc does not print a ``numactl`` around it): the parser cannot pick one."""
_C2C_LOCAL_RE = re.compile(r"^\s*(Local Socket .+?)\s+latency\s+(\S+)\s*$")


@dataclass(frozen=True)
class LoadedLatencyTable:
    """``mlc --loaded_latency``: one row per injection delay (cycles between the load generator's accesses)."""

    inject_delay: np.ndarray
    latency_ns: np.ndarray
    bandwidth_mb_s: np.ndarray
    traffic: str = "Read-only"

    @property
    def bandwidth_gb_s(self) -> np.ndarray:
        return self.bandwidth_mb_s / 1000.0


@dataclass(frozen=True)
class MlcResult:
    """Everything one mlc output file holds (each section may be absent; repeated sections are all kept)."""

    source: str
    tool_version: str | None = None
    latency_matrices: list[NodeMatrix] = field(default_factory=list)
    bandwidth_matrices: list[NodeMatrix] = field(default_factory=list)
    idle_latency_ns: list[float] = field(default_factory=list)
    idle_latency_core_clocks: list[float] = field(default_factory=list)
    """``--idle_latency``'s "Each iteration took X core clocks": one entry per ``idle_latency_ns`` entry (``nan``
    where mlc counted base-frequency clocks, as from 3.10 on: the base clock, not the one the core ran at)."""
    peak_injection_mb_s: dict[str, float] = field(default_factory=dict)
    max_bandwidth_mb_s: dict[str, float] = field(default_factory=dict)
    loaded_latency: list[LoadedLatencyTable] = field(default_factory=list)
    c2c_local_ns: dict[str, float] = field(default_factory=dict)
    c2c_remote_ns: dict[str, NodeMatrix] = field(default_factory=dict)
    idle_latency_buffer_mib: list[float] = field(default_factory=list)
    """The buffer each ``idle_latency_ns`` entry chased ("Using buffer size of 5.762MiB"; ``nan``: not printed).
    A buffer the caches hold (``--idle_latency -b30``) measures a cache, not memory."""
    per_cpu_latency_matrices: list[NodeMatrix] = field(default_factory=list)
    """``--latency_matrix -a``: one row per cpu (``row_axis == "cpu"``), a column per node; a fit or a validation
    averages each node's cpus (:func:`node_latency_matrices`)."""
    bandwidth_runs: list[tuple[str, str, dict[str, float]]] = field(default_factory=list)
    """Every peak-injection and maximum-bandwidth run: (section, its command line's options, the mixes)."""
    notes: list[str] = field(default_factory=list)
    """What the parser decided about this output: which of repeated runs it kept, tables and lines it left out."""
    prefetchers_controlled: bool | None = None
    """False where mlc says it could not turn the hardware prefetchers off ("Unable to modify prefetchers", or its
    idle latencies "for random access" with no ``-r`` on any command line it printed): its load threads then
    ran with them on. None: nothing says (mlc turns them off where it can)."""

    @property
    def latency_matrix(self) -> NodeMatrix | None:
        return self.latency_matrices[0] if self.latency_matrices else None

    @property
    def bandwidth_matrix(self) -> NodeMatrix | None:
        return self.bandwidth_matrices[0] if self.bandwidth_matrices else None

    @property
    def core_clock_ghz(self) -> float | None:
        """The core clock mlc measured under: core clocks / ns of its first ``--idle_latency`` line in core clocks,
        else None.

        mlc prints the two from one measurement ("took 202.0 core clocks ( 80.8 ns)": 2.5 GHz), so their ratio
        is the clock its cores ran at, not the nominal one; the print resolution (0.1 ns) limits it to ~0.1 %.
        From 3.10 on mlc counts base-frequency clocks ("took 209.9 base frequency clocks"): their ratio is the
        base clock, which says nothing of the running one, so such a line gives none.
        """
        for clocks, ns in zip(self.idle_latency_core_clocks, self.idle_latency_ns, strict=False):
            if np.isfinite(clocks):
                return clocks / ns
        return None

    @property
    def sections(self) -> list[str]:
        names = []
        if self.latency_matrices or self.per_cpu_latency_matrices:
            names.append("latency_matrix")
        if self.idle_latency_ns:
            names.append("idle_latency")
        if self.bandwidth_matrices:
            names.append("bandwidth_matrix")
        if self.peak_injection_mb_s:
            names.append("peak_bandwidth")
        if self.max_bandwidth_mb_s:
            names.append("max_bandwidth")
        if self.loaded_latency:
            names.append("loaded_latency")
        if self.c2c_local_ns or self.c2c_remote_ns:
            names.append("c2c_latency")
        return names


def looks_like_mlc(text: str) -> bool:
    """Whether ``text`` holds mlc output: its banner, or one of its sections (a run pasted without the banner)."""
    if "Memory Latency Checker" in text:
        return True
    low = text.lower()
    return any(start in low for start in _SECTION_STARTS) or bool(_ITER_RE.search(text))


def _single_spaced(lines: list[Line]) -> list[Line]:
    """``lines`` without the blank line a copy inserted after every line (a web page or an editor that doubles
    line ends): where nearly every text line is followed by a blank one, one blank line after each is dropped, so
    that mlc's own blank lines, which end its tables, stay (doubled, they are two or three blank lines there)."""
    texts = [i for i, ln in enumerate(lines) if ln.text.strip()]
    if len(texts) < 6:
        return lines
    followed = sum(1 for i in texts[:-1] if not lines[i + 1].text.strip())
    if followed < 0.9 * (len(texts) - 1):
        return lines
    drop = {i + 1 for i in texts if i + 1 < len(lines) and not lines[i + 1].text.strip()}
    return [ln for i, ln in enumerate(lines) if i not in drop]


def _mlc_lines(text: str) -> list[Line]:
    lines = numbered_lines(text)
    blocks = fenced_blocks(lines)
    if blocks:
        chosen = [ln for b in blocks if looks_like_mlc("\n".join(x.text for x in b)) for ln in b]
        lines = chosen if chosen else lines
    return _single_spaced(lines)


class _Reader:
    def __init__(self, source: str, lines: list[Line]) -> None:
        self.source = source
        self.lines = lines
        self.pos = 0
        self.left_out: list[str] = []

    def error(self, line: Line, message: str) -> FormatError:
        return FormatError(self.source, message, line.number)

    def matrix(self, start: Line, what: str, unit: str) -> NodeMatrix:
        """The next matrix after a section line: skip label lines, read the header and the rows."""
        header: list[int] | None = None
        axis = "node"
        rows: list[int] = []
        row_lines: list[Line] = []
        values: list[list[float]] = []
        while self.pos < len(self.lines):
            ln = self.lines[self.pos]
            text = ln.text.strip()
            if header is None:
                m = _HEADER_RE.match(ln.text)
                if m:
                    word = m.group(1).lower()
                    axis = "cpu" if word == "cpu" else "socket" if word == "writer socket" else "node"
                    header = [int(x) for x in m.group(2).split()]
                    if len(set(header)) != len(header):
                        raise self.error(ln, f"{what}: duplicate node in header {header}")
                elif text.lower().startswith("measuring") or _ROW_START_RE.match(ln.text):
                    break
                self.pos += 1
                continue
            if not text:
                if rows:
                    break
                self.pos += 1
                continue
            if not _ROW_START_RE.match(ln.text):
                break
            cells = text.split()
            node = int(cells[0])
            if len(cells) - 1 != len(header):
                raise self.error(
                    ln, f"{what}: row for node {node} has {len(cells) - 1} cells, the header has {len(header)} columns"
                )
            if node in rows:
                raise self.error(ln, f"{what}: node {node} has two rows")
            row = [np.nan if c == "-" else to_float(c, self.source, ln.number, f"{what} node {node}") for c in cells[1:]]
            rows.append(node)
            row_lines.append(ln)
            values.append(row)
            self.pos += 1
        if header is None:
            raise self.error(start, f"{what}: section has no matrix header (truncated output?)")
        if not rows:
            raise self.error(start, f"{what}: matrix header {header} has no rows (truncated output?)")
        matrix = NodeMatrix(rows=rows, cols=header, values=np.array(values, dtype=float), unit=unit, row_axis=axis)
        self._check_matrix(matrix, row_lines, what)
        return matrix

    def _check_matrix(self, matrix: NodeMatrix, row_lines: list[Line], what: str) -> None:
        """Cells no machine can measure: a latency or bandwidth at or below zero; a route to another node that
        takes less than half the local latency (a remote read crosses the local route's controller and a link
        more); a bandwidth below 1/100 of its row's largest (the slowest memory the project knows, a CXL
        expander, reads at a sixth of local DRAM). What such a cell usually is: a number cut off in a truncated
        or hand-edited file (``11`` for ``115.1``); fitted, it would time memory faster than the caches."""
        for i, (node, ln) in enumerate(zip(matrix.rows, row_lines, strict=True)):
            row = matrix.values[i]
            for j, col in enumerate(matrix.cols):
                v = row[j]
                if np.isfinite(v) and v <= 0:
                    raise self.error(ln, f"{what}: node {node} -> {col} = {v:g} {matrix.unit}: not a {matrix.unit} figure")
            if matrix.unit == "ns" and matrix.row_axis == "node" and node in matrix.cols:
                local = row[matrix.cols.index(node)]
                for j, col in enumerate(matrix.cols):
                    if np.isfinite(row[j]) and np.isfinite(local) and row[j] < local / 2:
                        raise self.error(
                            ln, f"{what}: node {node} -> {col} = {row[j]:g} ns is less than half of node {node}'s local "
                            f"{local:g} ns, which no route to another node can be (a number cut off in a truncated file?)"
                        )
            if matrix.unit == "MB/s" and np.isfinite(row).any():
                top = float(np.nanmax(row))
                for j, col in enumerate(matrix.cols):
                    if np.isfinite(row[j]) and row[j] < top / 100:
                        raise self.error(
                            ln, f"{what}: node {node} -> {col} = {row[j]:g} MB/s is below 1/100 of the row's largest "
                            f"({top:g} MB/s): a number cut off in a truncated file?"
                        )

    def ratios(self, start: Line, what: str) -> dict[str, float]:
        out: dict[str, float] = {}
        while self.pos < len(self.lines):
            ln = self.lines[self.pos]
            if ln.text.strip().lower().startswith("measuring"):
                break
            m = _RATIO_RE.match(ln.text)
            if m and m.group(1).strip().lower() in RATIO_KEYS:
                key = RATIO_KEYS[m.group(1).strip().lower()]
                out[key] = to_float(m.group(2), self.source, ln.number, f"{what} {m.group(1).strip()!r}")
            elif m and re.fullmatch(r"[\d.,]+", m.group(2)):
                # a mix the virtual mlc does not run (4:1, non-temporal writes): said, not compared
                self.left_out.append(f"{what} {m.group(1).strip()!r} (line {ln.number}): a mix numasim does not "
                                     "replay, not compared")
            elif out and not ln.text.strip():
                self.pos += 1
                break
            self.pos += 1
        if not out:
            raise self.error(start, f"{what}: no 'ALL Reads : <MB/s>' lines follow (truncated output?)")
        # A mix moves at least a fifth of what all-reads moves (the real runs the project holds: 0.70-1.39);
        # below 1/20 it is a number cut off (``39`` for ``398309.1``).
        top = max(out.values())
        for key, value in out.items():
            if value <= 0 or value < top / 20:
                raise self.error(
                    start, f"{what}: {key} = {value:g} MB/s against {top:g} MB/s for another mix: a number cut off in "
                    "a truncated file?"
                )
        return out

    def _check_loaded(self, arr: np.ndarray, row_lines: list[Line]) -> None:
        """Rows no machine can measure: a latency or bandwidth at or below zero; a latency or a bandwidth below
        half of the next row's, whose longer delay offers less load (less load never halves the latency the other
        way round, nor doubles the bandwidth); the last row's latency below a quarter of the row before it (the
        real tables the project holds drop at most to 0.44 between two rows, at the knee). What such a row
        usually is: a number cut off in a truncated file."""
        for k, ln in enumerate(row_lines):
            delay, ns, mb_s = arr[k]
            if ns <= 0 or mb_s <= 0:
                raise self.error(ln, f"loaded latency: delay {delay:g}: {ns:g} ns, {mb_s:g} MB/s: not a latency and a bandwidth")
            lighter = k + 1 < len(arr) and arr[k + 1, 0] > delay
            for value, unit, column in ((ns, "ns", 1), (mb_s, "MB/s", 2)):
                if lighter and value < arr[k + 1, column] / 2:
                    raise self.error(
                        ln, f"loaded latency: delay {delay:g}: {value:g} {unit} is below half of the longer delay "
                        f"{arr[k + 1, 0]:g}'s {arr[k + 1, column]:g} {unit}: a number cut off in a truncated file?"
                    )
            if k == len(arr) - 1 and k > 0 and arr[k - 1, 0] < delay and ns < arr[k - 1, 1] / 4:
                raise self.error(
                    ln, f"loaded latency: delay {delay:g}: {ns:g} ns is below a quarter of delay {arr[k - 1, 0]:g}'s "
                    f"{arr[k - 1, 1]:g} ns: a number cut off in a truncated file?"
                )

    def loaded(self, start: Line, traffic: str) -> LoadedLatencyTable:
        rows: list[tuple[float, float, float]] = []
        row_lines: list[Line] = []
        seen_rule = False
        while self.pos < len(self.lines):
            ln = self.lines[self.pos]
            text = ln.text.strip()
            if not seen_rule:
                if text.startswith("==="):
                    seen_rule = True
                elif text.lower().startswith("measuring"):
                    break
                elif text.lower().startswith("using") and "traffic type" in text.lower():
                    traffic = text.split("Using", 1)[1].split("traffic", 1)[0].strip()
                self.pos += 1
                continue
            if not text:
                if rows:
                    break
                self.pos += 1
                continue
            if not _ROW_START_RE.match(ln.text) and not re.match(r"^\s*\d+\s*$", ln.text):
                break
            cells = text.split()
            if len(cells) != 3:
                raise self.error(ln, f"loaded latency: expected 3 columns (delay, ns, MB/s), got {len(cells)}: {text!r}")
            row_lines.append(ln)
            rows.append(
                (
                    to_float(cells[0], self.source, ln.number, "loaded latency inject delay"),
                    to_float(cells[1], self.source, ln.number, "loaded latency latency_ns"),
                    to_float(cells[2], self.source, ln.number, "loaded latency MB/sec"),
                )
            )
            self.pos += 1
        if not rows:
            raise self.error(start, "loaded latency: no table rows follow (truncated output?)")
        arr = np.array(rows)
        self._check_loaded(arr, row_lines)
        return LoadedLatencyTable(
            inject_delay=arr[:, 0].astype(np.int64), latency_ns=arr[:, 1], bandwidth_mb_s=arr[:, 2], traffic=traffic
        )


def parse_mlc_text(text: str, source: str = "<text>") -> MlcResult:
    """Parse mlc output (or a markdown page holding it).

    Examples
    --------
    >>> out = parse_mlc_text('''Intel(R) Memory Latency Checker - v3.5
    ... Measuring idle latencies (in ns)...
    ...         Numa node
    ... Numa node    0       1
    ...     0      81.4    131.1
    ...     1     131.1     81.3
    ... ''')
    >>> out.tool_version, out.latency_matrix.cell(0, 1)
    ('v3.5', 131.1)
    """
    r = _Reader(source, _mlc_lines(text))
    res = MlcResult(source=source)
    found = False
    options: list[str] = []  # the options of the run being read (its "Command line parameters:" line)
    buffer_mib = float("nan")  # the buffer the run being read says it uses
    runs: dict[str, list[tuple[list[str], dict[str, float], int]]] = {"peak": [], "max": []}
    while r.pos < len(r.lines):
        ln = r.lines[r.pos]
        t = ln.text.strip()
        low = t.lower()
        r.pos += 1
        m = _VERSION_RE.search(t)
        if m or "memory latency checker" in low:
            options = []  # a new run: the default one has no command line
            buffer_mib = float("nan")
            if m:
                found = True
                if res.tool_version is None:
                    object.__setattr__(res, "tool_version", m.group(1))
            continue
        if low.startswith("command line parameters"):
            options = t.split(":", 1)[1].split()
            continue
        bm = _BUFFER_RE.match(t)
        if bm:
            buffer_mib = float(bm.group(1)) * (1.0 if bm.group(2).lower() == "mib" else 1e6 / 2**20)
            continue
        if low.startswith("measuring idle latencies"):
            found = True
            # --idle_latency prints one number instead of a matrix.
            nxt = next((x for x in r.lines[r.pos : r.pos + 4] if _ITER_RE.search(x.text)), None)
            if nxt is not None:
                continue
            if "for all cores" in low or "-a" in options:
                res.per_cpu_latency_matrices.append(r.matrix(ln, "idle latency matrix (a row per cpu)", "ns"))
            else:
                res.latency_matrices.append(r.matrix(ln, "idle latency matrix", "ns"))
        elif _ITER_RE.search(t):
            found = True
            it = _ITER_RE.search(t)
            assert it is not None
            clocks = to_float(it.group(1), source, ln.number, "idle latency clocks")
            ns = to_float(it.group(3), source, ln.number, "idle latency")
            if clocks <= 0 or ns <= 0:
                raise FormatError(source, f"idle latency: {clocks} {it.group(2).lower()} clocks in {ns} ns is not a "
                                  "clock", ln.number)
            res.idle_latency_ns.append(ns)
            res.idle_latency_core_clocks.append(clocks if it.group(2).lower() == "core" else float("nan"))
            res.idle_latency_buffer_mib.append(buffer_mib)
        elif low.startswith("measuring memory bandwidths between nodes"):
            found = True
            traffic = _matrix_traffic(r, options)
            matrix = r.matrix(ln, "bandwidth matrix", "MB/s")
            if traffic == "Read-only":
                res.bandwidth_matrices.append(matrix)
                if "-U" in options:  # compared all the same: at a node's peak the controller decides, not the order
                    res.notes.append(f"bandwidth matrix at line {ln.number}: random reads (-U), where the virtual mlc "
                                     "reads lines in order")
            else:
                res.notes.append(f"bandwidth matrix at line {ln.number}: {traffic} traffic (options "
                                 f"{' '.join(options)}), not read-only: left out (numasim compares read-only matrices)")
        elif low.startswith("measuring peak") and "bandwidth" in low:
            found = True
            runs["peak"].append((options, r.ratios(ln, "peak injection bandwidth"), ln.number))
        elif low.startswith("measuring maximum memory bandwidths"):
            found = True
            runs["max"].append((options, r.ratios(ln, "maximum bandwidth"), ln.number))
        elif low.startswith("measuring loaded latencies"):
            found = True
            mix = next((o for o in options if re.fullmatch(r"-W\d+", o) and o != "-W1"), None)
            table = r.loaded(ln, "Read-only" if mix is None else f"mix {mix}")
            if table.traffic.lower() == "read-only":
                res.loaded_latency.append(table)
            else:
                res.notes.append(f"loaded latency at line {ln.number}: {table.traffic} traffic, not read-only: left "
                                 "out (the virtual mlc replays read-only load)")
        elif low.startswith("measuring cache-to-cache"):
            found = True
        elif _C2C_LOCAL_RE.match(t):
            cm = _C2C_LOCAL_RE.match(t)
            assert cm is not None
            res.c2c_local_ns[cm.group(1)] = to_float(cm.group(2), source, ln.number, cm.group(1))
        elif low.startswith("remote socket") and "latency" in low:
            homed = "writer" if "homed in writer" in low else "reader" if "homed in reader" in low else "any"
            kind = t.split("latency")[0].strip()
            res.c2c_remote_ns[f"{kind} ({homed} homed)"] = r.matrix(ln, f"{kind} matrix", "ns")
    if not found:
        raise FormatError(source, "no Intel mlc output found (no 'Memory Latency Checker' line or mlc section)")
    for kind, target, what in (("peak", res.peak_injection_mb_s, "peak injection bandwidth"),
                               ("max", res.max_bandwidth_mb_s, "maximum bandwidth")):
        res.bandwidth_runs.extend((kind, " ".join(o), dict(x)) for o, x, _ in runs[kind])
        target.update(_system_run(runs[kind], what, source, res.notes))
    res.notes.extend(r.left_out)
    object.__setattr__(res, "prefetchers_controlled", _prefetcher_control(r.lines))
    return res


def node_latency_matrices(result: MlcResult, cpu_to_node: Mapping[int, int]) -> list[NodeMatrix]:
    """The idle latency matrices of ``result`` by node: its node matrices, else each per-cpu matrix
    (``--latency_matrix -a``) with every node's cpus averaged into one row (``cpu_to_node``: the machine's).

    Examples
    --------
    >>> per_cpu = NodeMatrix([0, 1, 2, 3], [0, 1], np.array([[80., 130.], [82., 132.], [131., 81.], [133., 83.]]),
    ...                      "ns", row_axis="cpu")
    >>> node_latency_matrices(MlcResult("x", per_cpu_latency_matrices=[per_cpu]), {0: 0, 1: 0, 2: 1, 3: 1})[0].values
    array([[ 81., 131.],
           [132.,  82.]])
    """
    if result.latency_matrices:
        return list(result.latency_matrices)
    out = []
    for m in result.per_cpu_latency_matrices:
        unknown = [c for c in m.rows if c not in cpu_to_node]
        if unknown:
            raise FormatError(result.source, f"per-cpu latency matrix: cpus {unknown[:8]} are not the machine's "
                              "(a run of another box, or the wrong machine file?)")
        nodes = sorted({cpu_to_node[c] for c in m.rows})
        values = np.array([np.nanmean(m.values[[i for i, c in enumerate(m.rows) if cpu_to_node[c] == n]], axis=0)
                           for n in nodes])
        out.append(NodeMatrix(nodes, list(m.cols), values, m.unit))
    return out


def _plain(options: list[str]) -> bool:
    """Whether a bandwidth run with these options measured the whole system (see :data:`_PLAIN_OPTIONS`)."""
    return all(o in _PLAIN_OPTIONS or o.startswith("--") or re.fullmatch(r"-[bt]\S*", o) for o in options)


def _system_run(
    runs: list[tuple[list[str], dict[str, float], int]], what: str, source: str, notes: list[str]
) -> dict[str, float]:
    """The run of a peak or maximum bandwidth that measured the whole system: the first with no option that
    restricts it (one cpu, a cpu list, one thread a core, another mix), else the first run, said in ``notes``.
    Repeated whole-system runs that disagree are an error: mlc prints no ``numactl`` around itself, so nothing
    says which of them ran on all of the machine's memory."""
    if not runs:
        return {}
    plain = [x for x in runs if _plain(x[0])]
    others = [x for x in runs if not _plain(x[0])]
    for opts, _, line in others:
        if plain:
            notes.append(f"{what} at line {line} (options {' '.join(opts)}) does not measure the whole system: "
                         f"left out; the run at line {plain[0][2]} is used")
    if not plain:
        opts, mixes, line = runs[0]
        notes.append(f"{what}: every run has options that may restrict it; the first (line {line}, options "
                     f"{' '.join(opts)}) is used as the system's")
        return mixes
    first_opts, first, first_line = plain[0]
    for _, mixes, line in plain[1:]:
        for key in (k for k in first if k in mixes):
            if abs(mixes[key] - first[key]) > _MIX_CHANGE * first[key]:
                raise FormatError(
                    source, f"{what}: runs of the same command disagree ({key}: {first[key]:.1f} MB/s at line "
                    f"{first_line}, {mixes[key]:.1f} MB/s at line {line}); mlc prints no numactl around itself, so "
                    "numasim cannot tell which measured the whole machine: keep that one run in the file", line)
    if len(plain) > 1:
        notes.append(f"{what}: {len(plain)} runs within {_MIX_CHANGE:.0%} of each other; the first (line "
                     f"{first_line}) is used")
    return first


def _matrix_traffic(r: _Reader, options: list[str]) -> str:
    """The traffic of the bandwidth matrix that follows: what its "Using ... traffic type" line says, else the
    mix its command line asks for (``-W5``: 1:1 reads and writes, printed with no traffic line), else read-only
    (mlc's default)."""
    for x in r.lines[r.pos : r.pos + 6]:
        low = x.text.strip().lower()
        if low.startswith("using") and "traffic type" in low:
            return x.text.strip().split("Using", 1)[-1].split("traffic", 1)[0].strip() or "Read-only"
        if _HEADER_RE.match(x.text):
            break
    mix = next((o for o in options if re.fullmatch(r"-W\d+", o)), None)
    return "Read-only" if mix in (None, "-W1") else f"mix {mix}"


def _prefetcher_control(lines: list[Line]) -> bool | None:
    """False where the output says mlc could not turn the prefetchers off; None where nothing says (see
    :attr:`MlcResult.prefetchers_controlled`)."""
    texts = [ln.text.lower() for ln in lines]
    if any("unable to modify prefetchers" in t for t in texts):
        return False
    # ``-r`` (random access by choice), not ``-R`` (read-only load): the case of the option matters
    random_by_choice = any(ln.text.strip().lower().startswith("command line parameters")
                           and "-r" in ln.text.split(":", 1)[-1].split() for ln in lines)
    if any("idle latencies for random access" in t for t in texts) and not random_by_choice:
        return False
    return None


def parse_mlc(path: str | Path) -> MlcResult:
    """Parse an mlc output file (plain text, or a markdown page with the output in ``` fences)."""
    source, text = read_source(path)
    return parse_mlc_text(text, source)
