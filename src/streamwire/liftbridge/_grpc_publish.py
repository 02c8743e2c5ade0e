"""The producer's gRPC publish path (``transport="grpc"``, or ``"auto"`` while NATS is down).

Messages go through the Liftbridge server rather than straight onto NATS: on one
``PublishAsync`` stream per producer (client-streaming requests, server-streaming
responses, matched by correlation id), so that many messages are in flight at once. A
server without ``PublishAsync`` (it answers UNIMPLEMENTED) is then sent every message with
the unary ``Publish`` RPC, concurrently (their order is then not kept).

The stream goes to the URL's server; while it is unreachable (a stream ends with
UNAVAILABLE), the next stream goes to the next broker known from metadata, in turn.

The stream is a :class:`~streamwire.liftbridge._publish_calls.PublishCall`: on
streamwire's own HTTP/2 client (``H2PublishCall``: the writer hands over every queued request
at once, up to ``_BATCH`` per write) or on grpc.aio (``GrpcioPublishCall``: one write per
request), as the client's ``publish_transport`` says. One writer task writes the queued
requests in order (a grpc.aio write cancelled half-way would cancel the whole call, so
callers never write themselves: ``submit`` only queues); one reader task per stream routes
the responses to an inbox-less :class:`AckRouter`. Requests arrive already serialized,
with their correlation ids; the producer registers the messages of one call to one
partition as one :class:`AckRun` (the lazy futures of one ledger, one deadline, the
requests kept for sending again), as on NATS, and the reader settles each read's
responses into the runs' ledgers, a range of consecutive messages at consecutive offsets
at once (``_settle``). With ``AckPolicy.NONE`` the server sends nothing back: the message
is confirmed once queued.

When a stream breaks (the server went away, the connection was reset, the channel closed:
an error :func:`~streamwire.transport.reconnect.is_retriable` calls transient), every message
still waiting for its response is queued again, ahead of what was not written yet, in the
order first sent, and the writer opens a new stream after a delay from the client's
``reconnect`` policy (jittered exponential backoff). A message written on the broken stream
may have been stored before it broke: sending it again may store it twice (at-least-once,
as for a caller's retry). Each message keeps the ack deadline it got when first sent
(``ack_timeout``): when it passes, the message fails with :class:`AckTimeout` however many
streams it was written on, and it is not written again. The policy bounds the broken
streams in a row (no response in between): past ``max_attempts`` or ``max_elapsed``, or
with ``reconnect=None`` at once, or on an error that is not transient, what still waits
fails with the stream's error (:class:`ConnectionClosed` chained to it once the policy gave
up).

What v1.9.0 answers on ``PublishAsync`` (docs/liftbridge.md): error responses carry
``asyncError`` (``INCORRECT_OFFSET`` for a wrong expected offset, ``NOT_FOUND`` for a
missing stream or partition, ``BAD_REQUEST`` for ``AckPolicy.NONE`` on a stream with
optimistic concurrency control) next to an empty ``ack``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

import grpc
import grpc.aio

from streamwire.errors import ClosedError, ConnectError, ConnectionClosed, StreamwireError
from streamwire.liftbridge._acks import AckRouter, AckRun
from streamwire.liftbridge._grpc import METHODS
from streamwire.liftbridge._publish_calls import (
    Broken,
    PublishCall,
    stream_error,
)
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    ACK_ERRORS,
    GRPC_ERRORS,
    AckErrorCode,
    GrpcStatus,
    Unimplemented,
)
from streamwire.liftbridge.protocol.metadata import Broker
from streamwire.transport.backoff import Backoff
from streamwire.transport.reconnect import ReconnectPolicy, is_retriable

__all__ = ("GrpcPublisher", "PublishChannels", "Queued", "async_error", "stream_error")

#: Most requests one write of an HTTP/2 PublishAsync call takes from the queue.
_BATCH = 1024
#: How long ``abort`` waits for the stream's cancelled tasks to end.
_ABORT_TIMEOUT = 5.0

logger = logging.getLogger(__name__)

#: A request waiting for the writer: ``(correlation id, serialized PublishRequest,
#: partition)``; the id is empty when nothing is acked (``AckPolicy.NONE``).
Queued = tuple[str, bytes, int]

_E = pb.PublishAsyncError
#: ``PublishAsyncError.Code`` to (registry, code) of the error raised.
_ASYNC_ERRORS: dict[int, tuple[Any, int]] = {
    _E.BAD_REQUEST: (GRPC_ERRORS, GrpcStatus.INVALID_ARGUMENT),
    _E.NOT_FOUND: (GRPC_ERRORS, GrpcStatus.NOT_FOUND),
    _E.INTERNAL: (GRPC_ERRORS, GrpcStatus.INTERNAL),
    _E.READONLY: (GRPC_ERRORS, GrpcStatus.FAILED_PRECONDITION),
    _E.INCORRECT_OFFSET: (ACK_ERRORS, AckErrorCode.INCORRECT_OFFSET),
    _E.ENCRYPTION_FAILED: (ACK_ERRORS, AckErrorCode.ENCRYPTION),
    _E.PERMISSION_DENIED: (GRPC_ERRORS, GrpcStatus.PERMISSION_DENIED),
}


def async_error(error: pb.PublishAsyncError, what: str) -> StreamwireError:
    """The typed error of a ``PublishAsyncError`` (IncorrectOffset, StreamNotFound, ...)."""
    registry, code = _ASYNC_ERRORS.get(int(error.code), (GRPC_ERRORS, GrpcStatus.UNKNOWN))
    text = f"{what}: {error.message}" if error.message else what
    exc: StreamwireError = registry.from_code(code, text)
    return exc


def _half_closed(task: asyncio.Task[None]) -> None:
    """The half-close of a stream ended: its error (the stream ended first) is the
    reader's to report; taken here so that asyncio does not log it as never retrieved."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.debug("half-closing a PublishAsync stream failed: %r", exc)


class PublishChannels(Protocol):
    """The part of :class:`streamwire.liftbridge.Client` a :class:`GrpcPublisher` uses: the
    servers it may publish to, calls to them, the reconnect policy, and the set of open
    publishers the client aborts when it closes."""

    host: str
    port: int
    reconnect: ReconnectPolicy | None
    _brokers: dict[str, Broker]
    _publishers: set[GrpcPublisher]

    def _broker_channel(self, broker_id: str | None) -> grpc.aio.Channel:
        """The grpc.aio channel to ``broker_id`` (``None``: the URL's server)."""
        ...

    async def _publish_call(self, broker_id: str | None, what: str) -> PublishCall:
        """A PublishAsync call to ``broker_id`` over HTTP/2 or grpcio."""
        ...

    async def _publish_request(
        self, request: pb.PublishRequest, *, timeout: float | None, what: str
    ) -> Any:
        """One unary Publish."""
        ...


class GrpcPublisher:
    """A producer's PublishAsync stream (or unary Publish calls), opened on first use."""

    def __init__(
        self, client: PublishChannels, stream: str, *, request_timeout: float | None
    ) -> None:
        self._client = client
        self._what = f"PublishAsync to {stream!r}"
        self._request_timeout = request_timeout
        self.acks = AckRouter(None)
        self._queue: deque[Queued] = deque()
        self._wake = asyncio.Event()
        self._call: PublishCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._unary_calls: set[asyncio.Task[None]] = set()
        self._half_close: asyncio.Task[None] | None = None
        self._writer_idle = False
        """The writer waits for messages (cancelling it then touches no gRPC call)."""
        self.unary = False
        """True once the server refused PublishAsync: every message is a unary Publish."""
        self.streams_opened = 0
        self.resent = 0
        """Messages written again on a new stream after theirs broke."""
        self.streams_broken = 0
        """Streams that ended with an error (the server's refusal of PublishAsync aside)."""
        self._failing_since: float | None = None
        """Loop time of the first broken stream since the last response (``None``: no
        stream broke since)."""
        self._broken = 0
        """Streams broken in a row (no response in between)."""
        self._backoff: Backoff | None = None
        self._reopen_at = 0.0
        """The next stream opens no earlier than this loop time."""
        self.server: str | None = None
        """The broker id the current (or last) stream went to; ``None``: the URL's server."""
        self._server_index = 0
        self._closed = False

    async def start(self, timeout: float | None) -> None:
        """Find out whether the server has PublishAsync: a stream with no request, half-closed
        at once, ends with OK on a server that has it (v1.9.0) and UNIMPLEMENTED on one that
        has not. (Learning it
        from the first real stream is unreliable: when the server refuses the call while
        requests are being written, grpc.aio reports the failed write, INTERNAL "Internal
        error from Core", instead of the server's UNIMPLEMENTED.) Other failures are left
        to the first real stream.

        Cancellation: the probe's call is cancelled.
        """
        m = METHODS["PublishAsync"]
        call = self._client._broker_channel(None).stream_stream(
            m.path,
            request_serializer=m.request.SerializeToString,
            response_deserializer=m.response.FromString,
        )(timeout=timeout)
        try:
            await call.done_writing()
            while await call.read() is not grpc.aio.EOF:
                pass
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                logger.info("%s: the server has no PublishAsync, using unary Publish", self._what)
                self.unary = True
            else:
                logger.debug("%s: probing PublishAsync failed: %s", self._what, exc)

    # --- sending -----------------------------------------------------------------------

    def next_ids(self, count: int) -> list[str]:
        return self.acks.next_ids(count)

    def expect_run(self, run: AckRun, timeout: float | None, what: str) -> None:
        """Wait for the responses of ``run`` (its ``payloads`` are its requests, kept to be
        sent again); those missing after ``timeout`` seconds fail with AckTimeout."""
        if self._closed:
            raise ClosedError(f"{self._what}: the producer is closed")
        on_settled = run.on_settled

        def settled(run: AckRun, n: int, exc: BaseException | None) -> None:
            on_settled(run, n, exc)
            if self._closed:
                self._maybe_finish()

        run.on_settled = settled
        self.acks.expect_run(run, timeout, what)

    def forget_run(self, run: AckRun) -> None:
        self.acks.forget_run(run)

    def submit(self, requests: Iterable[Queued]) -> None:
        """Queue ``requests`` for the writer, in order (after :meth:`expect_run` when they
        are acked)."""
        if self._closed:
            raise ClosedError(f"{self._what}: the producer is closed")
        self._queue.extend(requests)
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    def _waiting(self) -> list[Queued]:
        """The requests still waiting for their response, first sent first."""
        waiting = self.acks.run_acks
        out: list[Queued] = []
        for run in self.acks.runs:
            payloads, p = run.payloads or (), run.ledger.partition or 0
            out += [(c, payloads[i], p) for i, c in enumerate(run.cids) if c in waiting]
        return out

    # --- the writer ----------------------------------------------------------------------

    async def _write_loop(self) -> None:
        queue = self._queue
        while True:
            while not queue:
                if self._closed:
                    self._maybe_finish()
                    return
                self._wake.clear()
                self._writer_idle = True
                try:
                    await self._wake.wait()
                finally:
                    self._writer_idle = False
            if self.unary:
                request = queue.popleft()
                task = asyncio.get_running_loop().create_task(self._publish_unary(*request))
                self._unary_calls.add(task)
                task.add_done_callback(self._unary_calls.discard)
                continue
            request = queue[0]
            cid = request[0]
            if cid and cid not in self.acks.run_acks:  # timed out (or forgotten) while queued
                queue.popleft()
                continue
            call = self._call
            if call is None:
                wait = self._reopen_at - asyncio.get_running_loop().time()
                if wait > 0:  # the last stream broke: back off before the next
                    await asyncio.sleep(wait)
                    continue  # what is queued may have changed meanwhile
                call = await self._open()
                continue  # what is queued may have changed while it opened
            taken, batch = self._batch() if call.batched else (1, [request[1]])
            try:
                await call.write_many(batch)
            except Broken as broken:
                # the stream ended: its reader reports why (it has the call's status), or
                # this error if the reader does not end soon
                reader = self._reader
                if reader is not None and not reader.done():
                    await asyncio.wait({reader}, timeout=1.0)
                self._ended(call, broken.error)
                continue
            # (when the stream broke meanwhile, the queue was rebuilt: nothing to pop)
            if self._call is call and queue and queue[0] is request:
                for _ in range(min(taken, len(queue))):
                    queue.popleft()

    def _batch(self) -> tuple[int, list[bytes]]:
        """How many requests at the head of the queue (up to ``_BATCH``) one write of an
        HTTP/2 call takes, and those of them still to be written (not timed out)."""
        waiting = self.acks.run_acks
        head = list(itertools.islice(self._queue, _BATCH))
        return len(head), [data for cid, data, _ in head if not cid or cid in waiting]

    def _servers(self) -> list[str | None]:
        """Where a stream may go: the URL's server (``None``), then every other broker known
        from metadata (any server accepts PublishAsync: it publishes on NATS itself)."""
        client = self._client
        seed = (client.host, client.port)
        others = [bid for bid, b in client._brokers.items() if (b.host, b.port) != seed]
        return [None, *sorted(others)]

    async def _open(self) -> PublishCall:
        """A new stream to the next server, over HTTP/2 or grpcio as the client's
        ``publish_transport`` says, and its reader. Cancellation: nothing is left open."""
        servers = self._servers()
        self.server = servers[self._server_index % len(servers)]
        call = await self._client._publish_call(self.server, self._what)
        self._call = call
        self.streams_opened += 1
        self._reader = asyncio.get_running_loop().create_task(self._read_loop(call))
        return call

    # --- the reader ----------------------------------------------------------------------

    async def _read_loop(self, call: PublishCall) -> None:
        error: StreamwireError
        try:
            while True:
                responses = await call.read_many()
                if not responses:
                    error = ConnectionClosed(f"{self._what}: the server ended the stream")
                    break
                self._on_responses(responses)
        except Broken as broken:
            error = broken.error
        finally:  # (cancelled too: an HTTP/2 call's connection is its own to close)
            call.cancel()
        self._ended(call, error)
        if self._closed and self._reader is asyncio.current_task():
            self._reader = None
            self._client._publishers.discard(self)  # nothing of it runs any more

    def _on_responses(self, responses: list[pb.PublishResponse]) -> None:
        if self._failing_since is not None:  # a stream works again
            self._failing_since = self._backoff = None
            self._broken = 0
        self._settle(responses)

    def _settle(self, responses: Iterable[pb.PublishResponse]) -> None:
        """Settle each response's message in its run's ledger. Stored messages that follow
        each other in one run at consecutive offsets (the usual read: one producer, one
        partition) are confirmed as one range, and their run is told once."""
        router = self.acks
        take, stats = router.take, router.stats
        run: AckRun | None = None
        start = count = first = 0  # the range being gathered: run indices, offsets
        for response in responses:
            cid = response.correlationId
            entry = take(cid)
            if entry is None:  # a duplicate, or after its timeout
                stats.unmatched += 1
                continue
            stats.acks += 1
            at, i = entry
            if response.HasField("ack") and not response.HasField("asyncError"):
                ack = response.ack
                if not ack.ackError:
                    offset = ack.offset
                    if at is run and i == start + count and offset == first + count:
                        count += 1
                        continue
                    if run is not None:
                        self._confirm(run, start, count, first)
                    run, start, count, first = at, i, 1, offset
                    continue
            ledger = at.ledger
            where = f"message {cid} to {ledger.stream}/{ledger.partition}"
            if response.HasField("asyncError"):
                stats.error_acks += 1
                router.refuse(at, i, async_error(response.asyncError, where))
            elif response.HasField("ack"):
                stats.error_acks += 1
                router.refuse(at, i, ACK_ERRORS.from_code(int(response.ack.ackError), where))
            else:  # neither: stored, no offset reported
                ledger.confirm_one(i)
                router.settle_run(at, 1, None)
        if run is not None:
            self._confirm(run, start, count, first)

    def _confirm(self, run: AckRun, start: int, count: int, first_offset: int) -> None:
        run.ledger.confirm(start, count, first_offset)
        self.acks.settle_run(run, count, None)

    def _ended(self, call: PublishCall, error: StreamwireError) -> None:
        """The stream ``call`` is over: fail what waits on it (or, when the server has no
        PublishAsync, send it all again as unary Publish calls)."""
        if self._call is not call:
            return
        self._call = None
        call.cancel()
        reader, self._reader = self._reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        if isinstance(error, Unimplemented) and not self.unary:
            logger.info("%s: the server has no PublishAsync, using unary Publish", self._what)
            self.unary = True
            queued = {cid for cid, _, _ in self._queue}
            written = [r for r in self._waiting() if r[0] not in queued]
            self._queue.extendleft(reversed(written))
            self._wake.set()
            return
        logger.debug("%s ended: %s", self._what, error)
        self.streams_broken += 1
        if isinstance(error, ConnectError):  # that server is unreachable: the next one
            self._server_index += 1
        given_up = self._resend_after(error)
        if given_up is None:
            return
        self._queue.clear()
        self.acks.fail_all(given_up)
        if self._closed:
            self._maybe_finish()

    def _resend_after(self, error: StreamwireError) -> StreamwireError | None:
        """After the stream broke with ``error``: queue every message still waiting for its
        response again (first sent first) and set when the next stream may open; ``None``.
        Or, when the client's reconnect policy says not to try again, the error that what
        waits fails with."""
        policy = self._client.reconnect
        if policy is None or not is_retriable(error):
            return error
        now = asyncio.get_running_loop().time()
        if self._failing_since is None or self._backoff is None:
            self._failing_since, self._backoff, self._broken = now, policy.backoff(), 0
        self._broken += 1
        delay = next(self._backoff, None)
        elapsed = now - self._failing_since
        if delay is None or (policy.max_elapsed is not None and elapsed >= policy.max_elapsed):
            broken, self._failing_since, self._backoff, self._broken = self._broken, None, None, 0
            closed = ConnectionClosed(
                f"{self._what}: gave up sending again after {broken} broken streams in "
                f"{elapsed:.1f} s without a response (the client's reconnect policy): {error}"
            )
            closed.__cause__ = error
            return closed
        if policy.max_elapsed is not None:
            delay = min(delay, max(0.0, self._failing_since + policy.max_elapsed - now))
        self._reopen_at = now + delay
        waiting = self._waiting()
        queued = {cid for cid, _, _ in self._queue}
        self.resent += sum(1 for r in waiting if r[0] not in queued)
        unacked = [r for r in self._queue if not r[0]]  # AckPolicy.NONE
        self._queue.clear()
        self._queue.extend(waiting)
        self._queue.extend(unacked)
        logger.info(
            "%s broke (%s): sending %d waiting messages again on a new stream in %.2f s",
            self._what,
            error,
            len(waiting),
            delay,
        )
        self._wake.set()
        writer = self._writer
        if self._queue and (writer is None or writer.done()):
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        return None

    # --- unary Publish ---------------------------------------------------------------------

    async def _publish_unary(self, cid: str, data: bytes, partition: int) -> None:
        request = pb.PublishRequest.FromString(data)
        what = f"Publish to {request.stream}/{partition}"
        try:
            response = await self._client._publish_request(
                request, timeout=self._request_timeout, what=what
            )
        except StreamwireError as exc:
            if cid:
                self.acks.fail(cid, exc)
            return
        if cid:
            response.correlationId = cid  # (the unary response need not carry it)
            self._settle((response,))

    # --- closing -------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return self.acks.waiting

    async def close(self) -> None:
        """:meth:`stop` (an ``async`` method for the client's shutdown, which awaits it)."""
        self.stop()

    def stop(self) -> None:
        """Take no more messages. What is queued is still written, and the stream stays
        open for the acks of what was written until they arrive or time out; then it is
        half-closed (the server ends it). Idempotent; returns at once (nothing to cancel).
        """
        if self._closed:
            return
        self._closed = True
        writer = self._writer
        if writer is not None and self._writer_idle and not self._queue:
            writer.cancel()  # nothing to write: end it now rather than on its next turn
            self._writer = None
        self._wake.set()
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        writer = self._writer
        writing = writer is not None and not writer.done() and writer is not asyncio.current_task()
        if self._closed and not self.acks.waiting and not self._queue and not writing:
            self._finish()

    def _finish(self) -> None:
        """Everything is settled (or given up): cancel the stream, the reader and the unary
        calls, stop the deadline timer."""
        call, self._call = self._call, None
        reader, self._writer = self._reader, None
        if call is not None and reader is not None and not reader.done():
            # half-close: the server ends the stream and the reader returns on EOF
            # (cancelling it leaves grpc.aio's call in a reference cycle holding its
            # HTTP/2 connection open until the garbage collector runs)
            self._half_close = asyncio.get_running_loop().create_task(call.done_writing())
            self._half_close.add_done_callback(_half_closed)
        elif call is not None:
            call.cancel()
        for task in list(self._unary_calls):
            task.cancel()
        if self._reader is None or self._reader.done():
            self._client._publishers.discard(self)  # else once the reader returns
        self.acks.close(ClosedError(f"{self._what}: the producer closed before the ack"))

    async def abort(self, error: StreamwireError) -> None:
        """The client is shutting down: fail what still waits, cancel every task and wait
        for them to end (``_ABORT_TIMEOUT`` s at most: then a warning names them).

        Cancellation: everything is cancelled all the same; only the wait stops.
        """
        await self.close()
        reader = self._reader
        if not self.acks.waiting and not self._queue and reader is not None and not reader.done():
            # nothing waits: the stream was half-closed, let the server end it (a reader
            # cancelled mid-read keeps its connection open until the collector runs)
            await asyncio.wait({reader}, timeout=1.0)
        tasks = {t for t in (self._writer, self._reader, *self._unary_calls) if t is not None}
        self._writer = None
        self._queue.clear()
        self.acks.fail_all(error)
        self._finish()
        half_close, self._half_close = self._half_close, None
        if half_close is not None:
            tasks.add(half_close)
        # No reference to a task of the stream outlives the abort: a task that ended by
        # cancellation keeps its CancelledError, whose traceback holds the frames that held
        # the gRPC call, and a live call keeps its HTTP/2 connection open after the channel
        # closed (for as long as the caller keeps this producer).
        self._reader = None
        for task in tasks:
            task.cancel()
        if tasks:
            _, running = await asyncio.wait(tasks, timeout=_ABORT_TIMEOUT)
            if running:
                logger.warning(
                    "%s: %d tasks still run %.0f s after they were cancelled: %r",
                    self._what,
                    len(running),
                    _ABORT_TIMEOUT,
                    running,
                )
