"""numactl's shared-memory options (shm.c) against the simulated kernel: --shm, --file, --huge, --length,
--offset, --shmid, --strict, --touch, --dump, --dump-nodes, --verify."""

from __future__ import annotations

import pytest

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.tools.numactl import USAGE, memsize, run_numactl
from numasim.topology.io import load_machine


@pytest.fixture
def kernel() -> Kernel:
    return Kernel(load_machine("seed-003-2node"), KernelConfig().with_sysctls({"vm.nr_hugepages": 16}))


def nc(kernel: Kernel, *argv: str) -> tuple[int, str, str]:
    run = run_numactl(kernel, list(argv))
    return run.exit_code, run.stdout, run.stderr


def _node_runs(stdout: str) -> list[tuple[int, int, int]]:
    out = []
    for line in stdout.splitlines():
        span, node = line.split(": ")
        lo, hi = (int(x, 16) for x in span.split("-"))
        out.append((lo, hi, int(node)))
    return out


def test_a_segment_is_created_once_and_keeps_its_shared_policy(kernel: Kernel) -> None:
    code, out, err = nc(kernel, "--length=8m", "--shm=A", "--dump")
    assert code == 0 and out == ""
    assert err == ("numactl: Creating shm key file A mode 0600\n"
                   "numactl: Creating shared memory segment A id 0 mode 0600 length 8MB\n")  # fmt: skip
    # the policy goes to the segment's second 2 MiB, and outlives this numactl (the segment's shared policy)
    assert nc(kernel, "--offset=2m", "--length=2m", "--shm=A", "--interleave=0,1") == (0, "", "")
    assert nc(kernel, "--shm=A", "--dump") == (0, "0000000000200000-0000000000400000: interleave : 0 1 \n", "")
    code, out, _ = nc(kernel, "--shm=A", "--dump-nodes")  # faults every page in: local except the interleaved
    runs = _node_runs(out)
    assert code == 0 and runs[0] == (0, 0x201000, 0) and runs[1] == (0x201000, 0x202000, 1)
    assert runs[-1] == (0x400000, 0x800000, 0)


def test_verify_passes_where_the_pages_follow_the_policy(kernel: Kernel) -> None:
    assert nc(kernel, "--length=4m", "--shm=V", "--interleave=0,1", "--verify")[0] == 0
    assert nc(kernel, "--length=4m", "--shm=W", "--membind=1", "--verify", "--dump") == (
        0, "0000000000000000-0000000000400000: bind : 1 \n",
        "numactl: Creating shm key file W mode 0600\n"
        "numactl: Creating shared memory segment W id 0 mode 0600 length 4MB\n",
    )  # fmt: skip
    # strict: pages already on node 1 cannot take a membind to node 0 without moving
    code, out, err = nc(kernel, "--length=4m", "--shm=W", "--strict", "--membind=0")
    assert code == 1 and err == "mbind: Input/output error\nsetting membind: Input/output error\n"


def test_the_offset_check_numactl_has_since_2014(kernel: Kernel) -> None:
    """numactl's own test/shmtest runs ``--offset=2m --length=2m ... --verify``: check_shmbeyond refuses it (the
    region starts at its length), on a real numactl as here; the policy set before --verify stays."""
    nc(kernel, "--length=20m", "--shm=A")
    code, _, err = nc(kernel, "--offset=2m", "--length=2m", "--shm=A", "--strict", "--interleave=0,1", "--verify")
    assert code == 1 and err == "numactl: region offset 0x200000 beyond its length 0x200000 at --verify\n"
    assert nc(kernel, "--shm=A", "--dump")[1] == "0000000000200000-0000000000400000: interleave : 0 1 \n"


def test_huge_segments_come_from_the_pool_and_keep_no_shared_policy(kernel: Kernel) -> None:
    pool = kernel.hugetlb.free()
    code, out, err = nc(kernel, "--huge", "--length=4m", "--shm=H", "--membind=1", "--touch", "--dump-nodes")
    assert code == 0 and out == "0000000000000000-0000000000400000: 1\n"
    assert kernel.hugetlb.free() == pool - 2  # two 2 MiB pages, from node 1's pool
    # hugetlbfs has no shared policy: the mbind lived in the mapping numactl had, not in the segment
    assert nc(kernel, "--huge", "--shm=H", "--dump") == (0, "", "")
    code, _, err = nc(kernel, "--huge", "--length=2m", "--offset=1m", "--shm=H2")
    assert code == 1 and err.endswith("numactl: policy region not page aligned\n")  # 2 MiB pages
    big = Kernel(load_machine("seed-003-2node"))  # no pool: SHM_HUGETLB cannot reserve
    code, _, err = nc(big, "--huge", "--length=4m", "--shm=H")
    assert code == 1 and err.endswith("numactl: cannot create shared memory segment: Cannot allocate memory\n")


def test_tmpfs_files(kernel: Kernel) -> None:
    assert nc(kernel, "--length=4m", "--file", "/dev/shm/F", "--preferred=1", "--touch") == (0, "", "")
    code, out, _ = nc(kernel, "--length=4m", "--file", "/dev/shm/F", "--dump", "--dump-nodes")
    assert code == 0 and out == ("0000000000000000-0000000000400000: preferred-many : 1 \n"
                                 "0000000000000000-0000000000400000: 1\n")  # fmt: skip
    # a file needs a --length (numactl checks the region before it maps)
    code, _, err = nc(kernel, "--file", "/dev/shm/F", "--dump")
    assert code == 1 and err == "numactl: policy region length not specified before --file\n"
    code, _, err = nc(kernel, "--file", "/dev/shm/new", "--dump")
    assert code == 1 and err == "numactl: need a --length to create a shared file\n"


@pytest.mark.parametrize(("argv", "stdout", "stderr"), [
    (["--dump"], "", "numactl: Cannot do --dump without shared memory.\n\n"),
    (["--touch", "--shm=A"], "\n", "numactl: --touch must be after shared memory specification" + USAGE),
    (["--length=4m", "--shm=A", "--length=8m"], "\n",
     "numactl: Creating shm key file A mode 0600\nnumactl: Creating shared memory segment A id 0 mode 0600 length 4MB\n"
     "numactl: --length must be before shared memory specification" + USAGE),
    (["--interleave=all", "--shm=A"], "\n", "numactl: specify policy after --shm/--file" + USAGE),
    (["--length=4m", "--shm=A", "true"], "",
     "numactl: Creating shm key file A mode 0600\nnumactl: Creating shared memory segment A id 0 mode 0600 length 4MB\n"
     + USAGE),
    (["--shm=A"], "", "numactl: Creating shm key file A mode 0600\n"
     "numactl: need a --length to create a sysv shared memory segment\n"),
    (["--huge", "true"], "\n", "numactl: shm related option --huge for process" + USAGE),
])  # fmt: skip
def test_option_errors_are_numactls(kernel: Kernel, argv: list[str], stdout: str, stderr: str) -> None:
    code, out, err = nc(kernel, *argv)
    assert code == 1 and out == stdout and err == stderr


def test_memsize_is_strtoul_with_a_suffix() -> None:
    assert memsize("20m") == 20 << 20 and memsize("0x10K") == 16 << 10 and memsize("010") == 8
    assert memsize("3g") == 3 << 30 and memsize("x") == 0


def test_the_command_line_runs_them(capsys) -> None:  # type: ignore[no-untyped-def]
    from numasim.cli import main

    code = main(["numactl", "--machine", "seed-003-2node", "--after", "numactl --length 8m --shm A --interleave=all",
                 "--", "--shm", "A", "--dump"])  # fmt: skip
    assert code == 0 and capsys.readouterr().out == "0000000000000000-0000000000800000: interleave : 0 1 \n"


def test_sizes_the_kernel_refuses(kernel: Kernel) -> None:
    """From a review: --length=-1 (strtoul wraps it) allocated per-page arrays for 2**64 bytes."""
    code, _, err = nc(kernel, "--length=-1", "--shm", "X")
    assert code == 1 and err.endswith(
        "length 17592186044416MB\nnumactl: cannot create shared memory segment: Invalid argument\n")
    code, _, err = nc(kernel, "--length=100g", "--shm", "Y")  # more than the machine: the commit check refuses
    assert code == 1 and err.endswith("numactl: cannot create shared memory segment: Cannot allocate memory\n")
    code, _, err = nc(kernel, "--length=100g", "--file", "/dev/shm/Z")
    assert code == 1 and err == "ftruncate: File too large\n"
