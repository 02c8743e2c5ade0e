"""Helpers of the Spark tests: broker targets, streams, and reading back what a sink stored.

Reading back uses streamwire directly (not the Spark source under test). Iggy streams are
``"<stream>/t"`` addresses (a topic ``t`` in a stream of its own); where no real Iggy server
runs, the tests use the conformance double (see ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

import streamwire
from streamwire._api import TAIL_COMMIT_HEADER
from tests.brokers import BrokerInfo, brokers_dir, require

__all__ = [
    "IGGY_PARTITIONS",
    "Stored",
    "Target",
    "iggy_from_harness",
    "iggy_target",
    "publish",
    "read_back",
    "spark_session",
    "target",
]

#: JVM flags that halve SparkSession start on a small machine (docs/spark.md).
JVM_FLAGS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def spark_session(app: str, master: str = "local[2]") -> Any:
    """A SparkSession as every Spark test uses it (in the test process, or in a driver
    process of its own): this interpreter for the workers, loopback only, small, quiet."""
    # executors must run this interpreter (it has streamwire and pyarrow)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executor.extraJavaOptions", JVM_FLAGS)
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


#: Partitions of the Iggy topics the tests create (several, to exercise per-partition offsets).
IGGY_PARTITIONS = 2
#: Partitions of the RabbitMQ super streams the ``rabbitmq-super`` lane creates.
SUPER_PARTITIONS = 3


@dataclass(frozen=True)
class Target:
    """A broker the Spark tests can write to."""

    broker: str  # rabbitmq | liftbridge | iggy
    url: str
    partitions: int  # partitions of the streams the tests create

    def new_stream(self, prefix: str) -> str:
        name = f"spark-{prefix}-{uuid.uuid4().hex[:10]}"
        if self.broker == "iggy":
            name += "/t"  # Iggy addresses a topic inside a stream
        asyncio.run(_create(self.url, name, self.partitions))
        return name

    @property
    def super_stream(self) -> bool:
        """Whether the streams are RabbitMQ super streams (what ``create_stream(name,
        partitions=n)`` makes there)."""
        return self.broker == "rabbitmq" and self.partitions > 1

    def delete_stream(self, name: str) -> None:
        if self.broker == "iggy":
            name = name.partition("/")[0]  # the whole stream, with its topic
        asyncio.run(_delete(self.url, name, super_stream=self.super_stream))

    def recreate_stream(self, name: str) -> None:
        """Delete ``name`` and create it again, empty, under the same name."""
        self.delete_stream(name)
        asyncio.run(_create(self.url, name, self.partitions))


#: Iggy topics write each batch before acknowledging it (docs/iggy.md, "Durability"): by
#: default a server acknowledges from memory, and a crash loses what it acknowledged.
IGGY_CRASH_SAFE: dict[str, Any] = {"messages_required_to_save": 1}


async def _create(url: str, name: str, partitions: int) -> None:
    async with streamwire.connect(url, timeout=10.0) as client:
        options = IGGY_CRASH_SAFE if url.startswith(("iggy://", "iggy+tls://")) else {}
        await client.create_stream(name, partitions=partitions, **options)


async def _delete(url: str, name: str, *, super_stream: bool = False) -> None:
    async with streamwire.connect(url, timeout=10.0) as client:
        if super_stream:
            rmq: Any = client  # super_stream= is RabbitMQ's
            await rmq.delete_stream(name, missing_ok=True, super_stream=True)
        else:
            await client.delete_stream(name, missing_ok=True)


def _skip_unless_supported(url: str) -> None:
    """Skip when this streamwire cannot talk to the URL's broker at all (yet)."""

    async def probe() -> None:
        client = await streamwire.connect(url, timeout=5.0)
        await client.close()

    try:
        asyncio.run(probe())
    except streamwire.ConfigurationError as exc:
        scheme = url.split(":", 1)[0]
        pytest.skip(f"{scheme}:// is not supported by this version of streamwire: {exc}")
    except streamwire.StreamwireError:
        pass  # supported; whether the broker answers is require()'s business


def iggy_from_harness() -> BrokerInfo | None:
    """The real Iggy server the harness reports (``.brokers/iggy.env``), or ``None`` when
    it recorded none (then the tests use the conformance double). A recorded server that
    does not answer skips the test, as for every harness broker."""
    if (brokers_dir() / "iggy.env").is_file():
        return require("iggy")
    return None


def iggy_target(url: str) -> Target:
    """An Iggy server (real or the double) at ``url`` as a :class:`Target`."""
    _skip_unless_supported(url)
    return Target("iggy", url, partitions=IGGY_PARTITIONS)


def target(broker: str) -> Target:
    """The running harness ``broker`` as a :class:`Target`, or skip saying why it cannot be
    used. (Iggy comes from the ``iggy`` fixture: the harness's server or the double.)"""
    if broker == "iggy":
        raise ValueError("use the 'iggy' fixture: it falls back to the conformance double")
    info = require("rabbitmq" if broker == "rabbitmq-super" else broker)
    if broker == "liftbridge":
        nats_url = info.extra.get("NATS_URL", "nats://127.0.0.1:4222")
        url = f"{info.url}?nats={nats_url}"
        _skip_unless_supported(url)
        return Target("liftbridge", url, partitions=2)
    if broker == "rabbitmq-super":  # super streams of three partitions
        info = require("rabbitmq")
        _skip_unless_supported(info.url)
        return Target("rabbitmq", info.url, partitions=SUPER_PARTITIONS)
    _skip_unless_supported(info.url)
    return Target(broker, info.url, partitions=1)


@dataclass(frozen=True)
class Stored:
    """A message as read back: where it is and what it holds."""

    partition: int
    offset: int
    value: bytes
    key: bytes | None
    headers: dict[str, bytes]


def read_back(
    t: Target, stream: str, *, expect: int, timeout: float = 30.0, settle: float = 1.0
) -> list[Stored]:
    """Every message of ``stream`` (all partitions), in offset order per partition, less
    the markers streamwire writes (an empty value with ``x-streamwire-tail-commit``: a
    committed tail, a sink retry's fence), which the ``streamwire`` source leaves out too.
    Reads until ``expect`` messages arrived and then ``settle`` seconds more, so extra
    messages (duplicates) are seen too; gives up after ``timeout`` seconds."""
    return asyncio.run(_read_back(t, stream, expect, timeout, settle))


async def _read_back(
    t: Target, stream: str, expect: int, timeout: float, settle: float
) -> list[Stored]:
    out: list[Stored] = []
    async with streamwire.connect(t.url, timeout=10.0) as client:
        consumers: list[tuple[int, streamwire.Consumer]] = [(0, client.consumer(stream))]
        if t.super_stream:  # a consumer per partition stream
            assert isinstance(client, streamwire.SuperStreams)
            names = await client.partitions(stream)
            consumers = [(p, client.consumer(name)) for p, name in enumerate(names)]
        elif t.partitions > 1:  # Liftbridge, Iggy: one consumer per partition
            by_partition: Any = client  # partition= is not in the unified signature
            consumers = [
                (p, by_partition.consumer(stream, partition=p)) for p in range(t.partitions)
            ]
        for _, consumer in consumers:
            await consumer.__aenter__()
        deadline = time.monotonic() + timeout
        quiet_until: float | None = None
        while time.monotonic() < deadline:
            got = 0
            for p, consumer in consumers:
                for m in await consumer.next_batch(max_messages=5000, timeout=0.1):
                    got += 1
                    assert m.offset is not None
                    headers = {k: v.to_bytes() for k, v in m.headers.items()}
                    if not m.value and TAIL_COMMIT_HEADER in headers:
                        continue  # a marker, not a row
                    out.append(Stored(p, m.offset, m.value, m.key, headers))
            if len(out) >= expect:
                if got or quiet_until is None:
                    quiet_until = time.monotonic() + settle
                elif time.monotonic() >= quiet_until:
                    break
        for _, consumer in consumers:
            await consumer.close()
    return out


def publish(t: Target, stream: str, messages: list[streamwire.Message]) -> None:
    """Publish ``messages`` in order with a plain producer and wait for confirmations."""

    async def run() -> None:
        async with streamwire.connect(t.url, timeout=10.0) as client:
            if t.super_stream:  # keyed messages as RabbitMQ routes them, the rest in turn
                assert isinstance(client, streamwire.SuperStreams)
                names = await client.partitions(stream)
                routed: dict[str, list[streamwire.Message]] = {}
                for i, m in enumerate(messages):
                    p = i if m.key is None else client.partition_for_key(m.key, len(names))
                    routed.setdefault(names[p % len(names)], []).append(m)
                for name, some in routed.items():
                    async with client.producer(name) as producer:
                        await producer.send_batch(some)
                        await producer.flush(30.0)
                return
            async with client.producer(stream) as producer:
                await producer.send_batch(messages)
                await producer.flush(30.0)

    asyncio.run(run())


@dataclass(frozen=True)
class PinnedAddress:
    """A Liftbridge ``address_resolver`` that sends every broker address to one place (a
    fault proxy in front of the server), so that no gRPC connection goes around it. A
    frozen dataclass: it pickles to executors by reference and compares equal there, so
    the worker's client cache (keyed by connect options) still finds its client."""

    host: str
    port: int

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        return (self.host, self.port)


def run_available_now(
    spark: Any,
    options: dict[str, Any],
    checkpoint: Any,
    collect: Any,
    schema: str | None = None,
) -> None:
    """One ``Trigger.AvailableNow`` run of a streamwire streaming read with ``options`` (of
    the columns of ``schema``, if given), each micro-batch handed to ``collect(df,
    batch_id)`` (``foreachBatch``, in this process), from and to ``checkpoint``; checked to
    end without an error."""
    reader = spark.readStream.format("streamwire")
    if schema is not None:
        reader = reader.schema(schema)
    query = (
        reader.options(**options)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
