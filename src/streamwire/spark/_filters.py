"""Filter pushdown for batch reads: what a query's predicates on the source's columns say
about the offsets worth reading.

Spark hands a batch read's filters to ``pushFilters`` (pyspark >= 4.1, with
``spark.sql.python.filterPushdown.enabled``; the source option ``pushFilters=true`` turns
it on for a read). :func:`narrow` reads them:

* on ``partition`` and ``offset`` (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``): exact; the
  read ranges shrink to what they allow and Spark does not check them again;
* on ``timestamp`` (``=``, ``>``, ``>=``): each partition's start moves to its first
  message written at or after the time, as ``startingTimestamp`` does; Spark still checks
  them (a broker's time lookup may start early, RabbitMQ's at its chunk);
* everything else (``key``, ``value``, headers, ``NOT``, ``OR``, upper bounds on time) is
  left for Spark, which checks it on the rows read: the answer is the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

__all__ = ("Narrowing", "narrow")

#: The comparisons a bound is read from, by the class name pyspark gives the filter.
_LOWER = {"GreaterThan": 1, "GreaterThanOrEqual": 0}
_UPPER = {"LessThan": 0, "LessThanOrEqual": 1}


@dataclass(frozen=True, slots=True)
class Narrowing:
    """What the pushed filters allow: ``partitions`` (``None``: all), offsets from ``first``
    and below ``end``, rows written at or after ``since_ms``; ``nothing`` when they
    contradict each other."""

    partitions: frozenset[int] | None = None
    first: int | None = None
    end: int | None = None
    since_ms: int | None = None
    nothing: bool = False

    def ranges(
        self, start: Mapping[int, int], end: Mapping[int, int]
    ) -> tuple[dict[int, int], dict[int, int]]:
        """``[start, end)`` per partition, narrowed (an excluded partition reads nothing)."""
        out_start, out_end = dict(start), dict(end)
        for p, s in start.items():
            e = end.get(p, s)
            if self.first is not None:
                s = max(s, self.first)
            if self.end is not None:
                e = min(e, self.end)
            if self.nothing or (self.partitions is not None and p not in self.partitions):
                e = s
            out_start[p], out_end[p] = s, max(s, e)
        return out_start, out_end


def _column(f: Any) -> str | None:
    path = getattr(f, "attribute", None)
    return path[0].lower() if isinstance(path, tuple) and len(path) == 1 else None


def _millis(value: Any) -> int | None:
    if not isinstance(value, datetime):
        return None
    when = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)  # down to the ms: a lower bound never skips a row


def _ints(value: Any) -> list[int] | None:
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return values
    return None


def _offset(n: Narrowing, kind: str, value: int) -> Narrowing:
    if kind == "EqualTo":
        return _offset(_offset(n, "GreaterThanOrEqual", value), "LessThanOrEqual", value)
    if kind in _LOWER:
        first = value + _LOWER[kind]
        return replace(n, first=first if n.first is None else max(n.first, first))
    end = value + _UPPER[kind]
    return replace(n, end=end if n.end is None else min(n.end, end))


def narrow(filters: Sequence[Any]) -> tuple[Narrowing, list[Any]]:
    """The narrowing ``filters`` give, and the filters Spark must still check."""
    n = Narrowing()
    left: list[Any] = []
    for f in filters:
        kind, column = type(f).__name__, _column(f)
        value = getattr(f, "value", None)
        if column == "partition" and kind in ("EqualTo", "In") and _ints(value) is not None:
            allowed = frozenset(_ints(value) or ())
            if n.partitions is not None:
                allowed &= n.partitions
            n = replace(n, partitions=allowed, nothing=n.nothing or not allowed)
        elif column == "offset" and kind in ("EqualTo", *_LOWER, *_UPPER):
            ints = _ints(value)
            if ints is None or len(ints) != 1:
                left.append(f)
                continue
            n = _offset(n, kind, ints[0])
        elif column == "offset" and kind == "In" and _ints(value):
            ints = _ints(value) or []
            n = _offset(_offset(n, "GreaterThanOrEqual", min(ints)), "LessThanOrEqual", max(ints))
            left.append(f)  # only its span is pushed: Spark keeps the values it names
        else:
            millis = _millis(value)
            if column == "timestamp" and kind in ("EqualTo", *_LOWER) and millis is not None:
                since = millis if n.since_ms is None else max(n.since_ms, millis)
                n = replace(n, since_ms=since)
            left.append(f)
    if n.first is not None and n.end is not None and n.first >= n.end:
        n = replace(n, nothing=True)
    return n, left
