"""ScriptedStream: the in-memory peer that driver tests use."""

from __future__ import annotations

import asyncio
import errno

import pytest

from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    DecodeError,
    ReadError,
    TimeoutError,
    WriteError,
)
from streamwire.transport import ByteStream, ScriptedStream


async def test_implements_byte_stream() -> None:
    stream: ByteStream = ScriptedStream()
    assert isinstance(stream, ByteStream)
    assert not stream.is_closing


async def test_reads_keep_fed_chunk_boundaries_and_read_size() -> None:
    stream = ScriptedStream(read_size=4)
    stream.feed(b"abcdefghij")
    stream.feed(bytearray(b"xy"))
    stream.feed(b"")  # ignored
    assert await stream.read() == b"abcd"
    assert await stream.read() == b"efgh"
    assert await stream.read() == b"ij"
    assert await stream.read() == b"xy"


async def test_read_waits_for_data_and_eof_is_sticky() -> None:
    stream = ScriptedStream()
    task = asyncio.create_task(stream.read(timeout=5.0))
    await asyncio.sleep(0)
    assert not task.done()
    stream.feed(b"late")
    assert await task == b"late"
    stream.feed_eof()
    assert await stream.read() == b""
    assert await stream.read() == b""
    with pytest.raises(ClosedError):
        stream.feed(b"after eof")


async def test_read_exactly_spans_chunks() -> None:
    stream = ScriptedStream()
    for byte in b"0123456789":
        stream.feed(bytes([byte]))
    assert await stream.read_exactly(0) == b""
    with pytest.raises(ValueError, match="-1"):
        await stream.read_exactly(-1)
    assert await stream.read_exactly(3) == b"012"
    assert await stream.read_exactly(5) == b"34567"
    assert await stream.read() == b"8"


async def test_read_exactly_waits_then_fails_on_early_eof() -> None:
    stream = ScriptedStream()
    task = asyncio.create_task(stream.read_exactly(4, timeout=5.0))
    stream.feed(b"ab")
    await asyncio.sleep(0)
    assert not task.done()
    stream.feed_eof()
    with pytest.raises(ConnectionClosed) as info:
        await task
    assert isinstance(info.value.__cause__, asyncio.IncompleteReadError)
    assert info.value.__cause__.partial == b"ab"


async def test_errors_are_translated_like_a_socket_and_sticky() -> None:
    stream = ScriptedStream(name="broker")
    stream.feed(b"ok")
    stream.feed_error(ConnectionResetError(errno.ECONNRESET, "reset"))
    assert await stream.read() == b"ok"
    for _ in range(2):
        with pytest.raises(ConnectionClosed, match="broker") as info:
            await stream.read()
        assert isinstance(info.value.__cause__, ConnectionResetError)
    with pytest.raises(ConnectionClosed):
        await stream.read_exactly(1)

    other = ScriptedStream()
    other.feed_error(OSError(errno.EIO, "io"))
    with pytest.raises(ReadError):
        await other.read()
    ours = ScriptedStream()
    ours.feed(b"x")
    ours.feed_error(DecodeError("frame", 1))
    with pytest.raises(DecodeError):
        await ours.read_exactly(2)


async def test_timeouts_and_cancellation_consume_nothing() -> None:
    stream = ScriptedStream()
    with pytest.raises(TimeoutError):
        await stream.read(timeout=0.02)
    stream.feed(b"abc")
    with pytest.raises(TimeoutError):
        await stream.read_exactly(4, timeout=0.02)
    task = asyncio.create_task(stream.read_exactly(5))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stream.feed(b"de")
    assert await stream.read_exactly(5) == b"abcde"


async def test_read_delay() -> None:
    stream = ScriptedStream(read_delay=0.05)
    stream.feed(b"slow")
    with pytest.raises(TimeoutError):
        await stream.read(timeout=0.01)
    assert await stream.read(timeout=5.0) == b"slow"


async def test_records_writes_as_frames() -> None:
    stream = ScriptedStream()
    stream.write(b"one")
    stream.writelines([b"tw", memoryview(b"o")])
    await stream.drain()
    await stream.send(b"three")
    await stream.send([b"fo", b"ur"])
    assert stream.frames == [b"one", b"two", b"three", b"four"]
    assert bytes(stream.written) == b"onetwothreefour"
    assert await stream.wait_frames(4) == stream.frames
    assert await stream.wait_written(3) == b"onetwothreefour"
    assert stream.take_written() == b"onetwothreefour"
    assert stream.frames == []
    assert stream.written == bytearray()


async def test_wait_helpers_wait_and_time_out() -> None:
    stream = ScriptedStream()
    waiter = asyncio.create_task(stream.wait_frames(2, timeout=5.0))
    stream.write(b"a")
    await asyncio.sleep(0)
    assert not waiter.done()
    stream.write(b"b")
    assert await waiter == [b"a", b"b"]
    with pytest.raises(TimeoutError):
        await stream.wait_written(100, timeout=0.02)
    with pytest.raises(TimeoutError):
        await stream.wait_closed(timeout=0.02)


async def test_bounded_write_buffer_blocks_drain_until_consumed() -> None:
    stream = ScriptedStream(write_buffer_size=4)
    await stream.send(b"1234")  # at the bound: fine
    task = asyncio.create_task(stream.send(b"5"))
    await asyncio.sleep(0)
    assert not task.done()
    assert stream.frames == [b"1234", b"5"]  # written whole, then waiting in drain
    stream.consume(1)
    await asyncio.wait_for(task, 1.0)
    stream.write(b"67890")
    seen = [stream.backlogged]
    with pytest.raises(TimeoutError):
        await stream.drain(timeout=0.02)
    stream.consume()
    seen.append(stream.backlogged)
    assert seen == [True, False]
    await stream.drain(timeout=1.0)
    assert stream.unconsumed == 0
    assert not ScriptedStream().backlogged  # unbounded: the peer reads instantly


async def test_sends_are_serialised_by_the_write_lock() -> None:
    stream = ScriptedStream(write_buffer_size=0)
    tasks = [asyncio.create_task(stream.send(bytes([i]) * 3)) for i in range(3)]
    await asyncio.sleep(0)
    assert stream.frames == [b"\x00" * 3]  # the others wait for the lock
    for expected in (2, 3):
        stream.consume()
        await stream.wait_frames(expected)
    stream.consume()
    await asyncio.gather(*tasks)
    assert stream.frames == [bytes([i]) * 3 for i in range(3)]


async def test_cancelled_send_waiting_for_the_lock_writes_nothing() -> None:
    stream = ScriptedStream(write_buffer_size=0)
    first = asyncio.create_task(stream.send(b"first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(stream.send(b"second"))
    await asyncio.sleep(0)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    stream.consume()
    await first
    assert stream.frames == [b"first"]


async def test_write_delay() -> None:
    stream = ScriptedStream(write_delay=0.05)
    with pytest.raises(TimeoutError):
        await stream.send(b"x", timeout=0.01)
    assert stream.frames == [b"x"]  # the frame went out whole; only the drain was cut


async def test_fail_writes() -> None:
    stream = ScriptedStream()
    stream.fail_writes(BrokenPipeError(errno.EPIPE, "broken pipe"))
    with pytest.raises(ConnectionClosed):
        stream.write(b"x")
    with pytest.raises(ConnectionClosed):
        await stream.send(b"x")
    other = ScriptedStream(write_buffer_size=0)
    other.write(b"pending")
    task = asyncio.create_task(other.drain())
    await asyncio.sleep(0)
    other.fail_writes(OSError(errno.EIO, "io"))
    with pytest.raises(WriteError):
        await task


async def test_close_and_abort() -> None:
    stream = ScriptedStream()
    pending = asyncio.create_task(stream.read())
    await asyncio.sleep(0)
    async with stream:
        pass
    assert await pending == b""  # a pending read sees EOF on local close
    await stream.aclose()
    assert stream.closed
    assert stream.is_closing
    assert stream.close_calls == 2
    assert not stream.aborted
    await stream.wait_closed()
    with pytest.raises(ClosedError):
        await stream.read()
    with pytest.raises(ClosedError):
        stream.write(b"x")
    with pytest.raises(ClosedError):
        await stream.send(b"x")

    aborted = ScriptedStream(write_buffer_size=0)
    aborted.write(b"stuck")
    drain = asyncio.create_task(aborted.drain())
    await asyncio.sleep(0)
    aborted.abort()
    await drain  # released: the bytes are simply dropped
    assert aborted.aborted
    assert "closed=True" in repr(aborted)


@pytest.mark.parametrize(
    "kwargs",
    [{"read_size": 0}, {"read_delay": -1.0}, {"write_delay": -1.0}, {"write_buffer_size": -1}],
)
def test_invalid_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        ScriptedStream(**kwargs)  # type: ignore[arg-type]
