"""experiments/numactl-testsuite: numactl's own test scripts, unmodified, against numasim's shims (a fast subset:
bind_range on a 4-node machine; the check parsers on outputs of the scripts)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

MIRROR = Path(os.environ.get("NUMACTL_MIRROR", "/work/.mirror/numactl+numactl/repo"))
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def suite() -> ModuleType:
    # registered in sys.modules before it runs: its dataclasses look their module up there
    spec = importlib.util.spec_from_file_location("numactl_testsuite_run", REPO / "experiments" / "numactl-testsuite" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _namespaces_permitted() -> bool:
    probe = "from numasim.persist.namespace import _enter_namespace; _enter_namespace()"
    return subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, check=False).returncode == 0


NAMESPACES = sys.platform == "linux" and _namespaces_permitted()
"""``numasim machine exec`` can run here (root, or unprivileged user namespaces): the runner uses it."""


def test_bind_range_passes_on_a_persistent_machine(suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not MIRROR.is_dir():
        pytest.skip(f"numactl's sources are not mirrored at {MIRROR} (set NUMACTL_MIRROR)")
    host_cpus = [p for p in Path("/sys/bus/cpu/devices").glob("cpu*")]
    if len(host_cpus) > 8 and not NAMESPACES:  # without `machine exec`, the highest cpu is the host's
        pytest.skip(f"bind_range reads the host's /sys/bus/cpu/devices ({len(host_cpus)} cpus > the machine's 8)")
    (result,) = suite.run_suite("seed-002-opteron-4s", scripts=("bind_range",), work=tmp_path)
    assert [(c.name, c.passed) for c in result.checks] == [
        ("check_arg_order", True), ("check_physcpubind", True), ("check_cpunodebind", True)
    ], result.stdout + result.stderr  # fmt: skip
    assert result.exit_code == 0
    assert "3 of 3 checks passed" in suite.format_result(result)


def test_check_parsers(suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = "=>testing numactl --interleave=1 memhog -H 15728640\n..\n=>testing numactl --interleave=0,1 memhog\n" \
          "..\ninterleaving test failed 1 5 3\n=======FAILED\nCheck if machine\n=>testing numactl --membind=9 memhog\n" \
          "=======FAILED\nCheck if machine\n"  # fmt: skip
    trace = "+ '[' 2 -lt 2 ']'\n+ '[' 2 -lt 1820 ']'\n+ '[' 3840 -lt 1820 ']'\n"
    checks = suite.checks_regress(out, trace, tmp_path, 0)
    assert [c.passed for c in checks] == [True, True, False, True, False, True]
    trace = "+ '[' 3 '!=' 3 ']'\n++ numactl --show\n+ '[' '' '!=' 4 ']'\n"
    assert [c.passed for c in suite.checks_checkaffinity("", trace, tmp_path, 1)] == [True, False]
    out = "testing node-parse file:.\nFailed to convert `file:.'\nfailed\ntesting failure of node-parse ip:127.0.0.1\n"
    assert [c.passed for c in suite.checks_regress_io(out, "", tmp_path, 1)] == [False, True]
    out = "\n++++++++++++ shm +++++++++++++++\n\ninitial\ninterleave\n--- before\nTEST FAILED\n"
    checks = suite.checks_shmtest(out, "", tmp_path, 1)
    assert [c.passed for c in checks[:3]] == [True, False, None] and len(checks) == 21


@pytest.mark.skipif(not NAMESPACES, reason="no private mount namespace here (not root, no user namespaces)")
def test_checktopology_and_make_check_see_the_simulated_sys(suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # checktopology compares `ls /sys/devices/system/node`, nproc and nodeN/cpuK with numactl --hardware: it
    # passes only when machine exec shows the machine's 4 nodes and 8 cpus, not the host's
    if not MIRROR.is_dir():
        pytest.skip(f"numactl's sources are not mirrored at {MIRROR} (set NUMACTL_MIRROR)")
    make_check, topology = suite.run_suite("seed-002-opteron-4s", scripts=("make-check", "checktopology"),
                                           work=tmp_path)  # fmt: skip
    assert [c.passed for c in make_check.checks] == [True] * 4, make_check.stdout + make_check.stderr
    # has_cpu is "0-3" (the kernel's %*pbl), and the script's `[[ "0-3" == *"$check_node"* ]]` skips the nodes
    # whose number is not a substring of it, as it does on a real 4-node box: nodes 1 and 2 are not checked
    assert [(c.name, c.passed) for c in topology.checks] == [
        ("numactl --hardware reports all nodes", True), ("numactl --hardware cpus", True),
        ("node0 cpu symlinks", True), ("node1 cpu symlinks", None), ("node2 cpu symlinks", None),
        ("node3 cpu symlinks", True),
    ], topology.stdout + topology.stderr + topology.trace  # fmt: skip
    assert "Skipping cpu less node1\nSkipping cpu less node2\n" == topology.stdout
    assert topology.exit_code == 0 and topology.note == ""
    assert "+ numcpus=8" in topology.trace  # the simulated nproc, first in PATH


def test_without_a_working_machine_exec_the_scripts_run_directly(suite, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import subprocess as sp

    def fake(*args: str, env: dict[str, str]) -> sp.CompletedProcess[str]:
        failed = args[:2] == ("machine", "exec") and "--help" not in args
        return sp.CompletedProcess(list(args), 125 if failed else 0, "", "machine exec: not permitted\n" if failed else "")

    monkeypatch.setattr(suite, "_numasim", fake)
    assert suite._machine_exec_prefix("m", {}) == []
    monkeypatch.setattr(suite, "_numasim", lambda *a, env: sp.CompletedProcess(list(a), 0, "", ""))
    assert suite._machine_exec_prefix("m", {})[-4:] == ["machine", "exec", "m", "--"]
