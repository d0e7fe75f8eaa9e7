"""Issue 5: invalid calls give the kernel's errno, never a Python exception escaping.

Random sequences of the memory-policy syscalls on one kernel, with arguments a C caller could pass: any mode
number (with or without mode flags), flags with unknown bits, nodemasks with high bits, ``maxnode`` from 0 to
far beyond ``PAGE_SIZE * 8``, unaligned / unmapped / huge addresses and zero, negative or huge lengths
(``unsigned long`` arguments wrap like in C). Every call must return a :class:`SyscallResult` that either
succeeded or names an errno the kernel can return for it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numasim.kernel.config import KernelConfig
from numasim.kernel.errno import SyscallResult
from numasim.kernel.kernel import Kernel
from numasim.kernel.task import PAGE_SIZE
from numasim.topology.model import Link, Machine, Node

ALLOWED = {"EINVAL", "EFAULT", "EPERM", "EIO", "ENOMEM", "EACCES", "ENODEV", "ENOENT", "ESRCH", "EXDEV",
           "EOPNOTSUPP"}
MiB = 1 << 20
ULONG_MAX = (1 << 64) - 1
INT_MAX, INT_MIN = (1 << 31) - 1, -(1 << 31)

modes = st.one_of(
    st.integers(-2, 9),
    st.integers(0, 9).flatmap(lambda m: st.sampled_from([0, 1 << 13, 1 << 14, 1 << 15, 3 << 13, 7 << 13])
                              .map(lambda f: m | f)),
    st.integers(-(1 << 63), 1 << 64),
)
nodemasks = st.one_of(
    st.none(),
    st.sets(st.one_of(st.integers(0, 4), st.sampled_from([63, 64, 1023, 1024, 1025, 32767, 32768, 1 << 40]),
                      st.integers(-3, -1)), max_size=5),
)
maxnodes = st.one_of(st.none(), st.sampled_from([0, 1, 2, 3, 4, 64, 1024, 1025, 1026, 32768, 32769, 32770,
                                                 ULONG_MAX, 1 << 70, -1]), st.integers(0, 100))
flag_values = st.one_of(st.integers(0, 16), st.sampled_from([1 << 31, ULONG_MAX, -1]))
lengths = st.one_of(st.integers(-3 * PAGE_SIZE, 40 * PAGE_SIZE), st.sampled_from([0, -1, ULONG_MAX, 1 << 63]))


def _kernel() -> Kernel:
    machine = Machine(
        name="fuzz",
        nodes=[
            Node(id=0, cpus=[0, 1], memory_bytes=32 * MiB),
            Node(id=1, cpus=[2, 3], memory_bytes=16 * MiB),
            Node(id=2, cpus=[4], memory_bytes=0),  # memoryless
            Node(id=3, cpus=[], memory_bytes=16 * MiB),  # cpu-less
        ],
        links=[Link(a=i, b=i + 1, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(3)],
        firmware_slit=[[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]],
    )
    return Kernel(machine, KernelConfig(version="6.12"))


@st.composite
def addresses(draw: st.DrawFn, starts: list[int], below_2_63: bool = False) -> int:
    kind = draw(st.sampled_from(["mapped", "mapped", "offset", "raw"]))
    base = draw(st.sampled_from(starts))
    if kind == "mapped":
        return base + PAGE_SIZE * draw(st.integers(0, 12))
    if kind == "offset":
        return base + draw(st.integers(-2 * PAGE_SIZE, 20 * PAGE_SIZE))
    raw = [0, 1, PAGE_SIZE, -PAGE_SIZE, 1 << 47, (1 << 63) - PAGE_SIZE]
    if not below_2_63:  # unsigned long addresses at and above 2**63
        raw += [ULONG_MAX & ~(PAGE_SIZE - 1), 1 << 63]
    return draw(st.sampled_from(raw))


def _check(res: object) -> None:
    assert isinstance(res, SyscallResult), res
    if res.errno is None:
        assert res.ret >= 0
    else:
        assert res.errno in ALLOWED, res
        assert res.ret == -1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_syscalls_return_errnos(data: st.DataObject) -> None:
    k = _kernel()
    t = k.spawn("fuzz", cpu=0)
    root = k.spawn("root", cpu=2, cap_sys_nice=True)
    vmas = [k.mmap(t, 8 * PAGE_SIZE), k.mmap(t, 4 * PAGE_SIZE, kind="shmem")]
    k.touch(t, vmas[0].start, 4 * PAGE_SIZE)
    starts = [v.start for v in vmas]
    for _ in range(data.draw(st.integers(1, 8))):
        call = data.draw(st.sampled_from(["set", "get", "mbind", "migrate", "move", "home"]))
        caller = data.draw(st.sampled_from([t, root]))
        if call == "set":
            res = k.set_mempolicy(caller, data.draw(modes), data.draw(nodemasks), data.draw(maxnodes))
        elif call == "get":
            res = k.get_mempolicy(caller, data.draw(flag_values), data.draw(addresses(starts)),
                                  data.draw(maxnodes), want_nodemask=data.draw(st.booleans()))
        elif call == "mbind":
            res = k.mbind(t, data.draw(addresses(starts)), data.draw(lengths), data.draw(modes),
                          data.draw(nodemasks), data.draw(maxnodes), data.draw(flag_values))
        elif call == "migrate":
            res = k.migrate_pages(t, data.draw(nodemasks), data.draw(nodemasks), data.draw(maxnodes),
                                  caller=caller)
        elif call == "move":
            pages = data.draw(st.lists(addresses(starts), max_size=6))
            # `const int *nodes`: every C int is possible
            node_ints = st.integers(-2, 5) | st.sampled_from([1024, INT_MAX, INT_MIN])
            nodes = data.draw(st.one_of(st.none(), st.lists(node_ints, min_size=len(pages), max_size=len(pages))))
            res = k.move_pages(t, pages, nodes, data.draw(flag_values), caller=caller)
        else:
            res = k.set_mempolicy_home_node(t, data.draw(addresses(starts)), data.draw(lengths),
                                            data.draw(st.integers(-2, 5) | st.sampled_from([1024, ULONG_MAX])),
                                            data.draw(flag_values))
        _check(res)
        if t.alive and data.draw(st.booleans()):
            # faults under whatever policy is now in force must not raise either (OOM may kill the task)
            v = t.mm.vmas[0] if t.mm.vmas else None
            if v is not None:
                k.touch(t, v.start, v.end - v.start)
        if not t.alive:
            break


def test_move_pages_address_above_2_63() -> None:
    k = _kernel()
    t = k.spawn("a", cpu=0)
    k.mmap(t, PAGE_SIZE)
    res = k.move_pages(t, [ULONG_MAX & ~(PAGE_SIZE - 1)], None)
    assert res.ok and res["status"].tolist() == [-14]  # -EFAULT
