"""Errors numasim raises for bad input.

Every error names the field (or file and line) and the offending value, so the CLI can print one clear line
instead of a traceback. Library code raises these; only the CLI turns them into exit codes.
"""

from __future__ import annotations

__all__ = [
    "NumasimError",
    "TopologyError",
    "FormatError",
    "PolicyError",
    "CalibrationError",
    "TraceError",
    "WorkloadError",
    "OutputError",
    "SysctlError",
    "KernelConfigError",
    "MachineStateError",
]


class NumasimError(Exception):
    """Base class of every error numasim raises on purpose."""


class TopologyError(NumasimError, ValueError):
    """A machine description is inconsistent (disconnected graph, duplicate cpu, bad SLIT, ...).

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"nodes[2].cpus"``.
    value : object
        The offending value.
    reason : str
        What is wrong with it.
    """

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field} = {value!r}: {reason}")


class FormatError(NumasimError, ValueError):
    """A file could not be read: unknown format, or a malformed line.

    Parameters
    ----------
    source : str
        File name (or ``"<text>"``).
    message : str
        What is wrong.
    line : int, optional
        1-based line number of the offending line.
    """

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class PolicyError(NumasimError, ValueError):
    """A policy specification cannot be parsed or built (not a kernel errno: those are return values)."""


class CalibrationError(NumasimError, ValueError):
    """Timing was requested without a usable calibration, or a fit failed."""


class TraceError(FormatError):
    """A trace file is corrupt or malformed."""


class WorkloadError(NumasimError, ValueError):
    """A workload specification is invalid."""


class OutputError(NumasimError, OSError):
    """An output file or directory cannot be written (a parent is a file, permission denied, ...).

    The message names the path the user asked for (never an internal temporary file) and the cause.
    """


class SysctlError(NumasimError, ValueError):
    """A sysctl write names no knob numasim models, or a value the knob does not take.

    The message reads like ``sysctl -w``'s: ``sysctl: kernel.numa_balancing = 7: valid values are 0..3``.
    """


class KernelConfigError(NumasimError, ValueError):
    """A boot parameter of the simulated kernel the machine cannot take (page cache on a node it lacks, or more
    than the node's memory in use); the message names the parameter and the value."""


class MachineStateError(NumasimError):
    """A persistent simulated machine (``numasim machine``) that is missing, already started, locked against
    an unexpected state, or whose saved state cannot be read; the message says how to recover."""
