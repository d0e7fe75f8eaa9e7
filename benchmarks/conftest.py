"""Benchmarks run only with ``--run-benchmarks`` (same rule as ``tests/conftest.py``, which pytest does not load
when only ``benchmarks/`` is collected)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption(
            "--run-benchmarks", action="store_true", default=False, help="run benchmark-marked tests"
        )
    except ValueError:  # already added by tests/conftest.py when both folders are collected
        pass


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-benchmarks"):
        return
    skip = pytest.mark.skip(reason="benchmark: run with --run-benchmarks (make bench)")
    for item in items:
        if "benchmark" in item.keywords:
            item.add_marker(skip)
