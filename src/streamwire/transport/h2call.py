"""A bidirectional gRPC call over streamwire's HTTP/2 client (``h2grpc``).

:class:`GrpcCall` is a :class:`~streamwire.transport.h2grpc.GrpcStreamProtocol` whose
request side stays open: the HEADERS go out with the preface, then every :meth:`GrpcCall.write`
appends length-prefixed gRPC messages to a send buffer, and as much of it as the server's
windows allow goes out at once, in DATA frames of at most its SETTINGS_MAX_FRAME_SIZE (one
frame carries as many messages, or parts of them, as fit: one socket write per ``write``,
however many messages it has). What the windows hold back goes out as WINDOW_UPDATEs
(connection and stream) or a larger SETTINGS_INITIAL_WINDOW_SIZE arrive. :meth:`done_writing`
half-closes: an empty DATA frame with END_STREAM once the buffer is sent.

The send buffer is bounded: ``write`` waits (``timeout``; cancellation-safe: a write that
did not return queued nothing) while it holds ``max_buffer`` bytes or more, and raises the
call's :class:`~streamwire.transport.h2grpc.CallEnded` once the call is over.

Responses are kept as they arrive (the call is its own sink) until :meth:`read_many` takes
them all; received bytes are credited back to the server while fewer than ``max_unread``
wait, so a caller that stops reading holds the server back by one window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final, TypeVar

from streamwire.transport.h2grpc import (
    DATA,
    DEFAULT_WINDOW,
    END_STREAM,
    MAX_FRAME,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_FRAME_SIZE,
    STREAM_ID,
    CallEnded,
    GrpcStreamProtocol,
    Status,
    encode_frame,
)

__all__ = ("GrpcCall",)

_T = TypeVar("_T")

_MAX_WINDOW: Final = 0x7FFFFFFF
_EMPTY_END: Final = encode_frame(DATA, END_STREAM, STREAM_ID)


def _data_header(length: int) -> bytes:
    return (length << 8 | DATA).to_bytes(4) + b"\x00" + STREAM_ID.to_bytes(4)


class GrpcCall(GrpcStreamProtocol[_T]):
    """One bidirectional gRPC call (stream 1) on its own connection; open it with
    :func:`~streamwire.transport.h2grpc.open_call`. Keyword arguments as
    :class:`GrpcStreamProtocol` (without ``request`` and ``sink``), plus ``max_buffer``
    (send buffer bytes above which ``write`` waits) and ``max_unread`` (responses kept
    unread above which the server is not credited)."""

    def __init__(
        self, *, max_buffer: int = 1 << 20, max_unread: int = 1 << 16, **kwargs: Any
    ) -> None:
        super().__init__(request=None, sink=self, **kwargs)
        self._max_buffer = max_buffer
        self._max_unread = max_unread
        self._out = bytearray()  # gRPC bytes not sent yet (the windows are spent)
        self._conn_window = DEFAULT_WINDOW  # what the server lets us send: connection
        self._stream_window = DEFAULT_WINDOW  # and stream (may go negative: RFC 9113 6.9.2)
        self._peer_initial = DEFAULT_WINDOW
        self._peer_max_frame = MAX_FRAME
        self._closing = False  # done_writing() was called
        self._half_closed = False  # END_STREAM sent
        self._room = asyncio.Event()  # set while the buffer has room, or the call is over
        self._room.set()
        self._unread: list[_T] = []
        self._arrived = asyncio.Event()  # responses wait, or the call is over
        self.sent = 0
        """gRPC bytes (prefixes included) handed to the socket."""

    # --- writing ----------------------------------------------------------------------

    async def write(self, messages: Sequence[bytes], timeout: float | None = None) -> None:
        """Queue ``messages`` (serialized) and send what the windows allow. Waits up to
        ``timeout`` seconds while the send buffer is full (``TimeoutError``). Raises the
        :class:`CallEnded` of a call that is over (the server's status, or CANCELLED), and
        ``RuntimeError`` after :meth:`done_writing`. Cancellation or a timeout: nothing of
        ``messages`` was queued."""
        if not self._room.is_set():
            async with asyncio.timeout(timeout):
                await self._room.wait()
        self.send(messages)

    def send(self, messages: Sequence[bytes]) -> None:
        """:meth:`write` without waiting for room (the caller bounds what it queues)."""
        if self.ended.done():
            raise _again(self.ended.result())
        if self._closing:
            raise RuntimeError("gRPC call: write after done_writing")
        out = self._out
        for message in messages:
            out += len(message).to_bytes(5)  # flag 0 (not compressed), then the length
            out += message
        self._flush()

    def done_writing(self) -> None:
        """Half-close: END_STREAM once what is queued is sent. Idempotent."""
        self._closing = True
        self._flush()

    @property
    def buffered(self) -> int:
        """gRPC bytes queued and not sent yet (held back by the server's windows)."""
        return len(self._out)

    def _flush(self) -> None:
        out = self._out
        transport = self._transport
        if transport is None or self.ended.done():
            return
        allowed = min(len(out), self._conn_window, self._stream_window)
        if allowed > 0:
            if allowed == len(out):
                chunk, self._out = out, bytearray()
                out = self._out
            else:
                chunk = out[:allowed]
                del out[:allowed]
            size = self._peer_max_frame
            if allowed <= size:
                data = _data_header(allowed) + chunk
            else:
                data = b"".join(
                    _data_header(len(part)) + part
                    for part in (chunk[i : i + size] for i in range(0, allowed, size))
                )
            self._conn_window -= allowed
            self._stream_window -= allowed
            self.sent += allowed
            transport.write(data)
        if self._closing and not out and not self._half_closed:
            self._half_closed = True
            transport.write(_EMPTY_END)
        if len(out) < self._max_buffer:
            self._room.set()
        else:
            self._room.clear()

    # --- the server's windows (hooks of GrpcStreamProtocol) ----------------------------

    def _window_update(self, stream: int, increment: int) -> None:
        if stream == 0:
            self._conn_window += increment
            if self._conn_window > _MAX_WINDOW:
                raise CallEnded(Status.INTERNAL, "the server overflowed the connection window")
        elif stream == STREAM_ID:
            self._stream_window += increment
            if self._stream_window > _MAX_WINDOW:
                raise CallEnded(Status.INTERNAL, "the server overflowed the stream window")
        if self._out:
            self._flush()

    def _peer_setting(self, ident: int, value: int) -> None:
        if ident == SETTINGS_INITIAL_WINDOW_SIZE:
            self._stream_window += value - self._peer_initial
            self._peer_initial = value
            if self._stream_window > _MAX_WINDOW:
                raise CallEnded(Status.INTERNAL, "the server overflowed the stream window")
            if self._out:
                self._flush()
        elif ident == SETTINGS_MAX_FRAME_SIZE:
            self._peer_max_frame = value

    def _end(self, ended: CallEnded) -> None:
        super()._end(ended)
        self._room.set()  # writers wake to the call's end
        self._arrived.set()

    # --- reading (the call is its own sink) --------------------------------------------

    def deliver(self, messages: list[_T], nbytes: int) -> None:
        self._unread += messages
        self._arrived.set()

    def credit(self) -> bool:
        return len(self._unread) < self._max_unread

    async def read_many(self) -> list[_T]:
        """Every response received and not read yet, waiting for one if none is; ``[]``
        once the server ended the call with status OK. Raises the :class:`CallEnded` of a
        call ended otherwise (after what came before it was read)."""
        while not self._unread:
            if self.ended.done():
                ended = self.ended.result()
                if ended.code == Status.OK:
                    return []
                raise _again(ended)
            self._arrived.clear()
            await self._arrived.wait()
        out, self._unread = self._unread, []
        if self.credit_owed():
            self.give_credit()
        return out


def _again(ended: CallEnded) -> CallEnded:
    """A fresh exception for how the call ended (the one kept is never raised: each raise
    would chain another traceback, and the frames in it, to it)."""
    return CallEnded(ended.code, ended.message or "the server ended the call")
