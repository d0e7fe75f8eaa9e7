"""Random sequences of mmap / touch / mbind / migrate_pages / move_pages / munmap keep the books balanced:
pages are conserved, VMAs tile their mappings, BIND placements stay inside their masks, and replays agree."""

from __future__ import annotations

import numpy as np
from _mpol_machines import four_nodes
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.kernel.kernel import Kernel
from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_INTERLEAVE,
    MPOL_MF_MOVE,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
)
from numasim.kernel.task import PAGE_SIZE

_nodes = st.frozensets(st.integers(0, 3), min_size=1, max_size=4)
_mode = st.sampled_from([MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED, MPOL_PREFERRED_MANY, MPOL_DEFAULT])
_op = st.one_of(
    st.tuples(st.just("touch"), st.integers(0, 63), st.integers(1, 64), st.integers(0, 7)),
    st.tuples(st.just("mbind"), st.integers(0, 63), st.integers(1, 64), _mode, _nodes, st.booleans()),
    st.tuples(st.just("migrate"), _nodes, _nodes),
    st.tuples(st.just("move"), st.lists(st.integers(0, 63), max_size=8), st.integers(0, 3)),
    st.tuples(st.just("munmap"), st.integers(0, 63), st.integers(1, 8)),
)


def _run(ops: list[tuple]) -> tuple[Kernel, list[list[int]]]:  # type: ignore[type-arg]
    k = four_nodes(16)
    t = k.spawn("p", cpu=0, cap_sys_nice=True)
    base = k.mmap(t, 64 * PAGE_SIZE).start
    for op in ops:
        kind = op[0]
        if kind == "touch":
            _, page, n, cpu = op
            for v in t.mm.vmas_in(base + page * PAGE_SIZE, base + (page + n) * PAGE_SIZE):
                lo, hi = max(v.start, base + page * PAGE_SIZE), min(v.end, base + (page + n) * PAGE_SIZE)
                k.touch(t, lo, hi - lo, cpu=cpu)
        elif kind == "mbind":
            _, page, n, mode, nodes, move = op
            start, end = base + page * PAGE_SIZE, base + (page + n) * PAGE_SIZE
            r = k.mbind(t, start, n * PAGE_SIZE, mode, set() if mode == MPOL_DEFAULT else nodes,
                        flags=MPOL_MF_MOVE if move else 0)
            if r.ok and mode == MPOL_BIND and move and r["failed"] == 0:
                for v in t.mm.vmas_in(start, end):
                    lo, hi = (max(start, v.start) - v.start) // PAGE_SIZE, (min(end, v.end) - v.start) // PAGE_SIZE
                    placed = v.nodes[lo:hi]
                    assert set(placed[placed >= 0].tolist()) <= nodes
        elif kind == "migrate":
            k.migrate_pages(t, op[1], op[2])
        elif kind == "move":
            k.move_pages(t, [base + p * PAGE_SIZE for p in op[1]], [op[2]] * len(op[1]))
        else:
            k.munmap(t, base + op[1] * PAGE_SIZE, op[2] * PAGE_SIZE)
        if not t.alive:
            break
    return k, [v.nodes.tolist() for v in t.mm.vmas]


@settings(max_examples=40)
@given(st.lists(_op, max_size=12))
def test_random_syscall_sequences(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    k, layout = _run(ops)
    t = next(iter(k.tasks.values()))
    fresh = four_nodes(16)
    used = sum(fresh.pm.free_pages(n) - k.pm.free_pages(n) for n in range(4))
    assert used == sum(v.present for v in t.mm.vmas)
    vmas = t.mm.vmas
    for a, b in zip(vmas, vmas[1:], strict=False):
        assert a.end <= b.start
    for v in vmas:
        assert v.nodes.size == v.npages and v.zones.size == v.npages
        assert np.array_equal(v.nodes >= 0, v.zones >= 0)
    assert _run(ops)[1] == layout
