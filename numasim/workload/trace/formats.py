"""Pick a trace reader or writer from the file name (or an explicit format name), and stream through it.

=============  ===========================================  =========  =========
format         suffixes                                     read       write
=============  ===========================================  =========  =========
``npz``        ``.npz``                                     yes        yes
``csv``        ``.csv``                                     yes        yes
``parquet``    ``.parquet``, ``.pq``                        pyarrow    pyarrow
``perf``       ``.perf``, ``.perf.txt``, ``.script``        yes        no
``lackey``     ``.lackey``, ``.lk``, ``.lackey.txt``        yes        no
=============  ===========================================  =========  =========

Other ``.txt``/``.log``/``.out`` files are sniffed from their first lines (lackey, perf script, or a CSV header).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from numasim.errors import TraceError
from numasim.workload.access import AccessChunk, chunk_problem
from numasim.workload.trace.csv_format import read_csv, write_csv
from numasim.workload.trace.lackey import looks_like_lackey, read_lackey
from numasim.workload.trace.npz import read_npz, write_npz
from numasim.workload.trace.parquet_format import read_parquet, write_parquet
from numasim.workload.trace.perf_script import looks_like_perf_script, read_perf_script

__all__ = ["TRACE_FORMATS", "WRITABLE_FORMATS", "trace_format", "read_trace", "write_trace", "checked_chunks"]

TRACE_FORMATS = ("npz", "csv", "parquet", "perf", "lackey")
WRITABLE_FORMATS = ("npz", "csv", "parquet")
_SUFFIXES = {
    ".npz": "npz",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".perf": "perf",
    ".script": "perf",
    ".lackey": "lackey",
    ".lk": "lackey",
}


def _sniff(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(50), f, strict=False):
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                if looks_like_lackey(line.rstrip("\n")):
                    if text.startswith(("==", "--", "**")):
                        continue  # a valgrind banner: keep looking for the first memory line
                    return "lackey"
                if looks_like_perf_script(line):
                    return "perf"
                if "thread" in text.lower() and "address" in text.lower():
                    return "csv"
                return None
    except OSError:
        return None
    return None


def trace_format(path: str | Path, format: str | None = None) -> str:
    """The format name of ``path``: ``format`` if given, else from the suffix, else sniffed from the content."""
    p = Path(path)
    if format is not None:
        if format not in TRACE_FORMATS:
            raise TraceError(str(p), f"unknown trace format {format!r} (expected one of {', '.join(TRACE_FORMATS)})")
        return format
    name = p.name.lower()
    for double, fmt in ((".perf.txt", "perf"), (".lackey.txt", "lackey"), (".lackey.out", "lackey")):
        if name.endswith(double):
            return fmt
    if p.suffix.lower() in _SUFFIXES:
        return _SUFFIXES[p.suffix.lower()]
    if p.exists():
        sniffed = _sniff(p)
        if sniffed:
            return sniffed
    raise TraceError(str(p), f"cannot tell the trace format from the name {p.name!r} "
                     f"(use a suffix .npz .csv .parquet .perf .lackey, or give the format)")


def read_trace(path: str | Path, format: str | None = None, **options: Any) -> Iterator[AccessChunk]:
    """Stream ``path`` as chunks; ``options`` go to the reader (``levels=`` for perf, ``instructions=`` for lackey)."""
    p = Path(path)
    fmt = trace_format(p, format)
    if not p.exists():
        raise FileNotFoundError(2, "No such file", str(p))
    readers = {"npz": read_npz, "csv": read_csv, "parquet": read_parquet, "perf": read_perf_script, "lackey": read_lackey}
    return checked_chunks(readers[fmt](p, **options), str(p))  # type: ignore[operator]


def checked_chunks(chunks: Iterable[AccessChunk], source: str) -> Iterator[AccessChunk]:
    """Pass ``chunks`` through, raising :class:`~numasim.errors.TraceError` naming ``source`` and the chunk at
    the first value outside its column's range (NaN, negative or huge ``compute_ns``, a negative thread id):
    every reader and writer goes through it, so a bad value never reaches the engine or a file."""
    for i, chunk in enumerate(chunks):
        problem = chunk_problem(chunk)
        if problem is not None:
            raise TraceError(source, f"chunk {i}, {problem}")
        yield chunk


def write_trace(chunks: Iterable[AccessChunk], path: str | Path, format: str | None = None,
                *, meta: dict[str, Any] | None = None) -> int:
    """Write chunks to ``path`` atomically in the format its suffix names; returns the accesses written."""
    fmt = trace_format(path, format)
    chunks = checked_chunks(chunks, str(path))
    if fmt == "npz":
        return write_npz(chunks, path, meta=meta)
    if fmt == "csv":
        return write_csv(chunks, path)
    if fmt == "parquet":
        return write_parquet(chunks, path)
    raise TraceError(str(path), f"cannot write {fmt} traces (write one of {', '.join(WRITABLE_FORMATS)})")
