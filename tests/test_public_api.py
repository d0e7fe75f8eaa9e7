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
