"""Iggy client: management API over one connection, plus producers and consumers that each
open their own connection (Iggy is one request at a time per connection, and consumer-group
membership belongs to a connection's session).

Addresses are ``"stream/topic"``, or a bare ``"stream"`` for that stream's default topic
(``DEFAULT_TOPIC``, ``"default"``): ``create_stream("s/t", partitions=N)`` creates the stream
(if missing) and the topic, ``create_stream("s")`` the stream and its default topic. A lost
management connection is re-dialled on the next call, under the client's reconnect policy (a
new login, hence a new client id and session).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self, TypeVar, Unpack

from streamwire._api import OffsetBounds
from streamwire._options import build_options, option_names
from streamwire._stored import consumer_name, offset_to_store
from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import OffsetLike
from streamwire.errors import ClosedError, ConfigurationError, StreamwireError
from streamwire.iggy._admin import AdminMixin
from streamwire.iggy._connection import Connection, Credentials
from streamwire.iggy._kwargs import ConsumerKwargs, ProducerKwargs, StreamKwargs
from streamwire.iggy._options import parse_address, topic_of, topic_options
from streamwire.iggy.consumer import Consumer
from streamwire.iggy.options import ConsumerOptions, ProducerOptions
from streamwire.iggy.producer import Producer
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.errors import (
    STREAM_OR_TOPIC_MISSING,
    StreamNameAlreadyExists,
    TopicNameAlreadyExists,
    TopicNameNotFound,
)
from streamwire.iggy.protocol.identifiers import Consumer as WireConsumer
from streamwire.iggy.protocol.machine import MachineSettings, ReplyStats
from streamwire.iggy.protocol.messaging import GetConsumerOffset, StoreConsumerOffset
from streamwire.metrics import ConnectionMeter, ConnectionStats, Destination
from streamwire.transport.reconnect import ReconnectPolicy, retry
from streamwire.transport.resources import AsyncClosing
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive
from streamwire.transport.tls import TLSConfig

__all__ = ("Client", "PartitionOffsets")

logger = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """Where the messages of one partition are, as GET_TOPIC reports them.

    ``next`` is the offset the next appended message gets (one past the newest; 0 for a
    partition that never had a message); ``first`` is the oldest offset still stored
    (``next - messages``: segments deleted by retention or ``delete_segments`` lower the
    count), equal to ``next`` when nothing is stored.
    """

    partition: int
    first: int
    next: int
    messages: int

    @classmethod
    def of(cls, record: st.PartitionRecord) -> PartitionOffsets:
        # current_offset is the newest offset, and 0 before the first message: an empty
        # partition and one holding only offset 0 differ by messages_count alone. A
        # partition whose messages were all deleted keeps its current_offset.
        had_messages = record.messages_count > 0 or record.current_offset > 0
        nxt = record.current_offset + 1 if had_messages else 0
        first = max(nxt - record.messages_count, 0)
        return cls(record.id, first, nxt, record.messages_count)


class Client(AdminMixin, AsyncClosing):
    """An Iggy client. Create with :func:`streamwire.iggy.connect`."""

    def __init__(
        self,
        host: str,
        port: int,
        credentials: Credentials,
        *,
        tls: TLSConfig | None = None,
        timeout: float | None = 30.0,
        settings: MachineSettings | None = None,
        reconnect: ReconnectPolicy | None = None,
        tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> None:
        self.host = host
        self.port = port
        self.credentials = credentials
        self.tls = tls
        self.tcp_keepalive = tcp_keepalive
        self.timeout = timeout
        self.settings = settings or MachineSettings()
        self.reconnect = reconnect
        self.reply_stats = ReplyStats()
        """Replies on this client's connections that differed from the notes but were
        accepted, as the official SDK accepts them: answered out of order, under another
        operation (real servers answer CreateTopic with their internal operation 64) or
        another client id (docs/iggy.md, "How a reply is matched")."""
        self._conn: Connection | None = None
        self._meter = ConnectionMeter(Destination("iggy", "", f"{host}:{port}"))
        self._children: set[Producer | Consumer] = set()
        self._closing = False  # no new work
        self._closed = False  # everything was closed cleanly

    # --- connections ---------------------------------------------------------------------

    async def _open(self) -> Self:
        self._conn = await self._dial()
        return self

    async def _dial(self, again: bool = False) -> Connection:
        """A new logged-in connection (``again``: it replaces a lost one, for the stats)."""
        try:
            conn = await Connection.open(
                self.host,
                self.port,
                self.credentials,
                tls=self.tls,
                timeout=self.timeout,
                settings=self.settings,
                stats=self.reply_stats,
                keepalive=self.tcp_keepalive,
            )
        except StreamwireError:
            self._meter.failed()
            raise
        self._meter.connected(again)
        conn.on_lost.append(self._connection_lost)
        return conn

    def _connection_lost(self, exc: StreamwireError) -> None:
        if not isinstance(exc, ClosedError):  # lost, not closed by us
            self._meter.failed()

    async def _dial_with_retry(self, what: str, *, again: bool = False) -> Connection:
        """A new logged-in connection; failures are retried under the reconnect policy."""
        self._check()
        try:
            return await self._dial(again)
        except StreamwireError as exc:
            if self.reconnect is None:
                raise
            return await retry(lambda: self._dial(again), self.reconnect, cause=exc, what=what)

    def _check(self) -> None:
        if self._closing:
            raise ClosedError("client is closed")

    def _forget(self, child: object) -> None:
        self._children.discard(child)

    async def connection(self) -> Connection:
        """The management connection (re-dialled if it was lost)."""
        self._check()
        conn = self._conn
        if conn is None or not conn.is_open:
            again = conn is not None
            conn = self._conn = await self._dial_with_retry("management connection", again=again)
        return conn

    async def request(self, payload: RequestPayload[R], *, timeout: float | None = None) -> R:
        """Send any request payload over the management connection (the low-level API)."""
        conn = await self.connection()
        result: R = await conn.request(payload, timeout=timeout)
        return result

    @property
    def user_id(self) -> int | None:
        conn = self._conn
        return conn.login.user_id if conn is not None and conn.login else None

    @property
    def server_version(self) -> str | None:
        conn = self._conn
        return conn.login.server_version if conn is not None and conn.login else None

    # --- system --------------------------------------------------------------------------

    async def ping(self, *, timeout: float | None = None) -> None:
        await self.request(sy.Ping(), timeout=timeout)

    @property
    def stats(self) -> ConnectionStats:
        """Counters of this client's connections (management, producers', consumers'):
        connections made, made again after a loss, and failures (docs/api.md). The server's
        own statistics are :meth:`server_stats`."""
        return self._meter.snapshot()

    async def server_stats(self) -> sy.Stats:
        """The server's statistics (GetStats)."""
        return await self.request(sy.GetStats())

    async def me(self) -> sy.ClientDetails | None:
        return await self.request(sy.GetMe())

    async def clients(self) -> list[sy.ClientInfo]:
        return list((await self.request(sy.GetClients())).clients)

    # --- streams and topics --------------------------------------------------------------

    async def create_stream(
        self,
        name: str,
        *,
        partitions: int = 1,
        exist_ok: bool = False,
        options: dict[str, HeaderValue] | None = None,
        **topic_kwargs: Unpack[StreamKwargs],
    ) -> None:
        """Create the topic ``name`` addresses, and its stream if missing: ``"stream/topic"``,
        or for a bare ``"stream"`` the stream with its default topic (``DEFAULT_TOPIC``).
        ``exist_ok``: an existing topic is fine too (an existing stream always is, so that
        topics can be added to it). ``topic_kwargs``: message_expiry (s), max_topic_size,
        compression_algorithm, segment_size, durability, consumer_offset_durability,
        messages_required_to_save, size_of_messages_required_to_save, preallocate_segments,
        enforce_fsync (docs/iggy.md, "Durability": what a server crash may lose);
        ``options`` passes raw option values.

        Cancellation: the stream or topic may or may not have been created.
        """
        if partitions < 1:
            raise ConfigurationError("partitions must be >= 1")
        stream, topic = topic_of(name)
        block = topic_options(topic_kwargs, options)  # validated before anything is created
        with contextlib.suppress(StreamNameAlreadyExists):
            await self.request(st.CreateStream(name=str(stream.value)))
        request = st.CreateTopic(
            stream=stream,
            partitions_count=partitions,
            name=str(topic.value),
            options=block,
        )
        try:
            await self.request(request)
        except TopicNameAlreadyExists:
            if not exist_ok:
                raise

    async def delete_stream(self, name: str, *, missing_ok: bool = False) -> None:
        """Delete a stream (a bare name: the whole Iggy stream, every topic in it), or with
        ``"stream/topic"`` only that topic.

        Cancellation: it may or may not have been deleted.
        """
        stream, topic = parse_address(name)
        missing: tuple[type[BaseException], ...] = STREAM_OR_TOPIC_MISSING if missing_ok else ()
        with contextlib.suppress(*missing):
            if topic is None:
                await self.request(st.DeleteStream(stream))
            else:
                await self.request(st.DeleteTopic(stream, topic))

    async def stream_exists(self, name: str) -> bool:
        stream, topic = parse_address(name)
        if topic is None:
            return await self.request(st.GetStream(stream)) is not None
        return await self.request(st.GetTopic(stream, topic)) is not None

    async def get_stream(self, name: str) -> st.StreamDetails | None:
        return await self.request(st.GetStream(parse_address(name)[0]))

    async def streams(self) -> list[st.StreamRecord]:
        return list((await self.request(st.GetStreams())).streams)

    async def list_streams(self) -> list[str]:
        """Every topic's address, ``"stream/topic"``, sorted (:class:`streamwire.Listing`:
        what Iggy calls a topic is what the unified API calls a stream)."""
        out: list[str] = []
        for record in await self.streams():
            out += (f"{record.name}/{t.name}" for t in await self.topics(record.name))
        return sorted(out)

    async def get_topic(self, address: str) -> st.TopicDetails | None:
        stream, topic = topic_of(address)
        return await self.request(st.GetTopic(stream, topic))

    async def partition_offsets(self, address: str) -> dict[int, PartitionOffsets]:
        """``{partition id: PartitionOffsets}`` of every partition of topic ``address``
        (``"stream/topic"``), in partition order, from one GET_TOPIC request. Raises
        :class:`~streamwire.iggy.protocol.errors.TopicNameNotFound` when there is no such
        topic."""
        details = await self.get_topic(address)
        if details is None:
            raise TopicNameNotFound(f"topic {address!r} does not exist")
        records = sorted(details.partitions, key=lambda p: p.id)
        return {p.id: PartitionOffsets.of(p) for p in records}

    async def topics(self, stream: str) -> list[st.TopicRecord]:
        ident = parse_address(stream)[0]
        return list((await self.request(st.GetTopics(ident))).topics)

    async def purge(self, name: str) -> None:
        """Delete every message of a stream or (``"stream/topic"``) a topic."""
        stream, topic = parse_address(name)
        if topic is None:
            await self.request(st.PurgeStream(stream))
        else:
            await self.request(st.PurgeTopic(stream, topic))

    async def create_partitions(self, address: str, count: int) -> None:
        await self.request(st.CreatePartitions(*topic_of(address), count))

    async def delete_partitions(self, address: str, count: int) -> None:
        await self.request(st.DeletePartitions(*topic_of(address), count))

    async def delete_segments(self, address: str, partition: int, count: int) -> None:
        await self.request(st.DeleteSegments(*topic_of(address), partition, count))

    # --- producers and consumers ---------------------------------------------------------

    @property
    def producer_options(self) -> frozenset[str]:
        """The options :meth:`producer` takes besides ``name`` (:class:`ProducerOptions`)."""
        return option_names(ProducerOptions)

    def producer(
        self, stream: str, *, name: str | None = None, **options: Unpack[ProducerKwargs]
    ) -> Producer:
        """A producer for ``stream`` (``"stream/topic"``, or a bare stream name for its
        default topic); ``async with`` it (or ``await`` it) to start it. ``name`` is the
        producer's identity in the unified API; Iggy has no producer deduplication, so it is
        accepted and has no effect (docs/api.md). Options: see :class:`ProducerOptions`."""
        self._check()
        settings = build_options(ProducerOptions, options, "Iggy producer")
        producer = Producer(self, stream, options=settings)
        self._children.add(producer)
        return producer

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike | None = None,
        name: str | None = None,
        group: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> Consumer:
        """A consumer of ``stream`` (``"stream/topic"``, or a bare stream name for its
        default topic); ``async with`` it (or ``await``
        it). ``name`` enables commits and ``offset="next"`` resumption; ``group`` consumes as
        a member of a consumer group (default offset then ``"next"``). Options: see
        :class:`ConsumerOptions`."""
        self._check()
        consumer = Consumer(
            self,
            stream,
            offset=offset,
            name=name,
            group=group,
            options=build_options(ConsumerOptions, options, "Iggy consumer"),
        )
        self._children.add(consumer)
        return consumer

    # --- capabilities (streamwire.Partitioned, streamwire.Bounded) -----------------------

    async def partition_ids(self, stream: str) -> list[int]:
        """The partitions of the topic ``stream`` addresses, in order."""
        return list(await self.partition_offsets(stream))

    def partition_consumer(
        self,
        stream: str,
        partition: int,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        max_poll: int | None = None,
    ) -> Consumer:
        """:meth:`consumer` of one partition; ``max_poll`` caps the messages a poll asks for
        (``batch_size``)."""
        if max_poll is None:
            return self.consumer(stream, offset=offset, name=name, partition=partition)
        return self.consumer(
            stream, offset=offset, name=name, partition=partition, batch_size=max_poll
        )

    async def offset_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """``OffsetBounds(first, next)`` of every partition, from one GET_TOPIC."""
        offsets = await self.partition_offsets(stream)
        return {p: OffsetBounds(o.first, o.next) for p, o in offsets.items()}

    async def committed_offset(
        self, stream: str, name: str, *, partition: int | None = None
    ) -> int | None:
        """The offset consumer ``name`` stored on ``partition`` of topic ``stream`` (``None``:
        none), without a consumer; ``partition`` may be left out when the topic has one."""
        s, t = topic_of(stream)
        pid = await self._the_partition(stream, partition)
        info = await self.request(
            GetConsumerOffset(
                consumer=WireConsumer.single(consumer_name(name)), stream=s, topic=t, partition=pid
            )
        )
        return None if info is None else info.stored_offset

    async def store_offset(
        self, stream: str, name: str, offset: int, *, partition: int | None = None
    ) -> None:
        """Store ``offset`` for consumer ``name`` on ``partition`` of topic ``stream``,
        without a consumer (the server answers once it has it)."""
        s, t = topic_of(stream)
        consumer = WireConsumer.single(consumer_name(name))
        offset = offset_to_store(offset)
        pid = await self._the_partition(stream, partition)
        await self.request(
            StoreConsumerOffset(consumer=consumer, stream=s, topic=t, partition=pid, offset=offset)
        )

    async def _the_partition(self, stream: str, partition: int | None) -> int:
        if partition is not None:
            return partition
        ids = await self.partition_ids(stream)
        if len(ids) != 1:
            raise ConfigurationError(f"topic {stream!r} has {len(ids)} partitions: pass partition=")
        return ids[0]

    async def send(
        self,
        address: str,
        messages: Sequence[bytes | Message],
        *,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> list[Confirmation]:
        """Send messages in one batch through a short-lived producer and wait for them."""
        async with self.producer(address, partition=partition, linger=0.0) as producer:
            futures = await producer.send_batch(messages)
            await producer.flush(timeout)
            return [f.result() for f in futures]

    # --- lifecycle -----------------------------------------------------------------------

    async def close(self) -> None:
        """Close producers (flushing), consumers and the connection. Idempotent.

        Cancellation: whatever was not closed yet is aborted (producers, consumers, the
        connection) before ``CancelledError`` propagates.
        """
        self._closing = True
        if self._closed:
            return
        try:
            for child in list(self._children):
                with contextlib.suppress(StreamwireError):
                    await child.close()
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
            self._closed = True
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop everything at once: producers, consumers and the connection. Idempotent."""
        self._closing = True
        for child in list(self._children):
            child.abort()
        self._children.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()
