"""``/proc/PID/numa_maps`` lines: ``<start> <policy> [file=<path>|heap|stack|huge] key=value ... N<node>=<pages>``.

Format from fs/proc/task_mmu.c (``show_numa_map``): the start address in hex, the policy as
``mpol_to_str`` prints it (``default``, ``bind:0-1``, ``interleave:0-3``, ``prefer:1`` ...), then counters
(``anon=``, ``dirty=``, ``mapped=``, ``mapmax=``, ``swapcache=``, ``active=``, ``writeback=``,
``kernelpagesize_kB=``) and one ``N<node>=<pages>`` per node holding pages of the mapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numasim.calibrate.parsers._text import numbered_lines, read_source
from numasim.errors import FormatError

__all__ = ["NumaMapsEntry", "NumaMapsResult", "parse_numa_maps", "parse_numa_maps_text", "looks_like_numa_maps"]

_LINE_RE = re.compile(r"^([0-9a-fA-F]+)\s+(\S+)(.*)$")
_NODE_RE = re.compile(r"^N(\d+)=(\d+)$")


@dataclass(frozen=True)
class NumaMapsEntry:
    line: int
    start: int
    policy: str
    file: str | None = None
    kind: str = "anon"
    """``"file"``, ``"heap"``, ``"stack"``, ``"huge"`` or ``"anon"``."""
    counters: dict[str, int] = field(default_factory=dict)
    pages_per_node: dict[int, int] = field(default_factory=dict)
    page_size_bytes: int = 4096


@dataclass(frozen=True)
class NumaMapsResult:
    source: str
    entries: list[NumaMapsEntry]
    tool_version: str | None = "/proc/PID/numa_maps"

    def pages_per_node(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.entries:
            for n, p in e.pages_per_node.items():
                out[n] = out.get(n, 0) + p
        return dict(sorted(out.items()))


def looks_like_numa_maps(text: str) -> bool:
    first = [t for t in text.splitlines() if t.strip()][:5]
    return bool(first) and all(_LINE_RE.match(t) and t.split()[1].split(":")[0] in _POLICIES for t in first)


_POLICIES = {"default", "bind", "interleave", "prefer", "preferred", "local", "prefer (many)", "weighted", "weighted interleave"}


def parse_numa_maps_text(text: str, source: str = "<text>") -> NumaMapsResult:
    """Parse numa_maps.

    Examples
    --------
    >>> r = parse_numa_maps_text("00506000 default heap anon=3 dirty=3 active=0 N3=3")
    >>> r.entries[0].kind, r.entries[0].pages_per_node
    ('heap', {3: 3})
    """
    entries: list[NumaMapsEntry] = []
    for ln in numbered_lines(text):
        t = ln.text.strip()
        if not t:
            continue
        m = _LINE_RE.match(t)
        if not m:
            raise FormatError(source, f"numa_maps line must start with a hex address, got {t!r}", ln.number)
        start, policy, rest = int(m.group(1), 16), m.group(2), m.group(3).split()
        if policy.split(":")[0].split("=")[0] not in {"default", "bind", "interleave", "prefer", "preferred", "local", "weighted"}:
            raise FormatError(source, f"unknown memory policy {policy!r}", ln.number)
        file = None
        kind = "anon"
        counters: dict[str, int] = {}
        nodes: dict[int, int] = {}
        page_size = 4096
        for tok in rest:
            nm = _NODE_RE.match(tok)
            if nm:
                nodes[int(nm.group(1))] = int(nm.group(2))
            elif tok.startswith("file="):
                file, kind = tok[5:], "file"
            elif tok in ("heap", "stack", "huge"):
                kind = tok
            elif "=" in tok:
                key, _, value = tok.partition("=")
                if not value.isdigit():
                    raise FormatError(source, f"counter {key!r} = {value!r} is not a count", ln.number)
                if key == "kernelpagesize_kB":
                    page_size = int(value) * 1024
                else:
                    counters[key] = int(value)
            elif tok.startswith("N") and tok[1:2].isdigit():
                raise FormatError(source, f"malformed node count {tok!r} (expected N<node>=<pages>)", ln.number)
            elif kind == "file" and file is not None:
                file += " " + tok  # a file name with a space
            else:
                raise FormatError(source, f"unknown numa_maps field {tok!r}", ln.number)
        entries.append(NumaMapsEntry(ln.number, start, policy, file, kind, counters, nodes, page_size))
    if not entries:
        raise FormatError(source, "empty numa_maps")
    return NumaMapsResult(source=source, entries=entries)


def parse_numa_maps(path: str | Path) -> NumaMapsResult:
    source, text = read_source(path)
    return parse_numa_maps_text(text, source)
