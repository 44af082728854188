"""Eligible leader replicas (KIP-966) and feature versions in the controller's pure handlers.

Uses the `Harness` of test_controller (an image, an injected clock, records committed by replay).
Expectations are Kafka 4.0's PartitionChangeBuilder / FeatureControlManager rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import kraftlog.quorum.controller as ctl
from kraftlog.metadata_log import NO_LEADER, FeatureLevelRecord, PartitionChangeRecord, decode_record, encode_record
from kraftlog.metadata_log.image import PartitionRegistration
from kraftlog.proto import admin_pb2
from kraftlog.quorum.controller._elr import decide
from tests.unit.quorum.test_controller import Harness

ELR = "eligible.leader.replicas.version"
MV = "metadata.version"


def update(h: Harness, levels: dict[str, int], *, kind: int = 1, validate_only: bool = False) -> tuple[list, object]:
    req = admin_pb2.UpdateFeaturesRequest(
        updates=[
            admin_pb2.UpdateFeaturesRequest.FeatureUpdate(feature=n, max_version_level=v, upgrade_type=kind)
            for n, v in levels.items()
        ],
        validate_only=validate_only,
    )
    return h.run(ctl.update_features, req)


def elr_cluster(min_isr: int = 2, *, elr_on: bool = True, unclean: bool = False) -> Harness:
    h = Harness({"min.insync.replicas": min_isr, "unclean.leader.election.enable": unclean})
    h.start_brokers([1, 2, 3])
    if elr_on:
        _, resp = update(h, {MV: 25, ELR: 1})
        assert resp.error.name == "NONE", resp.error
    h.create("t", assignments=[[1, 2, 3]])
    return h


def fence(h: Harness, *brokers: int) -> None:
    for b in brokers:
        _, resp = h.heartbeat(b, want_fence=True)
        assert resp.error.name == "NONE"


def restart(h: Harness, broker: int, incarnation: str, *, clean: bool = True) -> None:
    """A new incarnation registers (reporting the old epoch as its previous one after a clean stop,
    -1 after an unclean one) and heartbeats caught up (unfenced)."""
    from kraftlog.proto import controller_pb2

    previous = h.epochs[broker] if clean else -1
    req = controller_pb2.RegisterBrokerRequest(
        broker_id=broker, cluster_id=h.ctx().cluster_id, incarnation_id=incarnation, previous_broker_epoch=previous
    )
    _, resp = h.run(ctl.register_broker, req, h.heartbeats)
    assert resp.error.name == "NONE", resp.error
    h.epochs[broker] = resp.broker_epoch
    h.heartbeat(broker)
    assert not h.broker(broker).fenced


# ---------------------------------------------------------------- the pure decision


def reg(isr: Sequence[int], leader: int, elr: Sequence[int] = (), lke: Sequence[int] = ()) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=(1, 2, 3), isr=tuple(isr), leader=leader, elr=tuple(elr), last_known_elr=tuple(lke)
    )


def test_isr_at_min_isr_clears_elr_and_below_keeps_the_leavers() -> None:
    everyone = lambda r: True  # noqa: E731
    d = decide(
        reg([1, 2], 1, elr=[3]), target_isr=[1, 2, 3], min_isr=2, usable=everyone, unclean_allowed=False, reelect=False
    )
    assert (d.isr, d.elr, d.last_known_elr) == ((1, 2, 3), (), ())
    d = decide(reg([1, 2], 1), target_isr=[1], min_isr=2, usable=everyone, unclean_allowed=False, reelect=False)
    assert (d.leader, d.isr, d.elr) == (1, (1,), (2,))


def test_empty_isr_elects_the_first_usable_elr_member_cleanly() -> None:
    d = decide(
        reg([], NO_LEADER, elr=[1, 2]),
        target_isr=[],
        min_isr=2,
        usable=lambda r: r == 2,
        unclean_allowed=False,
        reelect=True,
    )
    assert (d.leader, d.isr, d.elr, d.unclean) == (2, (2,), (1,), False)


def test_no_usable_elr_member_leaves_the_partition_offline_unless_unclean() -> None:
    part = reg([], NO_LEADER, elr=[1, 2])
    only_3 = lambda r: r == 3  # noqa: E731
    d = decide(part, target_isr=[], min_isr=2, usable=only_3, unclean_allowed=False, reelect=True)
    assert (d.leader, d.elr) == (NO_LEADER, (1, 2))
    d = decide(part, target_isr=[], min_isr=2, usable=only_3, unclean_allowed=True, reelect=True)
    assert (d.leader, d.isr, d.elr, d.last_known_elr, d.unclean) == (3, (3,), (), (), True)


# ---------------------------------------------------------------- the controller with ELR on


def test_fencing_below_min_isr_moves_members_to_elr_and_empties_the_isr() -> None:
    h = elr_cluster()
    fence(h, 3)
    p = h.part("t")
    assert (p.isr, p.elr) == ((1, 2), ())  # still at min.insync.replicas: no ELR
    fence(h, 2)
    p = h.part("t")
    assert (p.leader, p.isr, p.elr) == (1, (1,), (2,))
    fence(h, 1)
    p = h.part("t")
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (), (1, 2))


def test_a_restarted_elr_member_leads_without_unclean_election() -> None:
    h = elr_cluster()
    fence(h, 3)
    fence(h, 2)
    fence(h, 1)
    restart(h, 2, "second-life")
    p = h.part("t")
    assert (p.leader, p.isr, p.elr) == (2, (2,), (1,))
    # broker 3 was never an ELR member (it left while the ISR was at min.insync.replicas)
    restart(h, 3, "third-life")
    assert h.part("t").leader == 2


def test_without_the_feature_the_last_isr_member_stays_and_no_elr_is_kept() -> None:
    h = elr_cluster(elr_on=False)
    fence(h, 3)
    fence(h, 2)
    fence(h, 1)
    p = h.part("t")
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (1,), ())
    restart(h, 2, "second-life")
    assert h.part("t").leader == NO_LEADER  # 2 is not in the ISR: only an unclean election could


def test_an_unclean_restart_leaves_the_elr_and_cannot_lead() -> None:
    h = elr_cluster()
    fence(h, 3)
    fence(h, 2)
    fence(h, 1)
    restart(h, 2, "after-a-crash", clean=False)  # may have lost what it acknowledged
    p = h.part("t")
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (), (1,))
    assert 2 in p.last_known_elr
    restart(h, 1, "clean-return")
    p = h.part("t")
    assert (p.leader, p.isr) == (1, (1,))


def test_isr_expansion_back_to_min_isr_clears_the_elr() -> None:
    h = elr_cluster()
    fence(h, 3)
    fence(h, 2)
    assert h.part("t").elr == (2,)
    restart(h, 2, "second-life")
    _, resp = h.alter_isr("t", 0, [1, 2])
    assert resp.topics[0].partitions[0].error.name == "NONE"
    p = h.part("t")
    assert (p.isr, p.elr, p.last_known_elr) == ((1, 2), (), ())


def test_an_unclean_election_clears_elr_and_last_known_elr() -> None:
    h = elr_cluster(unclean=True)
    fence(h, 3)
    fence(h, 2)
    fence(h, 1)
    assert h.part("t").elr == (1, 2)
    restart(h, 3, "third-life")  # not in the ELR: only an unclean election lets it lead
    p = h.part("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (3, (3,), (), ())


def test_turning_the_feature_off_clears_every_elr() -> None:
    h = elr_cluster()
    fence(h, 3)
    fence(h, 2)
    records, resp = update(h, {ELR: 0}, kind=2)
    assert resp.error.name == "NONE", resp.error
    assert any(isinstance(r, PartitionChangeRecord) and r.eligible_leader_replicas == () for r in records)
    assert (h.part("t").elr, h.part("t").last_known_elr) == ((), ())


def test_elr_fields_survive_encoding_and_snapshot_records() -> None:
    h = elr_cluster()
    fence(h, 3)
    fence(h, 2)
    fence(h, 1)
    p = h.part("t")
    rec = p.to_record(h.topic("t").topic_id, 0)
    assert decode_record(encode_record(rec)) == rec
    assert (rec.eligible_leader_replicas, rec.last_known_elr) == ((1, 2), ())
    plain = PartitionChangeRecord(partition_id=0, topic_id="x", isr=(1,))
    assert "eligible_leader_replicas" not in plain.to_wire()  # left off the wire when unchanged


# ---------------------------------------------------------------- feature versions


def test_update_features_writes_levels_and_is_all_or_nothing() -> None:
    h = Harness()
    h.start_brokers([1])
    records, resp = update(h, {MV: 25, ELR: 1})
    assert resp.error.name == "NONE"
    assert FeatureLevelRecord(MV, 25) in records and FeatureLevelRecord(ELR, 1) in records
    assert dict(h.image.features.levels) == {MV: 25, ELR: 1}
    records, resp = update(h, {"group.version": 1, "no.such.feature": 1})
    assert resp.error.name == "INVALID_UPDATE_VERSION" and records == []
    assert [r.error.name for r in resp.results] == ["INVALID_UPDATE_VERSION"] * 2
    assert h.image.features.level("group.version") == 0


@pytest.mark.parametrize(
    ("first", "levels", "kind", "needle"),
    [
        ({MV: 25}, {MV: 24}, 1, "without the upgrade type"),  # a lower level needs a downgrade type
        ({MV: 24}, {MV: 25}, 2, "newer version"),  # a downgrade cannot raise
        ({MV: 25}, {MV: 24}, 2, "might delete metadata"),  # metadata.version is never downgraded
        ({MV: 25}, {MV: 30}, 1, "supports 7-29"),  # beyond what this build supports
        ({MV: 25}, {"kraft.version": 1}, 1, "dynamic controller quorum"),
        ({MV: 22}, {ELR: 1}, 1, "requires metadata.version level 23"),
    ],
)
def test_update_features_refusals(first: dict[str, int], levels: dict[str, int], kind: int, needle: str) -> None:
    h = Harness()
    _, resp = update(h, first)
    assert resp.error.name == "NONE", resp.error
    records, resp = update(h, levels, kind=kind)
    assert (resp.error.name, records) == ("INVALID_UPDATE_VERSION", [])
    assert needle in resp.error.message


def test_a_level_some_registered_broker_does_not_support_is_refused() -> None:
    from kraftlog.proto import controller_pb2

    h = Harness()
    F = controller_pb2.RegisterBrokerRequest.Feature
    for broker_id, elr_max in ((1, 0), (2, 1)):  # broker 1 supports no ELR
        req = controller_pb2.RegisterBrokerRequest(
            broker_id=broker_id,
            cluster_id=h.ctx().cluster_id,
            incarnation_id=f"i{broker_id}",
            features=[
                F(name=MV, min_supported_version=7, max_supported_version=25),
                F(name=ELR, min_supported_version=0, max_supported_version=elr_max),
            ],
        )
        _, resp = h.run(ctl.register_broker, req, h.heartbeats)
        assert resp.error.name == "NONE"
    assert h.broker(1).supported_range(ELR) == (0, 0) and h.broker(2).supported_range(ELR) == (0, 1)
    _, resp = update(h, {MV: 25})
    assert resp.error.name == "NONE"
    _, resp = update(h, {ELR: 1})
    assert resp.error.name == "INVALID_UPDATE_VERSION"
    assert "broker 1 does not support" in resp.error.message


def test_validate_only_writes_nothing_and_a_broker_without_support_cannot_register() -> None:
    h = Harness()
    records, resp = update(h, {MV: 25}, validate_only=True)
    assert (resp.error.name, records) == ("NONE", [])
    update(h, {MV: 25, ELR: 1})
    from kraftlog.proto import controller_pb2

    F = controller_pb2.RegisterBrokerRequest.Feature
    req = controller_pb2.RegisterBrokerRequest(
        broker_id=5,
        cluster_id=h.ctx().cluster_id,
        incarnation_id="old",
        features=[F(name=MV, min_supported_version=7, max_supported_version=25)],
    )
    _, resp = h.run(ctl.register_broker, req, h.heartbeats)
    assert resp.error.name == "UNSUPPORTED_VERSION"
    assert ELR in resp.error.message


def test_a_reassignment_that_drops_an_elr_member_drops_it_from_the_elr() -> None:
    h = elr_cluster(min_isr=3)
    h.start_brokers([4])
    fence(h, 3)
    assert (h.part("t").isr, h.part("t").elr) == ((1, 2), (3,))
    _, resp = h.reassign("t", 0, [1, 4])
    assert resp.results[0].error.name == "NONE", resp.results[0].error
    # 4 joins while 2 leaves: still below min.insync.replicas, so 2 joins the ELR, and the
    # reassignment completes in the same change, dropping 2 and 3 from the replicas
    _, resp = h.alter_isr("t", 0, [1, 4])
    assert resp.topics[0].partitions[0].error.name == "NONE", resp
    p = h.part("t")
    assert p.replicas == (1, 4) and p.elr == () and p.last_known_elr == ()
