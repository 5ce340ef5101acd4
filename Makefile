# Two entry points for a fresh clone: `make demo` (install + train + evaluate on the built-in
# demo data) and `make test` (install + the whole test suite). Both create .venv on first use.
# `make test-fast` leaves out the slow and multi-process tests, for use while working.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Where torch and torchvision come from. Empty: the default index (PyPI: on Linux, the CUDA build,
# about 6 GB installed). On a machine without an NVIDIA GPU, the PyTorch CPU wheel index installs
# a CPU-only torch (0.7 GB installed):  make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
# More pip options for every install, e.g. PIP_EXTRA="--index-url https://mirror.example/simple"
PIP_EXTRA ?=
CPU_INDEX := https://download.pytorch.org/whl/cpu

.PHONY: demo test test-fast lint clean

demo: $(VENV)/.installed
	$(BIN)/sodkit train configs/demo.yaml --overwrite

# Every test, in parallel on every core (pytest-xdist: each test computes with one thread, and
# one worker's test uses the core another's leaves idle while it waits; whole modules per
# worker, for their shared fixtures). docs/testing.md has the figures. First, the layers:
# lint-imports checks the import contracts in pyproject.toml (about a second).
# PYTHONDONTWRITEBYTECODE emptied: with it set, each worker compiles and assertion-rewrites
# every test module again on every run (collection 9.7 s instead of 6.4 s).
test: $(VENV)/.installed-test
	$(BIN)/lint-imports
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist loadscope --no-loadscope-reorder

test-fast: $(VENV)/.installed-test
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist loadscope --no-loadscope-reorder -m "not slow and not multiprocess"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check sodkit tests benchmarks
	$(BIN)/lint-imports

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q $(PIP_EXTRA) --upgrade pip
	@if [ -n "$(TORCH_INDEX)" ]; then \
	    echo "torch and torchvision from $(TORCH_INDEX)"; \
	    $(BIN)/pip install -q $(PIP_EXTRA) --index-url "$(TORCH_INDEX)" "torch>=2.4" "torchvision>=0.19"; \
	elif [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1; then \
	    echo "note: no NVIDIA GPU found: torch comes from the default index (CUDA build, ~6 GB);" \
	         "for a CPU-only one: rm -rf $(VENV) && make $(MAKECMDGOALS) TORCH_INDEX=$(CPU_INDEX)"; \
	fi
	$(BIN)/pip install -q $(PIP_EXTRA) -e .
	$(BIN)/python -m sodkit.install_check  # torch and torchvision work together, or what to do
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q $(PIP_EXTRA) -e ".[test,export,cutout,serve]"
	touch $@

clean:
	rm -rf $(VENV) output .pytest_cache
