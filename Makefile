# The commands the README names. Every target sets up .venv first when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.runtime-installed
LOCK := requirements.lock
# The packaging validators (hadolint, compose, helm, kubernetes-validate, checkov) have a venv of
# their own: checkov's many pins must not constrain the project's dependencies.
TOOLS_VENV := .venv-tools
TOOLS_STAMP := $(TOOLS_VENV)/.installed

.DEFAULT_GOAL := help
# Parallel pytest workers: most of a test's time is spent waiting on Redis, SQL, sockets and
# processes, so three share two cores. Four, with the chaos run beside them, came under 14 minutes
# but loaded two cores six times over, and five timing-bound tests failed (docs/testing.md).
TEST_JOBS ?= 3
.PHONY: help install lock tools demo test test-fast coverage lint typecheck chaos-quick chaos bench bench-quick clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# Two stamps: the runtime alone (`make demo` needs no more) and the dev tools on top of it.
# Every install takes its versions from requirements.lock (pip constraints; `make lock`).
$(RUNTIME_STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e .
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its dev extras, at the locked versions

# A scratch venv resolves pyproject.toml afresh; its freeze (less the project) is the new lock.
lock: ## re-resolve every dependency to the newest version pyproject.toml allows, into requirements.lock
	rm -rf $(VENV)-lock
	$(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/python -m pip install --quiet --upgrade pip
	$(VENV)-lock/bin/python -m pip install --quiet -e '.[dev]'
	sed -n '/^#/p' $(LOCK) > $(LOCK).new
	$(VENV)-lock/bin/python -m pip freeze --exclude-editable >> $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(VENV)-lock
	@echo "requirements.lock re-resolved; run make install (and make test) before committing it"

$(TOOLS_STAMP): tools/requirements.txt
	test -x $(TOOLS_VENV)/bin/python || $(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TOOLS_VENV)/bin/python -m pip install --quiet -r tools/requirements.txt
	touch $(TOOLS_STAMP)

# The benchmarks' extras (celery-redbeat, matplotlib, ...) go into the same .venv, on demand.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e '.[dev,bench]'
	touch $(BENCH_STAMP)

tools: $(TOOLS_STAMP) ## create .venv-tools: the validators of the Dockerfile, compose file and Helm chart

demo: $(RUNTIME_STAMP) ## run the self-driving demo on the embedded defaults (installs the runtime only)
	$(BIN)/hbgw demo
	@echo "Next: $(BIN)/hbgw up starts the same stack for you to use; the README's \"Using it\" walks through it."

# The packaging tools' venv installs while the project's venv installs and lint and mypy run (two
# pips, then mypy's 30 s of one core, side by side); the tests and the chaos run come after.
test: ## the whole gate: lint, import layers, mypy, every tier with coverage (packaging checks included), the quick chaos run
	$(MAKE) -j3 --output-sync=target lint typecheck tools
	$(MAKE) coverage
	$(BIN)/python -m chaos quick

test-fast: $(STAMP) ## the unit tier (no server, no process) in seconds, last run's failures first: run it after every edit
	$(BIN)/python -m pytest tests/unit -q --ff

coverage: $(STAMP) ## every tier on TEST_JOBS=3 parallel workers with line and branch coverage: the report, coverage.json, the fire path's floor
	rm -f .coverage .coverage.* coverage.json
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile --cov --cov-report=
	$(BIN)/coverage report --skip-covered --sort=cover
	$(BIN)/coverage json -q -o coverage.json
	$(BIN)/python tools/coverage_floor.py coverage.json

lint: $(STAMP) ## ruff check, format check and the import-layer contract
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP) ## mypy, strict on the packages and the tests
	$(BIN)/mypy

chaos-quick: $(STAMP) ## the chaos harness, every fault once (under 5 minutes); exit 1 on a failure
	$(BIN)/python -m chaos quick

chaos: $(STAMP) ## the long chaos run (about 30 minutes; not in CI)
	$(BIN)/python -m chaos long

bench-quick: $(BENCH_STAMP) ## the benchmarks at small sizes (under 2 minutes); JSON in bench/results/
	$(BIN)/python -m bench quick

bench: $(BENCH_STAMP) ## every benchmark at full size and the plots (under 20 minutes; not in CI)
	$(BIN)/python -m bench full

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) $(TOOLS_VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info .coverage .coverage.* coverage.json htmlcov
