"""The fault workload (``workload.py``) on three-node clusters whose stream leader is
partitioned from its peers, silently (no reset), longer than the cluster takes to elect
another leader, then healed. The client still reaches every node.

* **Liftbridge**: each node reaches NATS (which carries Liftbridge's Raft, replication and
  messages) through a fault proxy of its own, and the leader's is black-holed for 8-15 s.
  The producer asks for ``AckPolicy.ALL`` (an ack once the ISR has the message): what it was
  told is stored must survive the leader's isolation and its return as a follower. With the
  default ``LEADER`` policy an ack means only "the leader wrote it", which an isolated leader
  cannot keep (docs/reliability.md has what was measured).
* **RabbitMQ** (the harness's ``rabbitmq-cluster``, three 4.3 nodes): the leader's node is
  cut off from its peers' distribution and replication ports for 20-30 s
  (``integration/brokers.sh fault partition``: iptables on the node's cgroup), past the
  cluster's ``net_ticktime`` of 10 s. A stream write is confirmed once a majority has it, so
  the default producer's confirms must hold, and its publishing ids must keep what it sends
  again from being stored twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

import streamwire
import streamwire.liftbridge as lb
import streamwire.rabbitmq as rmq
from integration.harness import cluster as cluster_module
from integration.harness import nemesis
from integration.harness.faultproxy import FaultProxy
from integration.harness.readiness import Outcome as Ready
from integration.harness.readiness import wait_until
from tests.brokers import BrokerInfo, require, skip_missing
from tests.faults.processes import harness_context
from tests.faults.test_histories import SEEDS
from tests.faults.workload import Lane, Outcome, run
from tests.integration.liftbridge.cluster import (
    ClusterDidNotForm,
    LocalCluster,
    harness_liftbridge,
)

if TYPE_CHECKING:  # pyspark's, imported where a Spark test runs
    from tests.spark._support import Target

pytestmark = [pytest.mark.integration, pytest.mark.one_core, pytest.mark.timeout(600)]


class IsolatedLeader:
    """The ``partition`` fault on a :class:`LocalCluster` whose nodes reach NATS through
    ``proxies`` (by node number)."""

    def __init__(self, cluster: LocalCluster, proxies: list[FaultProxy]) -> None:
        self.cluster = cluster
        self.proxies = proxies

    async def isolate_leader(self, stream: str) -> str:
        first = next(iter(self.cluster.nodes))
        async with await lb.connect(self.cluster.url(first), timeout=10) as client:
            leader = (await client.stream_info(stream)).partitions[0].leader
        assert leader, f"{stream} has no leader"
        self.proxies[list(self.cluster.nodes).index(leader)].blackhole(True)
        return leader

    async def heal(self) -> None:
        for proxy in self.proxies:
            proxy.blackhole(False)


@pytest.fixture
async def cluster_lane(tmp_path: Path) -> AsyncIterator[Lane]:
    binary, nats_url, version = harness_liftbridge()
    nats = urlsplit(nats_url)
    proxies = [FaultProxy(nats.hostname or "127.0.0.1", nats.port or 4222) for _ in range(3)]
    for proxy in proxies:
        await proxy.start()
    cluster = LocalCluster(
        binary,
        nats_url,
        tmp_path,
        version=version,
        node_nats=[f"nats://127.0.0.1:{p.port}" for p in proxies],
    )
    try:
        try:
            await cluster.start()
        except ClusterDidNotForm as exc:
            skip_missing(f"the three Liftbridge servers did not form a cluster: {str(exc)[:1500]}")
        first = next(iter(cluster.nodes))
        url = cluster.url(first)
        # a new cluster forwards CreateStream to its metadata leader only once it settled
        # ("no responders" before): the workload's own create then goes through
        settle = f"settle-{tmp_path.name}"[:60]
        await cluster.create_stream(first, settle)
        async with await lb.connect(url, timeout=10) as admin:
            await admin.delete_stream(settle)
        yield Lane(
            "liftbridge-cluster",
            url,
            ("", 0),
            lambda port: url,  # no proxy on the client's links: only between the nodes
            create={"replication_factor": 3},
            producer={"ack_policy": lb.AckPolicy.ALL},
            cluster=IsolatedLeader(cluster, proxies),
        )
    finally:
        cluster.stop()
        for proxy in proxies:
            await proxy.aclose()


class PartitionedNode:
    """The ``partition`` fault on the harness's ``rabbitmq-cluster``: the node leading the
    stream cut off from its peers (``integration/harness/partition.py``)."""

    def __init__(self, info: BrokerInfo) -> None:
        self.info = info
        self.ports = {v: int(k.removeprefix("node")) for k, v in info.ports.items()
                      if k.startswith("node")}  # fmt: skip
        self._ctx = harness_context()

    async def _fault(self, verb: str, node: int | None = None) -> None:
        status = await asyncio.to_thread(nemesis.fault, self._ctx, verb, "rabbitmq-cluster", node)
        assert status == 0, f"fault {verb} rabbitmq-cluster {node or ''} exited {status}"

    async def isolate_leader(self, stream: str) -> str:
        async with await rmq.connect(self.info.url, timeout=10) as client:
            (_, port) = (await client.stream_info(stream)).leader
        node = self.ports[port]
        await self._fault("partition", node)
        return f"node {node}"

    async def heal(self) -> None:
        await self._fault("heal")


@pytest.fixture
def rabbitmq_cluster_lane() -> Iterator[Lane]:
    info = require("rabbitmq-cluster")
    if info.extra.get("BACKEND") != "native-chroot" or os.geteuid() != 0:
        skip_missing("a partition of rabbitmq-cluster needs its native backend and root")
    cluster = PartitionedNode(info)
    try:
        yield Lane(
            "rabbitmq-cluster",
            info.url,
            ("", 0),
            lambda port: info.url,  # no proxy on the client's links: only between the nodes
            cluster=cluster,
            partition_seconds=(20.0, 30.0),
        )
    finally:
        ctx = harness_context()
        nemesis.fault(ctx, "heal", "rabbitmq-cluster")
        # the next tests get the cluster whole: every node running in every node's view
        nodes = cluster_module.Cluster.select(ctx)
        assert wait_until(nodes.all_running, lambda: True, 120) is Ready.READY, (
            "rabbitmq-cluster did not come back whole after the partition healed"
        )


def _record(lane: Lane, seed: int, outcome: Outcome, tmp_path: Path) -> None:
    """The run's report in ``STREAMWIRE_FAULT_RESULTS``; the checks every partition run
    makes."""
    report = outcome.report
    results = os.environ.get("STREAMWIRE_FAULT_RESULTS")
    if results:
        out = Path(results) / f"{lane.name}-partition-{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        row = {"lane": lane.name, "fault": "partition", "seed": seed, **asdict(report)}
        out.write_text(json.dumps(row), encoding="utf-8")
    assert outcome.unacknowledged_at_fault > 0, "the fault came after the production"
    assert report.acked == report.sent, report.summary()
    evidence = tmp_path / "history.jsonl"
    if not report.ok(deduplicating=outcome.deduplicating):
        outcome.history.dump(evidence)
    assert report.ok(deduplicating=outcome.deduplicating), f"{report.summary()} ({evidence})"


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_leader_partitioned_from_its_peers_loses_nothing_acknowledged(
    cluster_lane: Lane, seed: int, tmp_path: Path
) -> None:
    outcome = await run(cluster_lane, "partition", seed, evidence=tmp_path / "history.jsonl")
    assert not outcome.deduplicating
    _record(cluster_lane, seed, outcome, tmp_path)


@pytest.mark.rabbitmq
@pytest.mark.parametrize("seed", SEEDS)
async def test_a_rabbitmq_leader_partitioned_from_its_peers_loses_and_duplicates_nothing(
    rabbitmq_cluster_lane: Lane, seed: int, tmp_path: Path
) -> None:
    outcome = await run(
        rabbitmq_cluster_lane, "partition", seed, evidence=tmp_path / "history.jsonl"
    )
    assert outcome.deduplicating
    _record(rabbitmq_cluster_lane, seed, outcome, tmp_path)


# --- the Spark sink through the same partitions ------------------------------------------

#: The sink's timeout under a partition: a task waiting on the isolated leader fails after
#: it, and its retries (``local[2,4]``) outlast the partition.
SINK_TIMEOUT = 15.0


@pytest.fixture(params=["rabbitmq-cluster", "liftbridge-cluster"])
def partitioned(request: pytest.FixtureRequest) -> Lane:
    """Each cluster lane above, for the Spark sink."""
    pytest.importorskip("pyspark")
    name = "rabbitmq_cluster_lane" if request.param == "rabbitmq-cluster" else "cluster_lane"
    lane: Lane = request.getfixturevalue(name)
    return lane


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.spark
async def test_the_spark_sink_through_a_leader_partition_stores_every_row_exactly_once(
    partitioned: Lane, tmp_path: Path, seed: int
) -> None:
    """The foreachBatch sink writing a replicated stream while its leader is cut off from
    its peers half-way through the second micro-batch, for the shorter partition of its lane
    (RabbitMQ 20 s, past the sink's 15 s timeout; Liftbridge 8 s, the sink asking for
    ``AckPolicy.ALL`` itself): tasks that wait on the isolated leader fail after the sink's
    timeout, their retries find the new leader, and the query stores every row exactly
    once."""
    from tests.spark._jobs import (
        MID_BATCH_ROWS,
        TOTAL,
        batches,
        check_stored,
        finish,
        start_job,
        stored,
        write_input,
    )

    lane, cluster = partitioned, partitioned.cluster
    assert cluster is not None
    target, stream = await _spark_stream(lane, f"spark-partition-{uuid.uuid4().hex[:12]}")
    job = None
    try:
        write_input(tmp_path)
        log = tmp_path / "job.log"
        args = ["--master", "local[2,4]", "--timeout", str(SINK_TIMEOUT)]
        job = start_job([(target, stream)], tmp_path, log, *args)
        async with asyncio.timeout(300):
            while await asyncio.to_thread(stored, target, stream) < MID_BATCH_ROWS:
                assert job.poll() is None, log.read_text(errors="replace")[-3000:]
                await asyncio.sleep(0.05)
        leader = await cluster.isolate_leader(stream)
        try:
            await asyncio.sleep(lane.partition_seconds[0])
        finally:
            await cluster.heal()
        out = await asyncio.to_thread(finish, job, log, 600)
        await asyncio.to_thread(check_stored, target, stream, lane.name, "partition")
        assert sum(b[1] for b in batches(out, 0)) == TOTAL, (leader, batches(out, 0))
    finally:
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
        await _delete_once_settled(lane.url, stream)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.spark
async def test_the_spark_source_through_a_leader_partition_reads_every_message_once(
    partitioned: Lane, tmp_path: Path, seed: int
) -> None:
    """The streaming source (``read_driver``: ``Trigger.AvailableNow``, micro-batches of
    2,000, ``local[2,4]``) reading a replicated stream of 6,000 ids while its leader is cut
    off from its peers a third of the way in, for the shorter partition of its lane (RabbitMQ
    20 s, past the source's 15 s timeout; Liftbridge 8 s):
    planning and reads that wait on the isolated leader time out and are tried again, and
    the query hands every message to its sink exactly once."""
    from tests.spark._jobs import SOURCE_TOTAL, check_read, finish, read_so_far, start_read

    lane, cluster = partitioned, partitioned.cluster
    assert cluster is not None
    target, stream = await _spark_stream(lane, f"spark-read-{uuid.uuid4().hex[:12]}")
    job = None
    try:
        job, out, log = await asyncio.to_thread(
            start_read,
            {lane.name: target},
            {lane.name: stream},
            tmp_path,
            {},
            "--timeout",
            str(SINK_TIMEOUT),
        )
        async with asyncio.timeout(300):
            while len(read_so_far(out, 0)) < SOURCE_TOTAL // 3:
                assert job.poll() is None, log.read_text(errors="replace")[-3000:]
                await asyncio.sleep(0.05)
        await cluster.isolate_leader(stream)
        try:
            await asyncio.sleep(lane.partition_seconds[0])
        finally:
            await cluster.heal()
        text = await asyncio.to_thread(finish, job, log, 600)
        check_read({lane.name: target}, out, text, "partition", {lane.name: stream})
    finally:
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
        await _delete_once_settled(lane.url, stream)


async def _delete_once_settled(url: str, stream: str) -> None:
    """Delete ``stream`` after a partition healed: a cluster still electing its metadata
    leader refuses for a moment (Liftbridge: "leadership lost while committing log")."""
    for attempt in range(30):
        try:
            async with streamwire.connect(url, timeout=10) as admin:
                await admin.delete_stream(stream, missing_ok=True)
            return
        except streamwire.StreamwireError:
            if attempt == 29:
                raise
            await asyncio.sleep(1.0)


async def _spark_stream(lane: Lane, stream: str) -> tuple[Target, str]:
    """``stream`` created on ``lane``'s cluster as its workload creates streams (replicated),
    and the Spark tests' target for it."""
    from tests.spark._support import Target

    broker = "rabbitmq" if lane.name.startswith("rabbitmq") else "liftbridge"
    async with streamwire.connect(lane.url, timeout=10) as admin:
        await admin.create_stream(stream, **lane.create)
    return Target(broker, lane.url, partitions=1), stream
