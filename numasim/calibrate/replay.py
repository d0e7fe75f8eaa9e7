"""Validation by simulation: run the very virtual tool users run, and read its output as a real run is read.

``numasim validate`` (engine method) does not re-implement mlc: it starts :func:`numasim.tools.mlc.mlc` in a
fresh :class:`~numasim.tools.context.ToolContext` (a new simulated kernel, the tool's task on every cpu), formats
its output as ``numasim numactl --machine M -- mlc ...`` prints it, and parses that text with the parser that reads
the real measurement (:func:`numasim.calibrate.parsers.mlc.parse_mlc_text`). So the numbers validation compares
are, to the last printed digit, the ones a user sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from numasim.calibrate.parsers.mlc import MlcResult, parse_mlc_text
from numasim.timing.model import Calibration
from numasim.topology.model import Machine

__all__ = ["virtual_mlc", "engine_available"]


def engine_available() -> bool:
    try:
        from numasim.engine.simulate import simulate  # noqa: F401
    except ImportError:
        return False
    return True


def virtual_mlc(
    machine: Machine,
    calibration: Calibration,
    argv: Sequence[str],
    *,
    delays: Sequence[int] | None = None,
    seed: int = 0,
) -> MlcResult:
    """``mlc ARGV`` run by the virtual mlc on ``machine`` timed by ``calibration``, parsed like a real run.

    ``delays``: the ``--loaded_latency`` injection delays (core cycles; default mlc's list).

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-001-e5-2680v2")
    >>> virtual_mlc(m, resolve_calibration(m), ["--latency_matrix"]).latency_matrix.cell(0, 1)  # measured: 115.1
    115.1
    """
    from numasim.tools.context import tool_context
    from numasim.tools.mlc import INJECT_DELAYS, format_mlc, mlc

    ctx = tool_context(machine, calibration, comm="mlc", seed=seed)
    res = mlc(ctx, list(argv), delays=tuple(delays) if delays is not None else INJECT_DELAYS)
    return parse_mlc_text(format_mlc(res), source=f"virtual mlc {' '.join(argv)} ({calibration.id}, seed {seed})")
