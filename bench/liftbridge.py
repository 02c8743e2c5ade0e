"""Liftbridge throughput: streamwire against go-liftbridge and gufo-liftbridge on one server.

Every publisher sends ``count`` messages of ``size`` bytes to partition 0 of a fresh
one-partition stream and returns once all are stored; every consumer reads ``count``
messages from the first offset of one shared stream (written once per round by streamwire,
so every consumer sees the same log). Each result is a :class:`bench._common.Measurement`
(wall clock, and this process's CPU time: gRPC's C-core threads are in this process; the
Liftbridge server and nats-server are not).

* **streamwire**: envelopes published straight onto NATS with LEADER acks, pipelined: at
  most ``window`` messages await their ack (the producer's ``max_in_flight``), handed over
  with ``send_batch`` in chunks of up to 1 000, then ``flush`` waits for every ack. Consuming:
  ``next_batch`` over the gRPC Subscribe stream, read by streamwire's own HTTP/2 reader
  (``subscribe_transport="auto"``, the default).
* **streamwire grpcio** (consuming): the same consumer reading the Subscribe stream with a
  thread over grpcio (``subscribe_transport="grpcio"``, the fallback).
* **streamwire grpc**: the same producer with ``transport="grpc"`` (the server's streaming
  PublishAsync RPC, as go-liftbridge publishes), carried by streamwire's own HTTP/2 client
  (``publish_transport="auto"``, the default).
* **streamwire grpc grpcio**: the same over grpc.aio (``publish_transport="grpcio"``, the
  fallback).
* **go-liftbridge** (``bench/liftbridge_go.py``): the Go client v2.3.0 in its own process,
  PublishAsync with LEADER acks and the same window, and Subscribe from the earliest offset;
  timed in Go, its CPU time is the Go process's. Skipped, with the reason logged, when Go is
  missing or the program does not build.
* **gufo publish_bulk**: gufo-liftbridge 0.2.0's streaming ``PublishAsync`` with LEADER acks
  (its only publishing mode that reports acks); requests are built lazily inside the timed
  region, as a caller would. Done when the last ack has arrived.
* **gufo publish ×64**: gufo's unary ``publish`` with 64 calls in flight on one client.
  gufo sets no gRPC deadline, so Liftbridge v1.9.0 answers without waiting for the ack
  (checked: the response has no ``ack``); the run therefore ends when the partition's high
  watermark shows all ``count`` messages stored (polled with gufo's own
  ``get_partition_metadata``).
* **gufo publish**: the same unary ``publish``, awaited one by one (its documented use).
* Consuming with gufo: ``subscribe(start_position=EARLIEST)``, an async generator over the
  gRPC stream, reading ``value`` of each message.

Peers are only called through their public API (gufo-liftbridge is BSD-3).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

import streamwire.liftbridge as lb
from bench import liftbridge_go
from bench._common import (
    Log,
    Measurement,
    Stopwatch,
    comparison_table,
    cpu_ratios,
    first_line,
    fmt_ratio,
    rate_ratios,
    ratio,
    read_batches,
    read_each,
    rotated,
    summarize,
)
from streamwire import parse_url

__all__ = (
    "CONSUMERS",
    "DEFAULT_URL",
    "GO_TARGET_RATIO",
    "PUBLISHERS",
    "TARGET_RATIO",
    "go_verdict",
    "publish_verdict",
    "run",
    "table",
)

DEFAULT_URL = "liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222"
TIMEOUT = 300.0
"""Upper bound of one timed run (gufo's unary publish manages ~2 000 msg/s here)."""
CHUNK = 1_000
GUFO_CONCURRENCY = 64
TARGET_RATIO = 3.0
"""Publishing: streamwire should reach at least this multiple of gufo's fastest mode."""
DEFAULT_WINDOW = lb.ProducerOptions().max_in_flight
"""The producer's default in-flight window (go-liftbridge gets the same)."""
GO_TARGET_RATIO = 1.0
"""Publishing (either transport) and consuming: streamwire ÷ go-liftbridge."""
GO = "go-liftbridge"

Publisher = Callable[[str, str, int, int, int], Awaitable[Measurement]]
Consumer = Callable[[str, str, int], Awaitable[Measurement]]


def grpc_address(url: str) -> str:
    """``host:port`` of the gRPC server named by a ``liftbridge://`` URL."""
    parsed = parse_url(url)
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"{host}:{parsed.port}"


async def _connect(
    url: str, subscribe_transport: str = "auto", publish_transport: str = "auto"
) -> lb.Client:
    return await lb.connect(
        url,
        timeout=10,
        reconnect=None,
        subscribe_transport=subscribe_transport,
        publish_transport=publish_transport,
    )


# --- streamwire -------------------------------------------------------------------------


async def streamwire_publish(
    url: str,
    stream: str,
    count: int,
    size: int,
    window: int,
    transport: Literal["nats", "grpc"] = "nats",
    publish_transport: str = "auto",
) -> Measurement:
    # the producer's defaults (LEADER acks, max_in_flight 10 000); a window other than the
    # default is passed on (``--liftbridge-window``: then the row is a tuned one)
    tuned: dict[str, Any] = {} if window == DEFAULT_WINDOW else {"max_in_flight": window}
    async with (
        await _connect(url, publish_transport=publish_transport) as client,
        client.producer(stream, transport=transport, **tuned) as producer,
    ):
        body = b"x" * size
        chunk = min(CHUNK, window)
        with Stopwatch() as sw:
            for start in range(0, count, chunk):
                await producer.send_batch([body] * min(chunk, count - start), timeout=TIMEOUT)
            await producer.flush(timeout=TIMEOUT)
        return sw.result(count)


async def streamwire_consume(
    url: str, stream: str, count: int, subscribe_transport: str = "auto"
) -> Measurement:
    async with await _connect(url, subscribe_transport) as client:
        with Stopwatch() as sw:
            async with client.consumer(stream, offset="first") as consumer:
                seen = await read_batches(consumer, count, 10_000)
        return sw.result(seen)


async def streamwire_iter_consume(url: str, stream: str, count: int) -> Measurement:
    """``async for`` over a consumer with its default options, reading every value."""
    async with await _connect(url) as client:
        with Stopwatch() as sw:
            async with (
                asyncio.timeout(TIMEOUT),
                client.consumer(stream, offset="first") as consumer,
            ):
                seen = await read_each(consumer, count)
        return sw.result(seen)


async def streamwire_consume_grpcio(url: str, stream: str, count: int) -> Measurement:
    return await streamwire_consume(url, stream, count, "grpcio")


async def streamwire_publish_grpc(
    url: str, stream: str, count: int, size: int, window: int
) -> Measurement:
    return await streamwire_publish(url, stream, count, size, window, transport="grpc")


async def streamwire_publish_grpc_grpcio(
    url: str, stream: str, count: int, size: int, window: int
) -> Measurement:
    return await streamwire_publish(
        url, stream, count, size, window, transport="grpc", publish_transport="grpcio"
    )


# --- go-liftbridge ----------------------------------------------------------------------


async def go_publish(url: str, stream: str, count: int, size: int, window: int) -> Measurement:
    return await liftbridge_go.go_publish(grpc_address(url), stream, count, size, window)


async def go_consume(url: str, stream: str, count: int) -> Measurement:
    return await liftbridge_go.go_consume(grpc_address(url), stream, count)


# --- gufo-liftbridge --------------------------------------------------------------------


def _gufo(url: str) -> Any:
    from gufo.liftbridge.client import LiftbridgeClient

    return LiftbridgeClient([grpc_address(url)])


async def _gufo_ready(client: Any, stream: str) -> None:
    """Open gufo's channel and learn the leaders before the clock starts (gufo retries an
    unreachable server forever: bounded here)."""
    async with asyncio.timeout(30):
        await client.get_metadata(stream)


async def _gufo_wait_stored(client: Any, stream: str, count: int) -> None:
    async with asyncio.timeout(TIMEOUT):
        while True:
            meta = await client.get_partition_metadata(stream, 0)
            if meta.high_watermark >= count - 1:
                return
            await asyncio.sleep(0.005)


async def gufo_publish_bulk(
    url: str, stream: str, count: int, size: int, window: int
) -> Measurement:
    from gufo.liftbridge.types import AckPolicy

    async with _gufo(url) as client:
        await _gufo_ready(client, stream)
        body = b"x" * size

        def requests() -> Iterator[Any]:
            for _ in range(count):
                yield client.get_publish_request(
                    body, stream=stream, partition=0, ack_policy=AckPolicy.LEADER
                )

        acked = failed = 0
        with Stopwatch() as sw:
            async with asyncio.timeout(TIMEOUT):
                # typed as yielding Ack; gufo 0.2.0 yields PublishResponse messages
                async for response in client.publish_bulk(requests()):
                    if response.HasField("asyncError"):
                        failed += 1
                    else:
                        acked += 1
                    if acked + failed >= count:
                        break
        if failed or acked < count:
            raise RuntimeError(f"gufo publish_bulk: {acked} acked, {failed} failed of {count}")
        return sw.result(count)


async def gufo_publish_concurrent(
    url: str, stream: str, count: int, size: int, window: int
) -> Measurement:
    from gufo.liftbridge.types import AckPolicy

    async with _gufo(url) as client:
        await _gufo_ready(client, stream)
        body = b"x" * size
        left = count

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await client.publish(body, stream=stream, partition=0, ack_policy=AckPolicy.LEADER)

        with Stopwatch() as sw:
            async with asyncio.timeout(TIMEOUT), asyncio.TaskGroup() as group:
                for _ in range(min(GUFO_CONCURRENCY, count)):
                    group.create_task(worker())
            await _gufo_wait_stored(client, stream, count)
        return sw.result(count)


async def gufo_publish(url: str, stream: str, count: int, size: int, window: int) -> Measurement:
    from gufo.liftbridge.types import AckPolicy

    async with _gufo(url) as client:
        await _gufo_ready(client, stream)
        body = b"x" * size
        with Stopwatch() as sw:
            async with asyncio.timeout(TIMEOUT):
                for _ in range(count):
                    await client.publish(
                        body, stream=stream, partition=0, ack_policy=AckPolicy.LEADER
                    )
            await _gufo_wait_stored(client, stream, count)
        return sw.result(count)


async def gufo_consume(url: str, stream: str, count: int) -> Measurement:
    from gufo.liftbridge.types import StartPosition

    async with _gufo(url) as client:
        await _gufo_ready(client, stream)
        seen = 0
        with Stopwatch() as sw:
            async with asyncio.timeout(TIMEOUT):
                messages: Any = client.subscribe(
                    stream, partition=0, start_position=StartPosition.EARLIEST
                )
                async with contextlib.aclosing(messages):
                    async for message in messages:
                        _ = message.value
                        seen += 1
                        if seen >= count:
                            break
        return sw.result(seen)


PUBLISHERS: dict[str, Publisher] = {
    "streamwire": streamwire_publish,
    "streamwire grpc": streamwire_publish_grpc,
    "streamwire grpc grpcio": streamwire_publish_grpc_grpcio,
    GO: go_publish,
    "gufo publish_bulk": gufo_publish_bulk,
    f"gufo publish ×{GUFO_CONCURRENCY}": gufo_publish_concurrent,
    "gufo publish": gufo_publish,
}
CONSUMERS: dict[str, Consumer] = {
    "streamwire": streamwire_consume,
    "streamwire async for": streamwire_iter_consume,
    "streamwire grpcio": streamwire_consume_grpcio,
    GO: go_consume,
    "gufo": gufo_consume,
}


# --- the run ----------------------------------------------------------------------------


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _fresh_stream(admin: lb.Client) -> str:
    name = f"bench-lb-{uuid.uuid4().hex[:10]}"
    await admin.create_stream(name)
    return name


async def run(
    url: str,
    *,
    rounds: int,
    count: int,
    size: int,
    window: int = 10_000,
    log: Log = _stderr,
) -> dict[str, Any]:
    """``rounds`` rounds of every publisher and consumer; medians, ratios and the verdict."""
    go_skipped = await _go_skipped()
    if go_skipped is not None:
        log(f"  liftbridge: {GO} skipped ({go_skipped})")
    publishers = [name for name in PUBLISHERS if go_skipped is None or name != GO]
    consumers = [name for name in CONSUMERS if go_skipped is None or name != GO]
    pub: dict[str, list[Measurement]] = {name: [] for name in publishers}
    con: dict[str, list[Measurement]] = {name: [] for name in consumers}
    async with await _connect(url) as admin:
        for rnd in range(rounds):
            shared = await _fresh_stream(admin)
            try:
                await streamwire_publish(url, shared, count, size, window)
                for name in rotated(publishers, rnd):
                    stream = await _fresh_stream(admin)
                    try:
                        m = await PUBLISHERS[name](url, stream, count, size, window)
                        pub[name].append(m)
                        log(
                            f"  liftbridge round {rnd + 1} publish {name:<18} "
                            f"{m.rate:>10,.0f} msg/s  {m.cpu_us:>7.1f} µs CPU/msg"
                        )
                    except Exception as exc:  # a client that fails is reported, not fatal
                        why = first_line(exc)
                        log(f"  liftbridge round {rnd + 1} publish {name} failed: {why}")
                    finally:
                        await admin.delete_stream(stream, missing_ok=True)
                for name in rotated(consumers, rnd):
                    try:
                        m = await CONSUMERS[name](url, shared, count)
                        con[name].append(m)
                        log(
                            f"  liftbridge round {rnd + 1} consume {name:<18} "
                            f"{m.rate:>10,.0f} msg/s  {m.cpu_us:>7.1f} µs CPU/msg"
                        )
                    except Exception as exc:
                        why = first_line(exc)
                        log(f"  liftbridge round {rnd + 1} consume {name} failed: {why}")
            finally:
                await admin.delete_stream(shared, missing_ok=True)
    publish = summarize(pub)
    consume = summarize(con)
    return {
        "server": url,
        "messages": count,
        "size": size,
        "rounds": rounds,
        "window": window,
        "publish": publish,
        "consume": consume,
        "ratios": {"publish": rate_ratios(publish), "consume": rate_ratios(consume)},
        "cpu_ratios": {"publish": cpu_ratios(publish), "consume": cpu_ratios(consume)},
        "verdict": publish_verdict(publish),
        "go": go_verdict(publish, consume),
        "go_skipped": go_skipped,
    }


async def _go_skipped() -> str | None:
    """Why go-liftbridge cannot run here (building it if needed), or None."""
    try:
        await asyncio.to_thread(liftbridge_go.binary)
    except liftbridge_go.GoUnavailable as exc:
        return str(exc)
    return None


def go_verdict(
    publish: dict[str, dict[str, Any]],
    consume: dict[str, dict[str, Any]],
    target: float = GO_TARGET_RATIO,
) -> dict[str, Any]:
    """streamwire's rates over go-liftbridge's: publishing over NATS (``publish``) and over
    gRPC (``publish_grpc``), and consuming; each None when a side has no result. ``met``:
    every available ratio reaches ``target`` (None when none is available)."""

    def over(rows: dict[str, dict[str, Any]], mine: str) -> float | None:
        return ratio(rows.get(mine, {}).get("msg_per_s"), rows.get(GO, {}).get("msg_per_s"))

    ratios = {
        "publish": over(publish, "streamwire"),
        "publish_grpc": over(publish, "streamwire grpc"),
        "consume": over(consume, "streamwire"),
    }
    known = [value for value in ratios.values() if value is not None]
    return {**ratios, "target": target, "met": all(v >= target for v in known) if known else None}


def publish_verdict(
    publish: dict[str, dict[str, Any]], target: float = TARGET_RATIO
) -> dict[str, Any]:
    """streamwire's publishing rate over gufo's fastest mode, whether it meets ``target``
    (``met`` is None when either side has no result), and that mode's client CPU per
    message over streamwire's."""
    mine = publish.get("streamwire", {}).get("msg_per_s")
    peers = {
        name: row["msg_per_s"]
        for name, row in publish.items()
        if name.startswith("gufo") and row.get("msg_per_s")
    }
    if mine is None or not peers:
        return {
            "fastest_gufo": None,
            "ratio": None,
            "cpu_ratio": None,
            "target": target,
            "met": None,
        }
    fastest = max(peers, key=lambda name: peers[name])
    value = ratio(mine, peers[fastest])
    return {
        "fastest_gufo": fastest,
        "ratio": value,
        "cpu_ratio": ratio(
            publish[fastest].get("cpu_us_per_msg"), publish["streamwire"].get("cpu_us_per_msg")
        ),
        "target": target,
        "met": value is not None and value >= target,
    }


def table(result: dict[str, Any]) -> str:
    """The terminal/Markdown table of a :func:`run` result."""
    text = comparison_table(result, ("publish", "consume"), peer="client")
    verdict = result["verdict"]
    if verdict["met"] is None:
        line = "publish target: no result to compare"
    else:
        line = (
            f"publish: streamwire ÷ fastest gufo mode ({verdict['fastest_gufo']}) = "
            f"{verdict['ratio']:.2f}x, target ≥ {verdict['target']:g}x: "
            f"{'met' if verdict['met'] else 'NOT met'}; client CPU per message "
            f"{fmt_ratio(verdict['cpu_ratio'])} streamwire's"
        )
    return f"{text}\n\n{line}\n{go_line(result)}"


def go_line(result: dict[str, Any]) -> str:
    """The streamwire ÷ go-liftbridge summary line of a :func:`run` result."""
    skipped = result.get("go_skipped")
    if skipped:
        return f"{GO}: skipped ({skipped})"
    go = result.get("go") or {}
    if go.get("met") is None:
        return f"{GO}: no result to compare"
    return (
        f"streamwire ÷ {GO}: publish nats {fmt_ratio(go['publish'])}, publish grpc "
        f"{fmt_ratio(go['publish_grpc'])}, consume {fmt_ratio(go['consume'])}; "
        f"target ≥ {go['target']:g}x: {'met' if go['met'] else 'NOT met'}"
    )
