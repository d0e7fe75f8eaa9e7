"""Programs whose mapping the overcommit heuristic refuses fail the way the real programs do."""

from __future__ import annotations

import pytest

from numasim.kernel.kernel import Kernel
from numasim.tools.numactl import run_numactl
from numasim.topology.io import load_machine


@pytest.mark.parametrize(
    "argv,stderr,stdout",
    [
        (["memhog", "200G"], "mmap: Cannot allocate memory\n", ""),
        (["stress", "-m", "1", "--vm-bytes", "100T"], "hogvm malloc failed: Cannot allocate memory", ""),
        (["alloc", "--pages", "100000000000"], "", "= -1 ENOMEM (Cannot allocate memory)"),
    ],
)
def test_enomem_is_reported_by_the_program(argv: list[str], stderr: str, stdout: str) -> None:
    kernel = Kernel(load_machine("seed-003-2node"))
    run = run_numactl(kernel, argv)
    assert run.exit_code == 1
    assert stderr in run.stderr and stdout in run.stdout
    assert "Traceback" not in run.stderr
