# The two commands of the README's Quick start, plus lint. Each makes and uses its own .venv with the
# versions of uv.lock (uv itself is installed into the .venv from PyPI, pinned here). Byte-compiled, as
# the Dockerfile's and pip's installs are: where PYTHONDONTWRITEBYTECODE is set, every new Ray worker
# would otherwise compile each module it imports from source again (seconds of CPU a worker).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
UV_VERSION := 0.13.9
UV := UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv

.PHONY: demo test lint bench lock docs notebook

$(STAMP): pyproject.toml uv.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "uv==$(UV_VERSION)"
	$(UV) sync --frozen --inexact --extra dev --compile-bytecode --python $(BIN)/python
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/raybatch demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check raybatch tests jobs bench
	$(BIN)/ruff format --check raybatch tests jobs bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py --quick

# After a change of dependencies in pyproject.toml: the lock, and the same pins for pip (cluster nodes).
lock: $(STAMP)
	$(UV) lock
	$(UV) export --frozen --all-extras --no-hashes --no-emit-project --no-annotate -o constraints.txt

# The documentation site, built strictly: a broken link, anchor or reference fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The notebook run top to bottom on the sample corpus and stored with its outputs (commit the result).
notebook: $(STAMP)
	RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled $(BIN)/jupyter-execute --inplace --timeout=600 notebooks/quickstart.ipynb
