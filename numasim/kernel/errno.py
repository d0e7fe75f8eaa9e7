"""Kernel error numbers and the result record every simulated syscall returns.

Simulated syscalls never raise for bad arguments: like the real ones they return ``-1`` and set ``errno``.
Inside the kernel package a :class:`KernelErrno` exception carries the errno from deep in a helper up to the
syscall boundary, where it becomes a :class:`SyscallResult`.

Values are the Linux x86_64 ones (``include/uapi/asm-generic/errno-base.h``, ``errno.h``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ERRNO", "KernelErrno", "SyscallResult", "errno_value"]

ERRNO: dict[str, int] = {
    "EPERM": 1,
    "ENOENT": 2,
    "ESRCH": 3,
    "EIO": 5,
    "E2BIG": 7,
    "ENOMEM": 12,
    "EACCES": 13,
    "EFAULT": 14,
    "EBUSY": 16,
    "ENODEV": 19,
    "EINVAL": 22,
    "EFBIG": 27,
    "ERANGE": 34,
    "EOPNOTSUPP": 95,
}
"""Error name -> number, for the errors the memory-policy syscalls can return."""


def errno_value(name: str) -> int:
    """The number of the error called ``name`` (``errno_value("EINVAL") == 22``)."""
    return ERRNO[name]


class KernelErrno(Exception):
    """Raised inside the simulated kernel; turned into a failed :class:`SyscallResult` at the syscall edge.

    Parameters
    ----------
    errno : str
        Error name, e.g. ``"EINVAL"``.
    why : str
        Which rule rejected the call (for error messages and teaching; the kernel itself does not say).
    """

    def __init__(self, errno: str, why: str = "") -> None:
        if errno not in ERRNO:
            raise ValueError(f"unknown errno name {errno!r}")
        self.errno = errno
        self.why = why
        super().__init__(f"{errno}: {why}" if why else errno)


@dataclass(frozen=True)
class SyscallResult:
    """What a simulated syscall returned.

    Attributes
    ----------
    ret : int
        The return value: ``-1`` on error, else ``0`` or a count (``migrate_pages`` returns the number of
        pages it could not move).
    errno : str or None
        Error name when ``ret == -1`` (``"EINVAL"``, ``"EFAULT"``, ...), else ``None``.
    why : str
        Which rule produced the error (empty on success).
    value : dict
        Out-parameters: ``mode`` and ``nodemask`` for ``get_mempolicy``, ``status`` for ``move_pages``, ...

    Examples
    --------
    >>> r = SyscallResult.fail("EINVAL", "MPOL_BIND with an empty nodemask")
    >>> r.ok, r.ret, r.errno
    (False, -1, 'EINVAL')
    """

    ret: int
    errno: str | None = None
    why: str = ""
    value: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.errno is None

    def __getitem__(self, key: str) -> Any:
        return self.value[key]

    @classmethod
    def success(cls, ret: int = 0, **value: Any) -> SyscallResult:
        return cls(ret=ret, value=dict(value))

    @classmethod
    def fail(cls, errno: str, why: str = "", **value: Any) -> SyscallResult:
        if errno not in ERRNO:
            raise ValueError(f"unknown errno name {errno!r}")
        return cls(ret=-1, errno=errno, why=why, value=dict(value))

    @classmethod
    def from_error(cls, err: KernelErrno, **value: Any) -> SyscallResult:
        return cls.fail(err.errno, err.why, **value)
