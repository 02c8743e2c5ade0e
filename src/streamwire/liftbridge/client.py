"""Liftbridge client: the gRPC control plane and the NATS connection behind producers.

The client dials the URL's server over gRPC (metadata, stream management, subscriptions,
cursors; partition-scoped calls go to the partition leader from metadata) and one NATS
connection shared by its producers, with a single ack inbox (see ``_acks``).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self, TypeVar, Unpack

import grpc
import grpc.aio

from streamwire._api import TAIL_COMMIT_HEADER, OffsetBounds
from streamwire._default import DEFAULT, Default
from streamwire._options import build_options, option_names
from streamwire.codec.offset import OffsetLike
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    RequestTimeout,
    StreamwireError,
    UncommittedTailError,
)
from streamwire.errors import TimeoutError as StreamwireTimeoutError
from streamwire.liftbridge._acks import AckRouter, AckStats
from streamwire.liftbridge._cursors import Cursors
from streamwire.liftbridge._grpc import AddressResolver, Channels, peer_closed
from streamwire.liftbridge._grpc_publish import GrpcPublisher
from streamwire.liftbridge._grpc_publishing import GrpcPublishing
from streamwire.liftbridge._h2_subscription import (
    SUBSCRIBE_TRANSPORTS,
    AnySubscription,
    H2Subscription,
)
from streamwire.liftbridge._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.liftbridge._nats import NatsLink, NatsStats
from streamwire.liftbridge._nats_side import NatsSide
from streamwire.liftbridge._publish_calls import (
    PUBLISH_TRANSPORTS,
    GrpcioPublishCall,
    H2PublishCall,
    PublishCall,
)
from streamwire.liftbridge._stream_reader import Handover, Subscription
from streamwire.liftbridge.activity import ACTIVITY_STREAM, ActivityStream
from streamwire.liftbridge.consumer import Consumer, ConsumerOptions
from streamwire.liftbridge.group import GroupConsumer, GroupConsumerKwargs, GroupConsumerOptions
from streamwire.liftbridge.producer import Producer, ProducerOptions
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    GRPC_ERRORS,
    GrpcStatus,
    StreamNotFound,
)
from streamwire.liftbridge.protocol.messages import AckPolicy
from streamwire.liftbridge.protocol.metadata import (
    Broker,
    Metadata,
    PartitionInfo,
    StreamInfo,
    StreamOptions,
    create_stream_request,
    metadata_from_pb,
    partition_from_pb,
)
from streamwire.metrics import ConnectionMeter, ConnectionStats, Destination
from streamwire.transport.backoff import Backoff
from streamwire.transport.deadline import Deadline
from streamwire.transport.h2grpc import H2Pool, H2Settings, alpn_context
from streamwire.transport.reconnect import ReconnectPolicy, retry
from streamwire.transport.resources import AsyncClosing
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSOptions, create_ssl_context

__all__ = ("Client", "ClientStats")

logger = logging.getLogger(__name__)

T = TypeVar("T")


#: How often a missing ``__cursors`` stream is looked up again, and the pause between lookups,
#: before cursors are reported disabled (about 2 s in all).
#: How long close waits for a cancelled NATS redial to end (its connect ends within
#: ``_nats._CONNECT_END_TIMEOUT``).
_END_TIMEOUT: Final = 10.0
#: Seconds between a partition's metadata reads while ``settled_bounds`` waits.
_SETTLE_POLL: Final = 0.1
#: Seconds a leader alone in its ISR may keep its high watermark below its newest offset
#: before ``settled_bounds`` takes the tail for one only a write commits (such a leader
#: commits what it appends within milliseconds).
STUCK_AFTER: Final = 2.0


@dataclass(frozen=True, slots=True)
class ClientStats(ConnectionStats):
    """The connection counters every client has (``connects``: the client's gRPC and NATS
    connection as one, and every NATS reconnect; ``errors``: failed connects and NATS
    disconnects), plus the ack inbox's and the NATS connection's own."""

    acks: AckStats = field(default_factory=AckStats)
    nats: NatsStats = field(default_factory=NatsStats)


class Client(Cursors, GrpcPublishing, AsyncClosing):
    """A Liftbridge client. Create with :func:`streamwire.liftbridge.connect`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        nats_servers: Sequence[str],
        grpc_credentials: grpc.ChannelCredentials | None = None,
        grpc_server_hostname: str | None = None,
        nats_tls: ssl.SSLContext | None = None,
        timeout: float | None = 30.0,
        request_timeout: float | None = 30.0,
        reconnect: ReconnectPolicy | None = None,
        address_resolver: AddressResolver | None = None,
        name: str | None = None,
        nats_options: Mapping[str, object] | None = None,
        require_nats: bool = True,
        grpc_tls: TLSOptions | None = None,
        subscribe_transport: str = "auto",
        publish_transport: str = "auto",
        keepalive_time: float | None = 300.0,
        keepalive_timeout: float = 20.0,
        tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> None:
        if not nats_servers:
            raise ConfigurationError("a Liftbridge client needs at least one NATS server")
        self.host = host
        self.port = port
        self.nats_servers = list(nats_servers)
        self.timeout = timeout
        self.request_timeout = request_timeout
        self.reconnect = reconnect
        self.name = name
        self._nats_tls = nats_tls
        self._nats_options = nats_options
        self.require_nats = require_nats
        self.nats_error: StreamwireError | None = None
        """Why the client has no NATS connection (``require_nats=False`` only; it tries
        again in the background until it has one)."""
        self._publishers: set[GrpcPublisher] = set()
        self._redial: asyncio.Task[None] | None = None
        # HTTP/2 connections, shared by the subscriptions and producers that use
        # streamwire's own client (``subscribe_transport``, ``publish_transport``)
        self._h2 = H2Pool(
            H2Settings(keepalive_time=keepalive_time, keepalive_timeout=keepalive_timeout),
            tcp_keepalive=tcp_keepalive,
        )
        self._channels: Channels | None = Channels(
            credentials=grpc_credentials,
            server_hostname=grpc_server_hostname,
            resolver=address_resolver,
            keepalive_time=keepalive_time,
            keepalive_timeout=keepalive_timeout,
        )
        self._nats = NatsSide()
        """NATS as the producers use it: the link, the ack inbox (``_nats_side``)."""
        self._metadata: Metadata | None = None
        self._brokers: dict[str, Broker] = {}
        self._children: set[Producer | Consumer | GroupConsumer] = set()
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._meter = ConnectionMeter(Destination("liftbridge", "", f"{host}:{port}"))
        if subscribe_transport not in SUBSCRIBE_TRANSPORTS:
            raise ConfigurationError(
                f"subscribe_transport must be one of {SUBSCRIBE_TRANSPORTS}, "
                f"not {subscribe_transport!r}"
            )
        if grpc_credentials is not None and grpc_tls is None and subscribe_transport != "grpcio":
            subscribe_transport = "grpcio"  # credentials alone: only grpcio can use them
        self.subscribe_transport = subscribe_transport
        """How Subscribe streams are read: ``"http2"`` (streamwire's own HTTP/2 reader),
        ``"grpcio"`` (a thread per stream over grpcio), ``"auto"`` (``http2``, falling back
        to ``grpcio`` for a broker that does not negotiate HTTP/2)."""
        self._h2_ssl = alpn_context(create_ssl_context(grpc_tls)) if grpc_tls else None
        self._h2_server_hostname = grpc_tls.server_hostname if grpc_tls else None
        self._h2_refused: set[tuple[str, int]] = set()  # brokers "auto" fell back for
        if publish_transport not in PUBLISH_TRANSPORTS:
            raise ConfigurationError(
                f"publish_transport must be one of {PUBLISH_TRANSPORTS}, not {publish_transport!r}"
            )
        if grpc_credentials is not None and grpc_tls is None and publish_transport != "grpcio":
            publish_transport = "grpcio"  # credentials alone: only grpcio can use them
        self.publish_transport = publish_transport
        """How producers' PublishAsync streams (``transport="grpc"``, or ``"auto"`` while
        NATS is down) are carried: ``"http2"`` (streamwire's own HTTP/2 client, many
        requests per socket write), ``"grpcio"`` (grpc.aio), ``"auto"`` (``http2``, falling
        back to ``grpcio`` for a broker that does not negotiate HTTP/2)."""

    # --- connecting --------------------------------------------------------------------

    async def _open(self) -> Self:
        """gRPC metadata round trip, then NATS and the ack inbox, within ``timeout``.

        Cancellation: everything opened so far is closed.
        """
        target = f"{self.host}:{self.port}"
        deadline = Deadline(self.timeout, exc_type=ConnectTimeout, what=f"connecting to {target}")
        try:
            await self._open_grpc(deadline)
            try:
                await self._open_nats(deadline)
            except StreamwireError as exc:
                if self.require_nats:
                    raise
                await self._drop_nats()
                self.nats_error = exc
                logger.warning(
                    "Liftbridge client without NATS (producers publish over gRPC): %s", exc
                )
                self._redial = self._loop.create_task(self._redial_nats())
        except BaseException as exc:
            if isinstance(exc, StreamwireError):
                self._meter.failed()
            await self._shutdown()
            raise
        self._meter.connected()
        return self

    async def _open_grpc(self, deadline: Deadline) -> None:
        target = f"{self.host}:{self.port}"
        async with deadline.scope():
            try:
                await self.fetch_metadata(timeout=deadline.remaining())
            except RequestTimeout as exc:
                raise ConnectTimeout(f"Liftbridge at {target} did not answer") from exc
            except ConnectError as exc:
                if peer_closed(exc):  # what RabbitMQ and Iggy raise for the same event
                    raise ConnectionClosed(
                        f"{target} closed the connection while connecting to Liftbridge "
                        f"({exc}); is it Liftbridge's gRPC port (9292 by default)?"
                    ) from exc
                raise ConnectError(f"cannot reach Liftbridge at {target}: {exc}") from exc

    async def _open_nats(self, deadline: Deadline) -> None:
        link = await NatsLink.connect(
            self.nats_servers,
            deadline=deadline,
            tls=self._nats_tls,
            name=self.name,
            options=self._nats_options,
        )
        self._nats.link = link  # (closed by _drop_nats if the inbox fails)
        link.on_closed.append(self._nats_closed)
        link.on_disconnected.append(self._meter.failed)
        link.on_reconnected.append(lambda: self._meter.connected(again=True))
        acks = AckRouter(link)
        async with deadline.scope():
            await acks.start()
            await link.flush(deadline.remaining())
        self._nats.attach(link, acks)
        if self._closed:  # a redial that close gave up waiting for: its caller drops it
            raise ClosedError("the Liftbridge client closed while NATS connected")

    async def _drop_nats(self) -> None:
        """Undo a NATS connection that failed half-way (``require_nats=False``)."""
        link = self._nats.detach()
        if link is not None:
            await link.close()

    async def _redial_nats(self) -> None:
        """A client opened without NATS tries again, with backoff (0.5 s to 5 s), until it
        connects or closes; ``"auto"`` producers then publish on NATS again."""
        for delay in Backoff(initial=0.5, maximum=5.0, jitter="equal"):
            await asyncio.sleep(delay)
            if self._closed:
                return
            what = "connecting to NATS again"
            try:
                await self._open_nats(Deadline(self.timeout, exc_type=ConnectTimeout, what=what))
            except StreamwireError as exc:
                await self._drop_nats()
                self.nats_error = exc
                logger.debug("Liftbridge client still without NATS: %s", exc)
                continue
            self.nats_error = None
            self._meter.connected(again=True)
            logger.info("Liftbridge client: NATS connected (%s)", ", ".join(self.nats_servers))
            return

    @property
    def nats_connected(self) -> bool:
        """Whether the client's NATS connection is up now (producers with
        ``transport="auto"`` publish over gRPC while it is not). Up means set up: connected,
        with the ack inbox subscribed and flushed (a redial half-way through is not up yet)."""
        return self._nats.connected

    @property
    def _link(self) -> NatsLink | None:
        """The NATS connection (None while there is none)."""
        return self._nats.link

    @property
    def _acks(self) -> AckRouter | None:
        """The ack inbox (None while there is no NATS connection)."""
        return self._nats.acks

    def _nats_closed(self, exc: StreamwireError) -> None:
        if self._nats.acks is not None:
            self._nats.acks.close(exc)

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("the Liftbridge client is closed")

    def _channels_or_fail(self) -> Channels:
        channels = self._channels
        if self._closed or channels is None:
            raise ClosedError("the Liftbridge client is closed")
        return channels

    def _forget_child(self, child: object) -> None:
        """Called by a producer or consumer once it is closed."""
        self._children.discard(child)

    async def _flush_nats(self, timeout: float | None) -> None:
        """Write out what NATS buffered (used by tests)."""
        await self._nats.flush(timeout)

    @property
    def stats(self) -> ClientStats:
        """Connection counters (docs/api.md), and the ack inbox's and NATS connection's."""
        acks = self._acks.stats if self._acks is not None else AckStats()
        nats = self._link.stats if self._link is not None else NatsStats()
        connection = self._meter.snapshot()
        return ClientStats(
            connection.connects, connection.reconnects, connection.errors, acks, nats
        )

    @property
    def max_payload(self) -> int:
        """The NATS server's max_payload: the largest envelope a producer can publish."""
        return self._nats.max_payload

    # --- gRPC calls --------------------------------------------------------------------

    def _timeout(self, timeout: float | Default | None) -> float | None:
        return self.request_timeout if timeout is DEFAULT else timeout

    def _broker_channel(self, broker_id: str | None) -> grpc.aio.Channel:
        channels = self._channels_or_fail()
        b = self._brokers.get(broker_id) if broker_id is not None else None
        if b is not None:
            return channels.channel(b.host, b.port)
        return channels.channel(self.host, self.port, resolve=False)

    async def _publish_call(self, broker_id: str | None, what: str) -> PublishCall:
        """A PublishAsync call to ``broker_id`` (``None``: the URL's server), over HTTP/2 or
        grpcio as ``publish_transport`` says. Cancellation: nothing is left open."""
        channels = self._channels_or_fail()
        b = self._brokers.get(broker_id) if broker_id is not None else None
        addr = (b.host, b.port) if b is not None else (self.host, self.port)
        mode = self.publish_transport
        if mode == "http2" or (mode == "auto" and addr not in self._h2_refused):
            host, port = channels.resolve(*addr) if b is not None else addr
            auto = self.publish_transport == "auto"
            call = H2PublishCall(
                what, (lambda: self._h2_refused.add(addr)) if auto else None, pool=self._h2
            )
            opened = await call.open(
                host,
                port,
                ssl_context=self._h2_ssl,
                server_hostname=self._h2_server_hostname,
                timeout=self.timeout,
            )
            if opened:
                return call
            if not auto:
                return H2PublishCall.failed(
                    what, ConnectError(f"{what}: the server does not speak HTTP/2")
                )
            self._h2_refused.add(addr)
        return GrpcioPublishCall(self._broker_channel(broker_id), what)

    def _broker_stream_channel(self, broker_id: str | None) -> grpc.Channel:
        """The synchronous channel for Subscribe streams (see ``Channels``)."""
        channels = self._channels_or_fail()
        b = self._brokers.get(broker_id) if broker_id is not None else None
        if b is not None:
            return channels.stream_channel(b.host, b.port)
        return channels.stream_channel(self.host, self.port, resolve=False)

    async def _call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None,
        what: str,
        broker: str | None = None,
    ) -> Any:
        """One unary RPC at ``broker`` (an id from metadata), or at any server: the URL's
        first, then every broker known from metadata while they are unreachable."""
        channels = self._channels_or_fail()
        if broker is not None:
            channel = self._broker_channel(broker)
            return await channels.unary(channel, method, request, timeout=timeout, what=what)
        deadline = Deadline(timeout, exc_type=RequestTimeout, what=what)
        seed = (self.host, self.port)
        others = [(b.host, b.port) for b in self._brokers.values() if (b.host, b.port) != seed]
        failure = ConnectError(f"{what}: no Liftbridge server to ask")
        for index, (host, port) in enumerate([seed, *others]):
            channel = channels.channel(host, port, resolve=index > 0)
            try:
                return await channels.unary(
                    channel, method, request, timeout=deadline.remaining(), what=what
                )
            except ConnectError as exc:
                failure = exc
        raise failure

    async def _retry(
        self, attempt: Callable[[], Awaitable[T]], cause: BaseException, *, what: str
    ) -> T:
        """Run ``attempt`` under the reconnect policy (consumers resubscribing)."""
        if self.reconnect is None:
            raise cause
        return await retry(attempt, self.reconnect, cause=cause, what=what)

    # --- metadata ----------------------------------------------------------------------

    async def list_streams(self) -> list[str]:
        """The cluster's streams, sorted, without the server's own (``__cursors``,
        ``__activity``: names starting with two underscores) (:class:`streamwire.Listing`)."""
        metadata = await self.fetch_metadata()
        return sorted(name for name in metadata.streams if not name.startswith("__"))

    async def fetch_metadata(
        self, *streams: str, timeout: float | Default | None = DEFAULT
    ) -> Metadata:
        """Brokers and streams (all streams when none are named).

        Cancellation: nothing to undo.
        """
        resp = await self._call(
            "FetchMetadata",
            pb.FetchMetadataRequest(streams=list(streams)),
            timeout=self._timeout(timeout),
            what="FetchMetadata",
        )
        md = metadata_from_pb(resp)
        if md.brokers:
            self._brokers = dict(md.brokers)
        if not streams:
            self._metadata = md
        elif self._metadata is None:
            self._metadata = Metadata(md.brokers, dict(md.streams))
        else:
            merged = {**self._metadata.streams, **md.streams}
            for name in md.missing:
                merged.pop(name, None)
            self._metadata = Metadata(md.brokers, merged)
        return md

    def _invalidate_metadata(self) -> None:
        self._metadata = None

    async def stream_info(
        self, name: str, *, timeout: float | Default | None = DEFAULT
    ) -> StreamInfo:
        """Subject and partitions of ``name``; raises StreamNotFound."""
        md = await self.fetch_metadata(name, timeout=timeout)
        info = md.streams.get(name)
        if info is None:
            raise GRPC_ERRORS.from_code(GrpcStatus.NOT_FOUND, f"stream {name!r} does not exist")
        return info

    async def stream_exists(self, name: str, *, timeout: float | Default | None = DEFAULT) -> bool:
        md = await self.fetch_metadata(name, timeout=timeout)
        return name in md.streams

    async def _partition_info(self, stream: str, partition: int) -> PartitionInfo:
        md = self._metadata
        info = md.streams.get(stream) if md is not None else None
        if info is None or partition not in info.partitions:
            info = await self.stream_info(stream)
        p = info.partitions.get(partition)
        if p is None:
            raise GRPC_ERRORS.from_code(
                GrpcStatus.NOT_FOUND, f"stream {stream!r} has no partition {partition}"
            )
        return p

    async def _subscribe_broker(
        self, stream: str, partition: int, *, any_replica: bool = False
    ) -> str:
        """The partition leader (or a random in-sync replica) to subscribe at."""
        p = await self._partition_info(stream, partition)
        broker = p.leader
        if any_replica and p.isr:
            broker = random.choice(p.isr)
        if not broker:
            raise GRPC_ERRORS.from_code(
                GrpcStatus.FAILED_PRECONDITION, f"{stream}/{partition} has no leader"
            )
        return broker

    async def _subscribe_channel(
        self, stream: str, partition: int, *, any_replica: bool = False
    ) -> grpc.Channel:
        """The synchronous channel to the partition leader (or a random in-sync replica) on
        which a consumer's reading thread subscribes."""
        broker = await self._subscribe_broker(stream, partition, any_replica=any_replica)
        return self._broker_stream_channel(broker)

    async def _subscription(
        self,
        request: pb.SubscribeRequest,
        handover: Handover[Any],
        *,
        skip_below: int,
        server_headers: bool,
        any_replica: bool = False,
    ) -> AnySubscription:
        """A subscription, not started, to ``request``'s partition at its leader (or a
        random in-sync replica): read by streamwire's HTTP/2 reader or by a grpcio thread,
        as ``subscribe_transport`` says. Cancellation: nothing is left open."""
        stream, partition = request.stream, request.partition
        broker = await self._subscribe_broker(stream, partition, any_replica=any_replica)
        loop = asyncio.get_running_loop()
        name = f"{stream}/{partition}"
        channels = self._channels_or_fail()
        b = self._brokers.get(broker)
        addr = (b.host, b.port) if b is not None else (self.host, self.port)
        mode = self.subscribe_transport
        # (a broker "auto" fell back for, here or for publishing, is still tried by "http2")
        if mode == "http2" or (mode == "auto" and addr not in self._h2_refused):
            host, port = channels.resolve(*addr) if b is not None else addr
            sub = H2Subscription(
                handover,
                host=host,
                port=port,
                request=request.SerializeToString(),
                ssl_context=self._h2_ssl,
                server_hostname=self._h2_server_hostname,
                loop=loop,
                skip_below=skip_below,
                server_headers=server_headers,
                name=name,
                pool=self._h2,
            )
            if await sub.connect(self.request_timeout):
                return sub
            if self.subscribe_transport == "http2":
                raise ConnectError(f"subscribing to {name}: the server does not speak HTTP/2")
            self._h2_refused.add(addr)
        channel = self._broker_stream_channel(broker)
        return Subscription(
            lambda: channels.subscribe(channel, request),
            handover,
            loop=loop,
            skip_below=skip_below,
            server_headers=server_headers,
            name=name,
        )

    async def partition_metadata(
        self, stream: str, partition: int = 0, *, timeout: float | Default | None = DEFAULT
    ) -> PartitionInfo:
        """Fresh metadata of one partition (high watermark, newest offset), from its leader."""
        p = await self._partition_info(stream, partition)
        resp = await self._call(
            "FetchPartitionMetadata",
            pb.FetchPartitionMetadataRequest(stream=stream, partition=partition),
            timeout=self._timeout(timeout),
            what=f"FetchPartitionMetadata {stream}/{partition}",
            broker=p.leader,
        )
        return partition_from_pb(stream, resp.metadata)

    # --- streams -----------------------------------------------------------------------

    async def create_stream(
        self,
        name: str,
        *,
        subject: str | None = None,
        partitions: int = 1,
        exist_ok: bool = False,
        replication_factor: int = 1,
        group: str | None = None,
        options: StreamOptions | None = None,
        timeout: float | Default | None = DEFAULT,
        **stream_options: Unpack[StreamKwargs],
    ) -> None:
        """Create a stream attached to ``subject`` (default: the stream name).

        ``stream_options`` are :class:`StreamOptions` fields (retention_max_bytes,
        retention_max_age in seconds, optimistic_concurrency_control, ...); ``group`` makes
        streams on the same subject share its messages (NATS queue group).

        Cancellation: the stream may or may not have been created.
        """
        if stream_options:
            if options is not None:
                raise ConfigurationError("give options= or keyword stream options, not both")
            options = build_options(StreamOptions, stream_options, "Liftbridge stream")
        request = create_stream_request(
            name,
            subject=name if subject is None else subject,
            partitions=partitions,
            replication_factor=replication_factor,
            group=group or "",
            options=options,
        )
        try:
            await self._call(
                "CreateStream",
                request,
                timeout=self._timeout(timeout),
                what=f"CreateStream {name!r}",
            )
        except StreamwireError as exc:
            if exist_ok and getattr(exc, "code", None) == GrpcStatus.ALREADY_EXISTS:
                return
            raise

    async def delete_stream(
        self, name: str, *, missing_ok: bool = False, timeout: float | Default | None = DEFAULT
    ) -> None:
        """Delete a stream. Cancellation: the stream may or may not have been deleted."""
        try:
            await self._call(
                "DeleteStream",
                pb.DeleteStreamRequest(name=name),
                timeout=self._timeout(timeout),
                what=f"DeleteStream {name!r}",
            )
        except StreamNotFound:
            if not missing_ok:
                raise

    async def pause_stream(
        self,
        name: str,
        *,
        partitions: Sequence[int] | None = None,
        resume_all: bool = False,
        timeout: float | Default | None = DEFAULT,
    ) -> None:
        """Pause partitions (all when ``partitions`` is None). A paused partition is resumed
        by a subscription with ``resume=True`` (or a gRPC publish); NATS publishes to it are
        lost meanwhile. ``resume_all``: publishing to one partition resumes them all."""
        await self._call(
            "PauseStream",
            pb.PauseStreamRequest(
                name=name, partitions=list(partitions or ()), resumeAll=resume_all
            ),
            timeout=self._timeout(timeout),
            what=f"PauseStream {name!r}",
        )

    async def set_stream_readonly(
        self,
        name: str,
        *,
        partitions: Sequence[int] | None = None,
        readonly: bool = True,
        timeout: float | Default | None = DEFAULT,
    ) -> None:
        """Make partitions readonly (or writable again with ``readonly=False``). Publishes
        to a readonly partition are dropped without an ack."""
        await self._call(
            "SetStreamReadonly",
            pb.SetStreamReadonlyRequest(
                name=name, partitions=list(partitions or ()), readonly=readonly
            ),
            timeout=self._timeout(timeout),
            what=f"SetStreamReadonly {name!r}",
        )

    def activity_stream(
        self,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> ActivityStream:
        """The cluster's activity stream (``__activity``: streams created, deleted, paused,
        resumed, made readonly; consumer group members joining and leaving) as typed
        :class:`~streamwire.liftbridge.activity.ActivityEvent` values, from ``offset``; with a
        ``name``, :meth:`ActivityStream.commit` stores the position and ``offset="next"``
        resumes after it. The servers need ``activity.stream.enabled: true``; ``async with``
        it, or ``await`` it."""
        return ActivityStream(self.consumer(ACTIVITY_STREAM, offset=offset, name=name, **options))

    # --- producers and consumers -------------------------------------------------------

    @property
    def producer_options(self) -> frozenset[str]:
        """The options :meth:`producer` takes besides ``name`` (:class:`ProducerOptions`)."""
        return option_names(ProducerOptions)

    @property
    def replicated_ack_options(self) -> Mapping[str, object]:
        """``{"ack_policy": AckPolicy.ALL}``: an ack once every in-sync replica has the
        message (:class:`streamwire.ReplicatedAcks`; the default ``LEADER`` can be undone
        by the leader's loss, docs/liftbridge.md, "Ack policies")."""
        return {"ack_policy": AckPolicy.ALL}

    def producer(
        self, stream: str, *, name: str | None = None, **options: Unpack[ProducerKwargs]
    ) -> Producer:
        """A producer for ``stream``; ``async with`` it (or ``await`` it) to start it.

        ``name`` is the producer's identity in the unified API; Liftbridge has no producer
        deduplication, so it is accepted and has no effect (docs/api.md). Options: see
        :class:`ProducerOptions`.
        """
        self._check()
        del name  # no deduplication to turn on
        settings = build_options(ProducerOptions, options, "Liftbridge producer")
        producer = Producer(self, stream, options=settings)
        self._children.add(producer)
        return producer

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        partition: int = 0,
        **options: Unpack[ConsumerKwargs],
    ) -> Consumer:
        """A consumer of one partition of ``stream`` from ``offset``; ``async with`` it (or
        ``await`` it). ``name`` is the cursor id for :meth:`Consumer.commit` and
        ``offset="next"``. Options: see :class:`ConsumerOptions`."""
        self._check()
        consumer = Consumer(
            self,
            stream,
            offset=offset,
            name=name,
            partition=partition,
            options=build_options(ConsumerOptions, options, "Liftbridge consumer"),
        )
        self._children.add(consumer)
        return consumer

    def group_consumer(
        self,
        group: str,
        streams: str | Sequence[str],
        *,
        consumer_id: str | None = None,
        offset: OffsetLike = "first",
        **options: Unpack[GroupConsumerKwargs],
    ) -> GroupConsumer:
        """A member of consumer group ``group`` reading ``streams`` (Liftbridge >= 1.6);
        ``async with`` it (or ``await`` it). The group's coordinator assigns the partitions;
        each starts after the group's cursor, or at ``offset`` ("first", "last", "next" or a
        timestamp) when the group has none. ``consumer_id`` (default: a random one) must be
        unique in the group. Options: see :class:`GroupConsumerOptions`
        (``auto_checkpoint_interval``, ``fetch_interval``, ...)."""
        self._check()
        consumer = GroupConsumer(
            self,
            group,
            [streams] if isinstance(streams, str) else list(streams),
            consumer_id=consumer_id,
            offset=offset,
            options=build_options(GroupConsumerOptions, options, "Liftbridge group consumer"),
        )
        self._children.add(consumer)
        return consumer

    # --- capabilities (streamwire.Partitioned, streamwire.Bounded) ---------------------

    async def partition_ids(self, stream: str) -> list[int]:
        """The partitions of ``stream``, in order."""
        info = await self.stream_info(stream)
        return sorted(int(p) for p in info.partitions)

    def partition_consumer(
        self,
        stream: str,
        partition: int,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        max_poll: int | None = None,
    ) -> Consumer:
        """:meth:`consumer` of one partition (``max_poll`` has no effect: the server pushes
        messages to a subscription)."""
        del max_poll
        return self.consumer(stream, offset=offset, name=name, partition=partition)

    async def offset_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """``OffsetBounds(0, high watermark + 1)`` of every partition, from its leader."""
        bounds = {}
        for partition in await self.partition_ids(stream):
            meta = await self.partition_metadata(stream, partition)
            bounds[partition] = OffsetBounds(0, max(int(meta.high_watermark) + 1, 0))
        return bounds

    async def settled_bounds(self, stream: str, *, timeout: float) -> dict[int, OffsetBounds]:
        """:meth:`offset_bounds` once every message appended to a partition when this was
        called (up to its newest offset) is committed (the high watermark reached it), or
        the partition has a new leader, whose log then counts (:class:`streamwire.Settling`).
        With ``AckPolicy.ALL`` a message waits uncommitted while the ISR still lists a
        replica that does not follow (until the leader drops it from the ISR); a reader
        does not see it yet, and it may still be acknowledged and read later.

        A leader alone in its ISR commits at once whatever it appends, so its watermark
        stuck below its newest offset for :data:`STUCK_AFTER` seconds means a tail only the
        next write commits: a Liftbridge v1.9.0 server restarted after a crash forgets its
        high watermark (docs/liftbridge.md, "After a crash").
        :class:`~streamwire.errors.UncommittedTailError` names those partitions;
        :meth:`commit_tail` commits them."""
        bounds, stuck = {}, {}
        try:
            async with asyncio.timeout(timeout):
                partitions = await self.partition_ids(stream)
                try:  # at once: a stuck partition takes STUCK_AFTER seconds to tell
                    async with asyncio.TaskGroup() as group:
                        found = [group.create_task(self._settled(stream, p)) for p in partitions]
                except BaseExceptionGroup as group_error:
                    raise group_error.exceptions[0] from None
            for partition, task in zip(partitions, found, strict=True):
                meta, tail = task.result()
                if tail:
                    stuck[partition] = (meta.high_watermark + 1, meta.newest_offset)
                bounds[partition] = OffsetBounds(0, max(int(meta.high_watermark) + 1, 0))
        except builtins.TimeoutError as exc:
            if isinstance(exc, StreamwireError):
                raise
            raise StreamwireTimeoutError(
                f"{stream!r}: messages appended to a partition were not committed within "
                f"{timeout} s (its leader waits for an in-sync replica that does not follow "
                "yet, or cannot reach its peers); what they hold is unknown until they are "
                "committed or dropped. Try again later"
            ) from None
        if stuck:
            where = "; ".join(f"partition {p}: offsets {a}..{b}" for p, (a, b) in stuck.items())
            raise UncommittedTailError(
                f"{stream!r} holds messages its Liftbridge server appended and has not "
                f"committed ({where}), and only the next write to the partition will commit "
                "them: a server restarted after a crash forgets its high watermark "
                "(docs/liftbridge.md, 'After a crash'). No reader sees them until then, so "
                "what they hold is unknown. Commit them with Client.commit_tail(stream, "
                "partition, timeout=...) (it writes one empty message) or any other write "
                "to the partition, then try again",
                stream,
                stuck,
            )
        return bounds

    async def _settled(self, stream: str, partition: int) -> tuple[PartitionInfo, bool]:
        """The partition's metadata once its newest offset (when first asked) is committed
        or its leader changed (and ``False``), or once its leader is alone in its ISR and
        its high watermark has not moved for :data:`STUCK_AFTER` seconds (and ``True``)."""
        meta = await self.partition_metadata(stream, partition)
        leader, target = meta.leader, meta.newest_offset
        loop = asyncio.get_running_loop()
        moved, watermark = loop.time(), meta.high_watermark
        while meta.high_watermark < target:
            if meta.high_watermark != watermark or len(meta.isr) > 1:
                moved, watermark = loop.time(), meta.high_watermark
            elif loop.time() - moved >= STUCK_AFTER:
                return meta, True
            await asyncio.sleep(_SETTLE_POLL)
            meta = await self.partition_metadata(stream, partition)
            if meta.leader != leader:
                leader, target = meta.leader, meta.newest_offset
        return meta, False

    async def appended_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """``OffsetBounds(0, newest offset + 1)`` of every partition, from its leader: what
        it appended, committed or not (:class:`streamwire.Settling`)."""
        bounds = {}
        for partition in await self.partition_ids(stream):
            meta = await self.partition_metadata(stream, partition)
            bounds[partition] = OffsetBounds(0, max(int(meta.newest_offset) + 1, 0))
        return bounds

    async def fenced_bounds(self, stream: str, *, timeout: float) -> dict[int, OffsetBounds]:
        """:meth:`settled_bounds`, once every message handed to the NATS server for the
        stream before this call, by any connection, is appended too (or dropped by NATS), by
        writing one marker to each partition (:data:`TAIL_COMMIT_HEADER`, an empty value;
        the Spark source skips it) and waiting for its ack (:class:`streamwire.Settling`).

        A publish reaches the server through NATS, which keeps what a connection sent,
        after that connection closed, until the partition's leader takes it; a paused or
        busy leader takes it seconds later. NATS hands one subscriber its messages in the
        order it received them, so a marker acknowledged means what came before it is in
        the log. Checked first as :meth:`settled_bounds` checks: a tail only a write would
        commit stays an :class:`~streamwire.errors.UncommittedTailError`, not committed by
        the marker."""
        deadline = Deadline(timeout, what=f"fencing {stream!r}")
        await self.settled_bounds(stream, timeout=deadline.remaining() or 0.0)
        async with deadline.scope():
            partitions = await self.partition_ids(stream)
            try:
                async with asyncio.TaskGroup() as group:
                    for partition in partitions:
                        group.create_task(self._write_marker(stream, partition))
            except BaseExceptionGroup as group_error:
                raise group_error.exceptions[0] from None
        return await self.settled_bounds(stream, timeout=deadline.remaining() or 0.0)

    async def _write_marker(self, stream: str, partition: int) -> None:
        async with self.producer(stream, partition=partition) as producer:
            await (await producer.send(b"", headers={TAIL_COMMIT_HEADER: b""}))

    async def commit_tail(self, stream: str, partition: int, *, timeout: float) -> OffsetBounds:
        """Commit what ``partition`` holds past its high watermark by writing one message to
        it (:data:`TAIL_COMMIT_HEADER`, an empty value; the Spark source skips it), and
        return its :meth:`offset_bounds` once that is acknowledged. With nothing past the
        high watermark, nothing is written (:class:`streamwire.Settling`). Records a crash
        left past the partition's index (docs/liftbridge.md, "Records past the index") are
        not looked for here: a reader meets them as an
        :class:`streamwire.UnindexedRecordsError`."""
        async with asyncio.timeout(timeout):
            meta = await self.partition_metadata(stream, partition)
            if meta.high_watermark < meta.newest_offset:
                await self._write_marker(stream, partition)
                meta = await self.partition_metadata(stream, partition)
        return OffsetBounds(0, max(int(meta.high_watermark) + 1, 0))

    # --- lifecycle ---------------------------------------------------------------------

    async def close(self) -> None:
        """Close producers (flushing), consumers (and their reading threads), the NATS
        connection and the gRPC channels. Idempotent. Messages still waiting for an ack
        fail with ConnectionClosed.

        Cancellation: the rest is closed without waiting.
        """
        if self._closed:
            return
        try:
            for child in list(self._children):
                with contextlib.suppress(StreamwireError):
                    await child.close()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self._closed = self._nats.closed = True
        self._children.clear()
        redial, self._redial = self._redial, None
        if redial is not None:
            redial.cancel()
        channels, self._channels = self._channels, None
        publishers, self._publishers = self._publishers, set()
        try:
            if redial is not None:  # it closes what it was opening
                await asyncio.wait({redial}, timeout=_END_TIMEOUT)
                if not redial.done():
                    logger.warning(
                        "Liftbridge client close: the NATS redial still runs %.0f s after "
                        "it was cancelled; it closes what it opens once it ends",
                        _END_TIMEOUT,
                    )
            for publisher in publishers:
                await publisher.abort(ConnectionClosed("the client closed before the ack arrived"))
        finally:
            if self._nats.acks is not None:
                self._nats.acks.close()
            link = self._nats.detach()  # after the redial: it may have set one
            try:
                if link is not None:
                    await link.close()
            finally:
                try:
                    await self._h2.aclose()
                finally:
                    if channels is not None:
                        await channels.close()
