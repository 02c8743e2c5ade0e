"""The ``foreachBatch`` sink against an earlier revision of itself, each run in a fresh
process: ``python -m bench.spark_sink_ab --base REV [--rounds 5] [--rows 200000]``.

For each broker (RabbitMQ, Liftbridge, Iggy) and each round, the sink of this tree and the
sink of ``REV`` (its ``src/`` exported to a temporary directory; the native core is this
tree's, refused when ``native/`` differs between the two) each publish one micro-batch of
``rows`` rows of ``size`` bytes from one Spark partition (``local[1]``, default options, a
``query_id`` as exactly-once asks) to a fresh stream, in an order that alternates per round.
A child process runs one job: it starts Spark, warms the sink with a batch of 1,000 rows
(batch id 0), then times batch id 1 (the wall clock of the ``sink(df, 1)`` call, and the CPU
of the child and every descendant: the JVM and its Python workers). The parent checks the
stream holds every row. Reported per broker: the median rows/s of each revision, and the
median over rounds of this tree's rate over ``REV``'s in the same round (with the lowest and
highest); the issue's bar is at least 0.95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path

import streamwire
from bench._common import Measurement, fmt_ratio, markdown_table, median, paired_ratios

ROOT = Path(__file__).resolve().parent.parent
WARM_ROWS = 1_000
URLS: Mapping[str, str] = {
    "rabbitmq": os.environ.get(
        "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
    ),
    "liftbridge": os.environ.get(
        "STREAMWIRE_LIFTBRIDGE_URL", "liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222"
    ),
    "iggy": os.environ.get("STREAMWIRE_IGGY_URL", "iggy://iggy:iggy@127.0.0.1:8090"),
}


def export(rev: str, into: Path) -> Path:
    """``rev``'s ``src/`` under ``into``, with this tree's native core (the same source)."""
    changed = subprocess.run(
        ["git", "diff", "--quiet", rev, "HEAD", "--", "native/"], cwd=ROOT, check=False
    )
    if changed.returncode != 0:
        raise SystemExit(f"native/ differs between {rev} and HEAD: build {rev}'s core first")
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    native = ROOT / "src" / "streamwire" / "_native"
    for lib in native.glob("_core*.so"):
        (into / "src" / "streamwire" / "_native" / lib.name).write_bytes(lib.read_bytes())
    return into / "src"


async def _create(url: str) -> str:
    name = f"bench-sink-{uuid.uuid4().hex[:10]}"
    async with streamwire.connect(url, timeout=10.0) as client:
        await client.create_stream(name)  # a bare name works on every broker
    return name


async def _stored(url: str, stream: str) -> int:
    async with streamwire.connect(url, timeout=10.0) as client:
        assert isinstance(client, streamwire.Bounded)
        bounds = await client.offset_bounds(stream)
    return sum(b.next - b.first for b in bounds.values())


async def _delete(url: str, stream: str) -> None:
    async with streamwire.connect(url, timeout=10.0) as client:
        await client.delete_stream(stream)


def one(url: str, stream: str, rows: int, size: int) -> dict[str, float]:
    """The child: one timed micro-batch through ``foreach_batch_sink`` (see the module)."""
    from pyspark.sql import functions as F

    from bench.spark import _cpu_since, _tree_cpu_each, session
    from streamwire.spark import foreach_batch_sink

    with session() as spark:
        sink = foreach_batch_sink(url, stream, query_id=f"bench-{uuid.uuid4().hex}")
        value = F.lit(b"x" * size).alias("value")
        sink(spark.range(0, WARM_ROWS, 1, 1).select(value), 0)
        df = spark.range(0, rows, 1, 1).select(value)
        df.count()  # plan the source before the clock starts
        cpu, started = _tree_cpu_each(), time.perf_counter()
        sink(df, 1)
        seconds = time.perf_counter() - started
        return {"messages": rows, "seconds": seconds, "cpu_seconds": _cpu_since(cpu)}


def run_one(src: Path | None, broker: str, rows: int, size: int) -> Measurement:
    """One child run with ``src`` first on its path (``None``: this tree), checked."""
    url = URLS[broker]
    stream = asyncio.run(_create(url))
    try:
        paths = [str(src)] if src is not None else []
        paths += [str(ROOT), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        args = ["--one", json.dumps([url, stream, rows, size])]
        done = subprocess.run(
            [sys.executable, "-m", "bench.spark_sink_ab", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{broker}: the child failed:\n{done.stderr[-3000:]}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        stored = asyncio.run(_stored(url, stream))
        if stored != rows + WARM_ROWS:
            raise SystemExit(f"{broker}: {stored} messages stored, not {rows + WARM_ROWS}")
        return Measurement(got["messages"], got["seconds"], got["cpu_seconds"])
    finally:
        asyncio.run(_delete(url, stream))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--brokers", default=",".join(URLS), help="comma-separated")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one run, JSON out
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return 0
    if not args.base:
        parser.error("--base REV is required")
    head = f"HEAD ({subprocess.getoutput('git -C ' + str(ROOT) + ' rev-parse --short HEAD')})"
    base = f"{args.base}"
    rows_out = []
    with tempfile.TemporaryDirectory() as tmp:
        base_src = export(args.base, Path(tmp))
        for broker in args.brokers.split(","):
            rounds: list[dict[str, Measurement]] = []
            for r in range(args.rounds):
                order = [(head, None), (base, base_src)]
                if r % 2:
                    order.reverse()
                rounds.append(
                    {who: run_one(src, broker, args.rows, args.size) for who, src in order}
                )
                print(broker, r, {k: round(m.rate) for k, m in rounds[-1].items()}, flush=True)
            ratios = paired_ratios(rounds, head, base)
            rows_out.append(
                [
                    broker,
                    f"{median(m[base].rate for m in rounds) or 0:,.0f}",
                    f"{median(m[head].rate for m in rounds) or 0:,.0f}",
                    f"{median(m[base].cpu_us for m in rounds) or 0:.2f}",
                    f"{median(m[head].cpu_us for m in rounds) or 0:.2f}",
                    f"{fmt_ratio(median(ratios))} ({fmt_ratio(min(ratios))}-"
                    f"{fmt_ratio(max(ratios))})",
                ]
            )
    print()
    print(
        markdown_table(
            [
                "broker",
                f"{base} rows/s",
                f"{head} rows/s",
                f"{base} CPU us/row",
                f"{head} CPU us/row",
                "HEAD / base (min-max)",
            ],
            rows_out,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
