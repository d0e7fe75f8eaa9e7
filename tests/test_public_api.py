"""The public API is explicit and importing numasim has no side effects."""

from __future__ import annotations

import subprocess
import sys

import numasim


def test_all_names_exist() -> None:
    for name in numasim.__all__:
        assert hasattr(numasim, name), name


def test_import_has_no_output() -> None:
    out = subprocess.run([sys.executable, "-c", "import numasim"], capture_output=True, text=True, check=True)
    assert out.stdout == "" and out.stderr == ""


def test_cli_registers_its_commands_once_per_process() -> None:
    import contextlib
    import io

    from numasim.cli import app, main

    for _ in range(3):
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["topo", "list"]) == 0
    names = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert len(names) == len(set(names)), names
