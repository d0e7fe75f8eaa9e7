"""The virtual measurement tools and numactl's test programs as programs ``numactl ... -- PROGRAM ARGS`` can run.

Each entry has the signature of :data:`numasim.tools.programs.PROGRAMS` (``(kernel, task, argv) ->
ProgramRun``): it runs in the numactl's task (its policy, affinity and cpu). A timed tool is called with the
calibration the numactl process was started with (``run_numactl(..., calibration=)``, what ``numasim numactl
--calibration F|--nominal|--catalog`` does), else the one the machine names, and writes what the
real tool writes, to the stream the real tool writes it to (lmbench and dd: stderr; the others: stdout).
Errors the real tool would print are printed its way; numasim's own problems (no calibration, out of memory)
are one ``PROGRAM: numasim: ...`` line on stderr with exit status 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from numasim.errors import CalibrationError, NumasimError

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task
    from numasim.timing.model import Calibration
    from numasim.tools.context import ToolContext
    from numasim.tools.programs import ProgramRun

__all__ = ["TOOL_PROGRAMS"]


class _TimedProgram:
    """A measurement tool as a program: its task, the calibration it is run with (else the machine's), its output."""

    timed = True

    def __init__(self, name: str, body: Callable[[ToolContext, Sequence[str]], tuple[str, str, int]]) -> None:
        self.name = name
        self.body = body
        self.__doc__ = body.__doc__

    def __call__(
        self, kernel: Kernel, task: Task, argv: Sequence[str], /, calibration: Calibration | None = None
    ) -> ProgramRun:
        from numasim.timing.resolve import resolve_calibration
        from numasim.tools.context import ToolContext
        from numasim.tools.programs import ProgramRun

        try:
            if calibration is None:
                calibration = resolve_calibration(kernel.machine)
            elif calibration.machine != kernel.machine.name:
                raise CalibrationError(f"calibration {calibration.id} is for machine {calibration.machine!r}, "
                                       f"not {kernel.machine.name!r}")  # fmt: skip
            out, err, code = self.body(ToolContext(kernel, task, calibration), list(argv[1:]))
        except NumasimError as exc:
            return ProgramRun(stderr=f"{self.name}: numasim: {exc}\n", exit_code=1, pids=[task.pid])
        return ProgramRun(stdout=out, stderr=err, exit_code=code, pids=[task.pid],
                          timed_by=f"calibration {calibration.id} ({calibration.provenance.method})")


def _run(name: str, body: Callable[[ToolContext, Sequence[str]], tuple[str, str, int]]) -> _TimedProgram:
    return _TimedProgram(name, body)


def _lat_mem_rd(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
    from numasim.tools.lat_mem_rd import format_lat_mem_rd, lat_mem_rd

    usage = "Usage: lat_mem_rd [-P <parallelism>] [-W <warmup>] [-N <repetitions>] [-t] len [stride...]\n"
    rest = list(args)
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt in ("-P", "-W", "-N") and rest:
            rest.pop(0)  # parallelism, warmup and repetitions change nothing in a deterministic chase of one
        elif opt == "-t":
            return "", "lat_mem_rd: numasim: -t (a randomised chain) is not simulated; use mlc --idle_latency\n", 1
        else:
            return "", usage, 1
    if not rest:
        return "", usage, 1
    digits = ""
    for ch in rest[0]:  # atoi: the leading digits, in megabytes
        if not ch.isdigit():
            break
        digits += ch
    if not digits or not all(s.isdigit() for s in rest[1:]):
        return "", usage, 1
    strides = [int(s) for s in rest[1:]] or [64]
    res = lat_mem_rd(ctx, int(digits) * 1024 * 1024, strides)
    return "", format_lat_mem_rd(res), 0


def _dd(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
    from numasim.tools.dd import DdUsageError, dd, format_dd

    try:
        res = dd(ctx, args)
    except DdUsageError as exc:
        return "", f"{exc}\n", 1
    return "", format_dd(res), 0


def _stream(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
    from numasim.tools.stream import format_stream, stream

    # The real binary reads OMP_NUM_THREADS; here it is the first argument (default: every allowed cpu).
    threads = len(ctx.task.cpus_allowed)
    if args:
        text = args[0].removeprefix("OMP_NUM_THREADS=")
        if not text.isdigit() or int(text) < 1:
            return "", f"stream: numasim: thread count {args[0]!r} is not a positive number\n", 1
        threads = int(text)
    return format_stream(stream(ctx, threads)), "", 0


def _mlc(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
    from numasim.tools.mlc import MlcUsageError, format_mlc, mlc

    try:
        res = mlc(ctx, args)
    except MlcUsageError as exc:
        return "", f"{exc}\n", 1
    return format_mlc(res), "", 0


def _perftest(test: str) -> Callable[[ToolContext, Sequence[str]], tuple[str, str, int]]:
    def body(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
        from numasim.tools.perftest import PerftestUsageError, format_perftest, ib_send

        try:
            res = ib_send(ctx, test, args)
        except PerftestUsageError as exc:
            return "", f"{exc}\n", 1
        return format_perftest(res), "", 0

    return body


def _stride(ctx: ToolContext, args: Sequence[str]) -> tuple[str, str, int]:
    from numasim.tools.stride_table import format_stride_table, stride_table

    return format_stride_table(stride_table(ctx)), "", 0


TOOL_PROGRAMS: dict[str, Callable[..., ProgramRun]] = {
    "lat_mem_rd": _run("lat_mem_rd", _lat_mem_rd),
    "dd": _run("dd", _dd),
    "stream": _run("stream", _stream),
    "mlc": _run("mlc", _mlc),
    "ib_send_lat": _run("ib_send_lat", _perftest("ib_send_lat")),
    "ib_send_bw": _run("ib_send_bw", _perftest("ib_send_bw")),
    "stride_lat": _run("stride_lat", _stride),
    "main": _run("main", _stride),  # article 003 runs its test as ./main
}
"""Program name -> implementation with the program table's signature (the timed ones take ``calibration=``)."""


def _numactl_programs() -> dict[str, Callable[[Kernel, Task, Sequence[str]], ProgramRun]]:
    # numactl's own test programs and migspeed: kernel-only, no calibration (numasim.tools.numactl_tests)
    from numasim.tools.migspeed import migspeed
    from numasim.tools.numactl_tests import NUMACTL_TEST_PROGRAMS
    from numasim.tools.randmap import randmap

    return {**NUMACTL_TEST_PROGRAMS, "migspeed": migspeed, "randmap": randmap}


TOOL_PROGRAMS.update(_numactl_programs())

