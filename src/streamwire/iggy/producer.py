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
import logging
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, repeat
from typing import Any, Final, NamedTuple, Self, cast

from streamwire._native.bodies import bytes_total
from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message, outgoing
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    StreamwireError,
)
from streamwire.iggy._connection import Connection
from streamwire.iggy._link import ClientLink
from streamwire.iggy._options import topic_of
from streamwire.iggy.options import ProducerOptions
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    encode_batch,
    encode_runs,
    message_ids,
    random_message_id_bytes,
)
from streamwire.iggy.protocol.errors import TopicNameNotFound
from streamwire.iggy.protocol.identifiers import Partitioning
from streamwire.iggy.protocol.mapping import key_partition, to_outgoing
from streamwire.iggy.protocol.messaging import SendConfirmations, SendMessages
from streamwire.iggy.protocol.streams import GetTopic
from streamwire.metrics import Destination, ProducerMeter, ProducerStats
from streamwire.transport.pending import Ledger
from streamwire.transport.producer_core import ProducerCore, and_wait
from streamwire.transport.tasks import cancel_and_wait, cancel_now

__all__ = ("BatchConfirmation", "Producer", "ProducerOptions")

logger = logging.getLogger(__name__)


_new_tuple: Final = tuple.__new__
_PLUS_FRAME: Final = (48).__add__  # a message's buffer size: its payload's and 48


class BatchConfirmation(NamedTuple):
    """Every message of a ``send_many`` call is stored."""

    messages: int
    stream: str
    """The producer's ``"stream/topic"``."""
    ranges: tuple[tuple[int, int | None, int | None], ...]
    """``(partition, first offset, last offset)`` of each run of the call's messages that
    one SendMessages stored, in the order they were sent (offsets ``None`` if the server did
    not report them)."""


class _Many:
    """The one future of a ``send_many`` call: resolved once every message it accepted is
    settled and the call is over (``sealed``), failed with the first error if any."""

    __slots__ = ("error", "future", "left", "messages", "ranges", "sealed", "stream")

    def __init__(self, future: asyncio.Future[BatchConfirmation], stream: str) -> None:
        self.future = future
        self.stream = stream
        self.left = 0
        self.messages = 0
        self.sealed = False
        self.error: BaseException | None = None
        self.ranges: list[tuple[int, int | None, int | None]] = []

    def accepted(self, count: int) -> None:
        self.left += count
        self.messages += count

    def stored(self, count: int, partition: int, first: int | None) -> None:
        last = None if first is None else first + count - 1
        self.ranges.append((partition, first, last))
        self.left -= count
        self.finish()

    def failed(self, count: int, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self.left -= count
        self.finish()

    def finish(self) -> None:
        if self.left or not self.sealed or self.future.done():
            return
        if self.error is not None:
            self.future.set_exception(self.error)
            self.future.exception()  # flush() reports it too: no "never retrieved" noise
        else:
            self.future.set_result(
                BatchConfirmation(self.messages, self.stream, tuple(self.ranges))
            )


def _origin_us(run: _Run) -> int:
    """When a run's first message was accepted (its origin timestamp, microseconds)."""
    if run.ids is not None:
        return run.now
    first: OutgoingMessage = run.items[0]
    return first.origin_timestamp


class _Run:
    """Messages of one route accepted together, in order: the unit of the buffer. Either
    ``frames`` (``ids`` None) or plain bodies with their ``ids`` (16 bytes each) and one
    origin time ``now`` (encoded as they are, :func:`encode_runs`). Each message has a
    future (message ``at + i`` of ``ledger``), or the run answers to one ``send_many``
    (``many``)."""

    __slots__ = ("_sizes", "at", "bytes", "ids", "items", "ledger", "many", "now", "route")

    def __init__(
        self,
        route: int,
        items: list[Any],
        ids: bytes | None,
        now: int,
        ledger: Ledger | None,
        at: int,
        many: _Many | None,
        sizes: list[int] | None,
        total: int = 0,
    ) -> None:
        """``sizes``: each message's buffer size; ``None`` for plain bodies whose sizes are
        worked out when needed (a split), their sum given as ``total``."""
        self.route = route
        self.items = items
        self.ids = ids
        self.now = now
        self.ledger = ledger
        self.at = at
        self.many = many
        self._sizes = sizes
        self.bytes = total if sizes is None else sum(sizes)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def sizes(self) -> list[int]:
        if self._sizes is None:
            self._sizes = list(map(_PLUS_FRAME, map(len, self.items)))
        return self._sizes

    def split(self, count: int) -> _Run:
        """Cut off and return the first ``count`` messages; this run keeps the rest."""
        ids = self.ids
        head = _Run(
            self.route,
            self.items[:count],
            None if ids is None else ids[: 16 * count],
            self.now,
            self.ledger,
            self.at,
            self.many,
            self.sizes[:count],
        )
        del self.items[:count], self.sizes[:count]
        if ids is not None:
            self.ids = ids[16 * count :]
        self.at += count
        self.bytes -= head.bytes
        return head

    def frames(self) -> Iterable[OutgoingMessage]:
        if self.ids is None:
            return cast("list[OutgoingMessage]", self.items)
        fields = zip(message_ids(self.ids), self.items, repeat(self.now), repeat(b""), strict=False)
        return map(_new_tuple, repeat(OutgoingMessage), fields)


def _encode(batch: list[_Run], room: int) -> tuple[bytes | bytearray, int]:
    """The batch's bytes and the room in front of them: plain bodies as they are, after
    ``room`` bytes for the request frame to be written around them (:func:`encode_runs`),
    or frames (no room)."""
    if all(run.ids is not None for run in batch):
        runs = [(run.items, cast("bytes", run.ids), run.now) for run in batch]
        return encode_runs(runs, room), room
    return encode_batch([f for run in batch for f in run.frames()]), 0


class Producer(ProducerCore):
    """Publishes to one ``"stream/topic"``. Use ``async with client.producer(address)``."""

    options: ProducerOptions

    def __init__(self, client: ClientLink, address: str, *, options: ProducerOptions) -> None:
        super().__init__(address, options.max_buffer_bytes)
        self._client = client
        self.address = address
        self.stream, self.topic = topic_of(address)
        self.options = options
        self._loop = asyncio.get_running_loop()
        self._conn: Connection | None = None
        self._partitions = 0
        self._cursor = 0
        self._sticky = 0  # keyless messages routed to the current partition so far
        self._buffer: deque[_Run] = deque()
        self._buffered = 0  # messages in the buffer
        self._buffer_bytes = 0
        # batches sent and awaiting their replies (up to the connection's max_in_flight),
        # with what the meter needs to settle them
        self._inflight: dict[
            asyncio.Future[SendConfirmations], tuple[list[_Run], int, tuple[float, object]]
        ] = {}
        self._meter = ProducerMeter(Destination("iggy", address, f"{client.host}:{client.port}"))
        self._born = time.time()
        # the room a batch leaves for its SendMessages frame: the same for every partition
        # (a partition id is always four bytes), so worked out once
        self._frame_room = SendMessages.room_for(
            self.stream, self.topic, Partitioning.partition_id(0)
        )
        self._window = asyncio.Event()  # a batch in flight was answered
        self._work = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

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
    def partition_count(self) -> int:
        """The topic's partitions (known once the producer started)."""
        return self._partitions

    def partition_for_key(self, key: bytes) -> int:
        """The partition a message with ``key`` goes to when neither it nor the producer
        names one: ``XXH32(key) % partitions`` (``MessagesKey``)."""
        if self._partitions < 1:
            raise ClosedError("producer not started: use 'async with' or 'await'")
        return key_partition(key, self._partitions)

    @property
    def pending(self) -> int:
        """Messages accepted but not yet confirmed or failed."""
        return self._buffered + self._inflight_messages()

    @property
    def stats(self) -> ProducerStats:
        """Counters of what this producer published (docs/api.md, "Metrics and tracing")."""
        return self._meter.snapshot()

    # --- sending -------------------------------------------------------------------------

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
        ledger = Ledger(self._loop, 1, self.address, offsets=True)
        self._accept(route, frame, size, None, ledger, 0)
        self._meter.accepted(1, size - 48)
        return ledger.real(0)

    def _accept(
        self,
        route: int,
        frame: OutgoingMessage,
        size: int,
        many: _Many | None,
        ledger: Ledger | None,
        at: int,
    ) -> None:
        """Queue one message, answering to ``many`` or as message ``at`` of ``ledger``."""
        if many is not None:
            many.accepted(1)
        self._queue(_Run(route, [frame], None, 0, ledger, at, many, [size]))
        self._idle.clear()
        self._work.set()

    def _queue(self, run: _Run) -> None:
        self._buffer.append(run)
        self._buffered += len(run)
        self._buffer_bytes += run.bytes

    def _has_room(self, size: int) -> bool:
        o = self.options
        return (
            self._buffered < o.max_buffer_messages
            and self._buffer_bytes + size <= o.max_buffer_bytes
        )

    send_and_wait = and_wait(send)

    async def send_batch(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> list[asyncio.Future[Confirmation]]:
        """Accept several messages in order; returns their confirmation futures (made on use:
        :mod:`streamwire.transport.pending`). Each resolves once, with its ``Confirmation``
        (offset and partition) or its error.

        Cancellation: the messages accepted before the cancellation stay accepted.
        """
        self._check()
        total = bytes_total(values)
        if total is not None:
            futures = await self._send_bodies(cast("Sequence[bytes]", values), timeout, None, total)
            assert futures is not None
            return futures
        items = list(values)
        ledger = Ledger(self._loop, len(items), self.address, offsets=True)
        for at, value in enumerate(items):
            await self._accept_one(value, timeout, None, ledger, at)
        return ledger.futures()

    async def send_many(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> asyncio.Future[BatchConfirmation]:
        """Accept several messages in order with **one** future for all of them: it resolves
        to a :class:`BatchConfirmation` (how many, and the offsets each SendMessages stored)
        once every message is stored, or fails with the first error (the others may be
        stored). The fastest way to send: no per-message future.

        Cancellation: the messages accepted before the cancellation stay accepted; the future
        then covers only those.
        """
        self._check()
        many = _Many(self._loop.create_future(), self.address)
        try:
            total = bytes_total(values)
            if total is not None:
                await self._send_bodies(cast("Sequence[bytes]", values), timeout, many, total)
            else:
                for value in values:
                    await self._accept_one(value, timeout, many)
        finally:
            many.sealed = True
            many.finish()
        return many.future

    async def _accept_one(
        self,
        value: bytes | Message,
        timeout: float | None,
        many: _Many | None,
        ledger: Ledger | None = None,
        at: int = 0,
    ) -> None:
        route, frame = self._prepare(value, None, None, None)
        size = len(frame.payload) + len(frame.user_headers) + 48
        if not self._has_room(size):
            self._work.set()
            await self._wait_for_room(size, timeout)
        self._accept(route, frame, size, many, ledger, at)
        self._meter.accepted(1, size - 48)

    async def _send_bodies(
        self,
        values: Sequence[bytes],
        timeout: float | None,
        many: _Many | None,
        total: int,
    ) -> list[asyncio.Future[Confirmation]] | None:
        """``send_batch``/``send_many`` of plain ``bytes`` (``total`` bytes of them): no key,
        no headers, so the bodies are queued as they are, with ids drawn at once and one
        origin time for the call (they are encoded as they are, :func:`encode_runs`). As many
        messages as the buffer has room for are accepted as one run per route, by slicing
        and ``map`` (no Python bytecode per message: the futures of ``send_batch`` are made
        on use); a call the buffer takes whole needs no per-message size at all."""
        now = time.time_ns() // 1000
        fixed = self._fixed(None)
        ids = random_message_id_bytes(len(values))
        futures: list[asyncio.Future[Confirmation]] | None = None if many else []
        o = self.options
        start, count, accepted = 0, len(values), False
        while start < count:
            take = min(count - start, o.max_buffer_messages - self._buffered)
            part = list(values[start : start + take]) if take > 0 else []
            room = o.max_buffer_bytes - self._buffer_bytes
            sizes: list[int] | None = None
            nbytes = total + 48 * count
            if take != count or nbytes > room:  # a part of the call: sizes decide where
                sizes = list(map(_PLUS_FRAME, map(len, part)))
                if sizes and sum(sizes) > room:
                    del sizes[bisect_right(list(accumulate(sizes)), room) :]
                    del part[len(sizes) :]
                nbytes = sum(sizes)
            if not part:
                if accepted:
                    self._idle.clear()
                self._work.set()
                await self._wait_for_room(len(values[start]) + 48, timeout)
                continue
            n = len(part)
            routes = [(fixed, n)] if fixed is not None else self._balanced_run(n)
            at = 0
            for route, k in routes:
                ledger = None
                if many is None:
                    ledger = Ledger(self._loop, k, self.address, offsets=True)
                    assert futures is not None
                    futures += ledger.futures()
                else:
                    many.accepted(k)
                items = part if k == n else part[at : at + k]
                run_sizes = None if sizes is None else sizes[at : at + k]
                run_bytes = nbytes if k == n else (bytes_total(items) or 0) + 48 * k
                run_ids = ids[16 * (start + at) : 16 * (start + at + k)]
                self._queue(_Run(route, items, run_ids, now, ledger, 0, many, run_sizes, run_bytes))
                at += k
            start += n
            accepted = True
            self._meter.accepted(n, nbytes - 48 * n)
        if accepted:
            self._idle.clear()
            self._work.set()
        return futures

    def _balanced_run(self, count: int) -> list[tuple[int, int]]:
        """The routes of ``count`` keyless messages as ``(partition, how many)`` in order:
        what :meth:`_balanced` gives called ``count`` times."""
        routes: list[tuple[int, int]] = []
        per_partition = self.options.max_batch_messages
        left = count
        while left:
            n = min(left, per_partition - self._sticky)
            routes.append((self._cursor % max(self._partitions, 1), n))
            left -= n
            self._sticky += n
            if self._sticky >= per_partition:
                self._cursor, self._sticky = self._cursor + 1, 0
        return routes

    async def _flush_wire(self) -> None:
        self._work.set()  # a lingering sender sends what is buffered now

    # --- the sender task -----------------------------------------------------------------

    async def _send_loop(self) -> None:
        while True:
            await self._work.wait()
            if not self._buffer:
                self._work.clear()
                self._settle()
                continue
            o = self.options
            if o.linger and self._buffered < o.max_batch_messages:
                await asyncio.sleep(o.linger)
            limit, most = self._client.settings.max_in_flight, o.max_in_flight
            # wait here, not on the connection: if it is lost meanwhile, the next batch goes
            # over a new one
            while len(self._inflight) >= limit or (
                self._inflight and self._inflight_messages() >= most
            ):
                self._window.clear()
                await self._window.wait()
            batch, partition = self._take_batch()
            self._room.set()
            await self._send(batch, partition)
            self._settle()

    def _inflight_messages(self) -> int:
        """Messages sent and not answered yet (a handful of batches: cheap to count)."""
        return sum(len(r) for runs, _, _ in self._inflight.values() for r in runs)

    def _settle(self) -> None:
        if not self._buffer and not self._inflight:
            self._idle.set()

    def _take_batch(self) -> tuple[list[_Run], int]:
        """The oldest queued messages of the first queued message's partition, in order,
        up to the batch limits (a run is split where they cut it); the others stay queued
        in their order."""
        buffer = self._buffer
        route = buffer[0].route
        o = self.options
        taken: list[_Run] = []
        rest: deque[_Run] = deque()
        count = size = 0
        while buffer:
            run = buffer.popleft()
            if run.route != route:
                rest.append(run)
                continue
            whole = len(run)
            k = min(whole, o.max_batch_messages - count)
            part = run.bytes if k == whole else sum(run.sizes[:k])
            if size + part > o.max_batch_bytes:
                k = bisect_right(list(accumulate(run.sizes[:k])), o.max_batch_bytes - size)
                k = k or (0 if count else 1)  # a batch takes at least one message
            if k == whole:
                taken.append(run)
                count += k
                size += run.bytes
                if count < o.max_batch_messages:
                    continue
                break
            if k:
                head = run.split(k)
                taken.append(head)
                count += k
                size += head.bytes
            rest.append(run)  # what is left of it waits for the next batch
            break
        rest.extend(buffer)
        self._buffer = rest
        self._buffered -= count
        self._buffer_bytes -= size
        if self._sticky and route == self._cursor % max(self._partitions, 1):
            self._cursor, self._sticky = self._cursor + 1, 0
        return taken, route

    async def _send(self, batch: list[_Run], partition: int) -> None:
        """Send one batch; its reply resolves the futures later (:meth:`_confirmed`), so the
        next batch can go out meanwhile (the connection's ``max_in_flight``)."""
        # The meter's latency starts when the oldest message was accepted: its origin time,
        # unless the application set that (then at most since the producer started).
        count = sum(map(len, batch))
        waited = time.time() - _origin_us(batch[0]) / 1e6
        waited = min(max(0.0, waited), time.time() - self._born)
        started = self._meter.begin(count, 0, waited)
        try:
            partitioning = Partitioning.partition_id(partition)
            encoded, room = _encode(batch, self._frame_room)
            request = SendMessages(
                stream=self.stream,
                topic=self.topic,
                partitioning=partitioning,
                messages_count=count,
                batch=encoded,
                room=room,
            )
            conn = await self._connection()
            reply = await conn.submit(request)
        except asyncio.CancelledError:
            self._fail_entries(batch, ClosedError(f"producer for {self.address!r} closed"))
            self._meter.settled(started, 0, count)
            raise
        except StreamwireError as exc:
            logger.debug("send to %s partition %d failed: %s", self.address, partition, exc)
            self._fail_entries(batch, exc)
            self._meter.settled(started, 0, count)
            return
        self._inflight[reply] = (batch, partition, started)
        reply.add_done_callback(self._confirmed)

    def _confirmed(self, reply: asyncio.Future[SendConfirmations]) -> None:
        batch, partition, started = self._inflight.pop(reply)
        count = sum(map(len, batch))
        self._window.set()
        try:
            if reply.cancelled():
                self._fail_entries(batch, ClosedError(f"producer for {self.address!r} closed"))
                self._meter.settled(started, 0, count)
            elif (exc := reply.exception()) is not None:
                logger.debug("send to %s partition %d failed: %s", self.address, partition, exc)
                self._fail_entries(batch, exc)
                self._meter.settled(started, 0, count)
            else:
                self._resolve(batch, partition, reply.result())
                self._meter.settled(started, count, 0)
        finally:
            self._settle()

    def _resolve(self, batch: list[_Run], partition: int, reply: SendConfirmations) -> None:
        base = None
        for sent in reply.confirmations:
            if sent.partition_id == partition:
                base = sent.base_offset
        at = 0 if base is None else base
        for run in batch:
            n = len(run)
            if run.ledger is not None:
                run.ledger.confirm(run.at, n, None if base is None else at, partition)
            if run.many is not None:
                run.many.stored(n, partition, None if base is None else at)
            at += n

    def _fail_entries(self, batch: Iterable[_Run], exc: BaseException) -> None:
        self._note_failure(exc)
        for run in batch:
            if run.ledger is not None:
                run.ledger.fail(run.at, len(run), exc)
            if run.many is not None:
                run.many.failed(len(run), exc)

    # --- closing -------------------------------------------------------------------------

    async def _close_wire(self) -> None:
        """Stop the sender and close the connection (messages still unconfirmed afterwards
        fail with :class:`ClosedError`)."""
        await cancel_and_wait(self._sender, timeout=1.0)
        self._fail_buffered()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        if self._inflight:  # their replies are settled once the connection is closed
            await asyncio.wait(list(self._inflight), timeout=1.0)

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
        self._buffered = self._buffer_bytes = 0
        self._fail_entries(
            left, ClosedError(f"producer for {self.address!r} closed before confirmation")
        )
        if count := sum(map(len, left)):
            self._meter.settled(self._meter.begin(count, 0), 0, count)
        self._room.set()
        self._idle.set()
