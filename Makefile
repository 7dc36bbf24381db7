# Two entry points on a fresh machine: `make demo` and `make test`.
# Both create or reuse .venv in the repo root.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robodata-installed
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: venv demo test test-heavy lint bench-quick clean FORCE

# robodata and robodata_testing are imported from src/ itself (a path entry), so adding a module there
# needs nothing. robodata_dagster keeps the strict editable link tree (its assets/ resources/ sensors/
# jobs/ folders are mapped into it): adding or removing one of its modules re-installs. MODULES holds a
# digest of that module list and is rewritten only when the list changes.
MODULES := $(VENV)/.robodata-modules
MODULE_LIST := $(shell find src/robodata_dagster assets resources sensors jobs -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null | sort | md5sum | cut -c1-32)
LINK_TREE := build/__editable__.robodata-0.1.0-py3-none-any
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
	# Only robodata_dagster needs the link tree. robodata and robodata_testing leave it and are found in
	# src/ through robodata-src.pth, a plain path entry read after the link tree's .pth (site reads them in
	# name order), so tracebacks and "go to definition" land in src/ (tests/core/test_editable_install.py).
	rm -rf $(LINK_TREE)/robodata $(LINK_TREE)/robodata_testing
	echo '$(CURDIR)/src' > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/robodata-src.pth"
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
