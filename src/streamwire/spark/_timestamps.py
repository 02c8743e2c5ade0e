"""Start and end positions by time, as Spark's Kafka source takes them (no I/O here).

``startingTimestamp`` / ``endingTimestamp``: milliseconds since the epoch, every partition;
``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: JSON ``{"<partition>": ms}``
(or ``{"<stream>": {"<partition>": ms}}``). The first takes precedence over the second, and
both over ``startingOffsets`` / ``endingOffsets``. A partition resolves to the offset of its
first message whose timestamp is at or after the time (:func:`first_at_or_after`). For a
start past the partition's last message, ``startingOffsetsByTimestampStrategy`` decides:
``error`` (the default, as Kafka's) or ``latest``; an end past it is the partition's tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import streamwire
from streamwire.spark._offsets import per_partition_json
from streamwire.spark.errors import SparkConfigurationError

__all__ = ("STRATEGIES", "TimeSpec", "first_at_or_after", "parse_time_spec")

STRATEGIES = ("error", "latest")


@dataclass(frozen=True, slots=True)
class TimeSpec:
    """Milliseconds since the epoch: ``every`` for all partitions, else ``by_partition``
    (partitions it leaves out start at the earliest offset, or end at the tail)."""

    every: int | None = None
    by_partition: Mapping[int, int] | None = None

    def of(self, partition: int) -> int | None:
        """The time for ``partition`` (``None``: none given)."""
        if self.every is not None:
            return self.every
        return None if self.by_partition is None else self.by_partition.get(partition)


def _millis(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SparkConfigurationError(
            f"{what} must be milliseconds since the epoch (an integer >= 0), got {value!r}"
        )
    return value


def parse_time_spec(
    options: Mapping[str, str], stream: str, *, single: str, by_partition: str
) -> TimeSpec | None:
    """The time spec of options ``single`` (ms, every partition) or ``by_partition`` (JSON),
    both lower-cased keys of ``options``; ``None`` when neither is given."""
    text = options.get(single.lower())
    if text is not None:
        try:
            value = int(text.strip())
        except ValueError:
            raise SparkConfigurationError(
                f"option {single!r} must be milliseconds since the epoch, got {text!r}"
            ) from None
        return TimeSpec(every=_millis(value, single))
    text = options.get(by_partition.lower())
    if text is None:
        return None
    expected = f'option {by_partition!r} must be JSON {{"<partition>": ms}}'
    parsed = per_partition_json(text, stream, expected)
    if not isinstance(parsed, Mapping) or not parsed:
        raise SparkConfigurationError(
            f'option {by_partition!r} must be JSON {{"<partition>": ms}}, got {text!r}'
        )
    out: dict[int, int] = {}
    for key, value in parsed.items():
        if not (isinstance(key, str) and key.isdigit()):
            raise SparkConfigurationError(f"{by_partition}: partition {key!r} is not a number")
        out[int(key)] = _millis(value, f"{by_partition} for partition {key}")
    return TimeSpec(by_partition=out)


def strategy(options: Mapping[str, str]) -> Literal["error", "latest"]:
    """``startingOffsetsByTimestampStrategy`` (``error`` by default)."""
    text = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if text == "error":
        return "error"
    if text == "latest":
        return "latest"
    raise SparkConfigurationError(
        f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got {text!r}"
    )


def first_at_or_after(messages: Sequence[streamwire.Message], millis: int) -> int | None:
    """The offset of the first of ``messages`` (in offset order) written at or after
    ``millis``; ``None`` when none was."""
    wanted = millis * 1000
    for message in messages:
        stamp = message.timestamp_us
        if stamp is not None and stamp >= wanted and message.offset is not None:
            return message.offset
    return None
