"""AMQP 1.0 messages as RabbitMQ Streams clients exchange them: sections, model, codec.

A message is a sequence of described sections (``00``, descriptor, value): header 0x70,
delivery-annotations 0x71, message-annotations 0x72, properties 0x73,
application-properties 0x74, the body (data 0x75 repeated, amqp-sequence 0x76 repeated, or
one amqp-value 0x77) and footer 0x78. Descriptors are accepted as smallulong ``00 53 xx``,
ulong ``00 80 <8 bytes>`` and symbols (``amqp:data:binary``...); they are written as
smallulong.

Fast paths (the publish and consume hot paths): a message that is nothing but ``bytes`` is
encoded by :func:`encode_data_body` (one concatenation), and a payload that is exactly one
data section is recognised by :func:`decode_data_body` without the generic decoder.
"""

from __future__ import annotations

from typing import Final

from streamwire.codec._structs import U32, BytesLike
from streamwire.codec.amqp._model import (
    AmqpMessage,
    AmqpSequence,
    AmqpValue,
    Body,
    Data,
    Header,
    MessageId,
    Properties,
    SimpleValue,
)
from streamwire.codec.amqp._sections import SECTION_NAMES, read_message, write_message
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError

__all__ = (
    "DATA_PREFIX_LONG",
    "DATA_PREFIX_SHORT",
    "SECTION_NAMES",
    "AmqpMessage",
    "AmqpSequence",
    "AmqpValue",
    "Body",
    "Data",
    "Header",
    "MessageId",
    "Properties",
    "SimpleValue",
    "decode_data_body",
    "decode_message",
    "encode_data_body",
    "encode_message",
)

DATA_PREFIX_SHORT: Final = b"\x00\x53\x75\xa0"
"""A data section (smallulong descriptor 0x75) of a vbin8: followed by a 1-byte length."""
DATA_PREFIX_LONG: Final = b"\x00\x53\x75\xb0"
"""A data section of a vbin32: followed by a 4-byte big-endian length."""

# ``00 53 75 a0 <n>`` for every n < 256
_DATA8: Final = tuple(DATA_PREFIX_SHORT + bytes((n,)) for n in range(256))
_DATA32: Final = DATA_PREFIX_LONG
_U32_MAX: Final = 0xFFFF_FFFF


def encode_data_body(body: BytesLike) -> bytes:
    """A message that is one data section holding ``body``: ``00 53 75 a0 <len> <body>``
    (vbin32 ``b0 <len32>`` above 255 bytes)."""
    if type(body) is not bytes:
        body = bytes(body)
    n = len(body)
    if n <= 0xFF:
        return _DATA8[n] + body
    if n > _U32_MAX:
        raise LocalProtocolError(f"a {n}-byte body does not fit in an AMQP binary")
    return _DATA32 + U32.pack(n) + body


def decode_data_body(data: BytesLike) -> bytes | None:
    """The body of a message that is exactly one data section (smallulong descriptor),
    else ``None`` (use :func:`decode_message`). Never raises."""
    if isinstance(data, memoryview) and data.format != "B":
        try:
            data = data.cast("B")
        except (TypeError, ValueError):
            return None
    n = len(data)
    if n < 5 or data[0] != 0x00 or data[1] != 0x53 or data[2] != 0x75:
        return None
    code = data[3]
    if code == 0xA0:
        if n == 5 + data[4]:
            return bytes(data[5:])
    elif code == 0xB0 and n >= 8 and n == 8 + U32.unpack_from(data, 4)[0]:
        return bytes(data[8:])
    return None


def encode_message(msg: AmqpMessage) -> bytes:
    """The AMQP encoding of ``msg``; :class:`LocalProtocolError` for values the wire cannot
    carry (non-simple application properties, out-of-range fields, ...)."""
    body = msg.body
    if (
        type(body) is bytes
        and msg.header is None
        and msg.delivery_annotations is None
        and msg.message_annotations is None
        and msg.properties is None
        and msg.application_properties is None
        and msg.footer is None
    ):
        return encode_data_body(body)
    w = Writer()
    write_message(w, msg)
    return w.getvalue()


def decode_message(data: BytesLike) -> AmqpMessage:
    """Decode a whole message; every failure is a :class:`~streamwire.errors.DecodeError`
    with the offset (bytes that are not AMQP, truncation, unknown or duplicate sections,
    a missing body, fields of the wrong type)."""
    body = decode_data_body(data)
    if body is not None:
        return AmqpMessage(body)
    return read_message(Reader(data, frame="AMQP message"))
