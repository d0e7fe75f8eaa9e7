"""PageMap: VMA runs, arbitrary page arrays, vectorised lookup, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numasim.engine import PageMap
from numasim.errors import WorkloadError


def test_assign_and_lookup_across_runs() -> None:
    pm = PageMap(4096)
    pm.assign(0x20000, np.array([3, 2], dtype=np.int16))
    pm.assign(0x0, np.array([0, 1], dtype=np.int16))
    got = pm.lookup(np.array([0x0, 0x1FFF, 0x20000, 0x21000, 0x21FFF], dtype=np.uint64))
    assert got.tolist() == [0, 1, 3, 2, 2]
    assert pm.pages_per_node(4).tolist() == [1, 1, 1, 1]
    assert pm.page_count == 4


def test_unmapped_address_is_named() -> None:
    pm = PageMap(4096)
    pm.assign(0x1000, np.array([0], dtype=np.int16))
    with pytest.raises(WorkloadError, match="0x2000 is not mapped"):
        pm.lookup(np.array([0x1000, 0x2000], dtype=np.uint64))
    with pytest.raises(WorkloadError, match="0x0 is not mapped"):
        pm.lookup(np.array([0], dtype=np.uint64))


def test_errors_on_bad_input() -> None:
    pm = PageMap(4096)
    with pytest.raises(WorkloadError, match="not aligned"):
        pm.assign(100, np.array([0], dtype=np.int16))
    pm.assign(0, np.array([0, 0], dtype=np.int16))
    pm.assign(4096, np.array([1], dtype=np.int16))
    with pytest.raises(WorkloadError, match="overlaps"):
        pm.lookup(np.array([0], dtype=np.uint64))
    with pytest.raises(WorkloadError, match="listed twice"):
        PageMap.from_arrays(np.array([1, 1], dtype=np.uint64), np.array([0, 1], dtype=np.int16))
    with pytest.raises(WorkloadError, match="power of two"):
        PageMap(3000)


@given(st.dictionaries(st.integers(0, 5000), st.integers(0, 7), min_size=1, max_size=200))
def test_from_arrays_matches_a_dict(mapping: dict[int, int]) -> None:
    pages = np.array(list(mapping), dtype=np.uint64)
    nodes = np.array(list(mapping.values()), dtype=np.int16)
    pm = PageMap.from_arrays(pages, nodes)
    offsets = np.arange(len(pages), dtype=np.uint64) % np.uint64(4096)
    got = pm.lookup(pages * np.uint64(4096) + offsets)
    assert got.tolist() == nodes.tolist()
