"""The ``numastat`` tool (numactl/numastat.c), run against a virtual ``/sys`` and ``/proc``.

numastat reads three kinds of files and prints them through one small table engine:

* ``/sys/devices/system/node/nodeN/numastat`` (six counters) -- compatibility mode (no arguments at all:
  16-wide columns headed ``nodeN``, integers, no Total) or ``-n`` (MB, two decimals, ``Node N`` + ``Total``);
* ``/sys/devices/system/node/nodeN/meminfo`` -- ``-m`` (kB -> MB);
* ``/proc/PID/numa_maps`` -- ``-p PID`` or bare PID arguments (pages per node, grouped Huge/Heap/Stack/Private).

The table engine reproduces ``display_table``: left header column 16 wide (``-p``: widened to fit the labels,
at most 24), data columns 16 wide and right-justified, dash cells ``width-1`` dashes, ``-z`` hides all-zero
rows and columns, ``-s[N]`` sorts rows descending, ``-c`` shrinks columns to their content and drops decimals,
and lines fold at the screen width (``NUMASTAT_WIDTH``; unlimited when not on a terminal) into sections separated
by a blank line. Everything here is text in, text out: :class:`NumastatSources` holds the file contents, which the
kernel model (:mod:`numasim.kernel.procfs`) produces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["NumastatSources", "NumastatProcess", "NumastatRun", "run_numastat", "numastat_text", "numastat_sources", "VTable"]

MEGABYTE = 1024.0 * 1024.0
KILOBYTE = 1024.0
HUGE_PAGE_SIZE_BYTES = 2 * 1024 * 1024
UNLIMITED_WIDTH = 10_000_000

_USAGE = (
    "Usage: {p} [-c] [-m] [-n] [-p <PID>|<pattern>] [-s[<node>]] [-v] [-V] [-z] [ <PID>|<pattern>... ]\n"
    "-c to minimize column widths\n"
    "-m to show meminfo-like system-wide memory usage\n"
    "-n to show the numastat statistics info\n"
    "-p <PID>|<pattern> to show process info\n"
    "-s[<node>] to sort data by total column or <node>\n"
    "-v to make some reports more verbose\n"
    "-V to show the {p} code version\n"
    "-z to skip rows and columns of zeros\n"
)

# (numa_maps token prefix, row label); the last row is the catch-all
_PROCESS_ROWS = (("huge", "Huge"), ("heap", "Heap"), ("stack", "Stack"), ("N", "Private"))
_PRIVATE = 3


@dataclass(frozen=True)
class NumastatProcess:
    """What numastat reads about one process: its name, command line and ``/proc/PID/numa_maps``."""

    pid: int
    comm: str
    numa_maps: str
    cmdline: str = ""


@dataclass
class NumastatSources:
    """The virtual files numastat reads.

    Parameters
    ----------
    numastat_files : dict
        node id -> contents of ``/sys/devices/system/node/nodeN/numastat``.
    meminfo_files : dict
        node id -> contents of ``/sys/devices/system/node/nodeN/meminfo``.
    processes : dict
        pid -> :class:`NumastatProcess`.
    self_pid : int
        numastat's own pid (excluded from pattern matches, as the real tool excludes itself).
    """

    numastat_files: dict[int, str]
    meminfo_files: dict[int, str] = field(default_factory=dict)
    processes: dict[int, NumastatProcess] = field(default_factory=dict)
    self_pid: int = -1


@dataclass(frozen=True)
class NumastatRun:
    """Output of one virtual ``numastat`` invocation."""

    stdout: str
    stderr: str
    exit_code: int


# --- the table engine (numastat.c: vtab_t, display_table) ------------------------------------------------


@dataclass
class _Cell:
    kind: str = "null"  # null | str | float | rep
    value: object = None

    def is_zero(self) -> bool:
        if self.kind == "float":
            return self.value == 0.0
        if self.kind == "str":
            return False
        return True


class VTable:
    """numastat's ``vtab_t``: a grid of cells with header rows/cols, widths, decimals and justification."""

    def __init__(self, header_rows: int, header_cols: int, data_rows: int, data_cols: int) -> None:
        self.header_rows = header_rows
        self.header_cols = header_cols
        self.rows = header_rows + data_rows
        self.cols = header_cols + data_cols
        self.cells = [[_Cell() for _ in range(self.cols)] for _ in range(self.rows)]
        self.width = [0] * self.cols
        self.decimals = [0] * self.cols
        self.left = [False] * self.cols
        self.always_show_rows: set[int] = set()
        self.row_order = list(range(self.rows))

    def set(self, row: int, col: int, kind: str, value: object = None) -> None:
        self.cells[row][col] = _Cell(kind, value)

    def add(self, row: int, col: int, value: float) -> None:
        cell = self.cells[row][col]
        current = float(cell.value) if cell.kind == "float" else 0.0  # type: ignore[arg-type]
        self.cells[row][col] = _Cell("float", current + value)

    def _fmt(self, cell: _Cell, max_width: int, decimals: int) -> str:
        if cell.kind == "null":
            text = ""
        elif cell.kind == "str":
            text = str(cell.value)
        elif cell.kind == "float":
            text = f"{float(cell.value):.{decimals}f}"  # type: ignore[arg-type]
        else:
            text = str(cell.value) * max(max_width - 1, 0)
        return text[:max_width]

    def auto_width(self, col: int, min_width: int, max_width: int) -> None:
        width = min_width
        for row in range(self.rows):
            cell = self.cells[row][col]
            if cell.kind == "rep":
                continue
            width = max(width, len(self._fmt(cell, max_width, self.decimals[col])))
        self.width[col] = min(width + 1, max_width)

    def sort_rows_descending(self, start: int, stop: int, col: int) -> None:
        # numastat's selection sort on row_ix_map (stable only as far as that sort is)
        order = self.row_order
        for ix in range(start, stop + 1):
            biggest = ix
            for iy in range(ix + 1, stop + 1):
                if self._num(order[biggest], col) < self._num(order[iy], col):
                    biggest = iy
            if biggest != ix:
                order[ix], order[biggest] = order[biggest], order[ix]

    def _num(self, row: int, col: int) -> float:
        cell = self.cells[row][col]
        return float(cell.value) if cell.kind == "float" else 0.0  # type: ignore[arg-type]

    def _cell_text(self, row: int, col: int) -> str:
        width = self.width[col]
        text = self._fmt(self.cells[row][col], width, self.decimals[col])
        return text.ljust(width) if self.left[col] else text.rjust(width)

    def render(self, screen_width: int, show_zero_rows: bool, show_zero_cols: bool) -> str:
        seen_rows: set[int] = set()
        seen_cols: set[int] = set()
        nonzero_rows: set[int] = set()
        nonzero_cols: set[int] = set()
        for row in range(self.header_rows, self.rows):
            for col in range(self.header_cols, self.cols):
                cell = self.cells[row][col]
                if cell.kind in ("null", "rep"):
                    continue
                seen_rows.add(row)
                seen_cols.add(col)
                if not cell.is_zero():
                    nonzero_rows.add(row)
                    nonzero_cols.add(col)
        if not seen_rows:
            return "Table has no data.\n"
        if not nonzero_rows and not show_zero_rows and not show_zero_cols:
            return "Table has no non-zero data.\n"

        def col_shown(col: int) -> bool:
            return col in seen_cols and (show_zero_cols or col in nonzero_cols)

        out: list[str] = []
        col = -1
        data_col = self.header_cols
        while data_col < self.cols:
            if not col_shown(data_col):
                data_col += 1
                continue
            if col > 0:
                out.append("\n")
            for row in self.row_order:
                if row >= self.header_rows and row not in self.always_show_rows:
                    if row not in seen_rows or (not show_zero_rows and row not in nonzero_rows):
                        continue
                line_width = 0
                parts: list[str] = []
                for hc in range(self.header_cols):
                    parts.append(self._cell_text(row, hc))
                    line_width += self.width[hc]
                col = data_col
                while True:
                    if col_shown(col):
                        parts.append(self._cell_text(row, col))
                        line_width += self.width[col]
                    col += 1
                    if col >= self.cols or line_width + self.width[col] > screen_width:
                        break
                out.append("".join(parts) + "\n")
            data_col = col
        return "".join(out)


# --- the three reports --------------------------------------------------------------------------------------


@dataclass
class _Options:
    compress: bool = False
    sort: bool = False
    sort_node: int = -1
    show_zero: bool = True
    verbose: bool = False
    compat: bool = False
    screen_width: int = UNLIMITED_WIDTH


def _system_file_table(
    files: dict[int, str], nodes: Sequence[int], tok_offset: int, is_meminfo: bool, opt: _Options
) -> str:
    parsed: dict[int, list[list[str]]] = {}
    for nid in nodes:
        rows = []
        for line in files[nid].splitlines():
            toks = line.replace(":", " ").replace("\t", " ").split()
            if toks:
                rows.append(toks)
        parsed[nid] = rows
    first = parsed[nodes[0]]
    header_rows = 1 if opt.compat else 2
    table = VTable(header_rows, 1, len(first), len(nodes) + 1)
    total_col = 1 + len(nodes)
    table.width[0] = 16
    table.left[0] = True
    index: dict[str, int] = {}
    for r, toks in enumerate(first):
        key = toks[tok_offset]
        index.setdefault(key, r)
        if opt.compat or is_meminfo:
            label = key
        else:
            label = "_".join(p[:1].upper() + p[1:] for p in key.split("_"))
        table.set(header_rows + r, 0, "str", label)
    headers = [f"node{n}" if opt.compat else f"Node {n}" for n in nodes] + ["Total"]
    for ix in range(len(nodes) + (0 if opt.compat else 1)):
        col = 1 + ix
        table.set(0, col, "str", headers[ix])
        if not opt.compat:
            table.set(1, col, "rep", "-")
            table.decimals[col] = 0 if opt.compress else 2
        table.width[col] = 16
    for ix, nid in enumerate(nodes):
        col = 1 + ix
        for toks in parsed[nid]:
            key = toks[tok_offset]
            if key not in index:
                continue
            value = float(_atol(toks[1 + tok_offset]))
            if not opt.compat:
                if len(toks) < 4:
                    multiplier = float(PAGE_SIZE_BYTES)
                elif toks[2].startswith("HugePages"):
                    multiplier = float(HUGE_PAGE_SIZE_BYTES)
                elif len(toks) > 4 and toks[4].startswith("kB"):
                    multiplier = KILOBYTE
                else:
                    multiplier = 1.0
                value = value * multiplier / MEGABYTE
            table.set(header_rows + index[key], col, "float", value)
            table.add(header_rows + index[key], total_col, value)
    if opt.compress:
        for col in range(table.cols):
            table.auto_width(col, 4, 16)
    if opt.sort:
        sort_col = (
            total_col if not 0 <= opt.sort_node < len(nodes) else min(1 + nodes[opt.sort_node], total_col)
        )
        table.sort_rows_descending(header_rows, header_rows + len(first) - 1, sort_col)
    return table.render(opt.screen_width, opt.show_zero, opt.show_zero)


def _atol(text: str) -> int:
    digits = ""
    for i, ch in enumerate(text):
        if ch.isdigit() or (i == 0 and ch in "+-"):
            digits += ch
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return 0


def _process_tables(procs: Sequence[NumastatProcess], nodes: Sequence[int], opt: _Options) -> str:
    sub = opt.verbose or len(procs) == 1
    data_rows = len(_PROCESS_ROWS) if sub else len(procs)
    table = VTable(2, 1, data_rows + 2, len(nodes) + 1)
    total_col = 1 + len(nodes)
    total_row = 2 + data_rows + 1
    table.set(total_row, 0, "str", "Total")
    out: list[str] = []
    if sub:
        for r, (_, label) in enumerate(_PROCESS_ROWS):
            table.set(2 + r, 0, "str", label)
    else:
        table.set(0, 0, "str", "PID")
        table.set(1, 0, "rep", "-")
        out.append("\nPer-node process memory usage (in MBs)\n")
    table.width[0] = 16
    table.left[0] = True
    for ix in range(len(nodes) + 1):
        col = 1 + ix
        table.set(0, col, "str", f"Node {nodes[ix]}" if ix < len(nodes) else "Total")
        table.set(1, col, "rep", "-")
        table.width[col] = 16
        table.decimals[col] = 0 if opt.compress else 2

    def zero() -> None:
        for row in range(2, table.rows):
            for col in range(1, table.cols):
                table.set(row, col, "float", 0.0)

    zero()
    col_of = {n: 1 + i for i, n in enumerate(nodes)}
    for pix, proc in enumerate(procs):
        if sub:
            out.append(f"\nPer-node process memory usage (in MBs) for PID {proc.pid} ({proc.comm})\n")
            if pix > 0:
                zero()
        else:
            table.set(2 + pix, 0, "str", f"{proc.pid} ({proc.comm})")
        for line in proc.numa_maps.splitlines():
            category = _PRIVATE
            page_bytes = 0.0
            at = line.find("kernelpagesize_kB=")
            if at >= 0:
                page_bytes = _atol(line[at + len("kernelpagesize_kB=") :]) * KILOBYTE
            for tok in line.split():
                if category == _PRIVATE:
                    for ix in range(_PRIVATE):
                        if tok.startswith(_PROCESS_ROWS[ix][0]):
                            category = ix
                            break
                if tok.startswith("N") and "=" in tok:
                    node_text, _, pages_text = tok[1:].partition("=")
                    try:
                        nid = int(node_text)
                    except ValueError:
                        continue
                    size = page_bytes or (HUGE_PAGE_SIZE_BYTES if category == 0 else PAGE_SIZE_BYTES)
                    value = _atol(pages_text) * size / MEGABYTE
                    row = 2 + (category if sub else pix)
                    node_col = col_of.get(nid)
                    if node_col is None:
                        continue
                    table.add(row, node_col, value)
                    table.add(row, total_col, value)
                    table.add(total_row, node_col, value)
                    table.add(total_row, total_col, value)
        if sub or pix + 1 == len(procs):
            if opt.compress:
                for col in range(table.cols):
                    table.auto_width(col, 4, 16)
            else:
                table.auto_width(0, 16, 24)
            table.always_show_rows.add(total_row - 1)
            for col in range(table.cols):
                table.set(total_row - 1, col, "rep", "-")
            if opt.sort:
                sort_col = (
                    total_col
                    if not 0 <= opt.sort_node < len(nodes)
                    else min(1 + nodes[opt.sort_node], total_col)
                )
                table.sort_rows_descending(2, 2 + data_rows - 1, sort_col)
            out.append(table.render(opt.screen_width, opt.show_zero, opt.show_zero))
    return "".join(out)


def _screen_width(env_width: str | None, isatty_columns: int | None) -> int:
    if env_width is not None:
        width = _atol(env_width)
        if width < 1 or width > UNLIMITED_WIDTH:
            width = 80
    elif isatty_columns is not None:
        width = isatty_columns if 1 <= isatty_columns <= UNLIMITED_WIDTH else 80
    else:
        width = UNLIMITED_WIDTH
    return max(width, 32)


def run_numastat(
    argv: Sequence[str],
    sources: NumastatSources,
    *,
    numastat_width: str | None = None,
    tty_columns: int | None = None,
    prog: str = "numastat",
    version: str = "2.0.19",
) -> NumastatRun:
    """Run ``numastat argv...`` (argv without the program name) against ``sources``.

    Parameters
    ----------
    numastat_width : str, optional
        The ``NUMASTAT_WIDTH`` environment variable.
    tty_columns : int, optional
        Terminal width when stdout is a terminal; ``None`` = not a terminal (no folding).

    Examples
    --------
    >>> src = NumastatSources({0: "numa_hit 10\\nnuma_miss 0\\n"})
    >>> print(run_numastat([], src).stdout, end="")
                               node0
    numa_hit                      10
    numa_miss                      0
    """
    opt = _Options()
    opt.compat = len(argv) == 0
    show_meminfo = show_numastat = False
    pids: list[int] = []
    out: list[str] = []
    err: list[str] = []

    def usage() -> NumastatRun:
        return NumastatRun("".join(out), "".join(err) + _USAGE.format(p=prog), 1)

    def add_pattern(pattern: str) -> None:
        found = 0
        for pid, proc in sorted(sources.processes.items()):
            text = proc.comm + " " + proc.cmdline
            if pattern in text and pid != sources.self_pid:
                pids.append(pid)
                found += 1
        if not found:
            out.append(f'Found no processes containing pattern: "{pattern}"\n')

    def add_spec(spec: str) -> None:
        if spec.isdigit():
            pids.append(int(spec))
        else:
            add_pattern(spec)

    # getopt_long(argc, argv, "cmnp:s::vVz?") with GNU permutation: non-options are collected as pid specs
    positional: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if arg == "--help":
            return usage()
        if arg.startswith("--"):
            err.append(f"{prog}: unrecognized option '{arg}'\n")
            return usage()
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        j = 1
        while j < len(arg):
            ch = arg[j]
            j += 1
            if ch == "c":
                opt.compress = True
            elif ch == "m":
                show_meminfo = True
            elif ch == "n":
                show_numastat = True
            elif ch == "v":
                opt.verbose = True
            elif ch == "z":
                opt.show_zero = False
            elif ch == "V":
                return NumastatRun(f"{prog} version: {version}: (numasim)\n", "", 0)
            elif ch == "s":
                opt.sort = True
                rest = arg[j:]
                if rest.isdigit():
                    opt.sort_node = int(rest)
                j = len(arg)
            elif ch == "p":
                rest = arg[j:]
                if not rest:
                    if i >= len(args):
                        err.append(f"{prog}: option requires an argument -- 'p'\n")
                        return usage()
                    rest = args[i]
                    i += 1
                add_spec(rest)
                j = len(arg)
            else:
                if ch != "?":
                    err.append(f"{prog}: invalid option -- '{ch}'\n")
                return usage()
    opt.screen_width = _screen_width(numastat_width, tty_columns)
    for spec in positional:
        add_spec(spec)
    nodes = sorted(sources.numastat_files)
    if not nodes:
        return NumastatRun(
            "".join(out), "Couldn't open /sys/devices/system/node: No such file or directory\n", 1
        )
    if opt.compat:
        out.append(_system_file_table(sources.numastat_files, nodes, 0, False, opt))
        return NumastatRun("".join(out), "".join(err), 0)
    if pids:
        unique = sorted(set(pids))
        procs = []
        for pid in unique:
            proc = sources.processes.get(pid)
            if proc is None:
                err.append(f"Can't read /proc/{pid}/numa_maps: No such file or directory\n")
                proc = NumastatProcess(pid, "(null)", "")
            procs.append(proc)
        out.append(_process_tables(procs, nodes, opt))
    if show_meminfo:
        out.append("\nPer-node system memory usage (in MBs):\n")
        out.append(_system_file_table(sources.meminfo_files, nodes, 2, True, opt))
    if show_numastat or (not pids and not show_meminfo):
        out.append("\nPer-node numastat info (in MBs):\n")
        out.append(_system_file_table(sources.numastat_files, nodes, 0, False, opt))
    return NumastatRun("".join(out), "".join(err), 0)


def numastat_text(counters: dict[int, Sequence[tuple[str, int]]]) -> dict[int, str]:
    """Per-node sysfs ``numastat`` file contents from ``{node: [(name, value), ...]}``."""
    return {nid: "".join(f"{name} {value}\n" for name, value in rows) for nid, rows in counters.items()}


def numastat_sources(kernel: Kernel) -> NumastatSources:
    """Everything numastat reads (the nodes' numastat and meminfo files, every process's numa_maps), read from
    the simulated kernel's /sys and /proc now."""
    from numasim.kernel.procfs import format_node_numastat, node_meminfo_of, node_numastat, numa_maps_of

    nodes = kernel.machine.node_ids
    return NumastatSources(
        numastat_files={nid: format_node_numastat(node_numastat(kernel, nid)) for nid in nodes},
        meminfo_files={nid: node_meminfo_of(kernel, nid) for nid in nodes},
        processes={
            pid: NumastatProcess(pid, t.comm, numa_maps_of(kernel, t), t.comm)
            for pid, t in kernel.tasks.items()
        },
    )
