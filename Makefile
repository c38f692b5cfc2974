# Two entry points do all set-up on a fresh machine: `make report` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 1

.PHONY: report test lint lock system-deps clean-results

# The venv is rebuilt when the pins change.
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# Debian packages the tests and static figure export need (idempotent).
system-deps:
	@bash .ci/system-deps.sh

report: $(STAMP) system-deps
	$(BIN)/snakemake --cores $(CORES) report

test: $(STAMP) system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src workflow benchmark benchmarks tests
	$(BIN)/snakemake --lint

# Regenerate the lock from requirements.in in a scratch venv.
lock:
	rm -rf /tmp/embprof-lock && $(PYTHON) -m venv /tmp/embprof-lock
	/tmp/embprof-lock/bin/pip install -q -r requirements.in
	( echo "# Pinned lock of requirements.in (regenerate: make lock). torchrec is installed"; \
	  echo "# separately without dependencies (requirements-nodeps.txt): see requirements.in."; \
	  echo "torch==2.13.0"; \
	  /tmp/embprof-lock/bin/pip freeze | grep -v -E '^(torch|torchrec)==' ) > requirements.txt

clean-results:
	rm -rf results/* .snakemake
