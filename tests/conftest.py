"""Shared pytest configuration: benchmarks are skipped unless --run-benchmarks is given; fixtures used in several
directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60)
settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-benchmarks", action="store_true", default=False, help="run benchmark-marked tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-benchmarks"):
        return
    skip = pytest.mark.skip(reason="benchmark: run with --run-benchmarks (make bench)")
    for item in items:
        if "benchmark" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``NUMASIM_STATE_DIR`` for persistent machines, and no ``NUMASIM_MACHINE`` from the caller."""
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    return tmp_path / "machines"
