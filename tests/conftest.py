"""Shared pytest configuration: benchmarks are skipped unless --run-benchmarks is given."""

from __future__ import annotations

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
