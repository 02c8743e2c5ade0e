"""The per-process runtime the executors use: one loop, cached clients, reconnection."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

import streamwire
from streamwire.spark._runtime import ClientKey, WorkerRuntime, close_runtime, runtime
from streamwire.spark.errors import BrokerUnavailableError
from tests.spark._support import Target

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_one_runtime_per_process_and_a_fresh_one_after_close() -> None:
    rt = runtime()
    try:
        assert runtime() is rt
        assert rt.pid == os.getpid()
    finally:
        close_runtime()
    assert rt.bridge.closed
    assert runtime() is not rt
    close_runtime()


def test_clients_are_cached_and_replaced_when_stale(rabbitmq: Target) -> None:
    rt = WorkerRuntime()
    key = (rabbitmq.url, (("timeout", 10.0),))
    stream = rabbitmq.new_stream("runtime")
    try:
        client = rt.client(key)
        assert rt.client(key) is client
        rt.call(client.close)  # the connection goes away under the cache

        def open_producer(c: streamwire.Client) -> streamwire.Client:
            async def run() -> None:
                async with c.producer(stream) as producer:
                    await producer.send_and_wait(b"x")

            rt.call(run, timeout=30.0)
            return c

        used = rt.with_client(key, open_producer)
        assert used is not client
        assert rt.client(key) is used
    finally:
        rabbitmq.delete_stream(stream)
        rt.close()


def _refused_url() -> str:
    """A URL of a port nothing listens on (connecting is refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"rabbitmq-stream://guest:guest@127.0.0.1:{port}/"


class _Scripted:
    """A runtime's client cache stood in for: each ``use`` call raises the next error of
    ``script`` (or returns ``"ok"`` when it runs out); what was dropped is kept."""

    def __init__(self, rt: WorkerRuntime, monkeypatch: pytest.MonkeyPatch, *script: Exception):
        self.script, self.calls, self.dropped = list(script), 0, 0
        monkeypatch.setattr(rt, "client", lambda key: object())
        monkeypatch.setattr(rt, "discard", self._discard)

    def _discard(self, key: ClientKey, client: Any, **_: Any) -> None:
        self.dropped += 1

    def use(self, client: Any) -> str:
        self.calls += 1
        if self.script:
            raise self.script.pop(0)
        return "ok"


def test_a_patient_call_waits_for_a_broker_that_fails_then_forgets_its_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused, timed out, then "no such stream" (a broker started again that has not
    replayed its metadata yet): each waited out, the client dropped each time."""
    rt = WorkerRuntime()
    try:
        fake = _Scripted(
            rt,
            monkeypatch,
            streamwire.ConnectError("refused"),
            streamwire.TimeoutError("silent"),
            streamwire.StreamNotFoundError("not yet"),
        )
        key: ClientKey = ("rabbitmq-stream://h/", ())
        assert rt.with_client(key, fake.use, patience=30.0, interval=0.01) == "ok"
        assert (fake.calls, fake.dropped) == (4, 3)
    finally:
        rt.close()


def test_an_answer_the_broker_marks_retriable_is_waited_for_and_another_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Liftbridge's "not the partition leader" (``FailedPrecondition``, retriable) while a
    restarted server elects one, seen in a rehearsal; "permission denied" is an answer."""
    from streamwire.liftbridge.protocol.errors import FailedPrecondition, PermissionDenied

    rt = WorkerRuntime()
    try:
        fake = _Scripted(rt, monkeypatch, FailedPrecondition("not the leader"))
        assert rt.with_client(("liftbridge://h", ()), fake.use, patience=30.0) == "ok"
        assert fake.calls == 2
        fake = _Scripted(rt, monkeypatch, PermissionDenied("no"))
        with pytest.raises(PermissionDenied):
            rt.with_client(("liftbridge://h", ()), fake.use, patience=30.0)
        assert fake.calls == 1
    finally:
        rt.close()


def test_a_stream_not_found_at_once_is_the_answer_not_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rt = WorkerRuntime()
    try:
        fake = _Scripted(rt, monkeypatch, streamwire.StreamNotFoundError("gone"))
        with pytest.raises(streamwire.StreamNotFoundError, match="gone"):
            rt.with_client(("rabbitmq-stream://h/", ()), fake.use, patience=30.0)
        assert fake.calls == 1
    finally:
        rt.close()


def test_patience_runs_out_with_a_streamwire_error_that_names_the_last_failure() -> None:
    """A broker that refuses every connection (nothing listens on its port): tried again
    until the patience is spent, then ``BrokerUnavailableError`` (a transport error), caused
    by the last ``ConnectError``. Without patience the ``ConnectError`` comes at once."""
    rt = WorkerRuntime()
    key: ClientKey = (_refused_url(), (("timeout", 5.0),))

    def use(client: streamwire.Client) -> None:
        raise AssertionError("no client can connect")

    try:
        with pytest.raises(BrokerUnavailableError, match="did not answer") as caught:
            rt.with_client(key, use, patience=0.3, interval=0.05)
        assert isinstance(caught.value, streamwire.TransportError)
        assert isinstance(caught.value.__cause__, streamwire.ConnectError)
        assert "ConnectError" in str(caught.value)
        assert "guest:guest" not in str(caught.value)  # the URL without its password
        with pytest.raises(streamwire.ConnectError):
            rt.with_client(key, use)
    finally:
        rt.close()
