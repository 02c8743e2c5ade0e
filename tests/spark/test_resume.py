"""The read-back that makes the Spark sink exactly-once on Liftbridge and Iggy
(``streamwire.spark._resume``): which rows an interrupted task stored in a partition (every
one, gaps included), found from the tail through sibling tasks', earlier batches' and other
writers' messages.
A consumer over an in-memory partition stands in for the broker; the real brokers run it in
tests/spark/test_sink.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamwire
from streamwire.spark._brokers import Broker
from streamwire.spark._resume import (
    OLDER_MARGIN,
    ROW_HEADER,
    RowTag,
    StoredRows,
    query_tag,
    stored_rows,
)
from streamwire.spark.errors import SinkIdentityError

pytestmark = [pytest.mark.spark]

Q = query_tag("query-1")


class _Consumer:
    """Yields the partition's messages from ``offset`` on, ``step`` at a time."""

    def __init__(self, log: Sequence[streamwire.Message], offset: int, step: int) -> None:
        self.log, self.at, self.step = log, offset, step

    async def __aenter__(self) -> _Consumer:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def next_batch(
        self, max_messages: int = 1000, timeout: float | None = None
    ) -> list[streamwire.Message]:
        got = list(self.log[self.at : self.at + min(self.step, max_messages)])
        self.at += len(got)
        return got


class _Broker:
    """What ``_resume`` asks of :class:`Broker`: a consumer of one partition."""

    def __init__(self, logs: dict[int, list[streamwire.Message]], step: int = 333) -> None:
        self.logs, self.step, self.reads = logs, step, 0

    async def consumer(
        self, client: Any, stream: str, partition: int, offset: int, *, wanted: int | None = None
    ) -> _Consumer:
        self.reads += 1
        return _Consumer(self.logs[partition], offset, self.step)


def _message(offset: int, tag: RowTag | None, *, raw: bytes | None = None) -> streamwire.Message:
    if raw is None and tag is not None:
        raw = tag.encode()
    headers = {ROW_HEADER: raw} if raw is not None else None
    message = streamwire.Message(b"v", headers=headers)
    message.offset = offset
    return message


def _log(tags: Sequence[RowTag | None]) -> list[streamwire.Message]:
    return [_message(i, tag) for i, tag in enumerate(tags)]


def _found(
    broker: _Broker, batch: int, task: int, *, scan_limit: int = 100_000
) -> dict[int, list[int]]:
    """The rows of (batch, task) the read-back finds in each partition, ascending."""
    bounds = {p: (0, len(log)) for p, log in broker.logs.items()}
    found = asyncio.run(
        stored_rows(
            cast(Broker, broker),
            cast(streamwire.Client, None),
            "s",
            bounds,
            query=Q,
            batch=batch,
            task=task,
            timeout=5.0,
            scan_limit=scan_limit,
        )
    )
    for rows in found.values():
        assert len(rows) == len(rows.rows())
        assert all(row in rows for row in rows.rows())
    return {p: rows.rows() for p, rows in found.items()}


def test_a_tag_round_trips_and_foreign_or_broken_headers_are_not_tags() -> None:
    tag = RowTag(Q, 7, 3, 12_345)
    assert tag.encode() == f"{Q}:7:3:12345".encode()
    assert RowTag.of(_message(0, tag)) == tag
    assert RowTag.of(_message(0, None)) is None
    broken = (b"x", b"a:b:c:d", b"q:1:2", f"{Q}:1:2:3:4".encode(), f"{Q}:1:x:3".encode())
    for raw in (*broken, "\u00e9:1:2:3".encode(), b"0123456789abcdeg:1:2:3"):
        assert RowTag.of(_message(0, None, raw=raw)) is None
    assert len(query_tag("a" * 500)) == 16


def test_every_row_of_the_task_is_found_behind_siblings_and_after_the_previous_batch() -> None:
    previous = [RowTag(Q, 4, t, r) for r in range(50) for t in (0, 1)]
    mine = [RowTag(Q, 5, 1, r) for r in range(0, 30, 3)]  # the rows it routed here
    siblings = [RowTag(Q, 5, 0, r) for r in range(5000)]  # long after it, same batch
    broker = _Broker({0: _log(previous + mine + siblings), 1: _log(previous)})
    assert _found(broker, batch=5, task=1) == {0: list(range(0, 30, 3)), 1: []}
    assert _found(broker, batch=5, task=2) == {0: [], 1: []}  # stops in batch 4
    assert _found(broker, batch=5, task=0) == {0: list(range(5000)), 1: []}


def test_rows_after_a_gap_do_not_count_the_gap_as_stored() -> None:
    """A cut connection loses rows 40-59 while 60-99 are stored after them (a producer that
    sent on, a client that flushed its buffer on reconnecting): the read-back names exactly
    the stored rows, so a retry sends 40-59 and nothing else."""
    stored = [r for r in range(100) if not 40 <= r < 60]
    broker = _Broker({0: _log([RowTag(Q, 2, 0, r) for r in stored])}, step=7)
    assert _found(broker, batch=2, task=0) == {0: stored}


def test_a_straggler_of_an_earlier_batch_amid_this_batch_does_not_end_the_scan() -> None:
    previous = [RowTag(Q, 1, 0, r) for r in range(OLDER_MARGIN * 4)]
    straggler = [RowTag(Q, 1, 3, 7)]  # a failed attempt of batch 1 that landed late
    mine = [RowTag(Q, 2, 0, r) for r in range(20)]
    broker = _Broker({0: _log(previous + mine[:10] + straggler + mine[10:])})
    assert _found(broker, batch=2, task=0) == {0: list(range(20))}
    # the margin is bounded: two windows (256 + 512 messages), not all of batch 1's 1 024
    assert broker.reads == 2, broker.reads


def test_a_later_batch_of_the_same_identity_is_an_error_not_a_skip() -> None:
    """A query id reused with a new checkpoint writes batch 0 where batch 7 of the old run
    is stored: the read-back refuses, naming what to do."""
    broker = _Broker({0: _log([RowTag(Q, 7, 0, r) for r in range(5)]), 1: []})
    with pytest.raises(SinkIdentityError, match=r"micro-batch 7 .* micro-batch 0 is being written"):
        _found(broker, batch=0, task=0)
    # other queries' later batches are strangers
    other = query_tag("another query")
    broker = _Broker({0: _log([RowTag(other, 7, 0, r) for r in range(5)])})
    assert _found(broker, batch=0, task=0) == {0: []}


def test_other_writers_are_skipped_up_to_the_scan_limit() -> None:
    mine = [RowTag(Q, 0, 0, r) for r in range(10)]
    others: list[RowTag | None] = [None] * 700 + [RowTag("other", 0, 0, r) for r in range(300)]
    broker = _Broker({0: _log(mine + others)})
    assert _found(broker, batch=0, task=0) == {0: list(range(10))}
    assert _found(broker, batch=0, task=0, scan_limit=1000) == {0: []}
    assert _found(broker, batch=0, task=0, scan_limit=1001) == {0: list(range(10))}


def test_stored_rows_is_a_bitmap_of_the_rows_added() -> None:
    rows = StoredRows()
    for row in (0, 7, 8, 1000, 7, -1):
        rows.add(row)
    assert rows.rows() == [0, 7, 8, 1000]
    assert (len(rows), 7 in rows, 9 in rows, 10**9 in rows, -1 in rows) == (
        4,
        True,
        False,
        False,
        False,
    )


def test_an_empty_partition_reads_nothing() -> None:
    broker = _Broker({0: [], 1: []})
    assert _found(broker, batch=0, task=0) == {0: [], 1: []}
    assert broker.reads == 0


@settings(max_examples=80, deadline=None)
@given(
    writes=st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.booleans()), max_size=400),
    step=st.integers(1, 500),
    base=st.integers(0, 3),
)
def test_any_interleaving_with_gaps_gives_each_task_exactly_its_stored_rows(
    writes: list[tuple[int, bool, bool]], step: int, base: int
) -> None:
    """Three tasks of batch 1 (and strangers) write one partition in any interleaving after
    batch 0, and any of their rows may be lost on the way (a cut); each task's answer is
    exactly the rows of its that were stored, whatever the read size."""
    tags: list[RowTag | None] = [RowTag(Q, 0, t, 0) for t in range(3) for _ in range(base)]
    rows = [0, 0, 0]
    expected: list[list[int]] = [[], [], []]
    for task, stranger, lost in writes:
        if stranger:
            tags.append(None)
            continue
        if not lost:
            tags.append(RowTag(Q, 1, task, rows[task]))
            expected[task].append(rows[task])
        rows[task] += 1 + task  # rows routed elsewhere leave gaps too
    broker = _Broker({0: _log(tags)}, step=step)
    for task in range(3):
        assert _found(broker, batch=1, task=task) == {0: expected[task]}


def test_a_partition_that_stops_delivering_is_a_timeout() -> None:
    class _Stalled(_Broker):
        async def consumer(
            self,
            client: Any,
            stream: str,
            partition: int,
            offset: int,
            *,
            wanted: int | None = None,
        ) -> _Consumer:
            return _Consumer([], 0, 1)

    broker = _Stalled({0: _log([RowTag(Q, 0, 0, 0)])})
    with pytest.raises(streamwire.TimeoutError, match="reading back partition 0"):
        _found(broker, batch=0, task=0)
