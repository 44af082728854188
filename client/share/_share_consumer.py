"""`ShareConsumer`: a member of a share group (KIP-932), as Kafka's ``KafkaShareConsumer``.

A share group lets more consumers than partitions share a topic: each `poll` acquires records
(locked to this member for ``group.share.record.lock.duration.ms`` on the brokers) and every record
is acknowledged one by one: ACCEPT (done), RELEASE (deliver again, to anyone), REJECT (archive),
RENEW (keep the lock longer, KIP-1222). A record not acknowledged before its lock ends, or whose
consumer dies, is delivered again with a higher ``delivery_count``; at the group's delivery limit
it is archived instead.

- ``share_acknowledgement_mode="implicit"`` (default): the records of a poll are accepted by the
  next `poll`, `commit_sync`, `commit_async` or `close`; `acknowledge` is refused.
  ``"explicit"``: `acknowledge(record, type)` each record; a `poll` with records of the last one
  left unacknowledged raises `IllegalStateError` (rules in `client.share._acknowledgements`).
- acknowledgements travel with the next ShareFetch to the record's broker (`poll`), or at once in
  ShareAcknowledge (`commit_sync` waits for the answers and returns them per partition,
  `commit_async` does not; both report to ``acknowledgement_commit_callback``, which runs on the
  poll thread, as Kafka's does);
- the member heartbeats its group (ShareGroupHeartbeat) from a thread of its own; the coordinator
  assigns partitions (many members may share one) and the consumer fetches from their leaders;
- `close` sends what is owed and closes each share session (the brokers release whatever the
  member still holds), then leaves the group.

A consumer is meant for one thread, as Java's. Keys and defaults: `SHARE_CONSUMER_CONFIG`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._config import SHARE_CONSUMER_CONFIG as _C
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client._security import client_security
from kraftlog.client.share._acknowledgements import (
    EXPLICIT,
    AcknowledgeType,
    IllegalStateError,
    InFlightRecords,
    parse_mode,
)
from kraftlog.client.share._share_fetcher import AckResults, FetchSettings, ShareConsumerRecord, ShareFetcher
from kraftlog.client.share._share_membership import ShareMembership
from kraftlog.common import errors as kerr

__all__ = ["ShareConsumer", "share_consumer_config_from_properties"]

_log = structlog.get_logger(__name__)

#: Kafka's ``AcknowledgementCommitCallback.onComplete``: partition -> offsets, and their error (None: applied)
CommitCallback = Callable[[dict[TopicPartition, set[int]], kerr.KafkaError | None], None]


def share_consumer_config_from_properties(props: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Kafka share-consumer properties -> `ShareConsumer` keywords, plus the names not known."""
    return _C.from_properties(props)


class ShareConsumer:
    """A share group's consumer (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        group_id: str,
        share_acknowledgement_mode: str = _C.default("share.acknowledgement.mode"),
        share_acquire_mode: str = _C.default("share.acquire.mode"),
        fetch_min_bytes: int = _C.default("fetch.min.bytes"),
        fetch_max_wait_ms: int = _C.default("fetch.max.wait.ms"),
        fetch_max_bytes: int = _C.default("fetch.max.bytes"),
        max_poll_records: int = _C.default("max.poll.records"),
        check_crcs: bool = _C.default("check.crcs"),
        request_timeout_ms: int = _C.default("request.timeout.ms"),
        retry_backoff_ms: int = _C.default("retry.backoff.ms"),
        retry_backoff_max_ms: int = _C.default("retry.backoff.max.ms"),
        metadata_max_age_ms: int = _C.default("metadata.max.age.ms"),
        default_api_timeout_ms: int = _C.default("default.api.timeout.ms"),
        client_rack: str = _C.default("client.rack"),
        client_id: str = _C.default("client.id"),
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        acknowledgement_commit_callback: CommitCallback | None = None,
        security_protocol: str = "PLAINTEXT",
        **ssl: Any,
    ) -> None:
        if not group_id:
            raise ValueError("group.id is required for a share consumer")
        acquire = share_acquire_mode.strip().lower()
        if acquire not in ("batch_optimized", "record_limit"):
            raise ValueError(f"share.acquire.mode must be batch_optimized or record_limit, not {share_acquire_mode!r}")
        self.group_id = group_id
        self.acknowledgement_mode = parse_mode(share_acknowledgement_mode)
        self.default_api_timeout_ms = default_api_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._callback = acknowledgement_commit_callback
        self._pool = ChannelPool(
            max_message_bytes=max(104_857_600, 2 * fetch_max_bytes), security=client_security(security_protocol, **ssl)
        )
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            self._pool,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
            request_timeout_ms=request_timeout_ms,
            allow_auto_topic_creation=False,
        )
        self._membership = ShareMembership(
            group_id,
            self._pool,
            self._metadata,
            client_id=client_id,
            client_rack=client_rack,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._fetcher = ShareFetcher(
            group_id,
            self._membership.member_id,
            self._pool,
            self._metadata,
            FetchSettings(
                max_wait_ms=fetch_max_wait_ms,
                min_bytes=fetch_min_bytes,
                max_bytes=fetch_max_bytes,
                max_records=max(1, max_poll_records),
                record_limit=acquire == "record_limit",
                request_timeout_ms=request_timeout_ms,
                check_crcs=check_crcs,
            ),
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
        )
        self._in_flight = InFlightRecords(explicit=self.acknowledgement_mode == EXPLICIT)
        self._subscription: tuple[str, ...] = ()
        self._pending_async: dict[TopicPartition, set[int]] = {}  # acks of commit_async, not yet answered
        self._closed = False

    # ================================================================ membership

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long a record stays locked to the member that acquired it, as the brokers last said
        (Kafka's ``acquisitionLockTimeoutMs``); None before the first answer."""
        return self._fetcher.lock_timeout_ms

    def subscribe(self, topics: Sequence[str]) -> None:
        """Join the group for ``topics`` (replacing the last subscription; none: `unsubscribe`)."""
        self._check_open()
        self._subscription = tuple(sorted(set(topics)))
        if self._subscription:
            self._metadata.add_topics(self._subscription)
        self._membership.subscribe(self._subscription)

    def unsubscribe(self) -> None:
        self.subscribe(())

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the coordinator gave this member (others may share them)."""
        return set(self._membership.assignment)

    # ======================================================================= poll

    def poll(self, timeout_ms: int = 0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout_ms`` for some; what the last
        poll returned is acknowledged first (see the module docstring)."""
        self._check_open()
        self._membership.check_fatal()
        if not self._subscription:
            raise IllegalStateError("Consumer is not subscribed to any topics")
        renew_only = self._in_flight.before_poll()
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        while True:
            self._metadata.maybe_update()
            results: AckResults = {}
            acks = self._in_flight.take()
            wanted = {} if renew_only else self._fetcher.leaders(self._membership.assignment)
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            wait_ms = min(self._fetcher.settings.max_wait_ms, left_ms)
            records: list[ShareConsumerRecord] = []
            if wanted or acks:
                try:
                    got = self._fetcher.fetch(wanted, acks, wait_ms, results, renew_only=renew_only)
                except BaseException:
                    self._in_flight.restore(acks)
                    raise
                self._in_flight.restore(got.unsent)
                for (node_id, tp), offsets in got.gaps.items():
                    self._in_flight.gaps(node_id, tp, offsets)
                for (node_id, tp), offsets in got.delivered.items():
                    self._in_flight.delivered(node_id, tp, offsets)
                records = got.records
            self._report(acks, results)
            self._membership.check_fatal()
            if records or renew_only or time.monotonic() >= deadline:
                return records
            if not wanted:
                # nothing assigned yet (or no leader known): wait for the heartbeat or metadata
                time.sleep(min(self.retry_backoff_ms / 1000.0, max(0.0, deadline - time.monotonic())))

    # ============================================================ acknowledging

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:  # noqa: A002 - Kafka's name
        """Acknowledge one record of the last poll (explicit mode): ACCEPT, RELEASE, REJECT or
        RENEW; sent with the next poll or commit."""
        self._check_open()
        self._in_flight.acknowledge(TopicPartition(record.topic, record.partition), record.offset, type)

    def commit_sync(self, timeout_ms: int | None = None) -> dict[TopicPartition, kerr.KafkaError | None]:
        """Send the acknowledgements owed now (implicit mode: the last poll's records are accepted)
        and wait for the brokers; the result per partition is None when they were applied, else
        the error (INVALID_RECORD_STATE: the lock had ended and the record moved on)."""
        self._check_open()
        del timeout_ms  # each request is bounded by request.timeout.ms
        self._in_flight.accept_unacknowledged()
        acks = self._in_flight.take()
        results: AckResults = {}
        self._fetcher.settle_all(results)
        self._in_flight.restore(self._fetcher.acknowledge(acks, results, wait=True))
        self._report(acks, results)
        return {tp: results.get(tp) for (_node, tp) in acks}

    def commit_async(self) -> None:
        """Send the acknowledgements owed now without waiting: their outcome goes to
        ``acknowledgement_commit_callback`` on a later poll or commit."""
        self._check_open()
        self._in_flight.accept_unacknowledged()
        acks = self._in_flight.take()
        results: AckResults = {}
        self._in_flight.restore(self._fetcher.acknowledge(acks, results, wait=False))
        for (_node, tp), offsets in acks.items():
            self._pending_async.setdefault(tp, set()).update(offsets)
        self._report({}, results)

    def _report(
        self, acks: Mapping[tuple[int, TopicPartition], Mapping[int, AcknowledgeType]], results: AckResults
    ) -> None:
        """Tell the callback about every partition whose acks have an answer now."""
        if self._callback is None or not results:
            return
        offsets: dict[TopicPartition, set[int]] = {}
        for (_node, tp), acked in acks.items():
            offsets.setdefault(tp, set()).update(acked)
        for tp, error in results.items():
            done = offsets.get(tp, set()) | self._pending_async.pop(tp, set())
            if done:
                self._callback({tp: done}, error)

    # ==================================================================== closing

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def close(self, timeout_ms: int | None = None) -> None:
        """Acknowledge what is owed (implicit mode: accept the last poll's records), close each
        share session (the brokers release what this member still holds), leave the group."""
        if self._closed:
            return
        del timeout_ms
        self._closed = True
        try:
            self._in_flight.accept_unacknowledged()
            acks = self._in_flight.take()
            results: AckResults = {}
            self._fetcher.settle_all(results)
            self._fetcher.acknowledge(acks, results, wait=True, final=True)
            self._report(acks, results)
        except Exception as err:  # noqa: BLE001 - closing goes on: the locks end by themselves
            _log.info("share_consumer_close_acknowledge_failed", group=self.group_id, error=repr(err))
        finally:
            self._membership.close()
            self._metadata.close()
            self._pool.close()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
