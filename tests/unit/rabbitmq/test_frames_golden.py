"""Golden byte vectors for every RabbitMQ Streams frame: decode, encode, framing.

The vectors are complete frames (size prefix included) stored in ``tests/vectors/rabbitmq``:
captured from RabbitMQ 4.0.5 / 3.10.8 (docs/protocol/rabbitmq-streams.md §1.8) or hand-derived
from the §1.5 layouts (see ``PROVENANCE.md``). Each one drives both directions and is fed
through the length-prefix accumulator whole, one byte at a time, and followed by more bytes.
"""

from __future__ import annotations

import contextlib

import pytest

from streamwire.codec import LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.codec._structs import U32
from streamwire.errors import DecodeError, FrameTooLargeError, LocalProtocolError
from streamwire.rabbitmq.protocol.constants import MAX_STRING_BYTES, CommandKey, OffsetType
from streamwire.rabbitmq.protocol.frames import (
    FRAMES,
    CreateRequest,
    Credit,
    DeclarePublisherRequest,
    Frame,
    MetadataUpdate,
    OpenResponse,
    PeerPropertiesResponse,
    QueryOffsetResponse,
    SaslHandshakeResponse,
    StoreOffset,
    SubscribeRequest,
    decode_frame,
    encode_frame,
)
from tests.unit.rabbitmq.support import (
    CAFE,
    CAPTURED,
    DERIVED,
    GOLDEN,
    OK,
    VECTORS_DIR,
    body,
    load_vector,
    parse_hex,
    vector_names,
)

NAMES = [name for name, _ in GOLDEN]
BIG = 64 * 1024 * 1024


def golden_params() -> list[object]:
    return [pytest.param(name, frame, id=name) for name, frame in GOLDEN]


def accumulator() -> FrameAccumulator:
    return FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=BIG)


# --- the table itself ----------------------------------------------------------------------------


def test_every_vector_file_is_in_the_table_once() -> None:
    assert len(NAMES) == len(set(NAMES))
    assert sorted(NAMES) == vector_names()


def test_every_vector_file_is_listed_in_provenance() -> None:
    provenance = (VECTORS_DIR / "PROVENANCE.md").read_text(encoding="utf-8")
    missing = [n for n in vector_names() if f"`{n}.hex`" not in provenance]
    assert missing == []


@pytest.mark.parametrize("name", NAMES)
def test_vector_header_comment_states_its_provenance(name: str) -> None:
    first = (VECTORS_DIR / f"{name}.hex").read_text(encoding="utf-8").splitlines()[0]
    captured = {n for n, _ in CAPTURED}
    if name in captured:
        assert first.startswith(
            ("# Captured from RabbitMQ 4.0.5", "# Captured from RabbitMQ 3.10.8")
        )
    else:
        assert first.startswith("# Derived from")


@pytest.mark.parametrize("name", NAMES)
def test_size_prefix_counts_the_rest_of_the_frame(name: str) -> None:
    data = load_vector(name)
    (size,) = U32.unpack_from(data)
    assert size == len(data) - 4


def test_every_registered_key_has_a_vector() -> None:
    covered = {frame.key for _, frame in GOLDEN}
    assert {f"{k:#06x}" for k in FRAMES} - {f"{k:#06x}" for k in covered} == set()


def test_captured_table_has_every_row_of_section_1_8() -> None:
    # §1.8 has 17 rows (15 from 4.0.5, PublishError and Close from 3.10.8).
    assert len(CAPTURED) == 17
    assert len(DERIVED) == len(GOLDEN) - 17


# --- decode and encode ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), golden_params())
def test_decode(name: str, expected: Frame) -> None:
    frame = decode_frame(body(name))
    assert type(frame) is type(expected)
    assert frame == expected
    assert frame.key == expected.key
    assert frame.wire_version == expected.wire_version


@pytest.mark.parametrize(("name", "expected"), golden_params())
def test_encode_is_byte_exact(name: str, expected: Frame) -> None:
    assert encode_frame(expected) == load_vector(name)


@pytest.mark.parametrize(("name", "expected"), golden_params())
def test_decode_accepts_bytearray_and_memoryview(name: str, expected: Frame) -> None:
    data = body(name)
    assert decode_frame(bytearray(data)) == expected
    assert decode_frame(memoryview(data)) == expected


@pytest.mark.parametrize(("name", "expected"), golden_params())
def test_key_and_version_on_the_wire(name: str, expected: Frame) -> None:
    data = load_vector(name)
    assert int.from_bytes(data[4:6], "big") == expected.key
    assert int.from_bytes(data[6:8], "big") == expected.wire_version


# --- framing: whole, byte by byte, followed by more ----------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_accumulator_whole(name: str) -> None:
    acc = accumulator()
    acc.feed(load_vector(name))
    assert acc.next_frame() == body(name)
    assert acc.next_frame() is None
    assert acc.buffered == 0


@pytest.mark.parametrize("name", NAMES)
def test_accumulator_byte_by_byte(name: str) -> None:
    data = load_vector(name)
    acc = accumulator()
    for i, byte in enumerate(data[:-1]):
        acc.feed(bytes([byte]))
        assert acc.next_frame() is None, f"frame handed out after {i + 1} of {len(data)} bytes"
    acc.feed(data[-1:])
    frame = acc.next_frame()
    assert frame == body(name)
    assert decode_frame(frame) == dict(GOLDEN)[name]
    assert acc.next_frame() is None


@pytest.mark.parametrize("name", NAMES)
def test_accumulator_followed_by_a_second_frame_and_trailing_bytes(name: str) -> None:
    second = load_vector("heartbeat") if name != "heartbeat" else load_vector("tune")
    trailing = load_vector("publish-confirm")[:7]  # an incomplete third frame
    acc = accumulator()
    acc.feed(load_vector(name) + second + trailing)
    assert acc.next_frame() == body(name)
    assert acc.next_frame() == second[4:]
    assert acc.next_frame() is None
    assert acc.buffered == len(trailing)  # left untouched, waiting for the rest
    acc.feed(load_vector("publish-confirm")[7:])
    assert acc.next_frame() == body("publish-confirm")


def test_all_vectors_back_to_back_in_one_read() -> None:
    acc = accumulator()
    acc.feed(b"".join(load_vector(n) for n in NAMES))
    assert [decode_frame(f) for f in acc.frames()] == [frame for _, frame in GOLDEN]


def test_accumulator_refuses_an_oversized_frame_from_its_prefix_alone() -> None:
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1024)
    acc.feed(U32.pack(100_000_000))
    with pytest.raises(FrameTooLargeError) as info:
        acc.next_frame()
    assert info.value.size == 100_000_004
    assert info.value.limit == 1024


# --- decode-only variants the broker may send ----------------------------------------------------


@pytest.mark.parametrize(
    ("hex_body", "expected"),
    [
        pytest.param(
            # §1.5: "the properties array may be omitted entirely [v3.10]".
            "0007 0001 00000009 01 0006 6f7264657273 0001 000a",
            SubscribeRequest(9, 1, "orders", OffsetType.FIRST, None, 10),
            id="subscribe-without-properties-array",
        ),
        pytest.param(
            # An absent offset field after a non-OK code (decoder tolerance).
            "800b 0001 0000000e 0013",
            QueryOffsetResponse(0x0E, 0x13, 0),
            id="query-offset-response-without-offset",
        ),
        pytest.param(
            # A null reference (-1) reads as "no deduplication".
            "0001 0001 00000016 05 ffff 0006 6f7264657273",
            DeclarePublisherRequest(0x16, 5, "", "orders"),
            id="declare-publisher-null-reference",
        ),
        pytest.param(
            "8012 0001 00000002 0009",
            SaslHandshakeResponse(2, 9, ()),
            id="sasl-handshake-error-without-mechanisms",
        ),
        pytest.param(
            "8011 0001 00000001 0001",
            PeerPropertiesResponse(1, OK, {}),
            id="peer-properties-response-without-array",
        ),
    ],
)
def test_decode_only_variants(hex_body: str, expected: Frame) -> None:
    assert decode_frame(parse_hex(hex_body)) == expected


def test_open_failure_round_trips_without_the_properties_array() -> None:
    frame = OpenResponse(4, 0x0C)
    assert encode_frame(frame) == load_vector("open-response-bad-vhost")


# --- non-ASCII strings: the length prefix counts UTF-8 bytes -------------------------------------


def test_non_ascii_length_prefix_is_the_utf8_byte_count() -> None:
    assert len(CAFE) == 6
    assert len(CAFE.encode()) == 8
    data = encode_frame(CreateRequest(6, CAFE))
    assert data[12:14] == b"\x00\x08"
    assert data[14:22] == CAFE.encode()
    assert data == load_vector("create-request-non-ascii")
    assert decode_frame(data[4:]) == CreateRequest(6, CAFE)


def test_character_counted_length_is_rejected_not_misread() -> None:
    # What rstream/rbfly send for "café-ß": length 6 (characters) then 8 bytes. The last two
    # bytes are then read as the start of the arguments array, which cannot be decoded.
    bad = parse_hex("000d 0001 00000006 0006 636166c3a92dc39f 00000000")
    with pytest.raises(DecodeError):
        decode_frame(bad)


def test_string_of_32767_bytes_encodes_and_one_more_is_refused() -> None:
    longest = "ß" * (MAX_STRING_BYTES // 2) + "x"  # 32767 bytes, 16384 characters
    assert len(longest.encode()) == MAX_STRING_BYTES
    frame = MetadataUpdate(2, longest)
    assert decode_frame(encode_frame(frame)[4:]) == frame
    with pytest.raises(LocalProtocolError):
        encode_frame(MetadataUpdate(2, longest + "x"))
    with pytest.raises(LocalProtocolError):
        encode_frame(MetadataUpdate(2, "ß" * (MAX_STRING_BYTES // 2 + 1)))  # 16384 chars, 32768 B


def test_reference_longer_than_255_bytes_is_refused() -> None:
    ok = "ß" * 127 + "x"  # 255 bytes
    assert decode_frame(encode_frame(StoreOffset(ok, "s", 1))[4:]) == StoreOffset(ok, "s", 1)
    with pytest.raises(LocalProtocolError):
        encode_frame(StoreOffset("ß" * 128, "s", 1))  # 128 characters, 256 bytes
    with pytest.raises(LocalProtocolError):
        encode_frame(DeclarePublisherRequest(1, 1, "ß" * 128, "s"))


@pytest.mark.parametrize("credit", [-1, 32767])
def test_credit_is_a_signed_int16(credit: int) -> None:
    assert decode_frame(encode_frame(Credit(1, credit))[4:]) == Credit(1, credit)


def test_credit_above_int16_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(Credit(1, 32768))


# --- negative vectors ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("deliver")])
def test_truncated_body_is_a_decode_error(name: str) -> None:
    # Every frame but Deliver (whose chunk is opaque here; see test_chunk) ends with a field
    # that cannot lose its last byte.
    with pytest.raises(DecodeError):
        decode_frame(body(name)[:-1])


@pytest.mark.parametrize("name", NAMES)
def test_every_prefix_is_either_a_frame_or_a_decode_error(name: str) -> None:
    data = body(name)
    for n in range(len(data)):
        with contextlib.suppress(DecodeError):
            decode_frame(data[:n])


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("deliver")])
def test_extra_byte_is_a_decode_error(name: str) -> None:
    # "trailing bytes", or for frames with an optional last field (SaslAuthenticate and Open
    # responses) a one-byte, hence truncated, optional field.
    with pytest.raises(DecodeError):
        decode_frame(body(name) + b"\x00")


@pytest.mark.parametrize(
    ("hex_body", "hint"),
    [
        pytest.param("", "uint16", id="empty"),
        pytest.param("00", "uint16", id="one-byte"),
        pytest.param("0000 0001", "unknown command key", id="key-0"),
        pytest.param("0020 0001", "unknown command key", id="key-0x20"),
        pytest.param("8017 0001", "unknown command key", id="heartbeat-response"),
        pytest.param("ffff 0001", "unknown command key", id="key-0xffff"),
        pytest.param("0002 0003 05 00000000", "version 3", id="publish-v3"),
        pytest.param("0008 0000 00", "version 0", id="deliver-v0"),
        pytest.param(
            "0007 0001 00000009 01 0006 6f7264657273 0006 000a 00000000",
            "offset type 6",
            id="offset-type-6",
        ),
        pytest.param("001a 0001 00000000 00 02", "active flag 2", id="consumer-update-active-2"),
        pytest.param("0010 0001 0006 0002 c328", "invalid UTF-8", id="invalid-utf8"),
        pytest.param("0010 0001 0006 fffe", "negative length", id="string-length-minus-2"),
        pytest.param("0010 0001 0006 ffff", "unexpected null", id="null-stream-name"),
        pytest.param("0010 0001 0006 0009 676f6c64656e", "need 9 bytes", id="string-overruns"),
        pytest.param("0003 0001 05 7fffffff 0000000000000001", "count", id="huge-count"),
        pytest.param("0003 0001 05 ffffffff", "count", id="negative-count"),
        pytest.param(
            "8012 0001 00000002 0001 00000001 ffff", "unexpected null", id="null-mechanism"
        ),
        pytest.param("0016 0001 00000001 000d ffff", "unexpected null", id="null-close-reason"),
    ],
)
def test_malformed_frames_raise_decode_error(hex_body: str, hint: str) -> None:
    with pytest.raises(DecodeError, match=hint):
        decode_frame(parse_hex(hex_body))


def test_decode_error_names_the_frame_and_offset() -> None:
    with pytest.raises(DecodeError) as info:
        decode_frame(parse_hex("0010 0001 0006 0009 676f6c64656e"))
    assert info.value.frame == "MetadataUpdate"
    assert info.value.offset == 8  # where the 9 string bytes should start


def test_simple_response_keeps_the_command_it_answers() -> None:
    frame = decode_frame(body("create-response"))
    assert frame.key == CommandKey.CREATE | 0x8000
    close = decode_frame(body("close-response"))
    assert close.key == 0x8016
