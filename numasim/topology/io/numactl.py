"""``numactl --hardware`` text: parse it (tolerantly, as people paste it) and print it exactly as numactl does.

The layout follows ``numactl.c`` (``hardware()``, ``print_distances()``, ``fmt_mem()``) of numactl 2.0.18 and
2.0.19 (see ``shared/kernel_spec.md`` section 8.4)::

    available: 2 nodes (0-1)
    node 0 cpus: 0 1 2 3
    node 0 size: 32756 MB
    node 0 free: 19642 MB
    ...
    node distances:
    node   0   1          <- <= 2.0.18: "node " + "% 3d " per node (note the trailing space)
      0:  10  21          <- "% 3d: " + "% 3d " per distance
      1:  21  10

numactl >= 2.0.19 prints ``"node  "`` + ``"% 4d "`` and ``"% 4d: "`` rows. ``size``/``free`` are ``MemTotal``/
``MemFree`` of the node's sysfs ``meminfo`` shifted right by 20 (whole MiB, printed as "MB"), or
``<not available>``. Without a distance table numactl prints ``No distance information available.``

Pasted text is accepted with shell prompts before the output, ``#`` comments, stripped trailing spaces and even a
distance table whose newlines were lost (``node 0 1 2 30: 10 11 20 201: 11 10 ...``, seen in source article 000):
the node ids are known from the ``available:`` line, so the glued row labels can be split unambiguously. So are
what pages and hand-written copies do to it: a ``> `` quote before every line, a long cpu list wrapped onto lines
of its own, two ``node N`` fields run together on one line, cpu lists written as ranges (``0-31,64-95``, which
numactl never prints), and ``free`` lines left out (free memory then unknown, as ``<not available>``).
Anything else is a :class:`~numasim.errors.FormatError` naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from numasim.errors import FormatError, TopologyError
from numasim.fileio import atomic_write_text
from numasim.topology.cpulist import format_cpulist, parse_cpulist
from numasim.topology.model import Machine, Node
from numasim.units import MiB

__all__ = [
    "NumactlNode",
    "NumactlHardware",
    "NumactlStyle",
    "parse_numactl_hardware",
    "format_numactl_hardware",
    "machine_from_numactl",
    "numactl_hardware_for",
    "hardware_of",
    "load_machine_numactl",
    "save_machine_numactl",
]

NumactlStyle = Literal["2.0.18", "2.0.19"]
"""Which numactl printed the distance table: ``"2.0.18"`` (and older) or ``"2.0.19"`` (and newer)."""

_STYLES: tuple[NumactlStyle, ...] = ("2.0.18", "2.0.19")
_NOT_AVAILABLE = "<not available>"
_NO_DISTANCES = "No distance information available."


@dataclass(frozen=True)
class NumactlNode:
    """One ``node N ...`` block: cpus, and ``size``/``free`` in MiB (``None`` when ``<not available>``)."""

    id: int
    cpus: list[int]
    size_mb: int | None
    free_mb: int | None


@dataclass(frozen=True)
class NumactlHardware:
    """What ``numactl --hardware`` printed.

    Attributes
    ----------
    nodes : list of NumactlNode
        In the printed (ascending id) order.
    distances : list of list of int, optional
        ``distances[i][j]`` in node order; ``None`` for "No distance information available."
    style : {"2.0.18", "2.0.19"} or None
        The printing style of the distance table, ``None`` when it cannot be told (whitespace lost, or no
        table).
    source : str
        Where the text came from.
    """

    nodes: list[NumactlNode]
    distances: list[list[int]] | None
    style: NumactlStyle | None = None
    source: str = "<text>"
    node_ids: list[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_ids", [n.id for n in self.nodes])


_AVAILABLE_RE = re.compile(r"^available:\s*(\d+)\s+nodes?\s*\(([^)]*)\)$")
_NODE_RE = re.compile(r"^node\s+(\d+)\s+(cpus|size|free):(.*)$")
_MB_RE = re.compile(r"^(\d+)\s*MB$")


_CPUS_ONLY_RE = re.compile(r"^\d+(\s+\d+)*$")
_FIELD_SPLIT_RE = re.compile(r"\s+(?=node\s+\d+\s+(?:cpus|size|free):)")


def _unquoted(lines: list[str]) -> list[str]:
    """``lines`` without the ``>`` a mail or markdown quote put before them, where the ``available:`` line has one
    (numactl's output never starts a line with it)."""
    if not any(re.match(r"^\s*>\s*available:", ln) for ln in lines):
        return lines
    return [ln.lstrip()[1:] if ln.lstrip().startswith(">") else ln for ln in lines]


def _strip(line: str) -> str:
    # '#' never occurs in numactl output, so anything after it is a comment added by whoever pasted the text.
    return line.split("#", 1)[0].rstrip()


def _is_prompt(line: str) -> bool:
    return "numactl" in line


def parse_numactl_hardware(text: str, source: str = "<text>") -> NumactlHardware:
    """Parse the output of ``numactl --hardware``.

    Examples
    --------
    >>> hw = parse_numactl_hardware('''available: 2 nodes (0-1)
    ... node 0 cpus: 0 1
    ... node 0 size: 1024 MB
    ... node 0 free: 1000 MB
    ... node 1 cpus: 2 3
    ... node 1 size: 1024 MB
    ... node 1 free: <not available>
    ... node distances:
    ... node   0   1
    ...   0:  10  21
    ...   1:  21  10
    ... ''')
    >>> hw.node_ids, hw.nodes[1].free_mb, hw.distances, hw.style
    ([0, 1], None, [[10, 21], [21, 10]], '2.0.18')
    """
    raw_lines = _unquoted(text.splitlines())
    lines = [(k + 1, _strip(raw)) for k, raw in enumerate(raw_lines)]
    pos = 0
    # Leading shell prompt / command echo and blank lines.
    while pos < len(lines) and (not lines[pos][1].strip() or _is_prompt(raw_lines[pos])):
        pos += 1
    if pos == len(lines):
        raise FormatError(source, "no 'available: N nodes (...)' line: not numactl --hardware output")
    lineno, line = lines[pos]
    m = _AVAILABLE_RE.match(line.strip())
    if not m:
        raise FormatError(source, f"expected 'available: N nodes (...)', got {line.strip()!r}", lineno)
    count = int(m.group(1))
    try:
        ids = parse_cpulist(m.group(2))
    except ValueError as exc:
        raise FormatError(source, f"bad node list {m.group(2)!r}: {exc}", lineno) from None
    if len(ids) != count:
        raise FormatError(
            source, f"'available: {count} nodes' but the list ({m.group(2)}) has {len(ids)}", lineno
        )
    pos += 1

    fields: dict[tuple[int, str], tuple[int, str]] = {}
    last: tuple[int, str] | None = None  # the field read last: a wrapped cpu list continues it
    while pos < len(lines):
        lineno, line = lines[pos]
        stripped = line.strip()
        if not stripped:
            pos += 1
            continue
        if last is not None and last[1] == "cpus" and _CPUS_ONLY_RE.match(stripped):
            # a long cpu list wrapped onto a line of its own (a terminal or a page did it, numactl does not)
            first_line, cpus = fields[last]
            fields[last] = (first_line, f"{cpus} {stripped}")
            pos += 1
            continue
        parts = _FIELD_SPLIT_RE.split(stripped)  # "node 0 size: 63678 MB node 0 free: 59542 MB": two fields
        if not all(_NODE_RE.match(part.strip()) for part in parts):
            break
        for part in parts:
            nm = _NODE_RE.match(part.strip())
            assert nm is not None
            nid, what, rest = int(nm.group(1)), nm.group(2), nm.group(3).strip()
            if nid not in ids:
                raise FormatError(
                    source, f"node {nid} is not in the available list {format_cpulist(ids)}", lineno
                )
            if (nid, what) in fields:
                raise FormatError(source, f"node {nid} {what} given twice", lineno)
            fields[(nid, what)] = (lineno, rest)
            last = (nid, what)
        pos += 1

    nodes = [_node(nid, fields, source, lineno) for nid in ids]

    # Distances.
    while pos < len(lines) and not lines[pos][1].strip():
        pos += 1
    if pos == len(lines):
        raise FormatError(source, "missing 'node distances:' (or 'No distance information available.')")
    lineno, line = lines[pos]
    distances: list[list[int]] | None
    style: NumactlStyle | None = None
    if line.strip() == _NO_DISTANCES:
        distances = None
        pos += 1
    elif line.strip() == "node distances:":
        body = [(k, ln) for k, ln in lines[pos + 1 :] if ln.strip()]
        distances, used = _parse_distance_table(body, ids, source, lineno)
        style = _detect_style([raw_lines[k - 1] for k, _ in body[:used]], ids, distances)
        pos = len(lines) if used == len(body) else lines.index(body[used])
    else:
        raise FormatError(source, f"expected 'node distances:', got {line.strip()!r}", lineno)
    for lineno, line in lines[pos:]:
        if line.strip():
            raise FormatError(source, f"unexpected text after the distance table: {line.strip()!r}", lineno)
    return NumactlHardware(nodes=nodes, distances=distances, style=style, source=source)


def _node(nid: int, fields: dict[tuple[int, str], tuple[int, str]], source: str, near: int) -> NumactlNode:
    for what in ("cpus", "size"):
        if (nid, what) not in fields:
            near_line = max((ln for (n, _), (ln, _) in fields.items() if n == nid), default=near)
            raise FormatError(source, f"missing 'node {nid} {what}:' line", near_line)
    lineno, text = fields[(nid, "cpus")]
    try:
        if re.fullmatch(r"[\d\s]*", text):
            cpus = [int(tok) for tok in text.split()]
        else:  # written as ranges ("0-31,64-95"): what a person writes, not numactl
            cpus = parse_cpulist(text.replace(" ", ""))
    except ValueError:
        raise FormatError(source, f"node {nid} cpus: not a list of cpu numbers: {text!r}", lineno) from None
    if cpus != sorted(set(cpus)):
        raise FormatError(source, f"node {nid} cpus: not strictly increasing: {text!r}", lineno)
    return NumactlNode(
        id=nid,
        cpus=cpus,
        size_mb=_mb(fields[(nid, "size")], source),
        free_mb=_mb(fields[(nid, "free")], source) if (nid, "free") in fields else None,
    )


def _mb(entry: tuple[int, str], source: str) -> int | None:
    lineno, text = entry
    if text == _NOT_AVAILABLE:
        return None
    m = _MB_RE.match(text)
    if not m:
        raise FormatError(source, f"expected '<number> MB' or '{_NOT_AVAILABLE}', got {text!r}", lineno)
    return int(m.group(1))


def _parse_distance_table(
    body: list[tuple[int, str]], ids: list[int], source: str, start: int
) -> tuple[list[list[int]], int]:
    """Rows of the table and how many body lines they used (normal layout, else the newline-less one)."""
    if not body:
        raise FormatError(source, "'node distances:' is not followed by a table", start)
    if ":" in body[0][1]:
        return _parse_glued_table(body, ids, source)
    try:
        return _parse_table_lines(body, ids, source)
    except FormatError as exc:
        # Some rows glued together (newlines lost part way): accept it only if the glued reading works.
        try:
            return _parse_glued_table(body, ids, source)
        except FormatError:
            raise exc from None


def _parse_table_lines(
    body: list[tuple[int, str]], ids: list[int], source: str
) -> tuple[list[list[int]], int]:
    n = len(ids)
    head_no, head = body[0]
    tokens = head.split()
    if tokens != ["node", *map(str, ids)]:
        raise FormatError(source, f"distance header should list nodes {ids}, got {head.strip()!r}", head_no)
    if len(body) < n + 1:
        raise FormatError(source, f"distance table has {len(body) - 1} rows for {n} nodes", body[-1][0])
    rows: list[list[int]] = []
    for (lineno, line), nid in zip(body[1 : n + 1], ids, strict=True):
        label, sep, rest = line.partition(":")
        if not sep or label.strip() != str(nid):
            raise FormatError(
                source, f"expected the row of node {nid} ('{nid}: ...'), got {line.strip()!r}", lineno
            )
        try:
            row = [int(tok) for tok in rest.split()]
        except ValueError:
            raise FormatError(source, f"row of node {nid}: not numbers: {rest.strip()!r}", lineno) from None
        if len(row) != n:
            raise FormatError(source, f"row of node {nid} has {len(row)} distances for {n} nodes", lineno)
        rows.append(row)
    return rows, n + 1


def _parse_glued_table(
    body: list[tuple[int, str]], ids: list[int], source: str
) -> tuple[list[list[int]], int]:
    n = len(ids)
    head_no = body[0][0]
    # Newlines lost: "node 0 1 2 30: 10 11 20 201: ..." -- the ids are literal, the values are 1..3 digits.
    # Row labels may be glued to the previous token; values within a row are still space separated.
    glued = " ".join(line for _, line in body)
    pattern = r"\s*node" + "".join(rf"\s+{i}" for i in ids)
    for i in ids:
        pattern += rf"\s*{i}\s*:" + r"\s+(\d{1,3})" + r"".join(r"\s+(\d{1,3})" for _ in range(n - 1))
    m = re.fullmatch(pattern + r"\s*", glued)
    if not m:
        raise FormatError(
            source, f"cannot read the distance table for nodes {ids}: {glued.strip()!r}", head_no
        )
    values = [int(v) for v in m.groups()]
    return [values[r * n : (r + 1) * n] for r in range(n)], len(body)


def _detect_style(raw: list[str], ids: list[int], distances: list[list[int]]) -> NumactlStyle | None:
    seen = [line.split("#", 1)[0].rstrip() for line in raw]
    for style in _STYLES:
        printed = _distance_lines(ids, distances, style)
        if [p.rstrip() for p in printed] == seen:
            return style
    return None


def _distance_lines(ids: Sequence[int], distances: Sequence[Sequence[int]], style: NumactlStyle) -> list[str]:
    width = 3 if style == "2.0.18" else 4
    head = "node " if style == "2.0.18" else "node  "
    lines = [head + "".join(f"{i: {width}d} " for i in ids)]
    for i, row in zip(ids, distances, strict=True):
        lines.append(f"{i: {width}d}: " + "".join(f"{d: {width}d} " for d in row))
    return lines


def format_numactl_hardware(hw: NumactlHardware, style: NumactlStyle | None = None) -> str:
    """Print ``hw`` exactly as ``numactl --hardware`` does (style: the parsed one, else ``"2.0.19"``).

    Examples
    --------
    >>> hw = NumactlHardware(nodes=[NumactlNode(0, [0, 1], 1024, 900), NumactlNode(1, [], 512, None)],
    ...                      distances=[[10, 20], [20, 10]])
    >>> text = format_numactl_hardware(hw, "2.0.18")
    >>> text.splitlines()[:4]
    ['available: 2 nodes (0-1)', 'node 0 cpus: 0 1', 'node 0 size: 1024 MB', 'node 0 free: 900 MB']
    >>> text.splitlines()[4:7]
    ['node 1 cpus:', 'node 1 size: 512 MB', 'node 1 free: <not available>']
    >>> text.splitlines()[7:]
    ['node distances:', 'node   0   1 ', '  0:  10  20 ', '  1:  20  10 ']
    """
    chosen: NumactlStyle = style or hw.style or "2.0.19"
    if chosen not in _STYLES:
        raise ValueError(f"style = {chosen!r}: expected one of {_STYLES}")
    ids = [n.id for n in hw.nodes]
    out = [f"available: {len(ids)} nodes ({format_cpulist(ids)})"]
    for n in hw.nodes:
        out.append(f"node {n.id} cpus:" + "".join(f" {c}" for c in n.cpus))
        out.append(f"node {n.id} size: " + (f"{n.size_mb} MB" if n.size_mb is not None else _NOT_AVAILABLE))
        out.append(f"node {n.id} free: " + (f"{n.free_mb} MB" if n.free_mb is not None else _NOT_AVAILABLE))
    if hw.distances is None:
        out.append(_NO_DISTANCES)
    else:
        out.append("node distances:")
        out.extend(_distance_lines(ids, hw.distances, chosen))
    return "\n".join(out) + "\n"


def machine_from_numactl(text: str, name: str, source: str = "<text>") -> Machine:
    """A :class:`Machine` from ``numactl --hardware`` text.

    ``memory_bytes`` is ``size`` MiB. ``free_bytes`` is ``free`` MiB plus half a MiB (an assumption, not a
    reading): numactl truncates to whole MiB, so the true value lies in ``[free, free + 1)`` MiB, and the numactl
    that printed it held a fraction of a MiB itself (the virtual one: 0.27 MB). Half a MiB is the middle of that
    interval, and makes ``numasim numactl -H`` on the imported machine print the same ``free`` again.
    Links are inferred from the distance table (:func:`numasim.topology.infer.from_distance_matrix`), so both the
    stored ``firmware_slit`` and the SLIT derived from the link timing equal the printed table. Cpu-less nodes
    become memory-only nodes.

    Decisions for incomplete text: a ``<not available>`` size becomes the mean size of the nodes whose size is
    printed (1 GiB if none is); a node with neither cpus nor memory cannot exist in the model and is dropped
    (with its row and column of the table; the description says so); without a distance table the kernel's
    default remote distance 20 is used and no ``firmware_slit`` is stored.
    """
    from numasim.topology.infer import from_distance_matrix

    hw = parse_numactl_hardware(text, source)
    known = [n.size_mb for n in hw.nodes if n.size_mb]  # printed, non-zero sizes
    fallback_mb = round(sum(known) / len(known)) if known else 1024
    notes: list[str] = []
    keep: list[int] = []
    nodes: list[Node] = []
    for k, n in enumerate(hw.nodes):
        size_mb = n.size_mb if n.size_mb is not None else fallback_mb
        if n.size_mb is None:
            notes.append(f"node {n.id} size not available, assumed {size_mb} MB")
        if size_mb == 0 and not n.cpus:
            notes.append(f"node {n.id} has neither cpus nor memory: dropped")
            continue
        memory = size_mb * MiB
        if n.free_mb is not None and n.size_mb is not None and n.free_mb > n.size_mb:
            raise FormatError(source, f"node {n.id} free: {n.free_mb} MB is more than its size: {n.size_mb} MB "
                              "(a typo, or two numactl outputs pasted together?)")
        free = min(n.free_mb * MiB + MiB // 2, memory) if n.free_mb is not None else None
        nodes.append(Node(id=n.id, cpus=n.cpus, memory_bytes=memory, free_bytes=free))
        keep.append(k)
    if not nodes:
        raise FormatError(source, "no node has cpus or memory")
    if hw.distances is not None:
        table = [[hw.distances[a][b] for b in keep] for a in keep]
        firmware: list[list[int]] | None = table
    else:
        table = [[10 if a == b else 20 for b in keep] for a in keep]
        firmware = None
        notes.append("no distance information: remote distance 20 assumed")
    description = "from numactl --hardware" + (f" ({'; '.join(notes)})" if notes else "")
    try:
        machine = from_distance_matrix(
            table, name=name, nodes=nodes, firmware_slit=firmware, description=description, source=source
        )
    except TopologyError as exc:
        raise FormatError(source, f"distance table: {exc}") from None
    # the printing numactl's layout, when the table tells it (it cannot without a table or with lost newlines)
    return machine.model_copy(update={"numactl_style": hw.style}) if hw.style else machine


def hardware_of(machine: Machine, style: NumactlStyle | None = None) -> NumactlHardware:
    """What ``numactl --hardware`` would report on ``machine`` (free = ``free_bytes``, else all memory), in
    ``style``, else the layout of the numactl it was read from (``machine.numactl_style``), else 2.0.19's."""
    nodes = [
        NumactlNode(
            id=n.id,
            cpus=list(n.cpus),
            size_mb=n.memory_bytes >> 20,
            free_mb=(n.free_bytes if n.free_bytes is not None else n.memory_bytes) >> 20,
        )
        for n in machine.nodes
    ]
    chosen = style or machine.numactl_style or "2.0.19"
    return NumactlHardware(nodes=nodes, distances=machine.slit(), style=chosen, source=machine.name)


def numactl_hardware_for(machine: Machine, style: NumactlStyle | None = None) -> str:
    """The ``numactl --hardware`` text for ``machine`` (distances: :func:`~numasim.topology.distances.slit`).

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> text = numactl_hardware_for(glueless(2, cpus_per_node=2, memory_bytes=1 << 30))
    >>> text.splitlines()[:4]
    ['available: 2 nodes (0-1)', 'node 0 cpus: 0 1', 'node 0 size: 1024 MB', 'node 0 free: 1024 MB']
    >>> text.splitlines()[-3:]
    ['node     0    1 ', '   0:   10   16 ', '   1:   16   10 ']
    """
    return format_numactl_hardware(hardware_of(machine, style))


def load_machine_numactl(path: str | Path, name: str | None = None) -> Machine:
    """Read a file holding ``numactl --hardware`` output (the name defaults to the file's stem).

    numactl does not name the processor: the machine's ``cpu_model`` comes from a ``Model name:`` line in the
    same file (``lscpu; numactl -H`` saved together) or from an ``lscpu.txt`` (or ``cpuinfo``) beside it."""
    from numasim.topology.io.cpumodel import cpu_model_from_text, cpu_model_near

    p = Path(path)
    text = p.read_text(encoding="utf-8")
    # other text around the output (lscpu's, a shell session's, a page's) is blanked: only numactl's lines are read
    machine = machine_from_numactl(_numactl_part(text), name or p.stem, str(p))
    model = cpu_model_from_text(text) or cpu_model_near(p.parent, levels_up=0)
    return machine.model_copy(update={"cpu_model": model}) if model else machine


_NUMACTL_LINE = re.compile(r"^\s*(available:|node\b|No distance|\d+:|\d+(\s+\d+)*\s*$)")


def _numactl_part(text: str) -> str:
    """The ``numactl --hardware`` lines of a text that also holds ``lscpu`` output (``lscpu; numactl -H``
    saved together), the other lines blanked so that an error still names the file's own line number."""
    lines = _unquoted(text.splitlines())
    start = next((k for k, line in enumerate(lines) if _AVAILABLE_RE.match(_strip(line).strip())), None)
    if start is None:
        return text  # the parser says what is missing
    end = start
    while end < len(lines) and (not lines[end].strip() or _NUMACTL_LINE.match(_strip(lines[end]))):
        end += 1
    return "\n".join(["" if not start <= k < end else line for k, line in enumerate(lines)]) + "\n"


def save_machine_numactl(machine: Machine, path: str | Path, style: NumactlStyle | None = None) -> None:
    """Write the ``numactl --hardware`` text of ``machine`` atomically."""
    p = Path(path)
    text = numactl_hardware_for(machine, style)  # render first: a failure here touches no file
    atomic_write_text(p, text)
