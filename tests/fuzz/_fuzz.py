"""The fuzz suite's harness: run the CLI in-process under a per-call alarm, judge its outcome, mutate inputs.

Every input surface (machine files, numactl command lines, workloads, traces, measurements) is driven through
:func:`numasim.cli.main` exactly as a user's shell would, with stdout and stderr captured. An outcome is good
when the command succeeds, or fails with a short message (at most :data:`MAX_ERROR_LINES` lines) that names
what was wrong and carries none of Python's own text (a traceback, an exception class, ``invalid literal``).
A call that runs over :data:`CALL_LIMIT_S` fails the test through SIGALRM: a hang, not a performance figure.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from numasim.cli import main

__all__ = ["CALL_LIMIT_S", "MAX_ERROR_LINES", "Outcome", "cli", "assert_clean", "fuzz_settings", "mutated", "TRICKY"]

CALL_LIMIT_S = 10.0
"""No command may run longer on an input of at most 1,000 accesses."""
MAX_ERROR_LINES = 5
PYTHON_TEXT = re.compile(
    r"Traceback|\b[A-Z][A-Za-z]*(Error|Exception|Warning)\b:?|invalid literal|object has no attribute|NoneType|"
    r"unsupported operand|not subscriptable|positional argument|unexpected keyword|could not convert"
)
"""Python's own words: never part of a message numasim means to print."""

# Values a careless or hostile file puts where a number belongs.
TRICKY = (
    "0", "-1", "-0", "1e308", "-1e308", "nan", "inf", "-inf", "18446744073709551616", "2147483648",
    "99999999999999999999999999", "0x7fffffffffffffff", "", "x", "1.5", "1e-300", '""', "[]", "{}",
)


FUZZ_SCALE = float(os.environ.get("NUMASIM_FUZZ_SCALE", "1"))
"""Multiplies every test's examples: ``NUMASIM_FUZZ_SCALE=20 pytest tests/fuzz`` searches deeper; the default
keeps the suite within its budget in ``make test``."""
FUZZ_RANDOM = os.environ.get("NUMASIM_FUZZ_RANDOM", "") not in ("", "0")
"""``NUMASIM_FUZZ_RANDOM=1``: draw new examples each run (with ``--hypothesis-seed=N`` to repeat one)."""


def fuzz_settings(max_examples: int) -> settings:
    """Deterministic (derandomised, no example database) and timed by the per-call alarm, not by hypothesis."""
    return settings(
        max_examples=max(1, round(max_examples * FUZZ_SCALE)),
        derandomize=not FUZZ_RANDOM,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )


class Overran(Exception):  # noqa: N818 - an event, not an error class users see
    """A CLI call ran over :data:`CALL_LIMIT_S`."""


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str


@contextlib.contextmanager
def _alarm(seconds: float, argv: Sequence[str]) -> Iterator[None]:
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Overran(f"numasim {' '.join(argv)} ran over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cli(*argv: str, limit_s: float = CALL_LIMIT_S) -> Outcome:
    """Run ``numasim ARGV`` in this process; an exception escaping :func:`main` fails the calling test."""
    out, err = io.StringIO(), io.StringIO()
    with _alarm(limit_s, argv), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Outcome(tuple(argv), code, out.getvalue(), err.getvalue())


def assert_clean(o: Outcome, *, names: Sequence[str] = (), usage_ok: bool = False) -> None:
    """Success, or a short failure that names one of ``names`` (when given) and has no Python text in it.

    ``usage_ok``: the simulated tool (numactl, a virtual program) may print its own usage text after the
    message, as the real one does; then only the first line must name the problem.
    """
    bad = PYTHON_TEXT.search(o.out + o.err)
    assert bad is None, f"Python text {bad.group(0)!r} in the output of {o.argv}:\n{o.err[-2000:]}"
    if o.code == 0:
        return
    lines = [line for line in o.err.splitlines() if line.strip()]
    if usage_ok and not lines:  # memhog prints its usage on stdout, as the real one does
        lines = [line for line in o.out.splitlines() if line.strip()]
    assert lines, f"{o.argv} exited {o.code} without a message"
    if not usage_ok:
        assert len(lines) <= MAX_ERROR_LINES, f"{o.argv}: {len(lines)} lines of error:\n{o.err[-2000:]}"
    if names:
        assert any(n in o.err for n in names), f"{o.argv}: the message names none of {list(names)}:\n{o.err}"


@st.composite
def mutated(draw: st.DrawFn, text: str, *, max_edits: int = 3) -> str:
    """``text`` after 1..max_edits edits: a byte flip, a cut, a line dropped or doubled, a number replaced by a
    tricky value, a token emptied."""
    for _ in range(draw(st.integers(1, max_edits))):
        how = draw(st.sampled_from(["flip", "cut", "drop", "double", "number", "number", "number", "empty"]))
        lines = text.split("\n")
        if how == "flip" and text:
            k = draw(st.integers(0, len(text) - 1))
            text = text[:k] + draw(st.characters(codec="utf-8", exclude_categories=("Cs",))) + text[k + 1 :]
        elif how == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif how in ("drop", "double") and lines:
            k = draw(st.integers(0, len(lines) - 1))
            lines[k : k + 1] = [] if how == "drop" else [lines[k], lines[k]]
            text = "\n".join(lines)
        elif how == "number":
            spans = [m.span() for m in re.finditer(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?![\w.])", text)]
            if spans:
                a, b = spans[draw(st.integers(0, len(spans) - 1))]
                text = text[:a] + draw(st.sampled_from(TRICKY)) + text[b:]
        else:
            spans = [m.span() for m in re.finditer(r"[^\s=,:\[\]{}\"]+", text)]
            if spans:
                a, b = spans[draw(st.integers(0, len(spans) - 1))]
                text = text[:a] + text[b:]
    return text
