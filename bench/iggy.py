"""Iggy send and poll: streamwire against the official apache-iggy 0.9.0 client.

**Against the conformance double by default.** No Iggy server runs here, so both clients
talk to ``tests/iggy_double`` (an asyncio server in Python speaking Iggy 0.9 / binary
protocol 0.11.0), started in a **subprocess** so that it shares neither the clients' event
loop nor their GIL. The double decodes and checksums every batch in Python and is far slower
than a real Iggy server: the rates below are bounded by it. What this compares is the
*client-side cost* (this process's CPU per message, the Rust runtime of apache-iggy
included) on a slow server, not broker throughput. The double's own CPU per message is
reported next to it. ``--iggy URL`` runs the same against a real server.

Every client runs with its documented defaults in its idiomatic loop, and both sides read
the payload of every message they poll.

* **send**: ``count`` messages of ``size`` bytes to partition 0 of a fresh one-partition
  topic, in calls of ``batch`` messages, until every message is confirmed. streamwire:
  ``send_many`` (one future per call) into ``client.producer(address, partition=0)`` with
  its default options, all awaited at the end; "streamwire futures": ``send_batch`` (a
  future per message), then ``flush``; apache-iggy: ``send_messages`` with a list of
  ``batch`` ``SendMessage`` objects, awaited one after the other (its direct mode; the
  background producer confirms only queueing).
* **poll**: ``count`` messages from offset 0 of one shared topic written once per round,
  each message's payload read. streamwire: ``client.consumer(address, offset="first",
  partition=0)`` with its default options (XXH3 checksums verified), ``next_batch(batch)``
  reading ``value``; "streamwire async for": ``async for`` over the same consumer;
  apache-iggy: ``poll_messages(PollingStrategy.Offset(n), count=batch)`` reading
  ``payload()``.

``python -m bench.iggy --serve-double`` is the subprocess: it prints ``LISTENING host port``
and serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import streamwire.iggy as iggy
from bench._common import (
    Log,
    Measurement,
    Stopwatch,
    comparison_table,
    cpu_ratios,
    first_line,
    rate_ratios,
    read_batches,
    read_each,
    rotated,
    summarize,
)
from streamwire import _native, parse_url

__all__ = (
    "POLLERS",
    "SENDERS",
    "DoubleProcess",
    "run",
    "serve_double",
    "table",
)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300.0
TOPIC = "t"
DOUBLE_LABEL = "conformance double (Python, subprocess)"

Sender = Callable[[str, str, int, int, int], Awaitable[Measurement]]
Poller = Callable[[str, str, int, int], Awaitable[Measurement]]


# --- the double in a subprocess ---------------------------------------------------------


def serve_double() -> None:
    """Run the conformance double until stdin closes (the subprocess side)."""
    from tests.iggy_double import IggyDouble

    class _Unrecorded(list[Any]):
        """The double records every frame for assertions; a long run must not."""

        def append(self, item: Any) -> None:
            pass

    async def main() -> None:
        double = IggyDouble()
        double.frames = _Unrecorded()
        double.requests = _Unrecorded()
        loop = asyncio.get_running_loop()
        closed = asyncio.Event()

        def watch_stdin() -> None:
            sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe or died
            loop.call_soon_threadsafe(closed.set)

        async with double:
            threading.Thread(target=watch_stdin, daemon=True).start()
            print(f"LISTENING {double.host} {double.port}", flush=True)
            await closed.wait()

    asyncio.run(main())


def _process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class DoubleProcess:
    """``async with DoubleProcess() as double:`` the double in a subprocess; ``double.url``
    for streamwire, ``double.address`` for apache-iggy."""

    def __init__(self, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.host = ""
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"iggy://iggy:iggy@{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def cpu_seconds(self) -> float | None:
        pid = self.pid
        return None if pid is None else _process_cpu_seconds(pid)

    async def __aenter__(self) -> DoubleProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.iggy",
            "--serve-double",
            cwd=ROOT,
            # the same double whichever codec the client runs (A/B of STREAMWIRE_PURE)
            env={k: v for k, v in os.environ.items() if k not in _native.PURE_ENV},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert self._proc.stdout is not None
            async with asyncio.timeout(self.timeout):
                line = (await self._proc.stdout.readline()).decode().split()
            if len(line) != 3 or line[0] != "LISTENING":
                raise RuntimeError(f"the Iggy double did not start (said {line!r})")
            self.host, self.port = line[1], int(line[2])
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Close its stdin (it exits), then terminate and kill it if it lingers."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        for signal_it in (None, proc.terminate, proc.kill):
            if signal_it is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal_it()
            try:
                async with asyncio.timeout(5):
                    await proc.wait()
                return
            except TimeoutError:
                continue


@contextlib.asynccontextmanager
async def server(url: str | None) -> AsyncIterator[tuple[str, str, DoubleProcess | None]]:
    """``(streamwire URL, host:port for apache-iggy, the double or None)``: the given
    server, or the double in a subprocess when ``url`` is None."""
    if url is not None:
        parsed = parse_url(url)
        yield url, f"{parsed.host}:{parsed.port}", None
        return
    async with DoubleProcess() as double:
        yield double.url, double.address, double


# --- streamwire -------------------------------------------------------------------------


async def _connect(url: str) -> iggy.Client:
    return await iggy.connect(url, timeout=10, request_timeout=60, reconnect=None)


async def streamwire_send(url: str, stream: str, count: int, size: int, batch: int) -> Measurement:
    """``send_many``: one future per call of ``batch`` messages, all awaited at the end."""
    address = f"{stream}/{TOPIC}"
    async with (
        await _connect(url) as client,
        client.producer(address, partition=0) as producer,
    ):
        body = b"x" * size
        with Stopwatch() as sw:
            futures = [
                await producer.send_many([body] * min(batch, count - start), timeout=TIMEOUT)
                for start in range(0, count, batch)
            ]
            async with asyncio.timeout(TIMEOUT):
                await asyncio.gather(*futures)
        return sw.result(count)


async def streamwire_futures_send(
    url: str, stream: str, count: int, size: int, batch: int
) -> Measurement:
    """``send_batch`` (a future per message), then ``flush``."""
    address = f"{stream}/{TOPIC}"
    async with (
        await _connect(url) as client,
        client.producer(address, partition=0) as producer,
    ):
        body = b"x" * size
        with Stopwatch() as sw:
            for start in range(0, count, batch):
                await producer.send_batch([body] * min(batch, count - start), timeout=TIMEOUT)
            await producer.flush(timeout=TIMEOUT)
        return sw.result(count)


async def streamwire_poll(url: str, stream: str, count: int, batch: int) -> Measurement:
    """``next_batch(batch)`` of a consumer with its default options, reading every value."""
    address = f"{stream}/{TOPIC}"
    async with await _connect(url) as client:
        with Stopwatch() as sw:
            async with client.consumer(address, offset="first", partition=0) as consumer:
                seen = await read_batches(consumer, count, batch)
        return sw.result(seen)


async def streamwire_iter_poll(url: str, stream: str, count: int, batch: int) -> Measurement:
    """``async for`` over a consumer with its default options, reading every value."""
    address = f"{stream}/{TOPIC}"
    async with await _connect(url) as client:
        with Stopwatch() as sw:
            async with (
                asyncio.timeout(TIMEOUT),
                client.consumer(address, offset="first", partition=0) as consumer,
            ):
                seen = await read_each(consumer, count)
        return sw.result(seen)


# --- apache-iggy ------------------------------------------------------------------------


async def _wheel(address: str) -> Any:
    import apache_iggy as ig

    client = ig.IggyClient(address)
    async with asyncio.timeout(30):
        await client.connect()
        await client.login_user("iggy", "iggy")
    return client


async def wheel_send(address: str, stream: str, count: int, size: int, batch: int) -> Measurement:
    import apache_iggy as ig

    client = await _wheel(address)
    body = b"x" * size
    with Stopwatch() as sw:
        async with asyncio.timeout(TIMEOUT):
            for start in range(0, count, batch):
                messages = [ig.SendMessage(body) for _ in range(min(batch, count - start))]
                await client.send_messages(stream, TOPIC, 0, messages)
    return sw.result(count)


async def wheel_poll(address: str, stream: str, count: int, batch: int) -> Measurement:
    import apache_iggy as ig

    client = await _wheel(address)
    consumer = ig.Consumer.Single(1)
    seen = 0
    with Stopwatch() as sw:
        async with asyncio.timeout(TIMEOUT):
            while seen < count:
                got = await client.poll_messages(
                    stream,
                    TOPIC,
                    consumer=consumer,
                    polling_strategy=ig.PollingStrategy.Offset(seen),
                    count=batch,
                    auto_commit=False,
                    partition_id=0,
                )
                if not got:
                    raise RuntimeError(f"apache-iggy stalled after {seen} messages")
                for message in got:
                    _ = message.payload()
                seen += len(got)
    return sw.result(seen)


# The two clients take different addresses (a URL, host:port): the runner passes each its own.
SENDERS: dict[str, tuple[Sender, str]] = {
    "streamwire": (streamwire_send, "url"),
    "streamwire futures": (streamwire_futures_send, "url"),
    "apache-iggy": (wheel_send, "address"),
}
POLLERS: dict[str, tuple[Poller, str]] = {
    "streamwire": (streamwire_poll, "url"),
    "streamwire async for": (streamwire_iter_poll, "url"),
    "apache-iggy": (wheel_poll, "address"),
}


# --- the run ----------------------------------------------------------------------------


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _timed(double: DoubleProcess | None, run: Awaitable[Measurement]) -> Measurement:
    """Await ``run`` (not started yet) and add the double's CPU time over it."""
    before = double.cpu_seconds() if double is not None else None
    m = await run
    after = double.cpu_seconds() if double is not None else None
    if before is None or after is None:
        return m
    return dataclasses.replace(m, server_cpu_seconds=after - before)


async def run(
    url: str | None,
    *,
    rounds: int,
    count: int,
    size: int,
    batch: int = 1_000,
    log: Log = _stderr,
) -> dict[str, Any]:
    """``rounds`` rounds of both clients sending and polling; medians and ratios. ``url``
    None: against the conformance double in a subprocess."""
    sent: dict[str, list[Measurement]] = {name: [] for name in SENDERS}
    polled: dict[str, list[Measurement]] = {name: [] for name in POLLERS}
    async with server(url) as (sw_url, address, double):
        where = {"url": sw_url, "address": address}
        async with await _connect(sw_url) as admin:

            async def fresh() -> str:
                name = f"bench-iggy-{uuid.uuid4().hex[:10]}"
                await admin.create_stream(f"{name}/{TOPIC}", partitions=1)
                return name

            for rnd in range(rounds):
                shared = await fresh()
                try:
                    await streamwire_futures_send(sw_url, shared, count, size, batch)
                    for name in rotated(list(SENDERS), rnd):
                        send, kind = SENDERS[name]
                        stream = await fresh()
                        try:
                            m = await _timed(double, send(where[kind], stream, count, size, batch))
                            sent[name].append(m)
                            log(_progress("send", rnd, name, m))
                        except Exception as exc:  # a client that fails is reported, not fatal
                            log(f"  iggy round {rnd + 1} send {name} failed: {first_line(exc)}")
                        finally:
                            await admin.delete_stream(stream, missing_ok=True)
                    for name in rotated(list(POLLERS), rnd):
                        poll, kind = POLLERS[name]
                        try:
                            m = await _timed(double, poll(where[kind], shared, count, batch))
                            polled[name].append(m)
                            log(_progress("poll", rnd, name, m))
                        except Exception as exc:
                            log(f"  iggy round {rnd + 1} poll {name} failed: {first_line(exc)}")
                finally:
                    await admin.delete_stream(shared, missing_ok=True)
    send_rows = summarize(sent)
    poll_rows = summarize(polled)
    return {
        "server": DOUBLE_LABEL if url is None else url,
        "double": url is None,
        "messages": count,
        "size": size,
        "batch": batch,
        "rounds": rounds,
        "send": send_rows,
        "poll": poll_rows,
        "ratios": {"send": rate_ratios(send_rows), "poll": rate_ratios(poll_rows)},
        "cpu_ratios": {"send": cpu_ratios(send_rows), "poll": cpu_ratios(poll_rows)},
    }


def _progress(direction: str, rnd: int, name: str, m: Measurement) -> str:
    server = m.server_cpu_us
    extra = "" if server is None else f"  server {server:>6.1f} µs CPU/msg"
    return (
        f"  iggy round {rnd + 1} {direction} {name:<12} {m.rate:>10,.0f} msg/s  "
        f"{m.cpu_us:>6.1f} µs CPU/msg{extra}"
    )


def table(result: dict[str, Any]) -> str:
    """The terminal/Markdown table of a :func:`run` result."""
    text = comparison_table(result, ("send", "poll"), peer="peer", server_cpu=True)
    where = result["server"]
    note = (
        f"server: {where} — a Python server: this compares client-side cost on a slow "
        "server, not Iggy's throughput"
        if result.get("double")
        else f"server: {where}"
    )
    return f"{text}\n\n{note}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.iggy")
    parser.add_argument(
        "--serve-double",
        action="store_true",
        help="run the conformance double until stdin closes (used by the benchmark)",
    )
    args = parser.parse_args()
    if not args.serve_double:
        parser.error("run the benchmark with: python -m bench --brokers iggy")
    serve_double()


if __name__ == "__main__":
    main()
