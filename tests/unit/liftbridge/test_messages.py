"""Typed wrappers over Message and Ack: golden and captured bytes, partitioning, headers."""

from __future__ import annotations

import zlib

import pytest

from streamwire.codec.headers import HeaderValue
from streamwire.errors import ConfigurationError, DecodeError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.envelope import MessageType, encode_envelope
from streamwire.liftbridge.protocol.errors import AckErrorCode
from streamwire.liftbridge.protocol.messages import (
    KINDS_HEADER,
    Ack,
    AckPolicy,
    decode_ack,
    decode_publish,
    encode_ack,
    encode_publish,
    headers_to_wire,
    is_literal_subject,
    partition_for_key,
    partition_from_ack,
    partition_subject,
    to_message,
)
from tests.unit.liftbridge.support import load_vector


def _golden_publish(crc: bool = False) -> bytes:
    return encode_publish(
        b"hello",
        key=b"k",
        headers={"h": b"v"},
        ack_inbox="acks.1",
        correlation_id="c1",
        ack_policy=AckPolicy.ALL,
        crc=crc,
    )


def test_encode_publish_matches_the_notes() -> None:
    assert _golden_publish() == load_vector("publish-envelope")
    assert _golden_publish(crc=True) == load_vector("publish-envelope-crc")


def test_decode_publish_of_the_notes_vector() -> None:
    msg = decode_publish(load_vector("publish-envelope-crc"))
    assert (msg.value, msg.key, msg.headers) == (b"hello", b"k", {"h": b"v"})
    assert (msg.ack_inbox, msg.correlation_id) == ("acks.1", "c1")
    assert msg.ack_policy == AckPolicy.ALL
    assert msg.expected_offset == -1


def test_enums_match_the_generated_code() -> None:
    assert [(p.name, int(p)) for p in AckPolicy] == [
        (name, pb.AckPolicy.Value(name)) for name in ("LEADER", "ALL", "NONE")
    ]
    assert {c.name: int(c) for c in AckErrorCode} == dict(pb.Ack.Error.items())


def test_decode_ack_of_the_notes_payload() -> None:
    ack = decode_ack(encode_envelope(MessageType.ACK, load_vector("ack-payload")))
    assert ack == Ack("s", "foo", "foo", 0, "acks.1", "c1", AckPolicy.ALL, 1, 2, 0)


def test_encode_ack_matches_the_notes_payload() -> None:
    ack = Ack("s", "foo", "foo", 0, "acks.1", "c1", AckPolicy.ALL, 1, 2)
    assert encode_ack(ack) == encode_envelope(MessageType.ACK, load_vector("ack-payload"))


def test_captured_all_ack() -> None:
    ack = decode_ack(load_vector("ack-all-partition0"))
    assert ack.stream == "vector-stream"
    assert ack.partition_subject == ack.msg_subject == "vector.subject"
    assert (ack.offset, ack.correlation_id, ack.ack_inbox) == (0, "c1", "vec.acks")
    assert ack.ack_policy == AckPolicy.ALL
    assert ack.ack_error == 0
    assert ack.commit_timestamp >= ack.reception_timestamp > 1_700_000_000 * 10**9
    assert partition_from_ack(ack) == 0


def test_captured_leader_ack_on_partition_1() -> None:
    ack = decode_ack(load_vector("ack-leader-partition1"))
    assert ack.partition_subject == "vector.subject"
    assert ack.msg_subject == "vector.subject.1"
    assert ack.ack_policy == AckPolicy.LEADER
    assert partition_from_ack(ack) == 1


def test_captured_incorrect_offset_ack() -> None:
    ack = decode_ack(load_vector("ack-incorrect-offset"))
    assert ack.ack_error == AckErrorCode.INCORRECT_OFFSET
    assert (ack.stream, ack.offset, ack.correlation_id) == ("vector-occ", 0, "c3")


def test_a_publish_is_not_an_ack() -> None:
    with pytest.raises(DecodeError, match="message type"):
        decode_ack(load_vector("publish-envelope"))


def test_garbage_protobuf_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="Ack protobuf"):
        decode_ack(encode_envelope(MessageType.ACK, b"\x0a\xff\xff"))
    with pytest.raises(DecodeError, match="Message protobuf"):
        decode_publish(encode_envelope(MessageType.PUBLISH, b"\x12\x05ab"))


def test_invalid_utf8_in_a_string_field_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_ack(encode_envelope(MessageType.ACK, b"\x0a\x02\xc3\x28"))


@pytest.mark.parametrize("bad", [-(1 << 63) - 1, 1 << 63])
def test_expected_offset_must_fit_int64(bad: int) -> None:
    with pytest.raises(ConfigurationError):
        encode_publish(b"x", expected_offset=bad)


def test_unknown_ack_policy_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        encode_publish(b"x", ack_policy=7)


def test_unencodable_header_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        encode_publish(b"x", headers={"\ud800": b"v"})


def test_expected_offset_and_empty_fields() -> None:
    msg = decode_publish(encode_publish(b"", expected_offset=42))
    assert (msg.value, msg.key, msg.headers, msg.expected_offset) == (b"", b"", {}, 42)
    assert msg.ack_inbox == ""


# --- partitions and subjects -------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "count"), [(b"", 3), (b"k", 3), (b"user-17", 7), (b"\xff" * 40, 2), (None, 5)]
)
def test_partition_for_key_is_crc32_ieee_unsigned(key: bytes | None, count: int) -> None:
    assert partition_for_key(key, count) == zlib.crc32(key or b"") % count


def test_partition_for_key_known_values() -> None:
    # crc32(b"foo") = 0x8C736521 (2356372769): unsigned mod, as go-liftbridge's code
    assert partition_for_key(b"foo", 10) == 2356372769 % 10 == 9
    with pytest.raises(ConfigurationError):
        partition_for_key(b"x", 0)


def test_partition_subject() -> None:
    assert partition_subject("foo", 0) == "foo"
    assert partition_subject("foo", 2) == "foo.2"
    assert partition_subject("foo.*", 1) == "foo.*.1"
    with pytest.raises(ConfigurationError):
        partition_subject("foo", -1)


@pytest.mark.parametrize(
    ("subject", "literal"),
    [
        ("foo", True),
        ("foo.bar.1", True),
        ("foo.*", False),
        ("foo.>", False),
        ("", False),
        ("foo..bar", False),
        ("foo bar", False),
        (".foo", False),
    ],
)
def test_is_literal_subject(subject: str, literal: bool) -> None:
    assert is_literal_subject(subject) is literal


@pytest.mark.parametrize(
    ("partition_subject_", "msg_subject", "expected"),
    [
        ("foo", "foo", 0),
        ("foo", "foo.3", 3),
        ("foo.*", "foo.bar", 0),
        ("foo.*", "foo.bar.2", 2),
        ("foo", "foo.x", None),
        ("foo", "foo.1.2", None),
    ],
)
def test_partition_from_ack(
    partition_subject_: str, msg_subject: str, expected: int | None
) -> None:
    ack = Ack("s", partition_subject_, msg_subject, 0, "", "", 0, 0, 0)
    assert partition_from_ack(ack) == expected


# --- headers and received messages ------------------------------------------------------


def test_headers_to_wire_kinds() -> None:
    wire = headers_to_wire(
        {
            "raw": HeaderValue.raw(b"\x00\x01"),
            "text": HeaderValue.string("héllo"),
            "n": HeaderValue.int64(1),
            "flag": HeaderValue.boolean(True),
        }
    )
    assert wire == {
        "raw": b"\x00\x01",
        "text": "héllo".encode(),
        "n": (1).to_bytes(8, "little"),
        "flag": b"\x01",
        KINDS_HEADER: b'{"flag":3,"n":7,"text":2}',  # so the kinds survive the round trip
    }


@pytest.mark.parametrize("name", ["subject", "reply"])
def test_reserved_header_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        headers_to_wire({name: HeaderValue.raw(b"x")})


def test_to_message_drops_server_headers_unless_asked() -> None:
    msg = pb.Message(
        offset=7,
        key=b"k",
        value=b"v",
        timestamp=1_700_000_000_123_456_789,
        stream="s",
        partition=2,
        headers={"subject": b"foo.2", "reply": b"", "h": b"x"},
    )
    m = to_message(msg)
    assert (m.value, m.key, m.offset, m.stream, m.partition) == (b"v", b"k", 7, "s", 2)
    assert m.headers == {"h": HeaderValue.raw(b"x")}
    assert m.timestamp_us == 1_700_000_000_123_456
    full = to_message(msg, server_headers=True)
    assert set(full.headers) == {"subject", "reply", "h"}


def test_to_message_empty_key_is_none() -> None:
    assert to_message(pb.Message(value=b"v")).key is None
