"""Run the benchmarks: ``python -m bench [--brokers rabbitmq,liftbridge,iggy] [--rounds 3]``.

RabbitMQ (``--messages 200000 --sizes 100,1000``): after an untimed warm-up round, each round
runs every client against the same broker, in an order that rotates from round to round (a
cycle of :data:`RUN_ORDER`, which runs each peer of the headline next to the streamwire call
it is held against), every publisher first and then every consumer: each publishes to a
fresh stream;
all consume one shared stream written once per round (the same chunk layout for all).
Liftbridge (``bench/liftbridge.py``) and Iggy (``bench/iggy.py``, on the conformance double
unless ``--iggy URL``) follow the same scheme with their own message counts. Medians over the
rounds are reported with ratios to the peers, as tables, as JSON
(``bench/results/latest.json``, or ``--output``) and as PNG plots (``docs/img``). Numbers are
for this machine; compare ratios, not rates.

Every client runs with its documented defaults, in its idiomatic loop, and reads the value of
every message it consumes (bench/rabbitmq.py, bench/liftbridge.py, bench/iggy.py say how
for each). The run ends with the headline (``bench/headline.py``): every streamwire path's
ratio against the fastest peer measured for it, with the goals of issue 26.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import streamwire.rabbitmq as rmq
from bench import codec as codec_bench
from bench import iggy as iggy_bench
from bench import iggy_rust as iggy_rust_bench
from bench import liftbridge as liftbridge_bench
from bench import rabbitmq
from bench import spark as spark_bench
from bench import spark_jvm as spark_jvm_bench
from bench._common import first_line, rotated, settle_heap
from bench.headline import (
    headline,
    headline_table,
    rabbitmq_rows,
    rows_as_json,
    summary_table,
)
from bench.latency import percentiles, rabbitmq_latency
from bench.plots import plot_broker, plot_headline, plot_latency
from streamwire import _native

RESULTS = Path(__file__).resolve().parent / "results"
BROKERS = ("rabbitmq", "liftbridge", "iggy")


def harness_iggy_url() -> str | None:
    """The URL of the real Iggy server the harness recorded (``.brokers/iggy.env``)."""
    brokers = Path(
        os.environ.get("STREAMWIRE_BROKERS_DIR") or Path(__file__).parent.parent / ".brokers"
    )
    env = brokers / "iggy.env"
    if not env.is_file():
        return None
    for line in env.read_text(encoding="utf-8").splitlines():
        if line.startswith("URL="):
            return line.removeprefix("URL=").strip() or None
    return None


def parse_brokers(value: str) -> list[str]:
    """``--brokers``: a comma-separated subset of :data:`BROKERS` (``all`` for every one),
    in the order given, without repeats."""
    names: list[str] = []
    for item in value.split(","):
        name = item.strip().lower()
        if not name:
            continue
        if name == "all":
            names.extend(b for b in BROKERS if b not in names)
            continue
        if name not in BROKERS:
            raise argparse.ArgumentTypeError(
                f"unknown broker {name!r} (choose from {', '.join(BROKERS)} or all)"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise argparse.ArgumentTypeError("no broker selected")
    return names


async def _fresh_stream(url: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    async with await rmq.connect(url) as client:
        await client.create_stream(name)
    return name


async def _drop(url: str, name: str) -> None:
    async with await rmq.connect(url) as client:
        await client.delete_stream(name, missing_ok=True)


def _clients() -> list[str]:
    """Every RabbitMQ client, publishers first (some only consume): the tables' columns."""
    return list(dict.fromkeys([*rabbitmq.PUBLISHERS, *rabbitmq.CONSUMERS]))


RUN_ORDER = (
    "streamwire",
    "raw ceiling",
    "streamwire futures",
    "rbfly",
    "rstream",
    "streamwire async for",
    "java",
)
"""The cyclic order the RabbitMQ clients run in, rotated per round (:func:`rotated`). Each
peer the headline holds a streamwire call against runs next to it: the raw ceiling right
after ``send_many``, java right before ``send_many``/``next_batch`` and right after ``async
for``. A ratio pairs two runs of one round, and runs further apart in time differ more by
the machine's drift alone: the same client's rate, run after run, differed by a median 5.5 %
from the run before and 7.5 % from the fifth before at 100 B, 4.7 % and 8.6 % at 1000 B
(docs/benchmarks/notes/2026-11.md, "the order of a round")."""


def _run_order() -> list[str]:
    """:data:`RUN_ORDER`, then any client it does not name."""
    names = _clients()
    return [n for n in RUN_ORDER if n in names] + [n for n in names if n not in RUN_ORDER]


async def _cpu_timed(
    run: Any, name: str, count: int, rates: list[float], cpu: list[float]
) -> float:
    """Await ``run``; append its rate, and this process's CPU µs per message when the
    client runs in this process. The heap is settled first (:func:`settle_heap`); ``run``
    is a coroutine not yet started, so nothing of it runs before the clock."""
    settle_heap()
    before = time.process_time()
    rate = float(await run)
    spent = time.process_time() - before
    rates.append(rate)
    if name in rabbitmq.IN_PROCESS:
        cpu.append(spent * 1e6 / count)
    return rate


async def warm_up_rabbitmq(url: str, names: list[str], count: int, size: int) -> None:
    """An untimed round before the timed ones, ``count`` messages per client: each client of
    this process publishes to a fresh stream and reads one shared stream (java warms up in
    its own JVM, before its clock, in every run). Without it the first client of the first
    round met a process and a broker that had not yet run at this size: in three runs of
    the runner the first round gave ``send_many`` (the first client then) its lowest ratio
    to the ceiling, 0.70x – 0.74x against 0.76x – 1.15x for the other rounds."""
    shared = await _fresh_stream(url)
    try:
        await rabbitmq.streamwire_futures_publish(url, shared, count, size)
        here = [name for name in names if name in rabbitmq.IN_PROCESS]
        for name in (n for n in here if n in rabbitmq.PUBLISHERS):
            stream = await _fresh_stream(url)
            try:
                await rabbitmq.PUBLISHERS[name](url, stream, count, size)
            except Exception as exc:  # reported by the timed rounds too
                print(f"  warm-up: {name} failed to publish: {exc!r}", file=sys.stderr)
            finally:
                await _drop(url, stream)
        for name in (n for n in here if n in rabbitmq.CONSUMERS):
            try:
                await rabbitmq.CONSUMERS[name](url, shared, count)
            except Exception as exc:
                print(f"  warm-up: {name} failed to consume: {exc!r}", file=sys.stderr)
    finally:
        await _drop(url, shared)


async def _reported(
    run: Any, name: str, direction: str, count: int, rates: list[float], cpu: list[float]
) -> None:
    """:func:`_cpu_timed`, with a peer that fails reported rather than fatal."""
    try:
        await _cpu_timed(run, name, count, rates, cpu)
    except Exception as exc:
        print(f"  {name} failed to {direction}: {exc!r}", file=sys.stderr)


def _progress(size: int, rnd: int, direction: str, name: str, rates: list[float]) -> None:
    rate = f"{rates[-1]:>10,.0f}/s" if rates else "failed"
    print(f"  size {size} round {rnd + 1} {direction:<7} {name:<20} {rate}", file=sys.stderr)


async def run_rabbitmq(url: str, rounds: int, count: int, sizes: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    names = _run_order()
    for size in sizes:
        await warm_up_rabbitmq(url, names, max(1, count // 4), size)
        pub: dict[str, list[float]] = {name: [] for name in rabbitmq.PUBLISHERS}
        con: dict[str, list[float]] = {name: [] for name in rabbitmq.CONSUMERS}
        pub_cpu: dict[str, list[float]] = {name: [] for name in rabbitmq.PUBLISHERS}
        con_cpu: dict[str, list[float]] = {name: [] for name in rabbitmq.CONSUMERS}
        for rnd in range(rounds):
            # consumers all read the same stream, written once per round, so that every
            # client sees the same chunk layout
            shared = await _fresh_stream(url)
            await rabbitmq.streamwire_futures_publish(url, shared, count, size)
            try:
                # the order rotates per round, as in the Liftbridge and Iggy parts: a client
                # run right after the round's shared stream was written, or after another
                # client's garbage, is not always the same one. Every publisher runs first,
                # then every consumer: a publish never follows a read of the shared stream,
                # which would make what ran before a publish differ from client to client
                order = rotated(names, rnd)
                for name in (n for n in order if n in rabbitmq.PUBLISHERS):
                    stream = await _fresh_stream(url)
                    try:
                        run = rabbitmq.PUBLISHERS[name](url, stream, count, size)
                        await _reported(run, name, "publish", count, pub[name], pub_cpu[name])
                    finally:
                        await _drop(url, stream)
                    _progress(size, rnd, "publish", name, pub[name])
                for name in (n for n in order if n in rabbitmq.CONSUMERS):
                    run = rabbitmq.CONSUMERS[name](url, shared, count)
                    await _reported(run, name, "consume", count, con[name], con_cpu[name])
                    _progress(size, rnd, "consume", name, con[name])
            finally:
                await _drop(url, shared)
        results[str(size)] = {
            "publish": {k: statistics.median(v) for k, v in pub.items() if v},
            "consume": {k: statistics.median(v) for k, v in con.items() if v},
            "publish_rounds": {k: [round(x, 1) for x in v] for k, v in pub.items() if v},
            "consume_rounds": {k: [round(x, 1) for x in v] for k, v in con.items() if v},
            "publish_cpu_us": {k: statistics.median(v) for k, v in pub_cpu.items() if v},
            "consume_cpu_us": {k: statistics.median(v) for k, v in con_cpu.items() if v},
        }
    return results


def ratios(res: dict[str, float], against: list[str]) -> dict[str, float]:
    mine = res.get("streamwire", 0.0)
    return {peer: mine / res[peer] for peer in against if res.get(peer)}


def _own_ratio(res: dict[str, float], numerator: str) -> str:
    """``numerator`` ÷ streamwire's fastest call in the same direction."""
    if res.get(numerator) and res.get("streamwire"):
        return f"{res[numerator] / res['streamwire']:.2f}x"
    return "–"


def table(results: dict[str, Any]) -> str:
    names = _clients()
    peers = ("rbfly", "rstream", "java", "raw ceiling")
    lines = [
        "| size | direction | "
        + " | ".join(names)
        + " | vs rbfly | vs rstream | vs java | vs raw | futures or async for ÷ streamwire |",
        "|---:|---|" + "---:|" * (len(names) + 5),
    ]
    for size, by_dir in results.items():
        for direction, own in (
            ("publish", "streamwire futures"),
            ("consume", "streamwire async for"),
        ):
            r = by_dir[direction]
            q = ratios(r, list(peers))
            cells = [f"{r[k]:,.0f}" if k in r else "–" for k in names]
            rats = [f"{q[k]:.2f}x" if k in q else "–" for k in peers]
            rats.append(_own_ratio(r, own))
            lines.append(f"| {size} B | {direction} | " + " | ".join(cells + rats) + " |")
    lines += [
        "",
        "client CPU µs per message (this process; java runs in its own JVM)",
        "",
        "| size | direction | " + " | ".join(names) + " |",
        "|---:|---|" + "---:|" * len(names),
    ]
    for size, by_dir in results.items():
        for direction in ("publish", "consume"):
            cpu = by_dir.get(f"{direction}_cpu_us", {})
            cells = [f"{cpu[k]:.2f}" if k in cpu else "–" for k in names]
            lines.append(f"| {size} B | {direction} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _write_report(output: Path, key: str, result: dict[str, Any]) -> None:
    """A one-part run's JSON report: when, where, which core, and ``result`` under ``key``."""
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "codec": _native.reason,
        "core": "native" if _native.core is not None else "pure",
        key: result,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def run_spark_jvm(args: argparse.Namespace) -> int:
    """``--spark-jvm``: bench/spark_jvm.py alone (streamwire's data source against the JVM
    connector, one session); its JSON goes to ``--output``."""
    result = spark_jvm_bench.run(
        args.rabbitmq,
        rounds=args.rounds,
        rows=args.spark_jvm_rows,
        sizes=[int(s) for s in args.spark_jvm_sizes.split(",")],
        master=args.spark_jvm_master,
        jvm_flags=args.spark_jvm_flags,
    )
    _write_report(args.output, "spark_jvm", result)
    print(
        f"codec: {_native.reason}\n\nSpark, streamwire against Sparkling Rabbit "
        f"({result['jar']}), {args.spark_jvm_rows:,} rows, {args.spark_jvm_master}, "
        f"medians of {args.rounds}\n\n{spark_jvm_bench.table(result)}"
    )
    print(f"\nresults written to {args.output}")
    return 0


def run_iggy_rust(args: argparse.Namespace) -> int:
    """``--iggy-rust``: bench/iggy_rust.py alone (streamwire against the Rust SDK's
    iggy-bench on one real server); its JSON goes to ``--output``."""
    binary = os.environ.get(iggy_rust_bench.BENCH_ENV, "")
    if not args.iggy or not binary:
        print(
            f"--iggy-rust needs a real Iggy server (--iggy, or the harness's) and iggy-bench "
            f"in {iggy_rust_bench.BENCH_ENV} (bench/iggy_rust.py says how to build it)",
            file=sys.stderr,
        )
        return 2
    shape_list = iggy_rust_bench.shapes(
        [int(s) for s in args.iggy_rust_sizes.split(",")],
        [int(b) for b in args.iggy_rust_batches.split(",")],
        [int(a) for a in args.iggy_rust_actors.split(",")],
    )
    result = iggy_rust_bench.run(
        args.iggy,
        binary=binary,
        rounds=args.rounds,
        messages=args.iggy_rust_messages,
        shape_list=shape_list,
    )
    _write_report(args.output, "iggy_rust", result)
    print(
        f"codec: {_native.reason}\n\nIggy, streamwire against the Rust SDK (iggy-bench "
        f"{result['iggy_bench']['version']}), {args.iggy_rust_messages:,} messages a run, "
        f"medians of {args.rounds}\n\n{iggy_rust_bench.table(result)}"
    )
    print(f"\nresults written to {args.output}")
    return 0


def run_spark(args: argparse.Namespace) -> int:
    """``--spark``: bench/spark.py alone; its JSON goes to ``--output``."""
    result = spark_bench.run(
        args.rabbitmq, args.rounds, args.spark_messages, args.spark_size, args.spark_jvm_flags
    )
    _write_report(args.output, "spark", result)
    print(
        f"codec: {_native.reason}\nSpark against the plain client, RabbitMQ, "
        f"{args.spark_messages:,} × {args.spark_size} B, medians of {args.rounds} rounds "
        f"(rows/s), JVM {args.spark_jvm_flags!r}\n\n{spark_bench.table(result)}"
    )
    print("rounds:", json.dumps(result["rounds"]))
    return 0


def write_plots(
    report: dict[str, Any],
    where: Path,
    latency: dict[str, list[float]],
    rate: int,
    size: int,
) -> list[Path]:
    """The PNG plots of a run (``bench/plots.py``): rate and CPU per message per client,
    one figure per broker; RabbitMQ's latency distribution. The paths written."""
    core = str(report.get("core", "?"))
    written: list[Path] = []
    if "rabbitmq" in report:
        panels = [
            (f"{direction}, {sz} B", rabbitmq_rows(by_direction, direction))
            for direction in ("publish", "consume")
            for sz, by_direction in report["rabbitmq"].items()
        ]
        written.append(where / "bench-rabbitmq.png")
        plot_broker(panels, "RabbitMQ Streams", core, written[-1])
        if latency:
            written.append(where / "rabbitmq-latency-cdf.png")
            plot_latency(latency, rate, written[-1])
    if "liftbridge" in report:
        lb = report["liftbridge"]
        panels = [(f"{d}, {size} B", lb[d]) for d in ("publish", "consume")]
        written.append(where / "bench-liftbridge.png")
        plot_broker(panels, "Liftbridge", core, written[-1])
    if "iggy" in report:
        ig = report["iggy"]
        server = "conformance double" if ig["double"] else "server"
        panels = [(f"{d}, {size} B", ig[d]) for d in ("send", "poll")]
        written.append(where / "bench-iggy.png")
        plot_broker(panels, f"Iggy ({server})", core, written[-1])
    rows = headline(report)
    if any(r.ratio is not None for r in rows):
        written.append(where / "bench-headline.png")
        plot_headline(rows, core, written[-1])
    return written


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "--brokers",
        type=parse_brokers,
        default=list(BROKERS),
        help="comma-separated: rabbitmq, liftbridge, iggy, or all (default: all)",
    )
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get(
            "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
        ),
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000, help="RabbitMQ, per run")
    parser.add_argument("--sizes", default="100,1000", help="RabbitMQ message sizes")
    parser.add_argument("--rate", type=int, default=5000, help="messages/s for latency")
    parser.add_argument(
        "--liftbridge",
        default=os.environ.get("STREAMWIRE_LIFTBRIDGE_URL", liftbridge_bench.DEFAULT_URL),
    )
    parser.add_argument("--liftbridge-messages", type=int, default=20_000)
    parser.add_argument(
        "--liftbridge-window",
        type=int,
        default=liftbridge_bench.DEFAULT_WINDOW,
        help="the publishers' in-flight window (messages awaiting their ack): streamwire's"
        " max_in_flight, go-liftbridge's",
    )
    parser.add_argument(
        "--iggy",
        default=os.environ.get("STREAMWIRE_IGGY_URL") or harness_iggy_url(),
        help="a real Iggy 0.9 server (default: the one integration/brokers.sh started, if any;"
        " otherwise the conformance double in a subprocess)",
    )
    parser.add_argument("--iggy-messages", type=int, default=100_000)
    parser.add_argument("--iggy-batch", type=int, default=1_000, help="messages per send/poll")
    parser.add_argument(
        "--size", type=int, default=256, help="message size for Liftbridge and Iggy (bytes)"
    )
    parser.add_argument(
        "--codec-rounds",
        type=int,
        default=5,
        help="rounds of the codec micro-benchmark, native core against pure Python (0: skip)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS / "latest.json",
        help="where to write the JSON report",
    )
    parser.add_argument(
        "--plots",
        type=lambda value: Path(value) if value else None,
        default=Path(__file__).resolve().parent.parent / "docs" / "img",
        help="where to write PNG plots ('' to skip)",
    )
    parser.add_argument(
        "--spark",
        action="store_true",
        help="only the Spark comparison (bench/spark.py): the data source and the plain "
        "client on one RabbitMQ stream, per executor core",
    )
    parser.add_argument(
        "--spark-jvm",
        action="store_true",
        help="only streamwire's Spark data source against the JVM connector Sparkling Rabbit "
        f"(bench/spark_jvm.py; its jar in {spark_jvm_bench.JAR_ENV})",
    )
    parser.add_argument(
        "--iggy-rust",
        action="store_true",
        help="only streamwire against the Rust SDK's iggy-bench on a real Iggy server "
        f"(bench/iggy_rust.py; the binary in {iggy_rust_bench.BENCH_ENV})",
    )
    parser.add_argument("--iggy-rust-messages", type=int, default=1_000_000)
    parser.add_argument("--iggy-rust-sizes", default="16,256,1000", help="bytes per message")
    parser.add_argument("--iggy-rust-batches", default="100,1000", help="messages per batch")
    parser.add_argument("--iggy-rust-actors", default="1,4", help="producers / consumers")
    parser.add_argument("--spark-jvm-rows", type=int, default=1_000_000)
    parser.add_argument("--spark-jvm-sizes", default="100,1000", help="bytes per row")
    parser.add_argument("--spark-jvm-master", default="local[2]")
    parser.add_argument("--spark-messages", type=int, default=400_000)
    parser.add_argument("--spark-size", type=int, default=100, help="bytes per message")
    parser.add_argument(
        "--spark-jvm-flags",
        default=spark_bench.JVM_FLAGS,
        help="the Spark driver JVM's options (default: the JIT's full tiers, as a production "
        "executor runs; '-XX:+UseSerialGC -XX:TieredStopAtLevel=1' stops it at C1, as the "
        "tests do, which doubles Spark's CPU per row: docs/benchmarks/notes/2026-11.md)",
    )
    args = parser.parse_args()
    if args.spark:
        return run_spark(args)
    if args.spark_jvm:
        return run_spark_jvm(args)
    if args.iggy_rust:
        return run_iggy_rust(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.time()
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "brokers": args.brokers,
        "messages": args.messages,
        "rounds": args.rounds,
        "codec": _native.reason,
        "core": "native" if _native.core is not None else "pure",
    }
    tables: list[str] = [f"codec: {_native.reason}"]
    if args.codec_rounds > 0:
        codec = codec_bench.run(args.codec_rounds, 1000)
        report["codec_micro"] = codec
        tables.append(
            f"Codec loops, CPU per message (bench/codec.py)\n\n{codec_bench.table(codec)}"
        )
    skipped: dict[str, str] = {}
    latency: dict[str, list[float]] = {}
    for broker in args.brokers:
        if broker == "rabbitmq":
            results = asyncio.run(run_rabbitmq(args.rabbitmq, args.rounds, args.messages, sizes))
            latency = asyncio.run(rabbitmq_latency(args.rabbitmq, rate=args.rate, seconds=5.0))
            report["rabbitmq"] = results
            report["rabbitmq_latency"] = {
                "rate_per_s": args.rate,
                **{name: percentiles(samples) for name, samples in latency.items()},
            }
            lat = report["rabbitmq_latency"]
            tables.append(
                f"RabbitMQ Streams\n\n{table(results)}\n\n"
                f"latency at {args.rate} msg/s (ms): publish→confirm {lat['confirm_ms']}, "
                f"publish→consume {lat['end_to_end_ms']}"
            )
        elif broker == "liftbridge":
            try:
                lb_result = asyncio.run(
                    liftbridge_bench.run(
                        args.liftbridge,
                        rounds=args.rounds,
                        count=args.liftbridge_messages,
                        size=args.size,
                        window=args.liftbridge_window,
                    )
                )
            except Exception as exc:  # e.g. no Liftbridge here: skip it, say why
                skipped[broker] = first_line(exc)
                continue
            report["liftbridge"] = lb_result
            tables.append(
                f"Liftbridge ({args.liftbridge_messages:,} × {args.size} B, "
                f"medians of {args.rounds})\n\n{liftbridge_bench.table(lb_result)}"
            )
        else:
            try:
                ig_result = asyncio.run(
                    iggy_bench.run(
                        args.iggy,
                        rounds=args.rounds,
                        count=args.iggy_messages,
                        size=args.size,
                        batch=args.iggy_batch,
                    )
                )
            except Exception as exc:
                skipped[broker] = first_line(exc)
                continue
            report["iggy"] = ig_result
            tables.append(
                f"Iggy ({args.iggy_messages:,} × {args.size} B, batches of {args.iggy_batch}, "
                f"medians of {args.rounds})\n\n{iggy_bench.table(ig_result)}"
            )
    if skipped:
        report["skipped"] = skipped
    rows = headline(report)
    report["headline"] = rows_as_json(rows)
    tables.append(
        "Headline: every path against the fastest peer measured for it (rate ratio above 1: "
        "streamwire is faster; CPU ratio above 1: streamwire is cheaper)\n\n" + headline_table(rows)
    )
    tables.append("The same in six columns (docs/benchmarks.md)\n\n" + summary_table(rows))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print("\n\n".join(tables))
    for broker, reason in skipped.items():
        print(f"\n{broker}: skipped ({reason})")
    print(f"\nresults written to {args.output}")
    if args.plots:
        for name in write_plots(report, args.plots, latency, args.rate, args.size):
            print(f"plot written to {name}")
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
