"""The asyncio internals behind ``open_tcp(frames=...)`` (``FrameReader``), checked once at
import (``streamwire.transport._receive.FRAMES``): this Python's stream reader has them (else
this fails naming what moved), a reader without one is reported by name, and with the check
failed a frames stream reads the plain way, with the same bytes."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from streamwire.codec.framing import LENGTH_PREFIX_U32
from streamwire.transport import _receive, open_tcp
from streamwire.transport._receive import FrameReader, stream_reader_internals
from tests.unit.transport.helpers import ServerFactory
from tests.unit.transport.test_receive_frames import (
    MAX,
    random_frames,
    read_all,
    serve_chunks,
)


def test_this_pythons_stream_reader_has_what_frame_reader_uses() -> None:
    """Fails naming each attribute that moved, on a new Python: update the guard (and
    FrameReader) or read frames the plain way."""
    assert stream_reader_internals() == ()
    assert _receive.FRAMES


class NoPaused(asyncio.StreamReader):
    def __init__(self, limit: int, loop: Any) -> None:
        super().__init__(limit=limit, loop=loop)
        del self._paused  # type: ignore[attr-defined]


class OtherWait(asyncio.StreamReader):
    async def _wait_for_data(self, name: str, timeout: float = 0) -> None:
        return None


class TypedBuffer(asyncio.StreamReader):
    def __init__(self, limit: int, loop: Any) -> None:
        super().__init__(limit=limit, loop=loop)
        self._buffer = memoryview(b"")


def _refuses(limit: int, loop: Any) -> asyncio.StreamReader:
    raise TypeError("StreamReader() takes no loop")


@pytest.mark.parametrize(
    ("factory", "named"),
    [
        (NoPaused, "StreamReader._paused"),
        (OtherWait, "StreamReader._wait_for_data(func_name) as a coroutine"),
        (TypedBuffer, "StreamReader._buffer as bytearray"),
        (_refuses, "StreamReader(limit, loop) (TypeError('StreamReader() takes no loop'))"),
    ],
)
def test_each_internal_that_moved_is_named(factory: Any, named: str) -> None:
    assert named in stream_reader_internals(factory)


@pytest.mark.parametrize("seed", range(3))
async def test_without_the_internals_frames_read_the_plain_way(
    start_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(_receive, "FRAMES", False)
    rng = random.Random(seed)
    data = b"".join(random_frames(rng, 16))
    server = await serve_chunks(start_server, data, rng)
    stream = await open_tcp(
        server.host, server.port, timeout=5.0, frames=LENGTH_PREFIX_U32, max_frame_size=MAX
    )
    assert not isinstance(stream._reader, FrameReader)
    reads = await read_all(stream)
    await stream.aclose()
    assert b"".join(reads) == data
    assert all(len(chunk) <= stream.read_size for chunk in reads)  # nothing gathered
