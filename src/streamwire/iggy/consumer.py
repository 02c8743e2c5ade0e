"""Iggy consumer: pull-based polling of one ``"stream/topic"``, alone or in a group.

The consumer polls only when its local queue is empty, rotating over its partitions, as many
messages per request as the call that found the queue empty asks for: ``next_batch(n)`` polls
``n`` (at least ``batch_size``, at most :data:`MAX_POLL`), ``async for`` and ``next()`` poll
``batch_size``, and sleeps ``poll_interval`` after a round that found nothing,
so the local queue is bounded by one poll reply. With ``prefetch`` (and a connection with
``max_in_flight`` >= 2), a full reply also sends the next ``max_in_flight - 1`` polls at once
(the partitions next in turn, from the positions full replies would lead to) before its
messages are built, so that the server works while the client does; a poll sent ahead is
used only if its partition is still at that position on the same connection when its turn
comes (else it and those after it are dropped), so the queue holds at most
``max_in_flight`` replies.

Each partition starts where ``offset`` says (see
:func:`streamwire.iggy._options.start_strategy`; ``"next"`` without a name means "only what is
written from now on"), then the consumer tracks positions and polls ``Offset(next)``. With
``group=`` it joins (creating the group if ``create_group``), syncs its assignment and polls
the assigned partitions as a group consumer, syncing again before every round of polls and
after 5009/5006 refusals or the resync sentinel. ``commit()`` stores offsets;
``auto_commit_messages``/``auto_commit_interval`` commit automatically and on close;
``server_auto_commit`` lets the server store every polled offset. See ``docs/iggy.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Final, Self

from streamwire.codec.message import Message
from streamwire.codec.offset import Offset, OffsetKind, OffsetLike
from streamwire.errors import ClosedError, ConfigurationError, StreamwireError
from streamwire.iggy._connection import Connection
from streamwire.iggy._link import ClientLink
from streamwire.iggy._options import start_strategy, topic_of
from streamwire.iggy.options import ConsumerOptions
from streamwire.iggy.protocol.errors import (
    ConsumerGroupMemberNotFound,
    ConsumerGroupNameAlreadyExists,
    ConsumerGroupPartitionNotOwned,
    TopicNameNotFound,
)
from streamwire.iggy.protocol.groups import (
    CreateConsumerGroup,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    SyncConsumerGroup,
)
from streamwire.iggy.protocol.identifiers import Consumer as WireConsumer
from streamwire.iggy.protocol.identifiers import Identifier, PollingStrategy
from streamwire.iggy.protocol.mapping import received_messages
from streamwire.iggy.protocol.messaging import (
    GetConsumerOffset,
    PolledMessages,
    PollMessages,
    StoreConsumerOffset,
)
from streamwire.iggy.protocol.streams import GetTopic
from streamwire.metrics import ConsumerMeter, ConsumerStats, Destination
from streamwire.transport.ready import NATIVE_PAYS, ready_iterator
from streamwire.transport.resources import AsyncStartable, AutoCommit

__all__ = ("MAX_POLL", "Consumer", "ConsumerOptions", "poll_count")

logger = logging.getLogger(__name__)

MAX_POLL: Final = 10_000
"""The most messages ``next_batch(n)`` asks for in one poll, whatever ``n``: a reply is
received into one buffer and queued whole."""


def poll_count(asked: int, batch_size: int) -> int:
    """How many messages a poll made for a call asking ``asked`` requests: ``asked``, but at
    least ``batch_size`` and at most :data:`MAX_POLL` (unless ``batch_size`` is more)."""
    return max(batch_size, min(asked, MAX_POLL))


class Consumer(AsyncStartable):
    """Consumes one ``"stream/topic"``: ``async for message in consumer`` or
    ``await consumer.next_batch()``."""

    __slots__ = ("_last_offset",)
    # a slot: the native ``async for`` iterator stores each message's offset straight into
    # it (streamwire.transport.ready); the other attributes live in the instance dict

    def __init__(
        self,
        client: ClientLink,
        address: str,
        *,
        offset: OffsetLike | None = None,
        name: str | None = None,
        group: str | None = None,
        options: ConsumerOptions,
    ) -> None:
        named = name is not None or group is not None
        if (options.auto_commit_messages or options.auto_commit_interval) and not named:
            raise ConfigurationError("auto-commit needs a consumer name or group")
        if name is not None and group is not None:
            raise ConfigurationError("give a consumer name or a group, not both")
        self._client = client
        self.address = address
        self.stream, self.topic = topic_of(address)
        self.name = name
        self.group = group
        self.options = options
        self.offset = Offset.parse(offset if offset is not None else ("next" if group else "first"))
        single = WireConsumer.single(name if name is not None else 0)
        self._identity = WireConsumer.group(group) if group is not None else single
        self._conn: Connection | None = None
        self._partitions: list[int] = []
        self._positions: dict[int, int | None] = {}
        self._cursor = 0
        self._count = options.batch_size  # what each poll of the current fill asks for
        self._ready: deque[Message] = deque()
        # the polls sent ahead: (connection, partition, position, count, reply)
        self._ahead: deque[tuple[Connection, int, int, int, asyncio.Future[PolledMessages]]] = (
            deque()
        )
        self._last: dict[int, int] = {}
        self._last_offset: int | None = None  # set by the native `async for` (one partition)
        self._committed: dict[int, int] = {}
        self._meter = ConsumerMeter(Destination("iggy", address, f"{client.host}:{client.port}"))
        self._auto = AutoCommit(options.auto_commit_messages, options.auto_commit_interval)
        self._generation: int | None = None
        self._closed = False
        self._started = False

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Connect, join the group (if any) and learn the partitions.

        Cancellation: the connection is closed; the consumer is unusable.
        """
        async with asyncio.timeout(timeout):
            await self._setup()
        self._started = True
        return self

    def _is_started(self) -> bool:
        return bool(self._started)

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or not conn.is_open:
            again = conn is not None
            conn = self._conn = await self._client._dial_with_retry(
                f"consumer {self.address}", again=again
            )
            if self.group is not None and self._started:
                await self._join(conn)
        return conn

    async def _setup(self) -> None:
        conn = await self._connection()
        details = await conn.request(GetTopic(self.stream, self.topic))
        if details is None:
            raise TopicNameNotFound(f"topic {self.address!r} does not exist")
        if self.group is not None:
            await self._join(conn)
            return
        single = self.options.partition
        wanted = self.options.partitions or (None if single is None else (single,))
        known = [p.id for p in details.partitions]
        self._partitions = list(wanted) if wanted is not None else known
        for pid in self._partitions:
            self._positions[pid] = None
        if self.offset.kind is not OffsetKind.NEXT:
            return
        for p in details.partitions:
            if p.id not in self._positions:
                continue
            if self.name is not None:  # the server resumes after the stored offset
                stored = await conn.request(
                    GetConsumerOffset(
                        consumer=self._identity,
                        stream=self.stream,
                        topic=self.topic,
                        partition=p.id,
                    )
                )
                if stored is not None:
                    continue
            # nothing stored (or no name): only what is written from now on, as on every broker
            self._positions[p.id] = p.current_offset + 1 if p.messages_count else 0

    async def _join(self, conn: Connection) -> None:
        name = self.group or ""
        if self.options.create_group:
            with contextlib.suppress(ConsumerGroupNameAlreadyExists):
                await conn.request(CreateConsumerGroup(self.stream, self.topic, name))
        await conn.request(JoinConsumerGroup(self.stream, self.topic, Identifier(name)))
        await self._sync(conn)

    async def _sync(self, conn: Connection) -> None:
        sync = SyncConsumerGroup(self.stream, self.topic, Identifier(self.group or ""))
        assignment = await conn.request(sync)
        if assignment is None:
            raise ConsumerGroupMemberNotFound(f"not a member of group {self.group!r}")
        if assignment.generation != self._generation:
            self._generation = assignment.generation
            kept = {p: self._positions.get(p) for p in assignment.partitions}
            self._positions = kept
            self._partitions = list(assignment.partitions)

    @property
    def partitions(self) -> list[int]:
        """The partitions this consumer reads (for a group: its current assignment)."""
        return list(self._partitions)

    # --- consuming -----------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        """``async for``: with the native core, one partition and neither name nor group
        (nothing to commit), ready messages without a coroutine each
        (:mod:`streamwire.transport.ready`, recording the last offset in ``_last_offset``);
        else :meth:`__anext__`."""
        if self.name is not None or self.group is not None or not NATIVE_PAYS:
            return self
        if len(self._partitions) != 1:
            return self
        return ready_iterator(self._ready, self, "_last_offset", "offset", self.__anext__)

    async def __anext__(self) -> Message:
        """The next message; ends when the consumer is closed, raises if it failed.

        Cancellation: nothing is lost; fetched messages stay queued.
        """
        ready = self._ready
        if not ready:
            self._count = self.options.batch_size
            if not await self._fill(None):
                raise StopAsyncIteration
        msg = ready.popleft()
        # _handed_out([msg]) without the list and the coroutine: this runs once per message
        if msg.partition is not None and msg.offset is not None:
            self._last[msg.partition] = msg.offset
        if (self.name is not None or self.group is not None) and self._auto.handed_out(1):
            await self._auto_commit()
        return msg

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if none arrived within ``timeout``."""
        if not self._ready:
            self._count = self.options.batch_size
        if not self._ready and not await self._fill(timeout):
            if self._closed:
                raise ClosedError(f"consumer of {self.address!r} is closed")
            return None
        msg = self._ready.popleft()
        await self._handed_out([msg])
        return msg

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages``: whatever is queued, else what the first fruitful poll
        returns within ``timeout`` (an empty list if nothing arrived). That poll asks for
        ``max_messages`` (at least ``batch_size``, at most :data:`MAX_POLL`).

        Cancellation: nothing is lost.
        """
        if max_messages < 1:
            raise ConfigurationError("max_messages must be >= 1")
        if not self._ready:
            self._count = poll_count(max_messages, self.options.batch_size)
            await self._fill(timeout)
        ready = self._ready
        if len(ready) <= max_messages:
            out = list(ready)
            ready.clear()
        else:
            popleft = ready.popleft
            out = [popleft() for _ in range(max_messages)]
        if out:
            await self._handed_out(out)
        return out

    async def _fill(self, timeout: float | None) -> bool:
        """Poll until messages are queued; False on timeout or when closed."""
        loop = asyncio.get_running_loop()
        give_up = None if timeout is None else loop.time() + timeout
        while not self._ready:
            if self._closed:
                return False
            if await self._poll_round():
                return True
            if give_up is not None and loop.time() >= give_up:
                return False
            pause = self.options.poll_interval
            if give_up is not None:
                pause = min(pause, max(0.0, give_up - loop.time()))
            await asyncio.sleep(pause)
        return True

    async def _poll_round(self) -> bool:
        """Poll each partition once, starting after the last one; True once one gave data."""
        conn = await self._connection()
        if self.group is not None:
            await self._sync(conn)
        parts = self._partitions
        for i in range(len(parts)):
            partition = parts[(self._cursor + i) % len(parts)]
            try:
                polled = await self._poll(conn, partition)
            except (ConsumerGroupPartitionNotOwned, ConsumerGroupMemberNotFound) as exc:
                if self.group is None:  # pragma: no cover - only group polls get these
                    raise
                logger.debug("group %s: %s; syncing again", self.group, exc)
                if isinstance(exc, ConsumerGroupMemberNotFound):
                    await self._join(conn)
                else:
                    await self._sync(conn)
                return False
            if polled is not None:
                self._cursor = (self._cursor + i + 1) % len(parts)
                await self._deliver(conn, partition, *polled)
                return True
        return False

    def _poll_request(
        self, partition: int, strategy: PollingStrategy | None = None
    ) -> PollMessages:
        planned, count = start_strategy(self.offset, self._positions.get(partition), self._count)
        strategy = planned if strategy is None else strategy
        return PollMessages(
            consumer=self._identity,
            stream=self.stream,
            topic=self.topic,
            partition=partition,
            strategy=strategy,
            count=count,
            auto_commit=self.options.server_auto_commit,
        )

    async def _poll_ahead(self, conn: Connection) -> None:
        """Send the next polls now, while they may be (see the module notes): up to
        ``max_in_flight - 1`` of them, each for the partition next in turn and from where the
        polls before it lead if they come back full, each asking what this fill's polls ask."""
        o = self.options
        depth = conn.machine.settings.max_in_flight - 1
        if not o.prefetch or self.group is not None or o.server_auto_commit or depth < 1:
            return
        parts = self._partitions
        while len(self._ahead) < depth:
            partition = parts[(self._cursor + len(self._ahead)) % len(parts)]
            position = self._positions.get(partition)
            if position is None:
                return
            position += sum(a[3] for a in self._ahead if a[1] == partition)
            request = self._poll_request(partition, PollingStrategy.offset(position))
            try:
                reply = await conn.submit(request)
            except StreamwireError as exc:  # the next poll meets it again; this one has data
                logger.debug("polling %s ahead failed: %s", self.address, exc)
                return
            self._ahead.append((conn, partition, position, request.count, reply))

    def _take_ahead(
        self, conn: Connection, partition: int
    ) -> tuple[asyncio.Future[PolledMessages], int] | None:
        """The oldest poll sent ahead, and the count it asked for, if it is from where this
        poll would start; else drop them all (their replies are dropped when they come)."""
        if not self._ahead:
            return None
        sent_on, pid, position, count, reply = self._ahead[0]
        if sent_on is conn and pid == partition and self._positions.get(pid) == position:
            self._ahead.popleft()
            return reply, count
        self._drop_ahead()
        return None

    def _drop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, deque()
        for *_, reply in ahead:
            reply.cancel()

    async def _poll(self, conn: Connection, partition: int) -> tuple[PolledMessages, int] | None:
        """Poll ``partition`` once: the reply and the count asked for, or ``None`` if
        nothing came."""
        ahead = self._take_ahead(conn, partition)
        if ahead is not None:
            pending, asked = ahead
            reply = await pending
        else:
            request = self._poll_request(partition)
            asked = request.count
            reply = await conn.request(request)
        if reply.needs_resync:
            await self._sync(conn)
            return None
        if not reply.messages_count:
            return None
        return reply, asked

    async def _deliver(
        self, conn: Connection, partition: int, reply: PolledMessages, asked: int
    ) -> None:
        """Queue a reply's messages. After a full reply, the next poll is sent first, so
        that the server works on it while the messages are built (checksums, objects)."""
        before = self._positions.get(partition)
        self._positions[partition] = reply.frames[-1][0] + 1  # the last message's offset
        try:
            if reply.messages_count >= asked:
                await self._poll_ahead(conn)
            messages = received_messages(
                reply,
                stream=self.address,
                key_header=self.options.key_header,
                verify=self.options.verify_checksums,
            )
        except BaseException:  # nothing was queued: poll these again
            self._positions[partition] = before
            self._drop_ahead()
            raise
        self._ready.extend(messages)
        # counted per reply queued to be handed over (stats subtracts what is still queued)
        meter = self._meter
        meter.stream_ends_at(reply.current_offset, partition)  # the partition's newest offset
        meter.received(len(messages), len(reply.records), reply.frames[-1][0], partition)

    async def _handed_out(self, messages: list[Message]) -> None:
        last = messages[-1]
        if (  # one fixed partition: its last message is enough
            self.group is None
            and len(self._partitions) == 1
            and last.partition is not None
            and last.offset is not None
        ):
            self._last[last.partition] = last.offset
        else:
            for msg in messages:
                if msg.partition is not None and msg.offset is not None:
                    self._last[msg.partition] = msg.offset
        if self.name is None and self.group is None:
            return
        if self._auto.handed_out(len(messages)):
            await self._auto_commit()

    async def _auto_commit(self) -> None:
        try:
            await self.commit()
        except StreamwireError as exc:  # retried at the next commit point
            logger.warning("auto-commit on %s failed: %s", self.address, exc)

    # --- offsets -------------------------------------------------------------------------

    async def commit(self, offset: int | None = None, *, partition: int | None = None) -> None:
        """Store offsets on the server: ``offset`` for ``partition``, or (by default) the
        last offset handed out on every partition that advanced since the last commit.

        Cancellation: some offsets may have been stored.
        """
        if self.name is None and self.group is None:
            raise ConfigurationError("commit() needs a consumer name or group")
        if offset is not None:
            target = partition if partition is not None else self._only_partition()
            todo = {target: offset}
        else:
            todo = {p: o for p, o in self._last.items() if self._committed.get(p) != o}
            if partition is not None:
                todo = {p: o for p, o in todo.items() if p == partition}
        conn = await self._connection()
        for pid, value in todo.items():
            await conn.request(
                StoreConsumerOffset(
                    consumer=self._identity,
                    stream=self.stream,
                    topic=self.topic,
                    partition=pid,
                    offset=value,
                    ack=self.options.ack,
                )
            )
            self._committed[pid] = value
            self._meter.committed(value)
        self._auto.stored()

    def _only_partition(self) -> int:
        if len(self._partitions) == 1:
            return self._partitions[0]
        raise ConfigurationError("this consumer reads several partitions: pass partition=")

    async def committed_offset(self, partition: int | None = None) -> int | None:
        """The offset stored on the server for this consumer (``None`` if none)."""
        if self.name is None and self.group is None:
            raise ConfigurationError("committed_offset() needs a consumer name or group")
        pid = partition if partition is not None else self._only_partition()
        conn = await self._connection()
        info = await conn.request(
            GetConsumerOffset(
                consumer=self._identity, stream=self.stream, topic=self.topic, partition=pid
            )
        )
        return None if info is None else info.stored_offset

    @property
    def last_offset(self) -> int | None:
        """Offset of the last message handed out (any partition)."""
        values = list(self._last.values())
        if self._last_offset is not None:  # one partition, whose offsets only grow
            values.append(self._last_offset)
        return max(values) if values else None

    @property
    def stats(self) -> ConsumerStats:
        """Counters of what this consumer received; ``lag`` sums, over the partitions polled
        so far, the messages after the last one handed over, from the newest offset every
        poll reply carries (``None`` before the first reply with messages)."""
        return self._meter.snapshot(len(self._ready), self.last_offset)

    # --- closing -------------------------------------------------------------------------

    async def close(self) -> None:
        """Commit (with auto-commit), leave the group, close the connection. Idempotent.

        Cancellation: the consumer is aborted (:meth:`abort`: its connection is dropped)
        before ``CancelledError`` propagates.
        """
        if self._closed:
            return
        self._closed = True
        self._drop_ahead()
        try:
            conn = self._conn
            if conn is not None and conn.is_open:
                if self._auto.owed:
                    with contextlib.suppress(StreamwireError):
                        await self.commit()
                if self.group is not None:
                    with contextlib.suppress(StreamwireError):
                        await conn.request(
                            LeaveConsumerGroup(self.stream, self.topic, Identifier(self.group)),
                            timeout=5.0,
                        )
            self._conn = None
            if conn is not None:
                await conn.close()
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop at once: the connection is aborted (the server drops the group membership
        with it). Idempotent."""
        self._closed = True
        self._drop_ahead()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()
        self._client._forget(self)
