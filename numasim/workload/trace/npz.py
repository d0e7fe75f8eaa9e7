"""numasim's columnar trace format: a chunked ``.npz`` (a zip of ``.npy`` arrays, readable by ``numpy.load``).

Layout, version 1::

    header.json                 {"format": "numasim-trace", "version": 1, "threads": T, "accesses": N,
                                 "chunks": K, "columns": [...], "meta": {...}}
    c000000.thread.npy          int32    \\
    c000000.address.npy         uint64    |  chunk 0
    c000000.is_write.npy        bool      |
    c000000.size_bytes.npy      uint16    |
    c000000.compute_ns.npy      float32  /
    c000001.thread.npy ...

Chunks are written as they arrive and the header last (it holds the counts), so writing streams; every member
carries the same fixed timestamp (:data:`ZIP_DATE_TIME`, zip's epoch), so one seed gives byte-identical files
(``numpy.savez`` stamps the current time); reading
opens one member at a time, so a trace larger than memory streams back chunk by chunk. A truncated or
corrupt file (bad zip directory, CRC mismatch, missing member, wrong dtype or length) raises
:class:`~numasim.errors.TraceError` naming the file and the chunk.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from numasim.errors import TraceError
from numasim.fileio import atomic_path
from numasim.workload.access import AccessChunk

__all__ = ["NpzTraceWriter", "write_npz", "read_npz", "read_npz_header", "NPZ_VERSION", "COLUMNS", "ZIP_DATE_TIME"]

NPZ_VERSION = 1
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
"""The timestamp of every zip member: the earliest a zip can hold, so a trace's bytes depend on its data only."""
COLUMNS: dict[str, np.dtype[Any]] = {
    "thread": np.dtype(np.int32),
    "address": np.dtype(np.uint64),
    "is_write": np.dtype(np.bool_),
    "size_bytes": np.dtype(np.uint16),
    "compute_ns": np.dtype(np.float32),
}


class NpzTraceWriter:
    """Write chunks one by one into ``path`` atomically (a temporary file renamed into place on success).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.npz")
    >>> with NpzTraceWriter(path) as w:
    ...     w.write(AccessChunk.build(np.arange(4, dtype=np.uint64) * 64))
    >>> read_npz_header(path)["accesses"]
    4
    """

    def __init__(self, path: str | Path, *, meta: dict[str, Any] | None = None, compress: bool = True) -> None:
        self.path = Path(path)
        self.meta = dict(meta or {})
        self.compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        self.accesses = 0
        self.chunks = 0
        self.max_thread = -1
        self._zip: zipfile.ZipFile | None = None
        self._atomic: AbstractContextManager[Path] | None = None

    def __enter__(self) -> NpzTraceWriter:
        # fileio's temporary: renamed into place on success, removed on an error, Ctrl-C or SIGTERM, and swept
        # by a later write if this process is killed outright.
        self._atomic = atomic_path(self.path)
        tmp = self._atomic.__enter__()
        try:
            self._zip = zipfile.ZipFile(tmp, "w", compression=self.compression, compresslevel=1, allowZip64=True)
        except BaseException as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def _member(self, name: str) -> zipfile.ZipInfo:
        # An explicit ZipInfo: ZipFile.open(name) would stamp the current time and make each file's bytes unique.
        info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
        info.compress_type = self.compression
        # Level 1 as the writer's own: a bare ZipInfo would get zlib's slower default. The attribute is private
        # before Python 3.13 (public compress_level there, with _compresslevel kept as an alias).
        setattr(info, "_compresslevel", 1)  # noqa: B010
        info.external_attr = 0o644 << 16  # rw-r--r-- for unzip, as numpy.savez's members
        return info

    def write(self, chunk: AccessChunk) -> None:
        if self._zip is None:
            raise RuntimeError("NpzTraceWriter.write outside its `with` block")
        if not len(chunk):
            return
        for name, dtype in COLUMNS.items():
            array = np.ascontiguousarray(getattr(chunk, name), dtype=dtype)
            with self._zip.open(self._member(f"c{self.chunks:06d}.{name}.npy"), "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
        self.accesses += len(chunk)
        self.max_thread = max(self.max_thread, int(chunk.thread.max()))
        self.chunks += 1

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._zip is not None and self._atomic is not None
        try:
            if exc_type is None:
                header = {
                    "format": "numasim-trace",
                    "version": NPZ_VERSION,
                    "threads": self.max_thread + 1,
                    "accesses": self.accesses,
                    "chunks": self.chunks,
                    "columns": list(COLUMNS),
                    "meta": self.meta,
                }
                self._zip.writestr(self._member("header.json"), json.dumps(header, sort_keys=True))
            self._zip.close()
        except BaseException as error:
            self._atomic.__exit__(type(error), error, error.__traceback__)  # removes the temporary
            raise
        self._atomic.__exit__(exc_type, exc, tb)  # renames it into place, or removes it after an error


def write_npz(chunks: Iterable[AccessChunk], path: str | Path, *, meta: dict[str, Any] | None = None) -> int:
    """Write a stream of chunks to ``path``; returns the number of accesses written."""
    with NpzTraceWriter(path, meta=meta) as w:
        for c in chunks:
            w.write(c)
    return w.accesses


def _open(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceError(str(path), f"not a readable numasim .npz trace (truncated or corrupt?): {exc}") from None


def _header(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    try:
        header = json.loads(zf.read("header.json"))
    except KeyError:
        raise TraceError(str(path), "no header.json: not a numasim trace, or it was not closed properly") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise TraceError(str(path), f"corrupt header: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != "numasim-trace":
        raise TraceError(str(path), "header.json does not describe a numasim trace")
    if header.get("version") != NPZ_VERSION:
        raise TraceError(str(path), f"trace version {header.get('version')!r} is not supported (expected {NPZ_VERSION})")
    for key in ("threads", "accesses", "chunks"):
        if not isinstance(header.get(key), int) or header[key] < 0:
            raise TraceError(str(path), f"header field {key} = {header.get(key)!r} is not a count")
    return header


def read_npz_header(path: str | Path) -> dict[str, Any]:
    """The header of a trace (format, version, threads, accesses, chunks, columns, meta) without reading data."""
    p = Path(path)
    with _open(p) as zf:
        return _header(zf, p)


def read_npz(path: str | Path) -> Iterator[AccessChunk]:
    """Stream the chunks of a trace written by :func:`write_npz`, one chunk in memory at a time."""
    p = Path(path)
    with _open(p) as zf:
        header = _header(zf, p)
        seen = 0
        for i in range(header["chunks"]):
            columns: dict[str, np.ndarray] = {}
            for name, dtype in COLUMNS.items():
                member = f"c{i:06d}.{name}.npy"
                try:
                    with zf.open(member) as f:
                        array = np.lib.format.read_array(f, allow_pickle=False)
                except KeyError:
                    raise TraceError(str(p), f"chunk {i}: member {member} is missing") from None
                except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                    raise TraceError(str(p), f"chunk {i}: {member} is corrupt: {exc}") from None
                if array.dtype != dtype or array.ndim != 1:
                    raise TraceError(str(p), f"chunk {i}: {name} has dtype {array.dtype}/{array.ndim}-d, expected 1-d {dtype}")
                columns[name] = array
            try:
                chunk = AccessChunk(**columns)
            except ValueError as exc:
                raise TraceError(str(p), f"chunk {i}: {exc}") from None
            seen += len(chunk)
            yield chunk
        if seen != header["accesses"]:
            raise TraceError(str(p), f"header says {header['accesses']} accesses, chunks hold {seen}")
