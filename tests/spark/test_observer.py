"""The ``observer`` option (``streamwire.spark._observe``): a ``module:function`` hook called
once in each Python process a source or sink runs in, installing the observer it returns;
the streaming source's driver reporting each planned batch's lag per partition to it
(``LagObserver``), and, through Spark, the executors' consumers and producers reporting to
the observer their own worker installed. The hook (``tests/spark/_observer_hook.py``)
writes every event with its process id to a file."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import streamwire
from streamwire.metrics import Destination, current_observer, set_observer
from streamwire.spark import SparkConfigurationError, foreach_batch_sink
from streamwire.spark._observe import _installed, install, report_lag
from streamwire.spark._options import SinkOptions, SourceOptions
from streamwire.spark.datasource import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadMaxRows,
    StreamwireDataSource,
)
from tests.spark import _observer_hook as hook
from tests.spark._support import Target, publish

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HOOK = "tests.spark._observer_hook:install"
URL = "rabbitmq-stream://guest:guest@127.0.0.1:5552/"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """No observer, no install remembered and no event recorded, before and after."""
    previous = set_observer(None)
    _installed.clear()
    hook.EVENTS.unlink(missing_ok=True)
    hook.installs = 0
    try:
        yield
    finally:
        set_observer(previous)
        _installed.clear()
        hook.EVENTS.unlink(missing_ok=True)


# --- the option -----------------------------------------------------------------------------


def test_the_option_names_a_function_as_module_colon_function() -> None:
    base = {"url": URL, "stream": "s"}
    assert SourceOptions.parse({**base, "observer": f" {HOOK} "}, streaming=True).observer == HOOK
    assert SinkOptions.parse({**base, "observer": HOOK}).observer == HOOK
    assert SourceOptions.parse(base, streaming=False).observer is None
    for bad in ("tests.spark._observer_hook", "install", "a b:c", ":f", "m:"):
        with pytest.raises(SparkConfigurationError, match=r"package\.module:function"):
            SourceOptions.parse({**base, "observer": bad}, streaming=False)
    with pytest.raises(SparkConfigurationError, match=r"package\.module:function"):
        foreach_batch_sink(URL, "s", observer="nothing")
    assert foreach_batch_sink(URL, "s", observer=HOOK)._spec(None).observer == HOOK  # type: ignore[arg-type]


def test_install_calls_the_hook_once_per_process_and_installs_what_it_returns() -> None:
    install(HOOK)
    install(HOOK)
    assert hook.installs == 1
    assert isinstance(current_observer(), hook.Recorder)
    install(None)  # no hook: nothing happens
    assert hook.installs == 1


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("tests.spark._no_such_module:install", "cannot be imported in this Python process"),
        ("tests.spark._observer_hook:no_such_function", "cannot be imported"),
        ("tests.spark._observer_hook:not_callable", "is not callable"),
    ],
)
def test_a_hook_that_cannot_be_called_is_a_configuration_error(spec: str, said: str) -> None:
    with pytest.raises(SparkConfigurationError, match=said):
        install(spec)
    assert current_observer() is None


def test_report_lag_tells_a_lag_observer_offsets_and_estimated_bytes_per_partition() -> None:
    set_observer(hook.Recorder())
    report_lag("iggy", "s/t", "127.0.0.1:8090", {0: 10, 1: 0, 2: 4}, {0: 100.0, 1: 50.0})
    lags = [(e["partition"], e["messages"], e["nbytes"]) for e in hook.events()]
    assert lags == [(0, 10, 1000), (1, 0, 0), (2, 4, 300)]  # partition 2: the mean, 75 B
    hook.EVENTS.unlink()
    report_lag("iggy", "s/t", "127.0.0.1:8090", {0: 3}, None)  # no sample: no estimate
    assert [(e["messages"], e["nbytes"]) for e in hook.events()] == [(3, None)]


def test_report_lag_skips_an_observer_without_partition_lag() -> None:
    class Plain:
        def send(self, where: Destination, count: int, nbytes: int) -> object:
            return None

        def settled(self, *args: Any) -> None: ...

        def received(self, *args: Any) -> None:
            raise AssertionError("not a consumer's delivery")

        def connection(self, *args: Any) -> None: ...

    set_observer(Plain())
    report_lag("iggy", "s/t", "127.0.0.1:8090", {0: 10}, None)  # nothing to call, no error


# --- with a broker ---------------------------------------------------------------------------


@pytest.mark.skipif(not ADMISSION_CONTROL, reason="a read limit needs pyspark >= 4.2")
def test_the_streaming_source_reports_its_lag_to_the_observer_its_hook_installed(
    any_broker: Target,
) -> None:
    """The reader made in this process (as Spark's source runner makes it): the hook runs
    once, and each planned batch's lag per partition reaches the observer, 6 offsets of 7
    bytes behind after a batch of 4 of 10 messages, none after the rest."""
    stream = any_broker.new_stream("observed")
    try:
        # 10 messages of 7 bytes each (a value of 5, a key of 2)
        publish(
            any_broker, stream, [streamwire.Message(b"m%04d" % i, key=b"k0") for i in range(10)]
        )
        options = {
            "url": any_broker.url,
            "stream": stream,
            "startingOffsets": "earliest",
            "observer": HOOK,
        }
        reader = StreamwireDataSource(options).streamReader(None)
        try:
            end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(4))
            reader.reportLatestOffset()
            lags = [e for e in hook.events() if e["event"] == "lag"]
            assert {e["stream"] for e in lags} == {stream}
            assert {e["system"] for e in lags} == {streamwire.parse_url(any_broker.url).protocol}
            assert sum(e["messages"] for e in lags) == 6, lags
            assert sum(e["nbytes"] for e in lags) == 6 * 7, lags
            hook.EVENTS.unlink()
            reader.latestOffset(end, ReadAllAvailable())
            reader.reportLatestOffset()
            lags = [e for e in hook.events() if e["event"] == "lag"]
            assert lags, "no lag reported after the last batch"
            assert all(e["messages"] == 0 and e["nbytes"] == 0 for e in lags), lags
            assert hook.installs == 1
        finally:
            reader.stop()
    finally:
        any_broker.delete_stream(stream)


def test_the_executors_report_to_the_observer_their_hook_installed(
    spark: Any, rabbitmq: Target
) -> None:
    """Through Spark: a batch write and a batch read with the option; the executors' Python
    workers (other processes than this one) install the hook's observer and report the
    producer's sends and the consumer's deliveries to it."""
    stream = rabbitmq.new_stream("observed-spark")
    try:
        rows = [(f"v{i}".encode(),) for i in range(50)]
        options = {"url": rabbitmq.url, "stream": stream, "observer": HOOK}
        df = spark.createDataFrame(rows, "value binary")
        df.write.format("streamwire").options(**options).mode("append").save()
        read = spark.read.format("streamwire").options(**options).load()
        assert sorted(r.value for r in read.select("value").collect()) == sorted(v for (v,) in rows)
        recorded = hook.events()
        workers = {e["pid"] for e in recorded} - {os.getpid()}
        assert workers, recorded[:5]
        settled = sum(e["confirmed"] for e in recorded if e["event"] == "settled")
        assert settled == 50, recorded
        # the read task's worker was handed every row; the process planning the read reads
        # the stream's first chunk too (RabbitMQ says no first offset otherwise), and so
        # reports a delivery of its own
        received: Counter[int] = Counter()
        for e in recorded:
            if e["event"] == "received":
                received[e["pid"]] += e["count"]
        assert 50 in received.values(), received
        assert os.getpid() not in received
        assert {e["stream"] for e in recorded if e["event"] in ("settled", "received")} == {stream}
    finally:
        rabbitmq.delete_stream(stream)
