"""``integration/brokers.sh``'s verbs: up, down, status, restart, stop, start, fault."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from . import cluster, config, docker, lanes, nemesis, rabbit, rabbit310, spark
from .envfile import read_env, say
from .readiness import port_open

__all__ = ["REPO", "main"]

REPO = Path(__file__).resolve().parents[2]
_NAMES = (
    "rabbitmq|rabbitmq40|rabbitmq310|rabbitmq-cluster|nats|liftbridge|iggy|spark|spark-connect|all"
)
LOCK_WAIT = 900.0

USAGE = f"""\
usage: integration/brokers.sh up|down|status [{_NAMES}]
       integration/brokers.sh restart rabbitmq|rabbitmq40|rabbitmq310|nats
       integration/brokers.sh stop|start rabbitmq-cluster N   (N = 1..3)
       integration/brokers.sh fault pause|resume|kill|revive NAME [N]
         (NAME: rabbitmq|rabbitmq40|rabbitmq310|nats|liftbridge|iggy, or rabbitmq-cluster N;
          pause = SIGSTOP, resume = SIGCONT, kill = SIGKILL, revive = start again on its data)
       integration/brokers.sh fault partition rabbitmq-cluster N
       integration/brokers.sh fault heal rabbitmq-cluster
         (node N cut off from its peers, silently, both ways; heal ends it)
"""

#: The native lanes (the Docker backend runs every broker through docker.py).
PYTHON_UP: Mapping[str, Callable[[lanes.Context], bool]] = {
    "rabbitmq": lambda ctx: rabbit.up(ctx, "rabbitmq"),
    "rabbitmq40": lambda ctx: rabbit.up(ctx, "rabbitmq40"),
    "rabbitmq310": rabbit310.up,
    "rabbitmq-cluster": cluster.up,
    "nats": lanes.up_nats,
    "liftbridge": lanes.up_liftbridge,
    "iggy": lanes.up_iggy,
    "spark": spark.up_spark,
    "spark-connect": spark.up_spark_connect,
}
PYTHON_DOWN: Mapping[str, Callable[[lanes.Context], None]] = {
    "rabbitmq": lambda ctx: rabbit.down(ctx, "rabbitmq"),
    "rabbitmq40": lambda ctx: rabbit.down(ctx, "rabbitmq40"),
    "rabbitmq310": rabbit310.down,
    "rabbitmq-cluster": cluster.down,
    "nats": lanes.down_nats,
    "liftbridge": lanes.down_liftbridge,
    "iggy": lanes.down_iggy,
    "spark": spark.down_spark,
    "spark-connect": spark.down_spark_connect,
}
#: Targets that run natively whatever the backend (pyspark is a package of the venv).
NATIVE_ONLY = frozenset({"spark", "spark-connect"})


class UsageError(Exception):
    """Exit 2 with the usage text (after the message, if any)."""


def _usage(message: str = "") -> int:
    if message:
        say(message)
    sys.stderr.write(USAGE)
    return 2


def expand(target: str) -> list[str]:
    if target == "all":
        return list(config.ALL_TARGETS)
    if target in config.KNOWN_TARGETS:
        return [target]
    raise UsageError(f"unknown broker '{target}'")


# ---------------------------------------------------------------------------------------------
# backend


def select_backend(environ: Mapping[str, str]) -> tuple[str, docker.Compose | None]:
    """``docker`` (with its compose command) when asked for, or with ``auto`` when an engine
    answers and a compose command exists; else ``native``. Exits as the harness does: 1 when
    docker is asked for without compose, 2 for an unknown backend."""
    wanted = environ.get("STREAMWIRE_BROKERS_BACKEND", "") or "auto"
    if wanted not in ("auto", "docker", "native"):
        say("STREAMWIRE_BROKERS_BACKEND must be auto, docker or native")
        raise SystemExit(2)
    if wanted == "native":
        return "native", None
    engine = wanted == "auto" and docker.engine_answers()
    if wanted == "auto" and not engine:
        return "native", None
    command = docker.compose_command()
    if command is None:
        if wanted == "docker":
            say(
                "STREAMWIRE_BROKERS_BACKEND=docker, but neither 'docker compose' nor "
                "docker-compose is installed"
            )
            raise SystemExit(1)
        say("a Docker engine answers but no compose command is installed: using the native backend")
        return "native", None
    return "docker", docker.Compose(tuple(command), REPO / "docker-compose.yml")


# ---------------------------------------------------------------------------------------------
# the lock


def acquire_lock(state: Path, wait: float = LOCK_WAIT) -> int:
    """flock on ``state/.lock`` (the same lock older harnesses took), waiting up to ``wait``
    seconds; the descriptor is not inherited by the brokers."""
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                say(f"another brokers.sh up/down holds {state / '.lock'}")
                raise SystemExit(1) from None
            time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# status


def status_line(state: Path, name: str, probe: Callable[[str, int], bool] = port_open) -> str:
    """One line of ``status``: name, state (up, down, unavailable), version, detail."""
    env_file, why = state / f"{name}.env", state / f"{name}.unavailable"
    version, detail = "-", ""
    if env_file.is_file():
        facts = read_env(env_file)
        host, port = facts.get("HOST", ""), facts.get("PORT", "")
        version = facts.get("VERSION", "") or "-"
        detail = facts.get("URL", "")
        tls_port = facts.get("TLS_PORT", "")
        if name == "rabbitmq-cluster":
            ports = [v for k, v in facts.items() if k.startswith("PORT_NODE")]
        else:
            ports = [port]
        answers = any(p.isdigit() and probe(host, int(p)) for p in ports)
        if answers:
            status = "up"
            if tls_port:
                if tls_port.isdigit() and probe(host, int(tls_port)):
                    detail += f" + TLS on port {tls_port}"
                else:
                    detail += f" (TLS port {tls_port}: nothing answers)"
        else:
            status = "down"
            detail = f"stale {env_file}: nothing answers on {host}:{port}"
    elif why.is_file():
        status = "unavailable"
        lines = why.read_text(encoding="utf-8", errors="replace").splitlines()
        detail = f"({lines[0] if lines else ''})"
    else:
        status = "down"
    return f"{name:<16} {status:<12} {version:<14} {detail}"


# ---------------------------------------------------------------------------------------------
# verbs


def _up_one(name: str, ctx: lanes.Context, compose: docker.Compose | None) -> bool:
    (ctx.state / f"{name}.unavailable").unlink(missing_ok=True)
    try:
        if compose and name not in NATIVE_ONLY:
            return docker.up(ctx, compose, name)
        return PYTHON_UP[name](ctx)
    except Exception as exc:  # recorded like any other reason the broker is not up
        return ctx.unavailable(name, f"harness error in integration/harness: {exc!r}")


def _down_one(name: str, ctx: lanes.Context, compose: docker.Compose | None) -> bool:
    """Stops ``name``; a failure is reported and does not keep the others running."""
    try:
        if compose and name not in NATIVE_ONLY:
            docker.down(ctx, compose, name)
        else:
            PYTHON_DOWN[name](ctx)
    except Exception as exc:
        say(f"{name}: down failed: {exc!r}")
        return False
    say(f"{name}: down")
    return True


def _restart(name: str, ctx: lanes.Context, compose: docker.Compose | None) -> int:
    """Restarts the server on its data: 0 ready again, 1 not, 2 not supported for ``name``,
    3 when the harness does not run it."""
    if compose:
        return docker.restart(ctx, compose, name)
    if name == "nats":
        return lanes.restart_nats(ctx)
    if name in rabbit.SUITES:
        return rabbit.restart(ctx, name)
    if name == "rabbitmq310":
        return rabbit310.restart(ctx)
    say(
        f"{name}: restart is not supported (liftbridge: up starts it on a fresh data dir; iggy: "
        "no native server)"
    )
    return 2


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    paths = config.Paths.from_environ(REPO, env)
    try:
        config.resolved_environment(env)
        config.ready_timeout(1, env)
    except config.SettingError as exc:
        say(str(exc))
        return 2
    if args[:1] == ["fault"]:
        return _fault(args[1:], env, paths)
    if not 1 <= len(args) <= 3:
        return _usage()
    cmd, target = args[0], (args[1] if len(args) > 1 else "all")
    if cmd in ("stop", "start"):
        if target != "rabbitmq-cluster" or len(args) != 3:
            return _usage(f"{cmd} needs: rabbitmq-cluster N")
    elif len(args) > 2 or cmd not in ("up", "down", "status", "restart"):
        return _usage()
    try:
        targets = expand(target)
    except UsageError as exc:
        return _usage(str(exc))
    if cmd == "restart" and target == "all":
        return _usage("restart needs one broker name")
    if cmd == "down" and target == "all":
        targets += ["rabbitmq40", "rabbitmq310", "rabbitmq-cluster", "spark", "spark-connect"]
    paths.state.mkdir(parents=True, exist_ok=True)
    lock = acquire_lock(paths.state) if cmd != "status" else None
    try:
        backend, compose = select_backend(env)
        ctx = lanes.Context(paths, env)
        return _run(cmd, target, targets, args[2:], backend, ctx, compose, sys.stdout)
    finally:
        if lock is not None:
            os.close(lock)


def _fault(args: list[str], env: Mapping[str, str], paths: config.Paths) -> int:
    """``fault VERB NAME [N]`` (nemesis.py); takes the harness's lock only to revive, so that a
    pause can be ended while an ``up`` of another lane waits."""
    if len(args) not in (2, 3) or args[0] not in nemesis.VERBS:
        return _usage("fault needs: pause|resume|kill|revive|partition|heal NAME [N]")
    verb, target = args[0], args[1]
    node: int | None = None
    if len(args) == 3:
        if not args[2].isdigit():
            return _usage(f"fault: node {args[2]!r} is not a number")
        node = int(args[2])
    backend, _ = select_backend(env)
    if backend != "native":
        say("fault: faults act on the native backend's processes only")
        return 2
    ctx = lanes.Context(paths, env)
    if verb != "revive":
        return nemesis.fault(ctx, verb, target, node)
    lock = acquire_lock(paths.state)
    try:
        return nemesis.fault(ctx, verb, target, node)
    finally:
        os.close(lock)


def _run(
    cmd: str,
    target: str,
    targets: list[str],
    rest: list[str],
    backend: str,
    ctx: lanes.Context,
    compose: docker.Compose | None,
    out: TextIO,
) -> int:
    paths = ctx.paths
    if cmd == "up":
        say(f"backend: {backend}; state in {paths.state}; cache in {paths.cache}")
        failed = [name for name in targets if not _up_one(name, ctx, compose)]
        if failed:
            say(f"not available: {' '.join(failed)} (reasons in {paths.state}/<name>.unavailable)")
            must = config.must_start(failed, ctx.environ)
            if must:
                say(f"STREAMWIRE_REQUIRE=1 and {' '.join(must)} did not start: failing")
                return 1
            return 0 if target == "all" else 1
        return 0
    if cmd == "down":
        done = [_down_one(name, ctx, compose) for name in config.DOWN_ORDER if name in targets]
        return 0 if all(done) else 1
    if cmd == "restart":
        say(f"backend: {backend}; state in {paths.state}")
        return _restart(target, ctx, compose)
    if cmd in ("stop", "start"):
        if backend != "native":
            say("rabbitmq-cluster runs with the native backend only")
            return 2
        return cluster.stop(ctx, rest[0]) if cmd == "stop" else cluster.start(ctx, rest[0])
    # status
    names = list(config.KNOWN_TARGETS) if target == "all" else targets
    out.write(f"{'BROKER':<16} {'STATE':<12} {'VERSION':<14} DETAIL\n")
    for name in names:
        out.write(status_line(paths.state, name) + "\n")
        out.flush()
        cluster_root = paths.cache / "rabbitmq-sid-cluster"
        if name == "rabbitmq-cluster" and backend == "native" and cluster_root.is_dir():
            out.write("".join(line + "\n" for line in cluster.status_lines(ctx)))
    out.write(f"(backend: {backend})\n")
    return 0
