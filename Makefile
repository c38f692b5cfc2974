# Two entry points do all set-up on a fresh machine: `make report` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -q --disable-pip-version-check
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.dev-installed
# The SLURM executor plugin lives apart from the venv's packages: Snakemake imports every
# plugin it can find at each start, so only runs with PYTHONPATH=$(SLURM_DIR) load it.
SLURM_DIR := $(VENV)/slurm
SLURM_STAMP := $(SLURM_DIR)/.installed
CORES ?= 1

.PHONY: report unlock test lint lock slurm system-deps test-deps clean-results

# The venv is rebuilt when the pins change: the runtime and the benchmark's (CPU) locks.
$(STAMP): requirements.txt requirements-bench.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt -r requirements-bench.txt
	$(PIP) --no-deps -r requirements-nodeps.txt
	$(PIP) --no-deps --no-build-isolation -e .
	@# a venv made before the plugin moved to $(SLURM_DIR) still holds it in site-packages
	$(BIN)/pip uninstall -q -y snakemake-executor-plugin-slurm snakemake-executor-plugin-slurm-jobstep 2>/dev/null || true
	touch $@

# Development tools: their own lock, kept out of the runtime's.
$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PIP) -r requirements-dev.txt -c requirements.txt -c requirements-bench.txt
	touch $@

$(SLURM_STAMP): $(STAMP) requirements-slurm.txt
	rm -rf $(SLURM_DIR)
	$(PIP) --no-deps --target $(SLURM_DIR) -r requirements-slurm.txt
	touch $@

slurm: $(SLURM_STAMP)

# Debian packages static figure export needs, and the tests (idempotent).
system-deps:
	@bash .ci/system-deps.sh chromium

test-deps:
	@bash .ci/system-deps.sh chromium sqlite3

# A run killed hard leaves Snakemake's lock behind: removed first when no snakemake runs here.
report: $(STAMP) system-deps
	$(BIN)/embprof unlock
	$(BIN)/snakemake --cores $(CORES) report

# Recovery after a hard kill, by hand (docs/troubleshooting.md).
unlock: $(STAMP)
	$(BIN)/embprof unlock

test: $(DEV_STAMP) $(SLURM_STAMP) test-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check src suite benchmarks tests tools
	$(BIN)/snakemake --lint

# Regenerate every lock from pyproject.toml in a scratch venv (tools/lock.sh).
lock:
	PYTHON=$(PYTHON) bash tools/lock.sh

clean-results:
	rm -rf results/* .snakemake
