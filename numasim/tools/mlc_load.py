"""How the virtual mlc's load threads generate load: the core clock their delay counts, and the pace of one thread.

mlc's ``--loaded_latency`` runs one latency thread (a dependent pointer chase) and a load thread on every other
allowed cpu. A load thread runs a loop: it reads :data:`LOAD_LINES_PER_DELAY` cache lines, then spins for the
injection delay ``D`` (core cycles, mlc's ``-d``); the loop itself costs :data:`LOAD_LOOP_CYCLES_PER_LINE` core
cycles per line. Its reads are independent, so a thread issues one line every :func:`line_gap_ns` until its core's
``max_outstanding_misses`` are in flight; then it waits for one to complete. Nothing else limits the load: at
small delays the offered load is bounded by Little's law (threads x outstanding lines x 64 B / latency) and the
controllers' FIFO queues, so the knee and the saturated plateau come from the machine's limits, not from a cap.

The delay counts cycles of the cores' clock: :func:`core_clock` takes it from the calibration
(``CoreTiming.core_clock_ghz``, which ``numasim calibrate`` reads off mlc's ``--idle_latency`` line) and, when the
calibration has none, assumes :data:`ASSUMED_CORE_CLOCK_GHZ` and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.errors import WorkloadError
from numasim.timing.model import Calibration

__all__ = [
    "ASSUMED_CORE_CLOCK_GHZ",
    "LOAD_LINES_PER_DELAY",
    "LOAD_LOOP_CYCLES_PER_LINE",
    "CoreClock",
    "LoadPace",
    "core_clock",
    "line_gap_ns",
]

ASSUMED_CORE_CLOCK_GHZ = 2.5
"""The clock assumed when the calibration has none (an ASSUMPTION, printed as such): a common base clock of
2-socket Xeons (the 8180's measured 2.5 GHz; the E5-2680 v2's nominal is 2.8 GHz, 12 % more)."""

LOAD_LINES_PER_DELAY = 2
"""Cache lines a load thread reads per injection-delay period. Measured, not fitted to a shape: on both real
tables (``shared/data/mlc``) the load bandwidth at large delays is ``threads x L x 64 B x f / D`` with
``L = 1.98`` (Platinum 8180, 111 load threads, measured 2.5 GHz) and ``L = 2.03`` (E5-2680 v2, 39 threads, at its
nominal 2.8 GHz): rows with ``D >= 300``, the latency thread's own lines taken out."""

LOAD_LOOP_CYCLES_PER_LINE = 8.0
"""Core cycles the load loop costs per line besides the delay (issue, loop control). Fitted (least squares, rows
``D >= 300``) on the Platinum 8180's table, whose clock is measured: 8.3 cycles. The other tables, read at the
clock their load bandwidth's slope shows (experiments/validation/README.md), agree for mlc 3.5 and later
(Platinum 8269CY, mlc 3.9: about 9 cycles at 3.2 GHz; EPYC 9354P, mlc 3.11b: about 13 at 3.3 GHz) but not the
E5-2680 v2's (mlc 3.1a): about 52 cycles at its 3.1 GHz all-core turbo, an older mlc's loop or Ivy Bridge's. The
least certain constant of the load model, and what mostly sets where the knee falls (it only matters while
``D / L`` is comparable, i.e. D < ~100)."""


@dataclass(frozen=True)
class CoreClock:
    """The clock a tool counts cycles of, and where it came from."""

    ghz: float
    assumed: bool
    source: str

    def describe(self) -> str:
        """One line for a tool's output, e.g. ``"core clock 2.500 GHz (calibration ...)"``."""
        word = "ASSUMED " if self.assumed else ""
        return f"{word}core clock {self.ghz:.3f} GHz ({self.source})"


def core_clock(calibration: Calibration) -> CoreClock:
    """The calibration's core clock, else :data:`ASSUMED_CORE_CLOCK_GHZ` marked as assumed.

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> from numasim.timing.model import nominal_calibration
    >>> core_clock(nominal_calibration(glueless(2))).describe()
    'ASSUMED core clock 2.500 GHz (the calibration has no core_clock_ghz)'
    """
    ghz = calibration.core.core_clock_ghz
    if ghz is None:
        return CoreClock(ASSUMED_CORE_CLOCK_GHZ, True, "the calibration has no core_clock_ghz")
    return CoreClock(float(ghz), False, f"calibration {calibration.id}")


@dataclass(frozen=True)
class LoadPace:
    """The load loop's constants (the defaults are :data:`LOAD_LINES_PER_DELAY` and
    :data:`LOAD_LOOP_CYCLES_PER_LINE`); another pace is for checking one machine with constants fitted on another."""

    lines_per_delay: float = LOAD_LINES_PER_DELAY
    loop_cycles_per_line: float = LOAD_LOOP_CYCLES_PER_LINE

    def __post_init__(self) -> None:
        if not self.lines_per_delay > 0:
            raise WorkloadError(f"LoadPace.lines_per_delay = {self.lines_per_delay}: must be positive")
        if not self.loop_cycles_per_line >= 0:
            raise WorkloadError(f"LoadPace.loop_cycles_per_line = {self.loop_cycles_per_line}: must be >= 0")


def line_gap_ns(delay_cycles: int, clock: CoreClock, pace: LoadPace = LoadPace()) -> float:
    """Time between two line reads a load thread issues at injection delay ``delay_cycles`` (ns), while it has a
    free miss slot: ``(D / L + loop cycles per line) / clock``.

    Examples
    --------
    >>> round(line_gap_ns(1000, CoreClock(2.5, False, "test")), 1)  # (500 + 8) cycles at 2.5 GHz
    203.2
    """
    if delay_cycles < 0:
        raise WorkloadError(f"injection delay = {delay_cycles}: must be >= 0 core cycles")
    return (delay_cycles / pace.lines_per_delay + pace.loop_cycles_per_line) / clock.ghz
