"""Workloads and traces: what the simulated program does, as a stream of :class:`AccessChunk`.

* :mod:`numasim.workload.spec` -- the workload file (threads, allocations with policies, access phases);
* :mod:`numasim.workload.generate` -- workload + seed -> chunks (vectorised, deterministic);
* :mod:`numasim.workload.trace` -- traces: chunked ``.npz``, CSV, Parquet, ``perf script``, lackey;
* :mod:`numasim.workload.placement` and :mod:`numasim.workload.run` -- the glue to the kernel and the engine
  (``run_workload``, ``run_trace``, ``compare_policies``; imported on demand, they pull in those layers).

The names below are imported on first use (PEP 562), so that importing one submodule stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numasim._lazy import lazy_names

_SOURCES = {
    "AccessChunk": "numasim.workload.access",
    "concat_chunks": "numasim.workload.access",
    "rechunk": "numasim.workload.access",
    "Workload": "numasim.workload.spec",
    "load_workload": "numasim.workload.spec",
    "loads_workload": "numasim.workload.spec",
    "generate": "numasim.workload.generate",
    "total_accesses": "numasim.workload.generate",
    "quick_workload": "numasim.workload.quick",
    "PolicySpec": "numasim.workload.policy_text",
    "parse_policy": "numasim.workload.policy_text",
    "read_trace": "numasim.workload.trace",
    "write_trace": "numasim.workload.trace",
    "trace_info": "numasim.workload.trace",
}

__all__ = [
    "AccessChunk",
    "concat_chunks",
    "rechunk",
    "Workload",
    "load_workload",
    "loads_workload",
    "generate",
    "total_accesses",
    "quick_workload",
    "PolicySpec",
    "parse_policy",
    "read_trace",
    "write_trace",
    "trace_info",
]


__getattr__, __dir__ = lazy_names(__name__, _SOURCES, __all__)

if TYPE_CHECKING:  # the names for type checkers and IDEs
    from numasim.workload.access import AccessChunk, concat_chunks, rechunk  # noqa: F401
    from numasim.workload.generate import generate, total_accesses  # noqa: F401
    from numasim.workload.policy_text import PolicySpec, parse_policy  # noqa: F401
    from numasim.workload.quick import quick_workload  # noqa: F401
    from numasim.workload.spec import Workload, load_workload, loads_workload  # noqa: F401
    from numasim.workload.trace import read_trace, trace_info, write_trace  # noqa: F401
