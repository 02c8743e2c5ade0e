"""Exactly-once where the broker does not deduplicate (Liftbridge, Iggy): every message
carries its row's identity, and a task reads back what an earlier attempt of it stored.

* Each message of a sink task carries the header :data:`ROW_HEADER`,
  ``<query>:<batch>:<task>:<row>`` (ASCII): a digest of the query id, the micro-batch id, the
  Spark partition and the row's 0-based position in it.
* A task sends each broker partition's rows in row order through a producer pinned to that
  partition (keyless rows of Spark partition *t* go to broker partition *t* mod the count;
  keyed rows where the producer's key partitioner puts them), so what an interrupted attempt
  stored in a partition is a prefix of the rows the task routes there.
* Before sending, the task reads each partition back from its tail
  (:func:`stored_rows`) to the last row of its own (same query, batch and task), or to a
  message of an earlier batch of the same query, or to the partition's start, or until
  :data:`SCAN_LIMIT` messages in a row were none of the query's; rows at or below the last
  stored one are skipped.

A first attempt finds nothing of its own and sends everything. docs/spark.md has the
guarantees and their limits.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import streamwire
from streamwire.spark._brokers import Broker

__all__ = ("ROW_HEADER", "SCAN_LIMIT", "RowTag", "query_tag", "stored_rows")

ROW_HEADER: Final = "x-streamwire-row"
#: Messages read back in a row, none of them the query's, after which a task stops looking
#: and takes the partition as holding nothing of its own.
SCAN_LIMIT: Final = 100_000
_FIRST_WINDOW: Final = 256
_MAX_WINDOW: Final = 16_384
_POLL: Final = 1000


_QUERY_CHARS: Final = 16
_HEX: Final = "0123456789abcdef"


def query_tag(query_id: str) -> str:
    """The short, fixed-size form of a query id the row header carries."""
    return hashlib.sha256(query_id.encode()).hexdigest()[:_QUERY_CHARS]


@dataclass(frozen=True, slots=True)
class RowTag:
    """Who wrote a message: query (:func:`query_tag`), micro-batch, Spark partition, row."""

    query: str
    batch: int
    task: int
    row: int

    def encode(self) -> bytes:
        return f"{self.query}:{self.batch}:{self.task}:{self.row}".encode()

    @classmethod
    def of(cls, message: streamwire.Message) -> RowTag | None:
        """The tag ``message`` carries, or ``None`` (none, or not one of ours)."""
        header = message.headers.get(ROW_HEADER) if message.headers else None
        if header is None:
            return None
        raw = header.value
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
        parts = text.split(":")
        if len(parts) != 4 or len(parts[0]) != _QUERY_CHARS or parts[0].strip(_HEX):
            return None
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))
        except ValueError:
            return None


async def _read(
    broker: Broker,
    client: streamwire.Client,
    stream: str,
    partition: int,
    start: int,
    end: int,
    timeout: float,
) -> list[streamwire.Message]:
    """The messages of offsets ``[start, end)`` of one partition, in offset order."""
    taken: list[streamwire.Message] = []
    consumer = await broker.consumer(client, stream, partition, start, wanted=end - start)
    async with asyncio.timeout(timeout), consumer:
        while True:
            batch = await consumer.next_batch(max_messages=_POLL, timeout=timeout)
            if not batch:
                raise streamwire.TimeoutError(
                    f"reading back partition {partition} of {stream!r} at {start}..{end}: "
                    f"nothing arrived in {timeout} s"
                )
            for message in batch:
                offset = message.offset
                if offset is None or offset < start:
                    continue
                if offset >= end:
                    return taken
                taken.append(message)
                if offset >= end - 1:
                    return taken


async def _last_row(
    broker: Broker,
    client: streamwire.Client,
    stream: str,
    partition: int,
    bounds: tuple[int, int],
    mine: RowTag,
    timeout: float,
    scan_limit: int,
) -> int:
    """The last row of ``mine``'s (query, batch, task) stored in ``partition``; -1: none."""
    first, hi = bounds
    window, strangers = _FIRST_WINDOW, 0
    while hi > first:
        lo = max(first, hi - window)
        for message in reversed(await _read(broker, client, stream, partition, lo, hi, timeout)):
            tag = RowTag.of(message)
            if tag is None or tag.query != mine.query:
                strangers += 1
                if strangers >= scan_limit:
                    return -1
                continue
            strangers = 0
            if tag.batch != mine.batch:
                return -1  # an earlier batch: this batch's rows would all be after it
            if tag.task == mine.task:
                return tag.row  # rows go out in order: the newest is the last
        hi, window = lo, min(window * 2, _MAX_WINDOW)
    return -1


async def stored_rows(
    broker: Broker,
    client: streamwire.Client,
    stream: str,
    partitions: Mapping[int, tuple[int, int]],
    *,
    query: str,
    batch: int,
    task: int,
    timeout: float,
    scan_limit: int = SCAN_LIMIT,
) -> dict[int, int]:
    """For each partition (``{partition: (first offset, tail)}``): the last row the task
    ``task`` of micro-batch ``batch`` of ``query`` (a :func:`query_tag`) stored there, -1
    where it stored none."""
    mine = RowTag(query, batch, task, -1)
    found = await asyncio.gather(
        *(
            _last_row(broker, client, stream, p, bounds, mine, timeout, scan_limit)
            for p, bounds in partitions.items()
        )
    )
    return dict(zip(partitions, found, strict=True))
