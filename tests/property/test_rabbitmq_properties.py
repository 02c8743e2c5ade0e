"""Hypothesis properties of the RabbitMQ Streams core.

* every frame class in ``FRAMES`` round-trips (strategies derived from the dataclass fields,
  text including non-ASCII, integers at their wire widths);
* the ``encode_publish`` hot path equals the generic encoder;
* garbage, truncations and mutations of the golden vectors make ``decode_frame`` and
  ``parse_chunk`` raise streamwire exceptions only;
* the machine is invariant under chunking of the broker's byte stream;
* (state × frame): the machine either moves legally or reports the failure as an event.
"""

from __future__ import annotations

import contextlib
import itertools
import struct
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.errors import StreamwireError
from streamwire.rabbitmq.protocol import (
    FRAMES,
    ConnectionState,
    ProtocolFailed,
    StreamsConnection,
    parse_chunk,
)
from streamwire.rabbitmq.protocol import events as ev
from streamwire.rabbitmq.protocol.constants import (
    MAX_REFERENCE_BYTES,
    MAX_STRING_BYTES,
    RESPONSE_FLAG,
    CommandKey,
    OffsetType,
)
from streamwire.rabbitmq.protocol.frames import (
    Broker,
    CloseRequest,
    CommandVersion,
    ConsumerUpdateRequest,
    ConsumerUpdateResponse,
    Credit,
    CreditResponse,
    Deliver,
    ExchangeCommandVersionsResponse,
    Frame,
    Heartbeat,
    MetadataUpdate,
    OpenResponse,
    PeerPropertiesResponse,
    Publish,
    PublishConfirm,
    PublishEntry,
    PublishError,
    ResolveOffsetSpecResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    SimpleResponse,
    StreamMetadata,
    SubscribeRequest,
    Tune,
    decode_frame,
    encode_frame,
    encode_publish,
)
from tests.unit.rabbitmq.support import (
    CHUNK_V1,
    CHUNK_V2,
    GOLDEN,
    HANDSHAKE_4_0,
    HANDSHAKE_STATES,
    START,
    body,
    load_vector,
    machine_in,
)

Strategy = st.SearchStrategy[Any]

u8: Final = st.integers(0, 2**8 - 1)
u16: Final = st.integers(0, 2**16 - 1)
u32: Final = st.integers(0, 2**32 - 1)
u64: Final = st.integers(0, 2**64 - 1)
i16: Final = st.integers(-(2**15), 2**15 - 1)
i64: Final = st.integers(-(2**63), 2**63 - 1)

texts: Final = st.one_of(st.text(max_size=24), st.text(min_size=100, max_size=300)).filter(
    lambda s: len(s.encode()) <= MAX_STRING_BYTES
)
"""Hypothesis text: non-ASCII (and astral) characters included, surrogates excluded; the longer
ones push the int16 length prefix past one byte."""
references: Final = st.text(max_size=24).filter(lambda s: len(s.encode()) <= MAX_REFERENCE_BYTES)
small_binary: Final = st.binary(max_size=48)


# --- strategies derived from the dataclass fields ------------------------------------------------

FIELD_WIDTHS: Final[dict[tuple[type | None, str], Strategy]] = {
    # (class or None for any class, field name) → strategy; class-specific entries win.
    (None, "correlation_id"): u32,
    (None, "code"): u16,
    (None, "publisher_id"): u8,
    (None, "subscription_id"): u8,
    (None, "frame_max"): u32,
    (None, "heartbeat"): u32,
    (None, "sequence"): u64,
    (None, "offset"): u64,
    (None, "publishing_id"): u64,
    (None, "publishing_ids"): st.lists(u64, max_size=8).map(tuple),
    (None, "errors"): st.lists(st.tuples(u64, u16), max_size=8).map(tuple),
    (None, "committed_chunk_id"): st.none() | u64,
    (None, "reference"): references,
    (None, "stats"): st.dictionaries(texts, i64, max_size=4),
    (None, "chunk"): small_binary,
    (None, "challenge"): st.none() | st.binary(max_size=64),
    (None, "data"): st.none() | small_binary,
    (SubscribeRequest, "credit"): u16,
    (Credit, "credit"): i16,
    (CommandVersion, "key"): u16,
    (CommandVersion, "min_version"): u16,
    (CommandVersion, "max_version"): u16,
    (Broker, "reference"): u16,
    (Broker, "port"): u32,
    (StreamMetadata, "leader"): u16,
    (StreamMetadata, "replicas"): st.lists(u16, max_size=4).map(tuple),
}


def offset_specs(*, allow_none_type: bool) -> st.SearchStrategy[tuple[int, int | None]]:
    """(offset type, value): a value only for OFFSET (uint64) and TIMESTAMP (int64)."""
    plain = [OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT]
    if allow_none_type:
        plain.insert(0, OffsetType.NONE)
    return st.one_of(
        st.sampled_from(plain).map(lambda t: (int(t), None)),
        u64.map(lambda v: (int(OffsetType.OFFSET), v)),
        i64.map(lambda v: (int(OffsetType.TIMESTAMP), v)),
    )


def strategy_for_type(owner: type, name: str, tp: Any) -> Strategy:
    """A strategy for one field, from its annotation (ints need an explicit wire width)."""
    for key in ((owner, name), (None, name)):
        if key in FIELD_WIDTHS:
            return FIELD_WIDTHS[key]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str:
        return texts
    if tp is bool:
        return st.booleans()
    if tp is bytes:
        return small_binary
    if tp is int:
        raise AssertionError(f"{owner.__name__}.{name}: give this int field a wire width")
    if origin in (types.UnionType, typing.Union):
        return st.one_of(*(strategy_for_type(owner, name, a) for a in args))
    if tp is type(None):
        return st.none()
    if origin is dict:
        return st.dictionaries(
            strategy_for_type(owner, name, args[0]),
            strategy_for_type(owner, name, args[1]),
            max_size=4,
        )
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for_type(owner, name, args[0]), max_size=4).map(tuple)
    if isinstance(tp, type) and is_dataclass(tp):
        return dataclass_strategy(tp)
    raise AssertionError(f"{owner.__name__}.{name}: no strategy for {tp!r}")


def dataclass_strategy(cls: type) -> Strategy:
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: strategy_for_type(cls, f.name, hints[f.name]) for f in fields(cls)}
    return st.builds(cls, **kwargs)


def simple_entries() -> st.SearchStrategy[bytes]:
    return small_binary.map(lambda b: struct.pack(">I", len(b)) + b)


def sub_batch_entries() -> st.SearchStrategy[bytes]:
    """Publish v1 also carries sub-batch entries; the frame codec only sizes them."""

    def build(records: int, uncompressed: int, codec: int, stored: bytes) -> bytes:
        return (
            struct.pack(">BHII", 0x80 | (codec << 4), records, uncompressed, len(stored)) + stored
        )

    return st.builds(build, u16, u32, st.integers(0, 7), small_binary)


@st.composite
def publish_frames(draw: st.DrawFn) -> Publish:
    version = draw(st.sampled_from([1, 2]))
    if version == 1:
        entry = st.builds(PublishEntry, u64, simple_entries() | sub_batch_entries(), st.none())
    else:
        entry = st.builds(PublishEntry, u64, simple_entries(), st.none() | texts)
    entries = draw(st.lists(entry, max_size=6).map(tuple))
    return Publish(draw(u8), entries, version)


@st.composite
def frames_for_key(draw: st.DrawFn, key: int) -> Frame:
    """Any frame that is encoded under ``key``, built field by field from its dataclass."""
    cls = FRAMES[key]
    if cls is Publish:
        return draw(publish_frames())
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    if "offset_type" in names:
        allow_none = cls in (ConsumerUpdateResponse, ResolveOffsetSpecResponse)
        values["offset_type"], values["offset"] = draw(offset_specs(allow_none_type=allow_none))
    if cls is SimpleResponse:
        values["command"] = key & ~RESPONSE_FLAG
    for name in names:
        if name not in values:
            values[name] = draw(strategy_for_type(cls, name, hints[name]))
    frame = cls(**values)
    assert frame.key == key
    return frame


def any_frame() -> st.SearchStrategy[Frame]:
    return st.sampled_from(sorted(FRAMES)).flatmap(frames_for_key)


# --- round trips ---------------------------------------------------------------------------------


COUPLED: Final = {"offset_type", "offset", "command"}
"""Fields drawn together by ``frames_for_key`` (offset spec) or fixed by the key (command)."""


def _class_name(cls: type[Frame]) -> str:
    return cls.__name__


FRAME_CLASSES: Final[list[type[Frame]]] = sorted(dict.fromkeys(FRAMES.values()), key=_class_name)


@pytest.mark.parametrize("cls", FRAME_CLASSES, ids=_class_name)
def test_every_field_of_every_frame_class_has_a_strategy(cls: type[Frame]) -> None:
    # Fails for a new field (or a new int field without a wire width) until it is described.
    hints = typing.get_type_hints(cls)
    for f in fields(cls):  # type: ignore[arg-type]
        if cls is Publish or (f.name in COUPLED and "offset_type" in hints):
            continue
        if cls is SimpleResponse and f.name == "command":
            continue
        assert strategy_for_type(cls, f.name, hints[f.name]) is not None


@pytest.mark.parametrize("key", sorted(FRAMES), ids=lambda k: f"{k:#06x}-{FRAMES[k].__name__}")
@given(data=st.data())
def test_round_trip(key: int, data: st.DataObject) -> None:
    frame = data.draw(frames_for_key(key))
    encoded = encode_frame(frame)
    assert struct.unpack_from(">I", encoded)[0] == len(encoded) - 4
    decoded = decode_frame(encoded[4:])
    assert type(decoded) is type(frame)
    assert decoded == frame
    assert encode_frame(decoded) == encoded


@given(st.text(min_size=1, max_size=40))
def test_string_length_prefix_counts_utf8_bytes(text: str) -> None:
    encoded = encode_frame(MetadataUpdate(2, text))
    assert struct.unpack_from(">h", encoded, 10)[0] == len(text.encode("utf-8"))
    assert decode_frame(encoded[4:]) == MetadataUpdate(2, text)


messages: Final = st.lists(st.tuples(u64, st.binary(max_size=64)), max_size=20)


@given(u8, messages)
def test_encode_publish_v1_equals_generic_encoder(
    publisher_id: int, batch: list[tuple[int, bytes]]
) -> None:
    entries = tuple(PublishEntry(pid, struct.pack(">I", len(b)) + b) for pid, b in batch)
    assert encode_publish(publisher_id, batch) == encode_frame(Publish(publisher_id, entries))


@given(u8, st.lists(st.tuples(u64, st.binary(max_size=64), st.none() | texts), max_size=20))
def test_encode_publish_v2_equals_generic_encoder(
    publisher_id: int, batch: list[tuple[int, bytes, str | None]]
) -> None:
    pairs = [(pid, b) for pid, b, _ in batch]
    filters = [fv for _, _, fv in batch]
    entries = tuple(PublishEntry(pid, struct.pack(">I", len(b)) + b, fv) for pid, b, fv in batch)
    expected = encode_frame(Publish(publisher_id, entries, version=2))
    assert encode_publish(publisher_id, pairs, filter_values=filters) == expected


# --- garbage in: streamwire exceptions only ------------------------------------------------------

GOLDEN_BODIES: Final = [body(name) for name, _ in GOLDEN]


def decodes_or_raises_ours(data: bytes) -> None:
    with contextlib.suppress(StreamwireError):
        decode_frame(data)


def parses_or_raises_ours(chunk: bytes, *, verify_crc: bool) -> None:
    with contextlib.suppress(StreamwireError):
        parse_chunk(chunk, verify_crc=verify_crc)


@given(st.binary(max_size=256))
def test_decode_frame_random_bytes(data: bytes) -> None:
    decodes_or_raises_ours(data)


@given(st.sampled_from(sorted(FRAMES)), st.integers(0, 3), st.binary(max_size=128))
def test_decode_frame_known_key_random_body(key: int, version: int, rest: bytes) -> None:
    decodes_or_raises_ours(struct.pack(">HH", key, version) + rest)


@given(st.sampled_from(GOLDEN_BODIES), st.data())
def test_decode_frame_truncated_golden(data: bytes, draw: st.DataObject) -> None:
    cut = draw.draw(st.integers(0, len(data)))
    decodes_or_raises_ours(data[:cut])


@given(
    st.sampled_from(GOLDEN_BODIES),
    st.lists(st.tuples(st.integers(0, 10_000), u8), min_size=1, max_size=6),
    st.binary(max_size=8),
)
def test_decode_frame_mutated_golden(
    data: bytes, mutations: list[tuple[int, int]], tail: bytes
) -> None:
    mutated = bytearray(data)
    for pos, value in mutations:
        mutated[pos % len(mutated)] = value
    decodes_or_raises_ours(bytes(mutated))
    decodes_or_raises_ours(bytes(mutated) + tail)


chunks: Final = st.sampled_from([CHUNK_V1, CHUNK_V2])


@given(st.binary(max_size=256), st.booleans())
def test_parse_chunk_random_bytes(data: bytes, verify: bool) -> None:
    parses_or_raises_ours(data, verify_crc=verify)
    parses_or_raises_ours(b"\x50" + data, verify_crc=verify)


@given(chunks, st.lists(st.tuples(st.integers(0, 10_000), u8), min_size=1, max_size=6))
def test_parse_chunk_mutated_golden(chunk: bytes, mutations: list[tuple[int, int]]) -> None:
    mutated = bytearray(chunk)
    for pos, value in mutations:
        mutated[pos % len(mutated)] = value
    parses_or_raises_ours(bytes(mutated), verify_crc=True)
    parses_or_raises_ours(bytes(mutated), verify_crc=False)


@given(chunks, st.data())
def test_parse_chunk_truncated_golden(chunk: bytes, draw: st.DataObject) -> None:
    parses_or_raises_ours(chunk[: draw.draw(st.integers(0, len(chunk)))], verify_crc=False)


@given(
    st.integers(0, 255),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.binary(max_size=200),
)
def test_parse_chunk_random_sub_batches(
    flags: int, num_records: int, records: int, uncompressed: int, stored: bytes
) -> None:
    """Header valid, CRC off, a sub-batch-like entry with arbitrary fields: the parser goes
    deep (decompression, record loop) and still raises only our errors."""
    entry = struct.pack(">BHII", 0x80 | flags, records, uncompressed, len(stored)) + stored
    header = struct.pack(">BBHIqQQIIIB3x", 0x50, 0, 1, num_records, 0, 0, 0, 0, len(entry), 0, 0)
    parses_or_raises_ours(header + entry, verify_crc=False)


# --- the machine: garbage, chunking invariance ---------------------------------------------------


def normalise(events: list[ev.Event]) -> list[object]:
    """Events comparable across runs: exceptions by type and message."""
    out: list[object] = []
    for e in events:
        if isinstance(e, (ev.HandshakeFailed, ProtocolFailed)):
            out.append((type(e), type(e.error), str(e.error)))
        else:
            out.append(e)
    return out


def run(stream: bytes, cuts: list[int]) -> tuple[list[object], bytes, ConnectionState]:
    """Feed ``stream`` split at ``cuts`` to a fresh machine; stop at the first failure."""
    m = StreamsConnection()
    m.start(START)
    events: list[ev.Event] = []
    sent = m.data_to_send()
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for lo, hi in itertools.pairwise(bounds):
        if lo == hi:
            continue
        if m.state is ConnectionState.FAILED:
            break
        events += m.receive_data(stream[lo:hi], START)
        sent += m.data_to_send()
    return normalise(events), sent, m.state


AFTER_OPEN: Final = [
    "publish-confirm",
    "publish-error",
    "deliver-v1",
    "deliver-v2",
    "metadata-update",
    "metadata-update-non-ascii",
    "credit-response",
    "consumer-update-request",
    "heartbeat",
    "subscribe-response",
    "query-offset-response",
    "metadata-response",
    "stream-stats-response",
    "partitions-response",
]
ENDINGS: Final = [b"", load_vector("close-unknown-frame"), b"\x00\x00\x00\x04\xff\xff\x00\x01"]


@st.composite
def broker_streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    frames = draw(st.lists(st.sampled_from(AFTER_OPEN), max_size=12))
    stream = (
        b"".join(load_vector(n) for n in HANDSHAKE_4_0)
        + b"".join(load_vector(n) for n in frames)
        + draw(st.sampled_from(ENDINGS))
    )
    cuts = draw(st.lists(st.integers(0, len(stream)), max_size=40))
    return stream, cuts


@given(broker_streams())
def test_machine_is_invariant_under_chunking(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    whole = run(stream, [])
    split = run(stream, cuts)
    assert split == whole
    events = whole[0]
    assert isinstance(events[0], ev.ConnectionOpened)


@given(broker_streams())
def test_machine_one_byte_at_a_time(case: tuple[bytes, list[int]]) -> None:
    stream, _ = case
    assert run(stream, list(range(len(stream)))) == run(stream, [])


@st.composite
def failing_handshakes(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """A handshake that fails at some step (auth failure, bad vhost, Close, garbage), followed
    by more frames in the same stream."""
    step = draw(st.integers(0, len(HANDSHAKE_4_0) - 1))
    failure = draw(
        st.sampled_from(
            [
                load_vector("close-unknown-frame"),
                b"\x00\x00\x00\x04\xff\xff\x00\x01",
                load_vector("publish-confirm"),
                *([load_vector("sasl-authenticate-response-failure")] if step == 2 else []),
                *([load_vector("open-response-bad-vhost")] if step == 4 else []),
            ]
        )
    )
    after = draw(st.lists(st.sampled_from(AFTER_OPEN + list(HANDSHAKE_4_0)), max_size=4))
    stream = (
        b"".join(load_vector(n) for n in HANDSHAKE_4_0[:step])
        + failure
        + b"".join(load_vector(n) for n in after)
    )
    cuts = draw(st.lists(st.integers(0, len(stream)), max_size=20))
    return stream, cuts


@given(failing_handshakes())
def test_failing_handshake_is_invariant_under_chunking(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    whole = run(stream, [])
    assert run(stream, cuts) == whole
    assert whole[2] in (ConnectionState.FAILED, ConnectionState.CLOSED)


@given(st.sampled_from([*HANDSHAKE_STATES, ConnectionState.OPEN]), st.binary(max_size=300))
def test_machine_garbage_never_raises(state: ConnectionState, garbage: bytes) -> None:
    m = machine_in(state)
    events = m.receive_data(garbage, START)  # must not raise
    assert not any(isinstance(e, ProtocolFailed) for e in events[:-1])
    if m.state is ConnectionState.FAILED:
        assert isinstance(events[-1], (ProtocolFailed, ev.HandshakeFailed))


# --- (state × frame): legal transition or a reported failure -------------------------------------

HANDSHAKE_STEP: Final[dict[ConnectionState, tuple[type[Frame], int | None, ConnectionState]]] = {
    # state → (expected frame class, its correlation id, next state)
    ConnectionState.PEER_PROPERTIES: (PeerPropertiesResponse, 1, ConnectionState.SASL_HANDSHAKE),
    ConnectionState.SASL_HANDSHAKE: (SaslHandshakeResponse, 2, ConnectionState.AUTHENTICATING),
    ConnectionState.AUTHENTICATING: (SaslAuthenticateResponse, 3, ConnectionState.TUNING),
    ConnectionState.TUNING: (Tune, None, ConnectionState.OPENING),
    ConnectionState.OPENING: (OpenResponse, 4, ConnectionState.NEGOTIATING),
    ConnectionState.NEGOTIATING: (ExchangeCommandVersionsResponse, 5, ConnectionState.OPEN),
}

OPEN_EVENTS: Final[dict[type[Frame], type[ev.Event]]] = {
    PublishConfirm: ev.PublishConfirmed,
    PublishError: ev.PublishErrored,
    Deliver: ev.ChunkDelivered,
    MetadataUpdate: ev.MetadataChanged,
    CreditResponse: ev.CreditFailed,
    ConsumerUpdateRequest: ev.ConsumerUpdateRequested,
}
CLIENT_ONLY_RESPONSES: Final = {
    CommandKey.TUNE | RESPONSE_FLAG,
    CommandKey.CONSUMER_UPDATE | RESPONSE_FLAG,
}

STATES: Final = [
    *HANDSHAKE_STATES,
    ConnectionState.OPEN,
    ConnectionState.CLOSING,
    ConnectionState.CLOSED,
]


def check_transition(
    before: ConnectionState, frame: Frame, events: list[ev.Event], after: ConnectionState
) -> None:
    """The (state, frame) → (events, state) contract of ``receive_data``."""
    failures = [e for e in events if isinstance(e, (ProtocolFailed, ev.HandshakeFailed))]
    if isinstance(frame, Heartbeat):
        assert (events, after) == ([], before)
        return
    if isinstance(frame, CloseRequest):
        assert after is ConnectionState.CLOSED
        assert events[-1] == ev.CloseRequested(frame.code, frame.reason)
        in_handshake = before in HANDSHAKE_STATES
        assert len(failures) == (1 if in_handshake else 0)
        return
    if before is ConnectionState.CLOSED:
        assert (events, after) == ([], ConnectionState.CLOSED)
        return
    if failures:
        assert len(events) == 1
        assert after is ConnectionState.FAILED
        return
    if before in HANDSHAKE_STEP:
        cls, corr, nxt = HANDSHAKE_STEP[before]
        assert type(frame) is cls
        assert getattr(frame, "correlation_id", None) == corr
        assert after is nxt
        if nxt is ConnectionState.OPEN:
            assert [type(e) for e in events] == [ev.ConnectionOpened]
        else:
            assert events == []
        return
    # OPEN or CLOSING
    assert len(events) == 1
    event = events[0]
    if type(frame) in OPEN_EVENTS:
        assert isinstance(event, OPEN_EVENTS[type(frame)])
        assert after is before
    else:
        assert frame.key & RESPONSE_FLAG
        assert frame.key not in CLIENT_ONLY_RESPONSES
        assert isinstance(event, ev.ResponseReceived)
        assert event.frame == frame
        assert event.correlation_id == getattr(frame, "correlation_id")  # noqa: B009
        closing = isinstance(frame, SimpleResponse) and frame.command == CommandKey.CLOSE
        assert after is (ConnectionState.CLOSED if closing else before)


def sample_frames() -> list[tuple[str, Frame]]:
    """One golden frame of every key, plus the handshake frames with foreign correlation ids
    and non-OK codes."""
    seen: dict[int, tuple[str, Frame]] = {}
    for name, frame in GOLDEN:
        seen.setdefault(frame.key, (name, frame))
    named = {name for name, _ in seen.values()}
    extra = [(n, f) for n, f in GOLDEN if n in HANDSHAKE_4_0 and n not in named]
    extra += [
        ("peer-properties-foreign-id", PeerPropertiesResponse(9, 1, {"version": "4.0.5"})),
        ("sasl-handshake-foreign-id", SaslHandshakeResponse(9, 1, ("PLAIN",))),
        ("sasl-authenticate-foreign-id", SaslAuthenticateResponse(9, 1)),
        ("sasl-authenticate-failure", SaslAuthenticateResponse(3, 8)),
        ("open-foreign-id", OpenResponse(9, 1, {})),
        ("open-bad-vhost", OpenResponse(4, 0x0C)),
        ("exchange-versions-foreign-id", ExchangeCommandVersionsResponse(9, 1, ())),
        ("close-from-broker-id-7", CloseRequest(7, 0x0E, "frame too large")),
    ]
    return [*seen.values(), *extra]


SAMPLES: Final = sample_frames()


def test_samples_cover_every_key() -> None:
    assert {frame.key for _, frame in SAMPLES} == set(FRAMES)
    assert len({name for name, _ in SAMPLES}) == len(SAMPLES)


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
@pytest.mark.parametrize(("name", "frame"), SAMPLES, ids=[n for n, _ in SAMPLES])
def test_state_by_frame_exhaustive(state: ConnectionState, name: str, frame: Frame) -> None:
    m = machine_in(state)
    events = m.receive_data(encode_frame(frame), START)
    check_transition(state, frame, events, m.state)


@given(st.sampled_from(STATES), any_frame())
def test_state_by_random_frame(state: ConnectionState, frame: Frame) -> None:
    m = machine_in(state)
    events = m.receive_data(encode_frame(frame), START)
    check_transition(state, frame, events, m.state)
