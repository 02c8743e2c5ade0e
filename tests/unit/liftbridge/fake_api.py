"""In-process Liftbridge API servers for unit tests: a grpc.aio server answering the methods a
test scripts (unary or bidirectional streaming), one-node metadata, and a port nobody
listens on (for a NATS the client must do without)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

import grpc
import grpc.aio

from streamwire.liftbridge._grpc import METHODS
from streamwire.liftbridge.protocol._pb import api_pb2 as pb

__all__ = ("dead_port", "one_node_metadata", "start_api")


async def start_api(
    server: grpc.aio.Server,
    unary: Mapping[str, Callable[..., Any]],
    streaming: Mapping[str, Callable[..., Any]] | None = None,
) -> int:
    """Register ``unary`` and ``streaming`` (bidirectional) handlers of ``proto.API`` by
    method name on ``server``, start it on a free loopback port and return the port."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for name, fn in unary.items():
        m = METHODS[name]
        handlers[name] = grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=m.request.FromString,
            response_serializer=m.response.SerializeToString,
        )
    for name, fn in (streaming or {}).items():
        m = METHODS[name]
        handlers[name] = grpc.stream_stream_rpc_method_handler(
            fn,
            request_deserializer=m.request.FromString,
            response_serializer=m.response.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("proto.API", handlers),))
    port = int(server.add_insecure_port("127.0.0.1:0"))
    await server.start()
    return port


def one_node_metadata(port: int, names: list[str]) -> Any:
    """Metadata of one server (``b1`` on ``port``) leading partition 0 of each stream."""
    response = pb.FetchMetadataResponse(brokers=[pb.Broker(id="b1", host="127.0.0.1", port=port)])
    for name in names:
        meta = response.streamMetadata.add(name=name, subject=name)
        meta.partitions[0].CopyFrom(pb.PartitionMetadata(id=0, leader="b1"))
    return response


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
