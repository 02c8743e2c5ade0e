"""Counters every producer, consumer and connection keeps, their snapshots, and the hook an
observer (OpenTelemetry: :mod:`streamwire.otel`) plugs into.

The meters are plain integer counters updated once per call or broker batch (never per
message), so they cost a few additions when nobody looks. ``stats`` on a producer, consumer
or client returns a frozen snapshot. An :class:`Observer` installed with
:func:`set_observer` is told about every send, settlement, delivery and connection event of
producers, consumers and connections created afterwards; without one, nothing but the
counters runs (docs/architecture.md, "Metrics and tracing").
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

__all__ = (
    "LATENCY_BOUNDS",
    "ConnectionMeter",
    "ConnectionStats",
    "ConsumerMeter",
    "ConsumerStats",
    "Destination",
    "LatencyHistogram",
    "LatencySnapshot",
    "LagObserver",
    "Observer",
    "ProducerMeter",
    "ProducerStats",
    "combine_consumer_stats",
    "combine_producer_stats",
    "current_observer",
    "set_observer",
)

#: Upper bounds (seconds) of the latency histogram's buckets; one more bucket takes the rest.
LATENCY_BOUNDS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass(frozen=True, slots=True)
class Destination:
    """What an observer is told about the source of an event."""

    system: str
    """``"rabbitmq"``, ``"liftbridge"`` or ``"iggy"`` (OTel ``messaging.system``)."""
    stream: str
    """The stream (Iggy: ``stream/topic``) or ``""`` for a connection."""
    address: str
    """``host:port`` of the broker connection."""


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    """A latency histogram at one moment: ``counts[i]`` samples were at most ``bounds[i]``
    seconds (and above ``bounds[i - 1]``); ``counts[-1]`` were above the last bound."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    count: int
    total: float
    """Sum of the samples, in seconds."""

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile ``q`` (0 < q <= 1); ``inf`` when it
        is above the last bound, ``None`` without samples."""
        if not 0.0 < q <= 1.0:
            raise ValueError("q must be in (0, 1]")
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for bound, bucket in zip((*self.bounds, float("inf")), self.counts, strict=True):
            seen += bucket
            if seen >= rank:
                return bound
        return float("inf")  # pragma: no cover - the counts add up to count

    def __add__(self, other: LatencySnapshot) -> LatencySnapshot:
        """Both histograms' samples (same bounds)."""
        if self.bounds != other.bounds:
            raise ValueError("histograms with different bounds do not add up")
        counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        return LatencySnapshot(
            self.bounds, counts, self.count + other.count, self.total + other.total
        )


class LatencyHistogram:
    """Fixed buckets (:data:`LATENCY_BOUNDS`), constant memory."""

    __slots__ = ("_counts", "_total", "count")

    def __init__(self) -> None:
        self._counts = [0] * (len(LATENCY_BOUNDS) + 1)
        self._total = 0.0
        self.count = 0

    def record(self, seconds: float, samples: int = 1) -> None:
        """Adds ``samples`` observations of ``seconds`` (a confirmed batch counts each message
        at the batch's latency)."""
        self._counts[bisect_left(LATENCY_BOUNDS, seconds)] += samples
        self._total += seconds * samples
        self.count += samples

    def snapshot(self) -> LatencySnapshot:
        return LatencySnapshot(LATENCY_BOUNDS, tuple(self._counts), self.count, self._total)


@dataclass(frozen=True, slots=True)
class ProducerStats:
    stream: str
    published: int
    """Messages handed to the producer and accepted (buffered or written)."""
    confirmed: int
    failed: int
    """Messages whose future ended in an error (rejected, timed out, connection lost)."""
    in_flight: int
    """Published, not yet confirmed nor failed."""
    bytes_published: int
    """Bytes of the accepted messages as the producer encoded them for the broker (RabbitMQ:
    AMQP messages or raw values; Liftbridge: envelopes; Iggy: payloads and user headers)."""
    confirm_latency: LatencySnapshot
    """From acceptance to the broker's confirmation, per confirmed message (a batch counts
    each of its messages at the batch's latency)."""


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    stream: str
    consumed: int
    """Messages handed to the application."""
    bytes_consumed: int
    """Bytes received from the broker (RabbitMQ chunks, Iggy poll replies, Liftbridge
    messages), counted with the next hand-over: it includes what is queued locally."""
    last_offset: int | None
    """Offset of the last message handed over."""
    committed_offset: int | None
    """Last offset this consumer committed."""
    lag: int | None
    """Messages in the stream after the last one handed over, summed over the partitions
    the broker said the end of; ``None`` where the broker does not say (docs/architecture.md,
    "Metrics and tracing", for what each broker reports)."""


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    connects: int
    """Successful connections (the first ones and every reconnect)."""
    reconnects: int
    """Connections made again after one was lost."""
    errors: int
    """Connection failures seen (lost connections and failed attempts)."""


class Observer(Protocol):
    """Told about what producers, consumers and connections do (see :func:`set_observer`).

    ``send`` returns a token (for example a span) that comes back to ``settled`` for the same
    batch. Observers are called on the event loop and must be quick. An exception from an
    observer is logged (logger ``streamwire.metrics``) and does not reach the producer or
    consumer: observing never changes what is published or delivered.
    """

    def send(self, where: Destination, count: int, nbytes: int) -> object:
        """``count`` messages start towards the broker (``nbytes``: their bytes where this
        unit was counted, 0 where they were counted at acceptance, as Iggy's batches)."""
        ...

    def settled(
        self, where: Destination, token: object, confirmed: int, failed: int, seconds: float
    ) -> None: ...

    def received(self, where: Destination, count: int, nbytes: int, lag: int | None) -> None: ...

    def connection(self, where: Destination, event: str) -> None:
        """``event`` is ``"connect"``, ``"reconnect"`` or ``"error"``."""
        ...


@runtime_checkable
class LagObserver(Protocol):
    """An observer that also takes the lag of a reader that is not a consumer: the Spark
    streaming source's driver reports, at each micro-batch it plans, how far behind each
    partition's tail the batch leaves the query (``streamwire.spark``, docs/spark.md). Any
    :class:`Observer` may have this method too; the OpenTelemetry one has."""

    def partition_lag(
        self, where: Destination, partition: int, messages: int, nbytes: int | None
    ) -> None:
        """``messages`` offsets of ``partition`` lie past what the reader will have read,
        holding about ``nbytes`` bytes (``None`` when not estimated)."""
        ...


_observer: Observer | None = None
_log = logging.getLogger("streamwire.metrics")


def _observer_failed(observer: Observer) -> None:
    _log.exception("the metrics observer %r raised; ignored", observer)


def set_observer(observer: Observer | None) -> Observer | None:
    """Installs ``observer`` for producers, consumers and connections created from now on
    (``None`` removes it); returns the previous one."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def current_observer() -> Observer | None:
    return _observer


class ProducerMeter:
    """A producer's counters. The producer calls :meth:`sent` once per accepted call (or
    group of a call) and :meth:`settled` once when all of it is confirmed or failed. Where
    accepted calls and settled requests differ (Iggy batches messages of several calls), it
    calls :meth:`accepted` per call and :meth:`begin`/:meth:`settled` per request."""

    __slots__ = (
        "_observer",
        "bytes_published",
        "confirmed",
        "failed",
        "latency",
        "published",
        "where",
    )

    def __init__(self, where: Destination) -> None:
        self.where = where
        self.published = 0
        self.confirmed = 0
        self.failed = 0
        self.bytes_published = 0
        self.latency = LatencyHistogram()
        self._observer = _observer

    def sent(self, count: int, nbytes: int) -> tuple[float, object]:
        """Counts an accepted call; returns what :meth:`settled` needs back (the start time and
        the observer's token)."""
        self.published += count
        self.bytes_published += nbytes
        return self.begin(count, nbytes)

    def accepted(self, count: int, nbytes: int) -> None:
        """Counts an accepted call whose messages settle in other units (:meth:`begin`)."""
        self.published += count
        self.bytes_published += nbytes

    def begin(self, count: int, nbytes: int, waited: float = 0.0) -> tuple[float, object]:
        """Starts the settlement of ``count`` messages already counted by :meth:`accepted`,
        accepted ``waited`` seconds ago; returns what :meth:`settled` needs back."""
        observer = self._observer
        token: object = None
        if observer is not None:
            try:
                token = observer.send(self.where, count, nbytes)
            except Exception:
                _observer_failed(observer)
        return time.monotonic() - waited, token

    def settled(self, started: tuple[float, object], confirmed: int, failed: int) -> None:
        seconds = time.monotonic() - started[0]
        self.confirmed += confirmed
        self.failed += failed
        if confirmed:
            self.latency.record(seconds, confirmed)
        observer = self._observer
        if observer is not None:
            try:
                observer.settled(self.where, started[1], confirmed, failed, seconds)
            except Exception:
                _observer_failed(observer)

    def snapshot(self) -> ProducerStats:
        return ProducerStats(
            stream=self.where.stream,
            published=self.published,
            confirmed=self.confirmed,
            failed=self.failed,
            in_flight=max(0, self.published - self.confirmed - self.failed),
            bytes_published=self.bytes_published,
            confirm_latency=self.latency.snapshot(),
        )


class ConsumerMeter:
    """A consumer's counters. The consumer calls :meth:`received` once per batch: where it
    decodes a broker batch into a local queue on demand (RabbitMQ chunks, Iggy poll
    replies), once per broker batch taken into that queue, and :meth:`snapshot` subtracts
    what is still queued, so that handing messages over one at a time (``async for``) costs
    nothing here; elsewhere once per batch handed over. It tells where each partition ends
    (:meth:`stream_ends_at`) whenever the broker says so anyway."""

    __slots__ = (
        "_ends",
        "_next",
        "_observer",
        "_untold",
        "bytes_consumed",
        "committed_offset",
        "consumed",
        "last_offset",
        "where",
    )

    def __init__(self, where: Destination) -> None:
        self.where = where
        self.consumed = 0
        self.bytes_consumed = 0
        self.last_offset: int | None = None
        self.committed_offset: int | None = None
        self._ends: dict[int, int] = {}
        """Per partition: offset of the last message the broker says it holds."""
        self._next: dict[int, int] = {}
        """Per partition: the offset after the last one received (or where it starts)."""
        self._untold = (0, 0)
        """Messages and bytes received with ``more`` that the observer was not told yet."""
        self._observer = _observer

    def received(
        self,
        count: int,
        nbytes: int,
        last_offset: int | None,
        partition: int = 0,
        *,
        more: bool = False,
    ) -> None:
        """``count`` messages (``nbytes`` from the broker) up to ``last_offset`` of
        ``partition``; ``more``: others follow at once, tell the observer with them."""
        if last_offset is not None:
            self.last_offset = last_offset
            self._next[partition] = last_offset + 1
        if not count:
            return
        self.consumed += count
        self.bytes_consumed += nbytes
        observer = self._observer
        if observer is not None:
            untold, untold_bytes = self._untold
            if more:
                self._untold = (untold + count, untold_bytes + nbytes)
                return
            if untold:
                count, nbytes, self._untold = count + untold, nbytes + untold_bytes, (0, 0)
            try:
                observer.received(self.where, count, nbytes, self.lag)
            except Exception:
                _observer_failed(observer)

    def unreceived(self, count: int) -> None:
        """``count`` messages counted by :meth:`received` will never be handed over (a
        local queue was dropped)."""
        self.consumed -= count

    def committed(self, offset: int) -> None:
        self.committed_offset = offset

    def stream_ends_at(self, end_offset: int | None, partition: int = 0) -> None:
        """The broker said the partition's last message has ``end_offset`` (high watermark);
        an older answer never moves the end back."""
        if end_offset is not None and end_offset > self._ends.get(partition, -1):
            self._ends[partition] = end_offset

    @property
    def lag(self) -> int | None:
        if not self._ends:
            return None
        position = self._next
        return sum(max(0, end + 1 - position.get(p, 0)) for p, end in self._ends.items())

    def snapshot(self, queued: int = 0, handed_over: int | None = None) -> ConsumerStats:
        """The counters, less ``queued`` messages received but still in the consumer's
        local queue (they count as lag); ``handed_over``: the offset of the last message
        handed over, where it differs from the last one received."""
        lag = self.lag
        return ConsumerStats(
            stream=self.where.stream,
            consumed=self.consumed - queued,
            bytes_consumed=self.bytes_consumed,
            last_offset=self.last_offset if handed_over is None else handed_over,
            committed_offset=self.committed_offset,
            lag=None if lag is None else lag + queued,
        )


class ConnectionMeter:
    """A client connection's counters: connects, reconnects, errors."""

    __slots__ = ("_observer", "connects", "errors", "reconnects", "where")

    def __init__(self, where: Destination) -> None:
        self.where = where
        self.connects = 0
        self.reconnects = 0
        self.errors = 0
        self._observer = _observer

    def connected(self, again: bool | None = None) -> None:
        """A connection was made; ``again``: it replaces a lost one (default: any but the
        first, for a client with a single connection)."""
        if again is None:
            again = self.connects > 0
        if again:
            self.reconnects += 1
        self.connects += 1
        self._tell("reconnect" if again else "connect")

    def failed(self) -> None:
        self.errors += 1
        self._tell("error")

    def _tell(self, event: str) -> None:
        observer = self._observer
        if observer is not None:
            try:
                observer.connection(self.where, event)
            except Exception:
                _observer_failed(observer)

    def snapshot(self) -> ConnectionStats:
        return ConnectionStats(self.connects, self.reconnects, self.errors)


def combine_producer_stats(stream: str, parts: list[ProducerStats]) -> ProducerStats:
    """One snapshot for several producers (a super stream's partitions)."""
    latency = LatencyHistogram().snapshot()
    for part in parts:
        latency += part.confirm_latency
    return ProducerStats(
        stream=stream,
        published=sum(p.published for p in parts),
        confirmed=sum(p.confirmed for p in parts),
        failed=sum(p.failed for p in parts),
        in_flight=sum(p.in_flight for p in parts),
        bytes_published=sum(p.bytes_published for p in parts),
        confirm_latency=latency,
    )


def combine_consumer_stats(stream: str, parts: list[ConsumerStats]) -> ConsumerStats:
    """One snapshot for several consumers (a super stream's partitions): offsets are per
    partition, so ``last_offset`` and ``committed_offset`` are ``None``; ``lag`` sums the
    partitions whose lag is known."""
    lags = [p.lag for p in parts if p.lag is not None]
    return ConsumerStats(
        stream=stream,
        consumed=sum(p.consumed for p in parts),
        bytes_consumed=sum(p.bytes_consumed for p in parts),
        last_offset=None,
        committed_offset=None,
        lag=sum(lags) if lags else None,
    )
