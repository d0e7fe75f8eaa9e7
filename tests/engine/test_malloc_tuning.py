"""numasim.allocator: freed blocks of the engine's size are reused, not page-faulted in again (in a child
process: the setting is process-wide, and this test process should keep glibc's defaults)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import resource, numpy as np
from numasim.allocator import tune_allocator

def faults_of_cycles(mib):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        block = np.empty(mib << 20, dtype=np.uint8)
        block[::4096] = 1  # touch every page
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

tuned = tune_allocator()
assert tune_allocator() is tuned  # once per process
warm = faults_of_cycles(48)  # the first cycle faults its pages in
print(tuned, warm, faults_of_cycles(48))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_block_is_reused_not_faulted_in_again() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout.split()
    tuned, warm, again = out[0] == "True", int(out[1]), int(out[2])
    if not tuned:
        pytest.skip("no glibc mallopt here: tune_allocator changes nothing (and says so)")
    pages = (48 << 20) // 4096
    # glibc's defaults hand a 48 MiB block back to the kernel on free: four cycles fault in 4 x 12,288 pages
    # (fewer with transparent huge pages); tuned, only the first cycle does
    assert again < pages // 10, (warm, again)


def test_the_cli_tunes_its_own_process_only() -> None:
    import numasim.allocator as allocator
    from numasim.cli import main

    # main(argv) is how tests and embedding programs call it: their process is left as it is

    before = allocator._tuned
    assert main(["topo", "list"]) == 0
    assert allocator._tuned is before
