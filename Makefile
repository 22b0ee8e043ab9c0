# Set-up and entry points. `make quickstart` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.memtrace-installed

.PHONY: setup quickstart check test test-fast bench clean

setup: $(STAMP)

# torch first, pinned to the CPU build: a bare `torch` requirement (pulled by sentence-transformers)
# would otherwise resolve to a multi-GB CUDA build on a fresh machine.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[model,dev]"
	@touch $(STAMP)

# The main job: attribution-guided prompt optimization on the bundled mini dataset with the
# embedded local model (no API key), then the HTML report.
quickstart: setup
	$(BIN)/memtrace-opt optimize experiments/configs/quickstart.yaml --resume
	$(BIN)/memtrace-opt report runs/quickstart

# Lint (ruff) everything; type-check (mypy --strict, settings in pyproject.toml) the whole memtrace_opt
# package (not systems/ or optimizers/); check the layers ([tool.importlinter] in pyproject.toml: nothing
# imports upward, only the CLI imports its commands).
check: setup
	$(BIN)/ruff check memtrace_opt systems optimizers tests experiments benchmarks
	$(BIN)/mypy memtrace_opt
	$(BIN)/lint-imports

# The checks, then the whole suite, real-model end-to-end tests included.
test: setup check
	$(BIN)/python -m pytest -q --timeout=1800

# Everything but the tests that load the real model.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(BIN)/memtrace-opt bench-trace --json

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
