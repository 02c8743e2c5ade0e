"""An in-memory :class:`~streamwire.transport.base.ByteStream` for driver tests.

The test plays the peer: it feeds bytes, end of stream or errors, and inspects what the
driver wrote. Delays and a bounded write buffer make slow peers easy to script::

    stream = ScriptedStream()
    stream.feed(b"\\x00\\x00\\x00\\x04ping")
    driver = Driver(stream)
    frame = await stream.wait_frames(1)

Foreign exceptions given to :meth:`~ScriptedStream.feed_error` or
:meth:`~ScriptedStream.fail_writes` go through the same translation as a real socket's, so
``feed_error(ConnectionResetError())`` makes ``read()`` raise ``ConnectionClosed``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from types import TracebackType
from typing import NoReturn

from streamwire.errors import ClosedError, ConfigurationError, TimeoutError
from streamwire.transport._errors import map_errors
from streamwire.transport._signal import Signal
from streamwire.transport.base import BytesLike
from streamwire.transport.deadline import Deadline, DeadlineScope

__all__ = ("ScriptedStream",)

#: Inbound queue items: a chunk, an error to raise, or ``None`` for the end of stream.
_Item = bytes | BaseException | None


async def _sleep(delay: float) -> None:
    if delay:  # no extra yield point without a delay, like a socket with data ready
        await asyncio.sleep(delay)


class ScriptedStream:
    """A scripted peer implementing :class:`~streamwire.transport.base.ByteStream`.

    * ``read_size``: the most bytes one :meth:`read` returns (chunk boundaries of
      :meth:`feed` are kept: a read never spans two fed chunks).
    * ``read_delay`` / ``write_delay``: seconds to sleep in each read / drain.
    * ``write_buffer_size``: if set, :meth:`drain` waits while more than this many written
      bytes are unconsumed (see :meth:`consume`); ``None`` means the peer reads instantly.

    Everything written is recorded in :attr:`written` (all bytes) and :attr:`frames` (one
    entry per ``write``/``writelines`` call; a ``send`` is one call).
    """

    def __init__(
        self,
        *,
        read_size: int = 65536,
        read_delay: float = 0.0,
        write_delay: float = 0.0,
        write_buffer_size: int | None = None,
        name: str = "scripted",
    ) -> None:
        if read_size <= 0 or min(read_delay, write_delay, write_buffer_size or 0) < 0:
            raise ConfigurationError("read_size must be > 0; delays and buffer sizes >= 0")
        self.read_size = read_size
        self.read_delay = read_delay
        self.write_delay = write_delay
        self.write_buffer_size = write_buffer_size
        self.name = name
        self.peer: tuple[str, int] = (name, 0)
        self.local: tuple[str, int] = ("local", 0)
        self.written = bytearray()
        self.frames: list[bytes] = []
        self.unconsumed = 0
        self.closed = False
        self.aborted = False
        self.close_calls = 0
        self._inbound: deque[_Item] = deque()
        self._write_error: BaseException | None = None
        self._inbound_changed = Signal()
        self._outbound_changed = Signal()
        self._send_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<ScriptedStream {self.name} written={len(self.written)} closed={self.closed}>"

    async def __aenter__(self) -> ScriptedStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- the test's side ---------------------------------------------------------------

    def feed(self, data: BytesLike) -> None:
        """Queue inbound bytes (one chunk; an empty chunk is ignored)."""
        if self._inbound and not isinstance(self._inbound[-1], bytes):
            raise ClosedError("cannot feed after feed_eof() or feed_error()")
        if data:
            self._inbound.append(bytes(data))
            self._inbound_changed.pulse()

    def feed_eof(self) -> None:
        """Queue a clean end of stream: reads return ``b""`` from then on."""
        self._inbound.append(None)
        self._inbound_changed.pulse()

    def feed_error(self, exc: BaseException) -> None:
        """Queue an error: reads reaching it raise it (translated, like a socket's). Sticky."""
        self._inbound.append(exc)
        self._inbound_changed.pulse()

    def fail_writes(self, exc: BaseException) -> None:
        """Make every later ``write``/``drain``/``send`` raise ``exc`` (translated)."""
        self._write_error = exc
        self._outbound_changed.pulse()

    def consume(self, n: int | None = None) -> None:
        """Let the simulated peer read ``n`` (default: all) unconsumed written bytes."""
        self.unconsumed = 0 if n is None else max(0, self.unconsumed - n)
        self._outbound_changed.pulse()

    def take_written(self) -> bytes:
        """Return everything written so far and forget it (``written`` and ``frames``)."""
        data = bytes(self.written)
        self.written.clear()
        self.frames.clear()
        return data

    async def wait_written(self, size: int, timeout: float | None = 1.0) -> bytes:
        """Wait until at least ``size`` bytes were written; return all of :attr:`written`."""
        async with self._limit(timeout, f"waiting for {size} written bytes"):
            await self._outbound_changed.wait_until(lambda: len(self.written) >= size)
        return bytes(self.written)

    async def wait_frames(self, count: int, timeout: float | None = 1.0) -> list[bytes]:
        """Wait until at least ``count`` frames were written; return :attr:`frames`."""
        async with self._limit(timeout, f"waiting for {count} written frames"):
            await self._outbound_changed.wait_until(lambda: len(self.frames) >= count)
        return list(self.frames)

    async def wait_closed(self, timeout: float | None = 1.0) -> None:
        """Wait until the code under test closed or aborted the stream."""
        async with self._limit(timeout, "waiting for the stream to close"):
            await self._outbound_changed.wait_until(lambda: self.closed)

    # --- the ByteStream side -----------------------------------------------------------

    @property
    def is_closing(self) -> bool:
        """True once closed locally."""
        return self.closed

    @property
    def backlogged(self) -> bool:
        """True while more than ``write_buffer_size`` written bytes are unconsumed."""
        limit = self.write_buffer_size
        return limit is not None and self.unconsumed > limit

    def _limit(self, timeout: float | None, what: str) -> DeadlineScope:
        return Deadline(timeout, exc_type=TimeoutError, what=f"{what} ({self.name})").scope()

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"the stream {self.name} is closed")

    def _raise_mapped(self, exc: BaseException, operation: str) -> NoReturn:
        with map_errors("read" if operation == "read" else "write", target=self.name):
            raise exc

    async def read(self, timeout: float | None = None) -> bytes:
        """Up to ``read_size`` bytes of the next fed chunk; ``b""`` after ``feed_eof()``.

        A read pending when the stream is closed locally returns ``b""``, as a socket's does.

        Cancellation: nothing is consumed.
        """
        self._check_open()
        async with self._limit(timeout, "read"):
            await _sleep(self.read_delay)
            await self._inbound_changed.wait_until(lambda: bool(self._inbound) or self.closed)
        if self.closed:
            return b""
        data = self._take(self.read_size, across_chunks=False)
        if not data and self._inbound and isinstance(self._inbound[0], BaseException):
            self._raise_mapped(self._inbound[0], "read")
        return data

    def _take(self, n: int, *, across_chunks: bool) -> bytes:
        """Remove up to ``n`` bytes from the front of the queue, stopping at a marker."""
        parts: list[bytes] = []
        while n and self._inbound and isinstance(head := self._inbound[0], bytes):
            self._inbound.popleft()
            if len(head) > n:
                self._inbound.appendleft(head[n:])
                head = head[:n]
            parts.append(head)
            n -= len(head)
            if not across_chunks:
                break
        return b"".join(parts)

    async def read_exactly(self, n: int, timeout: float | None = None) -> bytes:
        """Exactly ``n`` bytes, across fed chunks; ``ConnectionClosed`` on an early EOF.

        Cancellation: nothing is consumed.
        """
        self._check_open()
        if n < 0:
            raise ValueError(f"cannot read {n} bytes")

        def ready() -> bool:  # n bytes are queued, or an EOF/error marker follows fewer
            total = 0
            for item in self._inbound:
                if not isinstance(item, bytes) or (total := total + len(item)) >= n:
                    return True
            return n == 0 or self.closed

        async with self._limit(timeout, "read"):
            await _sleep(self.read_delay)
            await self._inbound_changed.wait_until(ready)
        data = self._take(n, across_chunks=True)
        if len(data) < n:
            marker = self._inbound[0] if self._inbound else None
            if isinstance(marker, BaseException):
                self._raise_mapped(marker, "read")
            self._raise_mapped(asyncio.IncompleteReadError(data, n), "read")
        return data

    def _check_writable(self) -> None:
        self._check_open()
        if self._write_error is not None:
            self._raise_mapped(self._write_error, "write")

    def write(self, data: BytesLike) -> None:
        """Record ``data`` as one frame. ``ClosedError`` after close."""
        self._check_writable()
        self._record(bytes(data))

    def writelines(self, parts: Iterable[BytesLike]) -> None:
        """Record ``parts``, joined, as one frame."""
        self._check_writable()
        self._record(b"".join(parts))

    def _record(self, frame: bytes) -> None:
        self.written += frame
        self.frames.append(frame)
        self.unconsumed += len(frame)
        self._outbound_changed.pulse()

    async def drain(self, timeout: float | None = None) -> None:
        """Sleep ``write_delay``, then wait while the bounded write buffer is over its size.

        Cancellation: the written bytes stay recorded; only the wait stops.
        """
        self._check_writable()
        async with self._limit(timeout, "drain"):
            await self._drain()

    async def _drain(self) -> None:
        await _sleep(self.write_delay)
        limit = self.write_buffer_size
        if limit is not None:
            await self._outbound_changed.wait_until(
                lambda: self.unconsumed <= limit or self.closed or self._write_error is not None
            )
        if self._write_error is not None and not self.closed:
            self._raise_mapped(self._write_error, "write")

    async def send(
        self, data: BytesLike | Iterable[BytesLike], timeout: float | None = None
    ) -> None:
        """Record ``data`` as one frame and drain, under the write lock.

        Cancellation: before the lock nothing is recorded; afterwards the frame is.
        """
        self._check_writable()
        async with self._limit(timeout, "send"), self._send_lock:
            if isinstance(data, bytes | bytearray | memoryview):
                self.write(data)
            else:
                self.writelines(data)
            await self._drain()

    async def aclose(self, timeout: float = 1.0) -> None:
        """Mark closed (idempotent), waking pending reads and drains; never waits."""
        self.close_calls += 1
        self._close()

    def abort(self) -> None:
        """Like :meth:`aclose`, and sets :attr:`aborted`."""
        self.aborted = True
        self._close()

    def _close(self) -> None:
        self.closed = True
        self._inbound_changed.pulse()
        self._outbound_changed.pulse()
