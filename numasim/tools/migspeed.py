"""numactl's ``migspeed [-p pages] [-h] [-v] from-nodes to-nodes`` as a virtual program.

It binds ``pages`` pages (default 1000) to the from-nodes, dirties them, prints the ``bind`` lines of its
``/proc/self/numa_maps``, moves the range to the to-nodes with ``mbind(MPOL_BIND, MPOL_MF_MOVE)``, prints the
``bind`` lines again and ``X Mbyte migrated in T secs. R Mbytes/second``.

The time is the simulated kernel's migration cost, not a wall clock: every page the mbind moved costs
:attr:`~numasim.kernel.config.KernelConfig.compact_migrate_page_ns` (isolate, unmap with a TLB flush, copy,
remap: the per-page figure the kernel layer charges for compaction's migrations; nominal 5000 ns, i.e. about
780 MB/s). numasim's timed engine has a bandwidth-based model of a migration's copies (``numasim run --daemon
mbind_move``); migspeed stays a kernel-only command and uses the kernel's per-page figure. Moving nothing
takes 0 s, and the rate prints as ``inf`` as the C program's division by zero does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from numasim.kernel.mempolicy import MPOL_BIND, MPOL_MF_MOVE
from numasim.kernel.nodestring import NodeStringError, parse_nodestring
from numasim.tools.numactl_tests import format_printmask, libnuma_node_context, strerror
from numasim.tools.programs import ProgramRun
from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = ["migspeed", "migration_seconds"]

_DEFAULT_PAGES = 1000


def migration_seconds(kernel: Kernel, pages_moved: int) -> float:
    """Simulated time for the kernel to migrate ``pages_moved`` base pages (module docstring)."""
    return pages_moved * float(kernel.config.compact_migrate_page_ns) * 1e-9


def _usage(cmd: str, pages: int) -> str:
    return (
        f"usage {cmd} [-p pages] [-h] [-v] from-nodes to-nodes\n"
        "      from and to nodes may specified in form N or N-N\n"
        f"      -p pages  number of pages to try (defaults to {pages})\n"
        "      -v        verbose\n"
        "      -h        usage\n"
    )


def _getopt(argv: Sequence[str]) -> tuple[int, int, list[str]] | tuple[str, int]:
    """getopt(argc, argv, "hvp:") with glibc's permutation: (pages, verbose, operands), or (getopt's error text,
    the page count usage() prints: ``-p 12x`` has already set it to 12) for -h, a bad option or a bad count."""
    from numasim.kernel.nodestring import strtoul

    pages, verbose = _DEFAULT_PAGES, 0
    operands: list[str] = []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            operands += args[i:]
            break
        if not a.startswith("-") or a == "-":
            operands.append(a)
            continue
        j = 1
        while j < len(a):
            c = a[j]
            j += 1
            if c == "v":
                verbose += 1
            elif c == "p":
                if j < len(a):
                    value = a[j:]
                elif i < len(args):
                    value = args[i]
                    i += 1
                else:
                    return f"{argv[0]}: option requires an argument -- 'p'\n", pages
                pages, end = strtoul(value)
                if end == 0 or end != len(value):
                    return "", pages
                break
            elif c == "h":
                return "", pages
            else:
                return f"{argv[0]}: invalid option -- '{c}'\n", pages
    return pages, verbose, operands


def migspeed(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's migspeed: how fast the kernel migrates pages from one node set to another."""
    from numasim.kernel.procfs import numa_maps_of

    run = ProgramRun(pids=[task.pid])
    cmd = argv[0] if argv else "migspeed"
    parsed = _getopt(argv)
    if len(parsed) == 2:  # usage(): the page count as far as it was parsed, then exit(1)
        message, shown = parsed
        run.stderr += message
        run.stdout += _usage(cmd, shown)
        run.exit_code = 1
        return run
    pages, verbose, operands = parsed

    def usage() -> ProgramRun:
        run.stdout += _usage(cmd, pages)
        run.exit_code = 1
        return run

    if not operands:
        return usage()
    if verbose > 1:
        run.stdout += f"numa_max_node = {max(kernel.machine.node_ids)}\n"
    ctx = libnuma_node_context(kernel, task)
    masks = []
    for k, label in enumerate(("From", "To")):
        if k >= len(operands):
            return usage()
        try:
            mask = parse_nodestring(operands[k], ctx)
        except NodeStringError as exc:
            if exc.warning is not None:
                run.stderr += f"libnuma: Warning: {exc.warning}\n"
            run.stdout += f"<{operands[k]}> is invalid\n"
            run.exit_code = 1
            return run
        if verbose:
            run.stdout += format_printmask(label, mask)
        masks.append(mask)
    ps = PAGE_SIZE_BYTES
    size = pages * ps
    if verbose:
        run.stdout += f"Allocating {pages} pages of {ps} bytes of memory\n"
    # memalign(pagesize, bytes): glibc's chunk is a page longer, and the dirtying loop (p <= memory + bytes)
    # writes that extra page too, outside the bound range
    vma = kernel.mmap(task, size + ps)
    start = int(vma.start)
    res = kernel.mbind(task, start, size, MPOL_BIND, masks[0])
    run.syscalls.append(("mbind", f"MPOL_BIND {sorted(masks[0])}", res))
    if not res.ok:  # numa_error with numa_exit_on_error set: perror, exit(1)
        run.stderr += f"mbind: {strerror(res.errno)}\n"
        run.exit_code = 1
        return run
    if verbose:
        run.stdout += "Dirtying memory....\n"
    fault = kernel.touch(task, start, size + ps)
    if fault.oom_killed or not task.alive:
        run.stderr += "Killed\n"
        run.exit_code = 137
        return run
    if verbose:
        run.stdout += "Starting test\n"
    run.stdout += _bind_lines(numa_maps_of(kernel, task))
    res = kernel.mbind(task, start, size, MPOL_BIND, masks[1], flags=MPOL_MF_MOVE)
    run.syscalls.append(("mbind", f"MPOL_BIND {sorted(masks[1])}, MPOL_MF_MOVE", res))
    if not res.ok:
        run.stderr += f"memory move: {strerror(res.errno)}\n"
        run.exit_code = 1
        return run
    run.stdout += _bind_lines(numa_maps_of(kernel, task))
    duration_s = migration_seconds(kernel, int(res.value.get("migrated", 0)))
    mbytes = size / (1024 * 1024.0)
    rate = mbytes / duration_s if duration_s > 0 else float("inf")
    run.stdout += f"{mbytes:1.1f} Mbyte migrated in {duration_s:1.2f} secs. {rate:3.1f} Mbytes/second\n"
    return run


def _bind_lines(numa_maps: str) -> str:
    return "".join(line + "\n" for line in numa_maps.splitlines() if "bind" in line)
