"""Helpers shared by the Liftbridge and Iggy benchmarks and the soak: measuring one run
(wall clock and this process's CPU time), medians over rounds, ratios, Markdown tables, RSS
and the soak's flatness verdict. Pure functions except :class:`Stopwatch` and
:func:`rss_mb`, which read clocks and ``/proc``, and :func:`settle_heap`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self

__all__ = (
    "Log",
    "ab_parser",
    "run_child",
    "Measurement",
    "RssVerdict",
    "Stopwatch",
    "cpu_ratios",
    "fmt_cpu",
    "fmt_rate",
    "first_line",
    "fmt_ratio",
    "markdown_table",
    "median",
    "paired_ratios",
    "read_batches",
    "read_each",
    "ratio",
    "rss_mb",
    "rotated",
    "rss_verdict",
    "settle_heap",
    "summarize",
)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One timed run: ``messages`` handled in ``seconds`` of wall clock, costing
    ``cpu_seconds`` of this process's CPU time (every thread: gRPC's C core and the Rust
    runtime of apache-iggy included, the server excluded when it is another process)."""

    messages: int
    seconds: float
    cpu_seconds: float
    server_cpu_seconds: float | None = None
    """The server's CPU time over the same run, when it is a process we can read (the
    Iggy double)."""

    @property
    def rate(self) -> float:
        """Messages per second (0 when nothing was timed)."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us(self) -> float:
        """Client CPU microseconds per message."""
        return self.cpu_seconds * 1e6 / self.messages if self.messages else 0.0

    @property
    def server_cpu_us(self) -> float | None:
        """Server CPU microseconds per message, when known."""
        if self.server_cpu_seconds is None or not self.messages:
            return None
        return self.server_cpu_seconds * 1e6 / self.messages


def settle_heap() -> None:
    """Collect every generation before a timed run starts.

    Clients run one after another in one process. A client that leaves many long-lived
    objects behind (a peer's caches, a publisher's messages) makes the collector's next
    full collection due, and whichever client allocates next pays for it inside its own
    timed window: in a ``python -m bench`` run the ``async for`` consumer, which follows
    rbfly and rstream, paid one full collection of 27 – 30 ms (0.15 µs per message of
    200 000) that ``next_batch``, run first, never saw. Collecting first gives every
    client the same clean heap; each still pays for the collections its own allocations
    cause.
    """
    gc.collect()


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.result(count)``: wall clock and process CPU time
    of the block (or up to :meth:`result` when called inside it), started on a settled heap
    (:func:`settle_heap`)."""

    def __init__(self) -> None:
        self._wall = 0.0
        self._cpu = 0.0
        self._stopped: tuple[float, float] | None = None

    def __enter__(self) -> Self:
        settle_heap()
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._stopped = None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Freeze the readings (the first call wins)."""
        if self._stopped is None:
            self._stopped = (time.perf_counter() - self._wall, time.process_time() - self._cpu)

    def result(self, messages: int) -> Measurement:
        if self._stopped is None:
            self.stop()
        assert self._stopped is not None
        wall, cpu = self._stopped
        return Measurement(messages, wall, cpu)


def median(values: Iterable[float]) -> float | None:
    """The median, or None for no values."""
    data = list(values)
    return statistics.median(data) if data else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None when either is missing or the denominator is
    not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def paired_ratios(rounds: Iterable[Mapping[str, Measurement]], mine: str, peer: str) -> list[float]:
    """``mine``'s rate over ``peer``'s, round by round (rounds missing either, or where
    either timed nothing, are left out): one round's two runs share its machine load."""
    out: list[float] = []
    for one in rounds:
        a, b = one.get(mine), one.get(peer)
        if a is not None and b is not None and a.rate > 0 and b.rate > 0:
            out.append(a.rate / b.rate)
    return out


def summarize(samples: Mapping[str, Sequence[Measurement]]) -> dict[str, dict[str, Any]]:
    """Per client: the median rate and CPU per message over its rounds (and the server's
    CPU per message when every round has it), and every round's rate. Clients without a
    successful round are left out."""
    out: dict[str, dict[str, Any]] = {}
    for client, runs in samples.items():
        if not runs:
            continue
        row: dict[str, Any] = {
            "msg_per_s": median(m.rate for m in runs),
            "cpu_us_per_msg": median(m.cpu_us for m in runs),
            "rounds": [round(m.rate, 1) for m in runs],
        }
        server = [m.server_cpu_us for m in runs]
        if all(v is not None for v in server):
            row["server_cpu_us_per_msg"] = median(v for v in server if v is not None)
        out[client] = row
    return out


def rate_ratios(
    results: Mapping[str, Mapping[str, Any]], mine: str = "streamwire"
) -> dict[str, float]:
    """``mine``'s median rate over each other client's (above 1: ``mine`` is faster), from
    :func:`summarize` rows."""
    own = results.get(mine, {}).get("msg_per_s")
    out: dict[str, float] = {}
    for name, row in results.items():
        value = None if name == mine else ratio(own, row.get("msg_per_s"))
        if value is not None:
            out[name] = value
    return out


def cpu_ratios(
    results: Mapping[str, Mapping[str, Any]], mine: str = "streamwire"
) -> dict[str, float]:
    """Each other client's CPU per message over ``mine``'s (above 1: ``mine`` is cheaper)."""
    own = results.get(mine, {}).get("cpu_us_per_msg")
    out: dict[str, float] = {}
    for name, row in results.items():
        value = None if name == mine else ratio(row.get("cpu_us_per_msg"), own)
        if value is not None:
            out[name] = value
    return out


def rotated(names: Sequence[str], by: int) -> list[str]:
    """``names`` starting at index ``by`` (modulo its length): each round starts with a
    different client, so that no client always runs first or last."""
    if not names:
        return []
    k = by % len(names)
    return [*names[k:], *names[:k]]


def fmt_rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def fmt_cpu(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, right: Iterable[int] = ()
) -> str:
    """A Markdown table; columns whose index is in ``right`` are right-aligned. Every row
    must have as many cells as the header."""
    aligned = set(right)
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if i in aligned else "---" for i in range(len(header))) + "|",
    ]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {list(row)!r} has {len(row)} cells, expected {len(header)}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def comparison_table(
    result: Mapping[str, Any], directions: Sequence[str], *, peer: str, server_cpu: bool = False
) -> str:
    """The Markdown table of a peer comparison: one row per client and direction, with
    rates, client CPU per message (and the server's, with ``server_cpu``) and the ratios
    against streamwire from ``result["ratios"]`` / ``result["cpu_ratios"]``."""
    rows: list[list[str]] = []
    for direction in directions:
        for name, row in result[direction].items():
            mine = name == "streamwire"
            cells = [direction, name, fmt_rate(row["msg_per_s"]), fmt_cpu(row["cpu_us_per_msg"])]
            if server_cpu:
                cells.append(fmt_cpu(row.get("server_cpu_us_per_msg")))
            cells.append("–" if mine else fmt_ratio(result["ratios"][direction].get(name)))
            cells.append("–" if mine else fmt_ratio(result["cpu_ratios"][direction].get(name)))
            rows.append(cells)
    headers = ["direction", "client", "msg/s", "client CPU µs/msg"]
    if server_cpu:
        headers.append("server CPU µs/msg")
    headers += [f"rate: streamwire ÷ {peer}", f"CPU: {peer} ÷ streamwire"]
    return markdown_table(headers, rows, right=tuple(range(2, len(headers))))


def rss_mb() -> float:
    """This process's resident set size in MiB (from /proc; falls back to the peak)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True, slots=True)
class RssVerdict:
    """Whether RSS stayed flat over a soak (see :func:`rss_verdict`)."""

    flat: bool | None
    """True / False, or None when there were too few samples to tell."""
    growth_mb: float | None
    """Peak RSS of the second half minus the RSS at its start."""
    slope_mb_per_min: float | None
    """Least-squares slope of RSS over the second half (for information)."""
    reason: str


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    if len(points) < 2:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / var


def rss_verdict(
    samples: Sequence[tuple[float, float]], *, max_growth_mb: float = 5.0, min_samples: int = 4
) -> RssVerdict:
    """Flatness of RSS over a soak, from ``(seconds, rss_mb)`` samples in time order.

    The first half is warm-up (allocator pools, gRPC and NATS buffers, caches filling up)
    and is ignored. RSS is *flat* when its peak over the second half exceeds the RSS at the
    start of the second half by at most ``max_growth_mb``. With fewer than ``min_samples``
    samples in the second half the verdict is None (inconclusive).
    """
    later = list(samples[len(samples) // 2 :])
    slope = _slope(later)
    per_min = None if slope is None else round(slope * 60, 3)
    if len(later) < min_samples:
        return RssVerdict(
            None,
            None,
            per_min,
            f"inconclusive: {len(later)} samples in the second half (need {min_samples})",
        )
    start = later[0][1]
    growth = round(max(rss for _, rss in later) - start, 1)
    flat = growth <= max_growth_mb
    words = "flat" if flat else "NOT flat"
    return RssVerdict(
        flat,
        growth,
        per_min,
        f"{words}: second-half growth {growth} MiB (limit {max_growth_mb} MiB), "
        f"from {start:.1f} MiB at t={later[0][0]:g}s",
    )


def first_line(exc: BaseException) -> str:
    """A one-line description of an exception, for progress output."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


Log = Callable[[str], None]


class _Consumer(Protocol):
    """What the helpers below use of any streamwire consumer."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def next_batch(self, max_messages: int, timeout: float | None) -> list[Any]: ...


async def read_each(consumer: _Consumer, count: int) -> int:
    """``async for`` over ``consumer``, reading every message's value, until ``count``
    messages came; how many did."""
    seen = 0
    async for message in consumer:
        _ = message.value
        seen += 1
        if seen >= count:
            break
    return seen


async def read_batches(consumer: _Consumer, count: int, batch: int) -> int:
    """``next_batch(batch)`` until ``count`` messages came, reading every value; how many
    did. A call that returns nothing within 10 s is a stall (``RuntimeError``)."""
    seen = 0
    while seen < count:
        got = await consumer.next_batch(batch, timeout=10)
        if not got:
            raise RuntimeError(f"streamwire stalled after {seen} messages")
        for message in got:
            _ = message.value
        seen += len(got)
    return seen


def ab_parser(
    doc: str | None, *, rounds: int, messages: int, clients: Iterable[str]
) -> argparse.ArgumentParser:
    """The arguments every fresh-process RabbitMQ A/B script takes: the broker, rounds,
    messages, size and clients, and ``--one`` (the child's run, as JSON)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get(
            "STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
        ),
    )
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--messages", type=int, default=messages)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--clients", default=",".join(clients), help="comma-separated")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one run, JSON out
    return parser


def run_child(
    root: os.PathLike[str] | str, src: str, module: str, args: Sequence[str], env: Mapping[str, str]
) -> Measurement:
    """Run ``python -m module args`` in a fresh process (``src`` and ``root`` on its path,
    ``env`` over this environment) and read the measurement its last line prints as JSON."""
    paths = [src, str(root), os.environ.get("PYTHONPATH", "")]
    environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=environ,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(got["messages"], got["seconds"], got["cpu_seconds"])
