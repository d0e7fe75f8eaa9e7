"""The knobs of automatic NUMA balancing and memory tiering, with the kernel source's defaults.

Sources: ``kernel/sched/fair.c`` (``sysctl_numa_balancing_scan_delay``, ``..._scan_period_min``,
``..._scan_period_max``, ``..._scan_size``, ``sysctl_numa_balancing_hot_threshold``,
``sysctl_numa_balancing_promote_rate_limit``), ``include/linux/sched/sysctl.h`` (``NUMA_BALANCING_NORMAL`` = 1,
``NUMA_BALANCING_MEMORY_TIERING`` = 2), ``Documentation/admin-guide/sysctl/kernel.rst``.

``kernel.numa_balancing`` is 0 here unless set: the source enables it at boot on a multi-node machine when
built with ``CONFIG_NUMA_BALANCING_DEFAULT_ENABLED`` (most distributions), but numasim's runs place every
page at first touch and keep it unless asked (``--sysctl kernel.numa_balancing=1``), so that a run's result
does not change under a user who did not ask for a scanner.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NUMA_BALANCING_NORMAL", "NUMA_BALANCING_MEMORY_TIERING", "NumaBalancingConfig"]

NUMA_BALANCING_NORMAL = 1
NUMA_BALANCING_MEMORY_TIERING = 2


@dataclass(frozen=True)
class NumaBalancingConfig:
    """Automatic NUMA balancing's sysctls (milliseconds and megabytes, as the kernel names them).

    Attributes
    ----------
    mode : int
        ``kernel.numa_balancing``: bit 0 NUMA_BALANCING_NORMAL, bit 1 NUMA_BALANCING_MEMORY_TIERING (0..3).
    scan_delay_ms : int
        ``kernel.numa_balancing_scan_delay_ms``: a task's first scan this long after it starts (1000).
    scan_period_min_ms, scan_period_max_ms : int
        Bounds of the adaptive scan period (1000, 60000).
    scan_size_mb : int
        Megabytes of the address space made PROT_NONE per scan pass (256).
    hot_threshold_ms : int
        Tiering: a slow-tier page faulted again within this long of its scan is hot (1000).
    promote_rate_limit_mbps : int
        Tiering: promotion rate limit in MB/s (65536).
    """

    mode: int = 0
    scan_delay_ms: int = 1000
    scan_period_min_ms: int = 1000
    scan_period_max_ms: int = 60000
    scan_size_mb: int = 256
    hot_threshold_ms: int = 1000
    promote_rate_limit_mbps: int = 65536

    @property
    def enabled(self) -> bool:
        return self.mode != 0
