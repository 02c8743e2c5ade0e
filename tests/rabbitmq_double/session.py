"""One client connection of the RabbitMQ Streams double: the handshake and every command,
answered as docs/protocol/rabbitmq-streams.md §1.5 lays the frames out and as RabbitMQ 4.0
answers them (error codes checked against a real 4.0.5 broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from streamwire.codec.framing import LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import CommandKey, ResponseCode

if TYPE_CHECKING:
    from tests.rabbitmq_double.server import RabbitMQDouble

__all__ = ("Session", "Subscription")

_K = CommandKey
_R = ResponseCode
_OK: Final = ResponseCode.OK

COMMAND_VERSIONS: Final = tuple(
    f.CommandVersion(k, 1, 2 if k in (_K.PUBLISH, _K.DELIVER) else 1)
    for k in _K
    if k not in (_K.RESOLVE_OFFSET_SPEC, _K.METADATA_UPDATE, _K.PUBLISH_CONFIRM)
)
"""What the double accepts, as a 4.0 broker announces it."""


@dataclass
class Subscription:
    stream: str
    index: int
    """Index of the next chunk to deliver."""
    credit: int
    properties: dict[str, str]
    delivered: int = 0


class Session:
    """Server side of one connection; the server feeds it frames."""

    def __init__(self, server: RabbitMQDouble, number: int, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.number = number
        self.writer = writer
        self.frames = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=server.frame_max)
        self.publishers: dict[int, tuple[str, str]] = {}
        """Publisher id → (reference, stream)."""
        self.subscriptions: dict[int, Subscription] = {}
        self.heartbeat = 0
        self.deliver_version = 1
        self.opened = False
        self.closed = False
        self.silent = False
        """Write nothing at all (answers, deliveries, heartbeats)."""
        self.heartbeats_received = 0

    def __repr__(self) -> str:
        return f"Session({self.number}, publishers={self.publishers}, subs={self.subscriptions})"

    # --- writing -------------------------------------------------------------------------

    def send(self, frame: f.Frame) -> None:
        self.send_raw(f.encode_frame(frame))

    def send_raw(self, data: bytes) -> None:
        if not self.silent and not self.writer.is_closing():
            self.writer.write(data)

    def hang_up(self) -> None:
        """Drop the TCP connection without a Close."""
        self.closed = True
        self.writer.transport.abort()

    def close_with(self, code: int, reason: str) -> None:
        """The broker's Close (correlation id 1); the socket goes once the client answers."""
        self.send(f.CloseRequest(1, code, reason))

    # --- dispatch ------------------------------------------------------------------------

    def handle(self, frame: f.Frame) -> None:
        if isinstance(frame, f.Heartbeat):
            self.heartbeats_received += 1
            return
        refused = self.server.refuse.get(frame.key)
        if refused is not None and hasattr(frame, "correlation_id"):
            self.send(_error_response(frame, refused))
            return
        handler = _HANDLERS.get(type(frame))
        if handler is None:
            self.close_with(_R.UNKNOWN_FRAME, f"unknown frame {type(frame).__name__}")
            return
        handler(self, frame)

    # --- handshake -----------------------------------------------------------------------

    def _peer_properties(self, frame: f.PeerPropertiesRequest) -> None:
        props = {"product": "RabbitMQ", "version": self.server.version}
        self.send(f.PeerPropertiesResponse(frame.correlation_id, _OK, props))

    def _sasl_handshake(self, frame: f.SaslHandshakeRequest) -> None:
        self.send(f.SaslHandshakeResponse(frame.correlation_id, _OK, ("PLAIN", "ANONYMOUS")))

    def _sasl_authenticate(self, frame: f.SaslAuthenticateRequest) -> None:
        srv = self.server
        if frame.mechanism == "PLAIN":
            expected = b"\0%s\0%s" % (srv.username.encode(), srv.password.encode())
            ok = frame.data == expected
        elif frame.mechanism == "ANONYMOUS":
            ok = srv.anonymous
        else:
            self.send(
                f.SaslAuthenticateResponse(frame.correlation_id, _R.SASL_MECHANISM_NOT_SUPPORTED)
            )
            return
        if not ok:
            self.send(f.SaslAuthenticateResponse(frame.correlation_id, _R.AUTHENTICATION_FAILURE))
            self.writer.close()
            self.closed = True
            return
        self.send(f.SaslAuthenticateResponse(frame.correlation_id, _OK))
        if not self.opened:  # re-authenticating an open connection (3.13+): no Tune again
            self.send(f.Tune(srv.frame_max, srv.heartbeat))

    def _tune(self, frame: f.TuneResponse) -> None:
        self.heartbeat = frame.heartbeat

    def _open(self, frame: f.OpenRequest) -> None:
        srv = self.server
        if frame.vhost != srv.vhost:
            self.send(f.OpenResponse(frame.correlation_id, _R.VIRTUAL_HOST_ACCESS_FAILURE))
            self.writer.close()
            self.closed = True
            return
        props = {"advertised_host": srv.host, "advertised_port": str(srv.port)}
        self.send(f.OpenResponse(frame.correlation_id, _OK, props))
        self.opened = True

    def _command_versions(self, frame: f.ExchangeCommandVersionsRequest) -> None:
        for v in frame.versions:
            if v.key == _K.DELIVER and v.max_version >= 2:
                self.deliver_version = 2
        self.send(f.ExchangeCommandVersionsResponse(frame.correlation_id, _OK, COMMAND_VERSIONS))

    def _close(self, frame: f.CloseRequest) -> None:
        self.send(f.SimpleResponse(frame.correlation_id, _OK, _K.CLOSE))
        self.writer.close()
        self.closed = True

    def _close_answered(self, frame: f.SimpleResponse) -> None:
        if frame.command == _K.CLOSE:  # the answer to our Close
            self.writer.close()
            self.closed = True

    # --- streams -------------------------------------------------------------------------

    def _simple(self, frame: f.Frame, code: int) -> None:
        self.send(f.SimpleResponse(getattr(frame, "correlation_id"), code, frame.key))  # noqa: B009

    def _create(self, frame: f.CreateRequest) -> None:
        self._simple(frame, self.server.state.create(frame.stream, frame.arguments))

    def _delete(self, frame: f.DeleteRequest) -> None:
        code = self.server.state.delete(frame.name)
        self._simple(frame, code)
        if code == _OK:
            self.server.stream_gone(frame.name)

    def _create_super(self, frame: f.CreateSuperStreamRequest) -> None:
        code = self.server.state.create_super_stream(
            frame.name, frame.partitions, frame.binding_keys, frame.arguments
        )
        self._simple(frame, code)

    def _delete_super(self, frame: f.DeleteSuperStreamRequest) -> None:
        partitions = self.server.state.partitions(frame.name)[1]
        code = self.server.state.delete_super_stream(frame.name)
        self._simple(frame, code)
        for partition in partitions:
            self.server.stream_gone(partition)

    def _metadata(self, frame: f.MetadataRequest) -> None:
        streams = self.server.state.streams
        entries = tuple(
            f.StreamMetadata(s, _OK, 0, ())
            if s in streams
            else f.StreamMetadata(s, _R.STREAM_DOES_NOT_EXIST, f.NO_LEADER, ())
            for s in frame.streams
        )
        brokers = (f.Broker(0, self.server.host, self.server.port),)
        self.send(f.MetadataResponse(frame.correlation_id, brokers, entries))

    def _stats(self, frame: f.StreamStatsRequest) -> None:
        log = self.server.state.streams.get(frame.name)
        if log is None:
            self.send(f.StreamStatsResponse(frame.correlation_id, _R.STREAM_DOES_NOT_EXIST))
            return
        first = log.chunks[0].chunk_id if log.chunks else -1
        last = log.chunks[-1].chunk_id if log.chunks else -1
        stats = {"first_chunk_id": first, "committed_chunk_id": last, "last_chunk_id": last}
        self.send(f.StreamStatsResponse(frame.correlation_id, _OK, stats))

    def _partitions(self, frame: f.PartitionsRequest) -> None:
        code, streams = self.server.state.partitions(frame.name)
        self.send(f.PartitionsResponse(frame.correlation_id, code, streams))

    def _route(self, frame: f.RouteRequest) -> None:
        code, streams = self.server.state.route(frame.routing_key, frame.super_stream)
        self.send(f.RouteResponse(frame.correlation_id, code, streams))

    # --- publishing ----------------------------------------------------------------------

    def _declare_publisher(self, frame: f.DeclarePublisherRequest) -> None:
        if frame.stream not in self.server.state.streams:
            self._simple(frame, _R.STREAM_DOES_NOT_EXIST)
        elif frame.publisher_id in self.publishers:
            self._simple(frame, _R.PRECONDITION_FAILED)
        else:
            self.publishers[frame.publisher_id] = (frame.reference, frame.stream)
            self._simple(frame, _OK)

    def _delete_publisher(self, frame: f.DeletePublisherRequest) -> None:
        gone = self.publishers.pop(frame.publisher_id, None)
        self._simple(frame, _OK if gone else _R.PUBLISHER_DOES_NOT_EXIST)

    def _sequence(self, frame: f.QueryPublisherSequenceRequest) -> None:
        state = self.server.state
        if frame.stream not in state.streams:
            self.send(
                f.QueryPublisherSequenceResponse(frame.correlation_id, _R.STREAM_DOES_NOT_EXIST)
            )
            return
        seq = state.sequences.get((frame.reference, frame.stream), 0)
        self.send(f.QueryPublisherSequenceResponse(frame.correlation_id, _OK, seq))

    def _publish(self, frame: f.Publish) -> None:
        self.server.published(self, frame)

    # --- consuming -----------------------------------------------------------------------

    def _subscribe(self, frame: f.SubscribeRequest) -> None:
        log = self.server.state.streams.get(frame.stream)
        if log is None:
            self._simple(frame, _R.STREAM_DOES_NOT_EXIST)
            return
        if frame.subscription_id in self.subscriptions:
            self._simple(frame, _R.SUBSCRIPTION_ID_ALREADY_EXISTS)
            return
        start = log.start_index(frame.offset_type, frame.offset)
        sub = Subscription(frame.stream, start, frame.credit, dict(frame.properties))
        self.subscriptions[frame.subscription_id] = sub
        self._simple(frame, _OK)
        self.pump()

    def _unsubscribe(self, frame: f.UnsubscribeRequest) -> None:
        gone = self.subscriptions.pop(frame.subscription_id, None)
        self._simple(frame, _OK if gone else _R.SUBSCRIPTION_ID_DOES_NOT_EXIST)

    def _credit(self, frame: f.Credit) -> None:
        sub = self.subscriptions.get(frame.subscription_id)
        if sub is None:
            self.send(f.CreditResponse(_R.SUBSCRIPTION_ID_DOES_NOT_EXIST, frame.subscription_id))
            return
        sub.credit += frame.credit
        self.pump()

    def _store_offset(self, frame: f.StoreOffset) -> None:
        if frame.stream in self.server.state.streams:
            self.server.state.offsets[(frame.reference, frame.stream)] = frame.offset

    def _query_offset(self, frame: f.QueryOffsetRequest) -> None:
        state = self.server.state
        stored = state.offsets.get((frame.reference, frame.stream))
        if frame.stream not in state.streams:
            code = _R.STREAM_DOES_NOT_EXIST
        else:
            code = _OK if stored is not None else _R.NO_OFFSET
        self.send(f.QueryOffsetResponse(frame.correlation_id, code, stored or 0))

    def pump(self) -> None:
        """Deliver every chunk the subscriptions have credit for."""
        streams = self.server.state.streams
        for sid, sub in self.subscriptions.items():
            log = streams.get(sub.stream)
            if log is None:
                continue
            while sub.credit > 0 and sub.index < len(log.chunks):
                chunk = log.chunks[sub.index]
                committed = log.chunks[-1].chunk_id if self.deliver_version == 2 else None
                self.send(f.Deliver(sid, chunk.data, committed))
                sub.index += 1
                sub.credit -= 1
                sub.delivered += 1


def _error_response(frame: f.Frame, code: int) -> f.Frame:
    """The response to ``frame`` carrying only ``code``."""
    corr: int = getattr(frame, "correlation_id")  # noqa: B009
    response = _RESPONSES.get(type(frame))
    if response is None:
        return f.SimpleResponse(corr, code, frame.key)
    return response(corr, code)


_RESPONSES: Final[dict[type[f.Frame], type[f.Response]]] = {
    f.QueryOffsetRequest: f.QueryOffsetResponse,
    f.QueryPublisherSequenceRequest: f.QueryPublisherSequenceResponse,
    f.PartitionsRequest: f.PartitionsResponse,
    f.RouteRequest: f.RouteResponse,
    f.StreamStatsRequest: f.StreamStatsResponse,
    f.PeerPropertiesRequest: f.PeerPropertiesResponse,
    f.SaslHandshakeRequest: f.SaslHandshakeResponse,
    f.SaslAuthenticateRequest: f.SaslAuthenticateResponse,
    f.OpenRequest: f.OpenResponse,
}

_S = Session
_HANDLERS: Final[dict[type[f.Frame], Callable[[Session, Any], None]]] = {
    f.PeerPropertiesRequest: _S._peer_properties,
    f.SaslHandshakeRequest: _S._sasl_handshake,
    f.SaslAuthenticateRequest: _S._sasl_authenticate,
    f.TuneResponse: _S._tune,
    f.OpenRequest: _S._open,
    f.ExchangeCommandVersionsRequest: _S._command_versions,
    f.CloseRequest: _S._close,
    f.SimpleResponse: _S._close_answered,
    f.CreateRequest: _S._create,
    f.DeleteRequest: _S._delete,
    f.CreateSuperStreamRequest: _S._create_super,
    f.DeleteSuperStreamRequest: _S._delete_super,
    f.MetadataRequest: _S._metadata,
    f.StreamStatsRequest: _S._stats,
    f.PartitionsRequest: _S._partitions,
    f.RouteRequest: _S._route,
    f.DeclarePublisherRequest: _S._declare_publisher,
    f.DeletePublisherRequest: _S._delete_publisher,
    f.QueryPublisherSequenceRequest: _S._sequence,
    f.Publish: _S._publish,
    f.SubscribeRequest: _S._subscribe,
    f.UnsubscribeRequest: _S._unsubscribe,
    f.Credit: _S._credit,
    f.StoreOffset: _S._store_offset,
    f.QueryOffsetRequest: _S._query_offset,
}
