"""Spark offsets of the streamwire source: JSON shapes, parsing and admission control.

An offset is ``{"<stream>": {"<partition>": <next offset>}}``: string keys only (Spark
round-trips offsets through ``json.dumps``/``json.loads``, which turns int keys into
strings anyway), partitions in numeric order, and the *next* offset to read, so a
micro-batch covers the half-open range ``[start, end)`` of each partition. The stream name
is part of the offset so a checkpoint is never silently applied to another stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeVar

from streamwire.spark.errors import SparkConfigurationError

__all__ = (
    "EARLIEST",
    "LAG_KEY",
    "LATEST",
    "SIZE_SAMPLE",
    "SKIPPED_KEY",
    "Offsets",
    "TriggerClock",
    "available",
    "StartSpec",
    "cap",
    "cap_bytes",
    "decode",
    "encode",
    "lost",
    "parse_spec",
    "per_partition_json",
    "resolve",
    "split",
)

#: Partition number -> next offset.
Offsets = dict[int, int]
#: "earliest", "latest", or explicit offsets per partition (-2: earliest, -1: latest).
StartSpec = Literal["earliest", "latest"] | dict[int, int]

EARLIEST: Final = -2
LATEST: Final = -1
#: Messages read per partition to estimate its bytes per message (``maxBytesPerTrigger``,
#: the lag's bytes); with no estimate at all a batch moves each partition at most this far.
SIZE_SAMPLE: Final = 100
#: The key of the offsets skipped under ``failOnDataLoss=false`` in a reported latest offset.
SKIPPED_KEY: Final = "streamwire.skippedOffsets"
#: The key of the lag in a streaming read's reported latest offset (``reportLatestOffset``).
LAG_KEY: Final = "streamwire.lag"

#: A partition's key: its number, or ``(stream, number)`` when a query reads several
#: streams (``streamwire.spark._several``).
K = TypeVar("K", int, tuple[str, int])


class TriggerClock:
    """When the last micro-batch of a streaming read was let through
    (``minOffsetsPerTrigger``)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: float | None = None


def available(begin: Mapping[K, int], tails: Mapping[K, int]) -> int:
    """Offsets between ``begin`` and ``tails``, over every partition."""
    return sum(max(0, t - begin.get(p, 0)) for p, t in tails.items())


def encode(stream: str, offsets: Mapping[int, int]) -> dict[str, Any]:
    """The JSON-ready offset dict (partitions as strings, in numeric order)."""
    return {stream: {str(p): int(offsets[p]) for p in sorted(offsets)}}


def decode(stream: str, value: Any) -> Offsets:
    """Parse an offset Spark hands back (from :func:`encode`, possibly via a checkpoint)."""
    if not isinstance(value, Mapping) or set(value) != {stream}:
        found = sorted(value) if isinstance(value, Mapping) else type(value).__name__
        raise SparkConfigurationError(
            f"offsets {found} are not for stream {stream!r}: was this checkpoint written by a "
            "query reading another stream?"
        )
    return _partition_offsets(value[stream], what=f"offsets of {stream!r}")


def _partition_offsets(value: Any, *, what: str, markers: bool = False) -> Offsets:
    if not isinstance(value, Mapping):
        raise SparkConfigurationError(f"{what} must be a JSON object, got {value!r}")
    out: Offsets = {}
    for key, offset in value.items():
        if not (isinstance(key, str) and key.isdigit()):
            raise SparkConfigurationError(f"{what}: partition {key!r} is not a number")
        lowest = EARLIEST if markers else 0
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest:
            raise SparkConfigurationError(f"{what}: bad offset {offset!r} for partition {key}")
        out[int(key)] = offset
    return out


def parse_spec(text: str | None, stream: str, *, default: str, option: str) -> StartSpec:
    """Parse ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest``, or JSON
    ``{"<partition>": offset}`` or ``{"<stream>": {"<partition>": offset}}`` where -2 means
    earliest and -1 latest (Spark's Kafka source conventions)."""
    value = (text if text is not None else default).strip()
    if value.lower() in ("earliest", "latest"):
        return "earliest" if value.lower() == "earliest" else "latest"
    parsed = per_partition_json(value, stream, f"{option} must be earliest, latest or JSON offsets")
    return _partition_offsets(parsed, what=option, markers=True)


def per_partition_json(text: str, stream: str, expected: str) -> Any:
    """``text`` parsed as JSON, a ``{"<stream>": {...}}`` wrapper for ``stream`` removed;
    a SparkConfigurationError saying ``expected`` when it is no JSON."""
    try:
        parsed = json.loads(text)
    except ValueError:
        raise SparkConfigurationError(f"{expected}, got {text!r}") from None
    if isinstance(parsed, Mapping) and set(parsed) == {stream}:
        parsed = parsed[stream]
    return parsed


def resolve(spec: StartSpec, bounds: Mapping[int, tuple[int, int]]) -> Offsets:
    """Concrete offsets for every partition in ``bounds`` (partition -> (earliest, tail)).
    Partitions an explicit spec leaves out start at the earliest offset."""
    out: Offsets = {}
    for p, (earliest, tail) in bounds.items():
        if spec == "earliest":
            out[p] = earliest
        elif spec == "latest":
            out[p] = tail
        else:
            wanted = spec.get(p, EARLIEST)
            out[p] = earliest if wanted == EARLIEST else tail if wanted == LATEST else wanted
    return out


def cap(start: Mapping[K, int], tails: Mapping[K, int], max_rows: int | None) -> dict[K, int]:
    """The end offsets of the next micro-batch: every partition's tail, or, when more than
    ``max_rows`` offsets are available, a share of ``max_rows`` per partition proportional
    to what it has (largest remainders first, ties to the lower partition), so every
    partition makes progress. Never moves a partition backwards. Partitions new in
    ``tails`` start from 0."""
    end: dict[K, int] = {p: max(tails.get(p, o), o) for p, o in start.items()}
    for p, tail in tails.items():
        end.setdefault(p, tail)
    available = {p: end[p] - start.get(p, 0) for p in end}
    total = sum(available.values())
    if max_rows is None or total <= max_rows:
        return dict(sorted(end.items()))
    if max_rows < 1:
        raise SparkConfigurationError("maxRecordsPerTrigger must be >= 1")
    share = {p: n * max_rows // total for p, n in available.items()}
    left = max_rows - sum(share.values())
    by_remainder = sorted(available, key=lambda p: (-(available[p] * max_rows % total), p))
    for p in by_remainder:
        if left == 0:
            break
        if share[p] < available[p]:
            share[p] += 1
            left -= 1
    return {p: start.get(p, 0) + share[p] for p in sorted(end)}


def cap_bytes(
    start: Mapping[K, int],
    end: Mapping[K, int],
    max_bytes: int,
    sizes: Mapping[K, float],
    *,
    unsampled: int = SIZE_SAMPLE,
) -> dict[K, int]:
    """``end`` cut so that the offsets of ``[start, end)`` hold about ``max_bytes``, given
    each partition's estimated bytes per message (``sizes``; a partition without one counts
    as the mean of the others). When over, every partition keeps the same fraction of its
    offsets, rounded down, so each moves in step with the others; at least one offset is
    kept in all (of the partition with the most) so a batch always makes progress. With no
    estimate at all (the sample found no message), each partition moves at most
    ``unsampled`` offsets: a small batch, never an unbounded one. Never moves a partition
    backwards, never past ``end``."""
    if max_bytes < 1:
        raise SparkConfigurationError("maxBytesPerTrigger must be >= 1")
    available = {p: max(e - start.get(p, 0), 0) for p, e in end.items()}
    known = [sizes[p] for p in available if p in sizes]
    if not known:
        return {p: start.get(p, 0) + min(n, unsampled) for p, n in sorted(available.items())}
    mean = sum(known) / len(known)
    total = sum(n * max(sizes.get(p, mean), 0.0) for p, n in available.items())
    if total <= max_bytes:
        return dict(sorted(end.items()))
    fraction = max_bytes / total
    out = {
        p: start.get(p, 0) + int(n * fraction) if n else max(end[p], start.get(p, 0))
        for p, n in available.items()
    }
    if all(out[p] == start.get(p, 0) for p, n in available.items() if n):
        most = min((p for p, n in available.items() if n), key=lambda p: (-available[p], p))
        out[most] += 1
    return dict(sorted(out.items()))


def lost(
    start: Mapping[int, int], end: Mapping[int, int], bounds: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    """The offsets of ``[start, end)`` each partition no longer has: ``(first, stop)`` where
    a range starts below the partition's earliest offset (retention deleted them), or where
    a partition the offsets name is gone. Partitions without a range are left out."""
    out: dict[int, tuple[int, int]] = {}
    for p, stop in end.items():
        first = start.get(p, 0)
        if stop <= first:
            continue
        if p not in bounds:
            out[p] = (first, stop)
            continue
        earliest = bounds[p][0]
        if first < earliest:
            out[p] = (first, min(earliest, stop))
    return dict(sorted(out.items()))


def split(
    ranges: list[tuple[int, int, int]], min_partitions: int | None
) -> list[tuple[int, int, int]]:
    """``(partition, start, end)`` ranges cut into at least about ``min_partitions`` pieces,
    as Kafka's source does with ``minPartitions``: when there are fewer ranges than that,
    each is cut into ``max(1, round(size / total * min_partitions))`` nearly equal pieces (the
    larger first), in partition and offset order. Empty ranges are left out."""
    ranges = [r for r in ranges if r[2] > r[1]]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(end - start for _, start, end in ranges)
    out: list[tuple[int, int, int]] = []
    for p, start, end in ranges:
        size = end - start
        pieces = min(size, max(1, round(size / total * min_partitions)))
        base, extra = divmod(size, pieces)
        at = start
        for i in range(pieces):
            step = base + (1 if i < extra else 0)
            out.append((p, at, at + step))
            at += step
    return out
