"""Keep the C allocator's freed memory for reuse: the engine's temporaries then stop page-faulting.

The engine allocates and frees arrays of several MiB per chunk of accesses (a window's sort keys, the estimate's
gathers, each window's outputs). glibc's malloc serves blocks that large with ``mmap`` and gives them back with
``munmap`` on free (its threshold moves up with what it sees, to 32 MiB at most), and each thread that allocates
gets an arena of its own whose free memory it trims back to the kernel: so the same few hundred MiB are faulted
in again, page by page, chunk after chunk. Measured on the engine benchmark (8 M random loads, 8 threads, this
project's 2-core VMs): 4,000 to 57,000 minor page faults and 2 to 40 ns of system time per access, varying from
run to run with the allocator's history; with :func:`tune_allocator`, under 1,500 faults after the first run and
under 2 ns, and the user time no higher.

What it does (glibc's ``mallopt``): blocks below 512 MiB come from the heap (``M_MMAP_THRESHOLD``, which also
stops the threshold moving), the heap keeps up to 1 GiB free at its top (``M_TRIM_THRESHOLD``) instead of
returning it, and every thread allocates from the main arena (``M_ARENA_MAX`` 1: the engine's threads allocate
large blocks rarely, so they do not contend). The cost: a process keeps the memory its largest simulation
freed, until it exits. The change is process-wide, so the library never makes it on its own: the ``numasim``
command and the sweep's worker processes do (processes of numasim's own), a program that embeds numasim may.
Results do not depend on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["tune_allocator", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES"]

MMAP_THRESHOLD_BYTES = 512 << 20
TRIM_THRESHOLD_BYTES = 1 << 30
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

_tuned: bool | None = None


def tune_allocator() -> bool:
    """Make glibc's malloc keep freed memory for reuse (see the module docstring); once per process.

    Returns True when the settings took (glibc on Linux), False where there is no ``mallopt`` to call (another
    C library or platform: nothing changes, and simulations run as they do without it).

    Examples
    --------
    >>> isinstance(tune_allocator(), bool)
    True
    """
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _tuned = all(
        mallopt(option, value) == 1
        for option, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
            (_M_ARENA_MAX, 1),
        )
    )
    return _tuned
