"""Text of the /proc and /sys files a NUMA user reads, formatted exactly as the kernel prints them.

Formatters take plain dataclasses so the layouts are testable on their own; :mod:`numasim.tools.numactl`
fills them from the kernel model.

Sources: ``mm/vmstat.c`` (``frag_show_print`` for /proc/buddyinfo, ``zoneinfo_show_print`` for /proc/zoneinfo,
``vmstat_text`` and ``vmstat_show`` for /proc/vmstat), ``fs/proc/meminfo.c`` (/proc/meminfo),
``fs/proc/task_mmu.c`` (``show_numa_map``), ``drivers/base/node.c`` (``nodeN/numastat``, ``nodeN/meminfo``),
``fs/proc/array.c`` + ``kernel/cgroup/cpuset.c`` (``Mems_allowed`` lines of /proc/PID/status), ``lib/bitmap.c``
(``%*pb`` and ``%*pbl``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numasim.topology.cpulist import format_cpulist
from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task
    from numasim.kernel.zones import Zone

__all__ = [
    "mapping_page_runs",
    "NR_PAGE_ORDERS",
    "NUMASTAT_ITEMS",
    "ZONE_NAMES",
    "ZoneView",
    "PagesetView",
    "VmaView",
    "bitmap_string",
    "format_buddyinfo",
    "format_zoneinfo",
    "format_numa_map_line",
    "format_numa_maps",
    "format_status_mems_allowed",
    "format_node_numastat",
    "format_node_meminfo",
    "buddy_orders_from_free",
    "node_numastat",
    "zone_views",
    "numa_maps_of",
    "node_meminfo_of",
    "pages_per_node_of",
    "page_runs",
    "status_mems_allowed_of",
    "VM_EVENTS",
    "format_meminfo",
    "format_vmstat",
    "meminfo_of",
    "vmstat_of",
    "node_vmstat_of",
    "status_of",
    "proc_files",
]

NR_PAGE_ORDERS = 11
"""Orders 0..10 on x86_64 with 4 KiB pages (MAX_PAGE_ORDER = 10)."""

NUMASTAT_ITEMS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")
"""The six lines of ``/sys/devices/system/node/nodeN/numastat``, in file order."""

_ZONEINFO_NUMA_NAMES = (
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_interleave",
    "numa_local",
    "numa_other",
)

ZONE_NAMES = ("DMA", "DMA32", "Normal", "Movable", "Device")
"""x86_64 zones in index order (lowmem_reserve has one entry per zone)."""


@dataclass(frozen=True)
class PagesetView:
    """One cpu's per-cpu page list of a zone (``struct per_cpu_pages``)."""

    cpu: int
    count: int
    high: int
    batch: int
    stat_threshold: int
    high_min: int | None = None
    """6.7+ (pcp high auto-tuning): with ``high_min``/``high_max`` the block has five aligned lines."""
    high_max: int | None = None


@dataclass(frozen=True)
class ZoneView:
    """What /proc/zoneinfo and /proc/buddyinfo show about one zone (all counts in pages)."""

    node: int
    name: str
    spanned: int
    present: int
    managed: int
    free: int = 0
    boost: int = 0
    min: int = 0
    low: int = 0
    high: int = 0
    promo: int | None = None
    """Shown on kernels with memory tiering (6.x); ``None`` omits the line."""
    cma: int = 0
    protection: Sequence[int] = ()
    zone_stats: Sequence[tuple[str, int]] = ()
    """Zone vmstat items in kernel order (``nr_free_pages`` ...), without the NUMA events."""
    numa_events: Sequence[int] = (0, 0, 0, 0, 0, 0)
    """numa_hit, numa_miss, numa_foreign, numa_interleave, numa_local, numa_other of this zone."""
    node_stats: Sequence[tuple[str, int]] | None = None
    """Per-node stats, printed in the node's first populated zone only (``None`` elsewhere)."""
    pagesets: Sequence[PagesetView] = ()
    node_unreclaimable: int = 0
    start_pfn: int = 0
    free_area: Sequence[int] | None = None
    """Free blocks per order 0..10 (buddyinfo); ``None`` = derive from ``free``."""

    @property
    def populated(self) -> bool:
        return self.present > 0


@dataclass(frozen=True)
class VmaView:
    """One line of /proc/PID/numa_maps: a VMA and the pages present in it.

    ``pages_per_node`` counts present pages by node; ``anon``/``dirty``/``mapped`` follow ``struct numa_maps``
    (``mapped`` = all present pages). ``active=None`` means every page is active (the field is not printed).
    """

    start: int
    policy: str
    pages_per_node: Mapping[int, int] = field(default_factory=dict)
    file: str | None = None
    heap: bool = False
    stack: bool = False
    huge: bool = False
    anon: int = 0
    dirty: int = 0
    mapmax: int = 1
    swapcache: int = 0
    active: int | None = None
    writeback: int = 0
    kernelpagesize_kb: int = 4

    @property
    def pages(self) -> int:
        return int(sum(self.pages_per_node.values()))


def bitmap_string(bits: Iterable[int], nbits: int) -> str:
    """The kernel's ``%*pb``: hex in 32-bit chunks, highest first, separated by commas.

    The first chunk has only as many digits as ``nbits`` needs.

    Examples
    --------
    >>> bitmap_string([0, 1], 64)
    '00000000,00000003'
    >>> bitmap_string(range(40), 40)
    'ff,ffffffff'
    """
    value = 0
    for b in bits:
        if b < nbits:
            value |= 1 << b
    chunks = []
    nchunks = max((nbits + 31) // 32, 1)
    for c in range(nchunks - 1, -1, -1):
        word = (value >> (32 * c)) & 0xFFFFFFFF
        if c == nchunks - 1:
            rem = nbits - 32 * c
            digits = max((rem + 3) // 4, 1)
            chunks.append(f"{word:0{digits}x}")
        else:
            chunks.append(f"{word:08x}")
    return ",".join(chunks)


def buddy_orders_from_free(free_pages: int, max_order: int = NR_PAGE_ORDERS - 1) -> list[int]:
    """A buddy free-area split of ``free_pages`` for a zone whose free memory is not fragmented.

    The largest blocks first, then the binary digits of the remainder: what a freshly booted zone looks like.
    (The kernel model tracks free page counts, not individual buddies; this is the least-fragmented layout.)

    Examples
    --------
    >>> buddy_orders_from_free(1024 * 3 + 5)
    [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3]
    """
    counts = [0] * (max_order + 1)
    top = 1 << max_order
    counts[max_order] = free_pages // top
    rest = free_pages % top
    for order in range(max_order):
        if rest & (1 << order):
            counts[order] = 1
    return counts


def format_buddyinfo(zones: Iterable[ZoneView]) -> str:
    """/proc/buddyinfo: populated zones only, ``Node %d, zone %8s `` then ``%6lu `` per order.

    Examples
    --------
    >>> z = ZoneView(0, "Normal", spanned=2048, present=2048, managed=2048, free=1025)
    >>> format_buddyinfo([z])
    'Node 0, zone   Normal      1      0      0      0      0      0      0      0      0      0      1 \\n'
    """
    lines = []
    for z in zones:
        if not z.populated:
            continue
        area = list(z.free_area) if z.free_area is not None else buddy_orders_from_free(z.free)
        lines.append(f"Node {z.node}, zone {z.name:>8} " + "".join(f"{n:6d} " for n in area) + "\n")
    return "".join(lines)


def format_zoneinfo(zones: Iterable[ZoneView]) -> str:
    """/proc/zoneinfo (``zoneinfo_show_print``): every zone, unpopulated ones stop after ``protection``."""
    out: list[str] = []
    for z in zones:
        s = [f"Node {z.node}, zone {z.name:>8}"]
        if z.node_stats is not None:
            s.append("\n  per-node stats")
            s.extend(f"\n      {name:<12} {value}" for name, value in z.node_stats)
        s.append(f"\n  pages free     {z.free}")
        s.append(f"\n        boost    {z.boost}")
        s.append(f"\n        min      {z.min}")
        s.append(f"\n        low      {z.low}")
        s.append(f"\n        high     {z.high}")
        if z.promo is not None:
            s.append(f"\n        promo    {z.promo}")
        s.append(f"\n        spanned  {z.spanned}")
        s.append(f"\n        present  {z.present}")
        s.append(f"\n        managed  {z.managed}")
        s.append(f"\n        cma      {z.cma}")
        prot = list(z.protection) or [0] * len(ZONE_NAMES)
        s.append("\n        protection: (" + ", ".join(str(p) for p in prot) + ")")
        if not z.populated:
            s.append("\n")
            out.append("".join(s))
            continue
        s.extend(f"\n      {name:<12} {value}" for name, value in z.zone_stats)
        s.extend(
            f"\n      {name:<12} {value}"
            for name, value in zip(_ZONEINFO_NUMA_NAMES, z.numa_events, strict=True)
        )
        s.append("\n  pagesets")
        for p in z.pagesets:
            s.append(f"\n    cpu: {p.cpu}")
            if p.high_min is None:
                s.append(f"\n              count: {p.count}")
                s.append(f"\n              high:  {p.high}")
                s.append(f"\n              batch: {p.batch}")
            else:
                s.append(f"\n              count:    {p.count}")
                s.append(f"\n              high:     {p.high}")
                s.append(f"\n              batch:    {p.batch}")
                s.append(f"\n              high_min: {p.high_min}")
                s.append(f"\n              high_max: {p.high_max}")
            s.append(f"\n  vm stats threshold: {p.stat_threshold}")
        s.append(f"\n  node_unreclaimable:  {z.node_unreclaimable}")
        s.append(f"\n  start_pfn:           {z.start_pfn}")
        s.append("\n")
        out.append("".join(s))
    return "".join(out)


def format_numa_map_line(vma: VmaView, memory_nodes: Iterable[int] | None = None) -> str:
    """One ``show_numa_map`` line (with its newline).

    Examples
    --------
    >>> v = VmaView(0x7F0000000000, "bind:1", {1: 3}, anon=3, dirty=3)
    >>> format_numa_map_line(v)
    '7f0000000000 bind:1 anon=3 dirty=3 N1=3 kernelpagesize_kB=4\\n'
    >>> format_numa_map_line(VmaView(0x601000, "default", heap=True))
    '00601000 default heap\\n'
    """
    s = [f"{vma.start:08x} {vma.policy}"]
    if vma.file is not None:
        s.append(f" file={vma.file}")
    elif vma.heap:
        s.append(" heap")
    elif vma.stack:
        s.append(" stack")
    if vma.huge:
        s.append(" huge")
    pages = vma.pages
    if pages:
        if vma.anon:
            s.append(f" anon={vma.anon}")
        if vma.dirty:
            s.append(f" dirty={vma.dirty}")
        if pages != vma.anon and pages != vma.dirty:
            s.append(f" mapped={pages}")
        if vma.mapmax > 1:
            s.append(f" mapmax={vma.mapmax}")
        if vma.swapcache:
            s.append(f" swapcache={vma.swapcache}")
        if vma.active is not None and vma.active < pages and not vma.huge:
            s.append(f" active={vma.active}")
        if vma.writeback:
            s.append(f" writeback={vma.writeback}")
        nodes = sorted(memory_nodes) if memory_nodes is not None else sorted(vma.pages_per_node)
        for nid in nodes:
            count = int(vma.pages_per_node.get(nid, 0))
            if count:
                s.append(f" N{nid}={count}")
        s.append(f" kernelpagesize_kB={vma.kernelpagesize_kb}")
    return "".join(s) + "\n"


def format_numa_maps(vmas: Iterable[VmaView], memory_nodes: Iterable[int] | None = None) -> str:
    """/proc/PID/numa_maps: one line per VMA, in address order."""
    nodes = list(memory_nodes) if memory_nodes is not None else None
    return "".join(format_numa_map_line(v, nodes) for v in sorted(vmas, key=lambda v: v.start))


def format_status_mems_allowed(mems_allowed: Iterable[int], max_numnodes: int = 1024) -> str:
    """The two ``Mems_allowed`` lines of /proc/PID/status.

    Examples
    --------
    >>> format_status_mems_allowed([0, 1], max_numnodes=64).splitlines()[0].split("\\t")
    ['Mems_allowed:', '00000000,00000003']
    """
    nodes = sorted(mems_allowed)
    return (
        f"Mems_allowed:\t{bitmap_string(nodes, max_numnodes)}\nMems_allowed_list:\t{format_cpulist(nodes)}\n"
    )


def format_node_numastat(counters: Mapping[str, int]) -> str:
    """``/sys/devices/system/node/nodeN/numastat``: exactly six ``name value`` lines.

    Examples
    --------
    >>> format_node_numastat({"numa_hit": 5}).splitlines()[:2]
    ['numa_hit 5', 'numa_miss 0']
    """
    return "".join(f"{name} {int(counters.get(name, 0))}\n" for name in NUMASTAT_ITEMS)


def format_node_meminfo(
    node: int, items_kb: Sequence[tuple[str, int]], hugepages: Sequence[tuple[str, int]] = ()
) -> str:
    """``/sys/devices/system/node/nodeN/meminfo``: ``Node N Label:`` padded to 16, value ``%8lu kB``.

    ``hugepages`` are the unit-less ``HugePages_*`` lines (``%5u``).

    Examples
    --------
    >>> format_node_meminfo(0, [("MemTotal", 16314556)])
    'Node 0 MemTotal:       16314556 kB\\n'
    """
    lines = [f"Node {node} {label + ':':<16}{value:>8} kB\n" for label, value in items_kb]
    lines += [f"Node {node} {label + ':':<16} {value:>5}\n" for label, value in hugepages]
    return "".join(lines)


# --- views of the simulated kernel ----------------------------------------------------------------------------


def node_numastat(kernel: Kernel, nid: int) -> dict[str, int]:
    """The six numastat counters of node ``nid``."""
    pm = kernel.pm
    if hasattr(pm, "numastat"):
        return dict(pm.numastat(nid))
    return dict(pm.counters.item(nid))


def _pagesets(kernel: Kernel, z: Zone) -> list[PagesetView]:
    # zone_batchsize() and zone_highsize() with percpu_pagelist_high_fraction = 0; lists start empty
    batch = min(z.managed_pages >> 10, (1 << 20) // 4096) // 4
    batch = max(batch, 1)
    batch = (1 << ((batch + batch // 2).bit_length() - 1)) - 1 if batch > 1 else 1
    node_cpus = max(len(kernel.machine.node(z.node).cpus) or len(kernel.machine.cpus), 1)
    high = max(z.wmark_low // node_cpus, batch << 2)
    # calculate_normal_threshold(): 2 * fls(num_online_cpus) * (1 + fls(zone MB >> 7)), at most 125
    mem_mb = (z.managed_pages * 4096) >> 20
    threshold = min(2 * len(kernel.machine.cpus).bit_length() * (1 + (mem_mb >> 7).bit_length()), 125)
    if kernel.version >= (6, 7):
        high_max = max(z.managed_pages // 8 // node_cpus, batch << 2)
        return [PagesetView(c, 0, high, batch, threshold, high, high_max) for c in kernel.machine.cpus]
    return [PagesetView(cpu, 0, high, batch, threshold) for cpu in kernel.machine.cpus]


def _task_pages_by_zone(kernel: Kernel) -> dict[tuple[int, int, bool], int]:
    """Present pages of all live tasks by ``(node, zone type, is_file)`` (one ``np.unique`` per VMA)."""
    import numpy as np

    counts: dict[tuple[int, int, bool], int] = {}
    for task in kernel.tasks.values():
        for v in task.mm.vmas:
            present = v.nodes >= 0
            if not present.any() or v.hugetlb:  # hugetlb pages are the pool's, not AnonPages
                continue
            key = v.nodes[present].astype(np.int64) * 16 + v.zones[present].astype(np.int64)
            values, n = np.unique(key, return_counts=True)
            for kv, c in zip(values.tolist(), n.tolist(), strict=True):
                k = (kv // 16, kv % 16, v.kind == "file")
                counts[k] = counts.get(k, 0) + int(c)
    return counts


def zone_views(kernel: Kernel, *, pagesets: bool = True) -> list[ZoneView]:
    """One :class:`ZoneView` per zone of every node (zoneinfo order), from the kernel's physical memory.

    The LRU counters show the live tasks' pages (anonymous ones active, file ones and the machine's clean page
    cache as active file); the kernel's many other vmstat items are not modelled and are left out.
    """
    pm = kernel.pm
    pages = _task_pages_by_zone(kernel)
    views = []
    first_populated: set[int] = set()
    for index, z in enumerate(pm.zones):
        counters = pm.zone_counters.item(index)
        zone_anon = pages.get((z.node, int(z.type), False), 0)
        zone_file = pages.get((z.node, int(z.type), True), 0) + z.reclaimable_pages
        node_stats = None
        if z.populated and z.node not in first_populated:
            first_populated.add(z.node)
            anon = sum(c for (n, _, f), c in pages.items() if n == z.node and not f)
            mapped = sum(c for (n, _, f), c in pages.items() if n == z.node and f)
            file = mapped + int(pm.reclaimable_pages(z.node))
            node_stats = [
                ("nr_inactive_anon", 0),
                ("nr_active_anon", anon),
                ("nr_inactive_file", 0),
                ("nr_active_file", file),
                ("nr_unevictable", 0),
                ("nr_anon_pages", anon),
                ("nr_mapped", mapped),
                ("nr_file_pages", file),
            ]
        views.append(
            ZoneView(
                node=z.node,
                name=z.name,
                spanned=z.spanned_pages,
                present=z.present_pages,
                managed=z.managed_pages,
                free=z.free_pages,
                min=z.wmark_min,
                low=z.wmark_low,
                high=z.wmark_high,
                promo=z.wmark_promo if kernel.version >= (6, 0) else None,
                protection=list(z.lowmem_reserve),
                zone_stats=[
                    ("nr_free_pages", z.free_pages),
                    ("nr_zone_inactive_anon", 0),
                    ("nr_zone_active_anon", zone_anon),
                    ("nr_zone_inactive_file", 0),
                    ("nr_zone_active_file", zone_file),
                    ("nr_zone_unevictable", 0),
                ],
                numa_events=[counters[name] for name in NUMASTAT_ITEMS],
                node_stats=node_stats,
                pagesets=_pagesets(kernel, z) if pagesets and z.populated else [],
                start_pfn=z.start_pfn,
                free_area=z.buddy().counts.tolist(),
            )
        )
    return views


def numa_maps_of(kernel: Kernel, task: Task) -> str:
    """/proc/PID/numa_maps of a simulated task."""
    vmas = []
    for v in task.mm.vmas:
        per_node = v.pages_per_node()
        if v.hugetlb:  # gather_hugetlb_stats: counted in huge pages, kernelpagesize_kB=2048
            per_node = {n: c // 512 for n, c in per_node.items()}
        present = int(sum(per_node.values()))
        anon = present if v.kind != "file" else 0
        vmas.append(
            VmaView(
                start=v.start,
                policy=kernel.policy_string(task, v),
                pages_per_node=per_node,
                file=v.path if v.kind == "file" else None,
                heap=v.tag == "heap",
                stack=v.tag == "stack",
                huge=v.hugetlb,
                anon=anon,
                dirty=anon,
                kernelpagesize_kb=2048 if v.hugetlb else 4,
            )
        )
    return format_numa_maps(vmas, sorted(kernel.memory_nodes))


def node_meminfo_of(kernel: Kernel, nid: int) -> str:
    """``/sys/devices/system/node/nodeN/meminfo`` (the fields the model knows; the rest are 0)."""
    ps = kernel.config.page_size_bytes // 1024 if hasattr(kernel.config, "page_size_bytes") else 4
    total = int(kernel.pm.managed_pages(nid)) * ps
    free = int(kernel.pm.free_pages(nid)) * ps
    pages = _task_pages_by_zone(kernel)
    mapped = sum(c for (n, _, f), c in pages.items() if n == nid and f) * ps
    anon = sum(c for (n, _, f), c in pages.items() if n == nid and not f) * ps
    cache = int(kernel.pm.reclaimable_pages(nid)) * ps + mapped
    items = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemUsed", total - free),
        ("SwapCached", 0),
        ("Active", anon + cache),
        ("Inactive", 0),
        ("Active(anon)", anon),
        ("Inactive(anon)", 0),
        ("Active(file)", cache),
        ("Inactive(file)", 0),
        ("Unevictable", 0),
        ("Mlocked", 0),
        ("Dirty", 0),
        ("Writeback", 0),
        ("FilePages", cache),
        ("Mapped", mapped),
        ("AnonPages", anon),
        ("Shmem", 0),
        ("KernelStack", 0),
        ("PageTables", 0),
        ("SecPageTables", 0),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("KReclaimable", 0),
        ("Slab", 0),
        ("SReclaimable", 0),
        ("SUnreclaim", 0),
        ("AnonHugePages", _thp_pages(kernel, nid) * ps),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
    ]
    pool = kernel.hugetlb
    return format_node_meminfo(
        nid, items,
        [("HugePages_Total", pool.total(nid)), ("HugePages_Free", pool.free(nid)), ("HugePages_Surp", 0)],
    )


def _thp_pages(kernel: Kernel, nid: int) -> int:
    """Base pages of transparent huge folios on node ``nid`` (``NR_ANON_THPS`` x 512), over live tasks."""
    import numpy as np

    total = 0
    for task in kernel.tasks.values():
        for v in task.mm.vmas:
            if v.thp.any():
                total += int(np.count_nonzero(v.thp & (v.nodes == nid)))
    return total


def pages_per_node_of(kernel: Kernel, pids: Sequence[int]) -> dict[int, int]:
    """Present pages per node summed over the tasks ``pids``."""
    total: dict[int, int] = {}
    for pid in pids:
        task = kernel.tasks.get(pid)
        if task is None:
            continue
        for nid, count in task.pages_per_node().items():
            total[nid] = total.get(nid, 0) + int(count)
    return dict(sorted(total.items()))


def _node_runs(page_nodes: Any) -> list[list[int]]:
    """Runs ``[[node, count], ...]`` of the present pages (node >= 0) of one mapping, in address order."""
    import numpy as np

    nodes = np.asarray(page_nodes)
    nodes = nodes[nodes >= 0]
    if nodes.size == 0:
        return []
    edges = np.flatnonzero(np.diff(nodes)) + 1
    starts = np.concatenate(([0], edges))
    counts = np.diff(np.concatenate((starts, [nodes.size])))
    return [[int(n), int(c)] for n, c in zip(nodes[starts].tolist(), counts.tolist(), strict=True)]


def page_runs(kernel: Kernel, pids: Sequence[int]) -> list[list[int]]:
    """The node of every present page of ``pids``, in address order, as runs ``[[node, count], ...]``."""
    runs: list[list[int]] = []
    for pid in pids:
        task = kernel.tasks.get(pid)
        if task is None:
            continue
        for v in sorted(task.mm.vmas, key=lambda vma: vma.start):
            for node, count in _node_runs(v.nodes):
                if runs and runs[-1][0] == node:  # runs continue across mappings
                    runs[-1][1] += count
                else:
                    runs.append([node, count])
    return runs


def mapping_page_runs(kernel: Kernel, pids: Sequence[int]) -> list[dict[str, Any]]:
    """Each mapping of ``pids`` with the node of its pages: what :func:`page_runs` gives for the whole process,
    split per mapping, so a program's own buffer can be told apart from its image (binary, libc, stack).

    One dict per mapping in address order: ``pid``, ``start`` (hex, as ``alloc`` prints its ``mmap``),
    ``name`` (``heap``, ``stack``, ``file=PATH``, ``anon`` or ``shmem``, as numa_maps labels it), ``pages``
    (its length in pages), ``present`` (pages faulted in) and ``runs`` (``[[node, count], ...]`` of the present
    pages in address order).

    Examples
    --------
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.topology.builders import glueless
    >>> k = Kernel(glueless(2)); t = k.spawn("a", cpu=0)
    >>> vma = k.mmap(t, 8 * 4096); _ = k.touch(t, vma.start, 4 * 4096)
    >>> [(m["pages"], m["present"], m["runs"]) for m in mapping_page_runs(k, [t.pid])]
    [(8, 4, [[0, 4]])]
    """
    out: list[dict[str, Any]] = []
    for pid in pids:
        task = kernel.tasks.get(pid)
        if task is None:
            continue
        for v in sorted(task.mm.vmas, key=lambda vma: vma.start):
            runs = _node_runs(v.nodes)
            name = v.tag or (f"file={v.path}" if v.kind == "file" and v.path else v.kind)
            out.append({
                "pid": pid, "start": f"{v.start:#x}", "name": name, "pages": (v.end - v.start) // PAGE_SIZE_BYTES,
                "present": sum(c for _, c in runs), "runs": runs,
            })
    return out


def status_mems_allowed_of(kernel: Kernel, task: Task) -> str:
    """The ``Mems_allowed`` lines of /proc/PID/status of a simulated task (MAX_NUMNODES-bit mask)."""
    from numasim.kernel.mempolicy import MAX_NUMNODES

    return format_status_mems_allowed(task.mems_allowed, MAX_NUMNODES)


# --- /proc/meminfo, /proc/vmstat, nodeN/vmstat, /proc/PID/status -------------------------------------------

VM_EVENTS = (
    "pgalloc_dma", "pgalloc_dma32", "pgalloc_normal", "pgalloc_movable", "pgalloc_device",
    "allocstall_dma", "allocstall_dma32", "allocstall_normal", "allocstall_movable", "allocstall_device",
    "pgfree", "pgsteal_kswapd", "pgsteal_direct", "pgscan_kswapd", "pgscan_direct", "pageoutrun", "oom_kill",
    "numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
    "numa_pages_migrated", "pgmigrate_success", "pgmigrate_fail",
    "compact_migrate_scanned", "compact_free_scanned", "compact_isolated", "compact_stall", "compact_fail",
    "compact_success", "thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "thp_collapse_alloc_failed",
)  # fmt: skip
"""The ``enum vm_event_item`` counters the model keeps, in ``vmstat_text`` order (mm/vmstat.c, x86_64 with
``CONFIG_ZONE_DEVICE``); /proc/vmstat prints them after the zone, NUMA and node items."""



def format_vmstat(items: Iterable[tuple[str, int]]) -> str:
    """/proc/vmstat and ``nodeN/vmstat``: one ``name value`` line per item (``"%s %lu\\n"``).

    Examples
    --------
    >>> format_vmstat([("nr_free_pages", 12), ("numa_hit", 3)])
    'nr_free_pages 12\\nnuma_hit 3\\n'
    """
    return "".join(f"{name} {int(value)}\n" for name, value in items)


def format_meminfo(items_kb: Sequence[tuple[str, int]], hugepages: Sequence[tuple[str, int]] = (),
                   tail_kb: Sequence[tuple[str, int]] = ()) -> str:  # fmt: skip
    """/proc/meminfo (``meminfo_proc_show``): ``Label:`` padded to 16 columns, the value at least 8 wide, `` kB``.

    ``hugepages`` are the unit-less ``HugePages_*`` lines (``%5lu`` after a label padded to 19);
    ``tail_kb`` the kB lines after them (``Hugepagesize``, ``Hugetlb``, x86's ``DirectMap*``).
    ``HardwareCorrupted`` is the one label longer than the padding; it keeps its own ``%5lu``.

    Examples
    --------
    >>> format_meminfo([("MemTotal", 16314556)], [("HugePages_Total", 0)])
    'MemTotal:       16314556 kB\\nHugePages_Total:       0\\n'
    """
    lines = []
    for label, value in items_kb:
        if label == "HardwareCorrupted":
            lines.append(f"HardwareCorrupted: {value:5d} kB\n")
        else:
            lines.append(f"{label + ':':<16}{value:>8} kB\n")
    lines += [f"{label + ':':<19}{value:>5}\n" for label, value in hugepages]
    lines += [f"{label + ':':<16}{value:>8} kB\n" for label, value in tail_kb]
    return "".join(lines)


def _node_memory_kb(kernel: Kernel, nid: int | None) -> dict[str, int]:
    """The LRU and page counts of node ``nid`` (``None``: all nodes) in kB, as node_meminfo_of derives them."""
    ps = kernel.config.page_size_bytes // 1024 if hasattr(kernel.config, "page_size_bytes") else 4
    nodes = kernel.machine.node_ids if nid is None else [nid]
    pages = _task_pages_by_zone(kernel)
    mapped = sum(c for (n, _, f), c in pages.items() if n in nodes and f) * ps
    anon = sum(c for (n, _, f), c in pages.items() if n in nodes and not f) * ps
    return {
        "total": sum(int(kernel.pm.managed_pages(n)) for n in nodes) * ps,
        "free": sum(int(kernel.pm.free_pages(n)) for n in nodes) * ps,
        "mapped": mapped,
        "anon": anon,
        "cache": sum(int(kernel.pm.reclaimable_pages(n)) for n in nodes) * ps + mapped,
        "thp": sum(_thp_pages(kernel, n) for n in nodes) * ps,
    }


def meminfo_of(kernel: Kernel) -> str:
    """/proc/meminfo of the simulated kernel (x86_64, a distribution's config: swap, zswap, CMA, THP and unaccepted
    memory (6.5+) configured, no swap device). Fields the model does not track are 0; ``MemAvailable`` is free memory
    plus the clean page cache (``si_mem_available`` without its reserves and slab)."""
    m = _node_memory_kb(kernel, None)
    pool = kernel.hugetlb
    huge_kb = 2048
    items = [
        ("MemTotal", m["total"]), ("MemFree", m["free"]), ("MemAvailable", m["free"] + m["cache"] - m["mapped"]),
        ("Buffers", 0), ("Cached", m["cache"]), ("SwapCached", 0), ("Active", m["anon"] + m["cache"]),
        ("Inactive", 0), ("Active(anon)", m["anon"]), ("Inactive(anon)", 0), ("Active(file)", m["cache"]),
        ("Inactive(file)", 0), ("Unevictable", 0), ("Mlocked", 0), ("SwapTotal", 0), ("SwapFree", 0),
        ("Zswap", 0), ("Zswapped", 0), ("Dirty", 0), ("Writeback", 0), ("AnonPages", m["anon"]),
        ("Mapped", m["mapped"]), ("Shmem", 0), ("KReclaimable", 0), ("Slab", 0), ("SReclaimable", 0),
        ("SUnreclaim", 0), ("KernelStack", 0), ("PageTables", 0), ("SecPageTables", 0), ("NFS_Unstable", 0),
        ("Bounce", 0), ("WritebackTmp", 0), ("CommitLimit", m["total"] // 2), ("Committed_AS", m["anon"]),
        ("VmallocTotal", 34359738367), ("VmallocUsed", 0), ("VmallocChunk", 0), ("Percpu", 0),
        ("HardwareCorrupted", 0), ("AnonHugePages", m["thp"]), ("ShmemHugePages", 0), ("ShmemPmdMapped", 0),
        ("FileHugePages", 0), ("FilePmdMapped", 0), ("CmaTotal", 0), ("CmaFree", 0),
    ]  # fmt: skip
    if kernel.version >= (6, 5):  # CONFIG_UNACCEPTED_MEMORY's line appeared in 6.5
        items.append(("Unaccepted", 0))
    hugepages = [("HugePages_Total", pool.total()), ("HugePages_Free", pool.free()),
                 ("HugePages_Rsvd", int(pool.reserved)), ("HugePages_Surp", 0)]  # fmt: skip
    # x86's arch_report_meminfo: the direct map; the model maps all memory with 1 GiB pages but the first GiB
    tail = [("Hugepagesize", huge_kb), ("Hugetlb", pool.total() * huge_kb), ("DirectMap4k", 0),
            ("DirectMap2M", min(m["total"], 1 << 20)), ("DirectMap1G", max(m["total"] - (1 << 20), 0))]  # fmt: skip
    return format_meminfo(items, hugepages, tail)


def _vmstat_items(kernel: Kernel, nodes: Sequence[int]) -> list[tuple[str, int]]:
    """Zone stat items summed over ``nodes``' zones, the NUMA events, then the node stat items (vmstat_text
    order), of the items the model keeps."""
    views = [v for v in zone_views(kernel, pagesets=False) if v.node in nodes]
    zone_items: dict[str, int] = {}
    for v in views:
        for name, value in v.zone_stats:
            zone_items[name] = zone_items.get(name, 0) + int(value)
    numa = [sum(int(v.numa_events[k]) for v in views) for k in range(len(_ZONEINFO_NUMA_NAMES))]
    node_items: dict[str, int] = {}
    for v in views:
        for name, value in v.node_stats or ():
            node_items[name] = node_items.get(name, 0) + int(value)
    if not node_items:  # no populated zone (a memoryless node): the node's items are all zero
        node_items = dict.fromkeys(("nr_inactive_anon", "nr_active_anon", "nr_inactive_file", "nr_active_file",
                                    "nr_unevictable", "nr_anon_pages", "nr_mapped", "nr_file_pages"), 0)  # fmt: skip
    # vmstat_item_print_in_thp: counted in 2 MiB folios
    node_items["nr_anon_transparent_hugepages"] = sum(_thp_pages(kernel, n) for n in nodes) // 512
    return [*zone_items.items(), *zip(_ZONEINFO_NUMA_NAMES, numa, strict=True), *node_items.items()]


def vmstat_of(kernel: Kernel) -> str:
    """/proc/vmstat of the simulated kernel: the zone, NUMA and node items over all nodes, then the vm events
    (:data:`VM_EVENTS`); items the model does not keep are left out, as in :func:`zone_views`."""
    counters = {**getattr(getattr(kernel, "balancing", None), "vmstat", {}), **kernel.pm.vmstat}
    events = [(name, int(counters.get(name, 0))) for name in VM_EVENTS]
    return format_vmstat([*_vmstat_items(kernel, kernel.machine.node_ids), *events])


def node_vmstat_of(kernel: Kernel, nid: int) -> str:
    """``/sys/devices/system/node/nodeN/vmstat`` (``node_read_vmstat``): the zone items summed over the node's
    zones, its NUMA events, its node items."""
    return format_vmstat(_vmstat_items(kernel, [nid]))


def status_of(kernel: Kernel, task: Task) -> str:
    """/proc/PID/status of a simulated task: the lines the model knows (``proc_pid_status`` formats: name,
    state, ids, memory sizes, threads, cpu and memory affinity); the credential, signal and capability lines
    of a real file are left out."""
    from numasim.kernel.mempolicy import MAX_NUMNODES

    threads = sum(1 for t in kernel.tasks.values() if t.tgid == task.tgid)
    size_kb = sum(v.npages for v in task.mm.vmas) * PAGE_SIZE_BYTES // 1024
    rss_anon = sum(v.present for v in task.mm.vmas if v.kind != "file") * PAGE_SIZE_BYTES // 1024
    rss_file = sum(v.present for v in task.mm.vmas if v.kind == "file") * PAGE_SIZE_BYTES // 1024
    nr_cpu_ids = max(kernel.machine.cpus) + 1 if kernel.machine.cpus else 1
    cpus = sorted(task.cpus_allowed)
    lines = [
        f"Name:\t{task.comm[:15]}\n", "State:\tS (sleeping)\n", f"Tgid:\t{task.tgid}\n", f"Pid:\t{task.pid}\n",
        "PPid:\t1\n",
        f"VmSize:\t{size_kb:8d} kB\n", f"VmRSS:\t{rss_anon + rss_file:8d} kB\n", f"RssAnon:\t{rss_anon:8d} kB\n",
        f"RssFile:\t{rss_file:8d} kB\n", f"Threads:\t{threads}\n",
        f"Cpus_allowed:\t{bitmap_string(cpus, nr_cpu_ids)}\n", f"Cpus_allowed_list:\t{format_cpulist(cpus)}\n",
    ]  # fmt: skip
    return "".join(lines) + format_status_mems_allowed(task.mems_allowed, MAX_NUMNODES)


def proc_files(kernel: Kernel) -> dict[str, str]:
    """The simulated kernel's /proc views as a file tree: ``proc/meminfo``, ``proc/vmstat``, ``proc/zoneinfo``,
    ``proc/buddyinfo``, and ``proc/PID/numa_maps`` and ``proc/PID/status`` of every live simulated task (paths
    relative to the tree's root).

    Examples
    --------
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.topology.builders import glueless
    >>> k = Kernel(glueless(2)); t = k.spawn("a", cpu=0)
    >>> sorted(proc_files(k))[:3]
    ['proc/1000/numa_maps', 'proc/1000/status', 'proc/buddyinfo']
    """
    views = zone_views(kernel)
    files = {
        "proc/meminfo": meminfo_of(kernel),
        "proc/vmstat": vmstat_of(kernel),
        "proc/zoneinfo": format_zoneinfo(views),
        "proc/buddyinfo": format_buddyinfo(views),
    }
    for pid, task in sorted(kernel.tasks.items()):
        files[f"proc/{pid}/numa_maps"] = numa_maps_of(kernel, task)
        files[f"proc/{pid}/status"] = status_of(kernel, task)
    return files
