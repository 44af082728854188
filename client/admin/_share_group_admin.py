"""`ShareGroupAdmin`: share groups (KIP-932) as an operator sees them (Kafka's Admin
``listGroups(share)``, ``describeShareGroups``, ``listShareGroupOffsets``), over the brokers'
GroupService: each call goes to the group's coordinator as `GroupAdmin`'s do, errors are raised
as Kafka's typed errors."""

from __future__ import annotations

from collections.abc import Iterable
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
