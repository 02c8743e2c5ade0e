"""Property tests for every Iggy payload, header and block decoder:

* round trip: ``decode(encode(x)) == x`` for every payload class (non-ASCII text included);
* garbage in → only streamwire exceptions out, for random bytes and for corrupted
  (truncated, bit-flipped, extended) valid encodings;
* TLV user headers, message batches and headers round-trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.codec.headers import HeaderValue
from streamwire.errors import StreamwireError
from streamwire.iggy.protocol import REQUEST_TYPES, tlv
from streamwire.iggy.protocol.batch import decode_batch, encode_batch
from streamwire.iggy.protocol.framing import (
    decode_request,
    decode_server_frame,
    encode_eviction,
    encode_reply,
    encode_request,
    split_result_section,
)
from tests.unit.iggy.strategies import (
    BATCHES,
    HEADERS,
    OUTGOING,
    all_payload_classes,
    payload_strategy,
)

CLASSES = all_payload_classes()
#: Each of the ~90 payload classes gets a quarter of the profile's examples per property (the
#: classes share their decoders' primitives, so the module still tries ~20 times the profile's
#: count; nightly: 1250 each). Before, these two tests were half of the property suite's time
#: and ran in both of CI's passes.
_PROFILE = settings.default
PER_CLASS = settings(max_examples=max(20, (_PROFILE.max_examples if _PROFILE else 100) // 4))


def test_every_request_class_is_covered() -> None:
    assert set(REQUEST_TYPES.values()) <= set(CLASSES)
    assert len(CLASSES) > 80


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_round_trip(cls: type[Any]) -> None:
    @PER_CLASS
    @given(payload_strategy(cls))
    def check(value: Any) -> None:
        data = value.encode()
        assert isinstance(data, bytes)
        assert cls.decode(data) == value

    check()


def _only_ours(decode: Callable[[bytes], object], data: bytes) -> None:
    with contextlib.suppress(StreamwireError):
        decode(data)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_garbage_in_only_streamwire_errors_out(cls: type[Any]) -> None:
    @PER_CLASS
    @given(st.binary(max_size=300))
    def random_bytes(data: bytes) -> None:
        _only_ours(cls.decode, data)

    @PER_CLASS
    @given(payload_strategy(cls), st.data())
    def corrupted(value: Any, data: st.DataObject) -> None:
        encoded = bytearray(value.encode())
        action = data.draw(st.sampled_from(["truncate", "flip", "extend"]))
        if action == "truncate" and encoded:
            del encoded[data.draw(st.integers(0, len(encoded) - 1)) :]
        elif action == "flip" and encoded:
            i = data.draw(st.integers(0, len(encoded) - 1))
            encoded[i] ^= data.draw(st.integers(1, 255))
        else:
            encoded += data.draw(st.binary(min_size=1, max_size=8))
        _only_ours(cls.decode, bytes(encoded))

    random_bytes()
    corrupted()


@given(st.binary(max_size=600))
def test_frame_decoders_never_leak_foreign_errors(data: bytes) -> None:
    for decode in (decode_server_frame, decode_request, split_result_section):
        _only_ours(decode, data)
    _only_ours(lambda d: decode_batch(d, verify=True), data)
    _only_ours(tlv.decode_user_headers, data)
    _only_ours(tlv.decode_options, data)


@given(st.binary(max_size=64), st.integers(0, 255), st.data())
def test_mutated_headers_decode_or_fail_cleanly(
    body: bytes, reason: int, data: st.DataObject
) -> None:
    frames = [
        encode_reply(body, client=5, request=1, operation=2),
        encode_eviction(client=5, reason=reason),
        encode_request(body, client=5, request=1, operation=2, session=0, code=1),
    ]
    for frame in frames:
        mutated = bytearray(frame)
        i = data.draw(st.integers(0, len(mutated) - 1))
        mutated[i] ^= data.draw(st.integers(1, 255))
        _only_ours(decode_server_frame, bytes(mutated))
        _only_ours(decode_request, bytes(mutated))


@given(HEADERS)
def test_user_headers_round_trip(headers: dict[str, HeaderValue]) -> None:
    assert tlv.decode_user_headers(tlv.encode_user_headers(headers)) == headers


@given(HEADERS)
def test_options_round_trip(options: dict[str, HeaderValue]) -> None:
    assert tlv.decode_options(tlv.encode_options(options)) == options


@given(st.lists(OUTGOING, min_size=1, max_size=5))
def test_batch_round_trip(messages: list[Any]) -> None:
    header, decoded = decode_batch(encode_batch(messages), verify=True)
    assert header.message_count == len(messages)
    assert header.origin_timestamp == min(m.origin_timestamp for m in messages)
    for original, stored in zip(messages, decoded, strict=True):
        assert (stored.id, stored.payload, stored.user_headers) == (
            original.id,
            original.payload,
            original.user_headers,
        )
        assert stored.origin_timestamp == original.origin_timestamp
        assert stored.checksum_ok()


@given(BATCHES, st.integers(0, 10_000), st.integers(1, 255))
def test_any_flipped_batch_byte_is_detected(batch: bytes, where: int, flip: int) -> None:
    corrupted = bytearray(batch)
    corrupted[where % len(batch)] ^= flip
    with pytest.raises(StreamwireError):
        decode_batch(bytes(corrupted), verify=True)
