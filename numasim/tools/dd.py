"""Virtual GNU ``dd`` between ``/dev/zero``, ``/dev/null`` and files in ``/dev/shm`` (tmpfs).

What the real one does, and what is simulated:

* ``dd if=/dev/zero of=/dev/shm/x bs=B count=N``: per block, ``read(2)`` of /dev/zero zeroes the user buffer
  (``clear_user``: the buffer's lines are written), ``write(2)`` copies the buffer into the tmpfs page cache
  (buffer lines read, file lines written). The file's pages are allocated by the *writing* process under its
  memory policy, from its cpu (``shmem_alloc_folio``: no shared policy on a plain file, so the task policy;
  interleave uses the inode number as a bias, ``ilx = i_ino + index`` from 6.7 on). They stay in tmpfs after
  dd exits, owned by a keeper task, so a later dd (and numastat) sees them.
* ``dd if=/dev/shm/x of=/dev/null bs=B``: ``read(2)`` copies file lines into the user buffer (file read,
  buffer written); writing to /dev/null costs nothing.
* The user buffer (``bs`` bytes) is the dd process's anonymous memory, placed under its policy too.

Timing: the engine runs a window of :data:`WINDOW_PAGES` pages of that traffic (one thread on dd's cpu) plus a
fixed software cost per 4 KiB page for the syscall and page-cache work the engine does not see
(:class:`DdCosts`), plus a wait for the page's ``struct page`` where it lives (:data:`STRUCT_PAGE_MISSES`); the
elapsed time is the window's time scaled to the bytes copied (the steady state of a
sequential copy: every window looks the same up to the placement pattern, which the window samples).

Output on stderr, coreutils >= 8.24 wording (``print_xfer_stats``)::

    1024+0 records in
    1024+0 records out
    21474836480 bytes (21 GB, 20 GiB) copied, 9.33108 s, 2.3 GB/s
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from numasim.engine import ThreadSpec, build_memory_system, simulate
from numasim.kernel.kernel import Kernel
from numasim.kernel.task import VMA, Task
from numasim.tools.context import ToolContext, map_buffer, page_map
from numasim.tools.human import format_g, human_readable, parse_dd_number
from numasim.units import PAGE_SIZE_BYTES
from numasim.workload.access import AccessChunk

__all__ = [
    "DdCosts",
    "DdResult",
    "DdUsageError",
    "dd",
    "format_dd",
    "parse_dd_args",
    "tmpfs_file",
    "WINDOW_PAGES",
    "DEFAULT_DD_COSTS",
]

WINDOW_PAGES = 1024
"""Pages of the copy the engine times (4 MiB); the rest is scaled from it."""
_LINES = PAGE_SIZE_BYTES // 64
STRUCT_PAGE_MISSES = 1
"""Cache misses per file page on its ``struct page``, which the core waits out: Linux keeps a node's memmap on
that node (``sparse_init_nid``), so a remote page's metadata is remote too. The read path takes and drops a
reference (``filemap_get_read_batch``'s ``folio_try_get``, ``folio_mark_accessed``, ``folio_put``: locked
operations on one 64-byte line), the write path allocates the page (``rmqueue`` unlinking it from a per-cpu
list) and then sets its flags, mapping, LRU links and dirty bit, all in that line: one miss each way (the
memmap of a 20 GiB file is 320 MiB, so it never stays cached), timed at the route's idle latency."""
_FILE_BASE = 0x1000_0000_0000
"""Where the engine sees the file's page cache (apart from the dd process's own mappings)."""


@dataclass(frozen=True)
class DdCosts:
    """Software cost per 4 KiB page copied that the memory system does not see (syscall, page cache, loop).

    The defaults were fitted on article 001's *local* runs (``--cpubind=0 --membind=0``: write 2.3 GB/s,
    read 4.1 GB/s on the E5-2680 v2) under the shipped ``seed-001-e5-2680v2`` calibration, so that local
    numbers match; remote and interleaved runs are then predictions (experiments/001-dd-bandwidth).
    """

    write_page_ns: float = 1340.2
    """Per page written to tmpfs: shmem_write_begin (folio allocation, page-cache insert), copy loop; the wait
    for the page's ``struct page`` comes on top (:data:`STRUCT_PAGE_MISSES`)."""
    read_page_ns: float = 588.5
    """Per page read from tmpfs: filemap lookup, copy_to_user loop (and the ``struct page`` wait on top)."""


DEFAULT_DD_COSTS = DdCosts()


class DdUsageError(ValueError):
    """A dd command line dd itself would reject; ``str()`` is dd's message."""


@dataclass
class DdArgs:
    input: str = "-"
    output: str = "-"
    block_bytes: int = 512
    count: int | None = None
    status: str = "default"
    operands: list[str] = field(default_factory=list)


def parse_dd_args(argv: Sequence[str]) -> DdArgs:
    """Parse ``if= of= bs= count=`` (and ``ibs``/``obs`` equal to ``bs``); anything else is a DdUsageError."""
    a = DdArgs()
    for op in argv:
        name, eq, value = op.partition("=")
        if not eq:
            raise DdUsageError(f"dd: unrecognized operand '{op}'\nTry 'dd --help' for more information.")
        try:
            if name == "if":
                a.input = value
            elif name == "of":
                a.output = value
            elif name in ("bs", "ibs", "obs"):
                a.block_bytes = parse_dd_number(value)
                if a.block_bytes <= 0:
                    raise ValueError(f"invalid number: '{value}'")
            elif name == "count":
                a.count = parse_dd_number(value)
            elif name == "status":
                if value not in ("none", "noxfer", "progress", "default"):
                    raise DdUsageError(f"dd: invalid status level: '{value}'\nTry 'dd --help' for more information.")
                a.status = value
            elif name in ("conv", "iflag", "oflag"):
                pass  # accepted; nothing they change (fsync, direct) exists on tmpfs in this model
            else:
                raise DdUsageError(f"dd: unrecognized operand '{op}'\nTry 'dd --help' for more information.")
        except ValueError as exc:
            if isinstance(exc, DdUsageError):
                raise
            raise DdUsageError(f"dd: {exc}") from None
        a.operands.append(op)
    return a


# --- tmpfs: files in /dev/shm survive the process that wrote them ---------------------------------------------


@dataclass
class _ShmFile:
    vma: VMA
    size_bytes: int


_TMPFS: weakref.WeakKeyDictionary[Kernel, tuple[Task, dict[str, _ShmFile]]] = weakref.WeakKeyDictionary()


def _tmpfs(kernel: Kernel) -> tuple[Task, dict[str, _ShmFile]]:
    if kernel not in _TMPFS or not _TMPFS[kernel][0].alive:
        keeper = kernel.spawn("tmpfs")  # holds the page cache of /dev/shm files between processes
        _TMPFS[kernel] = (keeper, {})
    return _TMPFS[kernel]


def tmpfs_file(kernel: Kernel, path: str) -> VMA | None:
    """The page-cache mapping of ``/dev/shm`` file ``path`` on ``kernel`` (pages and their nodes), if any."""
    entry = _TMPFS.get(kernel)
    if entry is None or path not in entry[1]:
        return None
    return entry[1][path].vma


def _truncate(kernel: Kernel, path: str) -> None:
    keeper, files = _tmpfs(kernel)
    old = files.pop(path, None)
    if old is not None:
        kernel.munmap(keeper, old.vma.start, old.vma.end - old.vma.start)


def _write_file(ctx: ToolContext, path: str, size_bytes: int) -> VMA:
    # Allocated by the writer (its policy, its cpu), then handed to the keeper like the page cache outlives dd.
    kernel = ctx.kernel
    _truncate(kernel, path)
    vma = map_buffer(ctx, size_bytes, kind="shmem")
    ctx.task.mm.remove(vma.start, vma.end)
    keeper, files = _tmpfs(kernel)
    at = keeper.mm.get_unmapped_area(vma.end - vma.start)
    kept = keeper.mm.insert(dataclasses.replace(vma, start=at, end=at + (vma.end - vma.start), path=path))
    files[path] = _ShmFile(kept, size_bytes)
    return kept


# --- the tool -----------------------------------------------------------------------------------------------


@dataclass
class DdResult:
    records_in_full: int
    records_in_partial: int
    records_out_full: int
    records_out_partial: int
    bytes_copied: int
    seconds: float
    direction: str
    """``"write"`` (into tmpfs), ``"read"`` (out of tmpfs) or ``"none"`` (/dev/zero to /dev/null)."""
    file_pages_per_node: dict[int, int]
    buffer_pages_per_node: dict[int, int]
    cpu: int
    calibration_id: str
    seed: int
    window_ns_per_page: float = 0.0
    status: str = "default"
    """dd's ``status=``: ``none`` prints nothing, ``noxfer`` only the record counts."""

    @property
    def bandwidth_gb_s(self) -> float:
        return self.bytes_copied / self.seconds / 1e9 if self.seconds > 0 else float("inf")


def _is_shm(path: str) -> bool:
    return path.startswith("/dev/shm/") and len(path) > len("/dev/shm/")


def dd(ctx: ToolContext, argv: Sequence[str], costs: DdCosts = DEFAULT_DD_COSTS) -> DdResult:
    """Run the virtual ``dd OPERANDS...`` in ``ctx``; raises :class:`DdUsageError` with dd's message.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> ctx = tool_context(m, resolve_calibration(m), cpunodebind=[0], membind=[0])
    >>> w = dd(ctx, ["if=/dev/zero", "of=/dev/shm/x", "bs=1M", "count=64"])
    >>> w.bytes_copied, w.file_pages_per_node
    (67108864, {0: 16384})
    """
    a = parse_dd_args(argv)
    if a.input not in ("/dev/zero",) and not _is_shm(a.input):
        raise DdUsageError(f"dd: failed to open '{a.input}': numasim simulates only /dev/zero and /dev/shm/*")
    if a.output not in ("/dev/null",) and not _is_shm(a.output):
        raise DdUsageError(f"dd: failed to open '{a.output}': numasim simulates only /dev/null and /dev/shm/*")
    bs = a.block_bytes
    if _is_shm(a.input):
        src = tmpfs_file(ctx.kernel, a.input)
        if src is None:
            raise DdUsageError(f"dd: failed to open '{a.input}': No such file or directory")
        size = _TMPFS[ctx.kernel][1][a.input].size_bytes
        if a.count is not None:
            size = min(size, a.count * bs)
        full, partial = size // bs, int(size % bs > 0)
    else:
        if a.count is None:
            raise DdUsageError("dd: numasim: reading /dev/zero needs count= (it never ends)")
        size, full, partial = a.count * bs, a.count, 0
    buffer = map_buffer(ctx, bs)  # the dd process's block buffer
    file_vma: VMA | None = None
    if _is_shm(a.output):
        file_vma = _write_file(ctx, a.output, size) if size else None
        direction = "write"
    elif _is_shm(a.input):
        file_vma = tmpfs_file(ctx.kernel, a.input)
        direction = "read"
    else:
        direction = "none"
    ns_per_page = _time_window(ctx, buffer, file_vma, direction, costs)
    pages = -(-size // PAGE_SIZE_BYTES)
    seconds = max(pages * ns_per_page * 1e-9, 1e-9)
    return DdResult(
        full,
        partial,
        full,
        partial,
        size,
        seconds,
        direction,
        file_vma.pages_per_node() if file_vma is not None else {},
        buffer.pages_per_node(),
        ctx.cpu,
        ctx.calibration.id,
        ctx.seed,
        ns_per_page,
        a.status,
    )


def _time_window(ctx: ToolContext, buffer: VMA, file_vma: VMA | None, direction: str, costs: DdCosts) -> float:
    """Engine time per 4 KiB page of the copy, over a window of pages."""
    buf_pages = buffer.npages
    n = min(WINDOW_PAGES, file_vma.npages if file_vma is not None else buf_pages)
    n = max(n, 1)
    line = np.arange(_LINES, dtype=np.uint64) * np.uint64(64)
    page = np.arange(n, dtype=np.uint64)
    buf_addr = np.uint64(buffer.start) + (page % np.uint64(buf_pages))[:, None] * np.uint64(PAGE_SIZE_BYTES) + line
    parts_addr: list[np.ndarray] = []
    parts_write: list[np.ndarray] = []
    if direction == "write" and file_vma is not None:
        file_addr = np.uint64(_FILE_BASE) + page[:, None] * np.uint64(PAGE_SIZE_BYTES) + line
        # clear_user(buffer page), then copy buffer page -> file page, line by line
        parts_addr = [buf_addr, np.stack([buf_addr, file_addr], axis=2).reshape(n, -1)]
        parts_write = [np.ones_like(buf_addr, dtype=bool), np.tile([False, True], (n, _LINES))]
        per_page = costs.write_page_ns
    elif direction == "read" and file_vma is not None:
        file_addr = np.uint64(_FILE_BASE) + page[:, None] * np.uint64(PAGE_SIZE_BYTES) + line
        parts_addr = [np.stack([file_addr, buf_addr], axis=2).reshape(n, -1)]
        parts_write = [np.tile([False, True], (n, _LINES))]
        per_page = costs.read_page_ns
    else:
        parts_addr = [buf_addr]  # /dev/zero -> /dev/null: only the buffer is zeroed
        parts_write = [np.ones_like(buf_addr, dtype=bool)]
        per_page = costs.read_page_ns
    addr = np.concatenate(parts_addr, axis=1).ravel()
    is_write = np.concatenate(parts_write, axis=1).ravel()
    per = addr.size // n
    compute = np.zeros((n, per), dtype=np.float32)
    compute[:, 0] = per_page
    if file_vma is not None:
        compute[:, 0] += STRUCT_PAGE_MISSES * _struct_page_wait_ns(ctx, file_vma.nodes[:n])
    pm = page_map([buffer])
    if file_vma is not None:
        pm.assign(_FILE_BASE, file_vma.nodes[:n])
    r = simulate(
        ctx.machine,
        ctx.calibration,
        [ThreadSpec(0, cpu=ctx.cpu)],
        [AccessChunk.build(addr, is_write=is_write, compute_ns=compute.ravel())],
        pm,
        seed=ctx.seed,
        record_latencies=False,
    )
    return float(r.run_time_ns) / n


def _struct_page_wait_ns(ctx: ToolContext, page_nodes: np.ndarray) -> np.ndarray:
    """The idle latency from dd's cpu to each page's node (where its ``struct page`` is)."""
    ms = build_memory_system(ctx.machine, ctx.calibration)
    initiator = ms.initiator_of_cpu(ctx.cpu)
    index_of = np.full(max(ms.node_ids) + 1, -1, dtype=np.int64)
    index_of[ms.node_ids] = np.arange(len(ms.node_ids))
    return ms.base_latency_ns[initiator, index_of[np.asarray(page_nodes, dtype=np.int64)]]


def format_dd(result: DdResult, coreutils: str = "8.32") -> str:
    """dd's summary (stderr) as coreutils ``coreutils`` words it.

    From 8.24 on: ``N bytes (21 GB, 20 GiB) copied, 9.14673 s, 2.3 GB/s``; before (article 001's dd):
    ``N bytes (21 GB) copied, 9.14673 s, 2.3 GB/s``.
    """
    if result.status == "none":
        return ""
    b = result.bytes_copied
    out = [
        f"{result.records_in_full}+{result.records_in_partial} records in",
        f"{result.records_out_full}+{result.records_out_partial} records out",
    ]
    if result.status == "noxfer":
        return "\n".join(out) + "\n"
    secs = f"{format_g(result.seconds)} s"
    rate = human_readable(b / result.seconds) + "/s"
    si, iec = human_readable(b), human_readable(b, 1024)
    old = tuple(int(x) for x in coreutils.split(".")[:2]) < (8, 24)
    if old:
        out.append(f"{b} byte{'s' if b != 1 else ''} ({si}) copied, {secs}, {rate}")
    elif b < 1000:
        out.append(f"{b} byte{'s' if b != 1 else ''} copied, {secs}, {rate}")
    elif b < 1024:
        out.append(f"{b} bytes ({si}) copied, {secs}, {rate}")
    else:
        out.append(f"{b} bytes ({si}, {iec}) copied, {secs}, {rate}")
    return "\n".join(out) + "\n"
