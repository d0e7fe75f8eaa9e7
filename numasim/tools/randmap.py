"""numactl's ``test/randmap TIMEOUT[m|h] [SEED]`` as a virtual program, with glibc's ``random()``.

It maps a 100 MiB read-only SysV segment, applies nine fixed policies, then random ones (offset, policy below
``MPOL_MAX``, a node mask below 4, a length), each ``mbind`` followed by ``get_mempolicy(MPOL_F_ADDR)`` of every
page of the range and 20 pages either side, printing each call and every page whose policy or nodes differ
from what it set, until its ``alarm`` fires (exit status 142, the shell's ``Alarm clock``). The random numbers
are glibc's (:class:`GlibcRandom`), seeded as the C program seeds them, so one seed gives the real program's
sequence of calls. The loop has no simulated clock: a simulated second holds :data:`RANDMAP_ITERATIONS_PER_S`
iterations (nominal). Without a timeout the real one runs until it is killed; this one refuses to start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from numasim.kernel.mempolicy import MPOL_BIND, MPOL_DEFAULT, MPOL_F_ADDR, MPOL_INTERLEAVE, MPOL_PREFERRED
from numasim.tools.numactl_tests import strerror
from numasim.tools.programs import ProgramRun
from numasim.units import PAGE_SIZE_BYTES

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.task import Task

__all__ = ["randmap", "GlibcRandom", "RANDMAP_ITERATIONS_PER_S"]

_SIGALRM_STATUS = 142
RANDMAP_ITERATIONS_PER_S = 100
"""How many of randmap's random mbind-and-check iterations a simulated second holds (a nominal figure: each checks
up to 25,600 pages with get_mempolicy, a few milliseconds on a real box)."""
_RANDMAP_MAX_ITERATIONS = 100_000


class GlibcRandom:
    """glibc's ``srandom`` / ``random`` (the default TYPE_3 additive generator: degree 31, separation 3).

    >>> rng = GlibcRandom(1)
    >>> [rng.random() for _ in range(3)]
    [1804289383, 846930886, 1681692777]
    """

    _DEGREE, _SEP = 31, 3

    def __init__(self, seed: int) -> None:
        seed &= 0xFFFFFFFF
        word = seed or 1  # srandom_r: a seed of 0 is 1
        state = [word]
        for _ in range(1, self._DEGREE):
            hi, lo = divmod(word, 127773)
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += 2147483647
            state.append(word)
        self._state = state
        self._f, self._r = self._SEP, 0
        for _ in range(10 * self._DEGREE):  # srandom_r discards the first 310 outputs
            self.random()

    def random(self) -> int:
        st = self._state
        st[self._f] = (st[self._f] + st[self._r]) & 0xFFFFFFFF
        value = st[self._f] >> 1
        self._f = (self._f + 1) % self._DEGREE
        self._r = (self._r + 1) % self._DEGREE
        return value


def randmap(kernel: Kernel, task: Task, argv: Sequence[str]) -> ProgramRun:
    """numactl's test/randmap TIMEOUT [SEED]: random mbind/get_mempolicy checks on a read-only SysV segment."""
    import time

    from numasim.kernel.nodestring import strtoul

    run = ProgramRun(pids=[task.pid])
    ps = PAGE_SIZE_BYTES
    npages = (100 << 20) // ps
    seg = kernel.shmget(npages * ps)  # shmget(IPC_PRIVATE), shmat(SHM_RDONLY), shmctl(IPC_RMID)
    vma = kernel.shmat(task, seg)
    kernel.shm_remove(seg)
    base = int(vma.start)
    run.stdout += f"map {base:#x}\n"
    timeout_s = 0
    if len(argv) > 1:
        timeout_s, end = strtoul(argv[1])
        timeout_s *= {"h": 3600, "m": 60}.get(argv[1][end : end + 1], 1)
        run.stdout += f"running for {timeout_s} seconds\n"
    if timeout_s <= 0:  # no alarm: the real program runs until it is killed
        run.stderr += "randmap: numasim: give a timeout (randmap 10 [SEED]): the real one runs until killed\n"
        run.exit_code = 1
        return run
    seed = strtoul(argv[2])[0] if len(argv) > 2 else int(time.time())
    run.stdout += f"random seed {seed}\n"
    rng = GlibcRandom(seed)
    expected_policy = [0] * npages
    expected_mask = [0] * npages

    def setpol(offset: int, length: int, policy: int, nodes: int) -> None:
        run.stdout += f"off:{offset:x} length:{length:x} policy:{policy} nodes:{nodes:x}\n"
        mask = {b for b in range(64) if nodes >> b & 1}
        res = kernel.mbind(task, base + offset * ps, length * ps, policy, mask, 8)
        if not res.ok:
            run.stdout += (f"mbind: {strerror(res.errno)} offset {offset * ps:x} length {length * ps:x} "
                           f"policy {policy} nodes {nodes:x}\n")  # fmt: skip
            return
        expected_policy[offset : offset + length] = [policy] * length
        expected_mask[offset : offset + length] = [nodes] * length
        lo, hi = max(offset - 20, 0), min(offset + length + 20, npages)
        ids = seg.policy_id[lo:hi]
        # one get_mempolicy per run of pages sharing a policy object: the same answers as one call per page
        starts = [0, *(int(k) + 1 for k in (ids[1:] != ids[:-1]).nonzero()[0])]
        for k, first in enumerate(starts):
            last = starts[k + 1] if k + 1 < len(starts) else hi - lo
            got = kernel.get_mempolicy(task, MPOL_F_ADDR, base + (lo + first) * ps, 64)
            if not got.ok:
                run.stdout += f"get_mempolicy: {strerror(got.errno)}\n"
                raise _Exit(1)
            pol2 = int(got.value["mode"])
            nodes2 = sum(1 << b for b in (got.value["nodemask"] or ()) if b < 64)
            for i in range(lo + first, lo + last):
                if pol2 != expected_policy[i]:
                    run.stdout += (f"{i:x}: got policy {pol2} expected {expected_policy[i]}, nodes got {nodes2:x} "
                                   f"expected {expected_mask[i]:x}\n")  # fmt: skip
                if policy != MPOL_DEFAULT and nodes2 != expected_mask[i]:
                    run.stdout += f"{i:x}: nodes {nodes2:x}, expected {expected_mask[i]:x}, policy {policy}\n"

    mb = (1 << 20) // ps
    try:
        run.stdout += "simple tests\n"
        for args in ((0, npages, MPOL_INTERLEAVE, 3), (0, mb, MPOL_BIND, 1), (mb, mb, MPOL_BIND, 1),
                     (mb, mb, MPOL_DEFAULT, 0), (mb, mb, MPOL_PREFERRED, 2), (mb // 2, mb, MPOL_DEFAULT, 0),
                     (mb + mb // 2, mb, MPOL_BIND, 2), (mb // 2 + 100, 100, MPOL_PREFERRED, 1),
                     (100, 200, MPOL_PREFERRED, 1)):  # fmt: skip
            setpol(*args)
        run.stdout += "done\n"
        for _ in range(min(timeout_s * RANDMAP_ITERATIONS_PER_S, _RANDMAP_MAX_ITERATIONS)):
            offset = rng.random() % npages
            policy = rng.random() % _MPOL_MAX
            nodes = rng.random() % 4
            length = rng.random() % (npages - offset)
            if policy == MPOL_DEFAULT:
                nodes = 0
            elif policy in (MPOL_INTERLEAVE, MPOL_BIND) and nodes == 0:
                continue
            elif policy == MPOL_PREFERRED and nodes.bit_count() != 1:
                continue
            setpol(offset, length, policy, nodes)
    except _Exit as done:
        run.exit_code = done.code
        return run
    run.stderr += "Alarm clock\n"  # SIGALRM ends it; the shell reports the signal
    run.exit_code = _SIGALRM_STATUS
    return run


_MPOL_MAX = 7
"""numactl's numaif.h ``MPOL_MAX``: randmap draws policies below it."""


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code
