"""numactl's own test programs (numactl/test/*.c) as virtual programs on the simulated kernel.

``make check`` builds them into ``test/`` of numactl's build directory and the test scripts (``test/regress``,
``regress2``, ``regress-io``, ``shmtest``) run them from there; ``numasim shims DIR`` writes ``DIR/test/NAME``
for each. Every program makes the syscalls the C program makes (mmap, mbind, get_mempolicy, move_pages,
migrate_pages, fork) on the task numactl or the shim started, and prints what the C program prints, with its
exit status:

* ``pagesize``: ``getpagesize()``;
* ``distance``: the SLIT row of every node (``%03d``), exit 1 on a self distance other than 10 or an asymmetry;
* ``node-parse ARG...``: ``numa_parse_nodestring`` of each argument (``result: 0 1 `` or ``Failed to convert``);
  the I/O prefixes are looked up as libnuma's ``affinity.c`` looks them up, on the simulated machine, with
  libnuma's warnings (:func:`io_affinity_node`);
* ``tbitmap``: libnuma's bitmap printer and parser round trip for every bit of a 300-bit mask;
* ``prefered``: MPOL_PREFERRED then MPOL_PREFERRED_MANY on one page per node (an ``assert`` that fails aborts:
  exit 134, as the shell reports SIGABRT);
* ``mynode``: the node of a freshly touched ``numa_alloc`` page;
* ``tshared``: 10 forked children touch a 100 MiB ``numa_alloc_interleaved`` buffer, then the parent checks that
  page *i* is on node ``i % (max_node + 1)`` (the children's writes are copy-on-write: the parent's own
  ``get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR)`` faults each page in);
* ``realloc_test [NODE [PAGES]]``: ``numa_realloc`` (mremap) one page at a time; the policy must follow;
* ``migrate_pages [N]``, ``mbind_mig_pages [N]``: N pages (default 32, page 2 left untouched) moved with
  ``move_pages``, then ``migrate_pages(2)`` or ``mbind(MPOL_MF_MOVE|MPOL_MF_STRICT)``;
* ``ftok PATH...``: ``ftok(PATH, 0)`` of the real file (``0xffffffff`` when it does not exist).

``nodemap`` and ``move_pages`` live with the kernel's programs (:mod:`numasim.tools.programs`), ``randmap`` in
:mod:`numasim.tools.randmap`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_F_ADDR,
    MPOL_F_NODE,
    MPOL_INTERLEAVE,
    MPOL_MF_MOVE,
    MPOL_MF_STRICT,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
)
from numasim.kernel.nodestring import NodeStringError, ParseContext, parse_nodestring
from numasim.tools.programs import ProgramRun
from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.errno import SyscallResult
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = ["NUMACTL_TEST_PROGRAMS", "libnuma_node_context", "io_affinity_node", "strerror", "format_printmask"]

_POSSIBLE_NODES = 1024
"""``numa_num_possible_nodes()`` on an x86_64 distribution kernel (the size of libnuma's node bitmasks)."""
_SIGABRT_STATUS = 134


def strerror(errno: str | None) -> str:
    """glibc's ``strerror`` text of an errno name (what ``perror`` prints after the colon)."""
    from numasim.tools.numactl import STRERROR

    return STRERROR.get(errno or "", errno or "Unknown error")


def format_printmask(name: str, bits: frozenset[int] | set[int]) -> str:
    """numactl util.c ``printmask``: ``NAME: `` then ``%d `` per set bit, then a newline."""
    return f"{name}: " + "".join(f"{b} " for b in sorted(bits)) + "\n"


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
"""Names ``getaddrinfo`` resolves from ``/etc/hosts`` on a box without DNS (glibc's and Debian's defaults)."""


def _bad_io_argument(text: str, warning: str) -> NodeStringError:
    # affinity.c's numa_warn() text; numa_parse_nodestring then fails (its caller prints "Failed to convert")
    return NodeStringError(text, warning)


def _parse_pci(ident: str) -> tuple[int, int, int, int] | None:
    """``affinity_pci``'s two ``sscanf`` forms: ``SEG:BUS:DEV[.FN]`` or ``BUS:DEV[.FN]`` (hex); None when
    neither converts enough fields."""
    m = re.match(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.([0-9a-fA-F]+))?", ident)
    if m:
        return int(m[1], 16), int(m[2], 16), int(m[3], 16), int(m[4] or "0", 16)
    m = re.match(r"([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.([0-9a-fA-F]+))?", ident)
    if m:
        return 0, int(m[1], 16), int(m[2], 16), int(m[3] or "0", 16)
    return None


def _is_ip_literal(host: str) -> bool:
    import socket

    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return True
    return False


def io_affinity_node(kernel: Kernel, kind: str, ident: str) -> int | None:
    """The node libnuma's ``resolve_affinity`` (numactl ``affinity.c``) gives I/O specification ``kind:ident``
    on the simulated machine; raises :class:`NodeStringError` with libnuma's warning when it fails.

    The simulated machine's device tree is its model's devices (``[[devices]]``: a name and a node, no PCI
    address, no ``dev_t``), and it has no network interface but ``lo`` and no route beyond it, so:

    * ``netdev:NAME``, ``block:NAME`` (``affinity_class``): the device named NAME; a name with ``/`` or ``.``
      is refused first (``badchar``); another is ``Cannot read node mask for net|block device `NAME'`` (no
      ``/sys/class/CLS/NAME/device/numa_node``).
    * ``pci:ADDR`` (``affinity_pci``): an address that does not parse is ``Cannot parse PCI device `ADDR'``,
      unless it is the name of a device (numasim's extension: a machine file gives devices no address); a
      parsed address names no function here: ``Cannot read node mask for  device `ADDR'`` (``cls`` is NULL,
      hence the two spaces).
    * ``file:PATH`` (``affinity_file``): ``stat`` of the real file (``Cannot stat file PATH``); no block device
      of the machine has its ``st_dev``: ``Cannot find block device 0:0 in sysfs for `PATH'`` (the
      ``maj:min`` printed are those of the last device enumerated, none here).
    * ``ip:HOST`` (``affinity_ip``): a loopback address routes through ``lo``, which has no ``device/``
      (``Cannot read node mask for net device `lo'``); another literal address has no route
      (``Cannot request rtnetlink route: Network is unreachable``); a name other than localhost's does not
      resolve without a network (``Cannot resolve HOST: Temporary failure in name resolution``).

    Examples
    --------
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.topology.builders import glueless
    >>> try:
    ...     io_affinity_node(Kernel(glueless(2)), "pci", "0:0.0")
    ... except NodeStringError as exc:
    ...     print(exc.warning)
    Cannot read node mask for  device `0:0.0'
    """
    text = f"{kind}:{ident}"
    devices = {d.name: d.node for d in kernel.machine.devices}
    if kind in ("netdev", "block"):
        cls = "net" if kind == "netdev" else "block"
        if "/" in ident or "." in ident:
            raise _bad_io_argument(text, f"Illegal characters in `{ident}' specification")
        if ident in devices:
            return devices[ident]
        raise _bad_io_argument(text, f"Cannot read node mask for {cls} device `{ident}'")
    if kind == "pci":
        if _parse_pci(ident) is None:
            if ident in devices:
                return devices[ident]
            raise _bad_io_argument(text, f"Cannot parse PCI device `{ident}'")
        raise _bad_io_argument(text, f"Cannot read node mask for  device `{ident}'")
    if kind == "file":
        try:
            os.stat(ident)
        except OSError:
            raise _bad_io_argument(text, f"Cannot stat file {ident}") from None
        raise _bad_io_argument(text, f"Cannot find block device 0:0 in sysfs for `{ident}'")
    if kind == "ip":
        import ipaddress

        if ident in _LOOPBACK_NAMES or (_is_ip_literal(ident) and ipaddress.ip_address(ident).is_loopback):
            raise _bad_io_argument(text, "Cannot read node mask for net device `lo'")
        if _is_ip_literal(ident):
            raise _bad_io_argument(text, "Cannot request rtnetlink route: Network is unreachable")
        raise _bad_io_argument(text, f"Cannot resolve {ident}: Temporary failure in name resolution")
    return None


def libnuma_node_context(kernel: Kernel, task: Task) -> ParseContext:
    """What ``numa_parse_nodestring`` parses against: the task's allowed memory nodes, every configured node
    for ``!``, and the machine's devices for the I/O prefixes (:func:`io_affinity_node`)."""

    def resolve(kind: str, ident: str) -> int | None:
        return io_affinity_node(kernel, kind, ident)

    allowed = frozenset(task.mems_allowed) & kernel.memory_nodes
    return ParseContext(allowed, len(kernel.machine.node_ids), devices=resolve)


def _assert_failed(run: ProgramRun, prog: str, line: int, expr: str) -> ProgramRun:
    # glibc's __assert_fail, then abort(): the shell reports SIGABRT as status 128 + 6
    run.stderr += f"{prog}: test/{prog}.c:{line}: main: Assertion `{expr}' failed.\n"
    run.exit_code = _SIGABRT_STATUS
    return run


def _fail(run: ProgramRun, what: str, res: SyscallResult, code: int = 1) -> ProgramRun:
    """``perror(what); exit(code)``."""
    run.stderr += f"{what}: {strerror(res.errno)}\n"
    run.exit_code = code
    return run


def _killed(run: ProgramRun) -> ProgramRun:
    run.stderr += "Killed\n"
    run.exit_code = 137
    return run


def _max_node(kernel: Kernel) -> int:
    return max(kernel.machine.node_ids)  # numa_max_node()


# --- the programs -------------------------------------------------------------------------------------------


def _pagesize(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/pagesize: print getpagesize()."""
    return ProgramRun(stdout=f"{PAGE_SIZE_BYTES}\n", pids=[task.pid])


def _distance(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/distance: numa_distance between every pair of nodes, checked for symmetry."""
    run = ProgramRun(pids=[task.pid])
    m = kernel.machine
    slit = m.slit()
    nodes = sorted(m.node_ids)  # numa_nodes_ptr: every node with a sysfs directory

    def dist(a: int, b: int) -> int:
        return int(slit[m.index_of(a)][m.index_of(b)])

    for a in nodes:
        run.stdout += f"{a:03d}: "
        if dist(a, a) != 10:
            run.stdout += f"{a}: self distance is not 10 ({dist(a, a)})\n"
            run.exit_code = 1
            return run
        for b in nodes:
            d1, d2 = dist(a, b), dist(b, a)
            run.stdout += f"{d1:03d} "
            if d1 != d2:
                run.stdout += f"\n({a},{b})->({d1},{d2}) wrong!\n"
                run.exit_code = 1
                return run
        run.stdout += "\n"
    return run


def _node_parse(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/node-parse: numa_parse_nodestring of each argument."""
    run = ProgramRun(pids=[task.pid])
    ctx = libnuma_node_context(kernel, task)
    for arg in argv[1:]:
        try:
            mask = parse_nodestring(arg, ctx)
        except NodeStringError as exc:
            if exc.warning is not None:
                run.stderr += f"libnuma: Warning: {exc.warning}\n"
            run.stdout += f"Failed to convert `{arg}'\n"
            run.exit_code = 1
            continue
        run.stdout += format_printmask("result", mask)
    return run


def bitmap_scnprintf(bits: frozenset[int], size: int) -> str:
    """The kernel's (and tbitmap.c's) bitmap printer: 32-bit hex chunks, most significant first, joined by
    ``,``; the first chunk only as wide as ``size % 32`` needs."""
    chunks = []
    top = (size + 31) // 32 * 32 - 32
    first_bits = size % 32 or 32
    for i in range(top, -1, -32):
        width = first_bits if i == top else 32
        val = sum(1 << (b - i) for b in bits if i <= b < i + width)
        chunks.append(f"{val:0{(width + 3) // 4}x}")
    return ",".join(chunks)


def numa_parse_bitmap(text: str, size: int) -> frozenset[int] | None:
    """libnuma ``numa_parse_bitmap_v2``: comma-separated 32-bit hex words, last word = bits 0-31; None when a
    word is not hex."""
    words = text.strip().split(",")
    bits: set[int] = set()
    for k, word in enumerate(reversed(words)):
        if not re.fullmatch(r"[0-9a-fA-F]{1,8}", word):
            return None
        val = int(word, 16)
        bits.update(32 * k + b for b in range(32) if val >> b & 1 and 32 * k + b < size)
    return frozenset(bits)


def _tbitmap(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/tbitmap: the bitmap printer and parser round trip for each bit of a 300-bit mask."""
    size = 300
    run = ProgramRun(stdout="Testing bitmap functions\n", pids=[task.pid])
    for i in range(size):
        text = bitmap_scnprintf(frozenset({i}), size)
        back = numa_parse_bitmap(text + "\n", size)
        if back is None:
            return _assert_failed(run, "tbitmap", 94, "0")
        if back != {i}:
            run.stdout += f"mask2 differs: {bitmap_scnprintf(back, size)}\n"
            return _assert_failed(run, "tbitmap", 98, "0")
    run.stdout += "Passed\n"
    return run


def _prefered(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/prefered: MPOL_PREFERRED on each node, then MPOL_PREFERRED_MANY on each pair."""
    run = ProgramRun(pids=[task.pid])
    top = _max_node(kernel)
    ps = PAGE_SIZE_BYTES
    err = 0
    run.stdout += "\nTesting MPOL_PREFERRED policy:\n\n"
    for i in range(top, -1, -1):
        adr = kernel.mmap(task, ps * (top + 1)).start
        run.stdout += f"{i} offset 0\n"
        res = kernel.mbind(task, adr, ps, MPOL_PREFERRED, {i}, _POSSIBLE_NODES)
        if not res.ok:
            return _fail(run, "mbind", res)
        if kernel.touch(task, adr, 1).oom_killed or not task.alive:
            return _killed(run)
        got = kernel.get_mempolicy(task, MPOL_F_ADDR, adr, _POSSIBLE_NODES)
        if not got.ok:
            return _fail(run, "get_mempolicy", got)
        if got.value["mode"] != MPOL_PREFERRED:
            return _assert_failed(run, "prefered", 51, "pol == MPOL_PREFERRED")
        if i not in (got.value["nodemask"] or ()):
            return _assert_failed(run, "prefered", 52, "numa_bitmask_isbitset(mask, i)")
        node = kernel.get_mempolicy(task, MPOL_F_ADDR | MPOL_F_NODE, adr, want_nodemask=False)
        if not node.ok:
            return _fail(run, "get_mempolicy2", node)
        run.stdout += f"got node {node.value['mode']} expected {i}\n"
        err |= int(node.value["mode"]) != i
    if top < 1:
        run.exit_code = err
        return run
    run.stdout += "\nTesting MPOL_PREFERRED_MANY policy:\n\n"
    for i in range(top, 0, -1):
        adr = kernel.mmap(task, ps * (top + 1)).start
        nodes = frozenset({i, i - 1})
        res = kernel.mbind(task, adr, ps, MPOL_PREFERRED_MANY, nodes, _POSSIBLE_NODES)
        if not res.ok:
            return _fail(run, "mbind", res)
        if kernel.touch(task, adr, 1).oom_killed or not task.alive:
            return _killed(run)
        got = kernel.get_mempolicy(task, MPOL_F_ADDR, adr, _POSSIBLE_NODES)
        if not got.ok:
            return _fail(run, "get_mempolicy", got)
        if got.value["mode"] != MPOL_PREFERRED_MANY:
            return _assert_failed(run, "prefered", 85, "pol == MPOL_PREFERRED_MANY")
        mask = frozenset(got.value["nodemask"] or ())
        run.stdout += format_printmask("Got nodes", mask) + format_printmask("Expected nodes", nodes)
        err |= mask != nodes
        node = kernel.get_mempolicy(task, MPOL_F_ADDR | MPOL_F_NODE, adr, want_nodemask=False)
        if not node.ok:
            return _fail(run, "get_mempolicy2", node)
        run.stdout += f"Got node: {node.value['mode']} " + format_printmask("Expected nodes", nodes)
        err |= int(node.value["mode"]) not in nodes
    run.exit_code = err
    return run


def _mynode(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/mynode: the node of a freshly touched numa_alloc page."""
    run = ProgramRun(pids=[task.pid])
    adr = kernel.mmap(task, 1000).start
    if kernel.touch(task, adr, 1).oom_killed or not task.alive:
        return _killed(run)
    got = kernel.get_mempolicy(task, MPOL_F_NODE | MPOL_F_ADDR, adr, want_nodemask=False)
    if not got.ok:
        run.stderr += f"get_mempolicy: {strerror(got.errno)}\n"
    else:
        run.stdout += f"my node {got.value['mode']}\n"
    return run


def _tshared(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/tshared: forked children write an interleaved buffer; the parent checks page i's node."""
    import numpy as np

    from numasim.tools.programs import load_image

    run = ProgramRun(pids=[task.pid])
    size, nthr, ps = 100 << 20, 10, PAGE_SIZE_BYTES
    top = _max_node(kernel)
    all_nodes = frozenset(task.mems_allowed) & kernel.memory_nodes  # numa_all_nodes_ptr
    vma = kernel.mmap(task, size)
    res = kernel.mbind(task, vma.start, size, MPOL_INTERLEAVE, all_nodes)
    run.syscalls.append(("mbind", "MPOL_INTERLEAVE, all nodes", res))
    npages = size // ps
    for i in range(nthr):
        # fork: a private copy of the mapping with its policy; the child's writes fault its own pages
        child = kernel.spawn("tshared", cpus=task.cpus_allowed, cpu=task.cpu, cpuset=task.cpuset, parent=task)
        load_image(kernel, child)
        copy = kernel.mmap(child, size)
        kernel.mbind(child, copy.start, size, MPOL_INTERLEAVE, all_nodes)
        pages = np.arange(i, npages, nthr, dtype=np.int64)
        fault = kernel.touch_pages(child, copy.start + pages * ps, np.full(pages.size, child.cpu))
        if fault.oom_killed and not task.alive:
            return _killed(run)
        kernel.exit(child)
    # the parent's get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) faults each page in, in order
    fault = kernel.touch(task, vma.start, size)
    if fault.oom_killed or not task.alive:
        return _killed(run)
    live = task.find_vma(vma.start)
    nodes = live.nodes[: npages] if live is not None else np.full(npages, -1)
    for i in range(npages):
        expected = i % (top + 1)
        if int(nodes[i]) != expected:
            run.stdout += f"offset {i * ps} node {int(nodes[i])} expected {expected}\n"
    return run


def _parse_int(text: str) -> tuple[int, str | None]:
    """realloc_test's parse_int: strtol(str, &end, 0) of the whole string; (value, rest) when rest is left."""
    from numasim.kernel.nodestring import strtoul

    body = text.lstrip(" \t\n\v\f\r")
    negative = body.startswith("-")
    value, end = strtoul(text)
    if end == 0:
        return 0, text  # nothing converted: endptr is the string itself
    if end != len(text):
        return 0, text[end:]
    signed = -((-value) % (1 << 64)) if negative else value
    return max(min(signed, (1 << 31) - 1), -(1 << 31)), None


def _realloc_test(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/realloc_test [NODE [PAGES]]: numa_realloc one page at a time keeps the policy."""
    run = ProgramRun(pids=[task.pid])
    ps = PAGE_SIZE_BYTES
    node, nr_pages = 0, 1024
    for k, text in enumerate(argv[1:3]):
        value, rest = _parse_int(text)
        if rest is not None:
            run.stderr += f"[error] strtol() failed: parse error: {rest}\n"
            run.exit_code = 1
            return run
        node, nr_pages = (value, nr_pages) if k == 0 else (node, value)
    # numa_alloc_onnode: mmap, then mbind(MPOL_BIND, node); a bad node is libnuma's warning, not an exit
    vma = kernel.mmap(task, ps)
    addr, size = vma.start, ps
    res = kernel.mbind(task, addr, ps, MPOL_BIND, {node} if 0 <= node < _POSSIBLE_NODES else set())
    if not res.ok:
        run.stderr += f"mbind: {strerror(res.errno)}\n"
    first = kernel.get_mempolicy(task, MPOL_F_NODE | MPOL_F_ADDR, addr)
    if not first.ok:
        return _fail(run, "get_mempolicy() failed", first)
    run.stdout += f"Page size: {ps}\nPages realloc'ed: {nr_pages}\nAllocate data in node: {node}\n"
    inplace = moved = 0
    for i in range(max(nr_pages, 0)):
        new_size = (i + 2) * ps
        grown = _mremap(kernel, task, addr, size, new_size)
        if grown is None:
            return _killed(run)
        if grown == addr:
            inplace += 1
        else:
            moved += 1
        addr, size = grown, new_size
        got = kernel.get_mempolicy(task, MPOL_F_NODE | MPOL_F_ADDR, addr)
        if not got.ok:
            return _fail(run, "get_mempolicy() failed", got)
        same = got.value["mode"] == first.value["mode"] and got.value["nodemask"] == first.value["nodemask"]
        if not same:
            return _assert_failed(run, "realloc_test", 88,
                                  'realloc_nodemask == nodemask && realloc_mode == mode && "policy changed"')  # fmt: skip
    kernel.munmap(task, addr, size)
    run.stdout += f"In-place reallocs: {inplace}\nMoved reallocs: {moved}\n"
    return run


def _mremap(kernel: Kernel, task: Task, addr: int, old: int, new: int) -> int | None:
    """``mremap(addr, old, new, MREMAP_MAYMOVE)`` of a private mapping with its own policy: grown in place when
    the pages after it are free, else moved to a new area (policy and resident pages go with it: the kernel
    moves page table entries, so the first page's node is kept by faulting it under the same policy)."""
    vma = task.find_vma(addr)
    assert vma is not None
    policy = vma.policy
    if not task.mm.overlaps(addr + old, addr + new):
        kernel.mmap(task, new - old, addr=addr + old)
        grown = task.find_vma(addr + old)
        if grown is not None:
            grown.policy = policy
        task.mm.merge_around(addr, addr + new)
        return addr
    node = int(vma.nodes[0])
    target = kernel.mmap(task, new)
    target.policy = policy
    kernel.munmap(task, addr, old)
    if node >= 0:
        fault = kernel.touch(task, target.start, 1)
        if fault.oom_killed or not task.alive:
            return None
    return int(target.start)


def _malloc_pages(kernel: Kernel, task: Task, page_count: int) -> int | None:
    """``malloc((pagesize + 1) * page_count)`` rounded up to the next page, as migrate_pages.c and
    mbind_mig_pages.c compute ``pages``; every page but page 2 is written. None if the task was OOM-killed."""
    ps = PAGE_SIZE_BYTES
    vma = kernel.mmap(task, (page_count + 2) * ps)
    base = vma.start + ps
    for lo, hi in ((0, min(2, page_count)), (3, page_count)):
        if hi > lo:
            fault = kernel.touch(task, base + lo * ps, (hi - lo) * ps)
            if fault.oom_killed or not task.alive:
                return None
    return int(base)


def _sscanf_d(text: str, default: int) -> int:
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else default


def _status(res: SyscallResult, count: int, before: list[int]) -> list[int]:
    return [int(v) for v in res.value["status"]] if res.ok else before


def _two_node_test_pages(
    kernel: Kernel, task: Task, argv: Sequence[str], run: ProgramRun, title: str
) -> list[int] | ProgramRun:
    """What test/migrate_pages.c and mbind_mig_pages.c do first: require two nodes, print the title, malloc
    ``argv[1]`` pages (default 32) and return their addresses; or the finished run when one of those fails."""
    if _max_node(kernel) + 1 < 2:
        run.stdout += "A minimum of 2 nodes is required for this test.\n"
        run.exit_code = 1
        return run
    run.stdout += title
    count = _sscanf_d(argv[1], 32) if len(argv) > 1 else 32
    if count <= 0:
        run.stdout += "Unable to allocate memory\n"
        run.exit_code = 1
        return run
    base = _malloc_pages(kernel, task, count)
    if base is None:
        return _killed(run)
    return [base + i * PAGE_SIZE_BYTES for i in range(count)]


def _migrate_pages_test(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/migrate_pages [N]: N pages moved to node 1, then migrate_pages(2) from node 1 to 0."""
    run = ProgramRun(pids=[task.pid])
    pages = _two_node_test_pages(kernel, task, argv, run, "migrate_pages() test ......\n")
    if isinstance(pages, ProgramRun):
        return pages
    count, addrs = len(pages), pages
    res = kernel.move_pages(task, addrs, [1] * count)
    if not res.ok and res.errno != "ENOENT":
        return _fail(run, "move_pages", res)
    run.stdout += "Page location at the beginning of the test\n------------------------------------------\n"
    status = _status(kernel.move_pages(task, addrs), count, [-123] * count)
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:#x} node={status[i]}\n"
        if i != 2 and status[i] != 1:
            run.stdout += f"Bad page state before migrate_pages. Page {i} status {status[i]}\n"
            run.exit_code = 1
            return run
    kernel.move_pages(task, addrs, [1] * count)
    run.stdout += "\nMigrating the current processes pages ...\n"
    errors = 0
    res = kernel.migrate_pages(task, [1], [0])
    run.syscalls.append(("migrate_pages", "1 -> 0", res))
    if res.ret < 0:
        run.stderr += f"numa_migrate_pages failed: {strerror(res.errno)}\n"
        errors += 1
    status = _status(kernel.move_pages(task, addrs), count, status)
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:x} node={status[i]}\n"
        if i != 2 and status[i]:
            run.stdout += "*** Page on the wrong node\n"
            errors += 1
    run.stdout += "Test successful.\n" if not errors else f"{errors} errors.\n"
    run.exit_code = 1 if errors else 0
    return run


def _mbind_mig_pages(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/mbind_mig_pages [N]: N pages moved to node 0, then mbind(MPOL_MF_MOVE) to node 0 and 1."""
    run = ProgramRun(pids=[task.pid])
    nr_nodes = _max_node(kernel) + 1
    pages = _two_node_test_pages(kernel, task, argv, run, "mbind migration test ......\n")
    if isinstance(pages, ProgramRun):
        return pages
    count, addrs = len(pages), pages
    kernel.move_pages(task, addrs, [0] * count)
    run.stdout += "\nPage status before page migration\n---------------------------------\n"
    res = kernel.move_pages(task, addrs)
    if not res.ok:
        return _fail(run, "move_pages", res)
    status = _status(res, count, [-123] * count)
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:#x} node={status[i]}\n"
        if i != 2 and status[i]:
            run.stdout += f"Bad page state. Page {i} status {status[i]}\n"
            run.exit_code = 1
            return run
    errors = 0
    for text, target in (("\nMoving pages via mbind to node 0 ...\n", 0),
                         ("\nMoving pages via mbind from node 0 to 1 ...\n", 1)):  # fmt: skip
        run.stdout += text
        res = kernel.mbind(task, addrs[0], count * PAGE_SIZE_BYTES, MPOL_BIND, {target}, nr_nodes + 1, MPOL_MF_MOVE | MPOL_MF_STRICT)
        run.syscalls.append(("mbind", f"MPOL_BIND {target}, MPOL_MF_MOVE|MPOL_MF_STRICT", res))
        if not res.ok:
            run.stderr += f"mbind: {strerror(res.errno)}\n"
            errors += 1
    status = _status(kernel.move_pages(task, addrs), count, status)
    for i, a in enumerate(addrs):
        run.stdout += f"Page {i} vaddr={a:x} node={status[i]}\n"
        if i != 2 and status[i] != 1:
            run.stdout += "*** Page on wrong node.\n"
            errors += 1
    run.stdout += "Test successful.\n" if not errors else f"{errors} errors.\n"
    run.exit_code = 1 if errors else 0
    return run


def ftok_key(path: str, proj_id: int = 0) -> int:
    """glibc ``ftok``: ``(proj_id & 0xff) << 24 | (st_dev & 0xff) << 16 | (st_ino & 0xffff)``, -1 (as
    ``0xffffffff``) when ``path`` cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return 0xFFFFFFFF
    return ((proj_id & 0xFF) << 24 | (st.st_dev & 0xFF) << 16 | (st.st_ino & 0xFFFF)) & 0xFFFFFFFF


def _ftok(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/ftok: ftok(PATH, 0) of each (real) file, in hex."""
    return ProgramRun(stdout="".join(f"{ftok_key(p):#x}\n" for p in argv[1:]), pids=[task.pid])


NUMACTL_TEST_PROGRAMS: dict[str, Callable[[Kernel, Task, Sequence[str]], ProgramRun]] = {
    "pagesize": _pagesize,
    "distance": _distance,
    "node-parse": _node_parse,
    "tbitmap": _tbitmap,
    "prefered": _prefered,
    "mynode": _mynode,
    "tshared": _tshared,
    "realloc_test": _realloc_test,
    "migrate_pages": _migrate_pages_test,
    "mbind_mig_pages": _mbind_mig_pages,
    "ftok": _ftok,
}
"""Program name (numactl's ``test/NAME``) -> implementation with the kernel program table's signature."""

