# The two commands a newcomer runs: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench validate report-check clean

$(BIN)/python:
	$(shell command -v $(PYTHON) || echo python3) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/numasim demo

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy numasim

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint typecheck pytest

# The validation suite: every real measurement predicted where it was not fitted (report written to
# experiments/validation/README.md), then its assertions. tests/validation also runs in `make test`.
validate: $(STAMP)
	$(BIN)/python experiments/validation/run.py
	$(BIN)/python -m pytest tests/validation

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks --run-benchmarks -s

# The sweep report rendered by headless Chromium (tests/sweep/test_report_browser.py, which `make test` skips on
# a machine without Chromium): installs Debian's chromium first when it is missing and we may.
report-check: $(STAMP)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m pytest tests/sweep/test_report_browser.py -rs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
