"""The fault workload (``workload.py``) on every broker under every fault class (through the
fault proxy, and on the broker's process: SIGSTOP, SIGKILL and a start on its data): one
seeded run per cell in ``make test``, ``STREAMWIRE_FAULT_SEEDS=N`` runs per cell (``make
test-faults SEEDS=N``). A run passes when its history shows no acknowledged write lost, no
message stored in another order than its producer sent it, nothing unexpected, consumers
resuming exactly after their stored offset, and, on RabbitMQ (a deduplicating producer whose
messages keep their publishing ids across retries), no duplicate. With
``STREAMWIRE_FAULT_RESULTS=DIR`` each run's report is written there as JSON, for the table in
``docs/reliability.md`` (``python -m tests.faults.table DIR``).

Process faults act on the harness's brokers (``integration/brokers.sh fault``), which the
suite shares: each test leaves its broker up (started again if a revive failed). On Iggy,
``pause`` stops the conformance double run as a process of its own; ``kill`` needs a real
server (IGGY_SERVER_BIN), the double's log being in memory: that cell is only collected when
the harness runs one."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path

import pytest

from tests import brokers
from tests.brokers import require, skip_missing
from tests.faults.processes import DoubleProcess, HarnessProcess
from tests.faults.workload import FAULTS, PROCESS_FAULTS, Fault, Lane, run
from tests.iggy_double import IggyDouble
from tests.integration.liftbridge.test_faults import nats_address
from tests.proxy import proxied

pytestmark = [pytest.mark.integration, pytest.mark.one_core, pytest.mark.timeout(600)]

#: The seeds each cell runs: ``STREAMWIRE_FAULT_SEEDS`` of them, from
#: ``STREAMWIRE_FAULT_FIRST_SEED`` (0) on, so that a long run can go in rounds whose reports
#: (named by seed) add up in one results directory.
FIRST_SEED = int(os.environ.get("STREAMWIRE_FAULT_FIRST_SEED", "0"))
SEEDS = range(FIRST_SEED, FIRST_SEED + int(os.environ.get("STREAMWIRE_FAULT_SEEDS", "1")))
#: Whether this is ``make test-faults``' long run (which sets ``STREAMWIRE_FAULT_SEEDS``)
#: rather than ``make test``'s one seed: a test whose variants prove the same design
#: twice runs its second variant there only.
LONG_RUN = "STREAMWIRE_FAULT_SEEDS" in os.environ


#: Whether the harness runs a real Iggy server (its env file names a binary), at collection.
REAL_IGGY = "BINARY=" in (
    (brokers.brokers_dir() / "iggy.env").read_text(encoding="utf-8")
    if (brokers.brokers_dir() / "iggy.env").is_file()
    else ""
)
CELLS = [
    (lane, fault)
    for lane in ("rabbitmq", "liftbridge", "iggy")
    for fault in FAULTS
    if not (lane == "iggy" and fault == "kill" and not REAL_IGGY)
]


#: Topic options that make an Iggy server write each batch before acknowledging it.
CRASH_SAFE = {"messages_required_to_save": 1}


def _process(info: brokers.BrokerInfo) -> HarnessProcess:
    reason = brokers.restart_blocker(info) if info.name != "liftbridge" else None
    if reason is not None:
        skip_missing(reason)
    return HarnessProcess(info.name)


def rabbitmq_lane(fault: Fault) -> Lane:
    info = require("rabbitmq")
    return Lane(
        "rabbitmq",
        info.url,
        (info.host, info.port),
        lambda port: proxied(info.url, port),
        {"load_balancer": True},  # every connection through the proxy
        process=_process(info) if fault in PROCESS_FAULTS else None,
    )


def liftbridge_lane(fault: Fault) -> Lane:
    info = require("liftbridge")
    nats_host, nats_port = nats_address(info)

    def via(host: str, port: int) -> str:  # the NATS link carries the messages and acks
        return f"liftbridge://{info.host}:{info.port}?nats=nats://{host}:{port}"

    return Lane(
        "liftbridge",
        via(nats_host, nats_port),
        (nats_host, nats_port),
        lambda port: via("127.0.0.1", port),
        process=_process(info) if fault in PROCESS_FAULTS else None,
    )


def real_iggy_lane() -> Lane:
    info = require("iggy")
    return Lane(
        "iggy",
        info.url,
        (info.host, info.port),
        lambda port: proxied(info.url, port),
        topic=True,
        process=HarnessProcess("iggy"),
        # Iggy acknowledges from memory and writes every 1,024 messages by default, so a
        # crash loses what it acknowledged since (docs/iggy.md, "Durability"): the workload
        # asks for what a user who needs its acknowledgements kept would
        create=CRASH_SAFE,
    )


def _double_lane(url: str, address: str, process: DoubleProcess | None = None) -> Lane:
    host, _, port = address.rpartition(":")
    return Lane(
        "iggy",
        url,
        (host, int(port)),
        lambda p: proxied(url, p),
        topic=True,
        process=process,
        create=CRASH_SAFE,
    )


@pytest.fixture
async def lane(request: pytest.FixtureRequest) -> AsyncIterator[Lane]:
    name: str = request.param
    fault: Fault = request.node.callspec.params["fault"]
    harness_process = fault in PROCESS_FAULTS and (name != "iggy" or REAL_IGGY)
    try:
        if name == "rabbitmq":
            yield rabbitmq_lane(fault)
        elif name == "liftbridge":
            yield liftbridge_lane(fault)
        elif REAL_IGGY:
            yield real_iggy_lane()
        elif fault == "pause":  # SIGSTOP needs a process of its own
            async with DoubleProcess() as process:
                yield _double_lane(process.url, process.address, process)
        else:
            async with IggyDouble() as double:
                yield _double_lane(double.url, double.address)
    finally:
        if harness_process:  # never leave a shared broker stopped or down
            with contextlib.suppress(brokers.NotManaged):
                await brokers.fault("resume", name)
            await brokers.ensure_up(name)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("lane", "fault"), CELLS, indirect=["lane"])
async def test_the_workload_loses_nothing_it_was_told_was_stored(
    lane: Lane, fault: Fault, seed: int, tmp_path: Path
) -> None:
    outcome = await run(lane, fault, seed, evidence=tmp_path / "history.jsonl")
    report = outcome.report
    results = os.environ.get("STREAMWIRE_FAULT_RESULTS")
    if results:
        out = Path(results) / f"{lane.name}-{fault}-{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        row = {"lane": lane.name, "fault": fault, "seed": seed, **asdict(report)}
        out.write_text(json.dumps(row), encoding="utf-8")
    assert outcome.unacknowledged_at_fault > 0, "the fault came after the production"
    assert report.acked == report.sent, report.summary()  # the retry loop got through
    assert report.recovery, "the nemesis never healed"
    evidence = tmp_path / "history.jsonl"
    if not report.ok(deduplicating=outcome.deduplicating):
        outcome.history.dump(evidence)
    assert report.ok(deduplicating=outcome.deduplicating), (
        f"{report.summary()} (history: {evidence})"
    )
