"""Issue 13's papercuts, met trying the docs as a new user would: each one a regression test."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.io import load_machine, machine_source
from numasim.topology.io.toml_format import save_machine_toml


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


# -- a MACHINE argument: path or shipped name ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["kernel", "zonelists", "nosuch.toml"], ["topo", "import", "nosuch.txt", "-o", "out.toml"],
     ["topo", "show", "sub/nosuch"]],
)
def test_a_missing_file_is_reported_as_one(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"numasim: error: no such file: {argv[2]}\n"
    assert not (tmp_path / "out.toml").exists()


def test_a_folder_named_like_a_shipped_machine_does_not_shadow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "seed-003-2node").mkdir()
    assert machine_source("seed-003-2node") is None
    assert main(["kernel", "zonelists", "seed-003-2node"]) == 0
    assert capsys.readouterr().out == "Fallback order for Node 0: 0 1 \nFallback order for Node 1: 1 0 \n"
    # ./NAME is the folder, on purpose
    assert machine_source("./seed-003-2node") == Path("seed-003-2node")


def test_a_bare_name_that_is_a_file_here_is_that_file(
    small: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("seed-003-2node").write_text(Path(small).read_text())  # a file wins over the shipped name
    assert machine_source("seed-003-2node") == Path("seed-003-2node")
    assert len(load_machine("seed-003-2node").cpus) == 4
    # a sysfs tree under a name no shipped machine has is still found as a bare name
    from numasim.topology.io import write_sysfs_node_tree

    write_sysfs_node_tree(load_machine(small), tmp_path / "mybox")
    assert machine_source("mybox") == Path("mybox")
    assert len(load_machine("mybox").nodes) == 2
