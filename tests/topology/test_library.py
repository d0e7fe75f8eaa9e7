"""Shipped machines: listed with a summary, found by name, misspellings suggest the closest name."""

from __future__ import annotations

from pathlib import Path

import pytest

import numasim.topology.library as library
from numasim.errors import NumasimError
from numasim.topology.builders import glueless, hypercube
from numasim.topology.io import load_machine
from numasim.topology.io.toml_format import save_machine_toml
from numasim.units import GiB


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "topologies"
    d.mkdir()
    save_machine_toml(
        glueless(2, cpus_per_node=8, memory_bytes=4 * GiB, name="seed-001-e5-2680v2"),
        d / "seed-001-e5-2680v2.toml",
    )
    m = hypercube(2, name="seed-002-opteron-4s").model_copy(update={"source": "Drepper part 4\nsecond line"})
    save_machine_toml(m, d / "seed-002-opteron-4s.toml")
    (d / "notes.txt").write_text("not a machine")
    monkeypatch.setattr(library, "shipped_dir", lambda: d)
    return d


def test_list_shipped_summarises_each_toml(shipped: Path) -> None:
    items = library.list_shipped()
    assert [s.name for s in items] == ["seed-001-e5-2680v2", "seed-002-opteron-4s"]
    first, second = items
    assert (first.nodes, first.cpus, first.memory_bytes) == (2, 16, 8 * GiB)
    assert second.source == "Drepper part 4"
    assert first.path == shipped / "seed-001-e5-2680v2.toml"


def test_find_shipped_by_name_with_or_without_suffix(shipped: Path) -> None:
    assert library.find_shipped("seed-002-opteron-4s") == shipped / "seed-002-opteron-4s.toml"
    assert library.find_shipped("seed-002-opteron-4s.toml") == shipped / "seed-002-opteron-4s.toml"


def test_unknown_name_lists_names_and_suggests(shipped: Path) -> None:
    with pytest.raises(NumasimError) as info:
        library.find_shipped("seed-002-opteron4s")
    text = str(info.value)
    assert "Did you mean 'seed-002-opteron-4s'?" in text
    assert "seed-001-e5-2680v2, seed-002-opteron-4s" in text
    assert isinstance(info.value, KeyError)


def test_load_machine_by_shipped_name(shipped: Path) -> None:
    m = load_machine("seed-001-e5-2680v2")
    assert m.name == "seed-001-e5-2680v2" and len(m.cpus) == 16


def test_load_machine_unknown_name_is_a_numasim_error(shipped: Path) -> None:
    with pytest.raises(NumasimError, match="no shipped machine 'nope'"):
        load_machine("nope")


def test_empty_or_missing_dir_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library, "shipped_dir", lambda: tmp_path / "absent")
    assert library.list_shipped() == []
    with pytest.raises(NumasimError, match="no .toml files"):
        library.find_shipped("x")


def test_shipped_dir_prefers_the_wheel_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site" / "numasim"
    monkeypatch.setattr(library, "_PACKAGE_DIR", pkg)
    assert library.shipped_dir() == tmp_path / "site" / "topologies"  # repo layout: beside the package
    (pkg / "_shipped" / "topologies").mkdir(parents=True)
    assert library.shipped_dir() == pkg / "_shipped" / "topologies"


def test_unreadable_file_is_listed_not_fatal(shipped: Path) -> None:
    (shipped / "broken.toml").write_text("nodes = [")
    names = {s.name: s for s in library.list_shipped()}
    assert names["broken"].source == "(unreadable)"
