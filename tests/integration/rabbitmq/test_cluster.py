"""A replicated stream on the harness's three-node RabbitMQ 4.3 cluster (``rabbitmq-cluster``)
keeps serving while the node of its leader is down, and that node comes back.

``make brokers`` (so ``make test``) starts the cluster as an optional broker; the tests use it
when it is up (``integration/brokers.sh up rabbitmq-cluster``), start it themselves when
``STREAMWIRE_TEST_CLUSTER=1`` (``make test-cluster``; they then take it down again), and
otherwise skip, saying how to run it. It stops and starts one node through
``integration/brokers.sh stop|start rabbitmq-cluster N`` and always leaves every node running;
one test resets node 3 and checks that ``integration/brokers.sh up rabbitmq-cluster`` joins it
again.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from streamwire.rabbitmq.protocol.errors import StreamsServerError
from tests import brokers
from tests.brokers import BrokerInfo, HarnessError, require, skip_missing

pytestmark = [
    pytest.mark.integration,
    pytest.mark.rabbitmq,
    pytest.mark.one_core,
    pytest.mark.timeout(420),
]

NAME = "rabbitmq-cluster"
SLACK = 90.0
#: Failover after a node stops, and rejoining after it starts, can take a while on 2 busy cores.
RECOVERY = rmq.ReconnectPolicy(initial_delay=0.2, max_delay=1.0, max_elapsed=SLACK)


def _cluster_answers() -> bool:
    env = brokers.brokers_dir() / f"{NAME}.env"
    return env.is_file() and brokers._answers("127.0.0.1", int(brokers.read_env(env)["PORT"]))


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerInfo]:
    started = False
    if not _cluster_answers():
        if os.environ.get("STREAMWIRE_TEST_CLUSTER") != "1":
            skip_missing(
                "the three-node RabbitMQ cluster is not started by default: run "
                "integration/brokers.sh up rabbitmq-cluster, or make test-cluster"
            )
        try:
            await brokers.ensure_up(NAME, timeout=300)
        except HarnessError as exc:
            skip_missing(f"integration/brokers.sh up {NAME} failed: {exc}")
        started = True
    info = require(NAME)
    if info.extra.get("BACKEND") != "native-chroot" or info.host != "127.0.0.1":
        skip_missing(f"{NAME} was not started by integration/brokers.sh on this machine")
    if os.geteuid() != 0:
        skip_missing(f"stopping and starting a node of the native {NAME} needs root")
    try:
        yield info
    finally:
        if started:
            await brokers.down(NAME)


def node_ports(info: BrokerInfo) -> dict[int, int]:
    """Node number → stream port (``PORT_NODE<n>`` in the env file)."""
    return {int(k.removeprefix("node")): v for k, v in info.ports.items() if k.startswith("node")}


def url_of(info: BrokerInfo, port: int) -> str:
    return f"rabbitmq-stream://guest:guest@{info.host}:{port}/"


async def placement(
    client: rmq.Client, stream: str, *, avoid: int | None = None, members: int | None = 3
) -> rmq.StreamInfo:
    """The stream's leader and replicas once its leader is not on port ``avoid`` and (unless
    ``members`` is None) Metadata names ``members`` nodes for it."""
    last: object = None
    async with asyncio.timeout(SLACK):
        while True:
            try:
                info = await client.stream_info(stream)
            except StreamsServerError as exc:  # no leader yet
                last = exc
            else:
                last = info
                if info.leader[1] != avoid and members in (None, 1 + len(info.replicas)):
                    return info
            await asyncio.sleep(0.5)
    raise AssertionError(f"stream {stream}: {last!r}")  # pragma: no cover (timeout raises)


async def publish(client: rmq.Client, stream: str, name: str, values: list[bytes]) -> None:
    async with client.producer(stream, name=name) as producer:
        futures = [await producer.send(v, timeout=SLACK) for v in values]
        async with asyncio.timeout(SLACK):
            await asyncio.gather(*futures)


async def read_all(client: rmq.Client, stream: str, expect: int) -> list[bytes]:
    out: list[bytes] = []
    async with client.consumer(stream, offset="first") as c, asyncio.timeout(SLACK):
        while len(out) < expect:
            out += [m.value for m in await c.next_batch(1000, timeout=5)]
        out += [m.value for m in await c.next_batch(1000, timeout=0.5)]
    return out


async def test_a_replicated_stream_survives_the_loss_of_its_leaders_node(
    cluster: BrokerInfo,
) -> None:
    ports = node_ports(cluster)
    assert sorted(ports) == [1, 2, 3], cluster.ports
    assert cluster.version.startswith("4.3."), cluster.version
    stream = f"sw-cluster-{uuid.uuid4().hex[:8]}"
    producer_name = f"p-{uuid.uuid4().hex[:8]}"
    first = [f"a{i}".encode() for i in range(100)]
    second = [f"b{i}".encode() for i in range(100)]

    client = await rmq.connect(cluster.url, timeout=10)
    try:
        await client.create_stream(stream)
        before = await placement(client, stream)
        await publish(client, stream, producer_name, first)
        assert await read_all(client, stream, 100) == first
    finally:
        await client.close()
    advertised = {before.leader[1], *(port for _, port in before.replicas)}
    assert advertised == set(ports.values()), before  # one member per node, all advertised
    leader_node = next(n for n, port in ports.items() if port == before.leader[1])
    survivor = ports[next(n for n in ports if n != leader_node)]

    await brokers.cluster_stop(leader_node)
    try:
        assert not brokers._answers(cluster.host, ports[leader_node])
        client = await rmq.connect(url_of(cluster, survivor), timeout=10, reconnect=RECOVERY)
        try:
            during = await placement(client, stream, avoid=before.leader[1], members=None)
            assert during.leader[1] != before.leader[1]
            await publish(client, stream, producer_name, second)
            assert await read_all(client, stream, 200) == first + second
        finally:
            await client.close()
    finally:
        await brokers.cluster_start(leader_node)

    assert brokers._answers(cluster.host, ports[leader_node])
    client = await rmq.connect(url_of(cluster, ports[leader_node]), timeout=10)
    try:
        after = await placement(client, stream)
        rejoined = {after.leader[1], *(port for _, port in after.replicas)}
        assert rejoined == set(ports.values()), after  # the node is a member again
        assert await read_all(client, stream, 200) == first + second
    finally:
        await client.delete_stream(stream, missing_ok=True)
        await client.close()


def every_node_url(info: BrokerInfo) -> str:
    """One URL naming the three nodes: the client tries them in turn."""
    nodes = ",".join(f"{info.host}:{port}" for _, port in sorted(node_ports(info).items()))
    return f"rabbitmq-stream://guest:guest@{nodes}/"


def port_of(conn: object) -> int:
    address: str = getattr(conn, "address")  # noqa: B009 - the driver's "host:port"
    return int(address.rpartition(":")[2])


async def test_consumers_read_from_a_replica_unless_told_otherwise(cluster: BrokerInfo) -> None:
    stream = f"sw-replica-{uuid.uuid4().hex[:8]}"
    client = await rmq.connect(every_node_url(cluster), timeout=10)
    try:
        await client.create_stream(stream)
        info = await placement(client, stream)
        await publish(client, stream, "p", [b"x", b"y"])
        replicas = {port for _, port in info.replicas}
        async with client.consumer(stream, offset="first") as on_replica:
            assert [m.value for m in await on_replica.next_batch(10, timeout=10)] == [b"x", b"y"]
            assert port_of(on_replica._conn) in replicas
        async with client.consumer(stream, offset="first", from_replica=False) as on_leader:
            assert len(await on_leader.next_batch(10, timeout=10)) == 2
            assert port_of(on_leader._conn) == info.leader[1]
    finally:
        await client.delete_stream(stream, missing_ok=True)
        await client.close()


@pytest.mark.parametrize("victim", ["leader", "replica"])
async def test_publishing_and_consuming_through_the_loss_of_a_node(
    cluster: BrokerInfo, victim: str
) -> None:
    """A named producer publishes steadily and a named consumer reads while one node is
    stopped and started again — the leader's, or the replica's the consumer reads from:
    every confirmed message is in the stream exactly once, in order, and the consumer sees
    each once, without a gap. The client was given the three nodes, so losing the one it
    first reached costs it nothing."""
    ports = node_ports(cluster)
    stream = f"sw-failover-{uuid.uuid4().hex[:8]}"
    total = 3000
    values = [f"m{i:05d}".encode() for i in range(total)]
    client = await rmq.connect(every_node_url(cluster), timeout=10, reconnect=RECOVERY)
    read: list[bytes] = []
    node: int | None = None
    try:
        await client.create_stream(stream)
        before = await placement(client, stream)
        async with client.producer(stream, name="writer") as producer:
            await producer.send_and_wait(values[0])
        consumer = client.consumer(stream, offset="first", name="reader")
        await consumer.start()
        read.extend(m.value for m in await consumer.next_batch(10, timeout=10))
        assert read == values[:1]
        on = before.leader[1] if victim == "leader" else port_of(consumer._conn)
        assert (on == before.leader[1]) == (victim == "leader")
        node = next(n for n, port in ports.items() if port == on)

        async def consume() -> None:
            while len(read) < total:
                batch = await consumer.next_batch(500, timeout=5)
                read.extend(m.value for m in batch)
                if batch:
                    await consumer.commit(batch[-1].offset)

        reader = asyncio.create_task(consume())
        stopping_at = stopped_at = confirmed_after_stop = 0.0
        loop = asyncio.get_running_loop()
        async with client.producer(stream, name="writer") as producer:
            futures = []
            for i, value in enumerate(values[1:], start=1):
                futures.append(await producer.send(value, timeout=SLACK))
                if i % 100 == 99:
                    await asyncio.sleep(0.02)  # a steady stream, not one burst
                if i == total // 3:
                    await producer.flush(timeout=SLACK)
                    stopping_at = loop.time()
                    await brokers.cluster_stop(node)
                    stopped_at = loop.time()
                if i == total // 3 + 1:
                    async with asyncio.timeout(SLACK):
                        await futures[-1]
                    confirmed_after_stop = loop.time()
                if i == 2 * total // 3:
                    await brokers.cluster_start(node)
            async with asyncio.timeout(SLACK):
                confirmations = await asyncio.gather(*futures)
        assert [c.publishing_id for c in confirmations] == list(range(2, total + 1))
        async with asyncio.timeout(SLACK):
            await reader
        await consumer.close()
        assert read == values  # every message once, in order, no gap
        assert await read_all(client, stream, total) == values  # and stored exactly once
        print(  # recovery times for docs/rabbitmq.md (pytest -s shows them)
            f"{victim} node {node}: stopping took {stopped_at - stopping_at:.1f} s; the next "
            f"message was confirmed {confirmed_after_stop - stopping_at:.1f} s after the stop "
            f"began; the consumer read all {total}"
        )
    finally:
        if node is not None and not brokers._answers(cluster.host, ports[node]):
            await brokers.cluster_start(node)
        await client.delete_stream(stream, missing_ok=True)
        await client.close()


async def test_super_streams_and_single_active_consumers_move_over(cluster: BrokerInfo) -> None:
    """A super stream of three partitions, a named super-stream producer routing by key and a
    group of two single-active super-stream consumers that commit as they read (every 50
    messages), while the node of one partition's leader is stopped and started again: every
    message is confirmed and stored once in its partition, and the group reads every one, in
    order per partition (at least once: a consumer that takes over replays what was read
    after the last stored offset)."""
    ports = node_ports(cluster)
    name = f"sw-super-fo-{uuid.uuid4().hex[:8]}"
    total = 900
    keys = [f"key-{i % 30}".encode() for i in range(total)]
    values = [f"m{i:04d}".encode() for i in range(total)]
    client = await rmq.connect(every_node_url(cluster), timeout=10, reconnect=RECOVERY)
    node: int | None = None
    read: dict[str, list[bytes]] = {}
    try:
        await client.create_stream(name, partitions=3)
        partitions = await client.partitions(name)
        placements = [await placement(client, p) for p in partitions]
        victim = placements[1].leader[1]  # the node leading the second partition
        node = next(n for n, port in ports.items() if port == victim)
        group = [
            client.super_stream_consumer(name, name="billing", single_active=True) for _ in range(2)
        ]
        for member in group:
            await member.start()

        seen: set[bytes] = set()

        async def consume(member: rmq.SuperStreamConsumer) -> None:
            while len(seen) < total:
                batch = await member.next_batch(500, timeout=1)
                for m in batch:
                    assert m.stream is not None
                    read.setdefault(m.stream, []).append(m.value)
                    seen.add(m.value)

        readers = [asyncio.create_task(consume(member)) for member in group]
        async with client.super_stream_producer(name, name="router") as producer:
            futures = []
            for i, (key, value) in enumerate(zip(keys, values, strict=True)):
                futures.append(await producer.send(value, key=key, timeout=SLACK))
                if i % 50 == 49:
                    await asyncio.sleep(0.02)
                if i == total // 3:
                    await producer.flush(timeout=SLACK)
                    await brokers.cluster_stop(node)
                if i == 2 * total // 3:
                    await brokers.cluster_start(node)
            async with asyncio.timeout(SLACK):
                await asyncio.gather(*futures)
        async with asyncio.timeout(SLACK):
            await asyncio.wait(readers, return_when=asyncio.FIRST_EXCEPTION)
        for task in readers:
            if task.done() and task.exception() is not None:
                raise AssertionError("a group member failed") from task.exception()
            task.cancel()
        for member in group:
            await member.close()
        expected: dict[str, list[bytes]] = {}
        for key, value in zip(keys, values, strict=True):
            expected.setdefault(partitions[rmq.hash_partition(key, 3)], []).append(value)
        replayed = 0
        for partition, want in expected.items():  # none lost, in order per partition
            got = read.get(partition, [])
            assert list(dict.fromkeys(got)) == want, (partition, sorted(set(want) - set(got))[:5])
            # a consumer that takes over resumes after the group's last stored offset, so what
            # the previous one read after its last commit comes again (at least once)
            replayed += len(got) - len(want)
        print(f"node {node} stopped and started: {replayed} messages read again by the group")
        for partition in partitions:  # and stored exactly once
            assert (
                await read_all(client, partition, len(expected[partition])) == expected[partition]
            )
    finally:
        if node is not None and not brokers._answers(cluster.host, ports[node]):
            await brokers.cluster_start(node)
        await client.delete_stream(name, super_stream=True, missing_ok=True)
        await client.close()


async def ctl(info: BrokerInfo, node: int, *args: str) -> str:
    """rabbitmqctl for ``node`` (the harness's wrapper, ``CTL<node>``); fails on an error."""
    wrapper = info.extra.get(f"CTL{node}", "")
    if not wrapper or not os.access(wrapper, os.X_OK):
        pytest.skip(f"the harness records no usable rabbitmqctl for node {node} (CTL{node})")
    process = await asyncio.create_subprocess_exec(
        wrapper, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), SLACK)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"rabbitmqctl {' '.join(args)} on node {node}: {text}"
    return text


async def running_nodes(info: BrokerInfo, node: int) -> list[str]:
    status = json.loads(await ctl(info, node, "-q", "cluster_status", "--formatter", "json"))
    return sorted(status["running_nodes"])


@pytest.mark.parametrize("left", ["app stopped", "standalone"])
async def test_up_joins_a_node_left_out_of_the_cluster_again(
    cluster: BrokerInfo, left: str
) -> None:
    """Node 3 is reset, as a join stopped half-way leaves it: its application stopped, or
    started again as a cluster of its own. ``integration/brokers.sh up rabbitmq-cluster``
    brings it back into node 1's cluster by itself, and a new stream gets a member on it."""
    nodes = cluster.extra["NODES"].split(",")
    await ctl(cluster, 3, "stop_app")
    try:
        await ctl(cluster, 3, "reset")
        if left == "standalone":
            await ctl(cluster, 3, "start_app")
            assert await running_nodes(cluster, 3) == [nodes[2]]
        assert nodes[2] not in await running_nodes(cluster, 1)
    finally:
        out = await brokers.cluster_up()
    assert f"joining node 3 to {nodes[0]}" in out, out
    assert await running_nodes(cluster, 1) == sorted(nodes)
    assert await running_nodes(cluster, 3) == sorted(nodes)
    stream = f"sw-rejoined-{uuid.uuid4().hex[:8]}"
    node3 = node_ports(cluster)[3]
    client = await rmq.connect(cluster.url, timeout=10)
    try:
        await client.create_stream(stream)
        info = await placement(client, stream)  # a leader and two replicas, one per node
        assert {info.leader[1], *(p for _, p in info.replicas)} == set(node_ports(cluster).values())
        await publish(client, stream, "p", [b"x", b"y"])
        # a consumer on node 3's member reads (a replica the stream coordinator could not
        # start there answers STREAM_NOT_AVAILABLE); replicas are picked at random
        on_replica = info.leader[1] != node3
        for _ in range(40):
            async with client.consumer(stream, offset="first", from_replica=on_replica) as consumer:
                if port_of(consumer._conn) != node3:
                    continue
                got = await consumer.next_batch(10, timeout=10)
                assert [m.value for m in got] == [b"x", b"y"]
                break
        else:
            pytest.fail("40 consumers in a row went to another node's replica")
    finally:
        await client.delete_stream(stream, missing_ok=True)
        await client.close()
