"""Eligible leader replicas (KIP-966): the partition changes of the controller when the feature
``eligible.leader.replicas.version`` is at level 1 or more (Kafka's PartitionChangeBuilder, ELR part).

Rules (Kafka 4.0's, with ``useLastKnownLeaderInBalancedRecovery`` off, its default):

- When the target ISR has at least ``min.insync.replicas`` members, the ELR and the last known ELR
  are empty: an acks=all write needs that many, so every ISR member holds it.
- Below it, the ELR becomes (current ELR | current ISR) - target ISR: a replica that leaves the
  ISR while it is short still holds every record acknowledged with acks=all (no acks=all write
  completes below min ISR), so it may lead cleanly. It stays in the ELR until it rejoins the ISR
  or an unclean election clears the ELR. The last known ELR keeps the others that were ever in
  ISR or ELR and are in neither now (shown to operators; never elected by this build).
- A broker that registers again after an unclean stop (its log dirs had no clean-shutdown marker
  naming its last broker epoch) leaves every ELR: it may have lost acknowledged records.
- With ELR on, the ISR may become empty (the last member is fenced): the partition is leaderless
  and its members wait in the ELR.
- Election order: the current leader if it is still valid, then the first replica in assignment
  order that is in the ISR and usable; when the ISR is empty, the first usable ELR member, which
  becomes the ISR alone and leaves the ELR; then, only with unclean election enabled, the first
  usable replica (unclean: ISR is that replica, ELR and last known ELR are cleared); else none.

Pure: the caller passes who is usable; nothing here reads a clock or the config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kraftlog.metadata_log import NO_LEADER
from kraftlog.metadata_log.image import PartitionRegistration


@dataclass(frozen=True, slots=True)
class ElrDecision:
    """The partition's state after a change: what the caller writes as a PartitionChangeRecord."""

    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    unclean: bool = False


def decide(
    part: PartitionRegistration,
    *,
    target_isr: Sequence[int],
    min_isr: int,
    usable: Callable[[int], bool],
    unclean_allowed: bool,
    reelect: bool,
    unclean_shutdown: frozenset[int] = frozenset(),
) -> ElrDecision:
    """The ELR-aware change of ``part`` to ``target_isr``; ``reelect`` asks for an election (the
    leader left, or the partition is leaderless), else the leader stays. ``unclean_shutdown`` are
    brokers that came back from an unclean stop: they may have lost records they had acknowledged,
    so they leave the ELR (Kafka's ``uncleanShutdownReplicas``; they stay in the last known ELR)."""
    isr = tuple(target_isr)
    isr_set = set(isr)
    if len(isr) >= min_isr:
        elr: tuple[int, ...] = ()
        last_known: tuple[int, ...] = ()
    else:
        candidates = set(part.elr) | set(part.isr)
        elr = tuple(r for r in part.replicas if r in candidates and r not in isr_set and r not in unclean_shutdown)
        known = candidates | set(part.last_known_elr)
        last_known = tuple(r for r in part.replicas if r in known and r not in isr_set and r not in elr)
    if not reelect:
        return ElrDecision(part.leader, isr, elr, last_known)

    def valid(r: int) -> bool:
        return (r in isr_set or (not isr and r in elr)) and usable(r)

    if part.leader != NO_LEADER and valid(part.leader):
        leader = part.leader
    else:
        leader = next((r for r in part.replicas if valid(r)), NO_LEADER)
    if leader != NO_LEADER:
        if leader in elr:  # a clean election from the ELR: it is the ISR now
            isr = (leader,)
            elr = tuple(r for r in elr if r != leader)
        return ElrDecision(leader, isr, elr, last_known)
    if unclean_allowed:
        chosen = next((r for r in part.replicas if usable(r)), NO_LEADER)
        if chosen != NO_LEADER:
            return ElrDecision(chosen, (chosen,), (), (), unclean=True)
    return ElrDecision(NO_LEADER, isr, elr, last_known)
