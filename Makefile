# Two commands on a fresh clone: `make demo` and `make test`. Both bootstrap .venv idempotently.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit venv sysdeps clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# System services the tests need (sshd for the SSH tests, chromium for the HTML report test).
sysdeps:
	bash scripts/sysdeps.sh

demo: $(STAMP)
	$(BIN)/servelab demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

test: $(STAMP) sysdeps lint typecheck unit

clean:
	rm -rf $(VENV) .servelab .pytest_cache .mypy_cache .ruff_cache
