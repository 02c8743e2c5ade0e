"""Leader failover on a real three-node Liftbridge cluster (the harness's binary, started by
the test itself on the harness's NATS): the partition leader is killed with SIGKILL while a
consumer reads from it and a producer publishes over NATS."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import streamwire.liftbridge as lb
from streamwire.errors import StreamwireError
from tests.brokers import skip_missing
from tests.integration.liftbridge.cluster import (
    ClusterDidNotForm,
    LocalCluster,
    harness_liftbridge,
)
from tests.integration.liftbridge.conftest import unique

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge, pytest.mark.one_core]


@pytest.fixture
def cluster_setup() -> tuple[str, str, str]:
    """(binary, NATS URL, version) of the harness's Liftbridge."""
    return harness_liftbridge()


@pytest.fixture
async def cluster(
    tmp_path: Path, cluster_setup: tuple[str, str, str]
) -> AsyncIterator[LocalCluster]:
    binary, nats_url, version = cluster_setup
    c = LocalCluster(binary, nats_url, tmp_path, version=version)
    try:
        await c.start()
    except ClusterDidNotForm as exc:
        # Seen with v1.9.0 on a loaded 2-core machine: one node's log stops at "Starting
        # Liftbridge server" (its Raft setup never returns). Not what this test is about.
        skip_missing(f"the three Liftbridge servers did not form a cluster: {str(exc)[:1500]}")
    try:
        yield c
    finally:
        c.stop()


async def wait_for_full_isr(client: lb.Client, stream: str, size: int) -> lb.PartitionInfo:
    async with asyncio.timeout(30):
        while True:
            p = (await client.stream_info(stream)).partitions[0]
            if len(p.isr) == size and p.leader:
                return p
            await asyncio.sleep(0.2)


async def publish_until_acked(producer: lb.Producer, value: bytes) -> int:
    """Retry on ack timeouts (nobody leads the subject during the election)."""
    async with asyncio.timeout(60):
        while True:
            try:
                conf = await producer.send_and_wait(value)
            except lb.AckTimeout:
                continue
            assert conf.offset is not None
            return conf.offset


async def test_consumer_and_producer_survive_leader_failover(cluster: LocalCluster) -> None:
    first = next(iter(cluster.nodes))
    stream = unique("failover")  # the NATS subject too
    await cluster.create_stream(first, stream, replication_factor=3)
    async with await lb.connect(cluster.url(first), timeout=10) as admin:
        leader = (await wait_for_full_isr(admin, stream, 3)).leader
    policy = lb.ReconnectPolicy(initial_delay=0.2, max_delay=1.0, max_elapsed=60.0)
    # Seeded at the node about to die: metadata must come from the survivors afterwards.
    client = await lb.connect(cluster.url(leader), timeout=10, reconnect=policy)
    try:
        async with (
            client.producer(stream, ack_policy=lb.AckPolicy.ALL, ack_timeout=1.0) as producer,
            client.consumer(stream, offset="first") as consumer,
        ):
            # ALL acks: replicated to the whole ISR. Retried while the new cluster settles
            # (a retry can store a message twice: at-least-once).
            before = [await publish_until_acked(producer, f"m{i}".encode()) for i in range(5)]
            assert before == sorted(set(before))
            seen: list[int] = []
            async with asyncio.timeout(30):
                while not seen or seen[-1] < before[-1]:
                    seen += [m.offset or 0 for m in await consumer.next_batch(10, timeout=10)]

            # Only an in-sync replica can take over: make sure both followers still are.
            assert (await wait_for_full_isr(client, stream, 3)).leader == leader
            cluster.nodes[leader].kill()

            # LEADER acks now: ALL would wait until the dead replica leaves the ISR
            # (clustering.replica.max.lag.time, 15 s by default).
            async with client.producer(stream, ack_timeout=1.0) as leader_acks:
                after = [await publish_until_acked(leader_acks, f"n{i}".encode()) for i in range(5)]
            assert after == sorted(set(after))
            assert after[0] > before[-1]
            got: list[tuple[int, bytes]] = []
            async with asyncio.timeout(60):
                while not got or got[-1][0] < after[-1]:
                    msg = await consumer.next()
                    assert msg is not None
                    assert msg.offset is not None
                    got.append((msg.offset, msg.value))
            assert consumer.resubscriptions >= 1
        offsets = [o for o, _ in got]
        assert offsets == sorted(set(offsets))  # no duplicates, in order
        assert offsets[0] == seen[-1] + 1  # resumed right after what was read before
        values = dict(got)
        for offset, i in zip(after, range(5), strict=True):
            assert values[offset] == f"n{i}".encode()
        new_leader = (await client.stream_info(stream)).partitions[0].leader
        assert new_leader not in ("", leader)
    except (StreamwireError, AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc!r}\n{cluster.logs()}") from exc
    finally:
        await client.close()
