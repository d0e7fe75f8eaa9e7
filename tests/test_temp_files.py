"""No temporary file survives a killed command (issue 13).

A ``trace generate`` killed by SIGTERM used to leave its hidden ~8 MB temporary beside the target, and one
killed by SIGKILL still must (nothing runs on SIGKILL), so the next write into that directory removes it.
The child processes below pause half way through writing (a hook after the first chunk), so the kill always
lands mid-write; nothing here depends on timing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.fileio import (
    STALE_AFTER_S,
    TEMP_MARKER,
    atomic_path,
    atomic_write_texts,
    remove_stale_temporaries,
)

ROOT = Path(__file__).resolve().parents[1]

# Generates a two-chunk trace and stops after writing the first chunk, saying so on stdout.
CHILD = """
import sys, time
import numasim.workload.trace.npz as npz
write = npz.NpzTraceWriter.write
def paused(self, chunk):
    write(self, chunk)
    if self.chunks == 1:
        print("half written", flush=True)
        time.sleep(120)
npz.NpzTraceWriter.write = paused
from numasim.cli import main
sys.exit(main(["trace", "generate", "--pattern", "random", "--size", "64M", "--accesses", "1500000", "-o", sys.argv[1]]))
"""


def _start_half_written(target: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(target)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()  # blocks until the first chunk is on disk
    assert line.strip() == "half written", line
    return child


def _temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if TEMP_MARKER in p.name)


def test_sigterm_mid_write_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.npz"
    child = _start_half_written(target)
    try:
        temps = _temporaries(tmp_path)
        assert len(temps) == 1 and temps[0].startswith(".t.npz" + TEMP_MARKER + f"{child.pid}-")
        assert (tmp_path / temps[0]).stat().st_size > 1_000_000  # a real chunk, not an empty file
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=120)
    finally:
        child.kill()
    assert code == -signal.SIGTERM  # it still ends as SIGTERM says
    assert list(tmp_path.iterdir()) == []  # neither a temporary nor a half-written target


def test_sigkill_mid_write_is_swept_by_the_next_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    child = _start_half_written(tmp_path / "t.npz")
    try:
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=120) == -signal.SIGKILL
    finally:
        child.kill()
    assert len(_temporaries(tmp_path)) == 1  # SIGKILL cannot be caught: the temporary is still there
    assert main(["trace", "generate", "--pattern", "random", "--accesses", "100", "-o", str(tmp_path / "u.npz")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.npz"]


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_stale_temporaries_of_ours_are_removed_and_nothing_else(tmp_path: Path) -> None:
    dead = tmp_path / f".a.json{TEMP_MARKER}{_dead_pid()}-0123abcd"
    old = tmp_path / f".b.json{TEMP_MARKER}{os.getppid()}-89abcdef"  # a live process, but days old
    live = tmp_path / f".c.json{TEMP_MARKER}{os.getppid()}-00000000"  # a live process writing now
    mine = tmp_path / f".d.json{TEMP_MARKER}{os.getpid()}-11111111"  # this process's: maybe mid-write
    dead_dir = tmp_path / f".tree{TEMP_MARKER}{_dead_pid()}-22222222"
    foreign = [tmp_path / ".a.json.tmp", tmp_path / f"a{TEMP_MARKER}1-0123abcd", tmp_path / "kept.txt"]
    for p in [dead, old, live, mine, *foreign]:
        p.write_text("x")
    dead_dir.mkdir()
    (dead_dir / "cpulist").write_text("0\n")
    days_ago = time.time() - STALE_AFTER_S - 86400
    os.utime(old, (days_ago, days_ago))
    os.utime(mine, (days_ago, days_ago))  # this process's own are never stale, however old

    atomic_write_texts({tmp_path / "new.txt": "fresh\n"})  # any write into the directory sweeps it

    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([live.name, mine.name, "new.txt", *(p.name for p in foreign)])
    assert remove_stale_temporaries(tmp_path) == []  # nothing stale left


def test_interrupt_removes_the_temporary_and_restores_the_sigterm_handler(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "out.bin") as tmp:
            tmp.write_bytes(b"x" * 1000)
            assert signal.getsignal(signal.SIGTERM) is not before  # the write's own handler meanwhile
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_in_process_runs_an_outer_handler_after_cleanup(tmp_path: Path) -> None:
    # A program embedding numasim with its own SIGTERM handler: the temporary goes first, then its handler runs.
    seen: list[list[str]] = []

    class Stop(Exception):
        pass

    def outer(signum: int, frame: object) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise Stop

    previous = signal.signal(signal.SIGTERM, outer)
    try:
        with pytest.raises(Stop):
            with atomic_path(tmp_path / "out.bin") as tmp:
                tmp.write_bytes(b"x")
                signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [[]] and list(tmp_path.iterdir()) == []
