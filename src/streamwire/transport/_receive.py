"""Receiving without asyncio's fresh ``bytes`` per receive, and large frames in one piece.

:class:`ReceiveInto` has the transport receive into one reused buffer (``open_tcp(...,
receive_into=True)``). :class:`ReceiveFrames` adds what a wire of large, length-announcing
frames wants (``open_tcp(..., frames=spec)``): it follows the frame boundaries in what it
receives, and a frame of at least ``gather_above`` bytes that does not fit in the current
receive is received **straight into a buffer of the frame's size**, then handed to the reader
whole, as one ``bytes`` (:class:`FrameReader`): the bytes of such a frame are copied once in
user space (none with the native core) instead of three times (into the stream reader's
buffer, out of it, joined into a frame), and the reading task wakes once per frame instead of
once per receive. Everything smaller, and everything from a frame whose announced size is
invalid onwards (the decoder raises on it), goes through the stream reader unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from typing import Any, Final, SupportsIndex, cast

from streamwire import _native
from streamwire.codec.framing import GATHER_ABOVE, FrameSpec
from streamwire.transport._internals import StandInLoop, check_attr, check_call

__all__ = (
    "FRAMES",
    "FrameReader",
    "ReceiveFrames",
    "ReceiveInto",
    "frame_buffer",
    "stream_reader_internals",
)

_core = _native.core


#: The ``asyncio.StreamReader`` state :class:`FrameReader` reads and writes: name and type
#: (``None``: any), and the methods it calls with their parameters.
_STATE: tuple[tuple[str, type | None], ...] = (
    ("_buffer", bytearray),
    ("_eof", bool),
    ("_exception", type(None)),
    ("_paused", bool),
    ("_transport", type(None)),
    ("_limit", int),
)
_METHODS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("_wait_for_data", ("func_name",), True),
    ("_wakeup_waiter", (), False),
)


def stream_reader_internals(factory: Any = asyncio.StreamReader) -> tuple[str, ...]:
    """What :class:`FrameReader` needs of a new ``factory(limit=..., loop=...)`` reader
    and does not find (empty: it can be used), each named with its expected shape."""
    try:
        reader = factory(limit=1 << 16, loop=StandInLoop())
    except Exception as exc:  # another constructor
        return (f"StreamReader(limit, loop) ({exc!r})",)
    missing: list[str] = []
    for name, kind in _STATE:
        check_attr(missing, reader, name, f"StreamReader.{name}", kind)
    for name, params, coroutine in _METHODS:
        check_call(missing, reader, name, f"StreamReader.{name}", list(params), coroutine)
    return tuple(missing)


_MISSING = stream_reader_internals()
FRAMES: Final = not _MISSING
"""Whether ``open_tcp(frames=...)`` gathers large frames (:class:`ReceiveFrames`): asyncio's
stream reader has the state :class:`FrameReader` works with, checked once at import. If
not (another Python), such a stream reads through :class:`ReceiveInto` and a plain stream
reader, and the decoder puts frames together as it does for small ones; logged at INFO."""
if _MISSING:
    logging.getLogger(__name__).info(
        "asyncio's StreamReader lacks %s: large frames are read the plain way",
        ", ".join(_MISSING),
    )


def frame_buffer(size: int) -> tuple[bytes | bytearray, memoryview]:
    """A buffer to receive one frame of ``size`` bytes into, and a writable view of it.

    Native core: a new ``bytes`` written through the view until it is handed out (nobody
    else sees it before: the caller keeps both and drops the view first). Pure Python: a
    ``bytearray``, copied into ``bytes`` once full."""
    if _core is not None:
        return _core.frame_buffer(size)
    buf = bytearray(size)
    return buf, memoryview(buf)


class ReceiveInto(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """A stream reader's protocol that has the transport receive into one buffer of its
    own, reused for every receive, instead of a fresh ``bytes`` per receive (asyncio's
    default: a new 256 KiB object each time the socket is readable, which for large
    replies is fresh memory, page faults included, on every read). What arrives is handed
    to the :class:`asyncio.StreamReader` as a view, so everything else (its bounded
    buffer and flow control, end of stream, errors, the writer's drain) is asyncio's own.
    """

    def __init__(self, reader: asyncio.StreamReader, size: int) -> None:
        super().__init__(reader)
        self._receive = memoryview(bytearray(size))
        #: The first bytes the peer sent (up to 16): who answered, when a handshake fails.
        self.first = b""

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receive

    def buffer_updated(self, nbytes: int) -> None:
        if not self.first:
            self.first = bytes(self._receive[: min(nbytes, 16)])
        # StreamReader.feed_data copies the view into its buffer at once (bytearray.extend)
        self.data_received(cast(bytes, self._receive[:nbytes]))


class FrameReader(asyncio.StreamReader):
    """A stream reader that also takes whole frames (:meth:`feed_frame`): :meth:`read`
    returns a queued frame as it is, whatever its size, after the bytes that came before
    it. Frames count towards the flow-control limit as the buffer does.

    It works with :class:`asyncio.StreamReader`'s own state (``_buffer``, ``_eof``,
    ``_exception``, ``_limit``, ``_paused``, ``_transport``, ``_wait_for_data``,
    ``_wakeup_waiter``: the same from Python 3.11 to 3.13, checked at import, see
    :data:`FRAMES`), reached through ``_base`` (untyped in typeshed)."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self._chunks: deque[bytes] = deque()  # frames, and anything fed after the first
        self._queued = 0
        self._base: Any = self

    def feed_frame(self, frame: bytes) -> None:
        self._queue(frame)

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if self._chunks:  # keep the order: behind the frames still queued
            chunk = bytes(data)
            if chunk:
                self._queue(chunk)
            return
        super().feed_data(data)

    def _queue(self, chunk: bytes) -> None:
        base = self._base
        self._chunks.append(chunk)
        self._queued += len(chunk)
        base._wakeup_waiter()
        transport = base._transport
        if transport is not None and not base._paused and self._queued > 2 * base._limit:
            transport.pause_reading()
            base._paused = True

    async def read(self, n: int = -1) -> bytes:
        """The buffered bytes (at most ``n``), else the next queued frame or bytes.

        Cancellation: nothing is consumed."""
        base = self._base
        if base._exception is not None or not n:
            return await super().read(n)  # raises it (as StreamReader does), or b""
        if not base._buffer and not self._chunks and not base._eof:
            await base._wait_for_data("read")
        if base._buffer or not self._chunks or base._exception is not None:
            return await super().read(n)
        chunk = self._chunks.popleft()
        self._queued -= len(chunk)
        if base._paused and self._queued + len(base._buffer) <= base._limit:
            base._paused = False
            base._transport.resume_reading()
        return chunk


class ReceiveFrames(ReceiveInto):
    """:class:`ReceiveInto` that receives each large frame into a buffer of its own size
    (see the module notes). ``spec`` tells where a frame's length is; a frame announcing
    more than ``max_frame_size`` (or less than its header) stops the tracking for good and
    is left to the decoder, which refuses it."""

    def __init__(
        self,
        reader: FrameReader,
        size: int,
        spec: FrameSpec,
        *,
        max_frame_size: int,
        gather_above: int = GATHER_ABOVE,
    ) -> None:
        super().__init__(reader, size)
        self._frames = reader
        self._spec = spec
        self._max = max_frame_size
        self._gather = max(gather_above, spec.header_size)
        self._rest = 0  # bytes of the current frame still to come (its header was seen)
        self._head = bytearray()  # the start of a header cut by the end of a receive
        self._off = False  # out of step: everything goes to the stream reader
        self._frame: bytes | bytearray | None = None  # the large frame being received
        self._view: memoryview | None = None  # writable, over _frame
        self._filled = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._view
        if view is not None:  # the rest of the frame, never past its end
            return view[self._filled :]
        return self._receive

    def buffer_updated(self, nbytes: int) -> None:
        if self._view is not None:
            self._filled += nbytes
            if self._filled == len(self._view):
                self._frame_done()
            return
        data = self._receive[:nbytes]
        if not self.first:
            self.first = bytes(data[:16])
        start = -1 if self._off else self._scan(data)
        if start < 0:
            self.data_received(cast(bytes, data))
            return
        if start:
            self.data_received(cast(bytes, data[:start]))
        total = self._rest
        self._rest = 0
        self._frame, view = frame_buffer(total)
        have = nbytes - start
        view[:have] = data[start:]
        self._view = view
        self._filled = have

    def _frame_done(self) -> None:
        frame, view = self._frame, self._view
        self._frame = self._view = None
        assert frame is not None
        assert view is not None
        view.release()
        self._frames.feed_frame(frame if type(frame) is bytes else bytes(frame))

    def eof_received(self) -> bool:
        self._cut_short()
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self._cut_short()
        super().connection_lost(exc)

    def _cut_short(self) -> None:
        """The stream ends inside a large frame: hand out what arrived of it, copied (the
        frame buffer itself never leaves)."""
        view = self._view
        if view is not None:
            part = bytes(view[: self._filled])
            view.release()
            self._frame = self._view = None
            self._frames.feed_frame(part)

    def _total(self, header: memoryview | bytearray, at: int) -> int:
        """The frame's total size from its header at ``header[at:]``; -1 if invalid."""
        spec = self._spec
        (length,) = spec.length.unpack_from(header, at + spec.length_offset)
        total = int(length) if spec.includes_header else int(length) + spec.header_size
        if total > self._max or total < max(spec.min_frame_size, spec.header_size):
            return -1
        return total

    def _scan(self, data: memoryview) -> int:
        """Follow the frames through ``data``: where a large frame starts that this receive
        does not complete (its size left in ``_rest``), or -1."""
        size = self._spec.header_size
        n = len(data)
        pos = 0
        while True:
            if self._rest:
                take = min(self._rest, n - pos)
                self._rest -= take
                pos += take
            if pos >= n:
                return -1
            head = self._head
            if head:  # a header begun in the receive before: that frame is not gathered
                need = size - len(head)
                head += data[pos : pos + need]
                if len(head) < size:
                    return -1
                total = self._total(head, 0)
                head.clear()
                pos += need
                if total < 0:
                    self._off = True
                    return -1
                self._rest = total - size
                continue
            if n - pos < size:
                head += data[pos:]
                return -1
            total = self._total(data, pos)
            if total < 0:
                self._off = True
                return -1
            self._rest = total
            if total >= self._gather and n - pos < total:
                return pos
