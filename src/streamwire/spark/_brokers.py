"""What the Spark integration needs from a broker, asked of the unified API's capabilities.

The rest of ``streamwire.spark`` talks to :class:`streamwire.Client` /
:class:`streamwire.Producer` / :class:`streamwire.Consumer` only; this module asks for the
typed capabilities of ``streamwire._api`` (docs/api.md, "Capabilities"), never for a
broker name:

* **Deduplication**: a producer named after the reference that is a
  :class:`streamwire.DeduplicatingProducer` (RabbitMQ Streams) reports the last publishing
  id stored under its name and, being a :class:`RunDeduplicatingProducer`, takes runs of
  messages with the publishing id of the first. For other producers ``name=`` is a no-op.
* **Routing**: a :class:`streamwire.KeyRouted` producer (Liftbridge, Iggy) says where a key
  goes and can be pinned to one partition, which is how the sink resumes an interrupted
  task there (``_resume``).
* **Partitions**: a :class:`streamwire.Partitioned` client lists a stream's partitions and
  opens a consumer of one. On a :class:`streamwire.SuperStreams` client (RabbitMQ Streams) a
  super stream is read and written as a partitioned stream: partition *i* is its *i*-th
  partition stream, and a keyed row goes where the broker's clients route its key. Any
  other stream is one partition, ``0``.
* **Bounds**: a :class:`streamwire.Bounded` client gives every partition's first and next
  offsets.
* **Columns**: a :class:`ColumnarConsumer` (RabbitMQ Streams) hands runs of plain messages
  over as column buffers, which the reader turns into Arrow arrays as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import streamwire
from streamwire.codec.columns import Columns
from streamwire.errors import UnsupportedByBroker
from streamwire.spark.errors import SparkConfigurationError

__all__ = (
    "Broker",
    "ColumnarConsumer",
    "Publisher",
    "RunDeduplicatingProducer",
    "RunProducer",
)

#: The producer option bounding unconfirmed messages, where a producer has one.
_IN_FLIGHT_OPTION: Final = "max_in_flight"
#: Messages a read asks for per request, at most (where the broker fetches by request).
_MAX_POLL: Final = 1000


@runtime_checkable
class ColumnarConsumer(Protocol):
    """A consumer that can hand over runs of plain messages as
    :class:`~streamwire.codec.columns.Columns` (``streamwire.rabbitmq.Consumer``)."""

    async def next_columns(
        self, max_chunks: int = 16, timeout: float | None = 1.0
    ) -> list[Columns | list[streamwire.Message]]: ...


@runtime_checkable
class RunProducer(Protocol):
    """A producer that accepts a run of messages with one future for all of them."""

    async def send_many(
        self, values: Iterable[bytes | streamwire.Message]
    ) -> asyncio.Future[Any]: ...


@runtime_checkable
class RunDeduplicatingProducer(Protocol):
    """A deduplicating producer whose runs take the publishing id of their first message
    (the others follow it): ``streamwire.rabbitmq.Producer``. It differs from
    :class:`RunProducer` by :attr:`last_publishing_id`, so ``isinstance`` tells them apart."""

    @property
    def last_publishing_id(self) -> int: ...

    async def send_many(
        self, values: Iterable[bytes | streamwire.Message], *, publishing_id: int | None = None
    ) -> asyncio.Future[Any]: ...


@dataclass(frozen=True, slots=True)
class Broker:
    """The broker behind a URL, as far as Spark cares."""

    protocol: str

    @classmethod
    def of(cls, url: str) -> Broker:
        return cls(streamwire.parse_url(url).protocol)

    @property
    def log_may_outrun_index(self) -> bool:
        """Whether a partition's log can hold records past the offsets its server reports,
        which a reader from an earlier offset reads under offsets given again: a Liftbridge
        server killed between its log write and its index write
        (``streamwire.UnindexedRecordsError``). The sink's read-back then checks what it
        scans (``_resume``)."""
        return self.protocol == "liftbridge"

    def check_stream(self, stream: str) -> str:
        """``stream`` if it is a name (a bare name works on every broker), else a
        :class:`SparkConfigurationError`."""
        if not stream:
            raise SparkConfigurationError("a stream is required")
        return stream

    # --- publishing ----------------------------------------------------------------------

    async def open_publisher(
        self,
        client: streamwire.Client,
        stream: str,
        *,
        reference: str | None,
        options: Mapping[str, Any],
        max_in_flight: int | None = None,
    ) -> Publisher:
        """Start a producer on ``stream``, named ``reference``. When it is a
        :class:`streamwire.DeduplicatingProducer`, :attr:`Publisher.last_stored` is the last
        publishing id the broker stored under that name (0: none). ``max_in_flight`` is
        passed where the producer has such an option. On a :class:`streamwire.ReplicatedAcks`
        client the producer confirms only what the replicas have (unless ``options`` say
        otherwise): the sink takes a confirmation for "stored", and the stream's leader
        alone cannot keep that promise through a crash or a partition."""
        opts: dict[str, Any] = dict(options)
        if isinstance(client, streamwire.ReplicatedAcks):
            opts = {**client.replicated_ack_options, **opts}
        if max_in_flight is not None and _IN_FLIGHT_OPTION in client.producer_options:
            opts.setdefault(_IN_FLIGHT_OPTION, max_in_flight)
        producer = client.producer(stream, name=reference, **opts)
        await producer.__aenter__()
        if reference is not None and isinstance(producer, RunDeduplicatingProducer):
            return Publisher(producer, dedup=producer, last_stored=producer.last_publishing_id)
        return Publisher(producer, dedup=None, last_stored=0)

    # --- super streams -------------------------------------------------------------------

    async def super_partitions(self, client: streamwire.Client, stream: str) -> list[str] | None:
        """The partition streams of ``stream`` when it is a super stream of a
        :class:`streamwire.SuperStreams` client, else ``None``."""
        if not isinstance(client, streamwire.SuperStreams):
            return None
        try:
            names = await client.partitions(stream)
        except (streamwire.StreamNotFoundError, UnsupportedByBroker):
            return None
        return names or None

    async def _stream_of(self, client: streamwire.Client, stream: str, partition: int) -> str:
        """The stream that holds ``partition`` of ``stream``: a super stream's partition
        stream, else ``stream`` itself (partition 0 only, unless the client is
        :class:`streamwire.Partitioned`)."""
        names = await self.super_partitions(client, stream)
        if names is None:
            return stream
        if not 0 <= partition < len(names):
            raise SparkConfigurationError(f"super stream {stream!r} has no partition {partition}")
        return names[partition]

    # --- reading -------------------------------------------------------------------------

    async def partitions(self, client: streamwire.Client, stream: str) -> list[int]:
        """The partition numbers of ``stream``."""
        if isinstance(client, streamwire.Partitioned):
            return await client.partition_ids(stream)
        names = await self.super_partitions(client, stream)
        return [0] if names is None else list(range(len(names)))

    async def all_bounds(
        self,
        client: streamwire.Client,
        stream: str,
        *,
        timeout: float,
        settled: bool = False,
        fenced: bool = False,
    ) -> dict[int, tuple[int, int]]:
        """``(earliest, tail)`` of every partition of ``stream``, in partition order: the first
        offset a reader can get and the offset after the last readable message (equal when
        empty). The tail is always one past a real message, so a reader can stop on seeing
        it. ``settled``: on a :class:`streamwire.Settling` client, once what is appended now
        is committed or gone (what a read-back of a writer's rows needs). ``fenced``: once
        what any connection sent before is appended too
        (:meth:`streamwire.Settling.fenced_bounds`), what a retry's read-back needs while
        its failed attempt's messages may still be on their way."""
        if not isinstance(client, streamwire.Bounded):
            raise SparkConfigurationError(
                f"reading {self.protocol} streams from Spark is not supported yet"
            )
        if (settled or fenced) and isinstance(client, streamwire.Settling):
            if fenced:
                found = await client.fenced_bounds(stream, timeout=timeout)
            else:
                found = await client.settled_bounds(stream, timeout=timeout)
            return {p: (b.first, b.next) for p, b in sorted(found.items())}
        async with asyncio.timeout(timeout):
            names = await self.super_partitions(client, stream)
            if names is not None:  # one stream per partition
                found = {p: (await client.offset_bounds(name))[0] for p, name in enumerate(names)}
                return {p: (b.first, b.next) for p, b in found.items()}
            bounds = await client.offset_bounds(stream)
        return {p: (b.first, b.next) for p, b in sorted(bounds.items())}

    async def bounds(
        self, client: streamwire.Client, stream: str, partition: int, *, timeout: float
    ) -> tuple[int, int]:
        """:meth:`all_bounds` of one partition."""
        found = await self.all_bounds(client, stream, timeout=timeout)
        if partition not in found:
            raise SparkConfigurationError(f"{stream!r} has no partition {partition}")
        return found[partition]

    async def consumer(
        self,
        client: streamwire.Client,
        stream: str,
        partition: int,
        offset: int | streamwire.Offset,
        *,
        wanted: int | None = None,
    ) -> streamwire.Consumer:
        """A consumer of one partition from ``offset`` (not started). ``wanted``: how many
        messages the reader needs at most (a broker fetching by request asks for no more)."""
        if isinstance(client, streamwire.Partitioned):
            poll = min(max(wanted or _MAX_POLL, 1), _MAX_POLL)
            return client.partition_consumer(stream, partition, offset=offset, max_poll=poll)
        if partition == 0 and not isinstance(client, streamwire.SuperStreams):
            return client.consumer(stream, offset=offset)
        name = await self._stream_of(client, stream, partition)
        if name == stream and partition != 0:
            raise SparkConfigurationError(f"{stream!r} has no partition {partition}")
        return client.consumer(name, offset=offset)


class Publisher:
    """A started producer, with the id bookkeeping deduplication needs."""

    __slots__ = ("_dedup", "last_stored", "producer")

    def __init__(
        self,
        producer: streamwire.Producer,
        *,
        dedup: RunDeduplicatingProducer | None,
        last_stored: int,
    ) -> None:
        self.producer = producer
        self._dedup = dedup
        self.last_stored = last_stored

    @property
    def dedup(self) -> bool:
        """Whether the broker drops re-sent publishing ids of this producer."""
        return self._dedup is not None

    async def send_run(
        self, values: list[bytes | streamwire.Message], first_publishing_id: int
    ) -> asyncio.Future[Any]:
        """Accept ``values`` in order; one future for all of them, failing with the first
        error. Where the broker dedups they get consecutive publishing ids from
        ``first_publishing_id`` on; otherwise the ids are not used. Waits for room in the
        producer's buffer like ``send``."""
        dedup, producer = self._dedup, self.producer
        if dedup is not None:
            return await dedup.send_many(values, publishing_id=first_publishing_id)
        if isinstance(producer, RunProducer):
            return await producer.send_many(values)
        return asyncio.gather(*await producer.send_batch(values))

    async def flush(self, timeout: float) -> None:
        await self.producer.flush(timeout)

    async def close(self) -> None:
        await self.producer.close()
