"""`GroupAdmin`: consumer groups as an operator sees them (Kafka's Admin group calls), over the
brokers' GroupService: list every group of the cluster, describe one, read, reset and delete its
committed offsets, delete it. Each call goes to the group's coordinator (found with
FindCoordinator, found again after NOT_COORDINATOR or a load in progress) until
``request_timeout_ms`` runs out; errors are raised as Kafka's typed errors."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from kraftlog.client._channels import timed_out
from kraftlog.client._coordinators import GROUP_KEY, BrokerAdminClient, find_coordinator
from kraftlog.client._metadata import TopicPartition, partitions_by_topic
from kraftlog.client.consumer import decode_assignment, decode_subscription
from kraftlog.common import Done, Outcome, Retry
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["GroupAdmin", "GroupListing", "GroupDescription", "MemberDescription"]

_RETRY = {
    kerr.NotCoordinatorError.error_code,
    kerr.CoordinatorNotAvailableError.error_code,
    kerr.CoordinatorLoadInProgressError.error_code,
}


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    coordinator: int
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    topics: tuple[str, ...] = ()  # what the member subscribed to (consumer groups)
    member_epoch: int = -1  # KIP-848 groups: the member's epoch and where it is heading
    target_assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    assignment_strategy: str
    coordinator: int
    members: tuple[MemberDescription, ...]
    group_type: str = "classic"
    group_epoch: int = -1  # KIP-848 groups: the group's epoch and its target assignment's
    assignment_epoch: int = -1


class GroupAdmin(BrokerAdminClient):
    """Group administration through the brokers (``bootstrap_servers`` are broker addresses)."""

    # ------------------------------------------------------------------ plumbing

    def _coordinator(self, group_id: str, deadline: float) -> tuple[int, str]:
        return find_coordinator(self._pool, self._metadata, group_id, GROUP_KEY, deadline)

    def _call(self, group_id: str, method: str, request: Any, errors_of: Any = None) -> tuple[int, Any]:
        """Call the group's coordinator; returns ``(coordinator id, response)``."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0

        def attempt(_timeout_s: float) -> Outcome:
            node, address = self._coordinator(group_id, deadline)
            try:
                response = getattr(self._pool.group_stub(address), method)(request, timeout=10.0)
            except grpc.RpcError as err:
                return Retry(str(err.code()), error=timed_out(f"{method}: {err.code()}", err))
            codes = errors_of(response) if errors_of is not None else [response.error.code]
            if any(c in _RETRY for c in codes):
                return Retry(f"{method}: {codes}", value=(node, response))  # returned at the deadline
            return Done((node, response))

        answer: tuple[int, Any] = self._retry(attempt, deadline, method)
        return answer

    # ------------------------------------------------------------------ groups

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the cluster (each broker lists the groups it coordinates), of the given
        states and types ("classic", "consumer") when any are given."""
        self._metadata.update(timeout_ms=self.request_timeout_ms)
        out: dict[str, GroupListing] = {}
        for broker in self._metadata.brokers():
            try:
                r = self._pool.group_stub(broker.address).ListGroups(
                    group_pb2.ListGroupsRequest(states_filter=list(states), types_filter=list(types)), timeout=10.0
                )
            except grpc.RpcError as err:
                raise kerr.CoordinatorNotAvailableError(f"broker {broker.node_id} did not list its groups") from err
            for g in r.groups:
                kind = g.group_type or "classic"
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state, broker.node_id, kind)
        return [out[k] for k in sorted(out)]

    def describe_group(self, group_id: str) -> GroupDescription:
        """One group: a KIP-848 group through ConsumerGroupDescribe, else (GROUP_ID_NOT_FOUND
        there) a classic group through DescribeGroups, as Kafka's admin client does."""
        node, c = self._call(
            group_id,
            "ConsumerGroupDescribe",
            group_pb2.ConsumerGroupDescribeRequest(group_ids=[group_id]),
            lambda resp: [g.error.code for g in resp.groups],
        )
        modern = c.groups[0]
        if modern.error.code == 0:
            return self._consumer_description(modern, node)
        if modern.error.code != kerr.GroupIdNotFoundError.error_code:
            kerr.raise_for_code(modern.error.code, modern.error.message or modern.error.name)
        node, r = self._call(
            group_id,
            "DescribeGroups",
            group_pb2.DescribeGroupsRequest(groups=[group_id]),
            lambda resp: [g.error.code for g in resp.groups],
        )
        g = r.groups[0]
        if g.error.code:
            kerr.raise_for_code(g.error.code, g.error.message or g.error.name)
        members = []
        for m in g.members:
            assigned: tuple[TopicPartition, ...] = ()
            topics: tuple[str, ...] = ()
            if g.protocol_type == "consumer":
                try:
                    assigned = tuple(decode_assignment(m.member_assignment)[0])
                    topics = tuple(decode_subscription(m.member_metadata).topics) if m.member_metadata else ()
                except kerr.KafkaError:
                    pass
            members.append(
                MemberDescription(
                    m.member_id,
                    m.group_instance_id if m.HasField("group_instance_id") else None,
                    m.client_id,
                    m.client_host,
                    assigned,
                    topics,
                )
            )
        return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, node, tuple(members))

    @staticmethod
    def _consumer_description(g: Any, node: int) -> GroupDescription:
        def partitions(assignment: Any) -> tuple[TopicPartition, ...]:
            return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topics for p in t.partitions))

        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id if m.HasField("instance_id") else None,
                m.client_id,
                m.client_host,
                partitions(m.assignment),
                tuple(m.subscribed_topic_names),
                m.member_epoch,
                partitions(m.target_assignment),
            )
            for m in g.members
        )
        return GroupDescription(
            g.group_id,
            g.group_state,
            "consumer",
            g.assignor_name,
            node,
            members,
            "consumer",
            g.group_epoch,
            g.assignment_epoch,
        )

    def delete_group(self, group_id: str) -> None:
        _node, r = self._call(
            group_id,
            "DeleteGroups",
            group_pb2.DeleteGroupsRequest(groups=[group_id]),
            lambda resp: [x.error.code for x in resp.results],
        )
        for result in r.results:
            if result.error.code:
                kerr.raise_for_code(result.error.code, result.error.message or result.error.name)

    # ------------------------------------------------------------------ offsets

    def list_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``partitions``, else of every partition it committed)."""
        if partitions is None:
            request = group_pb2.OffsetFetchRequest(group_id=group_id, all_topics=True)
        else:
            request = group_pb2.OffsetFetchRequest(
                group_id=group_id,
                topics=[
                    group_pb2.OffsetFetchRequest.Topic(name=t, partition_indexes=ps)
                    for t, ps in partitions_by_topic(partitions).items()
                ],
            )
        _node, r = self._call(group_id, "OffsetFetch", request)
        if r.error.code:
            kerr.raise_for_code(r.error.code, r.error.message or r.error.name)
        return {TopicPartition(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}

    def alter_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Set committed offsets, as an admin does: only while the group has no active members."""
        by_topic: dict[str, list[Any]] = {}
        for (t, p), offset in offsets.items():
            by_topic.setdefault(t, []).append(
                group_pb2.OffsetCommitRequest.Partition(partition_index=p, committed_offset=offset)
            )
        request = group_pb2.OffsetCommitRequest(
            group_id=group_id,
            generation_id=-1,
            topics=[group_pb2.OffsetCommitRequest.Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        _node, r = self._call(group_id, "OffsetCommit", request, _partition_codes)
        for t in r.topics:
            for p in t.partitions:
                if p.error.code == kerr.UnknownMemberIdError.error_code:
                    raise kerr.UnknownMemberIdError(
                        f"group {group_id!r} has active members: offsets can only be reset while it is empty"
                    )
                if p.error.code:
                    kerr.raise_for_code(p.error.code, p.error.message or p.error.name)

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        request = group_pb2.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                group_pb2.OffsetDeleteRequest.Topic(name=t, partition_indexes=ps)
                for t, ps in partitions_by_topic(partitions).items()
            ],
        )
        _node, r = self._call(group_id, "OffsetDelete", request)
        if r.error.code:
            kerr.raise_for_code(r.error.code, r.error.message or r.error.name)
        for t in r.topics:  # e.g. GROUP_SUBSCRIBED_TO_TOPIC for a topic a member still reads
            for p in t.partitions:
                if p.error.code:
                    kerr.raise_for_code(
                        p.error.code, f"{t.name}-{p.partition_index}: {p.error.message or p.error.name}"
                    )


def _partition_codes(response: Any) -> list[int]:
    return [p.error.code for t in response.topics for p in t.partitions]
