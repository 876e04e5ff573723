# Two commands for a newcomer (see README): `make conformance` and `make test`.
# Each sets up what it needs first (a virtualenv in .venv, Node packages for tla/).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Quint (tla/) is pinned in tla/package-lock.json; reinstalled when the lock changes.
NODE_STAMP := tla/node_modules/.installed

.PHONY: setup conformance test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

$(NODE_STAMP): tla/package-lock.json
	cd tla && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

setup: $(STAMP) $(NODE_STAMP)

## The main job: the conformance suite, with a readable verdict.
conformance: $(STAMP)
	$(BIN)/kipcheck conformance

## The tests: everything CI runs.
test: $(STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis tla/node_modules
