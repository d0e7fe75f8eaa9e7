"""Memory-access traces: numasim's chunked ``.npz``, Parquet (optional), CSV, ``perf script`` and lackey.

Every reader streams (an iterator of :class:`~numasim.workload.access.AccessChunk`); every writer is atomic.
"""

from numasim.workload.trace.formats import (
    TRACE_FORMATS,
    WRITABLE_FORMATS,
    read_trace,
    trace_format,
    write_trace,
)
from numasim.workload.trace.stats import TraceInfo, touched_pages, trace_info

__all__ = [
    "TRACE_FORMATS",
    "WRITABLE_FORMATS",
    "read_trace",
    "write_trace",
    "trace_format",
    "TraceInfo",
    "trace_info",
    "touched_pages",
]
