"""numasim kernel zonelists|zoneinfo|buddyinfo, numasim numactl, numasim numastat."""

from __future__ import annotations

import json

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.io.toml_format import save_machine_toml


@pytest.fixture
def small(tmp_path) -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def test_zonelists_is_the_boot_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "zonelists", "seed-001-e5-2680v2"]) == 0
    assert capsys.readouterr().out == "Fallback order for Node 0: 0 1 \nFallback order for Node 1: 1 0 \n"


def test_zoneinfo_and_buddyinfo_after_a_run(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "buddyinfo", small]) == 0
    fresh = capsys.readouterr().out
    assert fresh.startswith("Node 0, zone      DMA ")
    assert main(["kernel", "buddyinfo", small, "--after", "numactl -m 1 -- memhog 64M"]) == 0
    after = capsys.readouterr().out
    assert after != fresh
    assert main(["kernel", "zoneinfo", small, "--after", "numactl -m 1 -- memhog 64M"]) == 0
    text = capsys.readouterr().out
    assert (
        "Node 1, zone   Normal\n  per-node stats" in text or "Node 1, zone    DMA32\n  per-node stats" in text
    )
    assert "\n      numa_hit     " in text


def test_numactl_prints_program_output_and_numastat(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["numactl", "--machine", small, "--cpunodebind=1", "--", "stress", "-m", "1", "--vm-bytes", "32M"]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith("stress: info: [") and out[0].endswith(
        "dispatching hogs: 0 cpu, 0 io, 1 vm, 0 hdd"
    )
    assert out[2].startswith("Per-node process memory usage (in MBs) for PID ")
    private = [line for line in out if line.startswith("Private")][0].split()
    assert private[1:] == ["0.00", "32.25", "32.25"]


def test_numactl_json(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["numactl", "--machine", small, "--json", "--interleave=0,1", "alloc", "--pages", "64"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["syscalls"][0] == {
        "call": "set_mempolicy",
        "args": "MPOL_INTERLEAVE, {0-1}",
        "ret": 0,
        "errno": None,
    }
    assert sum(report["pages_per_node"].values()) == sum(c for _, c in report["page_runs"])
    assert report["numastat_delta"]["1"]["interleave_hit"] >= 32


def test_numactl_errors_are_numactls_not_tracebacks(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--machine", small, "--membind=7", "true"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "<7> is invalid\n"
    assert captured.err.startswith("libnuma: Warning: node argument 7 is out of range")
    assert (
        main(["numactl", "--machine", small, "--json", "alloc", "--pages", "4", "--set-mempolicy", "bind:"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["syscalls"][0]["errno"] == "EINVAL"
    assert main(["numactl", "--cpunodebind=0", "true"]) == 2
    assert "--machine MACHINE is required" in capsys.readouterr().err
    assert main(["numactl", "--machine", "no-such-machine", "true"]) == 2


def test_numactl_oom_is_reported(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--machine", small, "-m", "0", "memhog", "384M"]) == 137  # > node 0, < RAM (1G: ENOMEM)
    assert "Killed" in capsys.readouterr().err


def test_numastat_modes(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numastat", "--machine", small]) == 0
    assert capsys.readouterr().out.splitlines()[0] == " " * 27 + "node0           node1"
    assert main(["numastat", "--machine", small, "--after", "numactl -i 0,1 memhog 8M", "-n"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "Per-node numastat info (in MBs):"
    assert lines[7].startswith("Interleave_Hit")
    assert main(["numastat", "--machine", small, "--after", "numactl -m 1 memhog 8M", "-m"]) == 0
    assert "MemFree" in capsys.readouterr().out


def test_numactl_help_and_bad_alloc_address(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--help"]) == 0
    assert "numasim numactl --machine MACHINE" in capsys.readouterr().out
    assert main(["numactl", "--machine", small, "alloc", "--pages", "2", "--addr", "0x123"]) == 1
    captured = capsys.readouterr()
    assert "= -1 EINVAL (Invalid argument)" in captured.out and "Traceback" not in captured.err


def test_a_measurement_tool_says_which_calibration_timed_it(capsys: pytest.CaptureFixture[str]) -> None:
    """The tool's output stays the real tool's (scripts parse it); what its numbers rest on follows on stderr,
    and in --json; a program that times nothing (memhog) says nothing of the kind."""
    from numasim.timing import resolve_calibration
    from numasim.topology.io import load_machine

    cal = resolve_calibration(load_machine("seed-003-2node"))
    assert main(["numactl", "--machine", "seed-003-2node", "--", "lat_mem_rd", "1", "64"]) == 0
    out, err = capsys.readouterr()
    assert "timed by" not in out and err.strip().endswith(f"numasim: timed by calibration {cal.id} (fit)")
    assert main(["numactl", "--machine", "seed-003-2node", "--json", "--", "lat_mem_rd", "1", "64"]) == 0
    assert json.loads(capsys.readouterr().out)["timed_by"] == f"calibration {cal.id} (fit)"
    assert main(["numactl", "--machine", "seed-003-2node", "--", "memhog", "1m"]) == 0
    assert "timed by" not in capsys.readouterr().err
