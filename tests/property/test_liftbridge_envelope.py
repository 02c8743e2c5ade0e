"""Hypothesis for Liftbridge: envelope and message round trips (non-ASCII included), and
garbage in → only streamwire exceptions out, for every decoder."""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st

from streamwire.codec.headers import HeaderValue
from streamwire.errors import (
    ChecksumMismatchError,
    ConfigurationError,
    DecodeError,
    StreamwireError,
)
from streamwire.liftbridge.protocol.envelope import (
    HEADER_SIZE,
    MAGIC,
    MessageType,
    decode_envelope,
    encode_envelope,
)
from streamwire.liftbridge.protocol.messages import (
    KINDS_HEADER,
    Ack,
    decode_ack,
    decode_publish,
    encode_ack,
    encode_publish,
    headers_from_wire,
    headers_to_wire,
)

texts = st.text(max_size=40)  # non-ASCII included, surrogates excluded
int64 = st.integers(-(2**63), 2**63 - 1)
msg_types = st.sampled_from(list(MessageType))


@given(msg_types, st.binary(max_size=300), st.booleans())
def test_envelope_round_trip(msg_type: MessageType, payload: bytes, crc: bool) -> None:
    data = encode_envelope(msg_type, payload, crc=crc)
    header, body = decode_envelope(data, expected=msg_type)
    assert bytes(body) == payload
    assert header.msg_type == msg_type
    assert header.header_len == (12 if crc else 8) == len(data) - len(payload)


@given(st.binary(max_size=200), st.sampled_from([None, 0, 1, 5]), st.booleans())
def test_envelope_garbage_only_raises_our_errors(
    data: bytes, expected: int | None, verify: bool
) -> None:
    with contextlib.suppress(StreamwireError):
        decode_envelope(data, expected=expected, verify_crc=verify)


@given(st.binary(max_size=8), st.integers(0, 255), st.integers(0, 255), st.binary(max_size=100))
def test_magic_prefixed_garbage_only_raises_our_errors(
    head: bytes, header_len: int, flags: int, rest: bytes
) -> None:
    data = MAGIC + b"\x00" + bytes([header_len, flags]) + head[:1] + rest
    for decode in (decode_envelope, decode_ack, decode_publish):
        with contextlib.suppress(StreamwireError):
            decode(data)


@given(st.binary(min_size=1, max_size=120), st.data())
def test_any_flipped_payload_bit_breaks_the_crc(payload: bytes, data: st.DataObject) -> None:
    envelope = bytearray(encode_envelope(MessageType.ACK, payload, crc=True))
    index = data.draw(st.integers(12, len(envelope) - 1))
    envelope[index] ^= 1 << data.draw(st.integers(0, 7))
    try:
        decode_envelope(bytes(envelope))
    except ChecksumMismatchError:
        return
    raise AssertionError("a corrupted payload passed the CRC check")


@given(st.binary(max_size=300))
def test_ack_and_publish_decoders_take_any_bytes(data: bytes) -> None:
    for decode in (decode_ack, decode_publish):
        for candidate in (data, encode_envelope(MessageType.ACK, data), encode_envelope(0, data)):
            with contextlib.suppress(DecodeError, ChecksumMismatchError):
                decode(candidate)


@given(
    value=st.binary(max_size=200),
    key=st.none() | st.binary(min_size=1, max_size=30),
    headers=st.dictionaries(
        texts.filter(lambda t: t not in ("subject", "reply")), st.binary(max_size=20), max_size=5
    ),
    inbox=texts,
    cid=texts,
    policy=st.sampled_from([0, 1, 2]),
    expected=int64,
    crc=st.booleans(),
)
def test_publish_round_trip(
    value: bytes,
    key: bytes | None,
    headers: dict[str, bytes],
    inbox: str,
    cid: str,
    policy: int,
    expected: int,
    crc: bool,
) -> None:
    data = encode_publish(
        value,
        key=key,
        headers=headers,
        ack_inbox=inbox,
        correlation_id=cid,
        ack_policy=policy,
        expected_offset=expected,
        crc=crc,
    )
    msg = decode_publish(data)
    assert (msg.value, msg.key, msg.headers) == (value, key or b"", headers)
    assert (msg.ack_inbox, msg.correlation_id, msg.ack_policy) == (inbox, cid, policy)
    assert msg.expected_offset == expected


@given(
    st.builds(
        Ack,
        stream=texts,
        partition_subject=texts,
        msg_subject=texts,
        offset=int64,
        ack_inbox=texts,
        correlation_id=texts,
        ack_policy=st.sampled_from([0, 1, 2]),
        reception_timestamp=int64,
        commit_timestamp=int64,
        ack_error=st.sampled_from([0, 1, 2, 3, 4]),
    ),
    st.booleans(),
)
def test_ack_round_trip(ack: Ack, crc: bool) -> None:
    assert decode_ack(encode_ack(ack, crc=crc)) == ack


@given(st.dictionaries(texts, st.binary(max_size=10) | texts | st.integers(-(2**63), 2**63 - 1)))
def test_headers_to_wire_only_refuses_reserved_names(raw: dict[str, bytes | str | int]) -> None:
    headers = {k: HeaderValue.of(v) for k, v in raw.items()}
    try:
        wire = headers_to_wire(headers)
    except ConfigurationError:
        assert set(raw) & {"subject", "reply", KINDS_HEADER}
        return
    wire.pop(KINDS_HEADER, None)
    assert wire == {k: v.to_bytes() for k, v in headers.items()}
    assert headers_from_wire(headers_to_wire(headers)) == headers


def test_the_header_size_constant() -> None:
    assert len(encode_envelope(0, b"")) == HEADER_SIZE
