"""The sans-IO connection machine, driven with an injected clock and scripted replies:
request numbering and sessions (docs/protocol/iggy.md §2.4), reply matching, result
sections, evictions, reply deadlines, heartbeats and the sticky failed state."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from streamwire.errors import (
    BusyError,
    ClientStateError,
    ConfigurationError,
    ConnectionClosed,
    RemoteProtocolError,
    RequestTimeout,
)
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.constants import Operation
from streamwire.iggy.protocol.errors import (
    InvalidCredentials,
    StaleClient,
    StreamNameAlreadyExists,
    TransientNotCommitted,
    Unauthenticated,
)
from streamwire.iggy.protocol.framing import (
    decode_request,
    encode_eviction,
    encode_reply,
    encode_result_section,
)
from streamwire.iggy.protocol.identifiers import Identifier, Partitioning
from streamwire.iggy.protocol.machine import (
    ConnectionState,
    IggyConnection,
    MachineSettings,
    PendingRequest,
)
from streamwire.iggy.protocol.messaging import SendMessages

LOGIN = sy.LoginRegister(username="iggy", password="iggy")
S1 = Identifier("s1")


def counting_bytes() -> Callable[[int], bytes]:
    counter = itertools.count(1)
    return lambda n: next(counter).to_bytes(n, "little")


def machine(**settings: object) -> IggyConnection:
    return IggyConnection(MachineSettings(**settings), random_bytes=counting_bytes())  # type: ignore[arg-type]


def reply_to(m: IggyConnection, p: PendingRequest, body: bytes = b"", status: int = 0) -> bytes:
    return encode_reply(
        body, client=m.client_id, request=p.request, operation=p.operation, status=status
    )


def login_reply(session: int = 9) -> bytes:
    reply = sy.LoginReply(
        user_id=0, session=session, server_protocol_version=11264, server_version="0.9.0"
    )
    return encode_result_section() + reply.encode()


def login(m: IggyConnection, now: float = 0.0, session: int = 9) -> list[ev.Event]:
    pending = m.login(LOGIN, now)
    m.data_to_send()
    return m.receive_data(reply_to(m, pending, login_reply(session)), now)


def sent(m: IggyConnection) -> list[tuple[int, int, int]]:
    """(operation, request, session) of the frame(s) queued since the last call."""
    request = decode_request(m.data_to_send())
    return [(request.operation, request.request, request.session)]


def test_numbering_rules_of_the_release() -> None:
    m = machine()
    ping = m.send(sy.Ping(), 0)
    assert sent(m) == [(2, 1, 0)]  # ping before login: current number, session 0
    m.receive_data(reply_to(m, ping), 0)
    events = login(m)
    logged = [e for e in events if isinstance(e, ev.LoggedIn)]
    assert logged == [ev.LoggedIn(0, 9, 11264, "0.9.0")]
    assert m.state is ConnectionState.READY
    plan: list[tuple[object, tuple[int, int, int]]] = [
        (st.CreateStream(name="s1"), (128, 1, 9)),
        (st.GetStream(S1), (2, 2, 9)),
        (
            SendMessages(
                stream=S1, topic=S1, partitioning=Partitioning.partition_id(0),
                messages_count=1, batch=b"",
            ),
            (160, 2, 9),
        ),
        (st.GetStreams(), (2, 3, 9)),
        (sy.LogoutUser(), (3, 3, 9)),
    ]  # fmt: skip
    for payload, expected in plan:
        pending = m.send(payload, 1.0)  # type: ignore[arg-type]
        assert sent(m) == [expected]
        body = encode_result_section() if pending.operation.result_framed else b""
        if isinstance(payload, st.CreateStream):
            body += st.StreamRecord(
                id=0, created_at=1, topics_count=0, size_bytes=0, messages_count=0, name="s1"
            ).encode()
        (event,) = m.receive_data(reply_to(m, pending, body), 1.0)
        assert isinstance(event, ev.ReplyReceived)
    assert m.next_request == 4


def test_register_frame_and_fresh_client_ids() -> None:
    m = machine()
    first_id = m.client_id
    pending = m.login(LOGIN, 0)
    frame = decode_request(m.data_to_send())
    assert (frame.operation, frame.request, frame.session) == (1, 0, 0)
    assert frame.request_checksum != 0  # stamped
    assert m.client_id != first_id
    assert frame.client == m.client_id
    with pytest.raises(BusyError):
        m.login(LOGIN, 0)
    m.receive_data(reply_to(m, pending, login_reply(3)), 0)
    before = m.client_id
    login(m, session=4)
    assert m.client_id != before
    assert (m.session, m.next_request) == (4, 1)


def test_only_ping_before_login() -> None:
    m = machine()
    with pytest.raises(ClientStateError):
        m.send(st.GetStreams(), 0)
    with pytest.raises(ConfigurationError):
        m.send(LOGIN, 0)


def test_one_request_at_a_time() -> None:
    m = machine()
    login(m)
    m.send(st.GetStreams(), 0)
    with pytest.raises(BusyError):
        m.send(st.GetStreams(), 0)


def test_reply_result_is_parsed() -> None:
    m = machine()
    login(m)
    p = m.send(st.GetStream(S1), 0)
    (event,) = m.receive_data(reply_to(m, p), 0)
    assert event == ev.ReplyReceived(p, None)  # empty body: not found
    p = m.send(st.CreateStream(name="s1"), 0)
    record = st.StreamRecord(
        id=0, created_at=1, topics_count=0, size_bytes=0, messages_count=0, name="s1"
    )
    (event,) = m.receive_data(reply_to(m, p, encode_result_section() + record.encode()), 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.result == record


def test_status_and_committed_rejections_are_typed() -> None:
    m = machine()
    login(m)
    p = m.send(st.GetStreams(), 0)
    (event,) = m.receive_data(reply_to(m, p, status=40), 0)
    assert isinstance(event, ev.RequestFailed)
    assert isinstance(event.error, Unauthenticated)
    p = m.send(st.CreateStream(name="s1"), 0)
    (event,) = m.receive_data(reply_to(m, p, encode_result_section(1012)), 0)
    assert isinstance(event, ev.RequestFailed)
    assert isinstance(event.error, StreamNameAlreadyExists)
    assert m.is_ready  # business errors leave the connection usable


def test_retry_resends_the_same_frame() -> None:
    m = machine()
    login(m)
    p = m.send(st.CreateStream(name="s1"), 0)
    first = m.data_to_send()
    (event,) = m.receive_data(reply_to(m, p, encode_result_section(57)), 0)
    assert isinstance(event, ev.RequestFailed)
    assert isinstance(event.error, TransientNotCommitted)
    again = m.retry(p, 1.0)
    assert m.data_to_send() == first
    assert (again.request, again.attempts) == (p.request, 2)
    assert m.next_request == 2  # the retry did not take a new number


def _tampered(body: bytes = b"", client: int = 0, request: int = 0, operation: int = 0) -> object:
    def make(m: IggyConnection, p: PendingRequest) -> bytes:
        return encode_reply(
            body,
            client=m.client_id + client,
            request=p.request + request,
            operation=operation or p.operation,
        )

    return make


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_tampered(request=1), id="request-nobody-sent"),
        # a result-framed operation on a read: the (empty) body has no result section
        pytest.param(_tampered(operation=128), id="framing-of-another-operation"),
        pytest.param(_tampered(body=b"\x01"), id="garbage-body"),
    ],
)
def test_mismatched_replies_fail_the_machine(
    tamper: Callable[[IggyConnection, PendingRequest], bytes],
) -> None:
    m = machine()
    login(m)
    p = m.send(st.GetTopics(S1), 0)
    (event,) = m.receive_data(tamper(m, p), 0)
    assert isinstance(event, ev.ProtocolFailed)
    assert m.state is ConnectionState.FAILED
    with pytest.raises(RemoteProtocolError):
        m.send(sy.Ping(), 0)
    with pytest.raises(RemoteProtocolError):
        m.receive_data(b"x", 0)


def test_unsolicited_reply_is_a_protocol_error() -> None:
    m = machine()
    login(m)
    (event,) = m.receive_data(encode_reply(b"", client=m.client_id, request=1, operation=2), 0)
    assert isinstance(event, ev.ProtocolFailed)


def test_eviction_fails_pending_and_sticks() -> None:
    m = machine()
    login(m)
    p = m.send(st.GetStreams(), 0)
    events = m.receive_data(encode_eviction(client=m.client_id, reason=13), 0)
    assert [type(e) for e in events] == [ev.RequestFailed, ev.Evicted]
    assert isinstance(events[0], ev.RequestFailed)
    assert events[0].request is p
    assert isinstance(events[1], ev.Evicted)
    assert isinstance(events[1].error, StaleClient)
    assert m.state is ConnectionState.FAILED
    with pytest.raises(StaleClient):
        m.send(sy.Ping(), 0)


def test_login_refused_by_eviction() -> None:
    m = machine()
    p = m.login(LOGIN, 0)
    events = m.receive_data(encode_eviction(client=m.client_id, reason=9), 0)
    assert isinstance(events[0], ev.RequestFailed)
    assert events[0].request is p
    assert isinstance(events[0].error, InvalidCredentials)


def test_reply_deadline_with_injected_clock() -> None:
    m = machine(request_timeout=2.0)
    login(m, now=10.0)
    p = m.send(st.GetStreams(), 100.0)
    assert m.next_deadline() == 102.0
    assert m.advance_time(101.9) == []
    (event,) = m.advance_time(102.0)
    assert event == ev.ReplyTimedOut(p, 2.0)
    assert isinstance(m.error, RequestTimeout)
    assert m.next_deadline() is None
    assert m.advance_time(500.0) == []
    with pytest.raises(RequestTimeout):
        m.send(sy.Ping(), 103.0)


def test_per_request_timeout_override() -> None:
    m = machine(request_timeout=30.0)
    login(m)
    m.send(st.GetStreams(), 5.0, timeout=0.5)
    assert m.next_deadline() == 5.5


def test_heartbeat_due_when_idle() -> None:
    m = machine(heartbeat_interval=5.0)
    assert m.advance_time(100.0) == []  # not logged in: no heartbeat
    login(m, now=0.0)
    assert m.next_deadline() == 5.0
    assert m.advance_time(4.9) == []
    assert m.advance_time(5.0) == [ev.HeartbeatDue()]
    assert m.advance_time(6.0) == []  # one signal per idle interval
    assert m.advance_time(10.0) == [ev.HeartbeatDue()]
    p = m.send(sy.Ping(), 11.0)
    assert m.advance_time(16.5) == []  # a request is pending: its deadline rules
    m.receive_data(reply_to(m, p), 12.0)
    assert m.next_deadline() == 16.0


def test_heartbeat_disabled() -> None:
    m = machine(heartbeat_interval=None)
    login(m)
    assert m.next_deadline() is None
    assert m.advance_time(1e9) == []


def test_end_of_stream() -> None:
    m = machine()
    login(m)
    m.send(st.GetStreams(), 0)
    assert m.receive_data(b"", 0) == [ev.ConnectionClosedByPeer()]
    assert isinstance(m.error, ConnectionClosed)


def test_replies_fed_byte_by_byte() -> None:
    m = machine()
    login(m)
    p = m.send(st.GetStreams(), 0)
    frame = reply_to(m, p, st.StreamsList().encode())
    events: list[ev.Event] = []
    for i in range(len(frame)):
        events.extend(m.receive_data(frame[i : i + 1], 0))
    assert events == [ev.ReplyReceived(p, st.StreamsList())]


def test_close_makes_the_machine_unusable() -> None:
    m = machine()
    m.close()
    assert m.state is ConnectionState.CLOSED
    with pytest.raises(Exception, match="closed"):
        m.send(sy.Ping(), 0)


def test_empty_login_reply_is_a_protocol_error() -> None:
    m = machine()
    p = m.login(LOGIN, 0)
    (event,) = m.receive_data(reply_to(m, p), 0)
    assert isinstance(event, ev.ProtocolFailed)
    assert p.operation is Operation.REGISTER
