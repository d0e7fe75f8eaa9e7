"""Workloads and traces: what the simulated program does, as a stream of :class:`AccessChunk`.

* :mod:`numasim.workload.spec` -- the workload file (threads, allocations with policies, access phases);
* :mod:`numasim.workload.generate` -- workload + seed -> chunks (vectorised, deterministic);
* :mod:`numasim.workload.trace` -- traces: chunked ``.npz``, CSV, Parquet, ``perf script``, lackey;
* :mod:`numasim.workload.placement` and :mod:`numasim.workload.run` -- the glue to the kernel and the engine
  (``run_workload``, ``run_trace``, ``compare_policies``; imported on demand, they pull in those layers).
"""

from numasim.workload.access import AccessChunk, concat_chunks, rechunk
from numasim.workload.generate import generate, total_accesses
from numasim.workload.policy_text import PolicySpec, parse_policy
from numasim.workload.quick import quick_workload
from numasim.workload.spec import Workload, load_workload, loads_workload
from numasim.workload.trace import read_trace, trace_info, write_trace

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
