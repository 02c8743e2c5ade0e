"""The fault workload (``workload.py``) on every broker under every proxy fault class: one
seeded run per cell in ``make test``, ``STREAMWIRE_FAULT_SEEDS=N`` runs per cell (``make
test-faults SEEDS=N``). A run passes when its history shows no acknowledged write lost, no
message stored in another order than its producer sent it, nothing unexpected, consumers
resuming exactly after their stored offset, and, on RabbitMQ (a deduplicating producer whose
messages keep their publishing ids across retries), no duplicate. With
``STREAMWIRE_FAULT_RESULTS=DIR`` each run's report is written there as JSON, for the table in
``docs/reliability.md`` (``python -m tests.faults.table DIR``)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.brokers import require
from tests.faults.workload import FAULTS, Fault, Lane, run
from tests.iggy_double import IggyDouble
from tests.integration.liftbridge.test_faults import nats_address
from tests.proxy import proxied

pytestmark = [pytest.mark.integration, pytest.mark.one_core, pytest.mark.timeout(600)]

SEEDS = range(int(os.environ.get("STREAMWIRE_FAULT_SEEDS", "1")))


def rabbitmq_lane() -> Lane:
    info = require("rabbitmq")
    return Lane(
        "rabbitmq",
        info.url,
        (info.host, info.port),
        lambda port: proxied(info.url, port),
        {"load_balancer": True},  # every connection through the proxy
    )


def liftbridge_lane() -> Lane:
    info = require("liftbridge")
    nats_host, nats_port = nats_address(info)

    def via(host: str, port: int) -> str:  # the NATS link carries the messages and acks
        return f"liftbridge://{info.host}:{info.port}?nats=nats://{host}:{port}"

    return Lane(
        "liftbridge",
        via(nats_host, nats_port),
        (nats_host, nats_port),
        lambda port: via("127.0.0.1", port),
    )


@pytest.fixture(params=["rabbitmq", "liftbridge", "iggy"])
async def lane(request: pytest.FixtureRequest) -> AsyncIterator[Lane]:
    if request.param == "rabbitmq":
        yield rabbitmq_lane()
    elif request.param == "liftbridge":
        yield liftbridge_lane()
    else:
        async with IggyDouble() as double:
            host, _, port = double.address.rpartition(":")
            yield Lane(
                "iggy",
                double.url,
                (host, int(port)),
                lambda p: proxied(double.url, p),
                topic=True,
            )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_the_workload_loses_nothing_it_was_told_was_stored(
    lane: Lane, fault: Fault, seed: int, tmp_path: Path
) -> None:
    outcome = await run(lane, fault, seed)
    report = outcome.report
    results = os.environ.get("STREAMWIRE_FAULT_RESULTS")
    if results:
        out = Path(results) / f"{lane.name}-{fault}-{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        row = {"lane": lane.name, "fault": fault, "seed": seed, **asdict(report)}
        out.write_text(json.dumps(row), encoding="utf-8")
    assert report.acked == report.sent, report.summary()  # the retry loop got through
    assert report.recovery, "the nemesis never healed"
    evidence = tmp_path / "history.jsonl"
    if not report.ok(deduplicating=outcome.deduplicating):
        outcome.history.dump(evidence)
    assert report.ok(deduplicating=outcome.deduplicating), (
        f"{report.summary()} (history: {evidence})"
    )
