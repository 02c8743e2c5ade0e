"""The three-node RabbitMQ 4.3 cluster over TLS: every node of the harness's
``rabbitmq-cluster`` has a stream TLS listener (``PORT_TLS_NODE1..3``, advertised as
``localhost`` and its TLS port) with the harness's throwaway PKI. A ``rabbitmq-stream+tls://``
URL naming the three nodes connects with the harness CA, publishes to the leader and consumes
from a replica, each over TLS; and a producer and a consumer keep going over TLS while the
leader's node is stopped (``integration/brokers.sh stop rabbitmq-cluster N``) and started
again.

The cluster fixture is :mod:`test_cluster`'s (skips unless the cluster is up, or
``STREAMWIRE_TEST_CLUSTER=1``); without the TLS facts in its env file the tests skip.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ConnectError
from tests import brokers
from tests.brokers import BrokerInfo, skip_missing
from tests.integration.rabbitmq.test_cluster import (
    RECOVERY,
    SLACK,
    cluster,
    node_ports,
    placement,
    port_of,
    read_all,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.rabbitmq,
    pytest.mark.one_core,
    pytest.mark.timeout(420),
]

__all__ = ("cluster",)  # the fixture, imported for this module's tests


@dataclass(frozen=True)
class ClusterTLS:
    url: str
    """``rabbitmq-stream+tls://guest:guest@localhost:<tls1>,localhost:<tls2>,localhost:<tls3>/``"""
    ca: str
    ports: dict[int, int]
    """Node number → TLS port."""

    def trust(self) -> rmq.TLSOptions:
        return rmq.TLSOptions(ca_file=self.ca)


def tls_facts(info: BrokerInfo) -> ClusterTLS:
    url, ca = info.extra.get("TLS_URL_ALL", ""), info.extra.get("TLS_CA", "")
    ports = {
        int(k.removeprefix("tls_node")): v
        for k, v in info.ports.items()
        if k.startswith("tls_node")
    }
    if not url or not ca or sorted(ports) != [1, 2, 3]:
        skip_missing(
            "the cluster records no TLS facts (TLS_URL_ALL, TLS_CA, PORT_TLS_NODE1..3 in "
            ".brokers/rabbitmq-cluster.env): run integration/brokers.sh up rabbitmq-cluster"
        )
    if not Path(ca).is_file():
        skip_missing(f"TLS_CA={ca} recorded by the harness does not exist")
    return ClusterTLS(url, ca, ports)


async def test_a_multi_node_tls_url_publishes_to_the_leader_and_reads_a_replica(
    cluster: BrokerInfo,
) -> None:
    facts = tls_facts(cluster)
    assert facts.url.startswith("rabbitmq-stream+tls://guest:guest@localhost:")
    stream = f"sw-cluster-tls-{uuid.uuid4().hex[:8]}"
    values = [f"t{i}".encode() for i in range(200)]
    client = await rmq.connect(facts.url, tls=facts.trust(), timeout=10)
    try:
        assert client._locator is not None
        assert port_of(client._locator) in facts.ports.values()  # a TLS port, not a plain one
        await client.create_stream(stream)
        info = await placement(client, stream)
        # over TLS, Metadata advertises every node's TLS listener
        members = {info.leader[1], *(port for _, port in info.replicas)}
        assert members == set(facts.ports.values()), info
        async with client.producer(stream, name="tls-writer") as producer:
            futures = [await producer.send(v, timeout=SLACK) for v in values]
            async with asyncio.timeout(SLACK):
                confirmed = await asyncio.gather(*futures)
            assert port_of(producer._conn) == info.leader[1]
        assert [c.publishing_id for c in confirmed] == list(range(1, 201))
        async with client.consumer(stream, offset="first") as consumer:
            got: list[bytes] = []
            async with asyncio.timeout(SLACK):
                while len(got) < len(values):
                    got += [m.value for m in await consumer.next_batch(500, timeout=5)]
            assert port_of(consumer._conn) in {port for _, port in info.replicas}
        assert got == values
    finally:
        await client.delete_stream(stream, missing_ok=True)
        await client.close()


async def test_the_cluster_tls_listener_needs_the_harness_ca(cluster: BrokerInfo) -> None:
    facts = tls_facts(cluster)
    with pytest.raises(ConnectError) as info:  # the system trust store lacks the harness CA
        await rmq.connect(facts.url, timeout=10)
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)


async def test_publishing_and_consuming_over_tls_through_the_loss_of_the_leaders_node(
    cluster: BrokerInfo,
) -> None:
    """A named producer and a named consumer on the multi-node TLS URL; the leader's node
    stops a third of the way through and starts again at two thirds: every message is
    confirmed, stored once and read once, in order, all of it over TLS."""
    facts = tls_facts(cluster)
    stream = f"sw-tls-failover-{uuid.uuid4().hex[:8]}"
    total = 1500
    values = [f"m{i:05d}".encode() for i in range(total)]
    client = await rmq.connect(facts.url, tls=facts.trust(), timeout=10, reconnect=RECOVERY)
    read: list[bytes] = []
    node: int | None = None
    try:
        await client.create_stream(stream)
        before = await placement(client, stream)
        node = next(n for n, port in facts.ports.items() if port == before.leader[1])
        consumer = client.consumer(stream, offset="first", name="tls-reader")
        await consumer.start()

        async def consume() -> None:
            while len(read) < total:
                batch = await consumer.next_batch(500, timeout=5)
                read.extend(m.value for m in batch)
                if batch:
                    await consumer.commit(batch[-1].offset)

        reader = asyncio.create_task(consume())
        async with client.producer(stream, name="tls-writer") as producer:
            futures = []
            for i, value in enumerate(values):
                futures.append(await producer.send(value, timeout=SLACK))
                if i % 100 == 99:
                    await asyncio.sleep(0.02)  # a steady stream, not one burst
                if i == total // 3:
                    await producer.flush(timeout=SLACK)
                    await brokers.cluster_stop(node)
                    assert not brokers._answers(cluster.host, facts.ports[node])
                if i == 2 * total // 3:
                    await brokers.cluster_start(node)
            async with asyncio.timeout(SLACK):
                confirmations = await asyncio.gather(*futures)
            assert port_of(producer._conn) in facts.ports.values()
        assert [c.publishing_id for c in confirmations] == list(range(1, total + 1))
        async with asyncio.timeout(SLACK):
            await reader
        assert port_of(consumer._conn) in facts.ports.values()
        await consumer.close()
        assert read == values  # every message once, in order, no gap
        assert await read_all(client, stream, total) == values  # and stored exactly once
    finally:
        if node is not None and not brokers._answers(cluster.host, node_ports(cluster)[node]):
            await brokers.cluster_start(node)
        await client.delete_stream(stream, missing_ok=True)
        await client.close()
