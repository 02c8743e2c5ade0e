"""``streamwire.transport.h2call.GrpcCall`` (a bidirectional gRPC call) against the scripted
HTTP/2 server of test_h2grpc: requests as length-prefixed messages in DATA frames (many per
frame, frames no longer than the server allows), the server's connection and stream windows
(exhausted, resumed by WINDOW_UPDATE, moved by SETTINGS_INITIAL_WINDOW_SIZE, overflowed),
the bounded send buffer (a write waits for room; cancelled or timed out it queued nothing),
half-close, responses read as they come, and calls ended mid-stream by RST_STREAM, GOAWAY or
trailers with an error status."""

from __future__ import annotations

import asyncio
import struct

import pytest

from streamwire.transport import h2grpc
from streamwire.transport.h2call import GrpcCall
from streamwire.transport.h2grpc import (
    DATA,
    END_STREAM,
    GOAWAY,
    HEADERS,
    RST_STREAM,
    SETTINGS,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_FRAME_SIZE,
    WINDOW_UPDATE,
    CallEnded,
    Status,
)
from tests.unit.transport.test_h2grpc import (
    BUDGET,
    Peer,
    expect_goaway,
    expect_reset,
    grpc_message,
    plain_split,
    server,
)


async def open_bidi(
    port: int, *, max_buffer: int = 1 << 20, wait_settings: bool = True
) -> GrpcCall[bytes]:
    loop = asyncio.get_running_loop()
    return await h2grpc.open_call(
        lambda: GrpcCall(
            loop=loop,
            authority="localhost",
            path="/pkg.Svc/Bidi",
            split=plain_split,
            window=1 << 16,
            max_buffer=max_buffer,
        ),
        "127.0.0.1",
        port,
        ssl_context=None,
        server_hostname=None,
        timeout=BUDGET,
        wait_settings=wait_settings,
    )


def settings(**values: int) -> bytes:
    ids = {"window": SETTINGS_INITIAL_WINDOW_SIZE, "frame": SETTINGS_MAX_FRAME_SIZE}
    return b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items())


async def data_until(peer: Peer, total: int) -> list[tuple[int, bytes]]:
    """The client's DATA frames (flags, payload) until ``total`` payload bytes came."""
    frames: list[tuple[int, bytes]] = []
    got = 0
    while got < total:
        _, flags, stream, payload = await peer.expect(DATA)
        assert stream == 1
        frames.append((flags, payload))
        got += len(payload)
    assert got == total
    return frames


def window_update(peer: Peer, stream: int, increment: int) -> None:
    peer.send(WINDOW_UPDATE, 0, stream, struct.pack(">I", increment))


async def no_script(peer: Peer) -> None:
    """The test drives the server's side itself."""


async def opened(peer: Peer, **values: int) -> None:
    """The server's side of a call: its SETTINGS (``values``) and the response headers."""
    peer.send(SETTINGS, 0, 0, settings(**values))
    peer.response()


# --- writing ----------------------------------------------------------------------------------


async def test_many_messages_per_write_half_close_and_responses_as_they_come() -> None:
    async with server(lambda peer: opened(peer)) as (peers, port):
        call = await open_bidi(port)
        peer = peers[0]
        _, hflags, _, _ = await peer.expect(HEADERS)
        assert not hflags & END_STREAM  # the request side stays open
        await call.write([b"one", b"", b"three"])
        await call.write([b"four"])
        first, second = await data_until(peer, call.sent)
        # one DATA frame per write, carrying all of its messages
        assert first == (0, grpc_message(b"one") + grpc_message(b"") + grpc_message(b"three"))
        assert second == (0, grpc_message(b"four"))
        peer.send(DATA, 0, 1, grpc_message(b"r1") + grpc_message(b"r2"))
        async with asyncio.timeout(BUDGET):
            got = await call.read_many()
            while len(got) < 3:
                if len(got) == 2:
                    peer.send(DATA, 0, 1, grpc_message(b"r3"))
                got += await call.read_many()
        assert got == [b"r1", b"r2", b"r3"]
        call.done_writing()
        call.done_writing()  # idempotent
        _, flags, _, payload = await peer.expect(DATA)
        assert (flags, payload) == (END_STREAM, b"")
        with pytest.raises(RuntimeError, match="done_writing"):
            await call.write([b"late"])
        peer.trailers(0)
        async with asyncio.timeout(BUDGET):
            assert await call.read_many() == []
            assert (await call.ended).code == Status.OK


async def test_requests_written_before_the_servers_settings_use_the_default_window() -> None:
    async with server(no_script) as (peers, port):
        call = await open_bidi(port, wait_settings=False)
        await call.write([b"x" * 70_000])  # more than the default window, 65,535
        assert (call.sent, call.buffered) == (65_535, 70_005 - 65_535)
        frames = await data_until(peers[0], 65_535)
        assert max(len(p) for _, p in frames) == h2grpc.MIN_FRAME  # the default frame size
        peers[0].send(SETTINGS, 0, 0, settings(window=100_000))  # the stream: +34,465
        window_update(peers[0], 0, 10_000)  # the connection: 4,470 were missing
        await data_until(peers[0], 4_470)
        assert (call.sent, call.buffered) == (70_005, 0)
        call.cancel()


async def test_an_exhausted_stream_window_resumes_on_window_update() -> None:
    async with server(lambda peer: opened(peer, window=100)) as (peers, port):
        call = await open_bidi(port)
        peer = peers[0]
        await call.write([b"a" * 295])  # 300 bytes with its prefix
        assert (call.sent, call.buffered) == (100, 200)
        sent = b"".join(p for _, p in await data_until(peer, 100))
        window_update(peer, 1, 150)
        sent += b"".join(p for _, p in await data_until(peer, 150))
        assert call.buffered == 50
        call.done_writing()  # END_STREAM waits for the rest
        window_update(peer, 1, 1000)
        frames = await data_until(peer, 50)
        sent += b"".join(p for _, p in frames)
        assert sent == grpc_message(b"a" * 295)
        assert frames[-1][0] == END_STREAM  # on the frame that carries the rest


async def test_the_connection_window_limits_every_stream_window() -> None:
    async with server(lambda peer: opened(peer, window=1 << 20, frame=1 << 20)) as (peers, port):
        call = await open_bidi(port)
        peer = peers[0]
        await call.write([b"c" * 100_000])
        assert call.sent == 65_535  # the connection's window, not the stream's
        frames = await data_until(peer, 65_535)
        assert len(frames) == 1  # the server allows frames that large
        window_update(peer, 1, 50_000)  # the stream: no help
        window_update(peer, 0, 50_000)  # the connection
        await data_until(peer, 100_005 - 65_535)
        assert call.buffered == 0


async def test_a_smaller_initial_window_makes_the_stream_window_negative() -> None:
    async with server(lambda peer: opened(peer, window=100)) as (peers, port):
        call = await open_bidi(port)
        peer = peers[0]
        await call.write([b"n" * 195])
        await data_until(peer, 100)
        peer.send(SETTINGS, 0, 0, settings(window=50))  # the stream window: 50 - 100
        _, flags, _, _ = await peer.expect(SETTINGS)  # acknowledged: applied
        assert flags == h2grpc.ACK
        window_update(peer, 1, 60)  # -50 + 60: 10 more
        await data_until(peer, 10)
        assert (call.sent, call.buffered) == (110, 90)
        call.cancel()


async def test_a_full_send_buffer_makes_write_wait_and_a_cancelled_wait_queues_nothing() -> None:
    async with server(lambda peer: opened(peer, window=0)) as (peers, port):
        call = await open_bidi(port, max_buffer=1000)
        peer = peers[0]
        await call.write([b"f" * 995])  # fills the buffer: nothing may be sent yet
        assert (call.sent, call.buffered) == (0, 1000)
        with pytest.raises(TimeoutError):
            await call.write([b"timed out"], timeout=0.01)
        waiting = asyncio.ensure_future(call.write([b"cancelled"]))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert call.buffered == 1000  # neither queued anything
        later = asyncio.ensure_future(call.write([b"later"]))
        await asyncio.sleep(0)
        assert not later.done()
        window_update(peer, 1, 2000)
        async with asyncio.timeout(BUDGET):
            await later
        frames = await data_until(peer, 1000 + 10)
        assert b"".join(p for _, p in frames) == grpc_message(b"f" * 995) + grpc_message(b"later")


async def test_a_window_overflow_resets_the_stream_or_ends_the_connection() -> None:
    async with server(lambda peer: opened(peer)) as (peers, port):
        call = await open_bidi(port)
        window_update(peers[0], 1, 0x7FFFFFFF)
        async with asyncio.timeout(BUDGET):
            ended = await call.ended
        assert ended.code == Status.INTERNAL
        assert "overflowed the stream window" in ended.message
        await expect_reset(peers[0], h2grpc.ErrorCode.FLOW_CONTROL_ERROR)  # RFC 9113, 6.9.1
    async with server(lambda peer: opened(peer)) as (peers, port):
        call = await open_bidi(port)
        window_update(peers[0], 0, 0x7FFFFFFF)
        async with asyncio.timeout(BUDGET):
            ended = await call.ended
        assert "overflowed the connection window" in ended.message
        await expect_goaway(peers[0], h2grpc.ErrorCode.FLOW_CONTROL_ERROR)


# --- calls ended mid-stream -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "status"),
    [
        ((RST_STREAM, 0, 1, struct.pack(">I", h2grpc.ErrorCode.CANCEL)), Status.CANCELLED),
        ((RST_STREAM, 0, 1, struct.pack(">I", 2)), Status.INTERNAL),
        ((GOAWAY, 0, 0, struct.pack(">II", 0, 2) + b"bye"), Status.UNAVAILABLE),
    ],
)
async def test_reset_or_goaway_mid_stream_ends_reads_and_waiting_writes(
    frame: tuple[int, int, int, bytes], status: int
) -> None:
    async with server(lambda peer: opened(peer, window=10)) as (peers, port):
        call = await open_bidi(port, max_buffer=100)
        peer = peers[0]
        await call.write([b"w" * 200])  # blocked by the window, the buffer full
        peer.send(DATA, 0, 1, grpc_message(b"before"))
        async with asyncio.timeout(BUDGET):
            assert await call.read_many() == [b"before"]
        waiting = asyncio.ensure_future(call.write([b"more"]))
        reading = asyncio.ensure_future(call.read_many())
        peer.send(*frame)
        async with asyncio.timeout(BUDGET):
            for pending in (waiting, reading):
                with pytest.raises(CallEnded) as info:
                    await pending
                assert info.value.code == status
        with pytest.raises(CallEnded):  # and every later write
            await call.write([b"after"])


async def test_trailers_with_an_error_status_after_responses() -> None:
    async with server(lambda peer: opened(peer)) as (peers, port):
        call = await open_bidi(port)
        peer = peers[0]
        await call.write([b"req"])
        await data_until(peer, call.sent)
        peer.send(DATA, 0, 1, grpc_message(b"ok1") + grpc_message(b"ok2"))
        peer.trailers(9, "read%20only")
        async with asyncio.timeout(BUDGET):
            await call.ended
        assert await call.read_many() == [b"ok1", b"ok2"]  # what came first is read first
        for _ in range(2):  # a fresh exception each time
            with pytest.raises(CallEnded) as info:
                await call.read_many()
            assert (info.value.code, info.value.message) == (9, "read only")
        with pytest.raises(CallEnded):
            await call.write([b"after"])


async def test_cancel_mid_stream_resets_it_and_fails_a_waiting_write() -> None:
    async with server(lambda peer: opened(peer, window=0)) as (peers, port):
        call = await open_bidi(port, max_buffer=10)
        await call.write([b"0123456789"])
        waiting = asyncio.ensure_future(call.write([b"more"]))
        await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(CallEnded) as info:
            await waiting
        assert info.value.code == Status.CANCELLED
        _, _, stream, payload = await peers[0].expect(RST_STREAM)
        assert (stream, int.from_bytes(payload)) == (1, h2grpc.ErrorCode.CANCEL)
