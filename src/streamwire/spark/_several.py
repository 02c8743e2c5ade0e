"""Several streams in one query (the ``streams`` option): a reader per stream, and one that
puts them together.

Each stream keeps its own reader (``datasource.StreamwireBatchReader`` or
``StreamwireStreamReader``, made with :func:`streamwire.spark._options.for_stream`), so what
a stream's reads do (its offsets, data loss, an uncommitted tail) is what a query of that
stream alone does. What is shared is decided here:

* offsets are ``{"<stream>": {"<partition>": <next offset>}}`` with every stream in them,
  as a single stream's are with one; a stream a checkpoint does not name (added to
  ``streams`` since, or created since and matching ``streamPattern``) starts at its
  earliest offset, as Kafka's source starts a topic partition new to it, and one no longer
  read is left out of the next offsets;
* admission control over all of them: ``maxRecordsPerTrigger`` and ``maxBytesPerTrigger``
  are shared out across every stream's partitions as across one stream's
  (``_offsets.cap``, ``_offsets.cap_bytes``, keyed by ``(stream, partition)``), and
  ``minOffsetsPerTrigger`` counts the new offsets of all;
* the lag in the progress: per stream, and the minimum, maximum, mean and bytes over all.

Rows carry their stream in the ``stream`` column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from streamwire.spark import _offsets
from streamwire.spark._offsets import LAG_KEY, SKIPPED_KEY, TriggerClock, available
from streamwire.spark._options import SourceOptions

__all__ = ("SeveralBatchReader", "SeveralStreamReader")

#: Offsets of several streams, keyed by (stream, partition).
Keyed = dict[tuple[str, int], int]


def _of(keyed: Mapping[tuple[str, int], Any], stream: str) -> dict[int, Any]:
    return {p: n for (s, p), n in keyed.items() if s == stream}


def _keyed(stream: str, offsets: Mapping[int, Any]) -> dict[tuple[str, int], Any]:
    return {(stream, p): n for p, n in offsets.items()}


class BatchReader(Protocol):
    options: SourceOptions
    schema: Any  # pyarrow.Schema: what rows it reads, the same for every stream

    def partitions(self) -> Sequence[Any]: ...

    def read(self, partition: Any) -> Iterator[Any]: ...


class StreamReader(Protocol):
    options: SourceOptions
    schema: Any

    @property
    def available_now(self) -> bool: ...

    def initialOffset(self) -> dict[str, Any]: ...

    def earliest(self) -> dict[str, Any]: ...

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]: ...

    def window(self, start: Mapping[str, Any]) -> tuple[dict[int, int], dict[int, int]]: ...

    def chosen(self, begin: dict[int, int], end: dict[int, int]) -> None: ...

    def held_back(
        self, clock: TriggerClock, new: int, limit: Any, *, available_now: bool
    ) -> bool: ...

    def limits(self, limit: Any) -> tuple[int | None, int | None]: ...

    def sizes(self, begin: dict[int, int], end: dict[int, int]) -> dict[int, float]: ...

    def getDefaultReadLimit(self) -> Any: ...

    def reportLatestOffset(self) -> dict[str, Any] | None: ...

    def prepareForTriggerAvailableNow(self) -> None: ...

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]: ...

    def read(self, partition: Any) -> Iterator[Any]: ...

    def commit(self, end: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


def _reader_of(readers: Mapping[str, Any], partition: Any) -> Any:
    """The reader of ``partition``'s stream; None for PySpark's stand-in partition of an
    empty read."""
    stream = getattr(partition, "stream", None)
    return readers.get(stream) if isinstance(stream, str) else None


class SeveralBatchReader:
    """``spark.read`` of several streams: every stream's ranges, each read by its stream's
    reader."""

    def __init__(self, readers: Sequence[BatchReader]) -> None:
        self.readers = {r.options.stream: r for r in readers}
        self.schema = readers[0].schema

    def partitions(self) -> Sequence[Any]:
        return [part for r in self.readers.values() for part in r.partitions()]

    def read(self, partition: Any) -> Iterator[Any]:
        reader = _reader_of(self.readers, partition)
        return iter(()) if reader is None else reader.read(partition)


class SeveralFilteringBatchReader(SeveralBatchReader):
    """With ``pushFilters``: each stream's reader narrows its own ranges by the filters
    (the same for every stream, so what one leaves to Spark, all do)."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        left: list[Any] = list(filters)
        for reader in self.readers.values():
            left = list(reader.pushFilters(list(filters)))  # type: ignore[attr-defined]
        return iter(left)


class SeveralStreamReader:
    """``spark.readStream`` of several streams (see the module)."""

    def __init__(
        self,
        readers: Sequence[StreamReader],
        *,
        discover: Callable[[set[str]], Sequence[StreamReader]] | None = None,
    ) -> None:
        self.readers = {r.options.stream: r for r in readers}
        self.first = readers[0]
        self.options = self.first.options  # what every stream's reader shares
        self.schema = self.first.schema
        self._trigger = TriggerClock()
        self._discover = discover  # streamPattern: readers of streams created since

    def _discovered(self) -> None:
        """Take in the streams created since that match ``streamPattern`` (not under
        ``Trigger.AvailableNow``, which reads what was there when it began)."""
        if self._discover is None or any(r.available_now for r in self.readers.values()):
            return
        for reader in self._discover(set(self.readers)):
            self.readers[reader.options.stream] = reader

    def initialOffset(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for reader in self.readers.values():
            out.update(reader.initialOffset())
        return out

    def _start_of(self, stream: str, start: Mapping[str, Any]) -> dict[str, Any]:
        """``stream``'s part of ``start``; where a stream is new to the checkpoint, its
        earliest offsets (as Kafka's source reads a topic partition new to it)."""
        if stream in start:
            return {stream: start[stream]}
        return self.readers[stream].earliest()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if start is None:  # pyspark < 4.2
            for reader in self.readers.values():
                out.update(reader.latestOffset())
            return out
        self._discovered()
        begin: Keyed = {}
        tails: Keyed = {}
        for stream, reader in self.readers.items():
            b, t = reader.window(self._start_of(stream, start))
            begin.update(_keyed(stream, b))
            tails.update(_keyed(stream, t))
        first = self.first
        now = any(r.available_now for r in self.readers.values())
        if first.held_back(self._trigger, available(begin, tails), limit, available_now=now):
            end = dict(begin)  # minOffsetsPerTrigger: not yet
        else:
            max_rows, max_bytes = first.limits(limit)
            end = _offsets.cap(begin, tails, max_rows)
            if max_bytes is not None:
                sizes: dict[tuple[str, int], float] = {}
                for stream, reader in self.readers.items():
                    sizes.update(_keyed(stream, reader.sizes(_of(begin, stream), _of(end, stream))))
                end = _offsets.cap_bytes(begin, end, max_bytes, sizes)
        for stream, reader in self.readers.items():
            chosen = _of(end, stream)
            reader.chosen(_of(begin, stream), chosen)
            out.update(_offsets.encode(stream, chosen))
        return out

    def getDefaultReadLimit(self) -> Any:
        return self.first.getDefaultReadLimit()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """Every stream's tails; ``streamwire.lag`` per stream and over all of them, and
        the skipped offsets (``failOnDataLoss=false``) of all."""
        out: dict[str, Any] = {}
        lags: dict[str, Any] = {}
        skipped = 0
        for stream, reader in self.readers.items():
            report = reader.reportLatestOffset()
            if report is None:  # no latestOffset yet
                return None
            out[stream] = report[stream]
            if LAG_KEY in report:
                lags[stream] = report[LAG_KEY]
            skipped += report.get(SKIPPED_KEY, 0)
        if not self.options.fail_on_data_loss:
            out[SKIPPED_KEY] = skipped
        if lags:
            out[LAG_KEY] = _combined(lags)
        return out

    def prepareForTriggerAvailableNow(self) -> None:
        for reader in self.readers.values():
            reader.prepareForTriggerAvailableNow()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        out: list[Any] = []
        for stream, reader in self.readers.items():
            if stream in end:
                out += reader.partitions(self._start_of(stream, start), {stream: end[stream]})
        return out

    def read(self, partition: Any) -> Iterator[Any]:
        reader = _reader_of(self.readers, partition)
        return iter(()) if reader is None else reader.read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        for stream, reader in self.readers.items():
            if stream in end:
                reader.commit({stream: end[stream]})

    def stop(self) -> None:
        self.first.stop()  # the process's runtime, one for every stream


def _combined(lags: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The lag of several streams: each one's offsets behind per partition; the minimum,
    maximum and mean over all their partitions; the sum of their bytes (``None`` while a
    stream has no estimate)."""
    counts = [n for lag in lags.values() for n in lag["offsetsBehindLatest"].values()] or [0]
    estimates = [lag["estimatedBytesBehindLatest"] for lag in lags.values()]
    return {
        "offsetsBehindLatest": {s: dict(lag["offsetsBehindLatest"]) for s, lag in lags.items()},
        "minOffsetsBehindLatest": min(counts),
        "maxOffsetsBehindLatest": max(counts),
        "avgOffsetsBehindLatest": sum(counts) / len(counts),
        "estimatedBytesBehindLatest": None if None in estimates else sum(estimates),
    }
