"""Every sysctl (and sysfs/debugfs knob) numasim models: names, valid values, the kernel's defaults, and writes.

:data:`KNOBS` is the table; :func:`apply_sysctls` applies writes to a
:class:`~numasim.kernel.config.KernelConfig` in order, as ``sysctl -w`` does, all or nothing;
:func:`sysctl_values` reads every knob back. A name is a sysctl name (``kernel.numa_balancing``; ``/`` may
stand for ``.`` and a ``/proc/sys/`` prefix is allowed, as sysctl(8) accepts) or the full path of a sysfs or
debugfs file (``/sys/kernel/mm/transparent_hugepage/enabled``).

Where each knob lives in the Linux source (6.1 and 6.12 unless said otherwise):

* ``kernel.numa_balancing``: ``kernel/sched/core.c`` ``sched_core_sysctls`` (``sysctl_numa_balancing``,
  ``extra1 = SYSCTL_ZERO``); the modes are ``NUMA_BALANCING_NORMAL`` (1) and ``NUMA_BALANCING_MEMORY_TIERING``
  (2) of ``include/linux/sched/sysctl.h``; ``Documentation/admin-guide/sysctl/kernel.rst`` defines 0..3.
* the scanner's knobs: ``kernel/sched/fair.c`` (``sysctl_numa_balancing_scan_period_min = 1000``,
  ``..._scan_period_max = 60000``, ``..._scan_size = 256``, ``..._scan_delay = 1000``,
  ``sysctl_numa_balancing_hot_threshold = MSEC_PER_SEC``). Up to 5.12 they were ``kernel.numa_balancing_*``
  in ``kernel/sysctl.c`` (``proc_dointvec``; ``scan_size_mb`` with ``extra1 = SYSCTL_ONE``); since 5.13
  (commit "sched: Move SCHED_DEBUG sysctl to debugfs") they are ``debugfs_create_u32`` files under
  ``/sys/kernel/debug/sched/numa_balancing/`` (``kernel/sched/debug.c`` ``sched_init_debug``), where
  ``hot_threshold_ms`` (5.18+) lives too. numasim accepts both spellings on every version (article 004
  uses the old ones).
* ``kernel.numa_balancing_promote_rate_limit_MBps``: ``kernel/sched/fair.c`` ``sched_fair_sysctls``
  (6.0+, ``proc_dointvec_minmax``, ``extra1 = SYSCTL_ZERO``, default 65536).
* ``vm.*``: ``mm/page_alloc.c`` (``min_free_kbytes``: ``extra1 = SYSCTL_ZERO``; ``watermark_scale_factor``:
  ``SYSCTL_ONE .. SYSCTL_THREE_THOUSAND``, default 10; ``lowmem_reserve_ratio``: one int per zone, defaults
  256 256 32 0 for DMA, DMA32, Normal, Movable; ``min_unmapped_ratio``: ``0 .. SYSCTL_ONE_HUNDRED``,
  default 1; ``numa_stat``: 0..1, default 1), ``mm/vmscan.c`` (``zone_reclaim_mode``, ``extra1 =
  SYSCTL_ZERO``; only bits 1, 2, 4 mean anything, so numasim takes 0..7), ``Documentation/admin-guide/sysctl/
  vm.rst``.
* ``/sys/kernel/mm/transparent_hugepage/enabled`` and ``defrag``: ``mm/huge_memory.c`` ``enabled_store`` /
  ``defrag_store`` (``sysfs_streq`` on the words; defaults: ``always`` with the Kconfig default
  ``TRANSPARENT_HUGEPAGE_ALWAYS``, defrag ``madvise``).
* ``vm.nr_hugepages`` and ``/sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages``:
  ``mm/hugetlb.c`` (``hugetlb_sysctl_handler`` / ``nr_hugepages_store_common``; default 0, any
  ``unsigned long``). The pool is built at boot from these writes, in order (see
  :class:`~numasim.kernel.config.KernelConfig` ``hugetlb_pool_writes``).

Examples
--------
>>> from numasim.kernel.config import KernelConfig
>>> cfg = apply_sysctls(KernelConfig(), [("kernel.numa_balancing", "1"),
...                                      ("/sys/kernel/debug/sched/numa_balancing/scan_delay_ms", "100")])
>>> cfg.numa_balancing.mode, cfg.numa_balancing.scan_delay_ms, cfg.sysctl_writes[1]
(1, 100, ('kernel.numa_balancing_scan_delay_ms', '100'))
>>> apply_sysctls(KernelConfig(), {"kernel.numa_balancing": "7"})
Traceback (most recent call last):
...
numasim.errors.SysctlError: sysctl: kernel.numa_balancing = 7: valid values are 0..3
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numasim.errors import SysctlError
from numasim.kernel.config import THP_DEFRAG_MODES, THP_MODES, KernelConfig

__all__ = ["Knob", "KNOBS", "apply_sysctls", "sysctl_values", "parse_sysctl_arg", "knob_for", "knob_names"]

_INT_MAX = 2**31 - 1
_U32_MAX = 2**32 - 1
_ULONG_MAX = 2**64 - 1

_NODE_HUGEPAGES = re.compile(r"^/sys/devices/system/node/node(\d+)/hugepages/hugepages-2048kB/nr_hugepages$")
_NODE_HUGEPAGES_TEMPLATE = "/sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages"


@dataclass(frozen=True)
class Knob:
    """One knob: its names, the values it takes, the kernel's default and where numasim keeps it.

    Attributes
    ----------
    name : str
        Canonical name (the sysctl name, or the sysfs path when there is no sysctl).
    aliases : tuple of str
        Other names of the same knob (older or newer kernels' spellings, sysfs paths).
    low, high : int or None
        Inclusive range of an integer knob (None: not an integer knob).
    choices : tuple of str
        The words a word-valued knob takes (empty for integer knobs).
    count : int
        Integers per write for vector knobs (``lowmem_reserve_ratio``); 1 otherwise.
    default : str
        The kernel source's default, as the knob reads.
    field : str
        Where it lives in :class:`~numasim.kernel.config.KernelConfig` (dotted).
    source : str
        The Linux source that defines it.
    """

    name: str
    aliases: tuple[str, ...]
    low: int | None
    high: int | None
    choices: tuple[str, ...]
    count: int
    default: str
    field: str
    source: str

    @property
    def valid(self) -> str:
        """The valid values, as the error message states them."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        many = f"{self.count} to 5 integers, each " if self.count > 1 else ""
        return f"valid values are {many}{self.low}..{self.high}"

    def parse(self, text: str) -> int | str | tuple[int, ...]:
        """The value ``text`` stands for, or :class:`SysctlError` naming the knob and its valid values."""
        words = text.split()
        if self.choices:
            # sysfs_streq: the word, optionally followed by a newline; nothing else.
            if len(words) == 1 and words[0] in self.choices:
                return words[0]
            raise SysctlError(f"sysctl: {self.name} = {text}: {self.valid}")
        if not (self.count <= len(words) <= (5 if self.count > 1 else 1)):
            raise SysctlError(f"sysctl: {self.name} = {text}: {self.valid}")
        values = []
        for word in words:
            try:
                value = int(word, 0)  # proc_dointvec reads with base 0: 0x10 is 16
            except ValueError:
                raise SysctlError(f"sysctl: {self.name} = {text}: not an integer; {self.valid}") from None
            assert self.low is not None and self.high is not None
            if not self.low <= value <= self.high:
                raise SysctlError(f"sysctl: {self.name} = {text}: {self.valid}")
            values.append(value)
        return tuple(values) if self.count > 1 else values[0]


def _k(name: str, field: str, default: str, source: str, *, aliases: tuple[str, ...] = (), low: int | None = None,
       high: int | None = None, choices: tuple[str, ...] = (), count: int = 1) -> Knob:
    return Knob(name, aliases, low, high, choices, count, default, field, source)


_DEBUGFS = "/sys/kernel/debug/sched/numa_balancing/"
_ARTICLE_004 = "/sys/kernel/mm/numa_balancing/"
_KHUGEPAGED = "/sys/kernel/mm/transparent_hugepage/khugepaged/"
"""Article 004 writes the scanner's knobs under this directory; no mainline kernel has it (the files are in
debugfs since 5.13), but a user copying the article's commands gets the knob they meant."""

KNOBS: tuple[Knob, ...] = (
    _k("kernel.numa_balancing", "numa_balancing.mode", "0", "kernel/sched/core.c sched_core_sysctls; "
       "kernel.rst numa_balancing (1 NORMAL, 2 MEMORY_TIERING); numasim boots it 0, see balancing_config",
       low=0, high=3),
    _k("kernel.numa_balancing_scan_delay_ms", "numa_balancing.scan_delay_ms", "1000",
       "kernel/sched/fair.c sysctl_numa_balancing_scan_delay; debugfs since 5.13",
       aliases=(_DEBUGFS + "scan_delay_ms", _ARTICLE_004 + "scan_delay_ms"), low=0, high=_U32_MAX),
    _k("kernel.numa_balancing_scan_period_min_ms", "numa_balancing.scan_period_min_ms", "1000",
       "kernel/sched/fair.c sysctl_numa_balancing_scan_period_min; debugfs since 5.13",
       aliases=(_DEBUGFS + "scan_period_min_ms", _ARTICLE_004 + "scan_period_min_ms"), low=0, high=_U32_MAX),
    _k("kernel.numa_balancing_scan_period_max_ms", "numa_balancing.scan_period_max_ms", "60000",
       "kernel/sched/fair.c sysctl_numa_balancing_scan_period_max; debugfs since 5.13",
       aliases=(_DEBUGFS + "scan_period_max_ms", _ARTICLE_004 + "scan_period_max_ms"), low=0, high=_U32_MAX),
    _k("kernel.numa_balancing_scan_size_mb", "numa_balancing.scan_size_mb", "256",
       "kernel/sched/fair.c sysctl_numa_balancing_scan_size; kernel/sysctl.c <= 5.12 extra1 = SYSCTL_ONE "
       "(0 would divide by zero in task_numa_work; the debugfs u32 does not check, numasim keeps >= 1)",
       aliases=(_DEBUGFS + "scan_size_mb", _ARTICLE_004 + "scan_size_mb"), low=1, high=_U32_MAX),
    _k(_DEBUGFS + "hot_threshold_ms", "numa_balancing.hot_threshold_ms", "1000",
       "kernel/sched/fair.c sysctl_numa_balancing_hot_threshold = MSEC_PER_SEC (5.18+, debugfs only)",
       aliases=("kernel.numa_balancing_hot_threshold_ms",), low=0, high=_U32_MAX),
    _k("kernel.numa_balancing_promote_rate_limit_MBps", "numa_balancing.promote_rate_limit_mbps", "65536",
       "kernel/sched/fair.c sched_fair_sysctls (6.0+), extra1 = SYSCTL_ZERO", low=0, high=_INT_MAX),
    _k("vm.min_free_kbytes", "min_free_kbytes", "computed at boot",
       "mm/page_alloc.c min_free_kbytes_sysctl_handler, extra1 = SYSCTL_ZERO; default from "
       "calculate_min_free_kbytes, raised by khugepaged", low=0, high=_INT_MAX),
    _k("vm.watermark_scale_factor", "watermark_scale_factor", "10",
       "mm/page_alloc.c, SYSCTL_ONE .. SYSCTL_THREE_THOUSAND", low=1, high=3000),
    _k("vm.lowmem_reserve_ratio", "lowmem_reserve_ratio", "256 256 32 0",
       "mm/page_alloc.c sysctl_lowmem_reserve_ratio (DMA, DMA32, Normal, Movable; a value < 1 means 0)",
       low=0, high=_INT_MAX, count=3),
    _k("vm.zone_reclaim_mode", "zone_reclaim_mode", "0",
       "mm/vmscan.c node_reclaim_mode, extra1 = SYSCTL_ZERO (bits RECLAIM_ZONE 1, WRITE 2, UNMAP 4)",
       low=0, high=7),
    _k("vm.min_unmapped_ratio", "min_unmapped_ratio", "1",
       "mm/page_alloc.c sysctl_min_unmapped_ratio, 0 .. SYSCTL_ONE_HUNDRED", low=0, high=100),
    _k("vm.numa_stat", "numa_stat", "1", "mm/vmstat.c sysctl_vm_numa_stat, 0..1", low=0, high=1),
    _k("vm.extfrag_threshold", "extfrag_threshold", "500",
       "mm/compaction.c sysctl_extfrag_threshold = 500, SYSCTL_ZERO .. SYSCTL_ONE_THOUSAND", low=0, high=1000),
    _k("/sys/kernel/mm/transparent_hugepage/enabled", "thp_mode", "always",
       "mm/huge_memory.c enabled_store (Kconfig default TRANSPARENT_HUGEPAGE_ALWAYS)", choices=THP_MODES),
    _k("/sys/kernel/mm/transparent_hugepage/defrag", "thp_defrag", "madvise",
       "mm/huge_memory.c defrag_store (default TRANSPARENT_HUGEPAGE_DEFRAG_REQ_MADV_FLAG)",
       choices=THP_DEFRAG_MODES),
    _k("vm.nr_hugepages", "hugetlb_pool_writes", "0",
       "mm/hugetlb.c hugetlb_sysctl_handler -> set_max_huge_pages over N_MEMORY (default hstate, 2 MiB)",
       aliases=("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",), low=0, high=_ULONG_MAX),
    _k(_KHUGEPAGED + "pages_to_scan", "khugepaged.pages_to_scan", "4096",
       "mm/khugepaged.c khugepaged_pages_to_scan = HPAGE_PMD_NR * 8; pages_to_scan_store (>= 1)",
       low=1, high=_U32_MAX),
    _k(_KHUGEPAGED + "scan_sleep_millisecs", "khugepaged.scan_sleep_ms", "10000",
       "mm/khugepaged.c khugepaged_scan_sleep_millisecs = 10000", low=0, high=_U32_MAX),
    _k(_KHUGEPAGED + "max_ptes_none", "khugepaged.max_ptes_none", "511",
       "mm/khugepaged.c khugepaged_max_ptes_none = HPAGE_PMD_NR - 1; max_ptes_none_store (<= 511)",
       low=0, high=511),
    _k(_NODE_HUGEPAGES_TEMPLATE, "hugetlb_pool_writes", "0",
       "mm/hugetlb.c nr_hugepages_store_common with a node id (the node's pool; others keep theirs)",
       low=0, high=_ULONG_MAX),
)
"""Every knob numasim models (``numasim run --sysctl`` / ``[sysctl]`` in a workload file take these names)."""

_BY_NAME: dict[str, Knob] = {n: k for k in KNOBS for n in (k.name, *k.aliases) if "nodeN" not in n}


def knob_names() -> list[str]:
    """Every accepted name (canonical names and aliases), for help texts and errors."""
    return [n for k in KNOBS for n in (k.name, *k.aliases)]


def _normalise(name: str) -> str:
    name = name.strip()
    if name.startswith("/sys/"):
        return name
    # sysctl(8): "vm/min_free_kbytes" and "/proc/sys/vm/min_free_kbytes" name vm.min_free_kbytes.
    name = name.removeprefix("/proc/sys/")
    return name.replace("/", ".")


def knob_for(name: str) -> tuple[Knob, int | None]:
    """The knob ``name`` names, and the node id for a per-node knob; :class:`SysctlError` if none.

    Examples
    --------
    >>> knob_for("vm/min_free_kbytes")[0].name
    'vm.min_free_kbytes'
    >>> knob_for("/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages")[1]
    1
    """
    key = _normalise(name)
    if key in _BY_NAME:
        return _BY_NAME[key], None
    m = _NODE_HUGEPAGES.match(key)
    if m:
        return KNOBS[-1], int(m.group(1))
    close = [n for n in _BY_NAME if key.rsplit(".", 1)[-1].rsplit("/", 1)[-1] in n]
    hint = f" (did you mean {close[0]}?)" if close else " (numasim models: " + ", ".join(k.name for k in KNOBS) + ")"
    raise SysctlError(f"sysctl: cannot stat {name}: no such knob in numasim{hint}")


def _setter(knob: Knob, node: int | None) -> Callable[[KernelConfig, Any], KernelConfig]:
    if "." in knob.field:  # a knob of a nested config: numa_balancing.*, khugepaged.*
        group, attr = knob.field.split(".", 1)
        return lambda c, v: dataclasses.replace(c, **{group: dataclasses.replace(getattr(c, group), **{attr: v})})
    if knob.field == "thp_mode":
        return lambda c, v: dataclasses.replace(c, thp_mode=v, thp_enabled=v != "never")
    if knob.field == "hugetlb_pool_writes":
        return lambda c, v: dataclasses.replace(c, hugetlb_pool_writes=(*c.hugetlb_pool_writes, (node, v)))
    if knob.field == "numa_stat":
        return lambda c, v: dataclasses.replace(c, numa_stat=bool(v))
    return lambda c, v: dataclasses.replace(c, **{knob.field: v})


def apply_sysctls(config: KernelConfig, writes: Mapping[str, object] | Iterable[tuple[str, object]]) -> KernelConfig:
    """``config`` after the writes, in order; every write is checked before any is applied.

    Parameters
    ----------
    config : KernelConfig
        The kernel before the writes.
    writes : mapping or iterable of (name, value)
        Knob names (see :data:`KNOBS`) and values (text as written to the file, or an int).

    Returns
    -------
    KernelConfig
        A new config; its ``sysctl_writes`` lists the writes (canonical names) after the earlier ones.

    Raises
    ------
    SysctlError
        Unknown name, or a value outside the knob's valid values (the message names both).
    """
    items = list(writes.items()) if isinstance(writes, Mapping) else list(writes)
    parsed = []
    for name, raw in items:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise SysctlError(f"sysctl: {name} = {raw!r}: expected text or an integer")
        knob, node = knob_for(str(name))
        text = str(raw).strip()
        parsed.append((knob, node, text, knob.parse(text)))
    out = config
    for knob, node, text, value in parsed:
        canonical = _NODE_HUGEPAGES_TEMPLATE.replace("nodeN", f"node{node}") if node is not None else knob.name
        try:
            out = _setter(knob, node)(out, value)
        except ValueError as exc:  # a KernelConfig check (never half-applied: `config` is unchanged)
            raise SysctlError(f"sysctl: {canonical} = {text}: {exc}") from None
        out = dataclasses.replace(out, sysctl_writes=(*out.sysctl_writes, (canonical, text)))
    return out


def parse_sysctl_arg(text: str) -> tuple[str, str]:
    """``"NAME=VALUE"`` (the ``--sysctl`` option's form) as ``(name, value)``; checked against the table.

    Examples
    --------
    >>> parse_sysctl_arg("kernel.numa_balancing=1")
    ('kernel.numa_balancing', '1')
    """
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise SysctlError(f"--sysctl {text!r}: expected NAME=VALUE, e.g. kernel.numa_balancing=1")
    knob, node = knob_for(name)
    knob.parse(value.strip())
    return name.strip(), value.strip()


def sysctl_values(config: KernelConfig) -> dict[str, str]:
    """Every knob's value in ``config``, by canonical name, as the file would read (the pool's *requested*
    sizes: what the kernel managed to allocate is in ``HugePages_Total`` of its meminfo).

    Examples
    --------
    >>> v = sysctl_values(KernelConfig())
    >>> v["kernel.numa_balancing"], v["/sys/kernel/mm/transparent_hugepage/enabled"]
    ('0', 'always [madvise] never')
    """
    out: dict[str, str] = {}
    for knob in KNOBS:
        if knob.field == "hugetlb_pool_writes":
            continue
        obj: object = config
        for part in knob.field.split("."):
            obj = getattr(obj, part)
        if knob.choices:
            out[knob.name] = " ".join(f"[{c}]" if c == obj else c for c in knob.choices)
        elif isinstance(obj, tuple):
            out[knob.name] = " ".join(str(x) for x in obj)
        elif obj is None:
            out[knob.name] = knob.default
        else:
            out[knob.name] = str(int(obj)) if isinstance(obj, bool) else str(obj)
    # The pool as requested, write by write: a vm.nr_hugepages write resizes the whole pool (the per-node
    # counts it leaves are the kernel's to choose), a per-node write then sets that node's.
    out["vm.nr_hugepages"] = "0"
    for nid, count in config.hugetlb_pool_writes:
        if nid is None:
            out = {k: v for k, v in out.items() if not _NODE_HUGEPAGES.match(k)}
            out["vm.nr_hugepages"] = str(count)
        else:
            out[_NODE_HUGEPAGES_TEMPLATE.replace("nodeN", f"node{nid}")] = str(count)
    return out
