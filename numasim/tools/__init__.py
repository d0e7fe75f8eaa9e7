"""Virtual copies of the measurement tools whose real output numasim holds: they run a workload through the
engine on a simulated machine and print exactly what the real tool prints, so the same parsers
(:mod:`numasim.calibrate.parsers`) read a real run and a simulated one.

One module per tool, each with a function ``tool(ctx, ...)`` returning a typed result and a ``format_*``
function printing the real layout:

* :mod:`~numasim.tools.lat_mem_rd` -- lmbench ``lat_mem_rd``;
* :mod:`~numasim.tools.dd` -- GNU ``dd`` between /dev/zero, /dev/null and /dev/shm (tmpfs);
* :mod:`~numasim.tools.stream` -- STREAM 5.10;
* :mod:`~numasim.tools.mlc` -- Intel mlc ``--latency_matrix`` ... ``--loaded_latency`` (its load threads' pace
  and the core clock their delay counts: :mod:`~numasim.tools.mlc_load`);
* :mod:`~numasim.tools.perftest` -- ``ib_send_lat`` / ``ib_send_bw``;
* :mod:`~numasim.tools.stride_table` -- the stride x working-set test of source article 003.

:mod:`~numasim.tools.context` builds the process a tool runs as (kernel, task, calibration);
:mod:`~numasim.tools.programs` makes them programs of the virtual ``numactl``.
"""

from typing import TYPE_CHECKING

from numasim._lazy import lazy_names

_SOURCES = {
    "ToolContext": "numasim.tools.context",
    "tool_context": "numasim.tools.context",
    "bind_calibration": "numasim.tools.context",
    "kernel_calibration": "numasim.tools.context",
    "TOOL_PROGRAMS": "numasim.tools.programs",
    "find_program": "numasim.tools.programs",
}
"""Imported on first use: a kernel-only program (numactl's test programs, migspeed) loads its own module without
the tools' engine and timing model (issue 11: kernel-only commands start fast)."""

__all__ = [
    "ToolContext",
    "tool_context",
    "bind_calibration",
    "kernel_calibration",
    "TOOL_PROGRAMS",
    "find_program",
]

__getattr__, __dir__ = lazy_names(__name__, _SOURCES, __all__)

if TYPE_CHECKING:  # the names for type checkers and IDEs
    from numasim.tools.context import ToolContext, bind_calibration, kernel_calibration, tool_context
    from numasim.tools.programs import TOOL_PROGRAMS, find_program
