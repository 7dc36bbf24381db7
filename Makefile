# Two entry points on a fresh machine: `make demo` and `make test`.
# Both create or reuse .venv in the repo root.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robodata-installed
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: venv demo test test-heavy lint bench-quick clean FORCE

# The strict editable install links every module by name: adding or removing one re-installs.
# MODULES holds a digest of the module list and is rewritten only when that list changes.
MODULES := $(VENV)/.robodata-modules
MODULE_LIST := $(shell find src assets resources sensors jobs -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null | sort | md5sum | cut -c1-32)
$(MODULES): FORCE
	@mkdir -p $(VENV); echo '$(MODULE_LIST)' | cmp -s - $@ || echo '$(MODULE_LIST)' > $@

$(STAMP): pyproject.toml $(MODULES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU build from local disk; never let a resolver pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	# strict editable install: assets/ resources/ sensors/ jobs/ are mapped to robodata_dagster.<folder>
	# through a link tree, which mypy and every tool see as the installed package (pyproject.toml).
	$(PY) -m pip install -q -e '.[platform,dev,viz]' --config-settings editable_mode=strict
	touch $(STAMP)

venv: $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: deploy/dagster.local.yaml
	mkdir -p $(DAGSTER_HOME)
	cp deploy/dagster.local.yaml $@

demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m robodata_dagster.demo --root .demo

# `make test` leaves out the heavy suites (-m heavy: minutes each, a daemon, a webserver, a browser);
# `make test-heavy` runs them; CI (.ci/run) runs both.
test: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m pytest -q -m "not heavy" tests

test-heavy: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m pytest -q -m heavy tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Every bench (bench/*.py with a __main__ block) at --quick, one after another, then one table;
# fails if any bench fails. Results also go to .bench/quick-results.jsonl.
bench-quick: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m bench --quick

clean:
	rm -rf .demo .bench .dagster_home
