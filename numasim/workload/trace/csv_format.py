"""Plain CSV traces: a header line, then one access per line.

Header (any column order): ``thread,address,is_write,size_bytes[,compute_ns][,cpu]``; ``cpu``, when recorded, is
the cpu the access ran on (a replay runs each thread on the cpu of its first access). Addresses are decimal or hex
(``0x7f00...``, or bare hex digits containing a-f); ``is_write`` is ``0``/``1``, ``true``/``false``, ``R``/``W``
or ``load``/``store``. Blank lines and lines starting with ``#`` are skipped. A malformed line raises
:class:`~numasim.errors.TraceError` with the file name and line number.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from numasim.errors import TraceError
from numasim.workload.access import MAX_COMPUTE_NS, MAX_THREAD_ID, AccessChunk
from numasim.workload.trace._text import TEXT_CHUNK_ACCESSES, ChunkBuilder, atomic_text_file, numbered_lines

__all__ = ["read_csv", "write_csv", "parse_address", "CSV_COLUMNS"]

CSV_COLUMNS = ("thread", "address", "is_write", "size_bytes", "compute_ns")
_REQUIRED = CSV_COLUMNS[:4]
_TRUE = {"1", "true", "t", "w", "write", "store", "s", "yes", "y"}
_FALSE = {"0", "false", "f", "r", "read", "load", "l", "no", "n"}
_HEX_LETTERS = set("abcdefABCDEF")


def parse_address(text: str) -> int:
    """``"0x1f"`` / ``"1f"`` (hex: has a-f) / ``"31"`` (decimal) -> int; raises ValueError otherwise.

    Examples
    --------
    >>> parse_address("0x1000"), parse_address("4096"), parse_address("7ffd0")
    (4096, 4096, 524240)
    """
    t = text.strip()
    if t[:2].lower() == "0x":
        value = int(t[2:], 16)
    elif _HEX_LETTERS & set(t):
        value = int(t, 16)
    else:
        value = int(t, 10)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"address {text!r} is outside 0..2**64-1")
    return value


def read_csv(
    path: str | Path, *, chunk_accesses: int = TEXT_CHUNK_ACCESSES, recorded_cpus: dict[int, int] | None = None
) -> Iterator[AccessChunk]:
    """Stream a CSV trace as chunks of at most ``chunk_accesses`` accesses. ``recorded_cpus``, when given and
    the file has a ``cpu`` column, receives each thread's cpu (that of its first access)."""
    p = Path(path)
    src = str(p)
    columns: dict[str, int] | None = None
    width = 0
    builder = ChunkBuilder(chunk_accesses)
    for number, line in numbered_lines(p):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [f.strip() for f in text.split(",")]
        if columns is None:
            names = [f.lower() for f in fields]
            missing = [c for c in _REQUIRED if c not in names]
            if missing:
                raise TraceError(src, f"header {text!r} lacks column(s) {', '.join(missing)} "
                                 f"(expected {','.join(CSV_COLUMNS)})", number)
            columns = {n: names.index(n) for n in (*CSV_COLUMNS, "cpu") if n in names}
            width = len(names)
            continue
        if len(fields) != width:
            raise TraceError(src, f"expected {width} fields, got {len(fields)}: {text!r}", number)
        try:
            thread = int(fields[columns["thread"]])
            if not 0 <= thread <= MAX_THREAD_ID:
                raise ValueError("range")
        except ValueError:
            raise TraceError(src, f"thread = {fields[columns['thread']][:40]!r} is not a thread id in 0..{MAX_THREAD_ID}",
                             number) from None
        try:
            address = parse_address(fields[columns["address"]])
        except ValueError:
            raise TraceError(src, f"address = {fields[columns['address']][:40]!r} is not an address in 0..2**64-1",
                             number) from None
        flag = fields[columns["is_write"]].lower()
        if flag in _TRUE:
            is_write = True
        elif flag in _FALSE:
            is_write = False
        else:
            raise TraceError(src, f"is_write = {fields[columns['is_write']]!r} is not 0/1/true/false/R/W", number)
        try:
            size = int(fields[columns["size_bytes"]])
            if not 1 <= size <= 65535:
                raise ValueError("range")
        except ValueError:
            raise TraceError(src, f"size_bytes = {fields[columns['size_bytes']]!r} is not 1..65535", number) from None
        compute = 0.0
        if "compute_ns" in columns:
            try:
                compute = float(fields[columns["compute_ns"]])
                if not 0 <= compute <= MAX_COMPUTE_NS:  # NaN fails too
                    raise ValueError("range")
            except ValueError:
                raise TraceError(src, f"compute_ns = {fields[columns['compute_ns']][:40]!r} is not a time in "
                                 f"0..{MAX_COMPUTE_NS:g} ns", number) from None
        if recorded_cpus is not None and "cpu" in columns and thread not in recorded_cpus:
            try:
                recorded_cpus[thread] = int(fields[columns["cpu"]])
                if not 0 <= recorded_cpus[thread] <= 65535:
                    raise ValueError("range")
            except ValueError:
                raise TraceError(src, f"cpu = {fields[columns['cpu']][:40]!r} is not a cpu number", number) from None
        builder.add(thread, address, is_write, size, compute)
        if builder.full():
            yield builder.take()
    if columns is None:
        raise TraceError(src, "empty file: expected a header line thread,address,is_write,size_bytes[,compute_ns]")
    if len(builder):
        yield builder.take()


def write_csv(chunks: Iterable[AccessChunk], path: str | Path) -> int:
    """Write chunks as CSV (hex addresses) atomically; returns the number of accesses written."""
    written = 0
    with atomic_text_file(path) as f:
        f.write(",".join(CSV_COLUMNS) + "\n")
        for c in chunks:
            rows = zip(
                c.thread.tolist(), c.address.tolist(), c.is_write.tolist(), c.size_bytes.tolist(),
                c.compute_ns.tolist(), strict=True,
            )
            f.writelines(f"{t},{a:#x},{int(w)},{s},{x:g}\n" for t, a, w, s, x in rows)
            written += len(c)
    return written
