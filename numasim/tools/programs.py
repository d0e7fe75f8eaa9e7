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
* numactl's test programs (``make check``, spec 8.7): ``nodemap`` ("i: " and " cpu" per cpu for i in
  0..numa_num_configured_nodes()-1), ``move_pages [N]`` (N pages, default 32, page 2 left untouched: queries
  the nodes, moves page i to the i-th memory node round robin and prints both status lists; exit 77 with fewer
  than 2 memory nodes) and ``numademo [-c] [-e] [-f] [-S] [-t] SIZE [TESTS]`` (every memory test under each
  policy the real one tries, one line each; ``-t`` runs only every 8th node and 32nd mask and switches itself
  off up to 3 nodes, ``-e`` exits with status 1 at the first failing libnuma call). numademo's bandwidths are
  not timed: they print as ``n/a`` in the real layout.

Every process starts with a small image like a dynamically linked binary's (text and libc pages, a data
page set, one heap page and three stack pages: 0.25 MB private, as in article 001's ``numastat -p``).
A process killed by the OOM killer makes the shell print ``Killed`` with exit status 137.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from numasim.errors import NumasimError
from numasim.kernel.errno import SyscallResult
from numasim.kernel.kernel import MmapError
from numasim.kernel.mempolicy import (
    MAX_NUMNODES,
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_ADDR,
    MPOL_F_NODE,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
)
from numasim.kernel.nodestring import NodeStringError, ParseContext, parse_nodestring, strtoul
from numasim.kernel.policy_names import FLAGS, MODES, mode_name, split_policy
from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task
    from numasim.timing.model import Calibration
    from numasim.tools.numactl import ProgramOutcome

__all__ = ["PROGRAMS", "Program", "ProgramRun", "run_program", "find_program", "register_program", "unregister_program",
           "program_names", "parse_policy_spec", "ProgramPolicy", "load_image"]

_MEMHOG_UNIT = 10 * 1024 * 1024
_MEMHOG_MAX_REPEAT = 1000
_MEMHOG_POLICIES = {
    # memhog's own option names (numactl's util.c policies[]), so "bind" stays a usage error as in memhog; the
    # MPOL values and the canonical names come from the one table, numasim.kernel.policy_names.
    name: (MODES[canonical], canonical in ("local", "default"))
    for name in ("preferred-many", "local", "interleave", "membind", "preferred", "default", "weighted-interleave")
    if (canonical := mode_name(name)) is not None
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
    duration_s: float = 0.0
    """How long the program runs once started, in simulated seconds (memhog: its page faults at the kernel's
    ``fault_pages_per_s``; ``sleep N``; ``stress -t N``). On a persistent machine the program's process lives
    that long, holding its memory, while the shell goes on (``memhog 1g &``)."""
    pages_per_node: dict[int, int] = field(default_factory=dict)
    """Present pages per node of :attr:`pids`, taken when the program finished (before it exited)."""
    timed_by: str = ""
    """A measurement tool's timing: the calibration its numbers rest on (``"calibration ID (method)"``)."""

    def outcome(self) -> ProgramOutcome:
        from numasim.tools.numactl import ProgramOutcome

        return ProgramOutcome(self.stdout, self.stderr, self.exit_code)


@dataclass(frozen=True)
class ProgramPolicy:
    """A program's ``MODE[:NODES[:FLAGS]]`` argument resolved for the syscall: the ``MPOL_*`` mode, the nodes as
    libnuma parses them on this machine, the flag bits. (A workload file's policy string, checked for syntax
    only, is :class:`numasim.workload.PolicySpec`; both are split by :func:`numasim.kernel.policy_names.split_policy`.)"""

    mode: int
    nodes: frozenset[int]
    flags: int
    maxnode: int | None = None
    """The ``maxnode`` a program passes with a raw ``mask=``: one more than the mask's bits (libnuma's
    convention), never less than the default; ``None`` for a node list (large enough for every node)."""

    @property
    def mode_arg(self) -> int:
        return self.mode | self.flags


def parse_policy_spec(text: str, ctx: ParseContext) -> ProgramPolicy:
    """Parse ``MODE[:NODES[:FLAGS]]`` (``bind:0-1``, ``interleave:all:static``, ``local``).

    ``NODES`` is a node string as libnuma parses it (``numa_parse_nodestring``: only nodes that exist and are
    allowed), or ``mask=BITS``: the raw nodemask a program hands to ``set_mempolicy(2)`` / ``mbind(2)``, in hex
    (``0x800001``), binary (``0b101``) or decimal, bit *n* for node *n*, not checked here. The kernel then does
    what it does with such a mask (``get_nodes``, ``mpol_set_nodemask``): bits of nodes that are absent or not
    allowed are dropped, and an effective mask left empty is ``EINVAL``.

    Raises :class:`~numasim.errors.PolicyError` naming the part that is wrong.

    Examples
    --------
    >>> from numasim.kernel.mempolicy import MPOL_F_NUMA_BALANCING, MPOL_F_STATIC_NODES
    >>> spec = parse_policy_spec("bind:0-1:static+numa_balancing", ParseContext.of({0, 1}, 2))
    >>> spec.mode, sorted(spec.nodes), spec.flags == MPOL_F_STATIC_NODES | MPOL_F_NUMA_BALANCING
    (2, [0, 1], True)
    >>> spec = parse_policy_spec("interleave:mask=0x800001", ParseContext.of({0, 1}, 2))
    >>> sorted(spec.nodes), spec.maxnode
    ([0, 23], 1025)
    """
    from numasim.errors import PolicyError

    mode, nodes_text, flag_names = split_policy(text)
    nodes: frozenset[int] = frozenset()
    maxnode: int | None = None
    if nodes_text is not None and nodes_text.strip().lower().startswith("mask="):
        nodes, maxnode = _raw_mask(text, nodes_text.strip()[5:])
    elif nodes_text is not None:
        try:
            nodes = parse_nodestring(nodes_text, ctx)
        except NodeStringError as exc:
            raise PolicyError(f"policy {text!r}: nodes {nodes_text!r}: {exc}") from None
    flags = 0
    for name in flag_names:
        flags |= FLAGS[name]
    return ProgramPolicy(MODES[mode], nodes, flags, maxnode)


_MASK_MAX_BITS = PAGE_SIZE_BYTES * 8
"""The widest user nodemask the kernel reads (``get_nodes``: more than ``PAGE_SIZE * 8`` bits is EINVAL)."""


def _raw_mask(text: str, digits: str) -> tuple[frozenset[int], int]:
    from numasim.errors import PolicyError

    try:
        # a wider literal than the kernel could ever read is refused before int() sees it
        if len(digits) > _MASK_MAX_BITS // 4 + 2:
            raise ValueError("wider than the kernel reads")
        value = int(digits.replace("_", ""), 0)
    except ValueError:
        raise PolicyError(
            f"policy {text!r}: mask {digits!r}: expected a number such as 0x800001 (bit n = node n, at most "
            f"{_MASK_MAX_BITS} bits)"
        ) from None
    if value < 0:
        raise PolicyError(f"policy {text!r}: mask {digits!r}: a nodemask has no sign")
    bits = frozenset(b for b in range(value.bit_length()) if value >> b & 1)
    # libnuma passes maxnode = bits + 1; the kernel reads maxnode - 1 bits, so every bit set here is read
    return bits, max(MAX_NUMNODES + 1, value.bit_length() + 1)


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


def _sscanf_lli(text: str) -> int | None:
    """C ``sscanf(text, "%lli", &v)``: the leading integer (base 0: 0x hex, 0 octal), saturated to long long;
    None when there is none."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        return None
    digits = m.group(2)
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8 if digits.startswith("0") else 10)
    value = -value if m.group(1) == "-" else value
    return max(min(value, (1 << 63) - 1), -(1 << 63))


_STRESS_BYTE_SHIFT = {"b": 0, "k": 10, "m": 20, "g": 30, "t": 40}
_STRESS_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}


def _stress_number(text: str, factors: dict[str, int], shift: bool) -> tuple[int, int | str]:
    """stress 1.0.4's ``atoll_b`` (``shift``: a b/k/m/g suffix is a shift) or ``atoll_s`` (s/m/h/d/y multiply):
    ``(value, 0)``, or ``(line, message)`` for the error it prints before exiting 1. numasim also takes a
    ``t`` suffix for bytes (terabytes), so a huge ``--vm-bytes`` can show stress's malloc failure."""
    if not text:
        return 622 if shift else 676, "invalid string"
    suffix = text[-1].lower()
    if suffix in factors:
        factor = factors[suffix]
    elif text[-1].isdigit():
        factor = 0 if shift else 1
    else:
        return 647 if shift else 705, f"unrecognized suffix: {text[-1]}"
    value = _sscanf_lli(text)
    if value is None:
        return 654 if shift else 712, f"invalid number: {text}"
    return (value << factor) if shift else value * factor, 0


def _stress(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun()
    workers = 0
    vm_bytes = 256 * 1024 * 1024
    timeout_s: int | None = None
    keep = False
    args = list(argv[1:])

    def fail(line: int, message: str) -> ProgramRun:
        # stress's err(): "stress: FAIL: [pid] (source line) message", then exit(1)
        run.stderr += f"stress: FAIL: [{task.pid}] ({line}) {message}\n"
        run.exit_code = 1
        return run

    # (option names, name in messages, atoll_b or atoll_s, line and text of the range error, smallest valid)
    numeric = {
        ("-m", "--vm"): ("--vm", True, 184, "invalid number of vm hogs: {}", 1),
        ("--vm-bytes",): ("--vm-bytes", True, 194, "invalid vm byte value: {}", 1),
        ("-t", "--timeout"): ("--timeout", False, 154, "invalid timeout value: {}s", 1),
        ("--vm-stride",): ("--vm-stride", True, 204, "invalid stride value: {}", 1),
        ("--vm-hang",): ("--vm-hang", True, 214, "invalid value: {}", 0),
    }
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a.startswith("--vm-bytes="):  # numasim's extension: stress itself takes only "--vm-bytes N"
            args[i - 1 : i] = ["--vm-bytes", a.split("=", 1)[1]]
            a = "--vm-bytes"
        spec = next((v for k, v in numeric.items() if a in k), None)
        if spec is not None:
            name, shift, line, range_text, smallest = spec
            # assert_arg(): the value is missing, or is another option (a '-' not followed by a digit)
            if i == len(args) or (args[i][:1] == "-" and not args[i][1:2].isdigit()):
                return fail(62, f"missing argument to option '{name}'")
            value, problem = _stress_number(args[i], _STRESS_BYTE_SHIFT if shift else _STRESS_SECONDS, shift)
            i += 1
            if isinstance(problem, str):
                return fail(value, problem)
            if value < smallest:
                return fail(line, range_text.format(value))
            if name == "--vm":
                workers = value
            elif name == "--vm-bytes":
                vm_bytes = value
            elif name == "--timeout":
                timeout_s = value
        elif a == "--vm-keep":
            keep = True
        elif a in ("-q", "--quiet", "-v", "--verbose"):
            pass
        else:
            return fail(244, f"unrecognized option: {a}")
    del keep  # one pass of writes places every page; re-dirtying does not move them
    run.stdout += f"stress: info: [{task.pid}] dispatching hogs: 0 cpu, 0 io, {workers} vm, 0 hdd\n"
    for _ in range(workers):
        child = _fork(kernel, task, "stress")
        run.pids.append(child.pid)
        try:
            vma = kernel.mmap(child, vm_bytes + PAGE_SIZE_BYTES)
        except MmapError:
            # stress's hogvm: malloc fails (overcommit heuristic), the worker returns 1, the parent reaps.
            run.stderr += (
                f"stress: FAIL: [{child.pid}] (494) hogvm malloc failed: Cannot allocate memory\n"
                f"stress: FAIL: [{task.pid}] (394) <-- worker {child.pid} returned error 1\n"
                f"stress: WARN: [{task.pid}] (396) now reaping child worker processes\n"
                f"stress: FAIL: [{task.pid}] (451) failed run completed in 0s\n"
            )
            kernel.exit(child)
            run.exit_code = 1
            return run
        res = kernel.touch(child, vma.start, vma.end - vma.start)
        if res.oom_killed or not child.alive:
            run.stderr += (
                f"stress: FAIL: [{task.pid}] (415) <-- worker {child.pid} got signal 9\n"
                f"stress: WARN: [{task.pid}] (417) now reaping child worker processes\n"
                f"stress: FAIL: [{task.pid}] (451) failed run completed in 1s\n"
            )
            run.exit_code = 1
            return run
    run.running = timeout_s is None
    if timeout_s is not None:  # the workers live out the timeout, then exit with stress (run_program)
        run.duration_s = float(timeout_s)
        run.stdout += f"stress: info: [{task.pid}] successful run completed in {timeout_s}s\n"
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
    disable_thp = False
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt[1:2] == "r":
            repeat = _atoi(opt[2:])  # atoi: "-rx" repeats 0 times, as the real memhog does
        elif opt[1:2] == "H":
            disable_thp = True  # madvise(map, length, MADV_NOHUGEPAGE)
        elif opt[1:2] == "f":
            pass
        else:
            return ProgramRun(stdout=usage, exit_code=1)
    if not args:
        return ProgramRun(stdout=usage, exit_code=1)
    if repeat > _MEMHOG_MAX_REPEAT:
        return ProgramRun(
            stderr=f"memhog: numasim: -r{repeat}: at most {_MEMHOG_MAX_REPEAT} passes are simulated "
            "(every pass after the first writes the same pages and changes nothing)\n",
            exit_code=1, pids=[task.pid],
        )
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
    try:
        vma = kernel.mmap(task, length)
    except MmapError:
        run.stderr += "mmap: Cannot allocate memory\n"  # memhog's err("mmap"): perror, exit 1
        run.exit_code = 1
        return run
    if disable_thp:
        run.syscalls.append(("madvise", "MADV_NOHUGEPAGE", kernel.madvise_hugepage(task, vma.start, length, False)))
    res = kernel.mbind(task, vma.start, length, mode, nodes)
    run.syscalls.append(("mbind", f"{length} bytes, mode {mode}, nodes {sorted(nodes)}", res))
    if not res.ok:
        run.stderr += f"mbind: {_strerror(res.errno)}\n"
    got = kernel.get_mempolicy(task, MPOL_F_ADDR, vma.start)
    run.syscalls.append(("get_mempolicy", "MPOL_F_ADDR", got))
    if not got.ok:
        run.stderr += f"get_mempolicy: {_strerror(got.errno)}\n"
    for _ in range(max(repeat, 0)):  # for (i = 0; i < repeat; i++): none for 0 or a negative count
        dots = (length + _MEMHOG_UNIT - 1) // _MEMHOG_UNIT
        fault = kernel.touch(task, vma.start, length)
        if fault.oom_killed or not task.alive:
            run.stdout += "." * max(dots - 1, 0)
            return _killed(run)
        run.stdout += "." * dots + "\n"
    if repeat > 0:  # the first pass faults every page in; later passes rewrite present pages (not timed)
        run.duration_s = (length // PAGE_SIZE_BYTES) / kernel.config.fault_pages_per_s
    return run


def _atoi(text: str) -> int:
    """C ``atoi``: the leading decimal integer (0 when there is none), wrapped to a 32-bit int."""
    m = re.match(r"\s*([+-]?[0-9]+)", text)
    value = int(m.group(1)) if m else 0
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _memsize(text: str) -> int:
    # numactl util.c memsize(): strtoul base 0, then one optional k/m/g (case-insensitive)
    from numasim.kernel.nodestring import strtoul

    value, end = strtoul(text)
    suffix = text[end : end + 1].upper()
    factor = {"G": 1 << 30, "M": 1 << 20, "K": 1 << 10}.get(suffix, 1)
    return value * factor


def _strerror(errno: str | None) -> str:
    from numasim.tools.numactl import STRERROR

    return STRERROR.get(errno or "", errno or "Unknown error")


def _alloc(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun(pids=[task.pid])
    pages = 0
    addr: int | None = None
    set_pol: str | None = None
    mbind_pol: str | None = None
    touch_cpu: int | None = None
    hugetlb = False
    advice: str | None = None
    args = list(argv[1:])
    i = 0
    try:
        while i < len(args):
            opt = args[i]
            if opt == "--hugetlb":  # MAP_HUGETLB: 2 MiB pages from the hugetlb pool (vm.nr_hugepages)
                hugetlb = True
                i += 1
                continue
            name, eq, inline = opt.partition("=")
            if name not in ("--pages", "--addr", "--set-mempolicy", "--mbind", "--touch-cpu", "--madvise"):
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
                pages = _option_int(name, value, "a number of pages")
            elif name == "--addr":
                addr = _option_int(name, value, "an address (0x7f..., or decimal)")
            elif name == "--set-mempolicy":
                set_pol = value
            elif name == "--mbind":
                mbind_pol = value
            elif name == "--madvise":
                if value not in ("hugepage", "nohugepage"):
                    raise ValueError(f"--madvise {value!r}: expected hugepage or nohugepage")
                advice = value
            else:
                touch_cpu = _option_int(name, value, "a cpu number")
    except ValueError as exc:
        run.stderr = (
            f"alloc: {exc}\n"
            "usage: alloc --pages N [--addr 0x7f...] [--set-mempolicy POL] [--mbind POL] [--touch-cpu C]\n"
            "             [--hugetlb] [--madvise hugepage|nohugepage]\n"
            "       POL = MODE[:NODES[:FLAGS]], MODE default|local|preferred|preferred_many|bind|interleave|"
            "weighted_interleave, FLAGS static|relative|numa_balancing joined by '+'\n"
            "       NODES = a node list as numactl takes it, or mask=0x... : the raw nodemask the syscall gets\n"
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
        res = kernel.set_mempolicy(task, set_spec.mode_arg, set_spec.nodes, set_spec.maxnode)
        run.syscalls.append(("set_mempolicy", set_pol or "", res))
        run.stdout += f"set_mempolicy({set_pol}) = {_ret_text(res)}\n"
    length = pages * PAGE_SIZE_BYTES
    try:
        vma = kernel.mmap(task, length, addr=addr, hugetlb=hugetlb)
        length = vma.end - vma.start  # MAP_HUGETLB rounds up to 2 MiB
    except MmapError:
        run.stdout += f"mmap({pages} pages) = -1 ENOMEM (Cannot allocate memory)\n"
        run.exit_code = 1
        return run
    except NumasimError as exc:  # MAP_FIXED at a bad address: the kernel says EINVAL
        run.stdout += (
            f"mmap({pages} pages at {addr:#x}) = -1 EINVAL (Invalid argument)\n" if addr is not None else ""
        )
        run.stderr += f"alloc: {exc}\n"
        run.exit_code = 1
        return run
    run.stdout += f"mmap({pages} pages{', MAP_HUGETLB' if hugetlb else ''}) = {vma.start:#x}\n"
    if advice is not None:
        res = kernel.madvise_hugepage(task, vma.start, length, advice == "hugepage")
        run.syscalls.append(("madvise", f"MADV_{advice.upper()}", res))
        run.stdout += f"madvise(MADV_{advice.upper()}) = {_ret_text(res)}\n"
    if mbind_spec is not None:
        res = kernel.mbind(task, vma.start, length, mbind_spec.mode_arg, mbind_spec.nodes, mbind_spec.maxnode)
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
    vma = task.find_vma(vma.start) or vma  # madvise may have split and merged it
    per_node = vma.pages_per_node()
    huge = int(vma.thp.sum()) // 512
    run.stdout += (
        f"touched {length // PAGE_SIZE_BYTES} pages from cpu {task.cpu}: "
        + " ".join(f"N{n}={c}" for n, c in sorted(per_node.items()))
        + (f" ({huge} transparent huge page{'s' if huge > 1 else ''})" if huge else "")
        + "\n"
    )
    if fault.failed:
        run.stderr += f"alloc: {fault.failed} pages could not be faulted (SIGBUS: no free huge page allowed)\n"
        run.exit_code = 135  # killed by SIGBUS
    return run


def _option_int(name: str, value: str, what: str) -> int:
    """``value`` as a C-style integer (decimal, 0x hex, 0o octal); ValueError naming the option and value."""
    try:
        return int(value.strip(), 0)
    except ValueError:
        raise ValueError(f"{name} {value[:40]!r} is not {what}") from None


def _ret_text(res: SyscallResult) -> str:
    return f"{res.ret}" if res.ok else f"{res.ret} {res.errno} ({_strerror(res.errno)})"


def _printcpu(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    return ProgramRun(stdout=f"{task.cpu}\n", pids=[task.pid])


def _true(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    return ProgramRun(pids=[task.pid])


_SLEEP_UNITS_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SLEEP_TRY = "Try 'sleep --help' for more information.\n"


def _sleep(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """coreutils sleep NUMBER[SUFFIX]...: pause for the sum of the operands (s, m, h, d; ``inf`` for ever)."""
    operands = list(argv[1:])
    if operands[:1] == ["--"]:
        operands = operands[1:]
    if not operands:
        return ProgramRun(stderr="sleep: missing operand\n" + _SLEEP_TRY, exit_code=1, pids=[task.pid])
    total_s = 0.0
    for text in operands:
        unit = text[-1:] if text[-1:] in "smhd" and not text.lower().endswith("inf") else ""
        number = text[: len(text) - len(unit)]
        try:
            value = float(number) if number.strip() == number and number else float("nan")
        except ValueError:
            value = float("nan")
        if not value >= 0:  # NaN, negative or no number: coreutils' "invalid time interval"
            return ProgramRun(stderr=f"sleep: invalid time interval '{text}'\n" + _SLEEP_TRY, exit_code=1,
                              pids=[task.pid])  # fmt: skip
        total_s += value * _SLEEP_UNITS_S[unit]
    if total_s == float("inf"):
        return ProgramRun(pids=[task.pid], running=True)
    return ProgramRun(pids=[task.pid], duration_s=total_s)


def _numactl(
    kernel: Kernel, task: Task, argv: Sequence[str], keep_alive: bool = False, calibration: Calibration | None = None
) -> ProgramRun:
    from numasim.tools.numactl import KernelProcess, numactl_main

    proc = KernelProcess(kernel, task, keep_alive=keep_alive, calibration=calibration)
    res = numactl_main(proc, argv[1:], has_preferred_many=kernel.version >= (5, 15))
    run = ProgramRun(res.stdout, res.stderr, res.exit_code, proc.pids or [task.pid], list(res.syscalls))
    run.pages_per_node = dict(proc.pages_per_node)
    run.running = proc.running
    run.duration_s = proc.duration_s
    return run


# --- numactl's own test programs (test/nodemap.c, test/move_pages.c, numademo.c; spec 8.7) -----------------


def _memory_node_count(kernel: Kernel) -> int:
    # numa_num_configured_nodes(): despite its name, libnuma counts the nodes with memory
    return len(kernel.memory_nodes)


def _nodemap(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    # for i in 0..numa_num_configured_nodes()-1: "i: " then " cpu" per cpu of numa_node_to_cpus(i); the
    # separator variable w is never incremented upstream, so no comma ever appears
    run = ProgramRun(pids=[task.pid])
    cpus_of = {n.id: sorted(n.cpus) for n in kernel.machine.nodes}
    for i in range(_memory_node_count(kernel)):
        if i not in cpus_of:  # a gap in the node ids: no nodeI directory in sysfs
            run.stdout += f"node {i} failed to convert\n"
        run.stdout += f"{i}: " + "".join(f" {c}" for c in cpus_of.get(i, [])) + "\n"
    return run


def _move_pages(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun(pids=[task.pid])
    # get_node_list(): nodes 0..numa_max_node() with memory, which must be all the configured (= memory) nodes
    use = sorted(n for n in kernel.memory_nodes)
    if len(use) < 2:
        run.stdout += "A minimum of 2 nodes is required for this test.\n"
        run.exit_code = 77
        return run
    run.stdout += "move_pages() test ......\n"
    page_count = 32
    if len(argv) > 1:  # sscanf("%d"): a leading integer, else the default stays
        digits = argv[1].lstrip()
        sign = digits[:1] if digits[:1] in "+-" else ""
        num = digits[len(sign) :]
        num = num[: len(num) - len(num.lstrip("0123456789"))]
        if num:
            page_count = int(sign + num)
    arg = argv[1] if len(argv) > 1 else "(null)"  # glibc prints a NULL %s as "(null)"
    run.stdout += f"pages={page_count} ({arg})\n"
    if page_count <= 0:
        run.stdout += "Unable to allocate memory\n"
        run.exit_code = 1
        return run
    ps = PAGE_SIZE_BYTES
    # malloc((pagesize + 1) * page_count) is above glibc's 128 KiB mmap threshold for the default 32 pages: its
    # own mapping; the test rounds the pointer down to a page and adds one page
    vma = kernel.mmap(task, (page_count + 2) * ps)
    base = vma.start + ps
    for lo, hi in ((0, min(2, page_count)), (3, page_count)):  # page 2 is left untouched
        if hi > lo:
            fault = kernel.touch(task, base + lo * ps, (hi - lo) * ps)
            if fault.oom_killed or not task.alive:
                return _killed(run)
    addrs = [base + i * ps for i in range(page_count)]
    targets = [use[i % len(use)] for i in range(page_count)]
    run.stdout += "\nMoving pages to start node ...\n"
    res = kernel.move_pages(task, addrs)
    run.syscalls.append(("move_pages", f"{page_count} pages, query", res))
    status = [-123] * page_count
    if res.ok:
        status = [int(v) for v in res.value["status"]]
    else:
        run.stderr += f"move_pages: {_strerror(res.errno)}\n"
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:#x} node={status[i]}\n"
    run.stdout += "\nMoving pages to target nodes ...\n"
    res = kernel.move_pages(task, addrs, targets)
    run.syscalls.append(("move_pages", f"{page_count} pages to {sorted(set(targets))}", res))
    errors = 0
    if res.ok:
        status = [int(v) for v in res.value["status"]]
    else:
        run.stderr += f"move_pages: {_strerror(res.errno)}\n"
        errors += 1
    # upstream checks the page contents and the (never changed) nodes[] array: only a failed call counts
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:x} node={status[i]}\n"
    run.stdout += "Test successful.\n" if not errors else f"{errors} errors.\n"
    run.exit_code = 1 if errors else 0
    return run


_NUMADEMO_TESTS = ("memset", "memcpy", "forward", "backward", "stream", "random2", "ptrchase")
"""``testname[]`` of the usual build (Makefile.am compiles numademo with HAVE_STREAM_LIB and HAVE_MT)."""
_STREAM_NAMES = ("Copy", "Scale", "Add", "Triad")
_FRACT_NODES, _FRACT_MASKS = 8, 32


def _numademo_usage() -> str:
    return (
        "usage: numademo [-S] [-f] [-c] [-e] [-t] msize[kmg] {tests}\nNo tests means run all.\n"
        "-c output CSV data. -f run even without NUMA API. -S run stupid tests. -e exit on error\n"
        "-t regression test; do not run all node combinations\n"
        "valid tests:" + "".join(f" {t}" for t in _NUMADEMO_TESTS) + "\n"
    )


class _LibnumaExit(Exception):
    """numa_error() with numa_exit_on_error set: the program exits with status 1."""


@dataclass
class _Numademo:
    """One numademo run: libnuma calls mapped onto the simulated kernel, one output line per memory test.

    Bandwidths are not timed (the kernel layer places pages, it does not run the loops): every figure
    prints as ``n/a`` in the real layout (``%-42s`` title, ``Avg n/a MB/s Max n/a MB/s Min n/a MB/s``).
    """

    kernel: Kernel
    task: Task
    run: ProgramRun
    size_bytes: int
    delim: str = " "
    exit_on_error: bool = False
    test: str = "memset"

    def _check(self, res: SyscallResult, where: str) -> None:
        self.run.syscalls.append((where, self.test, res))
        if not res.ok:  # numa_error(where): perror, then exit(1) under -e
            self.run.stderr += f"{where}: {_strerror(res.errno)}\n"
            if self.exit_on_error:
                raise _LibnumaExit

    @property
    def all_nodes(self) -> frozenset[int]:
        # numa_all_nodes_ptr: the memory nodes the task may use
        return frozenset(self.kernel.memory_nodes & self.task.mems_allowed)

    def alloc(self, mode: int | None = None, nodes: frozenset[int] = frozenset()) -> int:
        """numa_alloc*(): an mmap, plus an mbind for every variant but plain numa_alloc."""
        vma = self.kernel.mmap(self.task, self.size_bytes)
        if mode is not None:
            self._check(self.kernel.mbind(self.task, vma.start, self.size_bytes, mode, nodes), "mbind")
        return int(vma.start)

    def set_policy(self, mode: int, nodes: frozenset[int] = frozenset()) -> None:
        self._check(self.kernel.set_mempolicy(self.task, mode, nodes), "set_mempolicy")

    def memtest(self, name: str, addr: int) -> None:
        # pass 0 faults the buffer in (memcpy writes only the first half; reading the second half maps the
        # zero page); the timed passes and numa_free follow
        touched = self.size_bytes // 2 if self.test == "memcpy" else self.size_bytes
        if touched > 0:
            fault = self.kernel.touch(self.task, addr, touched)
            if fault.oom_killed or not self.task.alive:
                raise _LibnumaExit
        d = self.delim
        title = f"{name}{d}{'STREAM' if self.test == 'stream' else self.test}"
        if self.test == "stream":
            result = d.join(f"{s}{d}n/a{d}MB/s" for s in _STREAM_NAMES)
        else:
            result = d.join(f"{k}{d}n/a{d}MB/s" for k in ("Avg", "Max", "Min"))
        self.run.stdout += f"{title}{d}{result}\n" if not d.isspace() else f"{title:<42}{result}\n"
        self.kernel.munmap(self.task, addr, self.size_bytes)

    def preferred(self) -> int:
        # numa_preferred(): the first node of a PREFERRED/PREFERRED_MANY/BIND policy, else 0
        got = self.kernel.get_mempolicy(self.task)
        if got.ok and got.value["mode"] in (MPOL_PREFERRED, MPOL_PREFERRED_MANY, MPOL_BIND):
            nodes = sorted(got.value["nodemask"] or ())
            if nodes:
                return int(nodes[0])
        return 0

    def run_test(self, test: str, max_node: int, regression: bool) -> None:
        self.test = test
        out = self.run
        if regression:
            out.stdout += f"\nTest {test} doing 1 of {_FRACT_NODES} nodes and 1 of {_FRACT_MASKS} masks.\n"
        every = [i for i in range(max_node + 1) if not (regression and i % _FRACT_NODES)]
        self.memtest("memory with no policy", self.alloc())
        self.memtest("local memory", self.alloc(MPOL_LOCAL))
        self.memtest("memory interleaved on all nodes", self.alloc(MPOL_INTERLEAVE, self.all_nodes))
        for i in every:
            self.memtest(f"memory on node {i}", self.alloc(MPOL_BIND, frozenset({i})))
        for i, mask in enumerate(range(1, 1 << (max_node + 1))):
            if mask.bit_count() == 1 or (regression and i % _FRACT_MASKS):
                continue
            nodes = frozenset(k for k in range(max_node + 1) if mask >> k & 1)
            label = "memory interleaved on" + "".join(f" {k}" for k in sorted(nodes))
            self.memtest(label, self.alloc(MPOL_INTERLEAVE, nodes))
        for i in every:
            out.stdout += f"setting preferred node to {i}\n"
            self.set_policy(MPOL_PREFERRED, frozenset({i}))
            self.memtest("memory without policy", self.alloc())
        self.set_policy(MPOL_INTERLEAVE, self.all_nodes)
        self.memtest("manual interleaving to all nodes", self.alloc())
        if max_node > 0:
            self.set_policy(MPOL_INTERLEAVE, frozenset({0, 1}))
            self.memtest("manual interleaving on node 0/1", self.alloc())
            got = self.kernel.get_mempolicy(self.task, MPOL_F_NODE, want_nodemask=False)
            out.stdout += f"current interleave node {int(got.value['mode']) if got.ok else 0}\n"
        self.set_policy(MPOL_DEFAULT)
        cpus_of = {n.id: n.cpus for n in self.kernel.machine.nodes}
        for i in every:
            oldhn = self.preferred()
            # numa_run_on_node(): its failure (a cpu-less node) is not checked by numademo
            self.kernel.sched_setaffinity(self.task, cpus_of.get(i, ()))
            out.stdout += f"running on node {i}, preferred node {oldhn}\n"
            self.memtest("local memory", self.alloc(MPOL_LOCAL))
            self.memtest("memory interleaved on all nodes", self.alloc(MPOL_INTERLEAVE, self.all_nodes))
            if max_node >= 1:
                self.memtest("memory interleaved on node 0/1", self.alloc(MPOL_INTERLEAVE, frozenset({0, 1})))
            for k in every:
                if k == i:
                    continue
                self.set_policy(MPOL_BIND, frozenset({k}))
                self.memtest(f"alloc on node {k}", self.alloc())
                self.set_policy(MPOL_BIND, self.all_nodes)
            self.set_policy(MPOL_LOCAL)
            self.memtest("local allocation", self.alloc())
            self.set_policy(MPOL_PREFERRED, frozenset({(i + 1) % (1 + max_node)}))
            self.memtest("setting wrong preferred node", self.alloc())
            self.set_policy(MPOL_PREFERRED, frozenset({i}))
            self.memtest("setting correct preferred node", self.alloc())
            self.set_policy(MPOL_LOCAL)  # numa_set_preferred(-1)


def _numademo(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    run = ProgramRun(pids=[task.pid])
    args = list(argv[1:])
    delim, simple, exit_on_error, regression = " ", False, False, False
    while args and args[0].startswith("-"):
        opt = args.pop(0)[1:2]
        if opt == "c":
            delim = ","
        elif opt == "S":
            simple = True
        elif opt == "e":  # numa_exit_on_error = numa_exit_on_warn = 1
            exit_on_error = True
        elif opt == "t":
            regression = True
        elif opt != "f":
            return ProgramRun(stdout=_numademo_usage(), exit_code=1, pids=[task.pid])
    if not args:
        return ProgramRun(stdout=_numademo_usage(), exit_code=1, pids=[task.pid])
    # numa_available() is 0 on every simulated machine: the numa API is always there
    max_node = max(n.id for n in kernel.machine.nodes)  # numa_max_node()
    run.stdout += f"{max_node + 1} nodes available\n"
    if max_node <= 2:
        regression = False  # "-t auto-off for small systems"
    size = _memsize(args[0])
    if size <= 0:
        run.stdout += _numademo_usage()
        run.exit_code = 1
        return run
    if len(args) == 1:
        tests = ["memset", "memcpy", *(["forward", "backward"] if simple else []), "random2", "stream", "ptrchase"]
    else:
        tests = []
        for name in args[1:]:
            if name not in _NUMADEMO_TESTS:
                run.stderr += f"unknown test `{name}'\n"
                run.stdout += _numademo_usage()
                run.exit_code = 1
                return run
            tests.append(name)
    demo = _Numademo(kernel, task, run, size, delim, exit_on_error)
    try:
        for name in tests:
            demo.run_test(name, max_node, regression)
    except _LibnumaExit:
        if not task.alive:
            return _killed(run)
        run.exit_code = 1
    return run


def _migratepages(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's ``migratepages pid from-nodes to-nodes``: ``numa_migrate_pages`` on a live process of the same
    simulated kernel (e.g. a ``stress --vm-keep`` started by an earlier ``--after`` command)."""
    run = ProgramRun(pids=[task.pid])
    usage = "usage: migratepages pid from-nodes to-nodes\n\nnodes is a comma delimited list of node numbers or A-B ranges or all.\n"
    args = list(argv[1:])
    if any(a.startswith("-") and a != "-" for a in args) or len(args) != 3:  # getopt: --help or any option
        run.stderr, run.exit_code = usage, 1
        return run
    pid, end = strtoul(args[0])  # strtoul(argv[0], &end, 0): the whole argument must be the number
    if end != len(args[0]) or end == 0:
        run.stderr, run.exit_code = usage, 1
        return run
    masks = []
    for text in args[1:]:
        try:
            masks.append(parse_nodestring(text, _node_ctx(kernel, task)))
        except NodeStringError:
            run.stdout += f"<{text}> is invalid\n"
            run.exit_code = 1
            return run
    target = kernel.tasks.get(pid)
    if target is None or not target.alive:
        res = SyscallResult.fail("ESRCH", f"no task {pid}")
    else:
        res = kernel.migrate_pages(target, sorted(masks[0]), sorted(masks[1]), caller=task)
    run.syscalls.append(("migrate_pages", f"pid {pid}: {args[1]} -> {args[2]}", res))
    if res.ret < 0:
        run.stderr += f"migrate_pages: {_strerror(res.errno)}\n"
        run.exit_code = 1
    return run


PROGRAMS = {
    "stress": _stress,
    "migratepages": _migratepages,
    "memhog": _memhog,
    "alloc": _alloc,
    "printcpu": _printcpu,
    "numactl": _numactl,  # called with keep_alive by run_program
    "true": _true,
    "ls": _true,
    "sleep": _sleep,
    "nodemap": _nodemap,
    "move_pages": _move_pages,
    "numademo": _numademo,
}
"""Program name -> implementation ``(kernel, task, argv) -> ProgramRun``: the system programs above. With the
measurement tools (:data:`numasim.tools.tool_programs.TOOL_PROGRAMS`) and the programs registered by
:func:`register_program`, the programs ``numactl ... -- PROGRAM`` can exec (:func:`find_program`)."""


class Program(Protocol):
    """A virtual program: runs in ``task`` (its policy, affinity and cpu) and reports what it did. A program whose
    ``timed`` attribute is true is called with ``calibration=`` too (what it times with, or ``None``)."""

    def __call__(self, kernel: Kernel, task: Task, argv: Sequence[str], /) -> ProgramRun: ...


_REGISTERED: dict[str, Program] = {}


def register_program(name: str, program: Program) -> None:
    """Make ``program`` what ``numactl ... -- NAME`` (and a shim of that name) runs; it takes precedence over a
    built-in program of the same name.

    Examples
    --------
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.tools.numactl import run_numactl
    >>> from numasim.topology.builders import glueless
    >>> def hello(kernel, task, argv):
    ...     return ProgramRun(stdout=f"hello from cpu {task.cpu}\\n", pids=[task.pid])
    >>> register_program("hello", hello)
    >>> run_numactl(Kernel(glueless(2)), ["--physcpubind=1", "hello"]).stdout
    'hello from cpu 1\\n'
    >>> unregister_program("hello")
    """
    if not name or "/" in name or name == "numactl":
        raise NumasimError(f"program name {name!r}: must be a file name other than numactl")
    _REGISTERED[name] = program


def unregister_program(name: str) -> None:
    """Remove a program :func:`register_program` added (a built-in one cannot be removed)."""
    _REGISTERED.pop(name, None)


def find_program(name: str) -> Program | None:
    """The program ``numactl`` execs for ``name`` (a path's last component): a registered one, a system program,
    a measurement tool or one of numactl's test programs; ``None`` if there is none."""
    name = name.rsplit("/", 1)[-1]
    found = _REGISTERED.get(name) or PROGRAMS.get(name)
    if found is None:
        from numasim.tools.tool_programs import TOOL_PROGRAMS

        found = TOOL_PROGRAMS.get(name)
    return found


def program_names() -> list[str]:
    """Every program :func:`find_program` finds, system programs first."""
    from numasim.tools.tool_programs import TOOL_PROGRAMS

    return list(dict.fromkeys([*PROGRAMS, *TOOL_PROGRAMS, *_REGISTERED]))


def run_program(
    kernel: Kernel, task: Task, argv: Sequence[str], *, keep_alive: bool = False,
    calibration: Calibration | None = None,
) -> ProgramRun | None:
    """Exec ``argv`` in ``task`` (the task's policy and affinity stay); ``None`` if there is no such program.

    When the program is done its process exits and its memory is freed, unless it is still running (stress
    without ``-t``) or ``keep_alive`` asks to look at it first (as if it were paused before ``exit``).
    :attr:`ProgramRun.pages_per_node` is taken before the exit either way. ``calibration``: what a timed
    program (``lat_mem_rd``, ``dd``, ``mlc``, ...) times with; ``None``, the one the machine names
    (:func:`numasim.timing.resolve.resolve_calibration`).
    """
    name = argv[0].rsplit("/", 1)[-1]
    impl = find_program(name)
    if impl is None:
        return None
    # exec: the old image goes, the new one is faulted in under the policy the task has now
    for vma in list(task.mm.vmas):
        kernel.munmap(task, vma.start, vma.end - vma.start)
    task.comm = name[:15]
    load_image(kernel, task)
    if name == "numactl":  # the nested numactl's own program decides about exiting
        return _numactl(kernel, task, argv, keep_alive, calibration)
    if getattr(impl, "timed", False):  # a measurement tool: it times with the process's calibration
        run = impl(kernel, task, argv, calibration=calibration)  # type: ignore[call-arg]
    else:
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
