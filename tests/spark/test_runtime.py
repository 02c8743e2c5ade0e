"""The per-process runtime the executors use: one loop, cached clients, reconnection."""

from __future__ import annotations

import os

import pytest

import streamwire
from streamwire.spark._runtime import WorkerRuntime, close_runtime, runtime
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
