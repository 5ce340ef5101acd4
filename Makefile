# Two entry points for a fresh clone: `make demo` (install + train + evaluate on the built-in
# demo data) and `make test` (install + the whole test suite). Both create .venv on first use.
# `make test-fast` leaves out the slow and multi-process tests, for use while working.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint clean

demo: $(VENV)/.installed
	$(BIN)/sodkit train configs/demo.yaml --overwrite

# Every test: in parallel on every core (pytest-xdist: each test computes with one thread, and
# one worker's test uses the core another's leaves idle while it waits), then the tests that
# measure time or memory (marker serial) alone. docs/testing.md has the figures.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n auto --dist loadscope -m "not serial"
	$(BIN)/python -m pytest -q -m serial

test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n auto --dist loadscope -m "not slow and not multiprocess and not serial"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check sodkit tests benchmarks

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e ".[test,export]"
	touch $@

clean:
	rm -rf $(VENV) output .pytest_cache
