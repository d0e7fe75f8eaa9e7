"""A process's VMAs over the engine's flat page index, kept current while the address space changes mid-run.

Kernel daemons of a timed run (NUMA balancing, numad, tiering) see memory as the engine does, one flat array of
pages in address order, and act on it through the kernel's VMAs. Those VMAs change during the run: ``mbind``
splits one (``MM.isolate`` assigns a new VMA list), installs a policy on a piece (``vma.policy = ...``), a
daemon calls ``set_mempolicy``. A table built once at attach would then migrate through VMA objects the address
space no longer holds (their node arrays stop being the ones the kernel counts) and judge pages by a policy that
was replaced. :class:`VmaTable` rebuilds itself whenever it is read after such a change; reading it without a
change costs one pass over the (few) VMAs.

Examples
--------
>>> import numpy as np
>>> from numasim.kernel.task import MM, VMA, Task
>>> mm = MM()
>>> _ = mm.insert(VMA(start=0x10000, end=0x14000, pgoff=0x10, nodes=np.zeros(4, np.int16)))
>>> task = Task(pid=1, comm="a", cpus_allowed=frozenset({0}), cpu=0, mems_allowed=frozenset({0}), mm=mm)
>>> table = VmaTable(task, np.arange(0x10, 0x14, dtype=np.uint64))
>>> [(s.flat_lo, s.flat_hi) for s in table.spans()]
[(0, 4)]
>>> mm.split_at(0x12000)  # an mbind over the second half would do this
>>> [(s.flat_lo, s.flat_hi) for s in table.spans()], table.generation
([(0, 2), (2, 4)], 1)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from numasim.kernel.task import VMA, Task

__all__ = ["VmaSpan", "VmaTable"]

_PAGE_SHIFT = 12


@dataclass(frozen=True)
class VmaSpan:
    """One VMA's pages in the flat index: flat pages ``[flat_lo, flat_hi)`` are pages ``index`` of ``vma``."""

    vma: VMA
    flat_lo: int
    flat_hi: int
    index: np.ndarray


class VmaTable:
    """The VMAs of ``task`` (those ``keep`` accepts) as spans of the flat page index ``flat_vpn``.

    Parameters
    ----------
    task : Task
        Any thread of the process (the table follows its ``mm`` and its task policy).
    flat_vpn : numpy.ndarray of uint64
        Virtual page number of each flat page, increasing.
    keep : callable, optional
        Which VMAs to list (default: every VMA that is not hugetlb).

    Attributes
    ----------
    flat_vma : numpy.ndarray of int32
        Per flat page, the position of its span in :meth:`spans` (-1: in no kept VMA).
    generation : int
        How many times the table was rebuilt after the first build (a reader caching something derived from
        the spans compares it).
    """

    def __init__(self, task: Task, flat_vpn: np.ndarray, keep: Callable[[VMA], bool] | None = None) -> None:
        self.task = task
        self.flat_vpn = flat_vpn
        self.keep = keep or (lambda v: not v.hugetlb)
        self.flat_vma = np.full(len(flat_vpn), -1, dtype=np.int32)
        self.generation = -1
        self._spans: list[VmaSpan] = []
        self._seen: tuple[object, ...] = ()
        self.spans()

    def _signature(self) -> tuple[object, ...]:
        # the VMA list object (MM assigns a new one on every change), each VMA's policy and plug-in, and the
        # task's; compared by identity, and kept alive here so that no id is reused
        vmas = self.task.mm.vmas
        pols = tuple(x for v in vmas for x in (v.policy, v.placement))
        return (vmas, self.task.mempolicy, self.task.placement, *pols)

    def spans(self) -> list[VmaSpan]:
        """The current spans, in address order (rebuilt first if the address space or a policy changed)."""
        sig = self._signature()
        if len(sig) == len(self._seen) and all(a is b for a, b in zip(sig, self._seen, strict=True)):
            return self._spans
        self._seen = sig
        self.generation += 1
        self.flat_vma.fill(-1)
        spans: list[VmaSpan] = []
        for vma in self.task.mm.vmas:
            if not self.keep(vma):
                continue
            lo = int(np.searchsorted(self.flat_vpn, np.uint64(vma.start >> _PAGE_SHIFT)))
            hi = int(np.searchsorted(self.flat_vpn, np.uint64(vma.end >> _PAGE_SHIFT)))
            if hi <= lo:
                continue
            index = (self.flat_vpn[lo:hi] - np.uint64(vma.start >> _PAGE_SHIFT)).astype(np.int64)
            self.flat_vma[lo:hi] = len(spans)
            spans.append(VmaSpan(vma, lo, hi, index))
        self._spans = spans
        return spans
