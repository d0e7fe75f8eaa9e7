"""Helpers for tests of persistent machines (NUMASIM_MACHINE and NUMASIM_STATE_DIR set)."""

from __future__ import annotations

import os

from numasim.persist import MachineStore


def stress_worker(stress_output: str) -> int:
    """The PID of the one vm worker of the ``stress -m 1`` whose output this is (its first line names stress's
    own PID, which is the calling process's: a worker's is the kernel's next free one)."""
    stress = int(stress_output.split("[")[1].split("]")[0])
    store = MachineStore(os.environ["NUMASIM_STATE_DIR"])
    with store.session(os.environ["NUMASIM_MACHINE"], save=False) as kernel:
        (worker,) = [pid for pid, t in kernel.tasks.items() if t.comm == "stress" and pid != stress]
    return worker


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """``numasim ARGV...`` in this process: exit status, stdout, stderr."""
    from numasim.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err
