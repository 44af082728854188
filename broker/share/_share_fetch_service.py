"""ShareFetch (78) and ShareAcknowledge (79) on a partition leader (KIP-932), independent of the
listener: the share session of the request (`ShareSessionCache`), Kafka's authorization (READ on
the group, else GROUP_AUTHORIZATION_FAILED for the whole request; READ on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions), the acknowledgements first (piggybacked on a
ShareFetch, or a ShareAcknowledge's own), then the fetch from every partition of the session.

Ordering rules (Kafka's): acknowledgements are applied and persisted before records are acquired
for the same request; a request that closes its session (epoch -1) acquires nothing and releases
what the member still holds in the session's partitions once its acknowledgements are applied;
acknowledgements in a request that opens a session (epoch 0) are INVALID_REQUEST.

While ``share.version`` is 0 every request is UNSUPPORTED_VERSION before anything else (Kafka's
``isShareGroupProtocolEnabled`` gate), read from the image per request: no restart to switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from kraftlog.broker.share._share_partition_manager import PartitionFetch, SharePartitionManager
from kraftlog.broker.share._share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessionCache
from kraftlog.broker.share._share_types import AcknowledgementBatch, AcquireMode
from kraftlog.common import errors as kerr
from kraftlog.common.security import AclOperation, ResourceType, current_request, spawn
from kraftlog.metadata_log import SHARE_GROUPS_DISABLED, MetadataImage, share_groups_enabled

__all__ = ["ShareFetchCall", "ShareFetchAnswer", "PartitionAnswer", "ShareFetchService", "TopicAcks"]

Error = type[kerr.KafkaError] | None

_log = structlog.get_logger(__name__)

#: topic id -> [(partition, acknowledgement batches)]
TopicAcks = Sequence[tuple[str, Sequence[tuple[int, Sequence[AcknowledgementBatch]]]]]


@dataclass(frozen=True)
class ShareFetchCall:
    """A ShareFetch (``fetch`` True) or a ShareAcknowledge, as the listener decoded it."""

    group_id: str
    member_id: str
    epoch: int
    topics: TopicAcks
    forgotten: Sequence[tuple[str, Sequence[int]]] = ()
    fetch: bool = True
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED
    renew_only: bool = False


@dataclass
class PartitionAnswer:
    error: Error = None
    message: str = ""
    ack_error: Error = None
    ack_message: str = ""
    records: bytes = b""
    acquired: tuple[Any, ...] = ()
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass
class ShareFetchAnswer:
    error: Error = None
    message: str = ""
    partitions: dict[tuple[str, int], PartitionAnswer] = field(default_factory=dict)


class ShareFetchService:
    """ShareFetch and ShareAcknowledge over the broker's `SharePartitionManager` (see the module docstring)."""

    def __init__(
        self, manager: SharePartitionManager, sessions: ShareSessionCache, image: Callable[[], MetadataImage]
    ) -> None:
        self.manager = manager
        self.sessions = sessions
        self.image = image
        self._releases: set[asyncio.Task[None]] = set()

    def on_share_version(self, enabled: bool) -> None:
        """``share.version`` changed in the metadata image: turned off, every share session and
        every share partition held here is dropped, as Kafka's ``SharePartitionManager.
        onShareVersionToggle`` does (requests are refused from then on by `serve`'s gate, so
        nothing would release them); turned on, nothing to do (the next fetch loads the state)."""
        if enabled:
            return
        sessions = self.sessions.clear()
        _log.info("share_groups_disabled", sessions_dropped=sessions)
        task = spawn(self.manager.forget_all(), name="share-version-off")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    def forgetter(self, group_id: str, member_id: str) -> Callable[[], None]:
        """What forgets the member's current share session when its connection closes (and only
        that one: a session the member opened again since, on another connection, stays), and
        gives back the records the member holds in its partitions, as Kafka's ShareSessionCache
        does on a disconnect (``onMemberLeave``)."""
        session = self.sessions.get(group_id, member_id)

        def forget() -> None:
            if session is not None and self.sessions.get(group_id, member_id) is session:
                self.sessions.close_member(group_id, member_id)
                parts = list(session.partitions.values())
                if parts:
                    task = spawn(self.manager.release(group_id, member_id, parts), name="share-session-release")
                    self._releases.add(task)
                    task.add_done_callback(self._releases.discard)

        return forget

    async def serve(self, call: ShareFetchCall) -> ShareFetchAnswer:
        ctx = current_request()
        if not share_groups_enabled(self.image().features.levels):
            # Kafka's isShareGroupProtocolEnabled gate, before the group's authorization
            ctx.refused_early(SHARE_GROUPS_DISABLED)
            return ShareFetchAnswer(kerr.UnsupportedVersionError, SHARE_GROUPS_DISABLED)
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, call.group_id):
            return ShareFetchAnswer(kerr.GroupAuthorizationFailedError, "not authorized for the group")
        if not call.group_id or not call.member_id:
            return ShareFetchAnswer(kerr.InvalidRequestError, "group id and member id are required")
        has_acks = any(batches for _t, parts in call.topics for _p, batches in parts)
        if call.epoch == INITIAL_EPOCH and has_acks:
            return ShareFetchAnswer(kerr.InvalidRequestError, "Acknowledge data present on initial epoch")
        if not call.fetch and call.epoch == INITIAL_EPOCH:
            return ShareFetchAnswer(kerr.InvalidShareSessionEpochError, "ShareAcknowledge cannot open a session")
        try:
            session = self.sessions.begin(call.group_id, call.member_id, call.epoch)
        except kerr.KafkaError as err:
            return ShareFetchAnswer(type(err), str(err))
        assert session is not None
        image = self.image()
        names: dict[str, str | None] = {}
        for topic_id, _parts in call.topics:
            t = image.topics.get_by_id(topic_id)
            names[topic_id] = None if t is None else t.name
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, sorted({n for n in names.values() if n}))
        answer = ShareFetchAnswer()
        added = []
        for topic_id, parts in call.topics:
            name = names[topic_id]
            for partition, batches in parts:
                pa = answer.partitions.setdefault((topic_id, partition), PartitionAnswer())
                if name is None:
                    pa.error = pa.ack_error = kerr.UnknownTopicIdError
                    continue
                if name not in readable:
                    pa.error = pa.ack_error = kerr.TopicAuthorizationFailedError
                    continue
                added.append((topic_id, name, partition))
                if batches:
                    await self._acknowledge(call, topic_id, name, partition, batches, pa)
        if call.fetch and call.epoch != FINAL_EPOCH:
            session.update(added, [(t, p) for t, ps in call.forgotten for p in ps])
        if call.epoch == FINAL_EPOCH:
            await self.manager.release(call.group_id, call.member_id, list(session.partitions.values()))
            return answer
        self.sessions.used(session, call.epoch)
        if call.fetch and not call.renew_only:
            await self._fetch(call, session, answer)
        return answer

    async def _acknowledge(
        self,
        call: ShareFetchCall,
        topic_id: str,
        name: str,
        partition: int,
        batches: Sequence[AcknowledgementBatch],
        pa: PartitionAnswer,
    ) -> None:
        try:
            await self.manager.acknowledge(call.group_id, call.member_id, topic_id, name, partition, batches)
        except kerr.KafkaError as err:
            _log.info(
                "share_acknowledge_refused",
                group_id=call.group_id,
                member_id=call.member_id,
                topic=name,
                partition=partition,
                error=err.error_name,
                message=str(err),
            )
            pa.ack_error, pa.ack_message = type(err), str(err)
            if not call.fetch:
                pa.error, pa.message = pa.ack_error, pa.ack_message

    async def _fetch(self, call: ShareFetchCall, session: ShareSession, answer: ShareFetchAnswer) -> None:
        parts = [p for p in session.partitions.values()]
        got: dict[tuple[str, int], PartitionFetch] = await self.manager.fetch(
            call.group_id,
            call.member_id,
            parts,
            max_wait_ms=call.max_wait_ms,
            min_bytes=call.min_bytes,
            max_bytes=call.max_bytes,
            max_records=call.max_records,
            mode=call.mode,
        )
        for key, f in got.items():
            pa = answer.partitions.setdefault(key, PartitionAnswer())
            pa.error, pa.message = f.error, f.message
            pa.records, pa.acquired = f.records, f.acquired
            pa.leader_id, pa.leader_epoch = f.leader_id, f.leader_epoch
