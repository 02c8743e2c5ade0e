"""Typed wrappers over the generated ``Message`` and ``Ack``: what goes onto NATS and back.

* :func:`encode_publish` builds the envelope a producer publishes on a partition subject.
* :func:`decode_ack` reads what the server publishes to the ack inbox, strictly.
* :func:`decode_publish` / :func:`encode_ack` are the server's side of the same exchange,
  for test doubles and tools.
* :func:`to_message` turns a subscribed ``Message`` into a :class:`streamwire.Message`;
  :func:`decode_message` does it from the bytes a Subscribe stream carries (natively when
  the native core is loaded and the message has the common shape, see
  :func:`decode_message_native`).
* Subjects and partitions: :func:`partition_subject`, :func:`partition_for_key`,
  :func:`is_literal_subject`.

Only :mod:`streamwire.liftbridge` sees generated classes; everything public here takes and
returns plain values and frozen dataclasses.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import EncodeError as _PbEncodeError

from streamwire._native import NativeCore
from streamwire._native import core as _native
from streamwire.codec._structs import BytesLike
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.message import Message, received_message
from streamwire.errors import ConfigurationError, DecodeError, StreamwireError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.envelope import (
    MessageType,
    decode_envelope,
    encode_envelope,
    envelope_payload,
)

__all__ = (
    "NO_EXPECTED_OFFSET",
    "RESERVED_HEADERS",
    "Ack",
    "AckPolicy",
    "PublishedMessage",
    "ack_from_pb",
    "decode_ack",
    "decode_message",
    "decode_message_native",
    "decode_message_pure",
    "decode_publish",
    "encode_ack",
    "encode_publish",
    "KINDS_HEADER",
    "headers_from_wire",
    "headers_to_wire",
    "is_literal_subject",
    "parse_ack",
    "partition_from_ack",
    "partition_for_key",
    "partition_of",
    "partition_subject",
    "to_message",
)

#: ``Message.offset`` on publish when no optimistic-concurrency check is wanted.
NO_EXPECTED_OFFSET: Final = -1

#: Header names the server overwrites with the NATS subject and reply subject.
RESERVED_HEADERS: Final = frozenset({"subject", "reply"})

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


class AckPolicy(IntEnum):
    """When the partition leader acks a message (``docs/protocol/liftbridge.md`` §3.3)."""

    LEADER = 0
    """Once the leader has appended the message to its own log (the default)."""
    ALL = 1
    """Once every in-sync replica has it (committed)."""
    NONE = 2
    """Never, except for error acks."""


@dataclass(frozen=True, slots=True)
class Ack:
    """An ack as the server sends it (timestamps in Unix nanoseconds).

    ``offset`` is 0 both for the first message of a partition and in error acks (proto3
    leaves it off the wire); check ``ack_error`` first.
    """

    stream: str
    partition_subject: str
    msg_subject: str
    offset: int
    ack_inbox: str
    correlation_id: str
    ack_policy: int
    reception_timestamp: int
    commit_timestamp: int
    ack_error: int = 0


@dataclass(frozen=True, slots=True)
class PublishedMessage:
    """A publish envelope as the server reads it (see :func:`decode_publish`)."""

    value: bytes
    key: bytes
    headers: dict[str, bytes] = field(default_factory=dict)
    ack_inbox: str = ""
    correlation_id: str = ""
    ack_policy: int = 0
    expected_offset: int = 0


# --- subjects and partitions ----------------------------------------------------------


def is_literal_subject(subject: str) -> bool:
    """A NATS subject one can publish to: non-empty tokens, no wildcards, no whitespace."""
    if not subject or any(c.isspace() for c in subject):
        return False
    return all(token and token not in ("*", ">") for token in subject.split("."))


def partition_subject(subject: str, partition: int) -> str:
    """The subject partition ``partition`` of a stream on ``subject`` listens on."""
    if partition < 0:
        raise ConfigurationError(f"a partition must be >= 0, got {partition}")
    return subject if partition == 0 else f"{subject}.{partition}"


def partition_for_key(key: BytesLike | None, partitions: int) -> int:
    """go-liftbridge's key partitioner: CRC-32 (IEEE) of the key, unsigned, mod count."""
    if partitions < 1:
        raise ConfigurationError(f"a stream has at least one partition, got {partitions}")
    return zlib.crc32(key or b"") % partitions


# --- headers ----------------------------------------------------------------------------


KINDS_HEADER: Final = "streamwire.kinds"
"""Carries the kinds of non-Raw headers as compact JSON ``{"name": kind code}``: Liftbridge
headers are plain bytes, so without it typed headers would come back as Raw. Other clients
see every value in its canonical byte form and can ignore this header."""


def headers_to_wire(headers: Mapping[str, HeaderValue]) -> dict[str, bytes]:
    """Liftbridge headers are ``map<string, bytes>``: Raw as is, String as UTF-8, other kinds
    in their canonical form (:meth:`HeaderValue.to_bytes`), their kinds in
    :data:`KINDS_HEADER`.

    ``subject`` and ``reply`` are refused (the server overwrites them), and so is the kinds
    header's own name.
    """
    out: dict[str, bytes] = {}
    kinds: dict[str, int] = {}
    for name, value in headers.items():
        if name in RESERVED_HEADERS or name == KINDS_HEADER:
            raise ConfigurationError(
                f"header name {name!r} is reserved (by the Liftbridge server or streamwire)"
            )
        out[name] = value.to_bytes()
        if value.kind is not HeaderKind.RAW:
            kinds[name] = int(value.kind)
    if kinds:
        out[KINDS_HEADER] = json.dumps(kinds, separators=(",", ":"), sort_keys=True).encode()
    return out


def headers_from_wire(
    wire: Mapping[str, bytes], *, server_headers: bool = False
) -> dict[str, HeaderValue]:
    """The reverse of :func:`headers_to_wire`; values without a (valid) recorded kind are
    Raw, so headers from other clients and malformed kinds never fail a message."""
    kinds: dict[str, int] = {}
    raw_kinds = wire.get(KINDS_HEADER)
    if raw_kinds is not None:
        try:
            parsed = json.loads(raw_kinds)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            kinds = {k: v for k, v in parsed.items() if isinstance(v, int)}
    out: dict[str, HeaderValue] = {}
    for name, value in wire.items():
        if name == KINDS_HEADER and kinds:
            continue
        if not server_headers and name in RESERVED_HEADERS:
            continue
        kind = kinds.get(name)
        if kind is not None:
            try:
                out[name] = HeaderValue.from_bytes(kind, value)
                continue
            except StreamwireError:
                pass
        out[name] = HeaderValue(HeaderKind.RAW, bytes(value))
    return out


# --- publish ----------------------------------------------------------------------------


def _check_int64(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {type(value).__name__}")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ConfigurationError(f"{name} {value} does not fit in int64")


def encode_publish(
    value: BytesLike,
    *,
    key: BytesLike | None = None,
    headers: Mapping[str, bytes] | None = None,
    ack_inbox: str = "",
    correlation_id: str = "",
    ack_policy: int = AckPolicy.LEADER,
    expected_offset: int = NO_EXPECTED_OFFSET,
    crc: bool = False,
) -> bytes:
    """The envelope (Publish) for one message.

    ``expected_offset`` is the offset the message must land at on a stream with optimistic
    concurrency control (``-1``: no check). Without ``ack_inbox`` the server sends no ack.
    """
    _check_int64("expected_offset", expected_offset)
    if ack_policy not in (0, 1, 2):
        raise ConfigurationError(f"unknown ack policy {ack_policy!r}")
    try:
        msg = pb.Message(
            offset=expected_offset,
            key=bytes(key) if key is not None else b"",
            value=bytes(value),
            headers=dict(headers) if headers else None,
            ackInbox=ack_inbox,
            correlationId=correlation_id,
            ackPolicy=ack_policy,  # type: ignore[arg-type]
        )
        payload = msg.SerializeToString()
    except (TypeError, ValueError, _PbEncodeError) as exc:
        raise ConfigurationError(f"cannot encode the message: {exc}") from exc
    return encode_envelope(MessageType.PUBLISH, payload, crc=crc)


def decode_publish(data: BytesLike, *, verify_crc: bool = True) -> PublishedMessage:
    """Read a Publish envelope (what a partition leader does); raises :class:`DecodeError`."""
    _, payload = decode_envelope(data, expected=MessageType.PUBLISH, verify_crc=verify_crc)
    msg = pb.Message()
    _parse(msg, payload, "Message")
    return PublishedMessage(
        value=msg.value,
        key=msg.key,
        headers=dict(msg.headers),
        ack_inbox=msg.ackInbox,
        correlation_id=msg.correlationId,
        ack_policy=int(msg.ackPolicy),
        expected_offset=msg.offset,
    )


# --- acks -------------------------------------------------------------------------------


def _parse(target: pb.Message | pb.Ack, payload: BytesLike, what: str) -> None:
    try:
        target.ParseFromString(payload if type(payload) is bytes else bytes(payload))
    except (_PbDecodeError, ValueError, TypeError, RuntimeError) as exc:
        raise DecodeError(f"{what} protobuf ({exc})", None, frame="envelope") from None


def parse_ack(data: BytesLike, *, verify_crc: bool = True) -> pb.Ack:
    """The protobuf Ack of an Ack envelope, checked strictly (the client's ack inbox reads
    only the fields it needs from it); raises only :class:`DecodeError` /
    :class:`~streamwire.errors.ChecksumMismatchError` on malformed input."""
    msg = pb.Ack()
    _parse(msg, envelope_payload(data, MessageType.ACK, verify_crc=verify_crc), "Ack")
    return msg


def decode_ack(data: BytesLike, *, verify_crc: bool = True) -> Ack:
    """Read an Ack envelope strictly; raises only :class:`DecodeError` /
    :class:`~streamwire.errors.ChecksumMismatchError` on malformed input."""
    return ack_from_pb(parse_ack(data, verify_crc=verify_crc))


def ack_from_pb(msg: pb.Ack) -> Ack:
    """An :class:`Ack` from the protobuf message (an envelope's, or a gRPC response's)."""
    return Ack(
        stream=msg.stream,
        partition_subject=msg.partitionSubject,
        msg_subject=msg.msgSubject,
        offset=msg.offset,
        ack_inbox=msg.ackInbox,
        correlation_id=msg.correlationId,
        ack_policy=int(msg.ackPolicy),
        reception_timestamp=msg.receptionTimestamp,
        commit_timestamp=msg.commitTimestamp,
        ack_error=int(msg.ackError),
    )


def encode_ack(ack: Ack, *, crc: bool = False) -> bytes:
    """The Ack envelope the server would send (for test doubles)."""
    try:
        payload = pb.Ack(
            stream=ack.stream,
            partitionSubject=ack.partition_subject,
            msgSubject=ack.msg_subject,
            offset=ack.offset,
            ackInbox=ack.ack_inbox,
            correlationId=ack.correlation_id,
            ackPolicy=ack.ack_policy,  # type: ignore[arg-type]
            receptionTimestamp=ack.reception_timestamp,
            commitTimestamp=ack.commit_timestamp,
            ackError=ack.ack_error,  # type: ignore[arg-type]
        ).SerializeToString()
    except (TypeError, ValueError, _PbEncodeError) as exc:
        raise ConfigurationError(f"cannot encode the ack: {exc}") from exc
    return encode_envelope(MessageType.ACK, payload, crc=crc)


# --- subscribed messages ----------------------------------------------------------------


def to_message(msg: pb.Message, *, server_headers: bool = False) -> Message:
    """A subscribed message as a :class:`streamwire.Message`.

    Header kinds come back from :data:`KINDS_HEADER` (Raw otherwise). The server adds
    ``subject`` and ``reply`` to every message; they are dropped unless ``server_headers``.
    An empty key is ``None`` (proto3 cannot tell them apart). The timestamp is the server's
    receive time.
    """
    wire = msg.headers
    if not server_headers and len(wire) == 2 and "subject" in wire and "reply" in wire:
        headers: dict[str, HeaderValue] = {}  # only the server's: the common case
    else:
        headers = headers_from_wire(wire, server_headers=server_headers)
    return received_message(
        msg.value,
        msg.key or None,
        headers,
        msg.timestamp // 1000,
        msg.offset,
        msg.stream,
        msg.partition,
        None,
    )


def decode_message_pure(raw: bytes, *, server_headers: bool = False) -> Message:
    """:func:`decode_message` without the native core: protobuf, then :func:`to_message`."""
    msg = pb.Message()
    _parse(msg, raw, "Message")
    return to_message(msg, server_headers=server_headers)


def decode_message_native(core: NativeCore, raw: bytes, *, server_headers: bool = False) -> Message:
    """:func:`decode_message` through ``core``: it builds the common shape (the fields of
    ``Message`` and only the server's headers, dropped) and hands anything else back
    (``None``) to :func:`decode_message_pure`, which also raises what protobuf raises."""
    if not server_headers and type(raw) is bytes:
        msg = core.lb_decode_message(raw)
        if msg is not None:
            return msg
    return decode_message_pure(raw, server_headers=server_headers)


def decode_message(raw: bytes, *, server_headers: bool = False) -> Message:
    """The bytes of one subscribed ``liftbridge.Message`` (a Subscribe response) as a
    :class:`streamwire.Message`, as :func:`to_message` makes it; raises
    :class:`DecodeError` when they are not one."""
    if _native is not None:
        return decode_message_native(_native, raw, server_headers=server_headers)
    return decode_message_pure(raw, server_headers=server_headers)


def partition_from_ack(ack: Ack) -> int | None:
    """The partition an ack is for: the Ack has no partition field, but ``msg_subject`` is
    the partition subject (``partition_subject`` for 0, one more token ``.<n>`` for n)."""
    return partition_of(ack.partition_subject, ack.msg_subject)


def partition_of(partition_subject: str, msg_subject: str) -> int | None:
    """The partition number of ``msg_subject`` on a stream whose partition 0 is published
    on ``partition_subject`` (see :func:`partition_from_ack`)."""
    if msg_subject == partition_subject:
        return 0
    base = partition_subject.split(".")
    tokens = msg_subject.split(".")
    if len(tokens) == len(base):
        return 0
    if len(tokens) == len(base) + 1 and tokens[-1].isdigit() and tokens[-1].isascii():
        return int(tokens[-1])
    return None
