"""Publishing one Spark partition: the code every streamwire sink runs in its tasks.

Exactly-once on RabbitMQ Streams (a micro-batch replayed after a failure or a stop stores
nothing twice):

* each Spark partition publishes through its own named producer, reference
  ``<name>-<queryId>-p<partition>`` (the query id is stable across restarts from one
  checkpoint and new for a new checkpoint, so a reset never collides with old ids);
* the row at 0-based ``position`` of micro-batch ``batch_id`` gets publishing id
  ``batch_id * 2**32 + position + 1``: never 0, strictly increasing within a partition and
  from batch to batch;
* on start the producer reads the last id the broker stored under that reference
  (QueryPublisherSequence) and rows at or below it are skipped; the broker would drop them
  anyway, skipping saves sending them;
* the task waits for every confirmation before it returns, and deletes its publisher, so
  a retry of the same task can declare the reference again.

This relies on a replayed batch holding the same rows in the same order per partition,
which Spark guarantees for deterministic plans over replayable sources (same offsets, same
partitioning: keep ``spark.sql.shuffle.partitions`` and any ``repartition(n)`` fixed for a
checkpoint; sort within partitions after a shuffle).

Other brokers publish plainly: at-least-once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any, Final

import streamwire
from streamwire.spark._brokers import Broker, Publisher
from streamwire.spark._messages import Run, run_values
from streamwire.spark._options import DEFAULT_CHUNK_ROWS
from streamwire.spark._runtime import ClientKey, runtime
from streamwire.spark._schema import SinkLayout
from streamwire.spark.errors import SparkConfigurationError

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


def _retrieve(future: asyncio.Future[Any]) -> None:
    # Failures surface through flush(); mark them retrieved so asyncio does not log them.
    if not future.cancelled():
        future.exception()


class _Partition:
    """State of one partition being published."""

    def __init__(self, publisher: Publisher, batch_id: int) -> None:
        self.publisher = publisher
        self.batch_id = batch_id
        self.published = 0
        self.skipped = 0

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
        confirmation future, consecutive publishing ids."""
        pid = publishing_id(self.batch_id, first_position)
        future = await self.publisher.send_run(values, pid)
        future.add_done_callback(_retrieve)
        self.published += len(values)


def publish_partition(
    spec: PublishSpec,
    runs: Iterable[Run],
    *,
    query_id: str | None,
    batch_id: int,
    partition: int,
) -> PartitionResult:
    """Publish the rows of ``runs`` (record batches or sequences of rows, in order) and
    wait for every confirmation; raises on any failure so Spark fails the task.
    Deduplicates when the broker can and ``query_id`` is known. Rows go out in runs of at
    most ``spec.chunk_rows``, one confirmation future per run."""
    broker = Broker.of(spec.url)
    exactly_once = broker.exactly_once and query_id is not None
    ref = reference(spec.name, query_id, partition) if exactly_once and query_id else None
    if exactly_once:
        publishing_id(batch_id, 0)  # validates the batch id before anything is sent
    rt = runtime()
    options = dict(spec.producer_options)

    def open_with(client: streamwire.Client) -> Publisher:
        return rt.call(
            lambda: broker.open_publisher(
                client,
                spec.stream,
                reference=ref,
                options=options,
                max_in_flight=spec.max_in_flight,
            ),
            timeout=spec.timeout,
        )

    slices = _slices(runs, spec.chunk_rows)
    first_run = next(slices, None)
    if first_run is None:  # an empty partition opens nothing
        return PartitionResult(partition, 0, 0, 0, exactly_once)
    publisher = rt.with_client(spec.client_key, open_with)
    state = _Partition(publisher, batch_id)
    rows_seen = 0
    try:
        for run in chain((first_run,), slices):
            first, count = rows_seen, len(run)
            rows_seen += count
            skip = state.already_stored(first, count)
            state.skipped += skip
            if skip < count:
                values = run_values(spec.layout, run[skip:] if skip else run, first + skip)
                rt.call(partial(state.send, first + skip, values))
        rt.call(lambda: publisher.flush(spec.timeout))
    except BaseException:
        try:
            rt.call(publisher.close, timeout=spec.timeout)
        except Exception as exc:  # keep the original failure
            logger.debug("closing the producer after a failure failed too: %s", exc)
        raise
    rt.call(publisher.close, timeout=spec.timeout)
    logger.debug(
        "partition %d of batch %d: %d rows, %d published, %d already stored",
        partition,
        batch_id,
        rows_seen,
        state.published,
        state.skipped,
    )
    return PartitionResult(partition, rows_seen, state.published, state.skipped, exactly_once)
