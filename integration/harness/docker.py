"""The Docker backend: the services of ``docker-compose.yml`` (project ``streamwire``, profile
``compat`` for rabbitmq310), used when a Docker engine answers or when asked for. The
published ports are the compose file's; the env files record them as the native ones do."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import config
from .envfile import say, write_env
from .lanes import LIFTBRIDGE_LEADER_LINE, LIFTBRIDGE_SERVER_ID, Context
from .readiness import Outcome, file_contains, port_open, wait_until

__all__ = ["IGGY_IMAGE", "PROJECT", "Compose", "compose_command", "down", "restart", "up"]

LOOPBACK = config.LOOPBACK
PROJECT = "streamwire"
IGGY_IMAGE = "apache/iggy:0.9.0"
NATIVE_ONLY = ("rabbitmq40", "rabbitmq-cluster")


def _ok(argv: Sequence[str], timeout: float = 30) -> bool:
    try:
        return (
            subprocess.run(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                check=False,
            ).returncode
            == 0
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False


def compose_command() -> list[str] | None:
    """``docker compose`` when the plugin answers, else ``docker-compose``, else None."""
    if _ok(["docker", "compose", "version"]):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def engine_answers() -> bool:
    return shutil.which("docker") is not None and _ok(["docker", "info"], timeout=10)


@dataclass(frozen=True)
class Compose:
    command: tuple[str, ...]
    file: Path

    def argv(self, *args: str) -> list[str]:
        return [*self.command, "-f", str(self.file), "-p", PROJECT, "--profile", "compat", *args]

    def run(self, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        if log is None:
            return subprocess.run(self.argv(*args), capture_output=True, text=True, check=False)
        with log.open("a", encoding="utf-8") as out:
            return subprocess.run(
                self.argv(*args), stdout=out, stderr=subprocess.STDOUT, text=True, check=False
            )

    def output(self, *args: str) -> str:
        return self.run(*args).stdout.replace("\r", "")


def _last_word(text: str) -> str:
    words = text.split()
    return words[-1] if words else ""


def _main_port(ctx: Context, name: str) -> int:
    key = "STREAM_PORT" if name.startswith("rabbitmq") else "PORT"
    return ctx.port(name, key)


def up(ctx: Context, compose: Compose, name: str) -> bool:
    directory = ctx.state / name
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "compose.log"
    if name in NATIVE_ONLY:
        return ctx.unavailable(
            name,
            f"docker-compose.yml has no service for {name}: it runs with the native backend only "
            "(STREAMWIRE_BROKERS_BACKEND=native)",
        )
    port = _main_port(ctx, name)
    if compose.run("up", "-d", name, log=log).returncode != 0:
        return ctx.unavailable(name, f"docker compose up {name} failed", log)
    if (
        wait_until(lambda: port_open(LOOPBACK, port), lambda: True, ctx.timeout(120))
        is not Outcome.READY
    ):
        compose.run("logs", "--tail", "40", name, log=log)
        return ctx.unavailable(name, f"container {name} did not answer on {LOOPBACK}:{port}", log)
    facts: dict[str, str]
    if name in ("rabbitmq", "rabbitmq310"):
        compose.run("exec", "-T", name, "rabbitmqctl", "await_startup", log=log)
        lines = compose.output("exec", "-T", name, "rabbitmqctl", "version").strip().splitlines()
        version = lines[-1].strip() if lines else ""
        amqp = ctx.port(name, "AMQP_PORT")
        facts = {
            "PORT": str(port),
            "PORT_STREAM": str(port),
            "PORT_AMQP": str(amqp),
            "ADVERTISED_HOST": "localhost",
            "USER": "guest",
            "PASSWORD": "guest",
            "VHOST": "/",
        }
        url = f"rabbitmq-stream://guest:guest@{LOOPBACK}:{port}/"
    elif name == "nats":
        version = _last_word(compose.output("exec", "-T", "nats", "/nats-server", "--version"))
        if not version:
            rows = compose.output("images", "nats").splitlines()
            version = rows[1].split()[2] if len(rows) > 1 and len(rows[1].split()) > 2 else ""
        url = f"nats://{LOOPBACK}:{port}"
        facts = {"PORT": str(port), "PORT_CLIENT": str(port)}
    elif name == "liftbridge":
        lb_log = directory / "liftbridge.log"

        def leader() -> bool:
            logs = compose.run("logs", "--no-color", "liftbridge")
            lb_log.write_text(logs.stdout + logs.stderr, encoding="utf-8")
            return file_contains(lb_log, LIFTBRIDGE_LEADER_LINE)

        if wait_until(leader, lambda: True, ctx.timeout(60)) is not Outcome.READY:
            return ctx.unavailable(
                "liftbridge", "container liftbridge did not become metadata leader", lb_log
            )
        version = _last_word(compose.output("exec", "-T", "liftbridge", "liftbridge", "--version"))
        nats_port = ctx.port("nats")
        url = f"liftbridge://{LOOPBACK}:{port}"
        facts = {
            "PORT": str(port),
            "PORT_GRPC": str(port),
            "PORT_NATS": str(nats_port),
            "NATS_URL": f"nats://{LOOPBACK}:{nats_port}",
            "SERVER_ID": LIFTBRIDGE_SERVER_ID,
            "LOG": str(lb_log),
        }
    else:  # iggy
        version = IGGY_IMAGE.rsplit(":", 1)[1]
        url = f"iggy://iggy:iggy@{LOOPBACK}:{port}"
        facts = {"PORT": str(port), "PORT_TCP": str(port), "USER": "iggy", "PASSWORD": "iggy"}
    version = version or "unknown"
    write_env(
        ctx.state,
        name,
        {"HOST": LOOPBACK, "URL": url, "VERSION": version, "BACKEND": "docker", **facts},
    )
    say(f"{name}: up (docker, version {version})")
    return True


def down(ctx: Context, compose: Compose, name: str) -> None:
    compose.run("stop", name)
    compose.run("rm", "-f", name)
    (ctx.state / f"{name}.env").unlink(missing_ok=True)


def restart(ctx: Context, compose: Compose, name: str) -> int:
    """Restarts the container (its data stays) and runs ``up``: 0, 1, or 3 when no container
    of the harness runs ``name``."""
    directory = ctx.state / name
    directory.mkdir(parents=True, exist_ok=True)
    if not compose.output("ps", "-q", name).strip():
        say(f"{name}: no container of the harness runs it; nothing to restart")
        return 3
    say(f"{name}: restarting its container")
    if compose.run("restart", name, log=directory / "compose.log").returncode != 0:
        return 1
    (ctx.state / f"{name}.unavailable").unlink(missing_ok=True)
    return 0 if up(ctx, compose, name) else 1
