"""The ``streamwire`` PySpark data source (Python Data Source API, pyspark >= 4.0).

::

    from streamwire.spark import register
    register(spark)            # or rely on the auto-registered pyspark_streamwire module

    df = (spark.readStream.format("streamwire")
          .option("url", url).option("stream", "events")
          .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", 10000)
          .load())
    df.writeStream.format("streamwire").option("url", url).option("stream", "copy") \\
        .option("checkpointLocation", path).start()

Source schema: ``value binary, key binary, headers map<string,binary>, stream string,
partition int, offset long, timestamp timestamp``. Sink columns: ``value`` (required),
``key``, ``headers`` (see ``_schema``). Options: see ``_options``. Every broker reads and
writes: RabbitMQ Streams, Liftbridge and Iggy (whose ``stream`` is ``"stream/topic"``);
partitions and tails per broker come from ``_brokers``.

Spark runs the pieces of a Python data source in several processes (planning workers, a
long-lived source runner on the driver side, executor tasks, a fresh writer per commit),
so nothing here connects in a constructor: connections are opened on first use, through
the per-process runtime (``_runtime``).

Guarantees: the streaming writer is exactly-once on every broker (task-local query and
batch ids, the schemes of ``_publish``: RabbitMQ's dedup, a read-back of what an earlier
attempt stored on Liftbridge and Iggy); the batch writer stores task retries (and reruns,
given ``writeId``) once the same way. The reader's
offsets live in the Spark checkpoint; nothing is committed to the broker.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

try:  # record batches in (PySpark 4.1+); older ones hand the writers a Row per row
    from pyspark.sql.datasource import DataSourceArrowWriter as _BatchWriterBase
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - depends on the installed PySpark
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as _StreamWriterBase,
    )
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceWriter as _BatchWriterBase,
    )

import streamwire
from streamwire._api import TAIL_COMMIT_HEADER
from streamwire.codec.columns import Columns
from streamwire.spark import _arrow, _filters, _identity, _offsets, _timestamps
from streamwire.spark._brokers import Broker, ColumnarConsumer
from streamwire.spark._messages import content_keyed, runs
from streamwire.spark._observe import install as install_observer
from streamwire.spark._observe import report_lag
from streamwire.spark._offsets import LAG_KEY, SIZE_SAMPLE, SKIPPED_KEY, TriggerClock, available
from streamwire.spark._options import (
    SinkOptions,
    SourceOptions,
    client_key_of,
    for_stream,
    pattern_of,
    streams_of,
)
from streamwire.spark._publish import PublishSpec, publish_partition
from streamwire.spark._runtime import close_runtime, runtime
from streamwire.spark._schema import SOURCE_SCHEMA_DDL, sink_layout, source_projection
from streamwire.spark._several import (
    SeveralBatchReader,
    SeveralFilteringBatchReader,
    SeveralStreamReader,
)
from streamwire.spark.errors import DataLossError, SparkConfigurationError

try:  # admission control and Trigger.AvailableNow for Python sources: pyspark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - pyspark 4.0/4.1
    ADMISSION_CONTROL = False  # pyspark calls latestOffset() alone: all available per batch

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


try:  # a byte limit and a lower bound among the admission controls: pyspark >= 4.3
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMinRows

    READ_MAX_BYTES = READ_MIN_ROWS = True
except ImportError:  # pragma: no cover - pyspark < 4.3: the options still apply
    READ_MAX_BYTES = READ_MIN_ROWS = False

    class ReadMaxBytes(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_bytes: int) -> None:
            self.max_bytes = max_bytes

    class ReadMinRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, min_rows: int) -> None:
            self.min_rows = min_rows


__all__ = (
    "ADMISSION_CONTROL",
    "READ_MAX_BYTES",
    "LAG_KEY",
    "SKIPPED_KEY",
    "ReadAllAvailable",
    "ReadMaxBytes",
    "ReadMaxRows",
    "StreamwireBatchReader",
    "StreamwireBatchWriter",
    "StreamwireCommitMessage",
    "StreamwireDataSource",
    "StreamwirePartition",
    "StreamwireStreamReader",
    "StreamwireStreamWriter",
)

logger = logging.getLogger(__name__)

#: Chunks (columnar consumers, per ``next_columns``) or messages one read asks its consumer
#: for at a time; a round trip to the worker's event loop gathers chunks up to a batch's
#: worth (``_fetch``).
_CHUNKS_PER_CALL: Final = 16
_MESSAGES_PER_CALL: Final = 2000
#: Seconds a round trip for chunks waits for more once it has some (see ``_fetch``).
_MORE_WAIT: Final = 0.05
#: Seconds a sample of message sizes for the lag's bytes is reused before another.
LAG_SAMPLE_EVERY: Final = 30.0
#: Losses a reader remembers having counted (its latest few batches' worth).
COUNTED_KEPT: Final = 256


class StreamwireDataSource(DataSource):
    """``spark.read[Stream].format("streamwire")`` and ``df.write[Stream].format(...)``."""

    @classmethod
    def name(cls) -> str:
        return "streamwire"

    def schema(self) -> str:
        return SOURCE_SCHEMA_DDL

    def reader(
        self, schema: Any
    ) -> (
        StreamwireBatchReader | StreamwireSeveralBatchReader | StreamwireSeveralFilteringBatchReader
    ):
        projection = source_projection(schema)
        several = _several_streams(self.options)
        if several:  # a reader per stream (streamwire.spark._several)
            readers = [_batch_reader(for_stream(self.options, s), projection) for s in several]
            if readers[0].options.push_filters:
                return StreamwireSeveralFilteringBatchReader(readers)
            return StreamwireSeveralBatchReader(readers)
        return _batch_reader(self.options, projection)

    def streamReader(self, schema: Any) -> StreamwireStreamReader | StreamwireSeveralStreamReader:
        projection = source_projection(schema)
        options = dict(self.options)
        several = _several_streams(options)
        if not several:
            return StreamwireStreamReader(SourceOptions.parse(options, streaming=True), projection)

        def reader_of(stream: str) -> StreamwireStreamReader:
            return StreamwireStreamReader(
                SourceOptions.parse(for_stream(options, stream), streaming=True), projection
            )

        def discover(known: set[str]) -> list[StreamwireStreamReader]:
            """Readers of the streams created since that match ``streamPattern``."""
            return [reader_of(s) for s in _matching(options, at_least_one=False) if s not in known]

        pattern = pattern_of(options) is not None
        return StreamwireSeveralStreamReader(
            [reader_of(s) for s in several], discover=discover if pattern else None
        )

    def _spec(self, schema: Any, overwrite: bool) -> PublishSpec:
        if overwrite:
            raise SparkConfigurationError(
                "streams are append-only: the streamwire sink cannot overwrite"
            )
        opts = SinkOptions.parse(self.options)
        layout = sink_layout(schema, ignore_extra_columns=opts.ignore_extra_columns)
        return PublishSpec(
            url=opts.url,
            stream=opts.stream,
            name=opts.name,
            timeout=opts.timeout,
            layout=layout,
            max_in_flight=opts.max_in_flight,
            connect_options=(("timeout", opts.timeout), *opts.connect_options),
            chunk_rows=opts.chunk_rows,
            observer=opts.observer,
        )

    def writer(self, schema: Any, overwrite: bool) -> StreamwireBatchWriter:
        write_id = SinkOptions.parse(self.options).write_id
        return StreamwireBatchWriter(self._spec(schema, overwrite), write_id)

    def streamWriter(self, schema: Any, overwrite: bool) -> StreamwireStreamWriter:
        return StreamwireStreamWriter(self._spec(schema, overwrite))


# --- reading -----------------------------------------------------------------------------


class StreamwirePartition(InputPartition):
    """One Spark task's share: offsets ``[start, end)`` of one broker partition."""

    def __init__(self, stream: str, partition: int, start: int, end: int) -> None:
        super().__init__((stream, partition, start, end))
        self.stream = stream
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"StreamwirePartition({self.stream!r}, {self.partition}, [{self.start}, {self.end}))"


def _bounds(opts: SourceOptions) -> dict[int, tuple[int, int]]:
    """(earliest, tail) of every partition of the stream."""
    rt, broker = runtime(), Broker.of(opts.url)

    def fetch(client: streamwire.Client) -> dict[int, tuple[int, int]]:
        return rt.call(
            lambda: broker.all_bounds(client, opts.stream, timeout=opts.timeout),
            timeout=opts.timeout,
        )

    return rt.with_client(
        opts.client_key, fetch, patience=opts.timeout, interval=opts.retry_interval
    )


def _starts(opts: SourceOptions, bounds: Mapping[int, tuple[int, int]]) -> _offsets.Offsets:
    """Where a read starts: ``startingTimestamp`` / ``startingOffsetsByTimestamp`` when
    given, else ``startingOffsets``."""
    if opts.starting_time is None:
        return _offsets.resolve(opts.starting, bounds)
    found = _by_time(opts, opts.starting_time, bounds)
    out: _offsets.Offsets = {}
    for p, (earliest, tail) in bounds.items():
        millis = opts.starting_time.of(p)
        if millis is None:
            out[p] = earliest
        elif found.get(p) is not None:
            out[p] = max(found[p] or 0, earliest)
        elif opts.time_strategy == "latest":
            out[p] = tail
        else:
            raise SparkConfigurationError(
                f"{opts.stream!r} partition {p} has no message written at or after "
                f"{millis} ms (startingTimestamp / startingOffsetsByTimestamp): the time is "
                "past its last message. Set startingOffsetsByTimestampStrategy=latest to "
                "start such partitions at their tail"
            )
    return out


def _ends(opts: SourceOptions, bounds: Mapping[int, tuple[int, int]]) -> _offsets.Offsets:
    """Where a batch read ends (exclusive): ``endingTimestamp`` /
    ``endingOffsetsByTimestamp`` when given (a time past a partition's last message: its
    tail), else ``endingOffsets``."""
    if opts.ending_time is None:
        return _offsets.resolve(opts.ending, bounds)
    found = _by_time(opts, opts.ending_time, bounds)
    return {
        p: tail if found.get(p) is None else max(found[p] or 0, earliest)
        for p, (earliest, tail) in bounds.items()
    }


def _by_time(
    opts: SourceOptions, spec: _timestamps.TimeSpec, bounds: Mapping[int, tuple[int, int]]
) -> dict[int, int | None]:
    """Per partition the spec names a time for: the offset of its first message written at
    or after it, or ``None`` when its last message is older. One short read per partition
    (its last message), and a read from the broker's own position for the time (RabbitMQ:
    the chunk; Liftbridge and Iggy: the message) up to the first message at or after it."""
    rt, broker = runtime(), Broker.of(opts.url)

    async def read_from(
        client: streamwire.Client, p: int, offset: int | streamwire.Offset, stop: int
    ) -> list[streamwire.Message]:
        consumer = await broker.consumer(client, opts.stream, p, offset, wanted=1000)
        async with consumer:
            got = await consumer.next_batch(1000, timeout=opts.timeout)
            if not got:
                raise streamwire.TimeoutError(
                    f"no message of {opts.stream!r} partition {p} in {opts.timeout} s while "
                    "looking for a time's offset"
                )
            return [m for m in got if m.offset is None or m.offset < stop]

    async def find(client: streamwire.Client, p: int, millis: int, tail: int) -> int | None:
        last = await read_from(client, p, tail - 1, tail)
        if _timestamps.first_at_or_after(last[-1:], millis) is None:
            return None  # the newest message is older: past the tail
        when = datetime.fromtimestamp(millis / 1000, UTC)
        offset: int | streamwire.Offset = streamwire.Offset.timestamp(when)
        while True:
            got = await read_from(client, p, offset, tail)
            found = _timestamps.first_at_or_after(got, millis)
            if found is not None or not got or got[-1].offset is None:
                return found
            if got[-1].offset >= tail - 1:
                return None
            offset = got[-1].offset + 1  # the broker's position was before the time

    def fetch(client: streamwire.Client) -> dict[int, int | None]:
        async def run() -> dict[int, int | None]:
            out: dict[int, int | None] = {}
            for p, (earliest, tail) in sorted(bounds.items()):
                millis = spec.of(p)
                if millis is not None:
                    out[p] = await find(client, p, millis, tail) if tail > earliest else None
            return out

        return rt.call(run, timeout=opts.timeout * (1 + len(bounds)))

    return rt.with_client(
        opts.client_key, fetch, patience=opts.timeout, interval=opts.retry_interval
    )


#: The clock ``minOffsetsPerTrigger``'s delay is kept by (a test sets its own).
_clock = time.monotonic


def _appended(opts: SourceOptions) -> dict[int, int]:
    """The tail of each partition counting what its broker appended and has not committed
    yet, on a :class:`streamwire.Settling` client (empty elsewhere: a reader sees all)."""
    rt = runtime()

    def fetch(client: streamwire.Client) -> dict[int, int]:
        if not isinstance(client, streamwire.Settling):
            return {}
        settling = client

        async def run() -> dict[int, int]:
            found = await settling.appended_bounds(opts.stream)
            return {p: b.next for p, b in found.items()}

        return rt.call(run, timeout=opts.timeout)

    return rt.with_client(
        opts.client_key, fetch, patience=opts.timeout, interval=opts.retry_interval
    )


def _store_progress(opts: SourceOptions, name: str, end: _offsets.Offsets) -> None:
    """Store, under consumer ``name``, the last offset before each partition's ``end`` (what a
    consumer of that name resumes after with ``offset="next"``; what ``streamwire offsets``
    and the broker's own tools show). Partitions nothing was read from are left alone. A
    failure is logged, never the query's: the checkpoint is what the query resumes from."""
    rt = runtime()

    async def store(client: streamwire.Client) -> None:
        for partition, next_offset in sorted(end.items()):
            if next_offset > 0:
                await client.store_offset(opts.stream, name, next_offset - 1, partition=partition)

    def run(client: streamwire.Client) -> None:
        rt.call(lambda: store(client), timeout=opts.timeout)

    try:
        rt.with_client(opts.client_key, run)
    except streamwire.StreamwireError as exc:
        logger.warning("storing the progress of %s as %r failed: %s", opts.stream, name, exc)


def _message_sizes(
    opts: SourceOptions, start: _offsets.Offsets, end: _offsets.Offsets
) -> dict[int, float]:
    """The mean bytes (value and key) of up to :data:`SIZE_SAMPLE` messages from the start
    of each partition with offsets to read in ``[start, end)``: what the first fetch there
    brings. Partitions where none arrives are left out."""
    rt, broker = runtime(), Broker.of(opts.url)

    async def sample(client: streamwire.Client) -> dict[int, float]:
        sizes: dict[int, float] = {}
        for partition, stop in sorted(end.items()):
            first = start.get(partition, 0)
            wanted = min(stop - first, SIZE_SAMPLE)
            if wanted <= 0:
                continue
            consumer = await broker.consumer(client, opts.stream, partition, first, wanted=wanted)
            async with consumer:
                got = await consumer.next_batch(max_messages=wanted, timeout=opts.timeout)
            taken, _ = _messages_in_range(got, first, stop)
            if taken:
                total = sum(len(m.value) + len(m.key or b"") for m in taken[:wanted])
                sizes[partition] = total / len(taken[:wanted])
        return sizes

    def run(client: streamwire.Client) -> dict[int, float]:
        return rt.call(lambda: sample(client), timeout=opts.timeout)

    return rt.with_client(opts.client_key, run, patience=opts.timeout, interval=opts.retry_interval)


class _Losses:
    """What a reader does with offsets the broker no longer has (``failOnDataLoss``): fail
    the read with :class:`DataLossError` (the default, as Kafka's source), or plan from the
    earliest offset still there, logging what it skipped and counting it."""

    def __init__(self) -> None:
        self.skipped = 0
        # what was counted lately: (kind, partition, first, stop), so that a loss met both
        # when a batch's end is chosen and when it is planned is counted once (the newest
        # COUNTED_KEPT only: a long query may meet a loss in every batch)
        self._counted: dict[tuple[str, int, int, int], None] = {}

    def _count(self, kind: str, ranges: Mapping[int, tuple[int, int]]) -> int:
        """Count the offsets of ``ranges`` not counted lately; how many that was."""
        new = [(kind, p, a, b) for p, (a, b) in ranges.items()]
        new = [key for key in new if key not in self._counted]
        for key in new:
            self._counted[key] = None
        while len(self._counted) > COUNTED_KEPT:
            del self._counted[next(iter(self._counted))]
        added = sum(abs(b - a) for _, _, a, b in new)
        self.skipped += added
        return added

    def check(
        self,
        opts: SourceOptions,
        start: _offsets.Offsets,
        end: _offsets.Offsets,
        bounds: Mapping[int, tuple[int, int]],
    ) -> tuple[_offsets.Offsets, _offsets.Offsets]:
        """``(start, end)`` with the lost offsets left out, or a DataLossError."""
        start = self.rewound(opts, start, end, bounds)
        gone = _offsets.lost(start, end, bounds)
        if not gone:
            return start, end
        count = sum(stop - first for first, stop in gone.values())
        where = "; ".join(
            f"partition {p}: {first}..{stop - 1}"
            + ("" if p in bounds else " (the partition is gone)")
            for p, (first, stop) in gone.items()
        )
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{count} offsets of {opts.stream!r} that this read covers are no longer in the "
                f"broker ({where}): retention deleted them, or the stream was recreated. Set "
                "the option failOnDataLoss=false to skip them (logged and counted)",
                gone,
            )
        if self._count("gone", gone):
            logger.warning(
                "%s: skipping %d offsets no longer in the broker (%s); %d skipped by this "
                "reader so far (failOnDataLoss=false)",
                opts.stream,
                count,
                where,
                self.skipped,
            )
        start = {**start, **{p: bounds[p][0] for p in gone if p in bounds}}
        end = {p: e for p, e in end.items() if p in bounds}
        return start, end

    def rewound(
        self,
        opts: SourceOptions,
        start: _offsets.Offsets,
        end: Mapping[int, int],
        bounds: Mapping[int, tuple[int, int]],
    ) -> _offsets.Offsets:
        """``start`` where a partition's end lies below it: the stream's tail went below
        the checkpoint, so the stream was deleted and created again (or reset) since; what
        the old one held past the checkpoint is gone and its offsets now name other
        messages. A DataLossError, or (``failOnDataLoss=false``) that partition read again
        from its earliest offset, logged and counted."""
        behind = _behind(start, end)
        if not behind:
            return dict(start)
        where = "; ".join(
            f"partition {p}: tail {tail}, checkpoint at {at}" for p, (tail, at) in behind.items()
        )
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"the tail of {opts.stream!r} is below the offsets this query already read "
                f"({where}): the stream was deleted and created again, or reset, so the "
                "checkpoint's offsets name other messages now and what the old stream held "
                "after them is lost. Start the query with a new checkpoint, or set the option "
                "failOnDataLoss=false to read such partitions again from their earliest "
                "offset (logged and counted)",
                {p: (tail, at) for p, (tail, at) in behind.items()},
            )
        if self._count("behind", behind):
            logger.warning(
                "%s: the stream's tail is below the checkpoint (%s): recreated or reset; "
                "reading those partitions again from their earliest offset "
                "(failOnDataLoss=false)",
                opts.stream,
                where,
            )
        return {**start, **{p: bounds.get(p, (0, 0))[0] for p in behind}}


def _behind(start: Mapping[int, int], end: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """``{partition: (end, start)}`` where a partition's end lies below its start."""
    return {p: (e, start[p]) for p, e in sorted(end.items()) if p in start and e < start[p]}


def _read_gap(opts: SourceOptions, part: StreamwirePartition, first: int) -> None:
    """The first message a read got is at ``first``, past the range's start: offsets
    ``[start, first)`` hold no message. That is normal on RabbitMQ (offset-tracking chunks
    take offsets), but when the partition's earliest offset is now past the start,
    retention deleted them after the batch was planned: a DataLossError, or
    (``failOnDataLoss=false``) a WARNING with the count. Asked once per read, only then."""
    earliest = _bounds(opts).get(part.partition, (part.end, part.end))[0]
    if earliest <= part.start:
        return
    stop = min(earliest, part.end)
    count = stop - part.start
    where = f"partition {part.partition}: {part.start}..{stop - 1}"
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{count} offsets of {opts.stream!r} were deleted between planning this batch and "
            f"reading it ({where}; the partition now starts at {earliest}): retention ran "
            "meanwhile. Set the option failOnDataLoss=false to skip them (logged and counted), "
            "or keep more of the stream (retention) than the query lags behind",
            {part.partition: (part.start, stop)},
        )
    logger.warning(
        "%s: skipping %d offsets deleted between planning this batch and reading it (%s; "
        "failOnDataLoss=false)",
        opts.stream,
        count,
        where,
    )


def _first_offset(item: Columns | list[streamwire.Message]) -> int:
    if isinstance(item, Columns):
        return int.from_bytes(item.offsets[:8], sys.byteorder, signed=True)
    offset = item[0].offset
    return -1 if offset is None else offset


def _plan(opts: SourceOptions, start: _offsets.Offsets, end: _offsets.Offsets) -> list[Any]:
    """One Spark partition per broker partition with offsets to read, or several per broker
    partition to reach ``minPartitions`` (every broker reads from any offset)."""
    ranges = [(p, start.get(p, 0), e) for p, e in sorted(end.items())]
    return [
        StreamwirePartition(opts.stream, p, s, e)
        for p, s, e in _offsets.split(ranges, opts.min_partitions)
    ]


def _size(items: Sequence[Columns | list[streamwire.Message]]) -> tuple[int, int]:
    """(messages, bytes of values) in what a fetch got."""
    rows = nbytes = 0
    for item in items:
        if isinstance(item, Columns):
            rows += item.count
            nbytes += len(item.values)
        else:
            rows += len(item)
            nbytes += sum(len(m.value) for m in item)
    return rows, nbytes


def _last_offset(item: Columns | list[streamwire.Message]) -> int:
    if isinstance(item, Columns):
        return int.from_bytes(item.offsets[-8:], sys.byteorder, signed=True)
    offset = item[-1].offset
    return -1 if offset is None else offset


def _fetch(
    consumer: streamwire.Consumer, end: int
) -> Callable[[], Awaitable[Sequence[Columns | list[streamwire.Message]]]]:
    """What one round trip to the event loop gets: chunks as columns where the consumer can
    (:class:`ColumnarConsumer`), else one batch of messages.

    Chunks: what the first wait (up to 1 s) finds, then more while they come within
    ``_MORE_WAIT`` s, until a batch's worth (``_arrow.BATCH_ROWS`` rows or
    ``BATCH_BYTES``) or the end of the range is there. A consumer that keeps up with the
    broker finds one chunk per wait; a round trip per chunk cost the worker's two threads
    more than reading the chunk when chunks are small (docs/benchmarks/notes/2026-11.md)."""
    if isinstance(consumer, ColumnarConsumer):
        columnar = consumer

        async def chunks() -> list[Columns | list[streamwire.Message]]:
            got = await columnar.next_columns(max_chunks=_CHUNKS_PER_CALL, timeout=1.0)
            rows, nbytes = _size(got)
            while (
                got
                and rows < _arrow.BATCH_ROWS
                and nbytes < _arrow.BATCH_BYTES
                and _last_offset(got[-1]) < end - 1
            ):
                more = await columnar.next_columns(max_chunks=_CHUNKS_PER_CALL, timeout=_MORE_WAIT)
                if not more:
                    break
                got += more
                more_rows, more_bytes = _size(more)
                rows, nbytes = rows + more_rows, nbytes + more_bytes
            return got

        return chunks

    async def batch() -> list[list[streamwire.Message]]:
        found = await consumer.next_batch(max_messages=_MESSAGES_PER_CALL, timeout=1.0)
        return [found] if found else []

    return batch


def _messages_in_range(
    batch: list[streamwire.Message], start: int, end: int
) -> tuple[list[streamwire.Message], bool]:
    """The messages of ``batch`` in ``[start, end)`` (in offset order) less the empty ones
    :meth:`streamwire.Settling.commit_tail` wrote, and whether the read is done: it ends at
    the first message at or past ``end - 1``."""
    taken: list[streamwire.Message] = []
    for message in batch:
        offset = message.offset
        if offset is None or offset < start:
            continue
        if offset >= end:
            return taken, True
        if message.value or TAIL_COMMIT_HEADER not in message.headers:
            taken.append(message)  # not what Settling.commit_tail wrote
        if offset >= end - 1:
            return taken, True
    return taken, False


def read_range(
    opts: SourceOptions, part: StreamwirePartition, schema: pa.Schema = _arrow.SCHEMA
) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[start, end)`` of one partition, in offset order, as Arrow
    record batches in ``schema`` (the source's, or the columns a user schema picks:
    ``_schema.source_projection``; ``_arrow``): the chunks and batches of messages the
    consumer hands over put together into batches of up to ``_arrow.BATCH_ROWS`` rows
    (what is pending goes out when the read is done or a fetch finds nothing).

    Offsets without a message (RabbitMQ offset-tracking chunks) are simply not there; when
    the first message comes past ``start``, the partition's earliest offset says whether
    retention deleted the offsets before it since the batch was planned (``_read_gap``:
    ``failOnDataLoss``). The read ends at the first message at or past ``end - 1``. It fails with
    :class:`streamwire.TimeoutError` when no message comes for ``timeout`` seconds."""
    install_observer(opts.observer)
    rt, broker = runtime(), Broker.of(opts.url)
    start, end = part.start, part.end
    if end <= start:
        return

    def open_with(client: streamwire.Client) -> streamwire.Consumer:
        async def run() -> streamwire.Consumer:
            consumer = await broker.consumer(
                client, opts.stream, part.partition, start, wanted=end - start
            )
            await consumer.__aenter__()
            return consumer

        return rt.call(run, timeout=opts.timeout)

    consumer = rt.with_client(
        opts.client_key, open_with, patience=opts.timeout, interval=opts.retry_interval
    )
    batcher = _arrow.Batcher(opts.stream, part.partition, schema=schema)
    try:
        fetch = _fetch(consumer, end)
        progress = time.monotonic()
        checked = False  # the first message's offset against the range's start
        while True:
            got = rt.call(fetch)
            if not got:
                yield from batcher.take(everything=True)  # nothing waits behind a stall
                if time.monotonic() - progress > opts.timeout:
                    raise streamwire.TimeoutError(
                        f"no message of {opts.stream!r} partition {part.partition} in "
                        f"{opts.timeout} s while reading offsets [{start}, {end})"
                    )
                continue
            progress = time.monotonic()
            if not checked:
                checked = True
                first = _first_offset(got[0])
                if first > start:
                    _read_gap(opts, part, first)
            for item in got:
                if isinstance(item, Columns):
                    done = batcher.columns(item, start, end)
                else:
                    messages, done = _messages_in_range(item, start, end)
                    batcher.messages(messages)
                yield from batcher.take(everything=done)
                if done:
                    return
    finally:
        try:
            rt.call(consumer.close, timeout=opts.timeout)
        except streamwire.StreamwireError as exc:
            logger.debug("closing the consumer failed: %s", exc)


class StreamwireBatchReader(DataSourceReader):
    """``spark.read.format("streamwire")``: offsets ``[startingOffsets, endingOffsets)``
    as found when the query is planned, in ``schema`` (``read_range``)."""

    def __init__(self, options: SourceOptions, schema: pa.Schema = _arrow.SCHEMA) -> None:
        install_observer(options.observer)
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[Any]:
        opts = self.options
        bounds = _bounds(opts)
        start, end = _starts(opts, bounds), _ends(opts, bounds)
        end = {p: max(e, start.get(p, e)) for p, e in end.items()}  # an end before the start
        start, end = self._narrowed(bounds, *_Losses().check(opts, start, end, bounds))
        return _plan(opts, start, end)

    def _narrowed(
        self, bounds: Mapping[int, tuple[int, int]], start: _offsets.Offsets, end: _offsets.Offsets
    ) -> tuple[_offsets.Offsets, _offsets.Offsets]:
        return start, end

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamwirePartition):  # nothing planned: PySpark's
            return iter(())  # stand-in partition of an empty read
        return read_range(self.options, partition, self.schema)


class StreamwireFilteringBatchReader(StreamwireBatchReader):
    """The batch reader with filter pushdown (``pushFilters=true``): the query's predicates
    on ``partition``, ``offset`` and ``timestamp`` narrow the ranges read
    (:mod:`streamwire.spark._filters`)."""

    narrowing = _filters.Narrowing()

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        self.narrowing, left = _filters.narrow(filters)
        logger.debug("filters pushed into %r: %s", self.options.stream, self.narrowing)
        return iter(left)

    def _narrowed(
        self, bounds: Mapping[int, tuple[int, int]], start: _offsets.Offsets, end: _offsets.Offsets
    ) -> tuple[_offsets.Offsets, _offsets.Offsets]:
        n = self.narrowing
        start, end = n.ranges(start, end)
        if n.since_ms is not None and not n.nothing:
            wanted = {p: (start[p], end[p]) for p in start if end[p] > start[p]}
            found = _by_time(self.options, _timestamps.TimeSpec(every=n.since_ms), bounds)
            for p in wanted:
                first = found.get(p)  # None: every message is older than the time
                start[p] = end[p] if first is None else min(max(start[p], first), end[p])
        return start, end


def limits(opts: SourceOptions, limit: Any) -> tuple[int | None, int | None]:
    """The rows and bytes a micro-batch may take under Spark's ``limit`` (``None``: no
    bound): ``Trigger.Once``'s ``ReadAllAvailable`` none, a ``ReadMaxRows`` or
    ``ReadMaxBytes`` its own, the options the rest."""
    if isinstance(limit, ReadAllAvailable):
        return None, None
    max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else opts.max_records
    max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else opts.max_bytes
    return max_rows, max_bytes


def holds_back(
    opts: SourceOptions, clock: TriggerClock, new: int, limit: Any, *, available_now: bool
) -> bool:
    """``minOffsetsPerTrigger``, as Kafka's source keeps it: no batch while fewer than that
    many ``new`` offsets are there, unless ``maxTriggerDelay`` passed since the last batch
    (or since the query started). Not under ``Trigger.AvailableNow`` (it would wait for
    offsets that may never come) nor ``Trigger.Once`` (``ReadAllAvailable``)."""
    wanted = opts.min_records
    if wanted is None or available_now or isinstance(limit, ReadAllAvailable):
        return False
    now = _clock()
    if clock.last is None:
        clock.last = now
    if new == 0:
        return False  # nothing new: the batch is empty either way
    if new >= wanted or now - clock.last >= opts.max_trigger_delay:
        clock.last = now
        return False
    return True


def _several_streams(options: Mapping[str, Any]) -> tuple[str, ...]:
    """The streams of ``streams``, or those matching ``streamPattern`` now; ``()`` for a
    read of one ``stream``."""
    if pattern_of(options) is not None:
        return _matching(options, at_least_one=True)
    return streams_of(options)


def _matching(options: Mapping[str, Any], *, at_least_one: bool) -> tuple[str, ...]:
    """The broker's streams whose names match ``streamPattern`` as a whole, sorted; a
    :class:`SparkConfigurationError` for a broker that cannot list its streams, and (with
    ``at_least_one``) when none matches."""
    pattern = pattern_of(options)
    assert pattern is not None
    url, connect = client_key_of(options)
    timeout = float(dict(connect)["timeout"])
    rt = runtime()

    def fetch(client: streamwire.Client) -> list[str]:
        if not isinstance(client, streamwire.Listing):
            raise SparkConfigurationError(
                f"streamPattern needs a broker that lists its streams (Liftbridge, Iggy); "
                f"{Broker.of(url).protocol}'s protocol cannot: name the streams with the "
                "option 'streams'"
            )
        return rt.call(client.list_streams, timeout=timeout)

    names = rt.with_client((url, connect), fetch, patience=timeout)  # as planning waits
    found = tuple(name for name in names if pattern.fullmatch(name))
    if at_least_one and not found:
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        raise SparkConfigurationError(
            f"streamPattern {pattern.pattern!r} matches none of the streams ({shown or 'none'})"
        )
    return found


def _batch_reader(options: Mapping[str, Any], schema: pa.Schema) -> StreamwireBatchReader:
    opts = SourceOptions.parse(options, streaming=False)
    # pyspark refuses a reader with pushFilters unless filter pushdown is on
    # (spark.sql.python.filterPushdown.enabled): the option opts in
    kind = StreamwireFilteringBatchReader if opts.push_filters else StreamwireBatchReader
    return kind(opts, schema)


class StreamwireSeveralBatchReader(SeveralBatchReader, DataSourceReader):
    """``spark.read`` with ``streams``: :class:`streamwire.spark._several.SeveralBatchReader`."""


class StreamwireSeveralFilteringBatchReader(SeveralFilteringBatchReader, DataSourceReader):
    """With ``streams`` and ``pushFilters``."""


class StreamwireStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("streamwire")``: one Spark partition per broker partition
    per micro-batch, admission control with ``maxRecordsPerTrigger`` and
    ``maxBytesPerTrigger``, and ``Trigger.AvailableNow`` (pyspark >= 4.2); batches in
    ``schema`` (``read_range``)."""

    def __init__(self, options: SourceOptions, schema: pa.Schema = _arrow.SCHEMA) -> None:
        install_observer(options.observer)
        self.options = options
        self.schema = schema
        self._target: _offsets.Offsets | None = None  # AvailableNow: never read past this
        self._latest: _offsets.Offsets | None = None  # last tails seen, for the progress
        self._bounds: dict[int, tuple[int, int]] | None = None  # as latestOffset found them
        self._losses = _Losses()
        self._waiting: set[int] = set()  # partitions whose committed tail fell behind
        self._trigger = TriggerClock()  # minOffsetsPerTrigger: the last batch's time
        self._end: _offsets.Offsets | None = None  # where the batch latestOffset chose ends
        self._sizes: tuple[float, dict[int, float]] | None = None  # (when, bytes/message)

    def _tails(self) -> _offsets.Offsets:
        self._bounds = bounds = _bounds(self.options)
        tails = {p: tail for p, (_, tail) in bounds.items()}
        self._latest = tails
        if self._target is not None:
            tails = {p: min(t, self._target.get(p, t)) for p, t in tails.items()}
        return tails

    def initialOffset(self) -> dict[str, Any]:
        opts = self.options
        return _offsets.encode(opts.stream, _starts(opts, _bounds(opts)))

    def earliest(self) -> dict[str, Any]:
        """Every partition's earliest offset: where a stream new to a query's checkpoint
        starts (as Kafka's source starts a topic partition new to it)."""
        opts = self.options
        return _offsets.encode(opts.stream, {p: first for p, (first, _) in _bounds(opts).items()})

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        opts = self.options
        if start is None:  # pyspark < 4.2 calls latestOffset() without start or limit
            return _offsets.encode(opts.stream, self._tails())
        begin, tails = self.window(start)
        new = available(begin, tails)
        if self.held_back(self._trigger, new, limit, available_now=self.available_now):
            end = begin  # minOffsetsPerTrigger: not yet
        else:
            max_rows, max_bytes = self.limits(limit)
            end = _offsets.cap(begin, tails, max_rows)
            if max_bytes is not None:
                end = _offsets.cap_bytes(begin, end, max_bytes, self.sizes(begin, end))
        self.chosen(begin, end)
        return _offsets.encode(opts.stream, end)

    def held_back(self, clock: TriggerClock, new: int, limit: Any, *, available_now: bool) -> bool:
        """Whether ``minOffsetsPerTrigger`` holds a batch of ``new`` offsets back
        (:func:`holds_back`)."""
        return holds_back(self.options, clock, new, limit, available_now=available_now)

    def limits(self, limit: Any) -> tuple[int | None, int | None]:
        """The rows and bytes a batch may take under ``limit`` (:func:`limits`)."""
        return limits(self.options, limit)

    def sizes(self, begin: _offsets.Offsets, end: _offsets.Offsets) -> dict[int, float]:
        """Each partition's mean bytes per message, sampled from ``begin`` (before ``end``)."""
        return _message_sizes(self.options, begin, end)

    @property
    def available_now(self) -> bool:
        """Whether the query runs with ``Trigger.AvailableNow``."""
        return self._target is not None

    def window(self, start: Mapping[str, Any]) -> tuple[_offsets.Offsets, _offsets.Offsets]:
        """Where the next batch may start and how far it may go: the offsets Spark's
        ``start`` names (moved past what the broker no longer has: ``_Losses.rewound``) and
        the tails now (a partition whose committed tail fell below ``start`` waits:
        :meth:`_uncommitted`)."""
        opts = self.options
        tails = self._tails()
        begin = _offsets.decode(opts.stream, start)
        if _behind(begin, tails):
            tails = self._uncommitted(begin, tails)
        if _behind(begin, tails):  # the stream was recreated or reset: see _Losses.rewound
            # (DataLossError, or logged and counted now, so the progress reports it)
            begin = self._losses.rewound(opts, begin, tails, self._bounds or {})
        return begin, tails

    def chosen(self, begin: _offsets.Offsets, end: _offsets.Offsets) -> None:
        """The next batch is ``[begin, end)``: count what it will skip (``failOnDataLoss``
        false) and remember its end, for the lag."""
        if not self.options.fail_on_data_loss:  # count it now, for the progress
            self._losses.check(self.options, begin, end, self._bounds or {})
        self._end = end

    def _uncommitted(self, begin: _offsets.Offsets, tails: _offsets.Offsets) -> _offsets.Offsets:
        """``tails``, where a partition's readable tail lies below ``begin`` but what its
        broker appended reaches it (a :class:`streamwire.Settling` client): ``begin``, for
        nothing new to read yet. A Liftbridge server restarted after a crash forgets its
        high watermark until the next write (docs/liftbridge.md, "After a crash"); the
        stream was not recreated, and what the checkpoint read is still there."""
        appended = _appended(self.options)
        waiting = {p for p in _behind(begin, tails) if appended.get(p, -1) >= begin[p]}
        for p in sorted(waiting - self._waiting):
            logger.warning(
                "%s partition %d: the broker committed messages up to offset %d only, below "
                "this query's checkpoint (%d), though it holds them up to %d: its server "
                "forgot what it had committed (a Liftbridge server restarted after a crash "
                "commits them at the next write). No new rows until then",
                self.options.stream,
                p,
                tails[p] - 1,
                begin[p],
                appended[p] - 1,
            )
        self._waiting = waiting
        return {**tails, **{p: begin[p] for p in waiting}}

    def getDefaultReadLimit(self) -> Any:
        """``maxBytesPerTrigger`` (with ``maxRecordsPerTrigger`` applied too, when both are
        set), else ``maxRecordsPerTrigger``, else everything available; with
        ``minOffsetsPerTrigger``, Spark's ``ReadMinRows`` (pyspark >= 4.3), the upper
        limits then applied from the options."""
        rows, nbytes = self.options.max_records, self.options.max_bytes
        if self.options.min_records is not None:
            if READ_MIN_ROWS:
                return ReadMinRows(self.options.min_records)
            return ReadMaxRows(rows if rows is not None else 1 << 62)
        if nbytes is not None and READ_MAX_BYTES:
            return ReadMaxBytes(nbytes)
        if rows is not None:
            return ReadMaxRows(rows)
        if nbytes is not None:  # pyspark without ReadMaxBytes: applied from the option
            return ReadMaxRows(1 << 62)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The tails last seen, for the query's progress (``sources[].latestOffset``), with
        ``"streamwire.lag"``: how far behind them the batch being run leaves the query
        (:meth:`_lag`); with ``failOnDataLoss=false`` also ``"streamwire.skippedOffsets"``:
        how many offsets this query's planning skipped because the broker no longer had
        them (retention, a recreated stream). Offsets deleted between planning a batch and
        reading it are skipped by the executor, which logs them; the driver does not see
        those."""
        latest = self._latest
        if latest is None:
            return None
        report = _offsets.encode(self.options.stream, latest)
        if not self.options.fail_on_data_loss:
            report[SKIPPED_KEY] = self._losses.skipped
        if self._end is not None:
            report[LAG_KEY] = self._lag(latest, self._end)
        return report

    def _lag(self, latest: _offsets.Offsets, end: _offsets.Offsets) -> dict[str, Any]:
        """How far the batch being run leaves the query behind the tails last seen, as
        Kafka's source reports it (``minOffsetsBehindLatest`` ...): offsets per partition,
        their min, max and mean, and an estimate of the bytes (values and keys) they hold,
        from a sample of each lagging partition's message sizes taken at most every
        :data:`LAG_SAMPLE_EVERY` seconds (``None`` until one is)."""
        behind = {p: max(0, t - end.get(p, 0)) for p, t in sorted(latest.items())}
        counts = list(behind.values()) or [0]
        lagging = {p: end.get(p, 0) for p, n in behind.items() if n > 0}
        now = _clock()
        if lagging and (self._sizes is None or now - self._sizes[0] >= LAG_SAMPLE_EVERY):
            try:
                self._sizes = (now, _message_sizes(self.options, lagging, latest))
            except streamwire.StreamwireError as exc:  # the lag is reported, not required
                logger.debug("sampling message sizes for the lag failed: %s", exc)
        sizes = self._sizes[1] if self._sizes is not None else None
        url = streamwire.parse_url(self.options.url)  # to the observer, if one takes lags
        report_lag(url.protocol, self.options.stream, f"{url.host}:{url.port}", behind, sizes)
        estimate: int | None = None
        if sizes:
            mean = sum(sizes.values()) / len(sizes)
            estimate = round(sum(n * sizes.get(p, mean) for p, n in behind.items()))
        elif not lagging:
            estimate = 0
        return {
            "offsetsBehindLatest": {str(p): n for p, n in behind.items()},
            "minOffsetsBehindLatest": min(counts),
            "maxOffsetsBehindLatest": max(counts),
            "avgOffsetsBehindLatest": sum(counts) / len(counts),
            "estimatedBytesBehindLatest": estimate,
        }

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = None
        self._target = self._tails()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        """The batch's ranges, checked against what the broker still has (``failOnDataLoss``):
        the bounds ``latestOffset`` found for it, or fresh ones (a batch replayed after a
        restart is planned without a ``latestOffset`` first)."""
        opts, bounds = self.options, self._bounds
        self._bounds = None
        if bounds is None:
            bounds = _bounds(opts)
        begin, until = _offsets.decode(opts.stream, start), _offsets.decode(opts.stream, end)
        return _plan(opts, *self._losses.check(opts, begin, until, bounds))

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamwirePartition):  # as the batch reader's
            return iter(())
        return read_range(self.options, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """The Spark checkpoint is the source of truth. With ``consumerName``, each
        partition's last offset read by the committed batches is also stored on the broker
        under that name (:func:`_store_progress`)."""
        name = self.options.consumer_name
        if name is not None:
            _store_progress(self.options, name, _offsets.decode(self.options.stream, end))

    def stop(self) -> None:
        close_runtime()


class StreamwireSeveralStreamReader(
    SeveralStreamReader, DataSourceStreamReader, SupportsTriggerAvailableNow
):
    """``spark.readStream`` with ``streams`` (``streamwire.spark._several``)."""


# --- writing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamwireCommitMessage(WriterCommitMessage):
    """What one write task did (travels from the executor to the driver)."""

    partition: int
    rows: int
    published: int
    skipped: int
    exactly_once: bool


def _summary(messages: Sequence[Any]) -> str:
    done = [m for m in messages if isinstance(m, StreamwireCommitMessage)]
    return (
        f"{len(done)}/{len(messages)} tasks, {sum(m.rows for m in done)} rows, "
        f"{sum(m.published for m in done)} published, "
        f"{sum(m.skipped for m in done)} already stored"
    )


class StreamwireStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("streamwire")``: exactly-once on every broker. Takes
    the task's rows as Arrow record batches (rows where PySpark has no Arrow writer)."""

    def __init__(self, spec: PublishSpec) -> None:
        self.spec = spec

    def write(self, iterator: Iterator[Any]) -> StreamwireCommitMessage:
        task = _identity.task()
        result = publish_partition(
            self.spec,
            runs(iterator),
            query_id=task.query_id if task.batch_id is not None else None,
            batch_id=task.batch_id or 0,
            partition=task.partition,
            attempt=task.attempt,
        )
        return StreamwireCommitMessage(
            result.partition, result.rows, result.published, result.skipped, result.exactly_once
        )

    def commit(self, messages: list[Any], batchId: int) -> None:
        logger.info("streamwire sink %s, batch %d: %s", self.spec.name, batchId, _summary(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:
        logger.warning(
            "streamwire sink %s, batch %d aborted (%s); it runs again on restart",
            self.spec.name,
            batchId,
            _summary(messages),
        )


class StreamwireBatchWriter(_BatchWriterBase):
    """``df.write.format("streamwire").mode("append")``. Every write gets an identity
    (``writeId``, else a fresh one per write) so that retried tasks, and reruns of the same
    write, store nothing twice; each task's is keyed by its first row too, so that a
    ``writeId`` reused for other rows stores them (:func:`content_keyed`)."""

    def __init__(self, spec: PublishSpec, write_id: str | None) -> None:
        self.spec = spec
        self.write_id = write_id or f"w{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[Any]) -> StreamwireCommitMessage:
        task = _identity.task()
        identity, rows = content_keyed(self.write_id, iterator)
        result = publish_partition(
            self.spec,
            runs(rows),
            query_id=identity,
            batch_id=0,
            partition=task.partition,
            attempt=task.attempt,
        )
        return StreamwireCommitMessage(
            result.partition, result.rows, result.published, result.skipped, result.exactly_once
        )

    def commit(self, messages: list[Any]) -> None:
        logger.info("streamwire batch write %s: %s", self.write_id, _summary(messages))

    def abort(self, messages: list[Any]) -> None:
        logger.warning("streamwire batch write %s aborted: %s", self.write_id, _summary(messages))
