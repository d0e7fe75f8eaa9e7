"""Shared fixtures of the virtual-tool tests: shipped machines and their shipped calibrations (loaded once)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from numasim.timing import resolve_calibration
from numasim.timing.model import Calibration
from numasim.topology.io import load_machine
from numasim.topology.model import Machine

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def seed001() -> tuple[Machine, Calibration]:
    m = load_machine("seed-001-e5-2680v2")
    return m, resolve_calibration(m)


@pytest.fixture(scope="session")
def seed003() -> tuple[Machine, Calibration]:
    m = load_machine("seed-003-2node")
    return m, resolve_calibration(m)


@pytest.fixture(scope="session")
def seed000() -> tuple[Machine, Calibration]:
    m = load_machine("seed-000-4node")
    return m, resolve_calibration(m)


def _load(name: str) -> ModuleType:
    path = REPO / "experiments" / name / "run.py"
    spec = importlib.util.spec_from_file_location(f"experiment_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_experiment() -> Callable[[str], ModuleType]:
    """``load_experiment(name)`` imports ``experiments/<name>/run.py`` as a module."""
    return _load
