"""Exactly-once where the broker does not deduplicate (Liftbridge, Iggy): every message
carries its row's identity, and a task reads back which of its rows an earlier attempt stored.

* Each message of a sink task carries the header :data:`ROW_HEADER`,
  ``<query>:<batch>:<task>:<row>`` (ASCII): a digest of the query id, the micro-batch id, the
  Spark partition and the row's 0-based position in it.
* Before sending, the task reads each partition back from its tail (:func:`stored_rows`) and
  collects **every** row of its own (same query, batch and task) it finds there, as a
  bitmap (:class:`StoredRows`): one bit per row, so memory is bounded by the task's row
  count. It does not assume that what an earlier attempt stored is a prefix of what it
  sent: after a cut connection a gap followed by later rows is normal (a producer keeps
  sending after a send that failed unseen, nats-py flushes its buffer on reconnecting while
  what sat in the dead socket is gone, Iggy sends the next run over a new connection).
  The task then sends exactly the rows that are missing.
* The scan stops at the partition's start; or :data:`OLDER_MARGIN` messages of earlier
  batches of the same query after the first one (a batch starts only once the one before
  it was stored whole, so this batch's rows lie after them; the margin catches a straggler
  of an earlier batch's failed attempt landing amid this batch's rows); or after
  :data:`SCAN_LIMIT` messages in a row none of the query's.
* A message of the same query from a *later* batch than the one being written means the
  query identity was used before (a ``query_id`` reused with a new checkpoint, or a
  checkpoint rolled back): :class:`~streamwire.spark.SinkIdentityError`, not a skip.

* Where a partition's log can hold records past the offsets its server reports
  (:attr:`Broker.log_may_outrun_index`: a Liftbridge server killed between writing a batch
  to its log and to its index, ``streamwire.UnindexedRecordsError``), a scan read from an
  earlier offset meets those records under offsets the server has given again, and would
  take a row that no reader from those offsets will see for stored. So each window's last
  record is also read by itself, from its own offset (where the server looks it up in its
  index), and must be the same record; otherwise the read-back fails with
  ``UnindexedRecordsError``, loudly, instead of skipping rows it did not store.

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
from streamwire.spark.errors import SinkIdentityError

__all__ = (
    "OLDER_MARGIN",
    "ROW_HEADER",
    "SCAN_LIMIT",
    "RowTag",
    "StoredRows",
    "query_tag",
    "stored_rows",
)

ROW_HEADER: Final = "x-streamwire-row"
#: Messages read back in a row, none of them the query's, after which a task stops looking.
SCAN_LIMIT: Final = 100_000
#: Messages of earlier batches of the query read past the first one before the scan stops.
OLDER_MARGIN: Final = 256
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


class StoredRows:
    """The rows of one task found stored in one partition: a bitmap, one bit per row up to
    the highest found."""

    __slots__ = ("_bits", "count")

    def __init__(self) -> None:
        self._bits = bytearray()
        #: How many distinct rows were found.
        self.count = 0

    def add(self, row: int) -> None:
        if row < 0:
            return
        byte, bit = divmod(row, 8)
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits)))
        if not self._bits[byte] >> bit & 1:
            self._bits[byte] |= 1 << bit
            self.count += 1

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, int) or row < 0:
            return False
        byte, bit = divmod(row, 8)
        return byte < len(self._bits) and bool(self._bits[byte] >> bit & 1)

    def __len__(self) -> int:
        return self.count

    def rows(self) -> list[int]:
        """The rows found, ascending."""
        return [
            byte * 8 + bit
            for byte, value in enumerate(self._bits)
            if value
            for bit in range(8)
            if value >> bit & 1
        ]

    def __repr__(self) -> str:
        return f"StoredRows(count={self.count})"


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


def _last(read: list[streamwire.Message]) -> streamwire.Message | None:
    return read[-1] if read else None


def _same_record(
    stream: str, partition: int, scanned: streamwire.Message | None, alone: streamwire.Message
) -> None:
    """``scanned`` (the last record of a scan from an earlier offset) is ``alone`` (the record
    the server gives when read from that offset), else ``UnindexedRecordsError``."""
    offset = alone.offset or 0
    if (
        scanned is not None
        and scanned.offset == offset
        and (scanned.key, scanned.value, scanned.headers) == (alone.key, alone.value, alone.headers)
    ):
        return
    raise streamwire.UnindexedRecordsError(
        f"reading back partition {partition} of {stream!r} for the rows a task stored: a "
        f"read from an earlier offset found another record at offset {offset} than a read "
        f"from offset {offset} itself. The partition's log holds records past the offsets "
        f"its server reports (a Liftbridge server killed between writing a batch to its log "
        f"and to its index: docs/liftbridge.md, 'After a crash'), and the sink cannot tell "
        f"which of its rows a reader will see. Nothing was sent. Write this query's output "
        f"to a new stream (copy what you need of this one into it)",
        stream,
        partition,
        offset,
        None,
    )


def _reused(stream: str, partition: int, mine: RowTag, found: RowTag) -> SinkIdentityError:
    return SinkIdentityError(
        f"partition {partition} of {stream!r} holds rows of micro-batch {found.batch} of this "
        f"query's identity (row tag {found.query}) while micro-batch {mine.batch} is being "
        "written: the identity was used before, by another checkpoint or before this "
        "checkpoint was rolled back, and writing on would store rows twice or not at all. Give "
        "the sink a query_id that is new for a new checkpoint (its location will do), or "
        "write to a new stream"
    )


async def _stored(
    broker: Broker,
    client: streamwire.Client,
    stream: str,
    partition: int,
    bounds: tuple[int, int],
    mine: RowTag,
    timeout: float,
    scan_limit: int,
) -> StoredRows:
    """Every row of ``mine``'s (query, batch, task) stored in ``partition``."""
    found = StoredRows()
    first, hi = bounds
    window, strangers, older = _FIRST_WINDOW, 0, 0
    # the record at the top of the next window read, as the server gives it from its own
    # offset (only where the log may outrun the index; the module's notes)
    anchor: streamwire.Message | None = None
    if broker.log_may_outrun_index and hi > first:
        anchor = _last(await _read(broker, client, stream, partition, hi - 1, hi, timeout))
    while hi > first:
        lo = max(first, hi - window)
        if anchor is None:
            read = await _read(broker, client, stream, partition, lo, hi, timeout)
        else:
            top = anchor.offset or 0
            read = await _read(broker, client, stream, partition, lo, top + 1, timeout)
            _same_record(stream, partition, _last(read), anchor)
            read = [m for m in read if (m.offset or 0) < hi]  # the top: read above already
            anchor = read[0] if read else None
        for message in reversed(read):
            tag = RowTag.of(message)
            if tag is None or tag.query != mine.query:
                strangers += 1
                if strangers >= scan_limit:
                    return found
                continue
            strangers = 0
            if tag.batch > mine.batch:
                raise _reused(stream, partition, mine, tag)
            if tag.batch < mine.batch:
                older += 1
                if older > OLDER_MARGIN:
                    return found
            elif tag.task == mine.task:
                found.add(tag.row)
        hi, window = lo, min(window * 2, _MAX_WINDOW)
    return found


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
) -> dict[int, StoredRows]:
    """For each partition (``{partition: (first offset, tail)}``): the rows the task
    ``task`` of micro-batch ``batch`` of ``query`` (a :func:`query_tag`) stored there.
    Raises :class:`~streamwire.spark.SinkIdentityError` when a partition holds a later
    batch of the same query."""
    mine = RowTag(query, batch, task, -1)
    found = await asyncio.gather(
        *(
            _stored(broker, client, stream, p, bounds, mine, timeout, scan_limit)
            for p, bounds in partitions.items()
        )
    )
    return dict(zip(partitions, found, strict=True))
