"""The headline of a ``python -m bench`` run: every path's ratio against its fastest peer.

A *path* is one of streamwire's idiomatic calls in one direction on one broker (and, for
RabbitMQ, one message size): ``send_many``, ``send_batch``, ``next_batch``, ``async for``.
Each is set against the fastest *peer* measured in the same run for that direction (another
project's client; streamwire's own variants and RabbitMQ's raw ceiling are not peers), with
both rates, both CPU costs per message, the ratio of rates (above 1: streamwire is faster)
and the ratio of CPU costs (above 1: streamwire is cheaper). Some paths carry a goal
(issue 26: at least 1.0x the fastest peer, and ``send_many`` at least 0.9x the raw
ceiling); the rest are shown for information. Pure functions over a run's report.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from bench._common import fmt_cpu, fmt_rate, fmt_ratio, markdown_table, ratio

__all__ = (
    "PEER_SETUPS",
    "Path",
    "Row",
    "headline",
    "headline_table",
    "paired",
    "rabbitmq_rows",
    "rows_as_json",
    "summary_table",
)

Rows = Mapping[str, Mapping[str, Any]]
"""Per client: ``{"msg_per_s": …, "cpu_us_per_msg": …}`` (``bench._common.summarize``)."""


@dataclass(frozen=True, slots=True)
class Path:
    """One of streamwire's paths and what it is measured against."""

    broker: str
    direction: str
    client: str
    """streamwire's row in the broker's results."""
    call: str
    """What user code calls (for the table)."""
    peers: tuple[str, ...]
    """The other projects' clients it is set against (the fastest one measured counts)."""
    goal: float | None = 1.0


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the headline."""

    broker: str
    size: int
    direction: str
    call: str
    rate: float | None
    cpu_us: float | None
    peer: str | None
    peer_rate: float | None
    peer_cpu_us: float | None
    ratio: float | None
    cpu_ratio: float | None
    goal: float | None
    core: str
    spread: tuple[float, float] | None = None
    """The lowest and highest round's ratio, when the rounds pair up."""

    @property
    def met(self) -> bool | None:
        """Whether the goal is met (None: no goal, or nothing to compare)."""
        if self.goal is None or self.ratio is None:
            return None
        return self.ratio >= self.goal


RABBITMQ_PEERS = ("rbfly", "rstream", "java")
LIFTBRIDGE_PEERS = (
    "go-liftbridge",
    "gufo publish_bulk",
    "gufo publish ×64",
    "gufo publish",
    "gufo",
)
IGGY_PEERS = ("apache-iggy",)

PATHS: tuple[Path, ...] = (
    Path("rabbitmq", "publish", "streamwire", "send_many", RABBITMQ_PEERS),
    Path("rabbitmq", "publish", "streamwire", "send_many", ("raw ceiling",), 0.9),
    Path("rabbitmq", "publish", "streamwire futures", "send_batch", RABBITMQ_PEERS, None),
    Path("rabbitmq", "consume", "streamwire", "next_batch", RABBITMQ_PEERS),
    Path("rabbitmq", "consume", "streamwire async for", "async for", RABBITMQ_PEERS),
    Path("liftbridge", "publish", "streamwire", "send_batch (NATS)", LIFTBRIDGE_PEERS),
    Path("liftbridge", "publish", "streamwire grpc", "send_batch (gRPC)", LIFTBRIDGE_PEERS),
    Path("liftbridge", "consume", "streamwire", "next_batch", LIFTBRIDGE_PEERS),
    Path("liftbridge", "consume", "streamwire async for", "async for", LIFTBRIDGE_PEERS),
    Path("iggy", "send", "streamwire", "send_many", IGGY_PEERS),
    Path("iggy", "send", "streamwire futures", "send_batch", IGGY_PEERS, None),
    Path("iggy", "poll", "streamwire", "next_batch", IGGY_PEERS),
    Path("iggy", "poll", "streamwire async for", "async for", IGGY_PEERS),
)


def rabbitmq_rows(by_direction: Mapping[str, Any], direction: str) -> dict[str, dict[str, Any]]:
    """The RabbitMQ part of a report (one size) as :data:`Rows`: its rates are kept per
    direction, its CPU costs beside them (``publish_cpu_us``, absent for java) and each
    round's rate (``publish_rounds``)."""
    rates: Mapping[str, float] = by_direction.get(direction, {})
    cpu: Mapping[str, float] = by_direction.get(f"{direction}_cpu_us", {})
    rounds: Mapping[str, list[float]] = by_direction.get(f"{direction}_rounds", {})
    return {
        name: {"msg_per_s": rate, "cpu_us_per_msg": cpu.get(name), "rounds": rounds.get(name)}
        for name, rate in rates.items()
    }


def paired(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[float] | None:
    """Each round's rate ratio, when both sides have a rate for every round (else None)."""
    a, b = mine.get("rounds"), theirs.get("rounds")
    if not a or not b or len(a) != len(b) or not all(x > 0 for x in (*a, *b)):
        return None
    return [x / y for x, y in zip(a, b, strict=True)]


def _row(path: Path, size: int, rows: Rows, core: str) -> Row | None:
    mine = rows.get(path.client)
    if mine is None:
        return None
    measured = [p for p in path.peers if rows.get(p, {}).get("msg_per_s")]
    peer = max(measured, key=lambda p: rows[p]["msg_per_s"]) if measured else None
    theirs: Mapping[str, Any] = rows[peer] if peer is not None else {}
    rounds = paired(mine, theirs) if peer is not None else None
    value = (
        statistics.median(rounds)
        if rounds
        else ratio(mine.get("msg_per_s"), theirs.get("msg_per_s"))
    )
    return Row(
        broker=path.broker,
        size=size,
        direction=path.direction,
        call=path.call,
        rate=mine.get("msg_per_s"),
        cpu_us=mine.get("cpu_us_per_msg"),
        peer=peer,
        peer_rate=theirs.get("msg_per_s"),
        peer_cpu_us=theirs.get("cpu_us_per_msg"),
        ratio=value,
        cpu_ratio=ratio(theirs.get("cpu_us_per_msg"), mine.get("cpu_us_per_msg")),
        goal=path.goal,
        core=core,
        spread=(min(rounds), max(rounds)) if rounds else None,
    )


def headline(report: Mapping[str, Any]) -> list[Row]:
    """Every path of every broker in ``report`` (a ``python -m bench`` JSON report)."""
    core = str(report.get("core", "?"))
    out: list[Row] = []
    for path in PATHS:
        part = report.get(path.broker)
        if not part:
            continue
        if path.broker == "rabbitmq":
            for size, by_direction in part.items():
                row = _row(path, int(size), rabbitmq_rows(by_direction, path.direction), core)
                if row is not None:
                    out.append(row)
        else:
            row = _row(path, int(part.get("size", 0)), part.get(path.direction, {}), core)
            if row is not None:
                out.append(row)
    return out


def headline_table(rows: Iterable[Row]) -> str:
    """The headline as one Markdown table."""
    body = []
    for r in rows:
        goal = "–" if r.goal is None else f"≥ {r.goal:g}x"
        verdict = {None: "–", True: "met", False: "**not met**"}[r.met]
        body.append(
            [
                r.broker,
                f"{r.size} B",
                r.direction,
                r.call,
                fmt_rate(r.rate),
                fmt_cpu(r.cpu_us) if r.cpu_us is None or r.cpu_us >= 1 else f"{r.cpu_us:.2f}",
                r.peer or "–",
                fmt_rate(r.peer_rate),
                "–"
                if r.peer_cpu_us is None
                else (f"{r.peer_cpu_us:.1f}" if r.peer_cpu_us >= 1 else f"{r.peer_cpu_us:.2f}"),
                fmt_ratio(r.ratio)
                + ("" if r.spread is None else f" ({r.spread[0]:.2f}–{r.spread[1]:.2f})"),
                fmt_ratio(r.cpu_ratio),
                goal,
                verdict,
                r.core,
            ]
        )
    header = [
        "broker",
        "size",
        "direction",
        "streamwire call",
        "msg/s",
        "CPU µs/msg",
        "fastest peer",
        "peer msg/s",
        "peer CPU µs/msg",
        "rate ratio (rounds)",
        "CPU ratio",
        "goal",
        "",
        "core",
    ]
    return markdown_table(header, body, right=(4, 5, 7, 8, 9, 10))


#: What each peer of the headline is, as run: its version, the call, how many messages
#: it hands over at once and its options (every one at its documented defaults).
PEER_SETUPS: dict[str, str] = {
    "java": "RabbitMQ's Java stream client 1.4.0 in its own JVM: `send` per message with a "
    "confirm callback, its default batching (frames of up to 100 messages, 10,000 "
    "unconfirmed); a message handler reading each body. Its CPU is not measured",
    "rbfly": "rbfly 0.10.0: `PublisherBatchFast`, 1,000 messages per `flush`; `subscribe` "
    "as an async iterator (its Cython AMQP decoder)",
    "rstream": "rstream 1.1.1: `send_batch` of 100 `AMQPMessage`s with a confirm callback; "
    "`subscribe` with `amqp_decoder`",
    "raw ceiling": "not a client: Publish frames encoded before the clock starts, then only "
    "written and their confirms counted, 10,000 unconfirmed at most (`bench/raw_rabbitmq.py`)",
    "go-liftbridge": "go-liftbridge v2.3.0 in its own process: `PublishAsync` with LEADER "
    "acks, at most 10,000 awaiting their ack (streamwire's window); `Subscribe` reading "
    "`Value()`; its CPU from `getrusage`",
    "gufo publish_bulk": "gufo-liftbridge 0.2.0: streaming `publish_bulk` (PublishAsync), "
    "LEADER acks",
    "gufo publish ×64": "gufo-liftbridge 0.2.0: unary `publish`, 64 calls in flight",
    "gufo publish": "gufo-liftbridge 0.2.0: unary `publish`, one call at a time",
    "gufo": "gufo-liftbridge 0.2.0: `subscribe`, reading each value",
    "apache-iggy": "apache-iggy 0.9.0 (the official SDK's Python wheel, its Rust runtime's "
    "CPU counted): `send_messages` of 1,000 `SendMessage`s, awaited one after the other; "
    "`poll_messages(count=1000)` reading `payload()`",
}


def _label(r: Row) -> str:
    name = {"rabbitmq": "RabbitMQ", "liftbridge": "Liftbridge", "iggy": "Iggy"}[r.broker]
    return f"{name} {r.size} B {r.direction} `{r.call}`"


def summary_table(rows: Iterable[Row]) -> str:
    """The headline in six columns (what docs/benchmarks.md opens with): the path, both
    rates, the peer, the rate ratio with its lowest and highest round, the CPU ratio."""
    body = []
    for r in rows:
        ratio_text = fmt_ratio(r.ratio)
        if r.spread is not None:
            ratio_text += f" ({r.spread[0]:.2f}–{r.spread[1]:.2f})"
        if r.met is False:
            ratio_text = f"**{ratio_text}**"
        body.append(
            [
                _label(r),
                fmt_rate(r.rate),
                r.peer or "–",
                fmt_rate(r.peer_rate),
                ratio_text,
                fmt_ratio(r.cpu_ratio),
            ]
        )
    header = [
        "path",
        "streamwire msg/s",
        "fastest peer",
        "peer msg/s",
        "rate ratio (rounds min–max)",
        "CPU ratio",
    ]
    return markdown_table(header, body, right=(1, 3, 4, 5))


def rows_as_json(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The headline for the JSON report (``met`` included)."""
    return [{**asdict(r), "met": r.met} for r in rows]
