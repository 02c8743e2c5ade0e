"""streamwire's Iggy client end to end against the conformance double: management, the
producer (routing, batching, confirmations), the consumer (every polling strategy, offsets,
groups) and failure handling (evictions, silence, malformed replies)."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from datetime import UTC, datetime
from typing import Any

import pytest

import streamwire
import streamwire.iggy as iggy
from streamwire import AuthenticationError, HeaderValue, Message
from streamwire.codec.checksums import xxh32
from streamwire.codec.headers import HeaderInput
from streamwire.errors import (
    ChecksumMismatchError,
    ConfigurationError,
    ProtocolError,
    RequestTimeout,
    StreamAlreadyExistsError,
    StreamNotFoundError,
)
from streamwire.iggy._connection import Credentials
from streamwire.iggy.protocol import messaging as ms
from streamwire.iggy.protocol.batch import OutgoingMessage, encode_batch
from streamwire.iggy.protocol.constants import Operation, pack_version
from streamwire.iggy.protocol.errors import (
    EvictionReason,
    IncompatibleProtocolVersion,
    InvalidCredentials,
    StaleClient,
    TopicNameAlreadyExists,
    TopicNameNotFound,
)
from streamwire.iggy.protocol.identifiers import Identifier, Partitioning
from streamwire.transport.tls import TLSOptions
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import Lane

ADDRESS = "orders/eu"


async def test_connect_by_url_and_round_trip(double: IggyDouble) -> None:
    async with streamwire.connect(double.url, timeout=5) as client:
        assert isinstance(client, iggy.Client)
        await client.create_stream(ADDRESS, partitions=2)
        when = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
        headers: dict[str, HeaderInput] = {
            "text": "ünïcode",
            "n": HeaderValue.int8(-3),
            "big": 2**70,
            "ok": True,
        }
        async with client.producer(ADDRESS, partition=1) as producer:
            conf = await producer.send_and_wait(
                Message(b"v1", key=b"k", headers=headers, timestamp=when, id=12345)
            )
        assert (conf.offset, conf.partition, conf.stream) == (0, 1, ADDRESS)
        async with client.consumer(ADDRESS, offset="first") as consumer:
            (msg,) = await consumer.next_batch(10, timeout=2)
    assert (msg.value, msg.key, msg.id, msg.offset, msg.partition) == (b"v1", b"k", 12345, 0, 1)
    assert msg.headers == {
        "text": HeaderValue.string("ünïcode"),
        "n": HeaderValue.int8(-3),
        "big": HeaderValue.int128(2**70),
        "ok": HeaderValue.boolean(True),
    }
    assert msg.stream == ADDRESS
    assert msg.timestamp is not None
    stored = double.state.streams[0].topics[0].partitions[1].records[0]
    assert stored.header.origin_timestamp == 1_893_553_445_000_006  # Message.timestamp, in µs


async def test_stream_management(client: iggy.Client) -> None:
    await client.create_stream("s")  # a bare name: the stream and its default topic
    with pytest.raises(TopicNameAlreadyExists) as exists:
        await client.create_stream("s")
    assert isinstance(exists.value, StreamAlreadyExistsError)
    await client.create_stream("s", exist_ok=True)
    assert [t.name for t in await client.topics("s")] == [iggy.DEFAULT_TOPIC]
    await client.create_stream("s/t", partitions=3, message_expiry=60, compression_algorithm="gzip")
    with pytest.raises(TopicNameAlreadyExists):
        await client.create_stream("s/t")
    await client.create_stream("s/t", exist_ok=True)
    details = await client.get_topic("s/t")
    assert details is not None
    assert len(details.partitions) == 3
    assert details.topic.message_expiry == 60_000_000
    assert details.topic.compression_algorithm == 2
    assert await client.stream_exists("s/t")
    await client.create_partitions("s/t", 2)
    assert len((await client.get_topic("s/t") or details).partitions) == 5
    await client.delete_partitions("s/t", 1)
    assert sorted(t.name for t in await client.topics("s")) == [iggy.DEFAULT_TOPIC, "t"]
    await client.delete_stream("s/t")
    assert not await client.stream_exists("s/t")
    assert await client.stream_exists("s")
    await client.delete_stream("s")  # a bare name: the whole stream
    assert not await client.stream_exists("s")
    with pytest.raises(StreamNotFoundError):
        await client.delete_stream("s")
    await client.delete_stream("s", missing_ok=True)
    with pytest.raises(ConfigurationError):
        await client.create_stream("a/b", nonsense=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError):
        client.producer("a/b/c")
    assert await client.streams() == []
    await client.create_stream("e", message_expiry=5)  # topic options: the default topic's
    default = await client.get_topic(f"e/{iggy.DEFAULT_TOPIC}")
    assert default is not None
    assert default.topic.message_expiry == 5_000_000


async def test_crash_safe_topic_options_reach_the_server(client: iggy.Client) -> None:
    """docs/iggy.md, "Durability": a topic that writes each batch before acknowledging it
    (and fsyncs), asked for with typed keywords; the server keeps them as given."""
    await client.create_stream("d/t", messages_required_to_save=1, enforce_fsync=True)
    details = await client.get_topic("d/t")
    assert details is not None
    assert details.topic.options["messages_required_to_save"] == HeaderValue.uint32(1)
    assert details.topic.options["enforce_fsync"] == HeaderValue.boolean(True)
    with pytest.raises(ConfigurationError, match="enforce_fsync: expected a bool"):
        await client.create_stream("d/u", enforce_fsync=1)  # type: ignore[arg-type]
    await client.delete_stream("d")


async def test_system_users_and_tokens(double: IggyDouble, client: iggy.Client) -> None:
    await client.ping()
    assert client.server_version == "0.9.0"
    assert (await client.server_stats()).iggy_server_version == "0.9.0"
    me = await client.me()
    assert me is not None
    assert me.client.user_id == 0
    assert len(await client.clients()) == 1
    perms = iggy.Permissions(global_permissions=iggy.GlobalPermissions(read_streams=True))
    created = await client.create_user("bob", "pass123", permissions=perms)
    assert created.user.username == "bob"
    assert created.permissions == perms
    await client.update_user("bob", username="bobby", active=True)
    await client.change_password("bobby", "pass123", "pass456")
    await client.update_permissions("bobby", None)
    details = await client.user("bobby")
    assert details is not None
    assert details.permissions is None
    assert [u.username for u in await client.users()] == ["iggy", "bobby"]
    token = await client.create_token("ci-token")
    assert [t.name for t in await client.tokens()] == ["ci-token"]
    async with await iggy.connect(f"iggy://{double.address}?token={token}", timeout=5) as other:
        assert other.user_id == 0
    async with await iggy.connect(
        host=double.host, port=double.port, username="bobby", password="pass456"
    ) as bob:
        assert bob.user_id == 1
    await client.delete_token("ci-token")
    await client.delete_user("bobby")


async def test_bad_credentials_raise_authentication_errors(double: IggyDouble) -> None:
    with pytest.raises(InvalidCredentials) as info:
        await iggy.connect(double.url.replace("iggy:iggy", "iggy:nope"), timeout=5)
    assert isinstance(info.value, AuthenticationError)
    assert info.value.eviction_reason is EvictionReason.INVALID_CREDENTIALS  # type: ignore[attr-defined]


async def test_a_protocol_the_server_does_not_speak_is_a_connect_error_naming_both(
    server: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every lane (the real server too): a client announcing protocol 0.12.0 (server 0.10)
    is evicted at login (reason 14); connecting raises IncompatibleServer, a ConnectError
    naming both versions and what to upgrade, caused by the server's error 14003."""
    announce = pack_version(0, 12, 0)
    login_payload = Credentials.login_payload

    def newer(self: Credentials) -> Any:
        return dataclasses.replace(login_payload(self), protocol_version=announce)

    monkeypatch.setattr(Credentials, "login_payload", newer)
    with pytest.raises(iggy.IncompatibleServer) as info:
        await iggy.connect(server.url, timeout=5, reconnect=None)
    error = info.value
    assert isinstance(error, streamwire.ConnectError)
    assert isinstance(error.__cause__, IncompatibleProtocolVersion)
    assert error.client_protocol == announce
    assert error.server_protocols[1] >> 10 == iggy.PROTOCOL_VERSION >> 10  # it speaks 0.11.x
    text = str(error)
    assert (
        f"at {server.address} refused streamwire's binary protocol 0.12.0 (Iggy server 0.10)"
        in text
    )
    assert "(Iggy server 0.9)" in text
    assert "upgrade the server to Iggy server 0.10" in text


async def test_a_server_of_a_newer_protocol_says_which_streamwire_to_use() -> None:
    """The double made to speak protocol 0.12.0 (as an Iggy 0.10 server) refuses this
    streamwire's 0.11.0."""
    async with IggyDouble(protocol_version=pack_version(0, 12, 0)) as double:
        with pytest.raises(iggy.IncompatibleServer) as info:
            await iggy.connect(double.url, timeout=5, reconnect=None)
    error = info.value
    assert error.client_protocol == iggy.PROTOCOL_VERSION
    assert error.server_protocols == (pack_version(0, 12, 0), pack_version(0, 12, 0))
    assert str(error).endswith(
        "refused streamwire's binary protocol 0.11.0 (Iggy server 0.9): it speaks protocol "
        "0.12.0 to 0.12.0 (Iggy server 0.10); use a streamwire release made for Iggy server "
        "0.10, or connect to Iggy server 0.9"
    )


async def test_key_routing_matches_the_server_rule(client: iggy.Client, double: IggyDouble) -> None:
    await client.create_stream(ADDRESS, partitions=4)
    keys = [f"customer-{i}".encode() for i in range(12)]
    async with client.producer(ADDRESS) as producer:
        futures = [await producer.send(b"x", key=k) for k in keys]
        await producer.flush()
    for key, future in zip(keys, futures, strict=True):
        assert future.result().partition == xxh32(key) % 4
    # the double (like the server) resolves MessagesKey partitioning the same way
    batch = encode_batch([OutgoingMessage(id=1, payload=b"y", origin_timestamp=1)])
    reply = await client.request(
        ms.SendMessages(
            stream=Identifier("orders"),
            topic=Identifier("eu"),
            partitioning=Partitioning.messages_key(keys[5]),
            messages_count=1,
            batch=batch,
        )
    )
    assert reply.confirmations[0].partition_id == xxh32(keys[5]) % 4


async def test_balanced_batches_rotate_and_fixed_partitions_stick(client: iggy.Client) -> None:
    await client.create_stream(ADDRESS, partitions=3)
    async with client.producer(ADDRESS, max_batch_messages=2) as producer:
        futures = await producer.send_batch([b"m%d" % i for i in range(6)])
        await producer.flush()
        partitions = [f.result().partition for f in futures]
        assert partitions == [0, 0, 1, 1, 2, 2]
        assert [f.result().offset for f in futures] == [0, 1, 0, 1, 0, 1]
        pinned = await producer.send_and_wait(b"p", partition=2)
        assert (pinned.partition, pinned.offset) == (2, 2)
        with pytest.raises(ConfigurationError):
            await producer.send(b"bad", partition=7)
    confirmations = await client.send(ADDRESS, [b"a", Message(b"b")], partition=0)
    assert [(c.partition, c.offset) for c in confirmations] == [(0, 2), (0, 3)]


async def test_a_partition_stores_messages_in_send_order_keyed_or_not(
    client: iggy.Client,
) -> None:
    """Keyless messages are routed when accepted, and a batch takes the oldest messages of
    one partition without skipping any, whatever their sizes."""
    await client.create_stream(ADDRESS, partitions=2)
    sent: list[tuple[bytes, bytes | None]] = []
    for i in range(40):
        key = None if i % 3 else b"k%d" % (i % 2)
        sent.append((b"m%02d" % i + b"." * (300 if i % 4 == 1 else 0), key))
    async with client.producer(ADDRESS, max_batch_messages=3, max_batch_bytes=600) as producer:
        futures = [await producer.send(value, key=key) for value, key in sent]
        await producer.flush()
    where = [f.result().partition for f in futures]
    for partition in (0, 1):
        async with client.consumer(ADDRESS, offset="first", partition=partition) as consumer:
            got = [m.value for m in await consumer.next_batch(100, timeout=1)]
        want = [v for (v, _), p in zip(sent, where, strict=True) if p == partition]
        assert got == want
        assert want  # both partitions were used


async def test_every_polling_strategy(client: iggy.Client) -> None:
    await client.create_stream(ADDRESS, partitions=1)
    await client.send(ADDRESS, [b"0", b"1", b"2"])
    middle = datetime.now(UTC)
    await asyncio.sleep(0.01)
    await client.send(ADDRESS, [b"3", b"4"])

    async def read(offset: object, asked: int = 100, **kw: object) -> list[bytes]:
        async with client.consumer(ADDRESS, offset=offset, **kw) as consumer:  # type: ignore[arg-type]
            return [m.value for m in await consumer.next_batch(asked, timeout=1)]

    assert await read("first") == [b"0", b"1", b"2", b"3", b"4"]  # a reply spans records
    assert await read("last") == [b"4"]
    assert await read(3) == [b"3", b"4"]
    assert await read(middle) == [b"3", b"4"]
    assert await read(1, asked=1, batch_size=1) == [b"1"]  # one poll of one message
    assert await read("next") == []  # unnamed: only what is written from now on
    assert await read("next", name="app") == []  # nothing stored yet: the same
    async with client.consumer(ADDRESS, offset="first", name="app") as consumer:
        assert [m.value for m in await consumer.next_batch(2, timeout=1)] == [b"0", b"1"]
        await consumer.commit()
        assert await consumer.committed_offset() == 1
    assert await read("next", name="app") == [b"2", b"3", b"4"]  # after the stored offset


async def test_async_iteration_and_auto_commit(client: iggy.Client) -> None:
    await client.create_stream(ADDRESS, partitions=2)
    await client.send(ADDRESS, [b"a", b"b", b"c"], partition=0)
    await client.send(ADDRESS, [b"d"], partition=1)
    seen: list[bytes] = []
    consumer = await client.consumer(ADDRESS, name="worker", auto_commit_messages=2)
    async for message in consumer:
        seen.append(message.value)
        if len(seen) == 4:
            break
    await consumer.close()
    assert sorted(seen) == [b"a", b"b", b"c", b"d"]
    async with client.consumer(ADDRESS, name="worker") as check:
        assert await check.committed_offset(partition=0) == 2
        assert await check.committed_offset(partition=1) == 0
        with pytest.raises(ConfigurationError):
            await check.committed_offset()
    async with client.consumer(ADDRESS, name="srv", server_auto_commit=True) as server_side:
        await server_side.next_batch(10, timeout=1)
        stored = [await server_side.committed_offset(partition=p) for p in (0, 1)]
    assert stored in ([2, None], [None, 0])  # the server stored what the first poll returned


async def test_async_iteration_of_one_partition_matches_next_batch(client: iggy.Client) -> None:
    """``async for`` over one partition without a name (the native ready iterator when the
    core is there): the same messages in order as ``next_batch``, across several polls,
    and ``last_offset`` and the lag follow each message handed out, also when the two are
    mixed."""
    await client.create_stream(ADDRESS, partitions=1)
    values = [b"m%d" % i for i in range(25)]
    await client.send(ADDRESS, values, partition=0)
    async with client.consumer(ADDRESS, offset="first", batch_size=4) as batched:
        expected: list[tuple[int | None, bytes]] = []
        while len(expected) < len(values):
            expected += [(m.offset, m.value) for m in await batched.next_batch(100, timeout=5)]
    seen: list[tuple[int | None, bytes]] = []
    async with client.consumer(ADDRESS, offset="first", batch_size=4) as consumer:
        seen += [(m.offset, m.value) for m in await consumer.next_batch(3, timeout=5)]
        async for message in consumer:
            seen.append((message.offset, message.value))
            assert consumer.last_offset == message.offset
            if len(seen) == len(values):
                break
        assert consumer.stats.lag == 0
    assert seen == expected == list(enumerate(values))


async def test_consumer_groups_split_and_rebalance(client: iggy.Client, double: IggyDouble) -> None:
    await client.create_stream(ADDRESS, partitions=4)
    await client.send(ADDRESS, [b"p%d" % i for i in range(8)])  # balanced: one batch, p0
    for p in range(4):
        await client.send(ADDRESS, [f"{p}-x".encode()], partition=p)
    one = await client.consumer(ADDRESS, group="billing", auto_commit_messages=1)
    two = await client.consumer(ADDRESS, group="billing", auto_commit_messages=1)
    await one._sync(await one._connection())
    assert sorted(one.partitions + two.partitions) == [0, 1, 2, 3]
    assert not set(one.partitions) & set(two.partitions)
    got: list[bytes] = []
    for consumer in (one, two):
        while batch := await consumer.next_batch(100, timeout=0.3):
            got.extend(m.value for m in batch)
    assert sorted(got) == sorted(
        [b"p%d" % i for i in range(8)] + [f"{p}-x".encode() for p in range(4)]
    )
    group = await client.consumer_group(ADDRESS, "billing")
    assert group is not None
    assert group.group.members_count == 2
    await two.close()
    await client.send(ADDRESS, [b"late-%d" % p for p in range(4)], partition=None)
    late: list[bytes] = []
    while batch := await one.next_batch(100, timeout=0.3):
        late.extend(m.value for m in batch)
    assert sorted(one.partitions) == [0, 1, 2, 3]  # resynced after the rebalance
    assert late == [b"late-0", b"late-1", b"late-2", b"late-3"]
    await one.close()
    groups = await client.consumer_groups(ADDRESS)
    assert [(g.name, g.members_count) for g in groups] == [("billing", 0)]
    await client.delete_consumer_group(ADDRESS, "billing")
    await client.delete_consumer_group(ADDRESS, "billing", missing_ok=True)


async def test_eviction_surfaces_as_a_typed_error(double: IggyDouble) -> None:
    client = await iggy.connect(double.url, timeout=5, reconnect=None)
    try:
        await client.create_stream(ADDRESS)
        conn = await client.connection()
        double.evict(EvictionReason.STALE_CLIENT)
        with pytest.raises(StaleClient):  # the eviction lands before or during a request
            await asyncio.wait_for(_until_broken(conn), 5)
        assert isinstance(conn.error, StaleClient)
    finally:
        await client.close()


async def test_a_lost_connection_is_redialled(double: IggyDouble) -> None:
    policy = iggy.ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_elapsed=5.0)
    async with await iggy.connect(double.url, timeout=5, reconnect=policy) as client:
        await client.ping()
        double.evict(EvictionReason.STALE_CLIENT)
        conn = await client.connection()
        with pytest.raises(StaleClient):
            await asyncio.wait_for(_until_broken(conn), 5)
        await client.ping()  # a new connection, a new login
        assert sum(1 for r in double.requests if r.operation == 1) == 2


async def _until_broken(conn: iggy.Connection) -> None:
    while True:
        await conn.ping()
        await asyncio.sleep(0.01)


async def test_server_silence_times_out(double: IggyDouble) -> None:
    async with await iggy.connect(
        double.url, timeout=5, request_timeout=0.2, reconnect=None
    ) as client:
        double.silence(1)
        with pytest.raises(RequestTimeout):
            await client.streams()
        assert double.dropped[-1][1] == "silenced by the test"
        await client.ping()  # that connection is out of step: a new one is dialled
        assert sum(1 for r in double.requests if r.operation == 1) == 2


async def test_malformed_reply_is_a_protocol_error(double: IggyDouble, client: iggy.Client) -> None:
    double.corrupt_next_reply(lambda frame: frame[: 256 + 1] and _truncate_body(frame))
    with pytest.raises(ProtocolError):
        await client.streams()


def _truncate_body(frame: bytes) -> bytes:
    header = bytearray(frame[:256])
    header[48:52] = (256 + 3).to_bytes(4, "little")
    return bytes(header) + b"\x01\x02\x03"


async def test_reply_for_another_request_is_a_protocol_error(
    double: IggyDouble, client: iggy.Client
) -> None:
    def wrong_request(frame: bytes) -> bytes:
        header = bytearray(frame)
        header[200] ^= 0x7F
        return bytes(header)

    double.corrupt_next_reply(wrong_request)
    with pytest.raises(ProtocolError):
        await client.ping()


async def test_corrupted_stored_message_fails_the_checksum(
    double: IggyDouble, client: iggy.Client
) -> None:
    await client.create_stream(ADDRESS)
    await client.send(ADDRESS, [b"intact"])
    record = double.state.streams[0].topics[0].partitions[0].records[0]
    record.messages[0] = dataclasses.replace(record.messages[0], payload=b"tamper")
    async with client.consumer(ADDRESS) as consumer:
        with pytest.raises(ChecksumMismatchError):
            await consumer.next_batch(10, timeout=1)
    async with client.consumer(ADDRESS, verify_checksums=False) as lax:
        assert [m.value for m in await lax.next_batch(10, timeout=1)] == [b"tamper"]


async def test_missing_topic(client: iggy.Client) -> None:
    with pytest.raises(TopicNameNotFound):
        await client.producer("nope/nope").start()
    await client.create_stream("nope")
    with pytest.raises(TopicNameNotFound):
        await client.consumer("nope/missing").start()


async def test_heartbeat_pings_an_idle_connection(double: IggyDouble) -> None:
    async with await iggy.connect(double.url, timeout=5, heartbeat_interval=0.05) as client:
        await client.ping()
        before = sum(1 for r in double.requests if r.code == 1)
        for _ in range(200):
            if sum(1 for r in double.requests if r.code == 1) >= before + 2:
                break
            await asyncio.sleep(0.02)
        assert sum(1 for r in double.requests if r.code == 1) >= before + 2


async def test_tls(tmp_path: object) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    async with IggyDouble(ssl=server_ctx) as double:
        url = f"iggy+tls://iggy:iggy@{double.address}"
        tls = TLSOptions(ca_data=ca.cert_pem.bytes())
        async with await iggy.connect(url, tls=tls, timeout=5) as client:
            await client.create_stream(ADDRESS)
            await client.send(ADDRESS, [b"secret"])
            async with client.consumer(ADDRESS) as consumer:
                assert [m.value for m in await consumer.next_batch(5, timeout=1)] == [b"secret"]


SEND = Operation.SEND_MESSAGES


@pytest.mark.parametrize(("max_in_flight", "sent"), [(10, 2), (10_000, 3)])
async def test_max_in_flight_holds_batches_back(
    double: IggyDouble, max_in_flight: int, sent: int
) -> None:
    """The producer's ``max_in_flight`` counts messages sent and not confirmed: with the
    server silent, batches of 5 stop going out once 10 are unconfirmed (2 requests); without
    it the connection's own limit of 3 requests is what stops them."""
    async with await iggy.connect(
        double.url, timeout=5, request_timeout=30, reconnect=None, max_in_flight=3
    ) as client:
        await client.create_stream("w/t")
        producer = await client.producer(
            "w/t", max_batch_messages=5, max_in_flight=max_in_flight, partition=0
        )
        before = len(double.requests)
        double.silence(100)  # from now on, nothing is answered
        try:
            await producer.send_many([b"x"] * 50)
            for _ in range(500):  # until what may go out went out (or 5 s)
                if sum(1 for r in double.requests[before:] if r.operation == SEND) >= sent:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # room for a request the limit would not hold back
            assert sum(1 for r in double.requests[before:] if r.operation == SEND) == sent
        finally:
            producer.abort()
