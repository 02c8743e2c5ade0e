"""The sans-IO connection machine against the captured broker frames, with an injected clock.

Every byte the machine sends is compared with a vector (the handshake's correlation ids
1..5 are the ones the capturing client used), except PeerProperties, whose ``platform``
property carries the running Python version.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from streamwire.codec._structs import U32
from streamwire.errors import (
    AuthenticationError,
    ClosedError,
    ConfigurationError,
    DecodeError,
    FrameTooLargeError,
    LocalProtocolError,
    RemoteProtocolError,
    ServerError,
)
from streamwire.rabbitmq.protocol import (
    ConnectionSettings,
    ConnectionState,
    ProtocolFailed,
    StreamsConnection,
)
from streamwire.rabbitmq.protocol import events as ev
from streamwire.rabbitmq.protocol.constants import CommandKey, OffsetType, ResponseCode
from streamwire.rabbitmq.protocol.errors import (
    AuthenticationFailure,
    SaslChallenge,
    StreamsServerError,
    UnknownFrame,
    VirtualHostAccessFailure,
)
from streamwire.rabbitmq.protocol.frames import (
    CloseRequest,
    CreateRequest,
    Deliver,
    Heartbeat,
    MetadataResponse,
    PeerPropertiesRequest,
    PeerPropertiesResponse,
    QueryOffsetResponse,
    SaslHandshakeResponse,
    SimpleResponse,
    SubscribeRequest,
    Tune,
    decode_frame,
    encode_frame,
    encode_publish,
)
from streamwire.rabbitmq.protocol.machine import negotiate
from tests.unit.rabbitmq.support import (
    CAFE,
    CHUNK_V1,
    CHUNK_V2,
    ECV_4_0,
    HANDSHAKE_4_0,
    HANDSHAKE_STATES,
    M0,
    M1,
    OK,
    START,
    STATE_AFTER,
    TS,
    body,
    load_vector,
    machine_in,
    open_machine,
    parse_hex,
)


@dataclass
class Clock:
    """The injected clock: the machine never reads time, the test hands it ``now``."""

    now: float = START

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def state_of(m: StreamsConnection) -> ConnectionState:
    """``m.state``, read through a call so that mypy does not narrow it between steps."""
    return m.state


def feed(m: StreamsConnection, *names: str, now: float = START) -> list[ev.Event]:
    return m.receive_data(b"".join(load_vector(n) for n in names), now)


# --- the full handshake --------------------------------------------------------------------------


def test_full_handshake_against_captured_4_0_frames() -> None:
    clock = Clock()
    m = StreamsConnection(ConnectionSettings(connection_name="golden"))
    assert state_of(m) is ConnectionState.IDLE
    assert m.data_to_send() == b""
    assert m.next_deadline() is None

    m.start(clock.now)
    assert state_of(m) is ConnectionState.PEER_PROPERTIES
    out = m.data_to_send()
    assert U32.unpack_from(out)[0] == len(out) - 4
    request = decode_frame(out[4:])
    assert isinstance(request, PeerPropertiesRequest)
    assert request.correlation_id == 1
    assert request.properties["product"] == "streamwire"
    assert request.properties["connection_name"] == "golden"
    assert set(request.properties) >= {"version", "platform", "copyright", "information"}
    assert m.data_to_send() == b""  # cleared

    # PeerProperties response → SaslHandshake (corr 2)
    assert feed(m, "peer-properties-response-4.0", now=clock.advance(0.01)) == []
    assert state_of(m) is ConnectionState.SASL_HANDSHAKE
    assert m.server_properties == {"product": "RabbitMQ", "version": "4.0.5"}
    assert m.server_version() == (4, 0, 5)
    assert m.data_to_send() == load_vector("sasl-handshake-request")

    # captured mechanisms → SaslAuthenticate PLAIN "\0guest\0guest" (corr 3)
    assert feed(m, "sasl-handshake-response", now=clock.advance(0.01)) == []
    assert state_of(m) is ConnectionState.AUTHENTICATING
    out = m.data_to_send()
    assert out == load_vector("sasl-authenticate-plain")
    assert out.endswith(b"\x00\x00\x00\x0c\x00guest\x00guest")

    # captured authenticate OK (10-byte frame) → wait for Tune, send nothing
    assert feed(m, "sasl-authenticate-response-ok", now=clock.advance(0.01)) == []
    assert state_of(m) is ConnectionState.TUNING
    assert m.data_to_send() == b""

    # captured Tune 1 MiB / 60 s → TuneResponse 0x8014 with the agreed values, then Open "/"
    assert feed(m, "tune", now=clock.advance(0.01)) == []
    assert state_of(m) is ConnectionState.OPENING
    out = m.data_to_send()
    assert out == load_vector("tune-response") + load_vector("open-request")
    assert out[4:6] == b"\x80\x14"
    assert (m.frame_max, m.heartbeat) == (1_048_576, 60)

    # captured Open OK → ExchangeCommandVersions [(Deliver, 1, 2)] (corr 5): broker is ≥ 3.11
    assert feed(m, "open-response", now=clock.advance(0.01)) == []
    assert state_of(m) is ConnectionState.NEGOTIATING
    assert m.data_to_send() == load_vector("exchange-command-versions-request")

    events = feed(m, "exchange-command-versions-response", now=clock.advance(0.01))
    assert events == [
        ev.ConnectionOpened(
            server_properties={"product": "RabbitMQ", "version": "4.0.5"},
            connection_properties={"advertised_port": "5552", "advertised_host": "vm"},
            frame_max=1_048_576,
            heartbeat=60,
            command_versions={v.key: (v.min_version, v.max_version) for v in ECV_4_0},
        )
    ]
    assert state_of(m) is ConnectionState.OPEN
    assert m.is_open
    assert m.data_to_send() == b""
    assert m.supports(CommandKey.PUBLISH, 2)
    assert m.supports(CommandKey.STREAM_STATS)
    assert not m.supports(CommandKey.RESOLVE_OFFSET_SPEC)  # 4.3+
    assert not m.supports(CommandKey.PUBLISH, 3)
    assert m.next_correlation_id() == 6


def test_handshake_in_one_read_gives_the_same_bytes() -> None:
    m = StreamsConnection()
    m.start(START)
    m.data_to_send()
    events = m.receive_data(b"".join(load_vector(n) for n in HANDSHAKE_4_0), START)
    assert [type(e) for e in events] == [ev.ConnectionOpened]
    assert m.data_to_send() == b"".join(
        load_vector(n)
        for n in (
            "sasl-handshake-request",
            "sasl-authenticate-plain",
            "tune-response",
            "open-request",
            "exchange-command-versions-request",
        )
    )


@pytest.mark.parametrize(("upto", "state"), list(enumerate(STATE_AFTER, start=1)))
def test_state_after_each_handshake_frame(upto: int, state: ConnectionState) -> None:
    m = StreamsConnection()
    m.start(START)
    for name in HANDSHAKE_4_0[:upto]:
        m.receive_data(load_vector(name), START)
    assert state_of(m) is state


def test_handshake_byte_by_byte() -> None:
    m = StreamsConnection()
    m.start(START)
    m.data_to_send()
    events: list[ev.Event] = []
    for byte in b"".join(load_vector(n) for n in HANDSHAKE_4_0):
        events += m.receive_data(bytes([byte]), START)
    assert [type(e) for e in events] == [ev.ConnectionOpened]
    assert m.is_open


def test_non_ascii_credentials_and_vhost() -> None:
    settings = ConnectionSettings(username="ünï", password="pä ss", vhost=CAFE)
    m = machine_in(ConnectionState.SASL_HANDSHAKE, settings)
    feed(m, "sasl-handshake-response")
    credentials = "\0ünï\0pä ss".encode()
    assert m.data_to_send() == (
        U32.pack(4 + 4 + 7 + 4 + len(credentials))
        + parse_hex("0013 0001 00000003 0005 504c41494e")
        + U32.pack(len(credentials))
        + credentials
    )
    feed(m, "sasl-authenticate-response-ok", "tune")
    # Open "café-ß": int16 length 8 (UTF-8 bytes, not 6 characters), corr 4
    assert m.data_to_send() == load_vector("tune-response") + parse_hex(
        "00000012 0015 0001 00000004 0008 636166c3a92dc39f"
    )


def test_anonymous_without_username() -> None:
    m = machine_in(ConnectionState.SASL_HANDSHAKE, ConnectionSettings(username=None))
    feed(m, "sasl-handshake-response")
    assert m.data_to_send() == parse_hex(
        "00000017 0013 0001 00000003 0009 414e4f4e594d4f5553 00000000"
    )


def test_unknown_mechanism_setting_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        ConnectionSettings(mechanism="AMQPLAIN")


# --- tune negotiation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "theirs", "agreed"),
    [
        (1_048_576, 1_048_576, 1_048_576),
        (4096, 1_048_576, 4096),
        (1_048_576, 4096, 4096),
        (0, 4096, 4096),
        (4096, 0, 4096),
        (0, 0, 0),
        (0xFFFFFFFF, 1, 1),
    ],
)
def test_negotiate_rule(ours: int, theirs: int, agreed: int) -> None:
    assert negotiate(ours, theirs) == agreed


@pytest.mark.parametrize(
    ("ours", "theirs", "agreed"),
    [
        pytest.param((4096, 30), (1_048_576, 60), (4096, 30), id="both-non-zero-min"),
        pytest.param((2_000_000, 120), (1_048_576, 60), (1_048_576, 60), id="server-smaller"),
        pytest.param((0, 0), (1_048_576, 60), (1_048_576, 60), id="ours-zero"),
        pytest.param((4096, 10), (0, 0), (4096, 10), id="theirs-zero"),
        pytest.param((0, 0), (0, 0), (0, 0), id="both-zero"),
        pytest.param((0, 10), (4096, 0), (4096, 10), id="mixed"),
    ],
)
def test_tune_response_carries_the_negotiated_values(
    ours: tuple[int, int], theirs: tuple[int, int], agreed: tuple[int, int]
) -> None:
    settings = ConnectionSettings(frame_max=ours[0], heartbeat=ours[1])
    m = machine_in(ConnectionState.TUNING, settings)
    m.receive_data(encode_frame(Tune(*theirs)), START)
    out = m.data_to_send()
    assert out[:8] == parse_hex("0000000c 8014 0001")
    assert out[:16] == parse_hex("0000000c 8014 0001") + U32.pack(agreed[0]) + U32.pack(agreed[1])
    assert (m.frame_max, m.heartbeat) == agreed


def test_out_of_range_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ConnectionSettings(frame_max=-1)
    with pytest.raises(ConfigurationError):
        ConnectionSettings(heartbeat=1 << 32)


# --- version gating ------------------------------------------------------------------------------


def test_broker_older_than_3_11_skips_exchange_command_versions() -> None:
    m = StreamsConnection()
    m.start(START)
    m.data_to_send()
    feed(m, "peer-properties-response-3.10", "sasl-handshake-response")
    feed(m, "sasl-authenticate-response-ok", "tune")
    m.data_to_send()
    events = feed(m, "open-response")
    assert m.data_to_send() == b""  # no 0x001B: 3.10 would answer it with Close 0x0D
    assert state_of(m) is ConnectionState.OPEN
    assert len(events) == 1
    opened = events[0]
    assert isinstance(opened, ev.ConnectionOpened)
    assert opened.command_versions == {}
    assert m.server_version() == (3, 10, 8)
    assert not m.supports(CommandKey.PUBLISH, 2)


@pytest.mark.parametrize(
    ("version", "negotiates"),
    [("3.11.0", True), ("3.13.7", True), ("4.0.5", True), ("3.10.8", False), ("", False)],
)
def test_version_gate(version: str, negotiates: bool) -> None:
    m = StreamsConnection()
    m.start(START)
    props = {"version": version} if version else {}
    m.receive_data(encode_frame(PeerPropertiesResponse(1, OK, props)), START)
    feed(m, "sasl-handshake-response", "sasl-authenticate-response-ok", "tune", "open-response")
    expected = ConnectionState.NEGOTIATING if negotiates else ConnectionState.OPEN
    assert state_of(m) is expected


# --- handshake failures --------------------------------------------------------------------------


def test_mechanism_not_offered_fails_before_sending_credentials() -> None:
    m = machine_in(ConnectionState.SASL_HANDSHAKE, ConnectionSettings(mechanism="EXTERNAL"))
    events = feed(m, "sasl-handshake-response")  # PLAIN, AMQPLAIN, ANONYMOUS
    assert len(events) == 1
    failed = events[0]
    assert isinstance(failed, ev.HandshakeFailed)
    assert isinstance(failed.error, AuthenticationError)
    assert "EXTERNAL" in str(failed.error)
    assert m.data_to_send() == b""  # no credentials went out
    assert state_of(m) is ConnectionState.FAILED
    with pytest.raises(AuthenticationError) as info:
        m.receive_data(load_vector("tune"), START)
    assert info.value is failed.error


def test_plain_not_offered() -> None:
    m = machine_in(ConnectionState.SASL_HANDSHAKE)
    events = m.receive_data(encode_frame(SaslHandshakeResponse(2, OK, ("AMQPLAIN",))), START)
    assert [type(e) for e in events] == [ev.HandshakeFailed]
    assert m.data_to_send() == b""


def test_authentication_failure() -> None:
    m = machine_in(ConnectionState.AUTHENTICATING)
    events = feed(m, "sasl-authenticate-response-failure")
    assert len(events) == 1
    failed = events[0]
    assert isinstance(failed, ev.HandshakeFailed)
    error = failed.error
    for cls in (AuthenticationFailure, AuthenticationError, StreamsServerError, ServerError):
        assert isinstance(error, cls), cls
    assert isinstance(error, ServerError)
    assert error.code == ResponseCode.AUTHENTICATION_FAILURE
    assert not error.connection_usable
    assert state_of(m) is ConnectionState.FAILED
    assert m.data_to_send() == b""
    with pytest.raises(AuthenticationFailure) as info:
        m.receive_data(b"", START)
    assert info.value is error


def test_authentication_failure_followed_by_more_frames_in_the_same_read() -> None:
    # Frames after the failure in the same read are not processed (they used to reach the
    # handshake dispatcher in state FAILED and escape as LocalProtocolError).
    m = machine_in(ConnectionState.AUTHENTICATING)
    events = feed(m, "sasl-authenticate-response-failure", "tune", "close-unknown-frame")
    assert len(events) == 1
    assert isinstance(events[0], ev.HandshakeFailed)
    assert isinstance(events[0].error, AuthenticationFailure)
    assert state_of(m) is ConnectionState.FAILED
    assert m.data_to_send() == b""  # not even an answer to the Close that followed


def test_sasl_challenge_is_not_supported() -> None:
    m = machine_in(ConnectionState.AUTHENTICATING)
    events = feed(m, "sasl-authenticate-response-challenge")
    assert len(events) == 1
    assert isinstance(events[0], ev.HandshakeFailed)
    assert isinstance(events[0].error, SaslChallenge)


def test_bad_vhost() -> None:
    m = machine_in(ConnectionState.OPENING, ConnectionSettings(vhost="nope"))
    events = feed(m, "open-response-bad-vhost")  # the 10-byte frame, no properties array
    assert len(events) == 1
    failed = events[0]
    assert isinstance(failed, ev.HandshakeFailed)
    assert isinstance(failed.error, VirtualHostAccessFailure)
    assert isinstance(failed.error, AuthenticationError)
    assert failed.error.code == 0x0C
    assert "nope" in str(failed.error)
    assert state_of(m) is ConnectionState.FAILED
    assert m.data_to_send() == b""


def test_bad_vhost_request_bytes() -> None:
    m = machine_in(ConnectionState.TUNING, ConnectionSettings(vhost="nope"))
    feed(m, "tune")
    assert m.data_to_send() == load_vector("tune-response") + parse_hex(
        "0000000e 0015 0001 00000004 0004 6e6f7065"
    )


@pytest.mark.parametrize("state", HANDSHAKE_STATES)
@pytest.mark.parametrize("corr", [1, 0x2A])
def test_broker_close_during_the_handshake(state: ConnectionState, corr: int) -> None:
    m = machine_in(state)
    close = parse_hex("00000019 0016 0001") + U32.pack(corr) + body("close-unknown-frame")[8:]
    events = m.receive_data(close, START)
    assert m.data_to_send() == parse_hex("0000000a 8016 0001") + U32.pack(corr) + b"\x00\x01"
    assert len(events) == 2
    failed, closed = events
    assert isinstance(failed, ev.HandshakeFailed)
    assert isinstance(failed.error, UnknownFrame)
    assert failed.error.message == "unknown frame"
    assert closed == ev.CloseRequested(ResponseCode.UNKNOWN_FRAME, "unknown frame")
    assert state_of(m) is ConnectionState.CLOSED


@pytest.mark.parametrize("state", HANDSHAKE_STATES)
def test_eof_before_open(state: ConnectionState) -> None:
    m = machine_in(state)
    events = m.receive_data(b"", START)
    assert len(events) == 1
    (failed,) = events
    assert isinstance(failed, ev.HandshakeFailed)
    assert isinstance(failed.error, ClosedError)
    assert state_of(m) is ConnectionState.FAILED
    with pytest.raises(ClosedError):  # sticky
        m.receive_data(b"", START)


@pytest.mark.parametrize("state", HANDSHAKE_STATES)
def test_unexpected_frame_during_the_handshake(state: ConnectionState) -> None:
    m = machine_in(state)
    events = feed(m, "publish-confirm")
    assert len(events) == 1
    assert isinstance(events[0], ProtocolFailed)
    assert state_of(m) is ConnectionState.FAILED


@pytest.mark.parametrize(
    ("state", "frame"),
    [
        (ConnectionState.PEER_PROPERTIES, "peer-properties-response-4.0"),
        (ConnectionState.SASL_HANDSHAKE, "sasl-handshake-response"),
        (ConnectionState.AUTHENTICATING, "sasl-authenticate-response-ok"),
        (ConnectionState.OPENING, "open-response"),
        (ConnectionState.NEGOTIATING, "exchange-command-versions-response"),
    ],
)
def test_handshake_response_with_a_foreign_correlation_id(
    state: ConnectionState, frame: str
) -> None:
    m = machine_in(state)
    data = bytearray(load_vector(frame))
    data[8:12] = U32.pack(0x77)
    events = m.receive_data(bytes(data), START)
    assert len(events) == 1
    assert isinstance(events[0], ProtocolFailed)


def test_tune_response_instead_of_tune_is_refused() -> None:
    m = machine_in(ConnectionState.TUNING)
    events = feed(m, "tune-response")
    assert [type(e) for e in events] == [ProtocolFailed]


def test_heartbeat_during_the_handshake_is_ignored() -> None:
    m = machine_in(ConnectionState.TUNING)
    assert feed(m, "heartbeat") == []
    assert state_of(m) is ConnectionState.TUNING


def test_handshake_frame_bound() -> None:
    # Until Open, frames above max_handshake_frame_bytes (64 KiB) are refused.
    m = machine_in(ConnectionState.PEER_PROPERTIES)
    events = m.receive_data(U32.pack(100_000), START)
    assert len(events) == 1
    failed = events[0]
    assert isinstance(failed, ProtocolFailed)
    assert isinstance(failed.error, FrameTooLargeError)
    assert failed.error.limit == 64 * 1024


# --- after open: events and routing --------------------------------------------------------------


def test_server_frames_become_events() -> None:
    m = open_machine()
    events = feed(
        m,
        "publish-confirm",
        "publish-error",
        "deliver-v1",
        "deliver-v2",
        "metadata-update",
        "credit-response",
        "consumer-update-request",
        "heartbeat",
    )
    assert events == [
        ev.PublishConfirmed(5, (1, 2)),
        ev.PublishErrored(0x63, ((1, ResponseCode.PUBLISHER_DOES_NOT_EXIST),)),
        ev.ChunkDelivered(0, CHUNK_V1, None),
        ev.ChunkDelivered(0, CHUNK_V2, 0),
        ev.MetadataChanged("golden", ResponseCode.STREAM_NOT_AVAILABLE),
        ev.CreditFailed(9, ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST),
        ev.ConsumerUpdateRequested(0, 0, active=True),
    ]
    assert m.data_to_send() == b""  # the machine answers neither ConsumerUpdate nor Heartbeat
    assert state_of(m) is ConnectionState.OPEN


def test_consumer_update_answers() -> None:
    m = open_machine()
    feed(m, "consumer-update-request")
    m.answer_consumer_update(0)
    assert m.data_to_send() == load_vector("consumer-update-response")
    m.answer_consumer_update(7, OffsetType.OFFSET, 42)
    assert m.data_to_send() == load_vector("consumer-update-response-offset")


@pytest.mark.parametrize(
    "name",
    [
        "subscribe-response",
        "create-response",
        "declare-publisher-response",
        "delete-publisher-response-unknown",
        "unsubscribe-response-unknown",
        "delete-response",
        "create-super-stream-response-exists",
        "delete-super-stream-response",
        "query-offset-response",
        "query-offset-response-no-offset",
        "query-publisher-sequence-response",
        "metadata-response",
        "stream-stats-response",
        "route-response",
        "partitions-response",
        "partitions-response-unknown",
        "resolve-offset-spec-response",
        "exchange-command-versions-response",
        "open-response",
        "sasl-authenticate-response-ok",
        "peer-properties-response-4.0",
    ],
)
def test_responses_route_by_correlation_id(name: str) -> None:
    m = open_machine()
    events = feed(m, name)
    frame = decode_frame(body(name))
    corr = int.from_bytes(body(name)[4:8], "big")
    assert events == [ev.ResponseReceived(corr, frame)]
    assert state_of(m) is ConnectionState.OPEN


def test_interleaved_responses_keep_their_ids() -> None:
    m = open_machine()
    events = feed(m, "query-offset-response", "publish-confirm", "metadata-response")
    assert events[0] == ev.ResponseReceived(0x0E, QueryOffsetResponse(0x0E, OK, 42))
    assert events[1] == ev.PublishConfirmed(5, (1, 2))
    assert isinstance(events[2], ev.ResponseReceived)
    assert events[2].correlation_id == 7
    assert isinstance(events[2].frame, MetadataResponse)


def test_requests_go_out_as_encoded() -> None:
    m = open_machine()
    m.send(SubscribeRequest(13, 5, "orders", OffsetType.TIMESTAMP, TS, 10, {"name": CAFE}))
    m.send(CreateRequest(6, CAFE))
    m.send_encoded(encode_publish(5, [(1, M0), (2, M1)]))
    assert m.data_to_send() == (
        load_vector("subscribe-timestamp")
        + load_vector("create-request-non-ascii")
        + load_vector("publish-v1")
    )


def test_client_only_frames_from_the_broker_are_a_protocol_error() -> None:
    for name in (
        "tune-response",
        "consumer-update-response",
        "publish-v1",
        "tune",
        "subscribe-first",
    ):
        m = open_machine()
        events = feed(m, name)
        assert len(events) == 1, name
        assert isinstance(events[0], ProtocolFailed), name
        assert state_of(m) is ConnectionState.FAILED


def test_deliver_larger_than_frame_max_is_accepted_after_open() -> None:
    # a chunk is never split (the broker's frame_max does not bound a Deliver): a 9 089-byte
    # Deliver arrived on a connection tuned to 4 096.
    m = StreamsConnection(ConnectionSettings(frame_max=4096))
    m.start(START)
    feed(m, *HANDSHAKE_4_0)
    assert m.frame_max == 4096
    chunk = CHUNK_V1 + b"\x00" * 9000  # bytes after DataLength: ignored by the chunk parser
    events = m.receive_data(encode_frame(Deliver(0, chunk)), START)
    assert events == [ev.ChunkDelivered(0, chunk, None)]


def test_a_large_deliver_fed_whole_is_decoded_where_it_lies() -> None:
    # the transport receives a large frame into one bytes of its size (open_tcp(frames=...)):
    # the chunk handed out is a view of that very object, not a copy of it
    m = open_machine()
    chunk = CHUNK_V1 + b"\x00" * 200_000
    frame = encode_frame(Deliver(0, chunk))
    events = m.receive_data(frame, START)
    assert events == [ev.ChunkDelivered(0, chunk, None)]
    delivered = events[0]
    assert isinstance(delivered, ev.ChunkDelivered)
    assert isinstance(delivered.chunk, memoryview)
    assert delivered.chunk.obj is frame
    # the same frame cut in pieces is put together once, and decodes the same
    pieces = [frame[i : i + 70_000] for i in range(0, len(frame), 70_000)]
    events = [e for piece in pieces for e in m.receive_data(piece, START)]
    assert events == [ev.ChunkDelivered(0, chunk, None)]


def test_inbound_frame_bound_after_open_fails_without_allocating() -> None:
    m = open_machine()
    tracemalloc.start()
    try:
        events = m.receive_data(U32.pack(100_000_000) + b"\x00\x08\x00\x01", START)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(events) == 1
    failed = events[0]
    assert isinstance(failed, ProtocolFailed)
    assert isinstance(failed.error, FrameTooLargeError)
    assert failed.error.size == 100_000_004
    assert failed.error.limit == 64 * 1024 * 1024
    assert peak < 1024 * 1024
    assert state_of(m) is ConnectionState.FAILED


# --- protocol failure is sticky ------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(parse_hex("00000004 ffff 0001"), id="unknown-key"),
        pytest.param(parse_hex("00000000"), id="empty-frame"),
        pytest.param(parse_hex("00000006 0010 0001 0006"), id="truncated-metadata-update"),
        pytest.param(parse_hex("0000000a 001a 0001 00000000 00 07"), id="bad-active-flag"),
    ],
)
def test_garbage_after_open_is_sticky(garbage: bytes) -> None:
    m = open_machine()
    events = m.receive_data(
        load_vector("publish-confirm") + garbage + load_vector("heartbeat"), START
    )
    assert len(events) == 2
    assert events[0] == ev.PublishConfirmed(5, (1, 2))
    failed = events[1]
    assert isinstance(failed, ProtocolFailed)
    assert isinstance(failed.error, DecodeError)
    error = failed.error
    assert state_of(m) is ConnectionState.FAILED

    calls: list[Callable[[], object]] = [
        lambda: m.receive_data(load_vector("heartbeat"), START + 1),
        lambda: m.receive_data(b"", START + 1),
        lambda: m.advance_time(START + 1),
        lambda: m.send(CreateRequest(7, "x")),
        lambda: m.send_encoded(load_vector("publish-v1")),
        lambda: m.close(),
        lambda: m.answer_consumer_update(0),
    ]
    for call in calls:
        with pytest.raises(RemoteProtocolError) as info:
            call()
        assert info.value is error
    assert state_of(m) is ConnectionState.FAILED
    assert m.next_deadline() is None


def test_receive_before_start_is_a_local_error() -> None:
    m = StreamsConnection()
    with pytest.raises(LocalProtocolError):
        feed(m, "peer-properties-response-4.0")


def test_start_twice_is_a_local_error() -> None:
    m = machine_in(ConnectionState.PEER_PROPERTIES)
    with pytest.raises(LocalProtocolError):
        m.start(START)


@pytest.mark.parametrize("state", [ConnectionState.IDLE, *HANDSHAKE_STATES])
def test_send_before_open_is_refused(state: ConnectionState) -> None:
    m = machine_in(state)
    with pytest.raises(ClosedError):
        m.send(Heartbeat())
    with pytest.raises(ClosedError):
        m.close()


# --- heartbeats, with the injected clock ---------------------------------------------------------


def test_heartbeat_deadlines() -> None:
    clock = Clock()
    m = open_machine()  # opened at START, heartbeat 60 s
    assert m.heartbeat == 60
    assert m.next_deadline() == START + 60  # write-idle comes first

    assert m.advance_time(clock.advance(59.5)) == []
    assert m.data_to_send() == b""

    assert m.advance_time(clock.advance(0.5)) == []  # START + 60: write-idle
    assert m.data_to_send() == load_vector("heartbeat")
    assert m.next_deadline() == START + 120  # min(sent 160 + 60, received 100 + 120)

    assert m.advance_time(clock.advance(1)) == []  # no second heartbeat right away
    assert m.data_to_send() == b""

    assert feed(m, "heartbeat", now=clock.advance(39)) == []  # START + 100: traffic in
    assert m.next_deadline() == START + 120  # sent at 160 → 220

    assert m.advance_time(clock.advance(20)) == []  # START + 120
    assert m.data_to_send() == load_vector("heartbeat")
    assert m.next_deadline() == START + 180  # min(220 + 60, 200 + 120)

    assert m.advance_time(clock.advance(60)) == []  # START + 180: heartbeat again
    assert m.data_to_send() == load_vector("heartbeat")
    assert state_of(m) is ConnectionState.OPEN

    # read-idle: nothing since START + 100; 2 × 60 s later the peer is silent
    events = m.advance_time(START + 220)
    assert events == [ev.PeerWentSilent(120.0)]
    assert state_of(m) is ConnectionState.FAILED
    assert m.next_deadline() is None
    with pytest.raises(RemoteProtocolError):
        m.advance_time(START + 221)
    with pytest.raises(RemoteProtocolError):
        feed(m, "heartbeat", now=START + 221)


def test_sending_resets_the_write_idle_timer() -> None:
    m = open_machine()
    m.advance_time(START + 30)
    m.send(CreateRequest(6, "x"))  # sent "at" the latest time the machine was told: START + 30
    m.data_to_send()
    assert m.next_deadline() == START + 90
    assert m.advance_time(START + 89) == []
    assert m.data_to_send() == b""
    m.advance_time(START + 90)
    assert m.data_to_send() == load_vector("heartbeat")


def test_any_frame_counts_as_traffic() -> None:
    m = open_machine()
    m.advance_time(START + 60)
    m.data_to_send()
    feed(m, "publish-confirm", now=START + 119)
    assert m.advance_time(START + 200) == []
    assert state_of(m) is ConnectionState.OPEN
    assert m.advance_time(START + 238.5) == []
    assert m.advance_time(START + 239.5) == [ev.PeerWentSilent(120.5)]


def test_no_heartbeats_when_both_sides_disable_them() -> None:
    m = StreamsConnection(ConnectionSettings(heartbeat=0))
    m.start(START)
    m.receive_data(handshake_without_heartbeats(), START)
    assert m.is_open
    assert m.heartbeat == 0
    assert m.next_deadline() is None
    assert m.advance_time(START + 1e9) == []
    assert m.data_to_send().count(load_vector("heartbeat")) == 0


def handshake_without_heartbeats() -> bytes:
    return b"".join(
        encode_frame(Tune(1_048_576, 0)) if n == "tune" else load_vector(n) for n in HANDSHAKE_4_0
    )


def test_heartbeats_when_only_the_broker_asks() -> None:
    m = StreamsConnection(ConnectionSettings(heartbeat=0))
    m.start(START)
    feed(m, *HANDSHAKE_4_0)
    assert m.heartbeat == 60
    assert m.next_deadline() == START + 60


def test_no_deadline_during_the_handshake() -> None:
    for state in HANDSHAKE_STATES:
        m = machine_in(state)
        assert m.next_deadline() is None
        assert m.advance_time(START + 1e6) == []


# --- closing -------------------------------------------------------------------------------------


def test_broker_close_after_open() -> None:
    m = open_machine()
    events = feed(m, "close-unknown-frame")
    assert events == [ev.CloseRequested(ResponseCode.UNKNOWN_FRAME, "unknown frame")]
    assert m.data_to_send() == load_vector("close-response")  # 0x8016, corr 1, OK
    assert state_of(m) is ConnectionState.CLOSED
    assert feed(m, "publish-confirm") == []  # late frames are dropped
    assert m.receive_data(b"", START) == [ev.ConnectionClosedByPeer(expected=True)]


def test_our_close_answered_then_eof() -> None:
    m = open_machine()
    corr = m.close()
    assert corr == 6
    assert m.data_to_send() == load_vector("close-request")
    assert state_of(m) is ConnectionState.CLOSING
    # frames still in flight are delivered while closing
    assert feed(m, "publish-confirm") == [ev.PublishConfirmed(5, (1, 2))]
    answer = encode_frame(SimpleResponse(corr, OK, CommandKey.CLOSE))
    events = m.receive_data(answer, START)
    assert events == [ev.ResponseReceived(corr, SimpleResponse(corr, OK, CommandKey.CLOSE))]
    assert state_of(m) is ConnectionState.CLOSED
    assert m.receive_data(b"", START) == [ev.ConnectionClosedByPeer(expected=True)]


def test_eof_after_our_close_without_an_answer() -> None:
    m = open_machine()
    m.close(ResponseCode.OK, "bye")
    assert m.receive_data(b"", START) == [ev.ConnectionClosedByPeer(expected=True)]
    assert state_of(m) is ConnectionState.CLOSED


def test_broker_close_while_we_close() -> None:
    m = open_machine()
    m.close()
    m.data_to_send()
    events = m.receive_data(encode_frame(CloseRequest(1, OK, "OK")), START)
    assert events == [ev.CloseRequested(OK, "OK")]
    assert m.data_to_send() == load_vector("close-response")


def test_broker_close_crossing_our_answered_close() -> None:
    # Our Close was answered (CLOSED), then the broker's own Close arrives: answer it, report
    # it, and do not call it a handshake failure.
    m = open_machine()
    corr = m.close()
    m.receive_data(encode_frame(SimpleResponse(corr, OK, CommandKey.CLOSE)), START)
    m.data_to_send()
    events = feed(m, "close-unknown-frame")
    assert events == [ev.CloseRequested(ResponseCode.UNKNOWN_FRAME, "unknown frame")]
    assert m.data_to_send() == load_vector("close-response")
    assert state_of(m) is ConnectionState.CLOSED


def test_eof_while_open_is_unexpected() -> None:
    m = open_machine()
    assert m.receive_data(b"", START) == [ev.ConnectionClosedByPeer(expected=False)]
    assert state_of(m) is ConnectionState.CLOSED


def test_heartbeats_continue_while_closing() -> None:
    m = open_machine()
    m.close()
    m.data_to_send()
    m.advance_time(START + 60)
    assert m.data_to_send() == load_vector("heartbeat")


def test_correlation_ids_are_never_zero_and_increase() -> None:
    m = open_machine()
    ids = [m.next_correlation_id() for _ in range(5)]
    assert ids == [6, 7, 8, 9, 10]
