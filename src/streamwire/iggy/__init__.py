"""Apache Iggy over its binary TCP protocol (server 0.9.x, binary protocol 0.11.0).

``await streamwire.iggy.connect("iggy://iggy:iggy@localhost:8090")`` returns a
:class:`Client`; see ``docs/iggy.md``. Addresses are ``"stream/topic"``, or a bare
``"stream"`` for its default topic (:data:`DEFAULT_TOPIC`).
"""

from __future__ import annotations

from streamwire._default import DEFAULT, Default
from streamwire._url import check_query, parse_url
from streamwire.errors import ConfigurationError
from streamwire.iggy._connection import Connection, Credentials
from streamwire.iggy._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.iggy._options import DEFAULT_TOPIC
from streamwire.iggy.client import Client, PartitionOffsets
from streamwire.iggy.consumer import Consumer
from streamwire.iggy.options import ConsumerOptions, ProducerOptions
from streamwire.iggy.producer import BatchConfirmation, Producer
from streamwire.iggy.protocol.batch import StoredMessage
from streamwire.iggy.protocol.constants import PROTOCOL_VERSION, PROTOCOL_VERSION_TEXT, AckLevel
from streamwire.iggy.protocol.errors import (
    ERRORS,
    EvictionReason,
    IggyServerError,
    IncompatibleServer,
    UnknownIggyServerError,
    error_class,
)
from streamwire.iggy.protocol.machine import MachineSettings, ReplyStats
from streamwire.iggy.protocol.mapping import KEY_HEADER
from streamwire.iggy.protocol.users import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSConfig, TLSOptions

__all__ = (
    "StreamKwargs",
    "ProducerKwargs",
    "ConsumerKwargs",
    "DEFAULT_TOPIC",
    "ERRORS",
    "KEY_HEADER",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSION_TEXT",
    "AckLevel",
    "BatchConfirmation",
    "Client",
    "Connection",
    "Consumer",
    "ConsumerOptions",
    "Credentials",
    "EvictionReason",
    "GlobalPermissions",
    "IggyServerError",
    "IncompatibleServer",
    "MachineSettings",
    "PartitionOffsets",
    "Permissions",
    "Producer",
    "ProducerOptions",
    "ReconnectPolicy",
    "ReplyStats",
    "StoredMessage",
    "StreamPermissions",
    "TLSOptions",
    "TopicPermissions",
    "UnknownIggyServerError",
    "connect",
    "error_class",
)


async def connect(
    url: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    username: str | None = None,
    password: str | None = None,
    token: str | None = None,
    tls: TLSConfig | bool | None = None,
    timeout: float | None = 30.0,
    request_timeout: float = 30.0,
    heartbeat_interval: float | None = 5.0,
    max_in_flight: int = 3,
    reconnect: ReconnectPolicy | Default | None = DEFAULT,
    settings: MachineSettings | None = None,
    tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
) -> Client:
    """Connect to an Iggy 0.9 server and log in, from a URL and/or keyword arguments.

    ``iggy://user:pass@host:8090`` (``iggy+tls://`` for TLS; ``?token=...`` or ``token=``
    logs in with a personal access token instead). Explicit arguments override the URL.
    ``timeout`` is one budget for TCP, TLS and the login; ``request_timeout`` bounds each
    reply afterwards (the server drops malformed requests silently, so this is how a
    stalled request ends); ``heartbeat_interval`` pings an idle connection.
    ``max_in_flight`` is how many reads and SendMessages one connection may have awaiting
    replies: a producer keeps up to that many batches in flight, and a consumer polls up to
    ``max_in_flight - 1`` batches ahead, so that the server always has the next request
    while the client works (1: strictly one request at a time, as the official SDKs; the
    server answers a connection's requests in order either way). With more than one, a
    batch that fails may be followed by later batches that were stored. ``reconnect``
    (default :class:`ReconnectPolicy` ``()``; ``None`` turns it off) re-dials lost
    connections on their next use. Credentials default to ``iggy``/``iggy``.
    ``tcp_keepalive``: how a connection gone silent without a reset is noticed while no
    request waits (:class:`streamwire.transport.TcpKeepalive`: within about a minute by
    default; ``None``: the kernel's defaults, hours).

    Cancellation: nothing is left open.
    """
    use_tls: TLSConfig | None = None
    if url is not None:
        parsed = parse_url(url)
        if parsed.protocol != "iggy":
            raise ConfigurationError(f"not an Iggy URL: {parsed}")
        check_query(parsed)
        host = host or parsed.host
        port = port or parsed.port
        username = username if username is not None else parsed.username
        password = password if password is not None else parsed.password
        token = token if token is not None else parsed.param("token")
        if parsed.tls and tls is None:
            tls = True
    if tls is True:
        use_tls = TLSOptions()
    elif tls not in (None, False):
        use_tls = tls  # type: ignore[assignment]
    if token is None and username is None:
        username, password = "iggy", password if password is not None else "iggy"
    credentials = Credentials(username=username, password=password or "", token=token)
    machine = settings or MachineSettings(
        request_timeout=request_timeout,
        heartbeat_interval=heartbeat_interval,
        max_in_flight=max_in_flight,
    )
    client = Client(
        host or "localhost",
        port or 8090,
        credentials,
        tls=use_tls,
        timeout=timeout,
        settings=machine,
        reconnect=ReconnectPolicy() if reconnect is DEFAULT else reconnect,
        tcp_keepalive=tcp_keepalive,
    )
    return await client._open()
