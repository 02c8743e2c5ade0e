"""The double's fidelity, proven with the official apache-iggy 0.9.0 client (PyPI wheel,
Rust SDK 0.11.0 inside), and cross-reading between that client and streamwire.

* the wheel runs every command streamwire uses against the double and gets the answers it
  expects (typed results, its own error texts for error codes, eviction handling);
* raw commands the wheel's Python API lacks go through its ``send_binary_request``;
* what the wheel sends, streamwire reads back (poll), and what streamwire sends, the wheel
  reads back, headers, ids and checksums included.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import streamwire.iggy as iggy
from streamwire import HeaderValue, Message
from streamwire.iggy.protocol import groups as gr
from streamwire.iggy.protocol import messaging as ms
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol import users as us
from streamwire.iggy.protocol.identifiers import Consumer, Identifier, PollingStrategy
from tests.iggy_double import IggyDouble
from tests.iggy_double.wheel import steps

ig = pytest.importorskip("apache_iggy")

S1, T1 = Identifier("s1"), Identifier("t1")


async def test_wheel_session_against_the_double(double: IggyDouble) -> None:
    client = ig.IggyClient(double.address)
    await client.connect()
    results: dict[str, Any] = {}
    for name, make in steps(client):
        results[name] = await asyncio.wait_for(make(), 10)
    assert double.dropped == []
    stream = results["get-stream"]
    assert (stream.name, stream.id, stream.topics_count) == ("s1", 0, 2)
    topic = results["get-topic"]
    assert (topic.name, topic.partitions_count) == ("t1", 2)
    assert [p.id for p in topic.partitions] == [0, 1]
    (confirmation,) = results["send-messages"].confirmations
    assert (confirmation.partition_id, confirmation.base_offset) == (1, 0)
    polled = results["poll-messages"]
    assert [(m.offset(), m.id(), m.payload()) for m in polled] == [
        (0, 1, b"hello"),
        (1, 2, b"world"),
    ]
    assert polled[1].user_headers() == {ig.HeaderKey.String("key1"): ig.HeaderValue.String("val")}
    assert [m.offset() for m in results["poll-first"]] == [0]  # count 1, auto-commit stores 0
    assert [m.offset() for m in results["poll-next"]] == [1]  # Next = stored + 1
    assert [m.offset() for m in results["poll-last"]] == [1]
    assert [m.offset() for m in results["poll-timestamp"]] == [0, 1]
    group = results["get-consumer-group"]
    assert (group.name, group.members_count, group.partitions_count) == ("g1", 1, 2)
    assert [m.partitions for m in group.members] == [[0, 1]]
    assert results["get-stats"].streams_count == 1
    assert results["get-user"].username == "alice"
    assert [u.username for u in results["get-users"]] == ["iggy", "alice"]


async def test_wheel_raw_commands_decode_with_streamwire(
    double: IggyDouble, wheel: Any, client: iggy.Client
) -> None:
    await client.create_stream("s1/t1", partitions=2)
    raw = wheel.send_binary_request
    me = sy.ClientDetails.decode(bytes(await raw(20, b"")))
    assert me.client.user_id == 0
    clients = sy.ClientsList.decode(bytes(await raw(22, b"")))
    assert len(clients.clients) == 2  # the wheel and streamwire's management connection
    token = us.RawToken.decode(
        bytes(await raw(42, us.CreatePersonalAccessToken(name="tok").encode()))
    )
    assert len(token.token) > 10
    tokens = us.TokensList.decode(bytes(await raw(41, b"")))
    assert [t.name for t in tokens.tokens] == ["tok"]
    await wheel.send_messages("s1", "t1", 0, [ig.SendMessage("a"), ig.SendMessage("b")])
    store = ms.StoreConsumerOffset(
        consumer=Consumer.single("c"), stream=S1, topic=T1, partition=0, offset=1
    )
    assert bytes(await raw(121, store.encode())) == b""
    get = ms.GetConsumerOffset(consumer=Consumer.single("c"), stream=S1, topic=T1, partition=0)
    info = ms.ConsumerOffsetInfo.decode(bytes(await raw(120, get.encode())))
    assert (info.partition_id, info.current_offset, info.stored_offset) == (0, 1, 1)
    delete = ms.DeleteConsumerOffset(
        consumer=Consumer.single("c"), stream=S1, topic=T1, partition=0
    )
    await raw(122, delete.encode())
    assert bytes(await raw(120, get.encode())) == b""
    await wheel.create_consumer_group("s1", "t1", "g")
    await wheel.join_consumer_group("s1", "t1", "g")
    sync = gr.SyncConsumerGroup(S1, T1, Identifier("g"))
    assignment = gr.GroupAssignment.decode(bytes(await raw(606, sync.encode())))
    assert assignment.partitions == (0, 1)
    with pytest.raises(RuntimeError, match="was not found"):  # status 5003 → the wheel's text
        await raw(606, gr.SyncConsumerGroup(S1, T1, Identifier("nope")).encode())
    # the token logs in (code 45) through the wheel's own auto-login
    config = ig.TcpConfig(
        server_address=double.address, auto_login=ig.AutoLogin.personal_access_token(token.token)
    )
    pat_client = ig.IggyClient(config)
    await pat_client.connect()
    assert (await pat_client.get_stream("s1")).name == "s1"
    assert sum(1 for r in double.requests if r.operation == 1) >= 3


async def test_wheel_is_refused_like_by_a_server(double: IggyDouble) -> None:
    client = ig.IggyClient(double.address)
    await client.connect()
    with pytest.raises(RuntimeError, match="Invalid credentials"):
        await client.login_user("iggy", "wrong")  # eviction reason 9, decoded by the wheel
    await client.login_user("iggy", "iggy")
    assert await client.get_streams() == []
    registers = [r for r in double.requests if r.operation == 1]
    assert len(registers) == 2
    assert registers[0].client != registers[1].client  # a fresh client id per login


async def test_streamwire_reads_what_the_wheel_sent(wheel: Any, client: iggy.Client) -> None:
    await client.create_stream("s1/t1", partitions=3)
    headers = {
        "s": ig.HeaderValue.String("text ü"),
        "i": ig.HeaderValue.Int32(-7),
        "u": ig.HeaderValue.UnsignedInt64(2**60),
        "f": ig.HeaderValue.Float64(2.5),
        "b": ig.HeaderValue.Bool(True),
        "r": ig.HeaderValue.Raw(b"\x00\x01"),
    }
    sent = [ig.SendMessage(b"one", headers, id=11), ig.SendMessage("two ✓")]
    response = await wheel.send_messages("s1", "t1", 2, sent)
    assert [c.partition_id for c in response.confirmations] == [2]
    async with client.consumer("s1/t1", partition=2) as consumer:
        got = await consumer.next_batch(10, timeout=2)
    assert [m.value for m in got] == [b"one", "two ✓".encode()]
    assert [m.offset for m in got] == [0, 1]
    assert got[0].id == 11
    assert got[1].id  # minted by the wheel (UUIDv4)
    assert got[0].headers == {
        "s": HeaderValue.string("text ü"),
        "i": HeaderValue.int32(-7),
        "u": HeaderValue.uint64(2**60),
        "f": HeaderValue.float64(2.5),
        "b": HeaderValue.boolean(True),
        "r": HeaderValue.raw(b"\x00\x01"),
    }
    assert got[1].headers == {}
    assert {m.partition for m in got} == {2}


async def test_the_wheel_reads_what_streamwire_sent(wheel: Any, client: iggy.Client) -> None:
    await client.create_stream("s1/t1", partitions=2)
    async with client.producer("s1/t1", partition=1) as producer:
        await producer.send(
            Message(b"payload", id=99, headers={"n": HeaderValue.int16(-2), "t": "ü"}), key=None
        )
        await producer.send(b"keyed", key=b"k1")
        await producer.flush()
    polled = await wheel.poll_messages(
        "s1", "t1", consumer=ig.Consumer.Single("x"),
        polling_strategy=ig.PollingStrategy.First(), count=10, auto_commit=False, partition_id=1,
    )  # fmt: skip
    assert [(m.offset(), m.payload()) for m in polled] == [(0, b"payload"), (1, b"keyed")]
    assert polled[0].id() == 99
    assert polled[1].id() != 0
    assert polled[0].user_headers() == {
        ig.HeaderKey.String("n"): ig.HeaderValue.Int16(-2),
        ig.HeaderKey.String("t"): ig.HeaderValue.String("ü"),
    }
    assert polled[1].user_headers() == {
        ig.HeaderKey.String(iggy.KEY_HEADER): ig.HeaderValue.Raw(b"k1")
    }
    async with client.consumer("s1/t1", partitions=(1,), verify_checksums=True) as consumer:
        ours = await consumer.next_batch(10, timeout=2)
    raw = await client.request(
        ms.PollMessages(
            consumer=Consumer.single("y"), stream=S1, topic=T1, partition=1,
            strategy=PollingStrategy.first(), count=10,
        )
    )  # fmt: skip
    assert [m.checksum for m in raw.messages] == [m.checksum() for m in polled]
    assert [m.id for m in ours] == [m.id() for m in polled]
