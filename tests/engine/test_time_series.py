"""The utilisation series' bucket adds: the compiled loop is ``np.add.at`` to the bit, and bad rows are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.engine._epoch_kernel import add_rows_at
from numasim.engine.stats import TimeSeries


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 12), st.integers(1, 40))
def test_add_rows_at_is_numpy_add_at_to_the_bit(seed: int, n: int, width: int, buckets: int) -> None:
    rng = np.random.default_rng(seed)
    # repeated indices in any order, values over many magnitudes: the sums' rounding depends on their order
    at = rng.integers(0, buckets, size=n)
    rows = rng.random((n, width)) * 10.0 ** rng.integers(-6, 6, size=(n, width))
    start = rng.random((buckets, width)) * 1e3
    want = start.copy()
    np.add.at(want, at, rows)
    got = start.copy()
    add_rows_at(got, at, rows)
    assert got.tobytes() == want.tobytes()


def test_series_refuses_rows_that_do_not_match_its_resources() -> None:
    ts = TimeSeries(3, epoch_ns=100.0)
    with pytest.raises(ValueError, match=r"busy_ns has shape \(2, 2\), need one row of 3 resources"):
        ts.add(np.array([0, 1]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="per epoch index"):
        ts.add(np.array([0, 1]), np.ones((3, 3)))
    assert len(ts.busy) == 0  # (refused before anything changed)
    ts.add(np.array([5, 0, 5]), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.5, 0.5, 0.5]]))
    assert ts.busy[5].tolist() == [1.5, 2.5, 3.5] and ts.busy[0].tolist() == [4.0, 5.0, 6.0]
