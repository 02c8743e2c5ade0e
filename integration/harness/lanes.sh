#!/usr/bin/env bash
# The harness steps that are still bash: rabbitmq310 on the host and the Docker backend.
#
# Internal: integration/brokers.sh runs `python -m integration.harness` (integration/harness/),
# which parses the verbs, takes the lock, picks the backend, runs rabbitmq, rabbitmq40, the
# cluster, NATS, Liftbridge and Iggy itself and calls this file for the rest, one broker per call:
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

# RabbitMQ 3.10 (bookworm, host install)
R310_NODE="$(setting rabbitmq310 NODE)"
R310_STREAM_PORT="$(setting rabbitmq310 STREAM_PORT)"
R310_AMQP_PORT="$(setting rabbitmq310 AMQP_PORT)"
R310_DIST_PORT="$(setting rabbitmq310 DIST_PORT)"
R310_EPMD_PORT="$(setting rabbitmq310 EPMD_PORT)" # own epmd, so stopping one broker never disturbs the other

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
# RabbitMQ 3.10 from bookworm, installed on the host, own node name, ports and epmd

R310_CTL_BIN=/usr/sbin/rabbitmqctl

r310_install() {
  local log="$1" policy=/usr/sbin/policy-rc.d created=0
  if dpkg-query -W -f='${Status}' rabbitmq-server 2>/dev/null | grep -q 'install ok installed'; then
    return 0
  fi
  say "rabbitmq310: installing Debian bookworm rabbitmq-server (service start suppressed)"
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    created=1
  fi
  local rc=0
  {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends rabbitmq-server; }
  } >>"$log" 2>&1 || rc=$?
  ((created)) && rm -f "$policy"
  # Never let the system service start this node with its default ports (5672 would collide
  # with the 4.x broker) at boot, nor now if the package managed to start it.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now rabbitmq-server >>"$log" 2>&1 || true
  fi
  update-rc.d rabbitmq-server disable >>"$log" 2>&1 || true
  return "$rc"
}

# The node's files (config, mnesia, logs) must be reachable by the rabbitmq user, which a
# clone under a private directory (mktemp -d makes them 0700) is not: the VM then exits at
# startup without writing a log. Such clones keep the node's files in /var/tmp instead.
r310_dir() {
  local want="$STATE/rabbitmq310"
  mkdir -p "$want"
  if ! id rabbitmq >/dev/null 2>&1 || runuser -u rabbitmq -- test -x "$want" 2>/dev/null; then
    printf '%s\n' "$want"
  else
    printf '/var/tmp/streamwire-rabbitmq310-%s\n' "$(printf %s "$STATE" | md5sum | cut -c1-12)"
  fi
}

r310_env() {
  local dir
  dir="$(r310_dir)"
  printf '%s\n' PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    RABBITMQ_NODENAME="$R310_NODE" RABBITMQ_USE_LONGNAME=false \
    RABBITMQ_NODE_IP_ADDRESS="$LOOPBACK" RABBITMQ_NODE_PORT="$R310_AMQP_PORT" \
    RABBITMQ_DIST_PORT="$R310_DIST_PORT" \
    "RABBITMQ_MNESIA_BASE=$dir/data/mnesia" "RABBITMQ_LOG_BASE=$dir/data/log" \
    "RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf" "RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins" \
    "RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config" \
    "RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf" \
    ERL_EPMD_ADDRESS="$LOOPBACK" ERL_EPMD_PORT="$R310_EPMD_PORT"
}

r310_run() {
  local -a envv
  mapfile -t envv < <(r310_env)
  env -i "${envv[@]}" "$@"
}

r310_ctl() { r310_run timeout 90 "$R310_CTL_BIN" -n "$R310_NODE" "$@"; }

# Processes of this node (the VM, epmd on its private port, helpers). Neither the node name nor
# the epmd port shows on 3.10's command lines, so look for the node name in their environment.
# A node counts as this harness's only when its mnesia folder is this state folder's too, so that
# a second harness (another STREAMWIRE_BROKERS_DIR) never stops a node that merely shares the name.
r310_pids() {
  local p env want_mnesia
  want_mnesia="RABBITMQ_MNESIA_BASE=$(r310_dir)/data/mnesia"
  for p in /proc/[0-9]*; do
    env="$(tr '\0' '\n' 2>/dev/null <"$p/environ")" || continue
    if grep -qxF "RABBITMQ_NODENAME=$R310_NODE" <<<"$env" && grep -qxF "$want_mnesia" <<<"$env"; then
      printf '%s\n' "${p#/proc/}"
    fi
  done
  return 0
}

r310_beam_running() {
  local p
  for p in $(r310_pids); do
    [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]] && return 0
  done
  return 1
}

# `rabbitmq-server -detached` returns before the VM exists: the VM counts as exited only once
# it was seen and then vanished, or when it has not appeared within R310_APPEAR_S seconds of the
# start (R310_STARTED_AT).
R310_APPEAR_S=30
R310_STARTED_AT=0
R310_SEEN=0
r310_alive() {
  if r310_beam_running; then
    R310_SEEN=1
    return 0
  fi
  ((R310_SEEN == 0 && $(now) - R310_STARTED_AT < R310_APPEAR_S))
}

up_rabbitmq310() {
  local dir log rc=0 t0 version uid gid
  mkdir -p "$STATE/rabbitmq310"
  log="$STATE/rabbitmq310/harness.log"
  : >"$log"
  local nodelog=""
  if ! r310_install "$log"; then
    mark_unavailable rabbitmq310 "apt-get install rabbitmq-server (bookworm) failed" "$log"
    return 1
  fi
  dir="$(r310_dir)"
  mkdir -p "$dir/data/mnesia" "$dir/data/log"
  nodelog="$dir/data/log/$R310_NODE.log"
  [[ "$dir" == "$STATE/rabbitmq310" ]] || say "rabbitmq310: node files in $dir ($STATE is not readable by the rabbitmq user)"
  cat >"$dir/rabbitmq.conf" <<EOF
# written by integration/brokers.sh; loopback only
listeners.tcp.1 = $LOOPBACK:$R310_AMQP_PORT
stream.listeners.tcp.1 = $LOOPBACK:$R310_STREAM_PORT
stream.advertised_host = localhost
stream.advertised_port = $R310_STREAM_PORT
distribution.listener.interface = $LOOPBACK
distribution.listener.port_range.min = $R310_DIST_PORT
distribution.listener.port_range.max = $R310_DIST_PORT
EOF
  printf '[rabbitmq_stream].\n' >"$dir/enabled_plugins"
  printf '[].\n' >"$dir/advanced.config"
  : >"$dir/rabbitmq-env.conf"
  uid="$(id -u rabbitmq)"
  gid="$(id -g rabbitmq)"
  chown -R "$uid:$gid" "$dir/data"
  chown "$uid:$gid" "$dir/enabled_plugins"
  t0=$(now)
  if r310_beam_running && port_open "$LOOPBACK" "$R310_STREAM_PORT" && r310_ctl -q status >/dev/null 2>&1; then
    say "rabbitmq310: already running"
  else
    if ! r310_beam_running; then
      if port_open "$LOOPBACK" "$R310_STREAM_PORT" || port_open "$LOOPBACK" "$R310_AMQP_PORT"; then
        mark_unavailable rabbitmq310 "port $R310_STREAM_PORT or $R310_AMQP_PORT is in use by a process outside the harness"
        return 1
      fi
      rm -f "$dir/data/mnesia/$R310_NODE.pid" # stale after an unclean stop
      say "rabbitmq310: starting $R310_NODE (stream $LOOPBACK:$R310_STREAM_PORT, AMQP $LOOPBACK:$R310_AMQP_PORT)"
      R310_STARTED_AT=$(now)
      R310_SEEN=0
      if ! r310_run rabbitmq-server -detached >>"$log" 2>&1 9>&-; then
        mark_unavailable rabbitmq310 "rabbitmq-server -detached failed" "$log" "$nodelog"
        return 1
      fi
    fi
    wait_until rabbitmq310 "$(ready_timeout 120)" r310_alive \
      "port_open $LOOPBACK $R310_STREAM_PORT" || rc=$?
    if ((rc != 0)); then
      local why
      why="did not open $LOOPBACK:$R310_STREAM_PORT within $(ready_timeout 120) s"
      ((rc == 2)) && why="the Erlang VM exited during startup"
      mark_unavailable rabbitmq310 "RabbitMQ 3.10 $why" "$log" "$nodelog"
      return 1
    fi
    if ! r310_ctl await_startup --timeout 60 >>"$log" 2>&1; then
      mark_unavailable rabbitmq310 "rabbitmqctl await_startup failed" "$log" "$nodelog"
      return 1
    fi
    say "rabbitmq310: ready after $(($(now) - t0)) s"
  fi
  version="$(r310_ctl version 2>/dev/null | tail -n1 | tr -d '[:space:]')"
  write_env rabbitmq310 "HOST=$LOOPBACK" "PORT=$R310_STREAM_PORT" "PORT_STREAM=$R310_STREAM_PORT" \
    "PORT_AMQP=$R310_AMQP_PORT" "PORT_DIST=$R310_DIST_PORT" "PORT_EPMD=$R310_EPMD_PORT" \
    "URL=rabbitmq-stream://guest:guest@$LOOPBACK:$R310_STREAM_PORT/" \
    "AMQP_URL=amqp://guest:guest@$LOOPBACK:$R310_AMQP_PORT/" "VERSION=${version:-unknown}" \
    "USER=guest" "PASSWORD=guest" "VHOST=/" "ADVERTISED_HOST=localhost" "NODE=$R310_NODE" \
    "BACKEND=native-host" "LOG=$nodelog"
  say "rabbitmq310: up, version ${version:-unknown}"
}

down_rabbitmq310() {
  local p i
  rm -f "$STATE/rabbitmq310.env"
  [[ -x "$R310_CTL_BIN" ]] || return 0
  if r310_beam_running; then
    say "rabbitmq310: stopping $R310_NODE"
    r310_ctl stop >>"$STATE/rabbitmq310/harness.log" 2>&1 || true
  fi
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [[ -n "$(r310_pids)" ]] || break
    for p in $(r310_pids); do
      if ((i < 10)); then kill -TERM "$p" 2>/dev/null || true; else kill -KILL "$p" 2>/dev/null || true; fi
    done
    sleep 0.5
  done
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
  if [[ "$BACKEND" == docker ]]; then
    docker_up "$UP_NAME"
  else
    "up_$UP_NAME"
  fi
}

one_down() {
  local name="$1"
  if [[ "$BACKEND" == docker ]]; then
    docker_down "$name"
  else
    "down_$name"
  fi
  say "$name: down"
}

# one_restart NAME: stop the server only (data, mounts, epmd and the env file stay), then `up`
# it again, which waits until it is ready. Exit 3: the harness does not run NAME.
one_restart() {
  local name="$1" i p
  if [[ "$BACKEND" == docker ]]; then
    mkdir -p "$STATE/$name"
    if [[ -z "$(compose ps -q "$name" 2>/dev/null)" ]]; then
      say "$name: no container of the harness runs it; nothing to restart"
      return 3
    fi
    say "$name: restarting its container"
    compose restart "$name" >>"$STATE/$name/compose.log" 2>&1 || return 1
    one_up "$name"
    return
  fi
  case "$name" in
    rabbitmq310)
      if ! r310_beam_running; then
        say "rabbitmq310: the harness does not run it; nothing to restart"
        return 3
      fi
      say "rabbitmq310: stopping $R310_NODE for a restart"
      r310_ctl stop >>"$STATE/rabbitmq310/harness.log" 2>&1 || true
      for ((i = 0; i < 60; i++)); do
        r310_beam_running || break
        sleep 0.5
      done
      if r310_beam_running; then
        say "rabbitmq310: the VM did not stop within 30 s; killing it"
        for p in $(r310_pids); do
          if [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]]; then
            kill -KILL "$p" 2>/dev/null || true
          fi
        done
        sleep 0.5
      fi
      ;;
    *)
      say "$name: restart is not supported (liftbridge: up starts it on a fresh data dir; iggy: no native server)"
      return 2
      ;;
  esac
  one_up "$name"
}

main() {
  local cmd="${1:-}" target="${2:-}"
  select_backend
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
