"""Publish messages for one producer, with the fields every message shares encoded once.

A producer's messages differ only in value, key and correlation id; the rest (the expected
offset: none, the ack inbox, the ack policy, and on the gRPC path the stream and partition)
is the same for all of them. :class:`Splice` serializes those shared fields once (with the
generated class, so they are exactly what the generated serializer writes) and splices the
per-message fields around them in field-number order, which is the order protobuf
serializers write: the bytes equal the generated class's ``SerializeToString`` for the same
message. Two messages use it:

* :class:`PublishTemplate`: the NATS envelope (a ``Message`` behind the envelope header),
  the same bytes as :func:`~streamwire.liftbridge.protocol.messages.encode_publish`;
* :class:`RequestTemplate`: the gRPC ``PublishRequest`` of ``PublishAsync``, the same bytes
  as ``pb.PublishRequest(...).SerializeToString()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamwire.codec.checksums import crc32c
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.envelope import MessageType, encode_header

__all__ = ("PublishTemplate", "RequestTemplate", "Splice")

_NO_EXPECTED_OFFSET: Final = -1
_SMALL: Final = tuple(bytes((n,)) for n in range(0x80))


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(field: int) -> bytes:
    """The tag of length-delimited field ``field`` (wire type 2)."""
    return _varint(field << 3 | 2)


class Splice:
    """Messages of one protobuf type whose only varying fields are key, value and
    correlation id (three length-delimited fields, in that field-number order, with the
    shared ``middle`` fields between value and correlation id): ``head`` + key + value +
    ``middle`` + correlation id + ``tail``, each part already serialized."""

    __slots__ = ("_cid_tag", "_head", "_key_tag", "_middle", "_tail", "_value_tag")

    def __init__(
        self,
        *,
        head: bytes,
        key_field: int,
        value_field: int,
        middle: bytes,
        cid_field: int,
        tail: bytes,
    ) -> None:
        self._head, self._middle, self._tail = head, middle, tail
        self._key_tag, self._value_tag = _tag(key_field), _tag(value_field)
        self._cid_tag = _tag(cid_field)

    def encode(self, value: bytes, correlation_id: str, key: bytes | None = None) -> bytes:
        """One message (``value`` and ``key`` as ``bytes``; empty fields are left out, as
        proto3 serializers do)."""
        parts = [self._head]
        if key:
            parts += (self._key_tag, _varint(len(key)), key)
        if value:
            parts += (self._value_tag, _varint(len(value)), value)
        parts.append(self._middle)
        if correlation_id:
            cid = correlation_id.encode()
            parts += (self._cid_tag, _varint(len(cid)), cid)
        parts.append(self._tail)
        return b"".join(parts)

    def encode_many(
        self, values: Sequence[bytes], correlation_ids: Sequence[str], lead: bytes = b""
    ) -> list[bytes]:
        """Messages without keys, each ``lead`` + what :meth:`encode` writes (one loop: the
        shared parts and the length prefix of each distinct value size are looked up
        once)."""
        head, middle, tail = lead + self._head, self._middle, self._tail
        value_tag, cid_tag = self._value_tag, self._cid_tag
        sizes: dict[int, bytes] = {}
        out: list[bytes] = []
        append, join = out.append, b"".join
        for value, correlation_id in zip(values, correlation_ids, strict=True):
            n = len(value)
            field = sizes.get(n)
            if field is None:
                field = sizes[n] = value_tag + _varint(n) if n else b""
            cid = correlation_id.encode()
            if len(cid) >= 0x80:  # never from a producer: its ids are short
                append(lead + self.encode(value, correlation_id))
                continue
            cid_field = cid_tag + _SMALL[len(cid)] + cid if cid else b""
            append(join((head, field, value, middle, cid_field, tail)))
        return out


def _check_policy(ack_policy: int) -> None:
    if ack_policy not in (0, 1, 2):
        raise ConfigurationError(f"unknown ack policy {ack_policy!r}")


class PublishTemplate:
    """NATS envelopes of messages without headers nor expected offset, for one ack inbox
    and ack policy (``ack_inbox=""``: the server sends no ack)."""

    __slots__ = ("_crc", "_header", "_splice", "ack_inbox")

    def __init__(self, *, ack_inbox: str, ack_policy: int, crc: bool = False) -> None:
        _check_policy(ack_policy)
        self._splice = Splice(
            head=pb.Message(offset=_NO_EXPECTED_OFFSET).SerializeToString(),
            key_field=2,
            value_field=3,
            middle=pb.Message(ackInbox=ack_inbox).SerializeToString(),
            cid_field=11,
            tail=pb.Message(ackPolicy=ack_policy).SerializeToString(),  # type: ignore[arg-type]
        )
        self.ack_inbox = ack_inbox
        self._crc = crc
        self._header = encode_header(MessageType.PUBLISH)

    def encode(self, value: bytes, correlation_id: str, key: bytes | None = None) -> bytes:
        """The envelope of one message (``value`` and ``key`` as ``bytes``)."""
        payload = self._splice.encode(value, correlation_id, key)
        if self._crc:
            return encode_header(MessageType.PUBLISH, crc=crc32c(payload)) + payload
        return self._header + payload

    def encode_many(self, values: Sequence[bytes], correlation_ids: Sequence[str]) -> list[bytes]:
        """The envelopes of messages without keys, each as :meth:`encode` writes it."""
        if self._crc:
            return list(map(self.encode, values, correlation_ids))
        return self._splice.encode_many(values, correlation_ids, self._header)


class RequestTemplate(Splice):
    """``PublishRequest``s of messages without headers nor expected offset, to one stream
    and partition with one ack policy (no ack inbox: ``PublishAsync`` answers on its
    stream)."""

    __slots__ = ()

    def __init__(self, *, stream: str, partition: int, ack_policy: int) -> None:
        _check_policy(ack_policy)
        super().__init__(
            head=b"",
            key_field=1,
            value_field=2,
            middle=pb.PublishRequest(stream=stream, partition=partition).SerializeToString(),
            cid_field=7,
            tail=pb.PublishRequest(
                ackPolicy=ack_policy,  # type: ignore[arg-type]
                expectedOffset=_NO_EXPECTED_OFFSET,
            ).SerializeToString(),
        )
