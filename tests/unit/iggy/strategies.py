"""Hypothesis strategies for every Iggy payload class, derived from the field codecs that
the classes declare (``field(metadata=wire(...))``), plus hand-written ones for the layouts
whose counts live inside nested records."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.iggy.protocol import _wire as w
from streamwire.iggy.protocol import diagnostics, groups, messaging, streams, system, tlv, users
from streamwire.iggy.protocol import identifiers as ids
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    decode_batch,
    encode_batch,
    encode_record,
)

U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)


def _fits(lo: int, hi: int) -> Any:
    return lambda s: lo <= len(s.encode("utf-8")) <= hi


NAMES = st.text(min_size=1, max_size=40).filter(_fits(1, 255))
TEXT8 = st.text(max_size=40).filter(_fits(0, 255))
IDENTIFIERS = st.one_of(U32, NAMES).map(ids.Identifier)

_HEADER_VALUES = {
    HeaderKind.RAW: st.binary(min_size=1, max_size=64),
    HeaderKind.STRING: NAMES,
    HeaderKind.BOOL: st.booleans(),
    HeaderKind.INT8: st.integers(-(2**7), 2**7 - 1),
    HeaderKind.INT16: st.integers(-(2**15), 2**15 - 1),
    HeaderKind.INT32: st.integers(-(2**31), 2**31 - 1),
    HeaderKind.INT64: st.integers(-(2**63), 2**63 - 1),
    HeaderKind.INT128: st.integers(-(2**127), 2**127 - 1),
    HeaderKind.UINT8: st.integers(0, 2**8 - 1),
    HeaderKind.UINT16: st.integers(0, 2**16 - 1),
    HeaderKind.UINT32: U32,
    HeaderKind.UINT64: U64,
    HeaderKind.UINT128: st.integers(0, 2**128 - 1),
    HeaderKind.FLOAT32: st.floats(width=32, allow_nan=False),
    HeaderKind.FLOAT64: st.floats(allow_nan=False),
}


def _typed(kind: HeaderKind) -> Any:
    return lambda value: HeaderValue(kind, value)


HEADER_VALUES = st.one_of([s.map(_typed(k)) for k, s in _HEADER_VALUES.items()])
HEADERS = st.dictionaries(NAMES, HEADER_VALUES, max_size=5)

CONSUMERS = st.builds(ids.Consumer, st.sampled_from(ids.ConsumerKind), IDENTIFIERS)
STRATEGIES = st.builds(ids.PollingStrategy, st.sampled_from(ids.PollingKind), U64)
PARTITIONINGS = st.one_of(
    st.just(ids.Partitioning.balanced()),
    U32.map(ids.Partitioning.partition_id),
    st.binary(min_size=1, max_size=255).map(ids.Partitioning.messages_key),
)

GLOBAL_PERMS = st.builds(
    users.GlobalPermissions,
    **{f.name: st.booleans() for f in dataclasses.fields(users.GlobalPermissions)},
)
TOPIC_PERMS = st.builds(
    users.TopicPermissions,
    topic_id=U32,
    **{f.name: st.booleans() for f in dataclasses.fields(users.TopicPermissions)[1:]},
)
STREAM_PERMS = st.builds(
    users.StreamPermissions,
    stream_id=U32,
    topics=st.lists(TOPIC_PERMS, max_size=3).map(tuple),
    **{f.name: st.booleans() for f in dataclasses.fields(users.StreamPermissions)[1:7]},
)
PERMISSIONS = st.builds(
    users.Permissions,
    global_permissions=GLOBAL_PERMS,
    streams=st.lists(STREAM_PERMS, max_size=3).map(tuple),
)

OUTGOING = st.builds(
    OutgoingMessage,
    id=st.integers(1, 2**128 - 1),
    payload=st.binary(min_size=1, max_size=64),
    origin_timestamp=st.integers(2**50, 2**50 + 2**32 - 1),
    user_headers=HEADERS.map(tlv.encode_user_headers),
)
BATCHES = st.lists(OUTGOING, min_size=1, max_size=4).map(encode_batch)


def codec_strategy(codec: w.Codec[Any]) -> st.SearchStrategy[Any]:
    simple: dict[int, st.SearchStrategy[Any]] = {
        id(w.U8): st.integers(0, 255),
        id(w.U16): st.integers(0, 2**16 - 1),
        id(w.U32): U32,
        id(w.U64): U64,
        id(w.F32): st.floats(width=32, allow_nan=False),
        id(w.BOOL): st.booleans(),
        id(w.NAME): NAMES,
        id(w.STR8): TEXT8,
        id(w.STR32): st.text(max_size=40),
        id(w.BYTES32): st.binary(max_size=64),
        id(w.REST): st.binary(max_size=64),
        id(ids.IDENT): IDENTIFIERS,
        id(ids.CONSUMER): CONSUMERS,
        id(ids.OPT_PARTITION): st.none() | U32,
        id(ids.STRATEGY): STRATEGIES,
        id(ids.PARTITIONING): PARTITIONINGS,
        id(tlv.OPTIONS_REST): HEADERS,
        id(tlv.OPTIONS32): HEADERS,
        id(tlv.USER_HEADERS32): HEADERS,
    }
    if id(codec) in simple:
        return simple[id(codec)]
    name = type(codec).__name__
    if isinstance(codec, w.Counted | w.ToEnd):
        return st.lists(codec_strategy(codec._item), max_size=3).map(tuple)
    if isinstance(codec, w.Nested):
        return payload_strategy(codec._cls)
    if name == "_Maybe":
        return st.none() | codec_strategy(codec._codec)  # type: ignore[attr-defined]
    if name in ("_RequestPermissions", "_ReplyPermissions"):
        return st.none() | PERMISSIONS
    if name == "_U128":
        return st.integers(0, 2**128 - 1)
    if name == "_U8List":
        return st.lists(st.integers(0, 255), max_size=5).map(tuple)
    raise LookupError(f"no strategy for {codec!r}")


def _generic(cls: type[Any]) -> st.SearchStrategy[Any]:
    kwargs = {name: codec_strategy(codec) for name, codec in w.layout(cls)}
    return st.builds(cls, **kwargs)


@st.composite
def _topic_details(draw: st.DrawFn) -> streams.TopicDetails:
    parts = tuple(draw(st.lists(_generic(streams.PartitionRecord), max_size=3)))
    topic = draw(_generic(streams.TopicRecord))
    return streams.TopicDetails(
        topic=dataclasses.replace(topic, partitions_count=len(parts)), partitions=parts
    )


@st.composite
def _stream_details(draw: st.DrawFn) -> streams.StreamDetails:
    topics = tuple(draw(st.lists(_generic(streams.TopicRecord), max_size=2)))
    stream = draw(_generic(streams.StreamRecord))
    return streams.StreamDetails(
        stream=dataclasses.replace(stream, topics_count=len(topics)), topics=topics
    )


@st.composite
def _group_details(draw: st.DrawFn) -> groups.ConsumerGroupDetails:
    members = tuple(draw(st.lists(_generic(groups.GroupMember), max_size=3)))
    group = draw(_generic(groups.ConsumerGroupRecord))
    return groups.ConsumerGroupDetails(
        group=dataclasses.replace(group, members_count=len(members)), members=members
    )


@st.composite
def _client_details(draw: st.DrawFn) -> system.ClientDetails:
    memberships = tuple(draw(st.lists(_generic(system.GroupMembership), max_size=3)))
    client = draw(_generic(system.ClientInfo))
    return system.ClientDetails(
        client=dataclasses.replace(client, consumer_groups_count=len(memberships)),
        consumer_groups=memberships,
    )


@st.composite
def _send_messages(draw: st.DrawFn) -> messaging.SendMessages:
    batch = draw(BATCHES)
    header, _ = decode_batch(batch)
    return messaging.SendMessages(
        stream=draw(IDENTIFIERS),
        topic=draw(IDENTIFIERS),
        partitioning=draw(PARTITIONINGS),
        messages_count=header.message_count,
        batch=batch,
    )


@st.composite
def _polled(draw: st.DrawFn) -> messaging.PolledMessages:
    records = []
    base = draw(st.integers(0, 2**40))
    for batch in draw(st.lists(BATCHES, max_size=3)):
        header, messages = decode_batch(batch)
        records.append(
            encode_record(
                messages,
                partition_id=3,
                base_offset=base,
                base_timestamp=draw(st.integers(0, 2**50)),
                origin_timestamp=header.origin_timestamp,
            )
        )
        base += len(messages)
    return messaging.PolledMessages.build(draw(U32), draw(U64), records)


_SPECIAL: dict[type[Any], st.SearchStrategy[Any]] = {
    streams.TopicDetails: _topic_details(),
    streams.StreamDetails: _stream_details(),
    groups.ConsumerGroupDetails: _group_details(),
    system.ClientDetails: _client_details(),
    messaging.SendMessages: _send_messages(),
    messaging.PolledMessages: _polled(),
    users.Permissions: PERMISSIONS,
}


def payload_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    special = _SPECIAL.get(cls)
    return special if special is not None else _generic(cls)


def all_payload_classes() -> list[type[Any]]:
    """Every concrete request and reply payload class of the protocol package."""
    found: dict[str, type[Any]] = {}
    for module in (diagnostics, groups, messaging, streams, system, users):
        for name in module.__all__:
            obj = getattr(module, name)
            if (
                isinstance(obj, type)
                and issubclass(obj, w.Payload)
                and hasattr(obj, "__dataclass_fields__")
            ):
                found[f"{module.__name__}.{name}"] = obj
    return [found[k] for k in sorted(found)]
