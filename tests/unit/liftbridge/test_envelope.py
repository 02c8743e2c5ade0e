"""The envelope header: golden vectors, every check of the decoder, and the encoder's refusal
to write inconsistent headers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.codec.checksums import crc32c
from streamwire.errors import (
    ChecksumMismatchError,
    DecodeError,
    LocalProtocolError,
    StreamwireError,
)
from streamwire.liftbridge.protocol.envelope import (
    FLAG_CRC32C,
    HEADER_SIZE,
    HEADER_SIZE_CRC,
    MAGIC,
    EnvelopeHeader,
    MessageType,
    decode_envelope,
    encode_envelope,
    encode_header,
    envelope_payload,
    is_envelope,
)
from tests.unit.liftbridge.support import load_vector

PAYLOAD = load_vector("publish-payload")


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(PAYLOAD) == 0x049C060F


def test_golden_publish_envelope() -> None:
    assert encode_envelope(MessageType.PUBLISH, PAYLOAD) == load_vector("publish-envelope")


def test_golden_publish_envelope_with_crc() -> None:
    expected = load_vector("publish-envelope-crc")
    assert encode_envelope(MessageType.PUBLISH, PAYLOAD, crc=True) == expected


@pytest.mark.parametrize("name", ["publish-envelope", "publish-envelope-crc"])
def test_golden_decode(name: str) -> None:
    data = load_vector(name)
    header, payload = decode_envelope(data, expected=MessageType.PUBLISH)
    assert bytes(payload) == PAYLOAD
    assert header.version == 0
    assert header.msg_type == MessageType.PUBLISH
    if name.endswith("crc"):
        assert header == EnvelopeHeader(0, 12, FLAG_CRC32C, 0, 0x049C060F)
        assert header.has_crc
    else:
        assert header == EnvelopeHeader(0, 8, 0, 0, None)
        assert not header.has_crc


def test_message_types_match_the_readme_table() -> None:
    assert [t.value for t in MessageType] == list(range(15))
    assert int(MessageType.ACK) == 1
    assert int(MessageType.PARTITION_NOTIFICATION) == 14


def test_header_is_big_endian_and_magic_first() -> None:
    head = encode_header(MessageType.ACK, crc=0x01020304)
    assert head == MAGIC + bytes([0, 12, 1, 1, 1, 2, 3, 4])
    assert len(encode_header(MessageType.ACK)) == HEADER_SIZE
    assert len(head) == HEADER_SIZE_CRC


@pytest.mark.parametrize("cut", range(HEADER_SIZE))
def test_every_truncated_header_is_a_decode_error(cut: int) -> None:
    with pytest.raises(DecodeError):
        decode_envelope(load_vector("publish-envelope")[:cut])


def test_truncated_crc_header_is_a_decode_error() -> None:
    data = load_vector("publish-envelope-crc")
    for cut in range(HEADER_SIZE, HEADER_SIZE_CRC):
        with pytest.raises(DecodeError):
            decode_envelope(data[:cut])


def test_header_only_envelope_has_an_empty_payload() -> None:
    header, payload = decode_envelope(encode_header(MessageType.PUBLISH))
    assert header.header_len == 8
    assert bytes(payload) == b""


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (0, 0x00, "magic"),
        (3, 0xB5, "magic"),
        (4, 0x01, "version"),
        (5, 0x07, "header length 7"),
        (5, 0x00, "header length 0"),
        (5, 0xFF, "beyond"),
    ],
)
def test_bad_header_fields(offset: int, value: int, match: str) -> None:
    data = bytearray(load_vector("publish-envelope"))
    data[offset] = value
    with pytest.raises(DecodeError, match=match):
        decode_envelope(bytes(data))


def test_wrong_message_type() -> None:
    with pytest.raises(DecodeError, match="message type 0, expected 1"):
        decode_envelope(load_vector("publish-envelope"), expected=MessageType.ACK)


def test_crc_flag_needs_header_length_12() -> None:
    data = bytearray(load_vector("publish-envelope"))
    data[6] = FLAG_CRC32C
    with pytest.raises(DecodeError, match="with the CRC flag"):
        decode_envelope(bytes(data))


def test_crc_mismatch() -> None:
    data = bytearray(load_vector("publish-envelope-crc"))
    data[-1] ^= 0x01
    with pytest.raises(ChecksumMismatchError) as info:
        decode_envelope(bytes(data))
    assert info.value.expected == 0x049C060F
    header, _ = decode_envelope(bytes(data), verify_crc=False)
    assert header.crc32c == 0x049C060F


def test_unknown_flag_bits_are_ignored_like_the_server() -> None:
    data = bytearray(load_vector("publish-envelope"))
    data[6] = 0x80
    header, payload = decode_envelope(bytes(data))
    assert header.flags == 0x80
    assert not header.has_crc
    assert bytes(payload) == PAYLOAD


def test_longer_header_without_crc_skips_bytes_like_the_server() -> None:
    data = MAGIC + bytes([0, 10, 0, 0]) + b"\xaa\xbb" + PAYLOAD
    header, payload = decode_envelope(data)
    assert header.header_len == 10
    assert bytes(payload) == PAYLOAD


def test_accepts_bytearray_and_memoryview() -> None:
    data = load_vector("publish-envelope-crc")
    for form in (bytearray(data), memoryview(data)):
        _, payload = decode_envelope(form)
        assert bytes(payload) == PAYLOAD


def test_is_envelope() -> None:
    assert is_envelope(load_vector("publish-envelope"))
    assert not is_envelope(MAGIC)
    assert not is_envelope(b"hello world, not an envelope")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"header_len": 12}, "inconsistent"),
        ({"header_len": 9}, "inconsistent"),
        ({"crc": 1, "header_len": 8}, "inconsistent"),
        ({"flags": FLAG_CRC32C}, "no CRC"),
        ({"crc": 5, "flags": 0}, "flag bit 0"),
        ({"crc": 1 << 32}, "32 bits"),
        ({"crc": -1}, "32 bits"),
        ({"flags": 0x100}, "one byte"),
    ],
)
def test_encoder_refuses_inconsistent_headers(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(LocalProtocolError, match=match):
        encode_header(MessageType.PUBLISH, **kwargs)


@pytest.mark.parametrize("msg_type", [-1, 256])
def test_encoder_refuses_message_types_beyond_a_byte(msg_type: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_header(msg_type)


def test_encoder_accepts_consistent_explicit_fields() -> None:
    assert encode_header(0, header_len=8, flags=0) == MAGIC + bytes([0, 8, 0, 0])
    assert encode_header(1, crc=7, header_len=12, flags=FLAG_CRC32C)[5] == 12


@settings(max_examples=500, deadline=None)
@given(
    head=st.one_of(
        st.binary(max_size=16),
        st.tuples(
            st.sampled_from([0, 1]), st.integers(0, 20), st.integers(0, 3), st.integers(0, 2)
        ).map(lambda t: MAGIC + bytes(t)),
    ),
    payload=st.binary(max_size=40),
    expected=st.sampled_from([MessageType.PUBLISH, MessageType.ACK]),
    as_view=st.booleans(),
)
def test_envelope_payload_agrees_with_decode_envelope(
    head: bytes, payload: bytes, expected: int, as_view: bool
) -> None:
    """The inline shortcut for plain headers returns what decode_envelope does, and refuses
    what it refuses, with the same exception type."""
    data = head + payload
    arg: bytes | memoryview = memoryview(data) if as_view else data
    try:
        want: bytes | type[Exception] = bytes(decode_envelope(arg, expected=expected)[1])
    except StreamwireError as exc:
        want = type(exc)
    try:
        got: bytes | type[Exception] = envelope_payload(arg, expected)
    except StreamwireError as exc:
        got = type(exc)
    assert got == want
