"""``numasim kernel ...``, ``numasim numactl`` and ``numasim numastat``: the simulated kernel from a shell.

* ``numasim kernel zonelists MACHINE`` -- the kernel's boot log lines ``Fallback order for Node N: ...``;
* ``numasim kernel zoneinfo|buddyinfo MACHINE [--after "numactl ARGS -- PROG ARGS"]...`` -- /proc views, after
  running the given commands;
* ``numasim numactl --machine MACHINE [--kernel-version V] [--calibration F | --nominal | --catalog] [--json] [NUMACTL OPTIONS]
  -- PROGRAM [ARGS]`` --
  runs numactl and its program, then prints what ``numastat -p`` shows for the program's processes
  (``--json``: pages per node, the node of every page as runs ``[[node, count], ...]`` for the process and per
  mapping, numastat deltas and every policy syscall with its return value and errno name);
* ``numasim numastat --machine MACHINE [--after ...] [NUMASTAT ARGS]``.

numactl's own option syntax (``-i 0,1``, ``--interleave=0,1``, ``-m``) clashes with typer's, so ``numasim
numactl`` and ``numasim numastat`` take their arguments raw: numasim's options (``--machine``,
``--kernel-version``, ``--json``, ``--after``) come first, everything from the first other
argument on belongs to numactl / numastat. (Typer drops a ``--`` separator; numactl stops at the program name
anyway.) Their ``--help`` is :func:`help_text`. A failing ``--after`` command (non-zero exit status) is reported
with its stderr and ends the command with its status; an OOM kill prints the kernel's log line
(:meth:`~numasim.kernel.kernel.OomKill.log_line`) before the shell's ``Killed``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numasim.cli.console import echo, exit_status

if TYPE_CHECKING:
    import typer

    from numasim.kernel.kernel import Kernel
    from numasim.persist.store import MachineStore
    from numasim.timing.model import Calibration
    from numasim.tools.numactl import NumactlRun

__all__ = ["register", "numactl_main", "numastat_main", "build_kernel", "apply_after", "help_text", "THP_MODES"]

_MAX_RUNS = 100_000
"""At most this many ``[node, count]`` runs in ``--json`` (an interleaved 64 GiB would give 16.7 million)."""


def register(app: typer.Typer) -> None:
    from numasim.cli import kernel_views

    kernel_views.register(app)
    raw = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
    app.command(
        "numactl",
        context_settings=raw,
        add_help_option=False,
        help="Run numactl on a simulated machine: numasim numactl --machine M [--json] [numactl options] -- PROGRAM",
    )(_typer_command(numactl_main))
    app.command(
        "numastat",
        context_settings=raw,
        add_help_option=False,
        help="Run numastat on a simulated machine: numasim numastat --machine M [--after CMD]... [numastat options]",
    )(_typer_command(numastat_main))


def _typer_command(entry: Callable[[list[str]], int]) -> Callable[[typer.Context], None]:
    # typer has dropped the first "--" of the command line, as the fast path (numasim.cli.main) does too
    import typer

    def command(ctx: typer.Context) -> None:
        raise SystemExit(entry(list(ctx.args)))

    command.__annotations__ = {"ctx": typer.Context, "return": None}  # resolved here: typer is not a global
    command.__name__ = entry.__name__.replace("_main", "_command")
    command.__doc__ = entry.__doc__
    return command


THP_MODES = ("always", "madvise", "never")
"""``/sys/kernel/mm/transparent_hugepage/enabled`` at boot (``transparent_hugepage=`` on the command line)."""


def build_kernel(
    machine: str,
    kernel_version: str = "6.12",
    thp: str = "madvise",
    sysctls: list[str] | None = None,
    page_cache: list[str] | None = None,
    kswapd: bool = False,
    buddyinfo: str | None = None,
) -> Kernel:
    """A fresh :class:`~numasim.kernel.kernel.Kernel` on a shipped machine name or a machine file.

    ``thp``: ``always`` or ``madvise`` start khugepaged, whose ``set_recommended_min_free_kbytes`` raises
    ``min_free_kbytes`` (``khugepaged_enabled()`` is true for both); ``never`` keeps the value
    ``calculate_min_free_kbytes`` gives. It is the knob ``/sys/kernel/mm/transparent_hugepage/enabled``.
    ``sysctls``: ``NAME=VALUE`` writes (``--sysctl``), applied in order after ``thp``, before boot.
    ``page_cache``: ``NODE=SIZE`` (``--page-cache``), clean page cache on that node at boot, part of its memory
    in use; ``kswapd`` (``--kswapd``): run kswapd's background reclaim (:mod:`numasim.kernel.kswapd`);
    ``buddyinfo`` (``--buddyinfo FILE``): a measured /proc/buddyinfo, how fragmented each zone's free memory is
    (:mod:`numasim.kernel.buddy`).
    """
    from numasim.kernel.config import KernelConfig
    from numasim.kernel.kernel import Kernel
    from numasim.topology.io import load_machine

    check_kernel_version(kernel_version)
    if thp not in THP_MODES:
        _fail(f"--thp {thp!r}: expected one of {', '.join(THP_MODES)}")
    from numasim.kernel.config import parse_page_cache_arg
    from numasim.kernel.sysctl import parse_sysctl_arg

    m = load_machine(machine)
    try:
        from numasim.kernel.buddy import load_buddyinfo

        cache = dict(parse_page_cache_arg(text) for text in page_cache or [])
        config = KernelConfig(
            version=kernel_version, thp_mode=thp, kswapd_enabled=kswapd, reclaimable_page_cache_bytes=cache or None,
            buddyinfo=load_buddyinfo(buddyinfo) if buddyinfo is not None else None,
        )
        config = config.with_sysctls([parse_sysctl_arg(text) for text in sysctls or []])
        return Kernel(m, config)
    except ValueError as exc:  # SysctlError is one; so is a page cache the node cannot hold
        _fail(str(exc))
        raise


def check_kernel_version(kernel_version: str) -> None:
    """Exit with a clear ``--kernel-version`` error unless numasim models that kernel
    (:func:`numasim.kernel.version.check_modelled`: 6.1 .. 6.12)."""
    from numasim.errors import KernelConfigError
    from numasim.kernel.version import check_modelled

    try:
        check_modelled(kernel_version)
    except KernelConfigError as exc:
        _fail(f"--kernel-version: {exc}")


def apply_after(kernel: Kernel, commands: list[str]) -> list[str]:
    """Run each ``"numactl ARGS -- PROG"`` (or ``"PROG ARGS"``) command on ``kernel``; returns their output."""
    return [run.stdout + run.stderr for _, run in _after_runs(kernel, commands)]


def _after_runs(
    kernel: Kernel, commands: list[str], keep_alive: bool = True, calibration: Calibration | None = None
) -> list[tuple[str, NumactlRun]]:
    """Run ``--after`` commands; ``keep_alive``: a finished program keeps its memory (a fresh kernel's view, for
    the command after it); on a persistent machine it exits, as it would on a real one."""
    from numasim.tools.numactl import run_numactl

    runs = []
    for text in commands:
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            _fail(f"--after {text!r}: {exc}")
        if argv and argv[0] == "numactl":
            argv = argv[1:]
        if argv and argv[0] == "--":
            argv = argv[1:]
        if "--" in argv:
            cut = argv.index("--")
            argv = argv[:cut] + argv[cut + 1 :]
        runs.append((text, run_numactl(kernel, argv, keep_alive=keep_alive, calibration=calibration)))
    return runs


def _apply_after_checked(
    kernel: Kernel, commands: list[str], keep_alive: bool = True, calibration: Calibration | None = None
) -> None:
    """Run the ``--after`` commands; the first that fails is reported (its stderr and exit status) and ends
    the numasim command with that status: a view of a kernel the commands did not set up would mislead."""
    oom_seen = len(kernel.oom_kills)
    for text, run in _after_runs(kernel, commands, keep_alive, calibration):
        if run.exit_code != 0:
            for kill in kernel.oom_kills[oom_seen:]:
                echo(kill.log_line(), err=True)
            if run.stderr:
                echo(run.stderr, nl=False, err=True)
            echo(f"numasim: error: --after {text!r} failed with exit status {run.exit_code}", err=True)
            raise SystemExit(run.exit_code)
        oom_seen = len(kernel.oom_kills)


def _fail(message: str, code: int = 2) -> None:
    echo(f"numasim: error: {message}", err=True)
    raise SystemExit(code)


def _split_own(
    args: list[str], own_values: set[str], own_flags: set[str], command: str = "numactl"
) -> tuple[dict[str, Any], list[str]]:
    if args[:1] in (["--help"], ["-h"]):
        echo(help_text(command), nl=False)
        raise SystemExit(0)
    opts: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in own_flags and not eq:
            opts[name] = True
            i += 1
            continue
        if name in own_values:
            if not eq:
                if i + 1 >= len(args):
                    _fail(f"{name} needs a value")
                value = args[i + 1]
                i += 1
            opts.setdefault(name, []).append(value)
            i += 1
            continue
        if arg == "--":
            i += 1
        break
    return opts, args[i:]


_OWN_VALUES = {"--machine", "--kernel-version", "--after", "--calibration", "--thp", "--sysctl", "--page-cache",
               "--buddyinfo"}
_OWN_FLAGS = {"--nominal", "--catalog", "--kswapd"}


_BOOT_OPTIONS = ("--kernel-version", "--thp", "--sysctl", "--page-cache", "--kswapd", "--buddyinfo")


@dataclass
class _Session:
    """What one numactl / numastat command acts on: the kernel, the calibration its options chose for the timed
    programs (None: each uses the one the machine names), and the persistent machine it is (``store`` and
    ``name``; None for a fresh kernel)."""

    kernel: Kernel
    calibration: Calibration | None
    store: MachineStore | None = None
    name: str = ""
    runs_on: _RunsOn | None = None
    """Set when the command's program runs on after the state is saved (:func:`_exit_or_run_on`)."""

    @property
    def persistent(self) -> bool:
        return self.store is not None


@contextmanager
def _kernel_session(opts: dict[str, Any], *, read_only: bool = False) -> Iterator[_Session]:
    """The kernel a numactl / numastat command acts on: a fresh one booted from ``--machine``, or (without
    ``--machine``) the machine ``NUMASIM_MACHINE`` names, locked for the command and saved when it ends
    (:mod:`numasim.persist`)."""
    from numasim.persist.store import ENV_MACHINE, store_for_environment

    selected = None if opts.get("--machine") else store_for_environment()
    if selected is None:
        kernel = _kernel_from(opts)
        yield _Session(kernel, _chosen_calibration(kernel, opts, opts["--machine"][-1]))
        return
    store, name = selected
    given = [o for o in _BOOT_OPTIONS if opts.get(o)]
    if given:
        _fail(f"{given[0]}: machine {name} ({ENV_MACHINE}) is already booted; boot options go to "
              f"`numasim machine start` (or unset {ENV_MACHINE} and give --machine)")  # fmt: skip
    # numactl may change the machine; numastat only through --after
    with store.session(name, save=bool(opts.get("--after")) or not read_only) as kernel:
        # the calibration of the machine file it was started from
        yield _Session(kernel, _chosen_calibration(kernel, opts, store.options(name).machine), store, name)


def _kernel_from(opts: dict[str, Any]) -> Kernel:
    machines: list[str] = opts.get("--machine") or []
    if not machines:
        _fail("--machine MACHINE is required (a shipped machine name or a machine file), or set NUMASIM_MACHINE "
              "to a machine started with `numasim machine start`")  # fmt: skip
    kernel = build_kernel(
        machines[-1], (opts.get("--kernel-version") or ["6.12"])[-1], (opts.get("--thp") or ["madvise"])[-1],
        opts.get("--sysctl") or [], opts.get("--page-cache") or [], bool(opts.get("--kswapd")),
        (opts.get("--buddyinfo") or [None])[-1],
    )
    return kernel


def _chosen_calibration(kernel: Kernel, opts: dict[str, Any], machine: str) -> Calibration | None:
    """The calibration --calibration / --nominal / --catalog chose for the timed programs (carried on the
    numactl process they run in), or None: then each uses the one the machine names."""
    calibrations: list[str] = opts.get("--calibration") or []
    if calibrations or opts.get("--nominal") or opts.get("--catalog"):
        # Timed virtual tools (lat_mem_rd, dd, mlc, stream, ib_send_*) use this calibration; without either
        # option they use the one the machine names, and fail clearly if it names none.
        from numasim.timing.resolve import resolve_calibration
        from numasim.topology.io import machine_source

        path = machine_source(machine)
        cal = resolve_calibration(
            kernel.machine, calibrations[-1] if calibrations else None,
            nominal=bool(opts.get("--nominal")), catalog=bool(opts.get("--catalog")), machine_path=path,
        )
        return cal
    return None


def numactl_main(args: list[str]) -> int:
    """numasim numactl --machine M [--kernel-version V] [--json] [numactl options] -- PROG"""
    return _status_of(_numactl_command, args)


def _status_of(command: Callable[[list[str]], None], args: list[str]) -> int:
    """Run a command that ends by raising SystemExit; its exit status (0 if it returns)."""
    try:
        command(args)
    except SystemExit as done:
        return exit_status(done)
    return 0


def _numactl_command(args: list[str]) -> None:
    opts, argv = _split_own(args, _OWN_VALUES, _OWN_FLAGS | {"--json"})
    code = 0
    session: _Session | None = None
    try:
        with _kernel_session(opts) as session:
            try:
                _numactl_on(session, opts, argv, _shell_cpus(session.kernel) if session.persistent else None)
            except SystemExit as done:  # the machine keeps what the command did, whatever its exit status
                code = exit_status(done)
    except BaseException:
        if session is not None and session.runs_on is not None:  # not saved: the program never ran on
            session.runs_on.signals.restore()
        raise
    if session.runs_on is not None:  # the program runs on, holding its memory, with the machine unlocked
        code = _run_out(session, code)
    raise SystemExit(code)


_LIVE_MIN_S = 0.02
"""A program that runs shorter than this exits with its command: nothing could look at it in between."""


class _Signalled(Exception):
    pass


@dataclass(frozen=True)
class _RunsOn:
    """A program that runs on after its command saved the machine: for how long, and the signals that end it."""

    seconds: float
    signals: _EndingSignals


_ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that end a running program's shim early (``kill $!``, Ctrl-C, a closed terminal)."""


class _EndingSignals:
    """Catches :data:`_ENDING` from before a running program is registered until its shim has cleaned up.

    A Python handler, not a blocked mask: the shim has other threads (numpy's), and a signal the main thread
    blocks is delivered to one of them and kills the process with the default action. The handler runs in the
    main thread whichever thread took the signal: it records the signal, and ends the sleep if one is under way.
    """

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.sleeping = False
        self.previous = {sig: signal.signal(sig, self._on_signal) for sig in _ENDING}

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.caught.append(signum)
        if self.sleeping:
            raise _Signalled

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` unless an ending signal came or comes first."""
        import time

        self.sleeping = True  # before looking at caught: a signal in between then ends the sleep itself
        try:
            if not self.caught:
                time.sleep(seconds)
        except _Signalled:
            pass
        finally:
            self.sleeping = False

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _run_out(session: _Session, code: int) -> int:
    """Live out the program's run time as this (the shim's) process, then exit its simulated processes; a
    SIGTERM, SIGINT or SIGHUP ends it early, as it ends the real program (exit status 128 + N)."""
    from numasim.errors import MachineStateError
    from numasim.persist import live

    assert session.store is not None and session.runs_on is not None
    signals = session.runs_on.signals
    try:
        signals.sleep(session.runs_on.seconds)
        try:
            with session.store.session(session.name) as kernel:
                live.end(session.store.directory(session.name), kernel, os.getpid())
        except MachineStateError:
            pass  # the machine was stopped meanwhile: nothing is left to exit
    finally:
        signals.restore()
    return 128 + signals.caught[0] if signals.caught else code


def _exit_or_run_on(session: _Session, run: NumactlRun) -> None:
    """A persistent machine's program: one still running for ever (stress without ``-t``) stays; one that runs
    for a while (memhog's faults, ``sleep N``, ``stress -t N``) keeps its memory while this process lives it out
    (:func:`_run_out`, :mod:`numasim.persist.live`); the rest exit now, with numactl."""
    from numasim.persist import live

    kernel = session.kernel
    holders = [p for p in dict.fromkeys([run.task_pid, *run.program_pids]) if p in kernel.tasks]
    if run.program_running and run.exit_code == 0:
        return
    if run.program_duration_s >= _LIVE_MIN_S and run.exit_code == 0 and holders and session.store is not None:
        # From here a signal must not kill this process before it can clean up: caught until _run_out is done
        session.runs_on = _RunsOn(run.program_duration_s, _EndingSignals())
        live.register(session.store.directory(session.name), os.getpid(), holders)
        return
    for pid in holders:
        kernel.exit(kernel.tasks[pid])


def _shell_cpus(kernel: Kernel) -> frozenset[int] | None:
    """The affinity the calling shell set itself on the persistent machine (``taskset -p -c LIST $$``), which
    this command's process inherits (:mod:`numasim.persist.shell_affinity`); None when none was set, or none of
    its cpus is the machine's (a machine restarted under the same name from another topology)."""
    from numasim.persist import shell_affinity
    from numasim.persist.store import store_for_environment

    selected = store_for_environment()
    cpus = shell_affinity.inherited(selected[0].directory(selected[1])) if selected is not None else None
    return (cpus & frozenset(kernel.machine.cpus)) or None if cpus is not None else None


def _numactl_on(session: _Session, opts: dict[str, Any], argv: list[str], cpus: frozenset[int] | None = None) -> None:
    """numactl on ``kernel``; raises SystemExit with its status. On a persistent machine the output is exactly
    numactl's and a program that finished exits (a still-running one, stress without -t, stays). ``cpus``: the
    affinity the numactl process starts with (its shell's; default all cpus)."""
    from numasim.kernel.config import reclaim_inputs
    from numasim.kernel.procfs import mapping_page_runs, page_runs, pages_per_node_of
    from numasim.tools.numactl import run_numactl
    from numasim.tools.numastat import numastat_sources, run_numastat

    kernel, persistent, calibration = session.kernel, session.persistent, session.calibration
    oom_start = len(kernel.oom_kills)  # a persistent machine keeps older commands' kills: report this one's
    _apply_after_checked(kernel, opts.get("--after", []), keep_alive=not persistent, calibration=calibration)
    before = {nid: kernel.numastat(nid) for nid in kernel.machine.node_ids}
    oom_seen = len(kernel.oom_kills)
    # On a persistent machine the process gets this (the shim's) PID, as the shell's $! names it
    pid = os.getpid() if persistent and os.getpid() not in kernel.tasks else None
    run = run_numactl(kernel, argv, keep_alive=True, cpus=cpus, calibration=calibration, pid=pid)
    if persistent:
        _exit_or_run_on(session, run)
    after = {nid: kernel.numastat(nid) for nid in kernel.machine.node_ids}
    pids = [p for p in run.program_pids if p in kernel.tasks]
    # a program that finished on a persistent machine has exited: its pages are those it had when it finished
    pages = pages_per_node_of(kernel, pids) if pids or not persistent else dict(run.program_pages_per_node)
    if opts.get("--json"):
        runs = page_runs(kernel, pids)
        all_mappings = mapping_page_runs(kernel, pids)
        mappings, mapping_runs = [], 0
        for mapping in all_mappings:
            if mapping_runs + len(mapping["runs"]) > _MAX_RUNS:
                break  # the same budget as page_runs: a mapping is listed whole or not at all
            mapping_runs += len(mapping["runs"])
            mappings.append(mapping)
        report = {
            "machine": kernel.machine.name,
            "kernel_version": f"{kernel.version[0]}.{kernel.version[1]}",
            "sysctl_writes": [[name, value] for name, value in kernel.config.sysctl_writes],
            **reclaim_inputs(kernel.config),
            "argv": argv,
            "exit_code": run.exit_code,
            "stdout": run.stdout,
            "stderr": run.stderr,
            "timed_by": run.timed_by or None,
            "pids": run.program_pids,
            "pages_per_node": {str(k): v for k, v in pages.items()},
            "page_runs": runs[:_MAX_RUNS],
            "page_runs_truncated": len(runs) > _MAX_RUNS,
            "mappings": mappings,
            "mappings_truncated": len(mappings) < len(all_mappings),
            "numastat_delta": {
                str(nid): {name: after[nid][name] - before[nid].get(name, 0) for name in after[nid]}
                for nid in after
            },
            "syscalls": [
                {"call": name, "args": args, "ret": res.ret, "errno": res.errno}
                for name, args, res in run.syscalls
            ],
            "oom_kills": [
                {"pid": o.pid, "comm": o.comm, "reason": o.reason, "constraint": o.constraint,
                 "nodemask": sorted(o.nodemask) if o.nodemask is not None else None, "log": o.log_line()}
                for o in kernel.oom_kills[oom_start:]
            ],
        }
        echo(json.dumps(report, indent=2))
        raise SystemExit(run.exit_code)
    if run.stdout:
        echo(run.stdout, nl=False)
    for kill in kernel.oom_kills[oom_seen:]:  # the kernel log line dmesg shows, before the shell's "Killed"
        echo(kill.log_line(), err=True)
    if run.stderr:
        echo(run.stderr, nl=False, err=True)
    # Only after a program that ran and succeeded: after an error (an unknown program, a mistyped option, an OOM
    # kill) the message is the whole answer, and the table of a process that did nothing would bury it. A
    # persistent machine's numactl prints what numactl prints: scripts read it (numastat -p PID is a command).
    if pids and run.command and run.exit_code == 0 and not persistent:
        stat = run_numastat(["-p", *[str(p) for p in pids]], numastat_sources(kernel))
        echo(stat.stdout, nl=False)
    if run.timed_by and not persistent:  # a measurement tool's numbers say what they rest on (not in its output:
        echo(f"numasim: timed by {run.timed_by}", err=True)  # scripts parse that as the real tool's)
    raise SystemExit(run.exit_code)


def numastat_main(args: list[str]) -> int:
    """numasim numastat --machine M [--after CMD]... [numastat options]"""
    return _status_of(_numastat_command, args)


def _numastat_command(args: list[str]) -> None:
    from numasim.tools.numastat import numastat_sources, run_numastat

    opts, argv = _split_own(args, _OWN_VALUES, _OWN_FLAGS, "numastat")
    code = 0
    with _kernel_session(opts, read_only=True) as session:
        kernel = session.kernel
        try:
            _apply_after_checked(  # not numastat's output
                kernel, opts.get("--after", []), keep_alive=not session.persistent, calibration=session.calibration
            )
        except SystemExit as done:
            code = exit_status(done)
        else:
            res = run_numastat(argv, numastat_sources(kernel), numastat_width=os.environ.get("NUMASTAT_WIDTH"))
            echo(res.stdout, nl=False)
            if res.stderr:
                echo(res.stderr, nl=False, err=True)
            code = res.exit_code
    raise SystemExit(code)


_PROGRAM_HELP = {
    "stress": "stress -m N --vm-bytes SIZE [--vm-keep] [-t SECS]: N workers that each allocate and touch SIZE",
    "memhog": "memhog [-rN] SIZE [POLICY [NODES]]: mmap, mbind with POLICY, touch; one '.' per 10 MiB",
    "alloc": "alloc --pages N [--set-mempolicy POL] [--mbind POL] [--touch-cpu C] [--hugetlb] "
    "[--madvise hugepage|nohugepage]: probe syscalls and placement (POL = MODE[:NODES|:mask=0xBITS[:FLAGS]])",
    "migratepages": "migratepages PID FROM TO: move a live process's pages (migrate_pages; e.g. after a "
    "'stress --vm-keep' in an earlier --after)",
    "printcpu": "print the cpu the program runs on (numactl's test helper)",
    "numactl": "a nested numactl in the same process",
    "true": "do nothing, exit 0",
    "ls": "do nothing, exit 0 (stands for any short-lived program)",
    "sleep": "do nothing, exit 0",
    "nodemap": "numactl's test: the node of every cpu",
    "move_pages": "move_pages [N]: numactl's test: query and move N pages round robin over the memory nodes",
    "numademo": "numademo [-c] [-e] [-f] [-S] [-t] SIZE [TESTS]: every memory test under each policy (untimed)",
    "lat_mem_rd": "lmbench lat_mem_rd: load latency per working-set size (timed)",
    "dd": "GNU dd between /dev/zero, /dev/null and /dev/shm (tmpfs) (timed)",
    "stream": "STREAM 5.10: copy/scale/add/triad bandwidth (timed)",
    "mlc": "Intel mlc --latency_matrix ... --loaded_latency, --c2c_latency (timed)",
    "ib_send_lat": "perftest ib_send_lat: RDMA send latency from this node's memory",
    "ib_send_bw": "perftest ib_send_bw: RDMA send bandwidth from this node's memory",
    "stride_lat": "source article 003's stride x working-set latency test (timed)",
    "main": "the same test under the name article 003 runs it as (./main)",
}
"""One line per virtual program; a program missing here shows its docstring's first line."""


def _program_lines() -> list[str]:
    from numasim.tools.programs import find_program, program_names

    names = program_names()
    width = max(len(n) for n in names)
    lines = []
    for name in names:
        impl = find_program(name)
        doc = (getattr(impl, "__doc__", None) or "").strip().splitlines()
        text = _PROGRAM_HELP.get(name) or (doc[0] if doc else "(no description)")
        lines.append(f"  {name:<{width}}  {text}")
    return lines


_OWN_OPTIONS_HELP = """\
numasim's options (before any numactl / numastat option):
  --machine MACHINE       shipped machine name (see 'numasim topo list') or machine file (required)
  --kernel-version V      kernel version to model, 6.1 .. 6.12 (default 6.12)
  --thp MODE              transparent hugepages at boot: always, madvise (default) or never (never: khugepaged
                          does not raise min_free_kbytes; always: anonymous faults get 2 MiB folios); the knob
                          /sys/kernel/mm/transparent_hugepage/enabled
  --sysctl NAME=VALUE     write a kernel knob before boot (repeatable, in order), e.g. vm.nr_hugepages=512
  --page-cache NODE=SIZE  clean page cache on NODE at boot, part of its memory in use (repeatable), e.g. 0=2G
  --kswapd                run kswapd: background reclaim of clean page cache while programs fault memory in
                          (at nominal rates: 2 GB/s reclaim, 500,000 faults/s; numasim.kernel.kswapd)
  --buddyinfo FILE        a measured /proc/buddyinfo: each zone's free memory as fragmented as it shows, so
                          2 MiB allocations may need compaction (numasim.kernel.buddy, numasim.kernel.compaction)
  --calibration FILE      time the virtual tools with this calibration (default: the one the machine names)
  --nominal               time them with the machine file's nominal numbers, on purpose
  --catalog               time them with the platform catalog's priors for the machine's cpu model
  --after CMD             run "numactl ARGS -- PROG ARGS" first (repeatable; a failing one stops numasim)
"""


def help_text(command: str) -> str:
    """The plain-text ``--help`` of ``numasim numactl`` or ``numasim numastat``."""
    if command == "numastat":
        from numasim.tools.numastat import _USAGE

        return (
            "Usage: numasim numastat --machine MACHINE [--kernel-version V] [--thp MODE] [--sysctl N=V]... [--after CMD]... [NUMASTAT OPTIONS]\n\n"
            "Run numastat on the simulated kernel (after the --after commands) and print what it prints.\n\n"
            + _OWN_OPTIONS_HELP
            + "  -h, --help              show this help\n\n"
            + "numastat's options (numactl 2.0.19's numastat):\n"
            + "".join(f"  {line}\n" for line in _USAGE.format(p="numastat").splitlines())
        )
    return (
        "Usage: numasim numactl --machine MACHINE [--kernel-version V] [--thp MODE] [--sysctl N=V]... [--calibration FILE | --nominal | --catalog] [--json]\n"
        "                       [--after CMD]... [NUMACTL OPTIONS] [--] PROGRAM [ARGS]\n\n"
        "Run numactl and a virtual program on the simulated kernel, then print what 'numastat -p' shows for\n"
        "the program's processes if it exits 0. Its own exit status is passed through (137: OOM-killed).\n\n"
        + _OWN_OPTIONS_HELP
        + "  --json                  one JSON report: pages per node, page runs (per process and per mapping),\n"
        "                          numastat deltas, syscalls, OOM kills\n"
        "  -h, --help              show this help\n\n"
        "numactl's options (numactl 2.0.19; they act in order, as in numactl.c):\n"
        "  -i, --interleave=NODES           interleave pages over NODES\n"
        "  -w, --weighted-interleave=NODES  interleave weighted by the node weights (6.9+)\n"
        "  -m, --membind=NODES              allocate only on NODES (with -b: NUMA balancing allowed)\n"
        "  -p, --preferred=NODE             prefer NODE, fall back to others\n"
        "  -P, --preferred-many=NODES       prefer NODES (5.15+)\n"
        "  -l, --localalloc                 allocate on the node of the cpu that touches\n"
        "  -N, --cpunodebind=NODES          run on the cpus of NODES\n"
        "  -C, --physcpubind=CPUS           run on CPUS\n"
        "  -a, --all                        parse lists against all nodes/cpus, not the cpuset\n"
        "  -b, --balancing                  MPOL_F_NUMA_BALANCING with --membind\n"
        "  -s, --show                       print the policy in force and exit\n"
        "  -H, --hardware                   print the topology (numactl --hardware)\n"
        "  --version                        print numactl's version\n"
        "  NODES / CPUS: 0,2 or 0-3 or all; ! inverts, + is cpuset-relative\n\n"
        "Virtual programs:\n" + "\n".join(_program_lines()) + "\n"
    )
