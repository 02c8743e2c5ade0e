"""Options of the ``streamwire`` data source, parsed and checked in one place (no I/O).

Spark hands options over as strings in a case-insensitive dict; these dataclasses hold the
typed values and are what readers, writers and partitions carry (small and picklable).

=======================  =================================================================
option                   meaning
=======================  =================================================================
url                      broker URL (required): rabbitmq-stream://, liftbridge://, iggy://
stream                   stream name (required, or streams); for Iggy the address
                         "stream/topic"
streams                  reader: several streams read by one query, comma-separated; JSON
                         offsets then name each stream ({"<stream>": {"<partition>": n}})
streamPattern            reader: the streams whose names match this regular expression (as a
                         whole), on brokers that list their streams (Liftbridge, Iggy)
timeout                  seconds for connecting, opening producers/consumers, confirmations
                         and for a read to see its next message (default 60); a source
                         waits as long again for a broker that is down or silent
fetchOffset.retryIntervalMs
                         reader: how often a source tries a broker that is down or silent
                         again while planning a batch or opening a read (default 1s)
startingOffsets          earliest | latest | JSON (reader; streaming default latest, batch
                         default earliest)
endingOffsets            latest | JSON (batch reader only; default latest)
maxRecordsPerTrigger     at most this many offsets per micro-batch (streaming reader)
maxBytesPerTrigger       about this many bytes of values and keys per micro-batch
                         (streaming reader; a soft limit, estimated by sampling)
minOffsetsPerTrigger     streaming reader: no micro-batch until this many new offsets are
                         there, or maxTriggerDelay passed since the last one
maxTriggerDelay          how long minOffsetsPerTrigger may hold a batch back (default 15m;
                         a duration: 500ms, 30s, 15m, 1h; a bare number is milliseconds)
consumerName             streaming reader: also store each committed batch's progress on
                         the broker under this consumer name (the checkpoint stays the truth)
name                     sink name, prefix of the RabbitMQ producer references
                         (default streamwire-sink)
maxInFlight              unconfirmed messages per producer (default 10000)
chunkRows                rows a writer task hands to its producer at a time (default 10000);
                         rows of a chunk not yet handed over when a task dies are not sent
ignoreExtraColumns       true: the writers ignore columns besides value, key, headers
connectOptions           JSON object of streamwire.connect options (readers and writers),
                         e.g. {"load_balancer": true}; an address_resolver as an object
                         of advertised "host:port" to the one to dial (AddressMap)
writeId                  batch writer: a stable identity for deduplication across reruns
                         of the same write (RabbitMQ); default a fresh id per write
observer                 "package.module:function" called once in every Python process the
                         reader or writer runs in (driver and executors) to install a
                         streamwire metrics observer there (streamwire.spark._observe)
=======================  =================================================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import streamwire
from streamwire.spark._brokers import Broker
from streamwire.spark._observe import check_spec
from streamwire.spark._offsets import StartSpec, parse_spec
from streamwire.spark._timestamps import TimeSpec, parse_time_spec, strategy
from streamwire.spark.errors import SparkConfigurationError

__all__ = (
    "DEFAULT_CHUNK_ROWS",
    "DEFAULT_MAX_IN_FLIGHT",
    "SinkOptions",
    "SourceOptions",
    "client_key_of",
    "for_stream",
    "pattern_of",
    "streams_of",
)

#: Rows a writer task hands to its producer at a time: Spark's Arrow batch size
#: (``spark.sql.execution.arrow.maxRecordsPerBatch``), so a batch goes out in one run.
DEFAULT_CHUNK_ROWS: Final = 10_000
#: Unconfirmed messages per producer: the RabbitMQ producer's own default. Fewer cut the
#: stream into smaller frames and cost CPU per row (docs/benchmarks/notes/2026-11.md, Spark).
DEFAULT_MAX_IN_FLIGHT: Final = 10_000


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _required(options: dict[str, str], name: str) -> str:
    value = options.get(name.lower(), "").strip()
    if not value:
        raise SparkConfigurationError(f"the streamwire data source needs the option {name!r}")
    return value


def _float(options: dict[str, str], name: str, default: float) -> float:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SparkConfigurationError(f"option {name!r} must be a number, got {text!r}") from None
    if not value > 0:
        raise SparkConfigurationError(f"option {name!r} must be > 0, got {text!r}")
    return value


def _int(options: dict[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise SparkConfigurationError(f"option {name!r} must be an integer, got {text!r}") from None
    if value < 1:
        raise SparkConfigurationError(f"option {name!r} must be >= 1, got {text!r}")
    return value


#: Seconds per unit of a duration option (Spark's own time strings).
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(options: dict[str, str], name: str, default: float) -> float:
    """Seconds from a duration as Spark writes them (``500ms``, ``30s``, ``15m``, ``1h``,
    ``1d``; a bare number is milliseconds, as in Spark's ``timeStringAsMs``)."""
    text = options.get(name.lower())
    if text is None:
        return default
    value = text.strip().lower()
    digits = value.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = value[len(digits) :].strip() or "ms"
    try:
        seconds = float(digits) * _UNITS[unit]
    except (KeyError, ValueError):
        raise SparkConfigurationError(
            f"option {name!r} must be a duration such as 500ms, 30s, 15m or 1h, got {text!r}"
        ) from None
    if not seconds >= 0:
        raise SparkConfigurationError(f"option {name!r} must not be negative, got {text!r}")
    return seconds


def _connect_options(options: dict[str, str], url: str) -> tuple[tuple[str, Any], ...]:
    """``connectOptions``: a JSON object of :func:`streamwire.connect` options with JSON
    values (``{"load_balancer": true}``), checked now as ``streamwire.connect`` checks them
    (names the broker's ``connect`` takes, values of the right kind); ``timeout`` has an
    option of its own."""
    text = options.get("connectoptions")
    if text is None:
        return ()
    expected = "option 'connectOptions' must be a JSON object of streamwire.connect options"
    try:
        parsed = json.loads(text)
    except ValueError:
        raise SparkConfigurationError(f"{expected}, got {text!r}") from None
    if not isinstance(parsed, dict):
        raise SparkConfigurationError(f"{expected}, got {text!r}")
    if isinstance(parsed.get("address_resolver"), dict):  # advertised -> reachable
        try:
            parsed["address_resolver"] = streamwire.AddressMap(parsed["address_resolver"])
        except streamwire.ConfigurationError as exc:
            raise SparkConfigurationError(f"connectOptions' address_resolver: {exc}") from None
    if any(isinstance(v, dict | list) for v in parsed.values()):
        raise SparkConfigurationError(
            f"{expected} with plain values (an address_resolver may be an object of "
            f"'host:port' strings), got {text!r}"
        )
    if "timeout" in parsed:
        raise SparkConfigurationError(
            "set the timeout with the option 'timeout', not in connectOptions"
        )
    streamwire.connect(url, **parsed)  # the names and kinds, before anything connects
    return tuple(sorted(parsed.items()))


def _bool(options: dict[str, str], name: str, *, default: bool = False) -> bool:
    text = options.get(name.lower(), str(default)).strip().lower()
    if text not in ("true", "false"):
        raise SparkConfigurationError(f"option {name!r} must be true or false, got {text!r}")
    return text == "true"


def _url(options: dict[str, str]) -> str:
    url = _required(options, "url")
    streamwire.parse_url(url)  # raises ConfigurationError for a bad URL
    return url


def _observer(options: dict[str, str]) -> str | None:
    spec = options.get("observer")
    return None if spec is None else check_spec(spec)


def _stream(options: dict[str, str], url: str) -> str:
    return Broker.of(url).check_stream(_required(options, "stream"))


#: Reader options whose JSON names streams when a query reads several, and what a stream
#: the JSON leaves out gets (``None``: the option's default).
_PER_STREAM: Final = {
    "startingoffsets": "earliest",
    "endingoffsets": None,
    "startingoffsetsbytimestamp": None,
    "endingoffsetsbytimestamp": None,
}


def streams_of(options: Mapping[str, Any]) -> tuple[str, ...]:
    """The streams of the ``streams`` option (comma-separated), checked; ``()`` without it
    (then ``stream`` names the one stream)."""
    opts = _lower(options)
    text = opts.get("streams")
    if text is None:
        return ()
    if "stream" in opts:
        raise SparkConfigurationError("give the option 'stream' or 'streams', not both")
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise SparkConfigurationError(
            f"option 'streams' must be stream names separated by commas, got {text!r}"
        )
    if len(set(names)) < len(names):
        raise SparkConfigurationError(f"option 'streams' names a stream twice: {text!r}")
    broker = Broker.of(_url(opts))
    return tuple(broker.check_stream(name) for name in names)


def pattern_of(options: Mapping[str, Any]) -> re.Pattern[str] | None:
    """The ``streamPattern`` option, compiled; None without it."""
    opts = _lower(options)
    text = opts.get("streampattern")
    if text is None:
        return None
    if "stream" in opts or "streams" in opts:
        raise SparkConfigurationError("give one of the options stream, streams, streamPattern")
    try:
        return re.compile(text)
    except re.error as exc:
        raise SparkConfigurationError(
            f"option 'streamPattern' must be a regular expression: {exc} in {text!r}"
        ) from None


def client_key_of(options: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The worker runtime's client key of a reader's options (``url``, ``timeout``,
    ``connectOptions``), without a stream."""
    opts = _lower(options)
    url = _url(opts)
    return url, (("timeout", _float(opts, "timeout", 60.0)), *_connect_options(opts, url))


def for_stream(options: Mapping[str, Any], stream: str) -> dict[str, str]:
    """A reader's options for one of the streams of ``streams``: ``stream`` set, and each
    JSON offset option narrowed to that stream's entry (a stream it leaves out starts at
    the earliest offset, and its other options take their defaults). With several streams
    such JSON must name them: ``{"<stream>": {"<partition>": offset}}``."""
    opts = _lower(options)
    opts.pop("streams", None)
    opts.pop("streampattern", None)
    opts["stream"] = stream
    for key, left_out in _PER_STREAM.items():
        text = opts.get(key)
        if text is None or text.strip().lower() in ("earliest", "latest"):
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            continue  # the stream's own parse says what is wrong with it
        if not (isinstance(parsed, dict) and parsed and not any(k.isdigit() for k in parsed)):
            raise SparkConfigurationError(
                f"with several streams, the JSON of {key!r} must name them: "
                f'{{"<stream>": {{"<partition>": offset}}}}, got {text!r}'
            )
        if stream in parsed:
            opts[key] = json.dumps({stream: parsed[stream]})
        elif left_out is not None:
            opts[key] = left_out
        else:
            del opts[key]
    return opts


@dataclass(frozen=True, slots=True)
class SourceOptions:
    url: str
    stream: str
    timeout: float
    starting: StartSpec
    ending: StartSpec
    max_records: int | None
    fail_on_data_loss: bool = True
    max_bytes: int | None = None
    min_partitions: int | None = None
    consumer_name: str | None = None
    min_records: int | None = None
    max_trigger_delay: float = 900.0
    starting_time: TimeSpec | None = None
    ending_time: TimeSpec | None = None
    time_strategy: Literal["error", "latest"] = "error"
    connect_options: tuple[tuple[str, Any], ...] = ()
    push_filters: bool = False
    retry_interval: float = 1.0
    observer: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
        opts = _lower(options)
        url = _url(opts)
        stream = _stream(opts, url)
        ending = parse_spec(
            opts.get("endingoffsets"), stream, default="latest", option="endingOffsets"
        )
        if ending == "earliest":
            raise SparkConfigurationError("endingOffsets cannot be earliest")
        if streaming and "endingoffsets" in opts:
            raise SparkConfigurationError("endingOffsets applies to batch reads only")
        consumer_name = opts.get("consumername")
        if consumer_name is not None:
            consumer_name = consumer_name.strip()
            if not streaming:
                raise SparkConfigurationError("consumerName applies to streaming reads only")
            if not consumer_name:
                raise SparkConfigurationError("consumerName must not be empty")
        min_records = _int(opts, "minOffsetsPerTrigger")
        max_records = _int(opts, "maxRecordsPerTrigger")
        if min_records is not None and not streaming:
            raise SparkConfigurationError("minOffsetsPerTrigger applies to streaming reads only")
        if min_records is not None and max_records is not None and min_records > max_records:
            raise SparkConfigurationError(
                f"minOffsetsPerTrigger ({min_records}) is above maxRecordsPerTrigger "
                f"({max_records}): no micro-batch could hold both"
            )
        if "maxtriggerdelay" in opts and min_records is None:
            raise SparkConfigurationError("maxTriggerDelay needs minOffsetsPerTrigger")
        ending_time = parse_time_spec(
            opts, stream, single="endingTimestamp", by_partition="endingOffsetsByTimestamp"
        )
        if streaming and ending_time is not None:
            raise SparkConfigurationError(
                "endingTimestamp and endingOffsetsByTimestamp apply to batch reads only"
            )
        push_filters = _bool(opts, "pushFilters")
        if streaming and push_filters:
            raise SparkConfigurationError(
                "pushFilters applies to batch reads only (pyspark pushes no filter into a "
                "streaming Python source)"
            )
        return cls(
            url=url,
            stream=stream,
            timeout=_float(opts, "timeout", 60.0),
            starting=parse_spec(
                opts.get("startingoffsets"),
                stream,
                default="latest" if streaming else "earliest",
                option="startingOffsets",
            ),
            ending=ending,
            max_records=max_records,
            max_bytes=_int(opts, "maxBytesPerTrigger"),
            min_records=min_records,
            max_trigger_delay=_duration(opts, "maxTriggerDelay", 900.0),
            starting_time=parse_time_spec(
                opts, stream, single="startingTimestamp", by_partition="startingOffsetsByTimestamp"
            ),
            ending_time=ending_time,
            time_strategy=strategy(opts),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", default=True),
            min_partitions=_int(opts, "minPartitions"),
            consumer_name=consumer_name,
            connect_options=_connect_options(opts, url),
            push_filters=push_filters,
            retry_interval=_duration(opts, "fetchOffset.retryIntervalMs", 1.0),
            observer=_observer(opts),
        )

    @property
    def client_key(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        return self.url, (("timeout", self.timeout), *self.connect_options)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    url: str
    stream: str
    timeout: float
    name: str
    max_in_flight: int
    ignore_extra_columns: bool
    write_id: str | None
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    connect_options: tuple[tuple[str, Any], ...] = ()
    observer: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SinkOptions:
        opts = _lower(options)
        url = _url(opts)
        return cls(
            url=url,
            stream=_stream(opts, url),
            timeout=_float(opts, "timeout", 60.0),
            name=opts.get("name", "").strip() or "streamwire-sink",
            max_in_flight=_int(opts, "maxInFlight") or DEFAULT_MAX_IN_FLIGHT,
            ignore_extra_columns=_bool(opts, "ignoreExtraColumns"),
            write_id=opts.get("writeid", "").strip() or None,
            chunk_rows=_int(opts, "chunkRows") or DEFAULT_CHUNK_ROWS,
            connect_options=_connect_options(opts, url),
            observer=_observer(opts),
        )
