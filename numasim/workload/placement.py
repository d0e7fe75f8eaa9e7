"""Place a workload's (or a trace's) memory through the simulated kernel and build the engine's page map.

This is the glue between the workload layer and :class:`numasim.kernel.kernel.Kernel`: one process (a kernel
task) whose threads are the workload's threads; ``--policy`` becomes its task policy (``set_mempolicy``, as
``numactl --interleave=...`` does before ``exec``) or a plug-in placement policy; each allocation is an ``mmap``
at its layout address, its policy an ``mbind``, its pages faulted in by a ``touch`` from the cpu of its
first-touch thread. Malloc/free events run in phase order, so memory freed at a phase boundary is available
to later allocations. The result is a :class:`~numasim.engine.pagemap.PageMap` (virtual page -> node) of every
page ever placed (virtual ranges are never reused, see :mod:`numasim.workload.layout`) plus the kernel's
views (pages per allocation and node, numastat counters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numasim.engine.pagemap import PageMap
from numasim.engine.spec import ThreadSpec
from numasim.errors import PolicyError, WorkloadError
from numasim.kernel.kernel import Kernel, MmapError
from numasim.kernel.policy_names import FLAGS, MODES, mode_name
from numasim.kernel.task import Task
from numasim.topology.cpulist import format_cpulist
from numasim.topology.model import Machine
from numasim.units import PAGE_SIZE_BYTES, format_size
from numasim.workload.access import AccessChunk
from numasim.workload.generate import generate, phase_accesses
from numasim.workload.layout import layout
from numasim.workload.policy_text import PolicySpec, parse_policy
from numasim.workload.spec import Allocation, PointerChasePhase, Workload
from numasim.workload.trace.perf_script import USER_ADDRESS_LIMIT
from numasim.workload.trace.stats import touched_pages

__all__ = ["Placement", "thread_cpus", "thread_specs", "place_workload", "place_trace", "apply_task_policy", "mode_args"]

#: Touched pages further apart than this start a new mapping when a trace's address space is rebuilt.
TRACE_GAP_PAGES = 256


@dataclass
class Placement:
    """Where every page went, and the kernel's own view of it."""

    pages: PageMap
    kernel: Kernel
    policy: str
    pages_by_allocation: dict[str, dict[int, int]] = field(default_factory=dict)
    failed_pages: int = 0
    task: Task | None = None
    """The process whose memory this is (a run-time kernel acts on it)."""
    reclaim_stalls: list[tuple[np.ndarray, int]] = field(default_factory=list)
    """Allocations the run faults at first access that stalled in direct reclaim: (virtual addresses of the pages
    that reclaimed, pages reclaimed), as :attr:`numasim.kernel.kernel.Kernel.reclaim_stalls`."""
    untimed_reclaim_pages: int = 0
    """Pages direct reclaim freed for prefaulted allocations (touched when created, outside the timed run)."""
    compaction_stalls: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """Huge-page faults of lazily faulted allocations that compacted: (2 MiB folio addresses, pages migrated for
    each), as :attr:`numasim.kernel.kernel.Kernel.compaction_stalls`."""
    untimed_compaction_pages: int = 0
    """Pages direct compaction migrated for prefaulted allocations (outside the timed run)."""
    lazily_touched: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    """Virtual page numbers the run accesses in lazily faulted (placed before timing) memory: where the stalls of
    :attr:`reclaim_stalls` and :attr:`compaction_stalls` are charged."""
    first_touch: dict[str, str] = field(default_factory=dict)
    """Per allocation, who first-touched its pages: ``"thread N (prefault)"``, ``"first access"``, or ``"first
    access, on the clock"`` (faulted during the timed run: :attr:`deferred_pages`)."""
    deferred_pages: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    """Virtual page numbers left absent for the timed run to fault at their first access
    (:class:`numasim.kernel.first_touch.FirstTouchFaults`); their node in :attr:`pages` is a placeholder until
    the run faults them (the engine writes the real one into the map)."""
    deferred_cpus: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per deferred page, the cpu of the thread whose access comes first in the access stream."""
    placed_before_timing: dict[str, str] = field(default_factory=dict)
    """Lazily faulted allocations that a deferring placement still placed before timing, and why."""
    _deferred_ranges: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    """Address range of each deferred allocation (for :meth:`refresh_after_run`)."""

    def refresh_after_run(self) -> None:
        """Recount :attr:`pages_by_allocation` from the kernel's mappings once the run faulted the deferred pages
        in (a no-op without them; a fault that failed ended the run with an error)."""
        if not len(self.deferred_pages) or self.task is None:
            return
        for name, (start, end) in self._deferred_ranges.items():
            counts: dict[int, int] = {}
            for v in self.task.mm.vmas_in(start, end):
                nodes, n = np.unique(v.nodes[v.nodes >= 0], return_counts=True)
                for a, b in zip(nodes.tolist(), n.tolist(), strict=True):
                    counts[a] = counts.get(a, 0) + b
            self.pages_by_allocation[name] = dict(sorted(counts.items()))

    def numastat(self) -> dict[int, dict[str, int]]:
        """``/sys/devices/system/node/node<N>/numastat`` counters of every node."""
        return {n: dict(self.kernel.numastat(n)) for n in self.kernel.machine.node_ids}

    def pages_per_node(self) -> dict[int, int]:
        """Pages placed on each node over the whole run (freed allocations included)."""
        counts = self.pages.pages_per_node(max(self.kernel.machine.node_ids) + 1)
        return {n: int(counts[n]) for n in self.kernel.machine.node_ids}


def _deferrable(workload: Workload) -> tuple[set[str], dict[str, str]]:
    """Which lazily faulted allocations may fault during the timed run, and why the others may not.

    Placement runs the phase boundaries' mallocs and frees before timing. An allocation's first-touch faults
    may move into the timed run only if nothing after its malloc boundary changes memory before the run would
    touch it: no later boundary prefaults an allocation or frees one, and it is not freed itself (a page freed
    at a boundary would then be allocated after its free)."""
    lazy = [a for a in workload.allocations if not a.prefault]
    frees = [workload.free_phase(a.name) for a in workload.allocations]
    last_free = max((f for f in frees if f is not None), default=-1)
    last_prefault = max((workload.malloc_phase(a.name) for a in workload.allocations if a.prefault), default=-1)
    ok: set[str] = set()
    why: dict[str, str] = {}
    for a in lazy:
        start = workload.malloc_phase(a.name)
        if workload.free_phase(a.name) is not None:
            why[a.name] = "freed at a phase boundary"
        elif last_free > start:
            why[a.name] = "a later phase boundary frees memory"
        elif last_prefault > start:
            why[a.name] = "a later phase boundary prefaults an allocation"
        else:
            ok.add(a.name)
    return ok, why


def mode_args(spec: PolicySpec, machine: Machine, what: str) -> tuple[int, list[int]]:
    """The mode (with its flags) and node list of a parsed ``MODE[:NODES[:FLAGS]]`` for ``machine``; a node the
    machine does not have is an error naming ``what``."""
    mode = MODES[spec.mode]
    for f in spec.flags:
        mode |= FLAGS[f]
    if spec.all_nodes:  # numactl's "all": every node with memory
        return mode, [n.id for n in machine.nodes if n.has_memory]
    # A node the machine does not have is a typo, as numactl (libnuma's numa_parse_nodestring: "node argument
    # N out of range") treats it; the kernel would silently drop it from a mask that still names a real node.
    # Relative nodes (MPOL_F_RELATIVE_NODES) are indices into the allowed set, folded by the kernel: no check.
    if "relative" not in spec.flags:
        absent = [n for n in spec.nodes if n not in machine.node_ids]
        if absent:
            # all absent: the kernel's own answer (empty effective mask) is EINVAL; say so too
            empty = "; no node left: the kernel answers EINVAL" if len(absent) == len(spec.nodes) else ""
            raise PolicyError(
                f"{what} = {str(spec)!r}: node {format_cpulist(absent)} out of range "
                f"(machine {machine.name} has nodes {format_cpulist(list(machine.node_ids))}{empty})"
            )
    return mode, list(spec.nodes)


def _in(workload: Workload) -> str:
    # errors about a workload file start with its name (the CLI reports them as one line)
    return f"{workload.source}: " if workload.source else ""


def _check(result: Any, what: str) -> None:
    if not result.ok:
        raise PolicyError(f"{what} failed with {result.errno}: {result.why}")


def apply_task_policy(kernel: Kernel, task: Task, policy: str | None) -> str:
    """Give ``task`` the process-wide ``policy``: ``MODE[:NODES[:FLAGS]]`` via ``set_mempolicy``, else a plug-in
    placement policy by name or path with its parameters, ``NAME[:KEY=VALUE,...]``
    (:func:`numasim.kernel.registry.load_policy`). Returns its display name."""
    if policy is None or policy.strip() in ("", "default"):
        return "default"
    try:
        spec = parse_policy(policy)
    except PolicyError as syntax_error:
        from numasim.kernel.registry import available_policies, load_policy, split_params

        if ":" in policy and mode_name(policy.split(":", 1)[0]) is not None:
            raise
        try:
            name, params = split_params(policy, "--policy") if "=" in policy else (policy, {})
            plugin = load_policy(name, **params)
        except PolicyError as exc:
            known = ", ".join(sorted(available_policies()))
            raise PolicyError(f"--policy {policy!r}: {syntax_error}; nor a plug-in policy ({exc}). Known: {known}") from None
        kernel.set_placement(task, plugin)
        shown = str(getattr(plugin, "name", name))
        return shown + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")
    mode, nodes = mode_args(spec, kernel.machine, "--policy")
    _check(kernel.set_mempolicy(task, mode, nodes), f"set_mempolicy({policy})")
    return str(spec)


def thread_cpus(machine: Machine, workload: Workload) -> list[int]:
    """The cpu each workload thread starts on: its ``cpu``; the k-th cpu of its ``node`` for the k-th thread on
    that node; the first of its ``cpus``; or, unpinned, the machine's cpus in order."""
    all_cpus = sorted(machine.cpu_to_node)
    if not all_cpus:
        raise WorkloadError(f"machine {machine.name} has no cpus to run threads on")
    nodes = {n.id: n for n in machine.nodes}
    used_on_node: dict[int, int] = {}
    out: list[int] = []
    for t in workload.threads:
        if t.cpu is not None:
            if t.cpu not in machine.cpu_to_node:
                raise WorkloadError(f"{_in(workload)}threads[{t.id}].cpu = {t.cpu}: machine {machine.name} has no such cpu")
            out.append(t.cpu)
        elif t.node is not None:
            node = nodes.get(t.node)
            if node is None or not node.cpus:
                raise WorkloadError(
                    f"{_in(workload)}threads[{t.id}].node = {t.node}: machine {machine.name} has no cpus on that node"
                )
            k = used_on_node.get(t.node, 0)
            used_on_node[t.node] = k + 1
            out.append(node.cpus[k % len(node.cpus)])
        elif t.cpus is not None:
            bad = [c for c in t.cpus if c not in machine.cpu_to_node]
            if bad:
                raise WorkloadError(f"{_in(workload)}threads[{t.id}].cpus: machine {machine.name} has no cpu {bad[0]}")
            out.append(t.cpus[0])
        else:
            out.append(all_cpus[t.id % len(all_cpus)])
    return out


def thread_affinity(machine: Machine, workload: Workload) -> list[tuple[int, ...] | None]:
    """The cpus the scheduler may run each workload thread on: its ``node``'s, its ``cpus``, the whole machine's
    when it is not pinned; None for a thread pinned to one ``cpu``."""
    nodes = {n.id: n for n in machine.nodes}
    every = tuple(sorted(machine.cpu_to_node))
    out: list[tuple[int, ...] | None] = []
    for t in workload.threads:
        if t.cpu is not None:
            out.append(None)
        elif t.node is not None:
            out.append(tuple(nodes[t.node].cpus))
        elif t.cpus is not None:
            out.append(tuple(t.cpus))
        else:
            out.append(every)
    return out


def thread_specs(machine: Machine, workload: Workload) -> list[ThreadSpec]:
    """The engine's threads: the cpu each starts on and the cpus it may run on (threads outnumbering their cpus
    share them: ``engine.cores.cpu_sharers``), and ``dependent`` when most of a thread's accesses are a pointer
    chase."""
    cpus = thread_cpus(machine, workload)
    allowed = thread_affinity(machine, workload)
    regions = layout(workload)
    chase = np.zeros(len(workload.threads))
    total = np.zeros(len(workload.threads))
    for i, phase in enumerate(workload.phases):
        for tid, n in phase_accesses(workload, i, regions).items():
            total[tid] += n
            if isinstance(phase, PointerChasePhase):
                chase[tid] += n
    return [
        ThreadSpec(id=t.id, cpu=cpus[t.id], dependent=bool(total[t.id] and chase[t.id] > total[t.id] / 2),
                   cpus=allowed[t.id])
        for t in workload.threads
    ]


def _mapped_size(a: Allocation, size_bytes: int) -> int:
    """The mapping's length: MAP_HUGETLB mappings are whole 2 MiB pages (the layout leaves room for that)."""
    huge = 2 << 20
    return -(-size_bytes // huge) * huge if a.hugetlb else size_bytes


def _touch_runs(kernel: Kernel, task: Task, pages: np.ndarray, first: np.ndarray, cpu_of: Callable[[int], int]) -> None:
    """Fault ``pages`` (page numbers) from the cpu of the thread that touched each first, in batches per mapping
    and cpu (:meth:`Kernel.touch_pages`), never one kernel call per page."""
    if not len(pages):
        return
    # One cpu per distinct thread, not per id up to the largest: trace thread ids may be as large as 2**31-1.
    ids, index = np.unique(first, return_inverse=True)
    cpu_by_thread = np.array([cpu_of(int(t)) for t in ids], dtype=np.int64)
    kernel.touch_pages(task, pages.astype(np.uint64) * np.uint64(PAGE_SIZE_BYTES), cpu_by_thread[index])


def _record(
    vma_nodes: list[tuple[int, np.ndarray]], page_numbers: list[np.ndarray], nodes: list[np.ndarray],
    huge_of: list[np.ndarray] | None = None, huge: list[np.ndarray] | None = None,
) -> int:
    failed = 0
    for k, (start, arr) in enumerate(vma_nodes):
        present = arr >= 0
        failed += int(np.count_nonzero(~present))
        page_numbers.append(start // PAGE_SIZE_BYTES + np.flatnonzero(present).astype(np.uint64))
        nodes.append(arr[present])
        if huge_of is not None and huge is not None:
            huge.append(huge_of[k][present])
    return failed


def _huge_pages(v: Any) -> np.ndarray:
    """Which pages of a VMA belong to a 2 MiB page (a transparent huge page, or a hugetlb mapping)."""
    return np.ones(v.npages, dtype=bool) if v.hugetlb else v.thp.copy()


def place_workload(
    machine: Machine,
    workload: Workload,
    *,
    policy: str | None = None,
    seed: int = 0,
    kernel: Kernel | None = None,
    defer_first_touch: bool = False,
) -> Placement:
    """Run the workload's allocations (malloc/free in phase order) through the kernel and map every page.

    ``defer_first_touch``: leave the pages of lazily faulted allocations absent (node -1) for the timed run to
    fault at their first access (:attr:`Placement.deferred_pages`), where :func:`_deferrable` allows it."""
    kernel = kernel if kernel is not None else Kernel(machine)
    cpus = thread_cpus(machine, workload)
    task = kernel.spawn(workload.name)
    shown = apply_task_policy(kernel, task, policy)
    regions = layout(workload)
    lazy = [a.name for a in workload.allocations if not a.prefault]
    first_touch: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if lazy:
        # Pages of non-prefaulted allocations fault where they are first accessed: find who touches each first.
        pages, first = touched_pages(generate(workload, seed))
        for name in lazy:
            r = regions[name]
            sel = (pages >= np.uint64(r.first_page)) & (pages < np.uint64(r.first_page + r.n_pages))
            first_touch[name] = (pages[sel], first[sel])
    page_numbers: list[np.ndarray] = []
    nodes: list[np.ndarray] = []
    huge: list[np.ndarray] = []
    by_allocation: dict[str, dict[int, int]] = {}
    failed = 0
    stalls: list[tuple[np.ndarray, int]] = []
    compaction: list[tuple[np.ndarray, np.ndarray]] = []
    untimed = untimed_compaction = 0
    touched_lazily: list[np.ndarray] = []
    defer, not_deferred = _deferrable(workload) if defer_first_touch else (set(), {})
    placeholder = min(n.id for n in machine.nodes if n.has_memory)
    deferred: list[tuple[np.ndarray, np.ndarray]] = []
    deferred_ranges: dict[str, tuple[int, int]] = {}
    n_boundaries = max(1, len(workload.phases))
    for boundary in range(n_boundaries):
        for a in workload.allocations:
            if workload.free_phase(a.name) == boundary:
                r = regions[a.name]
                _check(kernel.munmap(task, r.base, _mapped_size(a, r.size_bytes)), f"munmap({a.name})")
        for a in workload.allocations:
            if workload.malloc_phase(a.name) != boundary:
                continue
            r = regions[a.name]
            size = _mapped_size(a, r.size_bytes)
            try:
                kernel.mmap(task, size, addr=r.base, hugetlb=a.hugetlb)
            except MmapError as exc:
                if a.hugetlb:
                    raise WorkloadError(f"{_in(workload)}allocations[{a.name}]: {exc}") from None
                raise WorkloadError(
                    f"{_in(workload)}allocations[{a.name}]: size_bytes = {a.size_bytes} ({format_size(a.size_bytes)}) is larger "
                    f"than the machine's memory ({exc.limit_bytes} bytes = {format_size(exc.limit_bytes)}; mmap fails "
                    f"with {exc.errno}, as with vm.overcommit_memory = 0)"
                ) from None
            spec = a.policy_spec
            if spec.mode != "default":
                mode, mask = mode_args(spec, kernel.machine, f"{_in(workload)}allocations[{a.name}].policy")
                _check(kernel.mbind(task, r.base, size, mode, mask), f"{_in(workload)}allocations[{a.name}]: mbind({a.policy})")
            if a.madvise is not None:
                _check(kernel.madvise_hugepage(task, r.base, size, a.madvise == "hugepage"),
                       f"{_in(workload)}allocations[{a.name}]: madvise({a.madvise})")
            seen, seen_c = len(kernel.reclaim_stalls), len(kernel.compaction_stalls)
            if a.name in defer:
                pages, first = first_touch[a.name]
                ids, index = np.unique(first, return_inverse=True)
                cpu_by_thread = np.array([cpus[int(t)] for t in ids], dtype=np.int64)
                deferred.append((pages, cpu_by_thread[index]))
                deferred_ranges[a.name] = (r.base, r.base + size)
                page_numbers.append(pages)
                # a placeholder node: the run's first-touch faults mark these pages absent before any access
                nodes.append(np.full(len(pages), placeholder, dtype=np.int16))
                huge.append(np.zeros(len(pages), dtype=bool))
                by_allocation[a.name] = {}
                continue
            if a.prefault:
                kernel.touch(task, r.base, size, cpu=cpus[workload.first_touch_thread(a.name)])
                untimed += sum(n for _, _, n in kernel.reclaim_stalls[seen:])
                untimed_compaction += sum(int(m.sum()) for _, _, m, _ in kernel.compaction_stalls[seen_c:])
            else:
                pages, first = first_touch[a.name]
                _touch_runs(kernel, task, pages, first, lambda t: cpus[t])
                stalls += [(addrs, n) for pid, addrs, n in kernel.reclaim_stalls[seen:] if pid == task.tgid]
                compaction += [(addrs, m) for pid, addrs, m, _ in kernel.compaction_stalls[seen_c:] if pid == task.tgid]
                touched_lazily.append(pages)
            in_range = task.mm.vmas_in(r.base, r.base + r.size_bytes)
            vmas = [(v.start, v.nodes.copy()) for v in in_range]
            a_failed = _record(vmas, page_numbers, nodes, [_huge_pages(v) for v in in_range], huge) - (
                0 if a.prefault else _untouched(vmas, first_touch[a.name][0])
            )
            failed += a_failed
            counts: dict[int, int] = {}
            for _, arr in vmas:
                for n, c in zip(*np.unique(arr[arr >= 0], return_counts=True), strict=True):
                    counts[int(n)] = counts.get(int(n), 0) + int(c)
            by_allocation[a.name] = counts
            if not task.alive:
                raise WorkloadError(f"{_in(workload)}allocations[{a.name}]: the OOM killer killed the workload ({a.size_bytes} bytes)")
    pm = PageMap.from_arrays(
        np.concatenate(page_numbers) if page_numbers else np.zeros(0, dtype=np.uint64),
        np.concatenate(nodes) if nodes else np.zeros(0, dtype=np.int16),
        huge=np.concatenate(huge) if huge else np.zeros(0, dtype=bool),
    )
    touched = {
        a.name: f"thread {workload.first_touch_thread(a.name)} (prefault)" if a.prefault
        else "first access, on the clock" if a.name in defer else "first access"
        for a in workload.allocations
    }
    placement = Placement(pm, kernel, shown, by_allocation, failed, task, stalls, untimed, compaction,
                          untimed_compaction, first_touch=touched, placed_before_timing=not_deferred)  # fmt: skip
    if touched_lazily:
        placement.lazily_touched = np.concatenate(touched_lazily).astype(np.uint64)
    if deferred:
        placement.deferred_pages = np.concatenate([p for p, _ in deferred]).astype(np.uint64)
        placement.deferred_cpus = np.concatenate([c for _, c in deferred])
        placement._deferred_ranges = deferred_ranges
    return placement


def _untouched(vmas: list[tuple[int, np.ndarray]], touched: np.ndarray) -> int:
    # Lazily faulted allocations legitimately leave the pages nobody accessed not present.
    total = sum(len(arr) for _, arr in vmas)
    return total - len(touched)


def place_trace(
    machine: Machine,
    chunks: Iterable[AccessChunk],
    thread_cpu: Sequence[int] | Mapping[int, int],
    *,
    policy: str | None = None,
    kernel: Kernel | None = None,
    defer_first_touch: bool = False,
) -> Placement:
    """Map a trace's pages: each touched page faults in from the cpu of the first thread that touches it
    (``defer_first_touch``: in the timed run, at its first access; :attr:`Placement.deferred_pages`).

    ``thread_cpu`` gives the cpu of each thread id: a sequence indexed by id, or a mapping from id to cpu
    (trace thread ids are labels and may be sparse).

    The trace's address space is rebuilt as one mapping per cluster of touched pages (clusters split at gaps of
    more than ``TRACE_GAP_PAGES`` pages), so sparse addresses (heap, stacks, libraries) cost no more than the
    pages they touch.
    """
    kernel = kernel if kernel is not None else Kernel(machine)
    task = kernel.spawn("trace")
    shown = apply_task_policy(kernel, task, policy)
    pages, first = touched_pages(chunks)
    if len(pages) and int(pages[-1]) * PAGE_SIZE_BYTES >= USER_ADDRESS_LIMIT:
        raise WorkloadError(
            f"trace touches address {int(pages[-1]) * PAGE_SIZE_BYTES:#x}, beyond user space "
            f"({USER_ADDRESS_LIMIT:#x}): kernel memory cannot be placed by a simulated process"
        )
    known = thread_cpu.keys() if isinstance(thread_cpu, Mapping) else range(len(thread_cpu))
    missing = [t for t in np.unique(first).tolist() if t not in known]
    if missing:
        raise WorkloadError(f"trace uses thread {missing[0]} but no cpu was given for it")
    if len(pages):
        gaps = np.flatnonzero(np.diff(pages.astype(np.int64)) > TRACE_GAP_PAGES) + 1
        for lo, hi in zip(np.r_[0, gaps], np.r_[gaps, len(pages)], strict=True):
            start = int(pages[lo]) * PAGE_SIZE_BYTES
            length = (int(pages[hi - 1]) - int(pages[lo]) + 1) * PAGE_SIZE_BYTES
            try:
                kernel.mmap(task, length, addr=start)
            except MmapError as exc:
                raise WorkloadError(
                    f"trace: the pages touched from {start:#x} span {length} bytes, more than the machine's memory "
                    f"({exc.limit_bytes} bytes; mmap fails with {exc.errno}, as with vm.overcommit_memory = 0)"
                ) from None
    if defer_first_touch and len(pages):
        ids, index = np.unique(first, return_inverse=True)
        cpu_by_thread = np.array([thread_cpu[int(t)] for t in ids], dtype=np.int64)
        placeholder = min(n.id for n in machine.nodes if n.has_memory)
        placement = Placement(
            PageMap.from_arrays(pages, np.full(len(pages), placeholder, dtype=np.int16)), kernel, shown,
            {"trace": {}}, 0, task, first_touch={"trace": "first access, on the clock"},
        )  # fmt: skip
        placement.deferred_pages = pages.astype(np.uint64)
        placement.deferred_cpus = cpu_by_thread[index]
        placement._deferred_ranges = {"trace": (0, USER_ADDRESS_LIMIT)}
        return placement
    seen, seen_c = len(kernel.reclaim_stalls), len(kernel.compaction_stalls)
    _touch_runs(kernel, task, pages, first, lambda t: thread_cpu[t])
    stalls = [(addrs, n) for pid, addrs, n in kernel.reclaim_stalls[seen:] if pid == task.tgid]
    compaction = [(addrs, m) for pid, addrs, m, _ in kernel.compaction_stalls[seen_c:] if pid == task.tgid]
    if not task.alive:
        raise WorkloadError(f"trace: the OOM killer killed the process placing {len(pages)} pages")
    where = np.full(len(pages), -1, dtype=np.int16)
    huge = np.zeros(len(pages), dtype=bool)
    for vma in task.mm.vmas:
        lo = np.searchsorted(pages, np.uint64(vma.start // PAGE_SIZE_BYTES))
        hi = np.searchsorted(pages, np.uint64(vma.end // PAGE_SIZE_BYTES))
        idx = (pages[lo:hi] - np.uint64(vma.start // PAGE_SIZE_BYTES)).astype(np.int64)
        where[lo:hi] = vma.nodes[idx]
        huge[lo:hi] = _huge_pages(vma)[idx]
    ok = where >= 0
    pm = PageMap.from_arrays(pages[ok], where[ok], huge=huge[ok])
    counts = np.bincount(where[ok].astype(np.int64), minlength=1)
    return Placement(pm, kernel, shown, {"trace": {int(n): int(c) for n, c in enumerate(counts) if c}},
                     int(np.count_nonzero(~ok)), task, stalls, compaction_stalls=compaction,
                     lazily_touched=pages.astype(np.uint64), first_touch={"trace": "first access"})  # fmt: skip
