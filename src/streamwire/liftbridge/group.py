"""Liftbridge consumer groups (Liftbridge >= 1.6; the server's API is beta).

A :class:`GroupConsumer` is one member of a group consuming one or more streams:

* **Join**: JoinConsumerGroup (at any server; the metadata leader applies it) names the
  coordinator, the group epoch and two timeouts. A consumer id that is still a member
  (a restarted process within the consumer timeout) leaves and joins again.
* **Heartbeat**: FetchConsumerGroupAssignments at the coordinator every ``fetch_interval``
  (default 0.7 x the server's consumer timeout) is the liveness heartbeat and returns this
  member's partitions. The coordinator refuses a stale epoch (FAILED_PRECONDITION); the
  member then reads the group's epoch and coordinator from FetchMetadata and fetches again:
  that is how a rebalance is noticed. A member the coordinator removed ("not a member", or
  the group is gone) stops its subscriptions, without checkpointing, and joins again.
  Without an answer from the coordinator for the coordinator timeout, the member reports it
  (ReportConsumerGroupCoordinator, at another server) and reads the group's metadata again.
* **Subscriptions**: one Subscribe stream per assigned partition (at its leader, each read
  by its own thread into one shared buffer, see ``_stream_reader``), carrying the group id,
  epoch and consumer id. The server does not look up the group's cursor (v1.9.0): the
  member fetches the cursor ``__group:<group>`` and subscribes at cursor + 1, or at
  ``offset`` when there is none. A subscription with an older epoch than the group member
  already subscribed is refused; a newer one replaces it (the old stream ends normally),
  which here triggers an immediate heartbeat. A broken stream is subscribed again from
  where it got to, with the client's reconnect policy's backoff.
* **Handing out**: messages of partitions no longer assigned are dropped, and so is any
  message at or below the last one handed out of its partition (an overlap of an old and
  a new subscription), so a member hands each offset out once.
* **Checkpoints**: every ``auto_checkpoint_interval`` seconds, on :meth:`commit`, when a
  partition is revoked and on :meth:`close`, the last offset handed out of each partition
  is stored as the group's cursor (at-least-once: what was handed out and not checkpointed
  is read again by the next owner).
* **Close** stops the subscriptions, checkpoints, and leaves the group (LeaveConsumerGroup).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final, Self, TypedDict

from streamwire.codec.message import Message
from streamwire.codec.offset import Offset, OffsetKind, OffsetLike
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    DecodeError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.liftbridge._grpc import RpcFailed, translate
from streamwire.liftbridge._h2_subscription import AnySubscription
from streamwire.liftbridge._link import GroupLink
from streamwire.liftbridge._stream_reader import (
    STOPPED,
    UNDECODABLE,
    Handover,
    OffsetRegression,
    handshake,
)
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    GRPC_ERRORS,
    FailedPrecondition,
    GrpcStatus,
    StreamNotFound,
)
from streamwire.liftbridge.protocol.groups import (
    GroupInfo,
    Membership,
    assignments_from_pb,
    group_cursor_id,
    group_info_from_pb,
    membership_from_pb,
)
from streamwire.liftbridge.protocol.metadata import subscribe_request
from streamwire.metrics import ConsumerMeter, ConsumerStats, Destination
from streamwire.transport.deadline import Deadline
from streamwire.transport.reconnect import is_retriable
from streamwire.transport.resources import AsyncStartable

__all__ = ("GroupConsumer", "GroupConsumerKwargs", "GroupConsumerOptions")

logger = logging.getLogger(__name__)

#: How long stopping a subscription waits for its reading thread (normally a millisecond).
_JOIN_TIMEOUT: Final = 5.0
#: What each step of closing (checkpoint, leave) waits at most without a request_timeout.
_CLOSE_STEP_TIMEOUT: Final = 10.0
#: Share of the consumer timeout between heartbeats by default (as go-liftbridge).
_HEARTBEAT_SHARE: Final = 0.7
#: Seconds after a join during which the coordinator's "no such group" or "not a member"
#: means it has not applied the join yet (at most half the consumer timeout).
_JOIN_GRACE: Final = 5.0
#: Metadata reads while the server answering them catches up with the latest join.
_EPOCH_RETRIES: Final = 10
#: How often starting asks the coordinator again meanwhile.
_EARLY_RETRY: Final = 0.1
#: Waits after a broken subscription before subscribing again without a reconnect policy.
_RESUBSCRIBE_DELAY: Final = 1.0

# What v1.9.0 says (FAILED_PRECONDITION details) when ...
_NOT_MEMBER: Final = "not a member"  # ... the consumer is not (any more) in the group
_ALREADY_MEMBER: Final = "already a member"  # ... a join names a member
_NO_STREAM: Final = "stream does not exist"  # ... a join names a missing stream


class _End:
    """Queued after the last message once the consumer is closed."""


class _Early(Exception):
    """The coordinator does not know the member yet, right after its join."""


_END: Final = _End()

_Item = Message | _End | StreamwireError
_Key = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConsumerOptions:
    auto_checkpoint_interval: float | None = 5.0
    """Seconds between automatic checkpoints of the last offsets handed out (``None``:
    only on :meth:`GroupConsumer.commit`, revocation and close)."""
    fetch_interval: float | None = None
    """Seconds between heartbeats (FetchConsumerGroupAssignments); ``None``: 0.7 x the
    server's consumer timeout. Must be shorter than that timeout."""
    max_buffered_messages: int = 1024
    """Messages read from the server but not yet handed out, over all partitions."""
    resume: bool = False
    """Resume an assigned partition if it is paused."""
    server_headers: bool = False
    """Keep the ``subject`` and ``reply`` headers the server adds to every message."""

    def __post_init__(self) -> None:
        for name in ("auto_checkpoint_interval", "fetch_interval"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"{name} must be None or a number of seconds > 0")
        size = self.max_buffered_messages
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError("max_buffered_messages must be an int >= 1")


class GroupConsumerKwargs(TypedDict, total=False):
    """The keyword options of ``Client.group_consumer`` (see :class:`GroupConsumerOptions`)."""

    auto_checkpoint_interval: float | None
    fetch_interval: float | None
    max_buffered_messages: int
    resume: bool
    server_headers: bool


class _Part:
    """One assigned partition: its subscription and where it got to."""

    __slots__ = ("failures", "key", "next_offset", "retry_at", "start", "sub", "watch")

    def __init__(self, key: _Key) -> None:
        self.key = key
        self.sub: AnySubscription | None = None
        self.watch: asyncio.Task[None] | None = None
        self.start: Offset | None = None  # where the current/last subscription started
        self.next_offset: int | None = None  # after the last message a subscription read
        self.retry_at = 0.0  # loop time before which a broken subscription is not retried
        self.failures = 0  # subscribing failed this often in a row


class GroupConsumer(AsyncStartable):
    """A member of a Liftbridge consumer group; ``async with`` it (or ``await`` it), then
    ``async for message in consumer`` or :meth:`next_batch`. Messages of all assigned
    partitions come through one buffer, in offset order per partition."""

    def __init__(
        self,
        client: GroupLink,
        group: str,
        streams: Sequence[str],
        *,
        consumer_id: str | None = None,
        offset: OffsetLike = "first",
        options: GroupConsumerOptions,
    ) -> None:
        if not isinstance(group, str) or not group:
            raise ConfigurationError("a consumer group id must be a non-empty str")
        if consumer_id is not None and (not isinstance(consumer_id, str) or not consumer_id):
            raise ConfigurationError("consumer_id must be a non-empty str")
        names = list(streams)
        if not names or not all(isinstance(s, str) and s for s in names):
            raise ConfigurationError("a group consumer needs one or more stream names")
        if len(set(names)) != len(names):
            raise ConfigurationError("stream names repeat")
        start = Offset.parse(offset)
        if start.kind is OffsetKind.OFFSET:
            raise ConfigurationError(
                "a group consumer's offset (where partitions without a group cursor start) "
                "must be 'first', 'last', 'next' or a timestamp"
            )
        self._client = client
        self.group = group
        self.streams: tuple[str, ...] = tuple(names)
        self.consumer_id = consumer_id or f"streamwire-{uuid.uuid4().hex}"
        self.offset = start
        self.options = options
        self.cursor_id = group_cursor_id(group)
        self._handover: Handover[_Item] = Handover(options.max_buffered_messages)
        self._parts: dict[_Key, _Part] = {}
        self._last: dict[_Key, int] = {}  # last offset handed out, per assigned partition
        self._position: dict[_Key, int] = {}  # lowest offset still to hand out
        self._committed: dict[_Key, int] = {}
        self._membership: Membership | None = None
        self._member = False
        self._coordinator = ""
        self._epoch = 0
        self._interval = 0.0
        self._last_heartbeat = 0.0  # loop time of the last answer from the coordinator
        self._joined_at = 0.0
        self._reported_at = 0.0
        self._wake = asyncio.Event()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one reconciliation at a time
        self._error: StreamwireError | None = None
        self._ended = False
        self._started = False
        self._closed = False
        self.rebalances = 0
        """Assignment changes after the first one."""
        self.rejoins = 0
        """Times the member was removed by the coordinator and joined again."""
        self.resubscriptions = 0
        """Subscriptions made again after breaking."""
        self.dropped = 0
        """Messages dropped: of revoked partitions, or already handed out."""
        where = ",".join(self.streams)
        self._meter = ConsumerMeter(
            Destination("liftbridge", where, f"{client.host}:{client.port}")
        )
        self._bytes_counted = 0

    def __str__(self) -> str:
        return f"group {self.group!r} member {self.consumer_id!r}"

    # --- what the member knows -----------------------------------------------------------

    @property
    def assignments(self) -> dict[str, list[int]]:
        """The partitions currently assigned to this member, per stream."""
        out: dict[str, list[int]] = {}
        for stream, partition in sorted(self._parts):
            out.setdefault(stream, []).append(partition)
        return out

    @property
    def membership(self) -> Membership | None:
        """What the last JoinConsumerGroup answered (coordinator, epoch, timeouts)."""
        return self._membership

    @property
    def epoch(self) -> int:
        """The group epoch of the current assignments."""
        return self._epoch

    @property
    def coordinator(self) -> str:
        """The broker id of the group coordinator, as last known."""
        return self._coordinator

    @property
    def fetch_interval(self) -> float:
        """Seconds between heartbeats (known once started)."""
        return self._interval

    # --- lifecycle -----------------------------------------------------------------------

    def _is_started(self) -> bool:
        return self._started

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Join the group, fetch this member's partitions and subscribe to them.

        A failure leaves the group again. Cancellation: likewise (see :meth:`close`).
        """
        if self._closed:
            raise ClosedError(f"{self} is closed")
        deadline = Deadline(timeout, exc_type=RequestTimeout, what=f"starting {self}")
        try:
            async with deadline.scope():
                await self._join()
                while True:
                    try:
                        await self._heartbeat(initial=True)
                        break
                    except _Early:
                        await asyncio.sleep(_EARLY_RETRY)
        except BaseException:
            await self.close()
            raise
        self._started = True
        self._heartbeat_task = asyncio.create_task(
            self._heartbeat_loop(), name=f"streamwire {self} heartbeat"
        )
        if self.options.auto_checkpoint_interval is not None:
            self._checkpoint_task = asyncio.create_task(
                self._checkpoint_loop(self.options.auto_checkpoint_interval),
                name=f"streamwire {self} checkpoints",
            )
        return self

    def _timeout(self) -> float | None:
        return self._client.request_timeout

    async def _join(self) -> None:
        request = pb.JoinConsumerGroupRequest(
            groupId=self.group, consumerId=self.consumer_id, streams=list(self.streams)
        )
        what = f"JoinConsumerGroup {self.group!r} as {self.consumer_id!r}"
        try:
            resp = await self._client._call(
                "JoinConsumerGroup", request, timeout=self._timeout(), what=what
            )
        except FailedPrecondition as exc:
            text = str(exc)
            if _NO_STREAM in text:
                raise GRPC_ERRORS.from_code(GrpcStatus.NOT_FOUND, text) from exc
            if _ALREADY_MEMBER not in text:
                raise
            # a restarted member within the consumer timeout: take its place afresh
            logger.info("%s is still a member: leaving and joining again", self)
            await self._leave()
            resp = await self._client._call(
                "JoinConsumerGroup", request, timeout=self._timeout(), what=what
            )
        membership = membership_from_pb(resp)
        interval = self.options.fetch_interval
        if interval is None:
            interval = _HEARTBEAT_SHARE * membership.consumer_timeout
        elif interval >= membership.consumer_timeout:
            self._member = True  # so that close() leaves
            raise ConfigurationError(
                f"fetch_interval {interval} s is not shorter than the server's consumer "
                f"timeout ({membership.consumer_timeout} s): the member would be removed"
            )
        self._membership = membership
        self._coordinator = membership.coordinator
        self._epoch = membership.epoch
        self._interval = interval
        self._member = True
        self._last_heartbeat = self._joined_at = asyncio.get_running_loop().time()

    async def _leave(self) -> None:
        await self._client._call(
            "LeaveConsumerGroup",
            pb.LeaveConsumerGroupRequest(groupId=self.group, consumerId=self.consumer_id),
            timeout=self._timeout(),
            what=f"LeaveConsumerGroup {self.group!r} as {self.consumer_id!r}",
        )

    # --- heartbeats and assignments --------------------------------------------------------

    async def _group_info(self) -> GroupInfo:
        resp = await self._client._call(
            "FetchMetadata",
            pb.FetchMetadataRequest(streams=list(self.streams), groups=[self.group]),
            timeout=self._timeout(),
            what=f"FetchMetadata of group {self.group!r}",
        )
        return group_info_from_pb(self.group, resp)

    async def _fetch_assignments(self) -> pb.FetchConsumerGroupAssignmentsResponse:
        resp: pb.FetchConsumerGroupAssignmentsResponse = await self._client._call(
            "FetchConsumerGroupAssignments",
            pb.FetchConsumerGroupAssignmentsRequest(
                groupId=self.group, consumerId=self.consumer_id, epoch=self._epoch
            ),
            timeout=min(self._interval, self._timeout() or self._interval),
            what=f"FetchConsumerGroupAssignments {self.group!r} as {self.consumer_id!r}",
            broker=self._coordinator or None,
        )
        return resp

    async def _heartbeat(self, *, initial: bool = False) -> None:
        """One heartbeat: fetch the assignments (refreshing epoch and coordinator once if
        the coordinator refuses them), then subscribe and unsubscribe to match."""
        loop = asyncio.get_running_loop()
        try:
            try:
                resp = await self._fetch_assignments()
            except FailedPrecondition as exc:
                if _NOT_MEMBER in str(exc):
                    raise
                resp = await self._refetch(exc)
        except (FailedPrecondition, StreamNotFound) as exc:
            if not (_NOT_MEMBER in str(exc) or isinstance(exc, StreamNotFound)):
                raise
            if self._settling():
                # the coordinator has not applied the join yet (another server than the
                # one that took it, in a cluster): not removed, only early
                if initial:
                    raise _Early from exc
                logger.info("%s: the coordinator does not know the member yet", self)
                return
            if initial:
                raise
            await self._rejoin(exc)
            return
        except StreamwireError as exc:
            if initial or not is_retriable(exc):
                raise
            await self._coordinator_silent(exc)
            return
        self._last_heartbeat = loop.time()
        self._epoch = int(resp.epoch)
        await self._reconcile(assignments_from_pb(resp), initial=initial)

    async def _refetch(self, stale: StreamwireError) -> pb.FetchConsumerGroupAssignmentsResponse:
        """The coordinator refused our epoch: read epoch and coordinator from metadata and
        fetch again. In a cluster the server answering metadata may not have applied the
        latest join yet (seen on v1.9.0: the same stale epoch again), so this is tried a few
        times, 0.2 s apart, before the refusal stands."""
        last: StreamwireError = stale
        for _attempt in range(_EPOCH_RETRIES):
            info = await self._group_info()
            if not info.exists:
                raise GRPC_ERRORS.from_code(
                    GrpcStatus.NOT_FOUND, f"group {self.group!r} is gone"
                ) from last
            self._coordinator, self._epoch = info.coordinator, info.epoch
            try:
                return await self._fetch_assignments()
            except FailedPrecondition as exc:
                if _NOT_MEMBER in str(exc):
                    raise
                last = exc
            await asyncio.sleep(0.2)
        raise last

    def _settling(self) -> bool:
        """Whether the last join is recent enough that the coordinator may not know it."""
        membership = self._membership
        if membership is None:
            return False
        grace = min(membership.consumer_timeout / 2, _JOIN_GRACE)
        return asyncio.get_running_loop().time() - self._joined_at < grace

    async def _coordinator_silent(self, exc: StreamwireError) -> None:
        """The coordinator did not answer: after the coordinator timeout, report it and
        read the group's coordinator and epoch again."""
        membership = self._membership
        loop = asyncio.get_running_loop()
        now = loop.time()
        logger.info("%s: no assignments from coordinator %r: %s", self, self._coordinator, exc)
        if membership is None or now - self._last_heartbeat < membership.coordinator_timeout:
            return
        if now - self._reported_at >= membership.coordinator_timeout and self._coordinator:
            self._reported_at = now
            logger.warning("%s: reporting coordinator %r as failed", self, self._coordinator)
            try:
                await self._client._call(
                    "ReportConsumerGroupCoordinator",
                    pb.ReportConsumerGroupCoordinatorRequest(
                        groupId=self.group,
                        consumerId=self.consumer_id,
                        coordinator=self._coordinator,
                        epoch=self._epoch,
                    ),
                    timeout=self._timeout(),
                    what=f"ReportConsumerGroupCoordinator {self.group!r}",
                )
            except StreamwireError as report_failed:
                logger.info("%s: reporting the coordinator failed: %s", self, report_failed)
        with contextlib.suppress(StreamwireError):
            self._client._invalidate_metadata()
            await self._client.fetch_metadata(*self.streams)
            info = await self._group_info()
            if info.exists and info.coordinator:
                if info.coordinator != self._coordinator:
                    logger.info("%s: the coordinator is now %r", self, info.coordinator)
                self._coordinator, self._epoch = info.coordinator, info.epoch

    async def _rejoin(self, cause: StreamwireError) -> None:
        """Removed by the coordinator (expired): drop everything, without checkpointing
        (the partitions are someone else's now), and join again."""
        logger.warning("%s was removed from the group (%s): joining again", self, cause)
        self._member = False
        async with self._lock:
            await self._revoke(list(self._parts), checkpoint=False)
        await self._join()
        self.rejoins += 1
        await self._heartbeat()

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                started = loop.time()
                try:
                    await self._heartbeat()
                except StreamwireError as exc:
                    if not is_retriable(exc):
                        raise
                    logger.info("%s: heartbeat failed: %s", self, exc)
                due = started + self._interval
                retries = [p.retry_at for p in self._parts.values() if p.sub is None]
                if retries:
                    due = min(due, max(min(retries), loop.time() + 0.05))
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, due - loop.time())):
                        await self._wake.wait()
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug: fail the consumer, loudly
            logger.exception("%s failed", self)
            self._fail(ConnectionClosed(f"{self} failed: {exc!r}"))

    def _fail(self, exc: StreamwireError) -> None:
        self._handover.finish(exc)

    # --- subscriptions ---------------------------------------------------------------------

    async def _reconcile(self, assignments: dict[str, list[int]], *, initial: bool) -> None:
        wanted = {(s, p) for s, parts in assignments.items() for p in parts}
        async with self._lock:
            if self._closed:
                return
            revoked = [k for k in self._parts if k not in wanted]
            added = sorted(k for k in wanted if k not in self._parts)
            if (revoked or added) and not initial:
                self.rebalances += 1
                logger.info(
                    "%s: epoch %d, assigned %s (revoked %s)", self, self._epoch, added, revoked
                )
            await self._revoke(revoked, checkpoint=True)
            now = asyncio.get_running_loop().time()
            todo = [self._parts.setdefault(k, _Part(k)) for k in added]
            todo += [
                p
                for k, p in self._parts.items()
                if p.sub is None and k not in added and p.retry_at <= now
            ]
            if todo:
                await asyncio.gather(*(self._open(p, initial=initial) for p in todo))

    async def _revoke(self, keys: list[_Key], *, checkpoint: bool) -> None:
        """Stop the subscriptions of ``keys`` (checkpointing them first) and forget them."""
        if not keys:
            return
        if checkpoint and self._member:
            try:
                await self._checkpoint(keys)
            except StreamwireError as exc:
                logger.warning("%s: checkpoint of revoked %s failed: %s", self, keys, exc)
        parts = [self._parts.pop(k) for k in keys if k in self._parts]
        for k in keys:
            self._last.pop(k, None)
            self._position.pop(k, None)
            self._committed.pop(k, None)
        await asyncio.gather(*(self._stop(p) for p in parts))

    async def _stop(self, part: _Part) -> None:
        sub, part.sub = part.sub, None
        watch, part.watch = part.watch, None
        if sub is not None:
            sub.cancel()
        if watch is not None and not watch.done():
            watch.cancel()
            await asyncio.wait({watch}, timeout=_JOIN_TIMEOUT)
        if sub is not None:
            await sub.stop(_JOIN_TIMEOUT)

    async def _start_of(self, part: _Part) -> Offset:
        """Where to subscribe: after what this member read, else after the group cursor,
        else ``offset``."""
        if part.next_offset is not None:
            return Offset.at(part.next_offset)
        stream, partition = part.key
        committed = await self._client.fetch_cursor(
            stream, partition, self.cursor_id, timeout=self._timeout()
        )
        if committed is not None:
            self._committed[part.key] = committed
            return Offset.at(committed + 1)
        return self.offset

    async def _open(self, part: _Part, *, initial: bool) -> None:
        """Subscribe to ``part``; a failure is retried later (at start: raised)."""
        again = part.start is not None
        try:
            start = await self._start_of(part)
            try:
                sub = await self._subscribe(part.key, start)
            except (FailedPrecondition, ConnectError):
                # a stale (or dead) leader in the cached metadata, or a newer member holds
                # the partition (then the next heartbeat brings a newer epoch)
                self._client._invalidate_metadata()
                sub = await self._subscribe(part.key, start)
        except StreamwireError as exc:
            if initial and not is_retriable(exc):
                raise
            self._client._invalidate_metadata()
            self._broken(part, exc)
            return
        if self._closed or self._parts.get(part.key) is not part:  # revoked meanwhile
            await sub.stop(_JOIN_TIMEOUT)
            return
        part.sub, part.start = sub, start
        part.next_offset = None
        part.failures = 0
        if start.kind is OffsetKind.OFFSET and start.value is not None:
            # a fresh assignment starts here; a resubscription keeps what was handed out
            self._position.setdefault(part.key, start.value)
        if again:
            self.resubscriptions += 1
        part.watch = asyncio.create_task(
            self._follow(part, sub), name=f"streamwire {self} {part.key[0]}/{part.key[1]}"
        )

    def _broken(self, part: _Part, cause: BaseException) -> None:
        """Subscribe to ``part`` again after a backoff: the reconnect policy's, growing
        with each failure in a row (a group member keeps trying while it is assigned)."""
        policy = self._client.reconnect
        first = max(policy.initial_delay if policy is not None else _RESUBSCRIBE_DELAY, 0.1)
        cap = max(policy.max_delay if policy is not None else _RESUBSCRIBE_DELAY, first)
        delay = min(first * 2 ** min(part.failures, 16), cap)
        part.failures += 1
        part.retry_at = asyncio.get_running_loop().time() + delay
        logger.info("%s: subscription to %s/%s broke: %s", self, *part.key, cause)

    async def _subscribe(self, key: _Key, start: Offset) -> AnySubscription:
        stream, partition = key
        request = subscribe_request(stream, partition, start, resume=self.options.resume)
        request.consumer.CopyFrom(
            pb.Consumer(groupId=self.group, groupEpoch=self._epoch, consumerId=self.consumer_id)
        )
        what = f"subscribing to {stream}/{partition} for {self}"
        sub = await self._client._subscription(
            request,
            self._handover,
            skip_below=(start.value or 0) if start.kind is OffsetKind.OFFSET else 0,
            server_headers=self.options.server_headers,
        )
        return await handshake(
            sub, timeout=self._timeout(), what=what, end=lambda: sub.stop(_JOIN_TIMEOUT)
        )

    async def _follow(self, part: _Part, sub: AnySubscription) -> None:
        """Wait for ``sub`` to end; unless stopped here, mark ``part`` for resubscription
        and wake the heartbeat (a newer member may have taken the partition over)."""
        outcome = await asyncio.shield(sub.finished)
        await sub.stop(_JOIN_TIMEOUT)
        if part.sub is not sub:
            return
        part.sub = None
        if sub.next_offset is not None:
            part.next_offset = sub.next_offset
        elif part.start is not None and part.start.kind is OffsetKind.OFFSET:
            part.next_offset = part.start.value
        if outcome is STOPPED or self._closed:
            return
        if outcome is UNDECODABLE:
            self._fail(DecodeError("liftbridge.Message", frame=f"{part.key} of {self}"))
            return
        if isinstance(outcome, OffsetRegression):
            stream, partition = part.key
            self._fail(outcome.error(f"{self}, reading {part.key}", stream, partition))
            return
        if isinstance(outcome, Exception) and not isinstance(outcome, RpcFailed):
            logger.error("%s: a reading thread failed", self, exc_info=outcome)
            self._fail(ConnectionClosed(f"{self}: reading {part.key} failed: {outcome!r}"))
            return
        if isinstance(outcome, RpcFailed):
            # the leader moved or the partition closed: subscribe again after a backoff
            self._client._invalidate_metadata()
            self._broken(part, translate(outcome, f"subscription to {part.key}"))
        else:
            # ENDED: the server closed the stream, as it does when a member with a newer
            # epoch subscribes: heartbeat now, and subscribe again (after the backoff, so
            # that a stream ending at once cannot spin) if the partition is still ours
            self._broken(part, ConnectionClosed("the server ended the subscription"))
        self._wake.set()

    # --- consuming -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    async def __anext__(self) -> Message:
        """The next message; iteration ends when the consumer is closed.

        Cancellation: nothing is lost.
        """
        while True:
            batch = await self.next_batch(1, None)
            if batch:
                return batch[0]
            if self._ended or self._closed:
                raise StopAsyncIteration

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if none came within ``timeout`` (or closed)."""
        batch = await self.next_batch(1, timeout)
        return batch[0] if batch else None

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._started and not self._closed:
            raise ClosedError("group consumer not started: use 'async with' or 'await'")

    def _accept(self, msg: Message) -> bool:
        """Whether to hand ``msg`` out: its partition is assigned and it comes after what
        was handed out of it."""
        if msg.stream is None or msg.partition is None or msg.offset is None:
            return True
        key = (msg.stream, msg.partition)
        if key not in self._parts:
            return False
        position = self._position.get(key)
        if position is not None and msg.offset < position:
            return False
        self._position[key] = msg.offset + 1
        self._last[key] = msg.offset
        return True

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages: whatever is queued, else what arrives first
        within ``timeout`` (an empty list if nothing did).

        Cancellation: nothing is lost.
        """
        self._check()
        out: list[Message] = []
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not out and not self._ended:
            if self._handover.ready():
                items = self._handover.take(max_messages)
            elif self._closed:
                break
            else:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                items = await self._handover.get(max_messages, left)
                if not items:
                    break
            for item in items:
                if isinstance(item, Message):
                    if self._accept(item):
                        out.append(item)
                    else:
                        self.dropped += 1
                elif isinstance(item, _End):
                    self._ended = True
                else:
                    self._error = item
                    if not out:
                        raise item
            if deadline is not None and loop.time() >= deadline:
                break
        if out:
            received = self._handover.received_bytes
            nbytes, self._bytes_counted = received - self._bytes_counted, received
            last = out[-1]
            self._meter.received(len(out), nbytes, last.offset, last.partition or 0)
        return out

    # --- checkpoints -----------------------------------------------------------------------

    async def _checkpoint(self, keys: list[_Key] | None = None) -> None:
        pending = [
            (k, offset)
            for k, offset in self._last.items()
            if (keys is None or k in keys) and self._committed.get(k) != offset
        ]
        if not pending:
            return

        async def store(key: _Key, offset: int) -> None:
            await self._client.set_cursor(
                key[0], key[1], self.cursor_id, offset, timeout=self._timeout()
            )
            self._committed[key] = offset
            self._meter.committed(offset)

        results = await asyncio.gather(*(store(k, o) for k, o in pending), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def commit(self, offset: int | None = None, *, timeout: float | None = None) -> None:
        """Checkpoint now: store the last offset handed out of every assigned partition as
        the group's cursor. ``offset`` cannot be given (it would be ambiguous across
        partitions). Cancellation: some cursors may have been stored."""
        if offset is not None:
            raise ConfigurationError(
                "a group consumer commits what it handed out of each partition; "
                "commit(offset) is ambiguous"
            )
        self._check()
        if not self._member:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._checkpoint()
        except TimeoutError as exc:
            raise RequestTimeout(f"checkpointing {self} took over {timeout} s") from exc

    async def _checkpoint_loop(self, interval: float) -> None:
        while not self._closed:
            await asyncio.sleep(interval)
            if not self._member:
                continue
            try:
                await self._checkpoint()
            except StreamwireError as exc:
                logger.warning("%s: checkpoint failed: %s", self, exc)

    @property
    def committed(self) -> dict[_Key, int]:
        """The last offsets checkpointed (or read from the group cursor), per partition."""
        return dict(self._committed)

    @property
    def stats(self) -> ConsumerStats:
        """Counters of what this member handed out (``stream``: the streams, joined by
        commas; ``last_offset``: of whichever partition came last; ``lag``: ``None``)."""
        return self._meter.snapshot()

    # --- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop the heartbeats and subscriptions, checkpoint, and leave the group; every
        step is bounded (the client's request_timeout). Idempotent; messages already
        queued can still be read.

        Cancellation: closing goes on in the background (a task) and the cancellation is
        raised; a later ``close()`` waits for that task.
        """
        closer = self._closer
        if closer is None:
            closer = self._closer = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(closer)

    async def _shutdown(self) -> None:
        self._closed = True
        tasks = [t for t in (self._heartbeat_task, self._checkpoint_task) if t is not None]
        self._heartbeat_task = self._checkpoint_task = None
        try:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_JOIN_TIMEOUT)
            step = self._timeout() or _CLOSE_STEP_TIMEOUT
            try:
                async with asyncio.timeout(step + _JOIN_TIMEOUT):
                    async with self._lock:
                        parts = list(self._parts.values())
                        await asyncio.gather(*(self._stop(p) for p in parts))
            except TimeoutError:
                logger.warning("%s: stopping the subscriptions took too long", self)
            logger.debug("%s: subscriptions stopped", self)
            if self._member:
                try:
                    async with asyncio.timeout(step):
                        await self._checkpoint()
                    logger.debug("%s: checkpointed", self)
                except (StreamwireError, TimeoutError) as exc:
                    logger.warning("%s: the last checkpoint failed: %s", self, exc)
                try:
                    async with asyncio.timeout(step):
                        await self._leave()
                    self._member = False
                    logger.debug("%s: left the group", self)
                except (StreamwireError, TimeoutError) as exc:
                    logger.warning("%s: leaving the group failed: %s", self, exc)
        finally:
            self._parts.clear()
            self._handover.finish(_END)
            self._client._forget_child(self)
