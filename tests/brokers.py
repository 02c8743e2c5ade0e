"""Pytest-side view of the brokers started by ``integration/brokers.sh``.

The harness writes ``.brokers/<name>.env`` (``KEY=VALUE`` lines) for every broker that came up
and ``.brokers/<name>.unavailable`` (a reason, then the tail of the broker's log) for every broker
that could not be started. :func:`require` turns those files into a :class:`BrokerInfo`, or skips
the calling test with the recorded reason.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from integration.harness.config import KNOWN_TARGETS, OPTIONAL_WHEN_REQUIRED
from integration.harness.config import required as _required
from integration.harness.envfile import read_env  # the harness writes what tests read

__all__ = [
    "KNOWN_BROKERS",
    "OPTIONAL_WHEN_REQUIRED",
    "RESTARTABLE",
    "BrokerInfo",
    "HarnessError",
    "NotManaged",
    "brokers_dir",
    "cluster_start",
    "cluster_stop",
    "cluster_up",
    "down",
    "ensure_up",
    "read_env",
    "require",
    "require_tls",
    "required",
    "restart",
    "restart_blocker",
    "skip_missing",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
HARNESS = REPO_ROOT / "integration" / "brokers.sh"

#: Names accepted by ``integration/brokers.sh`` (besides ``all``).
KNOWN_BROKERS = frozenset(KNOWN_TARGETS)

#: Keys of the env file that become dedicated fields rather than ``extra`` entries.
_FIELD_KEYS = frozenset({"NAME", "HOST", "PORT", "URL", "VERSION"})

_CONNECT_TIMEOUT = 2.0
_MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class BrokerInfo:
    """Connection facts of one running broker, as recorded by the harness."""

    name: str
    host: str
    #: Named ports, e.g. ``{"stream": 5552, "amqp": 5672}``; ``"main"`` is the port checked by
    #: :func:`require`.
    ports: dict[str, int]
    url: str
    version: str
    #: Every other key of the env file, e.g. ``LOG``, ``NODE``, ``BACKEND``.
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int:
        """The main port (the one a client connects to first)."""
        return self.ports["main"]


def brokers_dir() -> Path:
    """Where the harness keeps its state (``STREAMWIRE_BROKERS_DIR`` or ``<repo>/.brokers``)."""
    override = os.environ.get("STREAMWIRE_BROKERS_DIR")
    return Path(override) if override else REPO_ROOT / ".brokers"


def _to_info(name: str, values: dict[str, str]) -> BrokerInfo:
    ports: dict[str, int] = {}
    if "PORT" in values:
        ports["main"] = int(values["PORT"])
    for key, value in values.items():
        if key.startswith("PORT_") and value.isdigit():
            ports[key.removeprefix("PORT_").lower()] = int(value)
    if "main" not in ports:
        raise ValueError(f"{name}: the env file records no PORT")
    extra = {
        key: value
        for key, value in values.items()
        if key not in _FIELD_KEYS and not key.startswith("PORT_")
    }
    return BrokerInfo(
        name=values.get("NAME", name),
        host=values.get("HOST", "127.0.0.1"),
        ports=ports,
        url=values.get("URL", ""),
        version=values.get("VERSION", "unknown"),
        extra=extra,
    )


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT):
            return True
    except OSError:
        return False


def _not_running(name: str) -> str:
    return f"broker {name} is not running: run integration/brokers.sh up {name}"


def required() -> bool:
    """``STREAMWIRE_REQUIRE=1`` (set by ``.ci/run``): a test that would skip for a missing
    broker, listener or tool that the harness starts fails instead, so that CI cannot pass
    with its brokers down."""
    return _required(os.environ)


def skip_missing(reason: str, *, name: str | None = None) -> NoReturn:
    """Skips the current test for something this machine lacks (a broker, a listener, Java,
    a cluster), or fails it under ``STREAMWIRE_REQUIRE=1`` unless ``name`` is one of
    :data:`OPTIONAL_WHEN_REQUIRED`."""
    if required() and name not in OPTIONAL_WHEN_REQUIRED:
        pytest.fail(
            f"{reason} (STREAMWIRE_REQUIRE=1: this run needs it; CI's brokers are started by "
            "make test, so a test that would skip for one fails)",
            pytrace=False,
        )
    pytest.skip(reason)


def require(name: str) -> BrokerInfo:
    """Returns the running broker ``name`` or skips the current test, saying why (fails it
    under ``STREAMWIRE_REQUIRE=1``, see :func:`skip_missing`).

    The reason is the one the harness recorded in ``.brokers/<name>.unavailable`` when it could
    not start the broker; otherwise it tells how to start it.
    """
    if name not in KNOWN_BROKERS:
        raise ValueError(f"unknown broker {name!r}; expected one of {sorted(KNOWN_BROKERS)}")
    state = brokers_dir()
    env_file = state / f"{name}.env"
    unavailable = state / f"{name}.unavailable"
    if env_file.is_file():
        info = _to_info(name, read_env(env_file))
        if _answers(info.host, info.port):
            return info
        skip_missing(
            f"{_not_running(name)} (recorded at {info.host}:{info.port}, nothing answers there)",
            name=name,
        )
    if unavailable.is_file():
        reason = unavailable.read_text(encoding="utf-8", errors="replace").strip()
        if len(reason) > _MAX_REASON_CHARS:
            reason = reason[:_MAX_REASON_CHARS] + " [...]"
        skip_missing(f"broker {name} is unavailable: {reason}", name=name)
    skip_missing(_not_running(name), name=name)


def require_tls(
    name: str, url_key: str, why_missing: str, *, prefix: str = "TLS_"
) -> tuple[str, str, int]:
    """``(URL, CA file, port)`` of ``name``'s TLS listener as the harness recorded it
    (``url_key``, ``TLS_CA``, ``TLS_PORT`` in its env file; ``prefix`` names another
    listener's, such as Liftbridge's ``MTLS_``), or skips saying why: ``why_missing`` tells
    where to look when the keys are missing."""
    info = require(name)
    ca_key, port_key = f"{prefix}CA", f"{prefix}PORT"
    missing = [k for k in (url_key, ca_key, port_key) if not info.extra.get(k)]
    if missing:
        skip_missing(
            f"broker {name} records no TLS facts ({', '.join(missing)} missing from "
            f".brokers/{name}.env): {why_missing}; run integration/brokers.sh up {name}",
            name=name,
        )
    url, ca, port = info.extra[url_key], info.extra[ca_key], int(info.extra[port_key])
    if not Path(ca).is_file():
        skip_missing(f"{ca_key}={ca} recorded by the harness does not exist", name=name)
    if not _answers(info.host, port):
        skip_missing(
            f"nothing answers on the recorded {name} TLS port {info.host}:{port}", name=name
        )
    return url, ca, port


# --- restarting a harness broker ---------------------------------------------------------

#: Brokers ``integration/brokers.sh restart`` can restart on their data.
RESTARTABLE = frozenset({"rabbitmq", "rabbitmq40", "rabbitmq310", "nats"})

#: Backends recorded in the env files by the harness (``BACKEND=``).
_HARNESS_BACKENDS = frozenset({"docker", "native", "native-host", "native-chroot"})


class HarnessError(Exception):
    """``integration/brokers.sh`` failed (the message holds its output)."""


class NotManaged(HarnessError):
    """The harness says it does not run that broker (exit status 3)."""


def restart_blocker(info: BrokerInfo) -> str | None:
    """Why a test must not restart ``info`` through the harness (``None``: it may).

    Only a broker the harness itself runs, on loopback, that the tests are not pointed away
    from, is restarted: ``STREAMWIRE_<NAME>_URL`` naming another broker, an env file that
    the harness did not write, or a native backend without root (the harness needs it) all
    say no.
    """
    name = info.name
    if name not in RESTARTABLE:
        return f"integration/brokers.sh cannot restart {name}"
    if not os.access(HARNESS, os.X_OK):
        return f"{HARNESS} is missing or not executable"
    override = os.environ.get(f"STREAMWIRE_{name.upper()}_URL")
    if override and override != info.url:
        return f"STREAMWIRE_{name.upper()}_URL points at {override}, not the harness's {name}"
    backend = info.extra.get("BACKEND", "")
    if backend not in _HARNESS_BACKENDS:
        return f"{name} was not started by integration/brokers.sh (backend {backend!r})"
    if info.host not in ("127.0.0.1", "localhost", "::1"):
        return f"{name} runs on {info.host}, not on this machine's loopback"
    if backend.startswith("native") and os.geteuid() != 0:
        return f"restarting the native {name} needs root"
    return None


async def _harness(*args: str, timeout: float) -> str:
    """Run ``integration/brokers.sh ARGS`` (same state directory as the tests) and return its
    output; :class:`NotManaged` on exit 3, :class:`HarnessError` on any other failure or
    after ``timeout`` seconds (the script is killed)."""
    env = {**os.environ, "STREAMWIRE_BROKERS_DIR": str(brokers_dir())}
    process = await asyncio.create_subprocess_exec(
        str(HARNESS),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout)
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    text = out.decode(errors="replace")
    if process.returncode == 3:
        raise NotManaged(text)
    if process.returncode != 0:
        raise HarnessError(f"brokers.sh {' '.join(args)} exited {process.returncode}:\n{text}")
    return text


async def restart(name: str, *, timeout: float = 240.0) -> str:
    """``integration/brokers.sh restart NAME``: stop the broker and start it again on its data;
    returns once it is ready (its output), within ``timeout`` seconds."""
    return await _harness("restart", name, timeout=timeout)


async def ensure_up(name: str, *, timeout: float = 240.0) -> None:
    """Start ``name`` with the harness unless its recorded main port answers (for a test's
    ``finally`` after a restart that may not have finished)."""
    env_file = brokers_dir() / f"{name}.env"
    if env_file.is_file():
        info = _to_info(name, read_env(env_file))
        if await asyncio.to_thread(_answers, info.host, info.port):
            return
    await _harness("up", name, timeout=timeout)


async def down(name: str, *, timeout: float = 120.0) -> str:
    """``integration/brokers.sh down NAME`` (for a test that started ``NAME`` itself)."""
    return await _harness("down", name, timeout=timeout)


async def cluster_stop(node: int, *, timeout: float = 120.0) -> str:
    """``integration/brokers.sh stop rabbitmq-cluster NODE``: stop one node of the three
    (:class:`NotManaged` when the harness runs no cluster)."""
    return await _harness("stop", "rabbitmq-cluster", str(node), timeout=timeout)


async def cluster_up(*, timeout: float = 300.0) -> str:
    """``integration/brokers.sh up rabbitmq-cluster``, whether or not node 1 answers (it
    starts stopped nodes and joins nodes left out of the cluster)."""
    return await _harness("up", "rabbitmq-cluster", timeout=timeout)


async def cluster_start(node: int, *, timeout: float = 240.0) -> str:
    """``integration/brokers.sh start rabbitmq-cluster NODE``: start that node again; returns
    once it is ready and sees node 1 running in its cluster."""
    return await _harness("start", "rabbitmq-cluster", str(node), timeout=timeout)


async def fault(verb: str, name: str, node: int | None = None, *, timeout: float = 240.0) -> str:
    """``integration/brokers.sh fault VERB NAME [NODE]``: ``pause`` (SIGSTOP), ``resume``
    (SIGCONT), ``kill`` (SIGKILL; returns once the process is gone) or ``revive`` (start again
    on its data; returns once it is ready), on a broker the harness runs."""
    extra = () if node is None else (str(node),)
    return await _harness("fault", verb, name, *extra, timeout=timeout)
