# Assay developer entry points. `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench ui

$(BIN)/assay: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/assay

demo: setup  ## the example suite end to end on the embedded defaults
	$(BIN)/assay demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint  ## ruff, mypy and the whole test suite (real Prefect API, real files)
	$(BIN)/pytest

bench: setup  ## 100,000-case scale benchmark (several minutes)
	$(BIN)/python bench/bench_scale.py
