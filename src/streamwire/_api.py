"""The unified API every protocol client offers (docs/api.md), as typing protocols.

``streamwire.connect(url)`` returns a :class:`Client`; its producers and consumers follow
:class:`Producer` and :class:`Consumer`. Protocol packages implement them structurally and add
their own richer options. The docstrings here are the specification: a call means the same on
every broker, and what a broker lacks is a documented no-op, never an error of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Generator, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, NamedTuple, Protocol, Self, TypedDict, Unpack, runtime_checkable

from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import OffsetLike
from streamwire.metrics import ConnectionStats, ConsumerStats, ProducerStats
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tcp import TcpKeepalive
from streamwire.transport.tls import TLSOptions

__all__ = (
    "BatchConfirmation",
    "Bounded",
    "Client",
    "ConnectKwargs",
    "Consumer",
    "ConsumerKwargs",
    "DeduplicatingProducer",
    "KeyRouted",
    "OffsetBounds",
    "Partitioned",
    "Producer",
    "ProducerKwargs",
    "StreamKwargs",
)


# --- options -------------------------------------------------------------------------------
#
# Keyword options are TypedDicts: the ones here are those every broker takes; each protocol
# package extends them with its own (``streamwire.rabbitmq.ProducerKwargs`` ...), and its
# client's signatures name those. An unknown or misspelled option raises ConfigurationError
# naming the close matches.


class ConnectKwargs(TypedDict, total=False):
    """Options of :func:`streamwire.connect` every broker takes (each protocol's
    ``connect`` documents the rest; a name it does not take raises ConfigurationError)."""

    timeout: float | None
    """Seconds: one budget for TCP, TLS, handshake and authentication."""
    tls: TLSOptions | bool | None
    """TLS settings (``True``: the defaults; the ``+tls`` URL schemes imply it)."""
    reconnect: ReconnectPolicy | None
    """Recovery after a lost connection (``None``: off)."""
    tcp_keepalive: TcpKeepalive | None
    """How a connection gone silent without a reset (a black hole) is noticed: TCP
    keepalive probes and TCP_USER_TIMEOUT on streamwire's own connections (default
    :data:`~streamwire.transport.DEFAULT_KEEPALIVE`, within about a minute; ``None``: the
    kernel's defaults, hours)."""


class StreamKwargs(TypedDict, total=False):
    """Options of ``create_stream`` every broker takes: none; see the protocol packages'
    ``StreamKwargs``."""


class ProducerKwargs(TypedDict, total=False):
    """Options of ``producer()`` every broker takes; the protocol packages'
    ``ProducerKwargs`` add their own."""

    confirm_timeout: float | None
    """Default wait of ``send_and_wait`` and ``flush``, in seconds."""
    max_block: float | None
    """How long ``send`` waits for room in a full buffer before ProducerBufferFull."""
    max_in_flight: int
    """How many messages may be sent and not yet confirmed at once (sending waits for
    confirmations beyond it). Iggy sends whole batches: one batch may pass it."""


class ConsumerKwargs(TypedDict, total=False):
    """Options of ``consumer()`` every broker takes: none; see the protocol packages'
    ``ConsumerKwargs``."""


class _AsyncResource(Protocol):
    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class _Startable(_AsyncResource, Protocol):
    def __await__(self) -> Generator[Any, None, Self]:
        """``await producer`` (or consumer) starts it and returns it."""
        ...


class BatchConfirmation(Protocol):
    """What the one future of :meth:`Producer.send_many` resolves to once every message of
    the call is stored (each broker's own type adds where they went: publishing ids on
    RabbitMQ, offsets per partition on Liftbridge and Iggy)."""

    @property
    def messages(self) -> int:
        """How many messages the call sent."""
        ...

    @property
    def stream(self) -> str:
        """The stream they went to."""
        ...


class Producer(_Startable, Protocol):
    """Publishes to one stream; ``async with`` it (or ``await`` it) to start it."""

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Accept one message; the future resolves to its :class:`Confirmation`.

        ``value`` bytes are sent as ``Message(value, key=key, headers=headers)``. For a
        :class:`Message`, an explicit ``key`` replaces the message's key and ``headers`` are
        merged over its headers (the explicit ones win); the message itself is not modified.
        Every broker stores the key and typed headers and hands them back to consumers.
        """
        ...

    async def send_and_wait(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
    ) -> Confirmation:
        """:meth:`send`, then wait for the confirmation."""
        ...

    async def send_batch(
        self, values: Iterable[bytes | Message]
    ) -> list[asyncio.Future[Confirmation]]:
        """Accept several messages in order; one future each."""
        ...

    async def send_many(self, values: Iterable[bytes | Message]) -> Awaitable[BatchConfirmation]:
        """Accept several messages in order with **one** future for all of them (an
        ``asyncio.Future`` on every broker), the fastest way to publish: it resolves to the
        broker's :class:`BatchConfirmation` once every message is stored, or fails with the
        first error (the others may be stored). Cancellation: what was accepted before it
        stays accepted."""
        ...

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until everything accepted so far is confirmed, or raise."""
        ...

    async def close(self) -> None:
        """Flush, then release the producer. Idempotent. Cancelling it still leaves the
        producer closed (what was not confirmed then fails)."""
        ...

    @property
    def stats(self) -> ProducerStats:
        """A snapshot of the producer's counters: messages published (accepted), confirmed,
        failed (also by close, abort or a lost connection) and in flight, bytes, and the
        confirmation latency histogram. Counted once per call or batch; also after close."""
        ...


class Consumer(_Startable, Protocol):
    """Reads one stream in offset order; ``async with`` it (or ``await`` it) to start it."""

    def __aiter__(self) -> AsyncIterator[Message]: ...

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages; an empty list when none came within ``timeout``."""
        ...

    async def commit(self, offset: int | None = None) -> None:
        """Store ``offset`` (default: the last message handed out) under the consumer's
        ``name`` on the broker; a consumer opened later with the same ``name`` and
        ``offset="next"`` starts after it. Needs a ``name``."""
        ...

    async def close(self) -> None:
        """Release the consumer (storing pending auto-commits where configured). Idempotent.
        Cancelling it still leaves the consumer closed."""
        ...

    @property
    def stats(self) -> ConsumerStats:
        """A snapshot of the consumer's counters: messages handed over, bytes received, the
        last offset handed over and committed, and ``lag`` (messages after the last one
        handed over) where the broker says where the stream ends, else ``None``: RabbitMQ
        3.13+ up to its last committed chunk, Iggy per polled partition, Liftbridge never."""
        ...


class Client(_AsyncResource, Protocol):
    """A connection to one broker; ``streamwire.connect(url)`` makes one."""

    async def create_stream(
        self,
        name: str,
        *,
        partitions: int = 1,
        exist_ok: bool = False,
        **options: Unpack[StreamKwargs],
    ) -> None:
        """Create stream ``name``. A bare name works on every broker: on Iggy it is an Iggy
        stream with the topic ``streamwire.iggy.DEFAULT_TOPIC`` (``"stream/topic"`` names a
        topic; the stream is created when missing). With ``exist_ok`` an existing stream is
        fine; without it, :class:`~streamwire.errors.StreamAlreadyExistsError` on every
        broker."""
        ...

    async def delete_stream(self, name: str, *, missing_ok: bool = False) -> None:
        """Delete stream ``name`` (on Iggy a bare name deletes the whole Iggy stream). With
        ``missing_ok`` a missing stream is fine; without it,
        :class:`~streamwire.errors.StreamNotFoundError` on every broker."""
        ...

    @property
    def producer_options(self) -> frozenset[str]:
        """The names of the options this broker's :meth:`producer` takes besides ``name``
        (its ``ProducerOptions``): a fact to ask before passing one only some brokers have
        (``max_in_flight``: RabbitMQ, Liftbridge)."""
        ...

    def producer(
        self, stream: str, *, name: str | None = None, **options: Unpack[ProducerKwargs]
    ) -> Producer:
        """A producer for ``stream``. ``name`` is the producer's identity, which the broker
        uses where it can: deduplication by publishing id on RabbitMQ Streams; Liftbridge and
        Iggy have no producer deduplication, so there it is accepted and has no effect."""
        ...

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Unpack[ConsumerKwargs],
    ) -> Consumer:
        """A consumer of ``stream`` from ``offset``: ``"first"``, ``"last"``, ``"next"``, an
        ``int`` offset, a ``datetime`` or a :class:`~streamwire.Offset`. ``name`` is the
        identity commits are stored under; ``offset="next"`` with a ``name`` resumes after the
        offset committed under it; with nothing committed (or no ``name``) it reads only
        what is written from then on, on every broker (``test_unified.py``)."""
        ...

    async def committed_offset(
        self, stream: str, name: str, *, partition: int | None = None
    ) -> int | None:
        """The offset consumer ``name`` stored on ``stream`` (``None``: none), without opening
        a consumer: what ``offset="next"`` resumes after. ``partition`` may be left out when
        the stream has one partition (a RabbitMQ stream always has; several raise
        :class:`~streamwire.errors.ConfigurationError`)."""
        ...

    async def store_offset(
        self, stream: str, name: str, offset: int, *, partition: int | None = None
    ) -> None:
        """Store ``offset`` for consumer ``name`` on ``stream`` without a consumer, as a
        consumer's ``commit`` would; returns once the broker has it, so that
        :meth:`committed_offset` reads it back."""
        ...

    async def close(self) -> None:
        """Close producers (flushing), consumers and connections. Idempotent; cancelling it
        still leaves everything closed."""
        ...

    @property
    def stats(self) -> ConnectionStats:
        """A snapshot of the client's connection counters: connections made, made again
        after a loss, and failures (lost connections, failed attempts). A protocol's client
        may return a richer subclass (Liftbridge adds its ack inbox and NATS counters)."""
        ...


# --- capabilities ----------------------------------------------------------------------------
#
# What only some brokers have, as protocols to ask for (``isinstance(client, Partitioned)``),
# never a broker name.


class OffsetBounds(NamedTuple):
    """Where the messages of one partition are."""

    first: int
    """The oldest offset a reader can get."""
    next: int
    """One past the newest readable message (equal to ``first`` when there is none): the
    offset the next message gets, or past it where offsets without a message follow."""


@runtime_checkable
class Partitioned(Protocol):
    """A client whose streams have partitions read one by one (Liftbridge, Iggy). A client
    without this capability has one partition, ``0``, per stream."""

    async def partition_ids(self, stream: str) -> list[int]:
        """The partitions of ``stream``, in order."""
        ...

    def partition_consumer(
        self,
        stream: str,
        partition: int,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        max_poll: int | None = None,
    ) -> Consumer:
        """A consumer of one partition. ``max_poll`` caps the messages one request fetches
        where the broker fetches by request (Iggy; elsewhere it has no effect)."""
        ...


@runtime_checkable
class Bounded(Protocol):
    """A client that can tell where each partition's messages are (all three brokers)."""

    async def offset_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """:class:`OffsetBounds` of every partition of ``stream``, in partition order."""
        ...


@runtime_checkable
class Listing(Protocol):
    """A client that can name its broker's streams (Liftbridge, Iggy). RabbitMQ's stream
    protocol has no command that lists streams."""

    async def list_streams(self) -> list[str]:
        """The streams, by the names a stream's methods take (Iggy: every topic's address,
        ``"stream/topic"``), sorted; streams the broker keeps for itself (Liftbridge's
        ``__cursors`` and ``__activity``) left out."""
        ...


@runtime_checkable
class DeduplicatingProducer(Producer, Protocol):
    """A named producer whose broker drops a message it already stored under the same
    (name, publishing id) (RabbitMQ Streams)."""

    @property
    def last_publishing_id(self) -> int:
        """The last publishing id the broker stored under the producer's name (0: none)."""
        ...

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        publishing_id: int | None = None,
    ) -> asyncio.Future[Confirmation]:
        """:meth:`Producer.send`; ``publishing_id`` replaces the next id (ids not above
        :attr:`last_publishing_id` are dropped by the broker)."""
        ...


@runtime_checkable
class KeyRouted(Protocol):
    """A producer that picks a message's partition itself, by key (Liftbridge, Iggy), and
    can be pinned to one partition with the producer option ``partition=``."""

    @property
    def partition_count(self) -> int:
        """The stream's (or topic's) partitions, known once the producer started."""
        ...

    def partition_for_key(self, key: bytes) -> int:
        """The partition a message with ``key`` goes to when no partition is named."""
        ...


#: The header of the message :meth:`Settling.commit_tail` writes (with an empty value).
TAIL_COMMIT_HEADER: Final = "x-streamwire-tail-commit"


@runtime_checkable
class Settling(Protocol):
    """A client whose broker may hold messages at a partition's tail that are appended but
    not committed yet (Liftbridge: between the high watermark and the newest offset). A
    reader does not see them, and they may still be committed later. Code that reads a
    partition back to learn what a writer stored asks for :meth:`settled_bounds` first."""

    async def settled_bounds(self, stream: str, *, timeout: float) -> dict[int, OffsetBounds]:
        """:meth:`Bounded.offset_bounds`, once every message appended when it was called is
        committed or gone (a new leader's log replaces the old one's);
        :class:`~streamwire.errors.TimeoutError` when that takes longer than ``timeout``;
        :class:`~streamwire.errors.UncommittedTailError` for partitions whose tail only
        the next write would commit (:meth:`commit_tail`)."""
        ...

    async def fenced_bounds(self, stream: str, *, timeout: float) -> dict[int, OffsetBounds]:
        """:meth:`settled_bounds`, once every message any connection handed the broker for
        ``stream`` before the call is appended too, by writing one marker message to each
        partition (as :meth:`commit_tail` writes) and waiting for it: what a writer's
        closed connection left on its way (Liftbridge: in the NATS server, on the way to a
        paused or busy leader) lands before the marker, so a read-back of what the writer
        stored sees it. Raises as :meth:`settled_bounds` does, before writing anything."""
        ...

    async def appended_bounds(self, stream: str) -> dict[int, OffsetBounds]:
        """Like :meth:`Bounded.offset_bounds`, but up to the newest message appended,
        committed or not (a reader cannot get past the committed ones yet)."""
        ...

    async def commit_tail(self, stream: str, partition: int, *, timeout: float) -> OffsetBounds:
        """Commit what a partition holds past its committed messages, by writing one message
        to it: an empty value with the header ``x-streamwire-tail-commit`` (readers see it;
        the Spark source skips it). Returns the partition's bounds once it is committed.
        What an :class:`~streamwire.errors.UncommittedTailError` asks for; with nothing
        uncommitted, it writes nothing."""
        ...


@runtime_checkable
class ReplicatedAcks(Protocol):
    """A client whose producers confirm a message, by default, before the stream's replicas
    have it, and can be asked to wait for them (Liftbridge: ``ack_policy=AckPolicy.ALL``).
    Elsewhere there is nothing to ask: RabbitMQ Streams confirms once a majority of the
    stream's members have the message; what an Iggy acknowledgement keeps is its topic's
    durability settings (docs/iggy.md, "Durability")."""

    @property
    def replicated_ack_options(self) -> Mapping[str, object]:
        """The producer options that make a confirmation mean "replicated" (the leader
        alone losing it, by a crash or a partition, cannot undo it)."""
        ...


@runtime_checkable
class SuperStreams(Protocol):
    """A client whose broker groups streams into super streams (RabbitMQ Streams 3.13+, where
    ``create_stream(name, partitions=n)`` makes one): each partition is a stream of its own,
    and a keyed message goes to the partition its key hashes to."""

    async def partitions(self, super_stream: str) -> list[str]:
        """The partition streams of ``super_stream``, in partition order
        (:class:`StreamNotFoundError` when it is not a super stream)."""
        ...

    def partition_for_key(self, key: bytes, partitions: int) -> int:
        """The partition (0-based) that the broker's own clients' default routing picks for
        a message with ``key`` among ``partitions``."""
        ...
