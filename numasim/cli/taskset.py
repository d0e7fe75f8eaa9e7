"""``numasim taskset``: util-linux's taskset on a persistent simulated machine (``NUMASIM_MACHINE``).

* ``taskset [-a] -p [-c] PID`` prints ``pid PID's current affinity mask: f`` (``list: 0-3`` with ``-c``);
* ``taskset [-a] -p [-c] MASK|LIST PID`` sets it and prints the current and the new one;
* ``taskset [-c] MASK|LIST CMD [ARGS]`` runs the virtual program CMD (numactl, memhog, printcpu, ...) in a new
  simulated task with that affinity.

PID is a live simulated process of the machine, or else a real process (the calling shell's ``$$``): a real
process's affinity is recorded on the machine (:mod:`numasim.persist.shell_affinity`) and every later command
started from it (its real descendants) starts its simulated task with it, as a real shell's children inherit
it. A real process nobody pinned has every cpu of the simulated machine. A simulated PID wins when a real
process has the same number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    import typer

    from numasim.kernel.kernel import Kernel

__all__ = ["register", "taskset_main", "taskset_entry", "parse_cpulist", "parse_cpumask", "format_cpulist", "format_cpumask"]

USAGE = """\

Usage:
 taskset [options] [mask | cpu-list] [pid|cmd [args...]]


Show or change the CPU affinity of a process.

Options:
 -a, --all-tasks         operate on all the tasks (threads) for a given pid
 -p, --pid               operate on existing given pid
 -c, --cpu-list          display and specify cpus in list format
 -h, --help              display this help
 -V, --version           display version

The default behavior is to run a new command:
    taskset 03 sshd -b 1024
You can retrieve the mask of an existing task:
    taskset -p 700
Or set it:
    taskset -p 03 700
List format uses a comma-separated list instead of a mask:
    taskset -pc 0,3,7-11 700
Ranges in list format can take a stride argument:
    e.g. 0-31:2 is equivalent to mask 0x55555555

For more details see taskset(1).
"""
_VERSION = "taskset from util-linux 2.39.3 (numasim)\n"
_EXEC_ENOENT = 127
"""util-linux's EX_EXEC_ENOENT: the command to run does not exist."""


def register(app: typer.Typer) -> None:
    import typer

    taskset_command.__annotations__ = {"ctx": typer.Context, "return": None}  # resolved here: not a global
    app.command(
        "taskset",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
        help="util-linux taskset on the persistent machine NUMASIM_MACHINE: taskset -p [-c] [MASK|LIST] PID, "
             "taskset [-c] MASK|LIST PROGRAM.",  # fmt: skip
    )(taskset_command)


def taskset_command(ctx: typer.Context) -> None:
    """taskset [-a] [-p] [-c] [MASK|LIST] [PID|CMD [ARGS]]"""
    raise SystemExit(taskset_entry(list(ctx.args)))


def taskset_entry(args: list[str]) -> int:
    """Run taskset with ``args``, print what it prints; its exit status."""
    from numasim.cli.console import echo

    code, out, err = taskset_main(args)
    if out:
        echo(out, nl=False)
    if err:
        echo(err, nl=False, err=True)
    return code


# --- util-linux lib/cpuset.c -----------------------------------------------------------------------------------


def parse_cpulist(text: str) -> frozenset[int] | None:
    """``cpulist_parse``: ``0,3,7-11`` and strides ``0-31:2``; None when it is not a valid list.

    >>> sorted(parse_cpulist("0,3,7-9")), sorted(parse_cpulist("0-6:3")), parse_cpulist("3-1")
    ([0, 3, 7, 8, 9], [0, 3, 6], None)
    """
    cpus: set[int] = set()
    for token in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", token)
        if m is None:
            return None
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        stride = int(m.group(3)) if m.group(3) is not None else 1
        if stride == 0 or a > b:
            return None
        cpus.update(range(a, b + 1, stride))
    return frozenset(cpus)


def parse_cpumask(text: str) -> frozenset[int] | None:
    """``cpumask_parse``: a hex mask, ``0x`` optional, ``,`` between 32-bit groups as sysfs prints them.

    >>> sorted(parse_cpumask("0x5")), sorted(parse_cpumask("1,00000001")), parse_cpumask("xyz")
    ([0, 2], [0, 32], None)
    """
    digits = text[2:] if len(text) > 1 and text.startswith("0x") else text
    digits = digits.replace(",", "")
    if not digits or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return None
    value = int(digits, 16)
    return frozenset(b for b in range(value.bit_length()) if value >> b & 1)


def format_cpumask(cpus: frozenset[int] | set[int]) -> str:
    """``cpumask_create``: lower-case hex without leading zeros (``f`` for cpus 0-3, ``0`` for none)."""
    return f"{sum(1 << c for c in cpus):x}"


def format_cpulist(cpus: frozenset[int] | set[int]) -> str:
    """``cpulist_create``: ranges of three or more as ``a-b``; a pair stays ``a,b`` as util-linux prints it.

    >>> format_cpulist({0, 1, 2, 3, 5, 6, 9})
    '0-3,5,6,9'
    """
    from numasim.topology.cpulist import format_cpulist as kernel_format

    return kernel_format(cpus, shortest_range=3)


# --- taskset ---------------------------------------------------------------------------------------------------


class _Done(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _getopt(argv: Sequence[str]) -> tuple[dict[str, bool], list[str]]:
    """getopt_long(argc, argv, "+apchV"): options up to the first operand (``+``: no permutation)."""
    longs = {"--all-tasks": "a", "--pid": "p", "--cpu-list": "c", "--help": "h", "--version": "V"}
    flags = {"a": False, "p": False, "c": False, "h": False, "V": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return flags, list(argv[i + 1 :])
        if not a.startswith("-") or a == "-":
            break
        if a.startswith("--"):
            matches = [v for k, v in longs.items() if k.startswith(a)]
            if len(matches) != 1:
                raise _Usage(f"taskset: unrecognized option '{a}'\n")
            flags[matches[0]] = True
        else:
            for c in a[1:]:
                if c not in flags:
                    raise _Usage(f"taskset: invalid option -- '{c}'\n")
                flags[c] = True
        i += 1
    return flags, list(argv[i:])


class _Usage(Exception):
    pass


def taskset_main(argv: Sequence[str]) -> tuple[int, str, str]:
    """Run ``taskset argv...`` on the persistent machine; returns ``(exit status, stdout, stderr)``."""
    out: list[str] = []
    err: list[str] = []
    try:
        flags, operands = _getopt(argv)
    except _Usage as exc:
        return 1, "", f"{exc}Try 'taskset --help' for more information.\n"
    if flags["h"]:
        return 0, USAGE, ""
    if flags["V"]:
        return 0, _VERSION, ""
    pid: int | None = None
    if flags["p"]:
        text = argv[-1] if argv else ""
        if not re.fullmatch(r"\s*[+-]?\d+", text) or not -(1 << 31) <= int(text) < 1 << 31:
            return 1, "", f"taskset: invalid PID argument: '{text}'\n"
        pid = int(text) or None
    if (pid is None and len(operands) < 2) or (pid is not None and not 1 <= len(operands) <= 2):
        return 1, "", "taskset: bad usage\nTry 'taskset --help' for more information.\n"
    from numasim.persist.store import ENV_MACHINE, store_for_environment

    selected = store_for_environment()
    if selected is None:
        return 1, "", (f"taskset: numasim: no machine: set {ENV_MACHINE} to a machine started with "
                       "`numasim machine start MACHINE --name NAME`\n")  # fmt: skip
    store, name = selected
    with store.session(name) as kernel:
        try:
            if pid is not None:
                _on_pid(kernel, store.directory(name), pid, operands, flags, out, err)
            else:
                _run_command(kernel, operands, flags["c"], out, err)
        except _Done as done:
            return done.code, "".join(out), "".join(err)
    return 0, "".join(out), "".join(err)


def _parse_set(text: str, use_list: bool, err: list[str]) -> frozenset[int]:
    cpus = parse_cpulist(text) if use_list else parse_cpumask(text)
    if cpus is None:
        err.append(f"taskset: failed to parse {'CPU list' if use_list else 'mask'} {text}\n")
        raise _Done(1)
    return cpus


def _print(out: list[str], pid: int, cpus: frozenset[int], use_list: bool, new: bool) -> None:
    which = "new" if new else "current"
    if use_list:
        out.append(f"pid {pid}'s {which} affinity list: {format_cpulist(cpus)}\n")
    else:
        out.append(f"pid {pid}'s {which} affinity mask: {format_cpumask(cpus)}\n")


def _on_pid(kernel: Kernel, directory: Path, pid: int, operands: list[str], flags: dict[str, bool],
            out: list[str], err: list[str]) -> None:  # fmt: skip
    from numasim.persist import shell_affinity

    use_list = flags["c"]
    wanted = _parse_set(operands[0], use_list, err) if len(operands) == 2 else None
    online = frozenset(kernel.machine.cpus)
    task = kernel.tasks.get(pid)
    if task is not None and task.alive:
        for t in kernel.threads_of(task) if flags["a"] else [task]:
            _print(out, t.pid, frozenset(t.cpus_allowed), use_list, False)
            if wanted is None:
                continue
            if not kernel.sched_setaffinity(t, wanted).ok:
                err.append(f"taskset: failed to set pid {t.pid}'s affinity: Invalid argument\n")
                raise _Done(1)
            _print(out, t.pid, frozenset(t.cpus_allowed), use_list, True)
        return
    if shell_affinity.process_start(pid) is None:
        err.append(f"taskset: failed to get pid {pid}'s affinity: No such process\n")
        raise _Done(1)
    current = shell_affinity.inherited(directory, pid) or online
    _print(out, pid, current, use_list, False)
    if wanted is None:
        return
    if not wanted & online:  # sched_setaffinity: no active cpu in the mask
        err.append(f"taskset: failed to set pid {pid}'s affinity: Invalid argument\n")
        raise _Done(1)
    shell_affinity.record(directory, pid, wanted & online)
    _print(out, pid, wanted & online, use_list, True)


def _run_command(kernel: Kernel, operands: list[str], use_list: bool, out: list[str], err: list[str]) -> None:
    from numasim.tools.programs import load_image, run_program

    wanted = _parse_set(operands[0], use_list, err)
    task = kernel.spawn("taskset")
    load_image(kernel, task)
    if not kernel.sched_setaffinity(task, wanted & frozenset(kernel.machine.cpus)).ok:
        kernel.exit(task)
        err.append(f"taskset: failed to set pid {task.pid}'s affinity: Invalid argument\n")
        raise _Done(1)
    argv = operands[1:]
    oom_seen = len(kernel.oom_kills)
    run = run_program(kernel, task, argv)
    if run is None:
        if task.pid in kernel.tasks:
            kernel.exit(task)
        err.append(f"taskset: failed to execute {argv[0]}: No such file or directory\n")
        raise _Done(_EXEC_ENOENT)
    out.append(run.stdout)
    err.extend(kill.log_line() + "\n" for kill in kernel.oom_kills[oom_seen:])
    err.append(run.stderr)
    if run.exit_code:
        raise _Done(run.exit_code)
