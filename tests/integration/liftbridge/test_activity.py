"""Liftbridge's activity stream through ``client.activity_stream()``, on a three-node v1.9.0
cluster started with ``activity.stream.enabled: true``: every stream operation arrives as a
typed event, a named reader resumes after what it committed, and the stream goes on after
its partition's leader is killed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

import streamwire.liftbridge as lb
from streamwire.errors import StreamwireError
from streamwire.liftbridge.activity import ACTIVITY_STREAM, ActivityEvent, ActivityOp
from tests.brokers import skip_missing
from tests.integration.liftbridge.cluster import ClusterDidNotForm, LocalCluster, harness_liftbridge
from tests.integration.liftbridge.conftest import unique

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]


async def test_without_the_activity_stream_the_reader_says_so(client: lb.Client) -> None:
    """The harness's server runs without ``activity.stream.enabled``."""
    with pytest.raises(lb.StreamNotFound, match="__activity"):
        async with client.activity_stream():
            pass


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    binary, nats_url, version = harness_liftbridge()
    c = LocalCluster(binary, nats_url, tmp_path, version=version, activity=True)
    try:
        await c.start()
    except ClusterDidNotForm as exc:  # as in test_failover.py: not what this test is about
        skip_missing(f"the three Liftbridge servers did not form a cluster: {str(exc)[:1500]}")
    try:
        yield c
    finally:
        c.stop()


async def events_until(
    activity: lb.ActivityStream, done: ActivityOp, stream: str
) -> list[ActivityEvent]:
    """Events up to and including ``done`` on ``stream`` (60 s at most)."""
    got: list[ActivityEvent] = []
    async with asyncio.timeout(60):
        async for event in activity:
            got.append(event)
            if event.op is done and event.stream == stream:
                return got
    raise AssertionError(f"the activity stream ended after {got}")


async def retried(call: Callable[[], Awaitable[object]]) -> None:
    """Admin calls right after an election may fail with a retriable error: retry them."""
    async with asyncio.timeout(60):
        while True:
            try:
                await call()
                return
            except StreamwireError as exc:
                if not getattr(exc, "retriable", False):
                    raise
            await asyncio.sleep(0.3)


@pytest.mark.one_core
async def test_the_activity_stream_gives_typed_events_resumes_and_survives_its_leader(
    cluster: LocalCluster,
) -> None:
    first = next(iter(cluster.nodes))
    policy = lb.ReconnectPolicy(initial_delay=0.2, max_delay=1.0, max_elapsed=60.0)
    client = await lb.connect(cluster.url(first), timeout=10, reconnect=policy)
    try:
        orders = unique("activity")
        await retried(lambda: client.create_stream(orders, partitions=2))
        await client.pause_stream(orders, partitions=[1], resume_all=True)
        await client.set_stream_readonly(orders, partitions=[0])
        await client.delete_stream(orders)

        async with client.activity_stream(name="watcher") as activity:
            got = await events_until(activity, ActivityOp.DELETE_STREAM, orders)
            # the cursor partition of a cluster this young may still time SetCursor out
            await retried(activity.commit)
        mine = [e for e in got if e.stream == orders]
        assert [e.op for e in mine] == [
            ActivityOp.CREATE_STREAM,
            ActivityOp.PAUSE_STREAM,
            ActivityOp.SET_STREAM_READONLY,
            ActivityOp.DELETE_STREAM,
        ]
        assert sorted(mine[0].partitions) == [0, 1]
        assert mine[1].partitions == (1,)
        assert mine[1].resume_all is True
        assert mine[2].partitions == (0,)
        assert mine[2].readonly is True
        assert [e.offset for e in got] == sorted({e.offset for e in got})
        # the server records an event at least once (v1.9.0 writes the creation of
        # __activity itself twice, same id): the reader hands each out once
        ids = [e.id for e in got]
        assert ids == sorted(set(ids))

        # a reader under the same name resumes after what it committed
        later = unique("activity-later")
        await client.create_stream(later)
        async with client.activity_stream(offset="next", name="watcher") as activity:
            [event] = await activity.next_batch(1, timeout=30)
            await retried(activity.commit)
        assert (event.op, event.stream) == (ActivityOp.CREATE_STREAM, later)
        assert event.offset == got[-1].offset + 1

        # the activity stream's partition leader goes away; the reader follows the new one
        async with client.activity_stream(offset="next", name="watcher") as activity:
            leader = (await client.stream_info(ACTIVITY_STREAM)).partitions[0].leader
            cluster.nodes[leader].kill()
            survivor = next(s for s in cluster.nodes if s != leader)
            after = unique("activity-after")
            async with await lb.connect(cluster.url(survivor), timeout=10) as other:
                await retried(lambda: other.create_stream(after))
            events = await events_until(activity, ActivityOp.CREATE_STREAM, after)
        assert [(e.op, e.stream) for e in events][-1] == (ActivityOp.CREATE_STREAM, after)
        assert all(e.offset > event.offset for e in events)
    finally:
        await client.close()
