"""Writing output files so that a failure never leaves a half-written one.

Everything numasim writes (machine files, calibrations, results, traces, figures) goes through
:func:`atomic_path`: the data is written to a temporary file beside the target, which is renamed onto the target
only when writing finished without an error (``os.replace`` is atomic on one filesystem).

A destination that cannot be written (a parent is a regular file, a read-only or permission-denied directory)
raises :class:`~numasim.errors.OutputError` naming the path the user asked for and the cause;
:func:`check_output_path` performs the same check up front, so a command can refuse before doing any work.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from numasim.errors import OutputError

__all__ = ["atomic_path", "atomic_write_text", "atomic_write_texts", "atomic_write_bytes", "check_output_path", "output_error", "save_figure"]


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
    try:
        fd, tmp = tempfile.mkstemp(prefix=".numasim-check.", suffix=".tmp", dir=probe_dir)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: cannot create files in directory {probe_dir} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(tmp)


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
        except OSError as exc:
            for target, backup in reversed(done):
                if backup is not None and backup.exists():
                    os.replace(backup, target)
                elif target.exists():
                    target.unlink()
            raise output_error(done[-1][0] if done else next(iter(files)), exc) from None


@contextmanager
def _temp_beside(target: Path) -> Iterator[Path]:
    """An empty temporary file in ``target``'s directory, removed on exit if still there."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise output_error(target, exc) from None
    try:
        yield Path(tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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
