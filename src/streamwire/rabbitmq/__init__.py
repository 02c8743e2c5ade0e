"""RabbitMQ Streams over its binary protocol (port 5552).

``await streamwire.rabbitmq.connect("rabbitmq-stream://guest:guest@localhost:5552/")``
returns a :class:`Client`; see ``docs/rabbitmq.md``.
"""

from __future__ import annotations

from typing import Any

from streamwire._default import DEFAULT, Default
from streamwire._url import check_query, parse_url
from streamwire.errors import ConfigurationError
from streamwire.rabbitmq._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.rabbitmq.client import AddressResolver, Client, StreamInfo
from streamwire.rabbitmq.consumer import Consumer, ConsumerOptions
from streamwire.rabbitmq.credentials import Token, TokenProvider
from streamwire.rabbitmq.producer import BatchConfirmation, Producer, ProducerOptions
from streamwire.rabbitmq.protocol.errors import StreamsServerError
from streamwire.rabbitmq.protocol.machine import ConnectionSettings
from streamwire.rabbitmq.superstream import (
    NoRouteError,
    Router,
    SuperStreamConsumer,
    SuperStreamProducer,
    hash_partition,
)
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSConfig, TLSOptions

__all__ = (
    "StreamKwargs",
    "ProducerKwargs",
    "ConsumerKwargs",
    "AddressResolver",
    "BatchConfirmation",
    "Token",
    "TokenProvider",
    "Client",
    "ConnectionSettings",
    "Consumer",
    "ConsumerOptions",
    "NoRouteError",
    "Router",
    "Producer",
    "ProducerOptions",
    "ReconnectPolicy",
    "StreamInfo",
    "StreamsServerError",
    "SuperStreamConsumer",
    "SuperStreamProducer",
    "TLSOptions",
    "connect",
    "hash_partition",
)


async def connect(
    url: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    username: str | Default | None = DEFAULT,
    password: str | Default | None = DEFAULT,
    vhost: str | None = None,
    tls: TLSConfig | bool | None = None,
    timeout: float | None = 30.0,
    reconnect: ReconnectPolicy | Default | None = DEFAULT,
    address_resolver: AddressResolver | None = None,
    load_balancer: bool = False,
    settings: ConnectionSettings | None = None,
    token_provider: TokenProvider | None = None,
    tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
) -> Client:
    """Connect to a RabbitMQ Streams broker, from a URL and/or keyword arguments.

    ``timeout`` is one budget for TCP, TLS, the handshake and authentication. Explicit
    arguments override the URL; ``settings`` carries the less common connection options
    (mechanism, heartbeat, frame_max, connection name, inbound frame bound). ``reconnect``
    defaults to :class:`ReconnectPolicy` ``()``; ``None`` turns recovery off. With
    ``load_balancer=True`` every connection goes to the URL's address, re-dialled until the
    node behind it advertises the node wanted (leader for producers).

    A URL may name several nodes of a cluster (``rabbitmq-stream://u:p@h1:5561,h2:5562/``, as
    the Java and Go clients take a list of URIs): they are tried in turn for the first
    connection and whenever the locator connection is lost. ``host``/``port`` replace the
    list with one address.

    ``token_provider`` (an async function returning a :class:`Token`) supplies the password
    — an OAuth 2 access token, say — and is asked again before each token expires; the new
    one re-authenticates every open connection (:meth:`Client.update_secret`, RabbitMQ
    3.13+), so connections outlive their first token.

    ``tcp_keepalive``: how a connection gone silent without a reset is noticed, below the
    protocol's heartbeat (:class:`streamwire.transport.TcpKeepalive`: within about a minute
    by default; ``None``: the kernel's defaults, hours).

    Cancellation: nothing is left open.
    """
    base = settings or ConnectionSettings()
    changes: dict[str, Any] = {}
    use_tls: TLSConfig | None = None
    seeds: tuple[tuple[str, int], ...] = ()
    if url is not None:
        parsed = parse_url(url)
        if parsed.protocol != "rabbitmq":
            raise ConfigurationError(f"not a RabbitMQ Streams URL: {parsed}")
        check_query(parsed)
        if host is None and port is None:
            seeds = parsed.addresses
        host = host or parsed.host
        port = port or parsed.port
        if parsed.username is not None:
            changes["username"] = parsed.username
            changes["password"] = parsed.password or ""
        changes["vhost"] = parsed.vhost
        if parsed.tls and tls is None:
            tls = True
        if "mechanism" in parsed.query:
            changes["mechanism"] = parsed.param("mechanism")
    if username is not DEFAULT:
        changes["username"] = username
    if password is not DEFAULT:
        changes["password"] = password
    token: Token | None = None
    if token_provider is not None:
        token = await token_provider()
        changes["password"] = token.value
    if vhost is not None:
        changes["vhost"] = vhost
    if tls is True:
        use_tls = TLSOptions()
    elif tls not in (None, False):
        use_tls = tls  # type: ignore[assignment]
    final = ConnectionSettings(**{**_as_dict(base), **changes})
    client = Client(
        host or "localhost",
        port or (5551 if use_tls else 5552),
        final,
        tls=use_tls,
        timeout=timeout,
        reconnect=ReconnectPolicy() if reconnect is DEFAULT else reconnect,
        address_resolver=address_resolver,
        load_balancer=load_balancer,
        seeds=seeds,
        tcp_keepalive=tcp_keepalive,
    )
    await client._open()
    if token_provider is not None and token is not None:
        client._start_token_refresh(token_provider, token)
    return client


def _as_dict(settings: ConnectionSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}
