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
usage text, error lines) are numactl's, byte for byte. The shared-memory options (``shm.c``) act on the
simulated kernel: ``--shm KEYFILE`` attaches (or, with ``--length``, creates) the System V segment of
``ftok(KEYFILE, --shmid)`` (``--huge``: ``SHM_HUGETLB``, from the hugetlb pool), ``--file PATH`` a tmpfs file;
a policy option then ``mbind``s the region ``[--offset, --offset + --length)`` (``--strict``: MPOL_MF_STRICT),
``--touch`` faults it in, ``--dump`` / ``--dump-nodes`` print its policies and nodes, ``--verify`` checks them.
Key files and tmpfs files live in the simulated machine, not on disk; segments outlive the command within
one kernel (``--after`` chains).

The module only needs a :class:`NumaProcess` (what libnuma sees of the system and of its own process);
:func:`numasim.tools.programs.run_numactl` binds one to the simulated kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

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
    from numasim.timing.model import Calibration

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
_T = TypeVar("_T")

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
    "EFBIG": "File too large",
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

    # --- shared memory (numactl's shm.c) ---------------------------------------------------------------------
    def shm_key_file(self, name: str) -> bool:
        """``ftok`` needs the key file ``name``: True if it existed, False if it had to be created."""
        ...

    def shmget(self, name: str, proj: int, size_bytes: int, *, create: bool, huge: bool, mode: int) -> SyscallResult:
        """``shmget(ftok(name, proj), size, flags)``: ``value["shmid"]``."""
        ...

    def shm_size(self, shmid: int) -> int:
        """``shmctl(IPC_STAT).shm_segsz``."""
        ...

    def shmat(self, shmid: int) -> SyscallResult:
        """``shmat(shmid, NULL, 0)``: ``value["addr"]``."""
        ...

    def tmpfs_open(self, path: str, size_bytes: int, *, create: bool) -> SyscallResult:
        """``open`` (and ``ftruncate`` up to ``size_bytes``) a tmpfs file: ENOENT if it does not exist and not
        ``create``, EFBIG if numasim cannot hold that size."""
        ...

    def tmpfs_mmap(self, path: str, length: int, offset: int) -> SyscallResult:
        """``mmap(NULL, length, RW, MAP_SHARED, fd, offset)``: ``value["addr"]``."""
        ...

    def huge_page_size(self) -> int:
        """``Hugepagesize`` of /proc/meminfo, in bytes."""
        ...

    def mbind(self, addr: int, length: int, mode: int, nodes: frozenset[int] | None, maxnode: int,
              flags: int) -> SyscallResult: ...  # fmt: skip

    def get_mempolicy_addr(self, flags: int, addr: int) -> SyscallResult:
        """``get_mempolicy(..., addr, MPOL_F_ADDR | flags)`` (``MPOL_F_NODE`` faults a missing page in)."""
        ...

    def touch(self, addr: int, length: int) -> None:
        """``numa_police_memory``: read and write one byte of every page."""
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
    program_running: bool = False
    """The program runs on when numactl returns (stress without ``-t``, ``sleep inf``)."""
    program_duration_s: float = 0.0
    """How long the program runs, simulated seconds (:attr:`numasim.tools.programs.ProgramRun.duration_s`)."""
    timed_by: str = ""
    """What the program's numbers rest on, where it is a measurement tool (:attr:`ProgramRun.timed_by`)."""


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
    # numactl's shm.c globals
    shm_attached: bool = False
    shm_len: int = 0
    shm_offset: int = 0
    shm_mode: int = 0o600
    shm_huge: bool = False
    shm_id: int = 0
    shm_ptr: int = 0
    shm_pagesize: int = 4096
    mask: frozenset[int] | None = None
    did_cpubind: bool = False
    do_dump: bool = False
    exitcode: int = 0


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

    # --- shm.c -----------------------------------------------------------------------------------------------
    def nerror(msg: str, errno: str | None) -> None:
        err.append(f"numactl: {msg}" + (f": {STRERROR.get(errno, errno)}\n" if errno else "\n"))
        raise _Exit(1)

    def check_region(opt: str) -> None:
        if state.shm_ptr % state.shm_pagesize or state.shm_len % state.shm_pagesize:
            err.append("numactl: policy region not page aligned\n")
            raise _Exit(1)
        if not state.shm_len:
            err.append(f"numactl: policy region length not specified before {opt}\n")
            raise _Exit(1)

    def attach_sysv(name: str) -> None:
        if not proc.shm_key_file(name):
            err.append(f"numactl: Creating shm key file {name} mode {state.shm_mode:04o}\n")
        res = proc.shmget(name, state.shm_id, state.shm_len, create=False, huge=state.shm_huge, mode=state.shm_mode)
        if not res.ok and res.errno == "ENOENT":
            if state.shm_len == 0:
                complain("need a --length to create a sysv shared memory segment")
            total = (state.shm_len + state.shm_offset) % (1 << 64)  # unsigned long long arithmetic
            err.append(f"numactl: Creating shared memory segment {name} id {state.shm_id} mode {state.shm_mode:04o} "
                       f"length {total / (1024 * 1024):.0f}MB\n")  # fmt: skip
            res = proc.shmget(name, state.shm_id, total, create=True, huge=state.shm_huge, mode=state.shm_mode)
            if not res.ok:
                nerror("cannot create shared memory segment", res.errno)
        shmid = int(res.value["shmid"]) if res.ok else -1
        if state.shm_len == 0 and shmid >= 0:
            state.shm_len = proc.shm_size(shmid)
        at = proc.shmat(shmid) if shmid >= 0 else SyscallResult.fail("EINVAL", "no segment")
        if not at.ok:
            err.append(f"numactl: shmat: {STRERROR.get(at.errno or 'EINVAL', at.errno)}\n")
            raise _Exit(1)
        state.shm_ptr = int(at.value["addr"]) + state.shm_offset
        state.shm_pagesize = proc.huge_page_size() if state.shm_huge else 4096
        check_region("--shm")

    def attach_file(name: str) -> None:
        total = (state.shm_len + state.shm_offset) % (1 << 64)
        if not proc.tmpfs_open(name, 0, create=False).ok:
            if state.shm_len == 0:
                complain("need a --length to create a shared file")
            res = proc.tmpfs_open(name, total, create=True)
        else:
            res = proc.tmpfs_open(name, total, create=False)  # ftruncate up to the region
        if not res.ok:
            perror("ftruncate", res.errno or "EFBIG")
            raise _Exit(1)
        state.shm_pagesize = 4096  # st_blksize of tmpfs
        check_region("--file")  # (numactl checks before it maps: the address is still 0)
        at = proc.tmpfs_mmap(name, state.shm_len, state.shm_offset)
        if not at.ok:
            err.append(f"numactl: shm mmap: {STRERROR.get(at.errno or 'EINVAL', at.errno)}\n")
            raise _Exit(1)
        state.shm_ptr = int(at.value["addr"])

    def check_shmbeyond(opt: str) -> None:
        if state.shm_offset >= state.shm_len:
            err.append(f"numactl: region offset {_hash_x(state.shm_offset)} beyond its length "
                       f"{_hash_x(state.shm_len)} at {opt}\n")  # fmt: skip
            raise _Exit(1)

    def shm_bind(mode: int, nodes: frozenset[int] | None, what: str) -> None:
        from numasim.kernel.mempolicy import MPOL_MF_STRICT

        flags = MPOL_MF_STRICT if state.strict else 0
        res = proc.mbind(state.shm_ptr, state.shm_len, mode, nodes, DEFAULT_NODEMASK_BITS if nodes is not None else 0,
                         flags)  # fmt: skip
        calls.append(("mbind", f"{_mode_text(mode)}, {_nodes_text(nodes or frozenset())}", res))
        if not res.ok:  # libnuma's numa_error("mbind"), then numactl's checkerror
            perror("mbind", res.errno or "EINVAL")
            perror(what, res.errno or "EINVAL")
            raise _Exit(1)

    def policy_at(addr: int) -> tuple[int, frozenset[int]]:
        res = proc.get_mempolicy_addr(0, addr)
        if not res.ok:
            perror("numactl: get_mempolicy on shm", res.errno or "EINVAL")
            raise _Exit(1)
        return int(res.value.get("mode", 0)), frozenset(res.value.get("nodemask") or frozenset())

    def node_at(addr: int) -> int:
        res = proc.get_mempolicy_addr(MPOL_F_NODE, addr)
        if not res.ok:
            perror("numactl: get_mempolicy on shm", res.errno or "EINVAL")
            raise _Exit(1)
        return int(res.value.get("mode", res.value.get("node", -1)))

    def dump_runs(value_at: Callable[[int], _T], text: Callable[[_T], str | None]) -> None:
        """shm.c's dump_shm / dump_shm_nodes: one line per run of pages with the same value (None: no line)."""
        if state.shm_len == 0:
            out.append("nothing to dump\n")
            return
        pages = range(0, state.shm_len, state.shm_pagesize)
        for start, end, value in _runs([value_at(state.shm_ptr + c) for c in pages], state.shm_pagesize):
            line = text(value)
            if line is not None:
                out.append(f"{state.shm_offset + start:016x}-{state.shm_offset + end:016x}: {line}")

    def dump_shm() -> None:
        dump_runs(policy_at, lambda v: None if v[0] == MPOL_DEFAULT else f"{_policy_name(v[0])} " + _printmask("", v[1]))

    def dump_shm_nodes() -> None:
        dump_runs(node_at, lambda node: f"{node}\n")

    def verify_shm(policy: int, nodes: frozenset[int]) -> None:
        def vwarn(p: int, text: str) -> None:
            out.append(f"numactl verify {p:x}({p - state.shm_ptr:x}): {text}")
            state.exitcode = 1

        ilnode = node_at(state.shm_ptr) if policy == MPOL_INTERLEAVE else -1
        for p in range(state.shm_ptr, state.shm_ptr + state.shm_len, state.shm_pagesize):
            pol2, nodes2 = policy_at(p)
            if pol2 != policy:
                vwarn(p, f"wrong policy {_policy_name(pol2)}, expected {_policy_name(policy)}\n")
                return
            if nodes2 != nodes:
                vwarn(p, "mismatched node mask\n")
                out.append(_printmask("expected", nodes))
                out.append(_printmask("real", nodes2))
            node = node_at(p)
            if policy == MPOL_INTERLEAVE:
                if node < 0 or node not in nodes2:
                    vwarn(p, f"interleave node out of range {node}\n")
                if node != ilnode:
                    vwarn(p, f"expected interleave node {ilnode}, got {node}\n")
                    return
                ilnode = _interleave_next(ilnode, nodes2)
            elif policy in (MPOL_PREFERRED_MANY, MPOL_PREFERRED, MPOL_BIND):
                if node not in nodes2:
                    vwarn(p, f"unexpected node {node}\n")
                    out.append(_printmask("expected", nodes2))

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
                state.mask = mask
                if state.shm_attached:  # numa_interleave_memory: plain interleave, weighted or not
                    shm_bind(MPOL_INTERLEAVE, mask, "setting interleave mask")
                else:
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
                state.did_cpubind = True
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
                state.did_cpubind = True
                res = proc.sched_setaffinity(cpuset)
                calls.append(("sched_setaffinity", _nodes_text(cpuset), res))
                if not res.ok:
                    perror("sched_setaffinity", res.errno or "EINVAL")
                    raise _Exit(1)
            elif key == "m":
                setpolicy(MPOL_BIND)
                mask = parse_nodes(arg)
                state.did_parse = True
                state.mask = mask
                if state.shm_attached:  # numa_tonodemask_memory with bind_policy MPOL_BIND
                    shm_bind(MPOL_BIND, mask, "setting membind")
                elif state.balancing:
                    # numa_set_membind_balancing passes maxnode = size + 1
                    res = setpol(MPOL_BIND | MPOL_F_NUMA_BALANCING, mask, DEFAULT_NODEMASK_BITS + 1)
                    if not res.ok and res.errno == "EINVAL":
                        res = setpol(MPOL_BIND, mask)
                else:
                    res = setpol(MPOL_BIND, mask)
                if not state.shm_attached and not res.ok:
                    syscall_failed(res, "set_mempolicy", "setting membind")
            elif key in ("p", "P"):
                if key == "P" and not has_preferred_many:
                    complain("preferred-many requested without kernel support")
                mask = parse_nodes(arg)
                state.did_parse = True
                state.mask = mask
                if state.shm_attached:
                    # numa_tonode_memory(first node) with bind_policy after numa_set_bind_policy(0)
                    pol = MPOL_PREFERRED_MANY if has_preferred_many else MPOL_PREFERRED
                    shm_bind(pol, frozenset({min(mask)}) if mask else frozenset(), "setting preferred node")
                    setpolicy(pol)
                elif key == "p":
                    if len(mask) != 1:
                        usage()
                    setpolicy(MPOL_PREFERRED)
                    res = setpol(MPOL_PREFERRED, frozenset({min(mask)}))
                else:
                    setpolicy(MPOL_PREFERRED_MANY)
                    res = setpol(MPOL_PREFERRED_MANY, mask)
                if not state.shm_attached and not res.ok:
                    syscall_failed(res, "set_mempolicy", "setting preferred node")
            elif key == "l":
                setpolicy(MPOL_LOCAL)
                if state.shm_attached:
                    shm_bind(MPOL_LOCAL, None, "local allocation")
                else:
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
                state.strict = True  # numa_set_strict(1): later mbinds carry MPOL_MF_STRICT
            elif key in ("L", "o", "M", "u"):
                name = {"L": "--length", "o": "--offset", "M": "--shmmode", "u": "--huge"}[key]
                if state.shm_attached:  # noshm()
                    usage_msg(f"{name} must be before shared memory specification")
                state.shmoption = name
                if key == "L":
                    state.shm_len = memsize(arg)
                elif key == "o":
                    state.shm_offset = memsize(arg)
                elif key == "M":
                    try:
                        state.shm_mode = int(arg, 8)
                    except ValueError:
                        usage()
                else:
                    state.shm_huge = True
            elif key == "I":
                try:
                    state.shm_id = int(arg, 0)
                except ValueError:
                    usage()
            elif key in ("S", "f"):
                if state.did_cpubind:
                    usage_msg("cannot do --cpubind on shared memory\n")
                if state.set_policy >= 0:
                    usage_msg("specify policy after --shm/--file")
                (attach_sysv if key == "S" else attach_file)(arg)
                state.shm_attached = True
            elif key in ("d", "D"):
                if not state.shm_attached:
                    complain(f"Cannot do {'--dump' if key == 'd' else '--dump-nodes'} without shared memory.\n")
                (dump_shm if key == "d" else dump_shm_nodes)()
                state.do_dump = True
            elif key == "T":
                if not state.shm_attached:
                    usage_msg("--touch must be after shared memory specification")
                check_shmbeyond("--touch")
                proc.touch(state.shm_ptr, state.shm_len)
            elif key == "V":
                if not state.shm_attached:
                    usage_msg("--verify must be after shared memory specification")
                if state.set_policy < 0:
                    complain("Need a policy first to verify")
                check_shmbeyond("--verify")
                proc.touch(state.shm_ptr, state.shm_len)
                if state.mask is None:
                    complain("Need a mask to verify")
                assert state.mask is not None
                verify_shm(state.set_policy, state.mask)
        else:  # pragma: no cover - getopt always ends with the "" item
            command = []
        if state.hardware:
            out.append(format_hardware(proc, cpu_compress=state.compress, style=hardware_style))
            raise _Exit(0)
        if state.shm_attached:
            if command:
                usage()
            raise _Exit(state.exitcode)
        if state.strict:
            err.append("numactl: warning. Strict flag for process ignored.\n")
        if state.do_dump:
            usage_msg("cannot do --dump|--dump-shm for process")
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


def memsize(text: str) -> int:
    """numactl's ``memsize``: ``strtoul(s, &end, 0)`` then a ``g``/``m``/``k`` suffix (no other checking).

    Examples
    --------
    >>> memsize("20m"), memsize("0x10k"), memsize("2G"), memsize("junk")
    (20971520, 16384, 2147483648, 0)
    """
    import re

    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?", text)
    assert m is not None  # every part is optional
    sign, digits = m.group(1), m.group(2) or ""
    if digits[:2].lower() == "0x":
        value = int(digits, 16)
    elif digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits or "0")
    if sign == "-":
        value = (-value) % (1 << 64)  # strtoul negates in unsigned arithmetic
    factor = {"G": 1 << 30, "M": 1 << 20, "K": 1 << 10}.get(text[m.end() : m.end() + 1].upper(), 1)
    return value * factor


def _hash_x(value: int) -> str:
    """C's ``%#llx``: ``0`` for zero, ``0x...`` otherwise."""
    return "0" if value == 0 else f"{value:#x}"


def _policy_name(pol: int) -> str:
    return POLICY_NAMES[pol] if 0 <= pol < len(POLICY_NAMES) else f"[{pol}]"


def _interleave_next(cur: int, mask: frozenset[int]) -> int:
    """shm.c ``interleave_next``: the next node of ``mask`` after ``cur``, wrapping."""
    bigger = [n for n in sorted(mask) if n > cur]
    return bigger[0] if bigger else min(mask)


def _runs(values: list[_T], step: int) -> list[tuple[int, int, _T]]:
    """Consecutive equal values as ``(start, end, value)`` byte ranges of ``step`` bytes each."""
    out: list[tuple[int, int, _T]] = []
    for k, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], (k + 1) * step, v)
        else:
            out.append((k * step, (k + 1) * step, v))
    return out


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

    def __init__(
        self, kernel: Kernel, task: Task, *, keep_alive: bool = False, calibration: Calibration | None = None
    ) -> None:
        self.kernel = kernel
        self.task = task
        self.keep_alive = keep_alive
        self.calibration = calibration
        """What the timed programs this process execs time with (``None``: the one the machine names)."""
        self.pages_per_node: dict[int, int] = {}
        self.running = False
        self.duration_s = 0.0
        self.timed_by = ""
        """How long the exec'd program runs, simulated seconds (:attr:`ProgramRun.duration_s`)."""
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

    # --- shared memory -----------------------------------------------------------------------------------------
    def shm_key_file(self, name: str) -> bool:
        if name in self.kernel.shm_key_files:
            return True
        self.kernel.shm_key_files.add(name)
        return False

    def shmget(self, name: str, proj: int, size_bytes: int, *, create: bool, huge: bool, mode: int) -> SyscallResult:
        return self.kernel.shmget_key((name, proj), size_bytes, create=create, huge=huge, mode=mode)

    def shm_size(self, shmid: int) -> int:
        return int(self.kernel.shm_segments[shmid].size_requested)

    def shmat(self, shmid: int) -> SyscallResult:
        seg = self.kernel.shm_segments.get(shmid)
        if seg is None:
            return SyscallResult.fail("EINVAL", f"no segment {shmid}")
        return SyscallResult.success(addr=self.kernel.shmat(self.task, seg).start)

    def tmpfs_open(self, path: str, size_bytes: int, *, create: bool) -> SyscallResult:
        try:
            seg = self.kernel.tmpfs_file(path, size_bytes, create=create)
        except ValueError as exc:
            return SyscallResult.fail("EFBIG", str(exc))
        return SyscallResult.success() if seg is not None else SyscallResult.fail("ENOENT", path)

    def tmpfs_mmap(self, path: str, length: int, offset: int) -> SyscallResult:
        seg = self.kernel.tmpfs_files.get(path)
        if seg is None or length <= 0 or offset % 4096:
            return SyscallResult.fail("EINVAL", f"mmap of {path}")
        return SyscallResult.success(addr=self.kernel.shmat(self.task, seg, offset=offset, length=length).start)

    def huge_page_size(self) -> int:
        return 2 << 20

    def mbind(self, addr: int, length: int, mode: int, nodes: frozenset[int] | None, maxnode: int,
              flags: int) -> SyscallResult:  # fmt: skip
        return self.kernel.mbind(self.task, addr, length, mode, nodes, maxnode or None, flags)

    def get_mempolicy_addr(self, flags: int, addr: int) -> SyscallResult:
        from numasim.kernel.mempolicy import MPOL_F_ADDR

        return self.kernel.get_mempolicy(self.task, flags | MPOL_F_ADDR, addr)

    def touch(self, addr: int, length: int) -> None:
        self.kernel.touch(self.task, addr, length)

    def execvp(self, argv: Sequence[str]) -> ProgramOutcome | None:
        from numasim.tools.programs import run_program

        run = run_program(self.kernel, self.task, argv, keep_alive=self.keep_alive, calibration=self.calibration)
        if run is None:
            return None
        self.pids = list(run.pids)
        self.pages_per_node = dict(run.pages_per_node)
        self.running = run.running
        self.duration_s = run.duration_s
        self.timed_by = run.timed_by
        self.program_syscalls = list(run.syscalls)
        return run.outcome()


def run_numactl(
    kernel: Kernel, argv: Sequence[str], *, task: Task | None = None, keep_alive: bool = False,
    cpus: Iterable[int] | None = None, calibration: Calibration | None = None, pid: int | None = None,
) -> NumactlRun:
    """Run ``numactl argv...`` as a new process on ``kernel`` (or inside ``task``), with its program.

    The process starts like a shell's child: default policy, all cpus of the root cpuset, running on the
    lowest one. ``program_pids`` names the processes whose memory the program placed and
    ``program_pages_per_node`` their pages per node when it finished. A finished program exits (its memory is
    freed) unless ``keep_alive``; a still-running one (stress without ``-t``) stays. ``cpus``: the affinity a new
    process starts with (its shell's, ``taskset -p -c LIST $$``; default every cpu of the root cpuset).
    ``calibration``: what the timed programs it execs (``lat_mem_rd``, ``mlc``, ...) time with; ``None``, the
    one the machine names (:func:`numasim.timing.resolve.resolve_calibration`). ``pid``: the new process's PID
    (a shim's own, so that the shell's ``$!`` names it; default: the kernel's next).

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
        task = kernel.spawn("numactl", cpus=cpus, pid=pid)
        from numasim.tools.programs import load_image

        load_image(kernel, task)
    proc = KernelProcess(kernel, task, keep_alive=keep_alive, calibration=calibration)
    run = numactl_main(
        proc, argv, has_preferred_many=kernel.version >= (5, 15), hardware_style=kernel.machine.numactl_style or "2.0.19"
    )
    run.program_pages_per_node = dict(proc.pages_per_node)
    run.program_running, run.program_duration_s = proc.running, proc.duration_s
    run.timed_by = proc.timed_by
    if spawned and not keep_alive and not proc.running and task.pid in kernel.tasks:
        kernel.exit(task)  # numactl exited (--show, an error) or its program finished
    run.task_pid = task.pid
    run.program_pids = proc.pids or ([task.pid] if run.command else [])
    run.syscalls.extend(proc.program_syscalls)
    return run
