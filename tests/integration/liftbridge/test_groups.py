"""Consumer groups against the real server (Liftbridge v1.9.0, single node): partitions
split between members, taken over when one leaves or expires, resumed after the group's
checkpoint; checkpoints, closing and option errors."""

from __future__ import annotations

import asyncio
import time

import pytest

import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.errors import ClosedError, ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.groups import GroupInfo, group_info_from_pb
from tests.integration.liftbridge.conftest import NewStream, reader_threads, unique
from tests.proxy import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

#: Heartbeats this often in the tests (the server's consumer timeout is 15 s).
FAST = 0.5


async def group_info(client: lb.Client, group: str) -> GroupInfo:
    resp = await client._call(
        "FetchMetadata",
        pb.FetchMetadataRequest(streams=["-"], groups=[group]),
        timeout=10,
        what="FetchMetadata",
    )
    return group_info_from_pb(group, resp)


async def publish(client: lb.Client, stream: str, partitions: int, count: int, tag: str) -> None:
    for p in range(partitions):
        for i in range(count):
            await client.publish(stream, f"{tag}-{p}-{i}".encode(), partition=p)


async def read(consumer: lb.GroupConsumer, count: int, timeout: float = 10.0) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(out) < count:
            out += await consumer.next_batch(count - len(out), timeout=0.5)
    return out


def keys(messages: list[Message]) -> list[tuple[int, int]]:
    return sorted((m.partition or 0, m.offset or 0) for m in messages)


async def test_members_split_partitions_and_one_takes_over_after_the_other_leaves(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=4)
    group = unique("sw-group")
    cursor = f"__group:{group}"
    a = client.group_consumer(
        group, stream, consumer_id="a", fetch_interval=FAST, auto_checkpoint_interval=None
    )
    b = client.group_consumer(
        group, stream, consumer_id="b", fetch_interval=FAST, auto_checkpoint_interval=None
    )
    await a
    assert a.assignments == {stream: [0, 1, 2, 3]}  # alone in the group
    membership = a.membership
    assert membership is not None
    assert (membership.consumer_timeout, membership.coordinator_timeout) == (15.0, 15.0)
    assert a.fetch_interval == FAST
    try:
        await b
        # a notices the new epoch at its next heartbeat and gives two partitions up
        await wait_until(
            lambda: len(a.assignments.get(stream, [])) == 2, 5, "a gives up two partitions"
        )
        mine_a, mine_b = a.assignments[stream], b.assignments[stream]
        assert sorted(mine_a + mine_b) == [0, 1, 2, 3]
        assert a.rebalances == 1
        assert a.epoch == b.epoch
        info = await group_info(client, group)
        assert info.exists
        assert info.epoch == a.epoch
        assert info.coordinator == a.coordinator

        await publish(client, stream, 4, 5, "one")
        got_a, got_b = await read(a, 10), await read(b, 10)
        assert keys(got_a) == [(p, o) for p in mine_a for o in range(5)]
        assert keys(got_b) == [(p, o) for p in mine_b for o in range(5)]
        assert await a.next_batch(timeout=0.3) == []

        await a.close()  # checkpoints what it handed out, then leaves
        for p in mine_a:
            assert await client.fetch_cursor(stream, p, cursor) == 4
        for p in mine_b:  # b checkpoints only on its interval, commit() or close
            assert await client.fetch_cursor(stream, p, cursor) is None
        await wait_until(lambda: b.assignments.get(stream) == [0, 1, 2, 3], 5, "b takes all four")
        assert b.rebalances == 1

        await publish(client, stream, 4, 3, "two")
        got = await read(b, 12)
        # nothing a handed out comes again, nothing is lost
        assert keys(got) == [(p, o) for p in range(4) for o in range(5, 8)]
        assert {m.value for m in got} == {
            f"two-{p}-{i}".encode() for p in range(4) for i in range(3)
        }
        assert await b.next_batch(timeout=0.3) == []
        await b.commit()
        for p in range(4):
            assert await client.fetch_cursor(stream, p, cursor) == 7
        assert b.stats.consumed == 22
    finally:
        await a.close()
        await b.close()
    assert not (await group_info(client, group)).exists  # the last member left: gone
    await wait_until(lambda: not reader_threads(), 5, "reading threads end")


@pytest.mark.one_core  # membership timing, not the codec: docs/development.md, "CI"
async def test_a_member_that_stops_heartbeating_is_expired(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=4)
    group = unique("sw-group")
    async with client.group_consumer(group, stream, fetch_interval=FAST) as live:
        assert live.assignments == {stream: [0, 1, 2, 3]}
        # a member that joins and never fetches its assignments (a crashed process)
        await client._call(
            "JoinConsumerGroup",
            pb.JoinConsumerGroupRequest(groupId=group, consumerId="ghost", streams=[stream]),
            timeout=10,
            what="JoinConsumerGroup",
        )
        await wait_until(lambda: len(live.assignments[stream]) == 2, 5, "the ghost gets two")
        # the coordinator expires the silent ghost (15 s after its join, docs/liftbridge.md);
        # the live member hears of it at its next heartbeat and takes every partition
        await wait_until(lambda: len(live.assignments[stream]) == 4, 25, "the ghost expires")
        assert live.rebalances == 2
        await publish(client, stream, 4, 1, "after")
        assert keys(await read(live, 4)) == [(p, 0) for p in range(4)]


async def test_auto_checkpoint_stores_the_group_cursor(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=1)
    group = unique("sw-group")
    cursor = f"__group:{group}"
    await publish(client, stream, 1, 3, "a")
    async with client.group_consumer(
        group, [stream], auto_checkpoint_interval=0.3, fetch_interval=FAST
    ) as member:
        assert [m.value for m in await read(member, 2)] == [b"a-0-0", b"a-0-1"]
        await wait_until(lambda: member.committed.get((stream, 0)) == 1, 3, "checkpointed")
        assert await client.fetch_cursor(stream, 0, cursor) == 1
        assert member.stats.committed_offset == 1
        # the cursor does not move while nothing more is handed out
        await asyncio.sleep(0.7)
        assert await client.fetch_cursor(stream, 0, cursor) == 1
    # closing stored nothing more (the third message was never handed out): a new member
    # of the group starts right after the checkpoint
    await publish(client, stream, 1, 1, "b")
    async with client.group_consumer(group, stream, fetch_interval=FAST) as again:
        got = await read(again, 2)
        assert [(m.offset, m.value) for m in got] == [(2, b"a-0-2"), (3, b"b-0-0")]


async def test_offset_applies_only_without_a_group_cursor(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=1)
    group = unique("sw-group")
    await publish(client, stream, 1, 2, "old")
    async with client.group_consumer(group, stream, offset="next", fetch_interval=FAST) as m:
        assert await m.next_batch(timeout=0.5) == []
        await publish(client, stream, 1, 1, "new")
        (msg,) = await read(m, 1)
        assert (msg.offset, msg.value) == (2, b"new-0-0")
    await client.set_cursor(stream, 0, f"__group:{group}", 0)
    async with client.group_consumer(group, stream, offset="next", fetch_interval=FAST) as m:
        assert [x.offset for x in await read(m, 2)] == [1, 2]


async def test_cancelled_close_still_checkpoints_and_leaves(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=2)
    group = unique("sw-group")
    await publish(client, stream, 2, 2, "x")
    member = await client.group_consumer(
        group, stream, fetch_interval=FAST, auto_checkpoint_interval=None
    )
    await read(member, 4)
    closing = asyncio.create_task(member.close())
    await asyncio.sleep(0)
    assert member._closer is not None  # closing had begun
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing  # the caller's cancellation is not swallowed
    async with asyncio.timeout(15):
        await member.close()  # waits for the closing that went on
    assert not (await group_info(client, group)).exists
    for p in range(2):
        assert await client.fetch_cursor(stream, p, f"__group:{group}") == 1
    assert await member.next_batch(timeout=0.1) == []
    with pytest.raises(StopAsyncIteration):
        await member.__anext__()


async def test_a_consumer_id_still_in_the_group_joins_again(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=1)
    group = unique("sw-group")
    await client._call(
        "JoinConsumerGroup",
        pb.JoinConsumerGroupRequest(groupId=group, consumerId="same", streams=[stream]),
        timeout=10,
        what="JoinConsumerGroup",
    )
    async with client.group_consumer(group, stream, consumer_id="same") as member:
        assert member.assignments == {stream: [0]}
        assert member.fetch_interval == pytest.approx(0.7 * 15.0)


async def test_errors(client: lb.Client, new_stream: NewStream) -> None:
    stream = await new_stream(partitions=1)
    group = unique("sw-group")
    for bad in (
        {"auto_checkpoint_interval": 0},
        {"auto_checkpoint_interval": -1.0},
        {"auto_checkpoint_interval": True},
        {"fetch_interval": 0},
        {"fetch_interval": "1"},
        {"max_buffered_messages": 0},
        {"no_such_option": 1},
    ):
        with pytest.raises(ConfigurationError):
            client.group_consumer(group, stream, **bad)
    with pytest.raises(ConfigurationError):
        client.group_consumer("", stream)
    with pytest.raises(ConfigurationError):
        client.group_consumer(group, [])
    with pytest.raises(ConfigurationError):
        client.group_consumer(group, [stream, stream])
    with pytest.raises(ConfigurationError):
        client.group_consumer(group, stream, consumer_id="")
    with pytest.raises(ConfigurationError):
        client.group_consumer(group, stream, offset=5)
    with pytest.raises(lb.StreamNotFound):
        await client.group_consumer(group, [stream, "sw-lb-no-such-stream-x"])
    # longer than the server's consumer timeout: refused once the server says it
    with pytest.raises(ConfigurationError, match="consumer timeout"):
        await client.group_consumer(group, stream, fetch_interval=20.0)
    assert not (await group_info(client, group)).exists  # it left again
    async with client.group_consumer(group, stream, fetch_interval=FAST) as member:
        with pytest.raises(ConfigurationError):
            await member.commit(3)
    with pytest.raises(ClosedError):
        await client.group_consumer(group, stream).next_batch()


@pytest.mark.one_core  # membership timing, not the codec: docs/development.md, "CI"
async def test_a_member_removed_while_stalled_joins_again_and_resumes_after_the_checkpoint(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=2)
    group = unique("sw-group")
    await publish(client, stream, 2, 3, "before")
    async with client.group_consumer(
        group, stream, fetch_interval=FAST, auto_checkpoint_interval=None
    ) as member:
        first = await read(member, 6)
        assert keys(first) == [(p, o) for p in range(2) for o in range(3)]
        await member.commit()  # cursors at 2
        epoch = member.epoch
        # the event loop blocks longer than the consumer timeout (a long pause of the
        # process): no heartbeats, and the coordinator removes the member
        time.sleep(16.0)  # noqa: ASYNC251 - blocking the loop is the point
        await wait_until(lambda: member.rejoins == 1, 10, "the member joins again")
        # the assignment comes with the rejoined member's next fetch (fetch_interval)
        await wait_until(
            lambda: member.assignments == {stream: [0, 1]}, 10, "both partitions assigned again"
        )
        # the last member gone, the server deleted the group; the join made it anew, and
        # a new group's epoch is 0 again
        assert epoch == member.epoch == 0
        await publish(client, stream, 2, 1, "after")
        got = await read(member, 2)
        assert keys(got) == [(0, 3), (1, 3)]  # after the checkpoint, nothing twice
        assert await member.next_batch(timeout=0.3) == []
