"""Shared by the RabbitMQ Streams core tests: the hex vectors, the golden table and a
scripted broker that drives :class:`StreamsConnection` through the handshake.

Vectors live in ``tests/vectors/rabbitmq/*.hex`` (provenance in ``PROVENANCE.md`` there):
``#`` lines are comments, ``|`` and whitespace are ignored, the rest is hex of one complete
frame, size prefix included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from streamwire.rabbitmq.protocol import ConnectionSettings, ConnectionState, StreamsConnection
from streamwire.rabbitmq.protocol.constants import CommandKey, OffsetType, ResponseCode
from streamwire.rabbitmq.protocol.frames import (
    Broker,
    CloseRequest,
    CommandVersion,
    ConsumerUpdateRequest,
    ConsumerUpdateResponse,
    CreateRequest,
    CreateSuperStreamRequest,
    Credit,
    CreditResponse,
    DeclarePublisherRequest,
    DeletePublisherRequest,
    DeleteRequest,
    DeleteSuperStreamRequest,
    Deliver,
    ExchangeCommandVersionsRequest,
    ExchangeCommandVersionsResponse,
    Frame,
    Heartbeat,
    MetadataRequest,
    MetadataResponse,
    MetadataUpdate,
    OpenRequest,
    OpenResponse,
    PartitionsRequest,
    PartitionsResponse,
    PeerPropertiesRequest,
    PeerPropertiesResponse,
    Publish,
    PublishConfirm,
    PublishEntry,
    PublishError,
    QueryOffsetRequest,
    QueryOffsetResponse,
    QueryPublisherSequenceRequest,
    QueryPublisherSequenceResponse,
    ResolveOffsetSpecRequest,
    ResolveOffsetSpecResponse,
    RouteRequest,
    RouteResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SimpleResponse,
    StoreOffset,
    StreamMetadata,
    StreamStatsRequest,
    StreamStatsResponse,
    SubscribeRequest,
    Tune,
    TuneResponse,
    UnsubscribeRequest,
)

VECTORS_DIR: Final = Path(__file__).resolve().parents[2] / "vectors" / "rabbitmq"

K = CommandKey
OK = ResponseCode.OK


def parse_hex(text: str) -> bytes:
    """Hex text with ``#`` comment lines, spaces and ``|`` separators → bytes."""
    lines = (line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return bytes.fromhex("".join(lines).replace("|", "").replace(" ", ""))


def load_vector(name: str) -> bytes:
    """The complete frame (size prefix included) stored in ``<name>.hex``."""
    return parse_hex((VECTORS_DIR / f"{name}.hex").read_text(encoding="utf-8"))


def vector_names() -> list[str]:
    return sorted(p.stem for p in VECTORS_DIR.glob("*.hex"))


def body(name: str) -> bytes:
    """The frame without its 4-byte size prefix (what ``decode_frame`` takes)."""
    return load_vector(name)[4:]


# --- the golden table ----------------------------------------------------------------------------

# The two messages of the captured Publish/Deliver frames: AMQP 1.0 data sections "m0", "m1".
M0: Final = bytes.fromhex("005375a0026d30")
M1: Final = bytes.fromhex("005375a0026d31")
ENTRY_M0: Final = bytes.fromhex("00000007") + M0
ENTRY_M1: Final = bytes.fromhex("00000007") + M1

# §1.8 Deliver chunks, written out field by field (48-byte header, then the 22 data bytes).
_DATA: Final = "00000007 005375a0026d30 00000007 005375a0026d31"
CHUNK_V1: Final = parse_hex(
    "50 00 0002 00000002 000001a20128289f 0000000000000001 0000000000000000"
    " 5af0b141 00000016 00000000 00 000000 " + _DATA
)
CHUNK_V2: Final = parse_hex(
    "50 00 0002 00000002 000001a2012915ad 0000000000000001 0000000000000000"
    " 5af0b141 00000016 00000000 00 000000 " + _DATA
)

CAFE: Final = "café-ß"  # 6 characters, 8 UTF-8 bytes
TS: Final = 1_700_000_000_000
PROBE: Final = "probe-stream-0123456789abcdef"
NOPE: Final = "nope-does-not-exist"

ECV_4_0: Final = (
    CommandVersion(K.DECLARE_PUBLISHER, 1, 1),
    CommandVersion(K.PUBLISH, 1, 2),
    *(
        CommandVersion(k, 1, 1)
        for k in (
            K.QUERY_PUBLISHER_SEQUENCE,
            K.DELETE_PUBLISHER,
            K.SUBSCRIBE,
            K.CREDIT,
            K.STORE_OFFSET,
            K.QUERY_OFFSET,
            K.UNSUBSCRIBE,
            K.CREATE,
            K.DELETE,
            K.METADATA,
            K.CLOSE,
            K.HEARTBEAT,
            K.ROUTE,
            K.PARTITIONS,
            K.STREAM_STATS,
            K.CREATE_SUPER_STREAM,
            K.DELETE_SUPER_STREAM,
        )
    ),
)

CAPTURED: Final[list[tuple[str, Frame]]] = [
    (
        "sasl-handshake-response",
        SaslHandshakeResponse(2, OK, ("PLAIN", "AMQPLAIN", "ANONYMOUS")),
    ),
    ("sasl-authenticate-response-ok", SaslAuthenticateResponse(3, OK)),
    ("tune", Tune(1_048_576, 60)),
    (
        "open-response",
        OpenResponse(4, OK, {"advertised_port": "5552", "advertised_host": "vm"}),
    ),
    ("open-response-bad-vhost", OpenResponse(4, ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE)),
    ("create-response", SimpleResponse(6, OK, K.CREATE)),
    ("publish-v1", Publish(5, (PublishEntry(1, ENTRY_M0), PublishEntry(2, ENTRY_M1)))),
    ("publish-confirm", PublishConfirm(5, (1, 2))),
    ("publish-error", PublishError(0x63, ((1, ResponseCode.PUBLISHER_DOES_NOT_EXIST),))),
    ("subscribe-response", SimpleResponse(8, OK, K.SUBSCRIBE)),
    ("deliver-v1", Deliver(0, CHUNK_V1)),
    ("deliver-v2", Deliver(0, CHUNK_V2, committed_chunk_id=0)),
    ("credit-response", CreditResponse(ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST, 9)),
    ("metadata-update", MetadataUpdate(ResponseCode.STREAM_NOT_AVAILABLE, "golden")),
    ("consumer-update-request", ConsumerUpdateRequest(0, 0, active=True)),
    ("consumer-update-response", ConsumerUpdateResponse(0, OK, OffsetType.NONE, None)),
    ("close-unknown-frame", CloseRequest(1, ResponseCode.UNKNOWN_FRAME, "unknown frame")),
]
"""Frames captured from RabbitMQ 4.0.5 / 3.10.8 (docs/protocol/rabbitmq-streams.md §1.8)."""

DERIVED: Final[list[tuple[str, Frame]]] = [
    # connection lifecycle
    ("peer-properties-request", PeerPropertiesRequest(1, {"product": "streamwire"})),
    (
        "peer-properties-response-4.0",
        PeerPropertiesResponse(1, OK, {"product": "RabbitMQ", "version": "4.0.5"}),
    ),
    (
        "peer-properties-response-3.10",
        PeerPropertiesResponse(1, OK, {"product": "RabbitMQ", "version": "3.10.8"}),
    ),
    ("sasl-handshake-request", SaslHandshakeRequest(2)),
    ("sasl-authenticate-plain", SaslAuthenticateRequest(3, "PLAIN", b"\0guest\0guest")),
    (
        "sasl-authenticate-response-failure",
        SaslAuthenticateResponse(3, ResponseCode.AUTHENTICATION_FAILURE),
    ),
    (
        "sasl-authenticate-response-challenge",
        SaslAuthenticateResponse(3, ResponseCode.SASL_CHALLENGE, b"abc"),
    ),
    ("tune-response", TuneResponse(1_048_576, 60)),
    ("open-request", OpenRequest(4, "/")),
    ("close-request", CloseRequest(6, OK, "OK")),
    ("close-response", SimpleResponse(1, OK, K.CLOSE)),
    ("heartbeat", Heartbeat()),
    (
        "exchange-command-versions-request",
        ExchangeCommandVersionsRequest(5, (CommandVersion(K.DELIVER, 1, 2),)),
    ),
    ("exchange-command-versions-response", ExchangeCommandVersionsResponse(5, OK, ECV_4_0)),
    # consuming: every offset type, with and without properties
    ("subscribe-first", SubscribeRequest(9, 1, "orders", OffsetType.FIRST, None, 10)),
    (
        "subscribe-last",
        SubscribeRequest(10, 2, "orders", OffsetType.LAST, None, 10, {"name": "billing"}),
    ),
    (
        "subscribe-next",
        SubscribeRequest(
            11,
            3,
            "orders",
            OffsetType.NEXT,
            None,
            1,
            {"single-active-consumer": "true", "name": "billing"},
        ),
    ),
    (
        "subscribe-offset",
        SubscribeRequest(
            12,
            4,
            "orders",
            OffsetType.OFFSET,
            42,
            10,
            {"filter.0": "eu", "match-unfiltered": "true"},
        ),
    ),
    (
        "subscribe-timestamp",
        SubscribeRequest(13, 5, "orders", OffsetType.TIMESTAMP, TS, 10, {"name": CAFE}),
    ),
    ("credit", Credit(1, 10)),
    ("unsubscribe", UnsubscribeRequest(0x17, 1)),
    (
        "unsubscribe-response-unknown",
        SimpleResponse(0x17, ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST, K.UNSUBSCRIBE),
    ),
    ("store-offset", StoreOffset("billing", "orders", 42)),
    ("query-offset-request", QueryOffsetRequest(0x0E, "billing", "orders")),
    ("query-offset-response", QueryOffsetResponse(0x0E, OK, 42)),
    ("query-offset-response-no-offset", QueryOffsetResponse(0x0E, ResponseCode.NO_OFFSET, 0)),
    ("consumer-update-response-offset", ConsumerUpdateResponse(7, OK, OffsetType.OFFSET, 42)),
    (
        "resolve-offset-spec-request",
        ResolveOffsetSpecRequest(0x1C, "orders", OffsetType.TIMESTAMP, TS),
    ),
    ("resolve-offset-spec-response", ResolveOffsetSpecResponse(0x1C, OK, OffsetType.OFFSET, 42)),
    # publishing
    (
        "publish-v2-filters",
        Publish(5, (PublishEntry(1, ENTRY_M0, None), PublishEntry(2, ENTRY_M1, "eu")), version=2),
    ),
    ("publish-v2-non-ascii-filter", Publish(5, (PublishEntry(3, ENTRY_M0, CAFE),), version=2)),
    ("declare-publisher", DeclarePublisherRequest(0x16, 5, CAFE, "orders")),
    ("declare-publisher-no-reference", DeclarePublisherRequest(0x16, 5, "", "orders")),
    ("declare-publisher-response", SimpleResponse(0x16, OK, K.DECLARE_PUBLISHER)),
    ("delete-publisher", DeletePublisherRequest(0x1A, 5)),
    (
        "delete-publisher-response-unknown",
        SimpleResponse(0x1A, ResponseCode.PUBLISHER_DOES_NOT_EXIST, K.DELETE_PUBLISHER),
    ),
    ("query-publisher-sequence-request", QueryPublisherSequenceRequest(0x1B, "billing", "orders")),
    ("query-publisher-sequence-response", QueryPublisherSequenceResponse(0x1B, OK, 17)),
    # streams and topology
    ("create-request-non-ascii", CreateRequest(6, CAFE)),
    ("create-request-arguments", CreateRequest(6, "orders", {"max-age": "24h"})),
    ("delete-request", DeleteRequest(0x18, "orders")),
    ("delete-response", SimpleResponse(0x18, OK, K.DELETE)),
    ("metadata-update-non-ascii", MetadataUpdate(ResponseCode.STREAM_DOES_NOT_EXIST, CAFE)),
    ("metadata-request", MetadataRequest(7, (PROBE, NOPE))),
    (
        "metadata-response",
        MetadataResponse(
            7,
            (Broker(0, "vm", 5552),),
            (
                StreamMetadata(PROBE, OK, 0, ()),
                StreamMetadata(NOPE, ResponseCode.STREAM_DOES_NOT_EXIST, 0xFFFF, ()),
            ),
        ),
    ),
    ("stream-stats-request", StreamStatsRequest(0x14, "orders")),
    (
        "stream-stats-response",
        StreamStatsResponse(
            0x14, OK, {"first_chunk_id": 0, "committed_chunk_id": 40, "last_chunk_id": 42}
        ),
    ),
    (
        "stream-stats-response-empty",
        StreamStatsResponse(
            0x14, OK, {"first_chunk_id": -1, "committed_chunk_id": -1, "last_chunk_id": -1}
        ),
    ),
    ("route-request", RouteRequest(0x10, "eu", "invoices")),
    ("route-response", RouteResponse(0x10, OK, ("invoices-0",))),
    ("route-response-unbound", RouteResponse(0x11, OK, ())),
    ("partitions-request", PartitionsRequest(0x12, "invoices")),
    (
        "partitions-response",
        PartitionsResponse(0x12, OK, ("invoices-0", "invoices-1", "invoices-2")),
    ),
    ("partitions-response-unknown", PartitionsResponse(0x13, ResponseCode.STREAM_DOES_NOT_EXIST)),
    (
        "create-super-stream",
        CreateSuperStreamRequest(
            0x15, "invoices", ("invoices-0", "invoices-1"), ("0", "1"), {"max-age": "24h"}
        ),
    ),
    (
        "create-super-stream-response-exists",
        SimpleResponse(0x15, ResponseCode.STREAM_ALREADY_EXISTS, K.CREATE_SUPER_STREAM),
    ),
    ("delete-super-stream", DeleteSuperStreamRequest(0x19, "invoices")),
    ("delete-super-stream-response", SimpleResponse(0x19, OK, K.DELETE_SUPER_STREAM)),
]
"""Hand-derived from the §1.5 layouts (not captured)."""

GOLDEN: Final = CAPTURED + DERIVED


# --- a scripted broker for the machine -----------------------------------------------------------

HANDSHAKE_4_0: Final = (
    "peer-properties-response-4.0",
    "sasl-handshake-response",
    "sasl-authenticate-response-ok",
    "tune",
    "open-response",
    "exchange-command-versions-response",
)
"""What a RabbitMQ 4.0.5 broker sends during the handshake, one frame per machine step.
The captured correlation ids (2, 3, 4) are exactly the ones the machine chooses."""

STATE_AFTER: Final = (
    ConnectionState.SASL_HANDSHAKE,
    ConnectionState.AUTHENTICATING,
    ConnectionState.TUNING,
    ConnectionState.OPENING,
    ConnectionState.NEGOTIATING,
    ConnectionState.OPEN,
)
"""The machine's state after each frame of :data:`HANDSHAKE_4_0`."""

HANDSHAKE_STATES: Final = (ConnectionState.PEER_PROPERTIES, *STATE_AFTER[:-1])

START: Final = 100.0
"""The injected clock's value at ``start()``; the scripted handshake happens at that time."""


def handshake_bytes(upto: int = len(HANDSHAKE_4_0)) -> bytes:
    return b"".join(load_vector(name) for name in HANDSHAKE_4_0[:upto])


def machine_in(
    state: ConnectionState, settings: ConnectionSettings | None = None, now: float = START
) -> StreamsConnection:
    """A machine driven with the captured 4.0 frames until it is in ``state``; the bytes it
    sent on the way are discarded."""
    m = StreamsConnection(settings)
    if state is ConnectionState.IDLE:
        return m
    m.start(now)
    reachable = (ConnectionState.PEER_PROPERTIES, *STATE_AFTER)
    steps = reachable.index(state) if state in reachable else len(HANDSHAKE_4_0)
    for name in HANDSHAKE_4_0[:steps]:
        m.receive_data(load_vector(name), now)
    if state is ConnectionState.CLOSING:
        m.close()
    elif state is ConnectionState.CLOSED:
        m.receive_data(load_vector("close-unknown-frame"), now)
    assert m.state is state, (m.state, state)
    m.data_to_send()
    return m


def open_machine(settings: ConnectionSettings | None = None) -> StreamsConnection:
    return machine_in(ConnectionState.OPEN, settings)
