"""How the virtual mlc's load threads generate load: the core clock their delay counts, and the pace of one thread.

mlc's ``--loaded_latency`` runs one latency thread (a dependent pointer chase) and a load thread on every other
allowed cpu. A load thread runs a loop: it reads :data:`LOAD_LINES_PER_DELAY` cache lines, then spins for the
injection delay ``D`` (core cycles, mlc's ``-d``); the loop itself costs :data:`LOAD_LOOP_CYCLES_PER_LINE` core
cycles per line (threads sharing a core share its pipeline, so they loop more slowly, see
:data:`PACE_MEASURED_THREADS_PER_CORE`). Its reads are independent, so a thread issues one line every
:func:`line_gap_ns` until its core's ``max_outstanding_misses`` are in flight; then it waits for one to complete. Nothing else limits the load: at
small delays the offered load is bounded by Little's law (threads x outstanding lines x 64 B / latency) and the
controllers' FIFO queues, so the knee and the saturated plateau come from the machine's limits, not from a cap.

The delay counts cycles of the cores' clock: :func:`core_clock` takes it from the calibration
(``CoreTiming.core_clock_ghz``, which ``numasim calibrate`` reads off mlc's ``--idle_latency`` line, or without one
fits to a loaded-latency table's lightly loaded rows: :func:`fit_core_clock`, the pace model inverted) and, when the
calibration has none, assumes :data:`ASSUMED_CORE_CLOCK_GHZ` and says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numasim.engine.cores import core_of_cpus
from numasim.errors import WorkloadError
from numasim.timing.model import Calibration, CoreTiming
from numasim.topology.model import Machine

__all__ = [
    "ASSUMED_CORE_CLOCK_GHZ",
    "LOAD_LINES_PER_DELAY",
    "LOAD_LOOP_CYCLES_PER_LINE",
    "PACE_MEASURED_THREADS_PER_CORE",
    "PACE_SHARING_SOURCES",
    "ClockFit",
    "CoreClock",
    "LoadPace",
    "core_clock",
    "fit_core_clock",
    "line_gap_ns",
    "pace_threads_per_core",
    "threads_on_core",
]

ASSUMED_CORE_CLOCK_GHZ = 2.5
"""The clock assumed when the calibration has none (an ASSUMPTION, printed as such): a common base clock of
2-socket Xeons (the 8180's measured 2.5 GHz; the E5-2680 v2's nominal is 2.8 GHz, 12 % more)."""

LOAD_LINES_PER_DELAY = 2
"""Cache lines a load thread reads per injection-delay period when it shares its core with another of mlc's
threads (hyper-threading on, every cpu busy). Measured, not fitted to a shape: on both real tables
(``shared/data/mlc``, both with hyper-threading on) the load bandwidth at large delays is ``threads x L x 64 B x f /
D`` with ``L = 1.98`` (Platinum 8180, 111 load threads, measured 2.5 GHz) and ``L = 2.03`` (E5-2680 v2, 39
threads, at its nominal 2.8 GHz): rows with ``D >= 300``, the latency thread's own lines taken out. A thread alone
on its core runs its delay loop twice as fast (:data:`PACE_MEASURED_THREADS_PER_CORE`)."""

PACE_MEASURED_THREADS_PER_CORE = 2
"""The threads a core ran when the pace constants were measured. mlc's delay loop is executed by the core's
pipeline, which its hardware threads share: a thread's wall-clock pace scales with how many of mlc's threads share
its core. Measured on two boxes of one model both ways (Intel's svr-info example reports of 2x Xeon E5-2697 v4 on
the same board with the same DIMMs, mlc 3.10 ``--loaded_latency``, delay 20000, the latency thread's own 0.8 GB/s
taken out): with hyper-threading off each of
35 load threads read ``L = 3.98`` lines per delay, with it on each of 71 read ``L = 1.96`` (at a 2.8 GHz clock;
their ratio, 2.03, does not depend on it): the same per core. (The project's held-out public run ``tests/data/measurements/public_mlc/intel-2s-broadwell-E5-2697v4-htoff.md``
is the first of the two; its loaded-latency table cannot judge the rule it taught: the suite marks it
circular, :data:`PACE_SHARING_SOURCES`.)"""

PACE_SHARING_SOURCES = ("intel-2s-broadwell-E5-2697v4-htoff.md",)
"""The public mlc file the SMT-sharing rule of :data:`PACE_MEASURED_THREADS_PER_CORE` was read off
(``tests/data/measurements/public_mlc``): its loaded-latency rows are circular in the validation suite. (The same
box's hyper-threading-on file is not: the rule leaves the pace of two threads a core as it was, measured on the
project's two mlc runs.)"""

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


def line_gap_ns(
    delay_cycles: int, clock: CoreClock, pace: LoadPace = LoadPace(), threads_on_core: int = PACE_MEASURED_THREADS_PER_CORE
) -> float:
    """Time between two line reads a load thread issues at injection delay ``delay_cycles`` (ns), while it has a
    free miss slot: ``(D / L + loop cycles per line) / clock``, scaled by the threads of mlc's that share its core
    (``threads_on_core``) over those the constants were measured with (:data:`PACE_MEASURED_THREADS_PER_CORE`).

    Examples
    --------
    >>> round(line_gap_ns(1000, CoreClock(2.5, False, "test")), 1)  # (500 + 8) cycles at 2.5 GHz
    203.2
    >>> round(line_gap_ns(1000, CoreClock(2.5, False, "test"), threads_on_core=1), 1)  # alone on its core
    101.6
    """
    if delay_cycles < 0:
        raise WorkloadError(f"injection delay = {delay_cycles}: must be >= 0 core cycles")
    if threads_on_core < 1:
        raise WorkloadError(f"threads_on_core = {threads_on_core}: a load thread runs on its core")
    gap = (delay_cycles / pace.lines_per_delay + pace.loop_cycles_per_line) / clock.ghz
    return gap if threads_on_core == PACE_MEASURED_THREADS_PER_CORE else gap * threads_on_core / PACE_MEASURED_THREADS_PER_CORE


def pace_threads_per_core(machine: Machine, core: CoreTiming) -> tuple[int | None, str]:
    """Hardware threads a core runs, for the load threads' pace, and where that comes from: the calibration's
    ``threads_per_core``; else the platform catalog's for the machine's ``cpu_model`` (its SKU, or one a core
    where the machine shows SMT off: :func:`~numasim.timing.catalog.calibration.machine_threads_per_core`); else
    ``None`` (each load thread is then paced as sharing its core with another, as the pace was measured, and the
    source says ASSUMED)."""
    if core.threads_per_core is not None:
        return core.threads_per_core, "the calibration's threads_per_core"
    from numasim.timing.catalog.calibration import machine_threads_per_core  # (the catalog loads on demand)

    found = machine_threads_per_core(machine)
    if found is not None:
        return found[0], f"the calibration has no threads_per_core; {found[1]}"
    return None, (f"ASSUMED {PACE_MEASURED_THREADS_PER_CORE} of mlc's threads a core for the load threads' pace (the "
                  "calibration has no threads_per_core and the machine names no cpu the catalog knows)")


def threads_on_core(machine_cpus: Sequence[int], threads_per_core: int | None, cpus: Sequence[int]) -> dict[int, int]:
    """How many of ``cpus`` (a tool's threads) share each one's physical core: by ``threads_per_core`` and
    Linux's numbering (:func:`~numasim.engine.cores.core_of_cpus`); without it, :data:`PACE_MEASURED_THREADS_PER_CORE`
    each (the pace as measured).

    Examples
    --------
    >>> threads_on_core(range(8), 2, [0, 1, 4])  # cpus 0 and 4 are one core's two threads
    {0: 2, 1: 1, 4: 2}
    """
    if threads_per_core is None:
        return dict.fromkeys(cpus, PACE_MEASURED_THREADS_PER_CORE)
    core_of = core_of_cpus(machine_cpus, threads_per_core)
    count = Counter(core_of.get(c, -1 - c) for c in cpus)
    return {c: count[core_of.get(c, -1 - c)] for c in cpus}


FIT_MIN_DELAY = 300
"""The least injection delay (core cycles) whose row :func:`fit_core_clock` reads: below it a load thread's pace
is comparable to the loop's own cost and the knee begins (on every real table the project holds)."""
FIT_MAX_LATENCY_RATIO = 1.2
"""A row is read only while its latency is within this factor of the table's least loaded one: the load threads
then issue at their pace (nothing queues long enough to hold their misses back)."""


@dataclass(frozen=True)
class ClockFit:
    """The clock a loaded-latency table's lightly loaded rows imply (:func:`fit_core_clock`)."""

    ghz: float
    rows: int
    """How many rows it was read off."""
    row_min_ghz: float
    row_max_ghz: float
    """The clock each row alone gives, lowest and highest: a wide spread says the pace model does not fit."""

    @property
    def spread(self) -> float:
        """(highest - lowest) / the fit."""
        return (self.row_max_ghz - self.row_min_ghz) / self.ghz


def fit_core_clock(
    delay_cycles: Sequence[float] | np.ndarray,
    latency_ns: Sequence[float] | np.ndarray,
    bandwidth_mb_s: Sequence[float] | np.ndarray,
    load_threads_on_core: Sequence[int],
    pace: LoadPace = LoadPace(),
) -> ClockFit | None:
    """The core clock under which the virtual mlc's load threads move what a measured ``--loaded_latency`` table's
    lightly loaded rows moved; ``None`` when fewer than three rows qualify.

    mlc's delay loop counts core cycles, so while its load threads run at their own pace a row's bandwidth is
    ``clock x 64 B x sum over load threads of 1 / ((D / L + loop) x threads on its core / 2)`` (:func:`line_gap_ns`)
    plus the latency thread's one line per latency. Rows with ``D >= FIT_MIN_DELAY`` and a latency within
    ``FIT_MAX_LATENCY_RATIO`` of the table's least are fitted by least squares (through the origin: the bandwidth
    is proportional to the clock). ``load_threads_on_core``: for each load thread, how many of mlc's threads share
    its core (:func:`threads_on_core`).

    Examples
    --------
    A table made by the pace model at 2.4 GHz, 39 load threads two a core, gives 2.4 back:

    >>> d = [300, 500, 1000, 5000, 20000]
    >>> lat = [100.0, 96.0, 94.0, 93.0, 92.5]
    >>> bw = [(2.4 * 64 * 39 / (x / 2 + 8) + 64 / l) * 1000 for x, l in zip(d, lat)]
    >>> fit = fit_core_clock(d, lat, bw, [2] * 39)
    >>> round(fit.ghz, 3), fit.rows
    (2.4, 5)
    """
    d = np.asarray(delay_cycles, dtype=float)
    lat = np.asarray(latency_ns, dtype=float)
    bw_gb_s = np.asarray(bandwidth_mb_s, dtype=float) / 1000.0
    if not len(d) == len(lat) == len(bw_gb_s):
        raise ValueError(f"a loaded-latency table's columns differ in length: {len(d)} delays, {len(lat)} latencies, "
                         f"{len(bw_gb_s)} bandwidths")
    if not len(load_threads_on_core) or len(d) == 0:
        return None
    per_ghz = sum(PACE_MEASURED_THREADS_PER_CORE / k for k in load_threads_on_core)  # threads, pace-weighted
    ok = np.isfinite(lat) & np.isfinite(bw_gb_s) & (lat > 0)
    if not ok.any():
        return None
    sel = ok & (d >= FIT_MIN_DELAY) & (lat <= FIT_MAX_LATENCY_RATIO * lat[ok].min())
    if int(sel.sum()) < 3:
        return None
    x = 64.0 * per_ghz / (d[sel] / pace.lines_per_delay + pace.loop_cycles_per_line)  # GB/s per GHz
    y = bw_gb_s[sel] - 64.0 / lat[sel]  # the load threads' share: the latency thread reads a line per latency
    ghz = float(x @ y / (x @ x))
    each = y / x
    if not ghz > 0:
        return None
    return ClockFit(ghz, int(sel.sum()), float(each.min()), float(each.max()))
