"""A bidirectional gRPC call over streamwire's HTTP/2 client (``h2grpc``).

:class:`GrpcCall` is a :class:`~streamwire.transport.h2grpc.GrpcStreamProtocol` whose
request side stays open: every :meth:`GrpcCall.write` queues length-prefixed gRPC messages
on the call's stream, and as much as the server's windows allow goes out at once, in DATA
frames of at most its SETTINGS_MAX_FRAME_SIZE (one socket write per ``write``, however many
messages it has; :mod:`streamwire.transport.h2machine` keeps the windows). What the windows
hold back goes out as WINDOW_UPDATEs or a larger SETTINGS_INITIAL_WINDOW_SIZE arrive.
:meth:`done_writing` half-closes: END_STREAM once the queue is sent.

The send queue is bounded: ``write`` waits (``timeout``; cancellation-safe: a write that
did not return queued nothing) while it holds ``max_buffer`` bytes or more, and raises the
call's :class:`~streamwire.transport.h2grpc.CallEnded` once the call is over.

Responses are kept as they arrive (the call is its own sink) until :meth:`read_many` takes
them all; received bytes are credited back to the server while fewer than ``max_unread``
wait, so a caller that stops reading holds the server back by one window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

from streamwire.transport.h2grpc import CallEnded, GrpcStreamProtocol, Status

__all__ = ("GrpcCall",)

_T = TypeVar("_T")


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
        self._pending: list[bytes] = []  # written before the call started on a connection
        self._closing = False  # done_writing() was called
        self._room = asyncio.Event()  # set while the queue has room, or the call is over
        self._room.set()
        self._unread: list[_T] = []
        self._arrived = asyncio.Event()  # responses wait, or the call is over
        self._queued = 0  # gRPC bytes (prefixes included) ever queued

    # --- writing ----------------------------------------------------------------------

    async def write(self, messages: Sequence[bytes], timeout: float | None = None) -> None:
        """Queue ``messages`` (serialized) and send what the windows allow. Waits up to
        ``timeout`` seconds while the send queue is full (``TimeoutError``). Raises the
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
        channel = self.channel
        if channel is None:
            self._pending += messages
            return
        self._queued += sum(5 + len(m) for m in messages)
        channel.send(self.stream_id, list(messages))
        self._update_room()

    def done_writing(self) -> None:
        """Half-close: END_STREAM once what is queued is sent. Idempotent."""
        self._closing = True
        channel = self.channel
        if channel is not None and not self.ended.done():
            channel.end_stream(self.stream_id)

    @property
    def sent(self) -> int:
        """gRPC bytes (prefixes included) handed to the connection."""
        return self._queued - self.buffered if self.channel is not None else 0

    @property
    def buffered(self) -> int:
        """gRPC bytes queued and not sent yet (held back by the server's windows)."""
        channel = self.channel
        if channel is None:
            return sum(5 + len(m) for m in self._pending)
        return channel.machine.buffered(self.stream_id)

    def _update_room(self) -> None:
        if self.ended.done() or self.buffered < self._max_buffer:
            self._room.set()
        else:
            self._room.clear()

    # --- the channel's side -------------------------------------------------------------

    def _started(self, channel: Any, stream_id: int) -> None:
        super()._started(channel, stream_id)
        pending, self._pending = self._pending, []
        closing, self._closing = self._closing, False
        if pending:
            self.send(pending)
        if closing:
            self.done_writing()

    def _flushed(self) -> None:
        self._update_room()

    def _end(
        self,
        ended: CallEnded,
        failure: Exception | None = None,
        *,
        not_http2: bool = False,
        early: bool = False,
    ) -> None:
        super()._end(ended, failure, not_http2=not_http2, early=early)
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
