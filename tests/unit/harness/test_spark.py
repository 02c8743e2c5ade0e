"""The Spark targets' parts that need no JVM: finding pyspark in a venv, reading the master's
status page, and saying why a target is unavailable. The cluster and the Connect server
themselves run in tests/spark (test_cluster.py, test_connect.py)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from integration.harness import config, lanes, spark


def _context(tmp_path: Path, venv: Path) -> lanes.Context:
    paths = config.Paths(repo=tmp_path, cache=tmp_path / "cache", venv=venv, state=tmp_path / "s")
    return lanes.Context(paths, {"STREAMWIRE_READY_TIMEOUT": "5"})


def test_a_venv_without_python_or_pyspark_makes_the_target_unavailable(tmp_path: Path) -> None:
    ctx = _context(tmp_path, tmp_path / "no-venv")
    assert spark.up_spark(ctx) is False
    assert "not found: run make venv" in (ctx.state / "spark.unavailable").read_text()
    bare = tmp_path / "bare"
    (bare / "bin").mkdir(parents=True)
    (bare / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    (bare / "bin" / "python").chmod(0o755)
    ctx = _context(tmp_path, bare)
    assert spark.up_spark_connect(ctx) is False
    why = (ctx.state / "spark-connect.unavailable").read_text()
    assert "pyspark is not installed in the venv" in why


def test_pyspark_of_this_venv_is_a_spark_home() -> None:
    pytest.importorskip("pyspark")
    ctx = _context(Path("/nonexistent"), Path(sys.prefix))
    home, version = spark.spark_home(ctx)
    assert home is not None, version
    assert (home / "bin" / "spark-class").is_file()
    import pyspark

    assert version == pyspark.__version__


@pytest.fixture
def status_page() -> Iterator[tuple[int, list[object]]]:
    """A stand-in master status page; the test sets what it answers (a JSON value, or
    ``b"..."`` raw bytes)."""
    answers: list[object] = [{"aliveworkers": 0}]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers[0]
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(200 if self.path == "/json/" else 404)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], answers
    finally:
        server.shutdown()
        server.server_close()


def test_alive_workers_are_read_from_the_masters_status_page(
    status_page: tuple[int, list[object]],
) -> None:
    port, answers = status_page
    assert spark._alive_workers(port) == 0
    answers[0] = {"aliveworkers": 2, "workers": [{}, {}]}
    assert spark._alive_workers(port) == 2
    answers[0] = b"<html>not json"
    assert spark._alive_workers(port) == -1
    answers[0] = {"status": "ALIVE"}  # no count: none alive
    assert spark._alive_workers(port) == 0


def test_no_status_page_is_minus_one() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert spark._alive_workers(port) == -1
