"""The ``streamwire`` command: ``demo``, ``publish``, ``consume`` and ``bench`` over the
unified API (also ``python -m streamwire``).

Errors print one line (``streamwire: error: ...``), no tracebacks. Exit codes: 0 ok, 1 a
runtime error (broker unreachable, server error, ...), 2 a usage error (bad arguments or URL),
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import streamwire
from streamwire.codec.offset import OffsetLike
from streamwire.errors import ConfigurationError, StreamwireError

logger = logging.getLogger(__name__)

__all__ = ("main",)

URL_HELP = """\
broker URLs:
  rabbitmq-stream://[USER:PASSWORD@]HOST[:PORT][/VHOST]     RabbitMQ Streams (port 5552,
                                                          guest/guest); rabbitmq-stream+tls://
  liftbridge://HOST[:PORT][?nats=nats://HOST:PORT]         Liftbridge (port 9292; NATS on
                                                          localhost:4222 unless given)
  iggy://[USER:PASSWORD@]HOST[:PORT]                       Apache Iggy (port 8090, iggy/iggy)

A stream is a name on every broker; on Iggy "NAME" is the stream NAME with its default topic
and "NAME/TOPIC" names a topic.
"""

EXAMPLES = """\
examples:
  streamwire demo                                   round trip through every local broker
  echo hello | streamwire publish --create rabbitmq-stream://localhost:5552 events
  streamwire consume rabbitmq-stream://localhost:5552 events --from first
  streamwire consume --follow iggy://iggy:iggy@localhost:8090 events
  streamwire bench liftbridge://localhost:9292 bench --count 100000 --size 256
"""

DEFAULT_URLS = {
    "rabbitmq": os.environ.get(
        "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
    ),
    "liftbridge": os.environ.get(
        "STREAMWIRE_LIFTBRIDGE_URL", "liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222"
    ),
    "iggy": os.environ.get("STREAMWIRE_IGGY_URL", "iggy://iggy:iggy@127.0.0.1:8090"),
}


@dataclass
class DemoResult:
    broker: str
    status: str
    published: int = 0
    consumed: int = 0
    seconds: float = 0.0
    detail: str = ""


async def _round_trip(broker: str, url: str, count: int, timeout: float) -> DemoResult:
    started = time.perf_counter()
    stream = f"streamwire-demo-{uuid.uuid4().hex[:8]}"
    try:
        client: streamwire.Client = await streamwire.connect(url, timeout=timeout)
    except StreamwireError as exc:
        return DemoResult(broker, "unavailable", detail=str(exc))
    try:
        await client.create_stream(stream)
        expected = [
            streamwire.Message(f"message {i}".encode(), key=f"k{i % 4}".encode(), headers={"n": i})
            for i in range(count)
        ]
        async with client.producer(stream) as producer:
            await producer.send_batch(expected)
            await producer.flush(timeout=timeout)
        received: list[streamwire.Message] = []
        async with client.consumer(stream, offset="first") as consumer:
            while len(received) < count:
                batch = await consumer.next_batch(count - len(received), timeout=timeout)
                if not batch:
                    break
                received += batch
        ok = [(m.value, m.key, m.headers) for m in received] == [
            (m.value, m.key, m.headers) for m in expected
        ]
        await client.delete_stream(stream)
        return DemoResult(
            broker,
            "ok" if ok else "MISMATCH",
            published=count,
            consumed=len(received),
            seconds=time.perf_counter() - started,
            detail=f"stream {stream} created, verified and deleted",
        )
    except StreamwireError as exc:
        return DemoResult(broker, "failed", detail=str(exc))
    finally:
        await client.close()


def _table(rows: list[DemoResult]) -> str:
    head = f"{'broker':<11} {'status':<12} {'published':>9} {'consumed':>9} {'seconds':>8}  detail"
    lines = [head, "-" * len(head)]
    lines += [
        f"{r.broker:<11} {r.status:<12} {r.published:>9} {r.consumed:>9} "
        f"{r.seconds:>8.2f}  {r.detail}"
        for r in rows
    ]
    return "\n".join(lines)


async def _demo(args: argparse.Namespace) -> int:
    wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = set(wanted) - set(DEFAULT_URLS)
    if unknown:
        raise ConfigurationError(f"unknown broker(s) for --brokers: {', '.join(sorted(unknown))}")
    urls = {name: getattr(args, name) or DEFAULT_URLS[name] for name in wanted}
    rows = [await _round_trip(name, url, args.count, args.timeout) for name, url in urls.items()]
    print(_table(rows))
    if any(r.status in ("failed", "MISMATCH") for r in rows):
        return 1
    if not any(r.status == "ok" for r in rows):
        print(
            "streamwire: error: no broker was reachable; start one (from a checkout: "
            "docker compose up -d rabbitmq, or integration/brokers.sh up rabbitmq; README.md, "
            '"Get a broker") or name yours with --rabbitmq/--liftbridge/--iggy URL',
            file=sys.stderr,
        )
        return 1
    return 0


class _Records:
    """Input cut into messages as it arrives (sans-IO): lines (a trailing ``\\r`` dropped,
    a last line without its newline kept) or records with 4-byte big-endian length
    prefixes. :meth:`feed` returns the messages a chunk completed; :meth:`end` what is left
    at the end of the input, or an error for a cut record."""

    def __init__(self, delimited: bool) -> None:
        self.delimited = delimited
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk
        buf, out = self._buf, []
        if not self.delimited:
            *lines, rest = bytes(buf).split(b"\n")
            self._buf = bytearray(rest)
            return [line[:-1] if line.endswith(b"\r") else line for line in lines]
        pos = 0
        while len(buf) - pos >= 4:
            n = int.from_bytes(buf[pos : pos + 4], "big")
            if len(buf) - pos - 4 < n:
                break
            out.append(bytes(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        del buf[:pos]
        return out

    def end(self) -> list[bytes]:
        rest, self._buf = bytes(self._buf), bytearray()
        if not rest:
            return []
        if not self.delimited:
            return [rest[:-1] if rest.endswith(b"\r") else rest]
        if len(rest) < 4:
            raise StreamwireError("truncated length prefix in length-delimited input")
        raise StreamwireError("truncated message in length-delimited input")


def _read_messages(source: BinaryIO, delimited: bool) -> list[bytes]:
    """Every message of ``source`` at once (what :func:`_publish` does as input arrives)."""
    records = _Records(delimited)
    return records.feed(source.read()) + records.end()


#: Bytes one read of the input asks for (a read returns what is there, up to this).
_READ_CHUNK = 1 << 16


async def _publish(args: argparse.Namespace) -> int:
    """Messages go out as the input arrives (``tail -f app.log | streamwire publish``), with
    the producer's backpressure; confirmed every ``--flush-every`` messages and at the end."""
    streamwire.parse_url(args.url)  # a bad URL is a usage error, before any input is read
    source: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: ASYNC230, SIM115 - a local file, opened before any I/O; closed below
    read = getattr(source, "read1", source.read)  # what is there now, not a full chunk
    loop = asyncio.get_running_loop()
    records = _Records(args.length_delimited)
    progress = _Progress("publish", None, enabled=args.progress or sys.stderr.isatty())
    sent = since_flush = 0
    try:
        client: streamwire.Client = await streamwire.connect(args.url, timeout=args.timeout)
        try:
            if args.create:
                await client.create_stream(args.stream, exist_ok=True)
            async with client.producer(args.stream) as producer:
                while True:
                    chunk = await loop.run_in_executor(None, read, _READ_CHUNK)
                    messages = records.feed(chunk) if chunk else records.end()
                    if messages:
                        await producer.send_batch(messages)
                        sent += len(messages)
                        since_flush += len(messages)
                        progress.update(sent)
                    if args.flush_every and since_flush >= args.flush_every:
                        await producer.flush(timeout=args.timeout)
                        logger.info("%d messages confirmed", sent)
                        since_flush = 0
                    if not chunk:
                        break
                await producer.flush(timeout=args.timeout)
        finally:
            await client.close()
    finally:
        if args.file:
            source.close()
    progress.update(sent, final=True)
    print(f"published {sent} messages to {args.stream}", file=sys.stderr)
    return 0


def _stop_on_interrupt(stop: asyncio.Event) -> None:
    """Ctrl-C (or SIGTERM) ends a --follow consumer at the next batch boundary."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)


async def _consume(args: argparse.Namespace) -> int:
    streamwire.parse_url(args.url)
    offset: OffsetLike = args.offset
    if args.offset.isdigit():
        offset = int(args.offset)
    stop = asyncio.Event()
    if args.follow:
        _stop_on_interrupt(stop)
    client: streamwire.Client = await streamwire.connect(args.url, timeout=args.timeout)
    seen = 0
    out = sys.stdout.buffer
    poll = min(args.idle, 1.0) if args.follow else args.idle
    try:
        async with client.consumer(args.stream, offset=offset) as consumer:
            while (args.count is None or seen < args.count) and not stop.is_set():
                want = 500 if args.count is None else min(500, args.count - seen)
                batch = await consumer.next_batch(want, timeout=poll)
                if not batch:
                    if args.follow:
                        continue  # keep waiting for new messages until interrupted
                    break
                for m in batch:
                    prefix = f"{m.offset}\t".encode() if args.with_offsets else b""
                    out.write(prefix + m.value + b"\n")
                seen += len(batch)
                out.flush()
    finally:
        await client.close()
    if stop.is_set():
        print(f"stopped after {seen} messages", file=sys.stderr)
    return 0


async def _offsets(args: argparse.Namespace) -> int:
    streamwire.parse_url(args.url)
    stream, name, partition = args.stream, args.name, args.partition
    client: streamwire.Client = await streamwire.connect(args.url, timeout=args.timeout)
    try:
        async with asyncio.timeout(args.timeout):
            if args.set is not None:
                await client.store_offset(stream, name, args.set, partition=partition)
            stored = await client.committed_offset(stream, name, partition=partition)
    except TimeoutError as exc:
        if isinstance(exc, StreamwireError):
            raise
        raise streamwire.TimeoutError(f"no answer within {args.timeout} s") from None
    finally:
        await client.close()
    print("none" if stored is None else stored)
    return 0


class _Progress:
    """One self-overwriting progress line on stderr (only when it is a terminal or forced)."""

    def __init__(self, label: str, total: int | None, *, enabled: bool) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.started = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, *, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not final and now - self._last < 0.2):
            return
        self._last = now
        width = 30
        filled = int(width * done / self.total) if self.total else width
        rate = done / max(now - self.started, 1e-9)
        bar = "#" * filled + "." * (width - filled)
        end = "\n" if final else ""
        count = f"{done:>10,}" if self.total is None else f"[{bar}] {done:>10,}/{self.total:,}"
        print(
            f"\r{self.label:<8} {count} {rate:>12,.0f} msg/s",
            end=end,
            file=sys.stderr,
            flush=True,
        )


async def _bench(args: argparse.Namespace) -> int:
    client: streamwire.Client = await streamwire.connect(args.url, timeout=args.timeout)
    body = b"b" * args.size
    show = args.progress or sys.stderr.isatty()
    try:
        await client.create_stream(args.stream, exist_ok=True)
        progress = _Progress("publish", args.count, enabled=show)
        async with client.producer(args.stream) as producer:
            sent = 0
            while sent < args.count:
                n = min(args.batch, args.count - sent)
                await producer.send_batch([body] * n)
                sent += n
                progress.update(sent)
            await producer.flush(timeout=args.timeout)
        publish_s = time.perf_counter() - progress.started
        progress.update(args.count, final=True)
        progress = _Progress("consume", args.count, enabled=show)
        got = 0
        async with client.consumer(args.stream, offset="first") as consumer:
            while got < args.count:
                batch = await consumer.next_batch(10_000, timeout=args.timeout)
                if not batch:
                    raise StreamwireError(f"consumer stalled after {got} messages")
                got += len(batch)
                progress.update(got)
        consume_s = time.perf_counter() - progress.started
        progress.update(got, final=True)
    finally:
        await client.close()
    print(
        f"{'direction':<10} {'messages':>10} {'bytes':>8} {'seconds':>8} {'msg/s':>12} {'MB/s':>8}"
    )
    for direction, n, secs in (("publish", args.count, publish_s), ("consume", got, consume_s)):
        print(
            f"{direction:<10} {n:>10,} {args.size:>8} {secs:>8.2f} {n / secs:>12,.0f} "
            f"{n * args.size / secs / 1e6:>8.1f}"
        )
    return 0


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows real defaults (not None or False) and keeps the URL table's layout."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _url_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="broker URL (see 'broker URLs' below)")
    parser.add_argument("stream", help='stream name (Iggy: "NAME" or "NAME/TOPIC")')


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamwire",
        description="Publish, consume and check RabbitMQ Streams, Liftbridge and Apache Iggy "
        "through one API. Exit codes: 0 ok, 1 runtime error, 2 usage error, 130 interrupted.",
        epilog=URL_HELP + "\n" + EXAMPLES,
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log to stderr: -v INFO, -vv DEBUG",
    )
    parser.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log to stderr at this level (overrides -v)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="round trip through every reachable broker",
        description="Create a stream on each broker, publish COUNT keyed messages with typed "
        "headers, read them back, compare, delete the stream; prints a table.",
        epilog="default URLs (override with --BROKER or STREAMWIRE_RABBITMQ_URL, "
        "STREAMWIRE_LIFTBRIDGE_URL, STREAMWIRE_IGGY_URL):\n"
        + "".join(f"  {name:<11} {url}\n" for name, url in DEFAULT_URLS.items()),
        formatter_class=_Help,
    )
    for name in DEFAULT_URLS:
        demo.add_argument(f"--{name}", metavar="URL", help=f"{name} URL (default: see below)")
    demo.add_argument("--brokers", default=",".join(DEFAULT_URLS), help="comma-separated")
    demo.add_argument("--count", type=_positive(int), default=1000, help="messages per broker")
    demo.add_argument("--timeout", type=_positive(float), default=10.0, help="seconds per step")
    pub = sub.add_parser(
        "publish",
        help="publish lines (or length-delimited records) from stdin or a file",
        description="Publish each line of stdin (or --file) as one message as it arrives "
        "(a pipe that stays open, such as tail -f, streams), and wait until the broker "
        "confirmed all of them when the input ends.",
        epilog=URL_HELP + "\nexample:\n  printf 'a\\nb\\n' | streamwire publish --create "
        "rabbitmq-stream://localhost:5552 events\n",
        formatter_class=_Help,
    )
    _url_args(pub)
    pub.add_argument("--create", action="store_true", help="create the stream if it is missing")
    pub.add_argument("--file", help="read from this file instead of stdin")
    pub.add_argument("--length-delimited", action="store_true", help="4-byte big-endian prefixes")
    pub.add_argument("--progress", action="store_true", help="show progress even if not a tty")
    pub.add_argument(
        "--flush-every",
        type=_positive(int),
        metavar="N",
        help="wait for the broker's confirmations every N messages (always at the end)",
    )
    pub.add_argument("--timeout", type=_positive(float), default=30.0, help="seconds")
    con = sub.add_parser(
        "consume",
        help="print messages, one per line",
        description="Print each message's value on its own line (with --with-offsets, "
        "OFFSET<TAB>VALUE). Stops after --count messages, after --idle seconds without one, "
        "or with --follow only on Ctrl-C.",
        epilog=URL_HELP
        + "\nexamples:\n  streamwire consume rabbitmq-stream://localhost:5552 events --count 10"
        "\n  streamwire consume --follow --from last liftbridge://localhost:9292 events\n",
        formatter_class=_Help,
    )
    _url_args(con)
    con.add_argument("--from", dest="offset", default="first", help="first|last|next|OFFSET")
    con.add_argument("--count", type=_positive(int), help="stop after this many messages")
    con.add_argument("--follow", "-f", action="store_true", help="wait for new messages")
    con.add_argument(
        "--idle", type=_positive(float), default=5.0, help="seconds without a message to stop"
    )
    con.add_argument("--with-offsets", action="store_true", help="prefix OFFSET<TAB>")
    con.add_argument("--timeout", type=_positive(float), default=10.0, help="connect, seconds")
    off = sub.add_parser(
        "offsets",
        help="print (or --set) the offset a consumer name stored",
        description="Print the offset consumer NAME stored on STREAM (a RabbitMQ offset "
        "reference, a Liftbridge cursor, an Iggy consumer offset), or 'none'; with --set, "
        "store OFFSET first. No consumer is opened.",
        epilog=URL_HELP
        + "\nexamples:\n  streamwire offsets rabbitmq-stream://localhost:5552 events billing"
        "\n  streamwire offsets --set 41 liftbridge://localhost:9292 events billing\n",
        formatter_class=_Help,
    )
    _url_args(off)
    off.add_argument("name", help="the consumer name (RabbitMQ reference, Liftbridge cursor id)")
    off.add_argument("--partition", type=_non_negative_int, help="needed when there are several")
    off.add_argument("--set", type=_non_negative_int, metavar="OFFSET", help="store OFFSET first")
    off.add_argument("--timeout", type=_positive(float), default=10.0, help="seconds")
    ben = sub.add_parser(
        "bench",
        help="publish then consume COUNT messages, with progress",
        description="Publish COUNT messages of SIZE bytes in batches, then consume them; "
        "prints messages/s and MB/s for each direction.",
        epilog=URL_HELP,
        formatter_class=_Help,
    )
    _url_args(ben)
    ben.add_argument("--count", type=_positive(int), default=100_000, help="messages")
    ben.add_argument("--size", type=_positive(int), default=100, help="bytes per message")
    ben.add_argument("--batch", type=_positive(int), default=1000, help="messages per send")
    ben.add_argument("--progress", action="store_true", help="show progress even if not a tty")
    ben.add_argument("--timeout", type=_positive(float), default=30.0, help="seconds")
    return parser


def _version() -> str:
    """The package's version, then the codec core this install selected and why (``native
    core 0.1.0``, or ``pure Python: <why>``)."""
    from streamwire import _native

    return f"{streamwire.__version__}\n{_native.reason}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = args.log_level or {0: None, 1: "INFO"}.get(args.verbose, "DEBUG")
    if level is not None:
        logging.basicConfig(
            level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
    handlers = {
        "demo": _demo,
        "publish": _publish,
        "consume": _consume,
        "offsets": _offsets,
        "bench": _bench,
    }
    handler = handlers[args.command]
    try:
        return asyncio.run(handler(args))
    except ConfigurationError as exc:
        print(f"streamwire: error: {exc}", file=sys.stderr)
        return 2
    except (StreamwireError, OSError) as exc:
        print(f"streamwire: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("streamwire: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
