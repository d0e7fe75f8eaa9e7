"""The virtual tools as programs of the virtual numactl, from Python and from the ``numasim`` CLI."""

from __future__ import annotations

import pytest

from numasim.calibrate.parsers.lmbench import parse_lat_mem_rd_text
from numasim.cli import main
from numasim.errors import CalibrationError
from numasim.kernel.kernel import Kernel
from numasim.timing import resolve_calibration
from numasim.timing.model import nominal_calibration
from numasim.tools import TOOL_PROGRAMS, find_program
from numasim.tools.numactl import run_numactl
from numasim.topology.builders import glueless


def test_registry() -> None:
    assert {"lat_mem_rd", "dd", "stream", "mlc", "ib_send_lat", "ib_send_bw", "main"} <= set(TOOL_PROGRAMS)
    assert find_program("/usr/bin/lat_mem_rd") is TOOL_PROGRAMS["lat_mem_rd"]
    assert find_program("nonesuch") is None


def test_calibration_is_never_silently_nominal() -> None:
    m = glueless(2)
    k = Kernel(m)
    with pytest.raises(CalibrationError, match="names no calibration"):
        resolve_calibration(m)
    run = run_numactl(k, ["--membind=1", "lat_mem_rd", "1", "64"])
    assert run.exit_code == 1 and run.stderr.startswith("lat_mem_rd: numasim: machine glueless-2s-full")
    run = run_numactl(k, ["--membind=1", "lat_mem_rd", "1", "64"], calibration=nominal_calibration(m))  # on purpose
    assert run.exit_code == 0 and parse_lat_mem_rd_text(run.stderr).curves[0].stride_bytes == 64
    # the calibration is the process's, not the kernel's: the next process without one is refused again
    assert run_numactl(k, ["--membind=1", "lat_mem_rd", "1", "64"]).exit_code == 1
    # and it reaches a nested numactl's program
    run = run_numactl(k, ["numactl", "--membind=1", "lat_mem_rd", "1", "64"], calibration=nominal_calibration(m))
    assert run.exit_code == 0
    other = nominal_calibration(glueless(4))
    run = run_numactl(k, ["lat_mem_rd", "1", "64"], calibration=other)
    assert run.exit_code == 1 and "not 'glueless-2s-full'" in run.stderr


def test_tool_errors_print_like_the_tool(seed001) -> None:
    m, cal = seed001
    k = Kernel(m)
    run = run_numactl(k, ["dd", "if=/dev/shm/missing", "of=/dev/null"], calibration=cal)
    assert (run.exit_code, run.stderr) == (1, "dd: failed to open '/dev/shm/missing': No such file or directory\n")
    run = run_numactl(k, ["lat_mem_rd"], calibration=cal)
    assert run.exit_code == 1 and run.stderr.startswith("Usage: lat_mem_rd")
    run = run_numactl(k, ["stream", "x"], calibration=cal)
    assert run.exit_code == 1


def test_cli_commands_of_the_brief(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["numactl", "--machine", "seed-003-2node", "--membind=1", "--", "lat_mem_rd", "1M", "64"])
    out = capsys.readouterr()
    assert code == 0 and out.err.startswith('"stride=64\n0.00049 ')
    assert "Per-node process memory usage" in out.out
    code = main(["numactl", "--machine", "seed-001-e5-2680v2", "--cpunodebind=0", "--membind=1", "--",
                 "dd", "if=/dev/zero", "of=/dev/shm/x", "bs=20M", "count=16"])
    out = capsys.readouterr()
    assert code == 0
    assert out.err.splitlines()[:2] == ["16+0 records in", "16+0 records out"]
    assert out.err.splitlines()[2].startswith("335544320 bytes (336 MB, 320 MiB) copied, ")
    # the file outlives the writer within one simulated machine: --after runs the writer first
    write = "numactl --cpunodebind=0 --membind=1 -- dd if=/dev/zero of=/dev/shm/x bs=20M count=16"
    code = main(["numactl", "--machine", "seed-001-e5-2680v2", "--after", write, "--cpunodebind=0", "--",
                 "dd", "if=/dev/shm/x", "of=/dev/null", "bs=20M"])
    out = capsys.readouterr()
    assert code == 0 and out.err.splitlines()[0] == "16+0 records in"
