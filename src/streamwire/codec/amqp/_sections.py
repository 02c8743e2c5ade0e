"""Encode and decode the sections of an AMQP 1.0 message (the generic, non-fast path)."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from streamwire.codec.amqp import _codes as c
from streamwire.codec.amqp._decode import read_binary, read_descriptor, read_list, read_map
from streamwire.codec.amqp._decode import read_value as _read_value
from streamwire.codec.amqp._encode import (
    write_binary,
    write_compound,
    write_described_code,
    write_string,
    write_value,
)
from streamwire.codec.amqp._model import (
    AmqpMessage,
    AmqpSequence,
    AmqpValue,
    Body,
    Data,
    Header,
    Properties,
)
from streamwire.codec.amqp._wrappers import (
    Array,
    Described,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
)
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError

__all__ = ("SECTION_NAMES", "read_message", "write_message")

HEADER: Final = 0x70
DELIVERY_ANNOTATIONS: Final = 0x71
MESSAGE_ANNOTATIONS: Final = 0x72
PROPERTIES: Final = 0x73
APPLICATION_PROPERTIES: Final = 0x74
DATA: Final = 0x75
AMQP_SEQUENCE: Final = 0x76
AMQP_VALUE: Final = 0x77
FOOTER: Final = 0x78

#: Descriptor code -> symbolic descriptor of each message section.
SECTION_NAMES: Final[dict[int, str]] = {
    HEADER: "amqp:header:list",
    DELIVERY_ANNOTATIONS: "amqp:delivery-annotations:map",
    MESSAGE_ANNOTATIONS: "amqp:message-annotations:map",
    PROPERTIES: "amqp:properties:list",
    APPLICATION_PROPERTIES: "amqp:application-properties:map",
    DATA: "amqp:data:binary",
    AMQP_SEQUENCE: "amqp:amqp-sequence:list",
    AMQP_VALUE: "amqp:value:*",
    FOOTER: "amqp:footer:map",
}
_BY_NAME: Final = {name: code for code, name in SECTION_NAMES.items()}
_BODY: Final = frozenset((DATA, AMQP_SEQUENCE, AMQP_VALUE))

# (field name, kind) of the properties list, in wire order
_PROPERTY_FIELDS: Final = (
    ("message_id", "id"),
    ("user_id", "binary"),
    ("to", "string"),
    ("subject", "string"),
    ("reply_to", "string"),
    ("correlation_id", "id"),
    ("content_type", "symbol"),
    ("content_encoding", "symbol"),
    ("absolute_expiry_time", "timestamp"),
    ("creation_time", "timestamp"),
    ("group_id", "string"),
    ("group_sequence", "uint"),
    ("reply_to_group_id", "string"),
)


# --- encode ------------------------------------------------------------------------------


def write_message(w: Writer, msg: AmqpMessage) -> None:
    """Append every present section of ``msg`` in the standard order."""
    if msg.header is not None:
        write_described_code(w, HEADER)
        write_value(w, _trim(_header_fields(msg.header)))
    if msg.delivery_annotations is not None:
        _write_annotations(w, DELIVERY_ANNOTATIONS, msg.delivery_annotations)
    if msg.message_annotations is not None:
        _write_annotations(w, MESSAGE_ANNOTATIONS, msg.message_annotations)
    if msg.properties is not None:
        write_described_code(w, PROPERTIES)
        props = msg.properties
        fields = [_to_wire(getattr(props, name), kind, name) for name, kind in _PROPERTY_FIELDS]
        write_value(w, _trim(fields))
    if msg.application_properties is not None:
        _write_application_properties(w, msg.application_properties)
    _write_body(w, msg.body)
    if msg.footer is not None:
        _write_annotations(w, FOOTER, msg.footer)


def _trim(fields: list[object]) -> list[object]:
    while fields and fields[-1] is None:
        fields.pop()
    return fields


def _flag(value: object, name: str) -> bool | None:
    if not isinstance(value, bool):
        raise LocalProtocolError(f"header {name} must be a bool, not {value!r}")
    return True if value else None


def _header_fields(h: Header) -> list[object]:
    ttl = None
    if h.ttl is not None:
        try:
            ttl = UInt(round(h.ttl * 1000))
        except (TypeError, ValueError, OverflowError) as exc:
            raise LocalProtocolError(f"header ttl {h.ttl!r} s is not a valid uint ms") from exc
    try:
        priority = None if h.priority == 4 else UByte(h.priority)
        count = None if h.delivery_count == 0 else UInt(h.delivery_count)
    except TypeError as exc:
        raise LocalProtocolError(f"header priority/delivery_count must be ints: {exc}") from exc
    return [
        _flag(h.durable, "durable"),
        priority,
        ttl,
        _flag(h.first_acquirer, "first_acquirer"),
        count,
    ]


def _to_wire(value: object, kind: str, name: str) -> object:
    if value is None:
        return None
    if kind in ("string", "id") and isinstance(value, str):
        return str(value)  # a plain str: Symbol subclasses would encode as symbols
    if kind in ("binary", "id") and isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if kind == "id":
            return ULong(value)
        if kind == "uint":
            return UInt(value)
        if kind == "timestamp":
            return Timestamp(value)
    if kind == "id" and isinstance(value, uuid.UUID):
        return value
    if kind == "symbol" and isinstance(value, str):
        return Symbol(value)
    if kind == "timestamp" and isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    raise LocalProtocolError(f"properties.{name} cannot be {value!r} (AMQP {kind})")


def _write_annotations(w: Writer, code: int, annotations: Mapping[Any, Any]) -> None:
    keyed: dict[object, object] = {}
    for key, value in annotations.items():
        if isinstance(key, str):
            keyed[key if isinstance(key, Symbol) else Symbol(key)] = value
        elif isinstance(key, int) and not isinstance(key, bool):
            keyed[ULong(key)] = value
        else:
            raise LocalProtocolError(f"annotation keys are symbols or ulongs, not {key!r}")
    write_described_code(w, code)
    write_value(w, keyed)


def _is_simple(value: object) -> bool:
    return not isinstance(value, (list, tuple, Mapping, Array, Described))


def _write_application_properties(w: Writer, props: Mapping[str, object]) -> None:
    sub = Writer()
    for key, value in props.items():
        if not isinstance(key, str):
            raise LocalProtocolError(f"application property keys are strings, not {key!r}")
        if not _is_simple(value):
            raise LocalProtocolError(
                f"application property {key!r} must be a simple value, not {type(value).__name__}"
            )
        write_string(sub, key)
        write_value(sub, value, 1)
    write_described_code(w, APPLICATION_PROPERTIES)
    write_compound(w, c.MAP8, c.MAP32, 2 * len(props), sub.buffer)


def _write_body(w: Writer, body: Body) -> None:
    if isinstance(body, bytes):
        write_described_code(w, DATA)
        write_binary(w, body)
    elif isinstance(body, Data):
        for chunk in body.sections:
            write_described_code(w, DATA)
            write_binary(w, chunk)
    elif isinstance(body, AmqpSequence):
        for section in body.sections:
            write_described_code(w, AMQP_SEQUENCE)
            write_value(w, section)
    else:
        write_described_code(w, AMQP_VALUE)
        write_value(w, body.value)


# --- decode ------------------------------------------------------------------------------


def read_message(r: Reader) -> AmqpMessage:
    """Read sections up to the end of ``r``. Non-body sections may come in any order but at
    most once each; the body is one run of data sections, of amqp-sequence sections, or a
    single amqp-value. A message with sections but no body has the empty body."""
    found: dict[str, Any] = {}
    body_code = 0
    body: list[Any] = []
    body_done = False
    while not r.at_end():
        start = r.pos
        if r.u8() != c.DESCRIBED:
            raise r.error("expected an AMQP message section (described type 0x00)", start)
        code = _section_code(r, start)
        name = SECTION_NAMES[code]
        if code in _BODY:
            if body_done or (body_code and (code != body_code or code == AMQP_VALUE)):
                raise r.error(f"unexpected {name} section: body sections must be one run", start)
            body_code = code
            body.append(_BODY_READERS[code](r))
            continue
        body_done = bool(body_code)
        field = _FIELD_OF[code]
        if field in found:
            raise r.error(f"duplicate {name} section", start)
        found[field] = _SECTION_READERS[code](r, start)
    if not body_code:
        if not found:
            raise r.error("AMQP message has no body section")
        # Sections but no body: rstream writes an empty body this way, and the Java client
        # reads it as an empty body. Accept it as one, so the headers are not lost.
        return AmqpMessage(b"", **found)
    return AmqpMessage(_make_body(body_code, body), **found)


def _make_body(code: int, parts: list[Any]) -> Body:
    if code == DATA:
        return parts[0] if len(parts) == 1 else Data(*parts)
    if code == AMQP_SEQUENCE:
        return AmqpSequence(*parts)
    return AmqpValue(parts[0])


def _section_code(r: Reader, start: int) -> int:
    descriptor = read_descriptor(r)
    code = _BY_NAME.get(descriptor) if isinstance(descriptor, Symbol) else int(descriptor)
    if code is None or code not in SECTION_NAMES:
        raise r.error(f"unknown AMQP message section descriptor {descriptor!r}", start)
    return code


def _constructor(r: Reader, codes: frozenset[int], name: str) -> int:
    code = r.u8()
    if code not in codes:
        raise r.error(f"{name} section holds type {code:#04x}", r.pos - 1)
    return code


def _read_fields(r: Reader, name: str, most: int) -> list[Any]:
    at = r.pos
    fields = read_list(r, _constructor(r, c.LIST_CODES, name), 0)
    if len(fields) > most:
        raise r.error(f"{name} list has {len(fields)} fields, at most {most} exist", at)
    return fields + [None] * (most - len(fields))


def _check(r: Reader, ok: bool, what: str, at: int) -> None:
    if not ok:
        raise r.error(what, at)


def _read_header(r: Reader, start: int) -> Header:
    at = r.pos
    durable, priority, ttl, first, count = _read_fields(r, "header", 5)
    _check(r, durable is None or isinstance(durable, bool), "header durable not a bool", at)
    _check(r, priority is None or type(priority) is UByte, "header priority not a ubyte", at)
    _check(r, ttl is None or type(ttl) is UInt, "header ttl not a uint", at)
    _check(r, first is None or isinstance(first, bool), "header first-acquirer not a bool", at)
    _check(r, count is None or type(count) is UInt, "header delivery-count not a uint", at)
    return Header(
        durable=bool(durable),
        priority=4 if priority is None else int(priority),
        ttl=None if ttl is None else ttl / 1000,
        first_acquirer=bool(first),
        delivery_count=0 if count is None else int(count),
    )


_KIND_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "id": (ULong, uuid.UUID, bytes, str),
    "binary": (bytes,),
    "string": (str,),
    "symbol": (Symbol,),
    "timestamp": (Timestamp,),
    "uint": (UInt,),
}


def _read_properties(r: Reader, start: int) -> Properties:
    at = r.pos
    values = _read_fields(r, "properties", 13)
    kwargs: dict[str, Any] = {}
    for (name, kind), value in zip(_PROPERTY_FIELDS, values, strict=True):
        if value is not None and type(value) not in _KIND_TYPES[kind]:
            raise r.error(f"properties {name} is a {type(value).__name__}, not AMQP {kind}", at)
        kwargs[name] = int(value) if kind == "uint" and value is not None else value
    return Properties(**kwargs)


def _read_annotations(r: Reader, start: int) -> dict[Any, Any]:
    at = r.pos
    result = read_map(r, _constructor(r, c.MAP_CODES, "annotations"), 0)
    for key in result:
        if type(key) is not Symbol and type(key) is not ULong:
            raise r.error(f"annotation key {key!r} is neither a symbol nor a ulong", at)
    return result


def _read_application_properties(r: Reader, start: int) -> dict[str, Any]:
    at = r.pos
    result = read_map(r, _constructor(r, c.MAP_CODES, "application-properties"), 0)
    for key, value in result.items():
        if type(key) is not str:
            raise r.error(f"application property key {key!r} is not a string", at)
        if not _is_simple(value):
            raise r.error(f"application property {key!r} is not a simple value", at)
    return result


_FIELD_OF: Final = {
    HEADER: "header",
    DELIVERY_ANNOTATIONS: "delivery_annotations",
    MESSAGE_ANNOTATIONS: "message_annotations",
    PROPERTIES: "properties",
    APPLICATION_PROPERTIES: "application_properties",
    FOOTER: "footer",
}
_SECTION_READERS: Final[dict[int, Callable[[Reader, int], Any]]] = {
    HEADER: _read_header,
    DELIVERY_ANNOTATIONS: _read_annotations,
    MESSAGE_ANNOTATIONS: _read_annotations,
    PROPERTIES: _read_properties,
    APPLICATION_PROPERTIES: _read_application_properties,
    FOOTER: _read_annotations,
}
_BODY_READERS: Final[dict[int, Callable[[Reader], Any]]] = {
    DATA: lambda r: read_binary(r, _constructor(r, c.BINARY_CODES, "data")),
    AMQP_SEQUENCE: lambda r: read_list(r, _constructor(r, c.LIST_CODES, "amqp-sequence"), 0),
    AMQP_VALUE: lambda r: _read_value(r, 0),
}
