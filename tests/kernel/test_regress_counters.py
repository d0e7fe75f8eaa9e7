"""numactl's test/regress assertions (kernel_spec 8.7) replayed at the syscall level: memhog -H 15M under
each policy must move the numastat counters by at least the amounts the script checks."""

from __future__ import annotations

from _mpol_machines import MiB, two_nodes

from numasim.kernel.kernel import Kernel
from numasim.kernel.mempolicy import MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED

PAGES, HALFPAGES, DOUBLEPAGES = 3840, 1820, 7480


def _memhog(k: Kernel, mode: int, nodes: set[int], via_mbind: bool = False) -> None:
    t = k.spawn("memhog", cpu=0)
    vma = k.mmap(t, 15 * MiB)
    if via_mbind:
        assert k.mbind(t, vma.start, 15 * MiB, mode, nodes).ok
    else:
        assert k.set_mempolicy(t, mode, nodes).ok
    k.touch(t, vma.start, 15 * MiB)
    k.exit(t)


def _counter(k: Kernel, name: str) -> list[int]:
    return [k.numastat(n)[name] for n in (0, 1)]


def test_regress_interleave_membind_preferred() -> None:
    for via_mbind in (False, True):
        k = two_nodes(256)
        before = _counter(k, "interleave_hit")
        _memhog(k, MPOL_INTERLEAVE, {0, 1}, via_mbind)
        after = _counter(k, "interleave_hit")
        assert all(a - b >= HALFPAGES for a, b in zip(after, before, strict=True))
        before = _counter(k, "numa_hit")
        _memhog(k, MPOL_BIND, {0, 1}, via_mbind)
        assert sum(_counter(k, "numa_hit")) - sum(before) >= PAGES
        for node in (0, 1):
            before = _counter(k, "numa_hit")
            _memhog(k, MPOL_BIND, {node}, via_mbind)
            _memhog(k, MPOL_PREFERRED, {node}, via_mbind)
            assert _counter(k, "numa_hit")[node] - before[node] >= DOUBLEPAGES
