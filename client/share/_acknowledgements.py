"""What a share consumer owes the brokers for the records it was given (pure: no clock, no I/O).

Kafka's ``KafkaShareConsumer`` rules, kept here so they can be tested without a broker:

- every record a `poll` returned is *in flight* until it is acknowledged: ACCEPT, RELEASE (deliver
  again), REJECT (archive), or RENEW (KIP-1222: keep it, extend its lock; it stays in flight and
  needs one of the others later);
- implicit mode (``share.acknowledgement.mode=implicit``, the default): the next `poll`, `commit_sync`,
  `commit_async` or `close` accepts every record of the previous poll; `acknowledge` is refused;
- explicit mode: `acknowledge` names the type; a `poll` while a record of the previous one has no
  acknowledgement at all raises `IllegalStateError`; a record acknowledged twice (or one this
  consumer was not given by its last poll) is refused the same way;
- offsets the broker said this member acquired but which hold no record the consumer returns
  (control records, aborted transactions) are acknowledged as GAP, without the application;
- acknowledgements go out in offset order per partition, consecutive offsets of one type as one
  range (`ack_ranges`), to the broker that delivered them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from kraftlog.client._metadata import TopicPartition

__all__ = ["AcknowledgeType", "IllegalStateError", "InFlightRecords", "ack_ranges", "parse_mode"]

IMPLICIT = "implicit"
EXPLICIT = "explicit"


class IllegalStateError(RuntimeError):
    """A call the consumer's state forbids (Kafka's ``IllegalStateException``): `acknowledge` in
    implicit mode, a second acknowledgement of one record, a `poll` with records left
    unacknowledged in explicit mode, any call after `close`."""


class AcknowledgeType(IntEnum):
    """Kafka's ``AcknowledgeType`` with the ids ShareFetch and ShareAcknowledge carry."""

    GAP = 0  # an acquired offset without a record (never passed by the application)
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


def parse_mode(value: str) -> str:
    """``share.acknowledgement.mode``: implicit or explicit, any case; anything else is a `ValueError`
    naming the key."""
    mode = value.strip().lower()
    if mode not in (IMPLICIT, EXPLICIT):
        raise ValueError(f"share.acknowledgement.mode must be implicit or explicit, not {value!r}")
    return mode


def ack_ranges(acks: Mapping[int, AcknowledgeType]) -> list[tuple[int, int, AcknowledgeType]]:
    """``offset -> type`` as ``(first, last inclusive, type)`` ranges in offset order: consecutive
    offsets of one type share a range."""
    out: list[tuple[int, int, AcknowledgeType]] = []
    for offset in sorted(acks):
        kind = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] is kind:
            out[-1] = (out[-1][0], offset, kind)
        else:
            out.append((offset, offset, kind))
    return out


@dataclass
class _Held:
    """One in-flight record: the node it came from, and its latest acknowledgement (None: none yet)."""

    node_id: int
    ack: AcknowledgeType | None = None


@dataclass
class InFlightRecords:
    """The records of the consumer's polls it has not finished with, and the acknowledgements not
    yet sent (see the module docstring)."""

    explicit: bool = False
    _held: dict[tuple[TopicPartition, int], _Held] = field(default_factory=dict)
    #: acknowledgements to send: (node id, partition) -> offset -> type
    _pending: dict[tuple[int, TopicPartition], dict[int, AcknowledgeType]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._held)

    def delivered(self, node_id: int, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """``offsets`` of ``tp`` were handed to the application, from broker ``node_id``."""
        for offset in offsets:
            self._held[(tp, offset)] = _Held(node_id)

    def gaps(self, node_id: int, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired ``offsets`` of ``tp`` the application never sees: GAP, sent with the next acks."""
        pending = self._pending.setdefault((node_id, tp), {})
        for offset in offsets:
            pending[offset] = AcknowledgeType.GAP

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """The application's acknowledgement of one record (explicit mode)."""
        if not self.explicit:
            raise IllegalStateError("acknowledge may not be used in implicit acknowledgement mode")
        if kind is AcknowledgeType.GAP:
            raise ValueError("GAP is not an acknowledgement an application gives")
        held = self._held.get((tp, offset))
        if held is None or (held.ack is not None and held.ack is not AcknowledgeType.RENEW):
            raise IllegalStateError(f"the record {tp}@{offset} is not in flight: it cannot be acknowledged")
        held.ack = kind
        self._pending.setdefault((held.node_id, tp), {})[offset] = kind

    def before_poll(self) -> bool:
        """What a `poll` does first: implicit mode accepts what the last poll returned; explicit mode
        raises `IllegalStateError` if a record has no acknowledgement. True when only renewed
        records are held (KIP-1222: this poll renews, it acquires nothing new)."""
        if not self.explicit:
            self.accept_unacknowledged()
            return False
        missing = [k for k, h in self._held.items() if h.ack is None]
        if missing:
            tp, offset = missing[0]
            raise IllegalStateError(
                f"All records must be acknowledged in explicit acknowledgement mode ({len(missing)} are not, "
                f"{tp}@{offset} first)"
            )
        return any(h.ack is AcknowledgeType.RENEW for h in self._held.values())

    def accept_unacknowledged(self) -> None:
        """Implicit mode's acceptance of every record not yet acknowledged (before a commit or close)."""
        if self.explicit:
            return
        for (tp, offset), held in self._held.items():
            if held.ack is None:
                held.ack = AcknowledgeType.ACCEPT
                self._pending.setdefault((held.node_id, tp), {})[offset] = AcknowledgeType.ACCEPT

    def take(self, node_id: int | None = None) -> dict[tuple[int, TopicPartition], dict[int, AcknowledgeType]]:
        """The acknowledgements to send (those for ``node_id`` only, when given), no longer pending.
        Records acknowledged for good leave the in-flight set; renewed ones stay, waiting for their
        final type, and are sent again only when acknowledged again."""
        keys = [k for k in self._pending if node_id is None or k[0] == node_id]
        out = {k: self._pending.pop(k) for k in keys}
        for (_node, tp), acks in out.items():
            for offset, kind in acks.items():
                held = self._held.get((tp, offset))
                if held is None:
                    continue
                if kind is AcknowledgeType.RENEW:
                    held.ack = AcknowledgeType.RENEW  # still held, still owed a final type
                else:
                    del self._held[(tp, offset)]
        return out

    def has_pending(self) -> bool:
        return any(self._pending.values())

    def nodes(self) -> set[int]:
        """The brokers acknowledgements are pending for."""
        return {node for (node, _tp), acks in self._pending.items() if acks}

    def restore(self, taken: Mapping[tuple[int, TopicPartition], Mapping[int, AcknowledgeType]]) -> None:
        """Acknowledgements `take` gave out whose request failed on the way: pending again, to go
        with the next request (one the broker did apply is refused then as INVALID_RECORD_STATE,
        which changes nothing)."""
        for key, acks in taken.items():
            pending = self._pending.setdefault(key, {})
            for offset, kind in acks.items():
                pending.setdefault(offset, kind)
