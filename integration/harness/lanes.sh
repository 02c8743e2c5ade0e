#!/usr/bin/env bash
# The harness step that is still bash: the Docker backend (docker-compose.yml).
#
# Internal: integration/brokers.sh runs `python -m integration.harness` (integration/harness/),
# which parses the verbs, takes the lock, picks the backend, runs every native broker itself and
# calls this file for the Docker backend's, one broker per call:
#
#   lanes.sh _up1|_down1|_restart1 NAME
#
# with every STREAMWIRE_<TARGET>_<KEY> resolved and checked in the environment (defaults in
# integration/harness/config.py), STREAMWIRE_BROKERS_BACKEND set to docker or native, and
# STREAMWIRE_HARNESS_PYTHON naming the Python that env files and unavailability records are
# written with (integration/harness/envfile.py). See docs/brokers.md.

# Functions are also called indirectly ("up_$name", eval'd readiness checks):
# shellcheck disable=SC2317
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${STREAMWIRE_BROKERS_DIR:-$REPO/.brokers}"
COMPOSE_FILE="$REPO/docker-compose.yml"
COMPOSE_PROJECT="streamwire"

LOOPBACK=127.0.0.1

# setting TARGET KEY: $STREAMWIRE_<TARGET>_<KEY>, resolved and checked by the Python harness.
setting() {
  local var
  var="STREAMWIRE_$(printf '%s_%s' "$1" "$2" | tr '[:lower:]-' '[:upper:]_')"
  if [[ -z "${!var:-}" ]]; then
    printf '[brokers] %s is not set: run integration/brokers.sh, not lanes.sh\n' "$var" >&2
    exit 2
  fi
  printf '%s' "${!var}"
}

# rabbitmq with the Docker backend
RMQ_STREAM_PORT="$(setting rabbitmq STREAM_PORT)"
RMQ_AMQP_PORT="$(setting rabbitmq AMQP_PORT)"

# rabbitmq310 with the Docker backend
R310_STREAM_PORT="$(setting rabbitmq310 STREAM_PORT)"
R310_AMQP_PORT="$(setting rabbitmq310 AMQP_PORT)"

NATS_PORT="$(setting nats PORT)"

LIFTBRIDGE_PORT="$(setting liftbridge PORT)"

IGGY_IMAGE="apache/iggy:0.9.0"
IGGY_PORT="$(setting iggy PORT)"

# ----------------------------------------------------------------------------------------------
# small helpers

say() { printf '[brokers] %s\n' "$*" >&2; }

now() { date +%s; }

# port_open HOST PORT: true when a TCP connection succeeds within 2 s.
port_open() {
  # The single-quoted script is expanded by the inner bash:
  # shellcheck disable=SC2016
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

log_tail() {
  local f
  for f in "$@"; do
    if [[ -s "$f" ]]; then
      printf -- '--- last lines of %s ---\n' "$f"
      tail -n 15 "$f"
    fi
  done
}

# The Python harness writes env files, unavailability records and the TLS material.
harness_py() { "$STREAMWIRE_HARNESS_PYTHON" -P -m integration.harness "$@"; }

# mark_unavailable NAME REASON [LOGFILE...]: record why NAME is not running, print it, return 1.
mark_unavailable() {
  harness_py _unavailable "$@" || true
  return 1
}

# write_env NAME KEY=VALUE...: connection facts for tests/brokers.py.
write_env() { harness_py _write-env "$@"; }

# wait_until NAME TIMEOUT ALIVE_CMD READY_CMD: poll READY_CMD every 0.5 s; give up early when
# ALIVE_CMD fails (the process died). Returns 0 ready, 1 timeout, 2 died.
wait_until() {
  local name="$1" timeout="$2" alive="$3" ready="$4" deadline
  deadline=$(($(now) + timeout))
  while true; do
    if eval "$ready"; then
      return 0
    fi
    if ! eval "$alive"; then
      return 2
    fi
    if (($(now) >= deadline)); then
      return 1
    fi
    sleep 0.5
  done
}

ready_timeout() { printf '%s' "${STREAMWIRE_READY_TIMEOUT:-$1}"; }

# ----------------------------------------------------------------------------------------------
# backend selection

BACKEND=""
COMPOSE_CMD=()

find_compose() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE_CMD=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE_CMD=(docker-compose)
  else
    return 1
  fi
}

engine_answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }

select_backend() {
  local engine=0
  case "${STREAMWIRE_BROKERS_BACKEND:-auto}" in
    docker)
      if ! find_compose; then
        say "STREAMWIRE_BROKERS_BACKEND=docker, but neither 'docker compose' nor docker-compose is installed"
        exit 1
      fi
      BACKEND=docker
      ;;
    native) BACKEND=native ;;
    auto)
      engine_answers && engine=1
      if ((engine)) && find_compose; then
        BACKEND=docker
      else
        if ((engine)); then
          say "a Docker engine answers but no compose command is installed: using the native backend"
        fi
        BACKEND=native
      fi
      ;;
    *)
      say "STREAMWIRE_BROKERS_BACKEND must be auto, docker or native"
      exit 2
      ;;
  esac
}

# ----------------------------------------------------------------------------------------------
# Docker backend

compose() { "${COMPOSE_CMD[@]}" -f "$COMPOSE_FILE" -p "$COMPOSE_PROJECT" --profile compat "$@"; }

docker_up() {
  local name="$1" port version url extra=()
  local log="$STATE/$name/compose.log"
  mkdir -p "$STATE/$name"
  case "$name" in
    rabbitmq40 | rabbitmq-cluster)
      mark_unavailable "$name" "docker-compose.yml has no service for $name: it runs with the native backend only (STREAMWIRE_BROKERS_BACKEND=native)"
      return 1
      ;;
    rabbitmq) port=$RMQ_STREAM_PORT ;;
    rabbitmq310) port=$R310_STREAM_PORT ;;
    nats) port=$NATS_PORT ;;
    liftbridge) port=$LIFTBRIDGE_PORT ;;
    iggy) port=$IGGY_PORT ;;
  esac
  if ! compose up -d "$name" >"$log" 2>&1; then
    mark_unavailable "$name" "docker compose up $name failed" "$log"
    return 1
  fi
  local rc=0
  wait_until "$name" "$(ready_timeout 120)" true "port_open $LOOPBACK $port" || rc=$?
  if ((rc != 0)); then
    compose logs --tail 40 "$name" >>"$log" 2>&1 || true
    mark_unavailable "$name" "container $name did not answer on $LOOPBACK:$port" "$log"
    return 1
  fi
  case "$name" in
    rabbitmq | rabbitmq310)
      compose exec -T "$name" rabbitmqctl await_startup >>"$log" 2>&1 || true
      version="$(compose exec -T "$name" rabbitmqctl version 2>/dev/null | tr -d '\r' | tail -n1)"
      if [[ $name == rabbitmq ]]; then
        url="rabbitmq-stream://guest:guest@$LOOPBACK:$RMQ_STREAM_PORT/"
        extra=("PORT=$RMQ_STREAM_PORT" "PORT_STREAM=$RMQ_STREAM_PORT" "PORT_AMQP=$RMQ_AMQP_PORT")
      else
        url="rabbitmq-stream://guest:guest@$LOOPBACK:$R310_STREAM_PORT/"
        extra=("PORT=$R310_STREAM_PORT" "PORT_STREAM=$R310_STREAM_PORT" "PORT_AMQP=$R310_AMQP_PORT")
      fi
      extra+=("ADVERTISED_HOST=localhost" "USER=guest" "PASSWORD=guest" "VHOST=/")
      ;;
    nats)
      version="$(compose exec -T nats /nats-server --version 2>/dev/null | awk '{print $NF}' || true)"
      [[ -n "$version" ]] || version="$(compose images nats 2>/dev/null | awk 'NR == 2 {print $3}')"
      url="nats://$LOOPBACK:$NATS_PORT"
      extra=("PORT=$NATS_PORT" "PORT_CLIENT=$NATS_PORT")
      ;;
    liftbridge)
      local lblog="$STATE/liftbridge/liftbridge.log"
      rc=0
      wait_until liftbridge "$(ready_timeout 60)" true \
        "compose logs --no-color liftbridge >$(printf %q "$lblog") 2>&1 && lb_is_leader $(printf %q "$lblog")" ||
        rc=$?
      if ((rc != 0)); then
        mark_unavailable liftbridge "container liftbridge did not become metadata leader" "$lblog"
        return 1
      fi
      version="$(compose exec -T liftbridge liftbridge --version 2>/dev/null | awk '{print $NF}' || true)"
      url="liftbridge://$LOOPBACK:$LIFTBRIDGE_PORT"
      extra=("PORT=$LIFTBRIDGE_PORT" "PORT_GRPC=$LIFTBRIDGE_PORT" "PORT_NATS=$NATS_PORT"
        "NATS_URL=nats://$LOOPBACK:$NATS_PORT" "SERVER_ID=$LIFTBRIDGE_SERVER_ID" "LOG=$lblog")
      ;;
    iggy)
      version="${IGGY_IMAGE##*:}"
      url="iggy://iggy:iggy@$LOOPBACK:$IGGY_PORT"
      extra=("PORT=$IGGY_PORT" "PORT_TCP=$IGGY_PORT" "USER=iggy" "PASSWORD=iggy")
      ;;
  esac
  write_env "$name" "HOST=$LOOPBACK" "URL=$url" "VERSION=${version:-unknown}" "BACKEND=docker" \
    "${extra[@]}"
  say "$name: up (docker, version ${version:-unknown})"
}

docker_down() {
  local name="$1"
  compose stop "$name" >/dev/null 2>&1 || true
  compose rm -f "$name" >/dev/null 2>&1 || true
  rm -f "$STATE/$name.env"
}

# ----------------------------------------------------------------------------------------------
# Liftbridge with the Docker backend (the native lane is integration/harness/lanes.py)

LIFTBRIDGE_SERVER_ID=streamwire-lb

# logrus writes to stderr, which the harness sends to the log file.
lb_is_leader() { grep -q 'Server became metadata leader' "$1"; }

# ----------------------------------------------------------------------------------------------
# dispatch

# Runs in a child process so that `set -e` applies inside (it does not inside a function whose
# status is tested). Any unexpected failure is still recorded as unavailability.
UP_NAME=""
one_up() {
  UP_NAME="$1"
  trap 'rc=$?; if ((rc != 0)) && [[ ! -f "$STATE/$UP_NAME.unavailable" ]]; then
          mark_unavailable "$UP_NAME" "harness error (exit $rc) in integration/brokers.sh" || true
        fi' EXIT
  rm -f "$STATE/$UP_NAME.unavailable"
  docker_up "$UP_NAME"
}

one_down() {
  docker_down "$1"
  say "$1: down"
}

# one_restart NAME: restart the container (its data stays), then `up` it again, which waits
# until it is ready. Exit 3: no container of the harness runs NAME.
one_restart() {
  local name="$1"
  mkdir -p "$STATE/$name"
  if [[ -z "$(compose ps -q "$name" 2>/dev/null)" ]]; then
    say "$name: no container of the harness runs it; nothing to restart"
    return 3
  fi
  say "$name: restarting its container"
  compose restart "$name" >>"$STATE/$name/compose.log" 2>&1 || return 1
  one_up "$name"
}

main() {
  local cmd="${1:-}" target="${2:-}"
  select_backend
  if [[ "$BACKEND" != docker ]]; then
    say "lanes.sh runs the Docker backend only (the native brokers run in integration/harness)"
    exit 2
  fi
  case "$cmd" in
    _up1) one_up "$target" ;;
    _down1) one_down "$target" ;;
    _restart1) one_restart "$target" ;;
    *)
      say "lanes.sh is internal: run integration/brokers.sh"
      exit 2
      ;;
  esac
}

main "$@"
