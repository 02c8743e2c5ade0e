"""The Spark sink's read-back (``streamwire.spark._resume.stored_rows``) against the real
Liftbridge server with records past its index: a server killed between writing a batch to
a partition's log and writing its index entries, started again on its data (docs/liftbridge.md,
"Records past the index").

The window is made as docs/liftbridge.md's reproduction makes it: 200 rows of one sink
task written and acknowledged, the server killed (SIGKILL), the last 30 entries of the
partition's index zeroed (what the index holds when the kill comes before they are
written), and the server started again. It then reports newest offset 169; one message of
another task, written next, takes offset 170, while a read from offset 0 still meets the
task's rows 170..199 under offsets 170.. first. A read-back that stopped at the tail
(offset 170) on the task's row 170 would count it as stored, though no reader from offset
170 sees it; the read-back fails with ``UnindexedRecordsError`` instead. No Spark session;
restarts the harness's server: ``one_core``."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire.spark._brokers import Broker
from streamwire.spark._resume import ROW_HEADER, RowTag, query_tag, stored_rows
from tests import brokers
from tests.brokers import require
from tests.faults.processes import HarnessProcess
from tests.integration.liftbridge.conftest import leader_metadata, unique

pytestmark = [pytest.mark.spark, pytest.mark.one_core, pytest.mark.timeout(300)]

#: Rows written, and how many of the last of them lose their index entries.
COUNT, LOST = 200, 30
#: Bytes per index entry (offset 4, timestamp 8, position 4, size 4), as the server writes it.
ENTRY = 20
Q = query_tag("read-back-past-the-index")


def _row(task: int, row: int) -> streamwire.Message:
    return streamwire.Message(
        b"row %d" % row, headers={ROW_HEADER: RowTag(Q, 1, task, row).encode()}
    )


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


async def test_the_read_back_fails_on_rows_past_the_index_instead_of_counting_them() -> None:
    info = require("liftbridge")
    url = f"{info.url}?nats={info.extra.get('NATS_URL', 'nats://127.0.0.1:4222')}"
    stream = unique("read-back-past-index")
    server = HarnessProcess("liftbridge")
    async with await lb.connect(url, timeout=10) as client:
        await client.create_stream(stream)
    try:
        async with (
            await lb.connect(url, timeout=10) as client,
            client.producer(stream) as producer,
        ):
            await asyncio.gather(*[await producer.send(_row(0, r)) for r in range(COUNT)])
        await server.kill()
        _forget_index_entries(stream)
        await server.revive()

        first = COUNT - LOST
        async with await lb.connect(url, timeout=30) as client:
            meta = await leader_metadata(client, stream)
            assert meta.newest_offset == first - 1, meta  # the index's last entry
            async with client.producer(stream) as producer:
                await (await producer.send(_row(1, 0)))  # another task's row: offset 170
            bounds = await Broker.of(url).all_bounds(client, stream, timeout=30, settled=True)
            assert bounds == {0: (0, first + 1)}
            with pytest.raises(streamwire.UnindexedRecordsError) as raised:
                await stored_rows(
                    Broker.of(url), client, stream, bounds, query=Q, batch=1, task=0, timeout=30
                )
            assert (raised.value.stream, raised.value.partition, raised.value.first) == (
                stream,
                0,
                first,
            )
            # below the lost rows the check passes and finds the indexed rows
            found = await stored_rows(
                Broker.of(url),
                client,
                stream,
                {0: (0, first)},
                query=Q,
                batch=1,
                task=0,
                timeout=30,
            )
            assert found[0].rows() == list(range(first))
    finally:
        await brokers.ensure_up("liftbridge")
        with contextlib.suppress(streamwire.StreamwireError):
            async with await lb.connect(url, timeout=30) as client:
                await asyncio.wait_for(client.delete_stream(stream), 30)
