"""``numasim machine exec``: run a command in a private mount namespace that shows a persistent machine's views.

The child process unshares its mount namespace (``unshare(CLONE_NEWNS)``; without ``CAP_SYS_ADMIN``, a user
namespace in which it is root as well, where the kernel allows unprivileged ones), makes every mount private
(``mount --make-rprivate /``: nothing it mounts propagates back to the host), bind-mounts the machine's view
tree (:mod:`numasim.persist.views`) read-only over ``/sys/devices/system/node``, ``/sys/devices/system/cpu``,
``/sys/bus/cpu/devices`` and the files ``/proc/meminfo``, ``/proc/vmstat``, ``/proc/zoneinfo`` and
``/proc/buddyinfo``, then executes the command. The mounts die with the namespace: nothing is left mounted on
the host, whatever happens.

A numasim command run inside (``NUMASIM_MACHINE`` is exported) that changes the machine writes a new
generation of the views and mounts it over the old one in the same namespace (:func:`remount_if_inside`), so
the script reads what its last command did. A generation mounted by a running ``exec`` is kept on disk until
the ``exec`` ends (a pin file ``.exec.PID`` names it), so a command run outside the namespace cannot empty it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import selectors
import signal
import sys
import threading
import warnings
from pathlib import Path

from numasim.errors import NumasimError

__all__ = ["MOUNTS", "ENV_EXEC", "NamespaceError", "run_in_namespace", "remount_if_inside", "pinned_generations",
           "EXIT_SETUP_FAILED"]  # fmt: skip

MOUNTS: tuple[tuple[str, str], ...] = (
    ("sys/devices/system/node", "/sys/devices/system/node"),
    ("sys/devices/system/cpu", "/sys/devices/system/cpu"),
    ("sys/bus/cpu/devices", "/sys/bus/cpu/devices"),
    ("proc/meminfo", "/proc/meminfo"),
    ("proc/vmstat", "/proc/vmstat"),
    ("proc/zoneinfo", "/proc/zoneinfo"),
    ("proc/buddyinfo", "/proc/buddyinfo"),
)
"""(path in the view tree, where it is mounted)."""
ENV_EXEC = "NUMASIM_EXEC_VIEWS"
"""Set inside ``machine exec``: ``MNT_NAMESPACE EXEC_PID MACHINE_DIRECTORY``."""
EXIT_SETUP_FAILED = 125
"""Exit status when the namespace or a mount cannot be made (as env(1) and unshare(1) use for their own
failures); 126 and 127: the command could not be executed or was not found."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 0x1
_MS_REMOUNT = 0x20
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_PRIVILEGE_HINT = "run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"


class NamespaceError(NumasimError):
    """The mount namespace or one of its mounts could not be made (``status`` 125), or the command could not be
    executed (126) or found (127); the message names the call and the reason."""

    def __init__(self, message: str, status: int = EXIT_SETUP_FAILED) -> None:
        super().__init__(message)
        self.status = status


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _oserror(call: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{call}: {os.strerror(code)} ({errno.errorcode.get(code, code)})")


def _unshare(flags: int, call: str) -> None:
    if _libc().unshare(ctypes.c_int(flags)) != 0:
        raise _oserror(call)


def _mount(source: str | None, target: str, flags: int, call: str) -> None:
    src = source.encode() if source is not None else None
    if _libc().mount(src, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        raise _oserror(call)


def _enter_namespace() -> None:
    """unshare the mount namespace (in a user namespace too when that is what the OS permits), then make every
    mount private."""
    try:
        _unshare(_CLONE_NEWNS, "unshare(CLONE_NEWNS)")
    except OSError as exc:
        if exc.errno != errno.EPERM:
            raise NamespaceError(f"machine exec: {exc.strerror}") from None
        uid, gid = os.getuid(), os.getgid()
        try:
            _unshare(_CLONE_NEWUSER | _CLONE_NEWNS, "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
                    f.write(text)
        except OSError as exc2:
            raise NamespaceError(
                f"machine exec: {exc.strerror}, and {exc2.strerror or exc2}: a private mount namespace needs "
                f"CAP_SYS_ADMIN; {_PRIVILEGE_HINT}"
            ) from None
    try:
        _mount(None, "/", _MS_REC | _MS_PRIVATE, "mount --make-rprivate /")
    except OSError as exc:
        raise NamespaceError(f"machine exec: {exc.strerror}") from None


def _bind_views(tree: Path) -> None:
    """Bind-mount the view tree ``tree`` read-only over the real paths (:data:`MOUNTS`)."""
    for rel, target in MOUNTS:
        source = tree / rel
        if not os.path.lexists(target):
            raise NamespaceError(f"machine exec: cannot mount over {target}: it does not exist on this system")
        try:
            _mount(str(source), target, _MS_BIND, f"mount --bind {source} {target}")
            _mount(None, target, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, f"mount -o remount,bind,ro {target}")
        except OSError as exc:
            hint = f"; {_PRIVILEGE_HINT}" if exc.errno in (errno.EPERM, errno.EACCES) else ""
            raise NamespaceError(f"machine exec: {exc.strerror}{hint}") from None


def _mount_namespace() -> str:
    return os.readlink("/proc/self/ns/mnt")


def _pin(directory: Path, pid: int, tree: Path) -> None:
    (directory / f".exec.{pid}").write_text(tree.name + "\n", encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pinned_generations(directory: Path) -> set[str]:
    """Names of the view generations a running ``machine exec`` has mounted (pins of ended ones are removed)."""
    names: set[str] = set()
    for pin in directory.glob(".exec.*"):
        pid = pin.name.rsplit(".", 1)[-1]
        if not pid.isdigit() or not _alive(int(pid)):
            pin.unlink(missing_ok=True)
            continue
        try:
            names.add(pin.read_text(encoding="utf-8").strip())
        except OSError:
            continue
    return names


def remount_if_inside(directory: Path, tree: Path) -> None:
    """Inside ``machine exec`` of the machine in ``directory``, mount the new view generation ``tree`` over the
    old one (a failure is a warning: the command itself succeeded, the script's views are stale)."""
    mark = os.environ.get(ENV_EXEC, "")
    parts = mark.split(" ", 2)
    if len(parts) != 3 or parts[2] != str(directory.resolve()):
        return
    try:
        if _mount_namespace() != parts[0]:
            return  # a process that left the namespace (or another exec's): not ours to change
        _bind_views(tree)
        if parts[1].isdigit():
            _pin(directory, int(parts[1]), tree)
    except (OSError, NamespaceError) as exc:
        warnings.warn(f"the views of machine exec are stale: {exc}", RuntimeWarning, stacklevel=2)


def _has_fd(stream: object) -> bool:
    try:
        return isinstance(stream.fileno(), int)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _child(tree: Path, argv: list[str], env: dict[str, str], report: int, directory: Path) -> None:
    """In the forked child: namespace, mounts, exec. Never returns; a failure is written to ``report``."""
    status = EXIT_SETUP_FAILED
    try:
        _enter_namespace()
        _bind_views(tree)
        env = {**env, ENV_EXEC: f"{_mount_namespace()} {os.getppid()} {directory.resolve()}"}
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            status = 127 if isinstance(exc, FileNotFoundError) else 126
            os.write(report, f"{status}\nmachine exec: cannot run {argv[0]!r}: {exc.strerror}".encode())
    except NamespaceError as exc:
        os.write(report, f"{status}\n{exc}".encode())
    except BaseException as exc:  # anything else: still one line, and never back into the caller's code
        os.write(report, f"{status}\nmachine exec: {type(exc).__name__}: {exc}".encode())
    finally:
        os._exit(status)


def _relay(out_fd: int, err_fd: int) -> None:
    """Copy the child's output to this process's ``sys.stdout`` / ``sys.stderr`` (they are not file
    descriptors: numasim called from Python with its output captured)."""
    import codecs

    sel = selectors.DefaultSelector()
    streams = {out_fd: sys.stdout, err_fd: sys.stderr}
    decoders = {fd: codecs.getincrementaldecoder("utf-8")(errors="replace") for fd in streams}  # a character
    for fd in streams:  # may be split between two reads
        sel.register(fd, selectors.EVENT_READ)
    while streams:
        for key, _ in sel.select():
            chunk = os.read(key.fd, 65536)
            streams[key.fd].write(decoders[key.fd].decode(chunk, final=not chunk))
            if not chunk:
                sel.unregister(key.fd)
                os.close(key.fd)
                del streams[key.fd]
    sel.close()


def run_in_namespace(directory: Path, tree: Path, argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` with ``env`` in a private mount namespace showing view tree ``tree`` of the machine in
    ``directory``; returns its exit status (128 + N when a signal N ended it). A namespace or mount that cannot
    be made raises :class:`NamespaceError` (then nothing ran)."""
    report_r, report_w = os.pipe()  # close-on-exec: EOF once the command runs, a message if it could not
    relay = not (_has_fd(sys.stdout) and _has_fd(sys.stderr))
    pipes = (os.pipe(), os.pipe()) if relay else None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
        os.close(report_r)
        if pipes is not None:
            (out_r, out_w), (err_r, err_w) = pipes
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
        _child(tree, argv, env, report_w, directory)
    os.close(report_w)
    _pin(directory, os.getpid(), tree)
    main = threading.current_thread() is threading.main_thread()  # only there may signal handlers change
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # ^C goes to the command: wait
    old_quit = signal.signal(signal.SIGQUIT, signal.SIG_IGN) if main else None  # for it to end
    try:
        with os.fdopen(report_r, "rb") as report:
            failure = report.read().decode(errors="replace")
        if pipes is not None:
            (out_r, out_w), (err_r, err_w) = pipes
            os.close(out_w)
            os.close(err_w)
            _relay(out_r, err_r)
        _, wait_status = os.waitpid(pid, 0)
    finally:
        if main:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGQUIT, old_quit)
        (directory / f".exec.{os.getpid()}").unlink(missing_ok=True)
    if failure:
        status, _, message = failure.partition("\n")
        raise NamespaceError(message, int(status))
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code
