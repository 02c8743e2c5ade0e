"""Header codec, result sections, identifiers, TLV blocks, errors and evictions: the examples
of docs/protocol/iggy.md (§2, §4, §6.6, §8) and the negative cases."""

from __future__ import annotations

from typing import Any

import pytest

from streamwire.codec.headers import HeaderValue
from streamwire.errors import (
    AuthenticationError,
    ChecksumMismatchError,
    ConfigurationError,
    DecodeError,
    LocalProtocolError,
    ServerError,
)
from streamwire.iggy.protocol import identifiers as ids
from streamwire.iggy.protocol import tlv
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    decode_batch,
    encode_batch,
    random_message_id,
)
from streamwire.iggy.protocol.constants import (
    COMMANDS,
    PROTOCOL_VERSION,
    Command,
    Operation,
    command_for_operation,
    pack_version,
    unpack_version,
)
from streamwire.iggy.protocol.errors import (
    ERRORS,
    ConsumerGroupPartitionNotOwned,
    EvictionReason,
    IggyServerError,
    IncompatibleProtocolVersion,
    InvalidCredentials,
    StaleClient,
    TransientNotCommitted,
    Unauthenticated,
    UnknownIggyServerError,
    error_class,
    eviction_error,
)
from streamwire.iggy.protocol.framing import (
    Eviction,
    Reply,
    decode_request,
    decode_server_frame,
    encode_eviction,
    encode_reply,
    encode_request,
    encode_result_section,
    split_result_section,
)


def test_version_packing() -> None:
    assert PROTOCOL_VERSION == pack_version(0, 11, 0) == 11264 == 0x2C00
    assert unpack_version(11264) == (0, 11, 0)
    with pytest.raises(LocalProtocolError):
        pack_version(1024, 0, 0)


def test_command_table_is_consistent() -> None:
    for code, spec in COMMANDS.items():
        assert spec.code == code
    assert command_for_operation(Operation.CREATE_STREAM) is Command.CREATE_STREAM
    assert command_for_operation(Operation.SEND_MESSAGES) is Command.SEND_MESSAGES
    assert command_for_operation(Operation.REGISTER) is None
    assert command_for_operation(Operation.NON_REPLICATED) is None
    assert command_for_operation(99) is None
    assert COMMANDS[Command.LOGIN_USER].operation is None
    assert COMMANDS[Command.SEND_MESSAGES].replicated
    assert not COMMANDS[Command.POLL_MESSAGES].replicated


def test_operation_classes() -> None:
    assert Operation.LOGOUT.is_replicated
    assert not Operation.NON_REPLICATED.is_replicated
    assert Operation.STORE_CONSUMER_OFFSET.result_framed
    assert not Operation.SEND_MESSAGES.result_framed
    assert Operation.REGISTER.stamps_checksum
    assert not Operation.STORE_CONSUMER_OFFSET.stamps_checksum


def test_request_header_offsets() -> None:
    """The Go SDK's golden header (header_test.go): CreateStream, request 2, session 11."""
    client = 0x100F0E0D0C0B0A09_0807060504030201
    frame = encode_request(
        b"\x00\x00\x00\x00", client=client, request=2, operation=Operation.CREATE_STREAM, session=11
    )
    header = frame[:256]
    assert header[48:52] == bytes([0x04, 0x01, 0, 0])
    assert header[60] == 5
    assert header[128:144] == bytes(range(1, 17))
    assert header[168:176] == bytes([2, 0, 0, 0, 0, 0, 0, 0])
    assert header[176] == 0x80
    assert header[184:192] == bytes([11, 0, 0, 0, 0, 0, 0, 0])
    assert sum(1 for b in header if b) == 22
    request = decode_request(frame)
    assert (request.client, request.request, request.session, request.code) == (client, 2, 11, 0)


def test_non_replicated_code_sits_at_196() -> None:
    frame = encode_request(
        b"", client=1, request=3, operation=Operation.NON_REPLICATED, session=5, code=60001
    )
    assert frame[196:200] == (60001).to_bytes(4, "little")
    assert frame[192:196] == bytes(4)
    assert decode_request(frame).code == 60001
    replicated = encode_request(b"", client=1, request=3, operation=128, session=5, code=202)
    assert replicated[196:200] == bytes(4)


def test_reply_and_eviction_round_trip() -> None:
    frame = encode_reply(b"abc", client=9, request=4, operation=128, status=0, op=17, commit=16)
    reply = decode_server_frame(frame)
    assert isinstance(reply, Reply)
    assert (reply.client, reply.request, reply.operation, reply.op, reply.commit) == (
        9,
        4,
        128,
        17,
        16,
    )
    assert reply.body == b"abc"
    evict = encode_eviction(
        client=9, reason=14, server_version=PROTOCOL_VERSION, server_version_min=11264
    )
    assert len(evict) == 256
    assert evict[255] == 14
    decoded = decode_server_frame(evict)
    assert isinstance(decoded, Eviction)
    assert (decoded.client, decoded.reason, decoded.server_version) == (9, 14, 11264)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda f: f[:255], id="short"),
        pytest.param(lambda f: f[:60] + b"\x05" + f[61:], id="request-kind"),
        pytest.param(lambda f: f[:60] + b"\x07" + f[61:], id="unknown-kind"),
        pytest.param(lambda f: f + b"x", id="size-mismatch"),
    ],
)
def test_bad_server_frames(mutate: object) -> None:
    frame = encode_reply(b"", client=1, request=1, operation=2)
    with pytest.raises(DecodeError):
        decode_server_frame(mutate(frame))  # type: ignore[operator]


def test_eviction_with_a_body_is_refused() -> None:
    frame = bytearray(encode_eviction(client=1, reason=13) + b"x")
    frame[48:52] = (257).to_bytes(4, "little")
    with pytest.raises(DecodeError):
        decode_server_frame(bytes(frame))


def test_decode_request_refuses_replies() -> None:
    with pytest.raises(DecodeError):
        decode_request(encode_reply(b"", client=1, request=1, operation=2))


def test_result_sections() -> None:
    assert encode_result_section() == bytes(4)
    code, rest = split_result_section(bytes(4) + b"payload")
    assert code is None
    assert bytes(rest) == b"payload"
    code, rest = split_result_section(encode_result_section(1012))
    assert code == 1012
    assert bytes(rest) == b""
    for bad in (b"", b"\x01\x00\x00\x00", encode_result_section(5) + b"x"):
        with pytest.raises(DecodeError):
            split_result_section(bad)


def test_identifier_examples() -> None:
    assert ids.Identifier(0).value == 0
    from streamwire.codec.writer import Writer

    w = Writer()
    ids.IDENT.write(w, ids.Identifier(0))
    ids.IDENT.write(w, ids.Identifier("s1"))
    ids.CONSUMER.write(w, ids.Consumer.single("c1"))
    assert w.getvalue().hex() == "010400000000" + "02027331" + "0102026331"
    with pytest.raises(ConfigurationError):
        ids.Identifier("")
    with pytest.raises(ConfigurationError):
        ids.Identifier(2**32)
    with pytest.raises(ConfigurationError):
        ids.Identifier(True)


def test_partitioning_rules() -> None:
    assert ids.Partitioning.partition_id(5).partition == 5
    assert ids.Partitioning.balanced().partition is None
    assert ids.Partitioning.messages_key("k").value == b"k"
    with pytest.raises(ConfigurationError):
        ids.Partitioning.messages_key(b"")
    with pytest.raises(ConfigurationError):
        ids.Partitioning(ids.PartitioningKind.BALANCED, b"x")


def test_tlv_example_from_the_notes() -> None:
    block = tlv.encode_user_headers({"key1": HeaderValue.string("val")})
    assert block.hex() == "02040000006b657931020300000076616c"
    assert tlv.decode_user_headers(block) == {"key1": HeaderValue.string("val")}


def test_tlv_typed_values_and_foreign_keys() -> None:
    headers = {
        "n": HeaderValue.int32(-5),
        "u": HeaderValue.uint128(2**100),
        "f": HeaderValue.float64(1.5),
        "b": HeaderValue.boolean(True),
        "r": HeaderValue.raw(b"\x00\xff"),
    }
    assert tlv.decode_user_headers(tlv.encode_user_headers(headers)) == headers
    foreign = (
        tlv.encode_tlv(
            [
                (HeaderValue.uint8(7), HeaderValue.string("seven")),
                (HeaderValue.raw(b"\xab"), HeaderValue.boolean(False)),
            ]
        )
        + bytes([99, 1, 0, 0, 0])
        + b"k"
        + bytes([99, 1, 0, 0, 0])
        + b"v"
    )
    assert tlv.decode_user_headers(foreign) == {
        "7": HeaderValue.string("seven"),
        "ab": HeaderValue.boolean(False),
        "6b": HeaderValue.raw(b"v"),  # an unknown kind (99) is kept as Raw bytes
    }


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(bytes([0, 1, 0, 0, 0, 65, 2, 1, 0, 0, 0, 66]), id="kind-0"),
        pytest.param(bytes([2, 0, 0, 0, 0, 2, 1, 0, 0, 0, 66]), id="length-0"),
        pytest.param(bytes([2, 0, 1, 0, 0]) + b"x" * 256, id="length-256"),
        pytest.param(bytes([2, 1, 0, 0, 0, 65]), id="odd-count"),
        pytest.param(bytes([2, 5, 0, 0, 0, 65]), id="truncated"),
        pytest.param(bytes([2, 1, 0, 0, 0, 65, 3, 1, 0, 0, 0, 7]), id="bad-bool"),
    ],
)
def test_tlv_refuses_malformed_blocks(block: bytes) -> None:
    with pytest.raises(DecodeError):
        tlv.decode_user_headers(block)


def test_tlv_limits_on_encode() -> None:
    with pytest.raises(ConfigurationError):
        tlv.encode_user_headers({"k": HeaderValue.string("")})
    with pytest.raises(ConfigurationError):
        tlv.encode_user_headers({"k" * 256: HeaderValue.string("v")})
    with pytest.raises(ConfigurationError):
        tlv.encode_options({f"k{i}": HeaderValue.uint8(1) for i in range(1025)})


def test_options_block_rules() -> None:
    opts = {"b": HeaderValue.uint8(1), "a": HeaderValue.string("x")}
    block = tlv.encode_options(opts)
    assert block.startswith(bytes([2, 1, 0, 0, 0]) + b"a")  # sorted by key
    assert tlv.decode_options(block) == opts
    duplicate = tlv.encode_tlv([(HeaderValue.string("a"), HeaderValue.uint8(2))])
    with pytest.raises(DecodeError):
        tlv.decode_options(block + duplicate)
    non_string_key = tlv.encode_tlv([(HeaderValue.uint8(1), HeaderValue.uint8(1))])
    with pytest.raises(DecodeError):
        tlv.decode_options(non_string_key)


def test_batch_rules() -> None:
    one = OutgoingMessage(id=1, payload=b"x", origin_timestamp=10)
    with pytest.raises(LocalProtocolError):
        encode_batch([])
    with pytest.raises(LocalProtocolError):
        encode_batch([OutgoingMessage(id=0, payload=b"x", origin_timestamp=1)])
    with pytest.raises(LocalProtocolError):
        encode_batch([OutgoingMessage(id=1, payload=b"", origin_timestamp=1)])
    with pytest.raises(LocalProtocolError):
        encode_batch([one, OutgoingMessage(id=2, payload=b"y", origin_timestamp=10 + 2**32)])
    batch = bytearray(encode_batch([one]))
    batch[-1] ^= 0xFF
    with pytest.raises(ChecksumMismatchError):
        decode_batch(bytes(batch), verify=True)
    batch = bytearray(encode_batch([one]))
    batch[100] = 1  # reserved bytes of the batch header
    with pytest.raises(DecodeError):
        decode_batch(bytes(batch))


def test_random_message_ids_are_uuid4() -> None:
    mid = random_message_id(lambda n: bytes(range(n)))
    raw = mid.to_bytes(16, "little")
    assert raw[6] >> 4 == 4
    assert raw[8] >> 6 == 0b10
    assert random_message_id() != random_message_id()


def test_error_registry() -> None:
    err = ERRORS.from_code(1012)
    assert isinstance(err, IggyServerError)
    assert err.code == 1012
    assert type(err).__name__ == "StreamNameAlreadyExists"
    assert isinstance(ServerError.from_code("iggy", 5009), ConsumerGroupPartitionNotOwned)
    unknown = ERRORS.from_code(999_999)
    assert isinstance(unknown, UnknownIggyServerError)
    assert unknown.code == 999_999
    assert isinstance(ERRORS.from_code(42), AuthenticationError)
    assert isinstance(ERRORS.from_code(42), InvalidCredentials)
    assert TransientNotCommitted.retriable
    assert not StaleClient.connection_usable
    assert error_class("TooManyConsumerOffsets").default_code == 3024
    assert error_class(1).__name__ == "GenericError"
    with pytest.raises(LookupError):
        error_class("NoSuchError")
    assert len(ERRORS.codes()) >= 239


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (EvictionReason.NO_SESSION, Unauthenticated),
        (EvictionReason.INVALID_CREDENTIALS, InvalidCredentials),
        (EvictionReason.STALE_CLIENT, StaleClient),
        (EvictionReason.INCOMPATIBLE_PROTOCOL, IncompatibleProtocolVersion),
        (EvictionReason.MALFORMED_LOGIN, error_class("InvalidFormat")),
        (EvictionReason.INVALID_REQUEST_BODY, error_class("InvalidCommand")),
    ],
)
def test_evictions_map_to_typed_errors(reason: EvictionReason, expected: type) -> None:
    error = eviction_error(reason, server_version=11264, server_version_min=11264)
    assert isinstance(error, expected)
    assert error.eviction_reason is reason  # type: ignore[attr-defined]


def test_unknown_eviction_reason() -> None:
    error = eviction_error(200)
    assert isinstance(error, Unauthenticated)
    assert error.eviction_reason == 200  # type: ignore[attr-defined]
    assert isinstance(eviction_error(EvictionReason.INVALID_TOKEN), AuthenticationError)


# --- a batch framed in place ------------------------------------------------------------


def test_a_send_framed_around_its_batch_is_the_frame_made_by_copying() -> None:
    """A SendMessages whose batch was encoded after room for the frame
    (``encode_runs(..., room)``) becomes the same request frame as the one made from its
    parts, written into that buffer: the batch is not copied again."""
    from streamwire.iggy.protocol.batch import encode_runs, random_message_id_bytes
    from streamwire.iggy.protocol.framing import Framable
    from streamwire.iggy.protocol.identifiers import Identifier, Partitioning
    from streamwire.iggy.protocol.messaging import SendMessages

    stream, topic = Identifier.of("s"), Identifier.of(7)
    partitioning = Partitioning.partition_id(3)
    runs = [([b"a" * 300, b"b"], random_message_id_bytes(2), 1_700_000_000_000_000)]
    room = SendMessages.room_for(stream, topic, partitioning)
    framed = encode_runs(runs, room)
    assert bytes(framed[room:]) == bytes(encode_runs(runs))
    plain = SendMessages(
        stream=stream, topic=topic, partitioning=partitioning, messages_count=2,
        batch=bytes(framed[room:]),
    )  # fmt: skip
    roomy = SendMessages(
        stream=stream, topic=topic, partitioning=partitioning, messages_count=2,
        batch=framed, room=room,
    )  # fmt: skip
    assert roomy.encode() == plain.encode()
    body = roomy.encode_parts()
    assert isinstance(body, Framable)

    def request(body: Any) -> Any:
        return encode_request(
            body, client=5, request=9, operation=Operation.SEND_MESSAGES, session=11
        )

    frame = request(body)
    assert isinstance(frame, memoryview)
    assert frame.obj is framed  # the buffer itself
    assert bytes(frame) == request(plain.encode_parts())
    with pytest.raises(LocalProtocolError, match="cannot hold a header"):
        request(Framable(bytearray(300), 10))
