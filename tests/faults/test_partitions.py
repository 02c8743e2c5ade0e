"""The fault workload (``workload.py``) on a three-node Liftbridge cluster whose stream leader
is partitioned from its peers: each node reaches NATS (which carries Liftbridge's Raft,
replication and messages) through a fault proxy of its own, and the leader's is
black-holed, silently (no reset), for 8-15 s, longer than the cluster takes to elect another
leader, then healed. The client still reaches every node's gRPC port and NATS itself.

The producer asks for ``AckPolicy.ALL`` (an ack once the ISR has the message): what it was
told is stored must survive the leader's isolation and its return as a follower. With the
default ``LEADER`` policy an ack means only "the leader wrote it", which an isolated leader
cannot keep (docs/reliability.md has what was measured).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import streamwire.liftbridge as lb
from integration.harness.faultproxy import FaultProxy
from tests.brokers import skip_missing
from tests.faults.test_histories import SEEDS
from tests.faults.workload import Lane, run
from tests.integration.liftbridge.cluster import (
    ClusterDidNotForm,
    LocalCluster,
    harness_liftbridge,
)

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


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_leader_partitioned_from_its_peers_loses_nothing_acknowledged(
    cluster_lane: Lane, seed: int, tmp_path: Path
) -> None:
    outcome = await run(cluster_lane, "partition", seed)
    report = outcome.report
    results = os.environ.get("STREAMWIRE_FAULT_RESULTS")
    if results:
        out = Path(results) / f"{cluster_lane.name}-partition-{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        row = {"lane": cluster_lane.name, "fault": "partition", "seed": seed, **asdict(report)}
        out.write_text(json.dumps(row), encoding="utf-8")
    assert outcome.unacknowledged_at_fault > 0, "the fault came after the production"
    assert report.acked == report.sent, report.summary()
    evidence = tmp_path / "history.jsonl"
    if not report.ok(deduplicating=False):
        outcome.history.dump(evidence)
    assert report.ok(deduplicating=False), f"{report.summary()} (history: {evidence})"
