"""PublishTemplate writes exactly the envelope encode_publish writes, for any value, key,
correlation id, ack inbox, ack policy and CRC setting; and what a leader decodes from it is
the message that was sent. RequestTemplate (the gRPC path) writes exactly the generated
class's PublishRequest."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.messages import decode_publish, encode_publish
from streamwire.liftbridge.protocol.publish_template import PublishTemplate, RequestTemplate

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(
    value=st.one_of(st.binary(max_size=400), st.integers(0, 20_000).map(bytes)),
    key=st.one_of(st.none(), st.binary(max_size=200)),
    cid=text,
    inbox=text,
    policy=st.sampled_from([0, 1, 2]),
    crc=st.booleans(),
)
def test_template_equals_encode_publish(
    value: bytes, key: bytes | None, cid: str, inbox: str, policy: int, crc: bool
) -> None:
    template = PublishTemplate(ack_inbox=inbox, ack_policy=policy, crc=crc)
    data = template.encode(value, cid, key)
    assert data == encode_publish(
        value, key=key, ack_inbox=inbox, correlation_id=cid, ack_policy=policy, crc=crc
    )
    m = decode_publish(data)
    assert (m.value, m.key, m.ack_inbox, m.correlation_id, m.ack_policy) == (
        value,
        key or b"",
        inbox,
        cid,
        policy,
    )
    assert m.expected_offset == -1
    assert template.ack_inbox == inbox


message_runs = st.lists(
    st.tuples(st.one_of(st.binary(max_size=300), st.integers(0, 300).map(bytes)), text),
    max_size=20,
)
"""Runs of (value, correlation id) for ``encode_many``: values short and long."""
long_cids = st.text(min_size=130, max_size=140)
"""Correlation ids whose length takes two bytes."""


@settings(max_examples=200, deadline=None)
@given(
    messages=message_runs,
    long_cid=long_cids,
    inbox=text,
    policy=st.sampled_from([0, 1, 2]),
    crc=st.booleans(),
)
def test_encode_many_equals_encode(
    messages: list[tuple[bytes, str]], long_cid: str, inbox: str, policy: int, crc: bool
) -> None:
    messages.append((b"v", long_cid))  # a correlation id with a 2-byte length
    template = PublishTemplate(ack_inbox=inbox, ack_policy=policy, crc=crc)
    values, cids = [v for v, _ in messages], [c for _, c in messages]
    assert template.encode_many(values, cids) == [template.encode(v, c) for v, c in messages]


@settings(max_examples=400, deadline=None)
@given(
    value=st.one_of(st.binary(max_size=400), st.integers(0, 20_000).map(bytes)),
    key=st.one_of(st.none(), st.binary(max_size=200)),
    cid=st.one_of(text, st.text(min_size=130, max_size=140)),
    stream=text,
    partition=st.one_of(st.integers(0, 3), st.integers(0, 2**31 - 1)),
    policy=st.sampled_from([0, 1, 2]),
)
def test_request_template_equals_the_generated_publish_request(
    value: bytes, key: bytes | None, cid: str, stream: str, partition: int, policy: int
) -> None:
    template = RequestTemplate(stream=stream, partition=partition, ack_policy=policy)
    data = template.encode(value, cid, key)
    request = pb.PublishRequest(
        key=key or b"",
        value=value,
        stream=stream,
        partition=partition,
        ackPolicy=policy,  # type: ignore[arg-type]
        expectedOffset=-1,
        correlationId=cid,
    )
    assert data == request.SerializeToString()
    assert pb.PublishRequest.FromString(data) == request


@settings(max_examples=200, deadline=None)
@given(
    messages=message_runs,
    long_cid=long_cids,
    stream=text,
    partition=st.integers(0, 1000),
    policy=st.sampled_from([0, 1, 2]),
)
def test_request_encode_many_equals_encode(
    messages: list[tuple[bytes, str]], long_cid: str, stream: str, partition: int, policy: int
) -> None:
    messages.append((b"v", long_cid))
    template = RequestTemplate(stream=stream, partition=partition, ack_policy=policy)
    values, cids = [v for v, _ in messages], [c for _, c in messages]
    assert template.encode_many(values, cids) == [template.encode(v, c) for v, c in messages]


def test_an_unknown_ack_policy_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        PublishTemplate(ack_inbox="i", ack_policy=3)
    with pytest.raises(ConfigurationError):
        RequestTemplate(stream="s", partition=0, ack_policy=3)
