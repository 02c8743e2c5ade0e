"""``rabbitmq310``: Debian bookworm's rabbitmq-server 3.10, installed on the host (service
start suppressed), run as its own node with its own ports and epmd, every setting passed in
its environment."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import config
from .envfile import say, write_env
from .lanes import Context
from .procs import comm, pids_with_environ, terminate_rounds
from .readiness import port_open, rabbit_started

__all__ = ["CTL_BIN", "Node310", "down", "node_dir", "restart", "up"]

LOOPBACK = config.LOOPBACK
NAME = "rabbitmq310"
CTL_BIN = Path("/usr/sbin/rabbitmqctl")
POLICY = Path("/usr/sbin/policy-rc.d")


def _quiet(argv: list[str], log: Path | None = None, env: dict[str, str] | None = None) -> int:
    if log is None:
        return subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False
        ).returncode
    with log.open("a", encoding="utf-8") as out:
        return subprocess.run(argv, stdout=out, stderr=out, env=env, check=False).returncode


def install(log: Path) -> bool:
    """apt-get install rabbitmq-server (bookworm's 3.10) unless installed, with the service
    start suppressed, and the system service disabled: it would start a node on the default
    ports (5672 would collide with the 4.x broker)."""
    status = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "rabbitmq-server"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    if "install ok installed" in status:
        return True
    say(f"{NAME}: installing Debian bookworm rabbitmq-server (service start suppressed)")
    created = False
    if not POLICY.exists():
        POLICY.write_text("#!/bin/sh\nexit 101\n", encoding="utf-8")
        POLICY.chmod(0o755)
        created = True
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", *config.APT_WAIT, "install", "-y", "-q", "--no-install-recommends"]
    apt.append("rabbitmq-server")
    try:
        ok = _quiet(apt, log, env) == 0
        if not ok:
            _quiet(["apt-get", "update", "-q"], log, env)
            ok = _quiet(apt, log, env) == 0
    finally:
        if created:
            POLICY.unlink(missing_ok=True)
    if shutil.which("systemctl"):
        _quiet(["systemctl", "disable", "--now", "rabbitmq-server"], log)
    _quiet(["update-rc.d", "rabbitmq-server", "disable"], log)
    return ok


def node_dir(state: Path) -> Path:
    """The node's files (config, mnesia, logs) must be reachable by the rabbitmq user, which
    a clone under a private directory (mktemp -d makes them 0700) is not: the VM then exits at
    startup without writing a log. Such clones keep the node's files in /var/tmp instead."""
    want = state / NAME
    want.mkdir(parents=True, exist_ok=True)
    if _quiet(["id", "rabbitmq"]) != 0:
        return want
    if _quiet(["runuser", "-u", "rabbitmq", "--", "test", "-x", str(want)]) == 0:
        return want
    digest = hashlib.md5(str(state).encode(), usedforsecurity=False).hexdigest()[:12]
    return Path(f"/var/tmp/streamwire-rabbitmq310-{digest}")  # noqa: S108 (see docs/brokers.md)


@dataclass(frozen=True)
class Node310:
    dir: Path
    node: str
    stream_port: int
    amqp_port: int
    dist_port: int
    epmd_port: int

    @classmethod
    def select(cls, ctx: Context, directory: Path | None = None) -> Node310:
        return cls(
            dir=directory or node_dir(ctx.state),
            node=config.setting(NAME, "NODE", ctx.environ),
            stream_port=ctx.port(NAME, "STREAM_PORT"),
            amqp_port=ctx.port(NAME, "AMQP_PORT"),
            dist_port=ctx.port(NAME, "DIST_PORT"),
            epmd_port=ctx.port(NAME, "EPMD_PORT"),
        )

    @property
    def mnesia(self) -> Path:
        return self.dir / "data" / "mnesia"

    @property
    def node_log(self) -> Path:
        return self.dir / "data" / "log" / f"{self.node}.log"

    def env(self) -> dict[str, str]:
        d = self.dir
        return {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/var/lib/rabbitmq",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_USE_LONGNAME": "false",
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.mnesia),
            "RABBITMQ_LOG_BASE": str(d / "data" / "log"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            "ERL_EPMD_PORT": str(self.epmd_port),
        }

    def run(self, argv: list[str], log: Path | None = None) -> subprocess.CompletedProcess[str]:
        if log is None:
            return subprocess.run(argv, env=self.env(), capture_output=True, text=True, check=False)
        with log.open("a", encoding="utf-8") as out:
            return subprocess.run(
                argv, env=self.env(), stdout=out, stderr=subprocess.STDOUT, text=True, check=False
            )

    def ctl(self, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        return self.run(["timeout", "90", str(CTL_BIN), "-n", self.node, *args], log)

    def pids(self) -> list[int]:
        """This node's processes (the VM, epmd on its port, helpers). Neither the node name
        nor the epmd port shows on 3.10's command lines; the environment names both the node
        and its mnesia folder, and the folder is this harness's own: a second harness (another
        state folder) never stops a node that merely shares the name."""
        return pids_with_environ(
            {"RABBITMQ_NODENAME": self.node, "RABBITMQ_MNESIA_BASE": str(self.mnesia)}
        )

    def beam_pids(self) -> list[int]:
        return [p for p in self.pids() if comm(p) == "beam.smp"]

    def beam_running(self) -> bool:
        return bool(self.beam_pids())


def node_config(n: Node310) -> str:
    return f"""\
# written by integration/brokers.sh; loopback only
listeners.tcp.1 = {LOOPBACK}:{n.amqp_port}
stream.listeners.tcp.1 = {LOOPBACK}:{n.stream_port}
stream.advertised_host = localhost
stream.advertised_port = {n.stream_port}
distribution.listener.interface = {LOOPBACK}
distribution.listener.port_range.min = {n.dist_port}
distribution.listener.port_range.max = {n.dist_port}
"""


def _rabbitmq_ids() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("rabbitmq")
    return entry.pw_uid, entry.pw_gid


def up(ctx: Context) -> bool:
    (ctx.state / NAME).mkdir(parents=True, exist_ok=True)
    log = ctx.state / NAME / "harness.log"
    log.write_text("", encoding="utf-8")
    if not install(log):
        return ctx.unavailable(NAME, "apt-get install rabbitmq-server (bookworm) failed", log)
    n = Node310.select(ctx)
    (n.dir / "data" / "mnesia").mkdir(parents=True, exist_ok=True)
    (n.dir / "data" / "log").mkdir(parents=True, exist_ok=True)
    if n.dir != ctx.state / NAME:
        say(f"{NAME}: node files in {n.dir} ({ctx.state} is not readable by the rabbitmq user)")
    (n.dir / "rabbitmq.conf").write_text(node_config(n), encoding="utf-8")
    (n.dir / "enabled_plugins").write_text("[rabbitmq_stream].\n", encoding="utf-8")
    (n.dir / "advanced.config").write_text("[].\n", encoding="utf-8")
    (n.dir / "rabbitmq-env.conf").write_text("", encoding="utf-8")
    uid, gid = _rabbitmq_ids()
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(n.dir / "data")], check=True)
    os.chown(n.dir / "enabled_plugins", uid, gid)
    started = time.monotonic()
    if (
        n.beam_running()
        and port_open(LOOPBACK, n.stream_port)
        and n.ctl("-q", "status").returncode == 0
    ):
        say(f"{NAME}: already running")
    else:
        if not n.beam_running():
            if port_open(LOOPBACK, n.stream_port) or port_open(LOOPBACK, n.amqp_port):
                return ctx.unavailable(
                    NAME,
                    f"port {n.stream_port} or {n.amqp_port} is in use by a process outside the "
                    "harness",
                )
            (n.mnesia / f"{n.node}.pid").unlink(missing_ok=True)  # stale after an unclean stop
            say(
                f"{NAME}: starting {n.node} (stream {LOOPBACK}:{n.stream_port}, AMQP "
                f"{LOOPBACK}:{n.amqp_port})"
            )
            if n.run(["rabbitmq-server", "-detached"], log).returncode != 0:
                return ctx.unavailable(NAME, "rabbitmq-server -detached failed", log, n.node_log)
        if not rabbit_started(
            ctx.unavailable,
            NAME,
            "RabbitMQ 3.10",
            host=LOOPBACK,
            stream_port=n.stream_port,
            beam_running=n.beam_running,
            ctl=n.ctl,
            timeout=ctx.timeout(120),
            log=log,
            node_log=n.node_log,
        ):
            return False
        say(f"{NAME}: ready after {time.monotonic() - started:.0f} s")
    version = "".join(n.ctl("version").stdout.strip().splitlines()[-1:]).strip() or "unknown"
    write_env(
        ctx.state,
        NAME,
        {
            "HOST": LOOPBACK,
            "PORT": str(n.stream_port),
            "PORT_STREAM": str(n.stream_port),
            "PORT_AMQP": str(n.amqp_port),
            "PORT_DIST": str(n.dist_port),
            "PORT_EPMD": str(n.epmd_port),
            "URL": f"rabbitmq-stream://guest:guest@{LOOPBACK}:{n.stream_port}/",
            "AMQP_URL": f"amqp://guest:guest@{LOOPBACK}:{n.amqp_port}/",
            "VERSION": version,
            "USER": "guest",
            "PASSWORD": "guest",
            "VHOST": "/",
            "ADVERTISED_HOST": "localhost",
            "NODE": n.node,
            "BACKEND": "native-host",
            "LOG": str(n.node_log),
        },
    )
    say(f"{NAME}: up, version {version}")
    return True


def down(ctx: Context) -> None:
    (ctx.state / f"{NAME}.env").unlink(missing_ok=True)
    if not os.access(CTL_BIN, os.X_OK):
        return
    n = Node310.select(ctx)
    if n.beam_running():
        say(f"{NAME}: stopping {n.node}")
        (ctx.state / NAME).mkdir(parents=True, exist_ok=True)
        n.ctl("stop", log=ctx.state / NAME / "harness.log")
    terminate_rounds(n.pids)


def restart(ctx: Context) -> int:
    """Stops the VM (rabbitmqctl stop; SIGKILL after 30 s) and runs ``up``: 0, 1, or 3 when
    the harness does not run it."""
    n = Node310.select(ctx)
    if not n.beam_running():
        say(f"{NAME}: the harness does not run it; nothing to restart")
        return 3
    say(f"{NAME}: stopping {n.node} for a restart")
    n.ctl("stop", log=ctx.state / NAME / "harness.log")
    deadline = time.monotonic() + 30
    while n.beam_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    if n.beam_running():
        say(f"{NAME}: the VM did not stop within 30 s; killing it")
        terminate_rounds(n.beam_pids, rounds=1)
    (ctx.state / f"{NAME}.unavailable").unlink(missing_ok=True)
    return 0 if up(ctx) else 1
