"""Writing output files so that a failure never leaves a half-written one.

Everything numasim writes (machine files, calibrations, results, traces, figures) goes through
:func:`atomic_path`: the data is written to a temporary file beside the target, which is renamed onto the target
only when writing finished without an error (``os.replace`` is atomic on one filesystem).

A destination that cannot be written (a parent is a regular file, a read-only or permission-denied directory)
raises :class:`~numasim.errors.OutputError` naming the path the user asked for and the cause;
:func:`check_output_path` performs the same check up front, so a command can refuse before doing any work.

No temporary file outlives the command that made it:

* An error, Ctrl-C (``KeyboardInterrupt``) or ``SIGTERM`` removes it: while a temporary exists, the main thread
  handles ``SIGTERM`` by unwinding (``finally`` blocks remove the file), then restores the previous handler and
  raises the signal again, so the process still ends as ``SIGTERM`` says (or the previous handler runs).
* ``SIGKILL`` (and a power cut) cannot be caught, so temporaries are named recognisably,
  ``.NAME.numasim-tmp-PID-RANDOM`` (a hidden file, or directory, beside the target ``NAME``), and the next write
  into the same directory removes those of ours whose process is gone, or which are older than
  :data:`STALE_AFTER_S` (a process id can be reused). Nothing else is ever removed.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import signal
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from numasim.errors import OutputError

__all__ = [
    "atomic_path",
    "atomic_write_text",
    "atomic_write_texts",
    "atomic_write_bytes",
    "atomic_dir",
    "check_output_path",
    "output_error",
    "save_figure",
    "remove_stale_temporaries",
    "TEMP_MARKER",
    "STALE_AFTER_S",
]

TEMP_MARKER = ".numasim-tmp-"
"""What every temporary file or directory numasim creates has in its name: ``.NAME.numasim-tmp-PID-RANDOM``."""
STALE_AFTER_S = 6 * 3600.0
"""A temporary of ours this old (by modification time) is stale even if a process with its id runs: ids are
reused, and a live writer keeps its file's modification time fresh."""
_TEMP_NAME = re.compile(r"^\..*\.numasim-tmp-(\d+)-[0-9a-f]{8}$")


class _Terminated(BaseException):
    """Raised by the SIGTERM handler while a temporary exists, so that ``finally`` blocks remove it."""


@contextmanager
def _unwind_on_sigterm() -> Iterator[None]:
    """While the block runs, SIGTERM unwinds it (cleaning up) and is then re-raised with the old handler.

    Only in the main thread (Python runs signal handlers there, and only there may set them), and not when
    SIGTERM is ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN or previous is None:  # ignored, or set outside Python: leave it alone
        yield
        return
    terminated = False

    def handler(signum: int, frame: object) -> None:
        nonlocal terminated
        terminated = True
        raise _Terminated

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if terminated:
            # The temporaries are gone; now end as the signal asked (the default action kills the process).
            signal.raise_signal(signal.SIGTERM)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OSError:
        return False
    return True


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Remove the temporaries of ours in ``directory`` that no running write owns; returns what was removed.

    Ours: hidden entries named ``.NAME.numasim-tmp-PID-RANDOM`` (RANDOM 8 hex digits). Stale: the process
    ``PID`` no longer exists, or the entry is older than :data:`STALE_AFTER_S`. This process's own
    temporaries are never stale (a write may be under way). Errors (a file removed meanwhile, no permission)
    are ignored: cleaning up never fails a write.

    Examples
    --------
    >>> import tempfile, pathlib, subprocess, sys
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
    ...                       text=True).stdout.strip()  # the id of a process that has ended
    >>> _ = (d / f".out.npz.numasim-tmp-{gone}-0123abcd").write_bytes(b"half a trace")
    >>> _ = (d / ".out.npz.tmp").write_bytes(b"not ours")
    >>> [p.name for p in remove_stale_temporaries(d)] == [f".out.npz.numasim-tmp-{gone}-0123abcd"]
    True
    >>> sorted(p.name for p in d.iterdir())
    ['.out.npz.tmp']
    """
    removed: list[Path] = []
    now = time.time()
    me = os.getpid()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid == me:
            continue
        try:
            age_s = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if age_s < STALE_AFTER_S and _pid_alive(pid):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _temp_name(target: Path) -> Path:
    return target.parent / f".{target.name}{TEMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}"


def _umask() -> int:
    # There is no way to read the umask without setting it; restore it at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (or ``path`` itself) that exists (symlinks followed)."""
    p = path
    while not p.exists() and not p.is_symlink():
        if p.parent == p:
            break
        p = p.parent
    return p


def _cause(target: Path, is_dir: bool) -> str | None:
    """Why ``target`` cannot be written, or None when it looks writable."""
    anc = _existing_ancestor(target)
    if anc == target:
        if is_dir:
            if not target.is_dir():
                return f"{target} exists and is not a directory"
            if not os.access(target, os.W_OK | os.X_OK):
                return f"permission denied: cannot write into directory {target}"
            return None
        if target.is_dir():
            return f"{target} is a directory"
        parent = target.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"permission denied: cannot write into directory {parent}"
        return None
    if not anc.is_dir():
        return f"{anc} is not a directory"
    if not os.access(anc, os.W_OK | os.X_OK):
        return f"permission denied: cannot create anything in directory {anc}"
    return None


def output_error(path: str | Path, exc: OSError | None = None, *, is_dir: bool = False) -> OutputError:
    """An :class:`OutputError` for ``path`` naming the real cause (found on disk, else from ``exc``)."""
    target = Path(path)
    cause = _cause(target, is_dir)
    if cause is None and exc is not None:
        code = exc.errno
        if code in (errno.EACCES, errno.EPERM):
            cause = "permission denied"
        elif code == errno.ENOTDIR:
            cause = "a parent is not a directory"
        elif code == errno.ENOENT:
            cause = f"cannot create files in directory {_existing_ancestor(target.parent)} ({exc.strerror})"
        else:
            cause = exc.strerror or type(exc).__name__
    return OutputError(f"cannot write {target}: {cause or 'unknown cause'}")


def check_output_path(path: str | Path, is_dir: bool = False) -> None:
    """Raise :class:`OutputError` if ``path`` (a file, or a directory with ``is_dir``) surely cannot be written.

    Cheap: it looks at the nearest existing ancestor and creates (and removes at once) one empty temporary
    file there, which also catches directories that refuse files even to root (``/proc``, read-only mounts).
    Use it before expensive work.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> check_output_path(d / "new" / "out.json")
    >>> _ = (d / "afile").write_text("")
    >>> check_output_path(d / "afile" / "out.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    numasim.errors.OutputError: cannot write .../afile/out.json: .../afile is not a directory
    """
    target = Path(path)
    cause = _cause(target, is_dir)
    if cause is not None:
        raise OutputError(f"cannot write {target}: {cause}")
    probe_dir = _existing_ancestor(target if is_dir else target.parent)
    probe = _temp_name(probe_dir / "numasim-check")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise OutputError(f"cannot write {target}: cannot create files in directory {probe_dir} ({exc.strerror})") from None
    os.unlink(probe)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed onto ``path`` only if the block finishes without an error.

    The file gets the mode a plain ``open(path, "w")`` would give: the existing file's mode, or
    ``0o666 & ~umask`` for a new file (not ``mkstemp``'s 0600). A destination that cannot be written raises
    :class:`~numasim.errors.OutputError` naming ``path`` and the cause.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("done")
    >>> target.read_text()
    'done'
    """
    target = Path(path)
    with _temp_beside(target) as tmp:
        yield tmp
        try:
            st = os.stat(target)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~_umask()
        except OSError:
            mode = 0o666 & ~_umask()
        try:
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as exc:
            raise output_error(target, exc) from None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_texts(files: dict[Path, str]) -> None:
    """Write several files as one: either all of them are replaced or none is.

    Each text goes to a temporary file beside its target first; only when every one is written are they
    renamed into place. Should a rename fail half way, the targets already replaced get their old content (or
    absence) back, so a machine file never names a calibration that was not written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_texts({d / "m.toml": "name = 'm'\\n", d / "m.cal.json": "{}\\n"})
    >>> sorted(p.name for p in d.iterdir())
    ['m.cal.json', 'm.toml']
    """
    with ExitStack() as stack:
        temps = {target: stack.enter_context(_temp_beside(Path(target))) for target in files}
        for target, text in files.items():
            temps[target].write_text(text, encoding="utf-8")
        done: list[tuple[Path, Path | None]] = []
        try:
            for target, tmp in temps.items():
                backup = None
                if Path(target).exists():
                    backup = stack.enter_context(_temp_beside(Path(target)))
                    os.replace(target, backup)
                done.append((Path(target), backup))
                _chmod_like(tmp, backup)
                os.replace(tmp, target)
        except BaseException as exc:  # an OSError, or SIGTERM / Ctrl-C half way: put the old files back
            for target, backup in reversed(done):
                if backup is not None and backup.exists():
                    os.replace(backup, target)
                elif target.exists():
                    target.unlink()
            if not isinstance(exc, OSError):
                raise
            raise output_error(done[-1][0] if done else next(iter(files)), exc) from None


@contextmanager
def _temp_beside(target: Path, *, directory: bool = False) -> Iterator[Path]:
    """An empty temporary file (or directory) in ``target``'s directory, removed on exit if still there, and on
    SIGTERM; stale temporaries of earlier, killed writes there are removed first."""
    with _unwind_on_sigterm():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(target.parent)
            while True:
                tmp = _temp_name(target)
                try:
                    if directory:
                        os.mkdir(tmp, 0o700)
                    else:
                        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                    break
                except FileExistsError:  # 32 random bits taken already: draw again
                    continue
        except OSError as exc:
            raise output_error(target, exc) from None
        try:
            yield tmp
        finally:
            if os.path.isdir(tmp) and not os.path.islink(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            elif os.path.lexists(tmp):
                os.unlink(tmp)


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary directory beside ``path`` to fill; it becomes ``path`` (replacing a directory there) only if
    the block finishes without an error. Named, cleaned up and swept like the files of :func:`atomic_path`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "tree"
    >>> with atomic_dir(target) as tmp:
    ...     _ = (tmp / "a").write_text("1")
    >>> sorted(p.name for p in target.iterdir())
    ['a']
    """
    target = Path(path)
    with _temp_beside(target, directory=True) as tmp:
        yield tmp
        try:
            os.chmod(tmp, 0o777 & ~_umask())  # what mkdir would give, not the private 0700 of the temporary
            if target.exists():
                with _temp_beside(target, directory=True) as old:
                    os.rename(target, old / target.name)
                    os.rename(tmp, target)
            else:
                os.rename(tmp, target)
        except OSError as exc:
            raise output_error(target, exc) from None


def _chmod_like(tmp: Path, old: Path | None) -> None:
    # The mode open(path, "w") would give: the replaced file's, else 0o666 & ~umask (not mkstemp's 0600).
    mode = stat.S_IMODE(os.stat(old).st_mode) if old is not None else 0o666 & ~_umask()
    os.chmod(tmp, mode)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def save_figure(fig: object, path: str | Path, *, dpi: int = 110, close: bool = True, **savefig: object) -> None:
    """Write a matplotlib figure to ``path`` atomically (the format from the suffix), then close it (pyplot keeps
    every open figure otherwise)."""
    target = Path(path)
    try:
        with atomic_path(target) as tmp:  # never a half-written figure
            fig.savefig(tmp, format=target.suffix.lower()[1:] or "png", dpi=dpi, **savefig)  # type: ignore[attr-defined]
    finally:
        if close:
            import matplotlib.pyplot as plt

            plt.close(fig)  # type: ignore[arg-type]
