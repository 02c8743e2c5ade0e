"""Iggy send and poll: streamwire against the Rust SDK itself, ``iggy-bench``, on one real
server: ``python -m bench --iggy-rust``.

The Python peer (apache-iggy, ``bench/iggy.py``) is a binding of the Rust SDK; a user after
the fastest way to feed Iggy compares with the SDK itself, and Iggy's own ``iggy-bench`` is
that SDK's measured ceiling. Nothing of it is in this repository: build it from the same
apache/iggy snapshot as the server (``cargo build --release -p iggy-bench``) and name the
binary in ``IGGY_BENCH_BIN``, as ``IGGY_SERVER_BIN`` names the server. ``--iggy`` (default:
the harness's server) must be a real server: ``iggy-bench`` does not speak to the double.

Shapes: message sizes (``--iggy-rust-sizes``, default 16, 256 and 1,000 bytes) × messages
per batch (``--iggy-rust-batches``, 100 and 1,000) × actors (``--iggy-rust-actors``, 1 and
4), ``--iggy-rust-messages`` messages in all per run (split between the actors). An actor
is a client with its own connection writing to (or reading from) a stream of its own with one
partition, as ``iggy-bench``'s pinned modes do:

* **send**: ``iggy-bench pinned-producer`` (its low-level API: each ``send_messages`` call
  awaited before the next), and with ``-H`` its high-level producer (a second Rust row).
  Always with ``--nodelay`` (TCP_NODELAY, which asyncio sets on streamwire's connections):
  without it, batches of 100 wait on delayed acknowledgements (the low-level producer sent
  583k messages/s instead of 840k at 256 B, the high-level one 2,313 with 44 ms per batch);
  streamwire: ``send_many`` of ``batch`` bodies into ``client.producer(..., partition=0)``
  with the default options, every call's future awaited at the end (its idiomatic fast
  call: sends pipeline within ``max_in_flight``);
* **poll**: ``iggy-bench pinned-consumer --reuse-streams`` over the streams its producer
  just wrote; streamwire: ``next_batch(batch)`` over the same streams, reading every value
  (the Rust SDK parses every message's header into its struct and sums the payload sizes;
  it does not copy them).

Every round runs each shape's four runs, Rust and streamwire alternating which goes first.
Rates: iggy-bench's own "Total throughput" (its actors' timed section), streamwire's wall
clock from the first send (or poll) to the last confirmation (or value). **Client CPU per
message**: streamwire, this process over the timed section; iggy-bench, what its process
spent on the batches a run of a tenth of them did not have (its start, connection, stream
set-up and report cancel out). The server's CPU is in neither; it shares the machine's cores
with the client, so client CPU is throughput.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import statistics
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamwire.iggy as iggy
from bench._common import (
    Measurement,
    Stopwatch,
    first_line,
    fmt_ratio,
    markdown_table,
    read_batches,
)
from streamwire import parse_url

__all__ = ("BENCH_ENV", "Shape", "parse_rate", "run", "shapes", "table")

BENCH_ENV = "IGGY_BENCH_BIN"
TIMEOUT = 300.0
#: Seconds an iggy-bench run may take: past it, it is stopped and its row says so.
RUST_TIMEOUT = 120.0
#: iggy-bench's names: streams ``bench-stream-N`` (N from 1), each with ``topic-1``.
RUST_STREAM, RUST_TOPIC = "bench-stream-{}", "topic-1"
SIDES = ("streamwire", "rust")
_THROUGHPUT = re.compile(r"Total throughput: [0-9.]+ [A-Za-z/]+, ([0-9.]+) messages/s")


@dataclass(frozen=True)
class Shape:
    size: int
    batch: int
    actors: int

    @property
    def label(self) -> str:
        return f"{self.size} B × {self.batch}, {self.actors} actor{'s' if self.actors > 1 else ''}"


def shapes(sizes: Sequence[int], batches: Sequence[int], actors: Sequence[int]) -> list[Shape]:
    return [Shape(s, b, a) for a in actors for b in batches for s in sizes]


def parse_rate(output: str, role: str) -> float:
    """The messages per second of iggy-bench's "<role> Results" line."""
    for line in output.splitlines():
        if line.startswith(f"{role} Results"):
            found = _THROUGHPUT.search(line)
            if found:
                return float(found.group(1))
    raise RuntimeError(f"iggy-bench printed no {role} throughput:\n{output[-2000:]}")


# --- iggy-bench -----------------------------------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _iggy_bench(
    binary: str, address: str, shape: Shape, batches: int, mode: str, *, high_level: bool
) -> tuple[str, float]:
    """Run iggy-bench; its output and its process's CPU seconds."""
    role_flag = "-p" if mode == "pinned-producer" else "-c"
    command = [
        binary,
        "-m",
        str(shape.size),
        "-P",
        str(shape.batch),
        "-b",
        str(batches),
        *(["-H"] if high_level else []),
        *(["--reuse-streams"] if mode == "pinned-consumer" else []),
        mode,
        role_flag,
        str(shape.actors),
        "-s",
        str(shape.actors),
        "tcp",
        "--server-address",
        address,
        "--nodelay",  # TCP_NODELAY, as streamwire's connections (asyncio's) have
    ]
    before = _children_cpu()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=RUST_TIMEOUT, check=False, env=_quiet()
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(command)} did not finish in {RUST_TIMEOUT:.0f} s") from None
    cpu = _children_cpu() - before
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    return done.stdout + done.stderr, cpu


def _quiet() -> dict[str, str]:
    return {**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"}


def rust_run(
    binary: str, address: str, shape: Shape, messages: int, mode: str, *, high_level: bool = False
) -> Measurement:
    """One iggy-bench run of ``messages`` in all; its rate and its CPU less its set-up's."""
    role = "Producers" if mode == "pinned-producer" else "Consumers"
    per_actor = max(2, messages // shape.actors // shape.batch)
    base = max(1, per_actor // 10)
    total = per_actor * shape.batch * shape.actors
    # first a run of a tenth of the batches (a producer's recreates its streams, so it goes
    # before the measured run, whose messages the consumers then read): the CPU the rest
    # of the batches cost is the CPU per message, the process's start and set-up left out
    _, cpu_base = _iggy_bench(binary, address, shape, base, mode, high_level=high_level)
    output, cpu = _iggy_bench(binary, address, shape, per_actor, mode, high_level=high_level)
    rate = parse_rate(output, role)
    work = max(cpu - cpu_base, 0.0) * total / ((per_actor - base) * shape.batch * shape.actors)
    return Measurement(total, total / rate, work)


# --- streamwire -----------------------------------------------------------------------------


async def _send_one(url: str, address: str, count: int, size: int, batch: int) -> None:
    async with (
        await iggy.connect(url, timeout=10, request_timeout=60) as client,
        client.producer(address, partition=0) as producer,
    ):
        body = b"x" * size
        futures = [
            await producer.send_many([body] * min(batch, count - start), timeout=TIMEOUT)
            for start in range(0, count, batch)
        ]
        async with asyncio.timeout(TIMEOUT):
            await asyncio.gather(*futures)


async def streamwire_send(url: str, shape: Shape, messages: int) -> Measurement:
    """``actors`` clients, each ``send_many`` into a fresh stream of its own."""
    per_actor = max(1, messages // shape.actors // shape.batch) * shape.batch
    names = [f"sw-rust-{uuid.uuid4().hex[:8]}" for _ in range(shape.actors)]
    async with await iggy.connect(url, timeout=10) as admin:
        for name in names:
            await admin.create_stream(f"{name}/t", partitions=1)
        try:
            with Stopwatch() as sw:
                await asyncio.gather(
                    *(_send_one(url, f"{n}/t", per_actor, shape.size, shape.batch) for n in names)
                )
                return sw.result(per_actor * shape.actors)
        finally:
            for name in names:
                await admin.delete_stream(name, missing_ok=True)


async def _poll_one(url: str, address: str, count: int, batch: int) -> int:
    async with (
        await iggy.connect(url, timeout=10, request_timeout=60) as client,
        client.consumer(address, offset="first", partition=0) as consumer,
    ):
        return await read_batches(consumer, count, batch)


async def streamwire_poll(url: str, shape: Shape, messages: int) -> Measurement:
    """``actors`` clients, each reading iggy-bench's stream of the same number whole."""
    per_actor = max(1, messages // shape.actors // shape.batch) * shape.batch
    addresses = [f"{RUST_STREAM.format(k)}/{RUST_TOPIC}" for k in range(1, shape.actors + 1)]
    with Stopwatch() as sw:
        seen = await asyncio.gather(*(_poll_one(url, a, per_actor, shape.batch) for a in addresses))
        return sw.result(sum(seen))


# --- the run --------------------------------------------------------------------------------


def run(
    url: str, *, binary: str, rounds: int, messages: int, shape_list: Sequence[Shape]
) -> dict[str, Any]:
    """Every shape, ``rounds`` rounds: rates, CPU per message and ratios."""
    if not Path(binary).is_file():
        raise RuntimeError(f"{BENCH_ENV}={binary!r} is not a file: build iggy-bench first")
    parsed = parse_url(url)
    address = f"{parsed.host}:{parsed.port}"
    version = (
        subprocess.run(
            [binary, "--version"], capture_output=True, text=True, check=False, env=_quiet()
        )
        .stdout.strip()
        .splitlines()[-1:]
    )
    results: list[dict[str, Any]] = []
    for shape in shape_list:
        failures: dict[str, str] = {}
        samples: dict[str, list[Measurement]] = {
            "send streamwire": [],
            "send rust": [],
            "send rust high-level": [],
            "poll streamwire": [],
            "poll rust": [],
        }
        for r in range(rounds):
            rust_first = r % 2 == 0
            if not rust_first:
                samples["send streamwire"].append(
                    asyncio.run(streamwire_send(url, shape, messages))
                )
            try:
                samples["send rust high-level"].append(
                    rust_run(binary, address, shape, messages, "pinned-producer", high_level=True)
                )
            except RuntimeError as exc:  # a second Rust row: its failure is reported, not fatal
                failures.setdefault("send rust high-level", first_line(exc))
                print(f"[iggy-rust] {shape.label}: the high-level producer failed: {exc}")
            samples["send rust"].append(
                rust_run(binary, address, shape, messages, "pinned-producer")
            )
            if rust_first:
                samples["poll rust"].append(
                    rust_run(binary, address, shape, messages, "pinned-consumer")
                )
                samples["poll streamwire"].append(
                    asyncio.run(streamwire_poll(url, shape, messages))
                )
                samples["send streamwire"].append(
                    asyncio.run(streamwire_send(url, shape, messages))
                )
            else:
                samples["poll streamwire"].append(
                    asyncio.run(streamwire_poll(url, shape, messages))
                )
                samples["poll rust"].append(
                    rust_run(binary, address, shape, messages, "pinned-consumer")
                )
        row: dict[str, Any] = {
            "size": shape.size,
            "batch": shape.batch,
            "actors": shape.actors,
            "failures": failures,
        }
        for name, runs in samples.items():
            if not runs:
                row[name] = None
                continue
            row[name] = {
                "msg_per_s": statistics.median(m.rate for m in runs),
                "cpu_us_per_msg": statistics.median(m.cpu_us for m in runs),
                "rounds": [round(m.rate, 1) for m in runs],
            }
        for direction, peers in (("send", ("rust", "rust high-level")), ("poll", ("rust",))):
            own = samples[f"{direction} streamwire"]
            for peer in peers:
                theirs = samples[f"{direction} {peer}"]
                if len(theirs) != len(own):
                    row[f"{direction} ratio vs {peer}"] = None
                    continue
                paired = sorted(a.rate / b.rate for a, b in zip(own, theirs, strict=True))
                row[f"{direction} ratio vs {peer}"] = {
                    "median": statistics.median(paired),
                    "min": paired[0],
                    "max": paired[-1],
                }
        results.append(row)
        print(f"[iggy-rust] {shape.label}: {_line(row)}", flush=True)
    return {
        "server": url.rsplit("@", 1)[-1],
        "iggy_bench": {"binary": binary, "version": " ".join(version)},
        "rounds": rounds,
        "messages": messages,
        "shapes": results,
    }


def _line(row: dict[str, Any]) -> str:
    return ", ".join(
        f"{key.split(' vs ')[0].split()[0]} vs {key.split(' vs ')[1]} {fmt_ratio(value['median'])}"
        for key, value in row.items()
        if " ratio vs " in key and value is not None
    )


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f}M"


def table(result: dict[str, Any]) -> str:
    """One row per shape: rates, CPU per message and the paired ratios (min–max)."""
    header = [
        "shape",
        "send: streamwire",
        "Rust SDK",
        "ratio",
        "Rust high-level",
        "ratio",
        "CPU µs/msg (sw / Rust)",
        "poll: streamwire",
        "Rust SDK",
        "ratio",
        "CPU µs/msg (sw / Rust)",
    ]
    rows = []
    for row in result["shapes"]:
        shape = Shape(row["size"], row["batch"], row["actors"])

        def ratio(key: str, row: dict[str, Any] = row) -> str:
            r = row[key]
            if r is None:
                return "– (failed)"
            return f"**{fmt_ratio(r['median'])}** ({r['min']:.2f}–{r['max']:.2f})"

        def rate(key: str, row: dict[str, Any] = row) -> str:
            return "–" if row[key] is None else _rate(row[key]["msg_per_s"])

        def cpu(direction: str, row: dict[str, Any] = row) -> str:
            mine = row[f"{direction} streamwire"]["cpu_us_per_msg"]
            theirs = row[f"{direction} rust"]["cpu_us_per_msg"]
            return f"{mine:.2f} / {theirs:.2f}"

        rows.append(
            [
                shape.label,
                rate("send streamwire"),
                rate("send rust"),
                ratio("send ratio vs rust"),
                rate("send rust high-level"),
                ratio("send ratio vs rust high-level"),
                cpu("send"),
                rate("poll streamwire"),
                rate("poll rust"),
                ratio("poll ratio vs rust"),
                cpu("poll"),
            ]
        )
    return markdown_table(header, rows, right=range(1, len(header)))
