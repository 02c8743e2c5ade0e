"""RabbitMQ Streams producer: bounded buffer, batched Publish frames, confirm futures,
deduplication with a named producer, and re-sending after a reconnect.

Flow: ``send()`` encodes the message, gives it the next publishing id and puts it in the
buffer (waiting while the buffer is full); a sender task packs buffered messages into Publish
frames no larger than the connection's frame_max, as long as fewer than ``max_in_flight``
messages await confirmation. Confirms and errors resolve the per-message futures; a confirm
that opens the window writes the frames that now fit at once, from the reader's callback
(the sender task takes over whenever the socket's send buffer is above its high-water mark).

With ``name`` the broker deduplicates by publishing id: on start the producer asks the broker
for the last id stored under that name and continues after it, so re-sending after a crash
or a reconnect never stores a message twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Self, cast

from streamwire.codec.amqp import encode_data_body
from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message, outgoing
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    StreamwireError,
)
from streamwire.metrics import Destination, ProducerMeter, ProducerStats
from streamwire.rabbitmq._amqp_map import encode_message
from streamwire.rabbitmq._link import ClientLink
from streamwire.rabbitmq._outbox import Batch, BatchConfirmation, Group, Outbox
from streamwire.rabbitmq._recovery import Recovery
from streamwire.rabbitmq.protocol.connection import SimpleResponse
from streamwire.rabbitmq.protocol.constants import CommandKey
from streamwire.rabbitmq.protocol.errors import ERRORS
from streamwire.rabbitmq.protocol.publishing import (
    MAX_SUB_BATCH_RECORDS,
    SUB_BATCH_CODECS,
    DeclarePublisherRequest,
    DeletePublisherRequest,
    QueryPublisherSequenceRequest,
    QueryPublisherSequenceResponse,
    bytes_total,
    encode_sub_batch,
    encode_sub_batch_bodies,
    validate_reference,
)
from streamwire.transport.pending import Ledger
from streamwire.transport.producer_core import ProducerCore, and_wait
from streamwire.transport.tasks import cancel_now, cancel_tasks

if TYPE_CHECKING:
    from streamwire.rabbitmq._connection import Connection

__all__ = ("BatchConfirmation", "Producer", "ProducerOptions")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerOptions:
    max_buffer_messages: int = 10_000
    """Messages accepted by ``send`` but not yet written to the socket."""
    max_buffer_bytes: int = 32 * 1024 * 1024
    max_in_flight: int = 10_000
    """Messages written but not yet confirmed (the broker blocks at 50 000 per connection)."""
    max_frame_messages: int = 1_000
    """Entries per Publish frame at most (frames also stay under the connection's
    ``frame_max``). Several moderate frames in flight keep the broker storing one while the
    client encodes the next and confirms come back; one huge frame leaves both sides
    waiting in turn. Frames of small messages also stay small enough (~120 KB at 100 B)
    for the allocator to reuse their memory: 3 000 × 100 B frames cost a fresh mapping and
    its page faults each, three times the CPU per message to build and write."""
    max_block: float | None = 30.0
    """How long ``send`` waits for room in a full buffer before raising ProducerBufferFull."""
    confirm_timeout: float | None = 30.0
    """``send_and_wait`` and ``flush`` give up after this long by default."""
    amqp: bool = True
    """Wrap values in AMQP 1.0 messages (what every RabbitMQ client expects); False sends the
    raw bytes as they are."""
    filter_value: Callable[[Message], str | None] | None = None
    """Extract a filter value per message (RabbitMQ 3.13+ filtering: Publish v2)."""
    sub_batch_size: int = 0
    """With ``send_batch``/``send_many``, pack up to this many messages into one sub-batch
    entry stored under a single publishing id (0: off). ``send`` always sends one entry."""
    compression: str = "none"
    """Sub-batch compression: none, gzip, snappy, lz4 or zstd (every consumer must know it)."""

    def __post_init__(self) -> None:
        for name in (
            "max_buffer_messages",
            "max_buffer_bytes",
            "max_in_flight",
            "max_frame_messages",
        ):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1")
        if not 0 <= self.sub_batch_size <= MAX_SUB_BATCH_RECORDS:
            raise ConfigurationError("sub_batch_size must be between 0 and 65535")
        if self.compression not in SUB_BATCH_CODECS:
            raise ConfigurationError(f"unknown compression {self.compression!r}")
        if self.compression != "none" and not self.sub_batch_size:
            raise ConfigurationError("compression applies to sub-batches: set sub_batch_size")
        if self.sub_batch_size and self.filter_value is not None:
            raise ConfigurationError("filtered publishing (Publish v2) cannot use sub-batches")


def _futures(group: Group) -> list[asyncio.Future[Confirmation]]:
    assert group.ledger is not None  # accepted with futures=True
    return group.ledger.futures()


class Producer(Recovery, ProducerCore):
    """Publishes to one stream. Use ``async with client.producer(stream) as p``."""

    options: ProducerOptions
    ROLE = "producer"

    def __init__(
        self, client: ClientLink, stream: str, *, name: str | None = None, options: ProducerOptions
    ) -> None:
        if name is not None:
            if not name:
                raise ConfigurationError("a producer name must not be empty")
            validate_reference(name)
        super().__init__(stream, options.max_buffer_bytes)
        self._client = client
        self.stream = stream
        self.name = name
        self.options = options
        self._loop = asyncio.get_running_loop()
        self._conn: Connection | None = None
        self._publisher_id = -1
        self._next_id = 1
        self._meter = ProducerMeter(Destination("rabbitmq", stream, f"{client.host}:{client.port}"))
        self._outbox = Outbox(stream, self._meter)
        self._work = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._recovering: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Declare the publisher (and read the dedup sequence if named).

        Cancellation: nothing was declared, or the declaration is removed with the
        connection; the producer is unusable.
        """
        async with asyncio.timeout(timeout):
            await self._declare()
        self._sender = asyncio.create_task(
            self._send_loop(), name=f"streamwire-producer {self.stream}"
        )
        return self

    def _is_started(self) -> bool:
        return self._sender is not None

    async def _declare(self) -> None:
        conn = await self._client._leader_connection(self.stream)
        if self.options.filter_value is not None and not conn.machine.supports(
            CommandKey.PUBLISH, 2
        ):
            raise ConfigurationError("this broker cannot filter (needs 3.13+ with filtering)")
        pid = conn.free_publisher_id()
        conn.add_publisher(pid, self)
        try:
            await conn.request(
                lambda corr: DeclarePublisherRequest(corr, pid, self.name or "", self.stream),
                SimpleResponse,
            )
            if self.name:
                seq = await conn.request(
                    lambda corr: QueryPublisherSequenceRequest(corr, self.name or "", self.stream),
                    QueryPublisherSequenceResponse,
                )
                self._next_id = max(self._next_id, seq.sequence + 1)
        except BaseException:
            conn.remove_publisher(pid)
            raise
        self._conn = conn
        self._publisher_id = pid
        if self._meter.where.address != conn.address:  # the leader's node
            self._meter.where = Destination("rabbitmq", self.stream, conn.address)

    @property
    def next_publishing_id(self) -> int:
        """The id the next message gets (for a named producer: last stored + 1 at start)."""
        return self._next_id

    @property
    def last_publishing_id(self) -> int:
        """The last id given out (0 if none)."""
        return self._next_id - 1

    @property
    def pending(self) -> int:
        """Messages accepted but not yet confirmed or failed."""
        return self._outbox.pending

    @property
    def stats(self) -> ProducerStats:
        """Counters of what this producer published (docs/api.md, "Metrics and tracing")."""
        return self._meter.snapshot()

    # --- accepting -----------------------------------------------------------------------

    def _encode(self, value: bytes | Message) -> tuple[bytes, str | None]:
        opts = self.options
        if type(value) is bytes and opts.filter_value is None:
            return (encode_data_body(value) if opts.amqp else value), None
        if isinstance(value, Message):
            msg = value
        elif isinstance(value, bytes | bytearray | memoryview):
            msg = Message(value)
        else:
            raise ConfigurationError(f"message value must be bytes, got {type(value).__name__}")
        data = encode_message(msg) if opts.amqp else msg.value
        return data, (opts.filter_value(msg) if opts.filter_value is not None else None)

    def _has_room(self, size: int) -> bool:
        box, opts = self._outbox, self.options
        return (
            box.unwritten < opts.max_buffer_messages
            and box.unwritten_bytes + size <= opts.max_buffer_bytes
        )

    def _add(
        self,
        data: list[bytes],
        filters: list[str | None] | None,
        *,
        futures: bool,
        batch: Batch | None = None,
        first: int | None = None,
        entries: bool = False,
        wrap: bool = False,
        messages: int | None = None,
        nbytes: int | None = None,
    ) -> Group:
        """Accept ``data`` as one group (``nbytes``: their total size, if known)."""
        first = self._next_id if first is None else first
        if first < 0 or first + len(data) > 1 << 64:
            raise ConfigurationError(f"publishing id {first} does not fit in uint64")
        group = Group(
            first,
            data,
            filters if self.options.filter_value is not None else None,
            Ledger(self._loop, len(data), self.stream, first_id=first) if futures else None,
            batch,
            entries=entries,
            wrap=wrap,
            messages=messages,
        )
        self._outbox.add(group, nbytes)
        self._next_id = max(self._next_id, first + len(data))
        self._idle.clear()
        self._work.set()
        return group

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        publishing_id: int | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Accept one message; returns the future of its confirmation.

        ``publishing_id`` overrides the next id (to replay ids for exactly-once resumption;
        the broker drops ids not above the last one stored under the producer's name).
        Waits for room while the buffer is full, up to ``timeout`` (default ``max_block``),
        then raises :class:`ProducerBufferFull`.

        Cancellation: a message whose ``send`` is cancelled was not accepted. Cancelling the
        returned future does not stop its delivery.
        """
        self._check()
        if key is not None or headers:
            value = outgoing(value, key, headers)
        data, fv = self._encode(value)
        await self._wait_for_room(len(data), timeout)
        self._check()
        group = self._add([data], [fv], futures=True, first=publishing_id)
        assert group.ledger is not None  # futures=True
        return group.ledger.real(0)

    send_and_wait = and_wait(send)

    async def _accept_many(
        self,
        values: Iterable[bytes | Message],
        timeout: float | None,
        *,
        futures: bool,
        batch: Batch | None,
        first: int | None = None,
    ) -> list[Group]:
        """Encode and accept ``values`` as groups that fit the buffer, waiting for room;
        ``first``: the publishing id of the first message (default: the next id)."""
        opts = self.options
        if opts.sub_batch_size:
            accepted = await self._accept_entries(
                values, timeout, futures=futures, batch=batch, first=first
            )
            return accepted[0]
        fast = opts.filter_value is None
        total = bytes_total(values) if fast else None
        if total is not None:
            bodies = cast("Sequence[bytes]", values)
            return await self._accept_bodies(
                bodies, total, timeout, futures=futures, batch=batch, first=first
            )
        encode = self._encode
        groups: list[Group] = []
        data: list[bytes] = []
        filters: list[str | None] = []
        size = 0
        room_messages = opts.max_buffer_messages - self._outbox.unwritten
        room_bytes = opts.max_buffer_bytes - self._outbox.unwritten_bytes
        for value in values:
            if fast and type(value) is bytes and opts.amqp:
                body = encode_data_body(value)
                fv = None
            else:
                body, fv = encode(value)
            n = len(body)
            if len(data) >= room_messages or size + n > room_bytes:
                if data:
                    groups.append(
                        self._add(data, filters, futures=futures, batch=batch, first=first)
                    )
                    first = None if first is None else first + len(data)
                    data, filters, size = [], [], 0
                await self._wait_for_room(n, timeout)
                self._check()
                room_messages = opts.max_buffer_messages - self._outbox.unwritten
                room_bytes = opts.max_buffer_bytes - self._outbox.unwritten_bytes
            data.append(body)
            filters.append(fv)
            size += n
        if data:
            groups.append(self._add(data, filters, futures=futures, batch=batch, first=first))
        return groups

    async def _accept_bodies(
        self,
        values: Sequence[bytes],
        total: int,
        timeout: float | None,
        *,
        futures: bool,
        batch: Batch | None,
        first: int | None = None,
    ) -> list[Group]:
        """The fast path of :meth:`_accept_many` for a list of plain ``bytes`` bodies
        (``total`` bytes together): they are kept as given (the AMQP data section is written
        around them when the frame is built), in as few groups as the buffer's room allows."""
        opts, box = self.options, self._outbox
        wrap = opts.amqp
        groups: list[Group] = []
        start, count = 0, len(values)
        while start < count:
            take = min(count - start, opts.max_buffer_messages - box.unwritten)
            room_bytes = opts.max_buffer_bytes - box.unwritten_bytes
            # ``values`` is a list or a tuple (``bytes_total``); a slice of a list is a new
            # list already, so the caller's list is never kept and copied only once
            part = values[start : start + take] if take > 0 else []
            chunk = part if type(part) is list else list(part)
            # the sizes are summed only when the call does not fit whole (``total``): in
            # one native pass when the core is loaded
            nbytes = total if take == count else (bytes_total(chunk) or 0)
            if chunk and nbytes > room_bytes:
                ends = list(accumulate(map(len, chunk)))
                take = bisect_right(ends, room_bytes)
                del chunk[take:]
                nbytes = ends[take - 1] if take else 0
            if not chunk:
                await self._wait_for_room(len(values[start]), timeout)
                self._check()
                continue
            groups.append(
                self._add(
                    chunk,
                    None,
                    futures=futures,
                    batch=batch,
                    wrap=wrap,
                    first=first,
                    nbytes=nbytes,
                )
            )
            first = None if first is None else first + len(chunk)
            start += len(chunk)
        return groups

    async def _accept_entries(
        self,
        values: Iterable[bytes | Message],
        timeout: float | None,
        *,
        futures: bool,
        batch: Batch | None,
        first: int | None = None,
    ) -> tuple[list[Group], list[int]]:
        """Accept ``values`` packed into sub-batch entries of ``sub_batch_size`` messages;
        returns the groups and how many messages each entry holds."""
        opts = self.options
        size, codec = opts.sub_batch_size, opts.compression
        if bytes_total(values) is not None:  # plain bodies: each entry in one pass
            bodies = cast("Sequence[bytes]", values)
            entries = [
                encode_sub_batch_bodies(bodies[i : i + size], codec, opts.amqp)
                for i in range(0, len(bodies), size)
            ]
            total = len(bodies)
        else:
            encoded = [self._encode(v)[0] for v in values]
            entries = [
                encode_sub_batch(encoded[i : i + size], codec) for i in range(0, len(encoded), size)
            ]
            total = len(encoded)
        counts = [min(size, total - i) for i in range(0, total, size)]
        groups: list[Group] = []
        for entry, count in zip(entries, counts, strict=True):
            await self._wait_for_room(len(entry), timeout)
            self._check()
            groups.append(
                self._add(
                    [entry],
                    None,
                    futures=futures,
                    batch=batch,
                    entries=True,
                    messages=count,
                    first=first,
                )
            )
            first = None if first is None else first + 1
        return groups, counts

    async def send_batch(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> list[asyncio.Future[Confirmation]]:
        """Accept several messages in order; returns their confirmation futures.

        The futures are made on use (:mod:`streamwire.transport.pending`): asyncio futures
        that read their message's outcome until something awaits them, is called back by
        them or cancels them. Each resolves once, with its ``Confirmation`` or its error.
        Waits for room like :meth:`send` whenever the buffer is full.

        Cancellation: the messages accepted before the cancellation stay accepted.
        """
        self._check()
        if self.options.sub_batch_size:  # one future per entry, shared by its messages
            entries, counts = await self._accept_entries(values, timeout, futures=True, batch=None)
            return [f for g, n in zip(entries, counts, strict=True) for f in _futures(g) * n]
        groups = await self._accept_many(values, timeout, futures=True, batch=None)
        if len(groups) == 1:
            return _futures(groups[0])
        return [f for g in groups for f in _futures(g)]

    async def send_many(
        self,
        values: Iterable[bytes | Message],
        *,
        publishing_id: int | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[BatchConfirmation]:
        """Accept several messages in order with **one** future for all of them: it resolves
        to a :class:`BatchConfirmation` (first/last publishing id, count) once every message
        is stored, or fails with the first error (the others may be stored). The fastest
        way to publish: no per-message future.

        ``publishing_id`` overrides the id of the first message, the others following it
        one by one (to replay ids for exactly-once resumption, as with :meth:`send`; with
        ``sub_batch_size`` each entry takes one id).

        Cancellation: the messages accepted before the cancellation stay accepted; the future
        then covers only those.
        """
        self._check()
        future: asyncio.Future[BatchConfirmation] = self._loop.create_future()
        batch = Batch(future)
        await self._accept_many(values, timeout, futures=False, batch=batch, first=publishing_id)
        if not batch.groups and not future.done():
            future.set_result(BatchConfirmation(self._next_id, self._next_id - 1, 0, self.stream))
        return future

    def _take_failure(self) -> BaseException | None:
        failure, self._outbox.first_failure = self._outbox.first_failure, None
        if failure is not None:
            self._note_failure(failure)
        return super()._take_failure()

    # --- the sender task -----------------------------------------------------------------

    def _next_frame(self, conn: Connection) -> bytes | None:
        """The next Publish frame the window has room for, or None (nothing waiting, no
        room). Taking messages out of the buffer wakes a sender waiting for room."""
        box, opts = self._outbox, self.options
        room = opts.max_in_flight - box.in_flight
        if room <= 0 or not box.unwritten:
            return None
        frame = box.next_frame(
            self._publisher_id,
            conn.frame_max,
            min(room, opts.max_frame_messages),
            opts.filter_value is not None,
        )
        self._room.set()
        return frame

    async def _send_loop(self) -> None:
        """Write frames while messages wait and the window has room, waiting for TCP flow
        control after each (new messages wake it; so do confirms the window could not take
        at once, see :meth:`_write_ready`)."""
        while True:
            await self._work.wait()
            conn = self._conn
            frame = None
            if conn is not None and self._recovering is None:
                frame = self._next_frame(conn)
            if conn is None or frame is None:
                self._work.clear()
                self._settle()
                continue
            try:
                await conn.send_encoded(frame)
            except StreamwireError as exc:
                logger.debug("publish on %s failed: %s", self.stream, exc)
                self._work.clear()  # the connection listener takes it from here

    def _write_ready(self) -> None:
        """Right after a confirm opened the window: write the frames that fit now, from the
        reader's callback, as long as the socket's send buffer is below its high-water mark,
        instead of waking the sender task for each. The next frame leaves in the same step
        of the event loop as the confirm that made room for it; the window bounds what this
        writes (at most the messages just confirmed), and a backlogged socket leaves the
        rest to the sender, which waits for flow control."""
        conn = self._conn
        if conn is None or self._recovering is not None:
            return
        try:
            while not conn.backlogged:
                frame = self._next_frame(conn)
                if frame is None:
                    return
                conn.send_nowait(frame)
        except StreamwireError as exc:
            logger.debug("publish on %s failed: %s", self.stream, exc)
            # the connection listener takes it from here

    def _settle(self) -> None:
        box = self._outbox
        if not box.unwritten:
            self._work.clear()
        if not box.pending:
            self._idle.set()

    # --- connection listener -------------------------------------------------------------

    def confirmed(self, publishing_ids: tuple[int, ...]) -> None:
        self._outbox.confirm(publishing_ids)
        if self._outbox.unwritten:
            self._write_ready()
        self._moved()

    def errored(self, errors: tuple[tuple[int, int], ...]) -> None:
        for pid, code in errors:
            self._outbox.fail(
                pid, ERRORS.from_code(code, f"publishing id {pid} on {self.stream!r}")
            )
        self._moved()

    def _moved(self) -> None:
        box = self._outbox
        if box.unwritten:
            self._work.set()
        elif not box.pending:
            self._idle.set()

    def _detach(self, conn: Connection) -> None:
        conn.remove_publisher(self._publisher_id)

    def _give_up(self, exc: StreamwireError) -> None:
        self._fail_all(exc)

    async def _recover(self, cause: StreamwireError) -> None:
        """Re-declare and re-send every unresolved message with its original id."""
        try:
            await self._client.retry(self._declare, cause, what=f"producer on {self.stream!r}")
        except StreamwireError as exc:
            self._recovering = None
            self._fail_all(exc)
            return
        except asyncio.CancelledError:
            self._recovering = None
            raise
        self._outbox.rewind()
        self._recovering = None
        logger.info(
            "producer on %s recovered; re-sending %d messages", self.stream, self._outbox.unwritten
        )
        self._work.set()

    def _fail_pending(self, exc: StreamwireError) -> None:
        self._outbox.fail_all(exc)

    async def _close_wire(self) -> None:
        """Stop the sender and delete the publisher (messages still unconfirmed afterwards
        fail with :class:`ClosedError` in :meth:`abort`)."""
        await cancel_tasks((self._sender, self._recovering), timeout=1.0)
        conn = self._conn
        if conn is not None and conn.is_open:
            with contextlib.suppress(StreamwireError, TimeoutError):
                await conn.request(
                    lambda corr: DeletePublisherRequest(corr, self._publisher_id),
                    SimpleResponse,
                    timeout=5.0,
                )
            conn.remove_publisher(self._publisher_id)
            self._conn = None

    def abort(self) -> None:
        """Stop at once: tasks are cancelled, the publisher is deleted without waiting for
        the answer, and unconfirmed messages fail with :class:`ClosedError`. Idempotent."""
        self._closed = True
        cancel_now((self._sender, self._recovering))
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.drop_publisher(self._publisher_id)
        if self._outbox.pending:
            self._fail_all(ClosedError(f"producer for {self.stream!r} closed before confirmation"))
        self._room.set()
        self._idle.set()
        self._client._forget_child(self)
