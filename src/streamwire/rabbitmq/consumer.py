"""RabbitMQ Streams consumer: credit-based flow control over a bounded local queue.

Credits count chunks. The consumer subscribes with ``initial_credit`` and grants one more
credit each time it takes a chunk off its local queue, so at most ``initial_credit`` chunks
are ever queued or in flight (the memory bound), and the credit climbs back above half the
initial credit, which brokers since 3.12 wait for before dispatching again.

Records before the requested offset in the first chunk are skipped (the broker always starts
at a chunk boundary). After a connection loss the consumer resubscribes from the offset after
the last message it handed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from streamwire.codec.columns import Columns
from streamwire.codec.message import Message
from streamwire.codec.offset import Offset, OffsetKind, OffsetLike
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    FrameTooLargeError,
    StreamwireError,
)
from streamwire.metrics import ConsumerMeter, ConsumerStats, Destination
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq._columns import chunk_columns
from streamwire.rabbitmq._link import ClientLink
from streamwire.rabbitmq._recovery import Recovery
from streamwire.rabbitmq.protocol import events as ev
from streamwire.rabbitmq.protocol.chunk import parse_chunk_header
from streamwire.rabbitmq.protocol.connection import SimpleResponse
from streamwire.rabbitmq.protocol.constants import CommandKey, OffsetType
from streamwire.rabbitmq.protocol.consuming import (
    Credit,
    StoreOffset,
    SubscribeRequest,
    UnsubscribeRequest,
    offset_spec,
)
from streamwire.rabbitmq.protocol.frames import encode_frame
from streamwire.rabbitmq.protocol.publishing import validate_reference
from streamwire.transport.ready import NATIVE_PAYS, ready_iterator
from streamwire.transport.resources import AsyncStartable, AutoCommit
from streamwire.transport.tasks import cancel_now, cancel_tasks

if TYPE_CHECKING:
    from streamwire.rabbitmq._connection import Connection

__all__ = ("Consumer", "ConsumerOptions")

logger = logging.getLogger(__name__)

_ON_ACTIVATE_TIMEOUT = 30.0
"""Seconds ``on_activate`` may take: the broker gives an activation 60 s to be answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOptions:
    initial_credit: int = 16
    """Chunks the broker may send ahead; also the bound of the local queue."""
    credit_batch: int = 1
    """Credit strategy: grant credits this many at a time — after every ``credit_batch``
    chunks taken off the local queue, one Credit frame for all of them (1: one per chunk,
    the default; more: fewer frames, the broker pauses a little longer). At most
    ``initial_credit``."""
    manual_credit: bool = False
    """Credit strategy: never grant credit on its own; the application calls
    :meth:`Consumer.grant_credit` (the broker sends nothing beyond ``initial_credit`` chunks
    until then). The local queue then holds at most what was granted."""
    verify_crc: bool = True
    """Check each chunk's CRC-32 (zlib) before handing out its messages."""
    amqp: bool = True
    """Decode AMQP 1.0 bodies (False: hand out each record's raw bytes)."""
    auto_commit_messages: int | None = None
    """With a name: store the offset after this many messages (and on close)."""
    auto_commit_interval: float | None = None
    """With a name: store the offset at most this many seconds after a message."""
    properties: dict[str, str] = field(default_factory=dict)
    """Extra subscription properties, passed as they are."""
    single_active: bool = False
    """Single active consumer (3.11+): of the consumers sharing the name on a stream, one
    gets messages; the next takes over, after the last stored offset, when it leaves."""
    super_stream: str | None = None
    """For a partition of a super stream: with ``single_active``, partitions are spread
    over the group's consumers."""
    filter_values: tuple[str, ...] = ()
    """Server-side filtering (3.13+): only chunks that may hold these filter values."""
    match_unfiltered: bool = False
    """With ``filter_values``: also chunks of messages published without a filter value."""
    post_filter: Callable[[Message], bool] | None = None
    """Client-side check per message. Server-side filtering works per chunk (Bloom filters
    have false positives), so a filtered consumer sees other messages unless it checks."""
    on_activate: Callable[[str], OffsetLike | Awaitable[OffsetLike | None] | None] | None = None
    """Single active consumer: called with the stream (a super stream's partition) when the
    broker makes this consumer the active one; returns where to start (``"first"``, an
    offset, ...), e.g. from an external offset store, or ``None`` for the default (after the
    group's stored offset, else the consumer's ``offset``). May be a coroutine function; it
    must answer within 30 s (the broker waits 60 s), else the default is used."""
    from_replica: bool = True
    """Read from one of the stream's replicas when it has any (as the Java client does),
    which keeps consumers off the leader; ``False`` reads from the leader."""

    def __post_init__(self) -> None:
        if not 1 <= self.initial_credit <= 32767:
            raise ConfigurationError("initial_credit must be between 1 and 32767")
        if not 1 <= self.credit_batch <= self.initial_credit:
            raise ConfigurationError("credit_batch must be between 1 and initial_credit")
        values: object = self.filter_values
        if isinstance(values, str) or not all(isinstance(v, str) for v in self.filter_values):
            raise ConfigurationError("filter_values is a sequence of strings")
        object.__setattr__(self, "filter_values", tuple(self.filter_values))
        if self.match_unfiltered and not self.filter_values:
            raise ConfigurationError("match_unfiltered goes with filter_values")

    def subscription_properties(self, name: str | None) -> dict[str, str]:
        props = dict(self.properties)
        if name:
            props.setdefault("name", name)
        if self.single_active:
            if not name:
                raise ConfigurationError("a single active consumer needs a name")
            props["single-active-consumer"] = "true"
        if self.super_stream:
            props["super-stream"] = self.super_stream
        for i, value in enumerate(self.filter_values):
            props[f"filter.{i}"] = value
        if self.match_unfiltered:
            props["match-unfiltered"] = "true"
        return props


class Consumer(Recovery, AsyncStartable):
    """Consumes one stream. ``async for message in consumer`` or ``next_batch()``."""

    __slots__ = ("_last_offset",)
    # a slot: the native ``async for`` iterator stores each message's offset straight into
    # it (streamwire.transport.ready); the other attributes live in the instance dict
    ROLE = "consumer"

    def __init__(
        self,
        client: ClientLink,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        options: ConsumerOptions,
    ) -> None:
        if name is not None:
            validate_reference(name)
        if (options.auto_commit_messages or options.auto_commit_interval) and not name:
            raise ConfigurationError("auto-commit needs a consumer name")
        self._client = client
        self.stream = stream
        self.name = name
        self.options = options
        self.offset = Offset.parse(offset)
        self._conn: Connection | None = None
        self._sid = -1
        self._chunks: deque[ev.ChunkDelivered] = deque()
        self._ready: deque[Message] = deque()
        self._arrived = asyncio.Event()
        self._skip_below = 0
        self._last_offset: int | None = None
        self._next_offset: int | None = None
        self._committed: int | None = None
        self._meter = ConsumerMeter(Destination("rabbitmq", stream, f"{client.host}:{client.port}"))
        self._auto = AutoCommit(options.auto_commit_messages, options.auto_commit_interval)
        self._error: StreamwireError | None = None
        self._closed = False
        self._started = False
        self._recovering: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._credit_frame: bytes | None = None
        self._owed = 0  # chunks taken whose credit is not granted yet (credit_batch > 1)
        self._initial: tuple[int, int | None] = (OffsetType.FIRST, None)
        self.active = not options.single_active
        """False while a single active consumer waits for its turn."""

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Subscribe. Cancellation: the subscription, if made, ends with the consumer."""
        async with asyncio.timeout(timeout):
            await self._subscribe(self.offset)
        self._started = True
        return self

    def _is_started(self) -> bool:
        return bool(self._started)

    async def _resolve(self, conn: Connection, offset: Offset) -> tuple[int, int | None]:
        """Offset spec for Subscribe: ``next`` with a name resumes after the stored offset."""
        kind = offset.kind
        if kind is OffsetKind.NEXT and self.name:
            stored = await self._query_offset(conn)
            if stored is not None:
                return OffsetType.OFFSET, stored + 1
        return offset_spec(offset)

    async def _query_offset(self, conn: Connection) -> int | None:
        return await conn.query_offset(self.stream, self.name or "")

    async def _subscribe(self, offset: Offset) -> None:
        conn = await self._client._consumer_connection(
            self.stream, replica=self.options.from_replica
        )
        if self.options.filter_values and not conn.machine.supports(CommandKey.PUBLISH, 2):
            raise ConfigurationError("this broker cannot filter (needs 3.13+ with filtering)")
        if self.options.single_active and conn.machine.server_version() < (3, 11):
            raise ConfigurationError("single active consumer needs RabbitMQ 3.11+")
        sid = conn.free_subscription_id()  # taken now: other consumers may look for room
        conn.add_subscriber(sid, self)
        try:
            offset_type, value = await self._resolve(conn, offset)
        except BaseException:
            conn.remove_subscriber(sid)
            raise
        self._skip_below = value if offset_type == OffsetType.OFFSET and value is not None else 0
        props = self.options.subscription_properties(self.name)
        if self._meter.where.address != conn.address:
            self._meter.where = Destination("rabbitmq", self.stream, conn.address)
        # Set before subscribing: a ConsumerUpdate may arrive right behind the answer.
        self._conn, self._sid, self._initial = conn, sid, (offset_type, value)
        self._credit_frame = None
        self._owed = 0
        try:
            await conn.request(
                lambda corr: SubscribeRequest(
                    corr, sid, self.stream, offset_type, value, self.options.initial_credit, props
                ),
                SimpleResponse,
            )
        except BaseException:
            conn.remove_subscriber(sid)
            self._conn = None
            raise

    # --- consuming -----------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        """``async for``: ready messages without a coroutine each (with the native core,
        :mod:`streamwire.transport.ready`), else :meth:`__anext__`."""
        if self.name is not None or not NATIVE_PAYS:
            # auto-commit counts every message; else __anext__ is the twin
            return self
        return ready_iterator(self._ready, self, "_last_offset", "offset", self.__anext__)

    async def __anext__(self) -> Message:
        """The next message; ends when the consumer is closed, raises if it failed.

        Cancellation: nothing is lost; the message stays queued.
        """
        ready = self._ready
        if not ready and not await self._fill(None):
            raise StopAsyncIteration
        msg = ready.popleft()
        # _handed_out(msg), inlined: this runs once per message
        self._last_offset = msg.offset
        if self.name is not None and self._auto.handed_out(1):
            self._store(self._last_offset)
        return msg

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if none arrived within ``timeout``."""
        if not self._ready and not await self._fill(timeout):
            if self._closed:
                raise ClosedError(f"consumer of {self.stream!r} is closed")
            return None
        msg = self._ready.popleft()
        self._handed_out(msg)
        return msg

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages: whatever is ready, else what arrives first within
        ``timeout`` (an empty list if nothing did).

        Cancellation: nothing is lost.
        """
        if not self._ready:
            await self._fill(timeout)
        ready = self._ready
        out: list[Message] = []
        while len(out) < max_messages:
            if not ready:
                if not self._chunks:
                    break
                self._take_chunk()
                continue
            need = max_messages - len(out)
            if len(ready) <= need:
                out.extend(ready)
                ready.clear()
            else:
                popleft = ready.popleft
                out.extend([popleft() for _ in range(need)])
        if out:
            self._handed_out(out[-1], len(out))
        return out

    async def _fill(self, timeout: float | None) -> bool:
        """Make messages ready; False on timeout or when closed."""
        while not self._ready:
            if not self._chunks and not await self._delivered(timeout):
                return False
            self._take_chunk()
        return True

    def _take_chunk(self) -> None:
        event = self._pop_chunk()
        chunk = event.chunk
        msgs = decode_chunk(
            chunk,
            stream=self.stream,
            skip_below=self._skip_below,
            verify_crc=self.options.verify_crc,
            amqp=self.options.amqp,
        )
        post_filter = self.options.post_filter
        ready = msgs if post_filter is None else [m for m in msgs if post_filter(m)]
        self._ready.extend(ready)
        self._taken(event, len(ready))

    def _pop_chunk(self) -> ev.ChunkDelivered:
        """The next delivered chunk, granting credit for it."""
        event = self._chunks.popleft()
        conn = self._conn
        if conn is not None and conn.is_open and not self.options.manual_credit:
            self._owed += 1
            if self._owed >= self.options.credit_batch:
                if self._credit_frame is None:
                    self._credit_frame = encode_frame(Credit(self._sid, self._owed))
                conn.send_nowait(self._credit_frame)
                self._owed = 0
        return event

    def _taken(self, event: ev.ChunkDelivered, count: int) -> None:
        """Bookkeeping for a chunk taken, ``count`` of its messages to be handed over."""
        chunk = event.chunk
        header = parse_chunk_header(chunk)
        self._next_offset = header.chunk_id + header.num_records
        # counted per chunk taken to be handed over (stats subtracts what is still queued)
        meter = self._meter
        meter.stream_ends_at(event.committed_chunk_id)  # Deliver v2 (3.13+) carries it
        meter.received(count, len(chunk), self._next_offset - 1)

    async def next_columns(
        self, max_chunks: int = 16, timeout: float | None = 1.0
    ) -> list[Columns | list[Message]]:
        """Bulk reading for columnar readers (the Spark source): like :meth:`next_batch`, but
        each delivered chunk whose records are all plain bodies comes as one
        :class:`~streamwire.codec.columns.Columns` (bodies and offsets in two buffers) instead
        of a ``Message`` each; other chunks come as their messages. Up to ``max_chunks``
        chunks: whatever is delivered, else what arrives first within ``timeout`` (``[]`` if
        nothing did). Messages already decoded (by ``next``/``next_batch``) come first, as
        one list. Not with ``post_filter`` (it needs messages).

        Cancellation: nothing is lost.
        """
        if self.options.post_filter is not None:
            raise ConfigurationError("next_columns cannot apply a post_filter")
        out: list[Columns | list[Message]] = []
        if self._ready:
            out.append(await self.next_batch(len(self._ready), timeout))
            return out
        if not self._chunks and not await self._delivered(timeout):
            return out
        opts = self.options
        while self._chunks and len(out) < max_chunks:
            event = self._pop_chunk()
            cols = chunk_columns(
                event.chunk, skip_below=self._skip_below, verify_crc=opts.verify_crc, amqp=opts.amqp
            )
            if cols is None:  # not all plain bodies (the CRC, if asked for, is checked)
                msgs = decode_chunk(
                    event.chunk,
                    stream=self.stream,
                    skip_below=self._skip_below,
                    verify_crc=False,
                    amqp=opts.amqp,
                )
                self._taken(event, len(msgs))
                if msgs:
                    out.append(msgs)
                    self._handed_out(msgs[-1], len(msgs))
                continue
            self._taken(event, cols.count)
            if cols.count:
                out.append(cols)
                self._last_offset = int.from_bytes(cols.offsets[-8:], sys.byteorder, signed=True)
                if self.name is not None and self._auto.handed_out(cols.count):
                    self._store(self._last_offset)
        return out

    async def _delivered(self, timeout: float | None) -> bool:
        """Wait for a delivered chunk; False on timeout or when closed."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._closed:
                return False
            self._arrived.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._arrived.wait()
            except TimeoutError:
                return False
        return True

    def _handed_out(self, last: Message, count: int = 1) -> None:
        self._last_offset = last.offset
        if self.name is not None and self._auto.handed_out(count):
            self._store(self._last_offset)

    # --- offsets -------------------------------------------------------------------------

    def _store(self, offset: int | None) -> None:
        conn = self._conn
        if offset is None or self.name is None or conn is None or not conn.is_open:
            return
        conn.send_nowait(StoreOffset(self.name, self.stream, offset))
        self._committed = offset
        self._meter.committed(offset)
        self._auto.stored()

    async def commit(self, offset: int | None = None) -> None:
        """Store ``offset`` (default: the last message handed out) under the consumer name.

        The broker never answers StoreOffset; :meth:`committed_offset` reads it back.

        Cancellation: the offset may or may not have been stored.
        """
        if self.name is None:
            raise ConfigurationError("commit() needs a consumer name")
        offset = self._last_offset if offset is None else offset
        if offset is None:
            return
        conn = self._conn
        if conn is None:
            raise self._error or ClosedError("consumer is not subscribed")
        await conn.send(StoreOffset(self.name, self.stream, offset))
        self._committed = offset
        self._meter.committed(offset)
        self._auto.stored()

    def grant_credit(self, chunks: int = 1) -> None:
        """Let the broker send ``chunks`` more chunks (with ``manual_credit=True``; with the
        automatic strategies this adds to what they grant). Raises :class:`ClosedError` when
        the consumer is closed or not subscribed."""
        if not 1 <= chunks <= 0xFFFF:
            raise ConfigurationError("chunks must be between 1 and 65535")
        conn = self._conn
        if self._closed or conn is None or not conn.is_open:
            raise ClosedError(f"consumer of {self.stream!r} is not subscribed")
        conn.send_nowait(encode_frame(Credit(self._sid, chunks)))

    async def committed_offset(self) -> int | None:
        """The offset stored under the consumer name on the broker (``None`` if none)."""
        if self.name is None:
            raise ConfigurationError("committed_offset() needs a consumer name")
        conn = self._conn or await self._client._consumer_connection(
            self.stream, replica=self.options.from_replica
        )
        return await self._query_offset(conn)

    @property
    def last_offset(self) -> int | None:
        """Offset of the last message handed out."""
        return self._last_offset

    @property
    def stats(self) -> ConsumerStats:
        """Counters of what this consumer received; ``lag`` counts up to the first message of
        the stream's last committed chunk, which RabbitMQ 3.13+ sends with every chunk
        (``None`` before the first chunk and on older brokers)."""
        return self._meter.snapshot(len(self._ready), self._last_offset)

    # --- connection listener -------------------------------------------------------------

    def chunk_delivered(self, event: ev.ChunkDelivered) -> None:
        self._chunks.append(event)
        self._arrived.set()

    def credit_failed(self, code: int) -> None:
        logger.debug("credit for %s refused with code %#x", self.stream, code)

    def consumer_update(self, event: ev.ConsumerUpdateRequested) -> None:
        """Single active consumer: the broker activates or deactivates this subscription and
        waits for the answer (it gives up after 60 s)."""
        self.active = event.active
        task = asyncio.create_task(
            self._answer_update(event), name=f"streamwire-consumer-update {self.stream}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_update(self, event: ev.ConsumerUpdateRequested) -> None:
        conn = self._conn
        if conn is None or not conn.is_open:
            return
        try:
            if event.active:
                chosen = await self._ask_on_activate()
                if chosen is not None:
                    offset_type, value = offset_spec(Offset.parse(chosen))
                else:  # resume after the group's stored offset, else from the initial spec
                    stored = await self._query_offset(conn) if self.name else None
                    offset_type, value = (
                        (OffsetType.OFFSET, stored + 1) if stored is not None else self._initial
                    )
                self._chunks.clear()
                self._meter.unreceived(len(self._ready))
                self._ready.clear()
                self._skip_below = value if offset_type == OffsetType.OFFSET and value else 0
            else:
                # stepping down: store what was handed out so the next one resumes after it
                if self.name and self._last_offset is not None:
                    conn.send_nowait(StoreOffset(self.name, self.stream, self._last_offset))
                self._chunks.clear()
                self._meter.unreceived(len(self._ready))
                self._ready.clear()
                offset_type, value = OffsetType.NONE, None
            conn.machine.answer_consumer_update(event.correlation_id, offset_type, value)
            await conn.flush()
        except StreamwireError as exc:
            logger.debug("answering ConsumerUpdate on %s failed: %s", self.stream, exc)

    async def _ask_on_activate(self) -> OffsetLike | None:
        """The application's start position for an activation (``on_activate``), or None.
        A hook that fails or takes too long is logged and the default is used: the broker
        waits for the answer, and a consumer that never answers blocks the whole group."""
        hook = self.options.on_activate
        if hook is None:
            return None
        try:
            async with asyncio.timeout(_ON_ACTIVATE_TIMEOUT):
                chosen = hook(self.stream)
                if inspect.isawaitable(chosen):
                    chosen = await chosen
            if chosen is not None:
                Offset.parse(chosen)  # a bad answer is the hook's error, not the broker's
            return chosen
        except TimeoutError:
            logger.warning("on_activate for %s took over %.0f s", self.stream, _ON_ACTIVATE_TIMEOUT)
        except Exception:
            logger.exception("on_activate for %s failed; using the default", self.stream)
        return None

    def _detach(self, conn: Connection) -> None:
        conn.remove_subscriber(self._sid)

    def _give_up(self, exc: StreamwireError) -> None:
        self._fail(exc)

    def _unrecoverable(self, exc: StreamwireError) -> StreamwireError | None:
        """A chunk of this subscription too large for the connection's
        ``max_inbound_frame_bytes`` would come again on every new connection: end with a
        :class:`FrameTooLargeError` saying so, instead of reconnecting for ever while no
        message arrives."""
        cause = exc if isinstance(exc, FrameTooLargeError) else exc.__cause__
        if not isinstance(cause, FrameTooLargeError) or self._conn is None:
            return None
        head = cause.head  # size, key, version, subscription id, ...
        if len(head) < 9 or int.from_bytes(head[4:6], "big") != CommandKey.DELIVER:
            return None
        if head[8] != self._sid:
            return None  # another subscription's chunk: this one recovers
        where = (
            "where this consumer began"
            if self._last_offset is None
            else f"after offset {self._last_offset}"
        )
        return FrameTooLargeError(
            cause.size,
            cause.limit,
            head=head,
            detail=(
                f"a chunk of {self.stream!r} {where} does not fit "
                "the connection's max_inbound_frame_bytes, and would come again on every "
                "connection, so this consumer stops. RabbitMQ writes chunks that large when "
                "large messages or sub-batch entries are published fast; connect with "
                "settings=ConnectionSettings(max_inbound_frame_bytes=...) above the chunk to "
                "read it"
            ),
        )

    async def _recover(self, cause: StreamwireError) -> None:
        self._chunks.clear()  # not yet parsed: they come again after the resubscription
        resume = self.offset if self._next_offset is None else Offset.at(self._next_offset)
        try:
            await self._client.retry(
                lambda: self._subscribe(resume), cause, what=f"consumer of {self.stream!r}"
            )
        except StreamwireError as exc:
            self._fail(exc)
        finally:
            self._recovering = None

    def _fail(self, exc: StreamwireError) -> None:
        self._error = exc
        self._arrived.set()

    # --- closing -------------------------------------------------------------------------

    async def close(self, timeout: float = 5.0) -> None:
        """Store the offset (with auto-commit), unsubscribe and stop. Idempotent.

        Cancellation: the consumer is aborted (:meth:`abort`) before ``CancelledError``
        propagates.
        """
        if self._closed:
            return
        self._closed = True
        self._arrived.set()
        try:
            await cancel_tasks([*self._tasks, self._recovering], timeout=1.0)
            conn = self._conn
            if conn is not None and conn.is_open:
                if self._auto.owed:
                    with contextlib.suppress(StreamwireError):
                        await conn.send(
                            StoreOffset(self.name or "", self.stream, self._last_offset or 0)
                        )
                with contextlib.suppress(StreamwireError, TimeoutError):
                    await conn.request(
                        lambda corr: UnsubscribeRequest(corr, self._sid),
                        SimpleResponse,
                        timeout=timeout,
                    )
                conn.remove_subscriber(self._sid)
                self._conn = None
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop at once: tasks are cancelled and the subscription is dropped without waiting
        for the broker's answer. Idempotent."""
        self._closed = True
        self._arrived.set()
        cancel_now([*self._tasks, self._recovering])
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.drop_subscriber(self._sid)
        self._client._forget_child(self)
