"""Liftbridge: gRPC control plane, publishing straight onto NATS with envelope acks.

``await streamwire.liftbridge.connect("liftbridge://localhost:9292?nats=nats://localhost:4222")``
returns a :class:`Client`; see ``docs/liftbridge.md``.
"""

from __future__ import annotations

from streamwire._default import DEFAULT, Default
from streamwire._extras import require

# before anything that imports them: a missing extra is a ConfigurationError naming the install
require("Liftbridge", "liftbridge", "nats", "grpc", "google.protobuf")

import ssl
from collections.abc import Mapping, Sequence

from streamwire._url import check_query, parse_url
from streamwire.errors import ConfigurationError, ConnectError
from streamwire.liftbridge._grpc import (
    AddressResolver,
    grpc_credentials,
    without_client_certificate,
)
from streamwire.liftbridge._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.liftbridge.activity import ActivityEvent, ActivityOp, ActivityStream
from streamwire.liftbridge.client import Client, ClientStats
from streamwire.liftbridge.consumer import Consumer, ConsumerOptions
from streamwire.liftbridge.group import GroupConsumer, GroupConsumerKwargs, GroupConsumerOptions
from streamwire.liftbridge.producer import MessageTooLarge, Producer, ProducerOptions
from streamwire.liftbridge.protocol.errors import (
    AckError,
    AckTimeout,
    EncryptionFailed,
    FailedPrecondition,
    IncorrectOffset,
    InvalidArgument,
    LiftbridgeServerError,
    NoResponders,
    ResourceExhausted,
    StreamAlreadyExists,
    StreamNotFound,
    TooLarge,
)
from streamwire.liftbridge.protocol.groups import Membership
from streamwire.liftbridge.protocol.messages import AckPolicy
from streamwire.liftbridge.protocol.metadata import (
    Broker,
    Metadata,
    PartitionInfo,
    StreamInfo,
    StreamOptions,
)
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSConfig, TLSOptions, create_ssl_context

__all__ = (
    "ActivityEvent",
    "ActivityOp",
    "ActivityStream",
    "StreamKwargs",
    "ProducerKwargs",
    "ConsumerKwargs",
    "AckError",
    "AckPolicy",
    "AckTimeout",
    "AddressResolver",
    "Broker",
    "Client",
    "ClientStats",
    "Consumer",
    "ConsumerOptions",
    "EncryptionFailed",
    "FailedPrecondition",
    "GroupConsumer",
    "GroupConsumerKwargs",
    "GroupConsumerOptions",
    "IncorrectOffset",
    "InvalidArgument",
    "LiftbridgeServerError",
    "MessageTooLarge",
    "Membership",
    "Metadata",
    "NoResponders",
    "PartitionInfo",
    "Producer",
    "ProducerOptions",
    "ReconnectPolicy",
    "ResourceExhausted",
    "StreamAlreadyExists",
    "StreamInfo",
    "StreamNotFound",
    "StreamOptions",
    "TLSOptions",
    "TooLarge",
    "connect",
)

_NATS_DEFAULT_PORT = 4222


def _nats_servers(values: list[str]) -> tuple[list[str], bool]:
    """NATS URLs from ``nats=`` parameters (repeated or comma-separated); ``nats+tls://``
    and ``tls://`` mean TLS."""
    servers: list[str] = []
    tls = False
    for value in values:
        for item in value.split(","):
            url = item.strip()
            if not url:
                continue
            scheme, sep, rest = url.partition("://")
            if not sep:
                scheme, rest = "nats", url
            scheme = scheme.lower()
            if scheme in ("nats+tls", "tls"):
                tls = True
                scheme = "tls"
            elif scheme != "nats":
                raise ConfigurationError(f"unsupported NATS URL scheme in {url!r}")
            servers.append(f"{scheme}://{rest}")
    return servers, tls


def _ssl_context(tls: TLSConfig | bool | None) -> ssl.SSLContext | None:
    if tls is None or tls is False:
        return None
    if tls is True:
        return create_ssl_context()
    if isinstance(tls, ssl.SSLContext):
        return tls
    return create_ssl_context(tls)


async def connect(
    url: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    nats: str | Sequence[str] | None = None,
    tls: TLSOptions | bool | None = None,
    nats_tls: TLSConfig | bool | None = None,
    timeout: float | None = 30.0,
    request_timeout: float | None = 30.0,
    reconnect: ReconnectPolicy | Default | None = DEFAULT,
    address_resolver: AddressResolver | None = None,
    name: str | None = None,
    nats_options: Mapping[str, object] | None = None,
    require_nats: bool = True,
    subscribe_transport: str = "auto",
    publish_transport: str = "auto",
    keepalive_time: float | None = 300.0,
    keepalive_timeout: float = 20.0,
    tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
) -> Client:
    """Connect to Liftbridge (gRPC) and its NATS, from a URL and/or keyword arguments.

    URL: ``liftbridge[+tls]://host:9292?nats=nats://host:4222`` (``nats=`` repeated or
    comma-separated; ``nats+tls://`` for TLS; default ``nats://<host>:4222``). ``tls`` secures
    gRPC (:class:`TLSOptions`; ``liftbridge+tls://`` implies the defaults), ``nats_tls`` NATS.
    ``timeout`` is one budget for the gRPC metadata round trip, the NATS connection and the
    ack inbox subscription; ``request_timeout`` the default of each later gRPC call.
    ``reconnect`` (default :class:`ReconnectPolicy` ``()``; ``None``: off) governs consumers
    resubscribing; nats-py reconnects NATS on its own (``nats_options`` go to
    ``nats.connect``).

    ``require_nats=False``: a NATS connection that cannot be made is not an error; the
    client then has none (``Client.nats_error`` says why) and its producers need
    ``transport="grpc"`` or ``"auto"`` (they publish through the gRPC API). Consumers never
    need NATS.

    ``subscribe_transport``: how consumers read their Subscribe streams: ``"auto"``
    (default: streamwire's own HTTP/2 reader on the event loop, falling back to grpcio for
    a broker that does not negotiate HTTP/2), ``"http2"`` (that reader only) or
    ``"grpcio"`` (a thread per stream over grpcio's synchronous API).

    ``publish_transport``: how producers carry their PublishAsync streams
    (``transport="grpc"``, or ``"auto"`` while NATS is down): ``"auto"`` (default:
    streamwire's own HTTP/2 client, falling back to grpcio for a broker that does not
    negotiate HTTP/2), ``"http2"`` (that client only) or ``"grpcio"`` (grpc.aio).

    ``keepalive_time``: seconds a gRPC connection with calls open may receive nothing before
    it sends a PING (``None``: never); ``keepalive_timeout``: how long that PING may go
    unanswered before the connection counts as dead, its calls fail and consumers resubscribe
    (both transports; 300 s keeps within what gRPC servers in Go accept by default).
    ``tcp_keepalive``: how the HTTP/2 connections notice a link gone silent without a reset,
    below those PINGs (:class:`streamwire.transport.TcpKeepalive`: within about a minute by
    default; ``None``: the kernel's defaults, hours). grpcio's channels (the fallback) and
    nats-py's connection keep their own (docs/liftbridge.md, "Keepalive").

    Cancellation: nothing is left open.
    """
    nats_urls: list[str] = []
    if url is not None:
        parsed = parse_url(url)
        if parsed.protocol != "liftbridge":
            raise ConfigurationError(f"not a Liftbridge URL: {parsed}")
        check_query(parsed)
        host = host or parsed.host
        port = port or parsed.port
        nats_urls = parsed.query.get("nats", [])
        if parsed.tls and tls is None:
            tls = True
    if nats is not None:
        nats_urls = [nats] if isinstance(nats, str) else list(nats)
    host = host or "localhost"
    servers, nats_tls_from_url = _nats_servers(nats_urls)
    if not servers:
        shown = f"[{host}]" if ":" in host else host
        servers = [f"nats://{shown}:{_NATS_DEFAULT_PORT}"]
    if nats_tls is None and nats_tls_from_url:
        nats_tls = True
    credentials = None
    server_hostname = None
    if tls is True:
        tls = TLSOptions()
    if isinstance(tls, TLSOptions):
        credentials = grpc_credentials(tls)
        server_hostname = tls.server_hostname
    elif tls not in (None, False):
        raise ConfigurationError("tls= for gRPC must be TLSOptions, True or None")
    client = Client(
        host,
        port or 9292,
        nats_servers=servers,
        grpc_credentials=credentials,
        grpc_server_hostname=server_hostname,
        nats_tls=_ssl_context(nats_tls),
        timeout=timeout,
        request_timeout=request_timeout,
        reconnect=ReconnectPolicy() if reconnect is DEFAULT else reconnect,
        address_resolver=address_resolver,
        name=name,
        nats_options=nats_options,
        require_nats=require_nats,
        grpc_tls=tls if isinstance(tls, TLSOptions) else None,
        subscribe_transport=subscribe_transport,
        publish_transport=publish_transport,
        keepalive_time=keepalive_time,
        keepalive_timeout=keepalive_timeout,
        tcp_keepalive=tcp_keepalive,
    )
    try:
        return await client._open()
    except ConnectError as exc:
        clearer = without_client_certificate(tls if isinstance(tls, TLSOptions) else None, exc)
        if clearer is None:
            raise
        raise clearer from exc
