"""`ShareGroupAdmin`: share groups (KIP-932) as an operator sees them (Kafka's Admin
``listGroups(share)``, ``describeShareGroups``, ``listShareGroupOffsets``,
``alterShareGroupOffsets``, ``deleteShareGroupOffsets``, ``deleteShareGroups``), over the brokers'
GroupService: each call goes to the group's coordinator as `GroupAdmin`'s do, errors are raised
as Kafka's typed errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.admin._group_admin import GroupAdmin, GroupListing
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["ShareGroupAdmin", "ShareGroupDescription", "ShareMemberDescription"]


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str
    coordinator: int
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...]


class ShareGroupAdmin(GroupAdmin):
    """Share-group administration through the brokers (``bootstrap_servers`` are broker addresses)."""

    def list_share_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every share group of the cluster (ListGroups with the ``share`` type)."""
        return self.list_groups(states=states, types=["share"])

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        """One share group (ShareGroupDescribe); GROUP_ID_NOT_FOUND when there is none."""
        node, r = self._call(
            group_id,
            "ShareGroupDescribe",
            group_pb2.ShareGroupDescribeRequest(group_ids=[group_id]),
            lambda resp: [g.error.code for g in resp.groups],
        )
        g = r.groups[0]
        if g.error.code:
            kerr.raise_for_code(g.error.code, g.error.message or g.error.name)
        members = tuple(
            ShareMemberDescription(
                m.member_id,
                m.client_id,
                m.client_host,
                m.member_epoch,
                tuple(sorted(TopicPartition(t.topic_name, p) for t in m.assignment.topics for p in t.partitions)),
                tuple(m.subscribed_topic_names),
            )
            for m in g.members
        )
        return ShareGroupDescription(
            g.group_id, g.group_state, node, g.group_epoch, g.assignment_epoch, g.assignor_name, members
        )

    def share_group_offsets(
        self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]] | None = None
    ) -> dict[TopicPartition, int]:
        """Each share partition's start offset (-1: not initialized) of ``topics`` (name,
        partitions), or of every partition the group initialized (None): DescribeShareGroupOffsets.
        A partition's error is raised as Kafka's."""
        R = group_pb2.DescribeShareGroupOffsetsRequest
        group = R.Group(group_id=group_id, all_topics=topics is None)
        for name, partitions in topics or ():
            group.topics.add(topic_name=name, partitions=list(partitions))
        _node, r = self._call(
            group_id,
            "DescribeShareGroupOffsets",
            R(groups=[group]),
            lambda resp: [g.error.code for g in resp.groups],
        )
        g = r.groups[0]
        if g.error.code:
            kerr.raise_for_code(g.error.code, g.error.message or g.error.name)
        out: dict[TopicPartition, int] = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error.code:
                    kerr.raise_for_code(p.error.code, p.error.message or p.error.name)
                out[TopicPartition(t.topic_name, p.partition)] = p.start_offset
        return dict(sorted(out.items()))

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """New share-partition start offsets of an empty share group (AlterShareGroupOffsets):
        NON_EMPTY_GROUP while it has members; a partition's error is raised as Kafka's."""
        R = group_pb2.AlterShareGroupOffsetsRequest
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        request = R(
            group_id=group_id,
            topics=[
                R.Topic(topic_name=t, partitions=[R.Partition(partition=p, start_offset=o) for p, o in parts])
                for t, parts in by_topic.items()
            ],
        )
        _node, r = self._call(group_id, "AlterShareGroupOffsets", request, lambda resp: [resp.error.code])
        if r.error.code:
            kerr.raise_for_code(r.error.code, r.error.message or r.error.name)
        for t in r.topics:
            for p in t.partitions:
                if p.error.code:
                    kerr.raise_for_code(p.error.code, p.error.message or p.error.name)

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> None:
        """An empty share group forgets the topics' share partitions (DeleteShareGroupOffsets);
        a topic's error is raised as Kafka's."""
        request = group_pb2.DeleteShareGroupOffsetsRequest(group_id=group_id, topic_names=list(topics))
        _node, r = self._call(group_id, "DeleteShareGroupOffsets", request, lambda resp: [resp.error.code])
        if r.error.code:
            kerr.raise_for_code(r.error.code, r.error.message or r.error.name)
        for t in r.topics:
            if t.error.code:
                kerr.raise_for_code(t.error.code, t.error.message or t.error.name)

    def delete_share_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group: its records and its share partitions' state."""
        self.delete_group(group_id)
