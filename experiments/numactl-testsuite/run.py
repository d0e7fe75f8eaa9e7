"""Run numactl's own test scripts, unmodified, against numasim's shims on a persistent simulated machine.

    python experiments/numactl-testsuite/run.py [--machine M] [--numactl-src DIR] [--scripts a,b] [--keep]

It writes the shims (``numasim shims``) into a temporary build directory, starts a persistent machine in a
private state directory, and runs each script of numactl's ``test/`` (from ``--numactl-src DIR``, else the
numactl repository mirrored at ``$NUMACTL_MIRROR`` or ``/work/.mirror/numactl+numactl/repo``) with
``builddir=SHIMDIR``, ``srcdir=SRC`` and ``PATH=SHIMDIR:$PATH``, as ``make check`` would. Scripts run under
``bash -x`` with the trace written to a file of its own (``BASH_XTRACEFD``), so that the comparisons they make
silently (``[ A -lt B ]``, ``[ X != Y ]``) can be counted as checks; nothing in them is changed. It prints PASS / FAIL / SKIP per check and totals per script.

Every script and every ``make check`` program runs under ``numasim machine exec`` (the machine's /sys and
/proc mounted in a private mount namespace, its ``nproc`` first in ``PATH``), so a script that reads /sys
directly (checktopology, bind_range's ``/sys/bus/cpu/devices``) sees the simulated machine. Without that
command (an older numasim) they run directly and see the host's files; the totals then say so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_MIRROR = "/work/.mirror/numactl+numactl/repo"
DEFAULT_MACHINE = "seed-003-2node"
SCRIPTS = ("make-check", "numademo", "regress", "regress2", "checkaffinity", "bind_range", "checktopology", "regress-io",
           "shmtest")  # fmt: skip
"""``make-check`` runs the programs of numactl's ``TESTS`` (Makefile.am: distance, move_pages, nodemap, tbitmap) as
automake does (exit 0 passes, 77 skips); the others are the scripts of ``test/`` (shmtest last: it is neither in
``make check`` nor in ``make test``)."""
MAKE_CHECK_PROGRAMS = ("distance", "move_pages", "nodemap", "tbitmap")


@dataclass
class Check:
    """One check a script made: its name and whether it passed (None: not run, the script stopped before)."""

    name: str
    passed: bool | None


@dataclass
class ScriptResult:
    """What one script did: its checks, exit status, output and wall time."""

    script: str
    exit_code: int
    seconds: float
    checks: list[Check] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    trace: str = ""
    note: str = ""

    @property
    def counts(self) -> tuple[int, int, int]:
        """(passed, failed, not run)."""
        passed = sum(c.passed is True for c in self.checks)
        failed = sum(c.passed is False for c in self.checks)
        return passed, failed, len(self.checks) - passed - failed


# --- where the scripts come from -----------------------------------------------------------------------------


def numactl_source(src: str | None, work: Path) -> Path:
    """A directory with numactl's ``test/``: ``src`` itself, or ``test/`` exported from the mirror."""
    if src is not None:
        path = Path(src).resolve()
        if not (path / "test" / "regress").is_file():
            raise SystemExit(f"--numactl-src {src}: no test/regress in it (a numactl source tree is expected)")
        return path
    mirror = os.environ.get("NUMACTL_MIRROR", DEFAULT_MIRROR)
    if not Path(mirror).is_dir():
        raise SystemExit(f"no numactl source: {mirror} does not exist; give --numactl-src DIR (a numactl checkout)")
    out = work / "numactl"
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", "HEAD", "test"], check=True,
                             capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


# --- the check parsers, one per script ------------------------------------------------------------------------


def _trace(trace: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\++ (.*)$", trace, re.MULTILINE)]


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) >= 2 and word[0] == word[-1] == "'" else word


def checks_regress(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """Every ``=>testing`` command (failed when ``|| failed`` fired right after it) and every numastat delta
    compared with ``[ A -lt B ]`` (the two-node probe included), in trace order."""
    checks: list[Check] = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("=>testing"):
            checks.append(Check(line[len("=>testing ") :], True))
        elif line == "=======FAILED" and checks and not ("failed" in lines[i - 1] and i > 0):
            checks[-1].passed = False  # the command itself failed: failed() right after its output
    for t in _trace(trace):
        m = re.fullmatch(r"'\[' (-?\d+) -lt (-?\d+) '\]'", t)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            checks.append(Check(f"numastat delta {a} >= {b}", not a < b))
    return checks


def checks_regress2(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """Each ``T CMD`` of the script: failed on ``CMD FAILED!!!!``; those after a failure did not run."""
    wanted = [m.group(1) for m in re.finditer(r'^T "\$\{\w+\}/(test/[\w-]+)"', (src / "test" / "regress2").read_text(),
                                               re.MULTILINE)]  # fmt: skip
    ran = [t.split()[1] for t in _trace(trace) if t.startswith("T ")]
    checks = []
    for k, name in enumerate(wanted):
        if k >= len(ran):
            checks.append(Check(name, None))
        else:
            checks.append(Check(name, f"{ran[k]} FAILED!!!!" not in out))
    return checks


def checks_checkaffinity(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """Every ``[ "$(numactl ... printcpu|--show)" != "$i" ]``: passed when the two sides are equal."""
    checks = []
    for t in _trace(trace):
        m = re.fullmatch(r"'\[' (.*) '!=' (.*) '\]'", t)
        if m:
            a, b = _unquote(m.group(1)), _unquote(m.group(2))
            checks.append(Check(f"{b!r} == {a!r}", a == b))
    return checks


def checks_bind_range(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """``NAME PASSED`` / ``NAME FAILED!`` per eval_test; those after a failure did not run."""
    names = ("check_arg_order", "check_physcpubind", "check_cpunodebind")
    checks = []
    for name in names:
        if f"{name} PASSED" in out:
            checks.append(Check(name, True))
        elif f"{name} FAILED!" in out:
            checks.append(Check(name, False))
        else:
            checks.append(Check(name, None))
    return checks


def checks_checktopology(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """All nodes reported, the cpu count, then each node's cpuN symlinks (silent when they pass)."""
    checks = [Check("numactl --hardware reports all nodes", "doesnt report all nodes" not in out)]
    checks.append(Check("numactl --hardware cpus", None if not checks[0].passed else "cpus look bogus" not in out))
    nodes = [t[len("node=") :] for t in _trace(trace) if re.fullmatch(r"node=node\d+", t)]
    stopped = not all(c.passed for c in checks)
    for node in nodes:
        bad = f"{node} doesn't have cpu" in out or f"{node} missing cpu" in out
        skipped = f"Skipping cpu less {node}" in out
        checks.append(Check(f"{node} cpu symlinks", None if stopped or skipped else not bad))
        stopped = stopped or bad
    return checks


def checks_regress_io(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """Each ``testing X`` / ``testing failure of X``: failed when a ``failed`` line follows before the next."""
    checks: list[Check] = []
    for line in out.splitlines():
        if line.startswith("testing "):
            checks.append(Check(line[len("testing ") :], True))
        elif line == "failed" and checks:
            checks[-1].passed = False
    return checks


_SHM_STEPS = ("initial", "interleave", "interleave verify", "membind setup", "membind verify", "preferred setup",
              "preferred verify")  # fmt: skip
_SHM_BANNERS = ("shm", "hugeshm", "tmpfs")


def checks_shmtest(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """The seven steps of basictest under each banner: a step passed when the script went on after it (it runs
    under ``set -e`` and ends with ``TEST FAILED`` at the first failing command)."""
    lines = [ln.strip() for ln in out.splitlines()]
    marks = [ln for ln in lines if ln in _SHM_STEPS or ln.startswith("++++++++++++") or ln in ("TEST FAILED",
                                                                                                  "test succeeded")]  # fmt: skip
    checks = []
    pos = 0
    failed = False
    for banner in _SHM_BANNERS:
        for step in _SHM_STEPS:
            name = f"{banner}: {step}"
            while pos < len(marks) and marks[pos] != step:
                pos += 1
            if failed or pos >= len(marks):
                checks.append(Check(name, None))
                continue
            nxt = marks[pos + 1] if pos + 1 < len(marks) else ""
            ok = nxt != "TEST FAILED"
            checks.append(Check(name, ok))
            failed = not ok
            pos += 1
    return checks


def checks_numademo(out: str, trace: str, src: Path, code: int) -> list[Check]:
    """``numademo -t -e 10M`` (test/numademo): one check, its exit status (``-e``: 1 at a failing libnuma call)."""
    return [Check("numademo -t -e 10M", code == 0)]


PARSERS: dict[str, Callable[[str, str, Path, int], list[Check]]] = {
    "numademo": checks_numademo,
    "regress": checks_regress,
    "regress2": checks_regress2,
    "checkaffinity": checks_checkaffinity,
    "bind_range": checks_bind_range,
    "checktopology": checks_checktopology,
    "regress-io": checks_regress_io,
    "shmtest": checks_shmtest,
}


# --- running ---------------------------------------------------------------------------------------------------


def _numasim(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    call = "import sys; from numasim.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", call, *args], env=env, capture_output=True, text=True, cwd=REPO)


def _has_machine_exec(env: dict[str, str]) -> bool:
    return _numasim("machine", "exec", "--help", env=env).returncode == 0


def run_suite(
    machine: str = DEFAULT_MACHINE,
    numactl_src: str | None = None,
    scripts: tuple[str, ...] = SCRIPTS,
    *,
    work: Path | None = None,
    timeout_s: float = 900.0,
    log: Callable[[str], None] | None = None,
) -> list[ScriptResult]:
    """Start ``machine``, write the shims, run ``scripts``; returns one :class:`ScriptResult` each."""
    work = Path(work or tempfile.mkdtemp(prefix="numactl-testsuite-"))
    src = numactl_source(numactl_src, work)
    state, build = work / "state", work / "build"
    env = {**os.environ, "NUMASIM_STATE_DIR": str(state), "PYTHONPATH": str(REPO)}
    env.pop("NUMASIM_MACHINE", None)
    # The scripts count the machine's cpus with nproc, which honours OpenMP's limits as coreutils' does: a caller's
    # OMP_NUM_THREADS (a test runner may set it to 1) is not the box's, and a real `make test` would fail the same way
    for name in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT"):
        env.pop(name, None)
    name = "numactl-tests"
    started = _numasim("machine", "start", machine, "--name", name, env=env)
    if started.returncode:
        raise SystemExit(f"numasim machine start {machine}: {started.stderr.strip()}")
    shims = _numasim("shims", str(build), "--machine", name, env=env)
    if shims.returncode:
        raise SystemExit(f"numasim shims: {shims.stderr.strip()}")
    exec_prefix = _machine_exec_prefix(name, env)
    results = []
    for script in scripts:
        if script not in (*PARSERS, "make-check"):
            raise SystemExit(f"--scripts: unknown script {script!r} (known: {', '.join(SCRIPTS)})")
        _numasim("machine", "reset", name, env=env)  # each script on a freshly booted machine, as on an idle box
        if script == "make-check":
            results.append(_run_make_check(build, env, exec_prefix, timeout_s))
        else:
            results.append(_run_script(script, src, build, env, exec_prefix, timeout_s))
        if log is not None:
            log(format_result(results[-1]))
    _numasim("machine", "stop", name, env=env)
    return results


def _machine_exec_prefix(name: str, env: dict[str, str]) -> list[str]:
    """The command line that runs a command under ``numasim machine exec NAME``, or [] when this numasim has no
    such command or it cannot make its namespace here (no root and no user namespaces: said on stderr)."""
    if not _has_machine_exec(env):
        return []
    probe = _numasim("machine", "exec", name, "--", "true", env=env)
    if probe.returncode:  # e.g. 125: neither CAP_SYS_ADMIN nor unprivileged user namespaces
        print(f"numasim machine exec {name} -- true: exit {probe.returncode}: {probe.stderr.strip()}; the scripts "
              "run without it", file=sys.stderr)  # fmt: skip
        return []
    call = "import sys; from numasim.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", call, "machine", "exec", name, "--"]


def _run_script(script: str, src: Path, build: Path, env: dict[str, str], prefix: list[str],
                timeout_s: float) -> ScriptResult:  # fmt: skip
    path = src / "test" / script
    # shmtest runs from the build's test directory (../numactl, ./ftok); the others from a scratch directory
    cwd = build / "test" if script == "shmtest" else Path(tempfile.mkdtemp(prefix=f"{script}-", dir=build.parent))
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as trace:
        # bash -x writes its trace to a file of its own (BASH_XTRACEFD), not into the script's stderr
        run_env = {**env, "builddir": str(build), "srcdir": str(src), "PATH": f"{build}:{env.get('PATH', '')}",
                   "BASH_XTRACEFD": str(trace.fileno())}  # fmt: skip
        try:
            proc = subprocess.run([*prefix, "bash", "-x", str(path)], cwd=cwd, env=run_env, capture_output=True,
                                  text=True, timeout=timeout_s, pass_fds=(trace.fileno(),))  # fmt: skip
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code = -1
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = (exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")) + "\n(timed out)\n"
        trace.seek(0)
        traced = trace.read()
    seconds = time.monotonic() - start
    result = ScriptResult(script, code, seconds, PARSERS[script](out, traced, src, code), out, err, trace=traced)
    if not prefix and script in ("checktopology", "bind_range", "regress2"):
        result.note = "reads the host's /sys (numasim machine exec is not available or cannot run here)"
    if code == 77:
        result.note = "skipped by the script (exit 77)"
    return result


def _run_make_check(build: Path, env: dict[str, str], prefix: list[str], timeout_s: float) -> ScriptResult:
    """The programs of ``TESTS`` run by automake's harness (under ``machine exec`` too, as the scripts): exit
    status 0 passes, 77 is a skip."""
    result = ScriptResult("make-check", 0, 0.0)
    start = time.monotonic()
    for name in MAKE_CHECK_PROGRAMS:
        proc = subprocess.run([*prefix, str(build / "test" / name)], cwd=build, env={**env, "builddir": str(build)},
                              capture_output=True, text=True, timeout=timeout_s)  # fmt: skip
        result.checks.append(Check(f"test/{name}", None if proc.returncode == 77 else proc.returncode == 0))
        result.stdout += f"$ test/{name}\n{proc.stdout}"
        result.stderr += proc.stderr
        result.exit_code = result.exit_code or (proc.returncode if proc.returncode != 77 else 0)
    result.seconds = time.monotonic() - start
    return result


def format_result(r: ScriptResult) -> str:
    """PASS / FAIL / SKIP per check, then the script's totals."""
    lines = []
    for c in r.checks:
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[c.passed]
        lines.append(f"{mark}  {r.script}: {c.name}")
    passed, failed, skipped = r.counts
    note = f"; {r.note}" if r.note else ""
    lines.append(f"== {r.script}: {passed} of {len(r.checks)} checks passed, {failed} failed, {skipped} not run; "
                 f"exit status {r.exit_code}; {r.seconds:.1f} s{note}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine", default=DEFAULT_MACHINE, help=f"shipped machine or machine file ({DEFAULT_MACHINE})")
    parser.add_argument("--numactl-src", help="a numactl source tree (default: the mirror's HEAD)")
    parser.add_argument("--scripts", default=",".join(SCRIPTS), help="comma-separated subset of " + ", ".join(SCRIPTS))
    parser.add_argument("--keep", action="store_true", help="keep the work directory (shims, outputs)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per script (900)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="numactl-testsuite-"))
    try:
        results = run_suite(args.machine, args.numactl_src, tuple(s for s in args.scripts.split(",") if s),
                            work=work, timeout_s=args.timeout, log=print)  # fmt: skip
        for r in results:
            (work / f"{r.script}.out").write_text(r.stdout + "\n--- stderr ---\n" + r.stderr + "\n--- trace ---\n" + r.trace)
        print("\nTotals:")
        for r in results:
            passed, failed, skipped = r.counts
            print(f"  {r.script:<14} {passed:>3} / {len(r.checks):<3} passed  ({failed} failed, {skipped} not run, "
                  f"exit {r.exit_code}, {r.seconds:.0f} s){'  ' + r.note if r.note else ''}")  # fmt: skip
    finally:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.counts[1] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
