"""The virtual tools as programs ``numasim numactl ... -- PROGRAM ARGS`` can run (the kernel's program table).

Each entry has the signature of :data:`numasim.kernel.programs.PROGRAMS` (``(kernel, task, argv) ->
ProgramRun``): it runs in the numactl's task (its policy, affinity and cpu), times with the calibration bound to
the kernel (:func:`numasim.tools.context.bind_calibration`) or the machine's shipped one, and writes what the
real tool writes, to the stream the real tool writes it to (lmbench and dd: stderr; the others: stdout).
Errors the real tool would print are printed its way; numasim's own problems (no calibration, out of memory)
are one ``PROGRAM: numasim: ...`` line on stderr with exit status 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from numasim.errors import NumasimError

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.programs import ProgramRun
    from numasim.kernel.task import Task
    from numasim.tools.context import ToolContext

__all__ = ["TOOL_PROGRAMS", "find_program"]


def _run(
    name: str, body: Callable[[ToolContext, Sequence[str]], tuple[str, str, int]]
) -> Callable[[Kernel, Task, Sequence[str]], ProgramRun]:
    def program(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
        from numasim.kernel.programs import ProgramRun
        from numasim.tools.context import ToolContext, kernel_calibration

        try:
            ctx = ToolContext(kernel, task, kernel_calibration(kernel))
            out, err, code = body(ctx, list(argv[1:]))
        except NumasimError as exc:
            return ProgramRun(stderr=f"{name}: numasim: {exc}\n", exit_code=1, pids=[task.pid])
        return ProgramRun(stdout=out, stderr=err, exit_code=code, pids=[task.pid])

    program.__name__ = f"_{name}"
    return program


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


TOOL_PROGRAMS: dict[str, Callable[[Kernel, Task, Sequence[str]], ProgramRun]] = {
    "lat_mem_rd": _run("lat_mem_rd", _lat_mem_rd),
    "dd": _run("dd", _dd),
    "stream": _run("stream", _stream),
    "mlc": _run("mlc", _mlc),
    "ib_send_lat": _run("ib_send_lat", _perftest("ib_send_lat")),
    "ib_send_bw": _run("ib_send_bw", _perftest("ib_send_bw")),
    "stride_lat": _run("stride_lat", _stride),
    "main": _run("main", _stride),  # article 003 runs its test as ./main
}
"""Program name -> implementation with the kernel program table's signature."""


def _numactl_programs() -> dict[str, Callable[[Kernel, Task, Sequence[str]], ProgramRun]]:
    # numactl's own test programs and migspeed: kernel-only, no calibration (numasim.tools.numactl_tests)
    from numasim.tools.migspeed import migspeed
    from numasim.tools.numactl_tests import NUMACTL_TEST_PROGRAMS
    from numasim.tools.randmap import randmap

    return {**NUMACTL_TEST_PROGRAMS, "migspeed": migspeed, "randmap": randmap}


TOOL_PROGRAMS.update(_numactl_programs())


def find_program(name: str) -> Callable[[Kernel, Task, Sequence[str]], ProgramRun] | None:
    """The virtual tool called ``name`` (a path's last component), or None."""
    return TOOL_PROGRAMS.get(name.rsplit("/", 1)[-1])
