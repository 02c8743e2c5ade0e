"""Liftbridge producer: envelopes published straight onto NATS, acks on the client's inbox.

Flow: ``send()`` picks the partition (explicit, by key, or round robin), encodes the
envelope with a fresh correlation id, checks its size against the server's ``max_payload``,
registers the ack future and hands the bytes to nats-py. The partition leader appends the
message and publishes an Ack to the client's inbox; the future resolves with the offset, or
fails with the ack's error (:class:`IncorrectOffset`, :class:`TooLarge`,
:class:`EncryptionFailed`) or :class:`AckTimeout`.

Delivery is at-least-once at best: core NATS may drop a publish (no leader subscribed, a
disconnect), and Liftbridge does not deduplicate, so retrying after a timeout can store a
message twice. With ``ack_policy=NONE`` or ``envelope=False`` nothing is acknowledged; the
future resolves once the message is handed to NATS (``offset`` is ``None``).

``transport="grpc"`` publishes through the server's gRPC API instead (PublishAsync, see
``_grpc_publish``), ``"auto"`` does so only while the client's NATS connection is down or
was never made (``connect(require_nats=False)``): same futures, acks, errors, ``flush`` and
``close``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Literal, NamedTuple, Protocol, Self

from streamwire.codec.headers import HeaderInput, normalize_headers
from streamwire.codec.message import Confirmation, Message, outgoing
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    RequestTimeout,
)
from streamwire.liftbridge._acks import AckRun
from streamwire.liftbridge._grpc_publish import GrpcPublisher
from streamwire.liftbridge._link import ProducerLink
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.messages import (
    NO_EXPECTED_OFFSET,
    AckPolicy,
    encode_publish,
    headers_to_wire,
    is_literal_subject,
    partition_for_key,
    partition_subject,
)
from streamwire.liftbridge.protocol.publish_template import PublishTemplate, RequestTemplate
from streamwire.metrics import Destination, ProducerMeter, ProducerStats
from streamwire.transport.pending import Ledger
from streamwire.transport.producer_core import ProducerCore, and_wait

__all__ = (
    "BatchConfirmation",
    "MessageTooLarge",
    "Partitioner",
    "Producer",
    "ProducerOptions",
    "Transport",
)


class BatchConfirmation(NamedTuple):
    """Every message of a ``send_many`` call is stored."""

    messages: int
    stream: str
    ranges: tuple[tuple[int, int | None, int | None], ...]
    """``(partition, first offset, last offset)`` of each run of the call's messages stored
    one after the other in one partition, in the order they were sent (offsets ``None``
    where the ack policy returns none)."""


def _ranges(
    confirmations: Iterable[Confirmation],
) -> tuple[tuple[int, int | None, int | None], ...]:
    out: list[tuple[int, int | None, int | None]] = []
    for c in confirmations:
        partition, offset = c.partition or 0, c.offset
        if out:
            p, first, last = out[-1]
            if p == partition and offset is not None and last is not None and offset == last + 1:
                out[-1] = (p, first, offset)
                continue
        out.append((partition, offset, offset))
    return tuple(out)


def _one_future(
    loop: asyncio.AbstractEventLoop, futures: list[asyncio.Future[Confirmation]], stream: str
) -> asyncio.Future[BatchConfirmation]:
    """One future for ``futures``: their :class:`BatchConfirmation` once all succeeded, or
    the first failure (in send order) once all are settled."""
    many: asyncio.Future[BatchConfirmation] = loop.create_future()
    left = len(futures)

    def settled(_: asyncio.Future[Confirmation]) -> None:
        nonlocal left
        left -= 1
        if left or many.done():
            return
        first: BaseException | None = None
        for future in futures:  # every failure retrieved (asyncio logs the others), first kept
            if future.cancelled():
                exc: BaseException | None = ClosedError(
                    f"producer for {stream!r} closed before confirmation"
                )
            else:
                exc = future.exception()
            first = first or exc
        if first is not None:
            many.set_exception(first)
            return
        many.set_result(
            BatchConfirmation(len(futures), stream, _ranges(f.result() for f in futures))
        )

    if not futures:
        many.set_result(BatchConfirmation(0, stream, ()))
    for future in futures:
        future.add_done_callback(settled)
    return many


logger = logging.getLogger(__name__)

#: ``(key, partition count) -> partition``
PartitionFunction = Callable[[bytes | None, int], int]
Partitioner = Literal["auto", "key", "round_robin"] | PartitionFunction
#: How a producer publishes: straight onto NATS, through the gRPC API, or NATS while the
#: client's NATS connection is up and gRPC while it is not.
Transport = Literal["nats", "grpc", "auto"]


class MessageTooLarge(ConfigurationError):
    """The envelope is larger than the NATS server accepts (``max_payload``, or the
    producer's ``max_message_bytes``); nothing was published."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerOptions:
    ack_policy: AckPolicy = AckPolicy.LEADER
    """When the leader acks: LEADER (appended), ALL (replicated to the ISR), NONE (never)."""
    ack_timeout: float | None = 5.0
    """Per message: the confirmation future fails with AckTimeout after this long."""
    confirm_timeout: float | None = 30.0
    """Default time limit of ``send_and_wait`` and ``flush``."""
    partitioner: Partitioner = "auto"
    """``"auto"``: by key when there is one, else round robin; ``"key"``: CRC-32 of the key
    (no key: partition 0), as go-liftbridge; ``"round_robin"``; or ``f(key, count)``."""
    max_in_flight: int = 10_000
    """Messages awaiting their ack; ``send`` waits for room beyond that."""
    max_block: float | None = 30.0
    """How long ``send`` waits for room before raising ProducerBufferFull."""
    crc: bool = False
    """Put a CRC-32C of the payload in every envelope header."""
    envelope: bool = True
    """False: publish the raw value as a plain NATS message (no key, headers nor acks)."""
    max_message_bytes: int | None = None
    """Refuse envelopes above this size (default: the NATS server's max_payload). Keep a
    margin below clustering.replication.max.bytes on replicated streams."""
    detect_no_responders: bool = False
    """Publish with a reply subject so that NATS reports "no responders" at once when no
    partition leader listens (the message then fails with NoResponders instead of an ack
    timeout). The server stores that reply subject in the message's ``reply`` header."""
    subject: str | None = None
    """Publish to this literal subject instead of the stream's (for wildcard streams)."""
    partition: int | None = None
    """Pin every message to this partition (``send``'s own ``partition=`` still wins);
    checked against the stream's partitions when the producer starts."""
    transport: Transport = "nats"
    """``"nats"``: envelopes straight onto NATS; ``"grpc"``: through the server's gRPC API
    (a PublishAsync stream; unary Publish calls on servers without it), which needs no NATS
    connection of the client's own; ``"auto"``: NATS while the client's NATS connection is
    up, gRPC while it is down or was never made. ``crc`` and ``detect_no_responders`` apply
    to NATS publishes only; ``envelope=False`` and ``subject`` need ``"nats"``."""

    def __post_init__(self) -> None:
        if self.transport not in ("nats", "grpc", "auto"):
            raise ConfigurationError(
                f"unknown transport {self.transport!r} (expected 'nats', 'grpc' or 'auto')"
            )
        if self.transport != "nats" and (not self.envelope or self.subject is not None):
            raise ConfigurationError(
                f"transport={self.transport!r} publishes by stream name: envelope=False "
                "and subject= need transport='nats'"
            )
        if self.max_in_flight < 1:
            raise ConfigurationError("max_in_flight must be >= 1")
        if not isinstance(self.ack_policy, int) or self.ack_policy not in tuple(AckPolicy):
            raise ConfigurationError(f"unknown ack policy {self.ack_policy!r}")
        if isinstance(self.partitioner, str) and self.partitioner not in (
            "auto",
            "key",
            "round_robin",
        ):
            raise ConfigurationError(f"unknown partitioner {self.partitioner!r}")
        if self.partition is not None and (
            isinstance(self.partition, bool)
            or not isinstance(self.partition, int)
            or self.partition < 0
        ):
            raise ConfigurationError(f"partition must be an int >= 0, got {self.partition!r}")
        if self.max_message_bytes is not None and self.max_message_bytes < 1:
            raise ConfigurationError("max_message_bytes must be >= 1")
        for name in ("ack_timeout", "confirm_timeout", "max_block"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ConfigurationError(f"{name} must be None or >= 0 seconds")


class _RunRegistry(Protocol):
    """Where the acks of runs are awaited: the client's ack inbox (NATS), or a gRPC
    publisher's stream."""

    def expect_run(self, run: AckRun, timeout: float | None, what: str) -> None: ...

    def forget_run(self, run: AckRun) -> None: ...


class _Settlement:
    """The messages of one call, each acked on its own: the meter settles the call when the
    last of them ends (it is their acks' ``on_done``, after the producer's own one)."""

    __slots__ = ("count", "done", "failed", "meter", "remaining", "started")

    def __init__(
        self,
        meter: ProducerMeter,
        count: int,
        nbytes: int,
        done: Callable[[asyncio.Future[Confirmation]], None],
    ) -> None:
        self.meter = meter
        self.started = meter.sent(count, nbytes)
        self.count = self.remaining = count
        self.failed = 0
        self.done = done

    def __call__(self, future: asyncio.Future[Confirmation]) -> None:
        self.done(future)
        if future.cancelled() or future.exception() is not None:
            self.failed += 1
        self.remaining -= 1
        if not self.remaining:
            self.meter.settled(self.started, self.count - self.failed, self.failed)


class Producer(ProducerCore):
    """Publishes to one stream over NATS. Use ``async with client.producer(stream) as p``."""

    options: ProducerOptions

    def __init__(self, client: ProducerLink, stream: str, *, options: ProducerOptions) -> None:
        super().__init__(stream, None)
        self._client = client
        self._loop = asyncio.get_running_loop()
        self.stream = stream
        self.options = options
        self.subject = ""
        self.partitions = 0
        self._subjects: list[str] = []
        self._round_robin = itertools.count()
        self._pending: set[asyncio.Future[Confirmation]] = set()
        self._in_runs = 0
        """Messages of ledger runs (``send_batch``) awaiting their ack."""
        self._started = False
        policy = options.ack_policy
        self._acked = options.envelope and policy != AckPolicy.NONE
        self._template: PublishTemplate | None = None
        self._request_templates: dict[int, RequestTemplate] = {}
        """The gRPC path's PublishRequest templates, by partition."""
        self._grpc: GrpcPublisher | None = None
        self._meter = ProducerMeter(
            Destination("liftbridge", stream, f"{client.host}:{client.port}")
        )

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Look the stream up (subject, partitions). Raises StreamNotFound if it does not
        exist. Cancellation: nothing to undo."""
        info = await self._client.stream_info(self.stream, timeout=timeout)
        subject = self.options.subject or info.subject
        if not is_literal_subject(subject):
            raise ConfigurationError(
                f"stream {self.stream!r} listens on {subject!r}, which is not a literal "
                "subject: give the producer subject= to publish on a matching one"
            )
        client = self._client
        if self.options.transport == "nats" and client._nats.link is None:
            raise ConnectError(
                f"producer for {self.stream!r}: the client has no NATS connection "
                f"({client.nats_error}); use transport='grpc' or 'auto'"
            )
        self.subject = subject
        self.partitions = max(1, info.partition_count)
        pinned = self.options.partition
        if pinned is not None and pinned >= self.partitions:
            raise ConfigurationError(
                f"stream {self.stream!r} has partitions 0..{self.partitions - 1}, not {pinned}"
            )
        self._subjects = [partition_subject(subject, p) for p in range(self.partitions)]
        if self.options.transport != "nats" and self._grpc is None:
            publisher = GrpcPublisher(client, self.stream, request_timeout=self.options.ack_timeout)
            await publisher.start(timeout)
            self._grpc = publisher
            client._publishers.add(publisher)
        self._started = True
        return self

    def _over_grpc(self) -> bool:
        """Whether the next message goes through the gRPC API."""
        how = self.options.transport
        return how == "grpc" or (how == "auto" and not self._client.nats_connected)

    def _is_started(self) -> bool:
        return bool(self._started)

    def _has_room(self, size: int) -> bool:
        """Room is counted in messages awaiting their ack (``max_in_flight``)."""
        return self.pending < self.options.max_in_flight

    @property
    def pending(self) -> int:
        """Messages sent whose ack has not arrived (nor failed) yet."""
        return len(self._pending) + self._in_runs

    @property
    def stats(self) -> ProducerStats:
        """Counters of what this producer published (docs/api.md, "Metrics and tracing");
        without acks (``ack_policy=NONE``, ``envelope=False``) a message is confirmed once
        NATS took it."""
        return self._meter.snapshot()

    # --- encoding ----------------------------------------------------------------------

    @property
    def partition_count(self) -> int:
        """The stream's partitions (known once the producer started)."""
        return self.partitions

    def partition_for_key(self, key: bytes) -> int:
        """The partition a message with ``key`` goes to when neither it nor the producer
        names one: the key partitioner (``"auto"`` and ``"key"``: CRC-32 of the key, as
        go-liftbridge), or the producer's own ``f(key, count)``. A ``"round_robin"``
        producer routes no key to a fixed partition: a ConfigurationError."""
        count = self.partitions
        if count < 1:
            raise ClosedError("producer not started: use 'async with' or 'await'")
        how = self.options.partitioner
        if how == "round_robin":
            raise ConfigurationError("a round_robin producer routes no key to a fixed partition")
        if count == 1 or isinstance(how, str):
            return partition_for_key(key, count)
        return self._partition(key, None)

    def _partition(self, key: bytes | None, partition: int | None) -> int:
        count = self.partitions
        if partition is None:
            partition = self.options.partition
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise ConfigurationError(f"partition must be an int, got {partition!r}")
            if not 0 <= partition < count:
                raise ConfigurationError(
                    f"stream {self.stream!r} has partitions 0..{count - 1}, not {partition}"
                )
            return partition
        if count == 1:
            return 0
        how = self.options.partitioner
        if how == "key" or (how == "auto" and key is not None):
            return partition_for_key(key, count)
        if how in ("auto", "round_robin"):
            return next(self._round_robin) % count
        chosen = how(key, count)  # type: ignore[operator]
        if not isinstance(chosen, int) or not 0 <= chosen < count:
            raise ConfigurationError(f"the partitioner returned {chosen!r} for {count} partitions")
        return chosen

    @staticmethod
    def _fields(
        value: bytes | Message, key: bytes | None, headers: Mapping[str, HeaderInput] | None
    ) -> tuple[bytes, bytes | None, dict[str, bytes] | None]:
        """Payload, key and wire headers of a message (checked)."""
        if isinstance(value, Message):
            msg = outgoing(value, key, headers)
            payload, key = msg.value, msg.key
            wire = headers_to_wire(msg.headers) if msg.headers else None
        else:
            if not isinstance(value, bytes | bytearray | memoryview):
                raise ConfigurationError(f"message value must be bytes, got {type(value).__name__}")
            payload = bytes(value)
            wire = headers_to_wire(normalize_headers(headers)) if headers else None
        if key is not None and not isinstance(key, bytes | bytearray | memoryview):
            raise ConfigurationError(f"message key must be bytes, got {type(key).__name__}")
        return payload, key, wire

    def _limit(self) -> int:
        limit = self._client._nats.max_payload
        if self.options.max_message_bytes is not None:
            limit = min(limit, self.options.max_message_bytes)
        return limit

    def _request_template(self, partition: int) -> RequestTemplate:
        template = self._request_templates.get(partition)
        if template is None:
            template = self._request_templates[partition] = RequestTemplate(
                stream=self.stream, partition=partition, ack_policy=self.options.ack_policy
            )
        return template

    def _request(
        self,
        value: bytes | Message,
        key: bytes | None,
        headers: Mapping[str, HeaderInput] | None,
        expected_offset: int | None,
        partition: int | None,
        cid: str,
    ) -> tuple[str, bytes, int]:
        """``(correlation id, serialized PublishRequest, partition)`` of a message on the
        gRPC path (the id is empty when it is not acked)."""
        payload, key, wire = self._fields(value, key, headers)
        key_bytes = None if key is None else bytes(key)
        p = self._partition(key_bytes, partition)
        if not wire and expected_offset is None:  # the usual message: shared fields cached
            data = self._request_template(p).encode(payload, cid, key_bytes)
        else:
            data = pb.PublishRequest(
                key=key_bytes or b"",
                value=payload,
                stream=self.stream,
                partition=p,
                headers=wire,
                ackPolicy=pb.AckPolicy.ValueType(self.options.ack_policy),
                expectedOffset=NO_EXPECTED_OFFSET if expected_offset is None else expected_offset,
                correlationId=cid,
            ).SerializeToString()
        self._check_size(len(data))
        return cid, data, p

    def _requests(self, values: list[bytes | Message]) -> list[tuple[str, bytes, int]]:
        """:meth:`_request` of each of ``send_batch``'s values (a value that cannot be
        encoded raises: nothing is sent); ``bytes`` values to a one-partition stream in
        one pass (the same bytes)."""
        publisher = self._grpc
        if publisher is None:
            raise ClosedError("producer not started: use 'async with' or 'await'")
        n = len(values)
        cids = publisher.next_ids(n) if self._acked else [""] * n
        if self.partitions != 1 or not all(type(value) is bytes for value in values):
            request = self._request
            pairs = zip(values, cids, strict=True)
            return [request(value, None, None, None, None, cid) for value, cid in pairs]
        datas = self._request_template(0).encode_many(values, cids)  # type: ignore[arg-type]
        if datas:
            self._check_size(max(map(len, datas)))
        return list(zip(cids, datas, repeat(0), strict=False))  # (repeat: endless)

    def _check_size(self, size: int) -> None:
        limit = self._limit()
        if size > limit:
            raise MessageTooLarge(
                f"a {size}-byte message exceeds the limit of {limit} bytes on {self.stream!r}"
            )

    def _encode(
        self,
        value: bytes | Message,
        key: bytes | None,
        headers: Mapping[str, HeaderInput] | None,
        cid: str,
        expected_offset: int | None,
    ) -> tuple[bytes, bytes | None]:
        payload, key, wire = self._fields(value, key, headers)
        opts = self.options
        if not opts.envelope:
            if key is not None or wire or expected_offset is not None:
                raise ConfigurationError(
                    "a plain (envelope=False) message has no key, headers nor expected offset"
                )
            data = payload
        elif not wire and expected_offset is None:  # the usual message: shared fields cached
            template, inbox = self._template, self._client._nats.inbox if self._acked else ""
            if template is None or template.ack_inbox != inbox:
                template = self._template = PublishTemplate(
                    ack_inbox=inbox, ack_policy=opts.ack_policy, crc=opts.crc
                )
            data = template.encode(payload, cid, None if key is None else bytes(key))
        else:
            data = encode_publish(
                payload,
                key=key,
                headers=wire,
                ack_inbox=self._client._nats.inbox if self._acked else "",
                correlation_id=cid,
                ack_policy=opts.ack_policy,
                expected_offset=NO_EXPECTED_OFFSET if expected_offset is None else expected_offset,
                crc=opts.crc,
            )
        self._check_size(len(data))
        return data, None if key is None else bytes(key)

    def _encode_plain(self, values: list[bytes | Message]) -> list[tuple[str, bytes, int]] | None:
        """``send_batch``'s usual call in one pass: ``bytes`` values (no key nor headers) in
        envelopes to a one-partition stream, encoded as :meth:`_encode` does (same bytes,
        same ``MessageTooLarge``); None for anything else."""
        opts = self.options
        if (
            self.partitions != 1
            or not opts.envelope
            or not values
            or not all(type(value) is bytes for value in values)
        ):
            return None
        template, inbox = self._template, self._client._nats.inbox if self._acked else ""
        if template is None or template.ack_inbox != inbox:
            template = self._template = PublishTemplate(
                ack_inbox=inbox, ack_policy=opts.ack_policy, crc=opts.crc
            )
        cids = self._client._nats.next_ids(len(values))
        datas = template.encode_many(values, cids)  # type: ignore[arg-type]  # all bytes
        self._check_size(max(map(len, datas)))
        return list(zip(cids, datas, repeat(0), strict=False))

    # --- sending -----------------------------------------------------------------------

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        partition: int | None = None,
        expected_offset: int | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Publish one message; returns the future of its confirmation (``.offset`` and
        ``.partition`` from the ack).

        ``expected_offset`` is checked by streams with optimistic concurrency control
        (IncorrectOffset when it does not match). Waits while ``max_in_flight`` messages
        await acks, up to ``timeout`` (default ``max_block``), then raises
        ProducerBufferFull. ``headers`` named ``subject`` or ``reply`` are refused.

        Cancellation: the message may or may not have been published; its future is
        cancelled. Cancelling the returned future does not unpublish anything.
        """
        self._check()
        if self._over_grpc() and self._grpc is not None:
            cid = self._grpc.next_ids(1)[0] if self._acked else ""
            item = self._request(value, key, headers, expected_offset, partition, cid)
            if self.pending >= self.options.max_in_flight:
                await self._wait_for_room(0, timeout)
            return (await self._publish_grpc([item]))[0]
        client = self._client
        cid = client._nats.next_id()
        data, key_bytes = self._encode(value, key, headers, cid, expected_offset)
        p = self._partition(key_bytes, partition)
        if self.pending >= self.options.max_in_flight:
            await self._wait_for_room(0, timeout)
        return await self._publish(cid, data, p)

    async def _publish(self, cid: str, data: bytes, p: int) -> asyncio.Future[Confirmation]:
        client = self._client
        subject = self._subjects[p]
        block = self.options.max_block
        if not self._acked:
            await client._nats.publish(subject, data, "", block)
            future: asyncio.Future[Confirmation] = self._loop.create_future()
            future.set_result(Confirmation(None, None, self.stream, p))
            self._meter.settled(self._meter.sent(1, len(data)), 1, 0)
            return future
        settle = _Settlement(self._meter, 1, len(data), self._done)
        future = self._expect(cid, f"a message to {subject}", settle)
        reply = client._nats.reply_subject(cid) if self.options.detect_no_responders else ""
        try:
            await client._nats.publish(subject, data, reply, block)
        except BaseException:
            self._unexpect([cid], [future])
            raise
        return future

    def _expect(self, cid: str, what: str, on_done: _Settlement) -> asyncio.Future[Confirmation]:
        """Register the ack future of ``cid`` and count it as pending from now on (before
        the publish: its ack may arrive while the publish still waits for the buffer)."""
        future = self._client._nats.expect(cid, self.options.ack_timeout, what, on_done)
        self._pending.add(future)
        self._idle.clear()
        return future

    def _unexpect(self, cids: list[str], futures: list[asyncio.Future[Confirmation]]) -> None:
        """The publish of these failed: stop waiting for their acks."""
        for cid in cids:
            self._client._nats.forget(cid)
        self._pending.difference_update(futures)
        self._settled()

    def _settled(self) -> None:
        pending = len(self._pending) + self._in_runs
        if pending < self.options.max_in_flight:
            self._room.set()
        if not pending:
            self._idle.set()

    def _done(self, future: asyncio.Future[Confirmation]) -> None:
        self._pending.discard(future)
        if not future.cancelled() and (exc := future.exception()) is not None:
            self._note_failure(exc)
        self._settled()

    def _run_settled(self, run: AckRun, n: int, exc: BaseException | None) -> None:
        """``n`` messages of ``run`` were acked (``exc`` None) or failed with ``exc``."""
        self._in_runs -= n
        if exc is not None:
            run.failed += n
            self._note_failure(exc)
        if run.left <= 0:
            self._meter.settled(run.started, len(run.cids) - run.failed, run.failed)
        self._settled()

    send_and_wait = and_wait(send)

    async def send_batch(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> list[asyncio.Future[Confirmation]]:
        """Publish several messages in order; returns their confirmation futures.

        Cancellation: the messages published before the cancellation stay published.
        """
        self._check()
        values = values if isinstance(values, list) else list(values)
        encoded: list[tuple[str, bytes, int]] | None
        if self._over_grpc():
            encoded, publish = self._requests(values), self._publish_grpc
        else:
            encoded, publish = self._encode_plain(values), self._publish_many
        if encoded is None:
            encoded = []
            for value in values:  # a message that cannot be encoded fails the call: none sent
                cid = self._client._nats.next_id()
                data, key_bytes = self._encode(value, None, None, cid, None)
                encoded.append((cid, data, self._partition(key_bytes, None)))
        futures: list[asyncio.Future[Confirmation]] = []
        limit = self.options.max_in_flight
        start = 0
        while start < len(encoded):
            if self.pending >= limit:
                await self._wait_for_room(0, timeout)
            end = start + max(limit - self.pending, 1)
            futures += await publish(encoded[start:end])
            start = end
        return futures

    async def send_many(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> asyncio.Future[BatchConfirmation]:
        """Publish several messages in order with **one** future for all of them: it
        resolves to a :class:`BatchConfirmation` (how many, and the offsets each partition
        stored) once every message is stored, or fails with the first error (the others
        may be stored).

        Cancellation: the messages published before the cancellation stay published; the
        call then returns no future for them.
        """
        return _one_future(self._loop, await self.send_batch(values, timeout=timeout), self.stream)

    async def _publish_grpc(
        self, items: list[tuple[str, bytes, int]]
    ) -> list[asyncio.Future[Confirmation]]:
        """Queue ``(correlation id, request, partition)`` items on the gRPC stream: acked,
        as one run per partition (as :meth:`_publish_runs`), else confirmed at once."""
        publisher = self._grpc
        if publisher is None:
            raise ClosedError("producer not started: use 'async with' or 'await'")
        self._check()
        nbytes = sum(len(data) for _, data, _ in items)
        if not self._acked:
            publisher.submit(items)
            return self._unacked(items, nbytes)
        whats = {p: f"a message to {self.stream}/{p} over gRPC" for p in {p for *_, p in items}}
        runs = self._open_runs(publisher, items, nbytes, whats, keep=True)
        try:
            publisher.submit(items)
        except BaseException:  # the caller gets none of these futures
            self._drop_runs(publisher, runs)
            raise
        return self._run_futures(runs, len(items))

    def _unacked(
        self, items: list[tuple[str, bytes, int]], nbytes: int
    ) -> list[asyncio.Future[Confirmation]]:
        """The futures of messages nothing acks (already handed over), confirmed."""
        loop = self._loop
        done: list[asyncio.Future[Confirmation]] = []
        for _, _, p in items:
            future: asyncio.Future[Confirmation] = loop.create_future()
            future.set_result(Confirmation(None, None, self.stream, p))
            done.append(future)
        self._meter.settled(self._meter.sent(len(items), nbytes), len(items), 0)
        return done

    async def _publish_many(
        self, items: list[tuple[str, bytes, int]]
    ) -> list[asyncio.Future[Confirmation]]:
        """Publish ``(correlation id, envelope, partition)`` items in one NATS write."""
        client, subjects, opts = self._client, self._subjects, self.options
        nbytes = sum(len(data) for _, data, _ in items)
        if not self._acked:
            await client._nats.publish_many([(subjects[p], data, "") for _, data, p in items])
            return self._unacked(items, nbytes)
        whats = {p: f"a message to {subjects[p]}" for p in {p for _, _, p in items}}
        if not opts.detect_no_responders:
            return await self._publish_runs(items, nbytes, whats)
        # with no-responders detection: a future per message, each with its reply subject
        expect = self._expect
        settle = _Settlement(self._meter, len(items), nbytes, self._done)
        futures = [expect(cid, whats[p], settle) for cid, _, p in items]
        reply = client._nats.reply_subject
        messages = [(subjects[p], data, reply(cid)) for cid, data, p in items]
        try:
            await client._nats.publish_many(messages, opts.max_block)
        except BaseException:
            self._unexpect([cid for cid, _, _ in items], futures)
            raise
        return futures

    async def _publish_runs(
        self, items: list[tuple[str, bytes, int]], nbytes: int, whats: dict[int, str]
    ) -> list[asyncio.Future[Confirmation]]:
        """Publish acked messages as one ledger run per partition (:meth:`_open_runs`); the
        messages go out in their order, in one write."""
        client = self._client
        acks = client._nats.acks
        if acks is None:
            raise ClosedError("the Liftbridge client is closed")
        runs = self._open_runs(acks, items, nbytes, whats)
        subjects = self._subjects
        try:
            await client._nats.publish_many(
                [(subjects[p], data, "") for _, data, p in items], self.options.max_block
            )
        except BaseException:  # the caller gets none of these futures
            self._drop_runs(acks, runs)
            raise
        return self._run_futures(runs, len(items))

    def _open_runs(
        self,
        registry: _RunRegistry,
        items: list[tuple[str, bytes, int]],
        nbytes: int,
        whats: dict[int, str],
        *,
        keep: bool = False,
    ) -> list[tuple[AckRun, list[int]]]:
        """Register acked ``(correlation id, data, partition)`` items as one run per
        partition with ``registry``: lazy futures (``transport.pending``), acks resolved
        into the run's ledger (``_acks.AckRun``), one deadline per run; ``keep``: the
        runs keep their items' data (to send them again). Each run with the indices of its
        items."""
        groups: dict[int, list[int]] = {p: [] for p in whats}
        if len(groups) == 1:
            groups[next(iter(groups))] = list(range(len(items)))
        else:
            for i, (_, _, p) in enumerate(items):
                groups[p].append(i)
        meter, loop, timeout = self._meter, self._loop, self.options.ack_timeout
        meter.accepted(len(items), nbytes)
        runs: list[tuple[AckRun, list[int]]] = []
        for p, at in groups.items():
            ledger = Ledger(loop, len(at), self.stream, offsets=True)
            ledger.partition = p
            chosen = items if len(groups) == 1 else [items[i] for i in at]
            size = nbytes if len(groups) == 1 else sum(len(data) for _, data, _ in chosen)
            payloads = [data for _, data, _ in chosen] if keep else None
            run = AckRun([c for c, _, _ in chosen], ledger, self._run_settled, payloads=payloads)
            run.started = meter.begin(len(at), size)
            try:
                registry.expect_run(run, timeout, whats[p])  # raises only when closed
            except BaseException:
                self._drop_runs(registry, runs)
                meter.settled(run.started, 0, len(at))
                raise
            runs.append((run, at))
            self._in_runs += len(at)
        self._idle.clear()
        return runs

    def _drop_runs(self, registry: _RunRegistry, runs: list[tuple[AckRun, list[int]]]) -> None:
        """The messages of ``runs`` were not sent: stop waiting for them (the caller gets
        none of their futures)."""
        meter = self._meter
        for run, at in runs:
            left = run.left
            registry.forget_run(run)
            self._in_runs -= left
            if left:
                meter.settled(run.started, len(at) - run.failed - left, run.failed + left)
        self._settled()

    @staticmethod
    def _run_futures(
        runs: list[tuple[AckRun, list[int]]], count: int
    ) -> list[asyncio.Future[Confirmation]]:
        """The futures of ``count`` items registered as ``runs``, in the items' order."""
        if len(runs) == 1:
            return runs[0][0].ledger.futures()
        futures: list[asyncio.Future[Confirmation]] = [None] * count  # type: ignore[list-item]
        for run, at in runs:
            for i, future in zip(at, run.ledger.futures(), strict=True):
                futures[i] = future
        return futures

    async def _flush_wire(self) -> None:
        """A flush first writes out what nats-py buffered (nothing to do when this producer
        publishes over gRPC now), waiting for its PING/PONG up to ``ack_timeout``. A PONG
        that does not come is no failure of its own: the PING went with a connection that
        dropped what it held (nats-py then waits for that PONG for ever, seen through a cut
        proxy), and every message's ack has its own deadline, which the flush then waits
        for."""
        if self.options.transport == "nats" or self._client.nats_connected:
            try:
                await self._client._nats.flush(self.options.ack_timeout)
            except RequestTimeout as exc:
                logger.debug("flush of %r: %s; waiting for the acks", self.stream, exc)

    # --- closing -----------------------------------------------------------------------

    def abort(self) -> None:
        """Stop taking messages. Messages still unconfirmed keep waiting for their acks
        until their own deadline (a gRPC publisher still writes what it queued). Idempotent."""
        self._closed = True
        self._room.set()
        self._client._forget_child(self)
        if self._grpc is not None:
            self._grpc.stop()
