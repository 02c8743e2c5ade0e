# streamwire — every target installs what it needs first (venv, packages, brokers).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev
BROKERS ?= all
PYTEST_ARGS ?=

.PHONY: help venv brokers brokers-down test test-cluster unit lint format demo bench fuzz soak clean

help:
	@echo "make test    install everything (venv, packages, brokers) and run the whole suite"
	@echo "make demo    install everything and run a round trip through every available broker"
	@echo "make lint    ruff + mypy --strict on src and tests"
	@echo "make unit    unit and property tests only (no brokers)"
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

venv: $(VENV)/.installed

brokers: venv
	integration/brokers.sh up $(BROKERS)
	-integration/brokers.sh up rabbitmq40   # optional: the 4.0 compatibility matrix
	-integration/brokers.sh up rabbitmq310  # optional: the 3.10 compatibility matrix

brokers-down:
	integration/brokers.sh down all

test: venv brokers
	$(PY) -m pytest $(PYTEST_ARGS)

# The cluster is not among `make brokers`' brokers: the test starts it (about 25 s the first
# time, 9 s later) and takes it down again unless it was already up.
test-cluster: venv
	STREAMWIRE_TEST_CLUSTER=1 $(PY) -m pytest tests/integration/rabbitmq/test_cluster.py $(PYTEST_ARGS)

unit: venv
	$(PY) -m pytest tests/unit tests/property $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check src tests bench examples fuzz
	$(VENV)/bin/ruff format --check src tests bench examples fuzz
	$(VENV)/bin/mypy --strict src tests bench examples fuzz

format: venv
	$(VENV)/bin/ruff format src tests bench examples fuzz
	$(VENV)/bin/ruff check --fix src tests bench examples fuzz

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
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
