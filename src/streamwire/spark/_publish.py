"""Publishing one Spark partition: the code every streamwire sink runs in its tasks.

Exactly-once on RabbitMQ Streams (a micro-batch replayed after a failure or a stop stores
nothing twice):

* each Spark partition publishes through its own named producer, reference
  ``<name>-<queryId>-p<partition>`` (the query id is stable across restarts from one
  checkpoint and new for a new checkpoint, so a reset never collides with old ids);
* the row at 0-based ``position`` of micro-batch ``batch_id`` gets publishing id
  ``batch_id * 2**32 + position + 1``: never 0, strictly increasing within a partition and
  from batch to batch;
* with sub-batch entries (the producer option ``sub_batch_size``), the rows alone decide
  which entry each goes in, and an entry is stored under its last row's id (``_Partition``);
* on start the producer reads the last id the broker stored under that reference
  (QueryPublisherSequence) and rows at or below it are skipped; the broker would drop them
  anyway, skipping saves sending them;
* the task waits for every confirmation before it returns, and deletes its publisher, so
  a retry of the same task can declare the reference again.

This relies on a replayed batch holding the same rows in the same order per partition,
which Spark guarantees for deterministic plans over replayable sources (same offsets, same
partitioning: keep ``spark.sql.shuffle.partitions`` and any ``repartition(n)`` fixed for a
checkpoint; sort within partitions after a shuffle).

A stored id of a *later* micro-batch than the one being written means the reference was
used before (a ``query_id`` reused with a new checkpoint): :class:`SinkIdentityError`, since
writing on would drop the whole batch as already stored.

Liftbridge and Iggy have no such dedup: there every message carries its row's identity and
a task reads back, before sending, which of its rows an earlier attempt stored in each
broker partition (``_resume``); it sends exactly the missing ones, through producers pinned
to each partition. Without a query id (at-least-once, asked for explicitly) every broker
publishes plainly.

On every broker a task fails fast: once one of its runs failed, its next send raises that
failure instead of sending on (so an attempt leaves as few rows behind a gap as it can),
and a task that fails drops its worker's cached client, so that nothing the failed attempt
handed over (a reconnecting client's buffer) is sent after the retry has read back. What
it had already handed to the broker may still be on its way there (Liftbridge: in the NATS
server, while the partition's leader is paused or busy), so a retry (``attempt`` > 0), and a
task that finds rows of its own stored (a replay), first fence the stream
(:meth:`streamwire.Settling.fenced_bounds`: a marker per partition, acknowledged behind
whatever was sent before it) and read back after the fence.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, chain
from typing import Any, Final

import streamwire
from streamwire.spark._brokers import Broker, Publisher
from streamwire.spark._messages import Run, run_values
from streamwire.spark._observe import install as install_observer
from streamwire.spark._options import DEFAULT_CHUNK_ROWS
from streamwire.spark._resume import ROW_HEADER, RowTag, StoredRows, query_tag, stored_rows
from streamwire.spark._runtime import ClientKey, runtime
from streamwire.spark._schema import SinkLayout
from streamwire.spark.errors import SinkIdentityError, SparkConfigurationError

__all__ = (
    "MAX_BATCH_ID",
    "MAX_ROWS_PER_PARTITION",
    "PartitionResult",
    "PublishSpec",
    "publish_partition",
    "publishing_id",
    "reference",
)

logger = logging.getLogger(__name__)

#: Publishing ids are ``batch_id * 2**32 + position + 1`` in a uint64.
MAX_BATCH_ID: Final = (1 << 32) - 1
MAX_ROWS_PER_PARTITION: Final = (1 << 32) - 1
#: The broker refuses publisher references above 255 UTF-8 bytes.
MAX_REFERENCE_BYTES: Final = 255


def publishing_id(batch_id: int, position: int) -> int:
    """The publishing id of the row at 0-based ``position`` of a partition in ``batch_id``."""
    if not 0 <= batch_id <= MAX_BATCH_ID:
        raise SparkConfigurationError(f"batch id {batch_id} does not fit the 32-bit id scheme")
    if not 0 <= position < MAX_ROWS_PER_PARTITION:
        raise SparkConfigurationError(
            f"a partition of one micro-batch holds at most {MAX_ROWS_PER_PARTITION} rows"
        )
    return (batch_id << 32) + position + 1


def reference(name: str, query_id: str, partition: int) -> str:
    """The producer reference of one Spark partition of one query: ``<name>-<queryId>-p<n>``,
    shortened with a digest of the whole when it exceeds the broker's 255 bytes."""
    full = f"{name}-{query_id}-p{partition}"
    encoded = full.encode()
    if len(encoded) <= MAX_REFERENCE_BYTES:
        return full
    suffix = f"-{hashlib.sha256(encoded).hexdigest()[:32]}-p{partition}"
    head = encoded[: MAX_REFERENCE_BYTES - len(suffix)].decode(errors="ignore")
    return head + suffix


@dataclass(frozen=True, slots=True)
class PublishSpec:
    """What a task needs to publish: plain, picklable configuration (no clients)."""

    url: str
    stream: str
    name: str
    timeout: float
    layout: SinkLayout
    max_in_flight: int | None = None
    producer_options: tuple[tuple[str, Any], ...] = ()
    connect_options: tuple[tuple[str, Any], ...] = ()
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    observer: str | None = None
    """``package.module:function`` installing a metrics observer in each worker (``_observe``)."""

    @property
    def client_key(self) -> ClientKey:
        return self.url, self.connect_options


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What one task did. ``skipped`` rows were already stored by an earlier attempt."""

    partition: int
    rows: int
    published: int
    skipped: int
    exactly_once: bool


def _slices(runs: Iterable[Run], size: int) -> Iterator[Run]:
    """``runs`` cut into runs of at most ``size`` rows (record batches are sliced without
    copying)."""
    for run in runs:
        count = len(run)
        if count <= size:
            if count:
                yield run
            continue
        for start in range(0, count, size):
            yield run[start : start + size]


class _Runs:
    """The confirmation futures of a task's runs not yet seen done: :meth:`check` raises
    the first failure among those done, so a task stops sending at its first failed run
    instead of leaving later rows behind a gap. Done futures are dropped as they are
    checked (runs confirm in order, mostly), so this holds only what is in flight."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: deque[asyncio.Future[Any]] = deque()

    def track(self, future: asyncio.Future[Any]) -> None:
        future.add_done_callback(_retrieve)
        self._futures.append(future)

    def check(self) -> None:
        futures = self._futures
        while futures and futures[0].done():
            _raise_failure(futures.popleft())
        for future in futures:  # a later run failed first (another connection's)
            if future.done():
                _raise_failure(future)


def _raise_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        raise streamwire.ClosedError("a run of this task was cancelled before its confirmation")
    failure = future.exception()
    if failure is not None:
        raise failure


def _retrieve(future: asyncio.Future[Any]) -> None:
    # Failures surface through _Runs.check or flush(); mark them retrieved so asyncio does
    # not log them.
    if not future.cancelled():
        future.exception()


def check_identity(publisher: Publisher, batch_id: int, stream: str, reference: str) -> None:
    """Raise :class:`SinkIdentityError` when the broker stored, under ``reference``, an id of
    a later micro-batch than ``batch_id``: the reference was used before (a reused
    ``query_id`` or ``writeId``, a checkpoint rolled back), and every row of this batch would
    be skipped as already stored."""
    if publisher.dedup and publisher.last_stored >= (batch_id + 1) << 32:
        stored_batch = (publisher.last_stored - 1) >> 32
        raise SinkIdentityError(
            f"producer {reference!r} on {stream!r} already stored micro-batch {stored_batch} "
            f"(publishing id {publisher.last_stored}) while batch {batch_id} is being written: "
            "this query identity was used before, by another checkpoint or before this "
            "checkpoint was rolled back, and the broker would drop every row of this batch as "
            "a duplicate. Give the sink a query_id (or the write a writeId) that is new for a "
            "new checkpoint (its location will do), or write to a new stream"
        )


def entry_rows(options: Mapping[str, Any]) -> int:
    """The rows a sub-batch entry holds under the producer ``options`` (RabbitMQ's
    ``sub_batch_size``; 0: one entry per row)."""
    size = options.get("sub_batch_size", 0)
    return size if isinstance(size, int) and size > 1 else 0


#: The most bytes of rows (as :func:`row_bytes` counts them) the sink puts in one sub-batch
#: entry: half the broker's default frame_max (1 MiB), so an entry always fits a frame.
ENTRY_BYTES: Final = 512 << 10
#: What a row adds to an entry besides its value, key and headers, at most: the AMQP data
#: section's header (8) and the record's size word (4).
_ROW_OVERHEAD: Final = 12


def row_bytes(value: Any) -> int:
    """A bound on the bytes ``value`` (a row's body, or its ``streamwire.Message``) takes in
    a sub-batch entry."""
    if not isinstance(value, streamwire.Message):
        return len(value) + _ROW_OVERHEAD
    size = len(value.value) + _ROW_OVERHEAD
    if value.key is not None:
        size += len(value.key) + 64  # the key and its annotation's name and types
    for name, header in value.headers.items():
        raw = header.value
        size += len(name.encode()) + 32  # the name's and the value's types and sizes
        if isinstance(raw, bytes):
            size += len(raw)
        elif isinstance(raw, str):
            size += len(raw.encode())
        else:
            size += 8  # a number or a boolean
    return size + 16  # the map's own


def _sizes(values: list[Any]) -> list[int]:
    """:func:`row_bytes` of each value (one pass over the lengths when they are bodies)."""
    try:
        return [n + _ROW_OVERHEAD for n in map(len, values)]
    except TypeError:  # messages
        return [row_bytes(v) for v in values]


class _Partition:
    """State of one partition being published.

    With sub-batch entries (``entry_rows`` > 1, a deduplicating producer) the broker keeps
    one publishing id per entry, so the rows go out in entries the rows alone decide: from
    the partition's first row on, each entry takes as many rows as it can, up to
    ``entry_rows`` rows and ``entry_bytes`` bytes (:func:`row_bytes`; a row larger than that
    goes alone), and is stored under the id of its last row. Whatever the runs, and wherever
    a replay resumes (after an entry an earlier attempt stored), every attempt cuts the same
    rows into the same entries under the same ids, so the broker's deduplication still drops
    exactly what an earlier attempt stored, even an entry of that attempt still on its way.
    The rows of an entry not yet complete wait for the next run (or :meth:`flush`)."""

    def __init__(
        self,
        publisher: Publisher,
        batch_id: int,
        entry_rows: int = 0,
        entry_bytes: int = ENTRY_BYTES,
    ) -> None:
        self.publisher = publisher
        self.batch_id = batch_id
        self.entry_rows = entry_rows if publisher.dedup else 0
        self.entry_bytes = entry_bytes
        self.published = 0
        self.skipped = 0
        self.runs = _Runs()
        self._held: list[Any] = []  # the rows of an entry not yet complete
        self._held_first = 0  # the position of its first row
        self._held_bytes = 0

    def already_stored(self, first_position: int, count: int) -> int:
        """How many of the ``count`` rows from ``first_position`` on the broker stored
        before (a replay): they lead the run, as ids only grow. Checks that the run's
        ids fit the scheme."""
        publishing_id(self.batch_id, first_position + count - 1)
        if not self.publisher.dedup:
            return 0
        first = publishing_id(self.batch_id, first_position)
        return min(count, max(0, self.publisher.last_stored - first + 1))

    async def send(self, first_position: int, values: list[Any]) -> None:
        """Accept ``values``, the rows from ``first_position`` on, as one run: one
        confirmation future, consecutive publishing ids (with sub-batch entries: the
        entries these rows complete, see the class notes)."""
        self.runs.check()
        if not self.entry_rows:
            await self._run(first_position, values)
            return
        if self._held and self._held_first + len(self._held) != first_position:
            await self._release()  # not the next row (the caller skips only at its start)
        if not self._held:
            self._held_first = first_position
        sizes = _sizes(values)
        taken, count = 0, len(values)
        while taken < count:
            room = min(self.entry_rows - len(self._held), count - taken)
            ends = list(accumulate(sizes[taken : taken + room], initial=self._held_bytes))
            # the rows that fit the entry (none when what it holds is a row past the bound)
            fit = max(0, bisect_right(ends, self.entry_bytes) - 1)
            if not fit and not self._held:
                fit = 1  # a row larger than an entry goes alone
            self._held += values[taken : taken + fit]
            self._held_bytes = ends[fit]
            taken += fit
            if fit < room or len(self._held) == self.entry_rows:
                await self._release()  # full, or the next row does not fit
                self._held_first = first_position + taken

    async def _run(self, first_position: int, values: list[Any], last: int | None = None) -> None:
        """Send ``values`` from ``first_position`` on, as consecutive ids, or as one entry
        under the id of the row at ``last``."""
        pid = publishing_id(self.batch_id, first_position if last is None else last)
        self.runs.track(await self.publisher.send_run(values, pid))
        self.published += len(values)

    async def _release(self) -> None:
        """Send the rows held back as one entry."""
        held, self._held, self._held_bytes = self._held, [], 0
        if held:
            await self._run(self._held_first, held, self._held_first + len(held) - 1)

    async def flush(self, timeout: float) -> None:
        await self._release()
        await self.publisher.flush(timeout)

    async def close(self) -> None:
        await self.publisher.close()

    @property
    def exactly_once(self) -> bool:
        return self.publisher.dedup


async def _close_all(publishers: Iterable[Publisher]) -> None:
    """Close every publisher; raise the first failure once all were tried."""
    failure: BaseException | None = None
    for publisher in publishers:
        try:
            await publisher.close()
        except Exception as exc:  # close them all; raise the first failure
            failure = failure or exc
    if failure is not None:
        raise failure


class _SuperStream:
    """One task's rows over the partition streams of a super stream (RabbitMQ Streams).

    A row goes to the partition its key hashes to, as the broker's own clients route it
    (``SuperStreams.partition_for_key``); keyless rows of Spark partition *t* go to partition
    *t* mod the partition count. Each partition stream gets a producer of its own, opened on
    first use. With a query id they are all named ``reference`` (the broker deduplicates per
    stream), and the rows the task routes to one partition get consecutive positions of their
    own there (publishing ids ``batch * 2**32 + position + 1``), so a replay skips what an
    earlier attempt stored in each partition, as on a plain stream."""

    def __init__(
        self,
        client: streamwire.Client,
        router: streamwire.SuperStreams,
        spec: PublishSpec,
        partitions: list[str],
        *,
        reference: str | None,
        options: dict[str, Any],
        batch_id: int,
        task: int,
    ) -> None:
        self.client = client
        self.router = router
        self.spec = spec
        self.streams = partitions
        self.reference = reference
        self.options = options
        self.batch_id = batch_id
        self.keyless = task % len(partitions)
        self.parts: dict[int, _Partition] = {}
        self.positions = [0] * len(partitions)

    def _route(self, value: Any) -> int:
        key = value.key if isinstance(value, streamwire.Message) else None
        if key is None:
            return self.keyless
        return self.router.partition_for_key(key, len(self.streams))

    async def _part(self, partition: int) -> _Partition:
        part = self.parts.get(partition)
        if part is None:
            publisher = await Broker.of(self.spec.url).open_publisher(
                self.client,
                self.streams[partition],
                reference=self.reference,
                options=self.options,
                max_in_flight=self.spec.max_in_flight,
            )
            part = self.parts[partition] = _Partition(
                publisher, self.batch_id, entry_rows(self.options)
            )
            if self.reference is not None:
                check_identity(publisher, self.batch_id, self.streams[partition], self.reference)
        return part

    async def send(self, first_position: int, values: list[Any]) -> None:
        """The rows from ``first_position`` on, each to its partition stream (in order per
        partition); rows an earlier attempt stored there are skipped."""
        by_partition: dict[int, list[Any]] = {}
        for value in values:
            by_partition.setdefault(self._route(value), []).append(value)
        for partition, routed in by_partition.items():
            part = await self._part(partition)
            first = self.positions[partition]
            self.positions[partition] = first + len(routed)
            skip = part.already_stored(first, len(routed))
            part.skipped += skip
            if skip < len(routed):
                await part.send(first + skip, routed[skip:])

    @property
    def published(self) -> int:
        return sum(part.published for part in self.parts.values())

    @property
    def skipped(self) -> int:
        return sum(part.skipped for part in self.parts.values())

    @property
    def exactly_once(self) -> bool:
        return self.reference is not None and all(p.exactly_once for p in self.parts.values())

    async def flush(self, timeout: float) -> None:
        for part in self.parts.values():
            await part.flush(timeout)

    async def close(self) -> None:
        await _close_all(part.publisher for part in self.parts.values())


class _Resuming:
    """One task's rows through producers pinned to each broker partition (opened on first
    use), skipping the rows an earlier attempt of the task stored there (``_resume``)."""

    def __init__(
        self,
        client: streamwire.Client,
        router: Publisher,
        spec: PublishSpec,
        options: dict[str, Any],
        tag: RowTag,
        stored: dict[int, StoredRows],
    ) -> None:
        self.client = client
        self.router = router
        self.spec = spec
        self.options = options
        self.tag = tag
        self.stored = stored
        self.count = max(1, len(stored))
        self.keyless = tag.task % self.count
        self.pinned: dict[int, Publisher] = {}
        self.published = 0
        self.skipped = 0
        self.runs = _Runs()

    @classmethod
    async def open(
        cls,
        broker: Broker,
        client: streamwire.Client,
        router: Publisher,
        spec: PublishSpec,
        options: dict[str, Any],
        tag: RowTag,
        attempt: int,
    ) -> _Resuming:
        """Read back what earlier attempts stored; ``router`` is the task's unpinned
        producer (a :class:`streamwire.KeyRouted` one), closed here on failure. A retry
        (``attempt`` > 0) reads back behind a fence; a first attempt that finds rows of its
        own (a replay) fences and reads back again (the module's notes)."""
        try:
            fenced = attempt > 0 and isinstance(client, streamwire.Settling)
            stored = await cls._read_back(broker, client, router, spec, tag, fenced)
            if not fenced and isinstance(client, streamwire.Settling) and any(stored.values()):
                stored = await cls._read_back(broker, client, router, spec, tag, True)
        except BaseException:
            await router.close()
            raise
        return cls(client, router, spec, options, tag, stored)

    @staticmethod
    async def _read_back(
        broker: Broker,
        client: streamwire.Client,
        router: Publisher,
        spec: PublishSpec,
        tag: RowTag,
        fenced: bool,
    ) -> dict[int, StoredRows]:
        producer = router.producer
        assert isinstance(producer, streamwire.KeyRouted)
        bounds = await broker.all_bounds(
            client, spec.stream, timeout=spec.timeout, settled=True, fenced=fenced
        )
        if len(bounds) != producer.partition_count:
            raise SparkConfigurationError(
                f"{spec.stream!r} has {producer.partition_count} partitions for its "
                f"producer and {len(bounds)} for a reader: changed meanwhile?"
            )
        return await stored_rows(
            broker,
            client,
            spec.stream,
            bounds,
            query=tag.query,
            batch=tag.batch,
            task=tag.task,
            timeout=spec.timeout,
        )

    def _route(self, value: Any) -> int:
        key = value.key if isinstance(value, streamwire.Message) else None
        if key is None:
            return self.keyless
        producer = self.router.producer
        assert isinstance(producer, streamwire.KeyRouted)
        return producer.partition_for_key(key)

    async def _publisher(self, partition: int) -> Publisher:
        publisher = self.pinned.get(partition)
        if publisher is None:
            options = {**self.options, "partition": partition}
            publisher = await Broker.of(self.spec.url).open_publisher(
                self.client,
                self.spec.stream,
                reference=None,
                options=options,
                max_in_flight=self.spec.max_in_flight,
            )
            self.pinned[partition] = publisher
        return publisher

    async def send(self, first_position: int, values: list[Any]) -> None:
        """The rows from ``first_position`` on, each tagged, to its partition's producer
        (in order per partition); rows an earlier attempt stored are skipped."""
        self.runs.check()
        by_partition: dict[int, list[streamwire.Message]] = {}
        tag = self.tag
        for i, value in enumerate(values):
            row = first_position + i
            partition = self._route(value)
            if row in self.stored[partition]:
                self.skipped += 1
                continue
            header = RowTag(tag.query, tag.batch, tag.task, row).encode()
            if isinstance(value, streamwire.Message):
                message = streamwire.Message(
                    value.value, key=value.key, headers={**value.headers, ROW_HEADER: header}
                )
            else:
                message = streamwire.Message(value, headers={ROW_HEADER: header})
            by_partition.setdefault(partition, []).append(message)
        for partition, messages in by_partition.items():
            publisher = await self._publisher(partition)
            self.runs.track(await publisher.send_run(list(messages), 0))
            self.published += len(messages)

    async def flush(self, timeout: float) -> None:
        for publisher in self.pinned.values():
            await publisher.flush(timeout)

    async def close(self) -> None:
        await _close_all((*self.pinned.values(), self.router))

    @property
    def exactly_once(self) -> bool:
        return True


def publish_partition(
    spec: PublishSpec,
    runs: Iterable[Run],
    *,
    query_id: str | None,
    batch_id: int,
    partition: int,
    attempt: int = 0,
) -> PartitionResult:
    """Publish the rows of ``runs`` (record batches or sequences of rows, in order) and
    wait for every confirmation; raises on any failure so Spark fails the task.
    Exactly-once when ``query_id`` is known: by the broker's dedup (RabbitMQ) or by
    resuming after the rows an earlier attempt stored (Liftbridge, Iggy). Rows go out in
    runs of at most ``spec.chunk_rows``, one confirmation future per run (per broker
    partition when resuming). ``attempt``: the Spark task's attempt number (0 for the
    first; a retry reads back behind a fence)."""
    broker = Broker.of(spec.url)
    # attempted whenever the query is known; whether it holds, the producers tell (a
    # deduplicating one, key-routed ones to resume after, a super stream's named ones)
    exactly_once = query_id is not None
    ref = reference(spec.name, query_id, partition) if query_id is not None else None
    if exactly_once:
        publishing_id(batch_id, 0)  # validates the batch id before anything is sent
    install_observer(spec.observer)
    rt = runtime()
    options = dict(spec.producer_options)
    tag = RowTag(query_tag(query_id or ""), batch_id, partition, -1)

    used: list[streamwire.Client] = []

    def open_with(client: streamwire.Client) -> _Partition | _Resuming | _SuperStream:
        used.append(client)

        async def start() -> _Partition | _Resuming | _SuperStream:
            streams = await broker.super_partitions(client, spec.stream)
            if streams is not None:
                assert isinstance(client, streamwire.SuperStreams)
                return _SuperStream(
                    client,
                    client,
                    spec,
                    streams,
                    reference=ref,
                    options=options,
                    batch_id=batch_id,
                    task=partition,
                )
            publisher = await broker.open_publisher(
                client,
                spec.stream,
                reference=ref,
                options=options,
                max_in_flight=spec.max_in_flight,
            )
            if (
                exactly_once
                and not publisher.dedup
                and isinstance(publisher.producer, streamwire.KeyRouted)
            ):
                return await _Resuming.open(broker, client, publisher, spec, options, tag, attempt)
            if ref is not None:
                try:
                    check_identity(publisher, batch_id, spec.stream, ref)
                except SinkIdentityError:
                    await publisher.close()
                    raise
            return _Partition(publisher, batch_id, entry_rows(options))

        return rt.call(start, timeout=spec.timeout)

    slices = _slices(runs, spec.chunk_rows)
    first_run = next(slices, None)
    if first_run is None:  # an empty partition opens nothing
        return PartitionResult(partition, 0, 0, 0, exactly_once)
    state = rt.with_client(spec.client_key, open_with)
    rows_seen = 0
    try:
        for run in chain((first_run,), slices):
            first, count = rows_seen, len(run)
            rows_seen += count
            if isinstance(state, _Resuming | _SuperStream):
                publishing_id(batch_id, first + count - 1)  # the same limits everywhere
                rt.call(partial(state.send, first, run_values(spec.layout, run, first)))
                continue
            skip = state.already_stored(first, count)
            state.skipped += skip
            if skip < count:
                values = run_values(spec.layout, run[skip:] if skip else run, first + skip)
                rt.call(partial(state.send, first + skip, values))
        rt.call(lambda: state.flush(spec.timeout))
    except BaseException:
        try:
            rt.call(state.close, timeout=spec.timeout)
        except Exception as exc:  # keep the original failure
            logger.debug("closing the producer after a failure failed too: %s", exc)
        # nothing this attempt handed over may reach the broker after a retry read back
        rt.discard(spec.client_key, used[-1])
        raise
    rt.call(state.close, timeout=spec.timeout)
    logger.debug(
        "partition %d of batch %d: %d rows, %d published, %d already stored",
        partition,
        batch_id,
        rows_seen,
        state.published,
        state.skipped,
    )
    exactly_once = exactly_once and state.exactly_once
    return PartitionResult(partition, rows_seen, state.published, state.skipped, exactly_once)
