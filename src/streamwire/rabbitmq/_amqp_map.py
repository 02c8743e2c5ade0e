"""streamwire messages ↔ AMQP 1.0 messages, as RabbitMQ Streams clients exchange them.

* ``value`` ↔ the body (one data section; a body of several data sections is joined, an
  amqp-value holding binary or a string gives its bytes; other bodies keep the raw
  encoded message as the value).
* ``headers`` ↔ application properties, kind for kind: Raw ↔ binary, String ↔ string,
  Bool ↔ boolean, Int8..Int64 ↔ byte/short/int/long, Uint8..Uint64 ↔
  ubyte/ushort/uint/ulong, Float32 ↔ float, Float64 ↔ double, Uint128 ↔ uuid. AMQP has no
  signed 128-bit integers, so Int128 headers are refused. Received symbols and chars become
  String, timestamps Int64 (ms), decimals Raw, nulls an empty Raw.
* ``key`` ↔ the message annotation ``x-streamwire-key`` (binary).
* ``properties`` ↔ the properties section, and ``annotations`` ↔ the other message
  annotations: the reserved ``amqp.*`` headers of :mod:`streamwire.codec.properties` are
  written there, not among the application properties, and read back from there. Uuids are
  Uint128 headers (an ``amqp.message-id`` or an application property alike), and a Uint128
  header is sent as a uuid.

Payloads that are not AMQP at all (raw publishers) are delivered as they are: the value is
the whole record and nothing is lost.
"""

from __future__ import annotations

import struct
import uuid
from datetime import datetime
from typing import Any, Final

from streamwire._native import NativeCore
from streamwire._native import core as _native
from streamwire.codec import amqp
from streamwire.codec.amqp import Symbol, decode_data_body, encode_data_body
from streamwire.codec.checksums import crc32
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.message import Message, received_message
from streamwire.codec.properties import (
    ANNOTATION_PREFIX,
    PROPERTY_HEADERS,
    MessageProperties,
    id_header,
)
from streamwire.errors import (
    ChecksumMismatchError,
    ConfigurationError,
    DecodeError,
    HeaderKindError,
)
from streamwire.rabbitmq.protocol.chunk import (
    CHUNK_HEADER_SIZE,
    ChunkHeader,
    expand_sub_batch,
    parse_chunk_header,
)

__all__ = (
    "KEY_ANNOTATION",
    "chunk_buffer",
    "decode_chunk",
    "decode_record",
    "encode_message",
    "from_amqp",
    "to_amqp",
)

KEY_ANNOTATION: Final = Symbol("x-streamwire-key")

_TO_AMQP: Final[dict[HeaderKind, type]] = {
    HeaderKind.INT8: amqp.Byte,
    HeaderKind.INT16: amqp.Short,
    HeaderKind.INT32: amqp.Int,
    HeaderKind.INT64: amqp.Long,
    HeaderKind.UINT8: amqp.UByte,
    HeaderKind.UINT16: amqp.UShort,
    HeaderKind.UINT32: amqp.UInt,
    HeaderKind.UINT64: amqp.ULong,
}
_FROM_AMQP: Final[dict[type, HeaderKind]] = {
    amqp.Byte: HeaderKind.INT8,
    amqp.Short: HeaderKind.INT16,
    amqp.Int: HeaderKind.INT32,
    amqp.Long: HeaderKind.INT64,
    amqp.UByte: HeaderKind.UINT8,
    amqp.UShort: HeaderKind.UINT16,
    amqp.UInt: HeaderKind.UINT32,
    amqp.ULong: HeaderKind.UINT64,
    amqp.Timestamp: HeaderKind.INT64,
}


def to_amqp(value: HeaderValue) -> object:
    """The AMQP application-property value for a header."""
    kind = value.kind
    if kind in (HeaderKind.RAW, HeaderKind.STRING, HeaderKind.BOOL, HeaderKind.FLOAT64):
        return value.value
    if kind is HeaderKind.FLOAT32:
        return amqp.Float(value.as_float())
    if kind is HeaderKind.UINT128:
        return uuid.UUID(int=value.as_int())
    cls = _TO_AMQP.get(kind)
    if cls is None:
        raise ConfigurationError(f"AMQP has no {kind.name.title()} type for a RabbitMQ header")
    return cls(value.as_int())


def from_amqp(value: Any) -> HeaderValue:
    """The header for a received application-property value."""
    if isinstance(value, bool):
        return HeaderValue.boolean(value)
    if isinstance(value, int):
        kind = _FROM_AMQP.get(type(value))
        if kind is not None:
            return HeaderValue(kind, int(value))
        return HeaderValue.of(int(value))
    if isinstance(value, amqp.Float):
        return HeaderValue.float32(float(value))
    if isinstance(value, float):
        return HeaderValue.float64(value)
    if isinstance(value, str):
        return HeaderValue.string(str(value))
    if isinstance(value, bytes):
        return HeaderValue.raw(value)
    if isinstance(value, uuid.UUID):
        return HeaderValue.uint128(value.int)
    if value is None:
        return HeaderValue.raw(b"")
    raw = getattr(value, "raw", None)
    if isinstance(raw, bytes):
        return HeaderValue.raw(raw)
    return HeaderValue.string(repr(value))


def encode_message(msg: Message | bytes) -> bytes:
    """The AMQP 1.0 encoding of a message (a bare data section when it has no key/headers)."""
    if isinstance(msg, bytes):
        return encode_data_body(msg)
    if msg.key is None and not msg.headers:
        return encode_data_body(msg.value)
    app: dict[str, object] = {}
    annotations: dict[object, object] = {}
    reserved: dict[str, HeaderValue] = {}
    for name, value in msg.headers.items():
        if not name.startswith("amqp."):
            app[name] = to_amqp(value)
        elif name in _PROPERTY_FIELDS:
            reserved[name] = value
        elif name.startswith(ANNOTATION_PREFIX) and name.isascii():
            annotations[Symbol(name[_CUT:])] = to_amqp(value)
        else:  # not a name streamwire reserves: an application property like any other
            app[name] = to_amqp(value)
    if msg.key is not None:
        annotations[KEY_ANNOTATION] = msg.key
    return amqp.encode_message(
        amqp.AmqpMessage(
            msg.value,
            properties=_properties_section(reserved) if reserved else None,
            message_annotations=annotations or None,
            application_properties=app or None,  # type: ignore[arg-type]
        )
    )


_PROPERTY_FIELDS: Final = {header: name for name, header in PROPERTY_HEADERS.items()}
_CUT: Final = len(ANNOTATION_PREFIX)


def _properties_section(reserved: dict[str, HeaderValue]) -> amqp.Properties:
    """The properties section for the reserved ``amqp.*`` headers (kinds checked)."""
    try:
        props = MessageProperties.from_headers(reserved)
    except HeaderKindError as exc:
        raise ConfigurationError(f"AMQP properties: {exc}") from None
    assert props is not None
    fields: dict[str, Any] = {}
    for name, header in PROPERTY_HEADERS.items():
        value = getattr(props, name)
        if value is None:
            continue
        if isinstance(value, datetime):  # the header's own ms: exact beyond datetime's range
            hv = reserved[header]
            value = value if hv.kind is HeaderKind.RAW else hv.as_int()
        fields[name] = value
    return amqp.Properties(**fields)


def _property_headers(props: amqp.Properties) -> dict[str, HeaderValue]:
    """The reserved headers for a received properties section."""
    out: dict[str, HeaderValue] = {}
    for name, header in PROPERTY_HEADERS.items():
        value = getattr(props, name)
        if value is None:
            continue
        if name in ("message_id", "correlation_id"):
            out[header] = id_header(
                value if type(value) in (uuid.UUID, bytes, str) else int(value), name
            )
        elif isinstance(value, amqp.Timestamp):
            out[header] = HeaderValue.int64(int(value))
        elif name == "group_sequence":
            out[header] = HeaderValue.uint32(int(value))
        elif isinstance(value, bytes):
            out[header] = HeaderValue.raw(value)
        else:
            out[header] = HeaderValue.string(str(value))
    return out


def decode_record(record: memoryview, offset: int, timestamp_us: int, stream: str) -> Message:
    """A received message from one chunk record (AMQP decoded; raw bytes if not AMQP)."""
    body = decode_data_body(record)
    if body is not None:
        return received_message(body, None, {}, timestamp_us, offset, stream, None, None)
    raw = bytes(record)
    try:
        decoded = amqp.decode_message(raw)
    except DecodeError:
        return received_message(raw, None, {}, timestamp_us, offset, stream, None, None)
    value = decoded.body_bytes
    if value is None:
        inner = decoded.body.value if isinstance(decoded.body, amqp.AmqpValue) else None
        value = (
            inner.encode() if isinstance(inner, str) else inner if isinstance(inner, bytes) else raw
        )
    key = None
    headers = (
        {name: from_amqp(v) for name, v in decoded.application_properties.items()}
        if decoded.application_properties
        else {}
    )
    if decoded.properties is not None:
        headers.update(_property_headers(decoded.properties))
    if decoded.message_annotations:
        for name, v in decoded.message_annotations.items():
            if name == KEY_ANNOTATION and isinstance(v, bytes):
                key = v
            else:
                headers[ANNOTATION_PREFIX + str(name)] = from_amqp(v)
    return received_message(value, key, headers, timestamp_us, offset, stream, None, None)


_DATA8: Final = b"\x00\x53\x75\xa0"
_DATA32: Final = b"\x00\x53\x75\xb0"
_SIZE: Final = struct.Struct(">I")


def decode_chunk(
    chunk: bytes | memoryview,
    *,
    stream: str,
    skip_below: int = 0,
    verify_crc: bool = True,
    amqp: bool = True,
) -> list[Message]:
    """Every message of an Osiris chunk at or after offset ``skip_below``.

    This is the consume hot path: simple entries holding a single data section (what every
    client sends for a plain body) are sliced straight out of the chunk, one copy each, and
    messages are built without re-validation. Sub-batches and other AMQP shapes go through
    the general decoders. Raises DecodeError / ChecksumMismatchError for a bad chunk.

    The entries are walked by the native core when it is loaded (:mod:`streamwire._native`),
    otherwise by :func:`decode_entries_py`; both give the same messages and errors.
    """
    header = parse_chunk_header(chunk)
    buf, base = chunk_buffer(chunk)
    start = base + CHUNK_HEADER_SIZE
    if _native is not None and type(skip_below) is int and abs(skip_below) < _I127:
        return decode_entries_native(
            _native, buf, start, header, stream, skip_below, verify_crc, amqp
        )
    return decode_entries_py(buf, start, header, stream, skip_below, verify_crc, amqp)


def chunk_buffer(chunk: bytes | memoryview) -> tuple[bytes, int]:
    """``(bytes, where the chunk starts in them)``. Works on the frame's own bytes when the
    chunk is a view of their tail (how Deliver hands it over), so a multi-megabyte chunk is
    not copied once more before slicing."""
    if (
        isinstance(chunk, memoryview)
        and isinstance(chunk.obj, bytes)
        and chunk.c_contiguous
        and chunk.itemsize == 1
    ):
        buf: bytes = chunk.obj
        base = len(buf) - len(chunk)
        if buf[base : base + 4] != chunk[:4]:  # not a tail view after all
            return bytes(chunk), 0
        return buf, base
    return (chunk if isinstance(chunk, bytes) else bytes(chunk)), 0


def decode_entries_native(
    core: NativeCore,
    chunk: bytes,
    start: int,
    header: ChunkHeader,
    stream: str,
    skip_below: int,
    verify_crc: bool,
    amqp: bool,
) -> list[Message]:
    """:func:`decode_entries_py` by the native core (``abs(skip_below) < 2**126``): plain
    data sections are built there, untracked by the garbage collector (docs/development.md,
    "Garbage collection"); other records and sub-batches call back into Python."""
    end = start + header.data_length
    ts = header.timestamp * 1000
    view = memoryview(chunk)

    def record(pos: int, stop: int, offset: int) -> Message:
        return decode_record(view[pos:stop], offset, ts, stream)

    def sub_batch(pos: int, offset: int) -> tuple[int, int, list[Message]]:
        return _sub_batch(chunk, pos, end, offset, skip_below, ts, stream, amqp)

    return core.rmq_decode_records(
        chunk,
        start,
        end,
        header.chunk_id,
        header.num_records,
        ts,
        stream,
        skip_below,
        amqp,
        header.crc if verify_crc else None,
        record,
        sub_batch,
    )


_I127: Final = 1 << 126


def decode_entries_py(
    chunk: bytes,
    start: int,
    header: ChunkHeader,
    stream: str,
    skip_below: int,
    verify_crc: bool,
    amqp: bool,
) -> list[Message]:
    """The pure-Python walk of a chunk's entries, ``chunk[start:start + data_length]``."""
    end = start + header.data_length
    ts = header.timestamp * 1000
    if verify_crc:
        actual = crc32(memoryview(chunk)[start:end])
        if actual != header.crc:
            raise ChecksumMismatchError("chunk CRC-32", header.crc, actual)
    offset = header.chunk_id
    out: list[Message] = []
    append = out.append
    new = received_message
    unpack = _SIZE.unpack_from
    pos = start
    while pos < end:
        if pos + 4 > end:
            raise DecodeError("entry size", pos, frame="Deliver")
        (size,) = unpack(chunk, pos)
        if size & 0x80000000:  # a sub-batch: expand, then decode record by record
            pos, count, msgs = _sub_batch(chunk, pos, end, offset, skip_below, ts, stream, amqp)
            out.extend(msgs)
            offset += count
            continue
        pos += 4
        stop = pos + size
        if stop > end:
            raise DecodeError(f"entry of {size} bytes", pos - 4, frame="Deliver")
        if offset >= skip_below:
            if amqp and size >= 5 and chunk[pos + 4] == size - 5 and chunk[pos : pos + 4] == _DATA8:
                append(new(chunk[pos + 5 : stop], None, {}, ts, offset, stream, None, None))
            elif (  # the same with a vbin32 length (bodies above 255 bytes)
                amqp
                and size >= 8
                and chunk[pos : pos + 4] == _DATA32
                and unpack(chunk, pos + 4)[0] == size - 8
            ):
                append(new(chunk[pos + 8 : stop], None, {}, ts, offset, stream, None, None))
            elif amqp:
                append(decode_record(memoryview(chunk)[pos:stop], offset, ts, stream))
            else:
                append(_raw(chunk[pos:stop], offset, ts, stream))
        offset += 1
        pos = stop
    if offset - header.chunk_id != header.num_records:
        raise DecodeError(
            f"chunk announces {header.num_records} records, holds {offset - header.chunk_id}",
            4,
            frame="Deliver",
        )
    return out


def _sub_batch(
    chunk: bytes,
    pos: int,
    end: int,
    offset: int,
    skip_below: int,
    ts: int,
    stream: str,
    amqp: bool,
) -> tuple[int, int, list[Message]]:
    """The sub-batch entry at ``chunk[pos]``: (position after it, its number of records,
    the messages of those at or after ``skip_below``; ``offset`` is its first record's)."""
    records: list[memoryview] = []
    after, count = expand_sub_batch(memoryview(chunk), pos, end, records)
    out = []
    for rec in records:
        if offset >= skip_below:
            out.append(
                decode_record(rec, offset, ts, stream) if amqp else _raw(rec, offset, ts, stream)
            )
        offset += 1
    return after, count, out


def _raw(record: bytes | memoryview, offset: int, ts: int, stream: str) -> Message:
    return received_message(bytes(record), None, {}, ts, offset, stream, None, None)
