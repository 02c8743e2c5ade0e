"""A Liftbridge server killed between writing a batch to a partition's log and writing its
index entries, then started again on its data: it takes its index's last entry for the
newest offset and gives the next offsets again, while the log file still holds the batch
(docs/liftbridge.md, "After a crash"). A kill -9 landed in that window once, in a rehearsal
of ``test_after_a_crash``: a reader from the start read offsets 1007..1241, then 1007 again.

Here the window is reproduced on the harness's real server: 200 messages written and
acknowledged, the server killed (SIGKILL), the last 30 entries of the partition's index
zeroed (what the index holds when the kill comes before they are written), and the server
started again. ``commit_tail`` then raises ``UnindexedRecordsError`` naming the 30 records,
a reader from the start (either subscribe transport) hands out all 200 messages, then
raises it too, and a reader from the first offset given again reads only what the server
reports. Restarts the harness's server: ``one_core``."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire._api import TAIL_COMMIT_HEADER
from tests import brokers
from tests.faults.processes import HarnessProcess
from tests.integration.liftbridge.conftest import unique

pytestmark = [pytest.mark.one_core, pytest.mark.timeout(300)]

#: Messages written, and how many of the last of them lose their index entries.
COUNT, LOST = 200, 30
#: Bytes per index entry (offset 4, timestamp 8, position 4, size 4), as the server writes it.
ENTRY = 20


def _forget_index_entries(stream: str) -> None:
    """Zero the last :data:`LOST` entries of partition 0's newest index file (the server is
    not running)."""
    directory = brokers.brokers_dir() / "liftbridge" / "data" / "streams" / stream / "0"
    index = sorted(directory.glob("*.index"))[-1]
    data = bytearray(index.read_bytes())
    entries = next(
        i for i in range(len(data) // ENTRY) if not any(data[i * ENTRY : (i + 1) * ENTRY])
    )
    assert entries == COUNT, f"{index}: {entries} entries, not one per message"
    data[(COUNT - LOST) * ENTRY : COUNT * ENTRY] = bytes(LOST * ENTRY)
    index.write_bytes(data)


async def _read_from_start(url: str, stream: str, transport: str) -> list[streamwire.Message]:
    """Read ``stream`` from its first offset until the consumer raises; what it handed out
    (the error checked)."""
    got: list[streamwire.Message] = []
    error: streamwire.UnindexedRecordsError | None = None
    async with (
        await lb.connect(url, timeout=30, subscribe_transport=transport) as client,
        client.consumer(stream, offset="first") as consumer,
    ):
        try:
            while len(got) <= COUNT:
                got += await consumer.next_batch(max_messages=1000, timeout=10)
        except streamwire.UnindexedRecordsError as exc:
            error = exc
    assert error is not None, f"{transport}: read {len(got)} messages and no error"
    first = COUNT - LOST
    assert (error.stream, error.partition, error.first, error.count) == (stream, 0, first, LOST)
    assert f"sent offset {first} after offset {COUNT - 1}" in str(error)
    return got


async def test_records_past_the_index_after_a_crash_are_an_unindexed_records_error(
    url: str,
) -> None:
    stream = unique("unindexed")
    server = HarnessProcess("liftbridge")
    async with await lb.connect(url, timeout=10) as client:
        await client.create_stream(stream)
    try:
        async with (
            await lb.connect(url, timeout=10) as client,
            client.producer(stream) as producer,
        ):
            futures = [await producer.send(str(i).encode()) for i in range(COUNT)]
            await asyncio.gather(*futures)
        await server.kill()
        _forget_index_entries(stream)
        await server.revive()

        first = COUNT - LOST
        async with await lb.connect(url, timeout=30) as client:
            meta = await client.partition_metadata(stream)
            assert meta.newest_offset == first - 1, meta  # the index's last entry
            with pytest.raises(streamwire.UnindexedRecordsError) as raised:
                await client.commit_tail(stream, 0, timeout=30)
            error = raised.value
            assert (error.stream, error.partition, error.first, error.count) == (
                stream,
                0,
                first,
                LOST,
            )
            assert f"holds {LOST} records past offset {first - 1}" in str(error)

            async with client.consumer(stream, offset=first) as consumer:
                marker = await consumer.next_batch(max_messages=1000, timeout=10)
                assert [(m.offset, m.value) for m in marker] == [(first, b"")]
                assert TAIL_COMMIT_HEADER in marker[0].headers
                assert await consumer.next_batch(max_messages=1000, timeout=1) == []

        for transport in ("http2", "grpcio"):
            got = await _read_from_start(url, stream, transport)
            assert [m.offset for m in got] == list(range(COUNT)), transport
            assert [m.value for m in got] == [str(i).encode() for i in range(COUNT)], transport
    finally:
        await brokers.ensure_up("liftbridge")
        with contextlib.suppress(streamwire.StreamwireError):
            async with await lb.connect(url, timeout=30) as client:
                await asyncio.wait_for(client.delete_stream(stream), 30)
