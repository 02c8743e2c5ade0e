"""Hypothesis: any message properties and annotations come back equal through every broker's
header form — RabbitMQ's AMQP sections (walked as a chunk by whichever core is loaded),
Liftbridge's byte headers and Iggy's typed header wire form."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from streamwire import HeaderValue, Message, MessageProperties
from streamwire.liftbridge.protocol.messages import headers_from_wire, headers_to_wire
from streamwire.rabbitmq._amqp_map import decode_chunk, encode_message
from tests.property.test_native_core import chunk_bytes

TEXT = st.text(max_size=40)
SYMBOL = st.text(st.characters(codec="ascii"), max_size=40)
IDS = st.one_of(
    st.integers(0, 2**64 - 1),
    st.uuids(),
    st.binary(max_size=40),
    TEXT,
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TIMES = st.integers(-(2**40), 2**45).map(lambda ms: EPOCH + timedelta(milliseconds=ms))


@st.composite
def properties(draw: st.DrawFn) -> MessageProperties:
    def maybe(strategy: st.SearchStrategy[object]) -> object:
        return draw(st.one_of(st.none(), strategy))

    return MessageProperties(
        message_id=maybe(IDS),  # type: ignore[arg-type]
        user_id=maybe(st.binary(max_size=20)),  # type: ignore[arg-type]
        to=maybe(TEXT),  # type: ignore[arg-type]
        subject=maybe(TEXT),  # type: ignore[arg-type]
        reply_to=maybe(TEXT),  # type: ignore[arg-type]
        correlation_id=maybe(IDS),  # type: ignore[arg-type]
        content_type=maybe(SYMBOL),  # type: ignore[arg-type]
        content_encoding=maybe(SYMBOL),  # type: ignore[arg-type]
        absolute_expiry_time=maybe(TIMES),  # type: ignore[arg-type]
        creation_time=maybe(TIMES),  # type: ignore[arg-type]
        group_id=maybe(TEXT),  # type: ignore[arg-type]
        group_sequence=maybe(st.integers(0, 2**32 - 1)),  # type: ignore[arg-type]
        reply_to_group_id=maybe(TEXT),  # type: ignore[arg-type]
    )


ANNOTATION_VALUES = st.one_of(
    TEXT.map(HeaderValue.string),
    st.binary(max_size=20).map(HeaderValue.raw),
    st.booleans().map(HeaderValue.boolean),
    st.integers(-(2**63), 2**63 - 1).map(HeaderValue.int64),
    st.integers(0, 2**32 - 1).map(HeaderValue.uint32),
    st.uuids().map(lambda u: HeaderValue.uint128(u.int)),
)
ANNOTATIONS = st.dictionaries(
    st.text(st.characters(codec="ascii"), min_size=1, max_size=20).filter(
        lambda k: k != "x-streamwire-key"
    ),
    ANNOTATION_VALUES,
    max_size=4,
)
HEADERS = st.dictionaries(
    st.text(min_size=1, max_size=20).filter(lambda k: not k.startswith("amqp.")),
    st.one_of(TEXT, st.integers(-(2**63), 2**63 - 1), st.booleans()),
    max_size=4,
)


def _chunk_of(record: bytes) -> bytes:
    return chunk_bytes(struct.pack(">I", len(record)) + record, 1, 40, 0, 1_700_000_000_000)


@given(properties(), ANNOTATIONS, HEADERS, st.one_of(st.none(), st.binary(max_size=8)))
def test_they_survive_every_broker(
    props: MessageProperties,
    annotations: dict[str, HeaderValue],
    headers: dict[str, object],
    key: bytes | None,
) -> None:
    msg = Message(b"v", key=key, headers=headers, properties=props, annotations=annotations)  # type: ignore[arg-type]
    expected_props = props if props.to_headers() else None

    [rabbit] = decode_chunk(_chunk_of(encode_message(msg)), stream="s", verify_crc=False)
    assert rabbit.value == b"v"
    assert rabbit.key == key
    assert rabbit.properties == expected_props
    assert rabbit.annotations == annotations
    assert rabbit.headers == msg.headers

    liftbridge = headers_from_wire(headers_to_wire(msg.headers))
    assert liftbridge == msg.headers
    assert MessageProperties.from_headers(liftbridge) == expected_props

    iggy = {k: HeaderValue.from_bytes(v.kind, v.to_bytes()) for k, v in msg.headers.items()}
    assert MessageProperties.from_headers(iggy) == expected_props


@given(IDS)
def test_an_id_keeps_its_python_type(value: int | uuid.UUID | bytes | str) -> None:
    msg = Message(b"", properties=MessageProperties(message_id=value))
    [back] = decode_chunk(_chunk_of(encode_message(msg)), stream="s", verify_crc=False)
    assert back.properties is not None
    assert back.properties.message_id == value
    assert type(back.properties.message_id) is type(value)
