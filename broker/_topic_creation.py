"""`TopicCreator`: the topics a broker asks the active controller for on its own — the internal
topics of its coordinators (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``) at their first use, and topics a client's Metadata names when
``auto.create.topics.enable`` is on. Both go through the controller channel's CreateTopics; a
failure is logged and left to the caller's next attempt (the client sees the topic missing or
without leaders until then, as with Kafka).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kraftlog.broker._controller_channel import ControllerChannel
from kraftlog.common import errors as kerr
from kraftlog.common.security import current_request
from kraftlog.proto import admin_pb2

__all__ = ["TopicCreator"]


class TopicCreator:
    """Creates topics through the active controller; ``auto_created`` names the topics this broker
    auto-created (Metadata answers them as Kafka does while their partitions get leaders)."""

    def __init__(self, channel: ControllerChannel, log: Any) -> None:
        self._channel = channel
        self._log = log
        self.auto_created: set[str] = set()

    async def create_internal(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """A coordinator's internal topic ``name`` at its first FindCoordinator (or first use)."""
        req = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=configs,
                )
            ],
            timeout_ms=5000,
        )
        try:
            resp = await self._channel.call("admin", "CreateTopics", req, timeout_s=5.0, attempt_timeout_s=5.0)
        except kerr.KafkaError as err:
            self._log.info("internal_topic_create_failed", topic=name, error=str(err))
            return
        for t in resp.topics:
            if t.error.code not in (0, kerr.TopicAlreadyExistsError.error_code):
                self._log.warning(
                    "internal_topic_create_failed", topic=name, error=t.error.name, message=t.error.message
                )

    async def create_dead_letter_topic(self, name: str) -> None:
        """A share group's dead-letter topic at its first DLQ write (KIP-1191): broker defaults,
        with ``errors.deadletterqueue.group.enable=true`` so that it may serve as one, and CreateTime
        timestamps (a DLQ record's time is the time it was written), as Kafka creates it."""
        req = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs={"errors.deadletterqueue.group.enable": "true", "message.timestamp.type": "CreateTime"},
                )
            ],
            timeout_ms=5000,
        )
        try:
            resp = await self._channel.call("admin", "CreateTopics", req, timeout_s=5.0, attempt_timeout_s=5.0)
        except kerr.KafkaError as err:
            self._log.info("dlq_topic_create_failed", topic=name, error=str(err))
            return
        for t in resp.topics:
            if t.error.code not in (0, kerr.TopicAlreadyExistsError.error_code):
                self._log.warning("dlq_topic_create_failed", topic=name, error=t.error.name)

    async def auto_create(self, names: list[str]) -> None:
        """``auto.create.topics.enable``: create with the broker defaults, as Kafka does; the client
        sees LEADER_NOT_AVAILABLE until the topic's partitions have leaders."""
        req = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreateTopicsRequest.CreatableTopic(name=n, num_partitions=-1, replication_factor=-1)
                for n in names
            ],
            timeout_ms=5000,
        )
        try:
            resp = await self._channel.call(
                "admin",
                "CreateTopics",
                req,
                timeout_s=5.0,
                attempt_timeout_s=5.0,
                on_behalf_of=dataclasses.replace(current_request(), strict_quota=False),  # Kafka's permissive quota
            )
        except kerr.KafkaError as err:
            self._log.info("auto_create_failed", topics=names, error=str(err))
            return
        for t in resp.topics:
            if t.error.code in (0, kerr.TopicAlreadyExistsError.error_code):
                self.auto_created.add(t.name)
