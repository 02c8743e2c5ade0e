"""RabbitMQ Streams client: stream management, topology, and the connections behind
producers and consumers.

The client dials the URL's broker once (the *locator* connection, used for management and
metadata). Producers go to the stream leader's node and consumers to the leader or, when
asked, a replica, as the broker advertises them in Metadata; ``address_resolver`` maps an
advertised (host, port) to a reachable one (NAT, docker). Connections are shared per
advertised node and reopened on demand after a loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Self, TypeVar, Unpack

from streamwire._api import OffsetBounds
from streamwire._options import build_options, check_names, option_names
from streamwire._stored import consumer_name, offset_to_store
from streamwire.codec.offset import Offset, OffsetLike
from streamwire.errors import (
    ConfigurationError,
    RemoteProtocolError,
    StreamNotFoundError,
    StreamwireError,
    UnsupportedByBroker,
)
from streamwire.metrics import ConnectionMeter, ConnectionStats, Destination
from streamwire.rabbitmq._connection import Connection
from streamwire.rabbitmq._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.rabbitmq._placement import AddressResolver, Placement, StreamInfo
from streamwire.rabbitmq.consumer import Consumer, ConsumerOptions
from streamwire.rabbitmq.credentials import Token, TokenProvider, refresh_delay
from streamwire.rabbitmq.producer import Producer, ProducerOptions
from streamwire.rabbitmq.protocol.connection import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SimpleResponse,
)
from streamwire.rabbitmq.protocol.constants import CommandKey, ResponseCode
from streamwire.rabbitmq.protocol.consuming import (
    ResolveOffsetSpecRequest,
    ResolveOffsetSpecResponse,
    StoreOffset,
    offset_spec,
)
from streamwire.rabbitmq.protocol.machine import ConnectionSettings, StreamsConnection
from streamwire.rabbitmq.protocol.streams import (
    CreateRequest,
    CreateSuperStreamRequest,
    DeleteRequest,
    DeleteSuperStreamRequest,
    PartitionsRequest,
    PartitionsResponse,
    RouteRequest,
    RouteResponse,
    StreamStatsRequest,
    StreamStatsResponse,
)
from streamwire.rabbitmq.superstream import (
    Routing,
    SuperStreamConsumer,
    SuperStreamProducer,
    hash_partition,
)
from streamwire.transport.reconnect import ReconnectPolicy, retry
from streamwire.transport.resources import AsyncClosing
from streamwire.transport.tasks import cancel_now, cancel_tasks
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSConfig

__all__ = ("AddressResolver", "Client", "StreamInfo")

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Child = Producer | Consumer | SuperStreamProducer | SuperStreamConsumer

_STREAM_ARGUMENTS = {
    "max_length_bytes": "max-length-bytes",
    "max_age": "max-age",
    "max_segment_size_bytes": "stream-max-segment-size-bytes",
    "initial_cluster_size": "initial-cluster-size",
    "leader_locator": "queue-leader-locator",
    "filter_size_bytes": "stream-filter-size-bytes",
}


class Client(Placement, AsyncClosing):
    """A RabbitMQ Streams client. Create with :func:`streamwire.rabbitmq.connect`."""

    def __init__(
        self,
        host: str,
        port: int,
        settings: ConnectionSettings,
        *,
        tls: TLSConfig | None = None,
        timeout: float | None = 30.0,
        reconnect: ReconnectPolicy | None = None,
        address_resolver: AddressResolver | None = None,
        load_balancer: bool = False,
        seeds: Sequence[tuple[str, int]] = (),
        tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> None:
        self.host = host
        self.port = port
        self.seeds: tuple[tuple[str, int], ...] = tuple(seeds) or ((host, port),)
        """The addresses tried in turn for the locator connection (the URL's node list)."""
        self._seed_lock = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self.settings = settings
        self.tls = tls
        self.tcp_keepalive = tcp_keepalive
        self.timeout = timeout
        self.reconnect = reconnect
        self._resolve = address_resolver or (lambda h, p: (h, p))
        self.load_balancer = load_balancer
        self.load_balancer_attempts = 20
        self.load_balancer_delay = 0.2
        if load_balancer and address_resolver is not None:
            raise ConfigurationError("use either load_balancer or address_resolver, not both")
        self._conns: dict[tuple[str, str, int], Connection] = {}
        self._locator: Connection | None = None
        self._opening: dict[tuple[str, str, int], asyncio.Task[Connection]] = {}
        self._children: set[_Child] = set()
        self._closing = False  # no new work
        self._closed = False  # everything was closed cleanly
        self._meter = ConnectionMeter(Destination("rabbitmq", "", f"{host}:{port}"))
        self._ever: set[tuple[str, str, int]] = set()  # connection keys ever registered

    # --- connections (placed by _placement.Placement) -------------------------------------

    async def _open(self) -> Self:
        self._locator = await self._dial_seeds()
        return self

    def _forget_child(self, child: object) -> None:
        """Called by a producer or consumer once it is closed."""
        self._children.discard(child)

    async def retry(
        self, attempt: Callable[[], Awaitable[T]], cause: BaseException, *, what: str
    ) -> T:
        """Run ``attempt`` under the reconnect policy (used by producers and consumers)."""
        if self.reconnect is None:
            raise cause
        return await retry(attempt, self.reconnect, cause=cause, what=what)

    @property
    def stats(self) -> ConnectionStats:
        """Counters of this client's connections (locator, producers', consumers'):
        connections made, made again after a loss, and failures (docs/api.md)."""
        return self._meter.snapshot()

    # --- broker facts --------------------------------------------------------------------

    @property
    def server_properties(self) -> dict[str, str]:
        conn = self._locator
        return dict(conn.machine.server_properties) if conn else {}

    @property
    def server_version(self) -> tuple[int, ...]:
        conn = self._locator
        return conn.machine.server_version() if conn else ()

    def supports(self, key: int, version: int = 1) -> bool:
        """Whether the broker accepts a command (from ExchangeCommandVersions)."""
        conn = self._locator
        return conn is not None and conn.machine.supports(key, version)

    # --- streams -------------------------------------------------------------------------

    async def create_stream(
        self,
        name: str,
        *,
        partitions: int = 1,
        exist_ok: bool = False,
        arguments: dict[str, str] | None = None,
        **options: Unpack[StreamKwargs],
    ) -> None:
        """Create a stream (``partitions > 1``: a super stream ``name`` with partitions
        ``name-0`` ... on 3.13+). Options: max_length_bytes, max_age (e.g. "7D"),
        max_segment_size_bytes, initial_cluster_size, leader_locator, filter_size_bytes;
        ``arguments`` passes raw broker arguments.

        Cancellation: the stream may or may not have been created.
        """
        args = dict(arguments or {})
        check_names(options, _STREAM_ARGUMENTS, "RabbitMQ stream")
        for key, value in options.items():
            args[_STREAM_ARGUMENTS[key]] = str(value)
        ok = (
            (ResponseCode.OK, ResponseCode.STREAM_ALREADY_EXISTS)
            if exist_ok
            else (ResponseCode.OK,)
        )
        conn = await self._locator_connection()
        if partitions > 1:
            if not conn.machine.supports(CommandKey.CREATE_SUPER_STREAM):
                raise ConfigurationError("this broker cannot create super streams (needs 3.13+)")
            names = tuple(f"{name}-{i}" for i in range(partitions))
            keys = tuple(str(i) for i in range(partitions))
            await conn.request(
                lambda corr: CreateSuperStreamRequest(corr, name, names, keys, args),
                SimpleResponse,
                ok=ok,
            )
            return
        if partitions < 1:
            raise ConfigurationError("partitions must be >= 1")
        await conn.request(lambda corr: CreateRequest(corr, name, args), SimpleResponse, ok=ok)

    async def delete_stream(
        self, name: str, *, missing_ok: bool = False, super_stream: bool = False
    ) -> None:
        """Delete a stream (or a super stream and its partitions).

        Cancellation: the stream may or may not have been deleted.
        """
        ok = (
            (ResponseCode.OK, ResponseCode.STREAM_DOES_NOT_EXIST)
            if missing_ok
            else (ResponseCode.OK,)
        )
        conn = await self._locator_connection()
        make = DeleteSuperStreamRequest if super_stream else DeleteRequest
        await conn.request(lambda corr: make(corr, name), SimpleResponse, ok=ok)

    async def stream_exists(self, name: str) -> bool:
        entry, _ = await self.metadata(name)
        return entry.code == ResponseCode.OK

    async def stream_stats(self, name: str) -> dict[str, int]:
        """``first_chunk_id``, ``committed_chunk_id``, ``last_chunk_id`` (-1 when empty); 3.11+."""
        conn = await self._locator_connection()
        if not conn.machine.supports(CommandKey.STREAM_STATS):
            raise ConfigurationError("this broker has no StreamStats command (needs 3.11+)")
        resp = await conn.request(lambda corr: StreamStatsRequest(corr, name), StreamStatsResponse)
        return dict(resp.stats)

    async def resolve_offset_spec(self, stream: str, offset: OffsetLike) -> int:
        """The absolute offset that ``offset`` (``"first"``, ``"last"``, ``"next"``, an
        ``int``, a ``datetime`` or an :class:`~streamwire.Offset`) stands for on ``stream``
        now, as the broker resolves it for a subscription (ResolveOffsetSpec, RabbitMQ 4.3+).

        On 4.3.6: ``"first"`` is the first retained offset, ``"next"`` the offset the next
        message will get, ``"last"`` the first offset of the last chunk, an offset inside a
        chunk that chunk's first offset (where delivery would start); on an empty stream all
        are 0 (docs/rabbitmq.md, "RabbitMQ 4.3"). Raises
        :class:`~streamwire.errors.UnsupportedByBroker` on older brokers and
        :class:`~streamwire.rabbitmq.protocol.errors.StreamDoesNotExist` for a missing stream.
        """
        wire_type, value = offset_spec(Offset.parse(offset))
        conn = await self._locator_connection()
        if not conn.machine.supports(CommandKey.RESOLVE_OFFSET_SPEC):
            version = ".".join(map(str, self.server_version)) or "this broker"
            raise UnsupportedByBroker(
                f"RabbitMQ {version} has no ResolveOffsetSpec (needs 4.3): resolve the offset "
                "by subscribing, or use offset_bounds()"
            )
        response = await conn.request(
            lambda corr: ResolveOffsetSpecRequest(corr, stream, wire_type, value),
            ResolveOffsetSpecResponse,
        )
        if response.offset is None:
            raise RemoteProtocolError(
                f"ResolveOffsetSpec on {stream!r} answered with offset type "
                f"{response.offset_type} and no offset"
            )
        return response.offset

    async def committed_offset(
        self, stream: str, name: str, *, partition: int | None = None
    ) -> int | None:
        """The offset consumer ``name`` stored on ``stream`` (``None``: none), without a
        consumer (QueryOffset). A stream is one partition (``partition`` ``None`` or 0); for a
        super stream, ``partition`` picks its partition stream."""
        name = consumer_name(name)
        stream = await self._partition_stream(stream, partition)
        return await (await self._consumer_connection(stream)).query_offset(stream, name)

    async def store_offset(
        self, stream: str, name: str, offset: int, *, partition: int | None = None
    ) -> None:
        """Store ``offset`` for consumer ``name`` on ``stream`` without a consumer, as its
        ``commit`` does (StoreOffset, on the leader's connection). RabbitMQ never answers
        StoreOffset, so this asks the leader back on the same connection and returns once it
        has the offset (or a newer one another writer stored meanwhile). For a super stream,
        ``partition`` picks its partition stream."""
        name = consumer_name(name)
        offset = offset_to_store(offset)
        stream = await self._partition_stream(stream, partition)
        conn = await self._leader_connection(stream)
        await conn.send(StoreOffset(name, stream, offset))
        await conn.query_offset(stream, name)  # after the store: the writer has it

    async def _partition_stream(self, stream: str, partition: int | None) -> str:
        """The stream holding ``partition`` of ``stream``: without a partition, ``stream``;
        with one, the super stream's partition stream, or ``stream`` itself for partition 0
        of a plain stream."""
        if partition is None:
            return stream
        try:
            names = await self.partitions(stream)
        except (StreamNotFoundError, UnsupportedByBroker):
            _one_partition(partition)
            return stream
        if not 0 <= partition < len(names):
            raise ConfigurationError(f"super stream {stream!r} has no partition {partition}")
        return names[partition]

    async def offset_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """``{0: OffsetBounds(first, next)}``: a stream is one partition. ``first`` is the
        first chunk's offset; ``next`` is one past the last message of the last *user* chunk
        (offset-tracking chunks hold no message), found by reading from ``"last"``. Needs
        StreamStats (3.11+)."""
        stats = await self.stream_stats(stream)
        first = max(int(stats.get("first_chunk_id", -1)), 0)
        if int(stats.get("committed_chunk_id", -1)) < 0:  # nothing written yet
            return {0: OffsetBounds(first, first)}
        timeout = 5.0 if self.timeout is None else min(self.timeout, 5.0)
        async with self.consumer(stream, offset="last") as consumer:
            batch = await consumer.next_batch(max_messages=1 << 20, timeout=timeout)
        offsets = [m.offset for m in batch if m.offset is not None]
        return {0: OffsetBounds(first, max(offsets) + 1 if offsets else first)}

    async def partitions(self, super_stream: str) -> list[str]:
        """The partition streams of a super stream, in partition order
        (:class:`~streamwire.StreamNotFoundError` when ``super_stream`` is none;
        :class:`~streamwire.UnsupportedByBroker` before 3.11, which has no super streams)."""
        conn = await self._locator_connection()
        _check_super_streams(conn.machine)
        resp = await conn.request(
            lambda corr: PartitionsRequest(corr, super_stream), PartitionsResponse
        )
        return list(resp.streams)

    async def route(self, routing_key: str, super_stream: str) -> list[str]:
        """The partitions bound to ``routing_key`` (empty when none is)."""
        conn = await self._locator_connection()
        _check_super_streams(conn.machine)
        resp = await conn.request(
            lambda corr: RouteRequest(corr, routing_key, super_stream), RouteResponse
        )
        return list(resp.streams)

    # --- producers and consumers ---------------------------------------------------------

    def partition_for_key(self, key: bytes, partitions: int) -> int:
        """The partition a super stream's default (``"hash"``) routing picks for ``key``: the
        Java client's MurmurHash3 (:func:`~streamwire.rabbitmq.superstream.hash_partition`)."""
        return hash_partition(key, partitions)

    def super_stream_producer(
        self,
        super_stream: str,
        *,
        routing: Routing = "hash",
        name: str | None = None,
        **options: Unpack[ProducerKwargs],
    ) -> SuperStreamProducer:
        """A producer routing each message to the partitions of ``super_stream``: by key
        (``"hash"``, as the Java client, or ``"key"``, the broker's bindings) or with a
        :data:`~streamwire.rabbitmq.superstream.Router` of your own."""
        self._check()
        build_options(ProducerOptions, options, "RabbitMQ producer")  # validate now
        producer = SuperStreamProducer(
            self, super_stream, routing=routing, name=name, options=options
        )
        self._children.add(producer)
        return producer

    def super_stream_consumer(
        self,
        super_stream: str,
        /,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> SuperStreamConsumer:
        """A consumer of every partition of ``super_stream``."""
        self._check()
        build_options(ConsumerOptions, options, "RabbitMQ consumer")  # validate now
        consumer = SuperStreamConsumer(
            self, super_stream, offset=offset, name=name, options=options
        )
        self._children.add(consumer)
        return consumer

    @property
    def producer_options(self) -> frozenset[str]:
        """The options :meth:`producer` takes besides ``name`` (:class:`ProducerOptions`)."""
        return option_names(ProducerOptions)

    def producer(
        self, stream: str, *, name: str | None = None, **options: Unpack[ProducerKwargs]
    ) -> Producer:
        """A producer for ``stream``; ``async with`` it (or ``await`` it) to start it.
        ``name`` turns on deduplication. Options: see :class:`ProducerOptions`."""
        self._check()
        settings = build_options(ProducerOptions, options, "RabbitMQ producer")
        producer = Producer(self, stream, name=name, options=settings)
        self._children.add(producer)
        return producer

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> Consumer:
        """A consumer of ``stream`` from ``offset``; ``async with`` it (or ``await`` it).
        ``name`` enables commits and ``offset="next"`` resumption. Options: see
        :class:`ConsumerOptions`."""
        self._check()
        settings = build_options(ConsumerOptions, options, "RabbitMQ consumer")
        consumer = Consumer(self, stream, offset=offset, name=name, options=settings)
        self._children.add(consumer)
        return consumer

    # --- lifecycle -----------------------------------------------------------------------

    async def close(self) -> None:
        """Close producers (flushing), consumers and every connection. Idempotent.

        Cancellation: whatever was not closed yet is aborted (producers, consumers,
        connections) before ``CancelledError`` propagates.
        """
        self._closing = True
        if self._closed:
            return
        try:
            await cancel_tasks([self._refresh], timeout=1.0)
            for child in list(self._children):
                with contextlib.suppress(StreamwireError):
                    await child.close()
            await cancel_tasks(self._opening.values(), timeout=1.0)
            for conn in self._connections():
                await conn.close()
            self._closed = True
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop everything at once: producers and consumers are aborted, connections (and
        connections being opened) too. Idempotent."""
        self._closing = True
        for child in list(self._children):
            child.abort()
        self._children.clear()
        cancel_now([*self._opening.values(), self._refresh])
        for conn in self._connections():
            conn.abort()
        self._conns.clear()
        self._locator = None

    # --- credentials -------------------------------------------------------------------

    async def update_secret(self, password: str) -> None:
        """Re-authenticate every open connection with a new secret — SASL PLAIN, same user,
        as RabbitMQ allows after Open since 3.13 — and use it for later connections too:
        the way to hand a refreshed OAuth 2 token to the broker before the old one expires
        (it closes connections whose token expired). :func:`connect`'s ``token_provider``
        calls this on its own.

        Raises the broker's answer for a refused secret (``AuthenticationFailure``; the
        broker then closes that connection, and recovery redials with the new secret), and
        :class:`~streamwire.errors.UnsupportedByBroker` before 3.13.
        """
        self._check()
        settings = self.settings
        if (settings.mechanism or "PLAIN") != "PLAIN" or settings.username is None:
            raise ConfigurationError("update_secret() needs SASL PLAIN with a username")
        self.settings = replace(settings, password=password)
        data = b"\0" + settings.username.encode() + b"\0" + password.encode()
        failure: StreamwireError | None = None
        for conn in self._connections():
            if not conn.is_open:
                continue
            if conn.machine.server_version() < (3, 13):
                raise UnsupportedByBroker(
                    "re-authenticating an open connection needs RabbitMQ 3.13 or later"
                )
            try:
                await conn.request(
                    lambda corr: SaslAuthenticateRequest(corr, "PLAIN", data),
                    SaslAuthenticateResponse,
                )
            except StreamwireError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _start_token_refresh(self, provider: TokenProvider, token: Token) -> None:
        self._refresh = asyncio.create_task(
            self._refresh_tokens(provider, token), name="streamwire-rabbitmq-token-refresh"
        )

    async def _refresh_tokens(self, provider: TokenProvider, token: Token) -> None:
        """Ask ``provider`` for a new token before the current one expires
        (:func:`~streamwire.rabbitmq.credentials.refresh_delay`) and hand it to every
        connection."""
        while token.expires_at is not None:
            await asyncio.sleep(refresh_delay(token.expires_at - time.time()))
            try:
                token = await provider()
                await self.update_secret(token.value)
            except StreamwireError as exc:
                logger.warning("token refresh failed, retrying: %s", exc)
            except Exception:
                logger.exception("the token provider failed, retrying")

    def _connections(self) -> list[Connection]:
        conns = {id(c): c for c in self._conns.values()}
        if self._locator is not None:
            conns[id(self._locator)] = self._locator
        return list(conns.values())


def _one_partition(partition: int | None) -> None:
    if partition not in (None, 0):
        raise ConfigurationError(
            f"a RabbitMQ stream is one partition (0), not {partition!r}; a super stream's "
            "partitions are streams of their own (client.partitions(super_stream))"
        )


def _check_super_streams(machine: StreamsConnection) -> None:
    """Refuse super-stream queries on a broker without them: RabbitMQ 3.10 does not know
    Partitions and Route and answers with bytes that end the connection."""
    if machine.command_versions:
        known = machine.supports(CommandKey.PARTITIONS)
    else:  # before 3.13 no command versions are exchanged: go by the server's version
        known = machine.server_version() >= (3, 11)
    if not known:
        version = ".".join(map(str, machine.server_version())) or "this broker"
        raise UnsupportedByBroker(f"RabbitMQ {version} has no super streams (needs 3.11)")
