"""``foreach_batch_sink``: publish every micro-batch of a streaming query from the executors.

::

    from streamwire.spark import foreach_batch_sink

    sink = foreach_batch_sink("rabbitmq-stream://guest:guest@broker:5552/", "events")
    query = (
        df.select("value", "key", "headers")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", "/checkpoints/events")
        .start()
    )

The function Spark calls on the driver checks the schema, reads the query id and runs
``batch_df.mapInArrow`` with a small picklable task; each task publishes its partition's
Arrow record batches through the worker process's cached client (see ``_runtime``, and
``_messages``: no Python object per row unless it has a key or headers) and returns only
once the broker confirmed every message, with one row of counts the driver collects.
Exactly-once on every broker (see ``_publish``). Per-batch
counts are logged and kept in
:attr:`ForeachBatchSink.metrics`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from streamwire.spark import _identity
from streamwire.spark._brokers import Broker
from streamwire.spark._messages import runs
from streamwire.spark._observe import check_spec as check_observer
from streamwire.spark._options import DEFAULT_CHUNK_ROWS, DEFAULT_MAX_IN_FLIGHT
from streamwire.spark._publish import PublishSpec, publish_partition
from streamwire.spark._schema import SinkLayout, sink_layout
from streamwire.spark.errors import SinkIdentityError, SparkConfigurationError

__all__ = ("BatchMetrics", "ForeachBatchSink", "Guarantee", "SinkMetrics", "foreach_batch_sink")

logger = logging.getLogger(__name__)

#: What a sink promises: ``"exactly-once"`` (the default; it needs the query's identity and
#: refuses speculative execution) or ``"at-least-once"`` (asked for explicitly: rows of a
#: replayed micro-batch may be stored twice).
Guarantee = Literal["exactly-once", "at-least-once"]
_GUARANTEES: Final = get_args(Guarantee)


def speculation_on(df: Any) -> bool:
    """Whether ``spark.speculation`` is on for ``df``'s session (classic and Connect). A
    speculative copy of a task publishes the same rows at the same time as the original,
    which no read-back can order; a conf that cannot be read counts as off."""
    try:
        value = df.sparkSession.conf.get("spark.speculation", "false")
    except Exception:  # a session that cannot answer: Spark's default (off)
        return False
    return str(value).strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class BatchMetrics:
    """What one call of the sink did. ``skipped`` rows had been stored by an earlier run of
    the same micro-batch (a replay), so were not sent again. The counts come back from the
    tasks with the job's result, in Spark Connect too."""

    batch_id: int
    query_id: str | None
    rows: int | None
    published: int | None
    skipped: int | None
    exactly_once: bool


class SinkMetrics:
    """Per-batch counts of one sink, kept on the driver: the last ``keep`` batches."""

    def __init__(self, keep: int = 1000) -> None:
        self._batches: deque[BatchMetrics] = deque(maxlen=keep)

    def record(self, batch: BatchMetrics) -> None:
        self._batches.append(batch)

    @property
    def batches(self) -> list[BatchMetrics]:
        """Oldest first."""
        return list(self._batches)

    @property
    def last(self) -> BatchMetrics | None:
        return self._batches[-1] if self._batches else None

    def total(self, field: str) -> int:
        """Sum of ``rows``, ``published`` or ``skipped`` over the kept batches."""
        if field not in ("rows", "published", "skipped"):
            raise ValueError(f"unknown metric {field!r}")
        return sum(getattr(b, field) or 0 for b in self._batches)

    def __repr__(self) -> str:
        return (
            f"SinkMetrics(batches={len(self._batches)}, rows={self.total('rows')}, "
            f"published={self.total('published')}, skipped={self.total('skipped')})"
        )


#: What each task of the publishing job returns: its counts, one row.
_COUNTS_SCHEMA: Final = "rows long, published long, skipped long, exactly_once long"


class _PartitionTask:
    """The function shipped to executors: configuration only, nothing live. It publishes
    one partition (record batches from ``mapInArrow``, or rows) and yields its counts."""

    def __init__(self, spec: PublishSpec, query_id: str | None, batch_id: int) -> None:
        self.spec = spec
        self.query_id = query_id
        self.batch_id = batch_id

    def counts(self, items: Iterator[Any]) -> tuple[int, int, int, int]:
        task = _identity.task()
        result = publish_partition(
            self.spec,
            runs(items, self.spec.chunk_rows),
            query_id=self.query_id,
            batch_id=self.batch_id,
            partition=task.partition,
            attempt=task.attempt,
        )
        return result.rows, result.published, result.skipped, int(result.exactly_once)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        """``mapInArrow``: record batches in, one row of counts out."""
        import pyarrow as pa

        from streamwire.spark._arrow import int64_array

        # from the counts' bytes: pa.array of Python ints has pyarrow look for pandas, whose
        # import costs a fresh worker a third of a second
        yield pa.RecordBatch.from_arrays(
            [int64_array([n]) for n in self.counts(batches)],
            names=["rows", "published", "skipped", "exactly_once"],
        )

    def rows(self, rows: Iterator[Any]) -> Iterator[tuple[int, int, int, int]]:
        """``rdd.mapPartitions``: rows in, one tuple of counts out."""
        yield self.counts(rows)


def _publish(batch_df: Any, task: _PartitionTask) -> list[Any]:
    """Run ``task`` over every partition of ``batch_df``; the counts of each. Record
    batches through ``mapInArrow`` where PySpark can (it wants pandas installed), else
    rows through the RDD."""
    try:
        counted = batch_df.mapInArrow(task, _COUNTS_SCHEMA)
    except ImportError as exc:  # PySparkImportError: mapInArrow needs pandas
        logger.debug("mapInArrow unavailable (%s): publishing rows", exc)
        return list(batch_df.rdd.mapPartitions(task.rows).collect())
    return list(counted.collect())


_IDENTITY_FAILURE: Final = f"{SinkIdentityError.__module__}.{SinkIdentityError.__name__}: "


def _identity_failure(exc: Exception) -> SinkIdentityError | None:
    """The :class:`SinkIdentityError` a task raised, out of the exception Spark raises on the
    driver for it (its text ends with the task's Python traceback), so that the caller gets
    the type it can catch; ``None`` for any other failure."""
    text = str(exc)
    at = text.rfind(_IDENTITY_FAILURE)
    if at < 0:
        return None
    return SinkIdentityError(text[at + len(_IDENTITY_FAILURE) :].splitlines()[0])


class ForeachBatchSink:
    """The callable :func:`foreach_batch_sink` returns. It holds configuration and
    metrics only, so it pickles (Spark Connect ships it to a server-side worker)."""

    def __init__(
        self,
        url: str,
        stream: str,
        *,
        name: str = "streamwire-sink",
        timeout: float = 60.0,
        max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        query_id: str | None = None,
        ignore_extra_columns: bool = False,
        connect_options: Mapping[str, Any] | None = None,
        producer_options: Mapping[str, Any] | None = None,
        guarantee: Guarantee = "exactly-once",
        observer: str | None = None,
    ) -> None:
        self.broker = Broker.of(url)  # validates the URL now
        self.observer = None if observer is None else check_observer(observer)
        if guarantee not in _GUARANTEES:
            raise SparkConfigurationError(
                f"guarantee must be one of {', '.join(map(repr, _GUARANTEES))}, not {guarantee!r}"
            )
        if not stream:
            raise SparkConfigurationError("a target stream is required")
        self.broker.check_stream(stream)
        if not name:
            raise SparkConfigurationError("the sink name must not be empty")
        if timeout <= 0:
            raise SparkConfigurationError("timeout must be > 0")
        if max_in_flight is not None and max_in_flight < 1:
            raise SparkConfigurationError("max_in_flight must be >= 1")
        if chunk_rows < 1:
            raise SparkConfigurationError("chunk_rows must be >= 1")
        options = dict(producer_options or {})
        connect = dict(connect_options or {})
        connect.setdefault("timeout", timeout)
        self.url = url
        self.stream = stream
        self.name = name
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.chunk_rows = chunk_rows
        self.query_id = query_id
        self.guarantee: Guarantee = guarantee
        self.ignore_extra_columns = ignore_extra_columns
        self.producer_options = tuple(sorted(options.items()))
        self.connect_options = tuple(sorted(connect.items()))
        self.metrics = SinkMetrics()

    def __repr__(self) -> str:
        return (
            f"ForeachBatchSink({self.broker.protocol}, stream={self.stream!r}, name={self.name!r})"
        )

    def check(self, df_or_schema: Any) -> SinkLayout:
        """Check a DataFrame (streaming or not) or its schema against the sink's column
        contract; raises :class:`~streamwire.spark.SinkSchemaError`. Call it before
        ``start()`` to fail before the query runs."""
        schema = getattr(df_or_schema, "schema", df_or_schema)
        return sink_layout(schema, ignore_extra_columns=self.ignore_extra_columns)

    def _spec(self, layout: SinkLayout) -> PublishSpec:
        return PublishSpec(
            url=self.url,
            stream=self.stream,
            name=self.name,
            timeout=self.timeout,
            layout=layout,
            max_in_flight=self.max_in_flight,
            chunk_rows=self.chunk_rows,
            producer_options=self.producer_options,
            connect_options=self.connect_options,
            observer=self.observer,
        )

    def _identity(self, batch_df: Any) -> str | None:
        """The query identity the tasks deduplicate by (``None``: at-least-once, as asked);
        raises where exactly-once was asked for and cannot hold."""
        if self.guarantee == "at-least-once":
            return None
        if speculation_on(batch_df):
            raise SparkConfigurationError(
                f"sink {self.name}: spark.speculation is on, so Spark may run a second copy of "
                "a task that publishes the same rows at the same time, and exactly-once cannot "
                "hold. Turn speculation off for this application, or pass "
                "foreach_batch_sink(..., guarantee='at-least-once')"
            )
        query_id = self.query_id or _identity.driver_query_id(batch_df)
        if query_id is not None:
            return query_id
        if _identity.is_connect(batch_df):
            raise SparkConfigurationError(
                f"sink {self.name}: Spark Connect does not tell a foreachBatch function which "
                "query it runs, and exactly-once needs that identity: pass "
                "foreach_batch_sink(..., query_id=...), a name stable across restarts of this "
                "checkpoint and new for a new one (the checkpoint location will do)"
            )
        raise SparkConfigurationError(
            f"sink {self.name}: no streaming query id (called outside a streaming query?) and no "
            "query_id given, and exactly-once needs one: pass foreach_batch_sink(..., "
            "query_id=...), a name stable across reruns of this write and new for a new one, or "
            "foreach_batch_sink(..., guarantee='at-least-once') to publish without one"
        )

    def __call__(self, batch_df: Any, batch_id: int) -> BatchMetrics:
        """Publish one micro-batch; returns (and records) its counts. Raises when any
        partition failed, which fails the micro-batch: Spark runs it again on restart."""
        layout = self.check(batch_df)  # on the driver, before any Spark job
        query_id = self._identity(batch_df)
        task = _PartitionTask(self._spec(layout), query_id, batch_id)
        try:
            counts = _publish(batch_df, task)
        except Exception as exc:
            reused = _identity_failure(exc)
            if reused is None:
                raise
            raise reused from exc
        rows, published, skipped = (sum(c[i] for c in counts) for i in range(3))
        metrics = BatchMetrics(
            batch_id=batch_id,
            query_id=query_id,
            rows=rows,
            published=published,
            skipped=skipped,
            # as the tasks' producers held it (every task's, when there is a query id)
            exactly_once=query_id is not None and all(c[3] for c in counts),
        )
        self.metrics.record(metrics)
        logger.info(
            "sink %s, batch %d: %s rows, %s published, %s already stored",
            self.name,
            batch_id,
            rows,
            published,
            skipped,
        )
        return metrics


def foreach_batch_sink(
    url: str,
    stream: str,
    *,
    name: str = "streamwire-sink",
    timeout: float = 60.0,
    max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    query_id: str | None = None,
    ignore_extra_columns: bool = False,
    connect_options: Mapping[str, Any] | None = None,
    guarantee: Guarantee = "exactly-once",
    observer: str | None = None,
    **producer_options: Any,
) -> ForeachBatchSink:
    """A function for ``writeStream.foreachBatch`` that publishes each micro-batch to
    ``stream`` at ``url`` (``rabbitmq-stream://``, ``liftbridge://``, ``iggy://``; an
    Iggy ``stream`` is a ``"stream/topic"`` address).

    Rows need a ``value`` column (binary, or string sent as UTF-8) and may have ``key``
    (binary or string) and ``headers`` (``map<string,binary>``); other columns are an
    error unless ``ignore_extra_columns``. The schema is checked on the driver before any
    Spark job runs (:class:`~streamwire.spark.SinkSchemaError`).

    Each Spark partition is published by one task on an executor, in row order, through a
    client cached per Python worker process; the call returns once the broker confirmed
    every message, and raises (failing the micro-batch) otherwise.

    Guarantees: **exactly-once** (``guarantee="exactly-once"``, the default). On RabbitMQ
    Streams by the broker's dedup (a named producer per partition,
    ``<name>-<queryId>-p<partition>``, publishing id ``batch_id * 2**32 + position + 1``;
    rows the broker already stored are skipped on a replay). On Liftbridge and Iggy every
    message carries its row's identity (header ``x-streamwire-row``), and a task first
    reads back which of its rows an earlier attempt stored in each broker partition and
    sends exactly the others. A task stops at its first failed send and fails. It needs the
    query's identity: the streaming query id, or ``query_id`` (required in Spark Connect,
    where the function cannot see the query, and outside a streaming query): a name stable
    across restarts of one checkpoint and new for a new checkpoint (the checkpoint location
    will do). Where the identity is missing, or ``spark.speculation`` is on, every batch
    fails with a :class:`~streamwire.spark.SparkConfigurationError` saying so; where the
    broker already holds a later batch of the identity (reused with a new checkpoint) the
    batch fails with a :class:`~streamwire.spark.SinkIdentityError`.
    ``guarantee="at-least-once"`` publishes without an identity: a replayed batch may be
    stored twice, and :attr:`BatchMetrics.exactly_once` says ``False``.

    ``timeout`` (seconds) bounds connecting, opening a producer and waiting for the
    confirmations of one partition. ``max_in_flight`` bounds unconfirmed messages per
    producer where the protocol has such a bound (RabbitMQ, Liftbridge; ``None``: the
    client's default). A task hands its rows to the producer in runs of at most
    ``chunk_rows`` (one confirmation future and, on RabbitMQ, consecutive publishing ids per
    run); rows of a run not yet handed over when a task dies are not sent.
    ``connect_options`` go to :func:`streamwire.connect`, other keyword arguments to
    ``client.producer``. ``observer`` (``"package.module:function"``) is called once in
    each executor's Python worker before its first connection, to install a
    :class:`streamwire.metrics.Observer` there (an application's own observer stays in the
    driver's process; docs/spark.md, "Metrics").
    """
    return ForeachBatchSink(
        url,
        stream,
        name=name,
        timeout=timeout,
        max_in_flight=max_in_flight,
        chunk_rows=chunk_rows,
        query_id=query_id,
        ignore_extra_columns=ignore_extra_columns,
        connect_options=connect_options,
        producer_options=producer_options,
        guarantee=guarantee,
        observer=observer,
    )
