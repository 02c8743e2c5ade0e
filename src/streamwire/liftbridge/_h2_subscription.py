"""A Subscribe stream read on the event loop over streamwire's own HTTP/2 reader.

The same interface as ``_stream_reader.Subscription`` (``start``, ``cancel``, ``stop``,
``ready``, ``finished``, ``next_offset``, ``delivered``, the same outcomes), without the
thread: ``transport.h2grpc`` reads the call on the loop and hands every message a socket
read completed to :meth:`H2Subscription.deliver` in one call, decoded by
:func:`split_subscribed` (native when the core is there). The server is credited back only
while the hand-over buffer has room, so a consumer that stops taking messages holds it back
with at most one flow-control window in flight.

The call goes on one of the client's HTTP/2 connections to that server
(:class:`~streamwire.transport.h2grpc.H2Pool`), shared with its other subscriptions and
producers; cancelling the subscription resets its stream (RST_STREAM CANCEL) and leaves the
connection to the others. A connection that goes quiet is checked with keepalive PINGs: a
dead one ends every call on it (UNAVAILABLE), and the consumer resubscribes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any, Final

import grpc

from streamwire._native import NativeCore
from streamwire._native import core as _native
from streamwire.codec.message import Message
from streamwire.errors import DecodeError, StreamwireError
from streamwire.liftbridge._grpc import METHODS, RpcFailed
from streamwire.liftbridge._stream_reader import (
    ENDED,
    STOPPED,
    UNDECODABLE,
    Handover,
    OffsetRegression,
    Outcome,
    Subscription,
)
from streamwire.liftbridge.protocol.messages import decode_message_pure
from streamwire.transport import h2grpc

__all__ = ("SUBSCRIBE_TRANSPORTS", "AnySubscription", "H2Subscription", "split_subscribed")

logger = logging.getLogger(__name__)

#: Receive window (stream and connection) of a subscription's connection.
WINDOW: Final = 1 << 20
#: Largest message accepted (as the grpcio channels: 64 MiB).
MAX_MESSAGE: Final = 64 << 20

_CODES: Final = {int(c.value[0]): c for c in grpc.StatusCode}


def status_of(ended: h2grpc.CallEnded) -> RpcFailed:
    """The :class:`RpcFailed` grpcio would report for the same status."""
    return RpcFailed(_CODES.get(ended.code, grpc.StatusCode.UNKNOWN), ended.message)


def split_subscribed(
    server_headers: bool, core: NativeCore | None = _native
) -> Callable[[bytearray], tuple[list[Message], int, int]]:
    """A ``split`` for :class:`h2grpc.GrpcStreamProtocol`: the whole gRPC messages at the
    start of a buffer decoded as ``liftbridge.Message``s. A message that does not decode
    (:class:`DecodeError`), a compressed or oversized one (:class:`h2grpc.CallEnded`) ends
    the run, and raises when it is the first: what came before it is handed out first.

    With the native core (and without ``server_headers``) ``lb_decode_grpc`` walks and
    decodes a whole run of messages per call; where it stops short of the end (a message it
    does not take, a flagged or oversized one) the pure code takes one message, and the
    native walk goes on after it. Both give the same messages and errors
    (tests/property/test_lb_grpc_walk.py)."""
    split = h2grpc.split_messages

    def one(buf: bytearray, pos: int) -> tuple[Message | None, int]:
        """The message at ``pos`` the pure way, or None if it is incomplete; raises."""
        end = len(buf)
        size = int.from_bytes(buf[pos + 1 : pos + 5])
        if end - pos - 5 < size and not buf[pos] and size <= MAX_MESSAGE:
            return None, pos
        raws, consumed, _ = split(buf[pos : pos + 5 + size], MAX_MESSAGE)
        return decode_message_pure(raws[0], server_headers=server_headers), pos + consumed

    if core is None or server_headers:

        def walk_pure(buf: bytearray) -> tuple[list[Message], int, int]:
            raws, consumed, _ = split(buf, MAX_MESSAGE)  # raises only for a first bad one
            out: list[Message] = []
            pos = 0
            try:
                for raw in raws:
                    out.append(decode_message_pure(raw, server_headers=server_headers))
                    pos += 5 + len(raw)
            except DecodeError:
                if not out:
                    raise
                return out, pos, pos
            return out, consumed, consumed

        return walk_pure

    decode_grpc = core.lb_decode_grpc

    def walk_native(buf: bytearray) -> tuple[list[Message], int, int]:
        out, pos = decode_grpc(buf, 0, MAX_MESSAGE)
        end = len(buf)
        try:
            while end - pos >= 5:  # the native walk stopped here: one message the pure way
                msg, pos = one(buf, pos)
                if msg is None:
                    break
                out.append(msg)
                more, pos = decode_grpc(buf, pos, MAX_MESSAGE)
                out += more
        except (DecodeError, h2grpc.CallEnded):
            if not out:
                raise
        return out, pos, pos

    return walk_native


class H2Subscription:
    """One Subscribe call on its own HTTP/2 connection, read on the event loop."""

    def __init__(
        self,
        handover: Handover[Any],
        *,
        host: str,
        port: int,
        request: bytes,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        loop: asyncio.AbstractEventLoop,
        skip_below: int,
        server_headers: bool,
        name: str,
        pool: h2grpc.H2Pool | None = None,
    ) -> None:
        self._handover = handover
        self._pool = pool
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._request = request
        self._loop = loop
        self._skip_below = skip_below
        self._split = split_subscribed(server_headers)
        self.name = name
        self._proto: h2grpc.GrpcStreamProtocol[Message] | None = None
        self._task: asyncio.Task[None] | None = None
        self._early: Outcome | None = None  # how connecting failed
        self._stopped = False
        self._handshake = True
        self.next_offset: int | None = None
        self.delivered = 0
        self._regression: OffsetRegression | None = None  # an offset sent twice
        self.ready: asyncio.Future[Outcome | None] = loop.create_future()
        self.finished: asyncio.Future[Outcome] = loop.create_future()

    # --- connecting ------------------------------------------------------------------

    async def connect(self, timeout: float | None) -> bool:
        """Open the connection and send the request. False if the server does not speak
        HTTP/2 (the caller falls back to grpcio); any other failure becomes the outcome
        that :meth:`start` reports. Cancellation: nothing is left open."""
        authority = h2grpc.authority(self._host, self._port, self._server_hostname)
        loop = self._loop

        def factory() -> h2grpc.GrpcStreamProtocol[Message]:
            return h2grpc.GrpcStreamProtocol(
                loop=loop,
                authority=authority,
                path=METHODS["Subscribe"].path,
                request=self._request,
                split=self._split,
                sink=self,
                scheme="https" if self._ssl is not None else "http",
                window=WINDOW,
                max_message=MAX_MESSAGE,
            )

        try:
            self._proto = await h2grpc.open_call(
                factory,
                self._host,
                self._port,
                ssl_context=self._ssl,
                server_hostname=self._server_hostname,
                timeout=timeout,
                pool=self._pool,
            )
        except h2grpc.NotHttp2 as exc:
            logger.info("subscription %s: %s; falling back to grpcio", self.name, exc)
            return False
        except h2grpc.CallEnded as exc:
            self._early = status_of(exc)
        except TimeoutError:
            self._early = RpcFailed(grpc.StatusCode.UNAVAILABLE, "connecting timed out")
        except (OSError, StreamwireError) as exc:  # refused, unreachable, TLS failed, closed
            self._early = RpcFailed(grpc.StatusCode.UNAVAILABLE, f"failed to connect: {exc}")
        return True

    def start(self) -> None:
        self._task = self._loop.create_task(self._run(), name=f"streamwire h2 {self.name}")

    async def _run(self) -> None:
        outcome: Outcome = STOPPED
        proto = self._proto
        self._handover.room_listeners.add(self._on_room)
        try:
            if self._early is not None:
                outcome = self._early
            elif proto is not None and not self._stopped:
                if self._regression is not None:
                    # found while open_call was still waiting for the server's SETTINGS
                    # (they came in the same read as the messages): deliver could not end
                    # a call that was not ours yet, so end it now
                    proto.cancel()
                ended = await proto.ended
                if self._regression is not None:
                    outcome = self._regression
                elif isinstance(proto.failure, DecodeError):
                    outcome = UNDECODABLE
                elif proto.failure is not None:
                    outcome = proto.failure
                elif ended.code == h2grpc.Status.OK:
                    outcome = ENDED
                else:
                    outcome = status_of(ended)
        finally:
            self._handover.room_listeners.discard(self._on_room)
            if proto is not None:
                proto.cancel()
            self._proto = None
            if self._regression is not None:  # what the reader must hear, stopped or not
                outcome = self._regression
            elif self._stopped:
                outcome = STOPPED
            _resolve(self.ready, outcome)
            _resolve(self.finished, outcome)

    # --- the sink --------------------------------------------------------------------

    def deliver(self, messages: list[Message], nbytes: int) -> None:
        if self._stopped:
            return
        nbytes -= 5 * len(messages)  # the messages as the server sent them, as grpcio counts
        if self._handshake:
            self._handshake = False
            del messages[0]
            _resolve(self.ready, None)
            if not messages:
                return
        at = _regression(messages, self.next_offset)
        if at is not None:  # what comes before it first, then the call ends with it
            if at:
                self._deliver(messages[:at], nbytes * at // len(messages))
                expected = (messages[at - 1].offset or 0) + 1
            else:
                expected = self.next_offset or 0  # set: a batch's first is checked against it
            self._regression = OffsetRegression(expected, messages[at].offset or 0)
            proto = self._proto
            if proto is not None:
                proto.cancel()
            return
        self._deliver(messages, nbytes)

    def _deliver(self, messages: list[Message], nbytes: int) -> None:
        if self._skip_below and (messages[0].offset or 0) < self._skip_below:
            skip = self._skip_below
            messages = [m for m in messages if (m.offset or 0) >= skip]
            if not messages:
                return
        if not self._handover.offer(messages, nbytes):
            self.cancel()
            return
        self.next_offset = (messages[-1].offset or 0) + 1
        self.delivered += len(messages)

    def credit(self) -> bool:
        return self._handover.room()

    def _on_room(self) -> None:
        proto = self._proto
        if proto is not None and proto.credit_owed() and self._handover.room():
            proto.give_credit()

    # --- stopping --------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop reading: reset the stream and close the connection. Idempotent."""
        self._stopped = True
        proto = self._proto
        if proto is not None:
            proto.cancel()

    async def stop(self, timeout: float) -> bool:
        """``cancel``, then wait up to ``timeout`` seconds for the reader task to end."""
        self.cancel()
        task = self._task
        if task is None:
            _resolve(self.ready, STOPPED)
            _resolve(self.finished, STOPPED)
            return True
        await asyncio.wait({task}, timeout=timeout)
        return task.done()


AnySubscription = Subscription | H2Subscription
"""A subscription read by a grpcio thread or on the loop over HTTP/2."""

#: ``subscribe_transport`` values (see ``Client.subscribe_transport``).
SUBSCRIBE_TRANSPORTS: Final = ("auto", "http2", "grpcio")


def _regression(messages: list[Message], expected: int | None) -> int | None:
    """Where in ``messages`` (a batch from the server) the first message is whose offset is
    before ``expected`` (the offset after the last message delivered) or not past the one
    before it; None when they all move forward. A batch whose offsets span exactly its
    length (the common case) is taken as consecutive without looking at each."""
    first = messages[0].offset or 0
    if expected is not None and first < expected:
        return 0
    if (messages[-1].offset or 0) - first == len(messages) - 1:
        return None
    after = first
    for i in range(1, len(messages)):
        offset = messages[i].offset or 0
        if offset <= after:
            return i
        after = offset
    return None


def _resolve(future: asyncio.Future[Any], value: object) -> None:
    if not future.done():
        future.set_result(value)
