"""Physical memory of a booted kernel: zones, watermarks, zonelists, the page allocator and numastat.

:class:`PhysicalMemory` "boots" a :class:`~numasim.topology.model.Machine` the way x86_64 Linux does
(``free_area_init`` zone layout, ``build_all_zonelists``, ``init_per_zone_wmark_min``, khugepaged's
``set_recommended_min_free_kbytes``) and then serves :class:`~numasim.kernel.allocator.AllocRequest` s.
Sources: ``mm/page_alloc.c``, ``mm/mm_init.c``, ``mm/memory_hotplug.c`` (``online_pages``), ``mm/vmscan.c``.

Examples
--------
>>> from numasim.topology.builders import glueless
>>> pm = PhysicalMemory(glueless(2, memory_bytes=8 << 30))
>>> pm.boot_log()
['Fallback order for Node 0: 0 1 ', 'Fallback order for Node 1: 1 0 ']
>>> r = pm.alloc(AllocRequest(count=1000, preferred_nid=1, cpu_node=0))
>>> r.per_node_pages, pm.counters.item(1)["numa_hit"], pm.counters.item(1)["other_node"]
({1: 1000}, 1000, 1000)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from numasim.errors import KernelConfigError
from numasim.kernel.allocator import (
    AllocPlan,
    AllocRequest,
    AllocResult,
    Candidate,
    NumaCounters,
    Segment,
    min_watermark_for,
    nofail_watermark_for,
    pages_of,
    run_per_page,
    run_scalar,
)
from numasim.kernel.buddy import FreeArea
from numasim.kernel.config import KernelConfig
from numasim.kernel.gfp import Gfp, gfp_zone
from numasim.kernel.kswapd import Kswapd
from numasim.kernel.watermarks import (
    calculate_min_free_kbytes,
    set_recommended_min_free_kbytes,
    setup_per_zone_lowmem_reserve,
    setup_per_zone_wmarks,
)
from numasim.kernel.zonelist import NodeFacts, build_all_zonelists, build_zonerefs_node
from numasim.kernel.zones import (
    DMA32_PRESENT_MAX_PAGES,
    DMA_MANAGED_PAGES,
    DMA_PRESENT_PAGES,
    DMA_SPANNED_PAGES,
    KERNEL_IMAGE_PAGES,
    MAX_NR_ZONES,
    Zone,
    ZoneType,
)
from numasim.topology.model import Machine

__all__ = [
    "PhysicalMemory",
    "AllocRequest",
    "AllocResult",
    "NumaCounters",
    "BOOT_KERNEL_USED_DIVISOR",
    "SECTION_PAGES",
]

BOOT_KERNEL_USED_DIVISOR = 256
"""Without ``free_bytes``, 1/256 of a node's managed memory is in use after boot (slab, page tables, percpu)."""
SECTION_PAGES = 32768
"""Node ranges start on a 128 MiB memory-section boundary."""
_RECLAIM_ZONE_BITS = 7


class PhysicalMemory:
    """Zones, watermarks, zonelists, free pages and numastat counters of one booted machine.

    Parameters
    ----------
    machine : Machine
        The machine; ``Node.memory_bytes`` is read as MemTotal, ``Node.free_bytes`` (if given) as MemFree.
    config : KernelConfig
        Version and ``vm.*`` knobs.

    Attributes
    ----------
    zones : list of Zone
        ``MAX_NR_ZONES`` zones per node, nodes in id order (unpopulated zones included, as in zoneinfo).
    counters : NumaCounters
        Per node id (index = node id).
    zone_counters : NumaCounters
        Per zone (index = position in :attr:`zones`).
    vmstat : dict
        ``pgalloc_<zone>``, ``pgfree``, ``pgsteal_direct``, ``pgscan_direct``, ``pgsteal_kswapd``,
        ``pgscan_kswapd``, ``pageoutrun`` (kswapd runs: one per wake-up, one more per run without progress),
        ``oom_kill``.
    kswapd : Kswapd
        The per-node kswapd threads (they run only when ``KernelConfig.kswapd_enabled``).
    min_free_kbytes : int
        The current ``vm.min_free_kbytes``.
    """

    def __init__(self, machine: Machine, config: KernelConfig | None = None) -> None:
        self.machine = machine
        self.config = config if config is not None else KernelConfig()
        self.node_ids: list[int] = machine.node_ids
        self._pos = {nid: i for i, nid in enumerate(self.node_ids)}
        # one node needs no SLIT (and may have no timing to derive one from)
        table = machine.slit() if len(self.node_ids) > 1 else [[10]]
        self._distance = {
            a: {b: table[i][j] for j, b in enumerate(self.node_ids)} for i, a in enumerate(self.node_ids)
        }
        self.cpu_nodes = frozenset(n.id for n in machine.nodes if n.has_cpus)
        for nid in self.config.hotplug_nodes:
            if nid not in self._pos:
                raise ValueError(f"KernelConfig.hotplug_nodes: no node {nid} (nodes: {self.node_ids})")
        self.zones: list[Zone] = [
            Zone(node=nid, type=ZoneType(t)) for nid in self.node_ids for t in range(MAX_NR_ZONES)
        ]
        self._boot_layout()
        size = max(self.node_ids) + 1
        self.counters = NumaCounters.zeros(size)
        self.zone_counters = NumaCounters.zeros(len(self.zones))
        self.folio_compaction = np.zeros(0, dtype=np.int64)
        """Pages direct compaction migrated for each folio of the last :func:`~numasim.kernel.folio_alloc.alloc_folios`
        call (0: none)."""
        self.vmstat: dict[str, int] = {
            "pgalloc_dma": 0,
            "pgalloc_dma32": 0,
            "pgalloc_normal": 0,
            "pgalloc_movable": 0,
            "pgalloc_device": 0,
            "pgfree": 0,
            "pgsteal_direct": 0,
            "pgscan_direct": 0,
            "pgsteal_kswapd": 0,
            "pgscan_kswapd": 0,
            "pageoutrun": 0,
            "oom_kill": 0,
        }
        self._log: list[str] = []
        self._node_order: dict[int, list[int]] = {}
        self._fallback: dict[int, list[int]] = {}
        self._nofallback: dict[int, list[int]] = {}
        self._build_all_zonelists(cpus_known=self.config.cpus_known_at_boot)
        self.user_min_free_kbytes: int | None = None
        self.min_free_kbytes = 0
        self._init_per_zone_wmark_min()
        if self.config.min_free_kbytes is not None:
            self.set_min_free_kbytes(self.config.min_free_kbytes)
        self._boot_free_pages()
        self.kswapd = Kswapd(self)

    # --- boot ------------------------------------------------------------------------------------------
    def _boot_layout(self) -> None:
        cfg = self.config
        ps = cfg.page_size_bytes
        first_memory = next(
            (n.id for n in self.machine.nodes if n.has_memory and n.id not in cfg.hotplug_nodes), None
        )
        next_pfn = 0
        for node in self.machine.nodes:
            if not node.has_memory or node.id in cfg.hotplug_nodes:
                continue
            zs = self.node_zones(node.id)
            managed = node.memory_bytes // ps
            memmap = -(-managed // 63)  # struct page array: 64 bytes per 4 KiB page
            movable = 0
            if cfg.movable_bytes and node.id in cfg.movable_bytes:
                movable = min(cfg.movable_bytes[node.id] // ps, managed)
            rest = managed - movable
            if node.id == first_memory:
                dma = zs[ZoneType.DMA]
                dma.managed_pages = min(rest, DMA_MANAGED_PAGES)
                dma.present_pages = (
                    DMA_PRESENT_PAGES if dma.managed_pages == DMA_MANAGED_PAGES else dma.managed_pages
                )
                dma.spanned_pages = DMA_SPANNED_PAGES if dma.managed_pages else 0
                dma.start_pfn = 1
                rest -= dma.managed_pages
                dma32 = zs[ZoneType.DMA32]
                dma32.managed_pages = min(rest, DMA32_PRESENT_MAX_PAGES - KERNEL_IMAGE_PAGES)
                rest -= dma32.managed_pages
                if dma32.managed_pages:
                    dma32.present_pages = dma32.managed_pages + KERNEL_IMAGE_PAGES
                    dma32.start_pfn = 4096
                    dma32.spanned_pages = (1 << 20) - 4096 if rest or movable else dma32.present_pages
                next_pfn = 1 << 20  # 4 GiB
            next_pfn = -(-next_pfn // SECTION_PAGES) * SECTION_PAGES
            normal = zs[ZoneType.NORMAL]
            normal.managed_pages = rest
            highest = normal if rest else None
            if rest:
                normal.start_pfn = next_pfn
            mov = zs[ZoneType.MOVABLE]
            mov.managed_pages = movable
            if movable:
                highest = mov if highest is None else highest
            if highest is None:
                highest = zs[ZoneType.DMA32] if zs[ZoneType.DMA32].managed_pages else zs[ZoneType.DMA]
            for z in (normal, mov):
                if z.managed_pages:
                    z.present_pages = z.managed_pages
            highest.present_pages += memmap
            if normal.managed_pages:
                normal.spanned_pages = normal.present_pages
                next_pfn = normal.start_pfn + normal.spanned_pages
            if movable:
                mov.start_pfn = next_pfn
                mov.spanned_pages = mov.present_pages
                next_pfn += mov.spanned_pages
            for z in zs:
                if z.type in (ZoneType.DMA, ZoneType.DMA32) and z.present_pages and z is highest:
                    z.spanned_pages = max(z.spanned_pages, z.present_pages)
        self._next_pfn = -(-next_pfn // SECTION_PAGES) * SECTION_PAGES

    def _boot_free_pages(self) -> None:
        cfg = self.config
        ps = cfg.page_size_bytes
        unknown = sorted(set(cfg.reclaimable_page_cache_bytes or {}) - set(self.node_ids))
        if unknown:
            raise KernelConfigError(f"page cache of node {unknown[0]}: no such node (nodes {self.node_ids})")
        for node in self.machine.nodes:
            zs = [z for z in self.node_zones(node.id) if z.managed_pages]
            managed = sum(z.managed_pages for z in zs)
            if not managed:
                continue
            if node.free_bytes is not None:
                free = min(node.free_bytes // ps, managed)
            else:
                free = managed - managed // BOOT_KERNEL_USED_DIVISOR
            used = managed - free
            if cfg.reclaimable_page_cache_bytes is not None and node.id in cfg.reclaimable_page_cache_bytes:
                cache = cfg.reclaimable_page_cache_bytes[node.id] // ps
                if cache > used:
                    raise KernelConfigError(
                        f"page cache of node {node.id} = {cfg.reclaimable_page_cache_bytes[node.id]} bytes: more "
                        f"than the node's memory in use at boot ({used * ps} bytes: managed less free); page "
                        "cache is part of the memory in use (lower the node's free_bytes to give it more)"
                    )
            else:
                cache = int(used * cfg.page_cache_fraction_of_used)
            used_z = _split(used, [z.managed_pages for z in zs])
            cache_z = _split(cache, used_z)
            for z, u, c in zip(zs, used_z, cache_z, strict=True):
                z.free_pages = z.managed_pages - u
                z.reclaimable_pages = c
                measured = (cfg.buddyinfo or {}).get((node.id, z.name))
                z.free_area = (FreeArea.shaped_like(z.free_pages, measured) if measured is not None
                               else FreeArea.contiguous(z.free_pages))  # fmt: skip
        self._check_buddyinfo()

    def _check_buddyinfo(self) -> None:
        """A measured /proc/buddyinfo line for a zone this machine does not have is an error, not ignored."""
        for nid, zone in sorted(self.config.buddyinfo or {}):
            if not any(z.node == nid and z.name == zone and z.managed_pages for z in self.zones):
                have = ", ".join(f"node {z.node} {z.name}" for z in self.zones if z.managed_pages)
                raise KernelConfigError(
                    f"buddyinfo: node {nid}, zone {zone}: no such populated zone on {self.machine.name} ({have})"
                )

    def _build_all_zonelists(self, *, cpus_known: bool) -> None:
        facts = NodeFacts(
            node_ids=tuple(self.node_ids),
            distance=self._distance,
            memory_nodes=self.memory_nodes,
            cpu_nodes=self.cpu_nodes if cpus_known else frozenset(),
            skip_memoryless_local=self.config.at_least(6, 7),
        )
        build = build_all_zonelists(facts)
        self._node_order = build.node_order
        self._log.extend(build.log)
        index = {id(z): i for i, z in enumerate(self.zones)}
        for nid in self.node_ids:
            self._fallback[nid] = [
                index[id(z)] for n in build.node_order[nid] for z in build_zonerefs_node(self.node_zones(n))
            ]
            self._nofallback[nid] = [index[id(z)] for z in build_zonerefs_node(self.node_zones(nid))]

    def _init_per_zone_wmark_min(self) -> None:
        cfg = self.config
        self.min_free_kbytes = calculate_min_free_kbytes(
            self.zones, self.min_free_kbytes, self.user_min_free_kbytes, cfg.page_size_bytes
        )
        self._setup_wmarks()
        for nid in self.node_ids:
            setup_per_zone_lowmem_reserve(self.node_zones(nid), cfg.lowmem_reserve_ratio)
        if cfg.thp_enabled:  # khugepaged_min_free_kbytes_update / hugepage_init
            self.min_free_kbytes = set_recommended_min_free_kbytes(
                self.zones, self.min_free_kbytes, cfg.page_size_bytes
            )
            self._setup_wmarks()

    def _setup_wmarks(self) -> None:
        setup_per_zone_wmarks(
            self.zones,
            self.min_free_kbytes,
            self.config.watermark_scale_factor,
            page_size_bytes=self.config.page_size_bytes,
            movable_like_highmem=self.config.at_least(6, 1),
        )

    # --- queries ----------------------------------------------------------------------------------------
    def node_zones(self, nid: int) -> list[Zone]:
        """The ``MAX_NR_ZONES`` zones of node ``nid``, indexed by zone type."""
        i = self._node_pos(nid)
        return self.zones[i * MAX_NR_ZONES : (i + 1) * MAX_NR_ZONES]

    def zone(self, nid: int, zone_type: ZoneType) -> Zone:
        """One zone of one node."""
        return self.node_zones(nid)[zone_type]

    @property
    def memory_nodes(self) -> frozenset[int]:
        """N_MEMORY: nodes with present pages."""
        return frozenset(z.node for z in self.zones if z.populated)

    @property
    def policy_zone(self) -> ZoneType:
        """``policy_zone``: the highest populated zone type below ZONE_MOVABLE (MPOL_BIND applies from it up)."""
        types = [z.type for z in self.zones if z.populated and z.type != ZoneType.MOVABLE]
        return ZoneType(max(types)) if types else ZoneType.NORMAL

    def zonelist(self, nid: int, thisnode: bool = False) -> list[Zone]:
        """``node_zonelist(nid, gfp)``: the FALLBACK list, or NOFALLBACK (this node's zones only)."""
        self._node_pos(nid)
        table = self._nofallback if thisnode else self._fallback
        return [self.zones[i] for i in table[nid]]

    def fallback_order(self, nid: int) -> list[int]:
        """The node order printed at the last zonelist build ("Fallback order for Node nid: ...")."""
        self._node_pos(nid)
        return list(self._node_order[nid])

    def boot_log(self) -> list[str]:
        """Every "Fallback order" line printed so far (boot, then each rebuild), in order."""
        return list(self._log)

    def numa_mem_id(self, nid: int) -> int:
        """``local_memory_node``: the node of the first zone of ``nid``'s GFP_KERNEL zonelist."""
        for z in self.zonelist(nid):
            if z.type <= ZoneType.NORMAL:
                return z.node
        return nid

    def free_pages(self, nid: int) -> int:
        """Free pages of a node (sum over its zones)."""
        return sum(z.free_pages for z in self.node_zones(nid))

    def managed_pages(self, nid: int) -> int:
        """Managed pages of a node (MemTotal)."""
        return sum(z.managed_pages for z in self.node_zones(nid))

    def reclaimable_pages(self, nid: int) -> int:
        """Clean page cache of a node that reclaim can free."""
        return sum(z.reclaimable_pages for z in self.node_zones(nid))

    def node_distance(self, a: int, b: int) -> int:
        """The SLIT distance the kernel uses."""
        return self._distance[a][b]

    def _node_pos(self, nid: int) -> int:
        try:
            return self._pos[int(nid)]
        except KeyError:
            raise ValueError(f"node {nid}: no such node (nodes: {self.node_ids})") from None

    # --- sysctls and hotplug ----------------------------------------------------------------------------
    def set_min_free_kbytes(self, kbytes: int) -> None:
        """Write ``vm.min_free_kbytes`` (becomes ``user_min_free_kbytes``) and recompute the watermarks."""
        if kbytes < 0:
            raise ValueError(f"min_free_kbytes = {kbytes}: must be >= 0")
        self.min_free_kbytes = kbytes
        self.user_min_free_kbytes = kbytes
        self._setup_wmarks()

    def sysctl_write(self, name: str, value: int | tuple[int, ...]) -> None:
        """Write a ``vm.*`` sysctl that changes placement, with the kernel handler's side effects.

        ``vm.min_free_kbytes`` and ``vm.watermark_scale_factor`` recompute the watermarks,
        ``vm.lowmem_reserve_ratio`` the lowmem reserves; ``vm.zone_reclaim_mode`` and ``vm.numa_stat`` take effect
        on the next allocation — and turning ``numa_stat`` off clears the numastat counters
        (``invalid_numa_statistics``), as the kernel does.

        Examples
        --------
        >>> from numasim.topology.builders import glueless
        >>> pm = PhysicalMemory(glueless(2))
        >>> pm.sysctl_write("vm.watermark_scale_factor", 200)
        >>> pm.zone(1, ZoneType.NORMAL).wmark_low - pm.zone(1, ZoneType.NORMAL).wmark_min
        167772
        """
        key = name.removeprefix("vm.").replace("/", ".")
        if key == "min_free_kbytes":
            self.set_min_free_kbytes(int(value))  # type: ignore[arg-type]
            return
        if key == "lowmem_reserve_ratio":
            ratios = tuple(int(v) for v in value) if isinstance(value, tuple) else (int(value),)
            self.config = dataclasses.replace(self.config, lowmem_reserve_ratio=ratios)
            for nid in self.node_ids:
                setup_per_zone_lowmem_reserve(self.node_zones(nid), ratios)
            return
        fields = {"watermark_scale_factor", "zone_reclaim_mode", "numa_stat", "min_unmapped_ratio"}
        if key not in fields or isinstance(value, tuple):
            known = sorted(fields | {"min_free_kbytes", "lowmem_reserve_ratio"})
            raise ValueError(
                f"sysctl {name!r} = {value!r}: not a placement sysctl (known: vm.{', vm.'.join(known)})"
            )
        new: bool | int = bool(value) if key == "numa_stat" else int(value)
        self.config = dataclasses.replace(self.config, **{key: new})  # type: ignore[arg-type]  # validates
        if key == "watermark_scale_factor":
            self._setup_wmarks()
        if key == "numa_stat" and not new:
            self.counters = NumaCounters.zeros(len(self.counters.numa_hit))
            self.zone_counters = NumaCounters.zeros(len(self.zones))

    def alloc_page_cache(self, req: AllocRequest) -> AllocResult:
        """Allocate page-cache pages (a file read or written) that stay as clean, reclaimable cache.

        The pages are placed like any allocation (same walk, same numastat events) and then counted as
        reclaimable page cache of the zones they landed in, so later allocations can reclaim them.
        """
        res = self.alloc(req)
        if res.allocated:
            table = np.full(max(self.node_ids) + 1, -1, dtype=np.int64)
            table[np.array(self.node_ids)] = np.arange(len(self.node_ids))
            flat = table[res.nodes.astype(np.int64)] * MAX_NR_ZONES + res.zones.astype(np.int64)
            for j, n in enumerate(np.bincount(flat, minlength=len(self.zones)).tolist()):
                self.zones[j].reclaimable_pages += n
        return res

    def drop_caches(self) -> int:
        """``echo 1 > /proc/sys/vm/drop_caches``: free all clean page cache; returns the pages freed."""
        freed = 0
        for z in self.zones:
            freed += z.reclaimable_pages
            z.buddy().add_reclaimed(z.reclaimable_pages)
            z.free_pages += z.reclaimable_pages
            z.reclaimable_pages = 0
        self.vmstat["pgfree"] += freed
        return freed

    def hotadd_memory(self, nid: int, size_bytes: int, zone_type: ZoneType = ZoneType.NORMAL) -> None:
        """Add and online ``size_bytes`` of memory on node ``nid`` (``add_memory`` + ``online_pages``).

        The new pages are free. Watermarks, lowmem_reserve and min_free_kbytes are recomputed
        (``init_per_zone_wmark_min``). Zonelists are rebuilt — with cpus online, so the cpu penalty applies —
        only when the target zone was unpopulated before, as ``online_pages`` does.
        """
        self._node_pos(nid)
        pages = size_bytes // self.config.page_size_bytes
        if pages <= 0:
            raise ValueError(f"size_bytes = {size_bytes}: must be at least one page")
        if zone_type not in (ZoneType.NORMAL, ZoneType.MOVABLE):
            raise ValueError(f"zone_type = {zone_type!r}: hot-added memory goes to Normal or Movable")
        z = self.zone(nid, zone_type)
        rebuild = not z.populated
        if rebuild:
            z.start_pfn = self._next_pfn
        z.present_pages += pages
        z.spanned_pages += pages
        z.managed_pages += pages
        z.buddy().add_freed(pages)
        z.free_pages += pages
        self._next_pfn = -(-(z.start_pfn + z.spanned_pages) // SECTION_PAGES) * SECTION_PAGES
        if rebuild:
            self._build_all_zonelists(cpus_known=True)
        self._init_per_zone_wmark_min()

    # --- allocation -------------------------------------------------------------------------------------
    def _node_reclaim_ok(self, pnode: int, z: Zone, gfp: Gfp, cpu_node: int) -> bool:
        # node_reclaim_enabled() && zone_allows_reclaim() && node_reclaim() would scan (not NOSCAN)
        if not self.config.zone_reclaim_mode & _RECLAIM_ZONE_BITS:
            return False
        if self._distance[pnode][z.node] > self.config.node_reclaim_distance:
            return False
        if not gfp & Gfp.DIRECT_RECLAIM:
            return False
        return z.node not in self.cpu_nodes or z.node == cpu_node

    def _plan(self, target: int, req: AllocRequest, gfp: Gfp) -> AllocPlan:
        cfg = self.config
        highest = gfp_zone(gfp)
        zl = [i for i in (self._nofallback if gfp & Gfp.THISNODE else self._fallback)[target]]
        zl = [i for i in zl if self.zones[i].type <= highest]
        cpuset = req.mems_allowed is not None
        policy = req.nodemask
        cands: list[Candidate] = []
        # fast path: prepare_alloc_pages substitutes the cpuset for a missing nodemask
        fast_mask = policy if policy is not None else (req.mems_allowed if cpuset else None)
        fast_cpuset = cpuset and policy is not None  # ALLOC_CPUSET
        elig = [i for i in zl if fast_mask is None or self.zones[i].node in fast_mask]
        if elig:
            pnode = self.zones[elig[0]].node
            for i in elig:
                z = self.zones[i]
                if fast_cpuset and req.mems_allowed is not None and z.node not in req.mems_allowed:
                    continue
                thr = z.wmark_low + z.lowmem_reserve[highest]
                cands.append(Candidate(i, False, thr, 0, pnode, elig[0]))
                if self._node_reclaim_ok(pnode, z, gfp, req.cpu_node):
                    cands.append(Candidate(i, True, thr, self._min_unmapped(z), pnode, elig[0]))
        # slow path: the policy nodemask again, ALLOC_CPUSET (dropped for atomic callers), MIN watermark
        slow = [i for i in zl if policy is None or self.zones[i].node in policy]
        if not slow:
            return AllocPlan(tuple(cands), oom=False)
        slow_pref = slow[0]
        pnode = self.zones[slow_pref].node
        atomic = (
            bool(gfp & Gfp.HIGH) and not gfp & Gfp.DIRECT_RECLAIM
            if cfg.at_least(6, 3)
            else bool(gfp & Gfp.ATOMIC)
        )
        if cpuset and not atomic and req.mems_allowed is not None:
            slow = [i for i in slow if self.zones[i].node in req.mems_allowed]
        thr_min = {
            i: min_watermark_for(self.zones[i].wmark_min, gfp, cfg) + self.zones[i].lowmem_reserve[highest]
            for i in slow
        }
        for i in slow:
            cands.append(Candidate(i, False, thr_min[i], 0, pnode, slow_pref, slow=True))
            if self._node_reclaim_ok(pnode, self.zones[i], gfp, req.cpu_node):
                cands.append(
                    Candidate(i, True, thr_min[i], self._min_unmapped(self.zones[i]), pnode, slow_pref, slow=True)
                )
        can_reclaim = bool(gfp & Gfp.DIRECT_RECLAIM)
        if can_reclaim:
            cands.extend(Candidate(i, True, thr_min[i], 0, pnode, slow_pref, slow=True) for i in slow)
        oom = (
            can_reclaim
            and not gfp & (Gfp.THISNODE | Gfp.RETRY_MAYFAIL | Gfp.NORETRY)
            and highest >= ZoneType.NORMAL
        )
        if gfp & Gfp.NOFAIL and can_reclaim:
            # nopage: __alloc_pages_cpuset_fallback(gfp, order, ALLOC_MIN_RESERVE (<= 6.2: ALLOC_HARDER), ac):
            # first with ALLOC_CPUSET, then ignoring the cpuset; the policy nodemask (ac->nodemask) stays.
            # Appended after every normal candidate, so a page reaches them only once the normal path
            # (reclaim and the OOM decision included) has nothing left for it, as in the kernel.
            nofail = [i for i in zl if policy is None or self.zones[i].node in policy]
            thr_nofail = {
                i: nofail_watermark_for(self.zones[i].wmark_min, cfg) + self.zones[i].lowmem_reserve[highest]
                for i in nofail
            }
            cpuset_pass = [
                i for i in nofail if req.mems_allowed is None or self.zones[i].node in req.mems_allowed
            ]
            for i in (*cpuset_pass, *nofail):
                cands.append(Candidate(i, False, thr_nofail[i], 0, pnode, slow_pref, slow=True))
            oom = False  # the fallback runs instead of reporting OOM; no OOM kill is modelled for NOFAIL
        return AllocPlan(tuple(cands), oom=oom)

    def _min_unmapped(self, z: Zone) -> int:
        return z.managed_pages * self.config.min_unmapped_ratio // 100

    def alloc(self, req: AllocRequest) -> AllocResult:
        """Allocate ``req.count`` order-0 pages, one allocation call each, and update counters.

        The walk stops at the first page that cannot be allocated: ``failed`` is then true and ``oom`` says
        whether the OOM killer was invoked (``__GFP_THISNODE``, ``__GFP_NORETRY``, ``__GFP_RETRY_MAYFAIL``,
        no direct reclaim, or a zone limit below ZONE_NORMAL fail without it).

        ``__GFP_NOFAIL`` (spec 3.4 item 6) with direct reclaim never fails and never reports OOM: after the
        normal walk, its pages may go down to the cut MIN watermark of :func:`nofail_watermark_for`, first in
        the cpuset, then anywhere in the policy nodemask. If even that has no room, ``stuck`` is true and
        ``failed`` false: the remaining pages are not allocated because a real kernel would loop forever
        there. Not modelled: the OOM kill and the one-shot ``ALLOC_NO_WATERMARKS`` page that
        ``__alloc_pages_may_oom`` gives a NOFAIL caller after a kill (victims are the task layer's business).
        NOFAIL without ``__GFP_DIRECT_RECLAIM`` fails like any request (the kernel WARNs and returns NULL).
        """
        if req.count < 0:
            raise ValueError(f"AllocRequest.count = {req.count}: must be >= 0")
        gfp = Gfp(int(req.gfp))
        if req.no_direct_reclaim:
            gfp &= ~Gfp.DIRECT_RECLAIM
        gfp_zone(gfp)  # validates the zone modifiers
        self._node_pos(req.cpu_node)
        targets = req.preferred_nid
        positions: dict[int, np.ndarray] = {}
        if isinstance(targets, np.ndarray):
            if targets.shape != (req.count,):
                raise ValueError(f"AllocRequest.preferred_nid: {targets.shape} targets for count {req.count}")
            # one pass per node id instead of np.unique (which sorts 16 M entries)
            for nid in self.node_ids:
                where = np.flatnonzero(targets == nid)
                if where.size:
                    positions[nid] = where
            if sum(len(v) for v in positions.values()) != req.count:
                bad = sorted(set(np.unique(targets).tolist()) - set(self.node_ids))
                raise ValueError(
                    f"AllocRequest.preferred_nid: node {bad[0]}: no such node (nodes: {self.node_ids})"
                )
            if len(positions) == 1:
                targets = next(iter(positions))
        else:
            self._node_pos(int(targets))
        if isinstance(targets, np.ndarray) and req.count:
            plans = {t: self._plan(t, req, gfp) for t in positions}
            if self.config.kswapd_enabled:
                nodes, zones, segments, state, allocated = self.kswapd.allocate_per_page(
                    plans, positions, req.count, int(gfp_zone(gfp)), req, may_wake=bool(gfp & Gfp.KSWAPD_RECLAIM)
                )
            else:
                nodes, zones, segments, state, allocated = run_per_page(plans, positions, req.count, self.zones)
            plan_oom = plans[int(targets[allocated])].oom if allocated < req.count else False
        elif self.config.kswapd_enabled and req.count:
            target = int(targets) if not isinstance(targets, np.ndarray) else 0
            plan = self._plan(target, req, gfp)
            segments, state = self.kswapd.allocate(
                plan, req.count, target, int(gfp_zone(gfp)), req, may_wake=bool(gfp & Gfp.KSWAPD_RECLAIM)
            )
            nodes, zones = pages_of(segments, self.zones)
            allocated = len(nodes)
            plan_oom = plan.oom
        else:
            target = int(targets) if not isinstance(targets, np.ndarray) else 0
            plan = self._plan(target, req, gfp) if req.count else AllocPlan((), False)
            nodes, zones, segments, state = run_scalar(plan, req.count, self.zones, target)
            allocated = len(nodes)
            plan_oom = plan.oom
        state.write_back(self.zones)
        short = allocated < req.count
        # __GFP_NOFAIL with direct reclaim never returns NULL: pages its fallback cannot place leave the task
        # looping in the allocator (stuck). Without direct reclaim the kernel WARNs and fails it anyway.
        stuck = short and bool(gfp & Gfp.NOFAIL) and bool(gfp & Gfp.DIRECT_RECLAIM)
        failed = short and not stuck
        oom = failed and plan_oom
        self._account(segments, req)
        self.vmstat["pgsteal_direct"] += state.reclaimed
        self.vmstat["pgscan_direct"] += state.reclaimed
        if oom:
            self.vmstat["oom_kill"] += 1
        per_node: dict[int, int] = {}
        for _, c, n in segments:
            nid = self.zones[c.zone].node
            per_node[nid] = per_node.get(nid, 0) + n
        return AllocResult(
            first_reclaim=_first_reclaim(segments, allocated, state.reclaimed, isinstance(targets, np.ndarray)),
            nodes=nodes,
            zones=zones,
            allocated=allocated,
            failed=failed,
            oom=oom,
            reclaimed=state.reclaimed,
            stuck=stuck,
            per_node_pages=dict(sorted(per_node.items())),
        )

    def _account(self, segments: list[Segment], req: AllocRequest) -> None:
        for target, c, n in segments:
            self.count_allocation(req, c, target, events=n, pages=n)

    def count_allocation(self, req: AllocRequest, c: Candidate, target: int, events: int, pages: int) -> None:
        """Count ``pages`` allocated from candidate ``c``'s zone: ``pgalloc_<zone>`` by pages, the numastat
        counters by ``events`` (``zone_statistics(preferred_zone, zone, 1)`` runs once per page, or once per
        folio for a huge page). ``target`` is the interleave target (``interleave_hit``)."""
        z = self.zones[c.zone]
        self.vmstat[f"pgalloc_{z.name.lower()}"] += pages
        if not self.config.numa_stat:
            return
        if z.node == c.pnode:
            self.counters.numa_hit[z.node] += events
            self.zone_counters.numa_hit[c.zone] += events
        else:
            self.counters.numa_miss[z.node] += events
            self.zone_counters.numa_miss[c.zone] += events
            self.counters.numa_foreign[c.pnode] += events
            self.zone_counters.numa_foreign[c.pzone] += events
        if z.node == req.cpu_node:
            self.counters.local_node[z.node] += events
            self.zone_counters.local_node[c.zone] += events
        else:
            self.counters.other_node[z.node] += events
            self.zone_counters.other_node[c.zone] += events
        if req.interleave and z.node == target:
            self.counters.interleave_hit[z.node] += events
            self.zone_counters.interleave_hit[c.zone] += events

    def free(self, nodes: np.ndarray, zones: np.ndarray) -> None:
        """Return pages to the free lists: one entry per page (node id, zone type), any order."""
        nodes = np.asarray(nodes)
        zones = np.asarray(zones)
        if nodes.shape != zones.shape:
            raise ValueError(f"free: nodes {nodes.shape} and zones {zones.shape} differ in shape")
        if nodes.size == 0:
            return
        lookup = np.full(max(self.node_ids) + 1, -1, dtype=np.int64)
        for nid, i in self._pos.items():
            lookup[nid] = i
        if nodes.min() < 0 or nodes.max() >= len(lookup) or (lookup[nodes] < 0).any():
            bad = sorted(set(np.unique(nodes).tolist()) - set(self.node_ids))
            raise ValueError(f"free: unknown node ids {bad} (nodes: {self.node_ids})")
        if zones.min() < 0 or zones.max() >= MAX_NR_ZONES:
            raise ValueError(
                f"free: zone types must be 0..{MAX_NR_ZONES - 1}, got {np.unique(zones).tolist()}"
            )
        idx = lookup[nodes] * MAX_NR_ZONES + zones.astype(np.int64)
        counts = np.bincount(idx, minlength=len(self.zones))
        returned = {int(j): int(counts[j]) for j in np.flatnonzero(counts)}
        for j, n in returned.items():
            z = self.zones[j]
            if z.free_pages + z.reclaimable_pages + n > z.managed_pages:
                raise ValueError(
                    f"free: {n} pages returned to node {z.node} {z.name} exceed its managed pages"
                )
        for j, n in returned.items():
            self.zones[j].buddy().add_freed(n)
            self.zones[j].free_pages += n
        self.vmstat["pgfree"] += int(nodes.size)


def _split(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` proportionally to ``weights`` (floors; the remainder goes to the last weight > 0)."""
    wsum = sum(weights)
    if wsum == 0 or total == 0:
        return [0] * len(weights)
    parts = [total * w // wsum for w in weights]
    rest = total - sum(parts)
    for i in range(len(weights) - 1, -1, -1):
        if weights[i] > 0:
            parts[i] += rest
            break
    return parts


def _first_reclaim(segments: list[Segment], allocated: int, reclaimed: int, per_page: bool) -> int:
    """Index in the request of the first page that direct reclaim (or node_reclaim) freed memory for; -1 if
    none. Scalar walks keep their segments in page order. A walk with one target per page (interleave) keeps
    them per candidate, so its reclaiming pages are taken to be the request's last ones (reclaim happens once the
    free lists run dry, late in the request)."""
    if reclaimed <= 0:
        return -1
    if per_page:
        from_reclaim = sum(n for _, c, n in segments if c.reclaim)
        return max(0, allocated - max(from_reclaim, 1))
    done = 0
    for _, c, n in segments:
        if c.reclaim and n:
            return done
        done += n
    return max(0, allocated - 1)
