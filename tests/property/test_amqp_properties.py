"""Hypothesis properties of the AMQP 1.0 codec: round trips of arbitrary nested values and
messages (wrapper types and non-ASCII text included), canonical re-encoding, strict
prefixes, and "garbage in -> a value or DecodeError, nothing else" for random and mutated
input."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from streamwire.codec.amqp import (
    AmqpMessage,
    AmqpSequence,
    AmqpValue,
    Array,
    Body,
    Byte,
    Char,
    Data,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Header,
    Int,
    Properties,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_data_body,
    decode_message,
    decode_value,
    encode_data_body,
    encode_message,
    encode_value,
)
from streamwire.codec.amqp._sections import read_message
from streamwire.codec.reader import Reader
from streamwire.errors import DecodeError
from tests.unit.codec.amqp.support import assert_same, same
from tests.unit.codec.amqp.test_amqp_message import CANONICAL as MESSAGE_VECTORS
from tests.unit.codec.amqp.test_amqp_types import CANONICAL as VALUE_VECTORS

texts = st.text(max_size=40) | st.text(min_size=100, max_size=200)  # non-ASCII included
ascii_texts = st.text(st.characters(max_codepoint=0x7F), max_size=30)
symbols = ascii_texts.map(Symbol)
int64 = st.integers(-(2**63), 2**63 - 1)
ulongs = st.integers(0, 2**64 - 1).map(ULong)
timestamps = int64.map(Timestamp)

# (element type, item strategy) for arrays of scalars
ELEMENTS: list[tuple[type, st.SearchStrategy[Any]]] = [
    (bool, st.booleans()),
    (UByte, st.integers(0, 2**8 - 1).map(UByte)),
    (UShort, st.integers(0, 2**16 - 1).map(UShort)),
    (UInt, st.integers(0, 2**32 - 1).map(UInt)),
    (ULong, ulongs),
    (Byte, st.integers(-(2**7), 2**7 - 1).map(Byte)),
    (Short, st.integers(-(2**15), 2**15 - 1).map(Short)),
    (Int, st.integers(-(2**31), 2**31 - 1).map(Int)),
    (int, int64),
    (Float, st.floats(width=32).map(Float)),
    (float, st.floats()),
    (Decimal32, st.binary(min_size=4, max_size=4).map(Decimal32)),
    (Decimal64, st.binary(min_size=8, max_size=8).map(Decimal64)),
    (Decimal128, st.binary(min_size=16, max_size=16).map(Decimal128)),
    (Char, st.characters(codec="utf-8").map(Char)),
    (Timestamp, timestamps),
    (uuid.UUID, st.uuids()),
    (bytes, st.binary(max_size=300)),
    (str, texts),
    (Symbol, symbols),
]

scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.integers(2**63, 2**64 - 1).map(ULong),  # what a plain int of this size decodes to
    *(strategy for _, strategy in ELEMENTS),
)
descriptors: st.SearchStrategy[ULong | Symbol] = ulongs | symbols


def arrays_of(element: type, items: st.SearchStrategy[Any]) -> st.SearchStrategy[Array]:
    return st.builds(Array, st.just(element), st.lists(items, max_size=5), st.none() | descriptors)


scalar_arrays = st.sampled_from(ELEMENTS).flatmap(lambda spec: arrays_of(*spec))


def compounds(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(scalars, children, max_size=5),
        st.builds(Described, descriptors, children),
        arrays_of(list, st.lists(children, max_size=3)),
        arrays_of(dict, st.dictionaries(scalars, children, max_size=3)),
        arrays_of(Array, scalar_arrays),
    )


values = st.recursive(scalars | scalar_arrays, compounds, max_leaves=25)


@given(values)
def test_value_round_trip_keeps_types(value: Any) -> None:
    data = encode_value(value)
    decoded = decode_value(data)
    assert_same(decoded, value)
    assert encode_value(decoded) == data  # the encoding is canonical


@given(values, st.data())
def test_every_strict_prefix_of_a_value_is_refused(value: Any, data: st.DataObject) -> None:
    encoded = encode_value(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    try:
        decode_value(encoded[:cut])
    except DecodeError:
        return
    raise AssertionError(f"prefix of {cut} bytes decoded")


def check_garbage_value(blob: bytes) -> None:
    try:
        value = decode_value(blob)
    except DecodeError:
        return
    # whatever decodes re-encodes, and decodes back to the same thing
    assert_same(decode_value(encode_value(value)), value)


@given(st.binary(max_size=200))
@example(b"\xc0\x03\x01" * 200)
@example(b"\xf0\x00\x00\x00\x09\xff\xff\xff\xff\x40")
def test_random_bytes_give_a_value_or_decode_error(blob: bytes) -> None:
    check_garbage_value(blob)


def mutate(data: bytes, draw: st.DataObject) -> bytes:
    blob = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        kind = draw.draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        at = draw.draw(st.integers(0, max(len(blob) - 1, 0)))
        if kind == "insert":
            blob[at:at] = draw.draw(st.binary(min_size=1, max_size=4))
        elif not blob:
            continue
        elif kind == "flip":
            blob[at] ^= 1 << draw.draw(st.integers(0, 7))
        elif kind == "set":
            blob[at] = draw.draw(st.integers(0, 255))
        elif kind == "delete":
            del blob[at]
        else:
            del blob[at:]
    return bytes(blob)


@given(st.sampled_from([bytes.fromhex(v[0].replace(" ", "")) for v in VALUE_VECTORS]), st.data())
def test_mutated_value_vectors_give_a_value_or_decode_error(
    vector: bytes, data: st.DataObject
) -> None:
    check_garbage_value(mutate(vector, data))


# --- messages ----------------------------------------------------------------------------

headers = st.builds(
    Header,
    durable=st.booleans(),
    priority=st.integers(0, 255),
    ttl=st.none() | st.integers(0, 2**32 - 1).map(lambda ms: ms / 1000),
    first_acquirer=st.booleans(),
    delivery_count=st.integers(0, 2**32 - 1),
)
message_ids = ulongs | st.uuids() | st.binary(max_size=20) | texts
properties = st.builds(
    Properties,
    message_id=st.none() | message_ids,
    user_id=st.none() | st.binary(max_size=20),
    to=st.none() | texts,
    subject=st.none() | texts,
    reply_to=st.none() | texts,
    correlation_id=st.none() | message_ids,
    content_type=st.none() | symbols,
    content_encoding=st.none() | symbols,
    absolute_expiry_time=st.none() | timestamps,
    creation_time=st.none() | timestamps,
    group_id=st.none() | texts,
    group_sequence=st.none() | st.integers(0, 2**32 - 1),
    reply_to_group_id=st.none() | texts,
)
annotation_maps = st.none() | st.dictionaries(symbols | ulongs, values, max_size=4)
bodies: st.SearchStrategy[Body] = st.one_of(
    st.binary(max_size=600),
    st.lists(st.binary(max_size=300), min_size=2, max_size=3).map(lambda parts: Data(*parts)),
    st.lists(st.lists(values, max_size=3), min_size=1, max_size=3).map(
        lambda parts: AmqpSequence(*parts)
    ),
    values.map(AmqpValue),
)
messages = st.builds(
    AmqpMessage,
    bodies,
    header=st.none() | headers,
    delivery_annotations=annotation_maps,
    message_annotations=annotation_maps,
    properties=st.none() | properties,
    application_properties=st.none() | st.dictionaries(texts, scalars, max_size=5),
    footer=annotation_maps,
)


@given(messages)
def test_message_round_trip_keeps_types(msg: AmqpMessage) -> None:
    data = encode_message(msg)
    decoded = decode_message(data)
    assert_same(decoded, msg)
    assert encode_message(decoded) == data


@given(messages, st.data())
def test_message_prefixes_decode_or_refuse(msg: AmqpMessage, data: st.DataObject) -> None:
    encoded = encode_message(msg)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    try:
        partial = decode_message(encoded[:cut])
    except DecodeError:
        return
    if partial.body == b"" and not encoded[:cut].endswith(encode_message(AmqpMessage(b""))):
        # a cut between whole sections before the body: no body section means the empty body
        assert encode_message(partial).startswith(encoded[:cut])
        return
    # otherwise only a cut between whole sections, after a complete body, can decode
    assert encode_message(partial) == encoded[:cut]
    assert msg.footer is not None or isinstance(msg.body, (Data, AmqpSequence))


@given(st.binary(max_size=2000))
def test_data_body_fast_path_agrees_with_the_generic_decoder(body: bytes) -> None:
    data = encode_data_body(body)
    assert decode_data_body(data) == body
    assert_same(decode_message(data), read_message(Reader(data)))
    assert same(decode_message(data), AmqpMessage(body))


def check_garbage_message(blob: bytes) -> None:
    fast = decode_data_body(blob)
    try:
        msg = decode_message(blob)
    except DecodeError:
        assert fast is None
        return
    if fast is not None:
        assert same(msg, AmqpMessage(fast))
    assert_same(decode_message(encode_message(msg)), msg)


section_starts = st.sampled_from([bytes([0x00, 0x53, code]) for code in range(0x70, 0x79)])


@given(st.binary(max_size=200) | st.tuples(section_starts, st.binary(max_size=60)).map(b"".join))
def test_random_bytes_give_a_message_or_decode_error(blob: bytes) -> None:
    check_garbage_message(blob)


@given(st.sampled_from([bytes.fromhex(v[0].replace(" ", "")) for v in MESSAGE_VECTORS]), st.data())
def test_mutated_message_vectors_give_a_message_or_decode_error(
    vector: bytes, data: st.DataObject
) -> None:
    check_garbage_message(mutate(vector, data))
