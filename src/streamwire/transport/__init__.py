"""Byte streams and the asyncio plumbing drivers share: the only package touching sockets.

* :func:`open_tcp` / :class:`TcpStream`: TCP and TLS streams; :class:`ByteStream` is the
  interface drivers use, :class:`ScriptedStream` the in-memory one for their tests.
* :class:`TLSOptions` / :func:`create_ssl_context`: verified TLS by default.
* :class:`Deadline`: one time budget over several steps; :class:`Backoff`,
  :class:`ReconnectPolicy` and :func:`retry`: reconnecting.
* :class:`InflightTable` / :class:`CorrelationIds`: requests awaiting responses.
* :class:`SyncBridge`: a blocking façade for callers without an event loop.
* :func:`map_errors`: foreign I/O exceptions to streamwire ones.
"""

from __future__ import annotations

from streamwire.transport._errors import ErrorMap, Operation, map_errors
from streamwire.transport.backoff import Backoff, Jitter, RandomSource
from streamwire.transport.base import BytesLike, ByteStream
from streamwire.transport.deadline import Deadline, DeadlineScope
from streamwire.transport.inflight import CorrelationIds, IdsInUse, InflightTable, fresh_exception
from streamwire.transport.portal import SyncBridge
from streamwire.transport.reconnect import ReconnectPolicy, is_retriable, retry
from streamwire.transport.scripted import ScriptedStream
from streamwire.transport.tcp import (
    DEFAULT_KEEPALIVE,
    DEFAULT_READ_SIZE,
    TcpKeepalive,
    TcpStream,
    open_tcp,
)
from streamwire.transport.tls import TLSConfig, TLSOptions, create_ssl_context, is_tls_setting

__all__ = (
    "DEFAULT_READ_SIZE",
    "Backoff",
    "ByteStream",
    "BytesLike",
    "CorrelationIds",
    "Deadline",
    "DeadlineScope",
    "ErrorMap",
    "IdsInUse",
    "InflightTable",
    "Jitter",
    "Operation",
    "RandomSource",
    "ReconnectPolicy",
    "ScriptedStream",
    "SyncBridge",
    "TLSConfig",
    "TLSOptions",
    "TcpStream",
    "create_ssl_context",
    "is_tls_setting",
    "fresh_exception",
    "map_errors",
    "is_retriable",
    "open_tcp",
    "TcpKeepalive",
    "DEFAULT_KEEPALIVE",
    "retry",
)
