# streamwire — every target installs what it needs first (venv, packages, brokers).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev
BROKERS ?= all
PYTEST_ARGS ?=

.PHONY: help venv native dist matrix spark-matrix brokers lanes brokers-down test test-cluster test-faults unit lint docs format demo bench fuzz soak clean

help:
	@echo "make test    install everything (venv, packages, brokers) and run the whole suite"
	@echo "make demo    install everything and run a round trip through every available broker"
	@echo "make lint    ruff + mypy --strict on src, tests and integration, import-linter (+ shellcheck)"
	@echo "make docs    the documentation site in site/ (mkdocs --strict: guides + API reference)"
	@echo "make unit    unit and property tests only (no brokers), native core and pure Python"
	@echo "make native  (re)build the optional native core (Rust); the venv works without it"
	@echo "make dist    the sdist, native wheels for CPython 3.11-3.13 (manylinux) and a pure wheel"
	@echo "make matrix  unit + property tests on every other CPython, from its wheel, both cores"
	@echo "make spark-matrix  the Spark suite on pyspark 4.0 beside the pinned 4.x (brokers up)"
	@echo "make test-cluster  the three-node RabbitMQ cluster test (starts and stops the cluster)"
	@echo "make test-faults   the fault workloads and the Spark fault tests, SEEDS=20 runs of each, and their tables"
	@echo "                   (SEVERITY=long: 30 s black holes and pauses, a 200 ms link losing 5 %; or quick)"
	@echo "make bench   benchmarks (see docs/benchmarks.md)"
	@echo "make fuzz    coverage-guided fuzzing of every decoder (FUZZ_SECONDS per target)"
	@echo "make soak    bounded mixed publish/consume load, RSS over time (SOAK_SECONDS)"
	@echo "make brokers / brokers-down   start / stop the test brokers (integration/brokers.sh)"

# The editable install builds the optional native core (native/, Rust + PyO3) in place, as
# `pip install` does for a user (setup.py, setuptools-rust); native/build.py rebuilds it after
# an edit of native/ (and does nothing while it is current). A failed or impossible build (no
# cargo, no network for crates.io) leaves the pure-Python code in use: the venv stays usable
# and every target still passes. STREAMWIRE_PURE=1 forces pure Python.
$(VENV)/.installed: pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "streamwire needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/build.py $(wildcard native/src/*.rs)
$(VENV)/.native: $(VENV)/.installed $(NATIVE_SOURCES)
	@$(PY) native/build.py || echo "native core not built: streamwire runs in pure Python"
	@$(PY) -m streamwire --version
	@touch $@

venv: $(VENV)/.installed $(VENV)/.native

native: $(VENV)/.installed
	$(PY) native/build.py --force

# Release artefacts into dist/ (release/dist.py): the sdist, a native manylinux wheel for each
# of DIST_PYTHONS (built from the sdist, checked by auditwheel) and a pure py3-none-any wheel.
DIST_PYTHONS ?= 3.11 3.12 3.13
dist: venv
	$(PY) -m release.dist --python $(DIST_PYTHONS)

# tests/unit and tests/property on MATRIX_PYTHONS, each from its own wheel in a fresh venv,
# native core then pure Python (release/matrix.py); the main venv's CPython runs everything.
MATRIX_PYTHONS ?= 3.12 3.13
matrix: dist
	$(PY) -m release.matrix --python $(MATRIX_PYTHONS) -- -p no:cacheprovider

# The Spark suite on pyspark 4.0 beside the pinned 4.x (release/spark_matrix.py); needs the
# brokers up. Not part of `make test`: about 4 minutes per version.
spark-matrix: venv
	$(PY) -m release.spark_matrix

# Besides $(BROKERS): the RabbitMQ 4.0 and 3.10 compatibility lanes, three 4.3 nodes (the
# failover tests), a standalone Spark master with two workers and a Spark Connect server. Each
# may fail to start on a developer's machine (its tests then skip, saying why); under
# STREAMWIRE_REQUIRE=1 (.ci/run sets it) any that does not start fails this target, naming it.
LANES := rabbitmq40 rabbitmq310 rabbitmq-cluster spark spark-connect
brokers: venv
	integration/brokers.sh up $(BROKERS)
	@$(MAKE) --no-print-directory lanes

lanes: venv
	@failed=""; for lane in $(LANES); do \
	  integration/brokers.sh up $$lane || failed="$$failed $$lane"; done; \
	if [ -n "$$failed" ]; then \
	  echo "make brokers: did not start:$$failed (reasons in .brokers/<name>.unavailable)"; \
	  case "$$STREAMWIRE_REQUIRE" in 1|true|yes) exit 1;; esac; fi

brokers-down:
	integration/brokers.sh down all

# First the unit and property tests: on the other CPythons from their wheels, and on this venv's
# with its core, in the background while the brokers start; once $(BROKERS) are up, the suite in
# pure Python (STREAMWIRE_PURE=1) beside them, less the tests that run both cores themselves, the
# recovery tests (one_core), the Spark suite, the RabbitMQ 4.0/3.10 lanes and the unit tests
# (their pure runs are the matrix's), while the lanes start (none of those tests uses a lane or
# the harness's lock); the outputs are printed once all are done. Then the rest of the suite (every
# test that needs a broker) with whatever codec was selected (native when built), alone on the
# machine (docs/development.md, "CI": what runs twice and what once, and why).
MATRIX_OUT := .venv-matrix.out
PURE_OUT := .venv-pure.out
UNIT_OUT := .venv-unit.out
LANES_OUT := .venv-lanes.out
# a background step's last line: when it ended, and how
ENDED = rc=$$?; echo "[test] $$(date -u +%T) ended, exit $$rc"; exit $$rc
OFFLINE_TESTS := tests/unit tests/property
test: venv dist
	@echo "[test] $$(date -u +%T) CPython $(MATRIX_PYTHONS) and this venv's: unit + property tests in the background while the brokers start"
	@rm -f $(PURE_OUT) $(LANES_OUT); \
	( $(PY) -m release.matrix --python $(MATRIX_PYTHONS) -- $(PYTEST_ARGS); $(ENDED) ) > $(MATRIX_OUT) 2>&1 & matrix=$$!; \
	( $(PY) -m pytest $(OFFLINE_TESTS) $(PYTEST_ARGS); $(ENDED) ) > $(UNIT_OUT) 2>&1 & unit=$$!; \
	integration/brokers.sh up $(BROKERS); brokers=$$?; pure=1; lanes=1; \
	if [ $$brokers -eq 0 ]; then \
	  ( $(MAKE) --no-print-directory lanes; $(ENDED) ) > $(LANES_OUT) 2>&1 & lanes_job=$$!; \
	  echo "[test] $$(date -u +%T) the lanes ($(LANES)) starting in the background; the whole suite less unit tests, both_cores, one_core, Spark and the RabbitMQ 4.0/3.10 lanes, pure Python, beside the unit and property tests"; \
	  STREAMWIRE_PURE=1 STREAMWIRE_TEST_RABBITMQ_LANES=rabbitmq \
	    $(PY) -m pytest -m "not both_cores and not one_core" --ignore=tests/spark --ignore=tests/unit \
	    $(PYTEST_ARGS) > $(PURE_OUT) 2>&1; pure=$$?; \
	  echo "[test] $$(date -u +%T) the pure-Python pass exited $$pure"; \
	  wait $$lanes_job; lanes=$$?; \
	  echo "[test] $$(date -u +%T) the lanes exited $$lanes; output:"; cat $(LANES_OUT); fi; \
	wait $$unit; unit=$$?; \
	echo "[test] $$(date -u +%T) this venv's unit + property tests exited $$unit; output:"; cat $(UNIT_OUT); \
	wait $$matrix; matrix=$$?; \
	echo "[matrix] output:"; cat $(MATRIX_OUT); \
	if [ -f $(PURE_OUT) ]; then echo "[pure] output:"; cat $(PURE_OUT); fi; \
	if [ $$brokers -ne 0 ] || [ $$lanes -ne 0 ] || [ $$matrix -ne 0 ] || [ $$unit -ne 0 ] || [ $$pure -ne 0 ]; then \
	  echo "make test: brokers exited $$brokers, the lanes $$lanes, the matrix $$matrix, this venv's unit + property tests $$unit, the pure-Python pass $$pure"; exit 1; fi
	@echo "[test] $$(date -u +%T) the rest of the suite, native core"
	STREAMWIRE_DIST=$(CURDIR)/dist $(PY) -m pytest $(addprefix --ignore=,$(OFFLINE_TESTS)) $(PYTEST_ARGS)

# The fault workloads (tests/faults, docs/reliability.md): SEEDS seeded runs of every broker
# under every fault class, through the proxy and on the broker's process (make test runs one);
# each run's report goes to .faults/, and their table is printed whatever the outcome. Groups
# that share no broker run at once, and then the Spark sink's and source's fault tests, SEEDS
# runs each (tests/faults/groups.py). FIRST_SEED=K runs seeds K.. and adds their reports to
# those in .faults/ (a long run in rounds); from seed 0, .faults/ starts empty.
SEEDS ?= 20
FIRST_SEED ?= 0
SEVERITY ?= long
test-faults: venv brokers
	@if [ "$(FIRST_SEED)" = 0 ]; then rm -rf .faults; fi; status=0; \
	STREAMWIRE_FAULT_SEEDS=$(SEEDS) STREAMWIRE_FAULT_FIRST_SEED=$(FIRST_SEED) \
	  STREAMWIRE_FAULT_SEVERITY=$(SEVERITY) \
	  STREAMWIRE_FAULT_RESULTS=$(CURDIR)/.faults \
	  $(PY) -m tests.faults.groups .faults $(PYTEST_ARGS) || status=$$?; \
	$(PY) -m tests.faults.table .faults; $(PY) -m tests.spark.table .faults; exit $$status

# The cluster is not among `make brokers`' brokers: the test starts it (about 25 s the first
# time, 9 s later) and takes it down again unless it was already up.
test-cluster: venv
	STREAMWIRE_TEST_CLUSTER=1 $(PY) -m pytest tests/integration/rabbitmq/test_cluster.py $(PYTEST_ARGS)

unit: venv
	$(PY) -m pytest tests/unit tests/property $(PYTEST_ARGS)
	STREAMWIRE_PURE=1 $(PY) -m pytest tests/unit tests/property -m "not both_cores" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml): the guides in docs/ and the API reference rendered from
# the docstrings (docs/reference.md); any warning (a broken link, a name that does not
# resolve) fails it. CI builds it (.ci/run).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

lint: venv
	$(VENV)/bin/ruff check src tests bench examples fuzz integration release setup.py native/build.py
	$(VENV)/bin/ruff format --check src tests bench examples fuzz integration release setup.py native/build.py
	$(VENV)/bin/mypy --strict src tests bench examples fuzz integration release
	$(VENV)/bin/lint-imports --no-cache
	@if command -v shellcheck >/dev/null; then shellcheck integration/brokers.sh; \
	  else echo "shellcheck not installed: integration/brokers.sh not checked"; fi

format: venv
	$(VENV)/bin/ruff format src tests bench examples fuzz integration release
	$(VENV)/bin/ruff check --fix src tests bench examples fuzz integration release

demo: venv brokers
	$(VENV)/bin/streamwire demo

BENCH_ARGS ?=
bench: venv brokers
	$(PY) -m bench $(BENCH_ARGS)

SOAK_SECONDS ?= 300
SOAK_BROKERS ?= all
SOAK_RATE ?= 5000
soak: venv brokers
	$(PY) -m bench.soak --seconds $(SOAK_SECONDS) --brokers $(SOAK_BROKERS) --rate $(SOAK_RATE)

FUZZ_SECONDS ?= 60
fuzz: venv
	$(PY) fuzz/run.py --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) .venv-matrix .venv-matrix.out .venv-pure.out .venv-unit.out dist build .mypy_cache .ruff_cache .pytest_cache .hypothesis native/target
	rm -f src/streamwire/_native/_core*.so src/streamwire/_native/_core*.pyd
