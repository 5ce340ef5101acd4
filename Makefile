# Two entry points for a fresh clone: `make demo` (install + train + evaluate on the built-in
# demo data) and `make test` (install + the test suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint clean

demo: $(VENV)/.installed
	$(BIN)/sodkit train configs/demo.yaml --overwrite

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

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
