"""Broker URLs: parsing, defaults and redaction.

``rabbitmq-stream[+tls]://user:pass@host:5552/vhost``, ``iggy[+tls]://user:pass@host:8090``,
``liftbridge://host:9292?nats=nats://host:4222``. A URL may name several nodes of one cluster,
comma-separated (``rabbitmq-stream://guest:guest@h1:5561,h2:5562,h3/``): clients that support
it try them in turn (:attr:`BrokerURL.addresses`); the others use the first.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote, urlsplit

from streamwire.errors import ConfigurationError

__all__ = ("QUERY_PARAMETERS", "SCHEMES", "BrokerURL", "check_query", "parse_url")

# scheme -> (protocol, tls, default port)
SCHEMES: Final[dict[str, tuple[str, bool, int]]] = {
    "rabbitmq-stream": ("rabbitmq", False, 5552),
    "rabbitmq-stream+tls": ("rabbitmq", True, 5551),
    "iggy": ("iggy", False, 8090),
    "iggy+tls": ("iggy", True, 8090),
    "liftbridge": ("liftbridge", False, 9292),
    "liftbridge+tls": ("liftbridge", True, 9292),
}


#: The query parameters each protocol's ``connect`` reads from its URL.
QUERY_PARAMETERS: Final[dict[str, frozenset[str]]] = {
    "rabbitmq": frozenset({"mechanism"}),
    "iggy": frozenset({"token"}),
    "liftbridge": frozenset({"nats"}),
}


@dataclass(frozen=True, slots=True)
class BrokerURL:
    """A parsed broker URL. ``password`` never appears in ``repr`` or ``str``."""

    scheme: str
    protocol: str
    tls: bool
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    path: str = ""
    query: dict[str, list[str]] = field(default_factory=dict)
    addresses: tuple[tuple[str, int], ...] = ()
    """Every ``(host, port)`` the URL names, in order (the first is ``host``/``port``)."""

    def __post_init__(self) -> None:
        if not self.addresses:
            object.__setattr__(self, "addresses", ((self.host, self.port),))

    def param(self, name: str, default: str | None = None) -> str | None:
        """The last value of a query parameter."""
        values = self.query.get(name)
        return values[-1] if values else default

    @property
    def vhost(self) -> str:
        """RabbitMQ virtual host: ``/`` when the path is empty, else the unquoted path."""
        return unquote(self.path[1:]) if len(self.path) > 1 else "/"

    def redacted(self) -> str:
        auth = f"{self.username}:***@" if self.username is not None else ""
        hosts = ",".join(
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.addresses
        )
        return f"{self.scheme}://{auth}{hosts}{self.path}"

    def __str__(self) -> str:
        return self.redacted()


def parse_url(url: str) -> BrokerURL:
    """Parse and validate a broker URL; unknown schemes raise :class:`ConfigurationError`."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a broker URL must be a str, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"invalid broker URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(f"unknown URL scheme {parts.scheme!r}; expected one of {known}")
    protocol, tls, default_port = SCHEMES[scheme]
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    addresses: list[tuple[str, int]] = []
    for entry in hostlist.split(","):
        try:  # each entry parsed as a URL of its own: brackets, ports and errors as urlsplit
            node = urlsplit(f"//{entry}")
            port = node.port
        except ValueError as exc:
            raise ConfigurationError(f"invalid broker URL: {exc} in {entry!r}") from None
        if not node.hostname:
            raise ConfigurationError(f"{scheme} URL has no host")
        addresses.append((node.hostname, port if port is not None else default_port))
    username = password = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user)
        password = unquote(secret) if has_password else None
    return BrokerURL(
        scheme=scheme,
        protocol=protocol,
        tls=tls,
        host=addresses[0][0],
        port=addresses[0][1],
        username=username,
        password=password,
        path=parts.path,
        query=_parse_query(parts.query),
        addresses=tuple(addresses),
    )


def _parse_query(query: str) -> dict[str, list[str]]:
    """``a=1&b=2`` as RFC 3986 reads it: percent-escapes decoded, ``+`` kept as it is. (The
    HTML form rule of ``+`` for a space would corrupt base64 values such as Iggy's
    personal access tokens, which contain ``+`` and ``/``.)"""
    parsed: dict[str, list[str]] = {}
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        parsed.setdefault(unquote(key), []).append(unquote(value))
    return parsed


def check_query(parsed: BrokerURL) -> None:
    """Refuse query parameters ``parsed``'s protocol does not read (a misspelt
    ``?nat=`` used to be ignored, and the client connected without what it said), naming
    the close matches and the known ones."""
    known = QUERY_PARAMETERS.get(parsed.protocol, frozenset())
    unknown = [name for name in parsed.query if name not in known]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=2, cutoff=0.6)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigurationError(
        f"{parsed.scheme}:// URLs take no query parameter {', '.join(parts)}; they take: "
        f"{', '.join(sorted(known)) or 'none'}"
    )
