"""A Liftbridge server killed (SIGKILL) right after acknowledging messages, and started again
on its data: v1.9.0 forgets its high watermark and commits what it holds only at the next
write (docs/liftbridge.md, "After a crash"). ``settled_bounds`` says so with a typed error
naming the tail, instead of answering with the committed part (a read-back would then miss
what a writer stored, and send it again); ``commit_tail`` commits it, after which every
acknowledged message is readable once. Restarts the harness's server: ``one_core``."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire._api import TAIL_COMMIT_HEADER
from tests import brokers
from tests.faults.processes import HarnessProcess
from tests.integration.liftbridge.conftest import leader_metadata, unique

pytestmark = [pytest.mark.one_core, pytest.mark.timeout(300)]

#: Messages sent before the kill; the kill comes while they are being acknowledged, so some
#: were committed after the server's last watermark checkpoint (every 5 s).
COUNT = 3000
KILL_AFTER = 500


async def _written_then_killed(url: str, stream: str) -> list[bytes]:
    """What a producer got acknowledged of ``COUNT`` messages, the server killed (SIGKILL)
    once ``KILL_AFTER`` were, then started again on its data."""
    server = HarnessProcess("liftbridge")
    acked: list[bytes] = []
    async with await lb.connect(url, timeout=10) as client:
        producer = client.producer(stream)
        await producer.__aenter__()
        try:
            futures = [await producer.send(str(i).encode()) for i in range(COUNT)]
            for i, future in enumerate(futures):
                try:
                    await future
                except streamwire.StreamwireError:
                    break
                acked.append(str(i).encode())
                if len(acked) == KILL_AFTER:
                    await server.kill()
        finally:
            with contextlib.suppress(streamwire.StreamwireError):
                await producer.close()
    await server.revive()
    return acked


async def _rest_after_unindexed(
    client: lb.Client, error: streamwire.UnindexedRecordsError
) -> list[bytes]:
    """The kill came between the server's write of a batch to its log and to its index
    (docs/liftbridge.md, "Records past the index"; seen once in a rehearsal): a reader from
    the start failed at the offsets given twice. What a reader from ``error.first`` on
    reads (what the server reports from there)."""
    assert error.partition == 0
    assert error.count, error
    values: list[bytes] = []
    async with client.consumer(error.stream, offset=error.first) as consumer:
        while batch := await consumer.next_batch(max_messages=1000, timeout=2):
            values += (m.value for m in batch)
    return values


def _is_marker(message: streamwire.Message) -> bool:
    """The empty message ``commit_tail`` writes."""
    return not message.value and TAIL_COMMIT_HEADER in message.headers


async def test_a_tail_left_by_a_crash_is_an_uncommitted_tail_error_until_committed(
    url: str,
) -> None:
    stream = unique("crash-tail")
    async with await lb.connect(url, timeout=10) as client:
        await client.create_stream(stream)
    try:
        for _ in range(3):  # a watermark checkpoint right before the kill leaves no tail
            acked = await _written_then_killed(url, stream)
            assert len(acked) >= KILL_AFTER
            async with await lb.connect(url, timeout=30) as client:
                meta = await leader_metadata(client, stream)
            if meta.high_watermark < meta.newest_offset:
                break
        else:
            pytest.fail(f"three crashes left no uncommitted tail ({meta})")
        async with await lb.connect(url, timeout=30) as client:
            newest = meta.newest_offset
            assert newest + 1 >= len(acked), meta  # what was acknowledged is in the log
            with pytest.raises(streamwire.UncommittedTailError) as raised:
                await client.settled_bounds(stream, timeout=20)
            first = meta.high_watermark + 1
            assert raised.value.tails == {0: (first, newest)}
            assert f"partition 0: offsets {first}..{newest}" in str(raised.value)
            assert await client.appended_bounds(stream) == {
                0: streamwire.OffsetBounds(0, newest + 1)
            }
            assert await client.offset_bounds(stream) == {0: streamwire.OffsetBounds(0, first)}

            bounds = await client.commit_tail(stream, 0, timeout=20)
            assert bounds == streamwire.OffsetBounds(0, newest + 2)
            assert await client.settled_bounds(stream, timeout=20) == {0: bounds}
            assert await client.commit_tail(stream, 0, timeout=20) == bounds  # nothing to do

            got: list[streamwire.Message] = []
            unindexed: streamwire.UnindexedRecordsError | None = None
            deadline = asyncio.get_running_loop().time() + 120
            async with client.consumer(stream, offset="first") as consumer:
                try:
                    # to the commit's marker, not to ``newest + 2`` messages: a kill between
                    # the server's write of a batch to its log and to its index leaves
                    # records past ``newest`` (a rehearsal's log held offsets to 2121 past a
                    # newest of 2047), and only a reader that goes on meets the offsets
                    # given twice
                    while not got or not _is_marker(got[-1]):
                        assert asyncio.get_running_loop().time() < deadline, (
                            f"no tail commit marker in {len(got)} messages (newest {newest})"
                        )
                        got += await consumer.next_batch(max_messages=1000, timeout=10)
                except streamwire.UnindexedRecordsError as exc:
                    unindexed = exc
            values = [m.value for m in got]
            if unindexed is not None:  # the loud outcome of a kill between the two writes
                values += await _rest_after_unindexed(client, unindexed)
            else:
                marker = got[-1]
                assert (marker.value, marker.offset) == (b"", newest + 1)
                assert TAIL_COMMIT_HEADER in marker.headers
            for value in acked:  # every acknowledged message, once (earlier rounds too)
                assert values.count(value) >= 1, value
    finally:
        await brokers.ensure_up("liftbridge")
        async with await lb.connect(url, timeout=30) as client:
            await asyncio.wait_for(client.delete_stream(stream), 30)
