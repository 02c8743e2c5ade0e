"""Publish envelopes for one producer, with the fields every message shares encoded once.

A producer's messages differ only in value, key and correlation id; the expected offset
(none), ack inbox and ack policy are the same for all of them. :class:`PublishTemplate`
serializes those shared fields once (with the generated class, so they are exactly what
:func:`~streamwire.liftbridge.protocol.messages.encode_publish` writes) and splices the
per-message fields around them in field-number order, which is the order protobuf
serializers write: the bytes equal ``encode_publish``'s for the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamwire.codec.checksums import crc32c
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.envelope import MessageType, encode_header

__all__ = ("PublishTemplate",)

_NO_EXPECTED_OFFSET: Final = -1
_KEY: Final = b"\x12"  # field 2, length-delimited
_VALUE: Final = b"\x1a"  # field 3
_CORRELATION_ID: Final = b"\x5a"  # field 11
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


class PublishTemplate:
    """Envelopes of messages without headers nor expected offset, for one ack inbox and
    ack policy (``ack_inbox=""``: the server sends no ack)."""

    __slots__ = ("_crc", "_head", "_header", "_middle", "_tail", "ack_inbox")

    def __init__(self, *, ack_inbox: str, ack_policy: int, crc: bool = False) -> None:
        if ack_policy not in (0, 1, 2):
            raise ConfigurationError(f"unknown ack policy {ack_policy!r}")
        self._head = pb.Message(offset=_NO_EXPECTED_OFFSET).SerializeToString()
        self._middle = pb.Message(ackInbox=ack_inbox).SerializeToString()
        self._tail = pb.Message(ackPolicy=ack_policy).SerializeToString()  # type: ignore[arg-type]
        self.ack_inbox = ack_inbox
        self._crc = crc
        self._header = encode_header(MessageType.PUBLISH)

    def encode(self, value: bytes, correlation_id: str, key: bytes | None = None) -> bytes:
        """The envelope of one message (``value`` and ``key`` as ``bytes``)."""
        parts = [self._head]
        if key:
            parts += (_KEY, _varint(len(key)), key)
        if value:
            parts += (_VALUE, _varint(len(value)), value)
        parts.append(self._middle)
        if correlation_id:
            cid = correlation_id.encode()
            parts += (_CORRELATION_ID, _varint(len(cid)), cid)
        parts.append(self._tail)
        payload = b"".join(parts)
        if self._crc:
            return encode_header(MessageType.PUBLISH, crc=crc32c(payload)) + payload
        return self._header + payload

    def encode_many(self, values: Sequence[bytes], correlation_ids: Sequence[str]) -> list[bytes]:
        """The envelopes of messages without keys, each as :meth:`encode` writes it (one
        loop: the shared parts and the length prefix of each distinct value size are looked
        up once)."""
        if self._crc:
            return list(map(self.encode, values, correlation_ids))
        head, middle, tail = self._header + self._head, self._middle, self._tail
        sizes: dict[int, bytes] = {}
        out: list[bytes] = []
        append, join = out.append, b"".join
        for value, correlation_id in zip(values, correlation_ids, strict=True):
            n = len(value)
            field = sizes.get(n)
            if field is None:
                field = sizes[n] = _VALUE + _varint(n) if n else b""
            cid = correlation_id.encode()
            if len(cid) >= 0x80:  # never from a producer: its ids are short
                append(self.encode(value, correlation_id))
                continue
            cid_field = _CORRELATION_ID + _SMALL[len(cid)] + cid if cid else b""
            append(join((head, field, value, middle, cid_field, tail)))
        return out
