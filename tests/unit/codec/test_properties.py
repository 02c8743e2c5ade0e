"""Message properties and annotations as reserved typed headers (docs/api.md, "Properties and
annotations"), and how RabbitMQ's AMQP mapping writes them into the properties section and the
message annotations instead of the application properties."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from streamwire import HeaderValue, Message, MessageProperties
from streamwire.codec import amqp
from streamwire.codec.headers import HeaderKind
from streamwire.codec.properties import PROPERTY_HEADERS
from streamwire.errors import ConfigurationError, HeaderKindError
from streamwire.rabbitmq._amqp_map import decode_record, encode_message

CREATED = datetime(2026, 11, 28, 10, 0, 0, 123_000, tzinfo=UTC)
EXPIRES = datetime(2027, 1, 1, tzinfo=UTC)
EVERY = MessageProperties(
    message_id="order-17",
    user_id=b"guest",
    to="/queues/orders",
    subject="created",
    reply_to="/queues/replies",
    correlation_id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    content_type="application/json",
    content_encoding="gzip",
    absolute_expiry_time=EXPIRES,
    creation_time=CREATED,
    group_id="g-1",
    group_sequence=2**32 - 1,
    reply_to_group_id="g-2",
)


def test_every_field_has_a_reserved_header_named_as_in_the_amqp_spec() -> None:
    assert list(PROPERTY_HEADERS.values()) == [
        "amqp.message-id",
        "amqp.user-id",
        "amqp.to",
        "amqp.subject",
        "amqp.reply-to",
        "amqp.correlation-id",
        "amqp.content-type",
        "amqp.content-encoding",
        "amqp.absolute-expiry-time",
        "amqp.creation-time",
        "amqp.group-id",
        "amqp.group-sequence",
        "amqp.reply-to-group-id",
    ]


def test_properties_become_typed_headers_and_come_back_equal() -> None:
    headers = EVERY.to_headers()
    assert headers == {
        "amqp.message-id": HeaderValue.string("order-17"),
        "amqp.user-id": HeaderValue.raw(b"guest"),
        "amqp.to": HeaderValue.string("/queues/orders"),
        "amqp.subject": HeaderValue.string("created"),
        "amqp.reply-to": HeaderValue.string("/queues/replies"),
        "amqp.correlation-id": HeaderValue.uint128(0x12345678123456781234567812345678),
        "amqp.content-type": HeaderValue.string("application/json"),
        "amqp.content-encoding": HeaderValue.string("gzip"),
        "amqp.absolute-expiry-time": HeaderValue.int64(1_798_761_600_000),
        "amqp.creation-time": HeaderValue.int64(1_795_860_000_123),
        "amqp.group-id": HeaderValue.string("g-1"),
        "amqp.group-sequence": HeaderValue.uint32(2**32 - 1),
        "amqp.reply-to-group-id": HeaderValue.string("g-2"),
    }
    assert MessageProperties.from_headers(headers) == EVERY
    # the wire form every broker's headers use (Iggy's), read back
    rewired = {k: HeaderValue.from_bytes(v.kind, v.to_bytes()) for k, v in headers.items()}
    assert MessageProperties.from_headers(rewired) == EVERY


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (7, HeaderKind.UINT64),
        (2**64 - 1, HeaderKind.UINT64),
        (uuid.UUID(int=5), HeaderKind.UINT128),
        (b"\x00\x01", HeaderKind.RAW),
        ("id", HeaderKind.STRING),
    ],
)
def test_an_id_keeps_its_amqp_type(value: int | uuid.UUID | bytes | str, kind: HeaderKind) -> None:
    props = MessageProperties(message_id=value, correlation_id=value)
    headers = props.to_headers()
    assert headers["amqp.message-id"].kind is kind
    back = MessageProperties.from_headers(headers)
    assert back is not None
    assert back.message_id == value
    assert type(back.message_id) is type(value)


@pytest.mark.parametrize("bad", [-1, 2**64, True, 1.5, None.__class__])
def test_ids_outside_amqp_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="message_id"):
        MessageProperties(message_id=bad)  # type: ignore[arg-type]


def test_times_are_utc_milliseconds() -> None:
    naive = datetime(2026, 1, 2, 3, 4, 5, 678_999)
    props = MessageProperties(creation_time=naive)
    assert props.creation_time == datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    other = MessageProperties(creation_time=datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus_two))
    assert other.creation_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert other.creation_time is not None
    assert other.creation_time.tzinfo is UTC
    before_epoch = MessageProperties(creation_time=datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert before_epoch.to_headers()["amqp.creation-time"] == HeaderValue.int64(-1000)
    with pytest.raises(ConfigurationError, match="creation_time"):
        MessageProperties(creation_time=1_700_000_000_000)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("to", b"bytes"),
        ("content_type", 3),
        ("content_type", "text/é"),
        ("content_encoding", "ü"),
        ("user_id", "text"),
        ("group_sequence", -1),
        ("group_sequence", 2**32),
        ("group_sequence", False),
    ],
)
def test_fields_of_the_wrong_type_are_refused(field: str, bad: object) -> None:
    with pytest.raises(ConfigurationError, match=field):
        MessageProperties(**{field: bad})  # type: ignore[arg-type]


def test_reading_is_tolerant_of_integer_kinds_and_refuses_impossible_ones() -> None:
    props = MessageProperties.from_headers(
        {
            "amqp.creation-time": HeaderValue.uint64(1_000),
            "amqp.group-sequence": HeaderValue.int64(9),
            "amqp.user-id": HeaderValue.string("guest"),
            "amqp.message-id": HeaderValue.int32(4),
        }
    )
    assert props == MessageProperties(
        creation_time=datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
        group_sequence=9,
        user_id=b"guest",
        message_id=4,
    )
    with pytest.raises(HeaderKindError, match=r"amqp\.creation-time"):
        MessageProperties.from_headers({"amqp.creation-time": HeaderValue.boolean(True)})
    with pytest.raises(HeaderKindError, match="group_sequence"):
        MessageProperties.from_headers({"amqp.group-sequence": HeaderValue.int64(-1)})
    assert MessageProperties.from_headers({"other": HeaderValue.string("x")}) is None


def test_headers_whose_kind_got_lost_are_read_from_their_canonical_bytes() -> None:
    """Spark's headers column and byte-only writers keep the bytes and lose the kind: the
    properties still read back (a Raw id is a bytes id)."""
    raw = {k: HeaderValue.raw(v.to_bytes()) for k, v in EVERY.to_headers().items()}
    back = MessageProperties.from_headers(raw)
    assert back is not None
    assert back.message_id == b"order-17"
    assert back.correlation_id == uuid.UUID("12345678-1234-5678-1234-567812345678").bytes[::-1]
    assert back == dataclasses.replace(
        EVERY, message_id=back.message_id, correlation_id=back.correlation_id
    )
    with pytest.raises(HeaderKindError, match="not an integer's 8"):
        MessageProperties.from_headers({"amqp.creation-time": HeaderValue.raw(b"\x01")})
    with pytest.raises(HeaderKindError, match="UTF-8"):
        MessageProperties.from_headers({"amqp.subject": HeaderValue.raw(b"\xff")})
    # and RabbitMQ takes them into the properties section
    sent = _through_rabbitmq(Message(b"", headers=raw))
    assert sent.properties == back


def test_a_message_carries_properties_and_annotations_among_its_headers() -> None:
    user_headers = {"tenant": "acme"}
    msg = Message(
        b"v",
        headers=user_headers,
        properties=EVERY,
        annotations={"x-opt-source": "checkout", "x-opt-n": 3},
    )
    assert user_headers == {"tenant": "acme"}  # the caller's mapping is not changed
    assert msg.properties == EVERY
    assert msg.annotations == {
        "x-opt-source": HeaderValue.string("checkout"),
        "x-opt-n": HeaderValue.int64(3),
    }
    assert msg.headers["tenant"] == HeaderValue.string("acme")
    assert msg.headers["amqp.annotation.x-opt-n"] == HeaderValue.int64(3)
    plain = Message(b"v", headers={"tenant": "acme"})
    assert plain.properties is None
    assert plain.annotations == {}
    with pytest.raises(ConfigurationError, match="MessageProperties"):
        Message(b"v", properties={"message_id": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="annotation"):
        Message(b"v", annotations={"": 1})
    with pytest.raises(ConfigurationError, match="ASCII"):
        Message(b"v", annotations={"x-opt-é": 1})


def _through_rabbitmq(msg: Message) -> Message:
    data = encode_message(msg)
    return decode_record(memoryview(data), 5, 1_000, "s")


def test_rabbitmq_writes_them_into_the_properties_section_and_the_annotations() -> None:
    msg = Message(
        b"body",
        key=b"k",
        headers={"tenant": "acme", "amqp.not-reserved": 1},
        properties=EVERY,
        annotations={"x-opt-source": "checkout"},
    )
    decoded = amqp.decode_message(encode_message(msg))
    assert decoded.body_bytes == b"body"
    assert decoded.application_properties == {"tenant": "acme", "amqp.not-reserved": 1}
    assert decoded.message_annotations == {
        amqp.Symbol("x-opt-source"): "checkout",
        amqp.Symbol("x-streamwire-key"): b"k",
    }
    props = decoded.properties
    assert props is not None
    assert props.message_id == "order-17"
    assert props.user_id == b"guest"
    assert props.correlation_id == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert props.content_type == amqp.Symbol("application/json")
    assert type(props.content_type) is amqp.Symbol
    assert props.creation_time == amqp.Timestamp(1_795_860_000_123)
    assert props.absolute_expiry_time == amqp.Timestamp(1_798_761_600_000)
    assert props.group_sequence == 2**32 - 1
    back = _through_rabbitmq(msg)
    assert back.properties == EVERY
    assert back.annotations == {"x-opt-source": HeaderValue.string("checkout")}
    assert back.key == b"k"
    assert back.headers == msg.headers
    assert back.value == b"body"


def test_an_int_id_is_an_amqp_ulong_on_rabbitmq() -> None:
    decoded = amqp.decode_message(
        encode_message(Message(b"", properties=MessageProperties(message_id=7)))
    )
    assert decoded.properties is not None
    assert type(decoded.properties.message_id) is amqp.ULong
    back = _through_rabbitmq(Message(b"", properties=MessageProperties(message_id=7)))
    assert back.headers == {"amqp.message-id": HeaderValue.uint64(7)}


@pytest.mark.parametrize("ms", [2**63 - 1, 253_402_300_800_000, -(2**63)])
def test_a_time_beyond_a_datetime_reads_as_its_bound_and_is_sent_on_exactly(ms: int) -> None:
    """Java's ``Long.MAX_VALUE`` ("never expires") and years past 9999 are AMQP timestamps a
    datetime cannot hold: ``properties`` gives datetime's bound, the header the exact value."""
    raw = amqp.encode_message(
        amqp.AmqpMessage(
            b"", properties=amqp.Properties(subject="s", absolute_expiry_time=amqp.Timestamp(ms))
        )
    )
    back = decode_record(memoryview(raw), 0, 0, "s")
    bound = datetime.max if ms > 0 else datetime.min
    assert back.properties == MessageProperties(
        subject="s", absolute_expiry_time=bound.replace(tzinfo=UTC)
    )
    assert back.headers["amqp.absolute-expiry-time"] == HeaderValue.int64(ms)
    again = amqp.decode_message(encode_message(back))
    assert again.properties is not None
    assert again.properties.absolute_expiry_time == amqp.Timestamp(ms)


def test_a_reserved_header_of_an_impossible_kind_is_refused_before_sending() -> None:
    with pytest.raises(ConfigurationError, match=r"amqp\.creation-time"):
        encode_message(Message(b"", headers={"amqp.creation-time": True}))


def test_a_uuid_is_a_uint128_header_both_ways() -> None:
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    msg = Message(b"", headers={"u": HeaderValue.uint128(u.int)})
    decoded = amqp.decode_message(encode_message(msg))
    assert decoded.application_properties == {"u": u}
    raw = amqp.encode_message(amqp.AmqpMessage(b"", application_properties={"u": u}))
    back = decode_record(memoryview(raw), 0, 0, "s")
    assert back.headers == {"u": HeaderValue.uint128(u.int)}
    with pytest.raises(ConfigurationError, match="Int128"):
        encode_message(Message(b"", headers={"i": HeaderValue.int128(-1)}))


def test_annotations_a_peer_sent_are_kept_under_their_names() -> None:
    raw = amqp.encode_message(
        amqp.AmqpMessage(
            b"x",
            message_annotations={
                amqp.Symbol("x-exchange"): "orders",
                amqp.Symbol("x-routing-key"): "eu",
                amqp.ULong(9): True,
                amqp.Symbol("x-streamwire-key"): 5,  # not bytes: an annotation like others
            },
        )
    )
    back = decode_record(memoryview(raw), 0, 0, "s")
    assert back.key is None
    annotations = back.annotations
    assert annotations.pop("x-streamwire-key").as_int() == 5
    assert annotations == {
        "x-exchange": HeaderValue.string("orders"),
        "x-routing-key": HeaderValue.string("eu"),
        "9": HeaderValue.boolean(True),
    }
