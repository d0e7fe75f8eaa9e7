"""The virtual ``numactl`` (numactl/numactl.c + the libnuma calls it makes), run against the simulated kernel.

Option handling follows ``main()`` of numactl.c: ``getopt_long`` with a leading ``'+'`` (options stop at the
first non-option, which is the command), each option acting as soon as it is read (so ``--show`` after a
policy shows that policy, and an error in a later option comes after the earlier ones took effect):

* ``-i/--interleave``, ``-w/--weighted-interleave``, ``-m/--membind`` (with an earlier ``-b/--balancing``:
  ``MPOL_BIND|MPOL_F_NUMA_BALANCING``, silently plain BIND on EINVAL), ``-p/--preferred`` (exactly one node),
  ``-P/--preferred-many``, ``-l/--localalloc``: ``set_mempolicy`` on the numactl process, inherited by the
  command (exec keeps the task policy); a second policy option is ``numactl: Conflicting policies``;
* ``-N/--cpunodebind`` (``-c/--cpubind``) and ``-C/--physcpubind``: ``sched_setaffinity``;
* ``-a/--all`` (before any node/cpu option) parses lists against all possible nodes/cpus, not the cpuset;
* ``-s/--show`` prints the policy at once and exits 0; ``-H/--hardware`` (``--cpu-compress``) prints the
  topology after all options; ``--version``.

Lists are parsed by :mod:`numasim.kernel.nodestring`; an invalid list prints libnuma's warning on stderr,
``<LIST> is invalid`` on stdout and the usage text (exit 1). Output texts (``--show``, ``--hardware``, the
usage text, error lines) are numactl's, byte for byte. The System V / tmpfs shared-memory options are parsed
but not simulated.

The module only needs a :class:`NumaProcess` (what libnuma sees of the system and of its own process);
:func:`numasim.kernel.programs.run_numactl` binds one to the simulated kernel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from numasim.kernel.errno import SyscallResult
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_NODE,
    MPOL_F_NUMA_BALANCING,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)
from numasim.kernel.nodestring import (
    DEFAULT_NODEMASK_BITS,
    NodeStringError,
    ParseContext,
    parse_cpustring,
    parse_nodestring,
)
from numasim.topology.io.numactl import NumactlHardware, NumactlNode, NumactlStyle, format_numactl_hardware

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = [
    "NumaProcess",
    "KernelProcess",
    "run_numactl",
    "ProgramOutcome",
    "NumactlRun",
    "numactl_main",
    "format_show",
    "format_hardware",
    "getopt_numactl",
    "USAGE",
    "STRERROR",
    "POLICY_NAMES",
]

VERSION = "2.0.19"

USAGE = (
    "usage: numactl [--all | -a] [--balancing | -b]\n"
    "               [--interleave= | -i <nodes>] [--weighted-interleave= | -w <nodes>]\n"
    "               [--preferred= | -p <node>] [--preferred-many= | -P <nodes>]\n"
    "               [--physcpubind= | -C <cpus>] [--cpunodebind= | -N <nodes>]\n"
    "               [--membind= | -m <nodes>] [--localalloc | -l] command args ...\n"
    "               [--localalloc | -l] command args ...\n"
    "       numactl [--show | -s]\n"
    "       numactl [--hardware | -H] [--cpu-compress]\n"
    "       numactl [--version]\n"
    "       numactl [--length | -L <length>] [--offset | -o <offset>] [--shmmode | -M <shmmode>]\n"
    "               [--strict | -t]\n"
    "               [--shmid | -I <id>] --shm | -S <shmkeyfile>\n"
    "               [--shmid | -I <id>] --file | -f <tmpfsfile>\n"
    "               [--huge | -u] [--touch | -T] \n"
    "               memory policy [--dump | -d] [--dump-nodes | -D]\n"
    "\n"
    "memory policy is --preferred | -p, --membind | -m, --localalloc | -l,\n"
    "                 --interleave | -i, --weighted-interleave | -w\n"
    "<nodes> is a comma delimited list of node numbers or A-B ranges or all.\n"
    "Instead of a number a node can also be:\n"
    "  netdev:DEV the node connected to network device DEV\n"
    "  file:PATH  the node the block device of path is connected to\n"
    "  ip:HOST    the node of the network device host routes through\n"
    "  block:PATH the node of block device path\n"
    "  pci:[seg:]bus:dev[:func] The node of a PCI device\n"
    "<cpus> is a comma delimited list of cpu numbers or A-B ranges or all\n"
    "all ranges can be inverted with !\n"
    "all numbers and ranges can be made cpuset-relative with +\n"
    "the old --cpubind argument is deprecated.\n"
    "use --cpunodebind or --physcpubind instead\n"
    "use --balancing | -b to enable Linux kernel NUMA balancing\n"
    "for the process if it is supported by kernel\n"
    "<length> can have g (GB), m (MB) or k (KB) suffixes\n"
)

STRERROR = {
    "EPERM": "Operation not permitted",
    "ENOENT": "No such file or directory",
    "ESRCH": "No such process",
    "EIO": "Input/output error",
    "E2BIG": "Argument list too long",
    "ENOMEM": "Cannot allocate memory",
    "EACCES": "Permission denied",
    "EFAULT": "Bad address",
    "EBUSY": "Device or resource busy",
    "ENODEV": "No such device",
    "EINVAL": "Invalid argument",
    "ERANGE": "Numerical result out of range",
    "EOPNOTSUPP": "Operation not supported",
}
"""glibc ``strerror`` texts (what ``perror`` prints)."""

POLICY_NAMES = (
    "default",
    "preferred",
    "bind",
    "interleave",
    "local",
    "preferred-many",
    "weighted-interleave",
)
"""numactl's ``policy_name()`` table; other values print as ``[N]``."""

# (long name, short letter or key, takes an argument) in numactl.c's opts[] order
_LONG_OPTIONS: tuple[tuple[str, str, bool], ...] = (
    ("all", "a", False),
    ("interleave", "i", True),
    ("weighted-interleave", "w", True),
    ("preferred", "p", True),
    ("preferred-many", "P", True),
    ("cpubind", "c", True),
    ("cpunodebind", "N", True),
    ("physcpubind", "C", True),
    ("membind", "m", True),
    ("show", "s", False),
    ("localalloc", "l", False),
    ("balancing", "b", False),
    ("hardware", "H", False),
    ("shm", "S", True),
    ("file", "f", True),
    ("offset", "o", True),
    ("length", "L", True),
    ("strict", "t", False),
    ("shmmode", "M", True),
    ("dump", "d", False),
    ("dump-nodes", "D", False),
    ("shmid", "I", True),
    ("huge", "u", False),
    ("touch", "T", False),
    ("cpu-compress", "cpu-compress", False),
    ("verify", "V", False),
    ("version", "version", False),
)
_SHORT = {key: arg for _, key, arg in _LONG_OPTIONS if len(key) == 1}


@dataclass(frozen=True)
class ProgramOutcome:
    """What an exec'd virtual program did."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class NumaProcess(Protocol):
    """What numactl (through libnuma) sees: sysfs facts, and its own process's syscalls."""

    def configured_nodes(self) -> list[int]:
        """Node ids with a ``/sys/devices/system/node/nodeN`` directory (memoryless ones included)."""
        ...

    def node_cpus(self, nid: int) -> list[int]: ...

    def configured_cpus(self) -> int: ...

    def node_meminfo_bytes(self, nid: int) -> tuple[int, int]:
        """``MemTotal`` and ``MemFree`` of the node, in bytes."""
        ...

    def distance(self, a: int, b: int) -> int: ...

    def weighted_interleave_weight(self, nid: int) -> int: ...

    def mems_allowed(self) -> frozenset[int]:
        """``Mems_allowed`` of the process (libnuma's ``numa_all_nodes_ptr``)."""
        ...

    def cpus_allowed(self) -> frozenset[int]:
        """``Cpus_allowed``: the current affinity."""
        ...

    def sched_setaffinity(self, cpus: frozenset[int]) -> SyscallResult: ...

    def set_mempolicy(self, mode: int, nodes: frozenset[int], maxnode: int) -> SyscallResult: ...

    def get_mempolicy(self, flags: int) -> SyscallResult:
        """``value`` holds ``mode`` and ``nodemask`` (flags 0) or ``node`` (``MPOL_F_NODE``)."""
        ...

    def execvp(self, argv: Sequence[str]) -> ProgramOutcome | None:
        """Run a virtual program in this process; ``None`` if there is no such program."""
        ...


@dataclass
class NumactlRun:
    """Result of one ``numactl`` invocation: its output, exit status and the policy syscalls it made."""

    stdout: str
    stderr: str
    exit_code: int
    syscalls: list[tuple[str, str, SyscallResult]] = field(default_factory=list)
    """``(syscall name, argument text, result)`` of every affinity and policy call, in order."""
    command: list[str] = field(default_factory=list)
    program: ProgramOutcome | None = None
    task_pid: int = -1
    """The numactl process (which exec'd the command)."""
    program_pids: list[int] = field(default_factory=list)
    """Processes whose memory the command placed (stress: its vm workers; otherwise the process itself)."""
    program_pages_per_node: dict[int, int] = field(default_factory=dict)
    """Present pages per node of :attr:`program_pids` when the command finished."""


@dataclass
class _State:
    set_policy: int = -1
    parse_all: bool = False
    did_parse: bool = False
    balancing: bool = False
    hardware: bool = False
    compress: bool = False
    strict: bool = False
    shmoption: str | None = None


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


# --- getopt_long("+...") ----------------------------------------------------------------------------------


def getopt_numactl(argv: Sequence[str]) -> Iterator[tuple[str, str | None, int]]:
    """GNU ``getopt_long`` over numactl's options with ``'+'`` (stop at the first non-option).

    Yields ``(key, optarg, optind)`` where ``key`` is the short letter (or ``"cpu-compress"``/``"version"``),
    or ``("?", message, optind)`` for an error (message = glibc's text without the program name). After the
    last option, yields ``("", None, optind)`` with ``optind`` the index of the command.

    Examples
    --------
    >>> [k for k, _, _ in getopt_numactl(["--inter=0", "-l", "ls", "-x"])]
    ['i', 'l', '']
    """
    i = 0
    n = len(argv)
    while i < n:
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 1
        if arg.startswith("--"):
            body = arg[2:]
            name, eq, value = body.partition("=")
            exact = [o for o in _LONG_OPTIONS if o[0] == name]
            matches = exact or [o for o in _LONG_OPTIONS if o[0].startswith(name)]
            if not matches:
                yield "?", f"unrecognized option '--{name}'", i
                return
            if len(matches) > 1:
                names = " ".join(f"'--{o[0]}'" for o in matches)
                yield "?", f"option '--{name}' is ambiguous; possibilities: {names}", i
                return
            long_name, key, takes = matches[0]
            if takes:
                if not eq:
                    if i >= n:
                        yield "?", f"option '--{long_name}' requires an argument", i
                        return
                    value = argv[i]
                    i += 1
                yield key, value, i
            else:
                if eq:
                    yield "?", f"option '--{long_name}' doesn't allow an argument", i
                    return
                yield key, None, i
            continue
        j = 1
        while j < len(arg):
            ch = arg[j]
            j += 1
            if ch not in _SHORT:
                yield "?", f"invalid option -- '{ch}'", i
                return
            if _SHORT[ch]:
                value = arg[j:]
                if not value:
                    if i >= n:
                        yield "?", f"option requires an argument -- '{ch}'", i
                        return
                    value = argv[i]
                    i += 1
                yield ch, value, i
                break
            yield ch, None, i
    yield "", None, i


# --- output texts -----------------------------------------------------------------------------------------


def _printmask(name: str, bits: Sequence[int] | frozenset[int]) -> str:
    return f"{name}: " + "".join(f"{b} " for b in sorted(bits)) + "\n"


def format_show(proc: NumaProcess) -> str:
    """``numactl --show`` for the process's current state (numactl.c ``show()``).

    Quirks kept: a LOCAL policy prints nothing after ``preferred node: `` (not even the newline), a policy with
    mode flags prints as ``[N]`` and, like LOCAL, no preferred node; ``preferred:`` lists whatever nodemask
    ``get_mempolicy`` returned (so the interleave mask for an interleave policy); ``preferred node`` of
    preferred-many is the failed ``get_mempolicy(MPOL_F_NODE)`` = 0.
    """
    all_nodes = proc.mems_allowed()
    affinity = proc.cpus_allowed()
    cpubind = [n for n in sorted(all_nodes) if set(proc.node_cpus(n)) & affinity]
    got = proc.get_mempolicy(0)
    policy = int(got.value.get("mode", 0)) if got.ok else 0
    reported = frozenset(got.value.get("nodemask", frozenset())) if got.ok else frozenset()
    interleave = reported if policy == MPOL_INTERLEAVE else frozenset()
    weighted = reported if policy == MPOL_WEIGHTED_INTERLEAVE else frozenset()
    membind = reported if policy == MPOL_BIND else all_nodes
    node_res = proc.get_mempolicy(MPOL_F_NODE)
    cur = int(node_res.value.get("node", 0)) if node_res.ok else 0
    name = POLICY_NAMES[policy] if 0 <= policy < len(POLICY_NAMES) else f"[{policy}]"
    out = [f"policy: {name}\n", "preferred node: "]
    if policy == MPOL_PREFERRED:
        out.append(f"{min(reported) if reported else 0}\n")
    elif policy == MPOL_DEFAULT:
        out.append("current\n")
    elif policy in (MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE):
        out.append(f"{cur} (interleave next)\n")
    elif policy == MPOL_BIND:
        out.append(f"{min(membind) if membind else -1}\n")
    elif policy == MPOL_PREFERRED_MANY:
        out.append(f"{cur} (preferred-many)\n")
    if policy == MPOL_INTERLEAVE:
        out.append(_printmask("interleavemask", interleave))
        out.append(f"interleavenode: {cur}\n")
    elif policy == MPOL_WEIGHTED_INTERLEAVE:
        out.append(_printmask("interleavemask", weighted))
        if weighted:
            out.append(
                "interleaveweights:"
                + "".join(f" {proc.weighted_interleave_weight(n)}" for n in sorted(weighted))
                + "\n"
            )
        else:
            out.append("interleaveweights:\n")
        out.append(f"interleavenode: {cur}\n")
    out.append(_printmask("physcpubind", affinity))
    out.append(_printmask("cpubind", cpubind))
    out.append(_printmask("nodebind", cpubind))
    out.append(_printmask("membind", membind))
    out.append(_printmask("preferred", reported))
    return "".join(out)


def _compress_cpus(cpus: Sequence[int]) -> str:
    runs: list[str] = []
    values = sorted(cpus)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(f" {values[i]}" if i == j else f" {values[i]}-{values[j]}")
        i = j + 1
    return ",".join(runs) + f" ({len(values)})"


def format_hardware(proc: NumaProcess, *, cpu_compress: bool = False, style: NumactlStyle = "2.0.19") -> str:
    """``numactl --hardware`` (sizes and free memory from the node meminfo, distances from sysfs)."""
    nodes = []
    for nid in proc.configured_nodes():
        total, free = proc.node_meminfo_bytes(nid)
        nodes.append(NumactlNode(nid, list(proc.node_cpus(nid)), total >> 20, free >> 20))
    ids = [n.id for n in nodes]
    distances = [[proc.distance(a, b) for b in ids] for a in ids]
    if ids and distances[-1][0] == 0:
        hw = NumactlHardware(nodes=nodes, distances=None, style=style)
    else:
        hw = NumactlHardware(nodes=nodes, distances=distances, style=style)
    text = format_numactl_hardware(hw, style)
    if not cpu_compress:
        return text
    lines = text.split("\n")
    for k, line in enumerate(lines):
        for n in nodes:
            if line.startswith(f"node {n.id} cpus:"):
                lines[k] = f"node {n.id} cpus:" + (_compress_cpus(n.cpus) if n.cpus else "")
    return "\n".join(lines)


# --- main() -------------------------------------------------------------------------------------------------


def numactl_main(
    proc: NumaProcess, argv: Sequence[str], *, has_preferred_many: bool = True, hardware_style: NumactlStyle = "2.0.19"
) -> NumactlRun:
    """Run ``numactl argv...`` (without the program name) in ``proc`` and return what it printed.

    ``hardware_style``: the distance-table layout ``--hardware`` prints (that of the numactl the machine was
    read from, :attr:`~numasim.topology.model.Machine.numactl_style`, so a text round trip keeps its columns).

    The command after the options is run with :meth:`NumaProcess.execvp` in the same process (exec keeps
    the policy and affinity numactl set).
    """
    out: list[str] = []
    err: list[str] = []
    calls: list[tuple[str, str, SyscallResult]] = []
    run = NumactlRun("", "", 0, calls)
    state = _State()
    last_nodes: list[str] = []

    def usage() -> None:
        err.append(USAGE)
        raise _Exit(1)

    def usage_msg(msg: str) -> None:
        err.append(f"numactl: {msg}")
        out.append("\n")  # usage_msg's putchar('\n') goes to stdout
        usage()

    def complain(msg: str) -> None:
        err.append(f"numactl: {msg}\n")
        raise _Exit(1)

    def perror(what: str, errno: str) -> None:
        err.append(f"{what}: {STRERROR.get(errno, errno)}\n")

    def setpolicy(pol: int) -> None:
        if state.set_policy != -1:
            usage_msg("Conflicting policies")
        state.set_policy = pol

    def node_ctx(parse_all: bool) -> ParseContext:
        configured = proc.configured_nodes()
        allowed = frozenset(configured) if parse_all else proc.mems_allowed()
        return ParseContext(allowed, len(configured), DEFAULT_NODEMASK_BITS)

    def cpu_ctx(parse_all: bool) -> ParseContext:
        ncpus = proc.configured_cpus()
        allowed = frozenset(range(ncpus)) if parse_all else proc.cpus_allowed()
        return ParseContext(allowed, ncpus, max(ncpus, 1))

    def parse_nodes(arg: str) -> frozenset[int]:
        text = arg
        if arg == "same":
            if not last_nodes:
                usage_msg("same needs previous node specification")
            text = last_nodes[-1]
        else:
            last_nodes.append(arg)
        try:
            return parse_nodestring(text, node_ctx(state.parse_all))
        except NodeStringError as exc:
            invalid(arg, exc)
            raise  # not reached

    def invalid(arg: str, exc: NodeStringError) -> None:
        if exc.warning is not None:
            err.append(f"libnuma: Warning: {exc.warning}\n")
        out.append(f"<{arg}> is invalid\n")
        usage()

    def syscall_failed(res: SyscallResult, libnuma_where: str, numactl_where: str) -> None:
        # libnuma's numa_error() perror()s, then numactl's checkerror() perror()s again and exits
        perror(libnuma_where, res.errno or "EINVAL")
        perror(numactl_where, res.errno or "EINVAL")
        raise _Exit(1)

    def setpol(mode: int, nodes: frozenset[int], maxnode: int = DEFAULT_NODEMASK_BITS) -> SyscallResult:
        res = proc.set_mempolicy(mode, nodes, maxnode)
        calls.append(("set_mempolicy", f"{_mode_text(mode)}, {_nodes_text(nodes)}", res))
        return res

    try:
        for key, optarg, _optind in getopt_numactl(argv):
            if key == "":
                command = list(argv[_optind:])
                break
            if key == "?":
                err.append(f"numactl: {optarg}\n")
                usage()
            arg = optarg or ""
            if key == "s":
                out.append(format_show(proc))
                raise _Exit(0)
            if key == "H":
                if state.set_policy >= 0:
                    usage_msg("specify policy after --shm/--file")
                state.hardware = True
            elif key == "b":
                if state.set_policy >= 0:
                    usage_msg("specify policy after --shm/--file")
                state.balancing = True
            elif key in ("i", "w"):
                mask = parse_nodes(arg)
                state.did_parse = True
                mode = MPOL_WEIGHTED_INTERLEAVE if key == "w" else MPOL_INTERLEAVE
                setpolicy(mode)
                res = setpol(mode if mask else MPOL_DEFAULT, mask)
                if not res.ok:
                    syscall_failed(res, "set_mempolicy", "setting interleave mask")
            elif key in ("N", "c"):
                if state.shmoption:
                    usage_msg(
                        f"{state.shmoption} shm option is not allowed before -c/--cpubind/--cpunodebind"
                    )
                mask = parse_nodes(arg)
                state.did_parse = True
                possible = set(proc.configured_nodes())
                cpus: set[int] = set()
                for nid in sorted(mask):
                    if nid not in possible:
                        err.append(f"libnuma: Warning: node {nid} not allowed\n")
                        continue
                    cpus.update(proc.node_cpus(nid))
                res = proc.sched_setaffinity(frozenset(cpus))
                calls.append(("sched_setaffinity", _nodes_text(cpus), res))
                if not res.ok:
                    syscall_failed(res, "numa_sched_setaffinity_v2_int() failed", "sched_setaffinity")
            elif key == "C":
                if state.shmoption:
                    usage_msg(f"{state.shmoption} shm option is not allowed before -C/--physcpubind")
                try:
                    cpuset = parse_cpustring(arg, cpu_ctx(state.parse_all))
                except NodeStringError as exc:
                    invalid(arg, exc)
                    raise
                state.did_parse = True
                res = proc.sched_setaffinity(cpuset)
                calls.append(("sched_setaffinity", _nodes_text(cpuset), res))
                if not res.ok:
                    perror("sched_setaffinity", res.errno or "EINVAL")
                    raise _Exit(1)
            elif key == "m":
                setpolicy(MPOL_BIND)
                mask = parse_nodes(arg)
                state.did_parse = True
                if state.balancing:
                    # numa_set_membind_balancing passes maxnode = size + 1
                    res = setpol(MPOL_BIND | MPOL_F_NUMA_BALANCING, mask, DEFAULT_NODEMASK_BITS + 1)
                    if not res.ok and res.errno == "EINVAL":
                        res = setpol(MPOL_BIND, mask)
                else:
                    res = setpol(MPOL_BIND, mask)
                if not res.ok:
                    syscall_failed(res, "set_mempolicy", "setting membind")
            elif key in ("p", "P"):
                if key == "P" and not has_preferred_many:
                    complain("preferred-many requested without kernel support")
                mask = parse_nodes(arg)
                state.did_parse = True
                if key == "p":
                    if len(mask) != 1:
                        usage()
                    setpolicy(MPOL_PREFERRED)
                    res = setpol(MPOL_PREFERRED, frozenset({min(mask)}))
                else:
                    setpolicy(MPOL_PREFERRED_MANY)
                    res = setpol(MPOL_PREFERRED_MANY, mask)
                if not res.ok:
                    syscall_failed(res, "set_mempolicy", "setting preferred node")
            elif key == "l":
                setpolicy(MPOL_LOCAL)
                res = setpol(MPOL_LOCAL, frozenset())
                if not res.ok:
                    syscall_failed(res, "set_mempolicy", "local allocation")
            elif key == "a":
                if state.did_parse:
                    usage_msg("--all/-a option must be before all cpu/node specifications")
                state.parse_all = True
            elif key == "cpu-compress":
                state.compress = True
            elif key == "version":
                if state.set_policy >= 0:
                    usage_msg("specify policy after --shm/--file")
                out.append(f"{VERSION}\n")
                raise _Exit(0)
            elif key == "t":
                state.strict = True
            elif key in ("L", "o", "M", "u"):
                state.shmoption = {"L": "--length", "o": "--offset", "M": "--shmmode", "u": "--huge"}[key]
            elif key in ("S", "f", "I", "T", "V", "d", "D"):
                complain(
                    "shared memory segments (--shm, --file, --touch, --dump, --verify) are not simulated by numasim"
                )
        else:  # pragma: no cover - getopt always ends with the "" item
            command = []
        if state.hardware:
            out.append(format_hardware(proc, cpu_compress=state.compress, style=hardware_style))
            raise _Exit(0)
        if state.strict:
            err.append("numactl: warning. Strict flag for process ignored.\n")
        if state.shmoption:
            usage_msg(f"shm related option {state.shmoption} for process")
        if not command:
            usage()
        run.command = command
        outcome = proc.execvp(command)
        if outcome is None:
            complain(f"execution of `{command[0]}': {STRERROR['ENOENT']}\n")
        assert outcome is not None
        run.program = outcome
        out.append(outcome.stdout)
        err.append(outcome.stderr)
        raise _Exit(outcome.exit_code)
    except _Exit as done:
        run.exit_code = done.code
    run.stdout = "".join(out)
    run.stderr = "".join(err)
    return run


_MODE_NAMES = {
    MPOL_DEFAULT: "MPOL_DEFAULT",
    MPOL_PREFERRED: "MPOL_PREFERRED",
    MPOL_BIND: "MPOL_BIND",
    MPOL_INTERLEAVE: "MPOL_INTERLEAVE",
    MPOL_LOCAL: "MPOL_LOCAL",
    MPOL_PREFERRED_MANY: "MPOL_PREFERRED_MANY",
    MPOL_WEIGHTED_INTERLEAVE: "MPOL_WEIGHTED_INTERLEAVE",
}


def _mode_text(mode: int) -> str:
    text = _MODE_NAMES.get(mode & ~MPOL_F_NUMA_BALANCING, str(mode))
    return text + "|MPOL_F_NUMA_BALANCING" if mode & MPOL_F_NUMA_BALANCING else text


def _nodes_text(nodes: frozenset[int] | set[int]) -> str:
    from numasim.topology.cpulist import format_cpulist

    return "{" + format_cpulist(sorted(nodes)) + "}"


# --- binding to the simulated kernel ------------------------------------------------------------------------


class KernelProcess:
    """A :class:`NumaProcess` backed by a task of the simulated :class:`~numasim.kernel.kernel.Kernel`."""

    def __init__(self, kernel: Kernel, task: Task, *, keep_alive: bool = False) -> None:
        self.kernel = kernel
        self.task = task
        self.keep_alive = keep_alive
        self.pages_per_node: dict[int, int] = {}
        self.running = False
        self.pids: list[int] = []
        """Processes the exec'd program reports on (stress: its workers)."""
        self.program_syscalls: list[tuple[str, str, SyscallResult]] = []

    def configured_nodes(self) -> list[int]:
        return list(self.kernel.machine.node_ids)

    def node_cpus(self, nid: int) -> list[int]:
        return list(self.kernel.machine.node(nid).cpus)

    def configured_cpus(self) -> int:
        cpus = self.kernel.machine.cpus
        return (max(cpus) + 1) if cpus else 0

    def node_meminfo_bytes(self, nid: int) -> tuple[int, int]:
        from numasim.units import PAGE_SIZE_BYTES

        total = int(self.kernel.total_pages_per_node()[nid]) * PAGE_SIZE_BYTES
        free = int(self.kernel.free_pages_per_node()[nid]) * PAGE_SIZE_BYTES
        return total, free

    def distance(self, a: int, b: int) -> int:
        m = self.kernel.machine
        return int(m.slit()[m.index_of(a)][m.index_of(b)])

    def weighted_interleave_weight(self, nid: int) -> int:
        return int(self.kernel.weighted_interleave_weights.get_il_weight(nid))

    def mems_allowed(self) -> frozenset[int]:
        return frozenset(self.task.mems_allowed)

    def cpus_allowed(self) -> frozenset[int]:
        return frozenset(self.task.cpus_allowed)

    def sched_setaffinity(self, cpus: frozenset[int]) -> SyscallResult:
        return self.kernel.sched_setaffinity(self.task, cpus)

    def set_mempolicy(self, mode: int, nodes: frozenset[int], maxnode: int) -> SyscallResult:
        return self.kernel.set_mempolicy(self.task, mode, nodes, maxnode)

    def get_mempolicy(self, flags: int) -> SyscallResult:
        return self.kernel.get_mempolicy(self.task, flags)

    def execvp(self, argv: Sequence[str]) -> ProgramOutcome | None:
        from numasim.kernel.programs import run_program

        run = run_program(self.kernel, self.task, argv, keep_alive=self.keep_alive)
        if run is None:
            return None
        self.pids = list(run.pids)
        self.pages_per_node = dict(run.pages_per_node)
        self.running = run.running
        self.program_syscalls = list(run.syscalls)
        return run.outcome()


def run_numactl(
    kernel: Kernel, argv: Sequence[str], *, task: Task | None = None, keep_alive: bool = False
) -> NumactlRun:
    """Run ``numactl argv...`` as a new process on ``kernel`` (or inside ``task``), with its program.

    The process starts like a shell's child: default policy, all cpus of the root cpuset, running on the
    lowest one. ``program_pids`` names the processes whose memory the program placed and
    ``program_pages_per_node`` their pages per node when it finished. A finished program exits (its memory is
    freed) unless ``keep_alive``; a still-running one (stress without ``-t``) stays.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> from numasim.kernel.kernel import Kernel
    >>> run = run_numactl(Kernel(glueless(2)), ["--interleave=0,1", "--show"])
    >>> run.stdout.splitlines()[:3]
    ['policy: interleave', 'preferred node: 0 (interleave next)', 'interleavemask: 0 1 ']
    """
    spawned = task is None
    if task is None:
        task = kernel.spawn("numactl")
        from numasim.kernel.programs import load_image

        load_image(kernel, task)
    proc = KernelProcess(kernel, task, keep_alive=keep_alive)
    run = numactl_main(
        proc, argv, has_preferred_many=kernel.version >= (5, 15), hardware_style=kernel.machine.numactl_style or "2.0.19"
    )
    run.program_pages_per_node = dict(proc.pages_per_node)
    if spawned and not keep_alive and not proc.running and task.pid in kernel.tasks:
        kernel.exit(task)  # numactl exited (--show, an error) or its program finished
    run.task_pid = task.pid
    run.program_pids = proc.pids or ([task.pid] if run.command else [])
    run.syscalls.extend(proc.program_syscalls)
    return run
