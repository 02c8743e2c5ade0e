"""Iggy producer: bounded buffer, client-side partition routing, batched SendMessages.

``send()`` turns the message into a frame at once (ids, origin time, headers: errors surface
to the caller), picks its route and queues it; a sender task takes the queued messages of one
route at a time, up to ``max_batch_messages``/``max_batch_bytes``, as one SendMessages
request, and resolves each message's future with ``Confirmation(offset=base_offset + i)``.

Routing (resolved client-side, like the official SDKs; the request then names the partition):

* ``partition=`` on the producer or on ``send`` pins the partition;
* else a message with a ``key`` goes to ``XXH32(key, seed 0) % partitions`` (``MessagesKey``);
* else the message goes to the producer's current partition, which moves to the next one
  after ``max_batch_messages`` such messages or once a batch to it is sent (``Balanced``
  as a sticky round robin, decided when the message is accepted).

Every route is a partition when a message is accepted, and a batch takes the oldest queued
messages of one partition, so messages of a partition are stored in the order they were sent,
keyed or not.

Delivery is at-least-once at best: a batch whose reply is lost with the connection fails its
futures with the connection error (the server may or may not have stored it); later batches
go over a new connection (``reconnect`` policy of the client).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Self, cast

from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message, confirmation, outgoing
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    StreamwireError,
)
from streamwire.iggy._connection import Connection
from streamwire.iggy._options import topic_of
from streamwire.iggy.options import ProducerOptions
from streamwire.iggy.protocol.batch import OutgoingMessage, encode_batch, random_message_ids
from streamwire.iggy.protocol.errors import TopicNameNotFound
from streamwire.iggy.protocol.identifiers import Partitioning
from streamwire.iggy.protocol.mapping import key_partition, to_outgoing
from streamwire.iggy.protocol.messaging import SendConfirmations, SendMessages
from streamwire.iggy.protocol.streams import GetTopic
from streamwire.metrics import Destination, ProducerMeter, ProducerStats
from streamwire.transport.resources import (
    AsyncStartable,
    wait_confirmed,
    wait_flushed,
    wait_for_bytes,
)
from streamwire.transport.tasks import cancel_and_wait, cancel_now

if TYPE_CHECKING:
    from streamwire.iggy.client import Client

__all__ = ("Producer", "ProducerOptions")

logger = logging.getLogger(__name__)


_Entry = tuple[int, OutgoingMessage, "asyncio.Future[Confirmation]", int]
"""(route, frame, future, size)"""


class Producer(AsyncStartable):
    """Publishes to one ``"stream/topic"``. Use ``async with client.producer(address)``."""

    def __init__(self, client: Client, address: str, *, options: ProducerOptions) -> None:
        self._client = client
        self.address = address
        self.stream, self.topic = topic_of(address)
        self.options = options
        self._loop = asyncio.get_running_loop()
        self._conn: Connection | None = None
        self._partitions = 0
        self._cursor = 0
        self._sticky = 0  # keyless messages routed to the current partition so far
        self._buffer: deque[_Entry] = deque()
        self._buffer_bytes = 0
        # batches sent and awaiting their replies (up to the connection's max_in_flight),
        # with what the meter needs to settle them
        self._inflight: dict[
            asyncio.Future[SendConfirmations], tuple[list[_Entry], int, tuple[float, object]]
        ] = {}
        self._meter = ProducerMeter(Destination("iggy", address, f"{client.host}:{client.port}"))
        self._born = time.time()
        self._room = asyncio.Event()
        self._window = asyncio.Event()  # a batch in flight was answered
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sender: asyncio.Task[None] | None = None
        self._first_failure: BaseException | None = None
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Open the producer's connection and learn the partition count.

        Cancellation: the connection is closed; the producer is unusable.
        """
        async with asyncio.timeout(timeout):
            await self._refresh()
        self._sender = asyncio.create_task(
            self._send_loop(), name=f"streamwire-iggy-producer {self.address}"
        )
        return self

    def _is_started(self) -> bool:
        return self._sender is not None

    async def _close_on_exit(self, clean: bool) -> None:
        await self.close(flush=clean)

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or not conn.is_open:
            again = conn is not None
            conn = self._conn = await self._client._dial_with_retry(
                f"producer {self.address}", again=again
            )
        return conn

    async def _refresh(self) -> None:
        conn = await self._connection()
        details = await conn.request(GetTopic(self.stream, self.topic))
        if details is None:
            raise TopicNameNotFound(f"topic {self.address!r} does not exist")
        self._partitions = len(details.partitions)

    @property
    def partitions_count(self) -> int:
        return self._partitions

    @property
    def pending(self) -> int:
        """Messages accepted but not yet confirmed or failed."""
        return len(self._buffer) + sum(len(b) for b, _, _ in self._inflight.values())

    @property
    def stats(self) -> ProducerStats:
        """Counters of what this producer published (docs/api.md, "Metrics and tracing")."""
        return self._meter.snapshot()

    # --- sending -------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise ClosedError(f"producer for {self.address!r} is closed")
        if self._sender is None:
            raise ClosedError("producer not started: use 'async with' or 'await'")

    def _prepare(
        self,
        value: bytes | Message,
        key: bytes | None,
        headers: Mapping[str, HeaderInput] | None,
        partition: int | None,
    ) -> tuple[int, OutgoingMessage]:
        msg = outgoing(value, key, headers)
        frame = to_outgoing(msg, now_us=time.time_ns() // 1000, key_header=self.options.key_header)
        fixed = self._fixed(partition)
        if fixed is not None:
            return fixed, frame
        if msg.key:
            return key_partition(msg.key, self._partitions), frame
        return self._balanced(), frame

    def _fixed(self, partition: int | None) -> int | None:
        """The pinned partition (``send``'s, else the producer's), checked, or ``None``."""
        fixed = partition if partition is not None else self.options.partition
        if fixed is not None and (
            not 0 <= fixed < max(self._partitions, 1) or isinstance(fixed, bool)
        ):
            raise ConfigurationError(f"partition {fixed} not in 0..{self._partitions - 1}")
        return fixed

    def _balanced(self) -> int:
        """The current partition of keyless messages (see the module notes)."""
        partition = self._cursor % max(self._partitions, 1)
        self._sticky += 1
        if self._sticky >= self.options.max_batch_messages:
            self._cursor, self._sticky = self._cursor + 1, 0
        return partition

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Accept one message; returns the future of its confirmation. Waits for room while
        the buffer is full, up to ``timeout`` (default ``max_block``).

        Cancellation: a message whose ``send`` is cancelled was not accepted. Cancelling the
        returned future does not stop its delivery.
        """
        self._check()
        route, frame = self._prepare(value, key, headers, partition)
        size = len(frame.payload) + len(frame.user_headers) + 48
        await self._wait_for_room(size, timeout)
        self._meter.accepted(1, size - 48)
        return self._accept(route, frame, size)

    def _accept(
        self, route: int, frame: OutgoingMessage, size: int
    ) -> asyncio.Future[Confirmation]:
        future: asyncio.Future[Confirmation] = self._loop.create_future()
        self._buffer.append((route, frame, future, size))
        self._buffer_bytes += size
        self._idle.clear()
        self._work.set()
        return future

    def _full(self, size: int) -> bool:
        o = self.options
        return (
            len(self._buffer) >= o.max_buffer_messages
            or self._buffer_bytes + size > o.max_buffer_bytes
        )

    async def _wait_for_room(self, size: int, timeout: float | None) -> None:
        await wait_for_bytes(
            size,
            self.options.max_block if timeout is None else timeout,
            has_room=lambda n: not self._full(n),
            wake=self._room,
            max_bytes=self.options.max_buffer_bytes,
            check=self._check,
            what=self.address,
        )

    async def send_and_wait(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> Confirmation:
        """Send one message and wait for its confirmation (``timeout`` defaults to
        ``confirm_timeout``).

        Cancellation: the message may still be stored; only the wait stops.
        """
        future = await self.send(value, key=key, headers=headers, partition=partition)
        return await wait_confirmed(
            future, self.options.confirm_timeout if timeout is None else timeout
        )

    async def send_batch(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> list[asyncio.Future[Confirmation]]:
        """Accept several messages in order; returns their confirmation futures.

        Cancellation: the messages accepted before the cancellation stay accepted.
        """
        self._check()
        if type(values) in (list, tuple) and set(map(type, values)) == {bytes}:
            return await self._send_bodies(cast("Sequence[bytes]", values), timeout)
        futures = []
        nbytes = 0
        try:
            for value in values:
                route, frame = self._prepare(value, None, None, None)
                size = len(frame.payload) + len(frame.user_headers) + 48
                if self._full(size):
                    self._work.set()
                    await self._wait_for_room(size, timeout)
                futures.append(self._accept(route, frame, size))
                nbytes += size - 48
        finally:  # what was accepted, also when a later message was refused
            self._meter.accepted(len(futures), nbytes)
        return futures

    async def _send_bodies(
        self, values: Sequence[bytes], timeout: float | None
    ) -> list[asyncio.Future[Confirmation]]:
        """``send_batch`` of plain ``bytes``: no key, no headers, so the frames are built
        straight from the bodies (what ``to_outgoing(Message(value))`` makes), with one
        origin time for the call and the ids drawn at once."""
        now = time.time_ns() // 1000
        fixed = self._fixed(None)
        ids = random_message_ids(len(values))
        create_future = self._loop.create_future
        new_frame = tuple.__new__  # OutgoingMessage(id, value, now) without its __new__
        futures: list[asyncio.Future[Confirmation]] = []
        append = futures.append
        o = self.options
        payload = sum(map(len, values))
        total = payload + 48 * len(values)
        fits = (  # the whole call fits the buffer now: no per-message check
            len(self._buffer) + len(values) <= o.max_buffer_messages
            and self._buffer_bytes + total <= o.max_buffer_bytes
        )
        for value, msg_id in zip(values, ids, strict=True):
            route = self._balanced() if fixed is None else fixed
            size = len(value) + 48
            if not fits and self._full(size):
                if futures:
                    self._idle.clear()
                self._work.set()
                await self._wait_for_room(size, timeout)
            future: asyncio.Future[Confirmation] = create_future()
            frame = new_frame(OutgoingMessage, (msg_id, value, now, b""))
            self._buffer.append((route, frame, future, size))
            self._buffer_bytes += size
            append(future)
        if futures:
            self._idle.clear()
            self._work.set()
        self._meter.accepted(len(futures), payload)
        return futures

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every accepted message is confirmed or failed; raises the first failure
        since the previous flush, or :class:`FlushTimeout`.

        Cancellation: only the wait stops.
        """
        self._work.set()
        await wait_flushed(
            self._idle,
            self.options.confirm_timeout if timeout is None else timeout,
            pending=lambda: self.pending,
            take_failure=self._take_failure,
        )

    def _take_failure(self) -> BaseException | None:
        failure, self._first_failure = self._first_failure, None
        return failure

    # --- the sender task -----------------------------------------------------------------

    async def _send_loop(self) -> None:
        while True:
            await self._work.wait()
            if not self._buffer:
                self._work.clear()
                self._settle()
                continue
            o = self.options
            if o.linger and len(self._buffer) < o.max_batch_messages:
                await asyncio.sleep(o.linger)
            limit = self._client.settings.max_in_flight
            while len(self._inflight) >= limit:  # wait here, not on the connection: if it
                self._window.clear()  # is lost meanwhile, the next batch goes over a new one
                await self._window.wait()
            batch, partition = self._take_batch()
            self._room.set()
            await self._send(batch, partition)
            self._settle()

    def _settle(self) -> None:
        if not self._buffer and not self._inflight:
            self._idle.set()

    def _take_batch(self) -> tuple[list[_Entry], int]:
        """The oldest queued messages of the first queued message's partition, in order,
        up to the batch limits; the others stay queued in their order."""
        buffer = self._buffer
        route = buffer[0][0]
        o = self.options
        taken: list[_Entry] = []
        rest: deque[_Entry] = deque()
        size = 0
        while buffer:
            entry = buffer.popleft()
            if entry[0] == route:
                if len(taken) < o.max_batch_messages and (
                    not taken or size + entry[3] <= o.max_batch_bytes
                ):
                    taken.append(entry)
                    size += entry[3]
                    continue
                rest.append(entry)  # the batch is full: what follows waits for the next
                break
            rest.append(entry)
        rest.extend(buffer)
        self._buffer = rest
        self._buffer_bytes -= size
        if self._sticky and route == self._cursor % max(self._partitions, 1):
            self._cursor, self._sticky = self._cursor + 1, 0
        return taken, route

    async def _send(self, batch: list[_Entry], partition: int) -> None:
        """Send one batch; its reply resolves the futures later (:meth:`_confirmed`), so the
        next batch can go out meanwhile (the connection's ``max_in_flight``)."""
        # The meter's latency starts when the oldest message was accepted: its origin time,
        # unless the application set that (then at most since the producer started).
        waited = time.time() - batch[0][1].origin_timestamp / 1e6
        waited = min(max(0.0, waited), time.time() - self._born)
        started = self._meter.begin(len(batch), 0, waited)
        try:
            request = SendMessages(
                stream=self.stream,
                topic=self.topic,
                partitioning=Partitioning.partition_id(partition),
                messages_count=len(batch),
                batch=encode_batch([e[1] for e in batch]),
            )
            conn = await self._connection()
            reply = await conn.submit(request)
        except asyncio.CancelledError:
            self._fail_entries(batch, ClosedError(f"producer for {self.address!r} closed"))
            self._meter.settled(started, 0, len(batch))
            raise
        except StreamwireError as exc:
            logger.debug("send to %s partition %d failed: %s", self.address, partition, exc)
            self._fail_entries(batch, exc)
            self._meter.settled(started, 0, len(batch))
            return
        self._inflight[reply] = (batch, partition, started)
        reply.add_done_callback(self._confirmed)

    def _confirmed(self, reply: asyncio.Future[SendConfirmations]) -> None:
        batch, partition, started = self._inflight.pop(reply)
        self._window.set()
        try:
            if reply.cancelled():
                self._fail_entries(batch, ClosedError(f"producer for {self.address!r} closed"))
                self._meter.settled(started, 0, len(batch))
            elif (exc := reply.exception()) is not None:
                logger.debug("send to %s partition %d failed: %s", self.address, partition, exc)
                self._fail_entries(batch, exc)
                self._meter.settled(started, 0, len(batch))
            else:
                self._resolve(batch, partition, reply.result())
                self._meter.settled(started, len(batch), 0)
        finally:
            self._settle()

    def _resolve(self, batch: list[_Entry], partition: int, reply: SendConfirmations) -> None:
        base = None
        for sent in reply.confirmations:
            if sent.partition_id == partition:
                base = sent.base_offset
        address = self.address
        for i, (_, _, future, _) in enumerate(batch):
            if not future.done():
                offset = None if base is None else base + i
                future.set_result(confirmation(None, offset, address, partition))

    def _fail_entries(self, batch: list[_Entry], exc: BaseException) -> None:
        if self._first_failure is None:
            self._first_failure = exc
        for _, _, future, _ in batch:
            if not future.done():
                future.set_exception(exc)

    # --- closing -------------------------------------------------------------------------

    async def close(self, *, flush: bool = True, timeout: float | None = None) -> None:
        """Flush (unless ``flush=False``), stop and close the connection. Idempotent.

        Messages still unconfirmed afterwards fail with :class:`ClosedError`.

        Cancellation: the producer is aborted (:meth:`abort`) before ``CancelledError``
        propagates.
        """
        if self._closed:
            return
        try:
            if flush and self._sender is not None:
                with contextlib.suppress(StreamwireError):
                    await self.flush(timeout)
            self._closed = True
            await cancel_and_wait(self._sender, timeout=1.0)
            self._fail_buffered()
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
            if self._inflight:  # their replies are settled once the connection is closed
                await asyncio.wait(list(self._inflight), timeout=1.0)
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop at once: the sender is cancelled, the connection aborted, and messages not
        confirmed yet fail with :class:`ClosedError`. Idempotent."""
        self._closed = True
        cancel_now((self._sender,))
        self._fail_buffered()
        closed = ClosedError(f"producer for {self.address!r} closed before confirmation")
        # their replies are dropped (and the meter settles them) when they fail
        for batch, _, _ in self._inflight.values():
            self._fail_entries(batch, closed)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()
        self._client._forget(self)

    def _fail_buffered(self) -> None:
        left = list(self._buffer)
        self._buffer.clear()
        self._buffer_bytes = 0
        self._fail_entries(
            left, ClosedError(f"producer for {self.address!r} closed before confirmation")
        )
        if left:
            self._meter.settled(self._meter.begin(len(left), 0), 0, len(left))
        self._room.set()
        self._idle.set()
