"""User space: the programs a simulated machine runs, calling the kernel's syscalls and the engine.

The kernel (:mod:`numasim.kernel`) never imports this layer. Here:

* :mod:`~numasim.tools.numactl` and :mod:`~numasim.tools.numastat` -- numactl and numastat, option for option;
* :mod:`~numasim.tools.programs` -- the system programs they exec (stress, memhog, alloc, numademo,
  migratepages, printcpu, ...) and the one program table (:func:`find_program`, :func:`register_program`);
* virtual copies of the measurement tools whose real output numasim holds: they run a workload through the
  engine and print exactly what the real tool prints, so the same parsers (:mod:`numasim.calibrate.parsers`)
  read a real run and a simulated one: :mod:`~numasim.tools.lat_mem_rd` (lmbench ``lat_mem_rd``),
  :mod:`~numasim.tools.dd` (GNU ``dd`` between /dev/zero, /dev/null and /dev/shm), :mod:`~numasim.tools.stream`
  (STREAM 5.10), :mod:`~numasim.tools.mlc` (Intel mlc; its load threads' pace: :mod:`~numasim.tools.mlc_load`),
  :mod:`~numasim.tools.perftest` (``ib_send_lat`` / ``ib_send_bw``), :mod:`~numasim.tools.stride_table` (source
  article 003's stride x working-set test);
* numactl's own test programs (:mod:`~numasim.tools.numactl_tests`, :mod:`~numasim.tools.randmap`) and
  :mod:`~numasim.tools.migspeed`.

:mod:`~numasim.tools.context` builds the process a measurement tool runs as (kernel, task, calibration);
:mod:`~numasim.tools.tool_programs` makes the tools programs of the virtual ``numactl``.
"""

from typing import TYPE_CHECKING

from numasim._lazy import lazy_names

_SOURCES = {
    "ToolContext": "numasim.tools.context",
    "tool_context": "numasim.tools.context",
    "TOOL_PROGRAMS": "numasim.tools.tool_programs",
    "find_program": "numasim.tools.programs",
    "register_program": "numasim.tools.programs",
    "run_numactl": "numasim.tools.numactl",
    "run_numastat": "numasim.tools.numastat",
}
"""Imported on first use: a kernel-only program (numactl's test programs, migspeed) loads its own module without
the tools' engine and timing model (issue 11: kernel-only commands start fast)."""

__all__ = [
    "ToolContext",
    "tool_context",
    "TOOL_PROGRAMS",
    "find_program",
    "register_program",
    "run_numactl",
    "run_numastat",
]

__getattr__, __dir__ = lazy_names(__name__, _SOURCES, __all__)

if TYPE_CHECKING:  # the names for type checkers and IDEs
    from numasim.tools.context import ToolContext, tool_context
    from numasim.tools.numactl import run_numactl
    from numasim.tools.numastat import run_numastat
    from numasim.tools.programs import find_program, register_program
    from numasim.tools.tool_programs import TOOL_PROGRAMS
