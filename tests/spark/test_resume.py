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
    _FIRST_WINDOW,
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
    """What ``_resume`` asks of :class:`Broker`: a consumer of one partition. A log is in
    the order its records were written; a read from an offset starts where :meth:`position`
    says (the server's index) and goes on record by record. ``checks``: what
    ``Broker.log_may_outrun_index`` says."""

    def __init__(
        self, logs: dict[int, list[streamwire.Message]], step: int = 333, *, checks: bool = False
    ) -> None:
        self.logs, self.step, self.reads = logs, step, 0
        self.log_may_outrun_index = checks

    def position(self, partition: int, offset: int) -> int:
        return offset

    async def consumer(
        self, client: Any, stream: str, partition: int, offset: int, *, wanted: int | None = None
    ) -> _Consumer:
        self.reads += 1
        return _Consumer(self.logs[partition], self.position(partition, offset), self.step)


class _PastTheIndex(_Broker):
    """Partition 0 as a Liftbridge server leaves it when killed between writing a batch to
    its log and to its index: ``indexed`` records at offsets 0.., then ``lost`` records at
    the offsets after them that the index never got, then ``after`` records, written after
    the restart, which the server gave those same offsets again. A read from an offset the
    index has starts at its record; one from an earlier offset reads the lost records too."""

    def __init__(
        self,
        indexed: Sequence[RowTag | None],
        lost: Sequence[RowTag | None],
        after: Sequence[RowTag | None],
        **kwargs: Any,
    ) -> None:
        n = len(indexed)
        log = _log(indexed) + [_message(n + i, t) for i, t in enumerate(lost)]
        log += [_message(n + i, t) for i, t in enumerate(after)]
        super().__init__({0: log}, **kwargs)
        self.indexed, self.lost = n, len(lost)
        self.bounds = {0: (0, n + len(after))}

    def position(self, partition: int, offset: int) -> int:
        return offset if offset < self.indexed else offset + self.lost


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
    broker: _Broker,
    batch: int,
    task: int,
    *,
    scan_limit: int = 100_000,
    bounds: dict[int, tuple[int, int]] | None = None,
) -> dict[int, list[int]]:
    """The rows of (batch, task) the read-back finds in each partition, ascending."""
    if bounds is None:
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
    checks=st.booleans(),
)
def test_any_interleaving_with_gaps_gives_each_task_exactly_its_stored_rows(
    writes: list[tuple[int, bool, bool]], step: int, base: int, checks: bool
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
    broker = _Broker({0: _log(tags)}, step=step, checks=checks)
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


def test_records_past_the_index_at_the_tail_fail_the_read_back_loudly() -> None:
    """Rows 10-14 of the task reached the log but not the index (a kill), and after the
    restart the tail's commit marker took offset 10. A scan from 0 reads row 10's record at
    offset 10, which no reader from offset 10 sees: without the check that row would count
    as stored and never be sent again."""
    mine = [RowTag(Q, 1, 0, r) for r in range(15)]
    broker = _PastTheIndex(mine[:10], mine[10:], [None], checks=False)
    assert _found(broker, batch=1, task=0, bounds=broker.bounds) == {0: list(range(11))}

    broker = _PastTheIndex(mine[:10], mine[10:], [None], checks=True)
    with pytest.raises(streamwire.UnindexedRecordsError) as raised:
        _found(broker, batch=1, task=0, bounds=broker.bounds)
    assert (raised.value.stream, raised.value.partition, raised.value.first) == ("s", 0, 10)
    assert "another record at offset 10" in str(raised.value)
    assert "a new stream" in str(raised.value)


def test_records_past_the_index_under_a_window_boundary_fail_the_read_back_loudly() -> None:
    """The same, with enough written after the restart that the read-back's first window
    starts at offset 12, amid the lost records: the window below it, read from offset 0,
    ends on lost records (rows 10 and 11 would count as stored)."""
    mine = [RowTag(Q, 1, 0, r) for r in range(15)]
    others = [RowTag(Q, 1, 1, r) for r in range(2 + _FIRST_WINDOW)]
    broker = _PastTheIndex(mine[:10], mine[10:], others, checks=False)
    assert _found(broker, batch=1, task=0, bounds=broker.bounds) == {0: list(range(12))}

    broker = _PastTheIndex(mine[:10], mine[10:], others, checks=True)
    with pytest.raises(streamwire.UnindexedRecordsError) as raised:
        _found(broker, batch=1, task=0, bounds=broker.bounds)
    assert raised.value.first == 12


def test_a_log_with_no_records_past_its_index_passes_the_check() -> None:
    previous = [RowTag(Q, 4, t, r) for r in range(50) for t in (0, 1)]
    mine = [RowTag(Q, 5, 1, r) for r in range(0, 900, 3)]
    siblings = [RowTag(Q, 5, 0, r) for r in range(1000)]
    logs = {0: _log(previous + mine + siblings), 1: _log(previous)}
    reads = []
    for checks in (False, True):
        broker = _Broker(logs, step=97, checks=checks)
        assert _found(broker, batch=5, task=1) == {0: list(range(0, 900, 3)), 1: []}
        reads.append(broker.reads)
    assert reads == [3 + 1, 3 + 1 + 2]  # windows of 256, 512, 1024 and 256; a last record each


# --- a retry reads back behind a fence ---------------------------------------------------


class _InFlight(_Broker):
    """One partition whose log holds ``stored`` and, on the way to it, ``pending``: what a
    failed attempt's closed connection left in the NATS server for a paused leader. They
    land (before the marker) only when the stream is fenced, as NATS hands the leader its
    messages in order; a plain settled read-back does not wait for them."""

    def __init__(self, stored: Sequence[RowTag | None], pending: Sequence[RowTag]) -> None:
        super().__init__({0: _log(stored)})
        self.pending = list(pending)
        self.calls: list[str] = []

    async def all_bounds(
        self,
        client: Any,
        stream: str,
        *,
        timeout: float,
        settled: bool = False,
        fenced: bool = False,
    ) -> dict[int, tuple[int, int]]:
        assert settled
        self.calls.append("fenced" if fenced else "settled")
        log = self.logs[0]
        if fenced:
            log += [_message(len(log) + i, tag) for i, tag in enumerate(self.pending)]
            log.append(_message(len(log), None))  # the marker
            self.pending = []
        return {0: (0, len(log))}


class _Settling:
    """A client :class:`streamwire.Settling` says it is (its methods are the broker's)."""

    async def settled_bounds(self, stream: str, *, timeout: float) -> Any:
        raise NotImplementedError

    async def fenced_bounds(self, stream: str, *, timeout: float) -> Any:
        raise NotImplementedError

    async def appended_bounds(self, stream: str) -> Any:
        raise NotImplementedError

    async def commit_tail(self, stream: str, partition: int, *, timeout: float) -> Any:
        raise NotImplementedError


class _OnePartition:
    """A :class:`streamwire.KeyRouted` producer of a one-partition stream."""

    partition_count = 1

    def partition_for_key(self, key: bytes) -> int:
        return 0


class _Router:
    """The task's unpinned producer."""

    producer = _OnePartition()

    async def close(self) -> None:
        return None


def _opened(broker: _InFlight, attempt: int) -> list[int]:
    """The rows of task 0 of batch 1 that ``_Resuming.open`` takes for stored."""
    from streamwire.spark._publish import PublishSpec, _Resuming
    from streamwire.spark._schema import SinkLayout

    client = _Settling()
    assert isinstance(client, streamwire.Settling)
    assert isinstance(_Router.producer, streamwire.KeyRouted)
    spec = PublishSpec("liftbridge://x", "s", "n", 5.0, cast(SinkLayout, None))
    resuming = asyncio.run(
        _Resuming.open(
            cast(Broker, broker),
            cast(streamwire.Client, client),
            cast(Any, _Router()),
            spec,
            {},
            RowTag(Q, 1, 0, -1),
            attempt,
        )
    )
    return resuming.stored[0].rows()


def _rows(rows: range) -> list[RowTag]:
    return [RowTag(Q, 1, 0, r) for r in rows]


def test_a_retry_reads_back_behind_a_fence_what_its_failed_attempt_left_on_the_way() -> None:
    broker = _InFlight(_rows(range(3)), _rows(range(3, 7)))
    assert _opened(broker, attempt=1) == list(range(7))
    assert broker.calls == ["fenced"]  # never a read-back before the fence


def test_a_first_attempt_that_finds_rows_of_its_own_fences_and_reads_back_again() -> None:
    """A replay of the batch (after the query restarted): its earlier run's last rows may
    still be on their way too."""
    broker = _InFlight([RowTag(Q, 0, 0, 0), *_rows(range(2))], _rows(range(2, 5)))
    assert _opened(broker, attempt=0) == list(range(5))
    assert broker.calls == ["settled", "fenced"]


def test_a_first_attempt_that_finds_nothing_of_its_own_writes_no_marker() -> None:
    broker = _InFlight([RowTag(Q, 0, 0, 0), RowTag(Q, 1, 1, 0)], [])
    assert _opened(broker, attempt=0) == []
    assert broker.calls == ["settled"]
    assert len(broker.logs[0]) == 2
