"""Codec micro-benchmark: the per-message loops, native core against pure Python.

``python -m bench.codec [--rounds 7] [--messages 1000]`` times, in this process and
without a broker, the loops the native core replaces (docs/benchmarks/notes/2026-11.md,
"Native core"):

* RabbitMQ chunk → messages: an Osiris chunk of ``--messages`` records, each one AMQP data
  section of 100 B (and 1 000 B), CRC-32 checked, into received ``Message`` objects
  (``decode_chunk``'s entry walk).
* Iggy batch encode: ``--messages`` × 256 B ``OutgoingMessage`` into one batch with every
  XXH3-64 checksum (``encode_batch``).
* Iggy poll decode: a poll reply's records of ``--messages`` × 256 B checked for structure
  and turned into ``Message`` objects with their checksums verified (``locate_frames`` +
  ``received_messages``, what ``PolledMessages.read`` and the consumer do per reply).
* Liftbridge subscribed message → message: ``--messages`` Subscribe responses of 256 B (with
  the server's ``subject``/``reply`` headers) decoded one by one (``decode_message``, what a
  subscription's reading thread does per response).

Each round times both implementations, alternating which goes first; the table gives the
median CPU time per message (``time.process_time``) and the ratio. Without a built native
core (``python native/build.py``) only the pure-Python column is filled.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

from streamwire import _native
from streamwire.codec.amqp import encode_data_body
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    encode_batch_py,
    encode_record,
    locate_frames_py,
    random_message_ids,
    stored_messages,
)
from streamwire.iggy.protocol.mapping import (
    _headers_and_key,
    received_messages_py,
)
from streamwire.iggy.protocol.messaging import PolledMessages
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.messages import decode_message_native, decode_message_pure
from streamwire.rabbitmq._amqp_map import decode_entries_native, decode_entries_py
from streamwire.rabbitmq.protocol.chunk import parse_chunk_header

Case = tuple[str, Callable[[], object], Callable[[], object] | None]


def rabbitmq_chunk(count: int, size: int) -> bytes:
    """An Osiris chunk of ``count`` simple entries, each one ``size``-byte data section."""
    record = encode_data_body(b"x" * size)
    data = (struct.pack(">I", len(record)) + record) * count
    header = struct.pack(
        ">BBHIqQQIIIB3x",
        0x50, 0, count, count, 1_700_000_000_000, 1, 12345, zlib.crc32(data), len(data), 0, 0,
    )  # fmt: skip
    return header + data


def iggy_messages(count: int, size: int) -> list[OutgoingMessage]:
    ids = random_message_ids(count)
    return [OutgoingMessage(i, b"x" * size, 1_700_000_000_000_000) for i in ids]


def iggy_records(count: int, size: int) -> bytes:
    """What a server returns for a poll of ``count`` messages (one stored batch)."""
    batch = encode_batch_py(iggy_messages(count, size))
    frames = stored_messages(batch, locate_frames_py(batch))
    return encode_record(
        frames,
        partition_id=1,
        base_offset=1000,
        base_timestamp=1_700_000_000_000_001,
        origin_timestamp=1_700_000_000_000_000,
    )


def liftbridge_messages(count: int, size: int) -> list[bytes]:
    """Subscribe responses as the server sends them: with its ``subject``/``reply`` headers."""
    return [
        pb.Message(
            offset=i,
            value=b"x" * size,
            timestamp=1_764_000_000_000_000_000 + i,
            stream="bench-lb-0123456789",
            subject="bench-lb-0123456789",
            headers={"subject": b"bench-lb-0123456789", "reply": b""},
        ).SerializeToString()
        for i in range(count)
    ]


def cases(count: int) -> list[Case]:
    core = _native.built()[0]
    out: list[Case] = []
    for size in (100, 1000):
        buf = rabbitmq_chunk(count, size)
        header = parse_chunk_header(buf)

        def pure(buf: bytes = buf, header: Any = header) -> object:
            return decode_entries_py(buf, 48, header, "s", 0, True, True)

        def native(buf: bytes = buf, header: Any = header) -> object:
            assert core is not None
            return decode_entries_native(core, buf, 48, header, "s", 0, True, True)

        out.append((f"rabbitmq chunk → messages, {size} B", pure, native if core else None))
    msgs = iggy_messages(count, 256)
    out.append(
        (
            "iggy batch encode, 256 B",
            lambda: encode_batch_py(msgs),
            (lambda: core.iggy_encode_batch(msgs)) if core else None,
        )
    )
    records = iggy_records(count, 256)

    def poll_pure() -> object:
        frames = locate_frames_py(records, frame="poll reply")
        reply = PolledMessages(
            partition_id=1,
            current_offset=0,
            messages_count=len(frames),
            records=records,
            frames=frames,
        )
        return received_messages_py(reply, stream="s")

    def poll_native() -> object:
        assert core is not None
        index = core.iggy_locate_frames(records, 0, None, "poll reply")
        return core.iggy_received_messages(index, "s", "streamwire.key", True, _headers_and_key)

    out.append(("iggy poll decode, 256 B", poll_pure, poll_native if core else None))
    subscribed = liftbridge_messages(count, 256)
    out.append(
        (
            "liftbridge subscribed message → message, 256 B",
            lambda: [decode_message_pure(raw) for raw in subscribed],
            (lambda: [decode_message_native(core, raw) for raw in subscribed]) if core else None,
        )
    )
    return out


def cpu_per_call(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm up
    started = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - started) / repeat


def run(rounds: int, count: int, seconds: float = 0.2) -> dict[str, dict[str, float]]:
    """Median CPU µs per message of each case, pure and native (alternating order)."""
    results: dict[str, dict[str, float]] = {}
    for name, pure, native in cases(count):
        per_call = cpu_per_call(pure, 3)
        repeat = max(3, int(seconds / max(per_call, 1e-6)))
        timings: dict[str, list[float]] = {"pure": [], "native": []}
        for rnd in range(rounds):
            order = [("pure", pure), ("native", native)]
            if rnd % 2:
                order.reverse()
            for label, fn in order:
                if fn is not None:
                    timings[label].append(cpu_per_call(fn, repeat) / count * 1e6)
        results[name] = {k: statistics.median(v) for k, v in timings.items() if v}
    return results


def table(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "| loop | pure Python µs/msg | native µs/msg | pure ÷ native |",
        "|---|---:|---:|---:|",
    ]
    for name, r in results.items():
        native = r.get("native")
        lines.append(
            f"| {name} | {r['pure']:.3f} | "
            + (f"{native:.3f} | {r['pure'] / native:.1f}x |" if native else "– | – |")
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codec")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--messages", type=int, default=1000, help="messages per chunk/batch")
    args = parser.parse_args()
    print(f"native core: {_native.built()[1]}; selected at import: {_native.reason}")
    print(table(run(args.rounds, args.messages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
