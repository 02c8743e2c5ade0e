#!/usr/bin/env bash
# Broker harness for streamwire's integration tests (docs/brokers.md).
#
#   integration/brokers.sh up|down|status [rabbitmq|rabbitmq40|rabbitmq310|nats|liftbridge|iggy|all]
#   integration/brokers.sh restart rabbitmq|rabbitmq40|rabbitmq310|nats
#   integration/brokers.sh up|down|status rabbitmq-cluster
#   integration/brokers.sh stop|start rabbitmq-cluster N      (N = 1..3: one node down / back)
#
# The harness is the Python package integration/harness (python -m integration.harness); this
# file finds a Python >= 3.11 for it: the venv's ($STREAMWIRE_VENV, default <repo>/.venv), else
# python3.13, python3.12, python3.11 or python3 on PATH. The standard library is all it needs.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for python in "${STREAMWIRE_VENV:-$repo/.venv}/bin/python" python3.13 python3.12 python3.11 python3; do
  if command -v "$python" >/dev/null 2>&1 &&
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    # -P: the current directory stays off sys.path (only this checkout's package is imported)
    PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -P -m integration.harness "$@"
  fi
done
printf '[brokers] no Python >= 3.11 found (looked for the venv'"'"'s, python3.13 ... python3)\n' >&2
exit 2
