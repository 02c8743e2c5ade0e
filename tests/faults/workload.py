"""One workload, the same code on every broker through ``streamwire.connect``, run while a
nemesis injects one fault class through the fault proxy in front of the broker's data link,
recorded in a :class:`~integration.harness.history.History` and checked against the stream
read back whole afterwards.

* **Producer** (a user's retry loop): messages go out in rounds of :data:`ROUND`, a
  :data:`PAUSE` apart, through a producer opened for the round (one ``send_batch`` of the
  round's bodies where the producer does not deduplicate: the fast path); every send,
  acknowledgement and failure is recorded; what was not acknowledged is sent again in the
  next round, with the same id. On RabbitMQ the producer is named and each message keeps
  its publishing id across retries, so the broker deduplicates (a run there promises no
  duplicates); elsewhere a retry of an unknown outcome may store a message twice
  (reported, not a failure), and so may the client's own resending after a reconnect.
* **Consumer**: reads the first half, stores the offset under its name, closes; opens
  again with ``offset="next"`` and reads on (a resume the checker holds to the stored
  offset).
* **Nemesis**: the fault, seeded: after a random number of acknowledged messages, for a
  random time, once during production, as long and as hard as the :class:`Severity`
  ``STREAMWIRE_FAULT_SEVERITY`` names (:data:`QUICK` in ``make test``, :data:`LONG` in
  ``make test-faults``). Through the fault proxy on the data link: ``cut`` (a dirty cut at
  a random byte of the upstream traffic that follows, so that it drops bytes in flight),
  ``blackhole`` (nothing forwarded, no reset, then healed), ``slow`` (a delay on every chunk
  each way and packet loss in the kernel, then back to normal). On the broker's process (no
  proxy): ``pause`` (SIGSTOP, or for ``STREAMWIRE_FAULT_PAUSE`` seconds, then SIGCONT) and
  ``kill`` (SIGKILL, then a start on its data). In a cluster:
  ``partition`` (the stream's leader cut from its peers, silently, for
  :data:`PARTITION_SECONDS`, then healed; clients still reach it).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import streamwire
from integration.harness.faultproxy import FaultProxy
from integration.harness.history import History, Report, Stored, check
from tests.faults.processes import Crashable, Pausable
from tests.proxy import wait_until

__all__ = (
    "CLUSTER_FAULTS",
    "FAULTS",
    "PROCESS_FAULTS",
    "PROXY_FAULTS",
    "LONG",
    "QUICK",
    "ROUND",
    "Lane",
    "Outcome",
    "Partitionable",
    "Severity",
    "run",
    "severity",
)


class Partitionable(Protocol):
    """A cluster whose nodes the ``partition`` fault can cut from each other."""

    async def isolate_leader(self, stream: str) -> str:
        """Cut the leader of ``stream`` from its peers (silently: no reset); its name."""
        ...

    async def heal(self) -> None: ...


Fault = Literal["cut", "blackhole", "slow", "pause", "kill", "partition"]
PROXY_FAULTS: tuple[Fault, ...] = ("cut", "blackhole", "slow")
PROCESS_FAULTS: tuple[Fault, ...] = ("pause", "kill")
FAULTS = PROXY_FAULTS + PROCESS_FAULTS
CLUSTER_FAULTS: tuple[Fault, ...] = ("partition",)

#: Seconds the leader stays partitioned (seeded within): longer than a cluster takes to
#: notice and elect another leader.
PARTITION_SECONDS = (8.0, 15.0)


@dataclass(frozen=True)
class Severity:
    """How long and how hard each fault is: seconds are seeded within each range."""

    name: str
    blackhole: tuple[float, float]  # nothing forwarded, no reset
    slow: tuple[float, float]  # how long the link is slow and lossy
    delay: float  # the slow link's one-way delay, seconds per chunk (in order, pipelined)
    loss: float  # the slow link's packet loss, each way (iptables)
    pause: tuple[float, float]  # SIGSTOP to SIGCONT


#: ``make test``'s one seed per cell: the faults at a few seconds each.
QUICK = Severity(
    "quick", blackhole=(1.0, 4.0), slow=(2.0, 5.0), delay=0.05, loss=0.05, pause=(2.0, 8.0)
)
#: ``make test-faults``: the faults as long as production links see them (and Jepsen's
#: suites use): a 30 s black hole, a 30 s pause, 15-30 s of a 200 ms link losing 5 %.
LONG = Severity(
    "long", blackhole=(30.0, 30.0), slow=(15.0, 30.0), delay=0.2, loss=0.05, pause=(30.0, 30.0)
)
SEVERITIES = {s.name: s for s in (QUICK, LONG)}


def severity() -> Severity:
    """The severity ``STREAMWIRE_FAULT_SEVERITY`` names (``quick``, the default, or
    ``long``)."""
    name = os.environ.get("STREAMWIRE_FAULT_SEVERITY", "") or QUICK.name
    if name not in SEVERITIES:
        raise ValueError(f"STREAMWIRE_FAULT_SEVERITY={name!r}: use one of {sorted(SEVERITIES)}")
    return SEVERITIES[name]


#: Messages per producer round, and the pause between rounds: production takes about a
#: second per 1,000 messages, so the nemesis's fault lands while messages are in flight.
ROUND, PAUSE = 50, 0.05
#: Seconds one round (open, send, confirmations, close) may take before what it did not
#: confirm counts as unknown.
ROUND_TIMEOUT = 20.0
#: Seconds the whole production may take.
PRODUCE_BUDGET = 180.0


@dataclass(frozen=True)
class Lane:
    """A broker as the workload reaches it: ``url`` (direct), the address the proxy fronts,
    how a URL through the proxy is made, and connect options for it."""

    name: str
    url: str
    upstream: tuple[str, int]
    through: Callable[[int], str]  # the URL through the proxy on that port
    options: Mapping[str, Any] = field(default_factory=dict)
    topic: bool = False  # Iggy: a stream's messages live in a topic ("stream/topic")
    process: Pausable | Crashable | None = None  # what the process faults act on
    create: Mapping[str, Any] = field(default_factory=dict)  # create_stream's options
    producer: Mapping[str, Any] = field(default_factory=dict)  # producer options
    cluster: Partitionable | None = None  # what the cluster faults act on
    partition_seconds: tuple[float, float] = PARTITION_SECONDS  # how long (seeded within)

    def stream(self, base: str) -> str:
        return f"{base}/t" if self.topic else base

    def drop(self, stream: str) -> str:
        """What to delete to remove ``stream`` (Iggy: the stream with its topic)."""
        return stream.partition("/")[0] if self.topic else stream


@dataclass
class Outcome:
    report: Report
    deduplicating: bool
    history: History
    final: list[Stored]

    @property
    def unacknowledged_at_fault(self) -> int:
        """Messages not yet acknowledged when the fault began: 0 means it came after the
        production and tested nothing."""
        events = self.history.events
        start = next(e.at for e in events if e.kind == "fault")
        sent = {e.id for e in events if e.kind == "send"}
        acked = {e.id for e in events if e.kind == "ack" and e.at < start}
        return len(sent - acked)


def _id(message: streamwire.Message) -> str:
    return message.value.decode()


async def _round(
    client: Any,
    stream: str,
    name: str,
    batch: list[tuple[int, str]],
    history: History,
    options: Mapping[str, Any],
) -> set[str]:
    """Send ``batch`` ((publishing id, id) pairs) through a producer opened for the round;
    the ids acknowledged."""
    acked: set[str] = set()
    resolved: set[str] = set()
    futures: dict[str, asyncio.Future[streamwire.Confirmation]] = {}
    try:
        async with asyncio.timeout(ROUND_TIMEOUT):
            async with client.producer(stream, name=name, **options) as producer:
                if isinstance(producer, streamwire.DeduplicatingProducer):
                    for pid, msg_id in batch:
                        history.send(name, msg_id)
                        futures[msg_id] = await producer.send(msg_id.encode(), publishing_id=pid)
                else:  # one call: the producers' fast path for plain bodies
                    for _, msg_id in batch:
                        history.send(name, msg_id)
                    sent = await producer.send_batch([msg_id.encode() for _, msg_id in batch])
                    futures.update(zip((msg_id for _, msg_id in batch), sent, strict=True))
                for msg_id, future in futures.items():
                    try:
                        confirmation = await future
                    except streamwire.StreamwireError as exc:
                        history.unknown(name, msg_id, exc)
                    else:
                        history.ack(name, msg_id, confirmation.partition or 0, confirmation.offset)
                        acked.add(msg_id)
                    resolved.add(msg_id)
    except (streamwire.StreamwireError, TimeoutError) as exc:
        for msg_id in futures:  # sent, no outcome seen: unknown (what was not sent: nothing)
            if msg_id not in resolved:
                history.unknown(name, msg_id, exc)
    return acked


async def _produce(lane: Lane, url: str, stream: str, ids: list[str], history: History) -> None:
    name = f"{stream}-producer"
    pending = [(i + 1, msg_id) for i, msg_id in enumerate(ids)]
    async with asyncio.timeout(PRODUCE_BUDGET):
        while pending:
            try:
                async with streamwire.connect(url, timeout=5, **lane.options) as client:
                    while pending:
                        batch = pending[:ROUND]
                        acked = await _round(client, stream, name, batch, history, lane.producer)
                        pending = [p for p in pending if p[1] not in acked]
                        await asyncio.sleep(PAUSE)
                        if len(acked) < len(batch):
                            await asyncio.sleep(0.2)
                            break  # a fresh client: the old one may hold a dead link
            except streamwire.StreamwireError:
                await asyncio.sleep(0.2)


async def _consume(url: str, stream: str, history: History, total: int) -> None:
    """Read half, store, close; resume with "next" and read the rest."""
    name = f"{stream}-consumer"
    seen = 0
    async with streamwire.connect(url, timeout=10) as client:
        last, partition = -1, 0
        async with client.consumer(stream, offset="first", name=name) as consumer:
            async with asyncio.timeout(60):
                while seen < total // 2:
                    for m in await consumer.next_batch(max_messages=total // 2 - seen, timeout=5):
                        history.read(name, _id(m), m.partition or 0, m.offset or 0)
                        last, partition, seen = m.offset or 0, m.partition or 0, seen + 1
            await client.store_offset(stream, name, last, partition=partition)
            history.store(name, partition, last)
        history.resume(name, partition, last)
        async with client.consumer(stream, offset="next", name=name) as consumer:
            batch = await consumer.next_batch(max_messages=10, timeout=10)
            for m in batch:
                history.read(name, _id(m), m.partition or 0, m.offset or 0)


async def _final(url: str, stream: str) -> list[Stored]:
    """The stream read back whole (the workload's streams have one partition)."""
    async with streamwire.connect(url, timeout=10) as client:
        assert isinstance(client, streamwire.Bounded)
        ((partition, bounds),) = (await client.offset_bounds(stream)).items()
        out: list[Stored] = []
        async with client.consumer(stream, offset="first") as consumer:
            last = bounds.first - 1
            async with asyncio.timeout(60):
                while last < bounds.next - 1:
                    for m in await consumer.next_batch(max_messages=5000, timeout=5):
                        out.append(Stored(partition, m.offset or 0, _id(m)))
                        last = m.offset or 0
        return out


async def _fault_point(rng: random.Random, acked: Any, total: int) -> None:
    """Wait for the point of the production the fault comes at: a seeded number of
    acknowledged messages, between a tenth and six tenths of them."""
    at = rng.randint(total // 10, total * 6 // 10)
    await wait_until(lambda: acked() >= at, PRODUCE_BUDGET, f"{at} messages acknowledged")


async def _nemesis(
    proxy: FaultProxy, fault: Fault, rng: random.Random, history: History, acked: Any, total: int
) -> None:
    await _fault_point(rng, acked, total)
    how = severity()
    history.fault(fault)
    if fault == "cut":  # at a byte of the next round's upstream traffic: bytes in flight
        hold = rng.uniform(0.25, 1.0)
        cuts = len(proxy.cuts)
        proxy.cut_at(proxy.bytes_up + rng.randint(1, 4000), hold=hold)
        await wait_until(lambda: len(proxy.cuts) > cuts, PRODUCE_BUDGET, "the cut")
        await asyncio.sleep(hold)
    elif fault == "blackhole":
        proxy.blackhole(True)
        await asyncio.sleep(rng.uniform(*how.blackhole))
        proxy.blackhole(False)
    else:
        proxy.delay = how.delay
        proxy.set_loss(how.loss)
        try:
            await asyncio.sleep(rng.uniform(*how.slow))
        finally:
            proxy.set_loss(0)
            proxy.delay = 0.0
    history.heal(fault)


def pause_seconds(rng: random.Random) -> float:
    fixed = os.environ.get("STREAMWIRE_FAULT_PAUSE", "")
    return float(fixed) if fixed else rng.uniform(*severity().pause)


async def _process_nemesis(
    process: Pausable | Crashable,
    fault: Fault,
    rng: random.Random,
    history: History,
    acked: Any,
    total: int,
) -> None:
    await _fault_point(rng, acked, total)
    if fault == "pause":
        lasting = pause_seconds(rng)
        await process.pause()
        history.fault(fault)  # from when the signal landed
        try:
            await asyncio.sleep(lasting)
        finally:
            await process.resume()
    else:
        if not isinstance(process, Crashable):
            raise TypeError(f"{process!r} cannot be killed and started on its data")
        await process.kill()
        history.fault(fault)
        await asyncio.sleep(rng.uniform(0.5, 3.0))
        await process.revive()
    history.heal(fault)


async def _partition_nemesis(
    cluster: Partitionable,
    seconds: tuple[float, float],
    stream: str,
    rng: random.Random,
    history: History,
    acked: Any,
    total: int,
) -> None:
    await _fault_point(rng, acked, total)
    lasting = rng.uniform(*seconds)
    leader = await cluster.isolate_leader(stream)
    history.fault(f"partition {leader}")
    try:
        await asyncio.sleep(lasting)
    finally:
        await cluster.heal()
    history.heal(f"partition {leader}")


async def _beside(
    nemesis: Coroutine[Any, Any, None], production: Awaitable[None], wait: float
) -> None:
    """``production`` with ``nemesis`` running beside it; the nemesis then has ``wait``
    seconds to finish (it heals on its own), and is cancelled if it has not."""
    task = asyncio.create_task(nemesis)
    try:
        await production
        await asyncio.wait_for(task, wait)
    finally:
        if not task.done():
            task.cancel()


async def _produce_under(
    lane: Lane, fault: Fault, rng: random.Random, stream: str, ids: list[str], history: History
) -> None:
    """Production with the nemesis running beside it; returns once both are done."""

    def acked() -> int:
        return sum(1 for e in history.events if e.kind == "ack")

    total = len(ids)
    if fault in CLUSTER_FAULTS:
        assert lane.cluster is not None, f"lane {lane.name} is not a cluster"
        try:
            await _beside(
                _partition_nemesis(
                    lane.cluster, lane.partition_seconds, stream, rng, history, acked, total
                ),
                _produce(lane, lane.url, stream, ids, history),
                60,
            )
        finally:
            await lane.cluster.heal()
    elif fault in PROCESS_FAULTS:
        assert lane.process is not None, f"lane {lane.name} has no process for {fault}"
        await _beside(  # a start on its data may take a while
            _process_nemesis(lane.process, fault, rng, history, acked, total),
            _produce(lane, lane.url, stream, ids, history),
            240,
        )
    else:
        async with FaultProxy(*lane.upstream) as proxy:
            try:
                await _beside(
                    _nemesis(proxy, fault, rng, history, acked, total),
                    _produce(lane, lane.through(proxy.port), stream, ids, history),
                    60,
                )
            finally:
                proxy.blackhole(False)
                proxy.set_loss(0)
                proxy.delay = 0.0


async def run(
    lane: Lane,
    fault: Fault,
    seed: int,
    *,
    messages: int = 1000,
    evidence: Path | None = None,
) -> Outcome:
    """The workload on ``lane`` under ``fault``, seeded; the checked outcome. A run that
    cannot finish (production past its budget, a read that stalls) dumps its history to
    ``evidence`` before the error goes on, with a note of where."""
    rng = random.Random(seed)
    stream = lane.stream(f"faults-{lane.name}-{fault}-{seed}-{rng.getrandbits(32):08x}")
    history = History()
    try:
        ids = [f"{seed}-{i}" for i in range(messages)]
        return await _run(lane, fault, rng, stream, history, ids)
    except Exception as exc:
        if evidence is not None:
            history.dump(evidence)
            exc.add_note(f"the run's history: {evidence}")
        raise


async def _run(
    lane: Lane, fault: Fault, rng: random.Random, stream: str, history: History, ids: list[str]
) -> Outcome:
    async with streamwire.connect(lane.url, timeout=10) as admin:
        await admin.create_stream(stream, **lane.create)
    try:
        await _produce_under(lane, fault, rng, stream, ids, history)
        await _consume(lane.url, stream, history, len(ids))
        final = await _final(lane.url, stream)
        deduplicating = lane.name.startswith("rabbitmq")  # a named producer, publishing ids
        return Outcome(check(history, final), deduplicating, history, final)
    finally:
        async with streamwire.connect(lane.url, timeout=10) as admin:
            await admin.delete_stream(lane.drop(stream), missing_ok=True)
