"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``NUMASIM_STATE_DIR`` for persistent machines, and no ``NUMASIM_MACHINE`` from the caller."""
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    return tmp_path / "machines"
