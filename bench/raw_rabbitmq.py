"""The raw-socket ceiling for RabbitMQ Streams: what a client that does no per-message work
can reach on this machine and broker.

Publishing sends Publish frames encoded *before* the clock starts and only counts the ids in
PublishConfirm frames, with at most ``window`` messages unconfirmed, as real clients hold
theirs (streamwire's ``max_in_flight``; until 2026-11-26 a frame was written whenever fewer
than ``window`` were unconfirmed, so up to ``window + batch - 1`` were). Consuming grants
one credit per chunk and counts records from chunk headers, without touching the entries
(one receive buffer, reused; the bytes of the entries are skipped where they lie).
:func:`send_counting` and :func:`receive_counting` do the same on blocking sockets for Spark's
floor, a count at a time as Spark hands rows over or takes them.
The handshake reuses streamwire's sans-IO machine; nothing else of streamwire runs. Spark's
floor pickles this module by value (``bench/spark_floor.py``), so it keeps no
``struct.Struct`` objects (they do not pickle): formats are named where they are used.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator

from streamwire.codec.amqp import encode_data_body
from streamwire.rabbitmq.protocol.consuming import Credit, SubscribeRequest
from streamwire.rabbitmq.protocol.frames import encode_frame
from streamwire.rabbitmq.protocol.machine import ConnectionSettings, StreamsConnection
from streamwire.rabbitmq.protocol.publishing import DeclarePublisherRequest, encode_publish

DECLARE_PUBLISHER, PUBLISH_CONFIRM, PUBLISH_ERROR, DELIVER = 0x0001, 0x0003, 0x0004, 0x0008
#: Response codes are 1 for OK (the protocol's ``ResponseCode.OK``).
OK = 1


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


def _open_blocking(host: str, port: int) -> socket.socket:
    """A blocking socket with the connection open (the sans-IO machine's handshake)."""
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
    except BaseException:
        sock.close()
        raise
    return sock


def _read_frames(sock: socket.socket, buf: bytearray) -> list[tuple[int, bytes]]:
    """At least one complete frame from a blocking socket, as (key, body after key and
    version); ``buf`` keeps a frame's first bytes for the next call."""
    out: list[tuple[int, bytes]] = []
    while not out:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            size = struct.unpack_from(">I", buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            key = struct.unpack_from(">H", buf, pos + 4)[0]
            out.append((key, bytes(buf[pos + 8 : pos + 4 + size])))
            pos += 4 + size
        del buf[:pos]
    return out


def send_counting(
    host: str,
    port: int,
    stream: str,
    size: int,
    counts: Iterable[int],
    *,
    batch: int = 500,
    window: int = 10_000,
    name: str = "",
) -> int:
    """Publish into ``stream``, for each ``n`` of ``counts``, ``n`` more messages of ``size``
    bytes, on a blocking socket; the number confirmed, once every one is.

    A frame of ``batch`` messages is encoded once and written again and again, at most
    ``window`` messages unconfirmed; a thread of its own reads the confirms, so ``counts``
    (a Spark task's batches, say) is taken while earlier frames are stored. The messages
    do not depend on what ``counts`` came from: what a sink pays for the wire alone.

    With a ``name`` the publisher is named and the broker deduplicates, as for an
    exactly-once sink: the *k*-th frame's ids are ``k * 2**16 + i``, strictly increasing,
    written into the encoded frame's id fields in place (their six high bytes are the
    frame's, the two low ones the message's, so six strided copies a frame). Without one
    the ids repeat from frame to frame, and the broker stores every message."""
    if batch >= 1 << 16:
        raise ValueError("a frame holds fewer than 65,536 messages")
    sock = _open_blocking(host, port)
    try:
        sock.sendall(encode_frame(DeclarePublisherRequest(100, 0, name, stream)))
        buf = bytearray()
        declared = False
        while not declared:  # the answer (a heartbeat may come first)
            for key, body in _read_frames(sock, buf):
                if key == DECLARE_PUBLISHER | 0x8000:
                    declared = True
                    code = struct.unpack_from(">H", body, 4)[0]
                    if code != OK:
                        raise ConnectionError(
                            f"declaring a publisher on {stream!r}: response code {code}"
                        )
        message = encode_data_body(b"x" * size)
        frames: dict[int, bytearray] = {}
        stride = 12 + len(message)  # an entry: its id, its length, the message
        ids = {"frame": 1}

        def frame(n: int) -> bytearray:
            if n not in frames:
                frames[n] = bytearray(encode_publish(0, [(i, message) for i in range(n)]))
            out = frames[n]
            if name:  # the frame's ids: the high six bytes of each (the low two are i)
                high = (ids["frame"] << 16).to_bytes(8, "big")
                ids["frame"] += 1
                for j in range(6):  # a frame's header: 4 + 2 + 2 + publisher id + count
                    out[13 + j : 13 + j + stride * n : stride] = high[j : j + 1] * n
            return out

        state = {"confirmed": 0}
        failure: list[BaseException] = []
        changed = threading.Condition()

        def confirms() -> None:
            try:
                while True:
                    for key, body in _read_frames(sock, buf):
                        if key == PUBLISH_CONFIRM:
                            with changed:
                                state["confirmed"] += struct.unpack_from(">Bi", body, 0)[1]
                                changed.notify()
                        elif key == PUBLISH_ERROR:
                            raise ConnectionError(f"the broker refused messages on {stream!r}")
            except BaseException as exc:  # handed to the sending side
                with changed:
                    failure.append(exc)
                    changed.notify()

        def send(n: int, sent: int) -> int:
            with changed:  # room for the frame, or nothing unconfirmed
                if not changed.wait_for(
                    lambda: (
                        failure
                        or sent - state["confirmed"] + n <= window
                        or sent == state["confirmed"]
                    ),
                    timeout=120.0,
                ):
                    raise TimeoutError(f"no confirm from {stream!r} for 120 s")
                if failure:
                    raise failure[0]
            sock.sendall(frame(n))
            return sent + n

        sock.settimeout(None)
        threading.Thread(target=confirms, name="floor-confirms", daemon=True).start()
        sent = pending = 0
        for n in counts:
            pending += n
            while pending >= batch:
                sent = send(batch, sent)
                pending -= batch
        if pending:
            sent = send(pending, sent)
        with changed:
            if not changed.wait_for(lambda: failure or state["confirmed"] >= sent, timeout=120.0):
                raise TimeoutError(f"no confirm from {stream!r} for 120 s")
            if failure:
                raise failure[0]
            return state["confirmed"]
    finally:
        sock.close()


def receive_counting(
    host: str, port: int, stream: str, count: int, *, credit: int = 16
) -> Iterator[int]:
    """``stream`` received from its first offset on a blocking socket until ``count`` records
    came: 0 once the connection is open, then after each receive the records counted so far.
    The kernel copies each byte once, into one reused buffer, and only the frames' headers
    and each chunk's record count are read; the entries are skipped where they lie."""
    sock = _open_blocking(host, port)
    try:
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
