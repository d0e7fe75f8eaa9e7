"""Kernel build and sysctl knobs that change where pages land (``vm.*`` sysctls, boot facts, version).

Everything the spec marks **[VER]** is keyed off :attr:`KernelConfig.version`; use the helpers
(:meth:`KernelConfig.at_least`) rather than comparing strings.

Sources: ``mm/page_alloc.c`` (watermarks, lowmem_reserve, zonelists), ``mm/vmscan.c`` (node_reclaim),
``mm/khugepaged.c`` (``set_recommended_min_free_kbytes``), ``Documentation/admin-guide/sysctl/vm.rst``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from numasim.kernel.balancing_config import NumaBalancingConfig
from numasim.kernel.khugepaged_config import KhugepagedConfig
from numasim.kernel.version import GOLDEN, parse_version

__all__ = ["KernelConfig", "SUPPORTED_VERSIONS", "THP_MODES", "THP_DEFRAG_MODES", "parse_page_cache_arg", "reclaim_inputs"]

THP_MODES = ("always", "madvise", "never")
"""``/sys/kernel/mm/transparent_hugepage/enabled`` (``mm/huge_memory.c`` ``enabled_store``)."""

THP_DEFRAG_MODES = ("always", "defer", "defer+madvise", "madvise", "never")
"""``/sys/kernel/mm/transparent_hugepage/defrag`` (``mm/huge_memory.c`` ``defrag_store``)."""

SUPPORTED_VERSIONS = GOLDEN
"""The two kernels whose behaviour is pinned by golden tests (:data:`numasim.kernel.version.GOLDEN`); other
``5.x``/``6.x`` strings are accepted here and behave like the nearest rule set (each [VER] switch compares the
version number); the command line takes :data:`numasim.kernel.version.MODELLED` only."""


@dataclass(frozen=True)
class KernelConfig:
    """The knobs of one simulated kernel.

    Parameters
    ----------
    version : str
        Kernel version ``"6.12"`` (default) or ``"6.1"``; every [VER] behaviour is keyed off it.
    min_free_kbytes : int or None
        ``vm.min_free_kbytes``. ``None``: computed at boot like ``calculate_min_free_kbytes`` (and raised by
        khugepaged when :attr:`thp_enabled`). A value is treated as a sysctl write after boot: it becomes
        ``user_min_free_kbytes`` too, so a later memory hot-add only raises it if the computed value is larger.
    watermark_scale_factor : int
        ``vm.watermark_scale_factor`` (1..3000, default 10 = 0.1 % of a zone between watermarks).
    lowmem_reserve_ratio : tuple of int
        ``vm.lowmem_reserve_ratio`` for DMA, DMA32, Normal, Movable.
    zone_reclaim_mode : int
        ``vm.zone_reclaim_mode`` bits (1 = RECLAIM_ZONE, 2 = WRITE, 4 = UNMAP). 0 (default): a node below its
        low watermark is skipped for the next node, without reclaim.
    node_reclaim_distance : int
        ``node_reclaim_distance`` (RECLAIM_DISTANCE = 30; some AMD Zen systems use 32).
    min_unmapped_ratio : int
        ``vm.min_unmapped_ratio`` (percent of a node's managed pages node_reclaim leaves as page cache).
    numa_stat : bool
        ``vm.numa_stat``; when false the numastat counters stay frozen.
    cpus_known_at_boot : bool
        Real kernels build the boot zonelists before secondary cpus are up, so the cpu penalty of
        ``find_next_best_node`` is absent at boot (observed on a real 6.1 kernel). ``True`` gives the textbook
        order that applies the penalty already at boot.
    page_size_bytes : int
        Base page size (4096 on x86_64).
    thp_enabled : bool
        Transparent hugepages enabled (distro default): khugepaged raises ``min_free_kbytes`` to
        ``pageblock_nr_pages * nr_zones * 11`` (capped at 5 % of lowmem), e.g. 90112 kB on two nodes.
        Kept for older callers: it is ``thp_mode != "never"``; ``thp_enabled=False`` means ``thp_mode="never"``.
    thp_mode : str
        ``/sys/kernel/mm/transparent_hugepage/enabled``: ``always``, ``madvise`` (default) or ``never``. The
        Kconfig default is ``always``; numasim boots ``madvise`` (Debian's and Ubuntu's choice) so that only a
        mapping that asks (``MADV_HUGEPAGE``) or a user who asks (``--thp always``) gets huge folios, and runs
        that did not ask place their pages as before. ``always`` and ``madvise`` both run khugepaged, so the
        watermarks are the same.
    thp_defrag : str
        ``/sys/kernel/mm/transparent_hugepage/defrag``: ``always``, ``defer``, ``defer+madvise``, ``madvise``
        (default) or ``never``; decides whether a huge-page fault may reclaim/compact (``vma_thp_gfp_mask``).
    numa_balancing : NumaBalancingConfig
        ``kernel.numa_balancing`` and its scanner and tiering knobs.
    hugetlb_pool_writes : tuple of (int or None, int)
        Writes to the 2 MiB hugetlb pool at boot, in order: ``(None, n)`` is ``vm.nr_hugepages = n`` (spread
        over the nodes with memory), ``(nid, n)`` is node ``nid``'s ``nr_hugepages = n``.
    sysctl_writes : tuple of (str, str)
        The sysctl writes that made this config (canonical name, value as written), in order; set by
        :meth:`with_sysctls`, so a result can say what kernel it ran.
    reclaimable_page_cache_bytes : Mapping[int, int] or None
        Clean, reclaimable page cache per node id (bytes), carved out of the node's used memory.
    page_cache_fraction_of_used : float
        When a node has no explicit entry above: the fraction of its used memory (``memory - free``) that is
        clean page cache. 0 (default): used memory is not reclaimable.
    movable_bytes : Mapping[int, int] or None
        Memory per node id put into ZONE_MOVABLE at boot (like ``movablecore=`` spread per node).
    hotplug_nodes : frozenset of int
        Nodes whose memory is *not* onlined at boot (a CXL expander left to dax/kmem): they are possible but
        memoryless until :meth:`numasim.kernel.physmem.PhysicalMemory.hotadd_memory`.
    kswapd_enabled : bool
        Run kswapd (:mod:`numasim.kernel.kswapd`): woken as the allocator drains a node, it reclaims that node's
        clean page cache on the faulting program's clock until the node is balanced, and the allocator takes
        what it frees. False (default): no background reclaim, placement as numasim always did (a real kernel
        always has kswapd; without page cache it changes no placement).
    kswapd_reclaim_bytes_per_s : float
        How fast kswapd reclaims clean page cache, bytes per second of the program's faulting. Default 2e9:
        a *nominal prior*, not a measurement -- reclaim of clean, unmapped page cache by one kswapd thread on
        a 2013-2016 two-socket Xeon (the class of source 001's E5-2680 v2) is on the order of a few GB/s (a
        drop of a clean page costs a fraction of a microsecond, the LRU isolation and rmap checks around it
        about as much again). Fit it to a measurement where one exists, and say so.
    fault_pages_per_s : float
        The faulting program's rate, pages per second: one anonymous fault, ``clear_page`` of 4 KiB included,
        every 2 us (500,000 pages/s, about 2 GB/s) by default -- a nominal prior of the same class of machine
        (clear_page at roughly 5-10 GB/s is 0.4-0.8 us a page, the fault entry, page allocation, memcg charge
        and PTE update about 1 us more), not a measurement. Only the ratio of the two rates matters for
        placement: kswapd frees ``kswapd_reclaim_bytes_per_s / page_size_bytes / fault_pages_per_s`` pages
        (0.98 by default) per page faulted while it is awake.
    kswapd_wake_on_fallback : bool
        Wake a node's kswapd when the fast path passes over it (below its low watermark) for a later node of
        the zonelist -- what the watermark boost after a fragmenting fallback (5.0+) and the local
        ``__GFP_THISNODE`` huge-page attempt (4.x) do on real kernels, which numasim's order-0 allocator has
        no other way to show. False: only the slow path wakes kswapd (``wake_all_kswapds``), the strict
        order-0 rule with ``vm.watermark_boost_factor = 0``. Default True.
    direct_reclaim_bytes_per_s : float
        How fast a faulting thread reclaims clean page cache itself when its allocation enters direct reclaim:
        a timed run charges ``pages reclaimed x page size / rate`` to the thread at that page's first access
        (:mod:`numasim.kernel.reclaim_stalls`). Default 2e9, a nominal prior of the same order as kswapd's.
    buddyinfo : Mapping[tuple[int, str], tuple[int, ...]] or None
        Measured ``/proc/buddyinfo`` lines, ``(node, zone name) -> free blocks of order 0..10``
        (:func:`numasim.kernel.buddy.parse_buddyinfo`): each zone's free memory is split into blocks in those
        proportions at boot, and page cache it reclaims comes back in the shape of its fragments
        (:mod:`numasim.kernel.buddy`). None (default): free memory in the largest blocks, never fragmented.
    extfrag_threshold : int
        ``vm.extfrag_threshold`` (0..1000, default 500): a 2 MiB allocation compacts a zone only if its
        fragmentation index is above it (:mod:`numasim.kernel.compaction`).
    compact_migrate_page_ns : float
        What direct compaction costs the allocating thread per page it migrates (isolate, unmap with TLB flush,
        copy, remap). Default 5000 ns, a nominal prior: numasim's figure for a NUMA-balancing migration.
    """

    version: str = "6.12"
    min_free_kbytes: int | None = None
    watermark_scale_factor: int = 10
    lowmem_reserve_ratio: tuple[int, ...] = (256, 256, 32, 0)
    zone_reclaim_mode: int = 0
    node_reclaim_distance: int = 30
    min_unmapped_ratio: int = 1
    numa_stat: bool = True
    cpus_known_at_boot: bool = False
    page_size_bytes: int = 4096
    thp_enabled: bool = True
    thp_mode: str = "madvise"
    thp_defrag: str = "madvise"
    numa_balancing: NumaBalancingConfig = NumaBalancingConfig()
    khugepaged: KhugepagedConfig = KhugepagedConfig()
    hugetlb_pool_writes: tuple[tuple[int | None, int], ...] = ()
    sysctl_writes: tuple[tuple[str, str], ...] = ()
    reclaimable_page_cache_bytes: Mapping[int, int] | None = None
    page_cache_fraction_of_used: float = 0.0
    movable_bytes: Mapping[int, int] | None = None
    hotplug_nodes: frozenset[int] = frozenset()
    kswapd_enabled: bool = False
    kswapd_reclaim_bytes_per_s: float = 2.0e9
    fault_pages_per_s: float = 500_000.0
    kswapd_wake_on_fallback: bool = True
    direct_reclaim_bytes_per_s: float = 2.0e9
    buddyinfo: Mapping[tuple[int, str], tuple[int, ...]] | None = None
    extfrag_threshold: int = 500
    compact_migrate_page_ns: float = 5000.0

    def __post_init__(self) -> None:
        if not 0 <= self.extfrag_threshold <= 1000:
            raise ValueError(f"KernelConfig.extfrag_threshold = {self.extfrag_threshold}: must be in 0..1000")
        if not isinstance(self.compact_migrate_page_ns, (int, float)) or not (
            0.0 <= self.compact_migrate_page_ns < float("inf")
        ):
            raise ValueError(
                f"KernelConfig.compact_migrate_page_ns = {self.compact_migrate_page_ns!r}: must be a finite number >= 0"
            )
        for key, line in (self.buddyinfo or {}).items():
            if len(line) != 11 or any(int(n) < 0 for n in line):
                raise ValueError(f"KernelConfig.buddyinfo[{key}] = {line}: need 11 non-negative block counts")
        if not isinstance(self.kswapd_reclaim_bytes_per_s, (int, float)) or not (
            0.0 <= self.kswapd_reclaim_bytes_per_s < float("inf")
        ):
            raise ValueError(
                f"KernelConfig.kswapd_reclaim_bytes_per_s = {self.kswapd_reclaim_bytes_per_s!r}: "
                "must be a finite number >= 0"
            )
        if not isinstance(self.direct_reclaim_bytes_per_s, (int, float)) or not (
            0.0 < self.direct_reclaim_bytes_per_s < float("inf")
        ):
            raise ValueError(
                f"KernelConfig.direct_reclaim_bytes_per_s = {self.direct_reclaim_bytes_per_s!r}: "
                "must be a finite number > 0"
            )
        if not isinstance(self.fault_pages_per_s, (int, float)) or not (
            0.0 < self.fault_pages_per_s < float("inf")
        ):
            raise ValueError(
                f"KernelConfig.fault_pages_per_s = {self.fault_pages_per_s!r}: must be a finite number > 0"
            )
        if self.thp_mode not in THP_MODES:
            raise ValueError(f"KernelConfig.thp_mode = {self.thp_mode!r}: expected one of {', '.join(THP_MODES)}")
        if self.thp_defrag not in THP_DEFRAG_MODES:
            raise ValueError(
                f"KernelConfig.thp_defrag = {self.thp_defrag!r}: expected one of {', '.join(THP_DEFRAG_MODES)}"
            )
        # One knob, two spellings: thp_enabled=False (older callers) wins, else it follows thp_mode.
        if not self.thp_enabled:
            object.__setattr__(self, "thp_mode", "never")
        else:
            object.__setattr__(self, "thp_enabled", self.thp_mode != "never")
        for nid, count in self.hugetlb_pool_writes:
            if count < 0 or (nid is not None and nid < 0):
                raise ValueError(f"KernelConfig.hugetlb_pool_writes: ({nid}, {count}) must be non-negative")
        try:
            parse_version(self.version)
        except ValueError:
            raise ValueError(
                f"KernelConfig.version = {self.version!r}: expected 'major.minor' such as '6.12'"
            ) from None
        if self.min_free_kbytes is not None and self.min_free_kbytes < 0:
            raise ValueError(f"KernelConfig.min_free_kbytes = {self.min_free_kbytes}: must be >= 0")
        if not 1 <= self.watermark_scale_factor <= 3000:
            raise ValueError(
                f"KernelConfig.watermark_scale_factor = {self.watermark_scale_factor}: must be in 1..3000"
            )
        if len(self.lowmem_reserve_ratio) < 3 or any(r < 0 for r in self.lowmem_reserve_ratio):
            raise ValueError(
                f"KernelConfig.lowmem_reserve_ratio = {self.lowmem_reserve_ratio}: need >= 3 non-negative ratios"
            )
        if not 0 <= self.zone_reclaim_mode <= 7:
            raise ValueError(f"KernelConfig.zone_reclaim_mode = {self.zone_reclaim_mode}: must be in 0..7")
        if self.page_size_bytes <= 0 or self.page_size_bytes & (self.page_size_bytes - 1):
            raise ValueError(f"KernelConfig.page_size_bytes = {self.page_size_bytes}: must be a power of two")
        if not 0.0 <= self.page_cache_fraction_of_used <= 1.0:
            raise ValueError(
                f"KernelConfig.page_cache_fraction_of_used = {self.page_cache_fraction_of_used}: must be in [0, 1]"
            )
        if not 0 <= self.min_unmapped_ratio <= 100:
            raise ValueError(
                f"KernelConfig.min_unmapped_ratio = {self.min_unmapped_ratio}: must be in 0..100"
            )

    def with_sysctls(self, writes: Mapping[str, object] | Iterable[tuple[str, object]]) -> KernelConfig:
        """This config after the sysctl writes, applied in order as ``sysctl -w`` does.

        Names are sysctl names (``kernel.numa_balancing``, ``vm.min_free_kbytes``; ``/`` works for ``.``) or
        sysfs/debugfs paths (``/sys/kernel/mm/transparent_hugepage/enabled``); see
        :mod:`numasim.kernel.sysctl` for the table. An unknown name or a bad value raises
        :class:`~numasim.errors.SysctlError` and nothing is applied.

        Examples
        --------
        >>> cfg = KernelConfig().with_sysctls({"kernel.numa_balancing": "1", "vm.min_free_kbytes": "65536"})
        >>> cfg.numa_balancing.mode, cfg.min_free_kbytes
        (1, 65536)
        """
        from numasim.kernel.sysctl import apply_sysctls

        return apply_sysctls(self, writes)

    @property
    def version_tuple(self) -> tuple[int, int]:
        """``(major, minor)`` of :attr:`version`."""
        return parse_version(self.version)

    def at_least(self, major: int, minor: int) -> bool:
        """True when the simulated kernel is ``major.minor`` or newer.

        Examples
        --------
        >>> KernelConfig(version="6.1").at_least(6, 7)
        False
        """
        return self.version_tuple >= (major, minor)


def parse_page_cache_arg(text: str) -> tuple[int, int]:
    """``NODE=SIZE`` (``--page-cache``) as ``(node, bytes)``; SIZE takes the usual suffixes (``2G``, ``512M``).

    >>> parse_page_cache_arg("0=2G")
    (0, 2147483648)
    """
    from numasim.units import parse_size

    node, eq, size = text.partition("=")
    if not eq or not node.strip().isdigit():
        raise ValueError(f"--page-cache {text!r}: expected NODE=SIZE, e.g. 0=2G")
    try:
        size_bytes = parse_size(size.strip())
    except ValueError as exc:
        raise ValueError(f"--page-cache {text!r}: {exc}") from None
    if size_bytes < 0:
        raise ValueError(f"--page-cache {text!r}: size must be >= 0")
    return int(node), int(size_bytes)


def reclaim_inputs(cfg: KernelConfig) -> dict[str, object]:
    """The clean page cache given per node at boot and kswapd's model (its rates are nominal priors)."""
    cache = {str(n): int(b) for n, b in sorted((cfg.reclaimable_page_cache_bytes or {}).items())}
    kswapd: dict[str, object] = {"enabled": cfg.kswapd_enabled}
    if cfg.kswapd_enabled:
        kswapd.update(
            reclaim_bytes_per_s=cfg.kswapd_reclaim_bytes_per_s, fault_pages_per_s=cfg.fault_pages_per_s,
            wake_on_fallback=cfg.kswapd_wake_on_fallback, status="nominal",
        )  # fmt: skip
    out: dict[str, object] = {"page_cache_bytes": cache, "kswapd": kswapd}
    if cfg.buddyinfo:
        out["buddyinfo"] = {f"node {n}, zone {z}": list(line) for (n, z), line in sorted(cfg.buddyinfo.items())}
        out["compaction"] = {"extfrag_threshold": cfg.extfrag_threshold,
                             "migrate_page_ns": cfg.compact_migrate_page_ns, "status": "nominal"}  # fmt: skip
    return out
