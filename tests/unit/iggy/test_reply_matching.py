"""What real Iggy servers did that docs/protocol/iggy.md did not first say, scripted byte by byte
against the sans-IO machine (docs/iggy.md, "How a reply is matched"):

1. CreateTopic (132) and CreatePartitions (136) are answered with the server's internal
   operations (64 CreateTopicWithAssignments, 65 CreatePartitionsWithAssignments);
2. replies carry a client id other than the one we registered;
4. pipelined requests to partitions on different shards are answered out of order.

Each is accepted and counted in :class:`ReplyStats`, never fatal; a reply for a request
number nobody sent still is.
"""

from __future__ import annotations

import pytest

from streamwire.errors import RemoteProtocolError
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol.errors import TopicNameAlreadyExists
from streamwire.iggy.protocol.framing import decode_request, encode_reply, encode_result_section
from streamwire.iggy.protocol.identifiers import Identifier, Partitioning
from streamwire.iggy.protocol.machine import (
    ConnectionState,
    IggyConnection,
    PendingRequest,
    ReplyStats,
)
from streamwire.iggy.protocol.messaging import SendMessages
from tests.unit.iggy.test_machine import login, machine

S1 = Identifier("s1")
TOPIC = st.TopicDetails(
    topic=st.TopicRecord(
        id=0,
        created_at=1,
        partitions_count=0,
        message_expiry=0,
        compression_algorithm=1,
        max_topic_size=0,
        size_bytes=0,
        messages_count=0,
        name="t",
    )
)


def create_topic() -> st.CreateTopic:
    return st.CreateTopic(stream=S1, partitions_count=3, name="t")


def send_to(partition: int) -> SendMessages:
    return SendMessages(
        stream=S1,
        topic=Identifier("t"),
        partitioning=Partitioning.partition_id(partition),
        messages_count=1,
        batch=b"",
    )


def test_create_topic_answered_with_the_internal_operation() -> None:
    m = machine()
    login(m)
    pending = m.send(create_topic(), 0)
    body = encode_result_section() + TOPIC.encode()
    reply = encode_reply(body, client=m.client_id, request=pending.request, operation=64)
    (event,) = m.receive_data(reply, 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.request is pending
    assert event.result == TOPIC
    assert m.stats.foreign_operation == 1
    assert m.is_ready


def test_a_committed_rejection_under_an_internal_operation_is_typed() -> None:
    m = machine()
    login(m)
    pending = m.send(create_topic(), 0)
    body = encode_result_section(2013)  # TopicNameAlreadyExists
    reply = encode_reply(body, client=m.client_id, request=pending.request, operation=64)
    (event,) = m.receive_data(reply, 0)
    assert isinstance(event, ev.RequestFailed)
    assert isinstance(event.error, TopicNameAlreadyExists)
    assert m.is_ready


def test_create_partitions_answered_with_the_internal_operation() -> None:
    m = machine()
    login(m)
    pending = m.send(st.CreatePartitions(stream=S1, topic=Identifier("t"), partitions_count=2), 0)
    reply = encode_reply(
        encode_result_section(), client=m.client_id, request=pending.request, operation=65
    )
    (event,) = m.receive_data(reply, 0)
    assert isinstance(event, ev.ReplyReceived)
    assert m.stats.foreign_operation == 1


def test_an_unknown_operation_byte_keeps_the_framing_of_the_request() -> None:
    m = machine()
    login(m)
    pending = m.send(st.GetStreams(), 0)  # a read: no result section
    reply = encode_reply(b"", client=m.client_id, request=pending.request, operation=230)
    (event,) = m.receive_data(reply, 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.result == st.StreamsList(streams=())


def test_a_server_chosen_client_id_is_accepted_and_counted() -> None:
    stats = ReplyStats()
    m = IggyConnection(machine().settings, stats=stats)
    login(m)  # the login reply echoes our id
    pending = m.send(st.GetStreams(), 0)
    m.data_to_send()
    server_id = 0x10000000000000000000000000008
    assert server_id != m.client_id
    (event,) = m.receive_data(
        encode_reply(b"", client=server_id, request=pending.request, operation=2), 0
    )
    assert isinstance(event, ev.ReplyReceived)
    assert stats.foreign_client == 1
    assert stats.replies == 2
    # the next request still carries the id we registered
    m.send(st.GetStreams(), 0)
    assert decode_request(m.data_to_send()).client == m.client_id


def test_pipelined_sends_answered_out_of_order() -> None:
    m = machine(max_in_flight=3)
    login(m)
    sends = [m.send(send_to(p), 0) for p in (1, 2, 3)]
    assert [p.request for p in sends] == [1, 2, 3]  # writes take a number each
    frames = [decode_request(f) for f in _split(bytes(m.data_to_send()), sends)]
    assert [f.timestamp for f in frames] == [0, 0, 0]  # distinct numbers: nothing to stamp

    def reply(p: int) -> bytes:
        return encode_reply(b"", client=m.client_id, request=sends[p].request, operation=160)

    events = m.receive_data(reply(1) + reply(2) + reply(0), 0)
    assert [e.request for e in events if isinstance(e, ev.ReplyReceived)] == [
        sends[1],
        sends[2],
        sends[0],
    ]
    assert m.stats.out_of_order == 2  # the first two were not the oldest
    assert m.in_flight == 0
    assert m.is_ready


def test_a_read_and_a_write_sharing_a_number_are_told_apart_by_operation() -> None:
    m = machine(max_in_flight=2)
    login(m)
    read = m.send(st.GetStreams(), 0)  # the current number, 1
    write = m.send(send_to(1), 0)  # takes 1 as well
    assert read.request == write.request == 1
    m.data_to_send()
    # the write's reply comes first and does not echo the stamp (timestamp 0)
    (event,) = m.receive_data(encode_reply(b"", client=m.client_id, request=1, operation=160), 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.request is write
    (event,) = m.receive_data(encode_reply(b"", client=m.client_id, request=1, operation=2), 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.request is read


def test_a_reply_nobody_waits_for_stays_fatal() -> None:
    m = machine(max_in_flight=2)
    login(m)
    m.send(send_to(1), 0)
    (event,) = m.receive_data(encode_reply(b"", client=m.client_id, request=5, operation=160), 0)
    assert isinstance(event, ev.ProtocolFailed)
    assert m.state is ConnectionState.FAILED
    with pytest.raises(RemoteProtocolError):
        m.send(st.GetStreams(), 0)


def _split(data: bytes, pending: list[PendingRequest]) -> list[bytes]:
    frames, at = [], 0
    for p in pending:
        frames.append(data[at : at + len(p.frame)])
        at += len(p.frame)
    return frames
