"""Valgrind ``--tool=lackey --trace-mem=yes`` output.

Lackey (valgrind ``lackey/lk_main.c``) prints one line per memory operation, hex address and decimal size::

    I  04222cac,3       instruction fetch (column 0 'I', two spaces)
     L 04222cac,4       data load
     S 7ff000398,8      data store
     M 0421d7f0,4       modify: a load and a store of the same address

Valgrind's own messages (``==1234== ...``, ``--1234-- ...``) and blank lines are skipped. Instruction fetches
are skipped unless ``instructions=True`` (then they are loads). ``M`` gives two accesses (load, then store).
Valgrind serialises the client's threads and lackey does not print which one ran, so every access is thread
``thread`` (default 0). A malformed line raises :class:`~numasim.errors.TraceError` with its line number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from numasim.errors import TraceError
from numasim.workload.access import AccessChunk
from numasim.workload.trace._text import TEXT_CHUNK_ACCESSES, ChunkBuilder, numbered_lines

__all__ = ["read_lackey", "looks_like_lackey"]

_OP = re.compile(r"^\s*([ILSM])\s+([0-9a-fA-F]+),(\d+)\s*$")
_VALGRIND = re.compile(r"^(==|--|\*\*)\d+(==|--|\*\*)")


def looks_like_lackey(line: str) -> bool:
    """True when ``line`` is a lackey memory line or a valgrind message (used to sniff ``.txt`` traces)."""
    return bool(_OP.match(line) or _VALGRIND.match(line))


def read_lackey(
    path: str | Path,
    *,
    instructions: bool = False,
    thread: int = 0,
    chunk_accesses: int = TEXT_CHUNK_ACCESSES,
) -> Iterator[AccessChunk]:
    """Stream a lackey ``--trace-mem=yes`` log as chunks."""
    p = Path(path)
    src = str(p)
    builder = ChunkBuilder(chunk_accesses)
    for number, line in numbered_lines(p):
        if not line.strip() or _VALGRIND.match(line):
            continue
        m = _OP.match(line)
        if m is None:
            raise TraceError(src, f"not a lackey line (' L addr,size', ' S ...', ' M ...', 'I  ...'): {line[:80]!r}", number)
        op, addr_text, size_text = m.groups()
        size = int(size_text)
        if not 1 <= size <= 65535:
            raise TraceError(src, f"size {size_text} is not 1..65535", number)
        address = int(addr_text, 16)
        if address >= 1 << 64:
            raise TraceError(src, f"address {addr_text[:40]} is beyond 64 bits", number)
        if op == "I":
            if instructions:
                builder.add(thread, address, False, size)
        elif op == "L":
            builder.add(thread, address, False, size)
        elif op == "S":
            builder.add(thread, address, True, size)
        else:  # M: read-modify-write
            builder.add(thread, address, False, size)
            builder.add(thread, address, True, size)
        if builder.full():
            yield builder.take()
    if len(builder):
        yield builder.take()
