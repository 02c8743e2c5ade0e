"""``fenced_bounds`` (``streamwire.Settling``) on the harness's Liftbridge server: what a
connection handed the NATS server and then closed, while the server was paused (SIGSTOP),
lands in the partitions before the fence's marker, so bounds taken behind the fence count
every message of it. That is what a Spark sink task's retry needs before it reads back
which of its rows its failed attempt stored (docs/spark.md, condition 5): a plain
``settled_bounds`` right after the server resumes can answer before the server has taken
its backlog from NATS. Pauses the harness's server: ``one_core``."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire._api import TAIL_COMMIT_HEADER
from streamwire.liftbridge.protocol.messages import encode_publish, partition_subject
from tests.faults.processes import HarnessProcess
from tests.integration.liftbridge.conftest import unique

pytestmark = [pytest.mark.one_core, pytest.mark.timeout(180)]

#: Messages sent on a closed connection while the server is paused, over two partitions:
#: enough that the server takes a while to append them once it resumes.
COUNT = 20_000
PARTITIONS = 2


async def _sent_then_closed(nats_url: str, messages: list[tuple[str, bytes]]) -> None:
    """``messages`` (subject, payload) published on a NATS connection of their own, which
    closes once the NATS server answered a PING sent after them: the server has routed
    every one (it reads a connection's bytes in order). A raw connection, since nats-py's
    ``flush`` writes its PING ahead of what is still in its buffer."""
    host_port = urlsplit(nats_url).netloc
    host, port = host_port.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        assert (await reader.readline()).startswith(b"INFO ")
        writer.write(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        for subject, payload in messages:
            writer.write(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        writer.write(b"PING\r\n")
        await writer.drain()
        while (line := await asyncio.wait_for(reader.readline(), 30)) != b"PONG\r\n":
            assert line, "the NATS server closed the connection"
            assert not line.startswith(b"-ERR"), line
    finally:
        writer.close()
        await writer.wait_closed()


async def _read(
    client: lb.Client, stream: str, partition: int, end: int
) -> list[streamwire.Message]:
    got: list[streamwire.Message] = []
    async with client.consumer(stream, offset="first", partition=partition) as consumer:
        while len(got) < end:
            batch = await consumer.next_batch(max_messages=1000, timeout=10)
            assert batch, f"partition {partition}: {len(got)} of {end} messages read"
            got += batch
    return got[:end]


async def test_what_a_closed_connection_left_in_nats_lands_before_the_fence(url: str) -> None:
    stream = unique("fence")
    nats_url = parse_qs(urlsplit(url).query)["nats"][0]
    server = HarnessProcess("liftbridge")
    async with await lb.connect(url, timeout=10) as client:
        await client.create_stream(stream, subject=stream, partitions=PARTITIONS)
        try:
            await client.offset_bounds(stream)  # every partition has its leader
            sent = [
                (partition_subject(stream, i % PARTITIONS), encode_publish(str(i).encode()))
                for i in range(COUNT)
            ]
            await server.pause()
            try:
                await _sent_then_closed(nats_url, sent)
            finally:
                await server.resume()
            bounds = await client.fenced_bounds(stream, timeout=60)

            assert sorted(bounds) == list(range(PARTITIONS))
            for partition, found in bounds.items():
                values = [str(i).encode() for i in range(partition, COUNT, PARTITIONS)]
                assert found == streamwire.OffsetBounds(0, len(values) + 1), (partition, found)
                log = await _read(client, stream, partition, found.next)
                assert [m.value for m in log[:-1]] == values  # every one, once, in order
                marker = log[-1]
                assert marker.value == b""
                assert list(marker.headers) == [TAIL_COMMIT_HEADER]
        finally:
            await asyncio.wait_for(client.delete_stream(stream), 30)
