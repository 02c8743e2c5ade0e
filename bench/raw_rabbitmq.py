"""The raw-socket ceiling for RabbitMQ Streams: what a client that does no per-message work
can reach on this machine and broker.

Publishing sends Publish frames encoded *before* the clock starts and only counts the ids in
PublishConfirm frames, with at most ``window`` messages unconfirmed, as real clients hold
theirs (streamwire's ``max_in_flight``; until 2026-11-26 a frame was written whenever fewer
than ``window`` were unconfirmed, so up to ``window + batch - 1`` were). Consuming grants
one credit per chunk and counts records from chunk headers, without touching the entries
(one receive buffer, reused; the bytes of the entries are skipped where they lie).
The handshake reuses streamwire's sans-IO machine; nothing else of streamwire runs. Spark's
floor pickles this module by value (``bench/spark_floor.py``), so it keeps no
``struct.Struct`` objects (they do not pickle): formats are named where they are used.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

from streamwire.codec.amqp import encode_data_body
from streamwire.rabbitmq.protocol.consuming import Credit, SubscribeRequest
from streamwire.rabbitmq.protocol.frames import encode_frame
from streamwire.rabbitmq.protocol.machine import ConnectionSettings, StreamsConnection
from streamwire.rabbitmq.protocol.publishing import DeclarePublisherRequest, encode_publish

PUBLISH_CONFIRM, DELIVER = 0x0003, 0x0008


async def _open(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    machine = StreamsConnection(ConnectionSettings())
    loop = asyncio.get_running_loop()
    machine.start(loop.time())
    while not machine.is_open:
        writer.write(machine.data_to_send())
        await writer.drain()
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("closed during handshake")
        machine.receive_data(data, loop.time())
    writer.write(machine.data_to_send())
    return reader, writer


async def _frames(reader: asyncio.StreamReader, buf: bytearray) -> list[tuple[int, int, bytes]]:
    """At least one complete frame as (key, version, body after key and version)."""
    out: list[tuple[int, int, bytes]] = []
    while not out:
        data = await reader.read(1 << 20)
        if not data:
            raise ConnectionError("closed")
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            size, key, version = struct.unpack_from(">IHH", buf, pos)
            if len(buf) - pos < 4 + size:
                break
            out.append((key, version, bytes(buf[pos + 8 : pos + 4 + size])))
            pos += 4 + size
        del buf[:pos]
    return out


async def publish(
    host: str,
    port: int,
    stream: str,
    count: int,
    size: int,
    *,
    batch: int = 500,
    window: int = 10_000,
) -> float:
    """Messages per second, all confirmed."""
    reader, writer = await _open(host, port)
    writer.write(encode_frame(DeclarePublisherRequest(100, 0, "", stream)))
    await writer.drain()
    buf = bytearray()
    await _frames(reader, buf)  # the declare answer
    body = encode_data_body(b"x" * size)
    frames = [
        encode_publish(0, [(i, body) for i in range(start, min(start + batch, count))])
        for start in range(0, count, batch)
    ]
    sizes = [struct.unpack_from(">Bi", frame, 8)[1] for frame in frames]
    started = time.perf_counter()
    sent = confirmed = written = 0
    while confirmed < count:
        # a frame goes out only if it keeps at most ``window`` messages unconfirmed (a
        # window that holds no whole frame sends one frame at a time)
        while written < len(frames) and (
            sent - confirmed + sizes[written] <= window or sent == confirmed
        ):
            writer.write(frames[written])
            sent += sizes[written]
            written += 1
        await writer.drain()
        for key, _, body_ in await _frames(reader, buf):
            if key == PUBLISH_CONFIRM:
                confirmed += struct.unpack_from(">Bi", body_, 0)[1]
    elapsed = time.perf_counter() - started
    writer.close()
    return count / elapsed


async def consume(host: str, port: int, stream: str, count: int, *, credit: int = 16) -> float:
    """Records per second from the first offset, counted from chunk headers (in a thread:
    :func:`_consume_counting`)."""
    seen, seconds = await asyncio.to_thread(_consume_counting, host, port, stream, count, credit)
    return seen / seconds


def _consume_counting(
    host: str, port: int, stream: str, count: int, credit: int
) -> tuple[int, float]:
    """:func:`consume` on a blocking socket (:func:`receive_counting`): ``(records counted,
    seconds)``."""
    counts = receive_counting(host, port, stream, count, credit=credit)
    next(counts)  # 0, once the connection is open: the clock starts here
    started = time.perf_counter()
    seen = max(counts, default=0)  # the counts only grow: the last
    return seen, time.perf_counter() - started


def receive_counting(
    host: str, port: int, stream: str, count: int, *, credit: int = 16
) -> Iterator[int]:
    """``stream`` received from its first offset on a blocking socket until ``count`` records
    came: 0 once the connection is open, then after each receive the records counted so far.
    The kernel copies each byte once, into one reused buffer, and only the frames' headers
    and each chunk's record count are read; the entries are skipped where they lie."""
    sock = socket.create_connection((host, port), timeout=60.0)
    try:
        machine = StreamsConnection(ConnectionSettings())
        machine.start(time.monotonic())
        while not machine.is_open:
            sock.sendall(machine.data_to_send())
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed during handshake")
            machine.receive_data(data, time.monotonic())
        sock.sendall(machine.data_to_send())
        yield 0
        sock.sendall(encode_frame(SubscribeRequest(200, 0, stream, 1, None, credit, {})))
        one_credit = encode_frame(Credit(0, 1))
        buf = bytearray(4 << 20)
        view = memoryview(buf)
        have = skip = seen = 0  # bytes at the buffer's start; of a frame still to skip
        while seen < count:
            got = sock.recv_into(view[have:])
            if not got:
                raise ConnectionError("closed")
            have += got
            pos = min(skip, have)
            skip -= pos
            while not skip and have - pos >= 8:
                size, key, version = struct.unpack_from(">IHH", buf, pos)
                if key == DELIVER:
                    # subscription id, then (v2) the committed chunk id, then the chunk
                    # header, whose record count follows magic, type and entry count
                    at = pos + 8 + 1 + (8 if version == 2 else 0) + 4
                    if have < at + 4:
                        break  # the rest of the header comes with the next receive
                    seen += struct.unpack_from(">I", buf, at)[0]
                    sock.sendall(one_credit)
                end = pos + 4 + size
                if end > have:
                    skip, pos = end - have, have
                else:
                    pos = end
            rest = have - pos  # a frame's first bytes, cut by the receive: moved up
            buf[:rest] = bytes(view[pos:have])
            have = rest
            yield seen
    finally:
        sock.close()
