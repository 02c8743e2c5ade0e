"""Targets, folders, ports and node names, with their environment overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALL_TARGETS",
    "CLUSTER_SIZE",
    "DEFAULTS",
    "DOWN_ORDER",
    "KNOWN_TARGETS",
    "LOOPBACK",
    "OPTIONAL_WHEN_REQUIRED",
    "Paths",
    "SettingError",
    "cluster_port",
    "is_port_key",
    "must_start",
    "parse_port",
    "ready_timeout",
    "required",
    "resolved_environment",
    "setting",
    "settings",
    "variable",
]

LOOPBACK = "127.0.0.1"
#: apt-get waits for dpkg's lock instead of failing at once: the harness installs host
#: packages (debootstrap, rabbitmq-server, iptables) while tests may install another.
APT_WAIT = ("-o", "DPkg::Lock::Timeout=300")

#: What ``all`` means for ``up`` (the compatibility brokers and the cluster only when named).
ALL_TARGETS = ("rabbitmq", "nats", "liftbridge", "iggy")
#: Every name the harness accepts besides ``all``, in ``status all`` order.
KNOWN_TARGETS = (
    "rabbitmq",
    "rabbitmq40",
    "rabbitmq310",
    "rabbitmq-cluster",
    "nats",
    "liftbridge",
    "iggy",
    "spark",
    "spark-connect",
)
#: ``down`` stops dependants first (Liftbridge before its NATS).
DOWN_ORDER = (
    "spark-connect",
    "spark",
    "liftbridge",
    "iggy",
    "rabbitmq-cluster",
    "rabbitmq310",
    "rabbitmq40",
    "rabbitmq",
    "nats",
)

#: Targets that may stay down under ``STREAMWIRE_REQUIRE=1``: no Iggy server installs from a
#: registry (a real one joins when ``IGGY_SERVER_BIN`` or Docker is at hand).
OPTIONAL_WHEN_REQUIRED = frozenset({"iggy"})

CLUSTER_SIZE = 3
#: Stream replication ports of each node of the cluster (``REPLICATION_PORT``): node N
#: listens for its replicas' feeds on ``REPLICATION_PORT + (N-1) * REPLICA_PORTS`` onwards.
REPLICA_PORTS = 100


def required(environ: Mapping[str, str]) -> bool:
    """``STREAMWIRE_REQUIRE=1`` (``.ci/run`` sets it): what the harness starts must start,
    and a test that would skip for it fails."""
    return environ.get("STREAMWIRE_REQUIRE", "").lower() in {"1", "true", "yes"}


def must_start(failed: list[str], environ: Mapping[str, str]) -> list[str]:
    """Which of the ``failed`` targets make ``up`` fail: under :func:`required`, every one
    but :data:`OPTIONAL_WHEN_REQUIRED`; otherwise none (``up all`` reports what did not
    start and goes on, and the tests that need it skip saying why)."""
    if not required(environ):
        return []
    return [name for name in failed if name not in OPTIONAL_WHEN_REQUIRED]


#: Ports and node names per target; ``STREAMWIRE_<TARGET>_<KEY>`` overrides each one.
DEFAULTS: Mapping[str, Mapping[str, str]] = {
    "rabbitmq": {
        "STREAM_PORT": "5552",
        "TLS_PORT": "5551",
        "AMQP_PORT": "5672",
        "DIST_PORT": "25672",
        "EPMD_PORT": "4369",
        "NODE": "rabbit@localhost",
    },
    "rabbitmq40": {
        "STREAM_PORT": "5554",
        "TLS_PORT": "5555",
        "AMQP_PORT": "5674",
        "DIST_PORT": "25674",
        "EPMD_PORT": "4371",
        "NODE": "rabbit40@localhost",
    },
    "rabbitmq310": {
        "STREAM_PORT": "5553",
        "AMQP_PORT": "5673",
        "DIST_PORT": "25673",
        "EPMD_PORT": "4370",
        "NODE": "rabbit310@localhost",
    },
    "rabbitmq-cluster": {
        "STREAM_PORT": "5561",
        "TLS_PORT": "5571",
        "AMQP_PORT": "5681",
        "DIST_PORT": "25681",
        "EPMD_PORT": "4372",
        "REPLICATION_PORT": "6600",
        "NODE_PREFIX": "rabbitc",
    },
    "nats": {"PORT": "4222", "TLS_PORT": "4443"},
    "liftbridge": {"PORT": "9292", "TLS_PORT": "9293", "MTLS_PORT": "9294"},
    "iggy": {"PORT": "8090"},
    "spark": {"PORT": "7077", "UI_PORT": "18080"},
    "spark-connect": {"PORT": "15002"},
}


class SettingError(ValueError):
    """A setting from the environment is unusable (the harness exits 2)."""


def variable(target: str, key: str) -> str:
    """``STREAMWIRE_<TARGET>_<KEY>``: upper-cased, ``-`` written ``_``."""
    return "STREAMWIRE_" + f"{target}_{key}".upper().replace("-", "_")


def is_port_key(key: str) -> bool:
    return key == "PORT" or key.endswith("_PORT")


def parse_port(name: str, value: str, *, span: int = 1) -> int:
    """``value`` as a TCP port; ``span`` ports from it on must all exist (the cluster's)."""
    if not value.isascii() or not value.isdigit():
        raise SettingError(f"{name}={value} is not a port number")
    port = int(value)
    if not 1 <= port <= 65535 or port + span - 1 > 65535:
        raise SettingError(f"{name}={value} is not a port number")
    return port


def _span(target: str, key: str = "") -> int:
    if target != "rabbitmq-cluster":
        return 1
    return CLUSTER_SIZE * (REPLICA_PORTS if key == "REPLICATION_PORT" else 1)


def setting(target: str, key: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of ``key`` for ``target``: its override when set and not empty, else the
    default. Port keys are checked (:class:`SettingError`)."""
    env = os.environ if environ is None else environ
    try:
        default = DEFAULTS[target][key]
    except KeyError:
        raise SettingError(f"{target} has no setting {key}") from None
    name = variable(target, key)
    value = env.get(name) or default
    if is_port_key(key):
        parse_port(name, value, span=_span(target, key))
    elif not value or any(c.isspace() for c in value):
        raise SettingError(f"{name}={value!r} must be a word without spaces")
    return value


def settings(target: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting of ``target``, resolved and checked."""
    return {key: setting(target, key, environ) for key in DEFAULTS[target]}


def resolved_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``STREAMWIRE_<TARGET>_<KEY>`` for every target and key, resolved: what the bash lanes
    get, so that the defaults live here only. Raises :class:`SettingError` for a bad one."""
    resolved: dict[str, str] = {}
    for target in DEFAULTS:
        for key, value in settings(target, environ).items():
            resolved[variable(target, key)] = value
    return resolved


def cluster_port(base: int, node: int) -> int:
    """Node ``node`` (1..CLUSTER_SIZE) of the cluster uses ``base + node - 1``."""
    if not 1 <= node <= CLUSTER_SIZE:
        raise SettingError(f"node number must be 1..{CLUSTER_SIZE}, not {node}")
    return base + node - 1


def replication_ports(base: int, node: int) -> tuple[int, int]:
    """The first and last stream replication port of node ``node`` of the cluster."""
    first = base + (cluster_port(0, node)) * REPLICA_PORTS
    return first, first + REPLICA_PORTS - 1


def ready_timeout(default: float, environ: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for a broker: ``STREAMWIRE_READY_TIMEOUT`` or the broker's default."""
    env = os.environ if environ is None else environ
    raw = env.get("STREAMWIRE_READY_TIMEOUT", "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"STREAMWIRE_READY_TIMEOUT={raw} is not a number of seconds") from None
    if not value > 0:
        raise SettingError(f"STREAMWIRE_READY_TIMEOUT={raw} must be positive")
    return value


@dataclass(frozen=True)
class Paths:
    """The harness's folders."""

    repo: Path
    #: slow-to-build things (chroots, the Liftbridge binary): ``STREAMWIRE_CACHE``
    cache: Path
    #: the venv holding nats-server: ``STREAMWIRE_VENV``
    venv: Path
    #: runtime state, logs and data: ``STREAMWIRE_BROKERS_DIR``
    state: Path

    @classmethod
    def from_environ(cls, repo: Path, environ: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if environ is None else environ

        def folder(var: str, default: Path) -> Path:
            value = env.get(var)
            return Path(value).absolute() if value else default

        return cls(
            repo=repo,
            cache=folder("STREAMWIRE_CACHE", repo / ".cache"),
            venv=folder("STREAMWIRE_VENV", repo / ".venv"),
            state=folder("STREAMWIRE_BROKERS_DIR", repo / ".brokers"),
        )
