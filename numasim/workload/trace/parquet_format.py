"""Parquet traces (optional: only when ``pyarrow`` is importable).

Same columns and dtypes as the ``.npz`` format, one row group per chunk, so reading streams row group by row
group. Without pyarrow, reading or writing raises :class:`~numasim.errors.TraceError` saying so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from numasim.errors import TraceError
from numasim.fileio import atomic_path
from numasim.workload.access import MAX_THREAD_ID, AccessChunk
from numasim.workload.trace.npz import COLUMNS

__all__ = ["checked_thread_ids", "parquet_available", "read_parquet", "write_parquet"]


def parquet_available() -> bool:
    """Whether pyarrow is installed (Parquet support is optional)."""
    return importlib.util.find_spec("pyarrow") is not None


def _pyarrow(source: str) -> tuple[Any, Any]:
    if not parquet_available():
        raise TraceError(source, "Parquet traces need pyarrow (pip install pyarrow); use .npz or .csv instead")
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def write_parquet(chunks: Iterable[AccessChunk], path: str | Path) -> int:
    """Write chunks to a Parquet file atomically, one row group per chunk; returns the accesses written."""
    pa, pq = _pyarrow(str(path))
    schema = pa.schema([(name, pa.from_numpy_dtype(dtype)) for name, dtype in COLUMNS.items()])
    written = 0
    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(str(tmp), schema)
        try:
            for c in chunks:
                table = pa.table({name: getattr(c, name).astype(dtype) for name, dtype in COLUMNS.items()}, schema=schema)
                writer.write_table(table)
                written += len(c)
        finally:
            writer.close()
    return written


def read_parquet(path: str | Path) -> Iterator[AccessChunk]:
    """Stream a Parquet trace row group by row group."""
    p = Path(path)
    pa, pq = _pyarrow(str(p))
    try:
        f = pq.ParquetFile(str(p))
    except (OSError, pa.ArrowException) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceError(str(p), f"not a readable Parquet file: {exc}") from None
    missing = [n for n in COLUMNS if n not in f.schema_arrow.names]
    if missing:
        raise TraceError(str(p), f"Parquet trace lacks column(s) {', '.join(missing)}")
    for i in range(f.num_row_groups):
        try:
            table = f.read_row_group(i, columns=list(COLUMNS))
        except (OSError, pa.ArrowException) as exc:
            raise TraceError(str(p), f"row group {i} is corrupt: {exc}") from None
        cols = {n: table.column(n).to_numpy() for n in COLUMNS}
        checked_thread_ids(cols["thread"], str(p), f"row group {i}")
        yield AccessChunk(**{n: np.asarray(cols[n], dtype=d) for n, d in COLUMNS.items()})


def checked_thread_ids(raw: np.ndarray, source: str, where: str) -> np.ndarray:
    """``raw`` thread ids (any integer type a Parquet writer chose), refused before the cast to int32 when one
    is outside 0..MAX_THREAD_ID (an int64 id of 2**40 would otherwise wrap silently).

    Examples
    --------
    >>> checked_thread_ids(np.array([0, 7], dtype=np.int64), "t.parquet", "row group 0").tolist()
    [0, 7]
    """
    ids = np.asarray(raw)
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise TraceError(source, f"{where}: thread ids are {ids.dtype}, not integers")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > MAX_THREAD_ID):
        k = int(np.flatnonzero((ids < 0) | (ids > MAX_THREAD_ID))[0])
        raise TraceError(source, f"{where}, row {k}: thread = {int(ids[k])} is not a thread id in 0..{MAX_THREAD_ID}")
    return ids
