"""The byte-stream interface that protocol drivers are written against.

:class:`~streamwire.transport.tcp.TcpStream` implements it over a socket and
:class:`~streamwire.transport.scripted.ScriptedStream` over a queue a test feeds, so drivers
are tested without a network.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeAlias, runtime_checkable

__all__ = ("ByteStream", "BytesLike")

#: What can be written: anything ``asyncio.StreamWriter.write`` accepts.
BytesLike: TypeAlias = bytes | bytearray | memoryview


@runtime_checkable
class ByteStream(Protocol):
    """A connected, ordered, reliable byte stream.

    Errors are streamwire errors only: :class:`~streamwire.errors.ConnectionClosed` when
    the peer vanished, :class:`~streamwire.errors.ReadError` /
    :class:`~streamwire.errors.WriteError` for other I/O failures,
    :class:`~streamwire.errors.ClosedError` after :meth:`aclose` or :meth:`abort`, and a
    :class:`streamwire.errors.TimeoutError` when a ``timeout`` expires.
    """

    @property
    def is_closing(self) -> bool:
        """True once closed locally or broken underneath."""
        ...

    @property
    def backlogged(self) -> bool:
        """True while the send buffer is above its high-water mark: :meth:`drain` would
        wait. A writer that does not await :meth:`drain` (one writing from a callback)
        writes only while this is False."""
        ...

    async def read(self, timeout: float | None = None) -> bytes:
        """Up to one read-size of bytes; ``b""`` on a clean end of stream.

        A read pending while the stream is closed locally also returns ``b""``.

        Cancellation: nothing is consumed; the next read returns the data.
        """
        ...

    async def read_exactly(self, n: int, timeout: float | None = None) -> bytes:
        """Exactly ``n`` bytes; ``ConnectionClosed`` if the stream ends first.

        Cancellation: nothing is consumed.
        """
        ...

    def write(self, data: BytesLike) -> None:
        """Append ``data`` to the send buffer, whole. Follow with :meth:`drain`."""
        ...

    def writelines(self, parts: Iterable[BytesLike]) -> None:
        """Append several buffers, in order, as one write."""
        ...

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until the send buffer is below its high-water mark.

        Cancellation: the buffered bytes stay buffered and still go out.
        """
        ...

    async def send(
        self, data: BytesLike | Iterable[BytesLike], timeout: float | None = None
    ) -> None:
        """Write one frame (or several, kept together) and drain, under the write lock.

        Cancellation: before the lock is acquired nothing was written; afterwards the whole
        frame is in the buffer and goes out. Frames are never interleaved.
        """
        ...

    async def aclose(self, timeout: float = 1.0) -> None:
        """Flush and close; abort if that takes longer than ``timeout``. Idempotent.

        Cancellation: the stream is aborted, then ``CancelledError`` propagates.
        """
        ...

    def abort(self) -> None:
        """Close at once, dropping buffered data. Idempotent."""
        ...
