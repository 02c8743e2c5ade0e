"""Who is writing: the streaming query id and micro-batch id as Spark exposes them.

Spark sets two *internal* local properties on the driver thread that runs a micro-batch,
and copies them into every task of that batch: ``sql.streaming.queryId`` (stable across
restarts from the same checkpoint) and ``streaming.sql.batchId``. They are not public API,
so they are read here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = (
    "BATCH_ID_PROPERTY",
    "QUERY_ID_PROPERTY",
    "TaskIdentity",
    "driver_query_id",
    "is_connect",
    "task",
)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """The running Spark task: its partition, attempt and (in streaming) query and batch."""

    partition: int
    attempt: int
    query_id: str | None
    batch_id: int | None


def driver_query_id(df: Any) -> str | None:
    """The streaming query id on the driver thread running ``df``'s micro-batch (classic
    mode), or ``None`` outside a streaming query or where it cannot be read (Connect)."""
    try:
        value = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    except Exception:  # Spark Connect has no SparkContext
        return None
    return str(value) if value else None


def is_connect(df: Any) -> bool:
    """Whether ``df`` belongs to a Spark Connect session (where a foreachBatch function runs
    in a Python process of the server, which Spark tells nothing of the query)."""
    return type(df).__module__.startswith("pyspark.sql.connect.")


def task() -> TaskIdentity:
    """The identity of the task running this code on an executor (or a local stand-in
    when called outside a Spark task: partition 0, attempt 0, no query, no batch)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return TaskIdentity(0, 0, None, None)
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    return TaskIdentity(
        partition=ctx.partitionId(),
        attempt=ctx.attemptNumber(),
        query_id=query_id or None,
        batch_id=int(batch_id) if batch_id else None,
    )
