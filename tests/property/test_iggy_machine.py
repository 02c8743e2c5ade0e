"""Properties of the Iggy connection machine: replies split at any points give the same
events as fed whole; any bytes from the server give events or a sticky streamwire error,
never a foreign exception; the request counter only ever grows."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from streamwire.errors import StreamwireError
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol import streams
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.framing import encode_reply, encode_result_section
from streamwire.iggy.protocol.identifiers import Identifier
from streamwire.iggy.protocol.machine import ConnectionState, IggyConnection

LOGIN = sy.LoginRegister(username="iggy", password="iggy")


def logged_in() -> IggyConnection:
    m = IggyConnection(random_bytes=lambda n: b"\x01" * n)
    pending = m.login(LOGIN, 0)
    reply = sy.LoginReply(
        user_id=0, session=3, server_protocol_version=11264, server_version="0.9.0"
    )
    m.receive_data(
        encode_reply(
            encode_result_section() + reply.encode(),
            client=m.client_id,
            request=pending.request,
            operation=pending.operation,
        ),
        0,
    )
    m.data_to_send()
    return m


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


@given(st.lists(st.integers(0, 10_000), max_size=8))
def test_chunking_invariance(cuts: list[int]) -> None:
    whole, pieces = logged_in(), logged_in()
    records = tuple(
        streams.StreamRecord(
            id=i, created_at=i, topics_count=0, size_bytes=0, messages_count=0, name=f"ß{i}"
        )
        for i in range(3)
    )
    body = streams.StreamsList(streams=records).encode()
    events_whole: list[ev.Event] = []
    events_split: list[ev.Event] = []
    for machine, out, split in ((whole, events_whole, False), (pieces, events_split, True)):
        pending = machine.send(streams.GetStreams(), 1.0)
        frame = encode_reply(
            body, client=machine.client_id, request=pending.request, operation=pending.operation
        )
        for chunk in _split(frame, cuts) if split else [frame]:
            out.extend(machine.receive_data(chunk, 1.0))
    assert [type(e) for e in events_whole] == [type(e) for e in events_split] == [ev.ReplyReceived]
    assert isinstance(events_split[0], ev.ReplyReceived)
    assert events_split[0].result == streams.StreamsList(streams=records)


@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=5))
def test_garbage_from_the_server(chunks: list[bytes]) -> None:
    m = logged_in()
    m.send(streams.GetStream(Identifier("s")), 0)
    for chunk in chunks:
        try:
            m.receive_data(chunk, 0)
        except StreamwireError:
            assert m.state is ConnectionState.FAILED
            return
    assert m.state in (ConnectionState.READY, ConnectionState.FAILED)


@given(st.lists(st.sampled_from(["read", "write", "ping"]), max_size=20))
def test_request_numbers_never_go_back(kinds: list[str]) -> None:
    m = logged_in()
    last = 0
    for kind in kinds:
        payload: object = {
            "read": streams.GetStreams(),
            "write": streams.PurgeStream(Identifier("s")),
            "ping": sy.Ping(),
        }[kind]
        pending = m.send(payload, 0)  # type: ignore[arg-type]
        assert pending.request >= last
        assert pending.request >= 1
        last = pending.request
        body = encode_result_section() if pending.operation.result_framed else b""
        m.receive_data(
            encode_reply(
                body, client=m.client_id, request=pending.request, operation=pending.operation
            ),
            0,
        )
    writes = kinds.count("write")
    assert m.next_request == 1 + writes
