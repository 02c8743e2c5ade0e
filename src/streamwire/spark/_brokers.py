"""Everything broker-specific the Spark integration needs, behind the unified API.

The rest of ``streamwire.spark`` talks to :class:`streamwire.Client` /
:class:`streamwire.Producer` / :class:`streamwire.Consumer` only. What differs per broker
is decided here, from the URL scheme, by calling methods the protocol clients add to the
unified objects (typed ``Any`` at those calls: this module imports no protocol package):

* **Deduplication** (RabbitMQ Streams): a named producer (``name=``), the last stored
  publishing id read back on start (``last_publishing_id``, from QueryPublisherSequence)
  and an explicit ``publishing_id`` per message. Liftbridge and Iggy publish plainly
  (at-least-once).
* **Partitions and offsets** for the reader: RabbitMQ streams are one partition (0) whose
  tail is found from ``stream_stats`` and the last user chunk; Liftbridge partitions come
  from ``stream_info`` and their tails from ``partition_metadata`` (high watermark); an Iggy
  topic (``"stream/topic"``) gives every partition's first and next offsets in one
  GET_TOPIC (``partition_offsets``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import streamwire
from streamwire.spark.errors import SparkConfigurationError

__all__ = ("Broker", "Publisher")

#: Protocols whose brokers drop re-sent messages by (producer name, publishing id).
_DEDUP: Final = frozenset({"rabbitmq"})
#: The producer option bounding unconfirmed messages, where a protocol has one.
_IN_FLIGHT_OPTION: Final = {"rabbitmq": "max_in_flight", "liftbridge": "max_in_flight"}
#: Protocols the streaming/batch reader knows how to find partitions and tails for.
_READABLE: Final = frozenset({"rabbitmq", "liftbridge", "iggy"})
#: Messages an Iggy read asks for per poll, at most.
_IGGY_POLL: Final = 1000


@dataclass(frozen=True, slots=True)
class Broker:
    """The broker behind a URL, as far as Spark cares."""

    protocol: str

    @classmethod
    def of(cls, url: str) -> Broker:
        return cls(streamwire.parse_url(url).protocol)

    def check_stream(self, stream: str) -> str:
        """``stream`` if it names something this broker can address, else a
        :class:`SparkConfigurationError` (Iggy: a ``"stream/topic"`` address)."""
        if not stream:
            raise SparkConfigurationError("a stream is required")
        if self.protocol == "iggy":
            name, _, topic = stream.partition("/")
            if not name or not topic or "/" in topic:
                raise SparkConfigurationError(
                    f"an Iggy stream is addressed as 'stream/topic', not {stream!r}"
                )
        return stream

    @property
    def exactly_once(self) -> bool:
        """Whether the sink can make replays store nothing twice (broker-side dedup)."""
        return self.protocol in _DEDUP

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
        """Start a producer on ``stream``. With a ``reference`` on a deduplicating broker
        the producer is named after it and :attr:`Publisher.last_stored` is the last
        publishing id the broker stored under that name (0: none). ``max_in_flight`` is
        passed where the protocol's producer has such a bound (RabbitMQ, Liftbridge)."""
        option = _IN_FLIGHT_OPTION.get(self.protocol)
        if max_in_flight is not None and option is not None:
            options = {option: max_in_flight, **options}
        if reference is not None and self.exactly_once:
            producer = client.producer(stream, name=reference, **options)
            await producer.__aenter__()
            last = getattr(producer, "last_publishing_id", 0)
            return Publisher(producer, dedup=True, last_stored=int(last or 0))
        producer = client.producer(stream, **options)
        await producer.__aenter__()
        return Publisher(producer, dedup=False, last_stored=0)

    # --- reading -------------------------------------------------------------------------

    def _check_readable(self) -> None:
        if self.protocol not in _READABLE:
            raise SparkConfigurationError(
                f"reading {self.protocol} streams from Spark is not supported yet"
            )

    async def partitions(self, client: streamwire.Client, stream: str) -> list[int]:
        """The partition numbers of ``stream``."""
        self._check_readable()
        if self.protocol == "rabbitmq":
            return [0]
        if self.protocol == "iggy":
            return list(await self._iggy_offsets(client, stream))
        liftbridge: Any = client  # stream_info() is Liftbridge's, not the unified API's
        info = await liftbridge.stream_info(stream)
        return sorted(int(p) for p in info.partitions)

    async def all_bounds(
        self, client: streamwire.Client, stream: str, *, timeout: float
    ) -> dict[int, tuple[int, int]]:
        """:meth:`bounds` of every partition of ``stream``, in partition order (one round
        trip on Iggy)."""
        self._check_readable()
        if self.protocol == "iggy":
            offsets = await self._iggy_offsets(client, stream)
            return {p: (o.first, o.next) for p, o in offsets.items()}
        found = {}
        for p in await self.partitions(client, stream):
            found[p] = await self.bounds(client, stream, p, timeout=timeout)
        return found

    async def _iggy_offsets(self, client: streamwire.Client, stream: str) -> dict[int, Any]:
        iggy: Any = client  # partition_offsets() is Iggy's
        offsets: dict[int, Any] = await iggy.partition_offsets(stream)
        return offsets

    async def bounds(
        self, client: streamwire.Client, stream: str, partition: int, *, timeout: float
    ) -> tuple[int, int]:
        """``(earliest, tail)`` of one partition: the first offset a reader can get and the
        offset after the last readable message (equal when empty). The tail is always one
        past a real message, so a reader can stop on seeing it."""
        self._check_readable()
        if self.protocol == "rabbitmq":
            return await self._rabbitmq_bounds(client, stream, timeout)
        if self.protocol == "iggy":
            offsets = await self._iggy_offsets(client, stream)
            if partition not in offsets:
                raise SparkConfigurationError(f"{stream!r} has no partition {partition}")
            return offsets[partition].first, offsets[partition].next
        liftbridge: Any = client  # partition_metadata() is Liftbridge's
        meta = await liftbridge.partition_metadata(stream, partition)
        return 0, max(int(meta.high_watermark) + 1, 0)

    async def _rabbitmq_bounds(
        self, client: streamwire.Client, stream: str, timeout: float
    ) -> tuple[int, int]:
        rabbitmq: Any = client  # stream_stats() is RabbitMQ's (3.11+)
        stats = await rabbitmq.stream_stats(stream)
        earliest = max(int(stats.get("first_chunk_id", -1)), 0)
        if int(stats.get("committed_chunk_id", -1)) < 0:  # nothing written yet
            return earliest, earliest
        # Offsets of non-user chunks (offset tracking, ...) have no message, so the tail is
        # taken from the last *user* chunk, which is what an offset spec of "last" attaches to.
        async with client.consumer(stream, offset="last") as consumer:
            batch = await consumer.next_batch(max_messages=1 << 20, timeout=min(timeout, 5.0))
        offsets = [m.offset for m in batch if m.offset is not None]
        return earliest, (max(offsets) + 1 if offsets else earliest)

    def consumer(
        self,
        client: streamwire.Client,
        stream: str,
        partition: int,
        offset: int,
        *,
        wanted: int | None = None,
    ) -> streamwire.Consumer:
        """A consumer of one partition from ``offset`` (not started). ``wanted``: how many
        messages the reader needs at most (Iggy polls no more than that per request)."""
        self._check_readable()
        if self.protocol == "rabbitmq":
            return client.consumer(stream, offset=offset)
        if self.protocol == "iggy":  # partition= and batch_size= are Iggy's options
            batch = min(max(wanted or _IGGY_POLL, 1), _IGGY_POLL)
            return client.consumer(stream, offset=offset, partition=partition, batch_size=batch)
        return client.consumer(stream, offset=offset, partition=partition)  # Liftbridge's option


class Publisher:
    """A started producer, with the id bookkeeping deduplication needs."""

    __slots__ = ("dedup", "last_stored", "producer")

    def __init__(self, producer: streamwire.Producer, *, dedup: bool, last_stored: int) -> None:
        self.producer = producer
        self.dedup = dedup
        self.last_stored = last_stored

    async def send(
        self, message: streamwire.Message, publishing_id: int
    ) -> asyncio.Future[streamwire.Confirmation]:
        """Accept one message; ``publishing_id`` is used only where the broker dedups."""
        if self.dedup:
            producer: Any = self.producer  # RabbitMQ's send takes publishing_id
            future: asyncio.Future[streamwire.Confirmation] = await producer.send(
                message, publishing_id=publishing_id
            )
            return future
        return await self.producer.send(message)

    async def flush(self, timeout: float) -> None:
        await self.producer.flush(timeout)

    async def close(self) -> None:
        await self.producer.close()
