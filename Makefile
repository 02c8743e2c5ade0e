# streamwire — every target installs what it needs first (venv, packages, brokers).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev
BROKERS ?= all
PYTEST_ARGS ?=

.PHONY: help venv native brokers brokers-down test test-cluster unit lint format demo bench fuzz soak clean

help:
	@echo "make test    install everything (venv, packages, brokers) and run the whole suite"
	@echo "make demo    install everything and run a round trip through every available broker"
	@echo "make lint    ruff + mypy --strict on src, tests and integration (+ shellcheck)"
	@echo "make unit    unit and property tests only (no brokers), native core and pure Python"
	@echo "make native  (re)build the optional native core (Rust); the venv works without it"
	@echo "make test-cluster  the three-node RabbitMQ cluster test (starts and stops the cluster)"
	@echo "make bench   benchmarks (see docs/benchmarks.md)"
	@echo "make fuzz    coverage-guided fuzzing of every decoder (FUZZ_SECONDS per target)"
	@echo "make soak    bounded mixed publish/consume load, RSS over time (SOAK_SECONDS)"
	@echo "make brokers / brokers-down   start / stop the test brokers (integration/brokers.sh)"

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "streamwire needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

# The optional native core (native/, Rust + PyO3), built into src/streamwire/_native/. A failed
# or impossible build (no cargo, no network for crates.io) leaves the pure-Python code in use:
# the venv stays usable and every target still passes. STREAMWIRE_PURE=1 forces pure Python.
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/build.py $(wildcard native/src/*.rs)
$(VENV)/.native: $(VENV)/.installed $(NATIVE_SOURCES)
	@$(PY) native/build.py || echo "native core not built: streamwire runs in pure Python"
	@touch $@

venv: $(VENV)/.installed $(VENV)/.native

native: $(VENV)/.installed
	$(PY) native/build.py

brokers: venv
	integration/brokers.sh up $(BROKERS)
	-integration/brokers.sh up rabbitmq40   # optional: the 4.0 compatibility matrix
	-integration/brokers.sh up rabbitmq310  # optional: the 3.10 compatibility matrix
	-integration/brokers.sh up rabbitmq-cluster  # optional: three 4.3 nodes, the failover tests

brokers-down:
	integration/brokers.sh down all

# The whole suite runs once with whatever codec was selected (native when built), then the
# whole suite again in pure Python (STREAMWIRE_PURE=1), so both codecs stay tested end to end.
test: venv brokers
	$(PY) -m pytest $(PYTEST_ARGS)
	STREAMWIRE_PURE=1 $(PY) -m pytest $(PYTEST_ARGS)

# The cluster is not among `make brokers`' brokers: the test starts it (about 25 s the first
# time, 9 s later) and takes it down again unless it was already up.
test-cluster: venv
	STREAMWIRE_TEST_CLUSTER=1 $(PY) -m pytest tests/integration/rabbitmq/test_cluster.py $(PYTEST_ARGS)

unit: venv
	$(PY) -m pytest tests/unit tests/property $(PYTEST_ARGS)
	STREAMWIRE_PURE=1 $(PY) -m pytest tests/unit tests/property $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check src tests bench examples fuzz integration
	$(VENV)/bin/ruff format --check src tests bench examples fuzz integration
	$(VENV)/bin/mypy --strict src tests bench examples fuzz integration
	@if command -v shellcheck >/dev/null; then shellcheck integration/brokers.sh; \
	  else echo "shellcheck not installed: integration/brokers.sh not checked"; fi

format: venv
	$(VENV)/bin/ruff format src tests bench examples fuzz integration
	$(VENV)/bin/ruff check --fix src tests bench examples fuzz integration

demo: venv brokers
	$(VENV)/bin/streamwire demo

BENCH_ARGS ?=
bench: venv brokers
	$(PY) -m pip install --quiet -e '.[bench]'
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
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis native/target
	rm -f src/streamwire/_native/_core*.so src/streamwire/_native/_core*.pyd
