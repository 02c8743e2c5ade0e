"""Consumer-group coordinator failover on a real three-node Liftbridge cluster (the harness's
binary, started by the test on the harness's NATS, as in ``test_failover``), with shorter
group timeouts: the coordinator is killed with SIGKILL while a member consumes; the member
reports it, learns the new coordinator and keeps its partitions and its place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.errors import StreamwireError
from tests.brokers import require
from tests.integration.liftbridge.cluster import ClusterDidNotForm, LocalCluster
from tests.proxy import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

CONSUMER_TIMEOUT = 6
COORDINATOR_TIMEOUT = 3
PARTITIONS = 4


class GroupCluster(LocalCluster):
    """The failover cluster, with the group timeouts shortened."""

    def _config(self, server_id: str, port: int, peers: list[str]) -> str:
        return super()._config(server_id, port, peers) + (
            "groups:\n"
            f"  consumer.timeout: {CONSUMER_TIMEOUT}s\n"
            f"  coordinator.timeout: {COORDINATOR_TIMEOUT}s\n"
        )


@pytest.fixture
def cluster_setup() -> tuple[str, str, str]:
    """(binary, NATS URL, version) of the harness's Liftbridge."""
    info = require("liftbridge")
    binary = info.extra.get("BINARY", "")
    if not binary or not Path(binary).is_file():
        pytest.skip("the harness recorded no Liftbridge binary to start a cluster with")
    return binary, info.extra.get("NATS_URL", "nats://127.0.0.1:4222"), info.version


@pytest.fixture
async def cluster(
    tmp_path: Path, cluster_setup: tuple[str, str, str]
) -> AsyncIterator[GroupCluster]:
    binary, nats_url, version = cluster_setup
    c = GroupCluster(binary, nats_url, tmp_path, version=version)
    try:
        await c.start()
    except ClusterDidNotForm as exc:  # see test_failover: not what this test is about
        pytest.skip(f"the three Liftbridge servers did not form a cluster: {str(exc)[:1500]}")
    try:
        yield c
    finally:
        c.stop()


async def publish_until_acked(client: lb.Client, stream: str, partition: int, value: bytes) -> None:
    """Retry while leaders are elected (at-least-once: a retry may store it twice)."""
    async with asyncio.timeout(60):
        while True:
            try:
                await client.publish(stream, value, partition=partition, timeout=2)
                return
            except StreamwireError as exc:
                if not getattr(exc, "retriable", True):
                    raise
                await asyncio.sleep(0.2)


async def full_isr(client: lb.Client, stream: str) -> None:
    async with asyncio.timeout(30):
        while True:
            info = await client.stream_info(stream)
            if all(len(p.isr) == 3 and p.leader for p in info.partitions.values()):
                return
            await asyncio.sleep(0.2)


async def read_values(member: lb.GroupConsumer, count: int) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(60):
        while len(out) < count:
            out += await member.next_batch(count - len(out), timeout=1)
    return out


async def test_member_survives_coordinator_failover(cluster: GroupCluster) -> None:
    first, *_ = cluster.nodes
    stream = "group-failover"
    group = "failover-group"
    await cluster.create_stream(first, stream, partitions=PARTITIONS, replication_factor=3)
    policy = lb.ReconnectPolicy(initial_delay=0.2, max_delay=1.0, max_elapsed=60.0)
    client = await lb.connect(cluster.url(first), timeout=10, reconnect=policy)
    try:
        await full_isr(client, stream)
        for p in range(PARTITIONS):
            for i in range(2):
                await publish_until_acked(client, stream, p, f"a-{p}-{i}".encode())
        async with client.group_consumer(
            group, stream, fetch_interval=0.5, auto_checkpoint_interval=0.5
        ) as member:
            membership = member.membership
            assert membership is not None
            assert membership.consumer_timeout == CONSUMER_TIMEOUT
            assert membership.coordinator_timeout == COORDINATOR_TIMEOUT
            before = await read_values(member, 2 * PARTITIONS)
            assert sorted(m.value for m in before) == sorted(
                f"a-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(2)
            )
            await wait_until(
                lambda: all(member.committed.get((stream, p)) == 1 for p in range(PARTITIONS)),
                10,
                "checkpointed",
            )
            old = member.coordinator
            assert old in cluster.nodes
            loop = asyncio.get_running_loop()
            cluster.nodes[old].kill()
            killed = loop.time()

            # keep publishing while the cluster fails over; the member keeps reading
            for p in range(PARTITIONS):
                await publish_until_acked(client, stream, p, f"b-{p}".encode())
            after = await read_values(member, PARTITIONS)
            assert sorted(m.value for m in after) == sorted(
                f"b-{p}".encode() for p in range(PARTITIONS)
            )
            # checkpoints go on at the __cursors partition's new leader
            last = {(stream, m.partition or 0): m.offset for m in after}
            await wait_until(
                lambda: all(member.committed.get(k) == o for k, o in last.items()),
                20,
                "checkpointed after the failover",
            )
            await wait_until(lambda: member.coordinator not in ("", old), 60, "new coordinator")
            moved_after = loop.time() - killed
            assert moved_after >= COORDINATOR_TIMEOUT - 0.5, moved_after
            # still the same member, with all partitions, heartbeating the new coordinator
            epoch = member.epoch
            await asyncio.sleep(2 * CONSUMER_TIMEOUT / 3)
            assert member.rejoins == 0
            assert member.assignments == {stream: list(range(PARTITIONS))}
            assert member.epoch >= epoch
            assert await member.next_batch(timeout=0.5) == []
    except (StreamwireError, AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc!r}\n{cluster.logs()}") from exc
    finally:
        await client.close()
