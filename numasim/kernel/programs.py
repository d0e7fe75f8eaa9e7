"""Virtual programs that run inside a simulated task: what ``numactl ... -- PROGRAM`` executes.

Each program uses the simulated kernel the way the real one uses Linux (mmap, first touch, mbind,
set_mempolicy, children that inherit the policy) and prints what the real one prints:

* ``stress -m N --vm-bytes SIZE [--vm-keep] [-t SECS]`` -- stress 1.0.4: one "dispatching hogs" line, N vm
  workers (child processes) that each ``malloc`` SIZE (glibc: an mmap of SIZE + one page) and write one byte
  per page. Without ``-t`` the workers stay alive (``--vm-keep`` keeps the memory), so ``numastat -p`` can look
  at them; with ``-t`` they exit and stress reports a successful run. An OOM-killed worker gives stress's
  ``got signal 9`` report and exit status 1.
* ``memhog [-H] [-rN] SIZE [POLICY [NODES]]`` -- numactl's memhog: mmap, ``mbind`` with the policy
  (``interleave``, ``membind``, ``preferred``, ``preferred-many``, ``local``, ``default``,
  ``weighted-interleave``), one ``.`` per 10 MiB written.
* ``alloc --pages N [--addr 0x7f...] [--set-mempolicy POL] [--mbind POL] [--touch-cpu C]`` -- a numasim probe:
  POL is ``MODE[:NODES[:FLAGS]]`` (FLAGS ``static``, ``relative``, ``numa_balancing`` joined by ``+``); it
  reports every syscall's return value and errno and where the pages landed.
* ``printcpu`` (numactl's test helper: the cpu it runs on), ``numactl ...`` (nested, same process),
  ``true``, ``ls``, ``sleep``.

Every process starts with a small image like a dynamically linked binary's (text and libc pages, a data
page set, one heap page and three stack pages: 0.25 MB private, as in article 001's ``numastat -p``).
A process killed by the OOM killer makes the shell print ``Killed`` with exit status 137.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from numasim.errors import NumasimError
from numasim.kernel.errno import SyscallResult
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_ADDR,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)
from numasim.kernel.nodestring import NodeStringError, ParseContext, parse_nodestring
from numasim.units import PAGE_SIZE_BYTES, parse_size

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.numactl import ProgramOutcome
    from numasim.kernel.task import Task

__all__ = ["PROGRAMS", "ProgramRun", "run_program", "parse_policy_spec", "PolicySpec", "load_image"]

_MEMHOG_UNIT = 10 * 1024 * 1024
_MEMHOG_POLICIES = {
    "preferred-many": (MPOL_PREFERRED_MANY, False),
    "local": (MPOL_LOCAL, True),
    "interleave": (MPOL_INTERLEAVE, False),
    "membind": (MPOL_BIND, False),
    "preferred": (MPOL_PREFERRED, False),
    "default": (MPOL_DEFAULT, True),
    "weighted-interleave": (MPOL_WEIGHTED_INTERLEAVE, False),
}
_MODES = {
    "default": MPOL_DEFAULT,
    "local": MPOL_LOCAL,
    "preferred": MPOL_PREFERRED,
    "preferred_many": MPOL_PREFERRED_MANY,
    "bind": MPOL_BIND,
    "interleave": MPOL_INTERLEAVE,
    "weighted_interleave": MPOL_WEIGHTED_INTERLEAVE,
}
_FLAGS = {
    "static": MPOL_F_STATIC_NODES,
    "relative": MPOL_F_RELATIVE_NODES,
    "numa_balancing": MPOL_F_NUMA_BALANCING,
}


@dataclass
class ProgramRun:
    """What a program did: its output, exit status, the processes it created and its policy syscalls."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    pids: list[int] = field(default_factory=list)
    """Processes whose memory the program is about (stress: its workers), still alive unless they exited."""
    syscalls: list[tuple[str, str, SyscallResult]] = field(default_factory=list)
    running: bool = False
    """The program is still running when the simulation looks (stress without ``-t``)."""
    pages_per_node: dict[int, int] = field(default_factory=dict)
    """Present pages per node of :attr:`pids`, taken when the program finished (before it exited)."""

    def outcome(self) -> ProgramOutcome:
        from numasim.kernel.numactl import ProgramOutcome

        return ProgramOutcome(self.stdout, self.stderr, self.exit_code)


@dataclass(frozen=True)
class PolicySpec:
    """A parsed ``MODE[:NODES[:FLAGS]]`` policy argument."""

    mode: int
    nodes: frozenset[int]
    flags: int

    @property
    def mode_arg(self) -> int:
        return self.mode | self.flags


def parse_policy_spec(text: str, ctx: ParseContext) -> PolicySpec:
    """Parse ``MODE[:NODES[:FLAGS]]`` (``bind:0-1``, ``interleave:all:static``, ``local``).

    Raises :class:`~numasim.errors.PolicyError` naming the part that is wrong.

    Examples
    --------
    >>> spec = parse_policy_spec("bind:0-1:static+numa_balancing", ParseContext.of({0, 1}, 2))
    >>> spec.mode, sorted(spec.nodes), spec.flags == MPOL_F_STATIC_NODES | MPOL_F_NUMA_BALANCING
    (2, [0, 1], True)
    """
    from numasim.errors import PolicyError

    parts = text.split(":")
    if len(parts) > 3:
        raise PolicyError(f"policy {text!r}: expected MODE[:NODES[:FLAGS]]")
    mode_name = parts[0].strip().lower().replace("-", "_")
    if mode_name not in _MODES:
        raise PolicyError(f"policy {text!r}: unknown mode {parts[0]!r} (expected one of {', '.join(_MODES)})")
    nodes: frozenset[int] = frozenset()
    if len(parts) > 1:
        try:
            nodes = parse_nodestring(parts[1], ctx)
        except NodeStringError as exc:
            raise PolicyError(f"policy {text!r}: nodes {parts[1]!r}: {exc}") from None
    flags = 0
    if len(parts) > 2 and parts[2]:
        for name in parts[2].split("+"):
            if name not in _FLAGS:
                raise PolicyError(
                    f"policy {text!r}: unknown flag {name!r} (expected static, relative, numa_balancing)"
                )
            flags |= _FLAGS[name]
    return PolicySpec(_MODES[mode_name], nodes, flags)


def load_image(kernel: Kernel, task: Task) -> None:
    """Map and touch a small process image (binary text, libc, data, heap, stack): 64 + 1 + 3 pages."""
    image = [
        (8, "file", None, f"/usr/bin/{task.comm}"),
        (40, "file", None, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        (16, "anon", None, None),
        (1, "anon", "heap", None),
    ]
    for pages, kind, tag, path in image:
        vma = kernel.mmap(task, pages * PAGE_SIZE_BYTES, kind=kind, tag=tag, path=path)  # type: ignore[arg-type]
        kernel.touch(task, vma.start, pages * PAGE_SIZE_BYTES)
    stack = kernel.mmap(task, 33 * PAGE_SIZE_BYTES, tag="stack")
    kernel.touch(task, stack.end - 3 * PAGE_SIZE_BYTES, 3 * PAGE_SIZE_BYTES)


def _node_ctx(kernel: Kernel, task: Task) -> ParseContext:
    return ParseContext(frozenset(task.mems_allowed), len(kernel.machine.nodes))


def _fork(kernel: Kernel, parent: Task, comm: str) -> Task:
    child = kernel.spawn(comm, cpus=parent.cpus_allowed, cpu=parent.cpu, cpuset=parent.cpuset, parent=parent)
    child.il_prev, child.il_weight = parent.il_prev, parent.il_weight
    load_image(kernel, child)
    return child


def _killed(run: ProgramRun) -> ProgramRun:
    # what bash prints for a child killed by SIGKILL; $? = 128 + 9
    run.stderr += "Killed\n"
    run.exit_code = 137
    return run


# --- the programs ---------------------------------------------------------------------------------------


def _stress(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun()
    workers = 0
    vm_bytes = 256 * 1024 * 1024
    timeout: str | None = None
    keep = False
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in ("-m", "--vm"):
            workers = int(args[i])
            i += 1
        elif a == "--vm-bytes":
            vm_bytes = parse_size(args[i])
            i += 1
        elif a.startswith("--vm-bytes="):
            vm_bytes = parse_size(a.split("=", 1)[1])
        elif a == "--vm-keep":
            keep = True
        elif a in ("-t", "--timeout"):
            timeout = args[i]
            i += 1
        elif a in ("-q", "--quiet", "-v", "--verbose", "--vm-hang", "--vm-stride"):
            if a in ("--vm-hang", "--vm-stride"):
                i += 1
        else:
            run.stderr += f"stress: FAIL: [{task.pid}] (244) unrecognized option: {a}\n"
            run.exit_code = 1
            return run
    del keep  # one pass of writes places every page; re-dirtying does not move them
    run.stdout += f"stress: info: [{task.pid}] dispatching hogs: 0 cpu, 0 io, {workers} vm, 0 hdd\n"
    for _ in range(workers):
        child = _fork(kernel, task, "stress")
        run.pids.append(child.pid)
        vma = kernel.mmap(child, vm_bytes + PAGE_SIZE_BYTES)
        res = kernel.touch(child, vma.start, vma.end - vma.start)
        if res.oom_killed or not child.alive:
            run.stderr += (
                f"stress: FAIL: [{task.pid}] (415) <-- worker {child.pid} got signal 9\n"
                f"stress: WARN: [{task.pid}] (417) now reaping child worker processes\n"
                f"stress: FAIL: [{task.pid}] (451) failed run completed in 1s\n"
            )
            run.exit_code = 1
            return run
    run.running = timeout is None
    if timeout is not None:
        for pid in run.pids:
            if pid in kernel.tasks:
                kernel.exit(kernel.tasks[pid])
        secs = timeout.rstrip("smhd") or "0"
        run.stdout += f"stress: info: [{task.pid}] successful run completed in {secs}s\n"
    return run


def _memhog(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun(pids=[task.pid])
    usage = (
        "memhog [-fFILE] [-rNUM] [-H] size[kmg] [policy [nodeset]]\n"
        "-f mmap is backed by FILE\n"
        "-rNUM repeat memset NUM times\n"
        "-H disable transparent hugepages\n"
        "Policies: preferred-many local interleave membind preferred default weighted-interleave\n"
    )
    args = list(argv[1:])
    repeat = 1
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt[1:2] == "r":
            repeat = int(opt[2:] or 0)
        elif opt[1:2] in ("H", "f"):
            pass
        else:
            return ProgramRun(stdout=usage, exit_code=1)
    if not args:
        return ProgramRun(stdout=usage, exit_code=1)
    length = _memsize(args[0])
    policy_name = args[1] if len(args) > 1 else None
    nodes_arg = args[2] if len(args) > 2 else None
    mode = MPOL_DEFAULT
    if policy_name is not None:
        entry = _MEMHOG_POLICIES.get(policy_name.lstrip("-"))
        if entry is None or (nodes_arg is None and not entry[1]):
            return ProgramRun(stdout=usage, exit_code=1)
        mode = entry[0]
    nodes: frozenset[int] = frozenset()
    if mode not in (MPOL_DEFAULT, MPOL_LOCAL):
        try:
            nodes = parse_nodestring(nodes_arg or "", _node_ctx(kernel, task))
        except NodeStringError as exc:
            if exc.warning:
                run.stderr += f"libnuma: Warning: {exc.warning}\n"
            run.stdout += f"<{nodes_arg}> is invalid\n"
            run.exit_code = 1
            return run
    if length <= 0:
        run.stderr += "mmap: Invalid argument\n"
        run.exit_code = 1
        return run
    vma = kernel.mmap(task, length)
    res = kernel.mbind(task, vma.start, length, mode, nodes)
    run.syscalls.append(("mbind", f"{length} bytes, mode {mode}, nodes {sorted(nodes)}", res))
    if not res.ok:
        run.stderr += f"mbind: {_strerror(res.errno)}\n"
    got = kernel.get_mempolicy(task, MPOL_F_ADDR, vma.start)
    run.syscalls.append(("get_mempolicy", "MPOL_F_ADDR", got))
    if not got.ok:
        run.stderr += f"get_mempolicy: {_strerror(got.errno)}\n"
    for _ in range(max(repeat, 1) if repeat else 0):
        dots = (length + _MEMHOG_UNIT - 1) // _MEMHOG_UNIT
        fault = kernel.touch(task, vma.start, length)
        if fault.oom_killed or not task.alive:
            run.stdout += "." * max(dots - 1, 0)
            return _killed(run)
        run.stdout += "." * dots + "\n"
    return run


def _memsize(text: str) -> int:
    # numactl util.c memsize(): strtoul base 0, then one optional k/m/g (case-insensitive)
    from numasim.kernel.nodestring import strtoul

    value, end = strtoul(text)
    suffix = text[end : end + 1].upper()
    factor = {"G": 1 << 30, "M": 1 << 20, "K": 1 << 10}.get(suffix, 1)
    return value * factor


def _strerror(errno: str | None) -> str:
    from numasim.kernel.numactl import STRERROR

    return STRERROR.get(errno or "", errno or "Unknown error")


def _alloc(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun(pids=[task.pid])
    pages = 0
    addr: int | None = None
    set_pol: str | None = None
    mbind_pol: str | None = None
    touch_cpu: int | None = None
    args = list(argv[1:])
    i = 0
    try:
        while i < len(args):
            opt = args[i]
            name, eq, inline = opt.partition("=")
            if name not in ("--pages", "--addr", "--set-mempolicy", "--mbind", "--touch-cpu"):
                raise ValueError(f"unknown option {opt!r}")
            if eq:
                value = inline
                i += 1
            else:
                if i + 1 >= len(args):
                    raise ValueError(f"option {name} needs a value")
                value = args[i + 1]
                i += 2
            if name == "--pages":
                pages = int(value, 0)
            elif name == "--addr":
                addr = int(value, 0)
            elif name == "--set-mempolicy":
                set_pol = value
            elif name == "--mbind":
                mbind_pol = value
            else:
                touch_cpu = int(value, 0)
    except ValueError as exc:
        run.stderr = (
            f"alloc: {exc}\n"
            "usage: alloc --pages N [--addr 0x7f...] [--set-mempolicy POL] [--mbind POL] [--touch-cpu C]\n"
            "       POL = MODE[:NODES[:FLAGS]], MODE default|local|preferred|preferred_many|bind|interleave|"
            "weighted_interleave, FLAGS static|relative|numa_balancing joined by '+'\n"
        )
        run.exit_code = 2
        return run
    if pages <= 0:
        run.stderr = "alloc: --pages must be a positive number of pages\n"
        run.exit_code = 2
        return run
    ctx = _node_ctx(kernel, task)
    try:
        set_spec = parse_policy_spec(set_pol, ctx) if set_pol is not None else None
        mbind_spec = parse_policy_spec(mbind_pol, ctx) if mbind_pol is not None else None
    except NumasimError as exc:
        run.stderr = f"alloc: {exc}\n"
        run.exit_code = 2
        return run
    if set_spec is not None:
        res = kernel.set_mempolicy(task, set_spec.mode_arg, set_spec.nodes)
        run.syscalls.append(("set_mempolicy", set_pol or "", res))
        run.stdout += f"set_mempolicy({set_pol}) = {_ret_text(res)}\n"
    length = pages * PAGE_SIZE_BYTES
    try:
        vma = kernel.mmap(task, length, addr=addr)
    except NumasimError as exc:  # MAP_FIXED at a bad address: the kernel says EINVAL
        run.stdout += (
            f"mmap({pages} pages at {addr:#x}) = -1 EINVAL (Invalid argument)\n" if addr is not None else ""
        )
        run.stderr += f"alloc: {exc}\n"
        run.exit_code = 1
        return run
    run.stdout += f"mmap({pages} pages) = {vma.start:#x}\n"
    if mbind_spec is not None:
        res = kernel.mbind(task, vma.start, length, mbind_spec.mode_arg, mbind_spec.nodes)
        run.syscalls.append(("mbind", mbind_pol or "", res))
        run.stdout += f"mbind({mbind_pol}) = {_ret_text(res)}\n"
    if touch_cpu is not None:
        if touch_cpu not in task.cpus_allowed:
            run.stderr += f"alloc: cpu {touch_cpu} is not in the affinity mask {sorted(task.cpus_allowed)}\n"
            run.exit_code = 1
            return run
        kernel.run_on(task, touch_cpu)
    fault = kernel.touch(task, vma.start, length)
    if fault.oom_killed or not task.alive:
        return _killed(run)
    per_node = vma.pages_per_node()
    run.stdout += (
        f"touched {pages} pages from cpu {task.cpu}: "
        + " ".join(f"N{n}={c}" for n, c in sorted(per_node.items()))
        + "\n"
    )
    return run


def _ret_text(res: SyscallResult) -> str:
    return f"{res.ret}" if res.ok else f"{res.ret} {res.errno} ({_strerror(res.errno)})"


def _printcpu(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    return ProgramRun(stdout=f"{task.cpu}\n", pids=[task.pid])


def _true(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    return ProgramRun(pids=[task.pid])


def _numactl(kernel: Kernel, task: Task, argv: Sequence[str], keep_alive: bool = False) -> ProgramRun:
    from numasim.kernel.numactl import KernelProcess, numactl_main

    proc = KernelProcess(kernel, task, keep_alive=keep_alive)
    res = numactl_main(proc, argv[1:], has_preferred_many=kernel.version >= (5, 15))
    run = ProgramRun(res.stdout, res.stderr, res.exit_code, proc.pids or [task.pid], list(res.syscalls))
    run.pages_per_node = dict(proc.pages_per_node)
    run.running = proc.running
    return run


PROGRAMS = {
    "stress": _stress,
    "memhog": _memhog,
    "alloc": _alloc,
    "printcpu": _printcpu,
    "numactl": _numactl,  # called with keep_alive by run_program
    "true": _true,
    "ls": _true,
    "sleep": _true,
}
"""Program name -> implementation ``(kernel, task, argv) -> ProgramRun``."""


def run_program(
    kernel: Kernel, task: Task, argv: Sequence[str], *, keep_alive: bool = False
) -> ProgramRun | None:
    """Exec ``argv`` in ``task`` (the task's policy and affinity stay); ``None`` if there is no such program.

    When the program is done its process exits and its memory is freed, unless it is still running (stress
    without ``-t``) or ``keep_alive`` asks to look at it first (as if it were paused before ``exit``).
    :attr:`ProgramRun.pages_per_node` is taken before the exit either way.
    """
    name = argv[0].rsplit("/", 1)[-1]
    impl = PROGRAMS.get(name)
    if impl is None:  # hook: the virtual measurement tools of numasim.tools (lat_mem_rd, dd, stream, mlc, ...)
        from numasim.tools.programs import find_program

        impl = find_program(name)  # type: ignore[assignment]
    if impl is None:
        return None
    # exec: the old image goes, the new one is faulted in under the policy the task has now
    for vma in list(task.mm.vmas):
        kernel.munmap(task, vma.start, vma.end - vma.start)
    task.comm = name[:15]
    load_image(kernel, task)
    if name == "numactl":  # the nested numactl's own program decides about exiting
        return _numactl(kernel, task, argv, keep_alive)
    run = impl(kernel, task, argv)
    run.pages_per_node = _pages_of(kernel, run.pids)
    if not keep_alive and not run.running:
        for pid in [task.pid, *run.pids]:
            if pid in kernel.tasks:
                kernel.exit(kernel.tasks[pid])
    return run


def _pages_of(kernel: Kernel, pids: Sequence[int]) -> dict[int, int]:
    total: dict[int, int] = {}
    for pid in pids:
        t = kernel.tasks.get(pid)
        if t is not None:
            for nid, count in t.pages_per_node().items():
                total[int(nid)] = total.get(int(nid), 0) + int(count)
    return dict(sorted(total.items()))
