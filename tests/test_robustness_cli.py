"""QA findings on the command line: huge allocations, uncalibrated machines, failing --after commands, OOM
log lines, help texts, kernel versions, workload errors naming their file. Every failure is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.errors import WorkloadError
from numasim.kernel.kernel import Kernel, MmapError
from numasim.timing.resolve import how_to_calibrate
from numasim.tools.programs import PROGRAMS
from numasim.tools.tool_programs import TOOL_PROGRAMS
from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import save_machine_toml
from numasim.topology.library import list_shipped
from numasim.workload.spec import load_workload, loads_workload

ROOT = Path(__file__).resolve().parents[1]
TRIAD = ROOT / "examples" / "workloads" / "stream-triad.toml"


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("numasim: error:")]
    assert len(lines) == 1, err
    return lines[0]


# --- 1. mmap larger than RAM + swap: ENOMEM -----------------------------------------------------------------


def test_mmap_beyond_ram_is_enomem_and_up_to_ram_is_lazy() -> None:
    k = Kernel(glueless(2, memory_bytes=1 << 30))
    t = k.spawn("big", cpu=0)
    with pytest.raises(MmapError) as info:
        k.mmap(t, (2 << 30) + 1)
    assert info.value.errno == "ENOMEM"
    assert info.value.limit_bytes == k.totalram_pages() * 4096 == 2 << 30
    assert isinstance(info.value, WorkloadError)  # callers that do not catch it still give one clear line
    vma = k.mmap(t, 2 << 30)  # exactly RAM: allowed (nothing is allocated before the first touch)
    assert vma.present == 0


def test_run_with_a_100t_allocation_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = tmp_path / "huge.toml"
    wl.write_text(TRIAD.read_text().replace('size_bytes = "16M"', 'size_bytes = "100T"', 1))
    assert main(["run", "-m", "seed-003-2node", "-w", str(wl), "--nominal", "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(wl) in line and "allocations[a]" in line
    assert "100.0 TiB" in line and "64.0 GiB" in line and "ENOMEM" in line


def test_stress_100t_fails_like_stress(capsys: pytest.CaptureFixture[str]) -> None:
    # The overcommit heuristic refuses the mapping: stress's worker reports its malloc failure, exit status 1.
    assert main(["numactl", "--machine", "seed-003-2node", "--", "stress", "-m", "1", "--vm-bytes", "100T"]) == 1
    err = capsys.readouterr().err
    assert "hogvm malloc failed: Cannot allocate memory" in err and "Traceback" not in err


# --- 2. uncalibrated machines -----------------------------------------------------------------------------


def test_no_calibration_message_mentions_nominal(capsys: pytest.CaptureFixture[str]) -> None:
    assert "or pass --nominal to time it with the machine file's nominal numbers on purpose" in how_to_calibrate(
        glueless(2)
    )
    assert main(["run", "-m", "xeon-2s-cxl", "-w", str(TRIAD), "--no-progress"]) == 2
    assert "--nominal" in _one_error_line(capsys.readouterr().err)


def test_topo_list_has_a_calibration_column(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = {s.name: s for s in list_shipped()}
    assert shipped["seed-003-2node"].calibration == "seed-003-2node.cal.json"
    assert shipped["seed-003-2node"].calibration_exists
    assert shipped["xeon-2s-cxl"].calibration == ""
    assert main(["topo", "list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["seed-003-2node"].split()[7] == "seed-003-2node.cal.json"
    assert lines["xeon-2s-cxl"].split()[7] == "uncalibrated"


# --- 3. failing --after commands, OOM log line --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["kernel", "buddyinfo", "{m}", "{after}"],
        ["kernel", "zoneinfo", "{m}", "{after}"],
        ["numastat", "--machine", "{m}", "{after}"],
        ["numactl", "--machine", "{m}", "{after}", "true"],
    ],
    ids=["buddyinfo", "zoneinfo", "numastat", "numactl"],
)
def test_a_failing_after_command_fails_the_command(
    argv: list[str], small: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args: list[str] = []
    for a in argv:  # numasim's own options (--after) come before numactl's
        args += ["--after", "numactl -m 1 -- nosuch"] if a == "{after}" else [a.format(m=small)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "numactl: execution of `nosuch': No such file or directory" in err
    assert "numasim: error: --after 'numactl -m 1 -- nosuch' failed with exit status 1" in err


def test_after_commands_that_succeed_still_pass(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "buddyinfo", small, "--after", "numactl -i 0,1 -- memhog 8M"]) == 0
    assert capsys.readouterr().out.startswith("Node 0")


def test_oom_kill_prints_the_kernel_log_line(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--machine", small, "-m", "1", "--", "memhog", "384M"]) == 137
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "Killed"
    assert err[-2].startswith("Out of memory: Killed process 1000 (memhog) total-vm:")
    assert err[-2].endswith("constraint=CONSTRAINT_MEMORY_POLICY, nodemask=1")
    assert main(["numactl", "--machine", small, "--json", "-m", "1", "--", "memhog", "384M"]) == 137
    kill = json.loads(capsys.readouterr().out)["oom_kills"][0]
    assert (kill["comm"], kill["constraint"], kill["nodemask"]) == ("memhog", "CONSTRAINT_MEMORY_POLICY", [1])


def test_global_oom_has_no_policy_nodemask(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--machine", small, "--", "memhog", "500M"]) == 137
    assert "constraint=CONSTRAINT_NONE, nodemask=(null)" in capsys.readouterr().err


# --- 4. help texts -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["numactl", "numastat"])
def test_help_is_plain_text_with_options_and_programs(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out
    assert out.startswith(f"Usage: numasim {command} --machine MACHINE")
    for option in ("--machine", "--kernel-version", "--calibration", "--nominal", "--after"):
        assert f"  {option} " in out
    if command == "numactl":
        assert "  --json " in out and "--membind=NODES" in out and "--interleave=NODES" in out
        listed = out.split("Virtual programs:\n", 1)[1].splitlines()
        assert {line.split()[0] for line in listed} == set(PROGRAMS) | set(TOOL_PROGRAMS)
    else:
        assert "-p <PID>|<pattern> to show process info" in out


def test_calibrate_help_shows_every_fit_on_choice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["calibrate", "--help"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    for table in ("latency", "peak_bandwidth", "bandwidth_matrix", "loaded_latency", "caches", "device"):
        assert table in out


# --- 5. kernel versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["5.4", "6.13", "banana", "7"])
def test_unsupported_kernel_version_names_the_option(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "zonelists", "seed-003-2node", "--kernel-version", version]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--kernel-version" in line and "6.1 .. 6.12" in line and "KernelConfig" not in line
    assert main(["numactl", "--machine", "seed-003-2node", "--kernel-version", version, "true"]) == 2
    assert "--kernel-version" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("version", ["6.1", "6.8", "6.12"])
def test_supported_kernel_versions_are_accepted(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "zonelists", "seed-003-2node", "--kernel-version", version]) == 0
    assert "Fallback order for Node 0" in capsys.readouterr().out


# --- 6. workload errors name the file -----------------------------------------------------------------------


def test_a_wrong_thread_node_names_the_workload_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "badnode.toml"
    wl.write_text(TRIAD.read_text().replace("threads = [{count = 8, node = 0}]", "threads = [{count = 3}, {node = 9}]"))
    assert load_workload(wl).source == str(wl)
    assert loads_workload(TRIAD.read_text()).source == "<toml>"
    assert main(["run", "-m", "seed-003-2node", "-w", str(wl), "--nominal", "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"{wl}: threads[3].node = 9: machine seed-003-2node has no cpus on that node" in line
