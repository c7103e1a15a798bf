# Two commands on a fresh clone: `make demo` and `make test`. Both bootstrap .venv idempotently.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# the tests start hundreds of Python processes: let them reuse compiled bytecode (tests/conftest.py)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test quick lint typecheck unit venv sysdeps clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# System packages the tests need (sshd, Chromium, Prometheus, systemd, nginx, HAProxy, tinyproxy,
# Varnish):
# scripts/sysdeps.sh.
sysdeps:
	bash scripts/sysdeps.sh

demo: $(STAMP)
	$(BIN)/servelab demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite's time is mostly waits on real processes (routers, simulators, sshd, Prometheus), so it
# runs in TEST_WORKERS parallel workers, a test file per worker at a time (its module's stack is
# shared), the slowest files first (tests/support/order.py, from tests/file_times.json, which
# scripts/file_times.py writes from a run's junit report); the tests calibrated against wall-clock
# time (`solo`) then run alone. Both passes always run; either failing fails the target.
# The tests' `python -m servelab` calls (tests.support.run_cli) are forked by a fork server per
# worker (tests/support/forkcli.py: the interpreter's start and the imports paid once);
# SERVELAB_TEST_FORK=0 make unit execs every call instead.
TEST_WORKERS ?= 3
unit: $(STAMP)
	@$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 -m "not solo"; a=$$?; \
	$(BIN)/pytest -q --durations=10 -m solo; b=$$?; \
	test $$a -eq 0 -a $$b -eq 0

test: $(STAMP) sysdeps lint typecheck unit

# The fast tier: the pure tests (tests/core), the fuzz tier (tests/core/fuzz: hypothesis over every
# parser and typed value a user types, 60 examples each, about 10 s, run last with its time
# printed), the house rules and the docs' coverage; no process, no network, no service. Not a
# substitute for `make test`.
# SERVELAB_FUZZ_EXAMPLES=2000 make quick hunts longer.
quick: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest -q -n 2 tests/core --ignore=tests/core/fuzz tests/test_architecture.py tests/test_docs.py
	@$(BIN)/python -c "import subprocess, sys, time; t = time.monotonic(); \
	  code = subprocess.call(['$(BIN)/pytest', '-q', '-n', '2', 'tests/core/fuzz']); \
	  print(f'fuzz tier (tests/core/fuzz): {time.monotonic() - t:.1f} s'); sys.exit(code)"

clean:
	rm -rf $(VENV) .servelab .pytest_cache .mypy_cache .ruff_cache
