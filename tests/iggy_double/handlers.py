"""Command handlers of the double: decoded request payload in, reply payload bytes out.

A handler raises :class:`~tests.iggy_double.state.IggyError` for a business error; the server
turns it into a result-section rejection (metadata and offset writes) or a reply status
(everything else), as a 0.9 server does (docs/protocol/iggy.md §2.5, §2.7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamwire.iggy.protocol import diagnostics as dg
from streamwire.iggy.protocol import groups as gr
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.constants import PROTOCOL_VERSION, Command
from tests.iggy_double.messages import message_handlers
from tests.iggy_double.state import (
    DEFAULT_TOPIC_OPTIONS,
    Group,
    IggyError,
    Partition,
    SessionInfo,
    State,
    Stream,
    Topic,
)
from tests.iggy_double.users import user_handlers

__all__ = ("Handlers",)


def _stream_record(s: Stream) -> st.StreamRecord:
    return st.StreamRecord(
        id=s.id,
        created_at=s.created_at,
        topics_count=len(s.topics),
        size_bytes=sum(p.size_bytes for t in s.topics for p in t.partitions),
        messages_count=sum(p.messages_count for t in s.topics for p in t.partitions),
        name=s.name,
    )


def _u64(topic: Topic, key: str) -> int:
    value = topic.derived()[key].value
    return value if isinstance(value, int) else 0


def _topic_record(t: Topic) -> st.TopicRecord:
    compression = t.derived()["compression_algorithm"].value
    return st.TopicRecord(
        id=t.id,
        created_at=t.created_at,
        partitions_count=len(t.partitions),
        message_expiry=_u64(t, "message_expiry"),
        compression_algorithm=2 if compression == "gzip" else 1,
        max_topic_size=_u64(t, "max_topic_size"),
        size_bytes=sum(p.size_bytes for p in t.partitions),
        messages_count=sum(p.messages_count for p in t.partitions),
        name=t.name,
        options=dict(t.options),
        derived_options={k: v for k, v in t.derived().items() if k not in t.options},
    )


def _partition_record(p: Partition) -> st.PartitionRecord:
    return st.PartitionRecord(
        id=p.id,
        created_at=p.created_at,
        segments_count=1,
        current_offset=p.current_offset,
        size_bytes=p.size_bytes,
        messages_count=p.messages_count,
    )


def _topic_details(t: Topic) -> st.TopicDetails:
    return st.TopicDetails(
        topic=_topic_record(t), partitions=tuple(_partition_record(p) for p in t.partitions)
    )


class Handlers:
    """One method per command; ``table`` maps command codes to them."""

    def __init__(self, state: State, sessions: Callable[[], list[SessionInfo]]) -> None:
        self.state = state
        self.sessions = sessions
        self.node: tuple[str, int] = ("127.0.0.1", 8090)
        c = Command
        self.table: dict[int, Callable[[SessionInfo, Any], bytes]] = {
            c.PING: lambda s, p: b"",
            c.GET_STATS: self.get_stats,
            c.GET_CLUSTER_METADATA: self.get_cluster_metadata,
            c.DESCRIBE_OPTIONS: self.describe_options,
            c.GET_ME: lambda s, p: self._client_details(s).encode(),
            c.GET_CLIENT: self.get_client,
            c.GET_CLIENTS: self.get_clients,
            c.GET_STREAM: self.get_stream,
            c.GET_STREAMS: self.get_streams,
            c.CREATE_STREAM: self.create_stream,
            c.DELETE_STREAM: self.delete_stream,
            c.UPDATE_STREAM: self.update_stream,
            c.PURGE_STREAM: self.purge_stream,
            c.GET_TOPIC: self.get_topic,
            c.GET_TOPICS: self.get_topics,
            c.CREATE_TOPIC: self.create_topic,
            c.DELETE_TOPIC: self.delete_topic,
            c.UPDATE_TOPIC: self.update_topic,
            c.PURGE_TOPIC: self.purge_topic,
            c.CREATE_PARTITIONS: self.create_partitions,
            c.DELETE_PARTITIONS: self.delete_partitions,
            c.DELETE_SEGMENTS: self.delete_segments,
            c.GET_CONSUMER_GROUP: self.get_group,
            c.GET_CONSUMER_GROUPS: self.get_groups,
            c.CREATE_CONSUMER_GROUP: self.create_group,
            c.DELETE_CONSUMER_GROUP: self.delete_group,
            c.JOIN_CONSUMER_GROUP: self.join_group,
            c.LEAVE_CONSUMER_GROUP: self.leave_group,
            c.SYNC_CONSUMER_GROUP: self.sync_group,
        }
        self.table.update(user_handlers(state))
        self.table.update(message_handlers(state))

    # --- system --------------------------------------------------------------------------

    def get_stats(self, s: SessionInfo, p: sy.GetStats) -> bytes:
        topics = [t for st_ in self.state.streams for t in st_.topics]
        partitions = [p_ for t in topics for p_ in t.partitions]
        return sy.Stats(
            process_id=1, cpu_usage=0.5, total_cpu_usage=1.5, memory_usage=1 << 20,
            total_memory=1 << 30, available_memory=1 << 29, run_time=1_000_000,
            start_time=1, read_bytes=0, written_bytes=sum(x.size_bytes for x in partitions),
            messages_size_bytes=0, streams_count=len(self.state.streams),
            topics_count=len(topics), partitions_count=len(partitions),
            segments_count=len(partitions),
            messages_count=sum(x.messages_count for x in partitions),
            clients_count=len(self.sessions()),
            consumer_groups_count=sum(len(t.groups) for t in topics),
            hostname="double", os_name="Linux", os_version="6", kernel_version="6.1",
            iggy_server_version="0.9.0", iggy_server_semver=PROTOCOL_VERSION,
        ).encode()  # fmt: skip

    def get_cluster_metadata(self, s: SessionInfo, p: sy.GetClusterMetadata) -> bytes:
        # One healthy leader (role 0, status 0): the SDKs then use the plain poll path.
        host, port = self.node
        node = sy.ClusterNode(
            name="double-1", ip=host, tcp_port=port, quic_port=0, http_port=0,
            websocket_port=0, role=0, status=0,
        )  # fmt: skip
        return sy.ClusterMetadata(name="iggy-double", nodes=(node,)).encode()

    def describe_options(self, s: SessionInfo, p: dg.DescribeOptions) -> bytes:
        specs: tuple[dg.OptionSpec, ...] = ()
        if p.scope == 1:
            specs = tuple(
                dg.OptionSpec(key=k, kind=v.kind, default=str(v.value), description=k)
                for k, v in DEFAULT_TOPIC_OPTIONS.items()
            )
        return dg.OptionSpecs(options=specs).encode()

    def _client_details(self, s: SessionInfo) -> sy.ClientDetails:
        memberships = tuple(
            sy.GroupMembership(stream_id=stream.id, topic_id=topic.id, group_id=group.id)
            for stream in self.state.streams
            for topic in stream.topics
            for group in topic.groups
            if s.number in group.members
        )
        info = sy.ClientInfo(
            client_id=s.number,
            user_id=s.user.id if s.user else 0,
            transport=1,
            address=s.address,
            consumer_groups_count=len(memberships),
        )
        return sy.ClientDetails(client=info, consumer_groups=memberships)

    def get_client(self, s: SessionInfo, p: sy.GetClient) -> bytes:
        for other in self.sessions():
            if other.number == p.client_id:
                return self._client_details(other).encode()
        return b""

    def get_clients(self, s: SessionInfo, p: sy.GetClients) -> bytes:
        infos = tuple(self._client_details(o).client for o in self.sessions())
        return sy.ClientsList(clients=infos).encode()

    # --- streams and topics ----------------------------------------------------------------

    def get_stream(self, s: SessionInfo, p: st.GetStream) -> bytes:
        try:
            stream = self.state.stream(p.stream)
        except IggyError:
            return b""
        topics = tuple(_topic_record(t) for t in stream.topics)
        return st.StreamDetails(stream=_stream_record(stream), topics=topics).encode()

    def get_streams(self, s: SessionInfo, p: st.GetStreams) -> bytes:
        return st.StreamsList(streams=tuple(map(_stream_record, self.state.streams))).encode()

    def create_stream(self, s: SessionInfo, p: st.CreateStream) -> bytes:
        if p.options:
            raise IggyError(4041, next(iter(p.options)))
        return _stream_record(self.state.create_stream(p.name)).encode()

    def delete_stream(self, s: SessionInfo, p: st.DeleteStream) -> bytes:
        self.state.streams.remove(self.state.stream(p.stream))
        return b""

    def update_stream(self, s: SessionInfo, p: st.UpdateStream) -> bytes:
        stream = self.state.stream(p.stream)
        if any(o.name == p.name and o is not stream for o in self.state.streams):
            raise IggyError(1012, p.name)
        stream.name = p.name
        return b""

    def purge_stream(self, s: SessionInfo, p: st.PurgeStream) -> bytes:
        for topic in self.state.stream(p.stream).topics:
            _purge(topic)
        return b""

    def get_topic(self, s: SessionInfo, p: st.GetTopic) -> bytes:
        try:
            _, topic = self.state.topic(p.stream, p.topic)
        except IggyError:
            return b""
        return _topic_details(topic).encode()

    def get_topics(self, s: SessionInfo, p: st.GetTopics) -> bytes:
        stream = self.state.stream(p.stream)
        return st.TopicsList(topics=tuple(_topic_record(t) for t in stream.topics)).encode()

    def create_topic(self, s: SessionInfo, p: st.CreateTopic) -> bytes:
        topic = self.state.create_topic(p.stream, p.name, p.partitions_count, p.options)
        return _topic_details(topic).encode()

    def delete_topic(self, s: SessionInfo, p: st.DeleteTopic) -> bytes:
        stream, topic = self.state.topic(p.stream, p.topic)
        stream.topics.remove(topic)
        return b""

    def update_topic(self, s: SessionInfo, p: st.UpdateTopic) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        updatable = {"compression_algorithm", "message_expiry", "max_topic_size"}
        for key in p.options:
            if key not in updatable:
                raise IggyError(4041, key)
        topic.name = p.name
        topic.options.update(p.options)
        return b""

    def purge_topic(self, s: SessionInfo, p: st.PurgeTopic) -> bytes:
        _purge(self.state.topic(p.stream, p.topic)[1])
        return b""

    def create_partitions(self, s: SessionInfo, p: st.CreatePartitions) -> bytes:
        self.state.add_partitions(self.state.topic(p.stream, p.topic)[1], p.partitions_count)
        return b""

    def delete_partitions(self, s: SessionInfo, p: st.DeletePartitions) -> bytes:
        self.state.remove_partitions(self.state.topic(p.stream, p.topic)[1], p.partitions_count)
        return b""

    def delete_segments(self, s: SessionInfo, p: st.DeleteSegments) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        self.state.partition(topic, p.partition_id)  # the open segment is never deleted
        return b""

    # --- consumer groups -----------------------------------------------------------------

    def _group_details(self, topic: Topic, g: Group) -> gr.ConsumerGroupDetails:
        members = tuple(
            gr.GroupMember(id=m, partitions=tuple(g.assignment.get(m, []))) for m in g.members
        )
        record = gr.ConsumerGroupRecord(
            id=g.id, partitions_count=len(topic.partitions), members_count=len(members),
            name=g.name,
        )  # fmt: skip
        return gr.ConsumerGroupDetails(group=record, members=members)

    def get_group(self, s: SessionInfo, p: gr.GetConsumerGroup) -> bytes:
        try:
            _, topic = self.state.topic(p.stream, p.topic)
            group = self.state.group(topic, p.group)
        except IggyError:
            return b""
        return self._group_details(topic, group).encode()

    def get_groups(self, s: SessionInfo, p: gr.GetConsumerGroups) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        records = tuple(self._group_details(topic, g).group for g in topic.groups)
        return gr.ConsumerGroupsList(groups=records).encode()

    def create_group(self, s: SessionInfo, p: gr.CreateConsumerGroup) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        if any(g.name == p.name for g in topic.groups):
            raise IggyError(5004, p.name)
        group = Group(max((g.id for g in topic.groups), default=-1) + 1, p.name)
        topic.groups.append(group)
        return self._group_details(topic, group).encode()

    def delete_group(self, s: SessionInfo, p: gr.DeleteConsumerGroup) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        topic.groups.remove(self.state.group(topic, p.group))
        return b""

    def join_group(self, s: SessionInfo, p: gr.JoinConsumerGroup) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        group = self.state.group(topic, p.group)
        if s.number not in group.members:
            group.members.append(s.number)
            topic.rebalance(group)
        return b""

    def leave_group(self, s: SessionInfo, p: gr.LeaveConsumerGroup) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        group = self.state.group(topic, p.group)
        if s.number not in group.members:
            raise IggyError(5006, group.name)
        group.members.remove(s.number)
        topic.rebalance(group)
        return b""

    def sync_group(self, s: SessionInfo, p: gr.SyncConsumerGroup) -> bytes:
        _, topic = self.state.topic(p.stream, p.topic)
        group = self.state.group(topic, p.group)
        if s.number not in group.members:
            return b""
        partitions = tuple(group.assignment.get(s.number, []))
        return gr.GroupAssignment(generation=group.generation, partitions=partitions).encode()

    def drop_member(self, number: int) -> None:
        """A connection went away: its session leaves every group."""
        for stream in self.state.streams:
            for topic in stream.topics:
                for group in topic.groups:
                    if number in group.members:
                        group.members.remove(number)
                        topic.rebalance(group)


def _purge(topic: Topic) -> None:
    for partition in topic.partitions:
        partition.records.clear()
        partition.size_bytes = 0
